"""Round trip: the event layer's values, as Spark rows under the generated schema, come back
equal value for value (literal and semantic flavours, every type of the corpus)."""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import StructField, StructType

from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.spark import (
    SparkSchemaOptions,
    ValueConverter,
    catalog_table_schemas,
    envelope_type,
)
from pgcdc_events.spark._session import nullable_type, to_arrow_table
from pgcdc_events.spark.schema import decimal_type
from pgcdc_events.types.jsonvalue import DECIMAL_LOGICAL
from pgcdc_events.types.schema import Schema, Struct
from support.golden import recordings

RECORDING = next(r for r in recordings("types") if r.mode == "default")


def _records() -> dict[str, list[Struct]]:
    config = EventConfig.from_properties(RECORDING.properties)
    out: dict[str, list[Struct]] = {}
    for rec in EventDecoder(config, catalog=RECORDING.catalog).feed_rows(RECORDING.capture):
        if rec.value is not None and rec.kind == "change":
            source = rec.value["source"]
            out.setdefault(f"{source['schema']}.{source['table']}", []).append(rec.value)
    return out


def _plain(value: Any, schema: Schema) -> Any:
    """A Connect value as Spark gives it back in the literal flavour (Row.asDict form)."""
    if value is None:
        return None
    if schema.name == DECIMAL_LOGICAL:
        return value if decimal_type(schema) is not None else format(Decimal(value), "f")
    if schema.type == "float32":
        return struct.unpack(">f", struct.pack(">f", value))[0] if math.isfinite(value) \
            else value
    if schema.type == "struct":
        return {f.name: _plain(v, f.schema) for f, v in zip(schema.fields or (), value.values,
                                                             strict=True)}
    if schema.type == "array":
        assert schema.items is not None
        return [_plain(v, schema.items) for v in value]
    if schema.type == "map":
        assert schema.values is not None
        return {k: _plain(v, schema.values) for k, v in value.items()}
    return value


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@pytest.mark.parametrize("flavour", ["literal", "semantic"])
def test_events_round_trip(spark: SparkSession, flavour: str,
                           canonical_values: Callable[[Any], list[Any]]) -> None:
    config = EventConfig.from_properties(RECORDING.properties)
    tables = catalog_table_schemas(RECORDING.catalog, config)
    options = SparkSchemaOptions(flavour)  # type: ignore[arg-type]
    for name, values in sorted(_records().items()):
        table = tables[name]
        converter = ValueConverter(table.envelope_schema, options)
        array = converter.array(values)
        schema = StructType([StructField("value", envelope_type(table, options), True)])
        if flavour == "semantic":
            # pyspark's createDataFrame casts Arrow to the schema and refuses the nulls a null
            # struct's non-nullable fields hold after a vectorized transform; the decoder's
            # own schemas are all-nullable, so check the types with nullability relaxed.
            schema = nullable_type(schema)  # type: ignore[assignment]
        df = spark.createDataFrame(pa.table({"value": array}), schema)
        assert df.schema == schema  # the generated schema
        back = to_arrow_table(df).column("value").combine_chunks()
        assert back.type == array.type
        assert canonical_values(back) == canonical_values(array), name
        if flavour == "literal":  # Spark rows, value for value, against the Connect values
            rows = [r["value"].asDict(recursive=True) for r in df.collect()]
            expected = [_plain(v, table.envelope_schema) for v in values]
            for got, want in zip(rows, expected, strict=True):
                assert _same(got, want), f"{name}: {got} != {want}"
