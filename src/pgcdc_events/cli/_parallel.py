"""Decoding a capture on several cores, with output identical to one decoder's.

The capture is cut into chunks of whole transactions where
:class:`~pgcdc_events.events.chunks.CutPlanner` allows (the rule Spark's chunks follow),
fed only the lines it needs (Begin, Commit, Relation, Type, logical messages: their type
read from the hex, never parsed). Each chunk goes to a worker process with the planner's
*prelude*: the latest Relation and Type message of every OID seen before the chunk, the
Begin and Commit of the last complete transaction, and the last non-transactional
message after it (which Debezium counts as a commit). A fresh
:class:`~pgcdc_events.events.EventDecoder` fed the prelude (its records dropped) holds
exactly the state the single decoder held at the chunk's start: table schemas, the
last commit LSN (``source.sequence``) and the last Begin. The worker writes the chunk's
JsonConverter lines (UTF-8) to a private temporary file; the parent copies the chunks'
files into the output in order, in the kernel (``copy_file_range`` or ``sendfile``):
the output never crosses a pipe, and only the parent writes the output.

What the prelude cannot carry is decoded in the parent, by one primed decoder, as
before: streamed and two-phase transactions (from the first such message to the end
of the capture), a transaction longer than ``big_lines`` (until its Commit, with
the memory limit of a single decoder), and an initial snapshot's block (until its
Commit: its markers need one decoder to see every row). A line that is not in the canonical capture
form also ends the parallel part, so that its error is the single decoder's; so does an
incremental snapshot's chunk line (the window it opens needs one decoder to see every
record from there on).
"""

from __future__ import annotations

import errno
import itertools
import multiprocessing
import os
import shutil
import signal
import stat
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import IO, TYPE_CHECKING, Any

import attrs

from pgcdc_events.errors import PgCdcError
from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.events.chunks import CutPlanner, prime
from pgcdc_events.events.fused import FusedLines
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.protocol import CaptureError, CaptureRow, wire
from pgcdc_events.protocol.capture import (
    ROW_CHANGE_HEAD,
    SNAPSHOT_MARK,
    canonical_head,
    read_canonical,
    read_chunk_line,
    read_copy_block,
)
from pgcdc_events.protocol.lsn import Lsn
from pgcdc_events.protocol.transactions import Prelude, Row
from pgcdc_events.types.catalog import CatalogSnapshot

if TYPE_CHECKING:
    from pgcdc_events.events.incremental import RecordedChunks

__all__ = ["DecodeJob", "WorkerLostError", "default_workers", "record_label", "run_decode"]

# The type bytes of messages whose state a prelude carries.
_PLAIN = frozenset(wire.BEGIN + wire.COMMIT + wire.INSERT + wire.UPDATE + wire.DELETE
                   + wire.TRUNCATE + wire.ORIGIN + wire.MESSAGE + wire.RELATION + wire.TYPE)
_BEGIN, _COMMIT, _RELATION, _TYPE = (wire.BEGIN[0], wire.COMMIT[0], wire.RELATION[0],
                                     wire.TYPE[0])
_INSERT = wire.INSERT
#: The lines the cut planner is fed, by their type byte.
_PLANNED = frozenset(wire.BEGIN + wire.COMMIT + wire.RELATION + wire.TYPE + wire.MESSAGE)
_SNAPSHOT = SNAPSHOT_MARK
#: Records rendered between two writes of the output.
_BATCH = 512


@attrs.frozen
class DecodeJob:
    """What every decoder of one ``decode`` run is made from."""

    config: EventConfig
    catalog: CatalogSnapshot | None
    proto_version: int | None
    streaming: Any
    memory_limit: int | None
    run_id: str
    clock: Callable[[], int] | None = None
    #: Whether Inserts take the fused path (:mod:`pgcdc_events.events.fused`): their lines
    #: written from the converted values, without record objects (the output is the same).
    fused: bool = True

    def decoder(self) -> EventDecoder:
        """A new decoder for this run (the same run id everywhere; the YugabyteDB
        connector's under ``plugin.name=yboutput``)."""
        extra: dict[str, Any] = {} if self.clock is None else {"clock": self.clock}
        factory: Callable[..., EventDecoder] = EventDecoder
        if self.config.plugin_name != EventDecoder.PLUGIN:
            # the YugabyteDB module is loaded only for its plugin (5 ms of every start-up)
            from pgcdc_events.events.yugabyte import make_decoder  # noqa: PLC0415
            factory = make_decoder
        return factory(self.config, catalog=self.catalog, proto_version=self.proto_version,
                       streaming=self.streaming, memory_limit=self.memory_limit,
                       run_id=self.run_id, **extra)

    def fused_lines(self, writer: JsonRecordWriter, decoder: EventDecoder,
                    tally: Counter[tuple[str, str]] | None = None) -> FusedLines | None:
        """The fused path's writers for ``decoder``'s records, which count the lines they
        write in ``tally`` (``None`` when :attr:`fused` is off)."""
        if not self.fused:
            return None
        fused = FusedLines(writer, decoder.context_headers)
        fused.tally = tally
        return fused


def default_workers() -> int:
    """The cores this process may use (one means: decode in this process)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _line_type(line: bytes) -> int | None:
    """The message type of a canonical capture line (None otherwise)."""
    head = canonical_head(line, 1)
    return None if head is None else head[0]


def _oid(line: bytes) -> bytes | None:
    """A Relation's or Type's OID, from a canonical line (its bytes)."""
    head = canonical_head(line, 5)
    return None if head is None else head[1:]


def record_label(record: ChangeRecord) -> str:
    """A record's op, or its kind when it has none (``tombstone`` for a null value)."""
    if record.value is None:
        return "tombstone"
    return record.op or record.kind


def _feed_lines(decoder: EventDecoder, lines: Iterable[tuple[int, bytes]],
                writer: JsonRecordWriter, out: Callable[[list[bytes]], object],
                report: Callable[[int, int], None] | None = None,
                tally: Counter[tuple[str, str]] | None = None,
                fused: FusedLines | None = None
                ) -> tuple[int, int, CaptureError | None]:
    """The single decoder's loop: messages and records counted, and the error (naming
    the line) that ended it. The records' lines go to ``out`` as lists of pieces, a few
    hundred records at a time, all of them before the error is returned. ``report`` gets
    the counts every 4,096 messages; ``tally`` counts records by topic and
    :func:`record_label`. With ``fused`` (the same ``writer``'s), an Insert's line is
    written by the fused path (:meth:`EventDecoder.fused_row`) where it applies (``fused``
    then tallies it, if its ``tally`` is set: :meth:`DecodeJob.fused_lines`)."""
    messages = records = 0
    parts: list[bytes] = []
    line_parts = writer.line_parts if tally is None else _tallied(writer.line_parts, tally)
    feed = decoder.iter_feed
    batch = records + _BATCH
    error: CaptureError | None = None
    # the incremental snapshot's window, from the first chunk line on
    chunks: RecordedChunks | None = None
    decoded: Iterable[ChangeRecord]
    try:
        for number, line in lines:
            canonical = read_canonical(line)
            more = 0  # the messages of a COPY block line past its first
            if canonical is None:
                other = _other_line(decoder, chunks, line, number)
                if other is None:
                    continue
                more, chunks, decoded, canonical = other
            try:
                if canonical is not None:
                    # lazily: a big streamed transaction is written as it is read back
                    lsn, data, snapshot = canonical
                    if fused is not None and data[:1] == _INSERT and not snapshot \
                            and chunks is None:
                        got = decoder.fused_row(data, lsn, fused, parts)
                        if got is None:  # its line written (and tallied by fused)
                            records += 1
                            decoded = ()
                        else:
                            decoded = got
                    else:
                        decoded = feed(data, lsn, snapshot=snapshot)
                        if chunks is not None:
                            decoded = _through(chunks, decoded, data, lsn)
                for record in decoded:
                    line_parts(record, parts)
                    records += 1
            except CaptureError:
                raise
            except PgCdcError as exc:
                raise CaptureError(str(exc), line=number) from None
            before, messages = messages, messages + 1 + more
            if records >= batch:
                out(parts)
                parts = []
                batch = records + _BATCH
            if report is not None and messages >> 12 != before >> 12:
                report(messages, records)
    except CaptureError as exc:
        error = exc
    if parts:  # what came before an error is written
        out(parts)
    return messages, records, error


def _tallied(line_parts: Callable[[ChangeRecord, list[bytes]], None],
             tally: Counter[tuple[str, str]]) -> Callable[[ChangeRecord, list[bytes]], None]:
    """``line_parts`` that also counts each record by topic and :func:`record_label`."""

    def counted(record: ChangeRecord, parts: list[bytes]) -> None:
        line_parts(record, parts)
        tally[record.topic, record_label(record)] += 1

    return counted


def _other_line(decoder: EventDecoder, chunks: RecordedChunks | None, line: bytes,
                number: int) -> tuple[int, RecordedChunks | None, Iterable[ChangeRecord],
                                      tuple[Lsn, bytes, bool] | None] | None:
    """A line that is not in the canonical form: a COPY block line or a chunk line (the
    messages past the first, the window, the records: :func:`_special_line`), or a row
    read as :meth:`CaptureRow.from_line` reads it (its LSN, data and snapshot flag);
    ``None`` for a blank line."""
    special = _special_line(decoder, chunks, line, number)
    if special is not None:
        # a COPY block's Inserts, or a read-only window the capture closed here: its r
        # events
        return (*special, None)
    row = _general_row(line, number)
    if row is None:
        return None
    return 0, chunks, (), (row.lsn, row.data, row.snapshot)


def _through(chunks: RecordedChunks, decoded: Iterable[ChangeRecord], data: bytes | memoryview,
             lsn: int) -> Iterable[ChangeRecord]:
    """A message's records through the incremental snapshot's window, if any: a Commit or
    Stream Commit may close a read-only window after them."""
    out: Iterable[ChangeRecord] = chunks.through(decoded)
    if data[:1] in (b"C", b"c"):
        out = itertools.chain(out, chunks.committed(int(lsn)))
    return out


def _special_line(decoder: EventDecoder, chunks: RecordedChunks | None, line: bytes,
                  number: int
                  ) -> tuple[int, RecordedChunks | None, Iterable[ChangeRecord]] | None:
    """A COPY block line (:func:`_block_line`) or a chunk line (:func:`_chunk_line`): the
    messages past the first, the window, the records; ``None`` for any other line."""
    block = _block_line(decoder, chunks, line, number)
    if block is not None:
        return block[0], chunks, block[1]
    window = _chunk_line(decoder, chunks, line, number)
    if window is not None:
        return 0, window[0], window[1]
    return None


def _block_line(decoder: EventDecoder, chunks: RecordedChunks | None, line: bytes,
                number: int) -> tuple[int, Iterable[ChangeRecord]] | None:
    """A COPY block line (an initial snapshot's rows as COPY text) as its Inserts fed in
    order: the count of those past the first, and their records (lazily); ``None`` when
    ``line`` is not a block line."""
    block = read_copy_block(line, line_number=number)
    if block is None:
        return None
    inserts = block.messages(line_number=number)
    feed, lsn = decoder.iter_feed, block.lsn
    decoded: Iterable[ChangeRecord] = itertools.chain.from_iterable(
        feed(insert, lsn, snapshot=True) for insert in inserts)
    if chunks is not None:
        decoded = chunks.through(decoded)
    return len(inserts) - 1, decoded


def _chunk_line(decoder: EventDecoder, chunks: RecordedChunks | None, line: bytes,
                number: int) -> tuple[RecordedChunks, list[ChangeRecord]] | None:
    """An incremental snapshot's chunk line given to the window (``chunks``, made at the
    first one) that replays it, and the records it makes there; ``None`` when ``line``
    is not a chunk line."""
    chunk = read_chunk_line(line, line_number=number)
    if chunk is None:
        return None
    if chunks is None:
        # the first chunk line: the incremental-snapshot modules load only for a capture
        # that has one (tests/cli/test_decode_startup.py)
        from pgcdc_events.events.incremental import RecordedChunks  # noqa: PLC0415
        chunks = RecordedChunks(decoder)
    try:
        made = chunks.chunk(chunk.chunk, where=f"line {number}")
    except PgCdcError as exc:
        raise CaptureError(str(exc), line=number) from None
    return chunks, made


def _general_row(line: bytes, number: int) -> CaptureRow | None:
    """A line that is not in the canonical form: read as :meth:`CaptureRow.from_line`
    reads it (None for a blank line), errors naming the line."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CaptureError("not valid JSON", line=number, detail=f"not UTF-8: {exc}") from None
    if not text.strip():
        return None
    return CaptureRow.from_line(text, line_number=number)


def _line_row(line: bytes) -> Row:
    """A capture line the planner kept, as a prelude row: its LSN and message bytes."""
    canonical = read_canonical(line)
    if canonical is not None:
        return int(canonical[0]), bytes(canonical[1])
    row = CaptureRow.from_line(line)
    return int(row.lsn), bytes(row.data)


#: A chunk's output: the file holding its lines and their size, messages and records,
#: the error that ended it, its tally.
_Result = tuple[str, int, int, int, "CaptureError | None", "Counter[tuple[str, str]] | None"]


# -- the worker side: one decoder and writer per process, kept from chunk to chunk -------
class _Worker:
    def __init__(self, job: DecodeJob, spool: str, place: _InPlace | None) -> None:
        self.job = job
        self.spool = spool
        self.place = place
        self.decoder = job.decoder()
        self.writer = JsonRecordWriter.for_config(job.config)
        self.fused = job.fused_lines(self.writer, self.decoder)
        self.fed: dict[bytes, bytes] = {}  # the schema messages this decoder holds (prime)

    def run(self, prelude: Prelude, first: int, lines: list[bytes], tally: bool, turn: int
            ) -> _Result:
        prime(self.decoder, prelude, self.fed)
        counts: Counter[tuple[str, str]] | None = Counter() if tally else None
        if self.fused is not None:
            self.fused.tally = counts
        path = os.path.join(self.spool, f"{first}.jsonl")
        written = None
        if self.place is not None:
            # the chunk's lines go into the output itself, at the chunk's place, if its
            # turn has come (else to a file, as below)
            parts: list[bytes] = []
            started = time.monotonic()
            messages, records, error = _feed_lines(self.decoder, enumerate(lines, first),
                                                   self.writer, parts.extend, tally=counts,
                                                   fused=self.fused)
            # waiting longer than a quarter of the chunk's decoding costs more than the
            # copy it saves
            written = self.place.write(turn, parts, failed=error is not None,
                                       patience=(time.monotonic() - started) / 4)
            if written is None:
                with _Spool(path) as spool:
                    spool.write(parts)
                size = spool.size
            else:
                path, size = "", written
        else:
            # the chunk's lines go to a file of this run's private directory, never to a
            # pipe
            with _Spool(path) as spool:
                messages, records, error = _feed_lines(self.decoder, enumerate(lines, first),
                                                       self.writer, spool.write, tally=counts,
                                                       fused=self.fused)
            size = spool.size
        if error is not None:  # what was written before the error is kept
            return path, size, 0, records, error, counts
        row_change = ROW_CHANGE_HEAD
        for line in lines:  # the chunk's own Relations and Types are now this decoder's
            if row_change(line) is None and _line_type(line) in (_RELATION, _TYPE):
                data = _line_row(line)[1]
                self.fed[data[:5]] = data
        return path, size, messages, records, None, counts


class _InPlace:
    """Where the workers write their chunks' lines when the output is a regular file
    (not opened for appending) and they are forked: into the output itself, each chunk
    at its place, by ``pwritev`` on the descriptor they inherit. Chunks are written in
    turns, in the order they were cut, each after the one before it: the output is a
    prefix of the whole at every moment, never holds a hole. A worker whose chunk's turn
    has not come waits for it a while (the chunk before it is usually being written,
    or nearly decoded), then writes the chunk to a file of its own, which the parent
    copies in its turn (:meth:`copy`), as every chunk was before (a copy that cost the
    parent as much system time as the workers spent writing): a worker whose predecessor
    was held up (a busy machine) goes on with its next chunk. After a chunk that ended in
    an error, or a write that failed, the chunks after it write nothing."""

    def __init__(self, context: Any, fd: int, start: int) -> None:
        self.fd = fd
        self.cond = context.Condition()
        #: The next chunk to write, where it goes, and whether writing has stopped.
        self.turn = context.RawValue("q", 0)
        self.offset = context.RawValue("q", start)
        self.failed = context.RawValue("b", 0)

    def write(self, turn: int, parts: list[bytes], *, failed: bool, patience: float
              ) -> int | None:
        """Write chunk ``turn``'s pieces when its turn comes, within ``patience`` seconds
        (``failed``: it ended in an error, and the chunks after it write nothing): the
        size written; ``None`` when its turn has not come by then."""
        with self.cond:
            if not self.cond.wait_for(lambda: self.turn.value == turn, patience):
                return None
            return self._take_turn(lambda offset: _pwritev_all(self.fd, parts, offset),
                                   failed)

    def copy(self, path: str, size: int, *, failed: bool, alive: Callable[[], bool]) -> None:
        """The parent's turn for a chunk written to the file at ``path`` (``size`` bytes):
        copied into the output (every chunk before it is written). ``alive`` says whether
        every worker still runs: one killed in the instant it held the lock would leave it
        held, and the parent waiting for ever."""
        while not self.cond.acquire(timeout=1.0):
            if not alive():
                raise BrokenProcessPool("a decode worker process ended while it held the "
                                        "output's turn")
        try:
            self._take_turn(lambda offset: _copy_at(path, size, self.fd, offset), failed)
        finally:
            self.cond.release()

    def _take_turn(self, write: Callable[[int], int], failed: bool) -> int:
        try:
            size = 0
            if not self.failed.value:
                size = write(self.offset.value)
                self.offset.value += size
            if failed:
                self.failed.value = 1
        except BaseException:
            self.failed.value = 1
            raise
        finally:
            self.turn.value += 1
            self.cond.notify_all()
        return size

    def parent_write(self, parts: list[bytes]) -> None:
        """The parent's own lines (no chunk is being decoded): at the end of the output."""
        size = _pwritev_all(self.fd, parts, self.offset.value)
        self.offset.value += size


def _copy_at(path: str, size: int, fd: int, offset: int) -> int:
    """Copy the file at ``path`` (``size`` bytes) into ``fd`` at ``offset``, in the kernel
    where it can (``copy_file_range``), and delete it; the size."""
    src = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.unlink(path)
        done = 0
        kernel = True
        while done < size:
            copied = 0
            if kernel:
                try:
                    copied = os.copy_file_range(src, fd, size - done, done, offset + done)
                except OSError as exc:
                    if exc.errno not in _UNSUPPORTED:
                        raise
                kernel = copied > 0
            if not copied:
                block = os.pread(src, min(size - done, 1 << 20), done)
                if not block:
                    raise OSError(f"{path}: {size - done} bytes missing")
                copied = _pwritev_all(fd, [block], offset + done)
            done += copied
    finally:
        os.close(src)
    return size


def _pwritev_all(fd: int, parts: list[bytes], offset: int) -> int:
    """:func:`_writev_all` at ``offset`` (the descriptor's position neither used nor
    moved); the size."""
    size = 0
    for at in range(0, len(parts), _IOV_MAX):
        batch = parts[at:at + _IOV_MAX]
        total = sum(map(len, batch))
        written = os.pwritev(fd, batch, offset + size)
        if written < total:  # a short write (a signal): the rest, whole
            view = memoryview(b"".join(batch))[written:]
            done = written
            while view:
                n = os.pwrite(fd, view, offset + size + done)
                view = view[n:]
                done += n
        size += total
    return size


class _Spool:
    """A new file, 0600, written from lists of pieces; counts its bytes."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        self.size = 0

    def write(self, parts: list[bytes]) -> None:
        self.size += _writev_all(self.fd, parts)

    def __enter__(self) -> _Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def _writev_all(fd: int, parts: list[bytes]) -> int:
    """Write the pieces in order, as few system calls as the kernel takes (no joined
    copy: a record's schema bytes go from the writer's cache to the kernel); the size."""
    size = 0
    for at in range(0, len(parts), _IOV_MAX):
        batch = parts[at:at + _IOV_MAX]
        total = sum(map(len, batch))
        written = os.writev(fd, batch)
        if written < total:  # a short write (a pipe, a signal): the rest, whole
            view = memoryview(b"".join(batch))[written:]
            while view:
                view = view[os.write(fd, view):]
        size += total
    return size


#: Pieces to one writev (the kernel's IOV_MAX).
_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024


_WORKER: _Worker | None = None
#: Whether a fork of this process is one of a pool's workers (while a pool is open), and
#: whether :func:`_quiet_signals` is registered to run in forked children.
_POOL_OPEN = _AT_FORK = False


def _worker_forked() -> None:
    if _POOL_OPEN:
        _quiet_signals()


def _quiet_signals() -> None:
    # Ctrl-C reaches the whole process group: the parent stops the workers and removes
    # their files, and a worker has no traceback to print. Set in the child as soon as it
    # is forked: a signal that came before the pool's initializer ran printed one.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler, if it has one


def _init(job: DecodeJob, spool: str, place: _InPlace | None) -> None:
    global _WORKER  # noqa: PLW0603 - one decoder per worker process
    _quiet_signals()  # again, for the spawn start method
    _WORKER = _Worker(job, spool, place)


def _work(task: tuple[Prelude, int, list[bytes], bool, int]) -> _Result:
    assert _WORKER is not None
    return _WORKER.run(*task)


class _Output:
    """The output: lines written from pieces, and chunks' files copied in by the kernel
    (``copy_file_range``, else ``sendfile``, else read and write)."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        try:
            self.fd = out.fileno()
        except (AttributeError, OSError, ValueError):  # an in-memory stream
            self.fd = -1
        self.copies = [_copy_file_range, _sendfile] if self.fd >= 0 else []
        #: Set when the workers write into the output themselves (:meth:`in_place`).
        self.place: _InPlace | None = None
        #: Chunks a worker wrote into the output itself, and chunks copied from files.
        self.chunks_in_place = self.chunks_copied = 0

    def in_place(self, context: Any) -> _InPlace | None:
        """Let forked workers write into the output at their chunks' places, when it is a
        regular file not opened for appending (``pwrite`` there ignores the offset): from
        the output's position now. ``None`` otherwise (the chunks' files are copied)."""
        if self.fd < 0 or context.get_start_method() != "fork":
            return None
        import fcntl  # noqa: PLC0415 - where there is fork, there is fcntl

        try:
            mode = os.fstat(self.fd).st_mode
            appending = fcntl.fcntl(self.fd, fcntl.F_GETFL) & os.O_APPEND
        except OSError:
            return None
        if not stat.S_ISREG(mode) or appending:
            return None
        self.out.flush()
        self.place = _InPlace(context, self.fd, os.lseek(self.fd, 0, os.SEEK_CUR))
        return self.place

    def finish(self) -> None:
        """The output's position at its end, after writes at offsets."""
        if self.place is not None:
            os.lseek(self.fd, self.place.offset.value, os.SEEK_SET)

    def write(self, parts: list[bytes]) -> None:
        if self.place is not None:  # no chunk is being written: at the end, as the workers
            self.place.parent_write(parts)
        elif self.fd >= 0:  # a file descriptor: the pieces as they are
            self.out.flush()
            _writev_all(self.fd, parts)
        else:
            self.out.write(b"".join(parts))

    def splice(self, path: str, size: int, *, failed: bool = False,
               alive: Callable[[], bool] = lambda: True) -> None:
        """Append the ``size`` bytes of the file at ``path``, then delete it (``failed``:
        the chunk ended in an error: the chunks after it write nothing; ``alive``: whether
        every worker still runs)."""
        if self.place is not None:
            self.place.copy(path, size, failed=failed, alive=alive)
            return
        src = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.unlink(path)
            done = 0
            if self.copies:
                self.out.flush()
            while self.copies and done < size:
                try:
                    copied = self.copies[0](src, self.fd, size - done, done)
                except OSError as exc:
                    if exc.errno not in _UNSUPPORTED:
                        raise
                    copied = 0
                if not copied:  # not between these files: the next way, for good
                    del self.copies[0]
                done += copied
            while done < size:
                block = os.pread(src, min(size - done, 1 << 20), done)
                if not block:
                    raise OSError(f"{path}: {size - done} bytes missing")
                self.out.write(block)
                done += len(block)
        finally:
            os.close(src)


#: What copy_file_range and sendfile fail with where they cannot copy between two files.
_UNSUPPORTED = frozenset({errno.EXDEV, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOSYS,
                          errno.EBADF, errno.ENOTSUP})


def _copy_file_range(src: int, dst: int, count: int, offset: int) -> int:
    """Up to ``count`` bytes of ``src`` from ``offset`` to ``dst``'s position; how many."""
    return os.copy_file_range(src, dst, count, offset)


def _sendfile(src: int, dst: int, count: int, offset: int) -> int:
    """As :func:`_copy_file_range`, by ``sendfile`` (which a pipe takes)."""
    return os.sendfile(dst, src, offset, count)


class _Splitter:
    """Cuts the capture into chunks of whole transactions and keeps the prelude."""

    def __init__(self, job: DecodeJob, out: _Output, workers: int,
                 report: Callable[[int, int], None], tally: Counter[tuple[str, str]] | None,
                 chunk_lines: int, big_lines: int) -> None:
        self.job, self.out, self.workers, self.report = job, out, workers, report
        self.tally = tally
        self.chunk_lines, self.big_lines = chunk_lines, big_lines
        self.writer = JsonRecordWriter.for_config(job.config)
        self.messages = self.records = 0
        # where a chunk may end (positions: line numbers), and the prelude after it
        self.planner: CutPlanner[bytes] = CutPlanner(chunk_lines, start=0)
        self.chunk: list[bytes] = []
        self.chunk_first = 1
        self.chunk_prelude = Prelude()
        self.pending: deque[Future[_Result]] = deque()
        self.pool: ProcessPoolExecutor | None = None
        self.spool: str | None = None
        self.turns = 0  # the chunks sent: the next one's turn to be written
        #: The lines ``run`` passed to a chunk as Inserts, Updates and Deletes by
        #: ``ROW_CHANGE_HEAD`` alone (its fast path), for the tests.
        self.row_lines = 0

    def alive(self) -> bool:
        """Whether every worker process still runs."""
        processes: dict[int, Any] = getattr(self.pool, "_processes", None) or {}
        return all(process.is_alive() for process in processes.values())

    def add(self, messages: int, records: int) -> None:
        self.messages += messages
        self.records += records
        self.report(self.messages, self.records)

    def drain(self, keep: int) -> None:
        while len(self.pending) > keep:
            path, size, messages, records, error, counts = self.pending.popleft().result()
            if path:
                self.out.splice(path, size, failed=error is not None, alive=self.alive)
                self.out.chunks_copied += 1
            else:  # the worker wrote the chunk into the output itself
                self.out.chunks_in_place += 1
            self.add(messages, records)
            if self.tally is not None and counts:
                self.tally.update(counts)
            if error is not None:
                raise error

    def send(self) -> None:
        if self.pool is None:
            global _AT_FORK, _POOL_OPEN  # noqa: PLW0603 - once a process; while a pool is open
            fork = "fork" in multiprocessing.get_all_start_methods()
            if fork and not _AT_FORK:
                os.register_at_fork(after_in_child=_worker_forked)
                _AT_FORK = True
            _POOL_OPEN = True
            context = multiprocessing.get_context("fork" if fork else "spawn")
            self.spool = tempfile.mkdtemp(prefix="pgcdc-decode-")  # 0700, this run's only
            # an executor, not a multiprocessing.Pool: a worker that dies (SIGTERM to the
            # process group) breaks it, where Pool.terminate can wait forever on a lock
            # the dead worker held
            place = self.out.in_place(context)
            self.pool = ProcessPoolExecutor(self.workers, mp_context=context,
                                            initializer=_init,
                                            initargs=(self.job, self.spool, place))
        task = (self.chunk_prelude, self.chunk_first, self.chunk, self.tally is not None,
                self.turns)
        self.turns += 1
        self.pending.append(self.pool.submit(_work, task))
        self.chunk = []
        self.drain(2 * self.workers)

    def here(self, lines: Iterable[tuple[int, bytes]]) -> None:
        """The chunk so far, then ``lines``, in this process after every chunk sent."""
        self.drain(0)
        decoder = prime(self.job.decoder(), self.chunk_prelude, {})
        messages, records, error = _feed_lines(
            decoder, itertools.chain(enumerate(self.chunk, self.chunk_first), lines),
            self.writer, self.out.write, tally=self.tally,
            fused=self.job.fused_lines(self.writer, decoder, self.tally))
        self.add(messages, records)
        if error is not None:
            raise error
        self.chunk = []

    def note(self, number: int, kind: int | None, line: bytes) -> bool:
        """Feed the planner a line it needs; True when the chunk may end after it."""
        if kind not in _PLANNED:
            return False
        assert kind is not None
        return self.planner.feed(number, kind, line,
                                 oid=_oid(line) if kind in (_RELATION, _TYPE) else None,
                                 snapshot=_SNAPSHOT in line)

    def run(self, numbered: Iterator[tuple[int, bytes]]) -> None:
        tx_lines = 0
        row_change = ROW_CHANGE_HEAD
        for number, line in numbered:
            if not self.chunk:
                self.chunk_first = number
                self.chunk_prelude = self.planner.prelude(_line_row)
            if row_change(line) is not None and _SNAPSHOT not in line:
                # most lines: a canonical Insert, Update or Delete, which the planner does
                # not need (its type told by one match, not read from the hex)
                self.chunk.append(line)
                self.row_lines += 1
            else:
                kind = _line_type(line)
                if _SNAPSHOT in line:
                    # an initial snapshot's block (one marker sequence): here, up to its
                    # Commit
                    self.note(number, kind, line)
                    tail: list[int] = []
                    self.here(_chain((number, line), self._until_commit(numbered, tail)))
                    if not tail:
                        return
                    self.planner.cut(tail[0])
                    continue
                if kind not in _PLAIN:
                    if not line.strip():
                        self.chunk.append(line)
                        continue
                    # streamed or two-phase, or not canonical: the rest in this process
                    self.here(_chain((number, line), numbered))
                    return
                self.chunk.append(line)
                if self.note(number, kind, line):
                    self.send()
                if kind == _BEGIN:
                    tx_lines = 0
            if self.planner.resolver.current is not None:  # inside a transaction
                tx_lines += 1
                if tx_lines > self.big_lines:
                    # one big transaction: here, with the memory limit, up to its Commit
                    tail = []
                    self.here(self._until_commit(numbered, tail))
                    if not tail:  # the capture ended, or the rest went here
                        return
                    self.planner.cut(tail[0])
        if self.chunk:
            if self.pool is None:
                self.here(())
            else:
                self.send()
        self.drain(0)

    def _until_commit(self, numbered: Iterator[tuple[int, bytes]], tail: list[int]
                      ) -> Iterator[tuple[int, bytes]]:
        """Lines up to the open transaction's Commit (its line number put in ``tail``); the
        rest of the capture when a message the prelude cannot carry comes first."""
        for number, line in numbered:
            kind = _line_type(line)
            self.note(number, kind, line)
            yield number, line
            if kind == _COMMIT:
                tail.append(number)
                return
            if kind not in _PLAIN and line.strip():
                yield from numbered
                return

    def close(self, *, stop: bool = False) -> None:
        """End the workers and remove their files. After a complete run the chunks being
        decoded end (a moment) and the rest never start; with ``stop`` (Ctrl-C, SIGTERM, an
        error) nothing they would write is wanted: they are stopped at once, not awaited."""
        if self.pool is not None:
            if stop:
                # the executor's own processes (it has no public way to stop them before
                # Python 3.14's terminate_workers): a stopped worker breaks the pool, whose
                # shutdown then has nothing to wait for
                processes: dict[int, Any] = getattr(self.pool, "_processes", None) or {}
                for process in list(processes.values()):
                    process.kill()  # what they hold is theirs alone: their chunk files
            self.pool.shutdown(wait=True, cancel_futures=True)
        global _POOL_OPEN  # noqa: PLW0603 - the pool's workers are all forked
        _POOL_OPEN = False
        if self.spool is not None:
            shutil.rmtree(self.spool, ignore_errors=True)


class WorkerLostError(PgCdcError):
    """A decoding process of ``decode --workers`` ended (killed by a signal, the kernel's
    out-of-memory killer...) before its chunk was written."""


def run_decode(job: DecodeJob, src: Iterable[bytes], out: IO[bytes], *, workers: int,
               report: Callable[[int, int], None] = lambda m, r: None,
               tally: Counter[tuple[str, str]] | None = None,
               chunk_lines: int = 4000, big_lines: int = 50_000) -> tuple[int, int]:
    """Decode capture lines from ``src`` (bytes, as a binary file gives them) into the
    binary ``out`` (UTF-8 lines); returns (messages, records).

    ``workers`` above one decodes whole transactions in that many processes; the output
    is the same as with one, byte for byte. ``report(messages, records)`` is called
    as they are written; ``tally`` counts records by topic and :func:`record_label`.
    """
    numbered: Iterator[tuple[int, bytes]] = enumerate(src, 1)
    output = _Output(out)
    if workers <= 1:
        writer = JsonRecordWriter.for_config(job.config)
        decoder = job.decoder()
        messages, records, error = _feed_lines(decoder, numbered, writer, output.write,
                                               report, tally,
                                               job.fused_lines(writer, decoder, tally))
        report(messages, records)
        if error is not None:
            raise error
        return messages, records
    splitter = _Splitter(job, output, workers, report, tally, chunk_lines, big_lines)
    try:
        splitter.run(numbered)
    except BrokenProcessPool as exc:
        splitter.close(stop=True)
        raise WorkerLostError(
            f"a decoding process ended before its work was done ({exc}; killed, or out of "
            "memory?): the output holds the records before its chunk, its last line perhaps "
            "cut; decode again, or with --workers 1") from None
    except BaseException:
        splitter.close(stop=True)
        raise
    finally:
        output.finish()
    splitter.close()
    return splitter.messages, splitter.records


def _chain(first: tuple[int, bytes], rest: Iterator[tuple[int, bytes]]
           ) -> Iterator[tuple[int, bytes]]:
    yield first
    yield from rest
