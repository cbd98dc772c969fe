"""The slower path: a plain Python UDF decoding one change message with the event layer.

For pipelines that embed decoding in their own row-level logic. Each call hands one
message to an :class:`~pgcdc_events.events.EventDecoder` holding the table schemas in
force at the message's position (the capture's Relation and Type messages, from
:attr:`DecodedCapture.plan <pgcdc_events.spark.DecodedCapture>`), so the records are the
decoder's own: skip rules, failure modes and key changes included. Values are in the
*literal* flavour (Python objects Spark takes for any value), one row at a time through
pickled Python objects: several times slower than :func:`~pgcdc_events.spark.decode_capture`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from pyspark.sql.functions import udf
from pyspark.sql.types import ArrayType, IntegerType, StringType, StructField, StructType

from pgcdc_events.events.chunks import ChunkDecoder
from pgcdc_events.events.decoder import EventDecoder
from pgcdc_events.protocol import wire
from pgcdc_events.protocol.decoder import parse_message
from pgcdc_events.spark.decode import DecodedCapture
from pgcdc_events.spark.layout import TableLayout, record_table
from pgcdc_events.spark.schema import SparkSchemaOptions
from pgcdc_events.spark.values import ValueConverter
from pgcdc_events.types.schema import Schema

if TYPE_CHECKING:
    from pyspark.sql._typing import UserDefinedFunctionLike

__all__ = ["message_udf"]

_LITERAL: Final = SparkSchemaOptions("literal", respect_optional=False)
_CHANGES: Final = frozenset(wire.INSERT + wire.UPDATE + wire.DELETE + wire.TRUNCATE)
_RELATED: Final = ("__debezium.newkey", "__debezium.oldkey")


def message_udf(decoded: DecodedCapture, table: str) -> UserDefinedFunctionLike:
    """A UDF ``(data binary, position long, in_stream boolean)`` returning the records one
    change message of ``table`` (``schema.table``) produces, as
    ``array<struct<op, kind, index, key, before, after, related_key>>``: empty for other
    tables' messages and for messages that are not changes. ``position`` (the capture's
    ordering value) picks the table schemas in force; ``in_stream`` says the message was
    sent inside a stream block (it then carries its transaction id)."""
    layout = TableLayout(table, decoded.versions[decoded.layout(table).table], _LITERAL)
    key_type = layout.key_type or StructType([])
    record = StructType([
        StructField("op", StringType()), StructField("kind", StringType()),
        StructField("index", IntegerType()), StructField("key", key_type),
        StructField("before", layout.value_type), StructField("after", layout.value_type),
        StructField("related_key", key_type),
    ])
    plan = decoded.spark.sparkContext.broadcast(decoded.plan)
    config = decoded.config
    key_names = [f.name for f in layout.key_fields or ()]
    value_names = [f.name for f in layout.value_fields]
    state: dict[str, Any] = {}
    converters: dict[Schema, ValueConverter] = {}

    def plain(value: Any, names: list[str]) -> tuple[Any, ...] | None:
        if value is None:
            return None
        out: list[Any] = []
        for name in names:
            try:
                field = value.schema.field(name)
            except KeyError:
                out.append(None)
                continue
            converter = converters.get(field.schema)
            if converter is None:
                converter = converters[field.schema] = ValueConverter(field.schema, _LITERAL)
            out.append(converter.python(value[name]))
        return tuple(out)

    def decode(data: bytes, position: int, in_stream: bool) -> list[Any]:
        if not data or data[0] not in _CHANGES:
            return []
        chunks = state.get("chunks")
        if chunks is None:
            chunks = state["chunks"] = ChunkDecoder(plan.value, lambda: EventDecoder(config))
        decoder = chunks.schema_at(position)
        out: list[Any] = []
        message = parse_message(data, in_stream=bool(in_stream))
        name: str | None = None
        for index, rec in enumerate(decoder.handle(message, 0)):
            name = record_table(rec, name)
            if name != table:
                continue
            related = next((h.value for h in rec.headers if h.name in _RELATED), None)
            value = rec.value
            out.append((rec.op, rec.kind, index, plain(rec.key, key_names),
                        plain(value["before"] if value is not None else None, value_names),
                        plain(value["after"] if value is not None else None, value_names),
                        plain(related, key_names)))
        return out

    return udf(decode, ArrayType(record), useArrow=False)  # the plain, pickled path
