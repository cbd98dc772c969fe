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

__all__ = ["SnapshotRow", "relation_from_catalog", "snapshot_records"]

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


def _tuple(row: SnapshotRow, width: int, table: str) -> TupleData:
    if len(row) != width:
        raise ConfigurationError(f"snapshot row of {table} has {len(row)} values, expected {width}")
    values = tuple(v.encode() if isinstance(v, str) else v for v in row)
    kinds = bytes(KIND_NULL if v is None else KIND_TEXT for v in values)
    return TupleData(kinds, values)


def _rows(decoder: EventDecoder, tables: Iterable[tuple[CatalogTable, Iterable[SnapshotRow]]],
          lsn: int) -> Iterator[tuple[TableSchema, tuple[Any, ...]]]:
    """Converted rows; conversion failures follow the decoder's two failure modes."""
    for table, rows in tables:
        if not decoder.config.includes_table(table.namespace, table.name):
            continue
        schema = build_table_schema(relation_from_catalog(table), decoder.mapper, decoder.config,
                                    table, decoder.on_conversion_error)
        width = len(schema.relation.columns)
        for row in rows:
            try:
                converted = schema.row(_tuple(row, width, schema.qualified))
            except ConversionError as error:
                decoder._event_failed(error, schema, lsn)
                continue
            yield schema, converted


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
    previous: TableSchema | None = None
    current: tuple[TableSchema, tuple[Any, ...]] | None = None
    first = True
    for item in _rows(decoder, tables, lsn):
        if current is not None:
            yield _read(decoder, current, lsn, xid, _marker(
                incremental, first, False, current[0] is not previous, item[0] is not current[0]))
            first = False
            previous = current[0]
        current = item
    if current is not None:
        yield _read(decoder, current, lsn, xid,
                    _marker(incremental, first, True, current[0] is not previous, True))


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
