"""The event decoder: pgoutput messages in, Debezium change-event records out.

:class:`EventDecoder` is sans-I/O, like the protocol layer beneath it: feed it each
message with its WAL position (:meth:`~EventDecoder.feed` for bytes,
:meth:`~EventDecoder.feed_row` for capture rows, :meth:`~EventDecoder.handle` for
parsed messages) and it returns the records the Debezium PostgreSQL connector
would have produced for it, in order. It keeps the state that requires: table
schemas per Relation version, the open transaction, buffered streamed and
prepared transactions, and the last commit LSN for ``source.sequence``.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final

import attrs

from pgcdc_events.errors import ConfigurationError, ConversionError, ProtocolError
from pgcdc_events.events.config import EventConfig
from pgcdc_events.events.envelope import (
    TRANSACTION_BLOCK_SCHEMA,
    envelope_value,
    tombstone,
)
from pgcdc_events.events.metrics import StreamingMetrics
from pgcdc_events.events.records import ChangeRecord, Header, make_record
from pgcdc_events.events.snapshot import SnapshotRow, SnapshotSequence, snapshot_records
from pgcdc_events.events.source import from_shared, sequence_head, shared_fields
from pgcdc_events.events.special import (
    heartbeat_record,
    message_record,
    transaction_record,
    truncate_record,
)
from pgcdc_events.events.tables import TableSchema, build_table_schema
from pgcdc_events.events.transactions import ChangeBuffer, MemoryBudget, TransactionContext
from pgcdc_events.protocol import wire
from pgcdc_events.protocol.capture import CaptureRow
from pgcdc_events.protocol.lsn import Lsn, pg_timestamp_to_unix_us
from pgcdc_events.protocol.messages import (
    Begin,
    BeginPrepare,
    Commit,
    CommitPrepared,
    Delete,
    Insert,
    LogicalMessage,
    Message,
    Origin,
    Prepare,
    Relation,
    RollbackPrepared,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
    StreamStop,
    Truncate,
    TupleData,
    Type,
    Update,
)
from pgcdc_events.protocol.reader import PgOutputReader, Streaming
from pgcdc_events.protocol.transactions import Step, TransactionResolver
from pgcdc_events.types.catalog import (
    CatalogSnapshot,
    CatalogTable,
    catalog_table_for,
    describes,
)
from pgcdc_events.types.mapper import TypeMapper
from pgcdc_events.types.registry import TypeRegistry
from pgcdc_events.types.schema import STRUCT_BUILDER, Schema, Struct

if TYPE_CHECKING:
    from pgcdc_events.events.fused import FusedLines

__all__ = ["EventDecoder"]


_STRING: Final = Schema("string")
# the type bytes the resolver is fed
_BEGIN, _COMMIT, _PREPARE, _STREAM_STOP = (wire.BEGIN[0], wire.COMMIT[0], wire.PREPARE[0],
                                           wire.STREAM_STOP[0])
_NOTHING: Final = object()
#: The methods a row change goes through that ``_direct`` calls as this class defines
#: them: a subclass that overrides one makes its decoder take ``_row_change`` instead.
_ROW_PATH: Final = ("_emit_row", "_insert", "_update", "_delete")
_LOG: Final = logging.getLogger("pgcdc_events")


@attrs.frozen
class _Pending:
    """A change held until its transaction commits: the table version, message and LSN."""

    table: TableSchema | None
    message: Insert | Update | Delete | Truncate | LogicalMessage
    lsn: int
    tables: tuple[TableSchema | None, ...] = ()


class EventDecoder:
    """Turns pgoutput messages into Debezium change-event records.

    ``catalog`` supplies what pgoutput does not carry (NOT NULL, primary keys,
    defaults, enum labels, domains); without it the decoder makes the documented
    assumptions of the type layer. ``proto_version`` and ``streaming`` are the
    options the stream was started with (see :class:`PgOutputReader`). ``clock``
    returns nanoseconds since the Unix epoch; it stamps the envelope's processing
    time (``ts_ms``/``ts_us``/``ts_ns``) and heartbeats. ``memory_limit`` (bytes) bounds
    the streamed and prepared changes held in memory; beyond it they spill to a
    temporary file (see :class:`~pgcdc_events.spill.MemoryBudget`). ``catalog_refresh``,
    given with a ``catalog``, returns a newer catalog snapshot (or ``None``): it is called
    when a Relation message describes a table the catalog does not (created or altered
    since the catalog was read), once per such table version, and the decoder goes on
    with what it returns (:meth:`use_catalog`).
    """

    #: The ``plugin.name`` whose records this class produces.
    PLUGIN: str = "pgoutput"

    def __init__(
        self,
        config: EventConfig,
        *,
        catalog: CatalogSnapshot | None = None,
        proto_version: int | None = None,
        streaming: Streaming | None = None,
        clock: Callable[[], int] = time.time_ns,
        run_id: str | None = None,
        memory_limit: int | None = None,
        catalog_refresh: Callable[[], CatalogSnapshot | None] | None = None,
    ) -> None:
        if config.plugin_name != self.PLUGIN:  # yboutput: events.yugabyte.make_decoder
            raise ConfigurationError(
                f"{type(self).__name__} produces the records of plugin.name={self.PLUGIN}, not "
                f"{config.plugin_name}; pgcdc_events.events.yugabyte.make_decoder picks the "
                "decoder a configuration calls for")
        self.config = config = config.with_catalog(catalog)
        self.catalog = catalog
        self.clock = clock
        self.reader = PgOutputReader(proto_version=proto_version, streaming=streaming)
        self.registry = TypeRegistry(catalog)
        self.mapper = TypeMapper(config.types, self.registry)
        self.metrics = StreamingMetrics()
        self._tables: dict[int, TableSchema | None] = {}
        #: Whether a subclass handles messages its own way: feed_row and iter_feed then
        #: call its handle, not their spelled-out copy of this class's.
        self._handled_apart = type(self).handle is not EventDecoder.handle
        #: Whether a subclass overrides ``_emit_row`` or a builder it dispatches to
        #: (``_insert``, ``_update``, ``_delete``), which the fast dispatch (``_direct``)
        #: calls as this class defines them: row changes then go through its methods.
        self._emits_apart = any(getattr(type(self), name) is not getattr(EventDecoder, name)
                                for name in _ROW_PATH)
        #: The method each kind of message goes to: this class's, or the subclass's
        #: override of it (``_begin``, ``_commit``...), which the dispatch never bypasses.
        #: (The lazy handlers are looked up when such a message comes: a decoder has 29
        #: attributes, and a 30th made every message cost 0.9k instructions more under
        #: CPython 3.11, counted by callgrind.)
        self._handlers = _handlers_for(type(self))[0]
        self._fallbacks = 0  # of table versions replaced since (see fast_path_fallbacks)
        self._txn: TransactionContext | None = None
        self._last_commit_lsn: int | None = None
        #: Commit time (µs since 1970) of the last transaction begun: the source time of
        #: non-transactional messages, as in Debezium.
        self.last_begin_commit_us: int | None = None
        self._budget = None if memory_limit is None else MemoryBudget(memory_limit)
        self._catalog_refresh = catalog_refresh
        #: The Relation messages the catalog was read again for (OID and columns): once each.
        self._refreshed: set[tuple[int, tuple[tuple[str, int, int], ...]]] = set()
        #: Which transactions are open, streamed or prepared (the protocol layer's rules).
        self._tx: TransactionResolver[None] = TransactionResolver()
        #: The changes of each streamed or prepared transaction still held, by xid.
        self._buffers: dict[int, ChangeBuffer] = {}
        self._last_heartbeat_ns: int | None = None
        self._headers = self._context_headers(run_id or str(uuid.uuid4()))
        #: The snapshot block being read from a capture (between its Begin and Commit).
        self._snapshot: SnapshotSequence | None = None
        #: The source fields shared by the changes of the transaction ``_shared_txn`` to
        #: each table, under ``_shared_config`` (see ``_shared_source``).
        self._shared: dict[TableSchema, tuple[Any, ...]] = {}
        self._shared_txn: TransactionContext | None = None
        self._shared_config: EventConfig | None = None
        self._shared_id = ""  # the transaction block's id up to the LSN: "xid:"
        #: ``source.sequence`` up to the LSN, for the last commit LSN ``_sequence_for``.
        self._sequence_for: object = _NOTHING
        self._sequence_head = ""

    # -- input ---------------------------------------------------------------------
    def feed(self, data: bytes | bytearray | memoryview, lsn: int, *, snapshot: bool = False
             ) -> list[ChangeRecord]:
        """Parse one pgoutput message at WAL position ``lsn`` and return its records.

        ``snapshot``: the message belongs to a snapshot block of a capture (see
        :mod:`pgcdc_events.protocol.capture`): its Inserts are read (``r``) events.
        """
        return self.handle(self.reader.read(data), lsn, snapshot=snapshot)

    def feed_row(self, row: CaptureRow) -> list[ChangeRecord]:
        """:meth:`feed` for one row of the capture interchange format."""
        if not row.snapshot and self._snapshot is None and not self._handled_apart:
            # an Insert in a transaction, the bulk of most streams, is read as its parts
            # and converted from them, with no Insert or TupleData object (_inserted)
            parts = self.reader.read_insert(row.data)
            if parts is not None:
                lsn = int(row.lsn)
                self.metrics.last_lsn = lsn
                return self._inserted(parts, lsn)
        message = self.reader.read(row.data)
        if row.snapshot or self._snapshot is not None or self._handled_apart:
            return self.handle(message, row.lsn, snapshot=row.snapshot)
        # handle's path for a streamed message, spelled out: this runs for every row
        handler = self._handlers.get(type(message))
        if handler is None:
            raise ProtocolError("a pgoutput message object", detail=type(message).__name__)
        lsn = int(row.lsn)
        self.metrics.last_lsn = lsn
        return handler(self, message, lsn)

    def iter_feed(self, data: bytes | bytearray | memoryview, lsn: int, *,
                  snapshot: bool = False) -> Iterator[ChangeRecord]:
        """:meth:`feed`, lazily: the records of a Stream Commit or Commit Prepared are
        produced one at a time, read back from the spill file as they are needed, so a
        transaction of millions of changes never sits in memory as records.

        Consume the iterator before feeding the next message: the transaction ends
        (metrics, ``flushable_lsn``) when it is exhausted.
        """
        message = self.reader.read(data)
        kind = type(message)
        lazy = (None if snapshot or kind not in _LAZY_NAMES
                else _handlers_for(type(self))[1].get(kind))
        if lazy is None:
            if snapshot or self._snapshot is not None or self._handled_apart:
                return iter(self.handle(message, lsn, snapshot=snapshot))
            # handle's path for a streamed message, spelled out: this runs for every row
            handler = self._handlers.get(kind)
            if handler is None:
                raise ProtocolError("a pgoutput message object", detail=kind.__name__)
            lsn = int(lsn)
            self.metrics.last_lsn = lsn
            return iter(handler(self, message, lsn))
        lsn = int(lsn)
        self.metrics.last_lsn = lsn
        return lazy(self, message, lsn)

    def feed_rows(self, rows: Iterable[CaptureRow]) -> list[ChangeRecord]:
        """All records of a sequence of capture rows, in order."""
        out: list[ChangeRecord] = []
        for row in rows:
            out += self.handle(self.reader.read(row.data), row.lsn, snapshot=row.snapshot)
        return out

    def handle(self, message: Message, lsn: int, *, snapshot: bool = False
               ) -> list[ChangeRecord]:
        """The records produced by one parsed message at WAL position ``lsn``
        (``snapshot``: a message of a capture's snapshot block)."""
        if snapshot or self._snapshot is not None:
            return self._snapshot_message(message, int(lsn), snapshot)
        handler = self._handlers.get(type(message))
        if handler is None:
            raise ProtocolError("a pgoutput message object", detail=type(message).__name__)
        lsn = int(lsn)
        self.metrics.last_lsn = lsn
        return handler(self, message, lsn)

    def reset(self) -> None:
        """Forget the transaction in progress, e.g. after reconnecting to the server.

        Table schemas are kept. Buffered streamed and prepared transactions are kept
        too: the server sends a streamed transaction again from its first segment
        (which replaces the buffer) and a prepared one again from its Begin Prepare. A
        snapshot block in progress is forgotten: a capture takes its snapshot again from
        the block's Begin.
        """
        self.reader.reset()
        self._txn = None
        self._snapshot = None
        self._tx.reset(keep_held=True)

    def keepalive(self, lsn: int) -> list[ChangeRecord]:
        """Report progress (a keepalive or an idle poll at ``lsn``); a heartbeat when one is due."""
        return self._maybe_heartbeat(lsn)

    # -- snapshot blocks of a capture ---------------------------------------------------
    def _snapshot_message(self, message: Message, lsn: int, snapshot: bool
                          ) -> list[ChangeRecord]:
        """A snapshot block: Begin (its LSN and xid are the snapshot's), Type and Relation
        messages, an Insert a row (a read event, marked by :class:`SnapshotSequence`),
        Commit. A streamed message inside the block means the capture is damaged."""
        kind = type(message).__name__
        if not snapshot:
            raise ProtocolError("the snapshot block's Commit before any streamed message",
                                offset=0, detail=f"a streamed {kind} at LSN {Lsn(lsn)}")
        sequence_ = self._snapshot
        if isinstance(message, Type):
            return self._type(message, lsn)
        if isinstance(message, Relation):
            self._relation(message, lsn)  # (a filtered table is not part of the snapshot)
            table = self._tables[message.relation_id]
            if sequence_ is not None and table is not None:
                sequence_.start_table(table)
            return []
        if isinstance(message, Begin) and sequence_ is None:
            streamed = self._last_commit_lsn
            if streamed is None:  # the initial snapshot's block: its own position
                self._snapshot = SnapshotSequence(
                    self, lsn=message.final_lsn, xid=message.xid,
                    ts_us=pg_timestamp_to_unix_us(message.commit_time))
            else:
                # a blocking snapshot's block, after streamed data: the connector's blocking
                # snapshot keeps its streaming offset, so its read events carry the stream's
                # position (the last commit's end LSN, the last transaction's id, and
                # source.sequence [that LSN, that LSN]; tests/golden/events_blocking)
                self._snapshot = SnapshotSequence(
                    self, lsn=streamed, xid=self.metrics.last_transaction_id,
                    ts_us=pg_timestamp_to_unix_us(message.commit_time),
                    last_commit_lsn=streamed)
            return []
        if sequence_ is None:
            raise ProtocolError("a snapshot block opened by a Begin", offset=0,
                                detail=f"a snapshot {kind} at LSN {Lsn(lsn)} first")
        if isinstance(message, Insert):
            table = self.table(message.relation_id)
            if table is None:
                self.metrics.events_filtered += 1
                return []
            return sequence_.push(table, message.new)
        if isinstance(message, Commit):
            self._snapshot = None
            return sequence_.finish()
        raise ProtocolError("only Begin, Type, Relation, Insert and Commit in a snapshot block",
                            offset=0, detail=f"a snapshot {kind} at LSN {Lsn(lsn)}")

    # -- schema messages ---------------------------------------------------------------
    def _relation(self, message: Relation, lsn: int) -> list[ChangeRecord]:
        config = self.config
        replaced = self._tables.get(message.relation_id)
        if replaced is not None:
            self._fallbacks += replaced.fallbacks
        if config.includes_table(message.namespace, message.name):
            self._tables[message.relation_id] = build_table_schema(
                message, self.mapper, config, catalog_table_for(self._catalog_for(message),
                                                                message),
                self.on_conversion_error)
        else:
            self._tables[message.relation_id] = None
        return []

    def _catalog_for(self, message: Relation) -> CatalogSnapshot | None:
        """The catalog to describe ``message``'s table by: read again (``catalog_refresh``)
        when the one in hand does not describe it, once per table version (a table created
        or altered since the catalog was read)."""
        catalog, refresh = self.catalog, self._catalog_refresh
        if catalog is None or refresh is None or describes(catalog, message):
            return catalog
        version = (message.relation_id,
                   tuple((c.name, c.type_oid, c.type_modifier) for c in message.columns))
        if version not in self._refreshed:
            fresh = refresh()  # may raise (a lost connection): asked again on the next feed
            self._refreshed.add(version)
            if fresh is not None:
                self.use_catalog(fresh)
        return self.catalog

    def use_catalog(self, catalog: CatalogSnapshot) -> None:
        """Describe the tables and types of Relation and Type messages from now on by
        ``catalog`` (a newer snapshot of the same database); tables already announced
        keep the description they were built with until their next Relation message."""
        self.catalog = catalog
        self.registry.use_catalog(catalog)

    def _type(self, message: Type, lsn: int) -> list[ChangeRecord]:
        self.registry.observe(message)
        return []

    def table(self, relation_id: int) -> TableSchema | None:
        """The table schema in force for a relation OID (``None`` when filtered out)."""
        try:
            return self._tables[relation_id]
        except KeyError:
            raise ProtocolError("a change to an announced relation", offset=0,
                                detail=f"no Relation message for OID {relation_id}") from None

    # -- transactions ---------------------------------------------------------------------
    def _begin(self, message: Begin, lsn: int) -> list[ChangeRecord]:
        self._tx.feed(_BEGIN, message.xid)
        self._txn = TransactionContext(message.xid, pg_timestamp_to_unix_us(message.commit_time),
                                       lsn)
        self.last_begin_commit_us = self._txn.commit_us
        return self._tx_record("BEGIN", lsn)

    def _origin(self, message: Origin, lsn: int) -> list[ChangeRecord]:
        buffer = self._current_buffer()
        if buffer is not None:
            buffer.origin, buffer.origin_lsn = message.name, message.origin_lsn
        elif self._txn is not None:
            self._txn.origin, self._txn.origin_lsn = message.name, message.origin_lsn
            self._shared_txn = None  # the source blocks built for it name no origin
        return []

    def _commit(self, message: Commit, lsn: int) -> list[ChangeRecord]:
        self._tx.feed(_COMMIT)
        out = self._tx_record("END", lsn)
        self._finish(message.end_lsn)
        return out

    def _finish(self, end_lsn: int) -> None:
        if self._txn is not None:
            self.metrics.committed_transactions += 1
            self.metrics.last_transaction_id = self._txn.xid
        self._txn = None
        self._last_commit_lsn = end_lsn

    def _tx_record(self, status: str, lsn: int) -> list[ChangeRecord]:
        txn = self._txn
        if txn is None or not self.config.provide_transaction_metadata:
            return []
        return [transaction_record(self.config, status, txn, lsn, self._headers)]

    # -- streamed transactions ----------------------------------------------------------------
    def _stream_start(self, message: StreamStart, lsn: int) -> list[ChangeRecord]:
        if self._tx.feed_message(message, lsn) is Step.STREAM_OPEN:
            # A first segment starts the transaction over: after a reconnect the server
            # streams an in-progress transaction again from its beginning.
            self._hold(message.xid)
        return []

    def _hold(self, xid: int) -> None:
        """A new buffer for transaction ``xid`` (one held before is void)."""
        old = self._buffers.pop(xid, None)
        if old is not None:
            old.close()
        self._buffers[xid] = ChangeBuffer(self._budget)

    def _drop(self, xid: int) -> None:
        dropped = self._buffers.pop(xid, None)
        if dropped is not None:
            dropped.close()

    def _stream_stop(self, message: StreamStop, lsn: int) -> list[ChangeRecord]:
        self._tx.feed(_STREAM_STOP)
        return []

    def _stream_abort(self, message: StreamAbort, lsn: int) -> list[ChangeRecord]:
        known = message.xid in self._tx.streams
        if self._tx.feed_message(message, lsn) is Step.STREAM_ABORT:
            self._drop(message.xid)
        elif known:
            self._buffers[message.xid].discard(message.subxid)
        return []

    def _stream_commit(self, message: StreamCommit, lsn: int) -> list[ChangeRecord]:
        return list(self._stream_commit_iter(message, lsn))

    def _stream_commit_iter(self, message: StreamCommit, lsn: int) -> Iterator[ChangeRecord]:
        buffer = self._take(message, "Stream Commit", "streamed", self._tx.streams)
        return self._replay_iter(buffer, message.xid, message.commit_time, lsn, message.end_lsn)

    def _stream_prepare(self, message: StreamPrepare, lsn: int) -> list[ChangeRecord]:
        self._buffers[message.xid] = self._take(message, "Stream Prepare", "streamed",
                                                self._tx.streams)
        return []

    def _take(self, message: StreamCommit | StreamPrepare | CommitPrepared, what: str,
              kind: str, held: dict[int, int]) -> ChangeBuffer:
        """The buffer of the transaction ``message`` resolves (fed to the resolver); its
        absence means changes were lost."""
        xid = message.xid
        buffer = self._buffers.pop(xid, None) if xid in held else None
        self._tx.feed_message(message)
        if buffer is None:
            raise ProtocolError(
                f"the {kind} changes of transaction {xid} before its {what}", offset=0,
                message_type={"Stream Commit": "c", "Stream Prepare": "p"}.get(what, "K"),
                detail="none were seen: the stream was not read from before this transaction "
                       "began (acknowledge only flushable_lsn)")
        return buffer

    # -- two-phase transactions ------------------------------------------------------------------
    def _begin_prepare(self, message: BeginPrepare, lsn: int) -> list[ChangeRecord]:
        # sent again after a reconnect: start over
        self._tx.feed_message(message, lsn)
        self._hold(message.xid)
        return []

    def _prepare(self, message: Prepare, lsn: int) -> list[ChangeRecord]:
        self._tx.feed(_PREPARE)
        return []

    def _commit_prepared(self, message: CommitPrepared, lsn: int) -> list[ChangeRecord]:
        return list(self._commit_prepared_iter(message, lsn))

    def _commit_prepared_iter(self, message: CommitPrepared, lsn: int
                              ) -> Iterator[ChangeRecord]:
        buffer = self._take(message, "Commit Prepared", "prepared", self._tx.prepared)
        return self._replay_iter(buffer, message.xid, message.commit_time, lsn, message.end_lsn)

    def _rollback_prepared(self, message: RollbackPrepared, lsn: int) -> list[ChangeRecord]:
        self._tx.feed_message(message)
        self._drop(message.xid)
        return []

    def _current_buffer(self) -> ChangeBuffer | None:
        tx = self._tx
        if tx.block is not None:
            return self._buffers[tx.block]
        if tx.preparing:
            assert tx.current is not None
            return self._buffers[tx.current]
        return None

    def _replay_iter(self, buffer: ChangeBuffer, xid: int, commit_time: int, lsn: int,
                     end_lsn: int) -> Iterator[ChangeRecord]:
        """A buffered transaction's records now that it committed; the buffer is closed."""
        try:
            first_lsn = next((p.lsn for p in buffer), lsn)
            self._txn = TransactionContext(xid, pg_timestamp_to_unix_us(commit_time),
                                           first_lsn, buffer.origin, buffer.origin_lsn)
            self.last_begin_commit_us = self._txn.commit_us
            yield from self._tx_record("BEGIN", first_lsn)
            for pending in buffer:
                yield from self._emit(pending)
            yield from self._tx_record("END", lsn)
            self._finish(end_lsn)
        finally:
            buffer.close()

    # -- changes ----------------------------------------------------------------------------------
    def _change(self, message: Insert | Update | Delete | Truncate | LogicalMessage, lsn: int
                ) -> list[ChangeRecord]:
        buffer = self._current_buffer()
        if isinstance(message, Truncate):
            pending = _Pending(None, message, lsn, tuple(self.table(r) for r in
                                                         message.relation_ids))
        elif isinstance(message, LogicalMessage):
            if not message.transactional:
                # Debezium treats a non-transactional message as a transaction of its own:
                # its LSN becomes the last commit LSN even when the prefix is filtered out.
                self._last_commit_lsn = lsn
                return self._message(message, lsn, None)
            pending = _Pending(None, message, lsn)
        else:
            pending = _Pending(self.table(message.relation_id), message, lsn)
        if buffer is not None:
            buffer.append(getattr(message, "xid", None), pending)
            return []
        return self._emit(pending)

    def _emit(self, pending: _Pending) -> list[ChangeRecord]:
        message, lsn = pending.message, pending.lsn
        if isinstance(message, LogicalMessage):
            return self._message(message, lsn, self._txn)
        if isinstance(message, Truncate):
            return self._truncate(pending, lsn)
        table = pending.table
        if table is None:
            self.metrics.events_filtered += 1
            return []
        return self._emit_row(table, message, lsn)

    def _emit_row(self, table: TableSchema, message: Insert | Update | Delete, lsn: int
                  ) -> list[ChangeRecord]:
        try:
            if type(message) is Insert:
                return self._insert(table, message, lsn)
            if type(message) is Update:
                return self._update(table, message, lsn)
            return self._delete(table, message, lsn)  # type: ignore[arg-type]
        except ConversionError as error:
            return self.event_failed(error, table, lsn)

    def event_failed(self, error: ConversionError, table: TableSchema, lsn: int
                     ) -> list[ChangeRecord]:
        """``event.processing.failure.handling.mode``: raise, or skip the change (counted)."""
        mode = self.config.event_processing_failure_handling_mode
        if mode == "fail":
            error.lsn = lsn
            raise error
        self.metrics.failed_events += 1
        if mode == "warn":
            _LOG.warning("skipped the %s change at LSN %s: %s", table.qualified, Lsn(lsn), error)
        return []

    @property
    def on_conversion_error(self) -> Callable[[ConversionError], None] | None:
        """The value-level failure policy tables are built with (``None``: raise)."""
        if self.config.event_converting_failure_handling_mode == "fail":
            return None
        return self._conversion_failed

    def _conversion_failed(self, error: ConversionError) -> None:
        """``warn``/``skip``: the value becomes null, as in Debezium; counted, and logged."""
        self.metrics.conversion_errors += 1
        if self.config.event_converting_failure_handling_mode == "warn":
            _LOG.warning("%s; the value is replaced by null", error)

    def _insert(self, table: TableSchema, message: Insert, lsn: int) -> list[ChangeRecord]:
        new = message.new
        return self._create(table, (message.relation_id, new.kinds, new.values), lsn)

    def _create(self, table: TableSchema, parts: tuple[int, bytes, tuple[bytes | None, ...]],
                lsn: int) -> list[ChangeRecord]:
        """The create event of a new row of ``table`` from an Insert's parts (relation OID,
        the tuple's kinds and values: :meth:`_insert`'s, or as :meth:`_inserted` reads
        them)."""
        if "c" in self.config.skipped_operations:
            self.metrics.events_filtered += 1
            return []
        key, after = table.structs_of(parts[1], parts[2], None)
        return [self.record(table, "c", None, after, key, lsn)]

    def _inserted(self, parts: tuple[int, bytes, tuple[bytes | None, ...]], lsn: int
                  ) -> list[ChangeRecord]:
        """The records of an Insert read as its parts (relation OID, kinds, values:
        :meth:`PgOutputReader.read_insert`): the Insert handler's path (:func:`_row_on`),
        on the parts. An Insert of a buffered (streamed or prepared) transaction, to a
        table never announced, or for a subclass's own row builders is built as a message
        and takes the general path."""
        return _row_on(self, parts[0], parts, lsn, EventDecoder._create, _insert_message)

    def _update(self, table: TableSchema, message: Update, lsn: int) -> list[ChangeRecord]:
        old = message.old
        key, after = table.structs(message.new, old if message.old_kind == "O" else None)
        old_key, before = table.structs(old, None) if old is not None else (None, None)
        if key is not None and old_key is not None and old_key != key:
            assert before is not None
            return self._key_change(table, before, after, old_key, key, lsn)
        if "u" in self.config.skipped_operations:
            self.metrics.events_filtered += 1
            return []
        if self.config.skip_messages_without_change and before is not None and before == after:
            self.metrics.events_filtered += 1
            return []
        return [self.record(table, "u", before, after, key, lsn)]

    def _key_change(self, table: TableSchema, before: Struct, after: Struct, old_key: Struct,
                    key: Struct, lsn: int) -> list[ChangeRecord]:
        """A primary-key update: delete (+ tombstone) of the old key, create of the new one."""
        assert table.key_schema is not None
        out: list[ChangeRecord] = []
        skipped = self.config.skipped_operations
        new_key = (Header("__debezium.newkey", table.key_schema, key),)
        if "d" in skipped:
            self.metrics.events_filtered += 1
        else:
            out.append(self.record(table, "d", before, None, old_key, lsn, new_key))
            if self.config.tombstones_on_delete:
                out.append(self._tombstone(table, old_key, lsn, new_key))
        if "c" in skipped:
            self.metrics.events_filtered += 1
        else:
            old_key_header = (Header("__debezium.oldkey", table.key_schema, old_key),)
            out.append(self.record(table, "c", None, after, key, lsn, old_key_header))
        return out

    def _delete(self, table: TableSchema, message: Delete, lsn: int) -> list[ChangeRecord]:
        if "d" in self.config.skipped_operations:
            self.metrics.events_filtered += 1
            return []
        key, before = table.structs(message.old, None)
        out = [self.record(table, "d", before, None, key, lsn)]
        if self.config.tombstones_on_delete:
            out.append(self._tombstone(table, key, lsn))
        return out

    def _tombstone(self, table: TableSchema, key: Struct | None, lsn: int,
                   extra: tuple[Header, ...] = ()) -> ChangeRecord:
        return tombstone(table, key, self._headers, lsn, extra=extra)

    def record(self, table: TableSchema, op: str, before: Struct | None, after: Struct | None,
               key: Struct | None, lsn: int, extra: tuple[Header, ...] = ()) -> ChangeRecord:
        """The record of a change to ``table`` at ``lsn`` in the transaction being decoded
        (or outside any, for a change with no Begin): its envelope (:mod:`.envelope`) with
        the ``source`` and ``transaction`` blocks the decoder's state gives; ``extra``
        headers come before the context headers."""
        # the transaction block and the record are built as transaction_block and
        # change_record build them, spelled out: this runs for every change event
        shared, sequence, order = self._advance(table, self._txn, lsn)
        block = None
        if order is not None:
            block = STRUCT_BUILDER()
            block.schema = TRANSACTION_BLOCK_SCHEMA
            block.values = order
            block.__class__ = Struct
        source = from_shared(shared, None, sequence, lsn)
        value = envelope_value(table.envelope_schema, before, after, source, block, op,
                               self.clock())
        return make_record(table.topic, table.key_schema, key, table.envelope_schema, value,
                           extra + self._headers if extra else self._headers, lsn, "change")

    def _advance(self, table: TableSchema, txn: TransactionContext | None, lsn: int
                 ) -> tuple[tuple[Any, ...], str, tuple[str, int, int] | None]:
        """The decoder's state for one more change event to ``table`` at ``lsn`` in
        ``txn`` (``None``: a change with no Begin), advanced: the source fields the
        transaction's changes to the table share (:func:`_shared_source`, built once a
        transaction and table), the event's ``source.sequence``, its transaction block's
        values (id, total and per-table order; ``None`` without transaction metadata or
        outside a transaction), the metrics counted. The one home of this state for
        :meth:`record` and decode's fused path (:meth:`fused_row`)."""
        config = self.config
        order = None
        if txn is not None:
            if txn is not self._shared_txn or config is not self._shared_config:
                self._shared_txn, self._shared_config = txn, config
                self._shared.clear()
                self._shared_id = f"{txn.xid}:"
            shared = self._shared.get(table)
            if shared is None:
                shared = self._shared[table] = _shared_source(config, table, txn)
            lsn_text = str(lsn)
            if config.provide_transaction_metadata:
                total, per = txn.next_order(table.qualified)
                order = (self._shared_id + lsn_text, total, per)
        else:
            shared = _shared_source(config, table, None, self.clock() // 1000)
            lsn_text = str(lsn)
        last = self._last_commit_lsn
        if last is not self._sequence_for:  # the sequence's first half changes at commits
            self._sequence_for = last
            self._sequence_head = sequence_head(last)
        metrics = self.metrics
        metrics.events_seen += 1
        metrics.last_event_commit_us = shared[5]  # the commit time, µs (shared_fields)
        return shared, f'{self._sequence_head}{lsn_text}"]', order

    def _truncate(self, pending: _Pending, lsn: int) -> list[ChangeRecord]:
        out = []
        for table in pending.tables:
            if table is None or "t" in self.config.skipped_operations:
                self.metrics.events_filtered += 1
            else:
                out.append(truncate_record(self, table, lsn))
        return out

    def _message(self, message: LogicalMessage, lsn: int, txn: TransactionContext | None
                 ) -> list[ChangeRecord]:
        if not self.config.includes_message_prefix(message.prefix):
            self.metrics.events_filtered += 1
            return []
        self.metrics.events_seen += 1
        return [message_record(self, message, lsn, txn)]

    # -- decode's fused path ---------------------------------------------------------------------
    def fused_row(self, data: bytes, lsn: int, lines: FusedLines, parts: list[bytes]
                  ) -> list[ChangeRecord] | None:
        """:meth:`feed` of a row change's message, for ``decode``'s fused path
        (:mod:`.fused`): an Insert in an ordinary transaction, to a table with a key, has
        its JSON line appended to ``parts`` (as :meth:`JsonRecordWriter.line_parts` appends
        it), written by ``lines`` from the table's converted values with no record object,
        the decoder's state advanced by :meth:`_advance`, as for :meth:`record`; gives ``None``;
        anything else gives the records of :meth:`handle` (the reason counted in
        ``lines.fallbacks``)."""
        lsn = int(lsn)
        insert = self.reader.read_insert(data)  # an Insert's parts, as feed_row reads it
        if insert is None:
            message = self.reader.read(data)
            lines.fallbacks[self._unfused(message)] += 1
            return self.handle(message, lsn)
        txn = self._txn
        tx = self._tx
        config = self.config
        if (txn is None or tx.block is not None or tx.preparing or self._handled_apart
                or self._emits_apart or self._snapshot is not None
                or "c" in config.skipped_operations):
            message = _insert_message(insert)
            lines.fallbacks[self._unfused(message)] += 1
            return self.handle(message, lsn)
        table = self._tables.get(insert[0])
        if table is None:
            lines.fallbacks["a table filtered out or not announced"] += 1
            return self.handle(_insert_message(insert), lsn)
        if config is not lines.config:
            lines.use(config)
        line = lines.lines.get(table)
        if line is None:
            line = lines.line(table)
            if line is None:
                lines.fallbacks["a table without a key"] += 1
                return self.handle(_insert_message(insert), lsn)
        self.metrics.last_lsn = lsn
        try:
            key, after = table.structs_of(insert[1], insert[2], None)
        except ConversionError as error:
            lines.fallbacks["a change that did not convert"] += 1
            return self.event_failed(error, table, lsn)
        shared, sequence, order = self._advance(table, txn, lsn)
        block_id, total, per = order or (None, None, None)
        lines.written += 1
        if lines.tally is not None:
            lines.tally[table.topic, "c"] += 1
        line(parts, key, after, shared, sequence, lsn, block_id, total, per, self.clock())
        return None

    def _unfused(self, message: Message) -> str:
        """Why ``message`` does not take the fused path (:meth:`fused_row`)."""
        tx = self._tx
        if self._handled_apart or self._emits_apart:
            return f"a decoder of its own ({type(self).__name__})"
        if self._snapshot is not None:
            return "a snapshot block"
        if tx.block is not None or tx.preparing:
            return "a streamed or prepared transaction"
        if type(message) is not Insert:
            return f"a message other than Insert ({type(message).__name__})"
        if self._txn is None:
            return "a change outside a transaction"
        return "a skipped operation (skipped.operations)"

    # -- heartbeats and headers -------------------------------------------------------------------
    def _maybe_heartbeat(self, lsn: int) -> list[ChangeRecord]:
        interval = self.config.heartbeat_interval_ms
        if interval <= 0:
            return []
        now = self.clock()
        if self._last_heartbeat_ns is not None and now - self._last_heartbeat_ns < interval * 1e6:
            return []
        self._last_heartbeat_ns = now
        return [heartbeat_record(self.config, now, lsn, self._headers)]

    def _context_headers(self, run_id: str) -> tuple[Header, ...]:
        """Debezium 3.x's ``__debezium.context.*`` headers (``extended.headers.enabled``)."""
        if not self.config.extended_headers_enabled:
            return ()
        return (
            Header("__debezium.context.connectorLogicalName", _STRING, self.config.topic_prefix),
            Header("__debezium.context.taskId", _STRING, "0"),
            Header("__debezium.context.connectorName", _STRING, "postgresql"),
            Header("__debezium.context.runId", _STRING, run_id),
        )

    # -- state for embedders ----------------------------------------------------------------
    @property
    def context_headers(self) -> tuple[Header, ...]:
        """The ``__debezium.context.*`` headers every change record carries."""
        return self._headers

    def snapshot(self, tables: Iterable[tuple[CatalogTable, Iterable[SnapshotRow]]], *,
                 lsn: int, xid: int | None = None, incremental: bool = False
                 ) -> Iterator[ChangeRecord]:
        """Read (``op: r``) events for rows read during a snapshot; see :mod:`.snapshot`."""
        return snapshot_records(self, tables, lsn=lsn, xid=xid, incremental=incremental)

    @property
    def open_transaction(self) -> TransactionContext | None:
        """The ordinary transaction whose changes are decoded as they come (between its
        Begin and Commit): ``None`` outside one, in a snapshot block, or while a streamed
        or prepared transaction's changes are being buffered."""
        if self._snapshot is not None or self._tx.block is not None or self._tx.preparing:
            return None
        return self._txn

    @property
    def last_commit_lsn(self) -> int | None:
        """End LSN of the last transaction whose records were all returned: safe to acknowledge."""
        return self._last_commit_lsn

    @property
    def flushable_lsn(self) -> int | None:
        """The LSN to acknowledge to the server (the Standby status update's flush position).

        The end of the last transaction whose records were all returned, held back to
        where the earliest transaction still buffered began: a prepared transaction
        acknowledged past its PREPARE is not sent again, so its changes would be lost.
        """
        held = self._tx.held_since
        if held is not None and (self._last_commit_lsn is None or held < self._last_commit_lsn):
            return held
        return self._last_commit_lsn

    @property
    def fast_path_fallbacks(self) -> int:
        """How many tuples the tables' generated paths handed to the general loop (see
        :attr:`TableSchema.fallbacks <pgcdc_events.events.tables.TableSchema.fallbacks>`):
        never more than the values that failed to convert, unless a fast path is broken."""
        return self._fallbacks + sum(t.fallbacks for t in self._tables.values()
                                     if t is not None)

    @property
    def buffered_transactions(self) -> int:
        """Streamed and prepared transactions held until their outcome is known."""
        return len(self._tx.streams) + len(self._tx.prepared)


def _shared_source(config: EventConfig, table: TableSchema, txn: TransactionContext | None,
                   commit_us: int = 0) -> tuple[Any, ...]:
    """:func:`~pgcdc_events.events.source.shared_fields` of a table's changes in ``txn``
    (outside a transaction: the time is ``commit_us`` and the rest is null)."""
    if txn is None:
        return shared_fields(version=config.version, name=config.topic_prefix, ts_us=commit_us,
                             db=config.database, schema=table.schema_name,
                             table=table.table_name, tx_id=None)
    return shared_fields(version=config.version, name=config.topic_prefix, ts_us=txn.commit_us,
                         db=config.database, schema=table.schema_name, table=table.table_name,
                         tx_id=txn.xid, origin=txn.origin, origin_lsn=txn.origin_lsn)


def _insert_message(parts: tuple[int, bytes, tuple[bytes | None, ...]]) -> Insert:
    """The Insert whose parts :meth:`PgOutputReader.read_insert` read (a stream block's
    xid is not among them: the reader gives parts only outside stream blocks)."""
    return Insert(parts[0], TupleData(parts[1], parts[2]))


def _dml(self: EventDecoder, message: Any, lsn: int) -> list[ChangeRecord]:
    return self._change(message, lsn)


def _row_change(self: EventDecoder, message: Insert | Update | Delete, lsn: int
                ) -> list[ChangeRecord]:
    """Insert, Update and Delete outside any buffered transaction take this direct path
    (through ``_emit_row``, which a subclass may extend: YugabyteDB's decoder does)."""
    tx = self._tx
    if tx.block is not None or tx.preparing:
        return self._change(message, lsn)
    try:
        table = self._tables[message.relation_id]
    except KeyError:
        return self._change(message, lsn)  # raises the protocol error
    if table is None:
        self.metrics.events_filtered += 1
        return []
    return self._emit_row(table, message, lsn)


def _row_on(self: EventDecoder, relation_id: int, item: Any, lsn: int,
            build: Callable[[EventDecoder, TableSchema, Any, int], list[ChangeRecord]],
            message_of: Callable[[Any], Insert | Update | Delete]) -> list[ChangeRecord]:
    """``_row_change`` with ``_emit_row``'s dispatch done, for a row change to
    ``relation_id`` given as ``item`` (the message, or an Insert's parts): ``build(self,
    table, item, lsn)`` outside a buffered transaction; the general path
    (:func:`_row_change`, given ``message_of(item)``) for a buffered transaction, a
    subclass that overrides one of ``_ROW_PATH``, or a table never announced (which
    raises the protocol error). The one home of the row handlers' path: :func:`_direct`'s
    and :meth:`EventDecoder._inserted`'s."""
    tx = self._tx
    if tx.block is not None or tx.preparing or self._emits_apart:
        return _row_change(self, message_of(item), lsn)
    try:
        table = self._tables[relation_id]
    except KeyError:
        return self._change(message_of(item), lsn)  # raises the protocol error
    if table is None:
        self.metrics.events_filtered += 1
        return []
    try:
        return build(self, table, item, lsn)
    except ConversionError as error:
        return self.event_failed(error, table, lsn)


def _same(message: Any) -> Any:
    return message


def _direct(build: Callable[[EventDecoder, TableSchema, Any, int], list[ChangeRecord]]
            ) -> Callable[[EventDecoder, Any, int], list[ChangeRecord]]:
    """The handler of one kind of row change: ``_row_change`` with ``_emit_row``'s dispatch
    done (``build`` is ``_insert``, ``_update`` or ``_delete``), spelled out: this runs
    for every change; a subclass that overrides one of ``_ROW_PATH`` gets ``_row_change``."""

    def row(self: EventDecoder, message: Any, lsn: int) -> list[ChangeRecord]:
        return _row_on(self, message.relation_id, message, lsn, build, _same)

    return row


#: The method that handles each kind of message other than a row change, by name: a
#: decoder calls its class's (``_handlers_for``), a subclass's override included.
_HANDLER_NAMES: Final[dict[type, str]] = {
    Begin: "_begin", Commit: "_commit", Origin: "_origin", Relation: "_relation",
    Type: "_type", StreamStart: "_stream_start", StreamStop: "_stream_stop",
    StreamCommit: "_stream_commit", StreamAbort: "_stream_abort",
    BeginPrepare: "_begin_prepare", Prepare: "_prepare", CommitPrepared: "_commit_prepared",
    RollbackPrepared: "_rollback_prepared", StreamPrepare: "_stream_prepare",
}
#: This class's handlers. A row change goes to ``_direct``'s handler, which detects a
#: subclass's row builders itself (``_emits_apart``); Truncate and LogicalMessage to
#: ``_change``, looked up on the instance.
_HANDLERS: Final[dict[type, Callable[..., list[ChangeRecord]]]] = {
    **{kind: getattr(EventDecoder, name) for kind, name in _HANDLER_NAMES.items()},
    Insert: _direct(EventDecoder._insert), Update: _direct(EventDecoder._update),
    Delete: _direct(EventDecoder._delete), Truncate: _dml, LogicalMessage: _dml,
}
#: The messages :meth:`EventDecoder.iter_feed` answers lazily (a whole buffered
#: transaction), by the name of the eager handler and of the lazy one.
_LAZY_NAMES: Final[dict[type, tuple[str, str]]] = {
    StreamCommit: ("_stream_commit", "_stream_commit_iter"),
    CommitPrepared: ("_commit_prepared", "_commit_prepared_iter"),
}
_Handlers = dict[type, Callable[..., list[ChangeRecord]]]
_LazyHandlers = dict[type, Callable[..., Iterator[ChangeRecord]]]


def _handlers_for(cls: type[EventDecoder]) -> tuple[_Handlers, _LazyHandlers]:
    """The handlers and lazy handlers a decoder of ``cls`` dispatches to: ``cls``'s own
    methods, looked up when the decoder is made (an override, or a method replaced on the
    class since, is what runs), with the row changes' and Truncate's and LogicalMessage's
    handlers of ``_HANDLERS``; a lazy handler is left out where ``cls`` overrides the eager
    one but not the lazy one, so that its override runs."""
    handlers = dict(_HANDLERS)
    for kind, name in _HANDLER_NAMES.items():
        handlers[kind] = getattr(cls, name)
    lazy: _LazyHandlers = {}
    for kind, (eager, name) in _LAZY_NAMES.items():
        method = getattr(cls, name)
        overridden = method is not getattr(EventDecoder, name)
        if overridden or getattr(cls, eager) is getattr(EventDecoder, eager):
            lazy[kind] = method
    return handlers, lazy
