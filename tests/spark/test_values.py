"""Connect values as Arrow arrays of Spark's types (no Spark)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from pgcdc_events.spark import SparkSchemaOptions, ValueConverter
from pgcdc_events.spark.values import (
    SPARK_DATE_MAX,
    SPARK_DATE_MIN,
    SPARK_TIMESTAMP_MAX,
    SPARK_TIMESTAMP_MIN,
    SPARK_ZONED_MAX,
    SPARK_ZONED_MIN,
    TS_NEG_INF_US,
    TS_POS_INF_US,
    parse_zoned_timestamp,
)
from pgcdc_events.types.numeric import VARIABLE_SCALE_DECIMAL, variable_scale_struct
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
    ("io.debezium.time.Date", "int32", [0, -719162, 2146033979, -2147472691, 2932897, None],
     [0, -719162, SPARK_DATE_MAX, SPARK_DATE_MIN, 2932897, None]),
    ("org.apache.kafka.connect.data.Date", "int32", [19782], [19782]),
    ("io.debezium.time.Timestamp", "int64", [1, -1, 9_223_372_036_825_200,
                                             -9_223_372_036_832_400, 9_223_372_036_825_199],
     [1000, -1000, SPARK_TIMESTAMP_MAX, SPARK_TIMESTAMP_MIN, 9_223_372_036_825_199_000]),
    ("org.apache.kafka.connect.data.Timestamp", "int64", [1], [1000]),
    ("io.debezium.time.MicroTimestamp", "int64", [-5, TS_POS_INF_US, TS_NEG_INF_US, 2**62],
     [-5, SPARK_TIMESTAMP_MAX, SPARK_TIMESTAMP_MIN, 2**62]),
    ("io.debezium.time.NanoTimestamp", "int64", [-1500, 2**63 - 1, -(2**63), 2**63 - 2, None],
     [-2, SPARK_TIMESTAMP_MAX, SPARK_TIMESTAMP_MIN, (2**63 - 2) // 1000, None]),
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
      "+294276-12-31T23:59:59.999999Z", "-infinity"],
     [SPARK_ZONED_MAX, -63_517_780_800_000_000, 327_416_976_550_500_000, None,
      SPARK_ZONED_MIN]),
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
