"""Reading Java ``.properties`` files, so an existing connector configuration works as it is.

Follows ``java.util.Properties.load``: ``#``/``!`` comments, ``=``, ``:`` or
whitespace between key and value, backslash line continuations, and the
escapes ``\\t \\n \\r \\f \\uXXXX`` (any other escaped character stands for itself).
"""

from __future__ import annotations

from collections.abc import Iterable

from pgcdc_events.errors import ConfigurationError

__all__ = ["load_properties", "parse_properties"]

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(lines: Iterable[str]) -> Iterable[tuple[int, str]]:
    pending = ""
    start = 0
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if not pending:
            stripped = line.lstrip(" \t\f")
            if not stripped or stripped[0] in "#!":
                continue
            start = number
            line = stripped
        else:
            line = line.lstrip(" \t\f")
        backslashes = len(line) - len(line.rstrip("\\"))
        if backslashes % 2 == 1:
            pending += line[:-1]
            continue
        yield start, pending + line
        pending = ""
    if pending:
        yield start, pending


def _unescape(text: str, line: int) -> str:
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2:i + 6]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ConfigurationError(f"line {line}: malformed \\uXXXX escape {text[i:i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """Key up to the first unescaped ``=``, ``:`` or blank; one separator and blanks skipped."""
    n = len(line)
    i = 0
    while i < n and line[i] not in "=: \t\f":
        i += 2 if line[i] == "\\" else 1
    i = min(i, n)
    j = i
    while j < n and line[j] in " \t\f":
        j += 1
    if j < n and line[j] in "=:":
        j += 1
    while j < n and line[j] in " \t\f":
        j += 1
    return line[:i], line[j:]


def parse_properties(lines: Iterable[str]) -> dict[str, str]:
    """Parse ``.properties`` text lines into an ordered dict; later keys win."""
    result: dict[str, str] = {}
    for number, line in _logical_lines(lines):
        key, value = _split(line)
        result[_unescape(key, number)] = _unescape(value, number)
    return result


def load_properties(path: str) -> dict[str, str]:
    """Read a ``.properties`` file as UTF-8.

    ``java.util.Properties.load(InputStream)``, which Kafka Connect uses, reads
    ISO-8859-1 instead; ``\\uXXXX`` escapes mean the same in both, and a file that
    is ASCII apart from them reads the same everywhere.
    """
    with open(path, encoding="utf-8") as fh:
        return parse_properties(fh)
