"""The slower path: plain Python UDFs that decode one message given a broadcast registry.

For pipelines that embed decoding in their own row-level logic. Each call parses
one message and converts it with the type mapper's converters, one row at a
time through pickled Python objects: several times slower than the Arrow path
of :func:`~pgcdc_events.spark.decode_capture`, which is the one to use for
whole captures. Values are in the *literal* flavour (Python objects Spark takes
for any value, with no ``datetime`` range limits).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from pyspark.sql import SparkSession
from pyspark.sql.functions import udf
from pyspark.sql.types import (
    ArrayType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from pgcdc_events.errors import ProtocolError
from pgcdc_events.events.config import EventConfig
from pgcdc_events.events.tables import TableSchema
from pgcdc_events.protocol.decoder import parse_message
from pgcdc_events.protocol.messages import Delete, Insert, Truncate, Update
from pgcdc_events.spark.batch import TableLayout
from pgcdc_events.spark.registry import RelationRegistry
from pgcdc_events.spark.schema import SparkSchemaOptions
from pgcdc_events.spark.values import ValueConverter
from pgcdc_events.types.schema import Struct

if TYPE_CHECKING:
    from pyspark.sql._typing import UserDefinedFunctionLike

__all__ = ["message_records", "message_udf"]

_LITERAL: Final = SparkSchemaOptions("literal", respect_optional=False)


def message_records(table: TableSchema, message: Any, config: EventConfig
                    ) -> list[tuple[str | None, str, Struct | None, Struct | None, Struct | None,
                                    Struct | None]]:
    """The records one change message produces, as the event layer makes them:
    ``(op, kind, key, before, after, related_key)`` (tombstones included)."""
    skipped = config.skipped_operations
    if isinstance(message, Insert):
        if "c" in skipped:
            return []
        row = table.row(message.new)
        return [("c", "change", table.key(row), None, table.value(row), None)]
    if isinstance(message, Update):
        old = message.old
        row = table.row(message.new, old if message.old_kind == "O" else None)
        old_row = table.row(old) if old is not None else None
        key = table.key(row)
        old_key = table.key(old_row) if old_row is not None else None
        if key is not None and old_key is not None and old_key != key:
            assert old_row is not None
            out: list[Any] = []
            if "d" not in skipped:
                out.append(("d", "change", old_key, table.value(old_row), None, key))
                if config.tombstones_on_delete:
                    out.append((None, "tombstone", old_key, None, None, key))
            if "c" not in skipped:
                out.append(("c", "change", key, None, table.value(row), old_key))
            return out
        if "u" in skipped:
            return []
        before = table.value(old_row) if old_row is not None else None
        return [("u", "change", key, before, table.value(row), None)]
    if isinstance(message, Delete):
        if "d" in skipped:
            return []
        old_row = table.row(message.old)
        key = table.key(old_row)
        out = [("d", "change", key, table.value(old_row), None, None)]
        if config.tombstones_on_delete:
            out.append((None, "tombstone", key, None, None, None))
        return out
    if isinstance(message, Truncate):
        return [] if "t" in skipped else [("t", "truncate", None, None, None, None)]
    raise ProtocolError("a change message", detail=type(message).__name__)


def message_udf(spark: SparkSession, registry: RelationRegistry, table: str
                ) -> UserDefinedFunctionLike:
    """A UDF ``(data binary, position long, in_stream boolean)`` returning the records of one
    change message of ``table`` (``schema.table``) as
    ``array<struct<op, kind, index, key, before, after, related_key>>`` (empty for other
    tables' messages). ``position`` picks the schema version in force."""
    layout = TableLayout(registry, table, _LITERAL)
    key_type = layout.key_type or StructType([])
    record = StructType([
        StructField("op", StringType()), StructField("kind", StringType()),
        StructField("index", IntegerType()), StructField("key", key_type),
        StructField("before", layout.value_type), StructField("after", layout.value_type),
        StructField("related_key", key_type),
    ])
    shared = spark.sparkContext.broadcast(registry)
    converters: dict[Any, ValueConverter] = {}

    def plain(value: Struct | None) -> dict[str, Any] | None:
        if value is None:
            return None
        out = {}
        for field, item in zip(value.schema.fields or (), value.values, strict=True):
            converter = converters.get(field.schema)
            if converter is None:
                converter = converters[field.schema] = ValueConverter(field.schema, _LITERAL)
            out[field.name] = converter.python(item)
        return out

    def decode(data: bytes, position: int, in_stream: bool) -> list[Any]:
        reg: RelationRegistry = shared.value
        message: Any = parse_message(data, in_stream=bool(in_stream))
        relids = (message.relation_ids if isinstance(message, Truncate)
                  else (message.relation_id,))
        out: list[Any] = []
        emitted = 0
        for relid in relids:
            version = reg.version_at(relid, position)
            if version is None:
                raise ProtocolError("a change to an announced relation", offset=0,
                                    detail=f"no Relation message for OID {relid}")
            schema = reg.schema(version.index)
            if schema is None:
                continue
            for index, (op, kind, key, before, after, related) in enumerate(
                    message_records(schema, message, reg.config), emitted):
                if version.table == table:
                    out.append((op, kind, index, plain(key), plain(before), plain(after),
                                plain(related)))
                emitted = index + 1
        return out

    return udf(decode, ArrayType(record), useArrow=False)  # the plain, pickled path
