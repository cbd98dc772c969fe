"""Decoded events back as Kafka JsonConverter records: the lines ``pgcdc-events decode`` writes.

For diffing the Spark decoder with the pure-Python one record by record: each
row of a table's events (decoded in the *literal* flavour, tombstones
included) becomes the ``{"topic", "key", "value", "headers"}`` line of
:class:`~pgcdc_events.events.JsonRecordWriter`, with the record's own schema
version. Only the processing time (``ts_ms``/``ts_us``/``ts_ns``) and the
``__debezium.context.runId`` header differ between two runs by definition.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any, Final

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
from pyspark.sql import DataFrame
from pyspark.sql.types import LongType, StringType, StructField, StructType

from pgcdc_events.events.jsonconv import JsonRecordWriter
from pgcdc_events.events.records import ChangeRecord, Header
from pgcdc_events.events.source import SOURCE_SCHEMA
from pgcdc_events.events.tables import TRANSACTION_BLOCK_SCHEMA, TableSchema
from pgcdc_events.spark._session import arrow_schema, map_in_arrow
from pgcdc_events.spark.decode import DecodedCapture
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.registry import RelationRegistry
from pgcdc_events.spark.values import float32_shortest
from pgcdc_events.types.jsonvalue import DECIMAL_LOGICAL
from pgcdc_events.types.schema import Schema, Struct

__all__ = ["JSON_LINES", "json_records", "to_connect"]

#: One JsonConverter record a row, with its place in the decoder's order.
JSON_LINES: Final = StructType([
    StructField("commit", LongType(), True), StructField("message", LongType(), False),
    StructField("index", LongType(), False), StructField("value", StringType(), False),
])
_STRING: Final = Schema("string")


def to_connect(value: Any, schema: Schema) -> Any:
    """A literal-flavour Spark value (as Arrow gives it to Python) as its Connect value."""
    if value is None:
        return None
    kind = schema.type
    if schema.name == DECIMAL_LOGICAL:
        return value if isinstance(value, Decimal) else Decimal(value)
    if kind == "float32":
        return float32_shortest(value)
    if kind == "struct":
        fields = schema.fields or ()
        return Struct(schema, tuple(to_connect(value.get(f.name), f.schema) for f in fields))
    if kind == "array":
        assert schema.items is not None
        return [to_connect(v, schema.items) for v in value]
    if kind == "map":
        assert schema.keys is not None and schema.values is not None
        return {to_connect(k, schema.keys): to_connect(v, schema.values) for k, v in value}
    return value


class _Lines:
    """mapInArrow: literal events of one table to JsonConverter record lines."""

    def __init__(self, registry: Any, run_id: str) -> None:
        self.registry = registry
        self.run_id = run_id

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        registry: RelationRegistry = self.registry.value
        writer = JsonRecordWriter(registry.config.json)
        context = (
            Header("__debezium.context.connectorLogicalName", _STRING,
                   registry.config.topic_prefix),
            Header("__debezium.context.taskId", _STRING, "0"),
            Header("__debezium.context.connectorName", _STRING, "postgresql"),
            Header("__debezium.context.runId", _STRING, self.run_id),
        )
        target = arrow_schema(JSON_LINES)
        for batch in batches:
            out: dict[str, list[Any]] = {"commit": [], "message": [], "index": [], "value": []}
            for row in batch.to_pylist():
                schema = registry.schema(row["_version"])
                if schema is None:
                    raise SparkDecodeError(f"schema version {row['_version']} has no table")
                out["value"].append(writer.record_line(_record(schema, row, context)))
                position = row["_position"]
                out["commit"].append(position["commit"])
                out["message"].append(position["message"])
                out["index"].append(position["index"])
            yield pa.RecordBatch.from_pydict(out, schema=target)


def _record(table: TableSchema, row: dict[str, Any], context: tuple[Header, ...]
            ) -> ChangeRecord:
    key_schema = table.key_schema
    key = to_connect(row.get("key"), key_schema) if key_schema is not None else None
    related = (to_connect(row.get("_related_key"), key_schema)
               if key_schema is not None else None)
    extra: tuple[Header, ...] = ()
    if related is not None and key_schema is not None:
        name = "__debezium.oldkey" if row["op"] == "c" else "__debezium.newkey"
        extra = (Header(name, key_schema, related),)
    lsn = row["_lsn"]
    if row["_kind"] == "tombstone":
        return ChangeRecord(table.topic, key_schema, key, table.envelope_schema, None,
                            extra + context, lsn, "tombstone")
    block = row.get("transaction")
    value = Struct(table.envelope_schema, (
        to_connect(row["before"], table.value_schema), to_connect(row["after"], table.value_schema),
        to_connect(row["source"], SOURCE_SCHEMA),
        to_connect(block, TRANSACTION_BLOCK_SCHEMA) if block is not None else None,
        row["op"], row["ts_ms"], row["ts_us"], row["ts_ns"]))
    return ChangeRecord(table.topic, key_schema, key, table.envelope_schema, value,
                        extra + context, lsn, row["_kind"])


def json_records(decoded: DecodedCapture, table: str, *, run_id: str) -> DataFrame:
    """``table``'s records as JsonConverter lines (column ``value``), in the decoder's order,
    in one partition. Needs a capture decoded in the literal flavour with tombstones."""
    if decoded.options.flavour != "literal" or not decoded.tombstones:
        raise SparkDecodeError("JSON records need decode_capture(..., flavour='literal', "
                               "tombstones=True)")
    events = decoded.table(table)
    lines = map_in_arrow(events, _Lines(decoded.broadcast_registry, run_id), JSON_LINES)
    return lines.repartition(1).sortWithinPartitions("commit", "message", "index").select(
        "value")
