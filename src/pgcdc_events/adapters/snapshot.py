"""The initial snapshot: the published tables' rows, consistent with where the slot starts.

The slot is created on a replication connection with ``CREATE_REPLICATION_SLOT ...
LOGICAL pgoutput (SNAPSHOT 'export')`` (:meth:`SlotReader.prepare` with
``snapshot=True``): the server returns the slot's *consistent point* and the name of
a snapshot that sees exactly the transactions committed before it. A second
(ordinary) connection imports it (``BEGIN ISOLATION LEVEL REPEATABLE READ; SET
TRANSACTION SNAPSHOT``) and reads every published table with ``COPY (SELECT ...) TO
STDOUT``: the values as the types' output functions print them, which is what
pgoutput sends in text mode. The slot decodes exactly the transactions that commit
after the consistent point, so snapshot and stream neither miss nor repeat a change.

:func:`read_snapshot` turns the rows into capture rows marked ``snapshot`` (see
:mod:`pgcdc_events.protocol.capture`): a Begin (the consistent point as its LSN, the
snapshot transaction's xid, the snapshot's time), then per table its Type and
Relation messages and one Insert a row, then a Commit, all encoded by the protocol
layer's encoder and all at the consistent point.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import attrs

from pgcdc_events.adapters.errors import SlotError, SnapshotError
from pgcdc_events.adapters.names import quote_ident
from pgcdc_events.protocol.capture import CaptureRow
from pgcdc_events.protocol.encoder import encode_message
from pgcdc_events.protocol.lsn import Lsn
from pgcdc_events.protocol.messages import Begin, Commit, Insert, Relation, Type

if TYPE_CHECKING:
    from pgcdc_events.adapters.pg8000 import SlotReader
    from pgcdc_events.types.catalog import CatalogTable

__all__ = ["DEFAULT_SNAPSHOT_MODE", "SNAPSHOT_MODES", "SnapshotResult", "read_snapshot"]

#: The connector's ``snapshot.mode`` values that make sense for a capture.
SNAPSHOT_MODES: Final = ("initial", "no_data", "initial_only", "when_needed")
#: The connector's default.
DEFAULT_SNAPSHOT_MODE: Final = "initial"

#: PostgreSQL's epoch (2000-01-01) in Unix microseconds.
_PG_EPOCH_US: Final = 946_684_800_000_000
#: pgoutput sends a Type message for column types from this OID on (FirstGenbkiObjectId).
_FIRST_NON_BUILTIN_OID: Final = 10000
_SNAPSHOT_NAME = re.compile(r"[0-9A-Fa-f-]{1,64}").fullmatch

_TABLES_SQL = (
    "SELECT DISTINCT n.nspname, c.relname, c.relkind FROM pg_publication_tables p "
    "JOIN pg_namespace n ON n.nspname = p.schemaname "
    "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename "
    "WHERE p.pubname = ANY(CAST(:names AS text[])) ORDER BY 1, 2")
# What pgoutput's Type message says of a column type: its OID, and the namespace (empty for
# pg_catalog) and name of its base type (a domain is sent under the type it is based on).
_TYPES_SQL = (
    "WITH RECURSIVE b(oid, cur) AS (SELECT t.oid, t.oid FROM pg_type t "
    "WHERE t.oid = ANY(CAST(:oids AS oid[])) UNION ALL SELECT b.oid, t.typbasetype FROM b "
    "JOIN pg_type t ON t.oid = b.cur WHERE t.typtype = 'd') "
    "SELECT b.oid, CASE WHEN n.nspname = 'pg_catalog' THEN '' ELSE n.nspname END, t.typname "
    "FROM b JOIN pg_type t ON t.oid = b.cur JOIN pg_namespace n ON n.oid = t.typnamespace "
    "WHERE t.typtype <> 'd'")


@attrs.frozen
class SnapshotResult:
    """What a snapshot read: its consistent point, transaction, tables and rows."""

    lsn: Lsn
    xid: int
    tables: int
    rows: int

    def as_dict(self) -> dict[str, Any]:
        """The ``snapshot`` object of a checkpoint once the snapshot is durable."""
        return {"state": "done", "lsn": str(self.lsn), "xid": self.xid, "tables": self.tables,
                "rows": self.rows}


_ESCAPES: Final = {ord("b"): b"\b", ord("f"): b"\f", ord("n"): b"\n", ord("r"): b"\r",
                   ord("t"): b"\t", ord("v"): b"\v"}
_ESCAPE = re.compile(rb"\\(.)", re.DOTALL)


def _unescape(match: re.Match[bytes]) -> bytes:
    char = match.group(1)
    return _ESCAPES.get(char[0], char)


class CopyTextRows:
    """A writable that parses ``COPY ... TO STDOUT`` text format as it arrives.

    Rows end with a newline, fields are separated by tabs, ``\\N`` is NULL and a
    backslash escapes the next character (``COPY TO`` writes no octal or hex
    escapes). Each row goes to ``on_row`` as a list of bytes (``None`` for NULL).
    """

    def __init__(self, on_row: Callable[[list[bytes | None]], None]) -> None:
        self.on_row = on_row
        self._tail = b""
        self.rows = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Take a chunk of COPY data (pg8000 calls this as the data arrives: the server
        sends one row a message)."""
        chunk = bytes(data)
        if self._tail:
            chunk = self._tail + chunk
        if chunk.endswith(b"\n") and chunk.count(b"\n") == 1:  # one whole row
            self._tail = b""
            self._row(chunk[:-1])
            return len(data)
        lines = chunk.split(b"\n")
        self._tail = lines.pop()
        for line in lines:
            self._row(line)
        return len(data)

    def _row(self, line: bytes) -> None:
        self.on_row([None if f == b"\\N" else _ESCAPE.sub(_unescape, f) if b"\\" in f else f
                     for f in line.split(b"\t")])
        self.rows += 1

    def close(self) -> None:
        """The COPY ended: a partial row left over means the data was cut."""
        if self._tail:
            raise SnapshotError(f"COPY data ended inside a row ({len(self._tail)} bytes)")


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def read_snapshot(reader: SlotReader, emit: Callable[[CaptureRow], None]) -> SnapshotResult:
    """Read the published tables in the snapshot the slot exported, as capture rows.

    ``reader`` has just created its slot with ``prepare(snapshot=True)``; ``emit``
    gets every row in order (Begin, per table Type/Relation and Inserts, Commit). The
    snapshot transaction is ended (rolled back: it only read) before returning.
    """
    # the event and type layers, imported when a snapshot is taken (a capture that
    # takes none starts faster without them)
    from pgcdc_events.events.snapshot import relation_from_catalog  # noqa: PLC0415 - start-up
    from pgcdc_events.types.catalog import fetch_catalog  # noqa: PLC0415 - start-up

    exported = reader.exported
    if exported is None:
        raise SnapshotError("no exported snapshot: the slot was not created for one",
                            slot=reader.slot)
    name, lsn = exported
    if not _SNAPSHOT_NAME(name):
        raise SnapshotError(f"the server exported a snapshot named {name!r}: not a snapshot "
                            "name", slot=reader.slot)
    run = reader.run_sql
    run("BEGIN ISOLATION LEVEL REPEATABLE READ", action="start snapshot")
    try:
        run(f"SET TRANSACTION SNAPSHOT {_literal(name)}", action="import snapshot")
        xid_text, now_us = run(
            "SELECT txid_current()::text, (EXTRACT(EPOCH FROM now()) * 1000000)::bigint",
            action="snapshot transaction")[0]
        xid = int(xid_text)
        pg_time = int(now_us) - _PG_EPOCH_US
        xid32 = xid & 0xFFFFFFFF
        at = Lsn(int(lsn))

        def row(message: Any) -> CaptureRow:
            return CaptureRow(at, xid32, encode_message(message), snapshot=True)

        emit(row(Begin(int(lsn), pg_time, xid32)))
        tables = run(_TABLES_SQL, action="list published tables",
                     names=list(reader.publications))
        catalog = reader.call(fetch_catalog, action="read the catalog")
        sent_types: set[int] = set()
        count = 0
        for namespace, table_name, relkind in tables:
            table = catalog.table(namespace, table_name)
            if table is None:  # pragma: no cover - the catalog lists every table
                raise SnapshotError(f"table {namespace}.{table_name} is published but not in "
                                    "the catalog", slot=reader.slot)
            relation = relation_from_catalog(table)
            types = sorted({c.type_oid for c in relation.columns
                            if c.type_oid >= _FIRST_NON_BUILTIN_OID} - sent_types)
            if types:
                for oid, type_ns, type_name in run(_TYPES_SQL, action="read column types",
                                                   oids=types):
                    emit(row(Type(int(oid), type_ns, type_name)))
                sent_types.update(types)
            emit(row(relation))
            count += _copy_table(reader, table, relation, relkind, row, emit)
        emit(row(Commit(0, int(lsn), int(lsn), pg_time)))
        return SnapshotResult(at, xid, len(tables), count)
    finally:
        if reader.connected:
            try:
                run("ROLLBACK", action="end snapshot")
            except SlotError:
                reader.close()


def _copy_table(reader: SlotReader, table: CatalogTable, relation: Relation, relkind: str,
                row: Callable[[Any], CaptureRow], emit: Callable[[CaptureRow], None]) -> int:
    """One table's rows (``COPY (SELECT columns FROM table) TO STDOUT``) as Inserts."""
    from pgcdc_events.events.snapshot import snapshot_tuple  # noqa: PLC0415 - start-up

    qualified = f"{quote_ident(table.namespace)}.{quote_ident(table.name)}"
    columns = ", ".join(quote_ident(c.name) for c in relation.columns)
    width = len(relation.columns)
    where = f"{table.namespace}.{table.name}"
    relation_id = relation.relation_id

    def on_row(values: list[bytes | None]) -> None:
        if width == 0:  # a table without columns: COPY writes an empty line a row
            values = []
        emit(row(Insert(relation_id, snapshot_tuple(values, width, where))))

    # ONLY: an inherited table's rows are its own publication entry (a partitioned
    # table published through its root has no rows of its own: read them all)
    only = "" if relkind == "p" else "ONLY "
    sink = CopyTextRows(on_row)
    reader.call(lambda conn: conn.run(f"COPY (SELECT {columns} FROM {only}{qualified}) TO "
                                      "STDOUT", stream=sink), action=f"read table {where}")
    sink.close()
    return sink.rows
