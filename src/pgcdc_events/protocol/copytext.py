"""``COPY ... TO STDOUT`` text format: the one parser of it, and its rows as Insert messages.

The initial snapshot reads the tables with ``COPY (SELECT ...) TO STDOUT`` and keeps the
output as it came in the capture (COPY block lines, see :mod:`pgcdc_events.protocol.capture`);
an incremental snapshot reads its chunks the same way. This module is where that text is
read back: rows end with a newline, values are separated by tabs, a value that is exactly
``\\N`` is NULL, and a backslash escapes the next character. ``COPY TO`` writes only the
escapes ``\\b \\f \\n \\r \\t \\v \\\\`` (never octal or hex ones): any other backslash is
refused (:class:`CopyTextError`), as is a row with another number of values than the
table's columns, or text that ends inside a row.

:func:`copy_text_rows` gives the rows' values (bytes, ``None`` for NULL);
:func:`insert_messages` gives each row as the pgoutput Insert message a snapshot row is
(``I``, the relation id, ``N``, the column count, then per value ``n`` or ``t``, its length
and its bytes: what :func:`~pgcdc_events.protocol.encoder.encode_message` gives), built a
column at a time so that Python runs a few statements per column, not per value.
"""

from __future__ import annotations

import re
import threading
from itertools import repeat
from typing import Final

from pgcdc_events.errors import ProtocolError

__all__ = ["CopyTextError", "copy_text_rows", "insert_messages", "unescape_copy_value"]


class CopyTextError(ProtocolError):
    """COPY text that ``COPY TO`` cannot have written; ``row`` is 1-based within the text
    given (plus the caller's ``first_row`` offset)."""


_ESCAPES: Final = {ord("b"): b"\b", ord("f"): b"\f", ord("n"): b"\n", ord("r"): b"\r",
                   ord("t"): b"\t", ord("v"): b"\v", ord("\\"): b"\\"}
_ESCAPE: Final = re.compile(rb"\\(.?)", re.DOTALL)
_NULL_TEXT: Final = b"\\N"


def _unescape(match: re.Match[bytes]) -> bytes:
    char = match.group(1)
    try:
        return _ESCAPES[char[0]]
    except (KeyError, IndexError):
        raise _BadEscape(char) from None


class _BadEscape(Exception):  # noqa: N818 - internal: turned into a CopyTextError
    def __init__(self, char: bytes) -> None:
        super().__init__(char)
        self.char = char


def unescape_copy_value(field: bytes) -> bytes | None:
    """One value as ``COPY TO`` wrote it: ``None`` for ``\\N``, else its escapes undone;
    a backslash ``COPY TO`` does not write raises :class:`CopyTextError`."""
    if b"\\" not in field:
        return field
    if field == _NULL_TEXT:
        return None
    try:
        return _ESCAPE.sub(_unescape, field)
    except _BadEscape as exc:
        raise CopyTextError(_bad_escape(exc.char)) from None


def _bad_escape(char: bytes) -> str:
    if not char:
        return "a value ending with a lone backslash"
    shown = "\\" + char.decode("latin-1")
    return f"an escape COPY TO does not write ('{shown}')"


def _whole(data: bytes) -> None:
    if data and not data.endswith(b"\n"):
        tail = len(data) - data.rfind(b"\n") - 1
        raise CopyTextError("whole rows ending with a newline",
                            detail=f"the text ends inside a row, {tail} bytes after the "
                            "last newline")


def copy_text_rows(data: bytes, width: int | None = None, *, first_row: int = 1
                   ) -> list[list[bytes | None]]:
    """The rows of COPY text ``data`` (whole rows, each ending with a newline), their
    values unescaped, ``None`` for NULL; with ``width``, a row of another number of values
    is refused. Errors name the row (``first_row`` the number of the first)."""
    _whole(data)
    rows: list[list[bytes | None]] = []
    if not data:
        return rows
    for number, line in enumerate(data[:-1].split(b"\n"), first_row):
        values = line.split(b"\t") if (width != 0 or line) else []
        if width is not None and len(values) != width:
            raise _miscounted(number, len(values), width)
        if b"\\" in line:
            row: list[bytes | None] = []
            for column, value in enumerate(values, 1):
                try:
                    row.append(unescape_copy_value(value))
                except CopyTextError as exc:
                    raise CopyTextError(f"row {number} column {column}: {exc.expected}"
                                        ) from None
            rows.append(row)
        else:
            rows.append(list(values))
    return rows


def _miscounted(number: int, found: int, width: int) -> CopyTextError:
    return CopyTextError(f"row {number} has {found} values, expected {width}")


class _Prefixes(list[bytes]):
    """A text value's kind and length (``t``, Int32) by its length (grown to the longest
    value seen, up to 64 KiB; longer values are rare)."""

    null: Final = b"n"

    @staticmethod
    def make(length: int) -> bytes:
        return b"t" + length.to_bytes(4, "big")

    def of(self, lengths: list[int]) -> list[bytes]:
        """The prefixes of values of these lengths."""
        longest = max(lengths, default=0)
        if longest >= len(self):
            if longest < 65536:
                with _GROWING:  # the threads of a parallel snapshot share the list
                    if longest >= len(self):
                        self.extend([self.make(n) for n in range(len(self), longest + 1)])
            else:
                return list(map(self.make, lengths))
        return list(map(self.__getitem__, lengths))


_GROWING: Final = threading.Lock()
_PREFIX: Final = _Prefixes()


def _columns(rows: bytes, width: int, first_row: int
             ) -> tuple[int, list[tuple[list[bytes], list[bytes]]]]:
    """``(row count, per column (prefixes, values))`` of whole rows."""
    _whole(rows)
    count = rows.count(b"\n")
    if not count:
        return 0, []
    if width == 0:  # a table without columns: COPY writes an empty line a row
        if len(rows) != count:
            at = next(n for n, line in enumerate(rows.split(b"\n"), first_row) if line)
            raise _miscounted(at, rows.split(b"\n")[at - first_row].count(b"\t") + 1, 0)
        return count, []
    body = rows[:-1]
    tabs = list(map(bytes.count, body.split(b"\n"), repeat(b"\t")))
    if tabs.count(width - 1) != count:
        _check_counts(body, width, first_row)
    fields = body.replace(b"\n", b"\t").split(b"\t")
    prefix = _PREFIX
    backslashes = rows.count(b"\\")
    nulls = fields.count(_NULL_TEXT) if backslashes else 0
    if backslashes == nulls:  # no escape: every backslash starts a NULL
        columns = []
        for column in range(width):
            values = fields[column::width]
            prefixes = prefix.of(list(map(len, values)))
            if nulls and _NULL_TEXT in values:
                prefixes = list(map({_NULL_TEXT: prefix.null}.get, values, prefixes))
                values = list(map({_NULL_TEXT: b""}.get, values, values))
            columns.append((prefixes, values))
        return count, columns
    values = []
    kinds: list[bytes | None] = []
    for index, field in enumerate(fields):
        if b"\\" in field:
            try:
                value = unescape_copy_value(field)
            except CopyTextError as exc:
                raise CopyTextError(f"row {first_row + index // width} column "
                                    f"{index % width + 1}: {exc.expected}") from None
            if value is None:
                values.append(b"")
                kinds.append(prefix.null)
                continue
            field = value
        values.append(field)
        kinds.append(None)
    texts = prefix.of(list(map(len, values)))
    prefixes = [t if k is None else k for t, k in zip(texts, kinds, strict=True)]
    return count, [(prefixes[c::width], values[c::width]) for c in range(width)]


def _check_counts(body: bytes, width: int, first_row: int) -> None:
    for number, line in enumerate(body.split(b"\n"), first_row):
        found = line.count(b"\t") + 1
        if found != width:
            raise _miscounted(number, found, width)


def insert_messages(relation_id: int, width: int, rows: bytes, *, first_row: int = 1
                    ) -> list[bytes]:
    """Whole COPY text rows of a table of ``width`` columns as the Insert messages of
    relation ``relation_id``, one a row, values in text format. Errors name the row
    (``first_row`` the number of the first)."""
    count, columns = _columns(rows, width, first_row)
    head = b"I" + relation_id.to_bytes(4, "big") + b"N" + width.to_bytes(2, "big")
    if not count:
        return []
    if not columns:
        return [head] * count
    step = 2 * width + 1
    flat = [b""] * (count * step)
    flat[0::step] = repeat(head, count)
    for column, (prefixes, values) in enumerate(columns):
        flat[2 * column + 1::step] = prefixes
        flat[2 * column + 2::step] = values
    join = b"".join
    return [join(flat[i:i + step]) for i in range(0, len(flat), step)]
