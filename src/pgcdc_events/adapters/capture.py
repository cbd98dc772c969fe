"""The capture loop: read the slot, write units, make them durable, then advance the slot.

:func:`run_capture` repeats one cycle until it is caught up (or, when following,
until asked to stop):

1. peek at the slot (:meth:`SlotReader.read`) after the checkpoint's LSN;
2. skip units the output already holds (``seen``), write the others through a
   sink (capture rows, or Debezium events);
3. commit the output (``fsync``, then the checkpoint);
4. advance the slot to the checkpoint (never past a unit not yet delivered).

Every crash between these steps leaves an output that, once reopened, holds
each unit exactly once (see :mod:`pgcdc_events.adapters.checkpoint`). A lost
connection or a busy slot is retried: the uncommitted part of the output is
dropped and the read starts again after the checkpoint.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from pgcdc_events.adapters.checkpoint import Checkpoint, DurableOutput, Output, StreamOutput
from pgcdc_events.adapters.connection import ConnectionSettings
from pgcdc_events.adapters.errors import (
    CheckpointAheadError,
    ConnectionLostError,
    DeliveryGapError,
    SlotBusyError,
    SlotLostError,
    SlotNotFoundError,
    SnapshotError,
)
from pgcdc_events.adapters.pg8000 import (
    LOST_SLOT_HINT,
    ResolvedOptions,
    SlotInfo,
    SlotReader,
    SlotStatus,
    translate_error,
)
from pgcdc_events.adapters.rotating import RotatingOutput
from pgcdc_events.adapters.snapshot import SNAPSHOT_MODES, read_snapshot
from pgcdc_events.adapters.units import SchemaTracker, Unit
from pgcdc_events.errors import ConfigurationError, PgCdcError
from pgcdc_events.protocol.capture import SNAPSHOT_MARK, CaptureRow, dump_capture_row
from pgcdc_events.protocol.lsn import Lsn

if TYPE_CHECKING:  # the event layer is imported by EventSink alone (a capture starts faster)
    from pgcdc_events.adapters.incremental import IncrementalCapture
    from pgcdc_events.events.config import EventConfig
    from pgcdc_events.events.decoder import EventDecoder
    from pgcdc_events.events.records import ChangeRecord
    from pgcdc_events.types.catalog import CatalogSnapshot

__all__ = ["IDLE_ACK_INTERVAL", "ActionQuery", "CaptureSink", "CaptureStats", "EventSink",
           "Heartbeat", "Sink", "check_slot", "run_capture"]

#: Records rendered to one write of the output by EventSink: a few dozen, so that the joined
#: bytes stay below malloc's mmap threshold (each larger join costs page faults).
_BATCH = 24
#: Seconds between two acknowledgements of the server's position while nothing is pending.
IDLE_ACK_INTERVAL = 2.0


class Sink(Protocol):
    """Turns complete units into output bytes."""

    kind: str

    def start(self, options: ResolvedOptions) -> None:
        """Called after each (re)connection with the options the slot is read with."""
        ...

    def write(self, unit: Unit, output: Output) -> None:
        """Write a unit the output does not hold yet."""
        ...

    def replay(self, unit: Unit) -> None:
        """See a unit the output already holds (to keep any decoding state in step)."""
        ...

    def write_row(self, row: CaptureRow, output: Output) -> None:
        """Write one row of the initial snapshot (``row.snapshot`` is set)."""
        ...


class CaptureSink:
    """Writes the capture format: one ``{"lsn", "xid", "data"}`` line per message.

    A unit whose changes rely on a Relation message the output does not hold yet
    (sent by the server in a unit written earlier in another process, or held
    back) gets that message first (see :class:`SchemaTracker`).
    """

    kind = "capture"

    def __init__(self) -> None:
        self.schema = SchemaTracker()

    def start(self, options: ResolvedOptions) -> None:
        """Nothing to set up."""

    #: Units held as capture lines suit this sink (:attr:`SlotReader.render`).
    render = True

    def write(self, unit: Unit, output: Output) -> None:
        """The unit's rows as capture lines."""
        for block in self.schema.text(unit):
            output.write(block.encode("ascii"))  # hex and LSNs: ASCII only

    def replay(self, unit: Unit) -> None:
        """Nothing to keep in step."""

    def write_row(self, row: CaptureRow, output: Output) -> None:
        """A snapshot row as a capture line."""
        output.write(dump_capture_row(row).encode("utf-8") + b"\n")


class EventSink:
    """Writes Debezium records (JsonConverter JSON, one a line) decoded from the units.

    Units already held by the output are still fed to the decoder (their records
    dropped), so Relation messages they carry are known to later units.
    """

    kind = "events"

    def __init__(self, config: EventConfig, *, catalog: CatalogSnapshot | None = None,
                 memory_limit: int | None = None,
                 catalog_for: Callable[[CatalogSnapshot | None], CatalogSnapshot | None]
                 | None = None,
                 catalog_refresh: Callable[[], CatalogSnapshot | None] | None = None) -> None:
        from pgcdc_events.events.jsonconv import JsonRecordWriter  # noqa: PLC0415 - start-up

        self.config = config
        self.catalog = catalog
        #: Called once connected, before the decoder is made, with ``catalog``: the catalog
        #: to decode with (read from the connection, or ``catalog`` checked against it).
        self.catalog_for = catalog_for
        #: Reads the catalog again when a table is created or altered after it was read
        #: (the decoder's ``catalog_refresh``).
        self.catalog_refresh = catalog_refresh
        self.memory_limit = memory_limit
        self.writer = JsonRecordWriter.for_config(config)  # key and header converters too
        self.decoder: EventDecoder | None = None
        self.schema = SchemaTracker()
        self.records = 0
        #: The incremental snapshots the records go through (``run_capture`` sets it).
        self.incremental: IncrementalCapture | None = None

    def start(self, options: ResolvedOptions) -> None:
        """Create the decoder for the options the slot is read with (once); after a
        reconnection, make it forget the transaction it was in: a failure inside a unit (a
        catalog read again that lost its connection) left it there, and the read starts
        again at a unit's beginning."""
        if self.decoder is not None:
            self.decoder.reset()
        else:
            from pgcdc_events.events.decoder import EventDecoder  # noqa: PLC0415 - start-up

            if self.catalog_for is not None:
                self.catalog = self.catalog_for(self.catalog)

            self.decoder = EventDecoder(self.config, catalog=self.catalog,
                                        proto_version=options.proto_version,
                                        streaming=options.streaming,
                                        memory_limit=self.memory_limit,
                                        catalog_refresh=self.catalog_refresh)

    def _records(self, unit: Unit) -> Iterator[ChangeRecord]:
        """The unit's records, one at a time (a big streamed transaction is read back from
        the decoder's spill file as it is written, never held whole)."""
        assert self.decoder is not None, "start() was not called"
        feed = self.decoder.iter_feed
        for row in self.schema.rows(unit):
            yield from feed(row.data, row.lsn)

    def _write(self, records: Iterable[ChangeRecord], output: Output) -> None:
        """Records as JSON lines, a few hundred to a write."""
        parts: list[bytes] = []
        line_parts = self.writer.line_parts
        count = 0
        for record in records:
            line_parts(record, parts)
            count += 1
            if count == _BATCH:
                output.write(b"".join(parts))
                self.records += count
                parts, count = [], 0
        if parts:
            output.write(b"".join(parts))
            self.records += count

    def write(self, unit: Unit, output: Output) -> None:
        """The unit's records as JSON lines (through the incremental snapshot's window,
        which adds its ``r`` events at each close watermark)."""
        records = self._records(unit)
        incremental = self.incremental
        if incremental is not None:
            receive = incremental.receive
            records = itertools.chain((out for record in records for out in receive(record)),
                                      _then(incremental.end_unit, unit))
        self._write(records, output)

    def write_records(self, records: Iterable[ChangeRecord], output: Output) -> None:
        """Records made outside a unit (a read-only snapshot's window closed at an idle
        poll) as JSON lines."""
        self._write(records, output)

    def write_row(self, row: CaptureRow, output: Output) -> None:
        """A snapshot row's records (read events) as JSON lines."""
        assert self.decoder is not None, "start() was not called"
        self._write(self.decoder.feed(row.data, row.lsn, snapshot=row.snapshot), output)

    def heartbeat(self, lsn: int, output: Output) -> int:
        """The heartbeat records due at ``lsn`` (``heartbeat.interval.ms``), written; how many."""
        if self.decoder is None or not self.config.heartbeat_interval_ms:
            return 0
        records = self.decoder.keepalive(lsn)
        self._write(records, output)
        return len(records)

    def replay(self, unit: Unit) -> None:
        """Decode and drop (a lone COMMIT PREPARED has nothing to decode)."""
        if not unit.partial:
            for _ in self._records(unit):
                pass


def _then(call: Callable[[Unit], list[ChangeRecord]], unit: Unit) -> Iterator[ChangeRecord]:
    """``call(unit)``'s records, once the records before them were taken (lazily)."""
    yield from call(unit)


class ActionQuery:
    """``heartbeat.action.query``: the user's statement, run at each heartbeat on a
    connection of its own (opened at the first run, opened again after a failure).

    Its errors are ours: a lost connection is retried as the capture's are; a failing
    statement stops the capture, naming the property.
    """

    def __init__(self, settings: ConnectionSettings, query: str) -> None:
        self.settings = settings
        self.query = query
        self.runs = 0
        self._conn: Any = None

    def __call__(self) -> None:
        """Run the statement once (in its own transaction)."""
        action = "heartbeat.action.query"
        try:
            if self._conn is None:
                self._conn, _ = self.settings.connect()
            self._conn.run(self.query)
        except Exception as exc:
            self.close()
            if isinstance(exc, PgCdcError):
                raise
            raise translate_error(exc, slot=None, action=action,
                                  password_source=self.settings.password_source) from None
        self.runs += 1

    def close(self) -> None:
        """Close the connection (never raises)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()


@attrs.define
class Heartbeat:
    """What a capture does every ``interval`` seconds besides reading changes.

    It runs ``action`` (``heartbeat.action.query``, on a connection of its own), and,
    when the reader has seen the server's position with nothing pending and every unit
    written is durable (:meth:`SlotReader.idle_position`), records that position in
    the checkpoint, then acknowledges it: the slot of a quiet database moves while
    other databases of the server write. An event sink also writes its heartbeat
    records (``heartbeat.interval.ms``) at the position recorded. A rotating output
    only runs the action (a recorded position would make a file of its own).
    """

    interval: float = IDLE_ACK_INTERVAL
    action: Callable[[], None] | None = None
    clock: Callable[[], float] = time.monotonic
    last: float | None = None
    #: Positions recorded while idle, and heartbeat records written (for progress reports).
    idle_acks: int = 0
    beats: int = 0

    def due(self) -> bool:
        """Whether ``interval`` seconds passed since the last tick (the first: since start)."""
        now = self.clock()
        if self.last is None:
            self.last = now
            return False
        if now - self.last < self.interval:
            return False
        self.last = now
        return True


@attrs.define
class CaptureStats:
    """Progress of one :func:`run_capture` call."""

    changes: int = 0
    units: int = 0
    skipped_units: int = 0
    batches: int = 0
    reconnects: int = 0
    lsn: Lsn | None = None
    lag_bytes: int | None = None
    #: WAL the server keeps for the slot (from its restart position), at the last report.
    retained_bytes: int | None = None
    started: float = attrs.field(factory=time.monotonic)
    stopped_by: str = ""
    #: The initial snapshot taken by this call (tables and rows), if any.
    snapshot_tables: int = 0
    snapshot_rows: int = 0


def run_capture(
    reader: SlotReader,
    output: Output,
    sink: Sink,
    *,
    follow: bool = False,
    poll_interval: float = 1.0,
    max_changes: int | None = None,
    batch_rows: int = 10_000,
    create_slot: bool = False,
    create_publication: bool = False,
    tables: tuple[str, ...] | None = None,
    retry_for: float = 60.0,
    should_stop: Callable[[], bool] = lambda: False,
    progress: Callable[[CaptureStats, SlotStatus | None], None] | None = None,
    progress_every: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
    advance: bool = True,
    notify: Callable[[str], None] | None = None,
    snapshot_mode: str = "no_data",
    heartbeat: Heartbeat | None = None,
    snapshot_threads: int = 1,
    incremental: IncrementalCapture | None = None,
) -> CaptureStats:
    """Capture from ``reader`` into ``output`` (already opened) through ``sink``.

    Stops when caught up (unless ``follow``), after ``max_changes`` changes (at a
    unit boundary), or when ``should_stop()`` turns true (checked between reads,
    so the current read is finished and committed first). A lost connection or a
    busy slot is retried for ``retry_for`` seconds (for ever when following).
    ``advance=False`` never moves the slot (a read-only tail).
    ``progress(stats, status)`` is called at most every ``progress_every`` seconds
    and once at the end; ``notify(text)`` is told when a failure starts being retried.

    ``snapshot_mode`` is the connector's ``snapshot.mode``: ``initial`` takes a
    snapshot of the published tables into an output that has none yet (creating the
    slot with it), then streams; ``initial_only`` takes it and stops; ``when_needed``
    also takes one when the slot an output was read from is gone (with
    ``create_slot``); ``no_data`` (the default here) never does. See
    :mod:`pgcdc_events.adapters.snapshot` and docs/operations.md.

    ``heartbeat`` (default: every :data:`IDLE_ACK_INTERVAL` seconds, no action) says
    when to acknowledge the server's position while nothing is pending and to write
    heartbeat records (see :class:`Heartbeat`). ``snapshot_threads`` is the connector's
    ``snapshot.max.threads``: how many tables a snapshot reads at once.

    ``incremental`` runs the incremental snapshots the signals ask for while streaming
    (see :class:`~pgcdc_events.adapters.incremental.IncrementalCapture`): its progress is
    committed with the output, and a run that is not following reads on until the
    snapshot in progress finished (or was paused). Not with a rotating output.
    """
    if snapshot_mode not in SNAPSHOT_MODES:
        raise ConfigurationError(f"snapshot mode {snapshot_mode!r}: expected one of "
                                 f"{', '.join(SNAPSHOT_MODES)}")
    run = _CaptureRun(reader, output, sink, follow=follow, poll_interval=poll_interval,
                      max_changes=max_changes, batch_rows=batch_rows, create_slot=create_slot,
                      create_publication=create_publication, tables=tables,
                      retry_for=retry_for, should_stop=should_stop, progress=progress,
                      progress_every=progress_every, sleep=sleep, advance=advance,
                      notify=notify, snapshot_mode=snapshot_mode,
                      heartbeat=heartbeat if heartbeat is not None else Heartbeat(),
                      snapshot_threads=snapshot_threads, incremental=incremental)
    return run.run()


@attrs.define
class _Read:
    """What one read of the slot delivered (see :meth:`_CaptureRun.read`)."""

    units: int = 0
    changes: int = 0
    #: The end LSN of the last unit written (None: nothing new).
    written_end: int | None = None
    #: Stopped at ``max_changes``.
    reached_max: bool = False
    #: Stopped because the rotating output's file is full (commit here, read on).
    rotate: bool = False
    #: Stopped after a unit that asked for a blocking snapshot (commit here, take it).
    blocking: bool = False


class _CaptureRun:
    """The state of one :func:`run_capture` between reads, and a method per step of its
    cycle: connect (and snapshot), read, commit, acknowledge, retry."""

    def __init__(self, reader: SlotReader, output: Output, sink: Sink, *, follow: bool,
                 poll_interval: float, max_changes: int | None, batch_rows: int,
                 create_slot: bool, create_publication: bool, tables: tuple[str, ...] | None,
                 retry_for: float, should_stop: Callable[[], bool],
                 progress: Callable[[CaptureStats, SlotStatus | None], None] | None,
                 progress_every: float, sleep: Callable[[float], None], advance: bool,
                 notify: Callable[[str], None] | None, snapshot_mode: str,
                 heartbeat: Heartbeat, snapshot_threads: int,
                 incremental: IncrementalCapture | None = None) -> None:
        self.reader, self.output, self.sink = reader, output, sink
        self.follow, self.poll_interval, self.max_changes = follow, poll_interval, max_changes
        self.batch_rows, self.tables, self.retry_for = batch_rows, tables, retry_for
        self.create_slot, self.create_publication = create_slot, create_publication
        self.should_stop, self.progress, self.progress_every = (should_stop, progress,
                                                                progress_every)
        self.sleep, self.advance, self.notify = sleep, advance, notify
        self.snapshot_mode, self.beat = snapshot_mode, heartbeat
        self.snapshot_threads = snapshot_threads
        if incremental is not None and not isinstance(output, (DurableOutput, StreamOutput)):
            raise ConfigurationError("incremental snapshots (signal.data.collection) write "
                                     "into one output file: not with rotating files")
        self.incremental = incremental
        if incremental is not None and isinstance(sink, EventSink):
            sink.incremental = incremental
        self.stats = CaptureStats()
        self.delivered = DeliveredCheck(output, reader.slot)
        self.rotating = output if isinstance(output, RotatingOutput) else None
        reader.render = getattr(sink, "render", False)  # units as lines for a capture sink
        self.after = output.checkpoint.lsn
        self.stats.lsn = None if self.after is None else Lsn(self.after)
        self.limit = batch_rows
        self.connected = False
        # A rotating output holds units back until their file is in place, so the slot is
        # acknowledged later than each unit was read: by then a PREPARE that was unresolved
        # when the unit was written may have been resolved by a unit not yet in a file. The
        # hold at each commit (end LSN, earliest unresolved PREPARE then) keeps the slot
        # behind such a PREPARE until the file holding its resolution is in place.
        self.holds: deque[tuple[int, int | None]] = deque()
        self.settled_hold: int | None = None  # the hold recorded with the settled position
        self.failing_since: float | None = None
        self.last_report = 0.0
        self.reported: tuple[int, int, int | None] | None = None
        self.backoff = 0.1

    def run(self) -> CaptureStats:
        """Read, write and acknowledge until a stop condition (see :func:`run_capture`)."""
        stats = self.stats
        while not self.should_stop():
            try:
                if not self.connected and self.connect():
                    break
                if self.cycle():
                    break
            except (ConnectionLostError, SlotBusyError) as error:
                self.retry(error)
        else:
            stats.stopped_by = "stopped"
        incremental, output = self.incremental, self.output
        if incremental is not None and incremental.settle() and self.after is not None:
            # the signal.file lines the last commit acted on are gone from the file: so
            # goes their record from the checkpoint
            assert isinstance(output, (DurableOutput, StreamOutput))
            output.stage_incremental(incremental.state())
            output.commit(self.after, 0, 0)
        self.report(final=True)
        return stats

    # -- connecting ---------------------------------------------------------------------
    def connect(self) -> bool:
        """Connect, prepare the slot and take a snapshot when the mode calls for one; True
        when the run ends here (``initial_only``)."""
        reader, output, stats, mode = self.reader, self.output, self.stats, self.snapshot_mode
        state = output.checkpoint.snapshot_state
        if mode == "initial_only" and state in ("done", "skipped"):
            stats.stopped_by = "snapshot-only"  # taken (or never wanted): no stream
            return True
        take = _takes_snapshot(mode, state)
        reader.connect()
        take, info = self._prepare(take, state)
        self.create_slot = self.create_publication = False  # created (or found) once
        known = output.checkpoint.position  # the last unit, or a later idle position
        if not take and known is not None and info.confirmed_lsn is not None \
                and info.confirmed_lsn > known:
            raise DeliveryGapError(
                f"the slot {reader.slot!r} is at {info.confirmed_lsn}, past the "
                f"checkpoint at {Lsn(known)}: the changes in between were never "
                "captured (was the slot dropped and re-created, or read by another "
                "client?); see docs/operations.md, 'When the slot is lost'",
                checkpoint_lsn=known, slot_lsn=int(info.confirmed_lsn))
        check_server(output.checkpoint, info)
        self.delivered.arm(None if take else info.confirmed_lsn, self.after)
        self.sink.start(info.options)
        if state == "pending" and not take:
            output.mark_snapshot({"state": "skipped"}, store=False)
        output.bind(info.options.as_dict(), info.server)
        if take:
            self._snapshot()
            if mode == "initial_only":
                stats.stopped_by = "snapshot-only"
                return True
        self.connected = True
        incremental = self.incremental
        if incremental is not None:  # from the committed progress (what was rolled back: again)
            decoder = getattr(self.sink, "decoder", None)
            incremental.start(output, self.after, output.checkpoint.incremental,
                              options=info.options, decoder=decoder,
                              catalog=getattr(self.sink, "catalog", None) if decoder else None)
        return False

    def _prepare(self, take: bool, state: str) -> tuple[bool, SlotInfo]:
        """The slot prepared (created, found, or replaced with a snapshot under
        ``when_needed``); whether a snapshot is taken, and the slot's information."""
        reader, output, mode, tables = self.reader, self.output, self.snapshot_mode, self.tables
        # when_needed: a missing slot means a snapshot, not a slot created bare
        needed = mode == "when_needed" and not take
        try:
            return take, _prepare(reader, output, take, state,
                                  create_slot=self.create_slot and not needed,
                                  create_publication=self.create_publication, tables=tables,
                                  mode=mode)
        except SlotNotFoundError:
            if not (needed and self.create_slot):
                raise
            # the output's slot is gone: its position is no longer available
            return True, _prepare(reader, output, True, state, create_slot=True,
                                  create_publication=False, tables=tables, mode=mode)
        except SlotLostError:
            if not (needed and self.create_slot):
                raise
            # invalidated: replaced by a new slot, with a snapshot
            return True, _replace_lost(reader, output, tables, mode)

    def _snapshot(self) -> None:
        stats = self.stats
        # the capture format's lines go to the output in bulk; any other sink (records, a
        # subclass) gets the rows one at a time
        bulk = self.output.write if type(self.sink) is CaptureSink else None
        result = read_snapshot(self.reader, lambda row: self.sink.write_row(row, self.output),
                               write=bulk, threads=self.snapshot_threads)
        self.output.commit(int(result.lsn), 1, result.rows, snapshot=result.as_dict())
        self.after = int(result.lsn)
        stats.units += 1
        stats.changes += result.rows
        stats.snapshot_tables, stats.snapshot_rows = result.tables, result.rows
        stats.lsn = result.lsn
        self.reader.finish_snapshot()  # (the stream starts at the consistent point)

    # -- one cycle: read, commit, acknowledge -----------------------------------------------
    def cycle(self) -> bool:
        """One read written, committed and acknowledged; True when the run ends here
        (``max_changes`` reached, or caught up without ``follow``)."""
        stats = self.stats
        if self.incremental is not None:
            self.incremental.poll()  # signal.file
            self.blocking()  # asked for by signal.file, or committed by a run that stopped
        read = self.read()
        batch = self.reader.last_batch
        self.delivered.read_ended(batch.hit_limit or read.blocking)
        self.commit(read)
        if read.blocking:
            self.blocking()
        closed = read.written_end is None and self.idle()
        stats.batches += 1
        moved = self.acknowledge()
        self.failing_since, self.backoff = None, 0.1
        self.report()
        if read.reached_max:
            stats.stopped_by = "max-changes"
            return True
        # While an unresolved PREPARE holds the slot behind the checkpoint, every read
        # starts at the PREPARE again: read enough to get past what was delivered.
        confirmed = self.reader.confirmed_lsn
        held = self.after is not None and (confirmed is None or confirmed < self.after)
        next_limit = self.batch_rows + (batch.rows_at_last_unit if held else 0)
        if batch.hit_limit or read.rotate or read.blocking:
            # More is waiting. A read that delivered nothing new and could not move the
            # slot stopped inside one big transaction: read more rows next time.
            self.limit = (next_limit if (read.written_end is not None or moved)
                          else self.limit * 2)
            return False
        self.limit = next_limit
        busy = self.incremental is not None and self.incremental.busy
        if busy and not self.follow and read.written_end is None and not closed \
                and self.incremental is not None and self.incremental.read_only:
            busy = False  # read.only: no window closes on a quiet stream (the next run goes on)
        if not self.follow and not busy:
            stats.stopped_by = "caught-up"
            return True
        if busy and read.written_end is not None:
            return False  # the next chunk's watermarks are on their way: read on at once
        _pause(self.poll_interval, self.should_stop, self.sleep)
        return False

    def read(self) -> _Read:
        """One read of the slot, its new units written to the output (not committed)."""
        max_changes, stats = self.max_changes, self.stats
        remaining = None if max_changes is None else max_changes - stats.changes
        read_limit = self.limit if remaining is None else max(min(self.limit, remaining), 1)
        read = _Read()
        reading = self.reader.read(self.after, read_limit)
        try:
            for unit in reading:
                try:
                    self.delivered.check(unit)
                    if unit.seen:
                        self.sink.replay(unit)
                        stats.skipped_units += 1
                        continue
                    self.sink.write(unit, self.output)
                    if self.incremental is not None and not isinstance(self.sink, EventSink):
                        self.incremental.written(unit)  # may write a chunk line after it
                    read.units += len(unit) > 0
                    read.changes += unit.changes
                    read.written_end = unit.end_lsn
                finally:
                    unit.close()
                if self.incremental is not None and self.incremental.blocking:
                    read.blocking = True  # the stream pauses after the signal's unit
                    break
                if max_changes is not None and stats.changes + read.changes >= max_changes:
                    read.reached_max = True
                    break
                if self.rotating is not None and self.rotating.full():
                    read.rotate = True  # commit here: the file is finalized at this unit
                    break
        finally:
            reading.close()
        return read

    def commit(self, read: _Read) -> None:
        """Make what ``read`` wrote durable (the output's commit), with the PREPARE that
        held the slot back at its end."""
        if read.written_end is None:
            return
        if self.advance:  # nothing taken behind our back since the last acknowledgement
            self.reader.check_position()
        output = self.output
        if self.incremental is not None:  # the progress goes with the output it belongs to
            assert isinstance(output, (DurableOutput, StreamOutput))
            output.stage_incremental(self.incremental.state())
        output.commit(read.written_end, read.units, read.changes)
        self.holds.append((read.written_end, self.reader.last_batch.hold_lsn))
        self.after = read.written_end
        stats = self.stats
        stats.units += read.units
        stats.changes += read.changes
        stats.lsn = Lsn(self.after)

    def blocking(self) -> None:
        """The blocking snapshots the signals asked for (``execute-snapshot`` of type
        ``blocking``), each written as a snapshot block after the unit that held its signal
        and committed alone, with the queue's new state; nothing of the stream is read
        meanwhile (the connector pauses its streaming). The queue is committed with that
        unit, so a process killed during the snapshot takes it again from the start when
        it restarts (the output's uncommitted block is cut at the restart). A snapshot the
        server refuses (a bad ``SELECT``) writes nothing: its rows are dropped and the
        stream resumes. Not before the output holds a unit (the block needs a place)."""
        incremental, output, sink = self.incremental, self.output, self.sink
        if incremental is None or self.after is None:
            return
        while incremental.blocking:
            result = incremental.run_blocking(lambda row: sink.write_row(row, output),
                                              self.after)
            if result is None:
                output.rollback()  # the rows of a failed snapshot, if any
            assert isinstance(output, (DurableOutput, StreamOutput))
            output.stage_incremental(incremental.state())
            rows = 0 if result is None else result.rows
            output.commit(self.after, 0, rows)
            self.stats.changes += rows

    def idle(self) -> bool:
        """A read-only snapshot's idle poll (the read brought nothing new): the windows it
        closes, their ``r`` events (``--decode``) or the capture's idle line and next
        chunks, committed with the progress (so are chunk lines a ``signal.file`` signal
        made read); whether a window closed. Not before the output holds a unit (the
        commit needs a position)."""
        incremental, output, sink = self.incremental, self.output, self.sink
        if incremental is None or not incremental.read_only or self.after is None:
            return False
        closed, records = incremental.idle()
        if not closed and not incremental.unsaved:
            return False  # (chunk lines written since the last commit: made durable now)
        if isinstance(sink, EventSink):
            sink.write_records(records, output)
        assert isinstance(output, (DurableOutput, StreamOutput))
        output.stage_incremental(incremental.state())
        output.commit(self.after, 0, 0)
        return closed

    def acknowledge(self) -> bool:
        """Advance the slot to what is durable (a rotating output's settled files, never
        past an unresolved PREPARE, or the server's idle position once recorded); whether
        the slot moved."""
        holds = self.holds
        # a rotating output holds units back until their file is in place
        durable = self.rotating.settle() if self.rotating is not None else self.after
        while holds and durable is not None and holds[0][0] <= durable:
            _, self.settled_hold = holds.popleft()
        if self.settled_hold is not None and durable is not None:
            durable = min(durable, self.settled_hold)
        free = self.advance and self.delivered.pending is None
        idle = _tick(self.beat, self.reader, self.output, self.sink, durable, self.after,
                     advance=free)
        if idle is not None:  # recorded durably: the slot may follow the server
            durable = idle
        if free and durable is not None:
            before = self.reader.confirmed_lsn
            return self.reader.advance(durable) != before
        return False

    # -- failures and progress --------------------------------------------------------------
    def retry(self, error: PgCdcError) -> None:
        """A lost connection or a busy slot: roll back what is not committed, then wait
        to connect again (or raise once ``retry_for`` is spent, unless following)."""
        self.output.rollback()
        self.reader.close()
        if self.incremental is not None:  # made again from the committed progress
            self.incremental.close()
        self.connected = False
        now = time.monotonic()
        follow, notify = self.follow, self.notify
        if self.failing_since is None:
            self.failing_since = now
            if notify is not None and (follow or self.retry_for > 0):
                notify(f"{error}; retrying " + ("until it succeeds (--follow)" if follow
                                                else f"for up to {self.retry_for:g} s"))
        left = self.retry_for - (now - self.failing_since)
        if not follow and left <= 0:
            raise error
        self.stats.reconnects += 1
        _pause(self.backoff if follow else min(self.backoff, left), self.should_stop,
               self.sleep)
        self.backoff = min(self.backoff * 2, 5.0)

    def report(self, final: bool = False) -> None:
        """``progress`` at most every ``progress_every`` seconds, and once at the end,
        with the slot's status when connected."""
        progress, stats = self.progress, self.stats
        now = time.monotonic()
        state = (stats.changes, stats.units, stats.lsn)
        if progress is None or (not final and now - self.last_report < self.progress_every) \
                or (final and state == self.reported):
            return
        self.last_report, self.reported = now, state
        status = None
        if self.connected:
            try:
                status = self.reader.status()
                stats.lag_bytes = status.lag_bytes
                stats.retained_bytes = status.retained_bytes
                check_slot(self.reader.slot, status)
            except (ConnectionLostError, SlotBusyError):
                # The reader closed itself: connect again before the next read (reading
                # on would be "call prepare() before reading", and the capture would stop).
                status = None
                self.reader.close()
                self.connected = False
                stats.reconnects += 1
        progress(stats, status)


def _tick(beat: Heartbeat, reader: SlotReader, output: Output, sink: Sink,
          durable: int | None, after: int | None, *, advance: bool) -> int | None:
    """One pass of ``beat``: its action when due, the sink's heartbeat records, and the
    server's idle position recorded in the checkpoint (:attr:`Checkpoint.idle`; returned)
    when there is one. The checkpoint's ``lsn`` stays the end of the last unit."""
    position = None
    if beat.due():
        if beat.action is not None:
            beat.action()
        if advance and not isinstance(output, RotatingOutput):
            idle = reader.idle_position(durable if durable is not None else 0)
            if idle is not None and (after is None or int(idle) > after):
                position = int(idle)
    write: Callable[[int, Output], int] | None = getattr(sink, "heartbeat", None)
    beats = 0
    if write is not None and after is not None:  # (after the output's first unit)
        beats = write(position if position is not None else after, output)
        if beats:
            output.commit(after, 0, 0)  # the checkpoint's lsn stays the last unit's end
    if position is not None:
        output.record_idle(position)  # nothing pending up to it: every unit before is here
    beat.beats += beats
    beat.idle_acks += position is not None
    return position


def check_slot(slot: str, status: SlotStatus) -> None:
    """Raise :class:`SlotLostError` when the server has invalidated the slot."""
    if status.wal_status == "lost":
        raise SlotLostError(
            f"replication slot {slot!r} was invalidated by the server while the capture ran "
            "(wal_status 'lost'): it held more WAL than max_slot_wal_keep_size allows, so the "
            f"changes after {status.confirmed_lsn or 'its position'} can no longer be read",
            slot=slot, hint=LOST_SLOT_HINT)


def _replace_lost(reader: SlotReader, output: Output, tables: tuple[str, ...] | None,
                  mode: str) -> SlotInfo:
    """``snapshot.mode=when_needed``: the output's slot was invalidated (its WAL is gone):
    drop it and create it again, exporting the snapshot the output continues with."""
    return reader.prepare(create_slot=True, tables=tables, snapshot=True, replace_slot=True,
                          before_create=lambda: output.mark_snapshot(
                              {"state": "running", "mode": mode}))


class DeliveredCheck:
    """Units skipped as "already delivered" must be the output's own.

    When the slot is behind the checkpoint (a crash between the checkpoint and the slot's
    advance, or a PREPARE holding it back), the read hands out again the units between the
    two, and they are skipped. That is right only if the server's history is the output's:
    a database restored from a storage snapshot (same system identifier and timeline) writes
    new transactions at LSNs the output already counts, and an edited checkpoint counts LSNs
    it never received. So, once per connection, the unit the checkpoint ends at must come
    again, ending at exactly that LSN and (for a capture output) with the output's last line,
    before anything new is written or the slot is acknowledged; otherwise
    :class:`CheckpointAheadError`, with nothing written or acknowledged.
    """

    def __init__(self, output: Output, slot: str) -> None:
        self.output = output
        self.slot = slot
        #: The LSN whose unit must still come again (``None``: nothing to check).
        self.pending: int | None = None
        self._confirmed: int | None = None

    def arm(self, confirmed: int | None, after: int | None) -> None:
        """After a (re)connection: the slot is at ``confirmed``, the output holds up to
        ``after``. ``confirmed`` is ``None`` when the slot was just created for a snapshot."""
        behind = after is not None and confirmed is not None and confirmed < after
        self.pending = after if behind else None
        self._confirmed = confirmed

    def check(self, unit: Unit) -> None:
        """Called with each unit read, before it is skipped or written."""
        pending = self.pending
        if pending is None:
            return
        if unit.seen and unit.end_lsn < pending:
            return
        if unit.seen and unit.end_lsn == pending and self._same_as_output(unit):
            self.pending = None
            return
        self._refuse(f"the transaction the slot hands out next ends at {Lsn(unit.end_lsn)}"
                     if unit.end_lsn != pending else
                     f"the transaction the slot hands out ending at {Lsn(pending)} is not the "
                     "one the output ends with")

    def read_ended(self, hit_limit: bool) -> None:
        """Called after each read: a read that reached the end of the server's WAL without
        handing out the checkpoint's unit again is refused (a read cut short by its row
        limit is continued, without acknowledging anything)."""
        if self.pending is not None and not hit_limit:
            self._refuse("the server's stream holds no transaction ending there")

    def _same_as_output(self, unit: Unit) -> bool:
        output = self.output
        last_line = getattr(output, "last_line", None)
        if output.checkpoint.kind != "capture" or last_line is None \
                or output.checkpoint.lsn != unit.end_lsn:
            return True  # only the LSN can be compared
        line = last_line()
        if line is None or SNAPSHOT_MARK in line:
            return True  # a blocking snapshot's block after the unit: only the LSN counts
        try:
            mine = CaptureRow.from_line(line).data
        except PgCdcError:
            return False
        if unit.rendered:  # the last line of the last block, unparsed until then
            tail = deque(unit.text(), maxlen=1)
            lines = tail[0].splitlines() if tail else []
            if not lines:
                return True  # (a rolled-back PREPARE has no rows)
            try:
                return CaptureRow.from_line(lines[-1]).data == mine
            except PgCdcError:
                return False
        last = None
        for row in unit:
            last = row
        return last is None or last.data == mine

    def _refuse(self, found: str) -> None:
        pending = self.pending
        assert pending is not None
        where = getattr(self.output, "checkpoint_path", None)
        slot_at = "?" if self._confirmed is None else str(Lsn(self._confirmed))
        raise CheckpointAheadError(
            f"the checkpoint says the output holds every change up to {Lsn(pending)}, but "
            f"replication slot {self.slot!r} (at {slot_at}) does not hand that transaction out "
            f"again: {found}. The server's history is not the output's (a database restored "
            "from a storage snapshot, or an edited checkpoint): continuing would skip the "
            f"changes between {slot_at} and {Lsn(pending)} as already delivered. Nothing was "
            "written or acknowledged; start a new output (--snapshot-mode initial takes the "
            "tables as they are now), or see docs/operations.md, 'When the slot is lost'",
            path=None if where is None else str(where))


def _takes_snapshot(mode: str, state: str) -> bool:
    """Whether a run in ``mode`` takes a snapshot of an output whose snapshot is ``state``."""
    if state == "running":  # a snapshot did not finish: nothing of it is in the output
        if mode == "no_data":
            raise SnapshotError(
                "the output's initial snapshot did not finish (the process stopped while it "
                "ran); --snapshot-mode no_data cannot continue it",
                hint="run again with --snapshot-mode initial to take it again from the start, "
                "or use a new output")
        return True
    return state == "pending" and mode != "no_data"


def _prepare(reader: SlotReader, output: Output, take: bool, state: str, *, create_slot: bool,
             create_publication: bool, tables: tuple[str, ...] | None, mode: str) -> SlotInfo:
    """``reader.prepare``; for a snapshot, the output says so durably before the slot is
    created (a crash after it makes the next run drop that slot and start again)."""
    if not take:
        return reader.prepare(create_slot=create_slot, create_publication=create_publication,
                              tables=tables)
    if state == "running":
        _check_unfinished_snapshot(reader, output.checkpoint)
    return reader.prepare(create_slot=create_slot, create_publication=create_publication,
                          tables=tables, snapshot=True, replace_slot=state == "running",
                          before_create=lambda: output.mark_snapshot(
                              {"state": "running", "mode": mode}))


def _check_unfinished_snapshot(reader: SlotReader, checkpoint: Checkpoint) -> None:
    """An unfinished snapshot is taken again after dropping its slot: refuse when that slot
    may hold changes the output has not got.

    A snapshot's slot is created after the output's last unit (a first run has none; with
    ``when_needed`` the output's slot was gone), so its confirmed position is past the
    checkpoint's LSN. A slot at or before it is the one the output streams from: a
    "running" state there was not written by a snapshot (an edited checkpoint), and
    dropping the slot would lose what it holds.
    """
    if checkpoint.lsn is None:
        return
    rows = reader.run_sql("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                          "WHERE slot_name = :slot", action="check slot", slot=reader.slot)
    if rows and rows[0][0] and Lsn.parse(rows[0][0]) <= checkpoint.lsn:
        raise SnapshotError(
            f"the checkpoint says a snapshot is running, but replication slot {reader.slot!r} "
            f"is at {rows[0][0]}, at or before the checkpoint's {Lsn(checkpoint.lsn)}: it is "
            "the slot the output streams from, not one a snapshot created; taking the snapshot "
            "again would drop it with the changes it holds and append a second snapshot "
            "(an edited checkpoint?)", slot=reader.slot,
            hint="restore the checkpoint's \"snapshot\" field, or start a new output")


def check_server(checkpoint: Checkpoint, info: SlotInfo) -> None:
    """Refuse to continue an output on another server, or on a restored copy of its server.

    The slot's LSNs only mean something on the server (and timeline) the output was
    captured from, and a checkpoint past the server's WAL would make the reader skip
    every change up to it as "already delivered".
    """
    recorded = checkpoint.server
    for key, what in (("system_identifier", "system identifier"), ("timeline", "timeline")):
        was, now = recorded.get(key), getattr(info, key)
        if was is not None and now is not None and was != now:
            raise CheckpointAheadError(
                f"the output was captured from a server with {what} {was}; this server's is "
                f"{now} (another cluster, or a restored or promoted copy): continuing would "
                "skip or repeat changes; start a new output")
    if checkpoint.lsn is not None and info.current_lsn is not None \
            and checkpoint.lsn > info.current_lsn:
        raise CheckpointAheadError(
            f"the checkpoint is at {Lsn(checkpoint.lsn)}, ahead of the server's WAL at "
            f"{info.current_lsn} (a restored server, or another one): continuing would skip "
            "the changes up to the checkpoint; start a new output")


def _pause(seconds: float, should_stop: Callable[[], bool], sleep: Callable[[float], None]
           ) -> None:
    """Sleep ``seconds`` in short steps, returning early when asked to stop."""
    deadline = time.monotonic() + seconds
    while not should_stop():
        left = deadline - time.monotonic()
        if left <= 0:
            return
        sleep(min(left, 0.1))
