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

import contextlib
import os
import re
import signal
import socket
import tempfile
import threading
from binascii import hexlify
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import repeat
from typing import TYPE_CHECKING, Any, Final

import attrs

from pgcdc_events.adapters.errors import SlotError, SnapshotError
from pgcdc_events.adapters.names import quote_ident
from pgcdc_events.errors import ConfigurationError
from pgcdc_events.protocol.capture import CaptureRow, dump_capture_row, read_canonical
from pgcdc_events.protocol.encoder import encode_message
from pgcdc_events.protocol.lsn import Lsn
from pgcdc_events.protocol.messages import Begin, Commit, Relation, Type

if TYPE_CHECKING:
    from pgcdc_events.adapters.pg8000 import SlotReader
    from pgcdc_events.types.catalog import CatalogTable

__all__ = [
    "DEFAULT_SNAPSHOT_MODE",
    "LINE_PIECES",
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


# -- COPY text rows as Insert messages, many rows at a time --------------------------------
#
# An Insert of a snapshot row is ``I``, the relation id (Int32), ``N``, the column count
# (Int16), then per value ``n`` (NULL) or ``t``, its length (Int32) and its bytes: what
# ``encode_message(Insert(relation_id, snapshot_tuple(values, ...)))`` gives. The rows of a
# piece of COPY data are split into all their fields at once (tabs and newlines are
# escaped inside values), and the messages (or their capture lines) are joined from lists
# filled a column at a time with ``map`` and slice assignments, so that Python runs a
# few statements per piece of data and per column rather than several per value. In a
# piece whose only backslashes start ``\N`` fields (COPY doubles a backslash of the data,
# so any other backslash starts an escape), a field is its value as it is, or NULL when
# it is ``\N``; other pieces are unescaped a value at a time.
#
# Capture lines (:meth:`TableRows.lines`) go further: the piece's fields (a ``b"\n"`` of
# its own after each row's, so that one comparison a row checks where rows end), the
# values' raw length prefixes and a mark after each row are joined into one bytes
# object, converted to hex in one call, and the hex cut into lines where the marks are.
# NULLs are found by ``list.index`` and escaped values from their backslashes'
# positions, so that a piece with a few escapes stays in bulk.

_NULL_TEXT: Final = b"\\N"
_N: Final = ord("N")
_SEPARATORS: Final = b"\t\n"


class _Prefixes(list[bytes]):
    """A text value's kind and length (``t``, Int32) by its length, raw or in hex (grown
    to the longest value seen, up to 64 KiB; longer values are rare)."""

    def __init__(self, hexed: bool) -> None:
        super().__init__()
        self.hexed = hexed
        self.null = b"6e" if hexed else b"n"

    def make(self, length: int) -> bytes:
        prefix = b"t" + length.to_bytes(4, "big")
        return hexlify(prefix) if self.hexed else prefix

    def of(self, lengths: list[int]) -> list[bytes]:
        """The prefixes of values of these lengths."""
        longest = max(lengths, default=0)
        if longest >= len(self):
            if longest < 65536:
                with _GROWING:  # the tables of a parallel snapshot share the list
                    if longest >= len(self):
                        self.extend([self.make(n) for n in range(len(self), longest + 1)])
            else:
                return list(map(self.make, lengths))
        return list(map(self.__getitem__, lengths))


_GROWING: Final = threading.Lock()


_HEX_PREFIX: Final = _Prefixes(hexed=True)
_RAW_PREFIX: Final = _Prefixes(hexed=False)
#: Put after each row's values before the piece is converted to hex, where the hex is
#: then cut into lines: bytes that no UTF-8 text holds, whose hex (``ff..fe``) no two
#: occurrences can share a part of, so that a value holding it anyway adds to the
#: piece's count of marks (and the piece is built a value at a time).
_ROW_MARK: Final = b"\xff\xff\xff\xff\xff\xfe"
_HEX_ROW_MARK: Final = hexlify(_ROW_MARK)
#: How many pieces of COPY data the snapshots of this process turned into capture lines
#: in bulk (``"bulk"``) and a value at a time (``"values"``): added to as each table ends.
LINE_PIECES: Final[dict[str, int]] = {"bulk": 0, "values": 0}


class TableRows:
    """One table's ``COPY ... TO STDOUT`` text data as Insert messages of its relation.

    :meth:`whole` takes the COPY data as it arrives and returns its whole rows (a row cut
    between two pieces waits for the next); :meth:`lines` turns whole rows into capture
    lines (``line_head``, the message in hex, ``line_tail``), :meth:`messages` into the
    messages' bytes. Both are byte for byte what the protocol layer's encoder and
    :func:`~pgcdc_events.protocol.capture.dump_capture_row` give for the same rows.
    """

    def __init__(self, relation_id: int, width: int, where: str, *,
                 line_head: bytes = b"", line_tail: bytes = b"\n") -> None:
        self.head = b"I" + relation_id.to_bytes(4, "big") + b"N" + width.to_bytes(2, "big")
        self.width = width
        self.where = where
        self.line_head = line_head + hexlify(self.head)
        self.line_tail = line_tail
        # between two lines of a piece: a line's end, the next line's start
        self._between = line_tail + self.line_head
        self.rows = 0
        #: Pieces of rows :meth:`lines` turned into lines in bulk (one hex conversion of
        #: the piece), and pieces it built a value at a time (a value holding the row
        #: mark: see :meth:`_lines_in_bulk`).
        self.bulk_pieces = 0
        self.value_pieces = 0
        self._tail = b""

    def whole(self, data: bytes) -> bytes:
        """The whole rows of what arrived so far, each ending with a newline."""
        if self._tail:
            data = self._tail + data
        cut = data.rfind(b"\n") + 1
        self._tail = data[cut:]
        return data if cut == len(data) else data[:cut]

    def close(self) -> None:
        """The COPY ended: a partial row left over means the data was cut."""
        with _GROWING:
            LINE_PIECES["bulk"] += self.bulk_pieces
            LINE_PIECES["values"] += self.value_pieces
        if self._tail:
            raise SnapshotError(f"COPY data of table {self.where} ended inside a row "
                                f"({len(self._tail)} bytes)")

    def _lines_in_bulk(self, rows: bytes) -> bytes | None:
        """Whole rows (a width of one column or more) as capture lines, converted to hex
        in one call; None when a value holds :data:`_ROW_MARK` (the caller builds the
        lines a value at a time)."""
        width, count = self.width, rows.count(b"\n")
        step = width + 1
        # every value, and after each row's values a b"\n" of its own: where the rows
        # end is then checked with one comparison a row
        fields = rows.replace(b"\n", b"\t\n\t").split(b"\t")
        fields.pop()  # after the last newline
        if len(fields) != count * step or fields[width::step].count(b"\n") != count:
            self._miscounted(rows)
        try:
            prefixes = list(map(_RAW_PREFIX.__getitem__, map(len, fields)))
        except IndexError:  # a value longer than any before: the prefixes grown
            prefixes = _RAW_PREFIX.of(list(map(len, fields)))
        backslashes = rows.count(b"\\")
        if backslashes:
            self._unescape(rows, fields, prefixes, backslashes, step)
        fields[width::step] = repeat(_ROW_MARK, count)
        prefixes[width::step] = repeat(b"", count)
        flat = [b""] * (2 * len(fields))
        flat[0::2] = prefixes
        flat[1::2] = fields
        hexed = hexlify(b"".join(flat))
        # the mark's hex inside a value, or across a value and a mark, needs five 0xFF
        # bytes in a row: never in a piece without 0xFF (values' length prefixes hold
        # three at most, next to a value without any), else counted
        if _ROW_MARK[0] in rows and hexed.count(_HEX_ROW_MARK) != count:
            return None
        self.rows += count
        between = self._between
        return b"".join((self.line_head, hexed[:-len(_HEX_ROW_MARK)].replace(
            _HEX_ROW_MARK, between), self.line_tail))

    @staticmethod
    def _unescape(rows: bytes, fields: list[bytes], prefixes: list[bytes], backslashes: int,
                  step: int) -> None:
        """The NULLs (``\\N``) and escaped values of ``rows`` (holding ``backslashes``;
        split into ``fields``, ``step`` a row: its values and a ``b"\\n"``) replaced in
        ``fields`` and ``prefixes``: the NULLs found by a scan of ``fields``, the escaped
        values from the backslashes' positions, so that a piece with a few escapes costs
        a few steps more, not one a value."""
        nulls = rows.count(_NULL_TEXT)
        found = 0
        if nulls:
            find = fields.index
            at = -1
            with contextlib.suppress(ValueError):
                while True:
                    at = find(_NULL_TEXT, at + 1)
                    fields[at], prefixes[at] = b"", _RAW_PREFIX.null
                    found += 1
        if backslashes == nulls == found:  # every backslash started a NULL
            return
        count, before = rows.count, rows.rfind
        row = last = 0
        done = -1
        end = len(rows)
        position = rows.find(b"\\")
        while position >= 0:
            after = position + 2
            if rows[position + 1] == _N and (position == 0 or rows[position - 1] in _SEPARATORS
                                             ) and (after == end or rows[after] in _SEPARATORS):
                position = rows.find(b"\\", after)  # a NULL: done above
                continue
            # the field's index: its row's (the newlines before it), and its column's
            row += count(b"\n", last, position)
            last = position
            at = row * step + count(b"\t", before(b"\n", 0, position) + 1, position)
            if at != done:
                done = at
                value = _ESCAPE.sub(_unescape, fields[at])
                fields[at] = value
                prefixes[at] = _RAW_PREFIX.of([len(value)])[0]
            position = rows.find(b"\\", after)  # an escape is two bytes

    def _columns(self, rows: bytes, prefix: _Prefixes) -> tuple[int, list[tuple[list[bytes],
                                                                             list[bytes]]]]:
        """``(row count, per column (prefixes, values))`` of whole rows."""
        count = rows.count(b"\n")
        width = self.width
        if width == 0 or not count:  # a table without columns: COPY writes an empty line
            self.rows += count
            return count, []
        tabs = list(map(bytes.count, rows[:-1].split(b"\n"), repeat(b"\t")))
        if tabs.count(width - 1) != count:
            self._miscounted(rows)
        fields = rows[:-1].replace(b"\n", b"\t").split(b"\t")
        self.rows += count
        columns = []
        backslashes = rows.count(b"\\")
        if backslashes == rows.count(_NULL_TEXT):  # no escape: NULLs at most
            for column in range(width):
                values = fields[column::width]
                prefixes = prefix.of(list(map(len, values)))
                if backslashes and _NULL_TEXT in values:
                    nulls = {_NULL_TEXT: prefix.null}
                    prefixes = list(map(nulls.get, values, prefixes))
                    values = list(map({_NULL_TEXT: b""}.get, values, values))
                columns.append((prefixes, values))
            return count, columns
        values = []
        kinds: list[bytes | None] = []
        for field in fields:
            if b"\\" in field:
                if field == _NULL_TEXT:
                    values.append(b"")
                    kinds.append(prefix.null)
                    continue
                field = _ESCAPE.sub(_unescape, field)
            values.append(field)
            kinds.append(None)
        lengths = list(map(len, values))
        texts = prefix.of(lengths)
        prefixes = [t if k is None else k for t, k in zip(texts, kinds, strict=True)]
        return count, [(prefixes[c::width], values[c::width]) for c in range(width)]

    def _miscounted(self, rows: bytes) -> None:
        for number, line in enumerate(rows.split(b"\n")[:-1], self.rows + 1):
            found = line.count(b"\t") + 1
            if found != self.width:
                raise SnapshotError(f"snapshot row {number} of {self.where} has {found} "
                                    f"values, expected {self.width}")
        raise AssertionError("a miscounted piece has a miscounted row")  # pragma: no cover

    def lines(self, rows: bytes) -> bytes:
        """Whole rows as capture lines."""
        if self.width and rows:
            out = self._lines_in_bulk(rows)
            if out is not None:
                self.bulk_pieces += 1
                return out
            self.value_pieces += 1
        count, columns = self._columns(rows, _HEX_PREFIX)
        step = 2 * self.width + 2
        flat = [b""] * (count * step)
        flat[0::step] = [self.line_head] * count
        flat[step - 1::step] = [self.line_tail] * count
        for column, (prefixes, values) in enumerate(columns):
            flat[2 * column + 1::step] = prefixes
            flat[2 * column + 2::step] = map(hexlify, values)
        return b"".join(flat)

    def messages(self, rows: bytes) -> list[bytes]:
        """Whole rows as Insert messages."""
        count, columns = self._columns(rows, _RAW_PREFIX)
        step = 2 * self.width + 1
        flat = [b""] * (count * step)
        flat[0::step] = [self.head] * count
        for column, (prefixes, values) in enumerate(columns):
            flat[2 * column + 1::step] = prefixes
            flat[2 * column + 2::step] = values
        join = b"".join
        return [join(flat[i:i + step]) for i in range(0, len(flat), step)]


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
    exactly what :class:`~pgcdc_events.adapters.capture.CaptureSink` writes for them, a
    lot faster than a row at a time. ``threads`` (the connector's
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
            probe = dump_capture_row(CaptureRow(at, xid32, b"", snapshot=True)).encode()
            cut = probe.index(b'"data": "') + len(b'"data": "')
            lines = (probe[:cut], probe[cut:] + b"\n")
            if threads == 1 or len(work) < 2:
                count = 0
                for item in work:
                    for prelude_row in item.prelude:
                        put(prelude_row)
                    count += _copy_here(reader, item, lines, emit, write, at, xid32)
            else:
                count = _copy_parallel(reader, name, work, threads, lines, put, emit, write,
                                       at, xid32)
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


def _copy_here(reader: SlotReader, item: _Table, lines: tuple[bytes, bytes],
               emit: Callable[[CaptureRow], None], write: Callable[[bytes], None] | None,
               at: Lsn, xid32: int) -> int:
    """One table's rows as Inserts, read on the reader's own connection."""
    from pgcdc_events.adapters.pg8000 import copy_out  # noqa: PLC0415 - the 'pg' extra

    rows = TableRows(item.relation.relation_id, len(item.relation.columns), item.where,
                     line_head=lines[0], line_tail=lines[1])
    if write is not None:
        def sink(data: bytes) -> None:
            write(rows.lines(rows.whole(data)))
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

    def copy(self, item: _Table, lines: tuple[bytes, bytes], path: str) -> int:
        """One table's rows as capture lines into ``path`` (created 0600 by the caller)."""
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
                             item.where, line_head=lines[0], line_tail=lines[1])
            try:
                conn.run("BEGIN ISOLATION LEVEL REPEATABLE READ")
                conn.run(f"SET TRANSACTION SNAPSHOT {_literal(self.name)}")
                with open(path, "wb") as fh:
                    copy_out(conn, item.sql, lambda data: fh.write(rows.lines(rows.whole(data))))
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
                   lines: tuple[bytes, bytes], put: Callable[[CaptureRow], None],
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
                jobs.append((item, path, pool.submit(workers.copy, item, lines, path)))
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
                            parsed = read_canonical(line)
                            assert parsed is not None, "a snapshot line as written"
                            emit(CaptureRow(at, xid32, parsed[1], snapshot=True))
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
