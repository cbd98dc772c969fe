"""Connect schemas as Spark types: every schema the type mapper can emit, in both flavours."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812
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

from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.spark import (
    SparkDecodeError,
    SparkSchemaOptions,
    catalog_table_schemas,
    envelope_type,
    json_record_type,
    key_type,
    spark_type,
)
from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.mapper import TypeMapper
from pgcdc_events.types.oids import BUILTIN_TYPES
from pgcdc_events.types.registry import EXTENSION_TYPES, PgType
from pgcdc_events.types.schema import Schema, array_schema, map_schema, struct_schema
from support.golden import recordings

LITERAL = SparkSchemaOptions("literal")
SEMANTIC = SparkSchemaOptions("semantic")
HOUR_SECOND = DayTimeIntervalType(DayTimeIntervalType.HOUR, DayTimeIntervalType.SECOND)
DAY_SECOND = DayTimeIntervalType(DayTimeIntervalType.DAY, DayTimeIntervalType.SECOND)

#: (Connect type, semantic name) -> (literal Spark type, semantic Spark type), for every
#: primitive schema the type mapper emits (structs, arrays, maps and decimals apart).
EXPECTED: dict[tuple[str, str | None], tuple[DataType, DataType]] = {
    ("boolean", None): (BooleanType(), BooleanType()),
    ("int16", None): (ShortType(), ShortType()),
    ("int32", None): (IntegerType(), IntegerType()),
    ("int64", None): (LongType(), LongType()),
    ("float32", None): (FloatType(), FloatType()),
    ("float64", None): (DoubleType(), DoubleType()),
    ("string", None): (StringType(), StringType()),
    ("bytes", None): (BinaryType(), BinaryType()),
    ("bytes", "io.debezium.data.Bits"): (BinaryType(), BinaryType()),
    ("string", "io.debezium.data.Json"): (StringType(), StringType()),
    ("string", "io.debezium.data.Xml"): (StringType(), StringType()),
    ("string", "io.debezium.data.Uuid"): (StringType(), StringType()),
    ("string", "io.debezium.data.Ltree"): (StringType(), StringType()),
    ("string", "io.debezium.data.Tsvector"): (StringType(), StringType()),
    ("string", "io.debezium.data.Enum"): (StringType(), StringType()),
    ("int32", "io.debezium.time.Date"): (IntegerType(), DateType()),
    ("int32", "org.apache.kafka.connect.data.Date"): (IntegerType(), DateType()),
    ("string", "io.debezium.time.IsoDate"): (StringType(), StringType()),
    ("int32", "io.debezium.time.Time"): (IntegerType(), HOUR_SECOND),
    ("int32", "org.apache.kafka.connect.data.Time"): (IntegerType(), HOUR_SECOND),
    ("int64", "io.debezium.time.MicroTime"): (LongType(), HOUR_SECOND),
    ("int64", "io.debezium.time.NanoTime"): (LongType(), HOUR_SECOND),
    ("string", "io.debezium.time.IsoTime"): (StringType(), StringType()),
    ("string", "io.debezium.time.ZonedTime"): (StringType(), StringType()),
    ("int64", "io.debezium.time.Timestamp"): (LongType(), TimestampNTZType()),
    ("int64", "org.apache.kafka.connect.data.Timestamp"): (LongType(), TimestampNTZType()),
    ("int64", "io.debezium.time.MicroTimestamp"): (LongType(), TimestampNTZType()),
    ("int64", "io.debezium.time.NanoTimestamp"): (LongType(), TimestampNTZType()),
    ("string", "io.debezium.time.IsoTimestamp"): (StringType(), StringType()),
    ("string", "io.debezium.time.ZonedTimestamp"): (StringType(), TimestampType()),
    ("int64", "io.debezium.time.MicroDuration"): (LongType(), DAY_SECOND),
    ("string", "io.debezium.time.Interval"): (StringType(), StringType()),
}


def _configs() -> Iterator[TypeConfig]:
    """Every mode that changes which schemas the mapper emits."""
    for time, decimal, hstore, interval, binary in itertools.product(
            ("adaptive", "adaptive_time_microseconds", "connect", "isostring", "microseconds",
             "nanoseconds"), ("precise", "double", "string"), ("json", "map"),
            ("numeric", "string"), ("bytes", "hex")):
        yield TypeConfig(time_precision_mode=time, decimal_handling_mode=decimal,  # type: ignore[arg-type]
                         hstore_handling_mode=hstore, interval_handling_mode=interval,  # type: ignore[arg-type]
                         binary_handling_mode=binary, include_unknown_datatypes=True,  # type: ignore[arg-type]
                         map_unsupported_types=True)


def _types() -> Iterator[tuple[PgType, int]]:
    """Every built-in type, the extension types, an enum and arrays of them, with modifiers."""
    singles = [PgType(oid, "pg_catalog", t.name, "base") for oid, t in BUILTIN_TYPES.items()
               if t.category not in ("A", "P")]
    singles += [PgType(90_000 + i, "public", name, "base")
                for i, name in enumerate(sorted(EXTENSION_TYPES))]
    singles.append(PgType(91_000, "public", "mood", "enum", enum_labels=("a", "b")))
    typmods = {"numeric": [-1, (10 << 16 | 2) + 4, (50 << 16 | 2) + 4, (5 << 16 | 0xFFFE) + 4],
               "bit": [1, 8], "varbit": [-1, 1], "time": [-1, 0, 3, 6],
               "timestamp": [-1, 0, 3, 6], "timestamptz": [-1, 0, 3, 6]}
    for t in singles:
        for typmod in typmods.get(t.name, [-1]):
            yield t, typmod
            yield PgType(t.oid + 200_000, t.namespace, "_" + t.name, "array", element=t), typmod


def _leaves(schema: Schema) -> Iterator[Schema]:
    yield schema
    for f in schema.fields or ():
        yield from _leaves(f.schema)
    for child in (schema.items, schema.values):
        if child is not None:
            yield from _leaves(child)


def _emitted() -> dict[tuple[str, str | None], Schema]:
    seen: dict[tuple[str, str | None], Schema] = {}
    for config in _configs():
        mapper = TypeMapper(config)
        for t, typmod in _types():
            mapping = mapper.value_mapping(t, typmod)
            if mapping is None:
                continue
            for schema in _leaves(mapping.schema):
                key = (schema.type, schema.name)
                if schema.name == "org.apache.kafka.connect.data.Decimal":
                    key = (schema.type, f"Decimal{schema.params}")
                seen.setdefault(key, schema)
    return seen


EMITTED = _emitted()


def test_every_emitted_schema_has_an_expected_mapping() -> None:
    primitive = {k for k, s in EMITTED.items() if s.type not in ("struct", "array", "map")
                 and not (k[1] or "").startswith("Decimal")}
    assert primitive == set(EXPECTED), (
        f"unmapped: {sorted(map(str, primitive - set(EXPECTED)))}; "
        f"never emitted: {sorted(map(str, set(EXPECTED) - primitive))}")


@pytest.mark.parametrize("key", sorted(EXPECTED, key=str), ids=str)
def test_primitive_mapping(key: tuple[str, str | None]) -> None:
    schema = EMITTED[key]
    literal, semantic = EXPECTED[key]
    assert spark_type(schema, LITERAL) == literal
    assert spark_type(schema, SEMANTIC) == semantic


def test_int8_and_plain_types() -> None:
    assert spark_type(Schema("int8"), LITERAL) == ByteType()
    assert spark_type(Schema("int8"), SEMANTIC) == ByteType()


def test_decimals_that_fit_and_the_fallback() -> None:
    decimals = {k: s for k, s in EMITTED.items() if (k[1] or "").startswith("Decimal")}
    params = {k[1]: spark_type(s, LITERAL) for k, s in decimals.items()}
    for text, dt in params.items():
        scale_precision = json.loads(text.removeprefix("Decimal").replace("'", '"'))
        scale = int(scale_precision["scale"])
        precision = int(scale_precision.get("connect.decimal.precision", 38))
        if 0 <= scale <= precision <= 38:
            assert dt == DecimalType(precision, scale), text
        else:
            assert dt == StringType(), text
        assert spark_type(decimals[("bytes", text)], SEMANTIC) == dt
    assert DecimalType(10, 2) in params.values()       # numeric(10,2)
    assert DecimalType(38, 2) in params.values()       # money: no precision given
    assert StringType() in params.values()             # numeric(50,2) and numeric(5,-2)


def test_structs_arrays_and_maps() -> None:
    structs = {k: s for k, s in EMITTED.items() if s.type == "struct"}
    assert set(k[1] for k in structs) == {
        "io.debezium.data.VariableScaleDecimal", "io.debezium.data.geometry.Point",
        "io.debezium.data.geometry.Geometry", "io.debezium.data.geometry.Geography"}
    point = structs[("struct", "io.debezium.data.geometry.Point")]
    expected_point = StructType([
        StructField("x", DoubleType(), False), StructField("y", DoubleType(), False),
        StructField("wkb", BinaryType(), True), StructField("srid", IntegerType(), True)])
    assert spark_type(point, LITERAL) == expected_point
    assert spark_type(point, SEMANTIC) == expected_point
    geometry = structs[("struct", "io.debezium.data.geometry.Geometry")]
    assert spark_type(geometry, SEMANTIC) == StructType([
        StructField("wkb", BinaryType(), False), StructField("srid", IntegerType(), True)])
    vsd = structs[("struct", "io.debezium.data.VariableScaleDecimal")]
    assert spark_type(vsd, LITERAL) == StructType([
        StructField("scale", IntegerType(), False), StructField("value", BinaryType(), False)])
    assert spark_type(vsd, SEMANTIC) == StructType([
        StructField("scale", IntegerType(), False), StructField("unscaled", StringType(), False)])
    assert spark_type(vsd, SparkSchemaOptions("semantic", variable_scale_decimal_scale=4)) == \
        DecimalType(38, 4)
    assert spark_type(vsd, SparkSchemaOptions("literal", variable_scale_decimal_scale=4)) == \
        spark_type(vsd, LITERAL)
    hstore = EMITTED[("map", None)]
    assert spark_type(hstore, SEMANTIC) == MapType(StringType(), StringType(), True)
    dates = array_schema(Schema("int32", optional=False, name="io.debezium.time.Date"))
    assert spark_type(dates, SEMANTIC) == ArrayType(DateType(), False)
    assert spark_type(dates.with_(items=dates.items.with_(optional=True)), LITERAL) == \
        ArrayType(IntegerType(), True)
    nested = struct_schema("n", [("m", map_schema(Schema("string"), Schema("int64")))])
    assert spark_type(nested, LITERAL) == StructType([
        StructField("m", MapType(StringType(), LongType(), False), False)])
    everything = SparkSchemaOptions("literal", respect_optional=False)
    assert spark_type(nested, everything) == StructType([
        StructField("m", MapType(StringType(), LongType(), True), True)])


def test_bad_options() -> None:
    with pytest.raises(SparkDecodeError):
        SparkSchemaOptions("fancy")  # type: ignore[arg-type]
    with pytest.raises(SparkDecodeError):
        SparkSchemaOptions("semantic", variable_scale_decimal_scale=39)


def _table_schemas() -> tuple[Any, EventConfig]:
    recording = next(r for r in recordings("types") if r.mode == "default")
    config = EventConfig.from_properties(recording.properties)
    return catalog_table_schemas(recording.catalog, config), config


def test_table_schemas_from_a_catalog_equal_the_decoders() -> None:
    recording = next(r for r in recordings("types") if r.mode == "default")
    config = EventConfig.from_properties(recording.properties)
    from_catalog = catalog_table_schemas(recording.catalog, config)
    decoder = EventDecoder(config, catalog=recording.catalog)
    decoder.feed_rows(recording.capture)
    seen = {t.qualified: t for t in decoder._tables.values() if t is not None}
    for name, table in seen.items():
        assert from_catalog[name].envelope_schema == table.envelope_schema, name
        assert from_catalog[name].key_schema == table.key_schema, name
        assert envelope_type(table, LITERAL) == envelope_type(from_catalog[name], LITERAL)
        assert key_type(table, SEMANTIC) == key_type(from_catalog[name], SEMANTIC)


def test_json_record_types_read_the_json_records(spark: SparkSession) -> None:
    """Debezium JSON values parse with the generated schemas in FAILFAST mode, wrapped or not
    (the tables with arrays, maps, decimals, structs and every temporal type)."""
    recording = next(r for r in recordings("types") if r.mode == "default")
    config = EventConfig.from_properties(recording.properties)
    names = ["public.t_numeric", "public.t_array"]
    tables = catalog_table_schemas(recording.catalog, config, names)
    records = EventDecoder(config, catalog=recording.catalog).feed_rows(recording.capture)
    writer = JsonRecordWriter(config.json)
    lines: dict[str, list[str]] = {name: [] for name in names}
    for rec in records:
        if rec.value is not None and rec.kind == "change":
            name = f"{rec.value['source']['schema']}.{rec.value['source']['table']}"
            if name in lines:
                lines[name].append(json.dumps(json.loads(writer.record_line(rec))["value"]))
    parts = []
    for name, table in tables.items():
        wrapped = json_record_type(table.envelope_schema, config, wrapped=True)
        bare = json_record_type(table.envelope_schema, config, wrapped=False)
        assert wrapped["payload"].dataType == bare
        df = spark.createDataFrame(pa.table({"v": pa.array(lines[name], pa.string())}))
        parsed = F.from_json("v", wrapped, {"mode": "FAILFAST"})
        payload = F.from_json(F.get_json_object("v", "$.payload"), bare, {"mode": "FAILFAST"})
        parts.append(df.select(F.lit(name).alias("t"), parsed["payload"]["op"].alias("op"),
                               payload["source"]["lsn"].alias("lsn"),
                               F.to_json(parsed["payload"]["after"]).alias("a"),
                               F.to_json(payload["after"]).alias("b")))
    rows = parts[0].unionByName(parts[1]).collect()
    assert len(rows) == sum(len(v) for v in lines.values())
    for row in rows:
        assert row["op"] in ("c", "u", "d") and row["lsn"] is not None
        assert row["a"] == row["b"]
