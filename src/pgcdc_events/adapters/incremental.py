"""Incremental snapshots, the adapter's side: signals acted on, chunks read, watermarks written.

:class:`IncrementalSnapshotter` is what a capture that streams a slot does for the
connector's ad hoc incremental snapshots (Debezium's
``SignalBasedIncrementalSnapshotChangeEventSource``). The embedder passes every record
its :class:`~pgcdc_events.events.decoder.EventDecoder` makes of the stream to
:meth:`IncrementalSnapshotter.receive`, and emits what it returns. The snapshotter

* acts on the signals the stream carries (rows of ``signal.data.collection``):
  ``execute-snapshot`` of type ``incremental`` queues the tables its
  ``data-collections`` name, ``stop-snapshot``, ``pause-snapshot`` and
  ``resume-snapshot`` do what they say; a malformed signal, a blocking snapshot, a table
  that does not exist or has no key is named in a warning and skipped;
* reads each table in chunks over its own (ordinary, autocommit) pg8000 connection, with
  the connector's queries (:mod:`pgcdc_events.events.snapshot_sql`): the table's largest
  key first, then the first chunk without bounds, then each chunk after the last key
  read and up to that largest key; the values come back as the types' text output,
  which is what pgoutput sends, and the key values are bound as text (the server gives
  them the key column's type, so ``NaN`` and ``Infinity`` numeric keys and enum keys
  work as they are printed);
* writes the open watermark row into the signalling table before each chunk is read and
  the close watermark after (``insert_insert``: two inserts; ``insert_delete``: the
  insert, then its deletion), and hands the chunk's rows to
  :class:`~pgcdc_events.events.incremental.ChunkWindow`, which resolves them against the
  changes streamed between the two watermarks and returns the ``r`` events at the close
  watermark;
* reads the next chunk when the close watermark came back (the connector does it on its
  streaming thread, at the same point), so that at most one chunk (at most
  ``incremental.snapshot.chunk.size`` rows) is buffered at a time;
* keeps its progress in the connector's offset form
  (:meth:`~pgcdc_events.events.incremental.IncrementalSnapshotContext.to_offset`):
  :meth:`IncrementalSnapshotter.state` is JSON-serialisable; a snapshotter made with it
  (``state=``) and :meth:`IncrementalSnapshotter.start` resumes after the last key whose
  ``r`` event went out, and never re-reads a finished table.

``read.only``: the snapshotter takes ``pg_current_snapshot()`` as the watermarks and
writes nothing; :class:`~pgcdc_events.events.incremental.ReadOnlyChunkWindow` recognises
the window in the stream by transaction ids, and the embedder calls
:meth:`IncrementalSnapshotter.commit` after each Commit and at each idle poll (see
docs/snapshots.md); it reads the next chunk at a transaction's commit, not in the middle
of its changes, and gives the chunks to ``on_chunk`` once both watermarks are taken.

:class:`IncrementalCapture` is what ``pgcdc-events capture`` runs around it: with
``--decode`` the records go through the snapshotter; without, a second decoder reads
only the signalling table's rows out of the units written, and every chunk read is
written into the capture as a chunk line
(:func:`~pgcdc_events.protocol.capture.dump_chunk_line`), from which ``decode`` replays
the window (:class:`~pgcdc_events.events.incremental.RecordedChunks`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import re
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Final

import attrs

from pgcdc_events.adapters.errors import CheckpointError, SnapshotError
from pgcdc_events.adapters.names import quote_ident, quote_literal
from pgcdc_events.adapters.pg8000 import (
    ResolvedOptions,
    copy_out,
    is_driver_error,
    server_fields,
    translate_error,
)
from pgcdc_events.adapters.snapshot import BlockingTable, SnapshotResult, read_blocking_snapshot
from pgcdc_events.errors import ConfigurationError
from pgcdc_events.events.incremental import (
    INSERT_DELETE,
    INSERT_INSERT,
    ChunkWindow,
    IncrementalSnapshotContext,
    ReadOnlyChunkWindow,
    catalog_table_to_json,
    expand_data_collections,
)
from pgcdc_events.events.signals import (
    ExecuteSnapshot,
    LogSignal,
    PauseSnapshot,
    ResumeSnapshot,
    SignalWarning,
    StopSnapshot,
    parse_signal,
)
from pgcdc_events.events.snapshot_sql import (
    DEFAULT_CHUNK_SIZE,
    ChunkQuery,
    ChunkQueryBuilder,
    ChunkTable,
    SnapshotSqlError,
)
from pgcdc_events.protocol.capture import CaptureRow, dump_chunk_line
from pgcdc_events.protocol.copytext import CopyTextError, copy_text_rows
from pgcdc_events.protocol.decoder import parse_message
from pgcdc_events.protocol.messages import Relation
from pgcdc_events.types.catalog import CatalogSnapshot, CatalogTable, fetch_catalog

if TYPE_CHECKING:
    from pgcdc_events.adapters.units import Unit
    from pgcdc_events.events.config import EventConfig
    from pgcdc_events.events.decoder import EventDecoder
    from pgcdc_events.events.records import ChangeRecord

__all__ = ["ChunkHook", "IncrementalCapture", "IncrementalSettings", "IncrementalSnapshotter",
           "StepHook"]

_LOG: Final = logging.getLogger("pgcdc_events")

#: ``on_step(step, chunk_id)``: called at ``after_open`` (the open watermark is written,
#: the chunk not read yet), ``after_read`` and ``before_close`` (the chunk is read and
#: handed to the window, the close watermark not written yet). For tests and progress.
StepHook = Callable[[str, str], None]
#: ``on_chunk(chunk_id, table, chunk_key, rows)``: the rows of a chunk as they were handed to
#: the window (every table begun in the window, an empty chunk too), before its close
#: watermark is written (``read.only``: once the high watermark is taken): what a capture
#: records (a chunk line) for ``decode`` to replay.
ChunkHook = Callable[[str, CatalogTable, list[str], list[list[str | None]]], None]

_TRUE: Final = ("true", "1", "yes", "on")
#: ``read.only``: the checkpoint's key for the last transaction id of the stream.
_LAST_TX: Final = "txId"
#: The checkpoint's record of the first bytes of ``signal.file`` whose signals this
#: committed progress has acted on: ``{"bytes": N, "sha256": hex}``, until they are
#: removed from the file.
_SIGNAL_FILE: Final = "signal_file"
# PostgresReadOnlyIncrementalSnapshotChangeEventSource's queries (Debezium 3.6).
_FORCE_NEW_TRANSACTION: Final = ("SELECT (CASE pg_is_in_recovery() WHEN 't' THEN NULL::xid8 "
                                 "ELSE pg_current_xact_id() END) AS txid")
_CURRENT_SNAPSHOT: Final = "SELECT CAST(pg_current_snapshot() AS text)"


@attrs.frozen
class IncrementalSettings:
    """The connector properties an incremental snapshot reads.

    ``signal_data_collection``: the signalling table, ``schema.table`` (or
    ``database.schema.table``); ``chunk_size``: ``incremental.snapshot.chunk.size``;
    ``watermarking_strategy``: ``incremental.snapshot.watermarking.strategy``;
    ``read_only``: ``read.only``.
    """

    signal_data_collection: str
    chunk_size: int = DEFAULT_CHUNK_SIZE
    watermarking_strategy: str = INSERT_INSERT
    read_only: bool = False

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> IncrementalSettings:
        """The settings of connector ``properties``; a missing signalling table, a chunk
        size that is not a positive integer, or an unknown strategy is refused by name."""
        table = (properties.get("signal.data.collection") or "").strip()
        if not table:
            raise ConfigurationError("an incremental snapshot needs signal.data.collection "
                                     "(the signalling table, schema.table)")
        text = str(properties.get("incremental.snapshot.chunk.size", DEFAULT_CHUNK_SIZE)).strip()
        try:
            size = int(text)
        except ValueError:
            size = 0
        if size <= 0:
            raise ConfigurationError(
                f"incremental.snapshot.chunk.size must be a positive integer, not {text!r}")
        strategy = str(properties.get("incremental.snapshot.watermarking.strategy",
                                      INSERT_INSERT)).strip().lower()
        if strategy not in (INSERT_INSERT, INSERT_DELETE):
            raise ConfigurationError(
                "incremental.snapshot.watermarking.strategy must be insert_insert or "
                f"insert_delete, not {strategy!r}")
        read_only = str(properties.get("read.only", "false")).strip().lower() in _TRUE
        return cls(table, size, strategy, read_only)


class _ChunkQueryFailedError(Exception):
    """A chunk or maximum-key query the server refused (a bad additional condition...)."""


def _placeholders(sql: str, count: int,
                  mark: Callable[[int], str] = lambda n: f"${n}") -> str:
    """``sql`` with its first ``count`` ``?`` outside quotes turned into ``$1``, ``$2``...
    (``mark(n)``; the builder's bound values come before the additional condition, which
    is left as written)."""
    out: list[str] = []
    quote: str | None = None
    n = 0
    for char in sql:
        if quote is not None:
            if char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "?" and n < count:
            n += 1
            out.append(mark(n))
            continue
        out.append(char)
    if n != count:
        raise SnapshotSqlError(f"the chunk query has {n} placeholders for {count} values")
    return "".join(out)


def _copy_text_rows(data: bytes) -> list[list[str | None]]:
    """The rows of ``COPY ... TO STDOUT`` text output: each value as the type's text
    output (what the extended protocol's text format gives), ``None`` for NULL (parsed by
    the protocol layer's :func:`~pgcdc_events.protocol.copytext.copy_text_rows`)."""
    try:
        rows = copy_text_rows(data)
    except CopyTextError as exc:
        raise SnapshotError(f"an incremental snapshot chunk's COPY output: {exc}") from None
    return [[None if v is None else v.decode("utf-8") for v in row] for row in rows]


def _text_row(row: list[Any]) -> list[str | None]:
    return [None if v is None else str(v) for v in row]


class IncrementalSnapshotter:
    """Runs the incremental snapshots the signals ask for, chunk by chunk, while the
    embedder streams.

    ``conn`` is an open pg8000 native connection (see
    :meth:`~pgcdc_events.adapters.connection.ConnectionSettings.connect`; not the
    replication one: the snapshotter runs SQL on it while the stream is read elsewhere);
    ``catalog`` the tables (re-read once on this connection when a signal names a table
    it does not know); ``decoder`` the stream's decoder (its configuration keys the
    events: ``message.key.columns``, column filters); ``settings`` the signal and chunk
    properties; ``state`` a :meth:`state` saved earlier, to resume from.
    """

    def __init__(self, conn: Any, catalog: CatalogSnapshot, decoder: EventDecoder,
                 settings: IncrementalSettings, *, state: Mapping[str, Any] | None = None,
                 on_step: StepHook | None = None, on_chunk: ChunkHook | None = None,
                 source_signals: bool = True,
                 on_blocking: Callable[[ExecuteSnapshot], None] | None = None,
                 events: bool = True) -> None:
        self.conn = conn
        self.catalog = catalog
        self.decoder = decoder
        self.settings = settings
        self.on_step = on_step
        self.on_chunk = on_chunk
        #: Whether signal rows of the signalling table are acted on (``signal.enabled.channels``
        #: has ``source``); its watermark rows always are.
        self.source_signals = source_signals
        #: Given each ``execute-snapshot`` signal of type ``blocking`` (``None``: such a
        #: signal is named in a warning and skipped).
        self.on_blocking = on_blocking
        #: ``False``: the embedder hands :meth:`receive` the signalling table's records only
        #: and drops what it returns (a capture without ``--decode``: ``decode`` makes the
        #: ``r`` events from the chunk lines, ``on_chunk``). No streamed change can then
        #: remove a buffered row, so only each chunk's last row goes to the window (its key
        #: is the progress kept, as the ``r`` events of the whole chunk would leave it):
        #: the other rows are not converted for nothing. The signal-table windows only.
        self.events = events or settings.read_only
        context = IncrementalSnapshotContext.from_offset(state or {})
        self.window: ChunkWindow
        if settings.read_only:
            self.window = ReadOnlyChunkWindow(
                decoder, signal_data_collection=settings.signal_data_collection,
                context=context)
        else:
            self.window = ChunkWindow(
                decoder, signal_data_collection=settings.signal_data_collection,
                watermarking_strategy=settings.watermarking_strategy, context=context)
        self.builder = ChunkQueryBuilder(chunk_size=settings.chunk_size)
        schema, table = self.window.signal_table
        self._signal_sql = f"{quote_ident(schema)}.{quote_ident(table)}"
        self._pending: str | None = None  # the chunk whose close watermark is awaited
        self._catalog_refreshed = False
        #: ``read.only``: the transaction id of the commit or idle poll whose loop reads the
        #: chunk being read (``None``: read elsewhere), for :attr:`on_chunk`'s embedder.
        self.again: int | None = None
        # read.only: the chunks handed to the window, given to on_chunk once the high
        # watermark is taken (a chunk line carries both watermarks)
        self._read: list[tuple[str, CatalogTable, list[str], list[list[str | None]]]] = []

    @classmethod
    def from_properties(cls, conn: Any, catalog: CatalogSnapshot, decoder: EventDecoder,
                        properties: Mapping[str, str], *, state: Mapping[str, Any] | None = None,
                        on_step: StepHook | None = None) -> IncrementalSnapshotter:
        """A snapshotter configured by the connector ``properties``."""
        return cls(conn, catalog, decoder, IncrementalSettings.from_properties(properties),
                   state=state, on_step=on_step)

    # -- what the embedder calls -----------------------------------------------------------

    @property
    def context(self) -> IncrementalSnapshotContext:
        """The snapshot's progress."""
        return self.window.context

    @property
    def waiting(self) -> bool:
        """Whether a chunk was read and its close watermark has not come back yet."""
        return self._pending is not None

    def state(self) -> dict[str, Any]:
        """The progress to keep in a checkpoint (JSON-serialisable; empty when no snapshot
        runs): the tables left, the last key whose ``r`` event went out, the current
        table's largest key."""
        return self.context.to_offset()

    def start(self) -> None:
        """Resume a snapshot restored from ``state``: read its next chunk (nothing when no
        snapshot runs, when one is paused, or when a chunk is in flight)."""
        if self.context.running:
            self._force_new_transaction()
        self._advance()

    def receive(self, record: ChangeRecord) -> list[ChangeRecord]:
        """One record the decoder made of the stream, in stream order; returns the records
        to emit (the record, and at a close watermark the chunk's ``r`` events before it).
        Signals are acted on here; the next chunk is read when the close watermark of the
        current one came back."""
        out = self.window.receive(record)
        if self._pending is not None and self.window.pending_chunk != self._pending:
            self._pending = None  # its close watermark came back: the rows went out
        for signal in self.window.signals():
            if self.source_signals:
                self._on_signal(signal)
        if not self.settings.read_only:
            # read.only: at the transaction's commit (commit()), so that a chunk is never
            # read in the middle of a transaction's changes (see docs/snapshots.md)
            self._advance()
        return out

    def commit(self, tx_id: int | None, lsn: int | None = None, *,
               closing: Callable[[], None] | None = None) -> list[ChangeRecord]:
        """``read.only``: transaction ``tx_id`` committed (at ``lsn``), or an idle poll or
        heartbeat after it (``tx_id`` the last transaction seen); returns the ``r`` events
        of the chunks whose window closes here (``readUntilNewTransactionChange``), reading
        the next chunk after each, and then the next chunk when none is in flight (a
        window closed by a change of the transaction, a signal it held). ``closing()`` is
        called once, when a window closes here, before the next chunk is read. Nothing
        without ``read.only``."""
        window = self.window
        if not isinstance(window, ReadOnlyChunkWindow):
            return []
        out: list[ChangeRecord] = []
        records = window.commit(tx_id, lsn)
        if records is not None and closing is not None:
            closing()
        while records is not None:
            out += records
            self._pending = None
            self.again = tx_id
            try:
                self._advance()
            finally:
                self.again = None
            records = window.commit_again(tx_id)
        self._advance()
        return out

    def signal(self, signal: object) -> None:
        """A signal from another channel (``signal.file``): acted on as one of the stream's,
        and the next chunk read when none is in flight."""
        self._on_signal(signal)
        self._advance()

    # -- signals ---------------------------------------------------------------------------

    def _on_signal(self, signal: object) -> None:
        context = self.context
        if isinstance(signal, SignalWarning):
            _LOG.warning("skipped a signal: %s", signal)
        elif isinstance(signal, ExecuteSnapshot):
            for warning in signal.warnings:
                _LOG.warning("%s", warning)
            if signal.snapshot_type == "blocking" and self.on_blocking is not None:
                self.on_blocking(signal)
                return
            if signal.snapshot_type != "incremental":
                _LOG.warning("skipped execute-snapshot signal %r: %s snapshots are not "
                             "supported by pgcdc-events yet", signal.id, signal.snapshot_type)
                return
            tables = expand_data_collections(signal.data_collections, self._captured())
            starting = not context.running
            context.add(signal.id, tables, signal.additional_conditions, signal.surrogate_key)
            if starting and context.running:
                self._force_new_transaction()
            _LOG.info("incremental snapshot %r: queued %s", signal.id, ", ".join(tables))
        elif isinstance(signal, StopSnapshot):
            context.request_stop(list(signal.data_collections or ()))
            if self._pending is None:
                self._apply_stop()
        elif isinstance(signal, PauseSnapshot):
            if context.running:
                context.paused = True
                _LOG.info("incremental snapshot paused by signal %r", signal.id)
        elif isinstance(signal, ResumeSnapshot):
            if context.paused:
                context.paused = False
                _LOG.info("incremental snapshot resumed by signal %r", signal.id)
        elif isinstance(signal, LogSignal):
            _LOG.info("signal %r: %s", signal.id, signal.message)

    def _captured(self) -> list[str]:
        """The tables the decoder's filters capture, as ``schema.table`` (the connector
        matches a signal's regexes against its captured tables only)."""
        config = self.decoder.config
        return [f"{t.namespace}.{t.name}" for t in self.catalog.tables
                if config.includes_table(t.namespace, t.name)]

    def _apply_stop(self) -> None:
        for table in self.context.apply_stop(self._captured()):
            _LOG.info("incremental snapshot of %s stopped by signal", table)

    # -- chunks ----------------------------------------------------------------------------

    def _advance(self) -> None:
        context = self.context
        if self._pending is None and context.running and not context.paused:
            self._read_chunk()

    def _table(self, name: str) -> CatalogTable | None:
        parts = name.split(".")
        if len(parts) != 2:
            return None
        table = self.catalog.table(*parts)
        if table is None and not self._catalog_refreshed:  # created after the capture began
            self._catalog_refreshed = True
            self.catalog = fetch_catalog(self.conn)
            table = self.catalog.table(*parts)
        return table

    def _chunk_table(self, name: str, surrogate_key: str | None
                     ) -> tuple[CatalogTable, ChunkTable, list[str]] | None:
        """The table to read next and its chunk key, or ``None`` (skipped, with a warning)."""
        table = self._table(name)
        if table is None:
            _LOG.warning("skipped %s in the incremental snapshot: no such table", name)
            return None
        if not self.decoder.config.includes_table(table.namespace, table.name):
            _LOG.warning("skipped %s in the incremental snapshot: the table filters "
                         "(table.include.list, ...) leave it out", name)
            return None
        chunk_table = ChunkTable.from_catalog(table, self.decoder.config)
        if not chunk_table.key:
            _LOG.warning("skipped %s in the incremental snapshot: the table has no primary key "
                         "and no message.key.columns", name)
            return None
        try:
            keys = [c.name for c in self.builder.key_columns(chunk_table, surrogate_key)]
        except SnapshotSqlError as error:
            _LOG.warning("skipped %s in the incremental snapshot: %s", name, error)
            return None
        return table, chunk_table, keys

    def _read_chunk(self) -> None:
        """The connector's ``readChunk``: the open watermark, then the current table's next
        chunk (moving past finished, empty or skipped tables in the same window), then the
        close watermark."""
        context = self.context
        self._apply_stop()
        chunk_id: str | None = None
        given: CatalogTable | None = None  # a table begun whose rows the window lacks
        attempted = False
        while (current := context.current) is not None:
            attempted = True
            found = self._chunk_table(current.table, current.surrogate_key)
            if found is None:
                context.next_collection()
                continue
            table, chunk_table, keys = found
            if chunk_id is None:
                chunk_id = str(uuid.uuid4())
                self.window.begin_chunk(chunk_id, table)
                self._watermark(chunk_id, opens=True)
                self._step("after_open", chunk_id)
            else:
                self.window.begin_chunk(chunk_id, table)
            given = table
            try:
                rows = self._rows(chunk_table, keys, current.condition, current.surrogate_key)
            except _ChunkQueryFailedError as error:
                _LOG.warning("skipped %s in the incremental snapshot: %s", current.table, error)
                context.next_collection()
                continue
            self.window.chunk(chunk_id, table, rows if self.events else rows[-1:],
                              chunk_key=keys)
            self._chunk_read(chunk_id, table, keys, rows)
            given = None
            if rows:
                _LOG.info("incremental snapshot of %s: read %d rows up to key %s",
                          current.table, len(rows), list(context.chunk_end or ()))
                break
            _LOG.info("incremental snapshot of %s finished", current.table)
            context.next_collection()
        if chunk_id is None:
            if not attempted:
                return
            # every table left was skipped: the connector has written its open watermark
            # before it looked at them, and closes the window with nothing in it
            chunk_id = str(uuid.uuid4())
            self._watermark(chunk_id, opens=True)
            self._watermark(chunk_id, opens=False)
            return
        if given is not None:  # the last table begun failed: an empty chunk closes the window
            self.window.chunk(chunk_id, given, [], chunk_key=())
            self._chunk_read(chunk_id, given, [], [])
        self._step("after_read", chunk_id)
        self._step("before_close", chunk_id)
        self._watermark(chunk_id, opens=False)
        self._pending = chunk_id
        self._give_read()

    def _give_read(self) -> None:
        """``read.only``: the chunks read in this window to :attr:`on_chunk`, now that both
        watermarks are taken (``again`` on the last one only)."""
        read, self._read = self._read, []
        again = self.again
        try:
            for n, item in enumerate(read, 1):  # read.only: now, both watermarks taken
                self.again = again if n == len(read) else None  # the window's last chunk
                if self.on_chunk is not None:
                    self.on_chunk(*item)
        finally:
            self.again = again

    def _rows(self, table: ChunkTable, keys: list[str], condition: str | None,
              surrogate_key: str | None) -> list[list[str | None]]:
        """The current table's next chunk (empty when it is done), in the table's column
        order; reads the table's largest key first."""
        context = self.context
        positions = self._positions(table)
        width = len(table.columns)
        if context.maximum_key is None:
            top = self._query(self.builder.max_key_query(
                table, additional_condition=condition, surrogate_key=surrogate_key),
                positions, width)
            if not top:
                return []  # empty (or nothing matches the condition)
            names = [c.name for c in table.columns]
            context.set_maximum_key([top[0][names.index(k)] for k in keys])
        return self._query(self.builder.chunk_query(
            table, chunk_end=context.chunk_end, maximum_key=context.maximum_key,
            additional_condition=condition, surrogate_key=surrogate_key), positions, width,
            copy=condition is None)

    @staticmethod
    def _positions(table: ChunkTable) -> list[int] | None:
        """Where each projected column goes in the table's row (``None``: ``SELECT *``)."""
        if table.projection is None:
            return None
        names = [c.name for c in table.columns]
        return [names.index(n) for n in table.projection]

    def _query(self, query: ChunkQuery, positions: list[int] | None, width: int, *,
               copy: bool = False) -> list[list[str | None]]:
        """Run a chunk query through the extended protocol, one statement (an additional
        condition cannot add another), its values bound as text and typed by the server;
        every value comes back as the type's text output (pg8000's input functions set
        aside), and the condition's text is not parsed for pg8000's ``:name`` markers.

        ``copy`` (a query without an additional condition: nothing in it but the
        builder's SQL and the values): run it as ``COPY (query) TO STDOUT`` instead, the
        values written in as string constants, and read the text output in bulk, without
        pg8000's per-row message handling: the same values, several times faster. A
        user's filter never goes through it, as the simple protocol would run a second
        statement the filter smuggled in."""
        params = tuple(None if v is None else str(v) for v in query.params)
        conn = self.conn
        saved = conn.pg_types
        conn.pg_types = defaultdict(lambda: str)
        try:
            if copy:
                sql = _placeholders(query.sql, len(params), lambda n: quote_literal(params[n - 1]))
                pieces: list[bytes] = []
                copy_out(conn, f"COPY ({sql}) TO STDOUT", pieces.append)
                rows = _copy_text_rows(b"".join(pieces))
            else:
                sql = _placeholders(query.sql, len(query.params))
                rows = conn.execute_unnamed(sql, vals=params, oids=()).rows
        except Exception as exc:
            if not is_driver_error(exc):
                raise
            code, message = server_fields(exc)
            if code is None or code.startswith(("08", "57P")):
                raise translate_error(exc, slot=None, action="read an incremental snapshot "
                                      "chunk") from None
            raise _ChunkQueryFailedError(f"the chunk query failed: {message} (SQLSTATE {code})"
                                         ) from None
        finally:
            conn.pg_types = saved
        out = rows if copy else [_text_row(r) for r in rows or []]
        if positions is None:
            return out
        full: list[list[str | None]] = []
        for row in out:  # the columns left out by the column filters: NULL
            values: list[str | None] = [None] * width
            for p, v in zip(positions, row, strict=True):
                values[p] = v
            full.append(values)
        return full

    def _watermark(self, chunk_id: str, *, opens: bool) -> None:
        """Write a watermark row into the signalling table (its own transaction); a
        refusal is one of our errors, naming the table. ``read.only``: take
        ``pg_current_snapshot()`` as the watermark instead, and write nothing."""
        window = self.window
        if isinstance(window, ReadOnlyChunkWindow):
            text = str(self._read_only_query(_CURRENT_SNAPSHOT, "take the watermark"))
            (window.set_low_watermark if opens else window.set_high_watermark)(text)
            return
        try:
            self._write_watermark(chunk_id, opens=opens)
        except Exception as exc:
            if not is_driver_error(exc):
                raise
            raise translate_error(exc, slot=None, action="write the incremental snapshot "
                                  f"watermark into {self.settings.signal_data_collection}"
                                  ) from None

    def _force_new_transaction(self) -> None:
        """``read.only`` (``preIncrementalSnapshotStart``): give a transaction an id, so the
        server's next transaction id moves past every one already seen (nothing on a hot
        standby)."""
        if isinstance(self.window, ReadOnlyChunkWindow):
            self._read_only_query(_FORCE_NEW_TRANSACTION, "start a transaction")

    def _read_only_query(self, sql: str, action: str) -> Any:
        try:
            rows = self.conn.run(sql)
        except Exception as exc:
            if not is_driver_error(exc):
                raise
            raise translate_error(exc, slot=None, action=f"{action} for a read-only "
                                  "incremental snapshot") from None
        return rows[0][0] if rows else None

    def _write_watermark(self, chunk_id: str, *, opens: bool) -> None:
        now = datetime.now(timezone.utc).isoformat()
        if opens:
            self.conn.run(f"INSERT INTO {self._signal_sql} VALUES (:i, :t, :d)",
                          i=f"{chunk_id}-open", t="snapshot-window-open",
                          d=json.dumps({"openWindowTimestamp": now}))
        elif self.window.insert_delete:
            column = self._signal_id_column()
            self.conn.run(f"DELETE FROM {self._signal_sql} WHERE {quote_ident(column)} = :i",
                          i=f"{chunk_id}-open")
        else:
            self.conn.run(f"INSERT INTO {self._signal_sql} VALUES (:i, :t, :d)",
                          i=f"{chunk_id}-close", t="snapshot-window-close",
                          d=json.dumps({"openWindowTimestamp": now,
                                        "closeWindowTimestamp": now}))

    def _signal_id_column(self) -> str:
        table = self.catalog.table(*self.window.signal_table)
        return table.columns[0].name if table is not None and table.columns else "id"

    def _chunk_read(self, chunk_id: str, table: CatalogTable, keys: list[str],
                    rows: list[list[str | None]]) -> None:
        if self.on_chunk is None:
            return
        if self.settings.read_only:
            self._read.append((chunk_id, table, keys, rows))
        else:
            self.on_chunk(chunk_id, table, keys, rows)

    def _step(self, step: str, chunk_id: str) -> None:
        if self.on_step is not None:
            self.on_step(step, chunk_id)


def _expand_blocking(patterns: Iterable[str], tables: Iterable[CatalogTable]) -> list[str]:
    """A blocking signal's ``data-collections`` expanded: as an incremental signal's
    (:func:`~pgcdc_events.events.incremental.expand_data_collections`), and a regular
    expression also matches a table by its double-quoted name, ``"schema"."table"``
    (``AbstractSnapshotChangeEventSource.tableNameMatcher``, DBZ-7718)."""
    names = {f"{t.namespace}.{t.name}": '"{}"."{}"'.format(t.namespace.replace('"', '""'),
                                                           t.name.replace('"', '""'))
             for t in tables}
    out: dict[str, None] = {}
    for pattern in patterns:
        try:
            regex = re.compile(pattern)
        except re.error:
            matched: list[str] = []
        else:
            matched = [n for n, q in names.items() if regex.fullmatch(n) or regex.fullmatch(q)]
        for name in matched or [pattern]:
            out.setdefault(name, None)
    return list(out)


def _blocking_state(value: object) -> list[dict[str, Any]]:
    """The blocking snapshots waiting, as a checkpoint keeps them; anything else is
    refused by name."""
    if value is None:
        return []
    if isinstance(value, list) and all(
            isinstance(b, dict) and isinstance(b.get("id"), str)
            and isinstance(b.get("tables"), list)
            and all(isinstance(t, str) for t in b["tables"])
            and isinstance(b.get("filters", {}), dict) for b in value):
        return [{"id": b["id"], "tables": list(b["tables"]),
                 "filters": dict(b.get("filters", {}))} for b in value]
    raise CheckpointError(f"field 'incremental.blocking' is malformed: {value!r}")


def _channels(properties: Mapping[str, str]) -> tuple[bool, str | None]:
    """``signal.enabled.channels``: whether the ``source`` channel is on, and the file of
    the ``file`` channel (``signal.file``); any other channel is refused by name."""
    raw = properties.get("signal.enabled.channels") or "source"
    channels = [c.strip().lower() for c in raw.split(",") if c.strip()]
    other = [c for c in channels if c not in ("source", "file")]
    if other:
        raise ConfigurationError(
            f"signal.enabled.channels: pgcdc-events reads the source and file channels, not "
            f"{', '.join(repr(c) for c in other)}")
    path = None
    if "file" in channels:
        path = (properties.get("signal.file") or "").strip()
        if not path:
            raise ConfigurationError("signal.enabled.channels has file: set signal.file (the "
                                     "file the signals are appended to, one JSON a line)")
    return "source" in channels, path


class _SignalFeed:
    """The signalling table's rows out of the units a capture writes, decoded: what a
    capture without ``--decode`` needs to act on signals and watermarks.

    A unit that does not mention the table's OID (in its hex) is not parsed at all; the
    others are fed to the decoder without their other tables' changes (their Begin,
    Commit, stream blocks, Relation and Type messages kept)."""

    def __init__(self, decoder: EventDecoder, signal: tuple[str, str],
                 catalog: CatalogSnapshot, *, everything: bool = False) -> None:
        self.decoder = decoder
        self.signal = signal
        #: ``read.only``: every row decoded (the window follows every change's transaction
        #: id, and dedups the chunk's table).
        self.everything = everything
        table = catalog.table(*signal)
        self.oids: set[int] = {table.oid} if table is not None else set()

    def _learn(self, rows: Iterable[CaptureRow]) -> None:
        """The signalling table's OID from the Relation messages among ``rows``."""
        in_stream = False
        for row in rows:
            kind = row.data[:1]
            if kind == b"S":
                in_stream = True
            elif kind == b"E":
                in_stream = False
            elif kind == b"R":
                message = parse_message(row.data, in_stream=in_stream)
                if isinstance(message, Relation) and \
                        (message.namespace, message.name) == self.signal:
                    self.oids.add(message.relation_id)

    def records(self, unit: Unit) -> Iterator[ChangeRecord]:
        """The records of the signalling table's rows in ``unit``."""
        if self.everything:
            feed = self.decoder.iter_feed
            for row in itertools.chain(unit.schema, unit):
                yield from feed(row.data, row.lsn)
            return
        self._learn(unit.schema)
        self._learn(unit.marks if unit.rendered else unit)
        if not self.oids:
            return
        if unit.rendered:
            marks = [f"{oid:08x}" for oid in self.oids]
            marks += [m.upper() for m in marks if not m.isdigit()]  # hex of either case
            if not any(mark in block for block in unit.text() for mark in marks):
                return
        feed = self.decoder.iter_feed
        for row in unit.schema:
            yield from feed(row.data, row.lsn)
        in_stream = False
        oids = self.oids
        for row in unit:
            data = row.data
            kind = data[:1]
            if kind == b"S":
                in_stream = True
            elif kind == b"E":
                in_stream = False
            elif kind in (b"I", b"U", b"D"):
                at = 5 if in_stream else 1
                if int.from_bytes(data[at:at + 4], "big") not in oids:
                    continue
            elif kind == b"T":
                continue
            yield from feed(data, row.lsn)


class IncrementalCapture:
    """The incremental snapshots of a capture (``run_capture(incremental=...)``).

    ``connect()`` opens the ordinary connection the chunks are read and the watermarks
    written on; ``properties`` are the connector's (``signal.data.collection``,
    ``signal.enabled.channels``, ``signal.file``, ``incremental.snapshot.*``,
    ``read.only``); ``config`` keys the events (``message.key.columns``, column
    filters); ``decode`` says whether the capture writes records (the records then go
    through :meth:`receive`, and :meth:`end_unit` after each unit's) or capture lines
    (each unit written goes to :meth:`written`, and each chunk read is written into the
    output as a chunk line). ``progress(text)`` is told of each chunk and each table
    finished. With ``read.only`` (``pg_current_snapshot()`` as the watermarks, nothing
    written), the capture calls :meth:`idle` when a read brought nothing new; each chunk
    line carries the two watermarks, and an idle poll that closed a window writes an idle
    line, from which ``decode`` replays the windows.

    The progress is the connector's offset form (:meth:`state`), committed with the output
    (``Checkpoint.incremental``); :meth:`start`, at each connection, makes the snapshotter
    again from the committed state, so that what was rolled back (or lost with the
    process) is read again and a finished table never is.
    """

    def __init__(self, connect: Callable[[], Any], properties: Mapping[str, str],
                 config: EventConfig, *, decode: bool, publications: Sequence[str] = (),
                 progress: Callable[[str], None] | None = None,
                 on_step: StepHook | None = None) -> None:
        self.settings = IncrementalSettings.from_properties(properties)
        parts = self.settings.signal_data_collection.split(".")
        if len(parts) not in (2, 3) or not all(parts):
            raise ConfigurationError(
                f"signal.data.collection {self.settings.signal_data_collection!r} is not "
                "schema.table (or database.schema.table)")
        self.signal: tuple[str, str] = (parts[-2], parts[-1])
        self.source, self.signal_file = _channels(properties)
        self.connect = connect
        self.publications = tuple(publications)
        self.config = config
        self.decode = decode
        self.progress = progress
        self.on_step = on_step
        self.snapshotter: IncrementalSnapshotter | None = None
        self.conn: Any = None
        self._output: Any = None
        self._feed: _SignalFeed | None = None
        self.lsn = 0
        self._rows: dict[str, int] = {}
        self._chunks: dict[str, int] = {}
        #: The blocking snapshots asked for and not written yet, oldest first, each
        #: ``{"id", "tables": [schema.table...], "filters": {schema.table: SELECT}}``: in the
        #: checkpoint (``state()["blocking"]``) from the commit of the unit that held the
        #: signal to the commit of its snapshot block.
        self.blocking: list[dict[str, Any]] = []
        self._fresh = False  # read.only: the next chunk line is the first of this start()
        #: ``read.only``: the id of the last transaction of the stream (kept in the
        #: checkpoint while a snapshot runs, as the connector's offset keeps ``txId``): what
        #: an idle poll compares with the watermarks, a restarted capture too.
        self.last_tx: int | None = None
        #: ``read.only``: lines written (chunks, idle lines) since :meth:`state` was last
        #: taken: an idle poll commits them, with the progress.
        self.unsaved = False
        #: The first bytes of ``signal.file`` whose signals were acted on and are still in
        #: the file: removed from it once a commit holds their effect (:meth:`poll`).
        self._taken = b""
        #: The committed checkpoint's record of such bytes, checked at the next poll.
        self._done: tuple[int, str] | None = None

    @property
    def read_only(self) -> bool:
        """Whether the snapshots are read-only (``read.only=true``)."""
        return self.settings.read_only

    # -- the capture's steps -------------------------------------------------------------
    def start(self, output: Any, lsn: int | None, state: Mapping[str, Any], *,
              options: ResolvedOptions, decoder: EventDecoder | None = None,
              catalog: CatalogSnapshot | None = None) -> None:
        """At each connection, once the output is bound: the snapshotter made from the
        committed ``state``, resuming a snapshot in progress (its next chunk is read
        now). ``decoder`` (and its ``catalog``) are the record sink's, with ``decode``."""
        if self.conn is None:
            self.conn = self.connect()
            self._check_published()
        if catalog is None:
            catalog = fetch_catalog(self.conn)
        if decoder is None:
            from pgcdc_events.events.decoder import EventDecoder  # noqa: PLC0415 - start-up

            decoder = EventDecoder(self.config, catalog=catalog,
                                   proto_version=options.proto_version,
                                   streaming=options.streaming)
            self._feed = _SignalFeed(decoder, self.signal, catalog,
                                     everything=self.settings.read_only)
        self._output = output
        self._fresh = True
        self.lsn = lsn or 0
        state = dict(state)
        self.blocking = _blocking_state(state.pop("blocking", None))
        self._taken, self._done = b"", _signal_file_record(state.pop(_SIGNAL_FILE, None))
        last_tx = state.pop(_LAST_TX, None)
        if last_tx is not None:
            if isinstance(last_tx, bool) or not isinstance(last_tx, int) or last_tx < 0:
                raise CheckpointError(f"field 'incremental.{_LAST_TX}' is malformed: "
                                      f"{last_tx!r}")
            self.last_tx = last_tx
        self.snapshotter = IncrementalSnapshotter(
            self.conn, catalog, decoder, self.settings, state=state, on_step=self.on_step,
            on_chunk=self._chunk, source_signals=self.source, on_blocking=self._on_blocking,
            events=self.decode)
        self.snapshotter.start()

    def written(self, unit: Unit) -> None:
        """A unit was written into the capture (not ``--decode``): its signals and
        watermarks acted on, after it."""
        assert self.snapshotter is not None and self._feed is not None, "start() first"
        self.lsn = unit.end_lsn
        receive = self.snapshotter.receive
        for record in self._feed.records(unit):
            receive(record)  # the r events are decode's to make, from the chunk lines
        self.end_unit(unit)

    def end_unit(self, unit: Unit) -> list[ChangeRecord]:
        """``read.only``: after the records of ``unit``, its commit (a transaction's, or a
        streamed one's): the ``r`` events of the windows it closes (the records to write
        after the unit's, with ``--decode``), the next chunk read (``decode`` replays the
        same at the unit's Commit or Stream Commit message). Nothing otherwise."""
        snapshotter = self.snapshotter
        assert snapshotter is not None, "start() first"
        if not self.settings.read_only or unit.kind not in ("transaction", "streamed"):
            return []
        tx_id = snapshotter.decoder.metrics.last_transaction_id
        if tx_id is not None:
            self.last_tx = tx_id
        return snapshotter.commit(tx_id, unit.end_lsn)

    def idle(self) -> tuple[bool, list[ChangeRecord]]:
        """``read.only``: an idle poll (the stream had nothing new): with the id of the last
        transaction seen, the windows that close now (``readUntilNewTransactionChange``);
        whether one did, and their ``r`` events (to write, with ``--decode``). Without
        ``--decode`` the capture then holds an idle line (a chunk line with ``idle``: the
        transaction id), written before the next chunk's line, for ``decode`` to close
        the window at the same place."""
        snapshotter = self.snapshotter
        if not self.settings.read_only or snapshotter is None:
            return False, []
        tx_id = self.last_tx
        chunk_id = snapshotter.window.pending_chunk
        closed: list[bool] = []

        def closing() -> None:
            closed.append(True)
            if not self.decode:
                line = {"id": chunk_id, "idle": tx_id,
                        "signal": ".".join(self.signal)}
                self._output.write(dump_chunk_line(self.lsn, line).encode("ascii") + b"\n")
                self.unsaved = True

        records = snapshotter.commit(tx_id, closing=closing)
        return bool(closed), records

    def receive(self, record: ChangeRecord) -> list[ChangeRecord]:
        """A record decoded from the stream (``--decode``): the records to write."""
        assert self.snapshotter is not None, "start() first"
        return self.snapshotter.receive(record)

    def poll(self) -> None:
        """Act on the signals appended to ``signal.file`` since the last poll (whole lines;
        a line that is not a signal is named in a warning and skipped), and remove from the
        file the lines whose effect a commit holds.

        Exactly once, across crashes: the lines acted on stay in the file until the
        checkpoint records them (:meth:`state` gives their length and SHA-256 with the
        progress they made); a capture that stops before a commit (a read-only snapshot
        whose output holds no unit yet, a crash) leaves them for the next run, and a run
        whose committed checkpoint records the file's first lines does not act on them
        again."""
        path = self.signal_file
        if path is None or self.snapshotter is None:
            return
        try:
            with open(path, "rb") as fh:
                text = fh.read()
        except FileNotFoundError:
            text = b""
        except OSError as exc:
            _LOG.warning("signal.file %s: cannot read it: %s", path, exc.strerror or exc)
            return
        if self._done is not None:  # the first poll of a start(): what the commit holds
            size, digest = self._done
            self._done = None
            if len(text) >= size and _sha256(text[:size]) == digest:
                self._taken = text[:size]
        if not text.startswith(self._taken):  # the file was rewritten meanwhile
            self._taken = b""
        if self._taken and self._taken_committed():
            text = _remove_prefix(path, self._taken)
            if not text.startswith(self._taken):
                self._taken = b""
        new = text[len(self._taken):]
        end = new.rfind(b"\n") + 1
        if end < len(new) and _is_json(new[end:]):
            end = len(new)  # a last line without its newline, whole
        first = self._taken.count(b"\n") + 1
        self._taken += new[:end]
        for number, raw in enumerate(new[:end].splitlines(), first):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
                signal_id, signal_type = obj["id"], obj["type"]
                data = obj.get("data")
                if not isinstance(signal_id, str) or not isinstance(signal_type, str):
                    raise TypeError("id and type must be strings")
            except (ValueError, KeyError, TypeError, AttributeError) as error:
                _LOG.warning("skipped line %d of signal.file %s: not a signal "
                             '({"id", "type", "data"} JSON): %s', number, path, error)
                continue
            text_data = data if data is None or isinstance(data, str) else json.dumps(data)
            self.snapshotter.signal(parse_signal(signal_id, signal_type, text_data))

    def settle(self) -> bool:
        """At the end of a run: remove from ``signal.file`` the lines whose effect the last
        commit holds (as the next poll would); whether they were (the checkpoint's record
        of them is then to be dropped, with a commit of :meth:`state`)."""
        path = self.signal_file
        if path is not None and self._taken and self._taken_committed() \
                and not _remove_prefix(path, self._taken).startswith(self._taken):
            self._taken = b""
            return True
        return False

    def _taken_committed(self) -> bool:
        """Whether the output's committed checkpoint records the signal file's lines acted
        on (their effect is durable: they may leave the file)."""
        checkpoint = getattr(self._output, "checkpoint", None)
        committed = getattr(checkpoint, "incremental", None) or {}
        return bool(committed.get(_SIGNAL_FILE) == _signal_file_state(self._taken))

    def state(self) -> dict[str, Any]:
        """The progress to commit with the output (the blocking snapshots waiting too)."""
        self.unsaved = False
        state = {} if self.snapshotter is None else self.snapshotter.state()
        if state and self.settings.read_only and self.last_tx is not None:
            state[_LAST_TX] = self.last_tx
        if self.blocking:
            state["blocking"] = [dict(b) for b in self.blocking]
        if self._taken:
            state[_SIGNAL_FILE] = _signal_file_state(self._taken)
        return state

    # -- blocking snapshots ----------------------------------------------------------------
    def _on_blocking(self, signal: ExecuteSnapshot) -> None:
        """An ``execute-snapshot`` of type ``blocking``: queued, its tables expanded now
        (regular expressions against the known tables) with their ``additional-conditions``
        (a whole ``SELECT`` each); the capture takes it after the unit that held it."""
        assert self.snapshotter is not None
        tables = _expand_blocking(signal.data_collections, self.snapshotter.catalog.tables)
        filters = {t: c for t in tables if (c := signal.condition_for(t)) is not None}
        self.blocking.append({"id": signal.id, "tables": tables, "filters": filters})
        _LOG.info("blocking snapshot %r: %s", signal.id, ", ".join(tables))

    def run_blocking(self, emit: Callable[[CaptureRow], None], line_lsn: int
                     ) -> SnapshotResult | None:
        """Take the oldest blocking snapshot waiting, as a snapshot block given to ``emit``
        (:func:`~pgcdc_events.adapters.snapshot.read_blocking_snapshot`), and drop it from
        the queue. A table that does not exist or is in none of the publications read is
        named in a warning and left out, and so is one the table filters leave out
        (``table.include.list``...). ``None`` when nothing was read: no table left, or
        the server refused a statement (a bad ``SELECT``; named in a warning): the caller
        then drops what ``emit`` was given. A lost connection raises
        :class:`~pgcdc_events.adapters.errors.ConnectionLostError` with the snapshot still
        queued."""
        assert self.conn is not None, "start() first"
        request = self.blocking[0]
        signal_id = request["id"]
        catalog = fetch_catalog(self.conn)  # tables created since the capture began too
        published = self._published()
        items: list[BlockingTable] = []
        for name in request["tables"]:
            parts = name.split(".")
            table = catalog.table(*parts) if len(parts) == 2 else None
            if table is None:
                _LOG.warning("skipped %s in blocking snapshot %r: no such table", name,
                             signal_id)
            elif not self.config.includes_table(table.namespace, table.name):
                _LOG.warning("skipped %s in blocking snapshot %r: the table filters leave it "
                             "out (table.include.list...)", name, signal_id)
            elif published is not None and name not in published:
                _LOG.warning("skipped %s in blocking snapshot %r: the table is in none of "
                             "the publications read", name, signal_id)
            else:
                items.append(BlockingTable(table, request["filters"].get(name)))
        if not items:
            _LOG.warning("blocking snapshot %r: no table to read", signal_id)
            self.blocking.pop(0)
            return None
        if self.progress is not None:
            self.progress(f"blocking snapshot {signal_id!r}: reading "
                          f"{', '.join(i.where for i in items)} (the stream is paused)")
        try:
            result = read_blocking_snapshot(self.conn, items, emit, line_lsn=line_lsn,
                                            run=self._run)
        except Exception as exc:
            if not is_driver_error(exc):
                raise
            code, message = server_fields(exc)
            if code is None or code.startswith(("08", "57P")):
                raise translate_error(exc, slot=None, action="read a blocking snapshot"
                                      ) from None
            _LOG.warning("blocking snapshot %r failed, nothing of it is written and the "
                         "stream resumes: %s (SQLSTATE %s)", signal_id, message, code)
            self.blocking.pop(0)
            return None
        self.blocking.pop(0)
        if self.progress is not None:
            self.progress(f"blocking snapshot {signal_id!r}: {result.rows:,} rows of "
                          f"{result.tables} tables; the stream resumes")
        return result

    def _run(self, sql: str, action: str, **params: Any) -> Any:
        try:
            return self.conn.run(sql, **params)
        except Exception as exc:
            if not is_driver_error(exc):
                raise
            raise translate_error(exc, slot=None, action=action) from None

    def _published(self) -> set[str] | None:
        """The tables of the publications read (``None``: no publication given)."""
        if not self.publications:
            return None
        rows = self._run("SELECT schemaname, tablename FROM pg_publication_tables WHERE "
                         "pubname = ANY(CAST(:p AS text[]))", "list the published tables",
                         p=list(self.publications))
        return {f"{schema}.{table}" for schema, table in rows}

    @property
    def busy(self) -> bool:
        """Whether a snapshot runs (and is not paused), or a chunk read waits for its close
        watermark (paused or stopped meanwhile): a capture that is not following reads on
        until then."""
        if self.snapshotter is None:
            return False
        context = self.snapshotter.context
        return (context.running and not context.paused) or self.snapshotter.waiting

    def close(self) -> None:
        """Close the connection (never raises)."""
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # closing a connection that may be gone
                _LOG.debug("closing the incremental snapshot connection failed")

    # -- pieces ----------------------------------------------------------------------------
    def _check_published(self) -> None:
        """The watermarks come back through the stream: the signalling table must be in one
        of the publications read (else the first chunk would wait for ever)."""
        if not self.publications:
            return
        schema, table = self.signal
        try:
            rows = self.conn.run(
                "SELECT 1 FROM pg_publication_tables WHERE pubname = ANY(CAST(:p AS text[])) "
                "AND schemaname = :s AND tablename = :t",
                p=list(self.publications), s=schema, t=table)
        except Exception as exc:
            if not is_driver_error(exc):
                raise
            raise translate_error(exc, slot=None, action="check the signalling table's "
                                  "publication") from None
        if not rows:
            names = ", ".join(quote_ident(p) for p in self.publications)
            raise ConfigurationError(
                f"signal.data.collection {'.'.join(self.signal)}: the table is in none of the "
                f"publications read ({names}), so the incremental snapshot's watermarks would "
                "never come back through the stream; create it and add it: ALTER PUBLICATION "
                f"{quote_ident(self.publications[0])} ADD TABLE "
                f"{quote_ident(schema)}.{quote_ident(table)}")

    def _chunk(self, chunk_id: str, table: CatalogTable, keys: list[str],
               rows: list[list[str | None]]) -> None:
        name = f"{table.namespace}.{table.name}"
        if not self.decode:
            chunk: dict[str, Any] = {
                "id": chunk_id, "table": catalog_table_to_json(table), "key": keys,
                "signal": ".".join(self.signal),
                "strategy": self.settings.watermarking_strategy, "rows": rows}
            snapshotter = self.snapshotter
            if self.settings.read_only and snapshotter is not None:
                window = snapshotter.window
                assert isinstance(window, ReadOnlyChunkWindow)
                chunk["low"], chunk["high"] = str(window.low), str(window.high)
                if self._fresh:
                    chunk["start"], self._fresh = True, False
                if snapshotter.again is not None:
                    chunk["again"] = snapshotter.again
                self.unsaved = True
            self._output.write(dump_chunk_line(self.lsn, chunk).encode("ascii") + b"\n")
        if self.progress is None:
            return
        if rows:
            self._rows[name] = self._rows.get(name, 0) + len(rows)
            self._chunks[name] = self._chunks.get(name, 0) + 1
            end = self.snapshotter.context.chunk_end if self.snapshotter is not None else None
            self.progress(f"incremental snapshot of {name}: chunk {self._chunks[name]}, "
                          f"{len(rows):,} rows up to key {list(end or ())} "
                          f"({self._rows[name]:,} rows read by this run)")
        elif keys:
            self.progress(f"incremental snapshot of {name}: finished "
                          f"({self._rows.pop(name, 0):,} rows read by this run)")
            self._chunks.pop(name, None)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _signal_file_state(taken: bytes) -> dict[str, Any]:
    """The checkpoint's record of ``signal.file``'s first bytes acted on."""
    return {"bytes": len(taken), "sha256": _sha256(taken)}


def _signal_file_record(value: Any) -> tuple[int, str] | None:
    """``(bytes, sha256)`` of the checkpoint's ``signal_file`` record (None: none)."""
    if value is None:
        return None
    size = value.get("bytes") if isinstance(value, dict) else None
    digest = value.get("sha256") if isinstance(value, dict) else None
    if (isinstance(size, bool) or not isinstance(size, int) or size < 0
            or not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest)):
        raise CheckpointError(f"field 'incremental.{_SIGNAL_FILE}' is malformed: {value!r}")
    return size, digest


def _is_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except ValueError:
        return False
    return True


def _remove_prefix(path: str, prefix: bytes) -> bytes:
    """Remove ``prefix`` from the start of the file at ``path`` (when it still starts
    with it), in place; what the file holds after (as read, when it cannot be written:
    the lines are then removed at a later poll)."""
    try:
        with open(path, "r+b") as fh:
            text = fh.read()
            if not text.startswith(prefix):
                return text
            fh.seek(0)
            fh.write(text[len(prefix):])
            fh.truncate()
            return text[len(prefix):]
    except FileNotFoundError:
        return b""
    except OSError as exc:
        _LOG.warning("signal.file %s: cannot remove the signals acted on: %s", path,
                     exc.strerror or exc)
        return prefix
