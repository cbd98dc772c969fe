"""Connect values as Spark values: Arrow arrays for the fast path, Python objects for UDFs.

A :class:`ValueConverter` is built once per Connect schema and flavour. Its
:meth:`~ValueConverter.array` turns a list of Connect values (what the type
mapper's converters return) into an Arrow array of exactly the type Spark
exchanges for the column; the semantic flavour is an Arrow-to-Arrow transform of
the literal array, vectorized wherever Arrow can do it exactly.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.compute as pc  # type: ignore[import-untyped]

from pgcdc_events.spark._session import arrow_type
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.schema import (
    DATE_NAMES,
    DECIMAL_MAX_PRECISION,
    DURATION_NAMES,
    TIME_NAMES,
    TIMESTAMP_NAMES,
    VARIABLE_SCALE_DECIMAL,
    ZONED_TIMESTAMP,
    SparkSchemaOptions,
    decimal_type,
    spark_type,
)
from pgcdc_events.types.jsonvalue import DECIMAL_LOGICAL
from pgcdc_events.types.schema import Schema, Struct
from pgcdc_events.types.temporal import days_from_civil

__all__ = [
    "DATE_NEG_INF_DAYS",
    "DATE_POS_INF_DAYS",
    "SPARK_DATE_MAX",
    "SPARK_DATE_MIN",
    "SPARK_TIMESTAMP_MAX",
    "SPARK_TIMESTAMP_MIN",
    "SPARK_ZONED_MAX",
    "SPARK_ZONED_MIN",
    "TS_NEG_INF_US",
    "TS_POS_INF_US",
    "ValueConverter",
    "parse_zoned_timestamp",
]

ArrayFn = Callable[[Any], Any]

#: Debezium's MicroTimestamp sentinels for timestamp infinities (also used for ZonedTimestamp).
TS_POS_INF_US: Final = 9_223_372_036_825_200_000
TS_NEG_INF_US: Final = -9_223_372_036_832_400_000
#: Debezium's io.debezium.time.Date sentinels for date infinities (days since 1970).
DATE_POS_INF_DAYS: Final = 2_146_033_979
DATE_NEG_INF_DAYS: Final = -2_147_472_691
_INT64_MAX: Final = 2**63 - 1
_INT64_MIN: Final = -(2**63)
_US_PER_DAY: Final = 86_400_000_000
#: Where the semantic flavour puts ``infinity`` and ``-infinity``: the ends of Spark's
#: documented range for DateType and TimestampNTZType, which is Python's (``date.max``,
#: ``datetime.max``...): days and microseconds since 1970. Debezium's sentinels (year
#: 294247, 5877611) are outside it, and ``collect()`` raised "year 294247 is out of range".
SPARK_DATE_MAX: Final = 2_932_896            # 9999-12-31
SPARK_DATE_MIN: Final = -719_162             # 0001-01-01
SPARK_TIMESTAMP_MAX: Final = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999
SPARK_TIMESTAMP_MIN: Final = -62_135_596_800_000_000  # 0001-01-01T00:00:00
#: TimestampType (``timestamptz``): the same ends one day in, because ``collect()`` shows an
#: instant in the Python process's local time zone, which must stay within years 1..9999.
SPARK_ZONED_MAX: Final = SPARK_TIMESTAMP_MAX - _US_PER_DAY  # 9999-12-30T23:59:59.999999Z
SPARK_ZONED_MIN: Final = SPARK_TIMESTAMP_MIN + _US_PER_DAY  # 0001-01-02T00:00:00Z
#: The infinity sentinels of each integer temporal type, in its own unit (types.temporal):
#: MicroTimestamp's; Timestamp's in milliseconds; NanoTimestamp's Long.MAX/MIN_VALUE.
_TIMESTAMP_INFINITIES: Final = {
    1: (TS_POS_INF_US, TS_NEG_INF_US),
    1000: (TS_POS_INF_US // 1000, TS_NEG_INF_US // 1000),
    -1000: (_INT64_MAX, _INT64_MIN),
}
_ZONED: Final = re.compile(
    r"([+-]?)(\d{4,})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?Z")
_HALF_UP: Final = decimal.Context(prec=200_000, rounding=decimal.ROUND_HALF_UP,
                                  Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
_LITERAL_NULLABLE: Final = SparkSchemaOptions("literal", respect_optional=False)


class ValueConverter:
    """Connect values of one schema to Spark values of one flavour.

    ``arrow_type`` is the Arrow type Spark exchanges for the column (every nested
    field nullable), ``literal_type`` the Arrow type of the literal flavour.
    """

    __slots__ = ("_prep", "_python", "_semantic", "arrow_type", "literal_type", "options",
                 "schema", "spark_type")

    def __init__(self, schema: Schema, options: SparkSchemaOptions) -> None:
        nullable = SparkSchemaOptions(options.flavour, options.variable_scale_decimal_scale,
                                      respect_optional=False)
        self.schema = schema
        self.options = options
        self.spark_type = spark_type(schema, options)
        self.arrow_type = arrow_type(spark_type(schema, nullable))
        self.literal_type = arrow_type(spark_type(schema, _LITERAL_NULLABLE))
        self._prep = _prep(schema)
        self._python = _python(schema)
        self._semantic = (_semantic(schema, options, self.literal_type)
                          if options.flavour == "semantic" else None)

    def array(self, values: list[Any]) -> pa.Array:
        """An Arrow array of the column's Spark type from Connect values (``None`` is null)."""
        prep = self._prep
        if prep is not None:
            values = [None if v is None else prep(v) for v in values]
        return self.from_literal(pa.array(values, type=self.literal_type))

    def from_literal(self, array: pa.Array) -> pa.Array:
        """The column's array from an array of the literal flavour."""
        return array if self._semantic is None else self._semantic(array)

    def python(self, value: Any) -> Any:
        """One Connect value as the Python object Spark accepts for the literal flavour."""
        if value is None or self._python is None:
            return value
        return self._python(value)

    @property
    def identity(self) -> bool:
        """Whether literal arrays are already the column's arrays (no semantic transform)."""
        return self._semantic is None


# -- literal: Connect values as Arrow-ready Python values ----------------------------------


def _prep(schema: Schema) -> Callable[[Any], Any] | None:
    """A function making one (non-null) Connect value ready for ``pa.array``; None: as is."""
    kind = schema.type
    if schema.name == DECIMAL_LOGICAL:
        return None if decimal_type(schema) is not None else _plain_decimal
    if kind == "struct":
        names = [f.name for f in schema.fields or ()]
        children = [_prep(f.schema) for f in schema.fields or ()]

        def struct(value: Any) -> Any:
            items = value.values if isinstance(value, Struct) else tuple(value[n] for n in names)
            return {n: (v if p is None or v is None else p(v))
                    for n, p, v in zip(names, children, items, strict=True)}

        return struct
    if kind == "array":
        assert schema.items is not None
        item = _prep(schema.items)
        if item is None:
            return None
        return lambda value: [None if v is None else item(v) for v in value]
    if kind == "map":
        assert schema.values is not None
        inner = _prep(schema.values)
        if inner is None:
            return lambda value: list(value.items())
        return lambda value: [(k, None if v is None else inner(v)) for k, v in value.items()]
    return None


def _python(schema: Schema) -> Callable[[Any], Any] | None:
    """A function making one Connect value the Python object Spark takes for literal rows."""
    kind = schema.type
    if schema.name == DECIMAL_LOGICAL:
        return None if decimal_type(schema) is not None else _plain_decimal
    if kind == "struct":
        children = [_python(f.schema) for f in schema.fields or ()]

        def struct(value: Any) -> Any:
            items = value.values if isinstance(value, Struct) else tuple(value)
            return tuple(v if p is None or v is None else p(v)
                         for p, v in zip(children, items, strict=True))

        return struct
    if kind == "array":
        assert schema.items is not None
        item = _python(schema.items)
        if item is None:
            return None
        return lambda value: [None if v is None else item(v) for v in value]
    if kind == "map":
        assert schema.values is not None
        inner = _python(schema.values)
        if inner is None:
            return None
        return lambda value: {k: None if v is None else inner(v) for k, v in value.items()}
    return None


def _plain_decimal(value: Any) -> str:
    """A decimal Spark cannot hold, as its exact plain text (the documented fallback)."""
    return format(Decimal(value), "f")


# -- semantic: literal arrays to Spark's types ------------------------------------------------


def _semantic(schema: Schema, options: SparkSchemaOptions, literal: pa.DataType  # noqa: C901
              ) -> ArrayFn | None:
    """The transform of a literal array into its semantic array (None: the same array)."""
    name = schema.name
    if name == DECIMAL_LOGICAL:
        return None
    if name in DATE_NAMES:
        return lambda a: _infinities(a, (DATE_POS_INF_DAYS, DATE_NEG_INF_DAYS), a,
                                     (SPARK_DATE_MAX, SPARK_DATE_MIN)).cast(pa.date32())
    if name in TIMESTAMP_NAMES:
        scaled = _scaled(TIMESTAMP_NAMES[name], pa.int64())
        sentinels = _TIMESTAMP_INFINITIES[TIMESTAMP_NAMES[name]]
        return lambda a: _infinities(a, sentinels, scaled(a), (
            SPARK_TIMESTAMP_MAX, SPARK_TIMESTAMP_MIN)).cast(pa.timestamp("us"))
    if name in TIME_NAMES:
        return _scaled(TIME_NAMES[name], pa.duration("us"))
    if name in DURATION_NAMES:
        return _scaled(1, pa.duration("us"))
    if name == ZONED_TIMESTAMP:
        return _zoned_timestamps
    if name == VARIABLE_SCALE_DECIMAL:
        return _variable_scale(options.variable_scale_decimal_scale)
    kind = schema.type
    if kind == "array":
        assert schema.items is not None
        item = _semantic(schema.items, options, literal.value_type)
        if item is None:
            return None
        target = arrow_type(spark_type(schema, SparkSchemaOptions(
            options.flavour, options.variable_scale_decimal_scale, respect_optional=False)))

        def items(a: Any) -> Any:
            return pa.ListArray.from_arrays(a.offsets, item(a.values), type=target,
                                            mask=a.is_null() if a.null_count else None)

        return items
    if kind == "struct":
        fields = list(schema.fields or ())
        children = [_semantic(f.schema, options, literal.field(i).type)
                    for i, f in enumerate(fields)]
        if all(c is None for c in children):
            return None
        target = arrow_type(spark_type(schema, SparkSchemaOptions(
            options.flavour, options.variable_scale_decimal_scale, respect_optional=False)))

        def struct(a: Any) -> Any:
            # flatten(): the children with the struct's nulls (field() ignores them).
            flat = a.flatten()
            arrays = [f if c is None else c(f) for f, c in zip(flat, children, strict=True)]
            return pa.StructArray.from_arrays(arrays, fields=list(target),
                                              mask=a.is_null() if a.null_count else None)

        return struct
    if kind == "map":
        assert schema.values is not None
        value = _semantic(schema.values, options, literal.item_type)
        if value is None:
            return None
        raise SparkDecodeError(f"no semantic form for map values of {schema.values!r}")
    return None


def _scaled(units_per_us: int, target: pa.DataType) -> ArrayFn:
    """Integers in some unit to microseconds (``units_per_us`` > 0 multiplies, < 0 divides,
    flooring), then viewed as ``target``; products past int64 saturate."""

    def convert(a: Any) -> Any:
        a = a.cast(pa.int64())
        if units_per_us > 1:
            try:
                a = pc.multiply_checked(a, units_per_us)
            except pa.ArrowInvalid:
                a = pa.array([None if v is None else max(_INT64_MIN, min(_INT64_MAX,
                                                                          v * units_per_us))
                              for v in a.to_pylist()], pa.int64())
        elif units_per_us < 0:
            a = pa.array([None if v is None else v // -units_per_us for v in a.to_pylist()],
                         pa.int64())
        return a.cast(target)

    return convert


def _infinities(literal: Any, sentinels: tuple[int, int], values: Any,
                bounds: tuple[int, int]) -> Any:
    """``values`` (integers) with the places where ``literal`` holds the type's infinity
    sentinels (``+``, ``-``) replaced by ``bounds`` (the ends of Spark's range)."""
    if not len(literal):
        return values
    plus = pc.equal(literal, pa.scalar(sentinels[0], literal.type))
    minus = pc.equal(literal, pa.scalar(sentinels[1], literal.type))
    if not (pc.any(plus).as_py() or pc.any(minus).as_py()):
        return values
    values = pc.if_else(plus, pa.scalar(bounds[0], values.type), values)
    return pc.if_else(minus, pa.scalar(bounds[1], values.type), values)


def parse_zoned_timestamp(text: str) -> int:
    """An ``io.debezium.time.ZonedTimestamp`` string as microseconds since 1970 (UTC).

    ``infinity``/``-infinity`` give the MicroTimestamp sentinels; years may be
    signed or longer than four digits, as java.time prints them.
    """
    if text == "infinity":
        return TS_POS_INF_US
    if text == "-infinity":
        return TS_NEG_INF_US
    match = _ZONED.fullmatch(text)
    if match is None:
        raise SparkDecodeError(f"not an io.debezium.time.ZonedTimestamp: {text!r}")
    sign, year, month, day, hour, minute, second, fraction = match.groups()
    days = days_from_civil(-int(year) if sign == "-" else int(year), int(month), int(day))
    micros = int((fraction or "").ljust(6, "0")[:6])
    return (days * _US_PER_DAY + ((int(hour) * 60 + int(minute)) * 60 + int(second)) * 1_000_000
            + micros)


_UTC_US: Final = pa.timestamp("us", tz="UTC")


_ZONED_INFINITIES: Final = {"infinity": SPARK_ZONED_MAX, "-infinity": SPARK_ZONED_MIN}


def _zoned_timestamps(a: Any) -> Any:
    try:
        return pc.cast(a, _UTC_US)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    micros = [None if s is None else _ZONED_INFINITIES.get(s) or parse_zoned_timestamp(s)
              for s in a.to_pylist()]
    # Past int64 microseconds (after 294247-01-10): null, as MicroTimestamp has it.
    return pa.array([m if m is None or _INT64_MIN <= m <= _INT64_MAX else None for m in micros],
                    pa.int64()).cast(_UTC_US)


def _variable_scale(scale: int | None) -> ArrayFn:
    """VariableScaleDecimal structs to ``{scale, unscaled (base 10)}`` or ``DecimalType(38, s)``."""
    if scale is None:
        target = pa.struct([pa.field("scale", pa.int32()), pa.field("unscaled", pa.string())])

        def to_struct(a: Any) -> Any:
            scale, value = a.flatten()
            raw = value.to_pylist()
            # Through Decimal: str() of a huge int is capped (sys.get_int_max_str_digits).
            unscaled = [None if v is None else str(Decimal(int.from_bytes(v, "big", signed=True)))
                        for v in raw]
            return pa.StructArray.from_arrays([scale, pa.array(unscaled, pa.string())],
                                              fields=list(target),
                                              mask=a.is_null() if a.null_count else None)

        return to_struct
    quantum = Decimal((0, (1,), -scale))
    limit = Decimal(10) ** (DECIMAL_MAX_PRECISION - scale)

    def to_decimal(a: Any) -> Any:
        out: list[Decimal | None] = []
        for item in a.to_pylist():
            if item is None or item["value"] is None:
                out.append(None)
                continue
            unscaled = int.from_bytes(item["value"], "big", signed=True)
            value = Decimal(unscaled).scaleb(-item["scale"], _HALF_UP).quantize(
                quantum, context=_HALF_UP)
            out.append(value if abs(value) < limit else None)
        return pa.array(out, pa.decimal128(DECIMAL_MAX_PRECISION, scale))

    return to_decimal
