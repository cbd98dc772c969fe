"""Incremental snapshots: the watermark window, its deduplication, and the progress state.

Debezium's incremental snapshot (the DBLog algorithm, as
``SignalBasedIncrementalSnapshotChangeEventSource`` runs it) reads a table in
key-ordered chunks *while streaming*. For each chunk the connector writes an *open*
watermark row into the signalling table, reads the chunk
(see :mod:`.snapshot_sql`) into a buffer, and writes a *close* watermark row (with the
``insert_delete`` strategy: deletes the open row instead). Both rows come back
through the replication stream, and between them lies the chunk's *window*:

* every streamed change event goes out unchanged, and while the window is open a
  change to the chunk's table removes the buffered row with the same message key
  (an insert, update or delete: the streamed event is newer than the row read);
* when the close watermark comes back, the rows still buffered go out as read
  (``op: r``) events, in the order the chunk query returned them (key order), and
  then the close watermark row's own event.

So within a window the order is: the open watermark row's event, the streamed
events, the ``r`` events, the close watermark row's event. A streamed event never
waits and no row read before a change overwrites it.

:class:`ChunkWindow` is that rule, sans-I/O: the embedder gives it the chunk rows it
read (:meth:`ChunkWindow.chunk`) and every record the decoder produced from the stream
(:meth:`ChunkWindow.receive`), and gets back the records to emit, in order. The ``r``
events carry the connector's ``source`` block for them: ``snapshot="incremental"``,
``lsn``, ``txId``, ``xmin``, ``origin`` and ``origin_lsn`` null, ``sequence`` that of the
close watermark's event (its position in the stream), ``schema``/``table`` the
snapshotted table (``PostgresSourceInfoStructMaker.struct`` leaves the WAL fields out
of incremental snapshot events, ``CommonOffsetContext.incrementalSnapshotEvents``
marks them). Signals other than watermarks are parsed (:mod:`.signals`) and queued for
the embedder (:meth:`ChunkWindow.signals`).

:class:`IncrementalSnapshotContext` is the snapshot's progress
(``AbstractIncrementalSnapshotContext``): the queue of tables, the current chunk, the
last key sent, the table's maximum key; :meth:`IncrementalSnapshotContext.to_offset`
is its serialisable form for a checkpoint, under the connector's offset names.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

import attrs

from pgcdc_events.errors import ConfigurationError, ConversionError, PgCdcError
from pgcdc_events.events.records import ChangeRecord, make_record
from pgcdc_events.events.signals import (
    AdditionalCondition,
    Signal,
    SignalWarning,
    WindowSignal,
    signal_from_record,
)
from pgcdc_events.events.snapshot import SnapshotRow, relation_from_catalog, snapshot_tuple
from pgcdc_events.events.snapshot_sql import parenthesized
from pgcdc_events.events.source import source_struct
from pgcdc_events.events.tables import TableSchema, build_table_schema
from pgcdc_events.types.catalog import FORMAT_VERSION, CatalogSnapshot, CatalogTable
from pgcdc_events.types.schema import Struct, make_struct

if TYPE_CHECKING:
    from pgcdc_events.events.decoder import EventDecoder

__all__ = [
    "INSERT_DELETE",
    "INSERT_INSERT",
    "ChunkWindow",
    "IncrementalSnapshotContext",
    "IncrementalSnapshotError",
    "PgSnapshot",
    "ReadOnlyChunkWindow",
    "RecordedChunks",
    "SnapshotCollection",
    "catalog_table_from_json",
    "catalog_table_to_json",
    "expand_data_collections",
    "widen_xid",
]

_LOG: Final = logging.getLogger("pgcdc_events")

#: ``incremental.snapshot.watermarking.strategy``: both watermarks are inserted rows.
INSERT_INSERT: Final = "insert_insert"
#: ``incremental.snapshot.watermarking.strategy``: the close watermark deletes the open row.
INSERT_DELETE: Final = "insert_delete"

# The connector's offset names (AbstractIncrementalSnapshotContext).
_PRIMARY_KEY: Final = "incremental_snapshot_primary_key"
_MAXIMUM_KEY: Final = "incremental_snapshot_maximum_key"
_COLLECTIONS: Final = "incremental_snapshot_collections"
_CORRELATION_ID: Final = "incremental_snapshot_correlation_id"
_COLLECTION_ID: Final = "incremental_snapshot_collections_id"
_COLLECTION_CONDITION: Final = "incremental_snapshot_collections_additional_condition"
_COLLECTION_SURROGATE: Final = "incremental_snapshot_collections_surrogate_key"


class IncrementalSnapshotError(PgCdcError, ValueError):
    """Input the incremental snapshot cannot use: a close watermark for a chunk whose
    rows were never given, a checkpoint that does not parse, a row of the wrong width."""


@attrs.frozen
class SnapshotCollection:
    """A table queued for an incremental snapshot (``DataCollection``): ``schema.table``,
    the signal's filter for it (as written, without parentheses) and surrogate key."""

    table: str
    additional_condition: str | None = None
    surrogate_key: str | None = None

    @property
    def condition(self) -> str | None:
        """The filter as the chunk queries append it: in parentheses (``None``: none)."""
        return parenthesized(self.additional_condition)


def expand_data_collections(patterns: Iterable[str], known_tables: Iterable[str]) -> list[str]:
    """A signal's ``data-collections`` expanded against the known tables
    (``expandAndDedupeDataCollectionIds``): each regular expression is replaced by the
    ``schema.table`` names it matches whole, in ``known_tables`` order, or kept as
    written when it matches none (the snapshot skips it later); duplicates are dropped."""
    tables = list(known_tables)
    out: dict[str, None] = {}
    for pattern in patterns:
        regex = re.compile(pattern)
        matched = [t for t in tables if regex.fullmatch(t)]
        for name in matched or [pattern]:
            out.setdefault(name, None)
    return list(out)


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def _key(values: Sequence[Any] | None) -> tuple[Any, ...] | None:
    """A chunk key as the context keeps it: a tuple, text given as bytes decoded."""
    return None if values is None else tuple(_text(v) for v in values)


@attrs.define
class IncrementalSnapshotContext:
    """The progress of an incremental snapshot, as the connector keeps it.

    ``collections`` is the queue of tables still to snapshot, the current one first;
    ``chunk_end`` the chunk key of the last row read (the next chunk starts after it);
    ``last_key_sent`` the chunk key of the last ``r`` event emitted; ``maximum_key`` the
    current table's largest key when its snapshot started (``None``: not read yet);
    ``chunk_id`` the current chunk's id (its watermarks are ``<chunk_id>-open`` and
    ``<chunk_id>-close``). Keys are tuples in chunk-key order (the surrogate key, or the
    table's key), of the values the embedder binds to the chunk queries.
    """

    collections: list[SnapshotCollection] = attrs.Factory(list)
    chunk_end: tuple[Any, ...] | None = None
    last_key_sent: tuple[Any, ...] | None = None
    maximum_key: tuple[Any, ...] | None = None
    chunk_id: str | None = None
    window_opened: bool = False
    paused: bool = False
    correlation_id: str | None = None
    stop_requests: list[str] = attrs.Factory(list)

    @property
    def running(self) -> bool:
        """Whether tables remain to be snapshotted."""
        return bool(self.collections)

    @property
    def current(self) -> SnapshotCollection | None:
        """The table being snapshotted."""
        return self.collections[0] if self.collections else None

    @property
    def non_initial_chunk(self) -> bool:
        """Whether the next chunk of the current table is bounded below (``isNonInitialChunk``)."""
        return self.chunk_end is not None

    def add(self, correlation_id: str, tables: Iterable[str],
            conditions: Sequence[AdditionalCondition] = (), surrogate_key: str | None = None
            ) -> list[SnapshotCollection]:
        """Queue tables (already expanded, see :func:`expand_data_collections`), each with
        the filter of the first condition matching it; returns the new entries."""
        added = []
        for table in tables:
            condition = next((c.filter for c in conditions if c.matches(table)), None)
            added.append(SnapshotCollection(table, condition or None, surrogate_key or None))
        self.collections.extend(added)
        self.correlation_id = correlation_id
        return added

    def start_chunk(self, chunk_id: str) -> None:
        """A new chunk begins (``startNewChunk``): its watermarks will carry ``chunk_id``."""
        self.chunk_id = chunk_id

    def _expected(self, watermark_id: str) -> bool:
        # watermarks replayed after a restart, or of a finished snapshot, are ignored
        return self.chunk_id is not None and watermark_id.startswith(self.chunk_id)

    def open_window(self, watermark_id: str) -> bool:
        """The open watermark came back; ``False`` (ignored) when it is not the current
        chunk's."""
        if not self._expected(watermark_id):
            return False
        self.window_opened = True
        return True

    def close_window(self, watermark_id: str) -> bool:
        """The close watermark came back; ``False`` (ignored) when it is not the current
        chunk's."""
        if not self._expected(watermark_id):
            return False
        self.window_opened = False
        return True

    def next_chunk_position(self, key: Sequence[Any] | None) -> None:
        """The chunk read ended at ``key`` (``None``: the chunk was empty)."""
        self.chunk_end = _key(key)

    def set_maximum_key(self, key: Sequence[Any] | None) -> None:
        """The current table's largest key (``None``: the table is empty)."""
        self.maximum_key = _key(key)

    def send_event(self, key: Sequence[Any]) -> None:
        """An ``r`` event of the row with chunk key ``key`` went out."""
        self.last_key_sent = _key(key)

    def revert_chunk(self) -> None:
        """Read the current chunk again from the last key sent (``revertChunk``)."""
        self.chunk_end = self.last_key_sent
        self.window_opened = False

    def next_collection(self) -> SnapshotCollection | None:
        """The current table is done: move on to the next one (``nextDataCollection``);
        when none is left the snapshot is complete and the correlation id is unset."""
        self.chunk_end = self.last_key_sent = self.maximum_key = None
        if self.collections:
            self.collections.pop(0)
        if not self.collections:
            self.correlation_id = None
        return self.current

    def request_stop(self, tables: Sequence[str] | None) -> None:
        """A ``stop-snapshot`` arrived (``None`` or empty: every table); applied by
        :meth:`apply_stop` before the next chunk is read, as the connector does."""
        if self.running:
            self.stop_requests.extend(tables or [".*"])

    def apply_stop(self, known_tables: Iterable[str]) -> list[str]:
        """Remove the tables asked to stop (``checkAndProcessStopFlag``): queued ones at
        once, the current one by moving on to the next table. Returns the tables removed."""
        requests, self.stop_requests = self.stop_requests, []
        if not requests:
            return []
        if not self.running:
            self.correlation_id = None
            return []
        current = self.current.table if self.current is not None else None
        stopped: list[str] = []
        stop_current = False
        for table in expand_data_collections(requests, known_tables):
            if table == current:
                stop_current = True
                continue
            before = len(self.collections)
            self.collections = [c for c in self.collections if c.table != table]
            if len(self.collections) != before:
                stopped.append(table)
        if stop_current and current is not None:
            stopped.append(current)
            self.next_collection()
        if not self.running:
            self.correlation_id = None
        return stopped

    # -- the checkpoint ------------------------------------------------------------------

    def to_offset(self) -> dict[str, Any]:
        """The progress as the connector stores it in its offsets (empty when no snapshot
        runs), JSON-serialisable: ``incremental_snapshot_primary_key`` (the last key
        sent), ``incremental_snapshot_maximum_key``, ``incremental_snapshot_collections``
        (a JSON string, the tables still to snapshot with their filter and surrogate key)
        and ``incremental_snapshot_correlation_id``.

        The connector writes the two keys as hex of Java-serialized arrays; here they are
        JSON arrays of the key values, and a filter is stored as written (the connector
        stores it parenthesised, and wraps it once more when it loads it).
        """
        if not self.running:
            return {}
        collections = [{_COLLECTION_ID: c.table, _COLLECTION_CONDITION: c.additional_condition,
                        _COLLECTION_SURROGATE: c.surrogate_key} for c in self.collections]
        return {
            _PRIMARY_KEY: None if self.last_key_sent is None else list(self.last_key_sent),
            _MAXIMUM_KEY: None if self.maximum_key is None else list(self.maximum_key),
            _COLLECTIONS: json.dumps(collections, separators=(",", ":")),
            _CORRELATION_ID: self.correlation_id,
        }

    @classmethod
    def from_offset(cls, offset: Mapping[str, Any]) -> IncrementalSnapshotContext:
        """The progress stored by :meth:`to_offset`: the next chunk starts after the last
        key sent (``AbstractIncrementalSnapshotContext.init``), so that a restart neither
        loses nor repeats a row that was emitted."""
        context = cls()
        text = offset.get(_COLLECTIONS)
        if text is None:
            return context
        try:
            entries = json.loads(text)
            context.collections = [
                SnapshotCollection(e[_COLLECTION_ID], e.get(_COLLECTION_CONDITION) or None,
                                   e.get(_COLLECTION_SURROGATE) or None) for e in entries]
            for name in (_PRIMARY_KEY, _MAXIMUM_KEY):
                value = offset.get(name)
                if value is not None and not isinstance(value, list):
                    raise TypeError(f"{name} is not a list")
        except (TypeError, ValueError, KeyError, AttributeError) as error:
            raise IncrementalSnapshotError(
                f"the incremental snapshot checkpoint does not parse: {error}") from None
        context.chunk_end = _key(offset.get(_PRIMARY_KEY))
        context.maximum_key = _key(offset.get(_MAXIMUM_KEY))
        context.correlation_id = offset.get(_CORRELATION_ID)
        return context


@attrs.define
class _Chunk:
    """The chunk being read: its id, table, and the rows still buffered, by message key."""

    chunk_id: str
    table: TableSchema
    #: The rows still buffered: by message key, the key and value structs and the row's
    #: text values (for its chunk key, at :attr:`key_positions`).
    rows: dict[Any, tuple[Struct | None, Struct, SnapshotRow]] | None = None
    removed: set[Any] = attrs.Factory(set)
    key_positions: tuple[int, ...] = ()


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, Struct):
        return tuple(_hashable(v) for v in value.values)
    return value


#: Values that are their own hashable form (:func:`_hashable`).
_PLAIN: Final = frozenset({str, int, float, bool, bytes, Decimal, type(None)})


def _message_key(key: Struct | None) -> Any:
    """What the window is keyed by: the message key's values (``None``: no key)."""
    if key is None:
        return None
    values = key.values
    for value in values:
        if value.__class__ not in _PLAIN:
            return _hashable(key)
    return tuple(values)  # what _hashable gives, without a call per value


class ChunkWindow:
    """The window of an incremental snapshot's chunks, and the order of what goes out.

    ``decoder`` is the :class:`EventDecoder` the stream's records come from (its
    configuration, type mapper, clock and metrics build the ``r`` events);
    ``signal_data_collection`` the signalling table (``schema.table``, or
    ``database.schema.table``); ``watermarking_strategy`` ``insert_insert`` or
    ``insert_delete``. ``context`` is the snapshot's progress, updated as chunks are read
    and sent (a fresh one when not given).

    For each chunk, the embedder writes the open watermark ``<chunk_id>-open``, reads
    the chunk and hands its rows to :meth:`chunk` (before the close watermark comes back
    through the stream), writes the close watermark, and passes every record the
    decoder produces to :meth:`receive`, which returns the records to emit.
    """

    def __init__(self, decoder: EventDecoder, *, signal_data_collection: str,
                 watermarking_strategy: str = INSERT_INSERT,
                 context: IncrementalSnapshotContext | None = None) -> None:
        strategy = watermarking_strategy.lower()
        if strategy not in (INSERT_INSERT, INSERT_DELETE):
            raise ConfigurationError(
                "incremental.snapshot.watermarking.strategy must be insert_insert or "
                f"insert_delete, not {watermarking_strategy!r}")
        parts = signal_data_collection.split(".")
        if len(parts) not in (2, 3) or not all(parts):
            raise ConfigurationError(
                f"signal.data.collection {signal_data_collection!r} is not schema.table "
                "(or database.schema.table)")
        self.decoder = decoder
        self.signal_table: tuple[str, str] = (parts[-2], parts[-1])
        self.insert_delete = strategy == INSERT_DELETE
        self.context = context if context is not None else IncrementalSnapshotContext()
        self._chunk: _Chunk | None = None
        self._signals: list[Signal | SignalWarning] = []
        self._key_positions: tuple[int, ...] = ()

    # -- input -----------------------------------------------------------------------------

    def begin_chunk(self, chunk_id: str, table: CatalogTable | TableSchema) -> TableSchema:
        """A chunk of ``table`` begins (call it before writing its open watermark
        ``<chunk_id>-open``); returns the table's schema. :meth:`chunk` does it when it
        was not called."""
        schema = table if isinstance(table, TableSchema) else self._table_schema(table)
        self._chunk = _Chunk(chunk_id, schema)
        self.context.start_chunk(chunk_id)
        return schema

    def chunk(self, chunk_id: str, table: CatalogTable | TableSchema,
              rows: Iterable[SnapshotRow], *, chunk_key: Sequence[str] | None = None) -> None:
        """The rows of chunk ``chunk_id`` of ``table``, in the order the chunk query
        returned them: each row's values as text in the table's column order (``None``
        for NULL), as :func:`~pgcdc_events.events.snapshot.snapshot_records` takes them.
        Give them before the close watermark comes back through the stream.

        ``chunk_key`` names the columns the chunk is ordered by (the surrogate key, or
        the table's key; default: the key of the table's events); the last row's values
        of them become the context's ``chunk_end``. Streamed changes received since the
        chunk's open watermark already count against these rows.
        """
        chunk = self._chunk
        if chunk is None or chunk.chunk_id != chunk_id:
            self.begin_chunk(chunk_id, table)
            chunk = self._chunk
            assert chunk is not None
        schema = chunk.table
        names = [c.name for c in schema.relation.columns]
        key_names = list(chunk_key) if chunk_key is not None else \
            [names[p] for p in _event_key_positions(schema)]
        try:
            positions = tuple(names.index(n) for n in key_names)
        except ValueError:
            raise IncrementalSnapshotError(
                f"chunk key {key_names!r} is not a list of columns of {schema.qualified}"
                ) from None
        buffered: dict[Any, tuple[Struct | None, Struct, SnapshotRow]] = {}
        width = len(schema.relation.columns)
        structs = schema.structs
        removed = chunk.removed
        row: SnapshotRow | None = None
        for row in rows:
            tup = snapshot_tuple(row, width, schema.qualified)
            try:
                key, value = structs(tup, None)
            except ConversionError as error:
                self._row_failed(error, schema)
                continue
            message_key = _message_key(key)
            if message_key in removed:
                continue  # changed in the stream after the open watermark
            buffered[message_key] = (key, value, row)  # a repeated key keeps its first place
        chunk.rows = buffered
        chunk.key_positions = positions
        if row is not None:
            self.context.next_chunk_position([row[p] for p in positions])

    def receive(self, record: ChangeRecord) -> list[ChangeRecord]:
        """One record the decoder produced from the stream, in stream order; returns the
        records to emit: the record itself, preceded at a close watermark by the chunk's
        remaining rows as ``r`` events."""
        value = record.value
        source = value.get("source") if value is not None else None
        if source is not None and (source["schema"], source["table"]) == self.signal_table:
            return self._signal_record(record)
        self._deduplicate(record)
        return [record]

    def _deduplicate(self, record: ChangeRecord) -> None:
        """The dedup rule (``processMessage``): while the window is open, a streamed change
        of the chunk's table removes the buffered row of the same message key."""
        chunk = self._chunk
        value = record.value
        source = value.get("source") if value is not None else None
        if (chunk is not None and self.context.window_opened and record.key is not None
                and source is not None and source["table"] == chunk.table.table_name
                and source["schema"] == chunk.table.schema_name):
            key = _message_key(record.key)
            if chunk.rows is None:
                chunk.removed.add(key)
            elif chunk.rows.pop(key, None) is not None:
                _LOG.debug("removed %r from the incremental snapshot window", key)

    @property
    def pending_chunk(self) -> str | None:
        """The id of the chunk begun (:meth:`begin_chunk`) whose close watermark has not
        come back yet (``None``: no chunk in flight)."""
        return None if self._chunk is None else self._chunk.chunk_id

    def signals(self) -> list[Signal | SignalWarning]:
        """The signals (other than watermarks) and signal warnings received since the last
        call, in stream order: what the embedder must act on or log."""
        out, self._signals = self._signals, []
        return out

    # -- pieces ----------------------------------------------------------------------------

    def _signal_record(self, record: ChangeRecord) -> list[ChangeRecord]:
        signal = signal_from_record(record, insert_delete=self.insert_delete)
        if signal is None:
            return [record]
        if not isinstance(signal, WindowSignal):
            self._signals.append(signal)
            return [record]
        if signal.opens:
            if not self.context.open_window(signal.id):
                _LOG.info("ignored the open watermark %r (expected chunk %r)", signal.id,
                          self.context.chunk_id)
            return [record]
        if not self.context.close_window(signal.id):
            _LOG.info("ignored the close watermark %r (expected chunk %r)", signal.id,
                      self.context.chunk_id)
            return [record]
        chunk, self._chunk = self._chunk, None
        if chunk is None or chunk.rows is None or not signal.id.startswith(chunk.chunk_id):
            raise IncrementalSnapshotError(
                f"the close watermark {signal.id!r} came back at LSN {record.lsn} but the rows "
                f"of chunk {self.context.chunk_id!r} were never given (ChunkWindow.chunk)")
        assert record.value is not None
        return [*self._read_events(chunk, record.value["source"]["sequence"], record.lsn),
                record]

    def _read_events(self, chunk: _Chunk, sequence: str | None, lsn: int
                     ) -> list[ChangeRecord]:
        """The buffered rows as ``r`` events, closing the window at stream position
        ``sequence`` (the ``source.sequence`` they carry) and ``lsn``."""
        assert chunk.rows is not None
        decoder = self.decoder
        config = decoder.config
        table = chunk.table
        out = []
        for key, after, _row in chunk.rows.values():
            now = decoder.clock()
            source = source_struct(
                version=config.version, name=config.topic_prefix, ts_us=now // 1000,
                snapshot="incremental", db=config.database, sequence=sequence,
                schema=table.schema_name, table=table.table_name, tx_id=None, lsn=None)
            value = make_struct(table.envelope_schema, (
                None, after, source, None, "r", now // 1_000_000, now // 1000, now))
            out.append(make_record(table.topic, table.key_schema, key,
                                   table.envelope_schema, value, decoder.context_headers,
                                   lsn, "change"))
        decoder.metrics.events_seen += len(out)
        if chunk.rows:  # the events go out together: the last one's key was sent
            last = next(reversed(chunk.rows.values()))[2]
            self.context.send_event([last[p] for p in chunk.key_positions])
        return out

    def _table_schema(self, table: CatalogTable) -> TableSchema:
        decoder = self.decoder
        return build_table_schema(relation_from_catalog(table), decoder.mapper, decoder.config,
                                  table, decoder.on_conversion_error)

    def _row_failed(self, error: ConversionError, table: TableSchema) -> None:
        """``event.processing.failure.handling.mode`` for a chunk row that does not convert."""
        mode = self.decoder.config.event_processing_failure_handling_mode
        if mode == "fail":
            raise error
        self.decoder.metrics.failed_events += 1
        if mode == "warn":
            _LOG.warning("skipped a row of %s in an incremental snapshot chunk: %s",
                         table.qualified, error)


_SNAPSHOT: Final = re.compile(r"(\d+):(\d+):((?:\d+,?)*)")


@attrs.frozen
class PgSnapshot:
    """A ``pg_current_snapshot()`` value (``xmin:xmax:xip,...``), the watermark of a
    read-only incremental snapshot (the connector's ``PgSnapshot``): every transaction
    id below ``xmin`` had finished, every one from ``xmax`` on had not started, and
    ``xip`` were in progress."""

    xmin: int
    xmax: int
    xip: tuple[int, ...] = ()

    @classmethod
    def parse(cls, text: str) -> PgSnapshot:
        """The snapshot ``text`` (as the server prints it); anything else is an
        :class:`IncrementalSnapshotError` quoting it."""
        match = _SNAPSHOT.fullmatch(str(text).strip())
        if match is None:
            raise IncrementalSnapshotError(
                f"{str(text)[:80]!r} is not a pg_current_snapshot() value (xmin:xmax:xip,...)")
        xip = tuple(sorted(int(x) for x in match.group(3).split(",") if x))
        return cls(int(match.group(1)), int(match.group(2)), xip)

    def __str__(self) -> str:
        return f"{self.xmin}:{self.xmax}:{','.join(str(x) for x in self.xip)}"


def widen_xid(xid: int, near: int) -> int:
    """The 32-bit transaction id ``xid`` (pgoutput's, the events' ``source.txId``) as the
    64-bit id (``xid8``, what ``pg_current_snapshot()`` gives: the epoch above the 32 bits)
    nearest to the 64-bit id ``near``. Equal to ``xid`` while the epoch is 0; the connector
    compares the two forms as they are, which goes wrong after 2^32 transactions."""
    xid &= 0xFFFFFFFF
    candidate = (near & ~0xFFFFFFFF) | xid
    if candidate - near > 0x7FFFFFFF:
        candidate -= 1 << 32
    elif near - candidate > 0x80000000:
        candidate += 1 << 32
    return max(candidate, xid)


class ReadOnlyChunkWindow(ChunkWindow):
    """The window of a read-only incremental snapshot (``read.only=true``): nothing is
    written to the database, the watermarks are ``pg_current_snapshot()`` values taken
    right before (:meth:`set_low_watermark`) and right after (:meth:`set_high_watermark`)
    each chunk is read, and the window is recognised in the stream by transaction ids
    (``PostgresReadOnlyIncrementalSnapshotContext`` and
    ``PostgresReadOnlyIncrementalSnapshotChangeEventSource``, Debezium 3.6):

    * for each streamed change (``processMessage``, ``updateWindowState``, by the
      event's ``source.txId``): the window opens at the first one whose transaction id is
      at least the low watermark's ``xmin``; an open window closes at the first one whose
      id is above both watermarks' ``xmax``; when a chunk is in flight and the window is
      not open (closed, or not opened yet), the chunk's rows go out as ``r`` events
      *before* the change, and the embedder reads the next chunk; otherwise the change
      removes its key's buffered row (:class:`ChunkWindow`'s dedup rule, the same one);
    * at each transaction's commit and at each idle poll or heartbeat
      (``readUntilNewTransactionChange``, :meth:`commit`, with the id of the last
      transaction seen): the chunk's rows go out when that id is the high watermark's
      ``xmax``, or, as long as it is at most the high watermark's ``xmin`` (the
      transaction was visible to the chunk's read), again after each next chunk until
      the watermarks change (:meth:`commit_again`).

    So a database where nothing commits closes a window only at an idle poll after a
    transaction was seen; the ``r`` events then carry the last streamed change's
    ``source.sequence``. Watermark rows (there are none in this mode) are ignored;
    other signal rows are parsed as :class:`ChunkWindow` does.
    """

    def __init__(self, decoder: EventDecoder, *, signal_data_collection: str,
                 context: IncrementalSnapshotContext | None = None) -> None:
        super().__init__(decoder, signal_data_collection=signal_data_collection,
                         context=context)
        self.low: PgSnapshot | None = None
        self.high: PgSnapshot | None = None
        self._previous: tuple[PgSnapshot | None, PgSnapshot | None] = (None, None)
        self._closed_at_xmax = False
        self._sequence: str | None = None
        self._lsn = 0

    def set_low_watermark(self, snapshot: PgSnapshot | str) -> None:
        """The low watermark: ``pg_current_snapshot()`` before the chunk is read."""
        self.low = snapshot if isinstance(snapshot, PgSnapshot) else PgSnapshot.parse(snapshot)

    def set_high_watermark(self, snapshot: PgSnapshot | str) -> None:
        """The high watermark: ``pg_current_snapshot()`` after the chunk is read."""
        self.high = snapshot if isinstance(snapshot, PgSnapshot) else PgSnapshot.parse(snapshot)

    def receive(self, record: ChangeRecord) -> list[ChangeRecord]:
        """One record of the stream, in stream order: the records to emit (the chunk's
        ``r`` events before it when the window closes here)."""
        value = record.value
        source = value.get("source") if value is not None else None
        if source is not None and (source["schema"], source["table"]) == self.signal_table:
            self._signal_record(record)
        # the connector's processMessage sees every data change event, truncates too
        tx_id = source.get("txId") if source is not None and \
            record.kind in ("change", "truncate") else None
        if source is None or tx_id is None:
            return [record]
        self._sequence, self._lsn = source["sequence"], record.lsn
        self._update_window_state(tx_id)
        if self._chunk is not None and not self.context.window_opened:
            return [*self._close(), record]
        self._deduplicate(record)
        return [record]

    def commit(self, tx_id: int | None, lsn: int | None = None) -> list[ChangeRecord] | None:
        """A transaction ``tx_id`` committed at ``lsn``, or an idle poll or heartbeat
        after it: the chunk's ``r`` events when the window closes here (the embedder
        then reads the next chunk and calls :meth:`commit_again`), else ``None``."""
        if lsn is not None:
            self._lsn = lsn
        self._closed_at_xmax = False
        high = self.high
        if tx_id is None or high is None or self._chunk is None:
            return None
        tx_id = widen_xid(tx_id, high.xmin)
        if high.xmax == tx_id:  # maxInProgressTransactionCommitted
            self._closed_at_xmax = True
            return self._close()
        return self._close() if tx_id <= high.xmin else None

    def commit_again(self, tx_id: int | None) -> list[ChangeRecord] | None:
        """After :meth:`commit` closed the window and the next chunk was read: that
        chunk's ``r`` events when it closes at once too (``tx_id`` is still visible to
        the new high watermark, and the watermarks did not change), else ``None``."""
        if self._closed_at_xmax or (self.low, self.high) != self._previous:
            return None
        high = self.high
        if tx_id is None or high is None or self._chunk is None \
                or widen_xid(tx_id, high.xmin) > high.xmin:
            return None
        return self._close()

    def _update_window_state(self, tx_id: int) -> None:
        low, high, context = self.low, self.high, self.context
        if low is not None:
            tx_id = widen_xid(tx_id, low.xmin)
        if not context.window_opened and low is not None and tx_id >= low.xmin:
            context.window_opened = True
        if context.window_opened and high is not None and low is not None \
                and tx_id > max(high.xmax, low.xmax):
            context.window_opened = False

    def _close(self) -> list[ChangeRecord]:
        """``closeWindow`` and ``sendWindowEvents``: the buffered rows as ``r`` events; the
        watermarks are forgotten (kept to tell whether the next chunk's changed)."""
        chunk, self._chunk = self._chunk, None
        self.context.window_opened = False
        self._previous, self.low, self.high = (self.low, self.high), None, None
        if chunk is None:
            return []
        if chunk.rows is None:
            raise IncrementalSnapshotError(
                f"the read-only window of chunk {chunk.chunk_id!r} closed at LSN {self._lsn} "
                "but its rows were never given (ChunkWindow.chunk)")
        return self._read_events(chunk, self._sequence, self._lsn)

    # -- the state between chunks ---------------------------------------------------------

    def export_state(self) -> dict[str, Any]:
        """What this window carries from one chunk to the next, as JSON, when no chunk is in
        flight (:attr:`pending_chunk` is ``None``; otherwise an
        :class:`IncrementalSnapshotError`): the signalling table, the watermarks the last
        window closed with (what :meth:`commit_again` compares), whether a commit closed
        it at the high watermark's ``xmax``, the last streamed change's ``source.sequence``
        and LSN (what the next ``r`` events carry when no change comes before their
        close), and the snapshot's progress. :meth:`from_state` makes a window that goes
        on as this one would. Versioned (``format``)."""
        if self._chunk is not None:
            raise IncrementalSnapshotError(
                f"the read-only window of chunk {self._chunk.chunk_id!r} is open: its state "
                "is exported between chunks only")
        context = self.context
        return {
            "format": _WINDOW_STATE,
            "signal": ".".join(self.signal_table),
            "low": _snapshot_text(self.low), "high": _snapshot_text(self.high),
            "previous": [_snapshot_text(s) for s in self._previous],
            "closed_at_xmax": self._closed_at_xmax,
            "sequence": self._sequence, "lsn": self._lsn,
            "context": {
                "collections": [[c.table, c.additional_condition, c.surrogate_key]
                                for c in context.collections],
                "chunk_end": _key_json(context.chunk_end),
                "last_key_sent": _key_json(context.last_key_sent),
                "maximum_key": _key_json(context.maximum_key),
                "chunk_id": context.chunk_id, "window_opened": context.window_opened,
                "paused": context.paused, "correlation_id": context.correlation_id,
                "stop_requests": list(context.stop_requests)},
        }

    @classmethod
    def check_state(cls, state: Any) -> None:
        """Whether ``state`` is what :meth:`export_state` writes: an
        :class:`IncrementalSnapshotError` saying what is wrong when it is not."""
        _parse_window_state(state)

    @classmethod
    def from_state(cls, decoder: EventDecoder, state: Any) -> ReadOnlyChunkWindow:
        """The window :meth:`export_state` described, fed by ``decoder``; a state that is
        not one is an :class:`IncrementalSnapshotError` saying what is wrong."""
        parsed = _parse_window_state(state)
        window = cls(decoder, signal_data_collection=parsed["signal"],
                     context=parsed["context"])
        window.low, window.high = parsed["low"], parsed["high"]
        window._previous = parsed["previous"]
        window._closed_at_xmax = parsed["closed_at_xmax"]
        window._sequence, window._lsn = parsed["sequence"], parsed["lsn"]
        return window


#: The version of :meth:`ReadOnlyChunkWindow.export_state`'s JSON.
_WINDOW_STATE: Final = "pgcdc-events read-only window 1"


def _snapshot_text(snapshot: PgSnapshot | None) -> str | None:
    return None if snapshot is None else str(snapshot)


def _key_json(key: tuple[Any, ...] | None) -> list[Any] | None:
    """A context key as JSON: its values are the chunk rows' text (or NULL)."""
    if key is None:
        return None
    for value in key:
        if value is not None and not isinstance(value, (str, int, float, bool)):
            raise IncrementalSnapshotError(
                f"the read-only window's key value {value!r} is not JSON")
    return list(key)


def _state_error(what: str) -> IncrementalSnapshotError:
    return IncrementalSnapshotError(f"not a read-only window state: {what}")


def _state_snapshot(value: Any, name: str) -> PgSnapshot | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _state_error(f"{name} is not a pg_current_snapshot() text")
    return PgSnapshot.parse(value)


def _state_key(value: Any, name: str) -> tuple[Any, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(
            v is None or isinstance(v, (str, int, float, bool)) for v in value):
        raise _state_error(f"context.{name} is not a list of key values")
    return tuple(value)


def _state_text(value: Any, name: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise _state_error(f"{name} is not a string")
    return value


def _state_context(raw: Any) -> IncrementalSnapshotContext:
    """The snapshot's progress in a read-only window's state."""
    if not isinstance(raw, Mapping):
        raise _state_error("context is not an object")
    collections = []
    for entry in raw["collections"]:
        if not isinstance(entry, list) or len(entry) != 3 or not isinstance(entry[0], str):
            raise _state_error("context.collections is not a list of [table, filter, key]")
        collections.append(SnapshotCollection(
            entry[0], _state_text(entry[1], "a collection's filter"),
            _state_text(entry[2], "a collection's surrogate key")))
    stops = raw["stop_requests"]
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise _state_error("context.stop_requests is not a list of strings")
    flags = raw["window_opened"], raw["paused"]
    if not all(isinstance(f, bool) for f in flags):
        raise _state_error("context.window_opened or context.paused is not a boolean")
    return IncrementalSnapshotContext(
        collections=collections, chunk_end=_state_key(raw["chunk_end"], "chunk_end"),
        last_key_sent=_state_key(raw["last_key_sent"], "last_key_sent"),
        maximum_key=_state_key(raw["maximum_key"], "maximum_key"),
        chunk_id=_state_text(raw["chunk_id"], "context.chunk_id"), window_opened=flags[0],
        paused=flags[1],
        correlation_id=_state_text(raw["correlation_id"], "context.correlation_id"),
        stop_requests=list(stops))


def _parse_window_state(state: Any) -> dict[str, Any]:
    """The parts of a read-only window's state (:meth:`ReadOnlyChunkWindow.export_state`),
    checked."""
    if not isinstance(state, Mapping) or state.get("format") != _WINDOW_STATE:
        raise _state_error(f"its format is not {_WINDOW_STATE!r}")
    try:
        signal = state["signal"]
        if not isinstance(signal, str) or len(signal.split(".")) != 2 \
                or not all(signal.split(".")):
            raise _state_error("signal is not schema.table")
        previous = state["previous"]
        if not isinstance(previous, list) or len(previous) != 2:
            raise _state_error("previous is not a pair of watermarks")
        if not isinstance(state["closed_at_xmax"], bool):
            raise _state_error("closed_at_xmax is not a boolean")
        lsn = state["lsn"]
        if isinstance(lsn, bool) or not isinstance(lsn, int) or lsn < 0:
            raise _state_error("lsn is not a non-negative integer")
        return {"signal": state["signal"], "low": _state_snapshot(state["low"], "low"),
                "high": _state_snapshot(state["high"], "high"),
                "previous": (_state_snapshot(previous[0], "previous"),
                             _state_snapshot(previous[1], "previous")),
                "closed_at_xmax": state["closed_at_xmax"],
                "sequence": _state_text(state["sequence"], "sequence"),
                "lsn": lsn, "context": _state_context(state["context"])}
    except KeyError as error:
        raise _state_error(f"it lacks {error}") from None
    except TypeError as error:
        raise _state_error(str(error)) from None

def _tx_id(value: Any) -> int:
    """A transaction id as a chunk line holds it (a non-negative integer)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise IncrementalSnapshotError(f"{value!r} is not a transaction id")
    return value


def _event_key_positions(table: TableSchema) -> tuple[int, ...]:
    """Positions (in the relation's columns) of the columns that key the table's events."""
    if table.key_schema is None or not table.key_schema.fields:
        raise IncrementalSnapshotError(
            f"table {table.qualified} has no key: give ChunkWindow.chunk its chunk_key")
    names = [c.name for c in table.relation.columns]
    return tuple(names.index(f.name) for f in table.key_schema.fields)


def catalog_table_to_json(table: CatalogTable) -> dict[str, Any]:
    """``table`` as a catalog snapshot's JSON describes it (what a chunk line records)."""
    snapshot = CatalogSnapshot("", "", (table,)).to_json()
    return dict(snapshot["tables"][0])


def catalog_table_from_json(obj: Mapping[str, Any]) -> CatalogTable:
    """The table :func:`catalog_table_to_json` wrote; a malformed one is an
    :class:`IncrementalSnapshotError`."""
    try:
        snapshot = CatalogSnapshot.from_json({"format": FORMAT_VERSION, "database": "",
                                              "server_version": "", "tables": [dict(obj)],
                                              "types": []})
    except PgCdcError as error:
        raise IncrementalSnapshotError(f"the chunk's table does not parse: {error}") from None
    return snapshot.tables[0]


class RecordedChunks:
    """The window replayed from a capture: the chunk lines a capture wrote
    (:class:`~pgcdc_events.protocol.capture.ChunkLine`) and the records decoded from its
    stream, in the order of the capture, give the records the capture would have
    emitted had it decoded them itself (``capture --decode``).

    :meth:`chunk` takes a chunk line's object (``ChunkLine.chunk``): it begins the chunk and
    gives its rows to a :class:`ChunkWindow` (made at the first chunk, with the signalling
    table and watermarking strategy the line names); :meth:`receive` passes each record
    through that window (unchanged before the first chunk line). The window's rules are
    :class:`ChunkWindow`'s: nothing here decides what goes out. Signals are not acted on
    (the capture did, when it read the chunks); they are dropped.
    """

    def __init__(self, decoder: EventDecoder) -> None:
        self.decoder = decoder
        self.window: ChunkWindow | None = None

    def chunk(self, chunk: Mapping[str, Any], *, where: str = "") -> list[ChangeRecord]:
        """One chunk line's object; ``where`` names it in errors (``line 12``). Returns the
        records to emit at the line: a read-only window's ``r`` events when the capture
        closed it here (an idle poll, or a chunk read and closed at once), else none."""
        if "low" in chunk or "idle" in chunk:
            return self._read_only(chunk, where)
        try:
            chunk_id = str(chunk["id"])
            table = catalog_table_from_json(chunk["table"])
            key = [str(k) for k in chunk.get("key") or ()]
            rows = chunk["rows"]
            signal = str(chunk["signal"])
            strategy = str(chunk.get("strategy") or INSERT_INSERT)
        except (KeyError, TypeError) as error:
            raise IncrementalSnapshotError(
                f"{where}: the chunk line lacks {error}" if where else
                f"the chunk line lacks {error}") from None
        window = self.window
        if window is None or window.signal_table != tuple(signal.split(".")[-2:]):
            window = self.window = ChunkWindow(
                self.decoder, signal_data_collection=signal, watermarking_strategy=strategy,
                context=self.window.context if self.window is not None else None)
        if window.context.chunk_id not in (None, chunk_id):
            # a new chunk while another's window is open: the capture restarted and read
            # again from its checkpoint, with a window closed (its context made afresh)
            window.context.window_opened = False
        window.begin_chunk(chunk_id, table)
        window.chunk(chunk_id, table, rows, chunk_key=key)
        window.signals()
        return []

    def _read_only(self, chunk: Mapping[str, Any], where: str) -> list[ChangeRecord]:
        """A line of a read-only snapshot (``read.only=true``): the chunk with its two
        watermarks (``low``, ``high``), given to a :class:`ReadOnlyChunkWindow` as the
        capture gave it (``start``: the first chunk of a capture that started again, whose
        window was made afresh; ``again``: the chunk was read where a commit or idle poll
        closed a window, and :meth:`ReadOnlyChunkWindow.commit_again` is tried with that
        transaction id), or an idle poll that closed a window (``idle``: the transaction
        id it gave :meth:`ReadOnlyChunkWindow.commit`)."""
        prefix = f"{where}: " if where else ""
        try:
            signal = str(chunk["signal"])
            if "idle" in chunk:
                window = self.window
                if not isinstance(window, ReadOnlyChunkWindow):
                    raise IncrementalSnapshotError(
                        f"{prefix}an idle poll of a read-only snapshot before its first chunk")
                return window.commit(_tx_id(chunk["idle"])) or []
            chunk_id = str(chunk["id"])
            table = catalog_table_from_json(chunk["table"])
            key = [str(k) for k in chunk.get("key") or ()]
            rows = chunk["rows"]
            low, high = PgSnapshot.parse(chunk["low"]), PgSnapshot.parse(chunk["high"])
            again = chunk.get("again")
            again_tx = None if again is None else _tx_id(again)
        except (KeyError, TypeError) as error:
            raise IncrementalSnapshotError(f"{prefix}the chunk line lacks {error}") from None
        except IncrementalSnapshotError as error:
            raise IncrementalSnapshotError(f"{prefix}{error}") from None
        window = self.window
        if not isinstance(window, ReadOnlyChunkWindow) or chunk.get("start") \
                or window.signal_table != tuple(signal.split(".")[-2:]):
            context = window.context if window is not None else None
            if context is not None:
                context.window_opened = False
            window = self.window = ReadOnlyChunkWindow(
                self.decoder, signal_data_collection=signal, context=context)
        elif window.pending_chunk not in (None, chunk_id):
            # the capture closed that window where this decoding did not: its rows would
            # be dropped without a word
            raise IncrementalSnapshotError(
                f"{prefix}chunk {chunk_id!r} was read while the window of chunk "
                f"{window.pending_chunk!r} is still open here: the capture closed it, this "
                "decoding did not (decode with the capture's properties: the same tables, "
                "filters and failure handling)")
        window.begin_chunk(chunk_id, table)
        window.chunk(chunk_id, table, rows, chunk_key=key)
        window.set_low_watermark(low)
        window.set_high_watermark(high)
        window.signals()
        if again_tx is None:
            return []
        return window.commit_again(again_tx) or []

    def commit(self, tx_id: int | None, lsn: int | None = None) -> list[ChangeRecord]:
        """A Commit (or Stream Commit) of the capture's stream, of transaction ``tx_id``
        at ``lsn``: a read-only window's ``r`` events when it closes there, as the capture
        closed it (:meth:`ReadOnlyChunkWindow.commit`); none otherwise."""
        window = self.window
        if not isinstance(window, ReadOnlyChunkWindow):
            return []
        return window.commit(tx_id, lsn) or []

    def committed(self, lsn: int | None = None) -> Iterator[ChangeRecord]:
        """After a Commit or Stream Commit message at ``lsn`` was decoded (lazily: once the
        records before are taken): :meth:`commit` with the decoder's last transaction id."""
        yield from self.commit(self.decoder.metrics.last_transaction_id, lsn)

    def receive(self, record: ChangeRecord) -> list[ChangeRecord]:
        """A record decoded from the capture's stream: the records to emit in its place."""
        window = self.window
        if window is None:
            return [record]
        out = window.receive(record)
        window.signals()  # acted on by the capture already
        return out

    def through(self, records: Iterable[ChangeRecord]) -> Iterator[ChangeRecord]:
        """:meth:`receive` over ``records``, lazily."""
        for record in records:
            yield from self.receive(record)
