"""Kafka Connect schemas as Spark types, in two flavours.

*literal* keeps exactly the Connect types: ``io.debezium.time.Date`` stays an
``int``, ``MicroTimestamp`` a ``long``, a ``VariableScaleDecimal`` its struct of
scale and unscaled bytes; only Connect's ``Decimal`` becomes ``DecimalType(p, s)``.
*semantic* turns Debezium's semantic types into Spark's own:

- ``io.debezium.time.Date`` and Connect ``Date``: ``DateType``;
- ``io.debezium.time.Timestamp``, ``MicroTimestamp``, ``NanoTimestamp`` and Connect
  ``Timestamp``: ``TimestampNTZType``;
- ``io.debezium.time.ZonedTimestamp`` (a string): ``TimestampType``; ``infinity``
  and ``-infinity`` become the MicroTimestamp sentinels Debezium uses for
  timestamps, instants past int64 microseconds (after 294247-01-10) null, as
  MicroTimestamp has them;
- ``io.debezium.time.Time``, ``MicroTime``, ``NanoTime`` and Connect ``Time``:
  ``DayTimeIntervalType(HOUR, SECOND)``, the time since midnight (Spark's
  ``TimeType`` cannot hold PostgreSQL's ``24:00:00``);
- ``io.debezium.time.MicroDuration``: ``DayTimeIntervalType(DAY, SECOND)``;
- ``io.debezium.data.VariableScaleDecimal``: ``struct<scale: int, unscaled: string>``
  (the unscaled value in base 10, exact at any size), or ``DecimalType(38, s)`` with
  ``variable_scale_decimal_scale=s``;
- everything else as in *literal*: Json, Xml, Uuid, Enum, Ltree, Tsvector,
  ZonedTime, IsoDate, IsoTime, IsoTimestamp and Interval stay strings, Bits
  bytes, Geometry, Geography and Point their structs, hstore maps maps.

In both flavours a Connect ``Decimal`` whose precision and scale fit Spark's
(``0 <= scale <= precision <= 38``; precision 38 when Connect gives none, as for
``money``) is a ``DecimalType``; any other (``numeric(50, 2)``, PostgreSQL 15's
negative scales) falls back to ``StringType`` holding the exact plain decimal
(``"-1234.50"``), never to a runtime failure. Arrays keep their items'
optionality as ``containsNull``, maps their values' as ``valueContainsNull``.

:func:`json_record_type` gives the schema of the Debezium JSON records
themselves (Kafka's JsonConverter output, with or without the
``schema``/``payload`` wrapper) for ``from_json``.
"""

from __future__ import annotations

from typing import Final, Literal

import attrs
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from pgcdc_events.events.config import EventConfig, JsonConverterConfig
from pgcdc_events.events.tables import TableSchema
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.types.jsonvalue import DECIMAL_LOGICAL
from pgcdc_events.types.numeric import DECIMAL_MAX, decimal_parameters
from pgcdc_events.types.schema import Schema

__all__ = [
    "DATE_NAMES",
    "DECIMAL_MAX_PRECISION",
    "DURATION_NAMES",
    "TIMESTAMP_NAMES",
    "TIME_NAMES",
    "Flavour",
    "SparkSchemaOptions",
    "decimal_type",
    "envelope_type",
    "json_record_type",
    "json_type",
    "key_type",
    "spark_type",
    "struct_type",
]

Flavour = Literal["literal", "semantic"]

#: Spark's largest decimal precision.
DECIMAL_MAX_PRECISION: Final = DECIMAL_MAX

DATE_NAMES: Final = frozenset({"io.debezium.time.Date", "org.apache.kafka.connect.data.Date"})
#: Timestamp names and how many of their units make a microsecond (negative: units per µs).
TIMESTAMP_NAMES: Final = {
    "io.debezium.time.Timestamp": 1000,
    "org.apache.kafka.connect.data.Timestamp": 1000,
    "io.debezium.time.MicroTimestamp": 1,
    "io.debezium.time.NanoTimestamp": -1000,
}
TIME_NAMES: Final = {
    "io.debezium.time.Time": 1000,
    "org.apache.kafka.connect.data.Time": 1000,
    "io.debezium.time.MicroTime": 1,
    "io.debezium.time.NanoTime": -1000,
}
DURATION_NAMES: Final = frozenset({"io.debezium.time.MicroDuration"})
ZONED_TIMESTAMP: Final = "io.debezium.time.ZonedTimestamp"
VARIABLE_SCALE_DECIMAL: Final = "io.debezium.data.VariableScaleDecimal"

_PRIMITIVES: Final[dict[str, DataType]] = {
    "int8": ByteType(), "int16": ShortType(), "int32": IntegerType(), "int64": LongType(),
    "float32": FloatType(), "float64": DoubleType(), "boolean": BooleanType(),
    "string": StringType(), "bytes": BinaryType(),
}
_TIME_OF_DAY: Final = DayTimeIntervalType(DayTimeIntervalType.HOUR, DayTimeIntervalType.SECOND)
_DURATION: Final = DayTimeIntervalType(DayTimeIntervalType.DAY, DayTimeIntervalType.SECOND)


@attrs.frozen
class SparkSchemaOptions:
    """How Connect schemas become Spark types.

    ``flavour`` is ``literal`` or ``semantic`` (see the module documentation);
    ``variable_scale_decimal_scale`` opts semantic ``VariableScaleDecimal`` fields
    into ``DecimalType(38, s)`` (values rounded half-up to ``s`` digits; a value
    with more than ``38 - s`` integer digits becomes null). ``respect_optional``
    maps Connect's optionality to Spark's nullability; without it every field is
    nullable (what the decoder declares: sinks such as Delta turn non-nullable
    columns into NOT NULL constraints, and optionality can change across schema
    versions).
    """

    flavour: Flavour = "semantic"
    variable_scale_decimal_scale: int | None = None
    respect_optional: bool = True

    def __attrs_post_init__(self) -> None:
        if self.flavour not in ("literal", "semantic"):
            raise SparkDecodeError(f"unknown schema flavour {self.flavour!r}; "
                                   "use 'literal' or 'semantic'")
        scale = self.variable_scale_decimal_scale
        if scale is not None and not 0 <= scale <= DECIMAL_MAX_PRECISION:
            raise SparkDecodeError(f"variable_scale_decimal_scale must be within 0..38, "
                                   f"got {scale}")


LITERAL: Final = SparkSchemaOptions("literal")
SEMANTIC: Final = SparkSchemaOptions("semantic")


def decimal_type(schema: Schema) -> DecimalType | None:
    """The ``DecimalType`` of a Connect ``Decimal`` schema (``None``: too wide for Spark)."""
    decimal = decimal_parameters(schema)
    return None if decimal is None else DecimalType(*decimal)


def spark_type(schema: Schema, options: SparkSchemaOptions = SEMANTIC) -> DataType:
    """The Spark type of values of Connect ``schema``."""
    name = schema.name
    kind = schema.type
    if name == DECIMAL_LOGICAL:
        return decimal_type(schema) or StringType()
    if options.flavour == "semantic" and name is not None:
        semantic = _semantic(schema, name, options)
        if semantic is not None:
            return semantic
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == "struct":
        return struct_type(schema, options)
    if kind == "array":
        assert schema.items is not None
        return ArrayType(spark_type(schema.items, options),
                         containsNull=schema.items.optional or not options.respect_optional)
    if kind == "map":
        assert schema.keys is not None and schema.values is not None
        return MapType(spark_type(schema.keys, options), spark_type(schema.values, options),
                       valueContainsNull=schema.values.optional or not options.respect_optional)
    raise SparkDecodeError(f"no Spark type for Connect schema {schema!r}")


def _semantic(schema: Schema, name: str, options: SparkSchemaOptions) -> DataType | None:
    if name in DATE_NAMES:
        return DateType()
    if name in TIMESTAMP_NAMES:
        return TimestampNTZType()
    if name == ZONED_TIMESTAMP:
        return TimestampType()
    if name in TIME_NAMES:
        return _TIME_OF_DAY
    if name in DURATION_NAMES:
        return _DURATION
    if name == VARIABLE_SCALE_DECIMAL:
        scale = options.variable_scale_decimal_scale
        if scale is not None:
            return DecimalType(DECIMAL_MAX_PRECISION, scale)
        return StructType([StructField("scale", IntegerType(), not options.respect_optional),
                           StructField("unscaled", StringType(), not options.respect_optional)])
    return None


def struct_type(schema: Schema, options: SparkSchemaOptions = SEMANTIC) -> StructType:
    """The ``StructType`` of a Connect struct schema (fields in order)."""
    if schema.type != "struct":
        raise SparkDecodeError(f"expected a struct schema, got {schema!r}")
    return StructType([
        StructField(f.name, spark_type(f.schema, options),
                    f.schema.optional or not options.respect_optional)
        for f in schema.fields or ()
    ])


def key_type(table: TableSchema, options: SparkSchemaOptions = SEMANTIC) -> StructType | None:
    """The Spark type of a table's record key (``None`` for a table without one)."""
    return None if table.key_schema is None else struct_type(table.key_schema, options)


def envelope_type(table: TableSchema, options: SparkSchemaOptions = SEMANTIC) -> StructType:
    """The Spark type of a table's Debezium envelope (the record value)."""
    return struct_type(table.envelope_schema, options)


# -- JSON records -------------------------------------------------------------------------


def json_type(schema: Schema, json: JsonConverterConfig | None = None) -> DataType:
    """The Spark type ``from_json`` needs for the JSON JsonConverter writes for ``schema``.

    Literal values, in their JSON forms: bytes (and ``Decimal`` under
    ``decimal.format=BASE64``, the default: the unscaled two's-complement bytes)
    are base64 strings that Spark decodes into ``BinaryType``; ``NUMERIC``
    decimals are numbers read as ``DecimalType`` (``StringType`` when too wide);
    non-finite floats are the strings ``NaN``/``Infinity`` that Spark reads as
    doubles. Every field is nullable.
    """
    json = json or JsonConverterConfig()
    kind = schema.type
    if schema.name == DECIMAL_LOGICAL:
        if json.decimal_format == "NUMERIC":
            return decimal_type(schema) or StringType()
        return BinaryType()
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == "struct":
        return StructType([StructField(f.name, json_type(f.schema, json), True)
                           for f in schema.fields or ()])
    if kind == "array":
        assert schema.items is not None
        return ArrayType(json_type(schema.items, json), True)
    if kind == "map":
        assert schema.keys is not None and schema.values is not None
        if schema.keys.type == "string":
            return MapType(StringType(), json_type(schema.values, json), True)
        pair = ArrayType(StringType(), True)  # [key, value] pairs of mixed types
        return ArrayType(pair, True)
    raise SparkDecodeError(f"no JSON type for Connect schema {schema!r}")


def json_record_type(schema: Schema, config: EventConfig | JsonConverterConfig | None = None,
                     *, wrapped: bool | None = None) -> StructType:
    """The Spark schema of one record key or value as JsonConverter writes it.

    ``wrapped`` (default: ``schemas.enable`` of the configuration) gives
    ``struct<schema: string, payload: ...>``; Spark reads the ``schema`` object
    into a string of its JSON text.
    """
    json = config.json if isinstance(config, EventConfig) else (config or JsonConverterConfig())
    payload = json_type(schema, json)
    if wrapped is None:
        wrapped = json.schemas_enable
    if not wrapped:
        if not isinstance(payload, StructType):
            raise SparkDecodeError(f"a record of schema {schema!r} is not a JSON object")
        return payload
    return StructType([StructField("schema", StringType(), True),
                       StructField("payload", payload, True)])
