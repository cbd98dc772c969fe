"""Decoding a capture on several cores, with output identical to one decoder's.

The capture is cut into chunks of whole transactions. Each chunk goes to a worker
process with a *prelude*: the latest Relation and Type message of every OID seen
before the chunk, the Begin and Commit of the last complete transaction, and the last
non-transactional message after it (which Debezium counts as a commit). A fresh
:class:`~pgcdc_events.events.EventDecoder` fed the prelude (its records dropped) holds
exactly the state the single decoder held at the chunk's start: table schemas, the
last commit LSN (``source.sequence``) and the last Begin. The worker writes the chunk's
JsonConverter lines; the parent writes the chunks in order.

What the prelude cannot carry is decoded in the parent, by one primed decoder, as
before: streamed and two-phase transactions (from the first such message to the end
of the capture), a transaction longer than ``big_lines`` (until its Commit, with
the memory limit of a single decoder), and an initial snapshot's block (until its
Commit: its markers need one decoder to see every row). A line that is not in the canonical capture
form also ends the parallel part, so that its error is the single decoder's.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.pool import AsyncResult, Pool
from typing import IO, Any

import attrs

from pgcdc_events.errors import PgCdcError
from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.events.yugabyte import make_decoder
from pgcdc_events.protocol import CaptureError, CaptureRow, wire
from pgcdc_events.types.catalog import CatalogSnapshot

__all__ = ["DecodeJob", "default_workers", "record_label", "run_decode"]

_DATA = '"data": "'
# The type bytes of messages whose state a prelude carries, as the hex in capture lines.
_PLAIN = frozenset(t.hex() for t in (wire.BEGIN, wire.COMMIT, wire.INSERT, wire.UPDATE,
                                      wire.DELETE, wire.TRUNCATE, wire.ORIGIN, wire.MESSAGE,
                                      wire.RELATION, wire.TYPE))
_BEGIN, _COMMIT, _RELATION, _TYPE = (t.hex() for t in (wire.BEGIN, wire.COMMIT,
                                                       wire.RELATION, wire.TYPE))
#: What marks the lines of an initial snapshot (protocol.capture).
_SNAPSHOT = '"snapshot": true'


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

    def decoder(self) -> EventDecoder:
        """A new decoder for this run (the same run id everywhere; the YugabyteDB
        connector's under ``plugin.name=yboutput``)."""
        extra: dict[str, Any] = {} if self.clock is None else {"clock": self.clock}
        return make_decoder(self.config, catalog=self.catalog, proto_version=self.proto_version,
                            streaming=self.streaming, memory_limit=self.memory_limit,
                            run_id=self.run_id, **extra)


def default_workers() -> int:
    """The cores this process may use (one means: decode in this process)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _line_type(line: str) -> str | None:
    """The message type of a canonical capture line, as two hex digits (None otherwise)."""
    at = line.find(_DATA)
    if at < 0 or not line.startswith('{"lsn": "'):
        return None
    return line[at + 9:at + 11]


def _oid(line: str) -> str:
    at = line.find(_DATA) + 9
    return line[at + 2:at + 10]


def record_label(record: ChangeRecord) -> str:
    """A record's op, or its kind when it has none (``tombstone`` for a null value)."""
    if record.value is None:
        return "tombstone"
    return record.op or record.kind


def _feed_lines(decoder: EventDecoder, lines: Iterable[tuple[int, str]],
                render: Callable[[Any], str], emit: Callable[[str], object],
                report: Callable[[int, int], None] | None = None,
                tally: Counter[tuple[str, str]] | None = None) -> tuple[int, int]:
    """The single decoder's loop: messages and records counted; errors name the line.
    ``report`` gets the counts every 4,096 messages; ``tally`` counts records by topic
    and :func:`record_label`."""
    messages = records = 0
    for number, line in lines:
        if not line.strip():
            continue
        row = CaptureRow.from_line(line, line_number=number)
        try:
            # lazily: a big streamed transaction is written as it is read back
            for record in decoder.iter_feed(row.data, row.lsn, snapshot=row.snapshot):
                emit(render(record) + "\n")
                records += 1
                if tally is not None:
                    tally[record.topic, record_label(record)] += 1
        except CaptureError:
            raise
        except PgCdcError as exc:
            raise CaptureError(str(exc), line=number) from None
        messages += 1
        if report is not None and not messages & 4095:
            report(messages, records)
    return messages, records


def _prime(decoder: EventDecoder, prelude: Iterable[str]) -> EventDecoder:
    """Feed prelude lines, dropping their records."""
    for line in prelude:
        row = CaptureRow.from_line(line)
        for _ in decoder.iter_feed(row.data, row.lsn, snapshot=row.snapshot):
            pass
    return decoder


#: A chunk's output: its text, messages and records, the error that ended it, its tally.
_Result = tuple[str, int, int, "CaptureError | None", "Counter[tuple[str, str]] | None"]


# -- the worker side: one decoder and writer per process, kept from chunk to chunk -------
class _Worker:
    def __init__(self, job: DecodeJob) -> None:
        self.job = job
        self.decoder = job.decoder()
        self.render = JsonRecordWriter.for_config(job.config).record_line
        self.fed: dict[str, str] = {}  # the Relation/Type line this decoder last had, by OID

    def run(self, prelude: list[str], first: int, lines: list[str], tally: bool) -> _Result:
        changed = []
        for line in prelude:
            kind = _line_type(line)
            if kind in (_RELATION, _TYPE):
                key = f"{kind}{_oid(line)}"
                if self.fed.get(key) == line:
                    continue
                self.fed[key] = line
            changed.append(line)
        _prime(self.decoder, changed)
        parts: list[str] = []
        counts: Counter[tuple[str, str]] | None = Counter() if tally else None
        try:
            messages, records = _feed_lines(self.decoder, enumerate(lines, first), self.render,
                                            parts.append, tally=counts)
        except CaptureError as exc:  # what was written before the error is kept
            return "".join(parts), 0, len(parts), exc, counts
        for line in lines:  # the chunk's own Relations and Types are now this decoder's
            kind = _line_type(line)
            if kind in (_RELATION, _TYPE):
                self.fed[f"{kind}{_oid(line)}"] = line
        return "".join(parts), messages, records, None, counts


_WORKER: _Worker | None = None


def _init(job: DecodeJob) -> None:
    global _WORKER  # noqa: PLW0603 - one decoder per worker process
    _WORKER = _Worker(job)


def _work(task: tuple[list[str], int, list[str], bool]) -> _Result:
    assert _WORKER is not None
    return _WORKER.run(*task)


class _Splitter:
    """Cuts the capture into chunks of whole transactions and keeps the prelude."""

    def __init__(self, job: DecodeJob, out: IO[str], workers: int,
                 report: Callable[[int, int], None], tally: Counter[tuple[str, str]] | None,
                 chunk_lines: int, big_lines: int) -> None:
        self.job, self.out, self.workers, self.report = job, out, workers, report
        self.tally = tally
        self.chunk_lines, self.big_lines = chunk_lines, big_lines
        self.render = JsonRecordWriter.for_config(job.config).record_line
        self.messages = self.records = 0
        self.relations: dict[str, str] = {}
        self.types: dict[str, str] = {}
        # What the last commit LSN (source.sequence) and the last Begin come from: the Begin
        # and Commit of the last complete transaction, and a non-transactional message after it
        self.last_tx: list[str] = []
        self.chunk: list[str] = []
        self.chunk_first = 1
        self.chunk_prelude: list[str] = []
        self.pending: deque[AsyncResult[_Result]] = deque()
        self.pool: Pool | None = None

    def add(self, messages: int, records: int) -> None:
        self.messages += messages
        self.records += records
        self.report(self.messages, self.records)

    def drain(self, keep: int) -> None:
        while len(self.pending) > keep:
            text, messages, records, error, counts = self.pending.popleft().get()
            self.out.write(text)
            self.add(messages, records)
            if self.tally is not None and counts:
                self.tally.update(counts)
            if error is not None:
                raise error

    def send(self) -> None:
        if self.pool is None:
            context = multiprocessing.get_context(
                "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
            self.pool = context.Pool(self.workers, initializer=_init, initargs=(self.job,))
        task = (self.chunk_prelude, self.chunk_first, self.chunk, self.tally is not None)
        self.pending.append(self.pool.apply_async(_work, (task,)))
        self.chunk = []
        self.drain(2 * self.workers)

    def here(self, lines: Iterable[tuple[int, str]]) -> None:
        """The chunk so far, then ``lines``, in this process after every chunk sent."""
        self.drain(0)
        decoder = _prime(self.job.decoder(), self.chunk_prelude)
        self.add(*_feed_lines(decoder, [*enumerate(self.chunk, self.chunk_first), *lines],
                              self.render, self.out.write, tally=self.tally))
        self.chunk = []

    def note(self, kind: str | None, line: str) -> None:
        if kind == _RELATION:
            self.relations[_oid(line)] = line
        elif kind == _TYPE:
            self.types[_oid(line)] = line

    def run(self, numbered: Iterator[tuple[int, str]]) -> None:
        begin: str | None = None
        tx_lines = 0
        for number, line in numbered:
            if not self.chunk:
                self.chunk_first = number
                self.chunk_prelude = [*self.types.values(), *self.relations.values(),
                                      *self.last_tx]
            kind = _line_type(line)
            if _SNAPSHOT in line:
                # an initial snapshot's block (one marker sequence): here, up to its Commit
                tail: list[str] = []
                self.here(_chain((number, line), self._until_commit(numbered, tail)))
                if not tail:
                    return
                continue
            if kind not in _PLAIN:
                if not line.strip():
                    self.chunk.append(line)
                    continue
                # streamed or two-phase, or not canonical: the rest in this process
                self.here(_chain((number, line), numbered))
                return
            self.chunk.append(line)
            self.note(kind, line)
            if kind == _BEGIN:
                begin, tx_lines = line, 0
            elif kind == _COMMIT:
                if begin is not None:
                    self.last_tx = [begin, line]
                begin = None
                if len(self.chunk) >= self.chunk_lines:
                    self.send()
            elif kind == "4d" and begin is None:  # non-transactional: its own transaction
                self.last_tx = [*self.last_tx[:2], line]
                if len(self.chunk) >= self.chunk_lines:
                    self.send()
            if begin is not None:
                tx_lines += 1
                if tx_lines > self.big_lines:
                    # one big transaction: here, with the memory limit, up to its Commit
                    tail = []
                    self.here(self._until_commit(numbered, tail))
                    if not tail:  # the capture ended, or the rest went here
                        return
                    self.last_tx, begin = [begin, tail[0]], None
        if self.chunk:
            if self.pool is None:
                self.here(())
            else:
                self.send()
        self.drain(0)

    def _until_commit(self, numbered: Iterator[tuple[int, str]], tail: list[str]
                      ) -> Iterator[tuple[int, str]]:
        """Lines up to the open transaction's Commit (put in ``tail``); the rest of the
        capture when a message the prelude cannot carry comes first."""
        for number, line in numbered:
            kind = _line_type(line)
            self.note(kind, line)
            yield number, line
            if kind == _COMMIT:
                tail.append(line)
                return
            if kind not in _PLAIN and line.strip():
                yield from numbered
                return

    def close(self) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()


def run_decode(job: DecodeJob, src: Iterable[str], out: IO[str], *, workers: int,
               report: Callable[[int, int], None] = lambda m, r: None,
               tally: Counter[tuple[str, str]] | None = None,
               chunk_lines: int = 4000, big_lines: int = 50_000) -> tuple[int, int]:
    """Decode capture lines from ``src`` into ``out``; returns (messages, records).

    ``workers`` above one decodes whole transactions in that many processes; the output
    is the same as with one, record for record. ``report(messages, records)`` is called
    as they are written; ``tally`` counts records by topic and :func:`record_label`.
    """
    numbered: Iterator[tuple[int, str]] = enumerate(src, 1)
    if workers <= 1:
        render = JsonRecordWriter.for_config(job.config).record_line
        messages, records = _feed_lines(job.decoder(), numbered, render, out.write, report,
                                        tally)
        report(messages, records)
        return messages, records
    splitter = _Splitter(job, out, workers, report, tally, chunk_lines, big_lines)
    try:
        splitter.run(numbered)
    finally:
        splitter.close()
    return splitter.messages, splitter.records


def _chain(first: tuple[int, str], rest: Iterator[tuple[int, str]]
           ) -> Iterator[tuple[int, str]]:
    yield first
    yield from rest
