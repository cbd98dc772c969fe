"""String-like types: character types, bytea, json, xml, uuid, ltree, network types, ranges,
enums, tsvector and types Debezium does not know.

Most arrive as the text PostgreSQL prints and stay strings; the semantic
names (``io.debezium.data.Json``...) say what the string holds. ``bytea`` follows
``binary.handling.mode``; unknown types (``include.unknown.datatypes``) are the
bytes of their text output, also per ``binary.handling.mode``.
"""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import attrs

from pgcdc_events.errors import ConversionError
from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.javafmt import java_double
from pgcdc_events.types.mapping import Builder, Converter, ValueMapping, VectorForm
from pgcdc_events.types.registry import PgType
from pgcdc_events.types.schema import Schema

if TYPE_CHECKING:
    import ipaddress

__all__ = [
    "BUILDERS",
    "UTF8_TEXT",
    "Utf8Text",
    "binary_mode_schema",
    "bytea_from_text",
    "encode_binary",
    "enum_mapping",
    "unknown_mapping",
    "utf8",
]


def utf8(raw: bytes) -> str:
    """Text output bytes as a ``str`` (the stream is UTF-8)."""
    return raw.decode("utf-8")


@attrs.frozen
class Utf8Text(VectorForm):
    """Values are UTF-8 text, the value the ``str`` (:func:`utf8`); invalid UTF-8 is
    refused."""


#: The vector form of :func:`utf8`.
UTF8_TEXT: Final = Utf8Text()


def bytea_from_text(raw: bytes) -> bytes:
    """``bytea`` text output in hex (``\\x00ff``) or escape format (``a\\000b``) to bytes."""
    if raw[:2] == b"\\x":
        return bytes.fromhex(raw[2:].decode("ascii"))
    if b"\\" not in raw:
        return raw
    out = bytearray()
    i, n = 0, len(raw)
    while i < n:
        ch = raw[i]
        if ch != 0x5C:
            out.append(ch)
            i += 1
        elif raw[i + 1:i + 2] == b"\\":
            out.append(0x5C)
            i += 2
        elif len(raw[i + 1:i + 4]) == 3 and raw[i + 1:i + 4].isdigit():
            out.append(int(raw[i + 1:i + 4], 8) & 0xFF)
            i += 4
        else:
            raise ConversionError(f"invalid bytea escape at byte {i}")
    return bytes(out)


def binary_mode_schema(config: TypeConfig) -> Schema:
    """The schema of binary data under ``binary.handling.mode``."""
    return Schema("bytes") if config.binary_handling_mode == "bytes" else Schema("string")


def encode_binary(config: TypeConfig) -> Callable[[bytes], Any]:
    """Represent bytes as ``binary.handling.mode`` asks: bytes, base64, URL-safe base64 or hex."""
    mode = config.binary_handling_mode
    if mode == "bytes":
        return bytes
    if mode == "base64":
        return lambda b: base64.b64encode(b).decode("ascii")
    if mode == "base64-url-safe":
        return lambda b: base64.urlsafe_b64encode(b).decode("ascii")
    return lambda b: b.hex()


def _string_mapping(name: str | None = None, from_binary: Converter | None = utf8) -> Builder:
    schema = Schema("string", name=name, version=1 if name else None)

    def build(t: PgType, typmod: int, config: TypeConfig) -> ValueMapping:
        return ValueMapping(schema, utf8, from_binary, config.placeholder_text, UTF8_TEXT)

    return build


def _bytea(t: PgType, typmod: int, config: TypeConfig) -> ValueMapping:
    encode = encode_binary(config)
    placeholder = config.unavailable_value_placeholder
    if config.binary_handling_mode == "bytes":
        return ValueMapping(Schema("bytes"), bytea_from_text, bytes, placeholder)
    # For unchanged TOAST Debezium's hex mode emits the placeholder itself, not its hex
    # (golden: types_toast/*hex*/t_toast_default.c_bytea); we do so in every string mode.
    return ValueMapping(
        Schema("string"),
        lambda raw: encode(bytea_from_text(raw)),
        encode,
        config.placeholder_text,
    )


def _jsonb_binary(raw: bytes) -> str:
    if raw[:1] != b"\x01":
        raise ConversionError(f"unsupported jsonb binary version {raw[:1]!r}")
    return raw[1:].decode("utf-8")


_ltree_binary = _jsonb_binary  # ltree's send format is also version byte 1 + text


def _uuid_binary(raw: bytes) -> str:
    return str(uuid.UUID(bytes=raw))


def _inet_binary(raw: bytes) -> str:
    import ipaddress  # noqa: PLC0415 - loaded for a binary inet only (decode's start-up)

    family, bits, is_cidr, size = raw[0], raw[1], raw[2], raw[3]
    address = raw[4:4 + size]
    if family == 2 and size == 4:
        addr: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.IPv4Address(address)
        full = 32
    elif family == 3 and size == 16:
        addr = ipaddress.IPv6Address(address)
        full = 128
        text = _ipv6_text(address, addr)
        return f"{text}/{bits}" if is_cidr or bits != full else text
    else:
        raise ConversionError(f"invalid inet family {family} with {size} address bytes")
    if is_cidr or bits != full:
        return f"{addr.compressed}/{bits}"
    return addr.compressed


def _ipv6_text(raw: bytes, addr: ipaddress.IPv6Address) -> str:
    """IPv6 as PostgreSQL's ``inet_net_ntop`` prints it: ``::a.b.c.d`` and ``::ffff:a.b.c.d``
    for the IPv4-compatible and IPv4-mapped forms, compressed hex otherwise."""
    words = [raw[i] << 8 | raw[i + 1] for i in range(0, 16, 2)]
    zeros = 0
    while zeros < 8 and words[zeros] == 0:
        zeros += 1
    if zeros == 6 or (zeros == 5 and words[5] == 0xFFFF):
        dotted = ".".join(str(b) for b in raw[12:])
        return "::" + ("ffff:" if zeros == 5 else "") + dotted
    return addr.compressed


def _macaddr_binary(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw)


def _enum_binary(raw: bytes) -> str:
    return raw.decode("utf-8")


def enum_mapping(t: PgType, config: TypeConfig) -> ValueMapping:
    """An enum: ``io.debezium.data.Enum`` with the labels in ``allowed`` (when known)."""
    params = None if t.enum_labels is None else (("allowed", ",".join(t.enum_labels)),)
    schema = Schema("string", name="io.debezium.data.Enum", version=1, parameters=params)
    return ValueMapping(schema, utf8, _enum_binary, config.placeholder_text, UTF8_TEXT)


_NUMBER: Final = re.compile(rb"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|-?Infinity|NaN")
#: Geometric types pgjdbc turns into PGobject subclasses whose text prints every
#: coordinate with Java's Double.toString: box (1,1),(0,0) becomes (1.0,1.0),(0.0,0.0).
_PGJDBC_GEOMETRIC: Final = frozenset({"box", "circle", "line", "lseg", "path", "polygon"})


def _java_coordinates(raw: bytes) -> bytes:
    return _NUMBER.sub(lambda m: java_double(float(m.group())).encode("ascii"), raw)


def unknown_mapping(t: PgType, config: TypeConfig) -> ValueMapping:
    """A type Debezium does not know (``include.unknown.datatypes``): its text output's bytes.

    For the built-in geometric types the text is pgjdbc's (Java-formatted coordinates),
    as Debezium takes it from the driver's object (golden: types/*unknown/t_geo.c_box).
    """
    encode = encode_binary(config)
    from_text: Converter = encode
    if t.name in _PGJDBC_GEOMETRIC and t.is_builtin:
        def from_text(raw: bytes) -> Any:
            return encode(_java_coordinates(raw))
    return ValueMapping(binary_mode_schema(config), from_text, None,
                        encode(config.unavailable_value_placeholder))


def _range_element(name: str) -> Callable[[bytes], str]:
    """The text of one range bound from its binary form, as the element type prints it."""
    from pgcdc_events.types.numeric import decimal_from_binary  # noqa: PLC0415 - no cycle at use
    from pgcdc_events.types.temporal import pg_date_text, pg_timestamp_text  # noqa: PLC0415

    if name in ("int4", "int8"):
        return lambda raw: str(int.from_bytes(raw, "big", signed=True))
    if name == "numeric":
        return lambda raw: format(decimal_from_binary(raw), "f")
    if name == "date":
        return lambda raw: pg_date_text(int.from_bytes(raw, "big", signed=True))
    zone = name == "timestamptz"
    return lambda raw: pg_timestamp_text(int.from_bytes(raw, "big", signed=True), with_zone=zone)


_RANGE_ELEMENTS: Final = {"int4range": "int4", "int8range": "int8", "numrange": "numeric",
                          "daterange": "date", "tsrange": "timestamp",
                          "tstzrange": "timestamptz"}
_RANGE_QUOTE: Final = frozenset(' \t\n\r\v\f,()[]"\\')


def _range_bound(text: str) -> str:
    """A bound as range_out writes it: quoted when empty or holding special characters."""
    if text and not any(ch in _RANGE_QUOTE for ch in text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _range_binary(element: Callable[[bytes], str]) -> Converter:
    def convert(raw: bytes) -> str:
        flags = raw[0]
        if flags & 0x01:
            return "empty"
        pos = 1
        bounds = []
        for infinite in (0x08, 0x10):
            if flags & infinite:
                bounds.append("")
                continue
            size = int.from_bytes(raw[pos:pos + 4], "big", signed=True)
            if size < 0 or pos + 4 + size > len(raw):
                raise ConversionError("range binary value: a bound overruns the value")
            bounds.append(_range_bound(element(raw[pos + 4:pos + 4 + size])))
            pos += 4 + size
        if pos != len(raw):
            raise ConversionError(f"range binary value: {len(raw) - pos} trailing bytes")
        return (("[" if flags & 0x02 else "(") + bounds[0] + "," + bounds[1]
                + ("]" if flags & 0x04 else ")"))

    return convert


def _range(t: PgType, typmod: int, config: TypeConfig) -> ValueMapping:
    """Ranges are strings (PostgreSQL's text); binary values are printed the same way, with
    timestamptz bounds in UTC (``+00``), as a server whose TimeZone is UTC prints them."""
    return ValueMapping(Schema("string"), utf8,
                        _range_binary(_range_element(_RANGE_ELEMENTS[t.name])),
                        config.placeholder_text, UTF8_TEXT)


def _tsvector_binary(raw: bytes) -> str:
    """tsvector's send format (lexemes with positions and weights) as tsvectorout prints it."""
    count = int.from_bytes(raw[:4], "big", signed=True)
    if count < 0 or count > len(raw):
        raise ConversionError(f"tsvector binary value claims {count} lexemes")
    pos = 4
    parts = []
    for _ in range(count):
        end = raw.index(b"\0", pos)
        lexeme = raw[pos:end].decode("utf-8")
        npos = int.from_bytes(raw[end + 1:end + 3], "big")
        pos = end + 3
        positions = []
        for _ in range(npos):
            word = int.from_bytes(raw[pos:pos + 2], "big")
            pos += 2
            weight = "DCBA"[word >> 14]
            positions.append(f"{word & 0x3FFF}{'' if weight == 'D' else weight}")
        quoted = "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"
        parts.append(quoted + (":" + ",".join(positions) if positions else ""))
    if pos != len(raw):
        raise ConversionError(f"tsvector binary value: {len(raw) - pos} trailing bytes")
    return " ".join(parts)


_TEXT = _string_mapping()

BUILDERS: Final[dict[str, Builder]] = {
    "bpchar": _TEXT, "varchar": _TEXT, "text": _TEXT, "citext": _TEXT, "name": _TEXT,
    "isbn": _TEXT,
    "char": _TEXT,
    "int4range": _range, "int8range": _range, "numrange": _range, "tsrange": _range,
    "tstzrange": _range, "daterange": _range,
    "inet": _string_mapping(None, _inet_binary), "cidr": _string_mapping(None, _inet_binary),
    "macaddr": _string_mapping(None, _macaddr_binary),
    "macaddr8": _string_mapping(None, _macaddr_binary),
    "json": _string_mapping("io.debezium.data.Json"),
    "jsonb": _string_mapping("io.debezium.data.Json", _jsonb_binary),
    "xml": _string_mapping("io.debezium.data.Xml"),
    "uuid": _string_mapping("io.debezium.data.Uuid", _uuid_binary),
    "ltree": _string_mapping("io.debezium.data.Ltree", _ltree_binary),
    "tsvector": _string_mapping("io.debezium.data.Tsvector", _tsvector_binary),
    "bytea": _bytea,
}
