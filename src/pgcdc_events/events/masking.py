"""Column transforms the connector applies itself: truncation, masking and hashing.

``column.truncate.to.N.chars`` keeps the first N characters, ``column.mask.with.N.chars``
replaces a value by N asterisks, and ``column.mask.hash[.v2].<algorithm>.with.salt.<salt>``
replaces it by a salted hash in hex, cut to the column's length. Columns are matched
as ``schema.table.column``; the first matching rule wins (truncation, then masking,
then hashing); the rules apply to character columns (char, varchar, text, name), as
Debezium's do. Lengths count UTF-16 code units, as Java strings
do. The hashing was checked against Debezium's own ``MaskStrings`` converter.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

import attrs

from pgcdc_events.events.config import HASH_ALGORITHMS, ColumnHashMask, EventConfig
from pgcdc_events.types.registry import PgType
from pgcdc_events.types.schema import Schema
from pgcdc_events.types.source_type import source_length_scale

__all__ = ["ColumnTransform", "column_transform", "hash_mask", "java_serialized_string"]


def _utf16_len(text: str) -> int:
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def _utf16_prefix(text: str, units: int) -> str:
    if _utf16_len(text) <= units:
        return text
    out = []
    used = 0
    for ch in text:
        size = 2 if ord(ch) > 0xFFFF else 1
        if used + size > units:
            break  # Java would cut a surrogate pair in half; a lone surrogate is not text
        out.append(ch)
        used += size
    return "".join(out)


def java_serialized_string(text: str) -> bytes:
    """``ObjectOutputStream.writeObject(String)``: stream header, TC_STRING, modified UTF-8."""
    body = bytearray()
    for ch in text:
        code = ord(ch)
        units = [code] if code <= 0xFFFF else [0xD800 + ((code - 0x10000) >> 10),
                                                0xDC00 + ((code - 0x10000) & 0x3FF)]
        for unit in units:
            if 0 < unit < 0x80:
                body.append(unit)
            elif unit < 0x800:
                body += bytes((0xC0 | unit >> 6, 0x80 | unit & 0x3F))
            else:
                body += bytes((0xE0 | unit >> 12, 0x80 | unit >> 6 & 0x3F, 0x80 | unit & 0x3F))
    return b"\xac\xed\x00\x05t" + struct.pack(">H", len(body)) + bytes(body)


def hash_mask(mask: ColumnHashMask) -> Callable[[Any], Any]:
    """The hashing function of one ``column.mask.hash`` rule."""
    import hashlib  # noqa: PLC0415 - OpenSSL loads only for a hash mask (decode's start-up)

    algorithm = HASH_ALGORITHMS[mask.algorithm]
    salt = mask.salt.encode("utf-8")

    def hashed(value: Any) -> Any:
        if value is None:
            return None
        text = str(value)
        digest = hashlib.new(algorithm)
        digest.update(salt)
        # v1 hashes the Java-serialized String, v2 its UTF-8 bytes (read off MaskStrings).
        digest.update(text.encode("utf-8") if mask.v2 else java_serialized_string(text))
        return digest.hexdigest()

    return hashed


@attrs.frozen
class ColumnTransform:
    """A column's transform, the schema its values then have, and whether NULLs are transformed."""

    fn: Callable[[Any], Any]
    schema: Schema
    applies_to_null: bool


#: Types whose JDBC type is character-like (CHAR, VARCHAR), the only ones Debezium's
#: TruncateStrings and MaskStrings act on.
CHARACTER_TYPES: Final = frozenset({"bpchar", "varchar", "text", "name", "char"})


def column_transform(config: EventConfig, schema_name: str, table: str, column: str,
                     schema: Schema, pg_type: PgType, typmod: int) -> ColumnTransform | None:
    """The transform configured for a column, if any (character columns only)."""
    full = f"{schema_name}.{table}.{column}"
    if pg_type.root.name not in CHARACTER_TYPES or schema.type != "string":
        return None
    column_length, _ = source_length_scale(pg_type, typmod)
    for length, patterns in config.truncate_to_chars:
        if any(p.fullmatch(full) for p in patterns):
            def truncate(value: Any, n: int = length) -> Any:
                return value if not isinstance(value, str) else _utf16_prefix(value, n)
            # The parameter only says something when the column can be longer.
            truncated = (_with_param(schema, "truncateLength", str(length))
                         if column_length > length else schema)
            return ColumnTransform(truncate, truncated, False)
    for length, patterns in config.mask_with_chars:
        if any(p.fullmatch(full) for p in patterns):
            def mask(value: Any, stars: str = "*" * length) -> Any:
                return stars
            # Debezium masks NULLs too (golden: events/events-filters-masking, ev_main.secret).
            return ColumnTransform(mask, _with_param(schema, "masked", "true"), True)
    for rule in config.mask_with_hash:
        if any(p.fullmatch(full) for p in rule.columns):
            return ColumnTransform(_cut(hash_mask(rule), column_length),
                                   _with_param(schema, "masked", "true"), False)
    return None


def _cut(hashed: Callable[[Any], Any], width: int) -> Callable[[Any], Any]:
    """Debezium cuts the hex digest to the column's length (a varchar(10) gets 10 chars)."""
    def cut(value: Any) -> Any:
        digest = hashed(value)
        return digest if digest is None else digest[:width]

    return cut


def _with_param(schema: Schema, name: str, value: str) -> Schema:
    return schema.with_(parameters=(*(schema.parameters or ()), (name, value)))
