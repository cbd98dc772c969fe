"""Snapshot ``op: r`` events from rows the embedder read itself.

An initial (or ad-hoc) snapshot is a ``SELECT`` the embedder runs, typically in a
transaction exported by the slot's creation so that streaming continues exactly
where the snapshot ends. This module turns those rows — values as PostgreSQL's
output functions print them, as ``COPY ... TO STDOUT`` or a text-format driver
returns them — into read events with the same type mapper as streaming, and marks
``source.snapshot`` as the connector does (:class:`SnapshotSequence`): ``first`` on
the first row of the first table, ``first_in_data_collection`` and
``last_in_data_collection`` at each table's boundaries, ``last`` on the very last
record, ``true`` elsewhere, or ``incremental``
throughout for incremental snapshots.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pgcdc_events.errors import ConfigurationError, ConversionError
from pgcdc_events.events.envelope import RecordContext, change_record, envelope_value
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.events.source import sequence, source_struct
from pgcdc_events.events.tables import TableSchema, build_table_schema
from pgcdc_events.protocol.messages import KIND_NULL, KIND_TEXT, Relation, RelationColumn, TupleData
from pgcdc_events.types.catalog import CatalogTable

__all__ = ["SnapshotRow", "SnapshotSequence", "relation_from_catalog", "snapshot_records",
           "snapshot_tuple"]

#: One row's values as text (``None`` for NULL), in the table's column order.
SnapshotRow = Sequence[bytes | str | None]


def relation_from_catalog(table: CatalogTable) -> Relation:
    """The Relation message pgoutput would send for a catalog table (all columns published)."""
    full = table.replica_identity == "f"
    ident = {c.name for c in table.columns if (c.replica_identity_position if
                                               table.replica_identity == "i" else
                                               c.primary_key_position) is not None
             and table.replica_identity != "n"}  # NOTHING: pgoutput flags no column
    columns = tuple(
        RelationColumn(1 if full or c.name in ident else 0, c.name, c.type_oid, c.type_modifier)
        for c in table.columns if not c.generated
    )
    return Relation(table.oid, table.namespace, table.name, table.replica_identity, columns)


def snapshot_tuple(row: SnapshotRow, width: int, table: str) -> TupleData:
    """The pgoutput tuple of one snapshot row: text values (``None`` for NULL)."""
    if len(row) != width:
        raise ConfigurationError(f"snapshot row of {table} has {len(row)} values, expected {width}")
    values = tuple([v.encode() if isinstance(v, str) else v for v in row])
    if None in values:
        return TupleData(bytes([KIND_NULL if v is None else KIND_TEXT for v in values]), values)
    return TupleData(_all_text(width), values)


@functools.lru_cache(maxsize=64)
def _all_text(width: int) -> bytes:
    """The kinds of a tuple of ``width`` text values."""
    return bytes([KIND_TEXT]) * width


def _rows(decoder: RecordContext, tables: Iterable[tuple[CatalogTable, Iterable[SnapshotRow]]]
          ) -> Iterator[tuple[TableSchema, Iterable[SnapshotRow]]]:
    for table, rows in tables:
        if not decoder.config.includes_table(table.namespace, table.name):
            continue
        yield build_table_schema(relation_from_catalog(table), decoder.mapper, decoder.config,
                                 table, decoder.on_conversion_error), rows


class SnapshotSequence:
    """The read events of one snapshot, table by table and row by row, marked as the
    connector marks them.

    Every table of the snapshot counts, empty ones too (:meth:`start_table`): the
    first row of the *first table* is ``first`` (an empty first table means no
    ``first``); the very last record of the snapshot is ``last``, whatever table it is
    in (the connector holds each record back until the next one comes, and re-marks
    the one it still holds at the end); at each table's boundaries
    ``last_in_data_collection`` wins over ``first_in_data_collection`` (a table of one
    row in the middle is ``last_in_data_collection``); ``true`` elsewhere
    (``RelationalSnapshotChangeEventSource.setSnapshotMarker`` and
    ``BufferingSnapshotChangeRecordReceiver.completeSnapshot``; the recordings
    ``tests/golden/events_snapshot*`` show both).

    A row's marker depends on what follows it, so :meth:`push` returns the event of
    the row before (if any) and :meth:`finish` the last one. A row that fails
    conversion follows the decoder's failure modes (raised, or skipped: it still
    counts as a row for its neighbours' markers). :func:`snapshot_records` and the
    snapshot blocks of captures (``EventDecoder.feed(..., snapshot=True)``) both use it.
    """

    def __init__(self, decoder: RecordContext, *, lsn: int, xid: int | None = None,
                 incremental: bool = False, ts_us: int | None = None,
                 last_commit_lsn: int | None = None) -> None:
        self.decoder = decoder
        self.lsn = lsn
        self.xid = xid
        #: The first half of ``source.sequence``: ``None`` for an initial snapshot (no
        #: commit streamed yet), the stream's last commit LSN for a blocking one.
        self.last_commit_lsn = last_commit_lsn
        self.incremental = incremental
        #: The snapshot's time (``source.ts_*``): one for the whole snapshot, as in the
        #: connector; the decoder's clock when it was not given.
        self.ts_us = ts_us if ts_us is not None else decoder.clock() // 1000
        self._tables = 0
        self._table: TableSchema | None = None
        self._rows_in_table = 0
        # the record whose marker waits for what follows: table, values, first of the
        # first table, first of its table, last of its table (known when a table starts)
        self._pending: list[Any] | None = None

    def start_table(self, table: TableSchema) -> None:
        """The next table of the snapshot begins (call it for empty tables too)."""
        if self._pending is not None:
            self._pending[4] = True
        self._table = table
        self._tables += 1
        self._rows_in_table = 0

    def push(self, table: TableSchema, new: TupleData) -> list[ChangeRecord]:
        """Take one row of ``table`` (the current table, or the start of the next);
        returns the previous record, now that its marker is known."""
        if table is not self._table:
            self.start_table(table)
        out = self._flush()
        first = self._rows_in_table == 0
        self._rows_in_table += 1
        try:
            converted = table.row(new)
        except ConversionError as error:
            self.decoder.event_failed(error, table, self.lsn)
            return out
        self._pending = [table, converted, first and self._tables == 1, first, False]
        return out

    def finish(self) -> list[ChangeRecord]:
        """The snapshot ended: the last record's event (marked ``last``)."""
        return self._flush(last=True)

    def _flush(self, *, last: bool = False) -> list[ChangeRecord]:
        pending, self._pending = self._pending, None
        if pending is None:
            return []
        table, row, first, first_in_table, last_in_table = pending
        marker = _marker(self.incremental, first, last, first_in_table, last or last_in_table)
        return [_read(self.decoder, (table, row), self.lsn, self.xid, marker, self.ts_us,
                      self.last_commit_lsn)]


def snapshot_records(
    decoder: RecordContext,
    tables: Iterable[tuple[CatalogTable, Iterable[SnapshotRow]]],
    *,
    lsn: int,
    xid: int | None = None,
    incremental: bool = False,
) -> Iterator[ChangeRecord]:
    """Read events for each table's rows, in order, with Debezium's snapshot markers.

    ``lsn`` is the WAL position the snapshot is consistent with (the slot's
    ``consistent_point``), ``xid`` the snapshot transaction's id if known. Tables
    outside the configured filters are skipped; the others count for the markers
    even when they have no rows (see :class:`SnapshotSequence`).
    """
    sequence_ = SnapshotSequence(decoder, lsn=lsn, xid=xid, incremental=incremental)
    for table, rows in _rows(decoder, tables):
        sequence_.start_table(table)
        width = len(table.relation.columns)
        for row in rows:
            yield from sequence_.push(table, snapshot_tuple(row, width, table.qualified))
    yield from sequence_.finish()


def _marker(incremental: bool, first: bool, last: bool, first_in_table: bool,
            last_in_table: bool) -> str:
    if incremental:
        return "incremental"
    if last:
        return "last"
    if first:
        return "first"
    if last_in_table:
        return "last_in_data_collection"
    if first_in_table:
        return "first_in_data_collection"
    return "true"


def _read(decoder: RecordContext, item: tuple[TableSchema, tuple[Any, ...]], lsn: int,
          xid: int | None, marker: str, ts_us: int, last_commit_lsn: int | None = None
          ) -> ChangeRecord:
    table, row = item
    config = decoder.config
    now = decoder.clock()
    source = source_struct(
        version=config.version, name=config.topic_prefix, ts_us=ts_us, snapshot=marker,
        db=config.database,
        sequence=None if marker == "incremental" else sequence(last_commit_lsn, lsn),
        schema=table.schema_name, table=table.table_name,
        tx_id=None if marker == "incremental" else xid,
        lsn=None if marker == "incremental" else lsn,
    )
    value = envelope_value(table.envelope_schema, None, table.value(row), source, None, "r",
                           now)
    decoder.metrics.events_seen += 1
    return change_record(table, table.key(row), value, decoder.context_headers, lsn)
