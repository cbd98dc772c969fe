"""``capture --decode`` on several cores: the capture process reads the slot, decoding
processes decode its units, the capture process makes the records durable.

The capture process runs the capture loop as ``capture`` does (:func:`run_capture`), with a
:class:`ForwardingSink` that renders each unit as capture lines (the slot reader holds them
so already, with the schema rows a unit relies on, as :class:`CaptureSink` writes them) and
a :class:`DecodingOutput` that hands those lines to ``workers`` decoding processes, forked
once the catalog is read and the decoder made (:meth:`ForwardingSink.start`): each is a
copy of the same :class:`~pgcdc_events.adapters.EventSink`, decoder and writer.

Units are grouped into *segments* of whole units (about :data:`_SEGMENT` bytes of lines;
a commit ends one), each owned by one decoding process in turn. Every decoding process
reads every line, so that each decoder holds the state one decoder would (table schemas,
the last commit, the open transaction): the owner decodes its segment and writes the
records to a private spool file; the others *skim* it, feeding every message but the rows
of changes (Insert, Update, Delete, Truncate: no decoder state outlives the transaction
they belong to) and dropping what comes out. This is the rule of ``decode --workers``'
prelude (:func:`~pgcdc_events.events.chunks.prime`: schema messages, Begin and Commit),
applied as the lines come.

The back channel: an owner answers the end of its segment with its spool file; the capture
process appends the segments' files to the :class:`DurableOutput` in order (in the kernel:
``copy_file_range``), and only at a commit, once every segment before it is appended,
does it ``fsync``, write the checkpoint and acknowledge the slot, exactly as ``capture``
does. Meanwhile the next units are read and decoded: reading and decoding overlap, and
the decoding processes work side by side.

What happens when a process dies: the decoding processes die with the capture process
(``PR_SET_PDEATHSIG``, and the end of their input in any case); a dead decoding process
ends the capture with one line naming it, before anything it had not answered for is
committed. Either way the slot was acknowledged only up to the last commit, and a new run
continues from the checkpoint exactly once. A decoder's error (or any other) comes back as
the error one process would raise. Decoding processes ignore Ctrl-C and SIGTERM: the
capture finishes its read and commit, then closes the pipes and they end.

A catalog read again in a decoding process (:class:`OwnConnection`) that loses its
connection is retried there, as the capture retries its own connections, while the
capture waits for the segment; the capture process holds a *life line* (a pipe) open
until it closes the output, and a retry gives up as soon as it reads as ended (a second
Ctrl-C, an error: the capture ends without waiting for the server to come back).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import glob
import multiprocessing
import os
import pickle
import select
import shutil
import signal
import sys
import tempfile
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, NoReturn, cast

from pgcdc_events.adapters import CaptureSink, DurableOutput, EventSink, Output
from pgcdc_events.adapters.checkpoint import Checkpoint
from pgcdc_events.adapters.errors import ConnectionLostError, SlotBusyError
from pgcdc_events.adapters.pg8000 import ResolvedOptions, is_driver_error, translate_error
from pgcdc_events.adapters.units import Unit
from pgcdc_events.errors import PgCdcError
from pgcdc_events.protocol.capture import CaptureRow, canonical_head, read_canonical
from pgcdc_events.protocol.lsn import Lsn

if TYPE_CHECKING:
    from pgcdc_events.adapters.connection import ConnectionSettings
    from pgcdc_events.events.decoder import EventDecoder
    from pgcdc_events.events.records import ChangeRecord

__all__ = ["DecodingOutput", "DecodingProcessError", "ForwardingSink", "OwnConnection",
           "can_fork", "speaks"]

#: Bytes of capture lines after which a segment ends (at the end of a unit).
_SEGMENT = 1 << 20
#: Bytes of lines sent at once (a big unit goes in pieces, all to its segment's owner).
_PIECE = 1 << 18
#: The pipes' capacity asked for (Linux's F_SETPIPE_SZ): a few pieces in flight.
_PIPE_SIZE = 1 << 20
_F_SETPIPE_SZ = 1031
#: Seconds the capture waits for the decoding processes to end once told to.
_CLOSE_WAIT = 60.0
#: Messages to a decoding process: lines it owns, lines it skims, the end of its segment,
#: forget the transaction in progress (the capture reconnected: the read starts again).
_OWN, _SKIM, _END, _RESET = b"O", b"S", b"E", b"R"
#: The directory of a run's spool files, beside the output: ``.<output's name><this>XXXX``.
_SPOOL_SUFFIX = ".decoding-"
#: The changes a skimming decoder passes over (their type bytes).
_CHANGES = frozenset(b"IUDT")


class DecodingProcessError(PgCdcError):
    """A decoding process of ``capture --decode`` ended, or failed in a way that cannot be
    sent back as the library's own error."""


def can_fork() -> bool:
    """Whether this platform can run decoding processes (``fork``)."""
    return hasattr(os, "fork") and "fork" in multiprocessing.get_all_start_methods()


class OwnConnection:
    """A connection of its own for reading the catalog again (``catalog_refresh``) from a
    decoding process: the capture's connections belong to the capture process. Opened for
    each call (a table created or altered since: rare), its errors translated.

    A lost connection (the server restarted, the session terminated) is retried as the
    capture retries its own: for ``retry_for`` seconds, for ever when ``follow``ing, with
    the same back-off; ``notify`` is told when it starts. Meanwhile the capture waits for
    the segment being decoded; it gives up at once when the capture process ends."""

    def __init__(self, settings: ConnectionSettings, slot: str, *, retry_for: float = 10.0,
                 follow: bool = False, notify: Callable[[str], None] | None = None) -> None:
        self.settings = settings
        self.slot = slot
        self.retry_for, self.follow, self.notify = retry_for, follow, notify

    def call(self, function: Callable[[Any], Any], *, action: str) -> Any:
        """``function(connection)`` on a new connection, closed after; again on a new one
        when the connection is lost (see the class docstring)."""
        failing_since: float | None = None
        backoff = 0.1
        while True:
            try:
                return self._call(function, action)
            except ConnectionLostError as error:
                now = time.monotonic()
                if failing_since is None:
                    failing_since = now
                    if self.notify is not None and (self.follow or self.retry_for > 0):
                        self.notify(f"{error}; retrying " + (
                            "until it succeeds (--follow)" if self.follow
                            else f"for up to {self.retry_for:g} s"))
                left = self.retry_for - (now - failing_since)
                if not self.follow and left <= 0:
                    raise
                if _ending(backoff if self.follow else min(backoff, left)):
                    raise  # (the capture process is ending: no one waits for the answer)
                backoff = min(backoff * 2, 5.0)

    def _call(self, function: Callable[[Any], Any], action: str) -> Any:
        conn, _ = self.settings.connect()
        try:
            return function(conn)
        except PgCdcError:
            raise
        except Exception as exc:
            if not is_driver_error(exc):
                raise
            raise translate_error(exc, slot=self.slot, action=action,
                                  password_source=self.settings.password_source) from None
        finally:
            with contextlib.suppress(Exception):
                conn.close()


class _Process:
    """One decoding process, seen from the capture process."""

    def __init__(self, pid: int, send: Connection, recv: Connection) -> None:
        self.pid, self.send, self.recv = pid, send, recv
        self.status: int | None = None  # its wait status, once ended
        self.records = 0  # the records of its segments appended to the output


class DecodingOutput:
    """The capture's :class:`~pgcdc_events.adapters.Output` while decoding processes make
    the records: the :class:`DurableOutput` stays here (commit, checkpoint, idle position,
    snapshot state, rollback are its own); what is written is capture lines, decoded by
    the processes (see the module docstring), whose records are appended here in order
    before any commit."""

    def __init__(self, output: DurableOutput, events: EventSink, workers: int) -> None:
        self.local = output
        self.events = events
        self.workers = max(1, workers)
        self.path, self.checkpoint_path = output.path, output.checkpoint_path
        self.processes: list[_Process] = []
        self.spool: str | None = None
        self._piece = bytearray()
        self._segment_bytes = 0
        self._owner = 0
        #: Segments ended and not appended yet: their owners, oldest first.
        self._pending: deque[_Process] = deque()
        #: The write end of the decoding processes' life line (closed: the capture ends).
        self._lifeline: int | None = None

    # -- the decoding processes --------------------------------------------------------------
    def start(self) -> None:
        """Fork the decoding processes (once): each takes the sink's decoder and writer as
        they are now."""
        if self.processes:
            return
        # beside the output (its file system, its space), 0700, this run's only; one a
        # killed run left for this output is removed (this run holds the output's lock)
        directory, prefix = self.local.path.parent, f".{self.local.path.name}{_SPOOL_SUFFIX}"
        for stale in directory.glob(f"{glob.escape(prefix)}*"):
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale, ignore_errors=True)
        self.spool = tempfile.mkdtemp(prefix=prefix, dir=directory)
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        alive, self._lifeline = os.pipe()
        for _ in range(self.workers):
            inbox, send = multiprocessing.Pipe(duplex=False)
            recv, outbox = multiprocessing.Pipe(duplex=False)
            with contextlib.suppress(OSError):
                fcntl.fcntl(send.fileno(), _F_SETPIPE_SZ, _PIPE_SIZE)
            pid = os.fork()
            if pid == 0:  # a decoding process: never returns into the capture's code
                status = 70
                try:
                    for other in self.processes:  # the pipes of the ones forked before
                        other.send.close()
                        other.recv.close()
                    send.close()
                    recv.close()
                    os.close(self._lifeline)
                    _hold_lifeline(alive)
                    status = _serve(inbox, outbox, self.events, self.spool, parent)
                finally:
                    for stream in (sys.stdout, sys.stderr):  # its warnings, if any
                        with contextlib.suppress(Exception):
                            stream.flush()
                    os._exit(status)
            inbox.close()
            outbox.close()
            self.processes.append(_Process(pid, send, recv))
        os.close(alive)

    @property
    def checkpoint(self) -> Checkpoint:
        """The output's last committed checkpoint."""
        return self.local.checkpoint

    @property
    def decoded(self) -> tuple[int, ...]:
        """The records each decoding process decoded and the output got, in the order they
        were started (a rolled-back segment's included): the proof that they did the work
        (none started yet: empty)."""
        return tuple(process.records for process in self.processes)

    # -- writing: pieces, segments, the records appended -------------------------------------
    def write(self, data: bytes) -> None:
        """Capture lines (whole lines) of a unit or of a snapshot row, for the current
        segment (not durable until :meth:`commit`)."""
        self._piece += data
        if len(self._piece) >= _PIECE:
            self._send_piece()

    def unit_end(self) -> None:
        """A unit was written whole: the segment may end here."""
        if self._segment_bytes + len(self._piece) >= _SEGMENT:
            self._end_segment()
        self._collect(block=False)

    def reset(self) -> None:
        """The capture reconnected (after :meth:`rollback`): every decoding process's
        decoder forgets the transaction it was in (:meth:`EventDecoder.reset`), as the
        capture process's would."""
        self._send_piece()
        for process in self.processes:
            self._send(process, _RESET)

    def replay(self, data: bytes) -> None:
        """Capture lines of a unit the output holds already: skimmed by every decoding
        process (their decoders keep in step, as :meth:`EventSink.replay`)."""
        self._send_piece()
        for process in self.processes:
            self._send(process, _SKIM + data)

    def _send_piece(self) -> None:
        if not self._piece:
            return
        owner = self.processes[self._owner]
        for process in self.processes:
            # (the bytes object is made once: each send is a copy into a pipe)
            self._send(process, (_OWN if process is owner else _SKIM) + self._piece)
        self._segment_bytes += len(self._piece)
        self._piece = bytearray()

    def _end_segment(self) -> None:
        self._send_piece()
        if not self._segment_bytes:
            return
        owner = self.processes[self._owner]
        self._send(owner, _END)
        self._pending.append(owner)
        self._segment_bytes = 0
        self._owner = (self._owner + 1) % len(self.processes)

    def _collect(self, *, block: bool) -> None:
        """Append the records of the ended segments, in order: all of them (``block``), or
        those ready now."""
        while self._pending:
            process = self._pending[0]
            if not block and not process.recv.poll():
                break
            path, size, records = self._answer(process)
            self._pending.popleft()
            self.local.append_file(path, size)
            process.records += records
        if block:  # a process that is owed nothing may still have failed (a skim)
            for process in self.processes:
                if process.recv.poll():
                    self._answer(process)

    def drain(self) -> None:
        """Every segment ended and its records appended."""
        self._end_segment()
        self._collect(block=True)

    # -- the Output protocol ----------------------------------------------------------------
    def commit(self, lsn: int, units: int, changes: int, *,
               snapshot: Mapping[str, Any] | None = None) -> Checkpoint:
        """Every record of the lines written so far appended, then the output's commit
        (``fsync``, the checkpoint at ``lsn``)."""
        self.drain()
        if snapshot is None:
            return self.local.commit(lsn, units, changes)
        return self.local.commit(lsn, units, changes, snapshot=snapshot)

    def record_idle(self, lsn: int) -> None:
        """The server's idle position, recorded after every record before it."""
        self.drain()
        self.local.record_idle(lsn)

    def mark_snapshot(self, snapshot: Mapping[str, Any], *, store: bool = True) -> None:
        """The snapshot's state (see :meth:`DurableOutput.mark_snapshot`)."""
        self.drain()
        self.local.mark_snapshot(snapshot, store=store)

    def bind(self, options: Mapping[str, Any], server: Mapping[str, Any]) -> None:
        """The decoding options and server (see :meth:`DurableOutput.bind`)."""
        self.local.bind(options, server)

    def rollback(self) -> None:
        """Forget what was written since the last commit: the segments in flight are
        awaited (the decoders have seen their units whole, as one decoder would have) and
        cut."""
        if self.processes:
            self.drain()
        self.local.rollback()

    def close(self) -> None:
        """End the decoding processes (they drop their unfinished segment), remove their
        files, close the output (dropping anything not committed)."""
        try:
            if self._lifeline is not None:  # a catalog read being retried gives up
                os.close(self._lifeline)
                self._lifeline = None
            for process in self.processes:
                process.send.close()  # the end of its input: it exits
            deadline = time.monotonic() + _CLOSE_WAIT
            for process in self.processes:
                _wait(process, max(0.0, deadline - time.monotonic()))
                process.recv.close()
        finally:
            if self.spool is not None:
                shutil.rmtree(self.spool, ignore_errors=True)
            self.local.close()

    # -- the pipes ---------------------------------------------------------------------------
    def _send(self, process: _Process, data: bytes | bytearray) -> None:
        try:
            process.send.send_bytes(data)
        except OSError:
            self._died(process)

    def _answer(self, process: _Process) -> tuple[str, int, int]:
        """The next answer of ``process``: the spool file of its oldest segment (path, size,
        records), or the error that stopped it (raised)."""
        try:
            data = process.recv.recv_bytes()
        except (EOFError, OSError):
            self._died(process)
        status, value = pickle.loads(data)
        if status != "done":
            raise _error(*value)
        path, size, records = value
        return str(path), int(size), int(records)

    def _died(self, process: _Process) -> NoReturn:
        status = _wait(process, 5.0)
        how = "?"
        if status is not None:
            if os.WIFSIGNALED(status):
                number = os.WTERMSIG(status)
                try:
                    how = f"killed by signal {number} ({signal.Signals(number).name})"
                except ValueError:
                    how = f"killed by signal {number}"
            else:
                how = f"exit status {os.waitstatus_to_exitcode(status)}"
        position = self.checkpoint.position
        durable = "nothing yet" if position is None else f"up to {Lsn(position)}"
        raise DecodingProcessError(
            f"a decoding process (PID {process.pid}) ended unexpectedly ({how}); the slot "
            f"was acknowledged only as far as the records were durable ({durable}): run "
            "the capture again to continue from there")


def _wait(process: _Process, seconds: float) -> int | None:
    """The process's wait status once it ended (killed after ``seconds``)."""
    if process.status is not None:
        return process.status
    deadline = time.monotonic() + seconds
    while True:
        try:
            done, status = os.waitpid(process.pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            process.status = status
            return status
        if time.monotonic() > deadline:
            with contextlib.suppress(OSError):
                os.kill(process.pid, signal.SIGKILL)
            deadline = float("inf")
        time.sleep(0.01)


def _error(pickled: bytes | None, text: str) -> PgCdcError:
    """A decoding process's error as the library raised it there (a lost connection of
    its own is not the capture's to retry: it ends the capture too)."""
    if pickled is not None:
        with contextlib.suppress(Exception):
            error = pickle.loads(pickled)
            if isinstance(error, PgCdcError) and not isinstance(
                    error, (ConnectionLostError, SlotBusyError)):
                return error
    return DecodingProcessError(text)


class ForwardingSink(CaptureSink):
    """The capture process's sink: units as capture lines (with the schema rows they rely
    on, as :class:`CaptureSink` writes them) for the :class:`DecodingOutput`'s decoding
    processes; it makes the decoder (:meth:`EventSink.start`: the catalog read on the
    capture's connection) before forking them."""

    kind = "events"

    def __init__(self, events: EventSink, output: DecodingOutput) -> None:
        super().__init__()
        self.events = events
        self.output = output

    def start(self, options: ResolvedOptions) -> None:
        """The decoder made (once), then the decoding processes started (once); after a
        reconnection, their decoders reset (as :meth:`EventSink.start` resets its own)."""
        if self.output.processes:
            self.output.reset()
        self.events.start(options)
        self.output.start()

    def write(self, unit: Unit, output: Output) -> None:
        """The unit's capture lines, then the segment may end."""
        super().write(unit, output)
        self.output.unit_end()

    def replay(self, unit: Unit) -> None:
        """A unit the output holds: skimmed by the decoders, as one decoder replays it."""
        if not unit.partial:
            self.output.replay("".join(self.schema.text(unit)).encode("ascii"))

    def heartbeat(self, lsn: int, output: Output) -> int:
        """The heartbeat records due at ``lsn`` (``heartbeat.interval.ms``), written after
        every record before them; how many (a heartbeat is the decoder's clock and
        settings alone: this process's copy makes it)."""
        if not self.events.config.heartbeat_interval_ms:
            return 0
        self.output.drain()  # the records before it, in order
        return self.events.heartbeat(lsn, self.output.local)


# -- a decoding process --------------------------------------------------------------------
class _SpoolFile:
    """A segment's records: a new 0600 file of the run's private directory."""

    def __init__(self, path: str) -> None:
        self.path = path
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        self.file = os.fdopen(fd, "wb", buffering=1 << 20)
        self.size = 0
        self.records = 0  # (counted by the sink as it writes them)

    def write(self, data: bytes) -> None:
        try:
            self.file.write(data)
        except OSError as exc:
            raise DecodingProcessError(f"{self.path}: cannot write decoded records: "
                                       f"{exc.strerror or exc}") from None
        self.size += len(data)

    def close(self) -> None:
        try:
            self.file.close()
        except OSError as exc:
            raise DecodingProcessError(f"{self.path}: cannot write decoded records: "
                                       f"{exc.strerror or exc}") from None


def _serve(inbox: Connection, outbox: Connection, events: EventSink, spool: str,
           parent: int) -> int:
    """A decoding process's loop, until the end of its input; its exit status."""
    for number in (signal.SIGINT, signal.SIGTERM):  # the capture process decides when to stop
        signal.signal(number, signal.SIG_IGN)
    _die_with(parent)
    decoder = events.decoder
    assert decoder is not None, "the decoder is made before the decoding processes start"
    failed: tuple[bytes | None, str] | None = None
    current: _SpoolFile | None = None
    segments = 0
    while True:
        try:
            data = inbox.recv_bytes()
        except (EOFError, OSError):
            break
        tag = data[:1]
        if failed is not None:  # what comes after an error is dropped; ends get it again
            if tag == _END:
                outbox.send_bytes(pickle.dumps(("error", failed)))
            continue
        try:
            if tag == _OWN:
                if current is None:
                    segments += 1
                    current = _SpoolFile(os.path.join(spool, f"{os.getpid()}-{segments}"))
                before = events.records
                events.write_records(_records(decoder, data), cast(Output, current))
                current.records += events.records - before
            elif tag == _SKIM:
                with _quiet():  # what the lines' owner says too: said once, by it
                    for _ in _records(decoder, data, skim=True):
                        pass
            elif tag == _RESET:
                decoder.reset()
            elif tag == _END:
                assert current is not None, "the end of a segment this process never got"
                current.close()
                outbox.send_bytes(pickle.dumps(
                    ("done", (current.path, current.size, current.records))))
                current = None
        except Exception as exc:  # sent back: the capture process raises it
            failed = (_pickled(exc), str(exc) if isinstance(exc, PgCdcError)
                      else f"a decoding process failed: {type(exc).__name__}: {exc}")
            with contextlib.suppress(OSError):
                outbox.send_bytes(pickle.dumps(("error", failed)))
    if current is not None:
        with contextlib.suppress(OSError):
            current.close()
            os.unlink(current.path)
    return 0


#: Whether this process is skimming (a decoding process, lines another one owns).
_SKIMMING = False
#: In a decoding process: the read end of the life line, which the capture process holds
#: open until it ends (then it reads as the end of a file).
_LIFELINE: int | None = None


def _hold_lifeline(fd: int) -> None:
    """This decoding process's end of the life line (see :func:`_ending`)."""
    global _LIFELINE  # noqa: PLW0603 - one capture process a decoding process
    _LIFELINE = fd


def _ending(seconds: float) -> bool:
    """Wait ``seconds``; whether the capture process is ending (a decoding process's life
    line closed; in any other process: never)."""
    if _LIFELINE is None:
        time.sleep(seconds)
        return False
    try:
        readable, _, _ = select.select([_LIFELINE], [], [], seconds)
    except OSError:
        return True
    return bool(readable)


def speaks() -> bool:
    """Whether this process tells the user what its decoder meets (a catalog read again):
    not while it skims lines another decoding process owns, which says it."""
    return not _SKIMMING


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Skimming: no warnings (a Relation the catalog does not describe), no notices."""
    global _SKIMMING  # noqa: PLW0603 - one decoder a process
    _SKIMMING = True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        _SKIMMING = False


def _records(decoder: EventDecoder, data: bytes, *, skim: bool = False
             ) -> Iterator[ChangeRecord]:
    """The records of the capture lines in ``data`` (after its tag byte), one at a time;
    ``skim`` passes the rows of changes over."""
    feed = decoder.iter_feed
    for line in data[1:].split(b"\n"):
        if not line:
            continue
        if skim:
            head = canonical_head(line, 1)
            if head is not None and head[0] in _CHANGES:
                continue
        canonical = read_canonical(line)
        if canonical is None:  # (every line the capture writes is canonical)
            row = CaptureRow.from_line(line)
            canonical = row.lsn, row.data, row.snapshot
        lsn, message, snapshot = canonical
        yield from feed(message, lsn, snapshot=snapshot)


def _pickled(exc: BaseException) -> bytes | None:
    try:
        data = pickle.dumps(exc)
        same = str(pickle.loads(data)) == str(exc)
    except Exception:
        return None
    return data if same else None


def _die_with(parent: int) -> None:
    """Be killed when the capture process ends, however it ends (Linux); the end of the
    input does it elsewhere, once the current piece is decoded."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it ended before that took effect
        os._exit(0)

