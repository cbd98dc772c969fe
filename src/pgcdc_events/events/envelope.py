"""The one description of a change event's record: the envelope's fields, its value, the
record around it, and the tombstone that follows a delete.

Debezium's PostgreSQL connector wraps each row change in an *envelope* (``before``,
``after``, ``source``, ``transaction``, ``op``, ``ts_ms``, ``ts_us``, ``ts_ns``) on the
table's topic, keyed by the table's key struct; a delete is followed by a *tombstone*
(same topic and key, null value) unless ``tombstones.on.delete=false``. Everything that
makes such records (the decoder, snapshots, truncates, YugabyteDB's decoder, Spark's
column-wise runs) builds them here, and the layers that take them apart (Spark's layouts)
read the field order from :data:`ENVELOPE_FIELDS`.

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
from pgcdc_events.types.schema import STRUCT_SETTERS, Schema, Struct, struct_schema

if TYPE_CHECKING:
    from pgcdc_events.errors import ConversionError
    from pgcdc_events.events.config import EventConfig
    from pgcdc_events.events.metrics import StreamingMetrics
    from pgcdc_events.events.tables import TableSchema
    from pgcdc_events.types.mapper import TypeMapper

__all__ = ["ENVELOPE_FIELDS", "TRANSACTION_BLOCK_SCHEMA", "RecordContext", "change_record",
           "envelope_schema", "envelope_value", "tombstone"]

#: The envelope's fields, in the connector's order (the value struct's positions).
ENVELOPE_FIELDS: Final = ("before", "after", "source", "transaction", "op", "ts_ms", "ts_us",
                          "ts_ns")
_OPT_INT64: Final = Schema("int64", optional=True)
#: The ``transaction`` block of data events (``event.block`` version 1).
TRANSACTION_BLOCK_SCHEMA: Final = struct_schema(
    "event.block",
    [("id", Schema("string")), ("total_order", Schema("int64")),
     ("data_collection_order", Schema("int64"))],
    optional=True,
    version=1,
)
_new: Final = object.__new__
_set_schema, _set_values = STRUCT_SETTERS


def envelope_schema(name: str, value_schema: Schema, source_schema: Schema = SOURCE_SCHEMA,
                    *, version: int | None = 2) -> Schema:
    """The ``<topic>.Envelope`` schema of a table whose rows are ``value_schema``."""
    return struct_schema(name, list(zip(ENVELOPE_FIELDS, (
        value_schema, value_schema, source_schema, TRANSACTION_BLOCK_SCHEMA, Schema("string"),
        _OPT_INT64, _OPT_INT64, _OPT_INT64), strict=True)), version=version)


def envelope_value(schema: Schema, before: Struct | None, after: Struct | None, source: Struct,
                   block: Struct | None, op: str, now_ns: int) -> Struct:
    """An envelope: ``op`` with its row images, ``source`` and transaction ``block``,
    stamped with the processing time ``now_ns`` (ns since the epoch) as ``ts_ms``/``ts_us``/
    ``ts_ns``. Built as :func:`~pgcdc_events.types.schema.make_struct` builds structs: this
    runs for every change event."""
    value = _new(Struct)
    _set_schema(value, schema)
    _set_values(value, (before, after, source, block, op, now_ns // 1_000_000, now_ns // 1000,
                        now_ns))
    return value


def change_record(table: TableSchema, key: Struct | None, value: Struct | None,
                  headers: tuple[Header, ...], lsn: int, kind: str = "change") -> ChangeRecord:
    """The record of one change to ``table``: its topic, key schema and envelope schema."""
    return make_record(table.topic, table.key_schema, key, table.envelope_schema, value,
                       headers, lsn, kind)


def tombstone(table: TableSchema, key: Struct | None, headers: tuple[Header, ...], lsn: int
              ) -> ChangeRecord:
    """The tombstone after a delete of ``key``: Kafka's log compaction drops the key."""
    return make_record(table.topic, table.key_schema, key, table.envelope_schema, None,
                       headers, lsn, "tombstone")


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
