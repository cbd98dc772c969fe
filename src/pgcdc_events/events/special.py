"""Records other than row changes: truncate, logical messages, transactions, heartbeats."""

from __future__ import annotations

import functools
from typing import Final

import attrs

from pgcdc_events.events.config import EventConfig
from pgcdc_events.events.envelope import RecordContext
from pgcdc_events.events.naming import sanitize_topic
from pgcdc_events.events.records import ChangeRecord, Header
from pgcdc_events.events.source import SOURCE_SCHEMA, sequence, source_struct
from pgcdc_events.events.tables import TRANSACTION_BLOCK_SCHEMA, TableSchema
from pgcdc_events.events.transactions import TransactionContext
from pgcdc_events.protocol.messages import LogicalMessage
from pgcdc_events.types.javahash import java_hashmap_order
from pgcdc_events.types.schema import Schema, Struct, array_schema, struct_schema
from pgcdc_events.types.text import binary_mode_schema, encode_binary

__all__ = [
    "HEARTBEAT_KEY_SCHEMA",
    "HEARTBEAT_VALUE_SCHEMA",
    "TRANSACTION_KEY_SCHEMA",
    "TRANSACTION_VALUE_SCHEMA",
    "heartbeat_record",
    "message_record",
    "transaction_record",
    "truncate_record",
]

_OPT_INT64 = Schema("int64", optional=True)

TRANSACTION_KEY_SCHEMA: Final = struct_schema(
    "io.debezium.connector.common.TransactionMetadataKey", [("id", Schema("string"))], version=1)
_COLLECTION: Final = struct_schema(
    "event.collection", [("data_collection", Schema("string")), ("event_count", Schema("int64"))],
    optional=True, version=1)
TRANSACTION_VALUE_SCHEMA: Final = struct_schema(
    "io.debezium.connector.common.TransactionMetadataValue",
    [("status", Schema("string")), ("id", Schema("string")), ("event_count", _OPT_INT64),
     ("data_collections", array_schema(_COLLECTION, optional=True)), ("ts_ms", Schema("int64"))],
    version=1,
)
#: The data collection Debezium 3.6 counts logical messages under is a Java object's
#: identity string (``LogicalDecodingMessageId@39e1ffe4``); this stable name replaces it.
MESSAGE_COLLECTION: Final = "message"
HEARTBEAT_KEY_SCHEMA: Final = struct_schema(
    "io.debezium.connector.common.ServerNameKey", [("serverName", Schema("string"))], version=1)
HEARTBEAT_VALUE_SCHEMA: Final = struct_schema(
    "io.debezium.connector.common.Heartbeat", [("ts_ms", Schema("int64"))], version=1)
MESSAGE_KEY_SCHEMA: Final = struct_schema(
    "io.debezium.connector.postgresql.MessageKey", [("prefix", Schema("string", optional=True))],
    version=1)


@functools.cache
def _message_value_schema(content: Schema) -> Schema:
    """MessageValue with ``content`` as ``binary.handling.mode`` makes it (one per mode)."""
    block = struct_schema("io.debezium.connector.postgresql.Message",
                          [("prefix", Schema("string", optional=True)),
                           ("content", content.with_(optional=True))], version=1)
    return struct_schema(
        "io.debezium.connector.postgresql.MessageValue",
        [("op", Schema("string")), ("ts_ms", _OPT_INT64), ("source", SOURCE_SCHEMA),
         ("transaction", TRANSACTION_BLOCK_SCHEMA), ("message", block)],
        version=1,
    )


def transaction_record(config: EventConfig, status: str, txn: TransactionContext, lsn: int,
                       headers: tuple[Header, ...]) -> ChangeRecord:
    """A BEGIN or END record on ``<prefix>.transaction``."""
    tx_id = f"{txn.xid}:{lsn}"
    if status == "END":
        # Debezium counts per collection in a java.util.HashMap and lists them in its order.
        tables = [k for k in txn.per_collection if isinstance(k, str)]
        collections = [Struct(_COLLECTION, (tables[i], txn.per_collection[tables[i]]))
                       for i in java_hashmap_order(tables)]
        collections += [Struct(_COLLECTION, (k[0], n)) for k, n in txn.per_collection.items()
                        if not isinstance(k, str)]
        value = Struct(TRANSACTION_VALUE_SCHEMA,
                       ("END", tx_id, txn.total_order, collections, txn.commit_us // 1000))
    else:
        value = Struct(TRANSACTION_VALUE_SCHEMA, ("BEGIN", tx_id, None, None,
                                                  txn.commit_us // 1000))
    topic = sanitize_topic(config.topic_delimiter.join((config.topic_prefix,
                                                        config.topic_transaction)))
    # Debezium 3.6 adds no __debezium.context headers to transaction records.
    return ChangeRecord(topic, TRANSACTION_KEY_SCHEMA, Struct(TRANSACTION_KEY_SCHEMA, (tx_id,)),
                        TRANSACTION_VALUE_SCHEMA, value, (), lsn, "transaction")


def truncate_record(decoder: RecordContext, table: TableSchema, lsn: int) -> ChangeRecord:
    """An ``op: t`` event for one truncated table (null key, no before/after)."""
    return attrs.evolve(decoder.record(table, "t", None, None, None, lsn), kind="truncate")


def message_record(decoder: RecordContext, message: LogicalMessage, lsn: int,
                   txn: TransactionContext | None) -> ChangeRecord:
    """A logical decoding message event on ``<prefix>.message``."""
    config = decoder.config
    content_schema = binary_mode_schema(config.types)
    value_schema = _message_value_schema(content_schema)
    if txn is not None:
        ts_us, xid = txn.commit_us, txn.xid
        block = None
        if config.provide_transaction_metadata:
            total, per = txn.next_message_order(MESSAGE_COLLECTION)
            block = Struct(TRANSACTION_BLOCK_SCHEMA, (f"{xid}:{lsn}", total, per))
    else:
        # A non-transactional message has no commit time: the connector stamps it with
        # the commit time of the last BEGIN it read, or the clock before the first one.
        last = decoder.last_begin_commit_us
        ts_us = last if last is not None else decoder.clock() // 1000
        xid, block = None, None
    source = source_struct(
        version=config.version, name=config.topic_prefix, ts_us=ts_us, snapshot=None,
        db=config.database, sequence=sequence(decoder.last_commit_lsn, lsn), schema="", table="",
        tx_id=xid, lsn=lsn,
    )
    body = Struct(value_schema.field("message").schema,
                  (message.prefix, encode_binary(config.types)(message.content)))
    now = decoder.clock()
    value = Struct(value_schema, ("m", now // 1_000_000, source, block, body))
    key = Struct(MESSAGE_KEY_SCHEMA, (message.prefix,))
    topic = sanitize_topic(config.topic_delimiter.join((config.topic_prefix, "message")))
    # Debezium 3.6 adds no __debezium.context headers to message events.
    return ChangeRecord(topic, MESSAGE_KEY_SCHEMA, key, value_schema, value, (), lsn, "message")


def heartbeat_record(config: EventConfig, now_ns: int, lsn: int, headers: tuple[Header, ...]
                     ) -> ChangeRecord:
    """A heartbeat on ``__debezium-heartbeat.<prefix>`` (or ``topic.heartbeat.name``)."""
    topic = config.topic_heartbeat_name or sanitize_topic(
        config.topic_delimiter.join((config.topic_heartbeat_prefix, config.topic_prefix)))
    key = Struct(HEARTBEAT_KEY_SCHEMA, (config.topic_prefix,))
    value = Struct(HEARTBEAT_VALUE_SCHEMA, (now_ns // 1_000_000,))
    return ChangeRecord(topic, HEARTBEAT_KEY_SCHEMA, key, HEARTBEAT_VALUE_SCHEMA, value,
                        (), lsn, "heartbeat")
