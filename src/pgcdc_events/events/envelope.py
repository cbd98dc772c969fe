"""The one description of a change event's record: the envelope's fields, its value, the
record around it, and the tombstone that follows a delete.

Debezium's PostgreSQL connector wraps each row change in an *envelope* (``before``,
``after``, ``source``, ``transaction``, ``op``, ``ts_ms``, ``ts_us``, ``ts_ns``) on the
table's topic, keyed by the table's key struct; a delete is followed by a *tombstone*
(same topic and key, null value) unless ``tombstones.on.delete=false``. Everything that
makes such records (the decoder, snapshots, truncates, YugabyteDB's decoder, Spark's
column-wise runs) builds them here, and the layers that take them apart (Spark's layouts)
read the field order from :data:`ENVELOPE_FIELDS`. The YugabyteDB connector, built on
Debezium 2.5, has that version's envelope (:data:`ENVELOPE_FIELDS_2_5`): its decoder
builds its own row images (a cell per column) and passes them in, with ``fields=``.

:class:`RecordContext` is what a helper that builds records for a decoder may ask of it
(the configuration, the clock, the headers, the failure policy, the record of a change):
:class:`~pgcdc_events.events.EventDecoder` provides it, and a helper never reaches into
the decoder's private state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Protocol

from pgcdc_events.events.records import ChangeRecord, Header, make_record
from pgcdc_events.events.source import SOURCE_SCHEMA
from pgcdc_events.types.schema import STRUCT_BUILDER, Schema, Struct, struct_schema

if TYPE_CHECKING:
    from pgcdc_events.errors import ConversionError
    from pgcdc_events.events.config import EventConfig
    from pgcdc_events.events.metrics import StreamingMetrics
    from pgcdc_events.events.tables import TableSchema
    from pgcdc_events.types.mapper import TypeMapper

__all__ = ["ENVELOPE_FIELDS", "ENVELOPE_FIELDS_2_5", "TRANSACTION_BLOCK_SCHEMA", "RecordContext",
           "RecordTarget", "change_record", "envelope_schema", "envelope_value", "tombstone",
           "transaction_block"]

#: The envelope's fields, in the connector's order (the value struct's positions).
ENVELOPE_FIELDS: Final = ("before", "after", "source", "transaction", "op", "ts_ms", "ts_us",
                          "ts_ns")
#: The envelope of Debezium 2.5 (``Envelope.defineSchema()``), which the YugabyteDB
#: connector is built on: no ``ts_us``/``ts_ns``, ``transaction`` last. The same fields as
#: :data:`ENVELOPE_FIELDS`, fewer and in another order.
ENVELOPE_FIELDS_2_5: Final = ("before", "after", "source", "op", "ts_ms", "transaction")
_OPT_INT64: Final = Schema("int64", optional=True)
_STRING: Final = Schema("string")
#: The ``transaction`` block of data events (``event.block`` version 1).
TRANSACTION_BLOCK_SCHEMA: Final = struct_schema(
    "event.block",
    [("id", Schema("string")), ("total_order", Schema("int64")),
     ("data_collection_order", Schema("int64"))],
    optional=True,
    version=1,
)


def envelope_schema(name: str | None, value_schema: Schema,
                    source_schema: Schema = SOURCE_SCHEMA, *, version: int | None = 2,
                    fields: tuple[str, ...] = ENVELOPE_FIELDS) -> Schema:
    """The ``<topic>.Envelope`` schema of a table whose rows are ``value_schema``;
    ``fields``: which envelope, :data:`ENVELOPE_FIELDS` or :data:`ENVELOPE_FIELDS_2_5`."""
    schemas = {"before": value_schema, "after": value_schema, "source": source_schema,
               "transaction": TRANSACTION_BLOCK_SCHEMA, "op": _STRING, "ts_ms": _OPT_INT64,
               "ts_us": _OPT_INT64, "ts_ns": _OPT_INT64}
    return struct_schema(name, [(f, schemas[f]) for f in fields], version=version)


def envelope_value(schema: Schema, before: Struct | None, after: Struct | None, source: Struct,
                   block: Struct | None, op: str, now_ns: int, *,
                   fields: tuple[str, ...] = ENVELOPE_FIELDS) -> Struct:
    """An envelope: ``op`` with its row images, ``source`` and transaction ``block``,
    stamped with the processing time ``now_ns`` (ns since the epoch) as ``ts_ms``/``ts_us``/
    ``ts_ns``; ``fields``: those of ``schema`` (:func:`envelope_schema`'s). Built as
    :func:`~pgcdc_events.types.schema.make_struct` builds structs: this runs for every
    change event."""
    value = STRUCT_BUILDER()
    value.schema = schema
    if fields is ENVELOPE_FIELDS:
        value.values = (before, after, source, block, op, now_ns // 1_000_000, now_ns // 1000,
                        now_ns)
    else:
        parts = {"before": before, "after": after, "source": source, "transaction": block,
                 "op": op, "ts_ms": now_ns // 1_000_000, "ts_us": now_ns // 1000,
                 "ts_ns": now_ns}
        value.values = tuple(parts[f] for f in fields)
    value.__class__ = Struct
    return value  # type: ignore[no-any-return]  # the builder made it a Struct


def transaction_block(block_id: str, total_order: int, data_collection_order: int) -> Struct:
    """The ``transaction`` block of a data event: ``block_id`` is ``"<xid>:<lsn>"``, the
    orders count the transaction's events in all and in the event's table."""
    block = STRUCT_BUILDER()
    block.schema = TRANSACTION_BLOCK_SCHEMA
    block.values = (block_id, total_order, data_collection_order)
    block.__class__ = Struct
    return block  # type: ignore[no-any-return]  # the builder made it a Struct


class RecordTarget(Protocol):
    """Where a table's records go: its topic and the schemas of their key and value
    (:class:`~pgcdc_events.events.TableSchema`, or YugabyteDB's table)."""

    @property
    def topic(self) -> str:
        """The table's topic."""
        ...

    @property
    def key_schema(self) -> Schema | None:
        """The key struct's schema (``None``: a table without a key)."""
        ...

    @property
    def envelope_schema(self) -> Schema:
        """The envelope's schema."""
        ...


def change_record(table: RecordTarget, key: Struct | None, value: Struct | None,
                  headers: tuple[Header, ...], lsn: int, kind: str = "change", *,
                  extra: tuple[Header, ...] = ()) -> ChangeRecord:
    """The record of one change to ``table``: its topic, key schema and envelope schema;
    ``headers`` are the context headers every record carries, after the ``extra`` ones of
    this record (``__debezium.newkey``/``oldkey``)."""
    return make_record(table.topic, table.key_schema, key, table.envelope_schema, value,
                       extra + headers if extra else headers, lsn, kind)


def tombstone(table: RecordTarget, key: Struct | None, headers: tuple[Header, ...], lsn: int,
              *, extra: tuple[Header, ...] = ()) -> ChangeRecord:
    """The tombstone after a delete of ``key``: Kafka's log compaction drops the key
    (``headers`` and ``extra`` as for :func:`change_record`)."""
    return make_record(table.topic, table.key_schema, key, table.envelope_schema, None,
                       extra + headers if extra else headers, lsn, "tombstone")


class RecordContext(Protocol):
    """What record builders outside the decoder (snapshots, truncates, logical messages)
    may ask of the decoder they build for."""

    config: EventConfig
    metrics: StreamingMetrics
    clock: Callable[[], int]
    mapper: TypeMapper

    @property
    def context_headers(self) -> tuple[Header, ...]:
        """The ``__debezium.context.*`` headers every change record carries."""
        ...

    @property
    def on_conversion_error(self) -> Callable[[ConversionError], None] | None:
        """The value-level failure policy tables are built with (``None``: raise)."""
        ...

    @property
    def last_commit_lsn(self) -> int | None:
        """End LSN of the last transaction committed (``source.sequence``'s first half)."""
        ...

    @property
    def last_begin_commit_us(self) -> int | None:
        """Commit time of the last transaction begun (non-transactional messages' time)."""
        ...

    def record(self, table: TableSchema, op: str, before: Struct | None, after: Struct | None,
               key: Struct | None, lsn: int) -> ChangeRecord:
        """The record of a change in the transaction being decoded (its source block)."""
        ...

    def event_failed(self, error: ConversionError, table: TableSchema, lsn: int
                     ) -> list[ChangeRecord]:
        """``event.processing.failure.handling.mode`` applied to a change that failed."""
        ...
