"""Length and scale of a column as the PostgreSQL JDBC driver reports them.

Debezium fills the ``__debezium.source.column.length``/``scale`` schema
parameters (``column.propagate.source.type``) from pgjdbc's
``TypeInfoCache.getPrecision``/``getScale``/``getDisplaySize``; arrays report
their element's figures, domains their base type's with the domain's modifier.
"""

from __future__ import annotations

from typing import Final

from pgcdc_events.types.registry import PgType
from pgcdc_events.types.schema import Schema

__all__ = ["SOURCE_PARAMETER_PREFIX", "UNKNOWN_LENGTH", "source_length_scale",
           "without_source_parameters"]

#: The prefix of the schema parameters ``column.propagate.source.type`` adds.
SOURCE_PARAMETER_PREFIX: Final = "__debezium.source.column."

#: pgjdbc's ``unknownLength``.
UNKNOWN_LENGTH: Final = 2147483647

_FIXED: Final[dict[str, tuple[int, int]]] = {
    "int2": (5, 0), "int4": (10, 0), "oid": (10, 0), "int8": (19, 0), "float4": (8, 8),
    "float8": (17, 17), "bool": (1, 0), "date": (13, 0), "char": (1, 0),
}


def _seconds_size(typmod: int) -> int:
    if typmod == -1:
        return 7
    if typmod == 0:
        return 0
    if typmod == 1:
        return 3
    return typmod + 1


def source_length_scale(pg_type: PgType, typmod: int) -> tuple[int, int]:
    """``(length, scale)`` of a column of ``pg_type`` with modifier ``typmod``."""
    t = pg_type
    while t.kind == "domain" and t.base is not None:
        if typmod == -1:
            typmod = t.base_type_modifier
        t = t.base
    if t.kind == "array" and t.element is not None:
        return source_length_scale(t.element, typmod)
    name = t.name
    if name in _FIXED:
        return _FIXED[name]
    if name == "numeric":
        if typmod == -1:
            return 131089, 0
        return ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
    if name in ("bpchar", "varchar"):
        return (UNKNOWN_LENGTH if typmod == -1 else typmod - 4), 0
    if name in ("bit", "varbit"):
        return (UNKNOWN_LENGTH if typmod == -1 else typmod), 0
    precision = 6 if typmod == -1 else typmod
    if name == "time":
        return 8 + _seconds_size(typmod), precision
    if name == "timetz":
        return 8 + _seconds_size(typmod) + 6, precision
    if name == "timestamp":
        return 22 + _seconds_size(typmod), precision
    if name == "timestamptz":
        return 22 + _seconds_size(typmod) + 6, precision
    if name == "interval":
        return 49, (6 if typmod == -1 else typmod & 0xFFFF)
    return UNKNOWN_LENGTH, 0


def without_source_parameters(schema: Schema) -> Schema:
    """``schema`` without the source-type parameters: Debezium adds them to the fields of
    the value only, never to the key's (nor to the ``__debezium.newkey``/``oldkey`` headers)."""
    params = schema.parameters
    if not params or not any(k.startswith(SOURCE_PARAMETER_PREFIX) for k, _ in params):
        return schema
    kept = tuple((k, v) for k, v in params if not k.startswith(SOURCE_PARAMETER_PREFIX))
    return schema.with_(parameters=kept or None)
