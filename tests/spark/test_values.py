"""Connect values as Arrow arrays of Spark's types, and the vectorized fast paths (no Spark)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from pgcdc_events.events import EventConfig
from pgcdc_events.events.tables import build_table_schema
from pgcdc_events.protocol import Relation, RelationColumn
from pgcdc_events.spark import SparkSchemaOptions, ValueConverter
from pgcdc_events.spark.batch import fast_path
from pgcdc_events.spark.values import (
    TS_POS_INF_US,
    float32_shortest,
    parse_zoned_timestamp,
)
from pgcdc_events.types.mapper import TypeMapper
from pgcdc_events.types.numeric import VARIABLE_SCALE_DECIMAL, variable_scale_struct
from pgcdc_events.types.oids import OID_BY_NAME
from pgcdc_events.types.schema import Schema

LITERAL = SparkSchemaOptions("literal")
SEMANTIC = SparkSchemaOptions("semantic")


def _ints(array: Any) -> list[Any]:
    if pa.types.is_date32(array.type):
        return array.cast(pa.int32()).to_pylist()
    if pa.types.is_timestamp(array.type) or pa.types.is_duration(array.type):
        return array.cast(pa.int64()).to_pylist()
    return array.to_pylist()


@pytest.mark.parametrize(("name", "kind", "values", "expected"), [
    ("io.debezium.time.Date", "int32", [0, -719162, 2146033979, None],
     [0, -719162, 2146033979, None]),
    ("org.apache.kafka.connect.data.Date", "int32", [19782], [19782]),
    ("io.debezium.time.Timestamp", "int64", [1, -1, 9_223_372_036_825_200],
     [1000, -1000, 9_223_372_036_825_200_000]),
    ("org.apache.kafka.connect.data.Timestamp", "int64", [1], [1000]),
    ("io.debezium.time.MicroTimestamp", "int64", [-5, TS_POS_INF_US], [-5, TS_POS_INF_US]),
    ("io.debezium.time.NanoTimestamp", "int64", [-1500, 2**63 - 1, None],
     [-2, (2**63 - 1) // 1000, None]),
    ("io.debezium.time.Time", "int32", [86_400_000, 1], [86_400_000_000, 1000]),
    ("org.apache.kafka.connect.data.Time", "int32", [5], [5000]),
    ("io.debezium.time.MicroTime", "int64", [86_400_000_000], [86_400_000_000]),
    ("io.debezium.time.NanoTime", "int64", [1_000_001_000], [1_000_001]),
    ("io.debezium.time.MicroDuration", "int64", [-1, 2**63 - 1], [-1, 2**63 - 1]),
    ("io.debezium.time.ZonedTimestamp", "string",
     ["2024-02-29T13:14:15.123456Z", "1970-01-01T00:00:00Z", None],
     [1_709_212_455_123_456, 0, None]),
    ("io.debezium.time.ZonedTimestamp", "string",
     ["infinity", "-0043-03-15T12:00:00Z", "+12345-06-07T08:09:10.5Z",
      "+294276-12-31T23:59:59.999999Z"],
     [TS_POS_INF_US, -63_517_780_800_000_000, 327_416_976_550_500_000, None]),
])
def test_semantic_temporal_values(name: str, kind: str, values: list[Any],
                                  expected: list[Any]) -> None:
    schema = Schema(kind, name=name, version=1)
    literal = ValueConverter(schema, LITERAL).array(values)
    assert literal.to_pylist() == values
    semantic = ValueConverter(schema, SEMANTIC)
    array = semantic.array(values)
    assert array.type == semantic.arrow_type
    assert _ints(array) == expected


def test_zoned_timestamp_parser_agrees_with_arrow() -> None:
    texts = ["2024-02-29T13:14:15.123456Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.9Z",
             "0000-03-01T00:00:00.001Z", "1969-12-31T23:59:59.999999Z"]
    arrow = pa.array(texts).cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_pylist()
    assert [parse_zoned_timestamp(t) for t in texts] == arrow


def test_variable_scale_decimals() -> None:
    values = [variable_scale_struct(Decimal(v)) for v in ("1.500", "-123.456", "0", "1e40")]
    literal = ValueConverter(VARIABLE_SCALE_DECIMAL, LITERAL).array([*values, None])
    assert literal.to_pylist()[0] == {"scale": 1, "value": b"\x0f"}
    semantic = ValueConverter(VARIABLE_SCALE_DECIMAL, SEMANTIC).array([*values, None])
    assert semantic.to_pylist() == [
        {"scale": 1, "unscaled": "15"}, {"scale": 3, "unscaled": "-123456"},
        {"scale": 0, "unscaled": "0"}, {"scale": 0, "unscaled": "1" + "0" * 40}, None]
    cast = ValueConverter(VARIABLE_SCALE_DECIMAL, SparkSchemaOptions(
        "semantic", variable_scale_decimal_scale=2)).array([*values, None])
    assert cast.to_pylist() == [Decimal("1.50"), Decimal("-123.46"), Decimal("0.00"), None, None]


def test_decimal_fallback_is_the_exact_text() -> None:
    wide = Schema("bytes", name="org.apache.kafka.connect.data.Decimal", parameters=(
        ("scale", "2"), ("connect.decimal.precision", "50")))
    converter = ValueConverter(wide, SEMANTIC)
    assert converter.array([Decimal("-1234.50"), None]).to_pylist() == ["-1234.50", None]
    assert converter.python(Decimal("10.00")) == "10.00"


def test_float32_shortest() -> None:
    as_spark = pa.array([3.4028235e38, 1.4e-45, 0.1], pa.float32()).to_pylist()
    # PostgreSQL prints the smallest float4 as 1e-45 (shortest round trip), so does this.
    assert [float32_shortest(v) for v in as_spark] == [3.4028235e38, 1e-45, 0.1]


#: Text values PostgreSQL prints, per type: the fast path must give the type mapper's values
#: or refuse the batch (then the mapper's converters run).
TEXTS = {
    "int2": (["-32768", "0", "32767"], []),
    "int4": (["-2147483648", "7"], []),
    "int8": (["-9223372036854775808", "9223372036854775807"], []),
    "oid": (["4294967295", "0"], []),
    "float4": (["3.4028235e+38", "-0", "1.4e-45", "NaN", "Infinity", "-Infinity", "0.1"], []),
    "float8": (["1.7976931348623157e+308", "4.9e-324", "NaN", "-Infinity", "0.1"], []),
    "bool": (["t", "f"], ["x"]),
    "text": (["héllo ✓ 日本", ""], []),
    "uuid": (["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"], []),
    "date": (["2024-02-29", "0001-01-01", "1969-12-31"], ["infinity", "0044-03-15 BC",
                                                         "12345-01-01"]),
    "timestamp": (["2024-02-29 13:14:15.123456", "1969-12-31 23:59:59.999999",
                   "0044-03-15 12:00:00"], ["infinity", "0044-03-15 12:00:00 BC"]),
    "timestamptz": (["2024-01-01 10:00:00.123456+00", "2024-02-29 13:14:15+02",
                     "2024-02-29 13:14:15.123-03:30", "0044-03-15 12:00:00+00"],
                    ["infinity", "2024-02-29 13:14:15+00:53:28"]),
}


@pytest.mark.parametrize("flavour", ["literal", "semantic"])
@pytest.mark.parametrize("type_name", sorted(TEXTS))
def test_fast_paths_equal_the_type_mappers(type_name: str, flavour: str) -> None:
    options = SparkSchemaOptions(flavour)  # type: ignore[arg-type]
    relation = Relation(1, "public", "t", "d", (
        RelationColumn(1, "id", OID_BY_NAME["int4"], -1),
        RelationColumn(0, "c", OID_BY_NAME[type_name], -1)))
    table = build_table_schema(relation, TypeMapper(), EventConfig(topic_prefix="p"))
    plan = table.columns[1]
    converter = ValueConverter(plan.mapping.schema, options)
    fast = fast_path(plan, converter)
    assert fast is not None, f"{type_name} has no fast path"
    assert fast_path(plan, converter, transformed=True) is None
    good, refused = TEXTS[type_name]
    raw = pa.array([v.encode() for v in good] + [None], pa.binary())
    expected = converter.array([plan.from_text(v.encode()) for v in good] + [None])
    got = fast(raw)
    assert got.type == expected.type
    assert _ints(got) == _ints(expected) or (
        pa.types.is_floating(got.type) and str(got.to_pylist()) == str(expected.to_pylist()))
    for text in refused:
        with pytest.raises((pa.ArrowInvalid, pa.ArrowNotImplementedError)):
            fast(pa.array([text.encode()], pa.binary()))


def test_numeric_fast_path() -> None:
    relation = Relation(1, "public", "t", "d", (
        RelationColumn(1, "n", OID_BY_NAME["numeric"], (12 << 16 | 2) + 4),))
    table = build_table_schema(relation, TypeMapper(), EventConfig(topic_prefix="p"))
    plan = table.columns[0]
    converter = ValueConverter(plan.mapping.schema, LITERAL)
    fast = fast_path(plan, converter)
    assert fast is not None
    texts = ["12345678.90", "-0.01", "0.00"]
    assert fast(pa.array([t.encode() for t in texts])).to_pylist() == [
        plan.from_text(t.encode()) for t in texts]
    with pytest.raises(pa.ArrowInvalid):
        fast(pa.array([b"NaN"]))
    # NOT NULL: a SQL NULL (a delete's old key, say) becomes the column's zero value.
    assert fast(pa.array([None], pa.binary())).to_pylist() == [plan.null_value]
