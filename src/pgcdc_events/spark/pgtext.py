"""A table's event values (Arrow arrays of the Spark types) as PostgreSQL text input.

:class:`~pgcdc_events.spark.apply.PostgresTarget` writes each value as the text that
PostgreSQL's input function of the target column's type reads
(``CAST(:v AS <type>)``), chosen from the value's Arrow type and the column's
PostgreSQL type: the semantic flavour's temporal values (``time`` from an interval since
midnight, timestamps and dates past year 9999, BC and Debezium's infinity sentinels),
``VariableScaleDecimal`` structs (unconstrained ``numeric``), ``hstore`` maps or JSON,
``Bits`` bytes, points, PostGIS ``Geometry``/``Geography`` structs (EWKB), ``bytea``,
floats' ``NaN``/``Infinity``, and arrays of each. Values are converted column-wise on
the Arrow arrays, never through Python ``datetime`` (which stops at year 9999).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final

import attrs
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.compute as pc  # type: ignore[import-untyped]

from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.values import (
    DATE_NEG_INF_DAYS,
    DATE_POS_INF_DAYS,
    SPARK_DATE_MAX,
    SPARK_DATE_MIN,
    SPARK_TIMESTAMP_MAX,
    SPARK_TIMESTAMP_MIN,
    SPARK_ZONED_MAX,
    SPARK_ZONED_MIN,
    TS_NEG_INF_US,
    TS_POS_INF_US,
)
from pgcdc_events.types.temporal import civil_from_days

__all__ = ["PgColumn", "column_text"]

#: The semantic flavour's infinities (the ends of Spark's range), by time zone suffix.
_TIMESTAMP_ENDS: Final = {"": (SPARK_TIMESTAMP_MAX, SPARK_TIMESTAMP_MIN),
                          "+00": (SPARK_ZONED_MAX, SPARK_ZONED_MIN)}
_US_PER_DAY: Final = 86_400_000_000
_TEMPORAL: Final = frozenset({"date", "time", "timetz", "timestamp", "timestamptz", "interval"})
_EWKB_SRID: Final = 0x20000000


@attrs.frozen
class PgColumn:
    """A target column: its name, its type as ``format_type`` prints it (for the cast), the
    base type's name (domains resolved; an array's element type), whether it is an array,
    and the type modifier (a ``bit(n)``'s length)."""

    name: str
    sql_type: str
    base: str
    array: bool = False
    typmod: int = -1


Render = Callable[[Any], list[str | None]]


def column_text(array: Any, column: PgColumn, *, table: str) -> list[str | None]:
    """``array``'s values as text input for ``column`` (``None`` for SQL NULL)."""
    if column.array:
        if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
            raise _refuse(array.type, column, table)
        items = _flat_text(array.flatten(), column, table)
        offsets = array.offsets.to_pylist()
        valid = array.is_valid().to_pylist()
        out: list[str | None] = []
        for i, ok in enumerate(valid):
            if not ok:
                out.append(None)
                continue
            part = items[offsets[i]:offsets[i + 1]]
            out.append("{" + ",".join("NULL" if v is None else _quote_element(v)
                                      for v in part) + "}")
        return out
    return _flat_text(array, column, table)


def _refuse(arrow: Any, column: PgColumn, table: str) -> SparkDecodeError:
    hint = (" (decode with the semantic flavour: the literal one's integers do not say their"
            " unit)" if column.base in _TEMPORAL else "")
    return SparkDecodeError(f"the PostgreSQL target cannot write a value of Arrow type {arrow} "
                            f"into a column of type {column.sql_type}{hint}",
                            table=table, column=column.name)


def _flat_text(array: Any, column: PgColumn, table: str) -> list[str | None]:  # noqa: C901
    t = array.type
    base = column.base
    if pa.types.is_null(t):
        return [None] * len(array)
    if pa.types.is_timestamp(t):
        us = _micros(array, t.unit)
        zone = "+00" if t.tz is not None else ""
        return [None if v is None else _timestamp(v, zone) for v in us]
    if pa.types.is_date32(t) or pa.types.is_date64(t):
        days = array.cast(pa.int32()) if pa.types.is_date32(t) else pc.divide(
            array.cast(pa.int64()), 86_400_000)
        return [None if v is None else _date(v) for v in days.to_pylist()]
    if pa.types.is_duration(t):
        us = _micros(array, t.unit)
        if base in ("time", "timetz"):
            return [None if v is None else _time(v) for v in us]
        if base == "interval":
            return [None if v is None else f"{v} microseconds" for v in us]
        raise _refuse(t, column, table)
    if pa.types.is_integer(t):
        if base in _TEMPORAL:
            raise _refuse(t, column, table)
        return [None if v is None else str(v) for v in array.to_pylist()]
    if pa.types.is_boolean(t):
        on, off = ("1", "0") if base in ("bit", "varbit") else ("true", "false")
        return [None if v is None else (on if v else off) for v in array.to_pylist()]
    if pa.types.is_floating(t):
        return [None if v is None else _float(v) for v in array.to_pylist()]
    if pa.types.is_decimal(t):
        return [None if v is None else _decimal(v) for v in array.to_pylist()]
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        values = array.to_pylist()
        if base == "hstore":
            return [None if v is None else _hstore_from_json(v, column, table) for v in values]
        if base in ("bytea", "bit", "varbit") and any(v is not None for v in values):
            raise SparkDecodeError(
                f"a text value for a column of type {column.sql_type}: bytes under "
                "binary.handling.mode=base64/base64-url-safe/hex are text whose encoding the "
                "target cannot tell; decode with binary.handling.mode=bytes (the default)",
                table=table, column=column.name)
        return values  # type: ignore[no-any-return]
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        values = array.to_pylist()
        if base in ("bit", "varbit"):
            return [None if v is None else _bits(v, column.typmod if base == "bit" else -1)
                    for v in values]
        if base in _TEMPORAL:
            raise _refuse(t, column, table)
        return [None if v is None else "\\x" + v.hex() for v in values]
    if pa.types.is_map(t):
        if base != "hstore":
            raise _refuse(t, column, table)
        return [None if v is None else _hstore(v) for v in array.to_pylist()]
    if pa.types.is_struct(t):
        return _struct_text(array, column, table)
    raise _refuse(t, column, table)


def _micros(array: Any, unit: str) -> list[int | None]:
    raw = array.cast(pa.int64()).to_pylist()
    if unit == "us":
        return raw  # type: ignore[no-any-return]
    scale = {"s": 1_000_000, "ms": 1000, "ns": -1000}[unit]
    return [None if v is None else (v * scale if scale > 0 else v // -scale) for v in raw]


def _struct_text(array: Any, column: PgColumn, table: str) -> list[str | None]:
    t = array.type
    names = {t.field(i).name for i in range(t.num_fields)}
    valid = array.is_valid().to_pylist()
    rows = array.to_pylist()
    if names == {"scale", "unscaled"}:  # semantic VariableScaleDecimal
        return [None if not ok or r["unscaled"] is None else
                _decimal(_scaled(int(r["unscaled"]), r["scale"]))
                for ok, r in zip(valid, rows, strict=True)]
    if names == {"scale", "value"}:  # literal VariableScaleDecimal
        return [None if not ok or r["value"] is None else
                _decimal(_scaled(int.from_bytes(r["value"], "big", signed=True), r["scale"]))
                for ok, r in zip(valid, rows, strict=True)]
    if {"x", "y"} <= names and column.base == "point":
        return [None if not ok else f"({_float(r['x'])},{_float(r['y'])})"
                for ok, r in zip(valid, rows, strict=True)]
    if {"wkb", "srid"} <= names and column.base in ("geometry", "geography"):
        return [None if not ok or r["wkb"] is None else _ewkb(r["wkb"], r["srid"]).hex()
                for ok, r in zip(valid, rows, strict=True)]
    raise _refuse(t, column, table)


def _timestamp(us: int, zone: str) -> str:
    end, start = _TIMESTAMP_ENDS[zone]
    if us >= TS_POS_INF_US or us == end:
        return "infinity"
    if us <= TS_NEG_INF_US or us == start:
        return "-infinity"
    days, rest = divmod(us, _US_PER_DAY)
    year, month, day = civil_from_days(days)
    era = " BC" if year <= 0 else ""
    return f"{1 - year if era else year:04d}-{month:02d}-{day:02d} {_time(rest)}{zone}{era}"


def _date(days: int) -> str:
    if days >= DATE_POS_INF_DAYS or days == SPARK_DATE_MAX:
        return "infinity"
    if days <= DATE_NEG_INF_DAYS or days == SPARK_DATE_MIN:
        return "-infinity"
    year, month, day = civil_from_days(days)
    if year <= 0:
        return f"{1 - year:04d}-{month:02d}-{day:02d} BC"
    return f"{year:04d}-{month:02d}-{day:02d}"


def _time(us: int) -> str:
    sign = "-" if us < 0 else ""
    seconds, micro = divmod(abs(us), 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return f"{sign}{hour:02d}:{minute:02d}:{second:02d}.{micro:06d}"


def _float(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value)


def _scaled(unscaled: int, scale: int) -> Decimal:
    """``unscaled * 10**-scale``, exact at any size (no context rounding)."""
    return Decimal(f"{unscaled}E{-scale}")


def _decimal(value: Decimal) -> str:
    if not value.is_finite():
        return "NaN" if value.is_nan() else ("Infinity" if value > 0 else "-Infinity")
    return format(value, "f")


def _quote_element(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _hstore(pairs: list[tuple[str, str | None]]) -> str:
    return ", ".join(f"{_quote_element(k)}=>{'NULL' if v is None else _quote_element(v)}"
                     for k, v in pairs)


def _hstore_from_json(text: str, column: PgColumn, table: str) -> str:
    """hstore.handling.mode=json's string as hstore text (any other string as it is)."""
    try:
        obj = json.loads(text)
    except ValueError:
        return text
    if not isinstance(obj, dict):
        raise SparkDecodeError("an hstore value that is JSON but not an object",
                               table=table, column=column.name)
    return _hstore([(k, None if v is None else str(v)) for k, v in obj.items()])


def _bits(data: bytes, length: int) -> str:
    """Debezium's ``Bits`` (the bit string as a little-endian number) as a bit string of
    ``length`` bits (``bit(n)``; a ``varbit`` has lost its leading zeros: the number's
    own length)."""
    number = int.from_bytes(data, "little")
    if length < 0:
        return format(number, "b") if number else ""
    return format(number, f"0{length}b")


def _ewkb(wkb: bytes, srid: int | None) -> bytes:
    """A Geometry/Geography struct's WKB with its SRID, as PostGIS' extended WKB."""
    if srid is None or len(wkb) < 5:
        return wkb
    order = "<" if wkb[0] == 1 else ">"
    (kind,) = struct.unpack_from(order + "I", wkb, 1)
    if kind & _EWKB_SRID:
        return wkb
    return (wkb[:1] + struct.pack(order + "I", kind | _EWKB_SRID)
            + struct.pack(order + "I", srid) + wkb[5:])
