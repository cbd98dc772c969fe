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
layer's encoder and all at the consistent point. Written as capture lines (``write``),
a table's rows are COPY block lines: the COPY text as the server sent it, in blocks of
whole rows, which the readers expand into the same Inserts.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final

import attrs

from pgcdc_events.adapters.errors import SlotError, SnapshotError
from pgcdc_events.adapters.names import quote_ident, quote_literal
from pgcdc_events.errors import ConfigurationError
from pgcdc_events.protocol.capture import (
    COPY_BLOCK_SIZE,
    CaptureRow,
    dump_capture_row,
    dump_copy_block,
    rows_of_line,
)
from pgcdc_events.protocol.copytext import CopyTextError, copy_text_rows, insert_messages
from pgcdc_events.protocol.encoder import encode_message
from pgcdc_events.protocol.lsn import Lsn
from pgcdc_events.protocol.messages import Begin, Commit, Relation, Type

if TYPE_CHECKING:
    from pgcdc_events.adapters.pg8000 import SlotReader
    from pgcdc_events.types.catalog import CatalogTable

__all__ = [
    "DEFAULT_SNAPSHOT_MODE",
    "SNAPSHOT_MODES",
    "BlockingTable",
    "CopyTextRows",
    "SnapshotResult",
    "TableRows",
    "read_blocking_snapshot",
    "read_snapshot",
]

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


class CopyTextRows:
    """A writable that parses ``COPY ... TO STDOUT`` text format as it arrives.

    Rows end with a newline, fields are separated by tabs, ``\\N`` is NULL and a
    backslash escapes the next character (the parse is the protocol layer's:
    :func:`~pgcdc_events.protocol.copytext.copy_text_rows`). Each row goes to ``on_row``
    as a list of bytes (``None`` for NULL).
    """

    def __init__(self, on_row: Callable[[list[bytes | None]], None]) -> None:
        self.on_row = on_row
        self._tail = b""
        self.rows = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Take a chunk of COPY data (pg8000 calls this as the data arrives)."""
        chunk = self._tail + bytes(data)
        cut = chunk.rfind(b"\n") + 1
        self._tail = chunk[cut:]
        try:
            rows = copy_text_rows(chunk[:cut], first_row=self.rows + 1)
        except CopyTextError as exc:
            raise SnapshotError(f"COPY data: {exc}") from None
        for row in rows:
            self.on_row(row)
        self.rows += len(rows)
        return len(data)

    def close(self) -> None:
        """The COPY ended: a partial row left over means the data was cut."""
        if self._tail:
            raise SnapshotError(f"COPY data ended inside a row ({len(self._tail)} bytes)")


class TableRows:
    """One table's ``COPY ... TO STDOUT`` text data, as COPY block lines or as Insert
    messages of its relation.

    :meth:`lines` takes the COPY data as it arrives and returns the COPY block lines
    (:func:`~pgcdc_events.protocol.capture.dump_copy_block`, at ``lsn`` in ``xid``) of the
    blocks of whole rows it completes, the COPY text as it came, with no work a row or a
    value; :meth:`end` returns the last block. :meth:`whole` returns the whole rows of
    what arrived so far (a row cut between two pieces waits for the next) and
    :meth:`messages` turns whole rows into Insert messages
    (:func:`~pgcdc_events.protocol.copytext.insert_messages`).
    """

    def __init__(self, relation_id: int, width: int, where: str, *, lsn: int = 0,
                 xid: int | None = None, block_size: int = COPY_BLOCK_SIZE) -> None:
        self.relation_id = relation_id
        self.width = width
        self.where = where
        self.lsn = lsn
        self.xid = xid
        self.block_size = block_size
        self.rows = 0
        self._tail = b""
        self._pending: list[bytes] = []
        self._size = 0

    def whole(self, data: bytes) -> bytes:
        """The whole rows of what arrived so far, each ending with a newline."""
        if self._tail:
            data = self._tail + data
        cut = data.rfind(b"\n") + 1
        self._tail = data[cut:]
        return data if cut == len(data) else data[:cut]

    def lines(self, data: bytes) -> bytes:
        """A piece of COPY data as it arrived: the block lines of the blocks it completes
        (``b""`` while the block fills)."""
        self._pending.append(data)
        self._size += len(data)
        if self._size < self.block_size or b"\n" not in data:
            return b""
        return self._block(b"".join(self._pending))

    def end(self) -> bytes:
        """The COPY ended: the block line of the rows left (``b""`` for none)."""
        return self._block(b"".join(self._pending))

    def _block(self, data: bytes) -> bytes:
        cut = data.rfind(b"\n") + 1
        self._pending = [data[cut:]] if cut < len(data) else []
        self._size = len(data) - cut
        if not cut:
            return b""
        text = data if cut == len(data) else data[:cut]
        count = text.count(b"\n")
        width = self.width
        # the values counted in bulk (the reader checks each row): a table that changed
        # shape under the snapshot, or data that is not this table's
        if (text.count(b"\t") != count * (width - 1)) if width else (len(text) != count):
            self._miscounted(text)
        self.rows += count
        return dump_copy_block(self.lsn, self.xid, self.relation_id, width, text, rows=count)

    def close(self) -> None:
        """The COPY ended: a partial row left over means the data was cut."""
        left = len(self._tail) + self._size
        if left:
            raise SnapshotError(f"COPY data of table {self.where} ended inside a row "
                                f"({left} bytes)")

    def _miscounted(self, rows: bytes) -> None:
        try:
            insert_messages(self.relation_id, self.width, rows, first_row=self.rows + 1)
        except CopyTextError as exc:
            raise SnapshotError(f"the snapshot of table {self.where}: {exc}") from None
        raise AssertionError("a miscounted piece has a miscounted row")  # pragma: no cover

    def messages(self, rows: bytes) -> list[bytes]:
        """Whole rows as Insert messages."""
        try:
            out = insert_messages(self.relation_id, self.width, rows, first_row=self.rows + 1)
        except CopyTextError as exc:
            raise SnapshotError(f"the snapshot of table {self.where}: {exc}") from None
        self.rows += len(out)
        return out


# -- the snapshot ---------------------------------------------------------------------------

@attrs.frozen
class _Table:
    """What a table's part of the snapshot needs: its Type and Relation rows first, then
    its COPY."""

    where: str
    relation: Relation
    prelude: tuple[CaptureRow, ...]
    sql: str


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """While a snapshot runs, Ctrl-C (or SIGTERM) stops it at once: the snapshot is one
    unit, so "stop after the current read" would wait for all of it. The handlers a
    caller installed (a Python function) are replaced for the time of the snapshot; an
    ignored or default disposition is left alone, and so is any but the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(sig)
        if callable(handler):
            previous[sig] = handler
            signal.signal(sig, _interrupt)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def read_snapshot(reader: SlotReader, emit: Callable[[CaptureRow], None], *,  # noqa: PLR0915
                  write: Callable[[bytes], None] | None = None,
                  threads: int = 1) -> SnapshotResult:
    """Read the published tables in the snapshot the slot exported, as capture rows.

    ``reader`` has just created its slot with ``prepare(snapshot=True)``; ``emit``
    gets every row in order (Begin, per table Type/Relation and Inserts, Commit). With
    ``write``, the rows go to it instead as capture lines (bytes, many lines a call):
    the Begin, Type, Relation and Commit lines that
    :class:`~pgcdc_events.adapters.capture.CaptureSink` writes for them, and each table's
    rows as COPY block lines (:func:`~pgcdc_events.protocol.capture.dump_copy_block`:
    the COPY text as it came, about :data:`~pgcdc_events.protocol.capture.COPY_BLOCK_SIZE`
    bytes a line, with no work a row), which every reader expands into the Inserts
    ``emit`` would have got. ``threads`` (the connector's
    ``snapshot.max.threads``) reads up to that many tables at once, each on its own
    connection importing the same snapshot into a private temporary file, written out in
    the same order as one thread would. The snapshot transaction is ended (rolled back:
    it only read) before returning. Ctrl-C stops it at once (KeyboardInterrupt), its
    connections closed: nothing of it is committed.
    """
    if threads < 1:
        raise ConfigurationError(f"snapshot.max.threads must be positive, got {threads}")
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
    if threads > 1 and reader.settings is None:
        raise SnapshotError("a snapshot on several threads needs connection settings (a DSN), "
                            "not a connector", slot=reader.slot)
    run = reader.run_sql
    with _interruptible():
        run("BEGIN ISOLATION LEVEL REPEATABLE READ", action="start snapshot")
        try:
            run(f"SET TRANSACTION SNAPSHOT {quote_literal(name)}", action="import snapshot")
            xid_text, now_us = run(
                "SELECT txid_current()::text, (EXTRACT(EPOCH FROM now()) * 1000000)::bigint",
                action="snapshot transaction")[0]
            xid = int(xid_text)
            pg_time = int(now_us) - _PG_EPOCH_US
            xid32 = xid & 0xFFFFFFFF
            at = Lsn(int(lsn))

            def row(message: Any) -> CaptureRow:
                return CaptureRow(at, xid32, encode_message(message), snapshot=True)

            put = emit if write is None else (
                lambda r: write(dump_capture_row(r).encode("utf-8") + b"\n"))
            put(row(Begin(int(lsn), pg_time, xid32)))
            tables = run(_TABLES_SQL, action="list published tables",
                         names=list(reader.publications))
            catalog = reader.call(fetch_catalog, action="read the catalog")
            sent_types: set[int] = set()
            work: list[_Table] = []
            for namespace, table_name, relkind in tables:
                table = catalog.table(namespace, table_name)
                if table is None:  # pragma: no cover - the catalog lists every table
                    raise SnapshotError(f"table {namespace}.{table_name} is published but "
                                        "not in the catalog", slot=reader.slot)
                relation = relation_from_catalog(table)
                prelude: list[CaptureRow] = []
                types = sorted({c.type_oid for c in relation.columns
                                if c.type_oid >= _FIRST_NON_BUILTIN_OID} - sent_types)
                if types:
                    for oid, type_ns, type_name in run(_TYPES_SQL, action="read column types",
                                                       oids=types):
                        prelude.append(row(Type(int(oid), type_ns, type_name)))
                    sent_types.update(types)
                prelude.append(row(relation))
                work.append(_Table(f"{table.namespace}.{table.name}", relation, tuple(prelude),
                                   _copy_sql(table, relation, relkind)))
            if threads == 1 or len(work) < 2:
                count = 0
                for item in work:
                    for prelude_row in item.prelude:
                        put(prelude_row)
                    count += _copy_here(reader, item, emit, write, at, xid32)
            else:
                count = _copy_parallel(reader, name, work, threads, put, emit, write, at,
                                       xid32)
            put(row(Commit(0, int(lsn), int(lsn), pg_time)))
            return SnapshotResult(at, xid, len(tables), count)
        finally:
            if reader.connected:
                try:
                    run("ROLLBACK", action="end snapshot")
                except SlotError:
                    reader.close()


def _copy_sql(table: CatalogTable, relation: Relation, relkind: str) -> str:
    """``COPY (SELECT columns FROM table) TO STDOUT``."""
    qualified = f"{quote_ident(table.namespace)}.{quote_ident(table.name)}"
    columns = ", ".join(quote_ident(c.name) for c in relation.columns)
    # ONLY: an inherited table's rows are its own publication entry (a partitioned
    # table published through its root has no rows of its own: read them all)
    only = "" if relkind == "p" else "ONLY "
    return f"COPY (SELECT {columns} FROM {only}{qualified}) TO STDOUT"


def _copy_here(reader: SlotReader, item: _Table, emit: Callable[[CaptureRow], None],
               write: Callable[[bytes], None] | None, at: Lsn, xid32: int) -> int:
    """One table's rows as COPY block lines given to ``write``, or as Inserts given to
    ``emit``, read on the reader's own connection."""
    from pgcdc_events.adapters.pg8000 import copy_out  # noqa: PLC0415 - the 'pg' extra

    rows = TableRows(item.relation.relation_id, len(item.relation.columns), item.where,
                     lsn=int(at), xid=xid32)
    if write is not None:
        def sink(data: bytes) -> None:
            out = rows.lines(data)
            if out:
                write(out)
    else:
        def sink(data: bytes) -> None:
            for message in rows.messages(rows.whole(data)):
                emit(CaptureRow(at, xid32, message, snapshot=True))
    try:
        reader.call(lambda conn: copy_out(conn, item.sql, sink),
                    action=f"read table {item.where}")
    except BaseException:
        reader.close()  # in the middle of the COPY, or the server said why: not reusable
        raise
    if write is not None:
        last = rows.end()
        if last:
            write(last)
    rows.close()
    return rows.rows


class _Workers:
    """The connections of a parallel snapshot, each in the exported snapshot; shut down
    all at once when the snapshot stops (a blocked read returns at once)."""

    def __init__(self, reader: SlotReader, name: str) -> None:
        self.reader = reader
        self.name = name
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.stopped = False

    def copy(self, item: _Table, at: Lsn, xid32: int, path: str) -> int:
        """One table's rows as COPY block lines into ``path`` (created 0600 by the
        caller)."""
        from pgcdc_events.adapters.pg8000 import (  # noqa: PLC0415 - the 'pg' extra
            copy_out,
            is_driver_error,
            translate_error,
        )

        reader = self.reader
        action = f"read table {item.where}"
        assert reader.settings is not None
        try:
            conn, sock = reader.settings.connect(slot=reader.slot)
        except Exception as exc:
            if not is_driver_error(exc):
                raise
            raise translate_error(exc, slot=reader.slot, action=action) from None
        try:
            with self._lock:
                if self.stopped:
                    raise SnapshotError("the snapshot stopped", slot=reader.slot)
                self._sockets.append(sock)
            rows = TableRows(item.relation.relation_id, len(item.relation.columns),
                             item.where, lsn=int(at), xid=xid32)
            try:
                conn.run("BEGIN ISOLATION LEVEL REPEATABLE READ")
                conn.run(f"SET TRANSACTION SNAPSHOT {quote_literal(self.name)}")
                with open(path, "wb") as fh:
                    copy_out(conn, item.sql, lambda data: fh.write(rows.lines(data)))
                    fh.write(rows.end())
                rows.close()
                conn.run("ROLLBACK")
            except Exception as exc:
                if not is_driver_error(exc):
                    raise
                raise translate_error(exc, slot=reader.slot, publications=reader.publications,
                                      action=action) from None
            return rows.rows
        finally:
            with contextlib.suppress(Exception):
                conn.close()

    def stop(self) -> None:
        """Shut down every connection (the tables not started yet are not read)."""
        with self._lock:
            self.stopped = True
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


_PIECE: Final = 1 << 20  # bytes of a temporary file copied to the output at a time


def _copy_parallel(reader: SlotReader, name: str, work: list[_Table], threads: int,
                   put: Callable[[CaptureRow], None],
                   emit: Callable[[CaptureRow], None], write: Callable[[bytes], None] | None,
                   at: Lsn, xid32: int) -> int:
    """The tables read on up to ``threads`` connections at once, each into a private
    temporary file; written out in the tables' order as each is done."""
    workers = _Workers(reader, name)
    count = 0
    with tempfile.TemporaryDirectory(prefix="pgcdc-snapshot-") as directory, \
            ThreadPoolExecutor(max_workers=threads,
                               thread_name_prefix="pgcdc-snapshot") as pool:
        try:
            jobs = []
            for number, item in enumerate(work):
                path = os.path.join(directory, f"{number}.jsonl")
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                jobs.append((item, path, pool.submit(workers.copy, item, at, xid32, path)))
            for item, path, job in jobs:
                rows = job.result()
                for prelude_row in item.prelude:
                    put(prelude_row)
                with open(path, "rb") as fh:
                    if write is not None:
                        while piece := fh.read(_PIECE):
                            write(piece)
                    else:
                        for line in fh:
                            for block_row in rows_of_line(line):
                                emit(block_row)
                os.unlink(path)
                count += rows
        except BaseException:
            workers.stop()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return count


# -- a blocking snapshot, mid-stream ---------------------------------------------------------

@attrs.frozen
class BlockingTable:
    """A table of a blocking snapshot, with the ``SELECT`` statement that reads it (the
    signal's ``additional-conditions`` filter, a whole statement; ``None``: every row)."""

    table: CatalogTable
    select: str | None = None

    @property
    def where(self) -> str:
        """``schema.table``."""
        return f"{self.table.namespace}.{self.table.name}"


def _blocking_copy_sql(item: BlockingTable, relation: Relation) -> str:
    """``COPY (SELECT columns FROM ...) TO STDOUT``: the table (with its partitions or
    inherited rows, as the connector's ``SELECT * FROM`` reads it) or the user's statement,
    of which the relation's columns are taken by name, in its order."""
    columns = ", ".join(quote_ident(c.name) for c in relation.columns)
    if item.select is None:
        source = f"{quote_ident(item.table.namespace)}.{quote_ident(item.table.name)}"
    else:
        source = f"({item.select.strip().rstrip(';').strip()}) AS blocking_snapshot"
    return f"COPY (SELECT {columns} FROM {source}) TO STDOUT"


def read_blocking_snapshot(conn: Any, tables: list[BlockingTable],
                           emit: Callable[[CaptureRow], None], *, line_lsn: int,
                           run: Callable[..., Any]) -> SnapshotResult:
    """Read ``tables`` on ``conn`` (an ordinary pg8000 native connection) in one
    ``REPEATABLE READ`` transaction, as a snapshot block of capture rows given to
    ``emit``: Begin, per table its Type and Relation messages and one Insert a row,
    Commit, exactly the initial snapshot's block (:func:`read_snapshot`), so that the
    rows decode with the initial snapshot's markers.

    The block's lines are at ``line_lsn`` (where the capture paused the stream); its
    Begin carries the server's WAL position when the snapshot began
    (``pg_current_wal_lsn()``) and the snapshot transaction's id (the decoder gives the
    read events of a block after streamed data the stream's position instead, as the
    connector's blocking snapshot does: see ``EventDecoder``'s snapshot blocks).
    ``run(sql, action, **params)`` runs a statement, translating the driver's errors. A
    table's COPY the server refuses raises ``pg8000``'s error; when anything fails after
    the Begin was emitted, the block is closed (a Commit emitted) before the error goes
    on, so that a decoder fed with it is not left inside a block: the caller drops what
    was written.
    """
    from pgcdc_events.adapters.pg8000 import copy_out  # noqa: PLC0415 - the 'pg' extra
    from pgcdc_events.events.snapshot import relation_from_catalog  # noqa: PLC0415 - start-up

    at = Lsn(line_lsn)
    run("BEGIN ISOLATION LEVEL REPEATABLE READ", "start the blocking snapshot")
    commit_row: CaptureRow | None = None
    try:
        xid_text, now_us, lsn_text = run(
            "SELECT txid_current()::text, (EXTRACT(EPOCH FROM now()) * 1000000)::bigint, "
            "pg_current_wal_lsn()::text", "start the blocking snapshot")[0]
        xid32 = int(xid_text) & 0xFFFFFFFF
        pg_time = int(now_us) - _PG_EPOCH_US
        lsn = int(Lsn.parse(lsn_text))

        def row(message: Any) -> CaptureRow:
            return CaptureRow(at, xid32, encode_message(message), snapshot=True)

        emit(row(Begin(lsn, pg_time, xid32)))
        commit_row = row(Commit(0, lsn, lsn, pg_time))
        sent_types: set[int] = set()
        count = 0
        for item in tables:
            relation = relation_from_catalog(item.table)
            types = sorted({c.type_oid for c in relation.columns
                            if c.type_oid >= _FIRST_NON_BUILTIN_OID} - sent_types)
            if types:
                for oid, type_ns, type_name in run(_TYPES_SQL, "read column types", oids=types):
                    emit(row(Type(int(oid), type_ns, type_name)))
                sent_types.update(types)
            emit(row(relation))
            rows = TableRows(relation.relation_id, len(relation.columns), item.where)

            def sink(data: bytes, rows: TableRows = rows) -> None:
                for message in rows.messages(rows.whole(data)):
                    emit(CaptureRow(at, xid32, message, snapshot=True))

            copy_out(conn, _blocking_copy_sql(item, relation), sink)
            rows.close()
            count += rows.rows
        last, commit_row = commit_row, None
        emit(last)
        return SnapshotResult(Lsn(lsn), int(xid_text), len(tables), count)
    finally:
        if commit_row is not None:  # failed inside the block: close it for the decoder
            with contextlib.suppress(Exception):
                emit(commit_row)
        with contextlib.suppress(Exception):
            conn.run("ROLLBACK")
