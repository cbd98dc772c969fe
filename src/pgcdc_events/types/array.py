"""Arrays of every mapped element type, as Connect arrays of the element's schema.

Debezium 3.6 maps the arrays of the element types in :data:`DEBEZIUM_ELEMENTS`
(and of enums) and drops the others (``money[]``, ``name[]``, ``interval[]``,
``varbit[]``, ``xml[]``, ``point[]``...; even with ``include.unknown.datatypes``),
except that with ``include.unknown.datatypes`` an array of a domain becomes an
array of bytes, each element's text (``{bar,baz}`` is ``["YmFy","YmF6"]``);
``TypeConfig.map_unsupported_types`` maps them all as arrays of their elements.

Connect arrays are one-dimensional. A multi-dimensional array becomes its
elements in row-major order (PostgreSQL's own storage order); its shape and
lower bounds are not conveyed, as Debezium conveys no lower bounds either.
Debezium nulls every sub-array instead (see docs/differences-from-debezium.md).
"""

from __future__ import annotations

import re
import struct
import uuid
from collections.abc import Callable
from typing import Any, Final

from pgcdc_events.errors import ConversionError
from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.mapping import Converter, ValueMapping
from pgcdc_events.types.registry import PgType
from pgcdc_events.types.schema import Schema, array_schema

__all__ = [
    "DEBEZIUM_ELEMENTS",
    "MAXDIM",
    "build",
    "parse_binary",
    "parse_text",
    "toast_placeholder",
]

#: Root element type names whose arrays Debezium 3.6 maps (enum arrays too).
DEBEZIUM_ELEMENTS: Final = frozenset({
    "int2", "int4", "int8", "oid", "float4", "float8", "numeric", "bool",
    "char", "varchar", "bpchar", "text", "citext", "bytea", "uuid", "json", "jsonb", "ltree",
    "inet", "cidr", "macaddr", "macaddr8",
    "int4range", "int8range", "numrange", "tsrange", "tstzrange", "daterange",
    "date", "time", "timetz", "timestamp", "timestamptz",
    "hstore", "geometry", "geography", "tsvector",
})

#: PostgreSQL's limit on array dimensions (``MAXDIM``).
MAXDIM: Final = 6

ElementConverter = Callable[[bytes], Any]


# ---------------------------------------------------------------- text format

_DIMS: Final = re.compile(rb"[ \t\n\r\v\f]*((?:\[[ \t\n\r\v\f]*[+-]?\d{1,10}[ \t\n\r\v\f]*"
                          rb"(?::[ \t\n\r\v\f]*[+-]?\d{1,10}[ \t\n\r\v\f]*)?\]){1,6})"
                          rb"[ \t\n\r\v\f]*=")  # at most MAXDIM: no scanning of longer prefixes
_DIM: Final = re.compile(rb"\[\s*([+-]?\d{1,10})\s*(?::\s*([+-]?\d{1,10})\s*)?\]")
_ESCAPE: Final = re.compile(rb"\\(.)", re.DOTALL)
_PLAIN: Final = re.compile(rb"\{([^\"{}\\ \t\n\r\v\f]+)\}")
_SPACE: Final = re.compile(rb"[ \t\n\r\v\f]*")
_SPACE_BYTES: Final = frozenset(b" \t\n\r\v\f")
# The "unrolled loop": its two parts never match the same text, so no backtracking blow-up.
_QUOTED: Final = re.compile(rb'"([^"\\]*(?:\\.[^"\\]*)*)"', re.DOTALL)
_BARE: dict[bytes, re.Pattern[bytes]] = {}


def _bare(delim: bytes) -> re.Pattern[bytes]:
    """An unquoted element: anything but braces, quotes, backslashes, spaces and ``delim``."""
    pattern = _BARE.get(delim)
    if pattern is None:
        pattern = re.compile(rb'[^{}"\\ \t\n\r\v\f' + re.escape(delim) + rb"]+")
        _BARE[delim] = pattern
    return pattern


def _dimensions(raw: bytes) -> tuple[list[int] | None, int]:
    """The counts of an ``[lo:hi]...=`` prefix (``None`` if absent), and the offset of ``{``."""
    match = _DIMS.match(raw)
    if match is None:
        return None, 0
    counts: list[int] = []
    for dim in _DIM.finditer(match.group(1)):
        lo, hi = (int(dim.group(1)), int(dim.group(2))) if dim.group(2) else (1, int(dim.group(1)))
        if hi < lo - 1 or len(counts) >= MAXDIM:
            raise ConversionError(f"array: invalid dimensions {match.group(1)!r}")
        counts.append(hi - lo + 1)
    return counts, match.end()


class _Shape:
    """Checks that nested braces form a rectangular array of at most MAXDIM dimensions."""

    def __init__(self) -> None:
        self.sizes: list[int | None] = []  # element count of every sub-array at each depth
        self.leaf_depth: int | None = None  # the depth holding scalars

    def close(self, depth: int, count: int) -> None:
        while len(self.sizes) <= depth:
            self.sizes.append(None)
        if self.sizes[depth] is None:
            self.sizes[depth] = count
        elif self.sizes[depth] != count:
            raise ConversionError("array: sub-arrays have different lengths")

    def scalar(self, depth: int) -> None:
        if self.leaf_depth is None:
            self.leaf_depth = depth
        elif self.leaf_depth != depth:
            raise ConversionError("array: elements at different nesting depths")


def parse_text(raw: bytes, delim: bytes = b",") -> list[bytes | None]:
    """The elements of an array's text output, row-major, unquoted; ``None`` for NULL.

    Linear in the input: one regular-expression token at a time, no recursion.
    """
    plain = _PLAIN.fullmatch(raw)
    if plain is not None:  # {a,b,c}: nothing quoted, escaped or nested
        parts = plain.group(1).split(delim)
        if b"" not in parts:
            return [None if p.upper() == b"NULL" else p for p in parts]
    counts, pos = _dimensions(raw)
    out, ndim = _parse_nested(raw, pos, delim)
    if counts is not None:
        expected = 1
        for c in counts:
            expected *= c
        if expected != len(out) or (out and ndim != len(counts)):
            raise ConversionError(f"array: dimensions {counts} do not match the elements")
    return out


def _parse_nested(raw: bytes, pos: int, delim: bytes) -> tuple[list[bytes | None], int]:  # noqa: C901
    """The elements from the ``{`` at ``pos`` on, and the number of dimensions."""
    bare = _bare(delim)
    out: list[bytes | None] = []
    shape = _Shape()
    counts: list[int] = []  # children seen so far in each open brace
    expect_item = True  # after '{' or a delimiter
    end = len(raw)
    while True:
        if pos < end and raw[pos] in _SPACE_BYTES:
            pos = _SPACE.match(raw, pos).end()  # type: ignore[union-attr]  # always matches
        if pos >= end:
            raise ConversionError("array: unexpected end of input")
        char, depth = raw[pos], len(counts)
        if char == 0x7B:  # {
            if not expect_item or depth >= MAXDIM:
                raise ConversionError(f"array: misplaced '{{' at byte {pos}")
            if depth:
                counts[-1] += 1
            counts.append(0)
            pos += 1
        elif char == 0x7D:  # }
            if not counts or (expect_item and counts[-1]):
                raise ConversionError(f"array: misplaced '}}' at byte {pos}")
            if counts[-1] == 0 and depth > 1:
                raise ConversionError("array: empty sub-array")
            shape.close(depth - 1, counts.pop())
            expect_item, pos = False, pos + 1
            if not counts:
                break
        elif raw.startswith(delim, pos):
            if expect_item:
                raise ConversionError(f"array: misplaced delimiter at byte {pos}")
            expect_item, pos = True, pos + len(delim)
        else:
            if not expect_item or not counts:
                raise ConversionError(f"array: misplaced element at byte {pos}")
            pos = _element(raw, pos, bare, out)
            shape.scalar(depth)
            counts[-1] += 1
            expect_item = False
    pos = _SPACE.match(raw, pos).end()  # type: ignore[union-attr]  # always matches
    if pos != end:
        raise ConversionError(f"array: {end - pos} bytes after the closing '}}'")
    if out and shape.leaf_depth != len(shape.sizes):
        raise ConversionError("array: elements at different nesting depths")
    return out, len(shape.sizes)


def _element(raw: bytes, pos: int, bare: re.Pattern[bytes], out: list[bytes | None]) -> int:
    """Append the (quoted or bare) element at ``pos`` to ``out``; return the position after it."""
    if raw[pos] == 0x22:  # "
        match = _QUOTED.match(raw, pos)
        if match is None:
            raise ConversionError(f"array: unterminated quoted element at byte {pos}")
        value = match.group(1)
        out.append(_ESCAPE.sub(rb"\1", value) if b"\\" in value else value)
    else:
        match = bare.match(raw, pos)
        if match is None:
            raise ConversionError(f"array: unexpected {raw[pos:pos + 1]!r} at byte {pos}")
        value = match.group()
        out.append(None if value.upper() == b"NULL" else value)
    return match.end()


def _text_converter(delim: str, element: ElementConverter) -> Converter:
    delim_bytes = delim.encode()

    def convert(raw: bytes) -> list[Any]:
        return [None if e is None else element(e) for e in parse_text(raw, delim_bytes)]

    return convert


# ---------------------------------------------------------------- binary format

_HEADER: Final = struct.Struct(">iiI")
_INT32: Final = struct.Struct(">i")


def parse_binary(raw: bytes, element_oid: int = 0) -> list[bytes | None]:
    """The elements of ``array_send`` output, row-major; ``None`` for NULL.

    Every count and length is checked against the bytes present before
    anything is allocated for it. ``element_oid`` (when not 0) must match.
    """
    n = len(raw)
    if n < _HEADER.size:
        raise ConversionError("array binary: truncated header")
    ndim, flags, oid = _HEADER.unpack_from(raw, 0)
    if not 0 <= ndim <= MAXDIM or flags not in (0, 1):
        raise ConversionError(f"array binary: invalid header (ndim {ndim}, flags {flags})")
    if element_oid and oid != element_oid:
        raise ConversionError(f"array binary: element type {oid}, expected {element_oid}")
    pos = _HEADER.size + 8 * ndim
    if pos > n:
        raise ConversionError("array binary: truncated dimensions")
    total = 1 if ndim else 0
    for d in range(ndim):
        (size,) = _INT32.unpack_from(raw, _HEADER.size + 8 * d)
        total *= size
        if size < 0 or total * 4 > n - pos:  # every element needs at least its length word
            raise ConversionError(f"array binary: {size} elements in dimension {d + 1}"
                                  " exceed the value")
    out: list[bytes | None] = []
    for _ in range(total):
        if pos + 4 > n:
            raise ConversionError("array binary: truncated element length")
        (length,) = _INT32.unpack_from(raw, pos)
        pos += 4
        if length == -1:
            out.append(None)
        elif 0 <= length <= n - pos:
            out.append(raw[pos:pos + length])
            pos += length
        else:
            raise ConversionError(f"array binary: element length {length} exceeds the value")
    if pos != n:
        raise ConversionError(f"array binary: {n - pos} trailing bytes")
    return out


def _binary_converter(element_oid: int, element: ElementConverter) -> Converter:
    def convert(raw: bytes) -> list[Any]:
        return [None if e is None else element(e) for e in parse_binary(raw, element_oid)]

    return convert


# ---------------------------------------------------------------- unchanged TOAST

_TEXT_ARRAYS: Final = frozenset({"_text", "_varchar", "_bpchar", "_json", "_jsonb"})
#: Connect logical types whose values must be java.util.Date or BigDecimal objects.
_CONNECT_LOGICAL: Final = frozenset({
    "org.apache.kafka.connect.data.Date", "org.apache.kafka.connect.data.Time",
    "org.apache.kafka.connect.data.Timestamp", "org.apache.kafka.connect.data.Decimal",
})


def toast_placeholder(type_name: str, items: Schema, placeholder: bytes) -> list[Any] | None:
    """Debezium's stand-in for an unchanged TOASTed array of type ``type_name`` (``_text``...).

    Debezium picks a marker by the column's type name
    (``UnchangedToastedReplicationMessageColumn``) and turns it into a value
    (``UnchangedToastedPlaceholder``): text-like arrays ``[placeholder]``,
    ``bytea[]`` ``[placeholder bytes]``, ``int4[]``/``date[]``/``int8[]`` the
    placeholder's bytes as signed integers, ``uuid[]`` ``[nameUUIDFromBytes]``,
    any other array the placeholder string. A value that Connect's schema
    validation rejects (a string for an array, integers for a Connect ``Date``
    element, bytes for a base64 string element...) leaves the field null.
    Golden cases: ``types_toast/*/t_toast_default.c_int4a`` (``[95, 95, 100...]``;
    ``[-34, -83, -66, -17]`` for ``hex:deadbeef``), ``c_datea`` (null under
    ``connect`` and ``isostring``), ``c_byteaa`` (null unless ``bytes``), ``c_uuida``.
    """
    value: list[Any]
    if type_name in _TEXT_ARRAYS:
        value, java = [placeholder.decode("utf-8", "replace")], "string"
    elif type_name == "_bytea":
        value, java = [placeholder], "bytes"
    elif type_name in ("_int4", "_date", "_int8"):
        value = [b - 256 if b > 127 else b for b in placeholder]
        java = "int64" if type_name == "_int8" else "int32"
    elif type_name == "_uuid":
        from hashlib import md5  # noqa: PLC0415 - OpenSSL loads only here (decode's start-up)

        value, java = [str(uuid.UUID(bytes=md5(placeholder).digest(), version=3))], "string"
    else:
        return None
    if items.type != java or items.name in _CONNECT_LOGICAL:
        return None
    return value


# ---------------------------------------------------------------- mapping


def debezium_maps(element: PgType) -> bool:
    """Whether Debezium 3.6 maps arrays of ``element`` (it drops domain arrays, for one)."""
    if element.kind == "enum":
        return True
    return element.kind in ("base", "range") and element.name in DEBEZIUM_ELEMENTS


def build(t: PgType, typmod: int, config: TypeConfig, element: ValueMapping | None, *,
          unknown: bool = False) -> ValueMapping | None:
    """The mapping of array type ``t`` whose elements map as ``element``.

    Items are optional, as Debezium declares them, except that Debezium
    declares enum items required and then loses every enum array holding a
    NULL; ours are optional (docs/differences-from-debezium.md). ``unknown``:
    ``element`` is the unknown-type mapping Debezium gives the elements of an
    array it has no converter for (a domain array with ``include.unknown.datatypes``;
    Debezium declares those items required too).
    """
    if element is None or t.element is None:
        return None
    if not (unknown or debezium_maps(t.element) or config.map_unsupported_types):
        return None
    items = element.schema.with_(optional=True)
    from_binary = (None if element.from_binary is None
                   else _binary_converter(t.element.oid, element.from_binary))
    return ValueMapping(
        array_schema(items),
        _text_converter(t.delimiter, element.from_text),
        from_binary,
        toast_placeholder(t.name, items, config.unavailable_value_placeholder),
    )
