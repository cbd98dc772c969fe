"""Java regular expressions, as the connector's filters read them, matched in linear time.

Debezium compiles every filter (``table.include.list``, ``column.exclude.list``,
``message.prefix.include.list``, the masking and key properties...) with
``java.util.regex.Pattern.compile(text, Pattern.CASE_INSENSITIVE)`` and tests a name
with ``matcher(name).matches()``: the whole name, letters compared without case in
ASCII only (``io.debezium.function.Predicates.includes``, ``Strings.setOfRegex``).

A backtracking engine (Java's, Python's ``re``) can take exponential time on a
pattern such as ``([a-z]+-?)+\\.audit``, and a message prefix is chosen by whoever
calls ``pg_logical_emit_message``. This module translates the Java syntax to RE2's,
whose automaton runs in time linear in the name, and refuses, naming it, what
RE2 cannot honour exactly: backreferences, lookaround, atomic groups, possessive
quantifiers, word boundaries, ``\\R``, ``$`` followed by more of the pattern, the
``MULTILINE``/``UNICODE_CASE``/``UNICODE_CHARACTER_CLASS`` flags and the Unicode
``\\p{...}`` properties (the POSIX ones, ``\\p{Alpha}``..., are kept).

Character classes are computed here as sets of code points, so Java's nested
classes, intersections and subtractions (``[a-z&&[^i]]``), its negation of the
whole class, its ``.`` (no line terminator), its ``\\s`` (with ``\\x0B``) and its
ASCII-only case folding come out exactly.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import re2

from pgcdc_events.errors import ConfigurationError

__all__ = ["JavaPattern", "compile_java"]

_MAX: Final = 0x10FFFF
Ranges = tuple[tuple[int, int], ...]


# -- sets of code points -----------------------------------------------------------------
def _norm(ranges: Iterable[tuple[int, int]]) -> Ranges:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def _complement(ranges: Ranges) -> Ranges:
    out, nxt = [], 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= _MAX:
        out.append((nxt, _MAX))
    return tuple(out)


def _intersect(a: Ranges, b: Ranges) -> Ranges:
    return _complement(_norm(_complement(a) + _complement(b)))


def _fold(ranges: Ranges) -> Ranges:
    """Close a set under ASCII case, as Java's CASE_INSENSITIVE (without UNICODE_CASE)."""
    extra = []
    for lo, hi in ranges:
        for start, end, shift in ((0x61, 0x7A, -32), (0x41, 0x5A, 32)):
            a, b = max(lo, start), min(hi, end)
            if a <= b:
                extra.append((a + shift, b + shift))
    return _norm(ranges + tuple(extra))


def _chars(text: str) -> Ranges:
    return _norm((ord(c), ord(c)) for c in text)


_DIGIT: Final = ((0x30, 0x39),)
_WORD: Final = _norm(((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)))
_SPACE: Final = _norm(((0x09, 0x0D), (0x20, 0x20)))  # Java's \s: [ \t\n\x0B\f\r]
_HSPACE: Final = _norm(((0x09, 0x09), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680),
                        (0x180E, 0x180E), (0x2000, 0x200A), (0x202F, 0x202F),
                        (0x205F, 0x205F), (0x3000, 0x3000)))
_VSPACE: Final = _norm(((0x0A, 0x0D), (0x85, 0x85), (0x2028, 0x2029)))
_LINE_TERMINATORS: Final = _norm(((0x0A, 0x0A), (0x0D, 0x0D), (0x85, 0x85), (0x2028, 0x2029)))
_PUNCT: Final = _chars("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_ALPHA: Final = ((0x41, 0x5A), (0x61, 0x7A))
_ALNUM: Final = _norm(_ALPHA + _DIGIT)
#: Java's POSIX character classes (US-ASCII only), ``\p{Lower}``...
_POSIX: Final[dict[str, Ranges]] = {
    "Lower": ((0x61, 0x7A),), "Upper": ((0x41, 0x5A),), "ASCII": ((0, 0x7F),),
    "Alpha": _ALPHA, "Digit": _DIGIT, "Alnum": _ALNUM, "Punct": _PUNCT,
    "Graph": _norm(_ALNUM + _PUNCT), "Print": _norm(_ALNUM + _PUNCT + ((0x20, 0x20),)),
    "Blank": _chars(" \t"), "Cntrl": ((0, 0x1F), (0x7F, 0x7F)),
    "XDigit": _norm((*_DIGIT, (0x41, 0x46), (0x61, 0x66))), "Space": _SPACE,
}
_CLASS_ESCAPES: Final[dict[str, Ranges]] = {
    "d": _DIGIT, "w": _WORD, "s": _SPACE, "h": _HSPACE, "v": _VSPACE,
}
_CHAR_ESCAPES: Final = {"t": 0x09, "n": 0x0A, "r": 0x0D, "f": 0x0C, "a": 0x07, "e": 0x1B}
_REFUSED_ESCAPES: Final = {
    "b": "a word boundary \\b", "B": "a word boundary \\B", "R": "a line break \\R",
    "X": "a grapheme cluster \\X", "k": "a backreference \\k<name>",
}


def _emit_set(ranges: Ranges) -> str:
    if not ranges:
        return "[^\\x00-\\x{10FFFF}]"
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _emit_char(ranges[0][0])
    parts = []
    for lo, hi in ranges:
        parts.append(f"\\x{{{lo:X}}}" if lo == hi else f"\\x{{{lo:X}}}-\\x{{{hi:X}}}")
    return "[" + "".join(parts) + "]"


def _emit_char(code: int) -> str:
    char = chr(code)
    if char.isascii() and char.isalnum():
        return char
    return f"\\x{{{code:X}}}"


# -- the AST: only what matching needs --------------------------------------------------
class _Atom:
    """Consumes one character: ``text`` is its RE2 class or character."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class _Zero:
    """A zero-width assertion (``\\A``, ``\\z``)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class _Eol:
    """Java's ``$`` or ``\\Z``, resolved once what follows it is known."""

    __slots__ = ()


class _Seq:
    __slots__ = ("items",)

    def __init__(self, items: list[Node]) -> None:
        self.items = items


class _Alt:
    __slots__ = ("branches",)

    def __init__(self, branches: list[Node]) -> None:
        self.branches = branches


class _Rep:
    __slots__ = ("high", "low", "node")

    def __init__(self, node: Node, low: int, high: int | None) -> None:
        self.node, self.low, self.high = node, low, high


Node = _Atom | _Zero | _Eol | _Seq | _Alt | _Rep


class _RefusedError(Exception):
    def __init__(self, construct: str) -> None:
        super().__init__(construct)
        self.construct = construct


class _InvalidError(Exception):
    pass


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.i = True  # CASE_INSENSITIVE, as Debezium compiles every filter
        self.s = False
        self.d = False
        self.x = False
        self.m = False

    # -- lexing --------------------------------------------------------------------
    def skip(self) -> None:
        """Under COMMENTS (``(?x)``): skip white space and ``#`` comments."""
        while self.x and self.pos < len(self.text):
            c = self.text[self.pos]
            if c in " \t\n\x0b\f\r":
                self.pos += 1
            elif c == "#":
                while (self.pos < len(self.text)
                       and self.text[self.pos] not in "\n\r\x85\u2028\u2029"):
                    self.pos += 1
            else:
                break

    def peek(self) -> str:
        self.skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def take(self, expected: str | None = None) -> str:
        c = self.peek()
        if not c or (expected is not None and c != expected):
            raise _InvalidError(f"expected {expected!r} at index {self.pos}" if expected else
                           f"unexpected end at index {self.pos}")
        self.pos += 1
        return c

    def raw(self) -> str:
        """The next character, white space included (escapes, \\Q...\\E, names)."""
        if self.pos >= len(self.text):
            raise _InvalidError(f"unexpected end at index {self.pos}")
        c = self.text[self.pos]
        self.pos += 1
        return c

    # -- expressions ---------------------------------------------------------------
    def parse(self) -> Node:
        node = self.alternation()
        if self.pos < len(self.text):
            raise _InvalidError(f"unmatched ')' at index {self.pos}")
        return node

    def alternation(self) -> Node:
        saved = (self.i, self.s, self.d, self.x, self.m)
        branches = [self.sequence()]
        while self.peek() == "|":
            self.pos += 1
            branches.append(self.sequence())
        self.i, self.s, self.d, self.x, self.m = saved
        return _Alt(branches) if len(branches) > 1 else branches[0]

    def sequence(self) -> Node:
        items: list[Node] = []
        while True:
            c = self.peek()
            if c in ("", "|", ")"):
                return _Seq(items)
            if c == "\\" and self.text.startswith("\\Q", self.pos):
                self.pos += 2
                end = self.text.find("\\E", self.pos)
                quoted = self.text[self.pos:] if end < 0 else self.text[self.pos:end]
                self.pos = len(self.text) if end < 0 else end + 2
                if not quoted:
                    continue
                items.extend(self.literal(ord(q)) for q in quoted[:-1])
                items.append(self.quantified(self.literal(ord(quoted[-1]))))
                continue
            atom = self.atom()
            if atom is not None:  # None: an inline flag group, nothing to quantify
                items.append(self.quantified(atom))

    def quantified(self, atom: Node) -> Node:
        c = self.peek()
        start = self.pos
        if c in ("*", "+", "?"):
            self.pos += 1
            low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
        elif c == "{":
            low, high = self.braces()
        else:
            return atom
        quantifier = self.text[start:self.pos]
        c = self.peek()
        if c == "+":
            raise _RefusedError(f"a possessive quantifier {quantifier}+")
        if c == "?":
            self.pos += 1  # reluctant: the same names match
        if self.peek() == "{":
            raise _RefusedError("a repetition after a quantifier (Java reads it in a way of "
                                "its own)")
        if self.peek() in ("*", "+", "?"):
            raise _InvalidError(f"a quantifier follows a quantifier at index {self.pos}")
        return _Rep(atom, low, high)

    def braces(self) -> tuple[int, int | None]:
        start = self.pos
        self.pos += 1
        body = []
        while self.pos < len(self.text) and self.text[self.pos] != "}":
            body.append(self.text[self.pos])
            self.pos += 1
        if self.pos >= len(self.text):
            raise _InvalidError(f"illegal repetition at index {start}")
        self.pos += 1
        low_text, comma, high_text = "".join(body).partition(",")
        if not low_text.isdigit() or (high_text and not high_text.isdigit()):
            raise _InvalidError(f"illegal repetition at index {start}")
        low = int(low_text)
        high = (int(high_text) if high_text else None) if comma else low
        if high is not None and high < low:
            raise _InvalidError(f"illegal repetition range at index {start}")
        return low, high

    def atom(self) -> Node | None:
        start = self.pos
        c = self.take()
        if c == "(":
            return self.group(start)
        if c == "[":
            return _Atom(_emit_set(self.char_class()))
        if c == ".":
            if self.s:
                return _Atom(_emit_set(((0, _MAX),)))
            return _Atom(_emit_set(_complement(((0x0A, 0x0A),) if self.d else _LINE_TERMINATORS)))
        if c == "^":
            self.refuse_multiline("^")
            return _Zero("\\A")
        if c == "$":
            self.refuse_multiline("$")
            return _Eol()
        if c in ("*", "+", "?", "{"):
            raise _InvalidError(f"dangling meta character {c!r} at index {start}")
        if c == "\\":
            return self.escape()
        return self.literal(ord(c))

    def refuse_multiline(self, anchor: str) -> None:
        if self.m:
            raise _RefusedError(f"{anchor} under the MULTILINE flag (?m)")

    def literal(self, code: int) -> Node:
        ranges: Ranges = ((code, code),)
        return _Atom(_emit_set(_fold(ranges) if self.i else ranges))

    def group(self, start: int) -> Node | None:  # noqa: C901
        if not self.text.startswith("?", self.pos):
            return self.group_body()
        self.pos += 1
        c = self.raw()
        if c == ":":
            return self.group_body()
        if c in "=!":
            raise _RefusedError(f"a lookahead (?{c}")
        if c == ">":
            raise _RefusedError("an atomic group (?>")
        if c == "<":
            nxt = self.raw()
            if nxt in "=!":
                raise _RefusedError(f"a lookbehind (?<{nxt}")
            name = nxt
            while self.pos < len(self.text) and self.text[self.pos] != ">":
                name += self.raw()
            self.raw()
            if not (name[:1].isascii() and name[:1].isalpha() and name.isascii()
                    and name.isalnum()):
                raise _InvalidError(f"bad named-group name at index {start}")
            return self.group_body()
        # inline flags: (?idmsuxU-idmsuxU) or (?idmsuxU-idmsuxU:X)
        self.pos -= 1
        on = True
        flags = {"i": self.i, "s": self.s, "d": self.d, "x": self.x, "m": self.m}
        while True:
            c = self.raw()
            if c == "-":
                on = False
            elif c in flags:
                flags[c] = on
            elif c == "u":
                if on:
                    raise _RefusedError("the UNICODE_CASE flag (?u)")
            elif c == "U":
                if on:
                    raise _RefusedError("the UNICODE_CHARACTER_CLASS flag (?U)")
            elif c in (")", ":"):
                break
            else:
                raise _InvalidError(f"unknown inline flag {c!r} at index {self.pos - 1}")
        if c == ")":
            self.i, self.s, self.d, self.x, self.m = (flags[k] for k in "isdxm")
            return None
        saved = (self.i, self.s, self.d, self.x, self.m)
        self.i, self.s, self.d, self.x, self.m = (flags[k] for k in "isdxm")
        node = self.group_body()
        self.i, self.s, self.d, self.x, self.m = saved
        return node

    def group_body(self) -> Node:
        node = self.alternation()
        self.take(")")
        return _Seq([node])

    # -- escapes -------------------------------------------------------------------
    def escape(self) -> Node:
        start = self.pos - 1
        c = self.raw()
        if c in _REFUSED_ESCAPES:
            raise _RefusedError(_REFUSED_ESCAPES[c])
        if c in "123456789":
            raise _RefusedError(f"a backreference \\{c}")
        if c in "AG":  # \G, the end of the previous match: the start for matches()
            return _Zero("\\A")
        if c == "z":
            return _Zero("\\z")
        if c == "Z":
            return _Eol()
        self.pos = start + 1
        ranges = self.escape_set()
        return _Atom(_emit_set(_fold(ranges) if self.i else ranges))

    def escape_set(self) -> Ranges:
        """After a backslash: the set a character escape or a class escape stands for."""
        start = self.pos - 1
        c = self.raw()
        lower = c.lower()
        if lower in _CLASS_ESCAPES:
            ranges = _CLASS_ESCAPES[lower]
            return _complement(ranges) if c.isupper() else ranges
        if lower == "p":
            return self.property(c == "P")
        if c in _REFUSED_ESCAPES:
            raise _RefusedError(_REFUSED_ESCAPES[c])
        code = self.char_escape(c, start)
        return ((code, code),)

    def char_escape(self, c: str, start: int) -> int:  # noqa: C901
        if c in _CHAR_ESCAPES:
            return _CHAR_ESCAPES[c]
        if c == "0":
            digits = ""
            while (len(digits) < 3 and self.pos < len(self.text)
                   and self.text[self.pos] in "01234567"
                   and int(digits + self.text[self.pos], 8) <= 0o377):
                digits += self.raw()
            if not digits:
                raise _InvalidError(f"illegal octal escape at index {start}")
            return int(digits, 8)
        if c == "x":
            if self.text.startswith("{", self.pos):
                end = self.text.find("}", self.pos)
                digits = self.text[self.pos + 1:end] if end > 0 else ""
                self.pos = end + 1
            else:
                digits = self.text[self.pos:self.pos + 2]
                self.pos += 2
                if len(digits) != 2:
                    digits = ""
            return self.hex_code(digits, start)
        if c == "u":
            code = self.hex_code(self.text[self.pos:self.pos + 4], start, exact=4)
            self.pos += 4
            if 0xD800 <= code <= 0xDBFF and self.text.startswith("\\u", self.pos):
                low = self.hex_code(self.text[self.pos + 2:self.pos + 6], start, exact=4)
                if 0xDC00 <= low <= 0xDFFF:
                    self.pos += 6
                    return 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
            return code
        if c == "c":
            return ord(self.raw()) ^ 64
        if c == "N":
            end = self.text.find("}", self.pos)
            if not self.text.startswith("{", self.pos) or end < 0:
                raise _InvalidError(f"illegal character name at index {start}")
            name = self.text[self.pos + 1:end]
            self.pos = end + 1
            try:
                return ord(unicodedata.lookup(name))
            except KeyError:
                raise _InvalidError(f"unknown character name {name!r}") from None
        if c.isascii() and c.isalnum():
            raise _InvalidError(f"illegal escape sequence \\{c} at index {start}")
        return ord(c)

    def hex_code(self, digits: str, start: int, exact: int = 0) -> int:
        if (not digits or (exact and len(digits) != exact)
                or any(d not in "0123456789abcdefABCDEF" for d in digits)
                or int(digits, 16) > _MAX):
            raise _InvalidError(f"illegal hexadecimal escape at index {start}")
        return int(digits, 16)

    def property(self, negated: bool) -> Ranges:
        start = self.pos - 2
        if self.text.startswith("{", self.pos):
            end = self.text.find("}", self.pos)
            if end < 0:
                raise _InvalidError(f"unclosed character family at index {start}")
            name = self.text[self.pos + 1:end]
            self.pos = end + 1
        else:
            name = self.raw()
        spelled = f"\\{'P' if negated else 'p'}{{{name}}}"
        if name not in _POSIX:
            raise _RefusedError(f"the Unicode property {spelled} (only the POSIX classes "
                           "\\p{Alpha}, \\p{Digit}... are supported)")
        ranges = _POSIX[name]
        # \P{Lower} under CASE_INSENSITIVE: the complement of the folded set (no letter)
        return _complement(_fold(ranges) if self.i else ranges) if negated else ranges

    # -- character classes ---------------------------------------------------------
    def char_class(self) -> Ranges:  # noqa: C901, PLR0915
        """After ``[``: Java 9+'s class, the whole of it negated by a leading ``^``;
        each operand folded for case before it is combined, as Java does."""
        start = self.pos - 1
        negated = False
        if self.peek() == "^":
            self.pos += 1
            negated = True
        operands: list[Ranges] = []
        union: list[tuple[int, int]] = []
        seen = False  # whether the current operand has any item (empty ones are ignored)
        first = True
        intersecting = False
        while True:
            c = self.peek()
            if not c:
                raise _InvalidError(f"unclosed character class at index {start}")
            if c == "]" and not first:
                self.pos += 1
                break
            first = False
            if self.text.startswith("&&", self.pos):
                if self.text.startswith("&&&", self.pos):
                    raise _RefusedError("'&&&' in a character class (Java reads it in a way of "
                                        "its own; write '&&\\&' for an '&' operand)")
                self.pos += 2
                intersecting = True
                if seen:
                    operands.append(_norm(union))
                union, seen = [], False
                continue
            seen = True
            if c == "[":
                self.pos += 1
                union.extend(self.char_class())
                if intersecting and self.peek() == "&" and not self.text.startswith(
                        "&&", self.pos):
                    raise _RefusedError("a single '&' after a nested class in an intersection "
                                        "(Java reads it in a way of its own; write '\\&')")
                continue
            low, single = self.class_item()
            if self.peek() == "-" and self.text.startswith("-&&", self.pos):
                raise _RefusedError("'-&&' in a character class (Java reads it in a way of "
                                    "its own; write '\\-&&')")
            if single is not None and self.peek() == "-" and not self.text.startswith(
                    "-]", self.pos):
                save = self.pos
                self.pos += 1
                if self.peek() == "[":
                    self.pos = save  # "a-[...]": a literal '-', then a nested class
                else:
                    if self.text.startswith("\\Q", self.pos):
                        raise _RefusedError("a range next to \\Q...\\E in a character class "
                                            "(Java reads it in a way of its own)")
                    _, end = self.class_item()
                    if end is None:
                        raise _InvalidError(f"illegal character range at index {save}")
                    if end < single:
                        raise _InvalidError(f"illegal character range at index {save}")
                    rng: Ranges = ((single, end),)
                    union.extend(_fold(rng) if self.i else rng)
                    continue
            union.extend(low)
        if seen:
            operands.append(_norm(union))
        if not operands:
            raise _InvalidError(f"empty character class at index {start}")
        result = operands[0]
        for other in operands[1:]:
            result = _intersect(result, other)
        return _complement(result) if negated else result

    def class_item(self) -> tuple[Ranges, int | None]:
        """One item of a class: its set (folded for case) and, for a single character,
        the character (a range may start or end with it)."""
        c = self.take()
        if c == "\\":
            if self.text.startswith("Q", self.pos):
                self.pos += 1
                end = self.text.find("\\E", self.pos)
                quoted = self.text[self.pos:] if end < 0 else self.text[self.pos:end]
                self.pos = len(self.text) if end < 0 else end + 2
                ranges = _chars(quoted)
                if self.peek() == "-" and not self.text.startswith("-]", self.pos):
                    raise _RefusedError("a range next to \\Q...\\E in a character class "
                                        "(Java reads it in a way of its own)")
                return (_fold(ranges) if self.i else ranges), None
            nxt = self.text[self.pos:self.pos + 1]
            if nxt and nxt in "123456789":
                raise _RefusedError(f"a backreference \\{nxt}")
            ranges = self.escape_set()
            single = ranges[0][0] if len(ranges) == 1 and ranges[0][0] == ranges[0][1] \
                and nxt.lower() not in "dwshvp" else None
            return (_fold(ranges) if self.i else ranges), single
        code = ord(c)
        ranges = ((code, code),)
        return (_fold(ranges) if self.i else ranges), code


# -- emission ----------------------------------------------------------------------------
def _consumes(node: Node) -> bool:
    """Whether the node can consume a character (zero-width assertions cannot)."""
    if isinstance(node, _Atom):
        return True
    if isinstance(node, _Seq):
        return any(_consumes(n) for n in node.items)
    if isinstance(node, _Alt):
        return any(_consumes(n) for n in node.branches)
    if isinstance(node, _Rep):
        return node.high != 0 and _consumes(node.node)
    return False


def _emit(node: Node, tail: bool) -> str:
    """RE2 text for the node; ``tail`` when nothing that consumes can follow it."""
    if isinstance(node, (_Atom, _Zero)):
        return node.text
    if isinstance(node, _Eol):
        if not tail:
            raise _RefusedError("$ or \\Z followed by more of the pattern")
        # matches() needs the end of input after it: Java's "before a final line
        # terminator" cannot apply when nothing that consumes follows.
        return "\\z"
    if isinstance(node, _Seq):
        items = node.items
        parts = [_emit(item, tail and not any(_consumes(r) for r in items[index + 1:]))
                 for index, item in enumerate(items)]
        return "(?:" + "".join(parts) + ")" if len(parts) != 1 else parts[0]
    if isinstance(node, _Alt):
        return "(?:" + "|".join(_emit(b, tail) for b in node.branches) + ")"
    low, high = node.low, node.high
    body = _emit(node.node, tail and high is not None and high <= 1)
    suffix = ("*" if (low, high) == (0, None) else "+" if (low, high) == (1, None)
              else "?" if (low, high) == (0, 1) else f"{{{low},}}" if high is None
              else f"{{{low}}}" if low == high else f"{{{low},{high}}}")
    return f"(?:{body}){suffix}"


class JavaPattern:
    """A Java regular expression compiled as Debezium's filters compile it
    (``CASE_INSENSITIVE``), matched against whole names in linear time.

    ``pattern`` is the Java text, ``translated`` the RE2 text it became. Pickles as
    its Java text (it compiles again where it is unpickled, e.g. on a Spark worker).
    """

    __slots__ = ("_regex", "pattern", "translated")

    def __init__(self, pattern: str, translated: str, regex: re2._Regexp) -> None:
        self.pattern = pattern
        self.translated = translated
        self._regex = regex

    def fullmatch(self, text: str) -> bool:
        """Whether the whole of ``text`` matches (Java's ``matcher(text).matches()``)."""
        try:
            return self._regex.fullmatch(text) is not None
        except UnicodeEncodeError:  # a lone surrogate: UTF-8 cannot carry it
            return self._regex.fullmatch(
                "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
            ) is not None

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return compile_java, (self.pattern,)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JavaPattern) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __repr__(self) -> str:
        return f"JavaPattern({self.pattern!r})"


@functools.cache
def _engine() -> tuple[ModuleType, re2.Options]:
    """RE2 and the options filters are compiled with, loaded with the first filter (a
    process that compiles none, such as most ``decode`` runs, never loads the library)."""
    import re2  # noqa: PLC0415 - see above

    options = re2.Options()
    options.log_errors = False
    options.never_capture = True
    return re2, options


def compile_java(pattern: str, name: str | None = None) -> JavaPattern:
    """Compile a Java regular expression as Debezium compiles a filter.

    Raises :class:`ConfigurationError` naming the property ``name`` and the pattern,
    with what is invalid or, for a construct a linear-time engine cannot honour,
    the construct itself.
    """
    where = f"{name}: " if name else ""
    engine, options = _engine()
    try:
        translated = _emit(_Parser(pattern).parse(), True)
        regex = engine.compile(translated, options)
    except _RefusedError as exc:
        raise ConfigurationError(
            f"{where}regular expression {pattern!r} uses {exc.construct}, which pgcdc-events "
            "does not support (its filters run in linear time; see "
            "docs/differences-from-debezium.md)") from None
    except _InvalidError as exc:
        raise ConfigurationError(f"{where}invalid regular expression {pattern!r}: {exc}"
                                 ) from None
    except engine.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ConfigurationError(f"{where}invalid regular expression {pattern!r}: {detail}"
                                 ) from None
    return JavaPattern(pattern, translated, regex)
