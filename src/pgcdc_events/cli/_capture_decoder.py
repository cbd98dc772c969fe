"""``capture --decode`` on two cores: the capture process reads the slot, a decoding
process writes the records.

The capture process runs the capture loop as ``capture`` does (:func:`run_capture`), with a
:class:`ForwardingSink` that renders each unit as capture lines (the slot reader holds them
so already) and a :class:`DecodingOutput` that hands those lines to a decoding process
forked once the catalog is read and the decoder made (:meth:`ForwardingSink.start`). The
decoding process owns the records output from then on: it decodes the lines with the
:class:`~pgcdc_events.adapters.EventSink` the capture made (the same decoder and writer
as in one process), appends the records to the :class:`DurableOutput`, and performs every
step of the output's protocol the capture asks for (commit, idle position, snapshot state,
rollback).

The back channel: each of those steps is a request answered with the checkpoint the
decoding process has on disk after it (or its error). The capture waits for that answer,
so that its checkpoint, and what it acknowledges to the slot (the commit's LSN, an idle
position), never go past what the records output holds durably. Meanwhile the lines of the
next units flow through the pipe: the two processes overlap except at commits.

What happens when one process dies: the decoding process dies with the capture process
(``PR_SET_PDEATHSIG``, and the end of its input in any case), dropping what it had not
committed; a dead decoding process ends the capture with one line naming it. Either way the
slot was acknowledged only up to the last commit the decoding process answered, and a new
run continues from the checkpoint exactly once. Both processes ignore Ctrl-C and SIGTERM
but the capture process's handler: the capture finishes its read, the decoding process its
commit, then the capture closes the pipe and the decoding process ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import multiprocessing
import os
import pickle
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, NoReturn

from pgcdc_events.adapters import CaptureSink, DurableOutput, EventSink
from pgcdc_events.adapters.checkpoint import Checkpoint
from pgcdc_events.adapters.errors import ConnectionLostError, SlotBusyError
from pgcdc_events.adapters.pg8000 import ResolvedOptions, is_driver_error, translate_error
from pgcdc_events.adapters.units import Unit
from pgcdc_events.errors import PgCdcError
from pgcdc_events.protocol.capture import CaptureRow, read_canonical
from pgcdc_events.protocol.lsn import Lsn

if TYPE_CHECKING:
    from pgcdc_events.adapters.connection import ConnectionSettings
    from pgcdc_events.events.decoder import EventDecoder
    from pgcdc_events.events.records import ChangeRecord

__all__ = ["DecodingOutput", "DecodingProcessError", "ForwardingSink", "OwnConnection",
           "can_fork"]

#: Bytes of capture lines handed to the decoding process at once.
_SEGMENT = 1 << 18
#: The pipe's capacity asked for (Linux's F_SETPIPE_SZ): a few segments in flight.
_PIPE_SIZE = 1 << 20
_F_SETPIPE_SZ = 1031
#: Seconds the capture waits for the decoding process to end once told to.
_CLOSE_WAIT = 60.0
_DATA, _REPLAY, _REQUEST = b"D", b"P", b"Q"


class DecodingProcessError(PgCdcError):
    """The decoding process of ``capture --decode`` ended, or failed in a way that cannot be
    sent back as the library's own error."""


def can_fork() -> bool:
    """Whether this platform can run the decoding process (``fork``)."""
    return hasattr(os, "fork") and "fork" in multiprocessing.get_all_start_methods()


class OwnConnection:
    """A connection of its own for reading the catalog again (``catalog_refresh``) from the
    decoding process: the capture's connections belong to the capture process. Opened for
    each call (a table created or altered since: rare), its errors translated."""

    def __init__(self, settings: ConnectionSettings, slot: str) -> None:
        self.settings = settings
        self.slot = slot

    def call(self, function: Callable[[Any], Any], *, action: str) -> Any:
        """``function(connection)`` on a new connection, closed after."""
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


class DecodingOutput:
    """The capture's :class:`~pgcdc_events.adapters.Output` while a decoding process writes
    the records: until :meth:`start`, the :class:`DurableOutput` itself; then every write
    goes to the decoding process as capture lines and every step of the output's protocol
    is a request it answers with its checkpoint (see the module docstring)."""

    def __init__(self, output: DurableOutput, events: EventSink) -> None:
        self.local = output
        self.events = events
        self.path, self.checkpoint_path = output.path, output.checkpoint_path
        self.pid: int | None = None
        self._checkpoint: Checkpoint | None = None
        self._send: Connection | None = None
        self._recv: Connection | None = None
        self._buffer = bytearray(_DATA)
        self._ended = False

    # -- the decoding process ----------------------------------------------------------------
    def start(self) -> None:
        """Fork the decoding process (once): it takes over the open output, the sink's
        decoder and writer as they are now."""
        if self.pid is not None:
            return
        inbox, send = multiprocessing.Pipe(duplex=False)
        recv, outbox = multiprocessing.Pipe(duplex=False)
        with contextlib.suppress(OSError):
            fcntl.fcntl(send.fileno(), _F_SETPIPE_SZ, _PIPE_SIZE)
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the decoding process: never returns into the capture's code
            status = 70
            try:
                send.close()
                recv.close()
                status = _serve(inbox, outbox, self.local, self.events, parent)
            finally:
                for stream in (sys.stdout, sys.stderr):  # its warnings, if any
                    with contextlib.suppress(Exception):
                        stream.flush()
                os._exit(status)
        inbox.close()
        outbox.close()
        self.pid, self._send, self._recv = pid, send, recv
        self._checkpoint = self.local.checkpoint

    @property
    def checkpoint(self) -> Checkpoint:
        """The output's checkpoint as the decoding process last reported it durable."""
        if self._checkpoint is None:
            return self.local.checkpoint
        return self._checkpoint

    # -- the Output protocol ----------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Capture lines (whole lines) of a unit or a snapshot row, for the decoding process
        to decode and append (not durable until :meth:`commit`)."""
        if self.pid is None:
            raise DecodingProcessError("the decoding process was not started")
        self._buffer += data
        if len(self._buffer) >= _SEGMENT:
            self._flush()

    def replay(self, data: bytes) -> None:
        """Capture lines of a unit the output holds already: decoded, their records dropped
        (the decoder keeps its state in step, as :meth:`EventSink.replay`)."""
        self._flush()
        self._send_bytes(_REPLAY + data)

    def commit(self, lsn: int, units: int, changes: int, *,
               snapshot: Mapping[str, Any] | None = None) -> Checkpoint:
        """Every record of the lines written so far durable, the checkpoint at ``lsn``: done
        by the decoding process, which answers with that checkpoint once it is on disk."""
        self._request("commit", lsn, units, changes, snapshot)
        return self.checkpoint

    def record_idle(self, lsn: int) -> None:
        """The server's idle position recorded by the decoding process (after every commit
        before it)."""
        self._request("record_idle", lsn)

    def mark_snapshot(self, snapshot: Mapping[str, Any], *, store: bool = True) -> None:
        """The snapshot's state (see :meth:`DurableOutput.mark_snapshot`)."""
        if self.pid is None:
            self.local.mark_snapshot(snapshot, store=store)
        else:
            self._request("mark_snapshot", dict(snapshot), store)

    def bind(self, options: Mapping[str, Any], server: Mapping[str, Any]) -> None:
        """The decoding options and server (see :meth:`DurableOutput.bind`)."""
        if self.pid is None:
            self.local.bind(options, server)
        else:
            self._request("bind", dict(options), dict(server))

    def heartbeat(self, lsn: int) -> int:
        """The heartbeat records due at ``lsn``, written by the decoding process; how many."""
        return int(self._request("heartbeat", lsn))

    def rollback(self) -> None:
        """Forget what was written since the last commit (here and in the decoding
        process)."""
        self._buffer = bytearray(_DATA)
        if self.pid is None:
            self.local.rollback()
        else:
            self._request("rollback")

    def close(self) -> None:
        """End the decoding process (it drops anything not committed and closes the output),
        then release this process's copy of the output without touching its files."""
        if self.pid is None:
            self.local.close()
            return
        self._buffer = bytearray(_DATA)
        if self._send is not None:
            self._send.close()  # the end of its input: it closes the output and exits
            self._send = None
        if not self._ended:
            self._wait(_CLOSE_WAIT)
        if self._recv is not None:
            self._recv.close()
            self._recv = None
        self.local.release()

    # -- the pipe ---------------------------------------------------------------------------
    def _flush(self) -> None:
        if len(self._buffer) > 1:
            data, self._buffer = self._buffer, bytearray(_DATA)
            self._send_bytes(data)

    def _send_bytes(self, data: bytes | bytearray) -> None:
        if self._send is None or self._recv is None:
            raise DecodingProcessError("the decoding process is not running")
        if self._recv.poll():  # it failed (an error is the only thing it says unasked)
            self._answer()
        try:
            self._send.send_bytes(data)
        except OSError:
            self._died()

    def _request(self, *call: Any) -> Any:
        if self.pid is None:
            raise DecodingProcessError("the decoding process was not started")
        self._flush()
        self._send_bytes(_REQUEST + pickle.dumps(call))
        return self._answer()

    def _answer(self) -> Any:
        assert self._recv is not None
        try:
            data = self._recv.recv_bytes()
        except (EOFError, OSError):
            self._died()
        status, value, checkpoint = pickle.loads(data)
        if status != "ok":
            raise _error(*value)
        self._checkpoint = checkpoint
        return value

    def _wait(self, seconds: float) -> int | None:
        """The decoding process's wait status once it ended (killed after ``seconds``)."""
        assert self.pid is not None
        deadline = time.monotonic() + seconds
        while True:
            try:
                done, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self._ended = True
                return None
            if done:
                self._ended = True
                return status
            if time.monotonic() > deadline:
                with contextlib.suppress(OSError):
                    os.kill(self.pid, signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.01)

    def _died(self) -> NoReturn:
        status = self._wait(5.0)
        how = "?"
        if status is not None:
            if os.WIFSIGNALED(status):
                number = os.WTERMSIG(status)
                how = f"killed by signal {number} ({signal.Signals(number).name})" \
                    if number in signal.valid_signals() else f"killed by signal {number}"
            else:
                how = f"exit status {os.waitstatus_to_exitcode(status)}"
        raise DecodingProcessError(
            f"the decoding process (PID {self.pid}) ended unexpectedly ({how}); the slot was "
            f"acknowledged only as far as it had made the records durable "
            f"({_durable(self.checkpoint)}): run the capture again to continue from there")


def _durable(checkpoint: Checkpoint) -> str:
    position = checkpoint.position
    return "nothing yet" if position is None else f"up to {Lsn(position)}"


def _error(pickled: bytes | None, text: str) -> PgCdcError:
    """The decoding process's error as the library raised it there (a lost connection of
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
    process; it makes the decoder (:meth:`EventSink.start`: the catalog read on the
    capture's connection) before forking that process."""

    kind = "events"

    def __init__(self, events: EventSink, output: DecodingOutput) -> None:
        super().__init__()
        self.events = events
        self.output = output

    def start(self, options: ResolvedOptions) -> None:
        """The decoder made (once), then the decoding process started (once)."""
        self.events.start(options)
        self.output.start()

    def replay(self, unit: Unit) -> None:
        """A unit the output holds: decoded there too, its records dropped."""
        if not unit.partial:
            self.output.replay("".join(self.schema.text(unit)).encode("ascii"))

    def heartbeat(self, lsn: int, output: Any) -> int:
        """The heartbeat records due at ``lsn`` (``heartbeat.interval.ms``); how many."""
        if not self.events.config.heartbeat_interval_ms:
            return 0
        return self.output.heartbeat(lsn)


# -- the decoding process ------------------------------------------------------------------
def _serve(inbox: Connection, outbox: Connection, output: DurableOutput, events: EventSink,
           parent: int) -> int:
    """The decoding process's loop, until the end of its input; its exit status."""
    for number in (signal.SIGINT, signal.SIGTERM):  # the capture process decides when to stop
        signal.signal(number, signal.SIG_IGN)
    _die_with(parent)
    decoder = events.decoder
    assert decoder is not None, "the decoder is made before the decoding process starts"
    failed: tuple[bytes | None, str] | None = None
    while True:
        try:
            data = inbox.recv_bytes()
        except (EOFError, OSError):
            break
        tag = data[:1]
        if failed is not None:  # what comes after an error is dropped; requests get it
            if tag == _REQUEST:
                outbox.send_bytes(pickle.dumps(("error", failed, None)))
            continue
        try:
            if tag == _DATA:
                events.write_records(_records(decoder, data), output)
            elif tag == _REPLAY:
                for _ in _records(decoder, data):
                    pass
            else:
                name, *args = pickle.loads(data[1:])
                value = _do(name, args, output, events)
                outbox.send_bytes(pickle.dumps(("ok", value, output.checkpoint)))
        except Exception as exc:  # sent back: the capture process raises it
            failed = (_pickled(exc), str(exc) if isinstance(exc, PgCdcError)
                      else f"the decoding process failed: {type(exc).__name__}: {exc}")
            with contextlib.suppress(OSError):
                outbox.send_bytes(pickle.dumps(("error", failed, None)))
    with contextlib.suppress(Exception):
        output.close()  # drops what was not committed
    return 0


def _do(name: str, args: list[Any], output: DurableOutput, events: EventSink) -> Any:
    if name == "commit":
        lsn, units, changes, snapshot = args
        if snapshot is None:  # (as the capture loop calls it)
            output.commit(lsn, units, changes)
        else:
            output.commit(lsn, units, changes, snapshot=snapshot)
        return None
    if name == "heartbeat":
        return events.heartbeat(args[0], output)
    if name == "record_idle":
        output.record_idle(args[0])
    elif name == "mark_snapshot":
        output.mark_snapshot(args[0], store=args[1])
    elif name == "bind":
        output.bind(args[0], args[1])
    elif name == "rollback":
        output.rollback()
    else:
        raise DecodingProcessError(f"unknown request {name!r}")
    return None


def _records(decoder: EventDecoder, data: bytes) -> Iterator[ChangeRecord]:
    """The records of the capture lines in ``data`` (after its tag byte), one at a time."""
    feed = decoder.iter_feed
    for line in data[1:].split(b"\n"):
        if not line:
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
    input does it elsewhere, once the current segment is decoded."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it ended before that took effect
        os._exit(0)
