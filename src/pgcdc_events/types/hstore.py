"""The hstore extension type, as JSON text or a Connect map (``hstore.handling.mode``).

Debezium parses hstore text with pgjdbc's ``HStoreConverter.fromString`` into a
``java.util.HashMap`` and then iterates that map: the JSON string (json mode)
and the Connect map (map mode, serialized by JsonConverter in the map's
iteration order) list the pairs in Java HashMap order, not in PostgreSQL's.
The golden recordings show it (``{"a":"1","new":"val","b":null}`` for
``"a"=>"1", "b"=>NULL, "new"=>"val"``), so :func:`java_hashmap_order`
reproduces that order exactly, tree bins included.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable
from typing import Any, Final

from pgcdc_events.errors import ConversionError
from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.javafmt import jackson_string
from pgcdc_events.types.javahash import java_hashmap_order, java_string_hash
from pgcdc_events.types.mapping import Builder, ValueMapping
from pgcdc_events.types.registry import PgType
from pgcdc_events.types.schema import Schema, map_schema

__all__ = [
    "BUILDERS",
    "hstore_from_binary",
    "hstore_from_text",
    "java_hashmap_order",
    "java_json_object",
    "java_string_hash",
]

# ---------------------------------------------------------------- parsing

_WS: Final = " \t\n\r\v\f"
# The "unrolled loop": its two parts never match the same text, so no backtracking blow-up.
_QUOTED: Final = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"', re.DOTALL)
_ARROW: Final = re.compile(r"[ \t\n\r\v\f]*=>[ \t\n\r\v\f]*")
_NULL: Final = re.compile(r"NULL(?![^,\s])", re.IGNORECASE)
_SEPARATOR: Final = re.compile(r"[ \t\n\r\v\f]*(,)?[ \t\n\r\v\f]*")
_ESCAPE: Final = re.compile(r"\\(.)", re.DOTALL)


def _unescape(text: str) -> str:
    return _ESCAPE.sub(r"\1", text) if "\\" in text else text


def _quoted(text: str, pos: int, what: str) -> tuple[str, int]:
    match = _QUOTED.match(text, pos)
    if match is None:
        raise ConversionError(f"hstore: expected a double-quoted {what} at character {pos}")
    return _unescape(match.group(1)), match.end()


def hstore_from_text(raw: bytes) -> dict[str, str | None]:
    """Parse hstore's text output (``"k"=>"v", "k2"=>NULL``) in linear time, in text order.

    A repeated key keeps its first position and its last value, as a Java
    ``HashMap`` fed the pairs in order would.
    """
    text = raw.decode("utf-8")
    out: dict[str, str | None] = {}
    pos, end = 0, len(text)
    while pos < end and text[pos] in _WS:
        pos += 1
    while pos < end:
        key, pos = _quoted(text, pos, "key")
        arrow = _ARROW.match(text, pos)
        if arrow is None:
            raise ConversionError(f"hstore: expected '=>' at character {pos}")
        pos = arrow.end()
        null = _NULL.match(text, pos)
        if null is not None:
            value: str | None = None
            pos = null.end()
        else:
            value, pos = _quoted(text, pos, "value")
        out[key] = value
        sep = _SEPARATOR.match(text, pos)
        assert sep is not None  # the pattern matches the empty string
        pos = sep.end()
        if sep.group(1) is None and pos < end:
            raise ConversionError(f"hstore: expected ',' at character {pos}")
    return out


def _chunk(raw: bytes, pos: int, length: int, what: str) -> str:
    if length < 0 or pos + length > len(raw):
        raise ConversionError(f"hstore binary: {what} length {length} exceeds the value")
    try:
        return raw[pos:pos + length].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConversionError(f"hstore binary: {what} is not UTF-8: {exc}") from None


def hstore_from_binary(raw: bytes) -> dict[str, str | None]:
    """Decode hstore's send format: int32 count, then (int32 len, key, int32 len or -1, value)."""
    if len(raw) < 4:
        raise ConversionError("hstore binary: missing pair count")
    (count,) = struct.unpack_from(">i", raw, 0)
    if count < 0 or count * 8 > len(raw) - 4:  # each pair needs at least two lengths
        raise ConversionError(f"hstore binary: pair count {count} exceeds the value")
    out: dict[str, str | None] = {}
    pos = 4
    for _ in range(count):
        if pos + 4 > len(raw):
            raise ConversionError("hstore binary: truncated key length")
        (klen,) = struct.unpack_from(">i", raw, pos)
        key = _chunk(raw, pos + 4, klen, "key")
        pos += 4 + klen
        if pos + 4 > len(raw):
            raise ConversionError("hstore binary: truncated value length")
        (vlen,) = struct.unpack_from(">i", raw, pos)
        pos += 4
        if vlen == -1:
            out[key] = None
        else:
            out[key] = _chunk(raw, pos, vlen, "value")
            pos += vlen
    if pos != len(raw):
        raise ConversionError(f"hstore binary: {len(raw) - pos} trailing bytes")
    return out


def java_json_object(pairs: Iterable[tuple[str, str | None]]) -> str:
    """``{"k":"v","k2":null}``, as Jackson's ``JsonGenerator`` writes string fields."""
    body = ",".join(
        f"{jackson_string(k)}:{'null' if v is None else jackson_string(v)}" for k, v in pairs
    )
    return "{" + body + "}"


# ---------------------------------------------------------------- mapping


def _java_ordered(pairs: dict[str, str | None]) -> dict[str, str | None]:
    items = list(pairs.items())
    if len(items) < 2:
        return pairs
    return dict(items[i] for i in java_hashmap_order([k for k, _ in items]))


def _as_json(parse: Any) -> Any:
    return lambda raw: java_json_object(_java_ordered(parse(raw)).items())


def _as_map(parse: Any) -> Any:
    return lambda raw: _java_ordered(parse(raw))


def _hstore(t: PgType, typmod: int, config: TypeConfig) -> ValueMapping:
    """json mode: an ``io.debezium.data.Json`` string; map mode: map<string, optional string>."""
    placeholder = config.unavailable_value_placeholder.decode("utf-8", "replace")
    if config.hstore_handling_mode == "map":
        schema = map_schema(Schema("string"), Schema("string", optional=True))
        return ValueMapping(schema, _as_map(hstore_from_text), _as_map(hstore_from_binary),
                            {placeholder: placeholder})
    schema = Schema("string", name="io.debezium.data.Json", version=1)
    return ValueMapping(schema, _as_json(hstore_from_text), _as_json(hstore_from_binary),
                        java_json_object([(placeholder, placeholder)]))


BUILDERS: Final[dict[str, Builder]] = {"hstore": _hstore}
