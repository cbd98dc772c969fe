"""Snapshot ``op: r`` events from rows the embedder read itself.

An initial (or ad-hoc) snapshot is a ``SELECT`` the embedder runs, typically in a
transaction exported by the slot's creation so that streaming continues exactly
where the snapshot ends. This module turns those rows — values as PostgreSQL's
output functions print them, as ``COPY ... TO STDOUT`` or a text-format driver
returns them — into read events with the same type mapper as streaming, and marks
``source.snapshot`` as the connector does: ``first`` on the very first record,
``first_in_data_collection`` and ``last_in_data_collection`` at each table's
boundaries, ``last`` on the very last, ``true`` elsewhere, or ``incremental``
throughout for incremental snapshots.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pgcdc_events.errors import ConfigurationError, ConversionError
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.events.source import sequence, source_struct
from pgcdc_events.events.tables import TableSchema, build_table_schema
from pgcdc_events.protocol.messages import KIND_NULL, KIND_TEXT, Relation, RelationColumn, TupleData
from pgcdc_events.types.catalog import CatalogTable
from pgcdc_events.types.schema import Struct

if TYPE_CHECKING:
    from pgcdc_events.events.decoder import EventDecoder

__all__ = ["SnapshotRow", "SnapshotSequence", "relation_from_catalog", "snapshot_records",
           "snapshot_tuple"]

#: One row's values as text (``None`` for NULL), in the table's column order.
SnapshotRow = Sequence[bytes | str | None]


def relation_from_catalog(table: CatalogTable) -> Relation:
    """The Relation message pgoutput would send for a catalog table (all columns published)."""
    full = table.replica_identity == "f"
    ident = {c.name for c in table.columns if (c.replica_identity_position if
                                               table.replica_identity == "i" else
                                               c.primary_key_position) is not None}
    columns = tuple(
        RelationColumn(1 if full or c.name in ident else 0, c.name, c.type_oid, c.type_modifier)
        for c in table.columns if not c.generated
    )
    return Relation(table.oid, table.namespace, table.name, table.replica_identity, columns)


def snapshot_tuple(row: SnapshotRow, width: int, table: str) -> TupleData:
    """The pgoutput tuple of one snapshot row: text values (``None`` for NULL)."""
    if len(row) != width:
        raise ConfigurationError(f"snapshot row of {table} has {len(row)} values, expected {width}")
    values = tuple(v.encode() if isinstance(v, str) else v for v in row)
    kinds = bytes(KIND_NULL if v is None else KIND_TEXT for v in values)
    return TupleData(kinds, values)


def _rows(decoder: EventDecoder, tables: Iterable[tuple[CatalogTable, Iterable[SnapshotRow]]]
          ) -> Iterator[tuple[TableSchema, TupleData]]:
    for table, rows in tables:
        if not decoder.config.includes_table(table.namespace, table.name):
            continue
        schema = build_table_schema(relation_from_catalog(table), decoder.mapper, decoder.config,
                                    table, decoder.on_conversion_error)
        width = len(schema.relation.columns)
        for row in rows:
            yield schema, snapshot_tuple(row, width, schema.qualified)


class SnapshotSequence:
    """The read events of one snapshot, row by row, marked as the connector marks them.

    A row's marker depends on the row after it (the last of its table, the last of
    all), so :meth:`push` returns the event of the *previous* row and :meth:`finish`
    the last one. Conversion failures follow the decoder's two failure modes (the
    row is skipped, or the error raised). :func:`snapshot_records` and the decoder's
    snapshot rows in captures (``EventDecoder.feed(..., snapshot=True)``) both use it.
    """

    def __init__(self, decoder: EventDecoder, *, lsn: int, xid: int | None = None,
                 incremental: bool = False) -> None:
        self.decoder = decoder
        self.lsn = lsn
        self.xid = xid
        self.incremental = incremental
        self._previous: TableSchema | None = None
        self._current: tuple[TableSchema, tuple[Any, ...]] | None = None
        self._first = True

    def push(self, table: TableSchema, new: TupleData) -> list[ChangeRecord]:
        """Take one row of ``table``; returns the previous row's event (if any)."""
        try:
            converted = table.row(new)
        except ConversionError as error:
            self.decoder._event_failed(error, table, self.lsn)
            return []
        out: list[ChangeRecord] = []
        current = self._current
        if current is not None:
            out.append(_read(self.decoder, current, self.lsn, self.xid, _marker(
                self.incremental, self._first, False, current[0] is not self._previous,
                table is not current[0])))
            self._first = False
            self._previous = current[0]
        self._current = (table, converted)
        return out

    def finish(self) -> list[ChangeRecord]:
        """The last row's event (marked ``last``), once no row follows."""
        current, self._current = self._current, None
        if current is None:
            return []
        return [_read(self.decoder, current, self.lsn, self.xid, _marker(
            self.incremental, self._first, True, current[0] is not self._previous, True))]


def snapshot_records(
    decoder: EventDecoder,
    tables: Iterable[tuple[CatalogTable, Iterable[SnapshotRow]]],
    *,
    lsn: int,
    xid: int | None = None,
    incremental: bool = False,
) -> Iterator[ChangeRecord]:
    """Read events for each table's rows, in order, with Debezium's snapshot markers.

    ``lsn`` is the WAL position the snapshot is consistent with (the slot's
    ``consistent_point``), ``xid`` the snapshot transaction's id if known. Tables
    outside the configured filters are skipped.
    """
    sequence_ = SnapshotSequence(decoder, lsn=lsn, xid=xid, incremental=incremental)
    for table, new in _rows(decoder, tables):
        yield from sequence_.push(table, new)
    yield from sequence_.finish()


def _marker(incremental: bool, first: bool, last: bool, first_in_table: bool,
            last_in_table: bool) -> str:
    if incremental:
        return "incremental"
    if first:
        return "first"
    if last:
        return "last"
    if first_in_table:
        return "first_in_data_collection"
    if last_in_table:
        return "last_in_data_collection"
    return "true"


def _read(decoder: EventDecoder, item: tuple[TableSchema, tuple[Any, ...]], lsn: int,
          xid: int | None, marker: str) -> ChangeRecord:
    table, row = item
    config = decoder.config
    now = decoder.clock()
    source = source_struct(
        version=config.version, name=config.topic_prefix, ts_us=now // 1000, snapshot=marker,
        db=config.database, sequence=None if marker == "incremental" else sequence(None, lsn),
        schema=table.schema_name, table=table.table_name,
        tx_id=None if marker == "incremental" else xid,
        lsn=None if marker == "incremental" else lsn,
    )
    value = Struct(table.envelope_schema, (None, table.value(row), source, None, "r",
                                           now // 1_000_000, now // 1000, now))
    decoder.metrics.events_seen += 1
    return ChangeRecord(table.topic, table.key_schema, table.key(row), table.envelope_schema,
                        value, decoder.context_headers, lsn)
