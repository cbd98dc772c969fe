"""Structured Streaming: a live capture decoded micro-batch by micro-batch, exactly once.

:func:`decode_stream` takes a *streaming* DataFrame of capture rows (the rotating files
of ``pgcdc-events capture --rotate-every``, read by :func:`read_capture_stream`, or the
Kafka layout of docs/spark.md) and starts one query whose ``foreachBatch`` function
decodes each micro-batch as :func:`~pgcdc_events.spark.decode.decode_capture` decodes a
capture at rest: the driver collects the batch's control messages (one small job) and
plans its chunks (:func:`plan_batch`), Spark tasks decode the chunks with the batch
layer's task function (:class:`~pgcdc_events.spark.decode.RecordsFunction`: the records
are :class:`~pgcdc_events.events.EventDecoder`'s), and each table's changes are applied
to its targets (:meth:`DecodedStream.apply`: ``DeltaTarget``, ``ParquetTarget`` and
``PostgresTarget`` get the table's flattened changes, made in the tasks with no event built
for a column-wise run; any other ``foreachBatch`` function the table's events) in the same
function. When every target takes one table's changes and no records are written, the
tasks decode each micro-batch straight to that table's changes
(:class:`~pgcdc_events.spark.decode.TableChangesFunction`, one pass, no records rows:
:meth:`DecodedStream.single_table`). Only with a ``path``, the records
(:data:`~pgcdc_events.spark.decode.RECORDS_TYPE`) are also written as one Parquet file per
batch, and :class:`DecodedStream` gives streaming DataFrames over
them: :attr:`~DecodedStream.records`, and each table's Debezium events
(:meth:`~DecodedStream.table`, shaped by the catalog's schema).

What a stream carries from one micro-batch to the next (:class:`StreamState`) is what
:mod:`pgcdc_events.events.chunks` needs to start decoding anywhere: the Relation and Type
messages in force, the Begin and Commit of the last transaction decoded (the
:class:`~pgcdc_events.protocol.transactions.Prelude` at the last cut), and the rows after
it that cannot be decoded yet (a transaction not yet whole in the batches seen: a
streamed or prepared one still open, or one cut by the batch's end). Each batch decodes
the state's rows and its own up to the last commit where nothing is open, and keeps the
rest; only those rows come to the driver. With a ``segment`` column (the rotating files'
sequence numbers), segments are decoded in order: a file that arrives before one it
follows (so possibly before the Relation its changes need) is held until the gap is
filled (segments are numbered from 0).

The state lives under the query's checkpoint location (``_decoder/state-<batch>.json``),
written atomically after the batch's targets and records file; a batch Spark replays
after a failure finds its state written and is skipped, or (a crash before the state was
written) is decoded again from the previous state: the targets skip a batch id they
recorded, the records file already there is kept. :func:`decode_rows` runs the same steps
in one process (tests, and what the query does, without Spark).
"""

from __future__ import annotations

import bisect
import contextlib
import copy
import json
import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final, Protocol

import attrs
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    IntegralType,
    LongType,
    StringType,
    StructField,
    StructType,
)
from pyspark.util import inheritable_thread_target

from pgcdc_events.errors import PgCdcError
from pgcdc_events.events.chunks import (
    CONTROL_TYPES,
    ChunkError,
    ChunkPlan,
    Cut,
    control_messages,
    plan_chunks,
)
from pgcdc_events.events.config import EventConfig
from pgcdc_events.events.incremental import ReadOnlyChunkWindow
from pgcdc_events.protocol.capture import CaptureRow, read_canonical, read_chunk_line
from pgcdc_events.protocol.decoder import parse_message
from pgcdc_events.protocol.messages import Relation, Type
from pgcdc_events.protocol.transactions import Prelude
from pgcdc_events.spark._session import arrow_schema, map_in_arrow, to_arrow_table
from pgcdc_events.spark.capture import (
    CHUNK_COLUMN,
    WindowDecoder,
    expand_block_lines,
    parse_capture_lines,
)
from pgcdc_events.spark.decode import (
    _RECORDS_ARROW,
    RECORDS_TYPE,
    EventsFunction,
    RecordsFunction,
    TableChangesFunction,
    _Decode,
    capture_tables,
    chunk_tasks,
    normalize_capture,
    table_changes,
)
from pgcdc_events.spark.errors import (
    SparkDecodeError,
    SparkQueryError,
    cancelled_job,
    describe,
)
from pgcdc_events.spark.flatten import changes_type
from pgcdc_events.spark.layout import (
    TABLE_KINDS,
    TableLayout,
    catalog_table_schemas,
)
from pgcdc_events.spark.schema import Flavour, SparkSchemaOptions
from pgcdc_events.types.catalog import CatalogSnapshot

__all__ = [
    "FILE_COLUMNS",
    "BatchProgress",
    "ChangesTarget",
    "DecodedStream",
    "StreamState",
    "commit_ms",
    "control_input",
    "decode_rows",
    "decode_stream",
    "jvm_exit",
    "plan_batch",
    "read_capture_files",
    "read_capture_stream",
    "write_atomic",
]

_SEGMENT_BITS: Final = 32
_FILE_GLOB: Final = "capture-*.jsonl"
_FILE_SEQ: Final = r"capture-(\d{10})-[0-9A-F]{16}\.jsonl$"
#: What follows a file's name when it matches ``capture-*.jsonl`` but not :data:`_FILE_SEQ`.
_NOT_A_NAME: Final = (": not a capture file name (capture-<10-digit sequence>-<16 hex digits of "
                      "LSN>.jsonl, as capture --rotate-every names them): no segment")
_STATE: Final = re.compile(r"state-(\d{12})\.json")


#: :func:`~pgcdc_events.spark.capture.expand_block_lines` as a plain Python UDF (a file's
#: text in, its text out: nothing for Arrow to batch; useArrow set, so no warning).
_EXPAND_BLOCKS: Final = F.udf(expand_block_lines, StringType(), useArrow=False)


def read_capture_files(spark: SparkSession, directory: str, *,
                       max_files_per_trigger: int | None = None,
                       max_bytes_per_trigger: int | None = None) -> DataFrame:
    """A streaming DataFrame of the rotating capture files of a directory, one row a file:
    ``segment`` (the file's sequence number), ``file`` (its name) and ``value`` (its text,
    read whole). :func:`decode_stream` recognises it by these columns (:data:`FILE_COLUMNS`)
    and has the files' lines read in its Python tasks, by the protocol layer's capture
    reader (the fast path: no line split and ``from_json`` in the JVM;
    :attr:`DecodedStream.files_parsed` counts the files). The rows are those
    :func:`read_capture_stream` gives, at the same positions. ``max_files_per_trigger``
    and ``max_bytes_per_trigger`` as :func:`read_capture_stream` takes them."""
    if max_files_per_trigger is not None and max_bytes_per_trigger is not None:
        raise SparkDecodeError("give max_files_per_trigger or max_bytes_per_trigger, not both")
    for name, bound in (("max_files_per_trigger", max_files_per_trigger),
                        ("max_bytes_per_trigger", max_bytes_per_trigger)):
        if bound is not None and bound < 1:
            raise SparkDecodeError(f"{name} must be positive, got {bound}")
    reader = (spark.readStream.format("text").option("wholetext", "true")
              .option("pathGlobFilter", _FILE_GLOB))
    if max_files_per_trigger is not None:
        reader = reader.option("maxFilesPerTrigger", str(max_files_per_trigger))
    if max_bytes_per_trigger is not None:
        reader = reader.option("maxBytesPerTrigger", str(max_bytes_per_trigger))
    file_name = F.col("_metadata.file_name")
    sequence = F.regexp_extract(file_name, _FILE_SEQ, 1)  # "" for a name that is not one
    return reader.load(directory).select(
        F.when(sequence != "", sequence.cast("long")).alias("segment"),
        file_name.alias("file"), F.col("value"))


#: The columns of :func:`read_capture_files`' DataFrame, by which :func:`decode_stream`
#: takes it as files whose lines its tasks read.
FILE_COLUMNS: Final = ("segment", "file", "value")


def read_capture_stream(spark: SparkSession, directory: str, *,
                        max_files_per_trigger: int | None = None,
                        max_bytes_per_trigger: int | None = None) -> DataFrame:
    """A streaming DataFrame of the capture rows in a directory of rotating capture files
    (``capture --rotate-every/--rotate-size``): ``segment`` (the file's sequence number),
    ``position`` (``segment << 32 | line``: the stream order), ``lsn``, ``xid``, ``data``,
    ``snapshot`` (the rows of an initial snapshot, which ``capture`` writes first by default).

    Each file is read whole (``wholetext``), so a micro-batch never holds part of one.
    ``max_files_per_trigger`` or ``max_bytes_per_trigger`` (not both: Spark's file source
    takes one) bound a micro-batch (at least one file); without either a micro-batch takes
    every new file, which, for a backlog, can be more than the driver's memory holds
    (:func:`jvm_exit`). For :func:`decode_stream`, :func:`read_capture_files` is the
    faster input (the same rows, read in Python tasks).
    """
    files = read_capture_files(spark, directory, max_files_per_trigger=max_files_per_trigger,
                               max_bytes_per_trigger=max_bytes_per_trigger)
    files = files.select(F.when(F.col("segment").isNotNull(), F.col("segment")).otherwise(
        F.raise_error(F.concat(F.col("file"), F.lit(_NOT_A_NAME)))).alias("segment"),
        "file", "value")  # as _file_rows says it
    # a file holding COPY block lines (an initial snapshot's rows as COPY text) has them
    # replaced by their rows, a line a message, in Python; the other files stay in the JVM
    # (the function is given null for them), in one scan of the files (two filtered scans
    # of them, unioned, cost 0.4 CPU seconds more a micro-batch of 130,000 lines)
    blocks = F.col("value").contains('"copy"')
    files = files.select("segment", F.coalesce(
        _EXPAND_BLOCKS(F.when(blocks, F.col("value")), F.col("file"), F.col("segment")),
        F.col("value")).alias("value"))
    lines = files.select("segment", F.posexplode(F.split(F.col("value"), "\n"))
                         .alias("line", "value")).filter(F.col("value") != "")
    rows = lines.select("segment", "value", (F.col("segment") * F.lit(1 << _SEGMENT_BITS)
                                             + F.col("line")).alias("position"))
    parsed = parse_capture_lines(rows, where=directory, chunks=True)
    return parsed.select("segment", "position", "lsn", "xid", "data", "snapshot",
                         CHUNK_COLUMN)


#: The rows :class:`_FileLines` makes of a micro-batch's files: what the per-line path's
#: rows are after :func:`decode_stream` normalised them.
_FILE_ROWS_TYPE: Final = StructType([
    StructField("position", LongType(), False), StructField("lsn", LongType(), False),
    StructField("data", BinaryType(), False), StructField("snapshot", BooleanType(), False),
    StructField("segment", LongType(), False), StructField(CHUNK_COLUMN, StringType())])


class _FileLines:
    """The task function (``mapInArrow``) that reads a micro-batch's files (rows of
    :data:`FILE_COLUMNS`) into capture rows ``(position, lsn, data, snapshot, segment,
    chunk line)``, as :func:`read_capture_stream` and ``normalize_capture`` make them in
    the JVM: COPY block lines expanded first (:func:`expand_block_lines`), then each
    non-empty line at ``segment << 32 | its index``, read by the protocol layer
    (``read_canonical``, else a chunk line by ``read_chunk_line``, else
    ``CaptureRow.from_line``, whose error names the line; here the file too). ``parsed``
    (an accumulator) counts the files. Picklable."""

    def __init__(self, parsed: Any) -> None:
        self.parsed = parsed

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        schema = arrow_schema(_FILE_ROWS_TYPE)
        for batch in batches:
            for segment, name, text in zip(batch.column("segment").to_pylist(),
                                           batch.column("file").to_pylist(),
                                           batch.column("value").to_pylist(), strict=True):
                positions, lsns, datas, snapshots, chunks = _file_rows(segment, name, text)
                self.parsed.add(1)
                if positions:
                    columns = (positions, lsns, datas, snapshots, [segment] * len(positions),
                               chunks)
                    yield pa.RecordBatch.from_arrays(
                        [pa.array(c, f.type) for c, f in zip(columns, schema, strict=True)],
                        schema=schema)


def _file_rows(segment: int | None, name: str, text: str | None
               ) -> tuple[list[int], list[int], list[bytes], list[bool], list[str | None]]:
    """One file's rows as columns (see :class:`_FileLines`)."""
    if segment is None:
        raise SparkDecodeError(f"{name}{_NOT_A_NAME}")
    text = expand_block_lines(text, name, segment) or ""
    positions: list[int] = []
    lsns: list[int] = []
    datas: list[bytes] = []
    snapshots: list[bool] = []
    chunks: list[str | None] = []
    base = segment << _SEGMENT_BITS
    for index, line in enumerate(text.split("\n")):
        if line == "":
            continue
        raw = line.encode("utf-8", "surrogateescape")
        read: tuple[int, bytes, bool] | None = read_canonical(raw)
        chunk: str | None = None
        try:
            if read is None:
                found = read_chunk_line(raw, line_number=index + 1)
                if found is not None:
                    read, chunk = (int(found.lsn), b"", False), line
                else:
                    row = CaptureRow.from_line(raw, line_number=index + 1)
                    read = (int(row.lsn), row.data, row.snapshot)
        except PgCdcError as exc:
            raise SparkDecodeError(f"{name}: {exc}", position=base + index) from None
        positions.append(base + index)
        assert read is not None
        lsns.append(int(read[0]))
        datas.append(read[1])
        snapshots.append(read[2])
        chunks.append(chunk)
    return positions, lsns, datas, snapshots, chunks


#: Exit codes of Spark's JVM (``org.apache.spark.util.SparkExitCode``) and what they mean.
_JVM_EXITS: Final = {
    52: "out of memory (java.lang.OutOfMemoryError: Spark's handler of uncaught errors "
        "ends the JVM)",
    53: "a failure to create a local directory", 54: "a failure to store a block",
    56: "no external shuffle service"}


def jvm_exit(spark: SparkSession, *, wait: float = 10.0) -> str | None:
    """Why the local JVM of ``spark`` (one this Python process started) is gone, in one
    line, or ``None`` while it runs (or when it is not this process's). What py4j says
    when the JVM dies under it is "Answer from Java side is empty": this names the exit
    code and, for an out-of-memory exit, what to bound (a micro-batch's files:
    ``max_files_per_trigger``/``max_bytes_per_trigger`` of :func:`read_capture_stream`)
    and the driver's heap (``spark.driver.memory``)."""
    gateway = getattr(spark.sparkContext, "_gateway", None)
    proc = getattr(gateway, "proc", None)
    if proc is None:
        return None
    try:
        code = proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:  # still running
        return None
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else "?"
        return (f"Spark's JVM was killed by signal {-code} ({name}"
                + (": the system's out-of-memory killer sends it)" if -code == 9 else ")"))
    text = f"Spark's JVM exited with code {code}: {_JVM_EXITS.get(code, 'see its log')}"
    if code == 52:  # (the JVM is gone: its settings cannot be asked for)
        text += ("; bound a micro-batch (fewer capture files a trigger) or give the "
                 "driver more memory (spark.driver.memory, 1g by default)")
    return text


# ------------------------------------------------------------------ the state, sans Spark


_STATE_FORMAT: Final = "pgcdc-events stream state 3"
#: The formats before, which :meth:`StreamState.from_json` still reads.
_STATE_FORMAT_2: Final = "pgcdc-events stream state 2"


@attrs.frozen
class StreamState:
    """What decoding needs from the micro-batches before (see the module docstring).

    ``prelude``: the decoder's state at the last cut, in the one form the event layer
    keeps it (:class:`~pgcdc_events.protocol.transactions.Prelude`: the Type and Relation
    messages in force, the Begin and Commit of the last transaction decoded); ``cut``: the
    position of that cut; ``pending``: ``(position, lsn, data hex)`` rows not decoded
    yet; ``held``: ``(segment, position, lsn, data hex)`` rows of segments that came
    before the one they follow; ``segment``: the next segment expected; ``position``: the
    last position taken in; ``snapshot``: the positions of the pending and held rows that
    belong to an initial snapshot; ``chunks``: ``(position, line)`` of the pending and
    held rows that are incremental snapshot chunk lines (the line's JSON text);
    ``window``: the read-only incremental snapshot's window at ``cut``
    (:meth:`ReadOnlyChunkWindow.export_state
    <pgcdc_events.events.incremental.ReadOnlyChunkWindow.export_state>`; ``None``: none),
    which every later row goes through.
    """

    prelude: Prelude = attrs.field(factory=Prelude)
    cut: int | None = None
    pending: tuple[tuple[int, int, str], ...] = ()
    held: tuple[tuple[int, int, int, str], ...] = ()
    segment: int | None = None
    position: int | None = None
    lsn: int | None = None
    snapshot: tuple[int, ...] = ()
    chunks: tuple[tuple[int, str], ...] = ()
    window: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The state as JSON."""
        return {"format": _STATE_FORMAT, "prelude": self.prelude.to_json(), "cut": self.cut,
                "pending": self.pending, "held": self.held, "segment": self.segment,
                "position": self.position, "lsn": self.lsn, "snapshot": self.snapshot,
                "chunks": self.chunks, "window": self.window}

    @classmethod
    def from_json(cls, obj: Any, *, path: str) -> StreamState:
        """Load :meth:`to_json`'s output (or the first format's); errors name ``path``."""
        if not isinstance(obj, dict):
            raise SparkDecodeError(f"{path}: not a stream state file")
        fmt = obj.pop("format", None)
        try:
            if fmt == "pgcdc-events stream state 1":  # schema and cut spelled apart
                prelude, cut = _prelude_v1(obj["schema"], obj["cut"])
            elif fmt in (_STATE_FORMAT, _STATE_FORMAT_2):
                prelude, cut = Prelude.from_json(obj["prelude"]), obj["cut"]
            else:
                raise SparkDecodeError(f"{path}: not a stream state file")
            return cls(prelude=prelude, cut=cut,
                       pending=tuple(tuple(p) for p in obj["pending"]),
                       held=tuple(tuple(h) for h in obj["held"]),
                       segment=obj["segment"], position=obj["position"], lsn=obj["lsn"],
                       snapshot=tuple(obj.get("snapshot", ())),
                       chunks=tuple((int(p), str(t)) for p, t in obj.get("chunks", ())),
                       window=_window_state(obj.get("window"), cut))
        except (KeyError, TypeError, ValueError, PgCdcError) as exc:
            if isinstance(exc, SparkDecodeError):
                raise
            raise SparkDecodeError(f"{path}: a malformed stream state ({exc})") from None

    def plan_prefix(self) -> tuple[list[tuple[int, int, Relation | Type]], list[Cut]]:
        """The schema messages and the cut of the state, as a chunk plan's first part."""
        at = -1 if self.cut is None else self.cut
        schema: list[tuple[int, int, Relation | Type]] = []
        for lsn, data in self.prelude.schema:
            message = parse_message(data)
            assert isinstance(message, (Relation, Type))
            schema.append((at, lsn, message))
        transaction = self.prelude.transaction
        cuts = [] if self.cut is None or transaction is None else [Cut(self.cut, transaction)]
        return schema, cuts


def _window_state(obj: Any, cut: Any) -> Mapping[str, Any] | None:
    """A state's read-only window, checked (it needs the cut it was taken at)."""
    if obj is None:
        return None
    if cut is None:
        raise ValueError("a read-only window without the cut it was taken at")
    ReadOnlyChunkWindow.check_state(obj)
    return dict(obj)


def _prelude_v1(schema: Any, cut: Any) -> tuple[Prelude, int | None]:
    """A state of the first format: ``schema`` as ``(position, lsn, hex)``, ``cut`` as
    ``(position, begin lsn, Begin hex, commit lsn, Commit hex)``."""
    rows = tuple((int(lsn), bytes.fromhex(data)) for _, lsn, data in schema)
    if cut is None:
        return Prelude(rows), None
    position, begin_lsn, begin, commit_lsn, commit = cut
    return Prelude(rows, ((int(begin_lsn), bytes.fromhex(begin)),
                          (int(commit_lsn), bytes.fromhex(commit)))), int(position)


@attrs.frozen
class _Intake:
    """Which rows a micro-batch takes in: ``taken`` the new rows' segments taken (``None``:
    every new row, a stream without segments), ``waiting`` those held back, the state's
    held rows now taken and still held, and the next segment expected."""

    taken: frozenset[int] | None
    waiting: frozenset[int]
    held_taken: tuple[tuple[int, int, int, str], ...]
    held_kept: tuple[tuple[int, int, int, str], ...]
    segment: int | None

    def takes(self, segment: int | None) -> bool:
        """Whether the new rows of ``segment`` are taken in."""
        return self.taken is None or segment in self.taken


def _intake(state: StreamState, segments: Collection[int | None]) -> _Intake:
    """The segments of a micro-batch's rows (``None``: a row without one) taken in, in
    order from the next one expected; a segment that comes before one it follows is held."""
    present = set(segments)
    held = state.held
    if not (present - {None}) and not held:
        return _Intake(None, frozenset(), (), (), state.segment)
    if None in present:
        raise SparkDecodeError("a row without a segment in a stream of segments")
    numbers = {s for s in present if s is not None}
    every = numbers | {h[0] for h in held}
    segment = 0 if state.segment is None else state.segment  # rotating files start at 0
    stale = sorted(s for s in every if s < segment)
    if stale:
        raise SparkDecodeError(f"segment {stale[0]} arrives after segment {segment - 1} "
                               "was decoded: the stream is not in order (a capture file "
                               "written twice, or two captures into one directory?)")
    taken: set[int] = set()
    while segment in every:
        taken.add(segment)
        segment += 1
    return _Intake(frozenset(numbers & taken), frozenset(numbers - taken),
                   tuple(h for h in held if h[0] in taken),
                   tuple(h for h in held if h[0] not in taken), segment)


def _ranker(rows: Iterable[tuple[int, int]], segmented: bool) -> Callable[[int], int]:
    """A position's rank among a batch's rows, near enough to size chunks: the position
    itself, or with segments (``segment << 32 | line``) the lines of the segments before
    it plus its line. ``rows`` are ``(position, lines)``: a segment's lines are at least
    the largest ``lines`` of its positions."""
    if not segmented:
        return lambda position: position
    sizes: dict[int, int] = {}
    for position, lines in rows:
        segment = position >> _SEGMENT_BITS
        sizes[segment] = max(sizes.get(segment, 0), lines)
    offsets: dict[int, int] = {}
    total = 0
    for segment in sorted(sizes):
        offsets[segment] = total
        total += sizes[segment]
    mask = (1 << _SEGMENT_BITS) - 1
    return lambda position: offsets.get(position >> _SEGMENT_BITS, total) + (position & mask)


def _thin(cuts: tuple[Cut, ...], rank: Callable[[int], int], start: int, least: int
          ) -> tuple[Cut, ...]:
    """The cuts that leave chunks of at least ``least`` rows (by ``rank``, from ``start``),
    and always the last one (everything up to it is decoded now). Any subset of a plan's
    cuts is a plan: each cut carries its own prelude."""
    if least <= 1 or len(cuts) < 2:
        return cuts
    kept: list[Cut] = []
    previous = start
    for cut in cuts[:-1]:
        at = rank(cut.position)
        if at - previous >= least:
            kept.append(cut)
            previous = at
    kept.append(cuts[-1])
    return tuple(kept)


def plan_batch(state: StreamState, control: Iterable[tuple[int, int, bytes, bool]], *,
               rank: Callable[[int], int] = lambda position: position, start: int = 0,
               least: int = 1) -> tuple[ChunkPlan, Cut | None]:
    """The chunk plan of a micro-batch after ``state``, from the control messages alone
    (``(position, lsn, data, snapshot)`` of the rows the batch decodes from: the state's
    pending rows and the rows taken in, in stream order), and its last cut (``None``:
    nothing can be decoded yet). Chunk ``i`` of the plan is decoded primed with
    ``plan.prelude(i)``; the chunks before the state's cut hold no row here. Chunks hold
    at least ``least`` rows by ``rank`` (see :func:`_thin`), the last cut is the last
    possible one."""
    rows = list(control)
    snapshot = frozenset(p for p, _, _, flag in rows if flag)
    schema, cuts = state.plan_prefix()
    inner = plan_chunks(control_messages((p, lsn, d) for p, lsn, d, _ in rows),
                        min_messages=1, snapshot=snapshot)
    last = inner.cuts[-1] if inner.cuts else None
    return (ChunkPlan(tuple(schema) + inner.schema,
                      tuple(cuts) + _thin(inner.cuts, rank, start, least)), last)


def _after(state: StreamState, plan: ChunkPlan, last: Cut | None, intake: _Intake,
           pending: Iterable[tuple[int, int, bytes, bool]],
           held: Iterable[tuple[int, int, int, bytes, bool]], position: int | None,
           chunks: Mapping[int, str] | None = None,
           window: Mapping[str, Any] | None = None) -> StreamState:
    """The state after a micro-batch: its ``pending`` rows (after the last cut) and
    ``held`` rows (of segments held back) with their snapshot flags, the texts of
    those that are chunk lines (``chunks``: by position), and the read-only window at the
    last cut (``window``)."""
    pending = list(pending)
    held = list(held)
    cut: int | None
    lsn: int | None
    if last is not None:
        prelude, cut, lsn = plan.prelude(len(plan.cuts)), last.position, last.commit_lsn
    else:
        prelude, cut, lsn = state.prelude, state.cut, state.lsn
    kept = [(h[0], h[1], h[2], h[3]) for h in intake.held_kept]
    snapshot = {p for p, _, _, flag in pending if flag} | {h[1] for h in held if h[4]}
    snapshot |= {h[1] for h in intake.held_kept if h[1] in frozenset(state.snapshot)}
    return StreamState(
        prelude=prelude, cut=cut,
        pending=tuple((p, at, d.hex()) for p, at, d, _ in pending),
        held=tuple(sorted(kept + [(s, p, at, d.hex()) for s, p, at, d, _ in held])),
        segment=intake.segment, position=position, lsn=lsn, snapshot=tuple(sorted(snapshot)),
        chunks=tuple(sorted((p, chunks[p]) for p in
                            [r[0] for r in pending] + [h[1] for h in held]
                            + [h[1] for h in intake.held_kept] if chunks and p in chunks)),
        window=window)


def _old_rows(state: StreamState, intake: _Intake) -> list[tuple[int, int, bytes, bool]]:
    """The state's pending rows and its held rows taken in now, ``(position, lsn, data,
    snapshot)`` in stream order."""
    flagged = frozenset(state.snapshot)
    rows = [(p, lsn, bytes.fromhex(d), p in flagged) for p, lsn, d in state.pending]
    rows += [(p, lsn, bytes.fromhex(d), p in flagged) for _, p, lsn, d in intake.held_taken]
    rows.sort(key=lambda r: r[0])
    return rows


def _check_order(state: StreamState, first: int | None) -> None:
    if first is not None and state.position is not None and first <= state.position:
        raise SparkDecodeError(f"the stream goes back: position {first} after "
                               f"{state.position} was taken in", position=first)


def _is_control(data: bytes) -> bool:
    return bool(data) and data[0] in CONTROL_TYPES


def decode_rows(state: StreamState, rows: Iterable[tuple[int | None, int, int, bytes]],
                make: _Decode, *, lines: bool = False, snapshot: Collection[int] = (),
                chunk_rows: int = 1) -> tuple[list[Any], StreamState, int]:
    """Decode one micro-batch's rows ``(segment, position, lsn, data)`` after ``state`` in
    this process, by the steps the streaming query runs (:func:`plan_batch` from the
    control messages, the chunks decoded by the batch layer's task function): the records
    (Arrow batches of ``RECORDS_TYPE``), the state after them, and how many rows were
    taken in (rows of segments held back wait for the gap before them). ``snapshot``
    holds the positions of the rows that belong to an initial snapshot: they become read
    (``r``) events, as ``pgcdc-events decode`` makes them, and the snapshot block is never
    cut. ``chunk_rows``: the least rows of a chunk (the last cut is always made)."""
    if state.window is not None:
        raise SparkDecodeError("decode_rows does not replay incremental snapshot windows, "
                               "and the state holds a read-only snapshot's window")
    new = sorted(rows, key=lambda r: r[1])
    flagged = frozenset(snapshot)
    intake = _intake(state, {r[0] for r in new})
    old = _old_rows(state, intake)
    taken = [(p, lsn, d, p in flagged) for s, p, lsn, d in new if intake.takes(s)]
    fresh = min([p for p, _, _, _ in taken]
                + [h[1] for h in intake.held_taken], default=None)
    _check_order(state, fresh)
    every = sorted(old + taken, key=lambda r: r[0])
    segmented = intake.taken is not None
    rank = _ranker(((p, (p & 0xFFFFFFFF) + 1) for p, _, _, _ in every), segmented)
    plan, last = plan_batch(state, (r for r in every if _is_control(r[2])), rank=rank,
                            start=rank(every[0][0]) - 1 if every else 0, least=chunk_rows)
    batches: list[Any] = []
    ready = every if last is None else [r for r in every if r[0] <= last.position]
    keep = every if last is None else [r for r in every if r[0] > last.position]
    if last is not None:
        chunk_of = plan.chunk_of
        table = pa.RecordBatch.from_pydict({
            "_chunk": [chunk_of(r[0]) for r in ready], "position": [r[0] for r in ready],
            "lsn": [r[1] for r in ready], "data": [r[2] for r in ready],
            "snapshot": [r[3] for r in ready]})
        batches = list(RecordsFunction(plan, make, payload=True, lines=lines)(iter([table])))
    held = [(s, p, lsn, d, p in flagged) for s, p, lsn, d in new
            if s is not None and not intake.takes(s)]
    position = max([p for p, _, _, _ in taken] + [h[1] for h in intake.held_taken]
                   + ([state.position] if state.position is not None else []), default=None)
    after = _after(state, plan, last, intake, keep, held, position)
    return batches, after, len(taken) + len(intake.held_taken)


def commit_ms(cut: Cut | None) -> int | None:
    """The commit time, in ms since the epoch, of the transaction a cut follows (its
    records' ``source.ts_ms``)."""
    if cut is None:
        return None
    message = parse_message(cut.transaction[1][1])
    time_ = getattr(message, "commit_time", None)
    if not isinstance(time_, int):
        return None
    return (time_ + _PG_EPOCH_US) // 1000


_PG_EPOCH_US: Final = 946_684_800_000_000  # 2000-01-01 in microseconds since 1970


# ------------------------------------------------------------------ the query


@attrs.frozen
class BatchProgress:
    """One micro-batch: its id, the rows taken in, the records decoded, rows waiting,
    the last commit decoded (LSN, and its time in ms), the newest LSN the input holds,
    the seconds the batch took, and the chunks the tasks decoded."""

    batch_id: int
    rows: int
    records: int
    pending: int
    lsn: int | None
    commit_ms: int | None
    input_lsn: int | None
    seconds: float
    skipped: bool = False
    chunks: int = 0
    #: Seconds of the batch's steps: ``control`` (the control job, reading the files),
    #: ``plan`` (the plan and the rows kept for the next batches, on the driver),
    #: ``output`` (the decoding job and the targets), ``state`` (the state written).
    steps: tuple[tuple[str, float], ...] = ()

    @property
    def lag_bytes(self) -> int | None:
        """WAL bytes between the newest input row and the last commit decoded."""
        if self.lsn is None or self.input_lsn is None:
            return None
        return max(0, self.input_lsn - self.lsn)

    @property
    def lag_seconds(self) -> float | None:
        """Seconds between the last commit decoded and now."""
        return None if self.commit_ms is None else max(0.0, time.time() - self.commit_ms / 1000)


def write_atomic(path: Path, write: Callable[[str], object]) -> None:
    """Write through ``write(temporary path)``, ``fsync``, rename into place, ``fsync`` the
    directory; the temporary name is hidden (``.``) from Spark's file source."""
    temp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    write(str(temp))
    fd = os.open(temp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(temp, 0o600)
    os.replace(temp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_text(path: str, text: str) -> None:
    Path(path).write_text(text, encoding="utf-8")


class _BatchWriter:
    """The ``foreachBatch`` function of the pipeline's one query: plans the micro-batch on
    the driver from its control messages, decodes its chunks in tasks, applies each
    table's events to its targets and writes the records (with a ``path``)."""

    def __init__(self, stream: DecodedStream) -> None:
        self.stream = stream
        self.persisted: list[DataFrame] = []

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        try:
            self._batch(df, batch_id)
        except Exception as exc:  # one line, with the cause, for the query's failure
            # and no chained traceback: Spark matches the text py4j hands it (this line)
            # against a regular expression that recurses once per character
            raise _failure("the decoding query", batch_id, exc) from None
        finally:
            for frame in self.persisted:
                frame.unpersist()
            self.persisted = []

    def _batch(self, df: DataFrame, batch_id: int) -> None:  # noqa: PLR0915
        stream = self.stream
        started = time.monotonic()
        state_dir = stream.state_dir
        done = state_dir / f"state-{batch_id:012d}.json"
        if done.exists():  # a replay of a batch whose results are written
            stream.report(BatchProgress(batch_id, 0, 0, 0, None, None, None,
                                        time.monotonic() - started, skipped=True))
            return
        state = stream.load_state(before=batch_id)
        spark = df.sparkSession
        if stream.files:  # read_capture_files: the files' lines read in the Python tasks
            df = map_in_arrow(df.select(*FILE_COLUMNS), _FileLines(stream.files_parsed),
                              _FILE_ROWS_TYPE)
        segmented = "segment" in df.columns
        has_chunks = CHUNK_COLUMN in df.columns  # incremental snapshot chunk lines
        df = df.select("position", "lsn", "data", "snapshot",
                       (F.col("segment") if segmented else F.lit(None).cast("long"))
                       .alias("segment"), *([CHUNK_COLUMN] if has_chunks else [])
                       ).persist()  # read and parsed once, used thrice
        self.persisted.append(df)
        # one small job, one stage (no shuffle): per segment, its positions, rows, newest
        # LSN and control messages; only the control messages' data goes to the Python
        # workers (the first byte is looked at in the JVM), the data messages' is null
        marks = [("start", time.monotonic())]
        summary = _summary(to_arrow_table(map_in_arrow(control_input(df), _summarize,
                                                       _SUMMARY_TYPE)))
        marks.append(("control", time.monotonic()))
        intake = _intake(state, [r["segment"] for r in summary])
        taken = [r for r in summary if intake.takes(r["segment"])]
        old = _old_rows(state, intake)
        _check_order(state, min([r["first"] for r in taken]
                                + [h[1] for h in intake.held_taken], default=None))
        rows = sum(r["rows"] for r in taken) + len(old)
        messages = sorted([r for r in old if _is_control(r[2])]
                          + [(c["position"], c["lsn"], bytes(c["data"]), c["snapshot"])
                             for r in taken for c in r["control"]
                             if c["data"][:1] != _CHUNK_MARK], key=lambda r: r[0])
        # the chunk lines' texts (the state's and the batch's), and those decoded now
        texts = dict(state.chunks)
        texts.update((c["position"], bytes(c["data"][1:]).decode("utf-8"))
                     for r in summary for c in r["control"] if c["data"][:1] == _CHUNK_MARK)
        now = {r[0] for r in old} | {c["position"] for r in taken for c in r["control"]}
        window_lines = sorted(p for p in texts if p in now)
        mask = (1 << _SEGMENT_BITS) - 1
        rank = _ranker([(r["last"], (r["last"] & mask) + 1) for r in taken]
                       + [(p, (p & mask) + 1) for p, _, _, _ in old], intake.taken is not None)
        first = min([r["first"] for r in taken] + [p for p, _, _, _ in old], default=None)
        cores = spark.sparkContext.defaultParallelism
        least = stream.chunk_messages or max(5000, rows // (4 * max(1, cores)))
        plan, last = plan_batch(state, messages, rank=rank,
                                start=rank(first) - 1 if first is not None else 0, least=least)
        stream.discover(plan)
        # the rows the batch decodes from: the new rows taken in and the state's
        frame = df
        if intake.taken is not None and intake.waiting:
            frame = frame.filter(F.col("segment").isin(*sorted(intake.taken)))
        if old:
            frame = frame.unionByName(spark.createDataFrame(pa.table({
                "position": pa.array([r[0] for r in old], pa.int64()),
                "lsn": pa.array([r[1] for r in old], pa.int64()),
                "data": pa.array([r[2] for r in old], pa.binary()),
                "snapshot": pa.array([r[3] for r in old], pa.bool_()),
                "segment": pa.array([r[0] >> _SEGMENT_BITS if intake.taken is not None
                                     else None for r in old], pa.int64()),
                **({CHUNK_COLUMN: pa.array([texts.get(r[0]) for r in old], pa.string())}
                   if has_chunks else {})}),
                schema=df.schema))
        newest = max([r["last"] for r in taken] + [p for p, _, _, _ in old], default=None)
        make = stream.make
        window_state = state.window  # a read-only snapshot's window, carried at the cut
        if window_lines or (state.window is not None and first is not None):
            # the windows: from a cut before the first line to a cut after
            plan, last, make, window_state = _windows(state, messages, frame, plan,
                                                      window_lines, texts, make,
                                                      -1 if first is None else first)
        counted = (stream.chunks.value, stream.records_made.value)
        records: DataFrame | None = None
        changes: DataFrame | None = None
        if last is not None:
            ready = frame.filter(F.col("position") <= F.lit(last.position))
            partitions = max(1, min(len(plan.cuts) - len(state.plan_prefix()[1]), 2 * cores))
            chunked = chunk_tasks(ready, plan, -1 if first is None else first,
                                  last.position, partitions)
            chunked = chunked.sortWithinPartitions("_chunk", "position").select(
                "_chunk", "position", "lsn", "data", "snapshot",
                *([CHUNK_COLUMN] if make.window is not None else []))
            # one table's changes decoded straight, in one pass (not through the windows
            # of an incremental snapshot: those give records)
            single = stream.single_table() if make.window is None else None
            if single is not None:
                layout = stream.layout(single)
                changes = map_in_arrow(chunked, TableChangesFunction(
                    plan, make, layout, counters=stream.flat,
                    decoded=(stream.chunks, stream.records_made), strict=True),
                    changes_type(layout))
            else:
                records = map_in_arrow(chunked, RecordsFunction(
                    plan, make, payload=True, lines=stream.lines,
                    counters=(stream.chunks, stream.records_made)), RECORDS_TYPE)
        # what waits for the next batches: rows after the last cut, segments held back
        pending: list[tuple[int, int, bytes, bool]] = []
        if newest is not None and (last is None or newest > last.position):
            after_cut = frame if last is None else frame.filter(
                F.col("position") > F.lit(last.position))
            pending = [(r[0], r[1], r[2], r[3]) for r in _rows(after_cut)]
        held: list[tuple[int, int, int, bytes, bool]] = []
        if intake.waiting:
            held = [(r[4], r[0], r[1], r[2], r[3]) for r in _rows(
                df.filter(F.col("segment").isin(*sorted(intake.waiting)))) if r[4] is not None]
        marks.append(("plan", time.monotonic()))
        if records is not None:
            stream.write(records, batch_id)
        elif changes is not None:
            stream.write_changes(changes, batch_id)
        position = max([r["last"] for r in taken] + [h[1] for h in intake.held_taken]
                       + ([state.position] if state.position is not None else []),
                       default=None)
        after = _after(state, plan, last, intake, pending, held, position, texts,
                       window_state)
        text = json.dumps(after.to_json())
        marks.append(("output", time.monotonic()))
        write_atomic(done, lambda p: _write_text(p, text))
        for old_state in state_dir.iterdir():  # keep the last few
            match = _STATE.fullmatch(old_state.name)
            if match is not None and int(match.group(1)) < batch_id - 2:
                with contextlib.suppress(OSError):
                    old_state.unlink()
        made = stream.records_made.value - counted[1]  # records, a run's each counted
        lsns = [r["lsn"] for r in taken if r["lsn"] is not None]
        stream.report(BatchProgress(
            batch_id, rows - len(state.pending), made,
            len(after.pending) + len(after.held), after.lsn, commit_ms(last) if last else
            None, max(lsns) if lsns else None, time.monotonic() - started,
            chunks=stream.chunks.value - counted[0],
            steps=tuple((name, at - marks[i][1]) for i, (name, at) in enumerate(
                [*marks[1:], ("state", time.monotonic())]))))


def _windows(state: StreamState, messages: list[tuple[int, int, bytes, bool]],
             frame: DataFrame, plan: ChunkPlan, lines: list[int], texts: Mapping[int, str],
             make: _Decode, first_row: int
             ) -> tuple[ChunkPlan, Cut | None, _Decode, Mapping[str, Any] | None]:
    """A micro-batch holding incremental snapshot chunk lines (``lines``: the positions of
    those it decodes, ``texts`` their JSON), or after a read-only snapshot's chunk line
    (``state.window``; ``first_row``: the batch's first position): the plan, last cut,
    decoder maker and read-only window state at that cut that decode it as
    :func:`~pgcdc_events.spark.decode.decode_capture` decodes a capture's windows, one
    :class:`~pgcdc_events.spark.capture.WindowDecoder` over one chunk.

    That chunk runs from the last cut before the first chunk line (with
    ``state.window``: the state's cut, the window restored there) to the last cut after it
    where no chunk is in flight (every window closed). A writable snapshot's window then
    passes everything on unchanged, so a decoder started afresh there gives the same
    records; a read-only one (``read.only=true``) carries its last watermarks and the last
    change's sequence to the next chunk, which the state keeps
    (:meth:`WindowDecoder.export <pgcdc_events.spark.capture.WindowDecoder.export>`), and
    every later row goes through it. The driver finds that cut by replaying the rows
    after the first cut with a ``WindowDecoder`` (its records are dropped). When no such
    cut is in the batch, the batch ends at the cut before the first chunk line: the rows
    after it, the chunk lines with their texts, wait in the state for the batches that
    bring the windows' closes."""
    for position in lines:
        if read_chunk_line(texts[position]) is None:
            raise SparkDecodeError("not an incremental snapshot chunk line: "
                                   f"{texts[position][:80]!r}", position=position)
    if state.window is not None and CHUNK_COLUMN not in frame.columns:
        raise SparkDecodeError(
            f"the decoder's state holds a read-only incremental snapshot's window, but the "
            f"stream has no column {CHUNK_COLUMN!r} (chunk lines): read it with "
            "read_capture_stream, as the query that wrote the checkpoint did")
    full, _ = plan_batch(state, messages)  # every cut
    first = first_row if state.window is not None else lines[0]
    before = [c for c in full.cuts if c.position < first]
    start = before[-1] if before else None
    rows = to_arrow_table(
        (frame if start is None else frame.filter(F.col("position") > F.lit(start.position)))
        .select("position", "lsn", "data", "snapshot", CHUNK_COLUMN)).sort_by("position")
    positions = rows.column("position").to_pylist()
    window = WindowDecoder(full, full.chunk_of(first), make.decoder, state.window)
    closed: Cut | None = None
    carried: Mapping[str, Any] | None = None
    done = 0
    for cut in (c for c in full.cuts if c.position > first):
        end = bisect.bisect_right(positions, cut.position)
        part = rows.slice(done, end - done)
        for _ in window.feed(part.column("position").to_pylist(),
                             part.column("lsn").to_pylist(), part.column("data"),
                             part.column("snapshot").to_pylist(), part.column(CHUNK_COLUMN)):
            pass
        done = end
        if window.quiet:
            closed, carried = cut, window.export()
    kept = [c for c in plan.cuts if start is None or c.position < start.position]
    cuts = kept + [c for c in (start, closed) if c is not None]
    windowed = ChunkPlan(full.schema, tuple(cuts))
    make = copy.copy(make)
    make.window = None if closed is None else windowed.chunk_of(first)
    make.window_state = None if state.window is None else dict(state.window)
    if closed is not None:
        return windowed, closed, make, carried
    if start is None or (state.cut is not None and start.position <= state.cut):
        return windowed, None, make, state.window  # nothing decodable yet
    # decoded up to the cut before the first chunk line: no read-only window there (the
    # state has none)
    return windowed, start, make, None


#: What :func:`_summarize` makes of a part of a micro-batch: per segment its first and last
#: position, rows and newest LSN (``position``, ``data`` and ``snapshot`` null), and each
#: control message (``first``, ``last`` and ``rows`` null).
_SUMMARY_TYPE: Final = StructType([
    StructField("segment", LongType()), StructField("first", LongType()),
    StructField("last", LongType()), StructField("rows", LongType()),
    StructField("lsn", LongType()), StructField("position", LongType()),
    StructField("data", BinaryType()), StructField("snapshot", BooleanType())])
#: What :func:`control_input` puts before a chunk line's text in its ``data`` (no pgoutput
#: message starts with it): chunk lines go to the driver with the control messages.
_CHUNK_MARK: Final = b"\x00"
_CONTROL_BYTES: Final = pa.array([_CHUNK_MARK] + [bytes([t]) for t in sorted(CONTROL_TYPES)],
                                 pa.binary())


def control_input(df: DataFrame) -> DataFrame:
    """What the control job reads of a micro-batch's rows ``(position, lsn, data, snapshot,
    segment)``: every row, but ``data`` only for the control messages (their first byte
    looked at in the JVM), null for the data messages, so their bytes are not shipped to
    the Python workers. A chunk line (a :data:`~pgcdc_events.spark.capture.CHUNK_COLUMN`
    value) comes as its text after :data:`_CHUNK_MARK`."""
    control = F.substring(F.col("data"), 1, 1).isin(*(bytes([t]) for t in CONTROL_TYPES))
    data = F.when(control, F.col("data"))
    if CHUNK_COLUMN in df.columns:
        chunk = F.col(CHUNK_COLUMN)
        data = data.when(chunk.isNotNull(), F.concat(F.lit(bytearray(_CHUNK_MARK)),
                                                     F.encode(chunk, "UTF-8")))
    return df.select("position", "lsn", data.alias("data"), "snapshot", "segment")


def _summarize(batches: Iterator[Any]) -> Iterator[Any]:
    """The control job's task function (``mapInArrow``): each batch of rows ``(position,
    lsn, data, snapshot, segment)`` (``data`` null but for the control messages) summed up
    per segment, and its control messages, in
    the task that read it; the driver adds the parts up (:func:`_summary`). Where Spark's
    ``groupBy`` shuffled them into a second stage (0.3 to 1.1 s a micro-batch)."""
    import pyarrow.compute as pc  # type: ignore[import-untyped]  # noqa: PLC0415

    for batch in batches:
        if not batch.num_rows:
            continue
        table = pa.Table.from_batches([batch])
        sums = table.group_by("segment").aggregate([
            ("position", "min"), ("position", "max"), ("position", "count"),
            ("lsn", "max")])
        n = sums.num_rows
        yield from pa.table({
            "segment": sums.column("segment"), "first": sums.column("position_min"),
            "last": sums.column("position_max"),
            "rows": sums.column("position_count").cast(pa.int64()),
            "lsn": sums.column("lsn_max"), "position": pa.nulls(n, pa.int64()),
            "data": pa.nulls(n, pa.binary()), "snapshot": pa.nulls(n, pa.bool_())
        }).to_batches()
        control = table.filter(pc.is_in(pc.binary_slice(table.column("data"), 0, 1),
                                        value_set=_CONTROL_BYTES))
        m = control.num_rows
        if m:
            yield from pa.table({
                "segment": control.column("segment"), "first": pa.nulls(m, pa.int64()),
                "last": pa.nulls(m, pa.int64()), "rows": pa.nulls(m, pa.int64()),
                "lsn": control.column("lsn"), "position": control.column("position"),
                "data": control.column("data"), "snapshot": control.column("snapshot")
            }).to_batches()


def _summary(parts: Any) -> list[dict[str, Any]]:
    """The parts :func:`_summarize` made, added up per segment: ``segment``, ``first``,
    ``last``, ``rows``, ``lsn`` and ``control`` (its control messages, dicts of
    ``position``, ``lsn``, ``data``, ``snapshot``)."""
    out: dict[int | None, dict[str, Any]] = {}
    for row in parts.to_pylist():
        entry = out.setdefault(row["segment"], {
            "segment": row["segment"], "first": None, "last": None, "rows": 0, "lsn": None,
            "control": []})
        if row["data"] is not None:
            entry["control"].append({k: row[k] for k in ("position", "lsn", "data",
                                                         "snapshot")})
            continue
        entry["first"] = row["first"] if entry["first"] is None else min(entry["first"],
                                                                          row["first"])
        entry["last"] = row["last"] if entry["last"] is None else max(entry["last"],
                                                                       row["last"])
        entry["rows"] += row["rows"]
        if row["lsn"] is not None:
            entry["lsn"] = row["lsn"] if entry["lsn"] is None else max(entry["lsn"],
                                                                        row["lsn"])
    return list(out.values())


def _rows(df: DataFrame) -> list[tuple[int, int, bytes, bool, int | None]]:
    """The rows ``(position, lsn, data, snapshot, segment)`` of ``df``, in stream order."""
    table = to_arrow_table(df.select("position", "lsn", "data", "snapshot", "segment"))
    columns = [table.column(n).to_pylist() for n in ("position", "lsn", "data", "snapshot",
                                                      "segment")]
    rows = list(zip(*columns, strict=True))
    rows.sort(key=lambda r: r[0])
    return [(p, lsn, bytes(d), bool(s), seg) for p, lsn, d, s, seg in rows]


#: A line of a Python traceback naming one of this library's exceptions.
_OURS: Final = re.compile(r"\s*pgcdc_events(?:\.\w+)*\.(\w+): (.*)")


def _cause(exc: BaseException) -> str:
    """``Class: message`` of a failure; for a task's failure (a Spark exception carrying
    a worker's traceback), of the last of the library's errors in that traceback."""
    if not isinstance(exc, PgCdcError):
        for line in reversed(str(exc).splitlines()):
            match = _OURS.fullmatch(line.rstrip())
            if match is not None:
                return f"{match.group(1)}: {match.group(2)}"
    return describe(exc)


def _failure(query: str, batch_id: int, exc: BaseException) -> SparkQueryError:
    """The one-line error of a failed micro-batch, with its cause (:func:`_cause`); a
    batch whose Spark job was cancelled (the query stopped during it) says so in the words
    Spark looks for (:func:`~pgcdc_events.spark.errors.cancelled_job`), so that the stop
    is taken as one and not as the query's failure."""
    if isinstance(exc, SparkQueryError):
        return exc
    cancelled = cancelled_job(exc)
    if cancelled is not None:
        return SparkQueryError(f"{query}: micro-batch {batch_id} cancelled "
                               f"(org.apache.spark.SparkException: {cancelled})")
    return SparkQueryError(f"{query} failed at micro-batch {batch_id}: {_cause(exc)}")


class ChangesTarget(Protocol):
    """A target :meth:`DecodedStream.apply` gives a table's flattened changes: each
    micro-batch's DataFrame of them (the table's columns, ``__op``, ``__sequence``:
    :meth:`DecodedCapture.changes <pgcdc_events.spark.decode.DecodedCapture.changes>`),
    its id, and the table's key columns (empty for a table without a key)."""

    def apply_changes(self, changes: DataFrame, batch_id: int, keys: Sequence[str]
                      ) -> object:
        """Apply one micro-batch."""


class DecodedStream:
    """A running decode of a capture stream: one query whose micro-batches are decoded in
    Spark tasks and applied to each table's targets (:meth:`apply`), and, with a
    ``path``, the records written under ``path/records`` (each table's events as a
    streaming DataFrame over them: :meth:`table`).

    :meth:`start` starts the query (checkpointed at ``checkpoint``). ``progress`` is
    called after each micro-batch.
    """

    def __init__(self, source: DataFrame, config: EventConfig, catalog: CatalogSnapshot,
                 path: str | None, checkpoint: str, options: SparkSchemaOptions, *,
                 clock: Callable[[], int], run_id: str, lines: bool,
                 progress: Callable[[BatchProgress], None] | None,
                 chunk_messages: int | None = None, files: bool = False) -> None:
        self.source = source
        #: The source is :func:`read_capture_files`' files, read in the Python tasks.
        self.files = files
        self.config = config
        self.catalog = catalog
        self.spark = source.sparkSession
        self.path = None if path is None else Path(path)
        self.records_dir = None if self.path is None else self.path / "records"
        self.checkpoint = checkpoint
        self.state_dir = Path(checkpoint) / "_decoder"
        self.options = options
        self.lines = lines
        self.progress = progress
        self.chunk_messages = chunk_messages
        self.make = _Decode(config, catalog, clock, run_id)
        self.query: StreamingQuery | None = None
        self.batches: list[BatchProgress] = []
        self.targets: list[tuple[str, Callable[[DataFrame, int], object] | ChangesTarget]] = []
        context = self.spark.sparkContext
        #: Chunks decoded, and records made, by the tasks (Spark accumulators).
        self.chunks = context.accumulator(0)
        self.records_made = context.accumulator(0)
        #: Files whose lines the Python tasks read (:func:`read_capture_files`' input).
        self.files_parsed = context.accumulator(0)
        #: Rows of flattened changes given to the targets (:meth:`flat_counts`).
        self.flat = (context.accumulator(0), context.accumulator(0))
        #: Micro-batches decoded straight to one table's changes (:meth:`single_table`).
        self.single_passes = 0
        self._schemas = catalog_table_schemas(catalog, config)
        #: Tables not in the catalog, found in the micro-batches (:meth:`apply_new_tables`).
        self._new: dict[str, TableLayout] = {}
        self._new_target: Callable[[str, TableLayout], Any] | None = None

    def apply(self, table: str, target: Callable[[DataFrame, int], object] | ChangesTarget
              ) -> DecodedStream:
        """Apply each micro-batch of ``table`` to ``target``, in the decoding query itself;
        before :meth:`start`. A target with an ``apply_changes`` method
        (:class:`ChangesTarget`: ``DeltaTarget``, ``ParquetTarget``, ``PostgresTarget``)
        is given the table's flattened changes (the columns of
        :meth:`DecodedCapture.changes <pgcdc_events.spark.decode.DecodedCapture.changes>`:
        runs flattened in the task, no event built for them; :meth:`flat_counts`) and the
        table's key columns; any other ``foreachBatch`` function ``(DataFrame, batch id)``
        is given the table's events (tombstones left out). Returns the stream."""
        self.layout(table)  # an unknown table is named now
        if self.query is not None:
            raise SparkDecodeError("add the targets before the query starts")
        self.targets.append((table, target))
        return self

    def write(self, records: DataFrame, batch_id: int) -> int:
        """A batch's outputs: each target's table changes (or events), then the records
        file (with a ``path``). Returns the records written to the file (0 without one)."""
        persisted = len(self.targets) + (self.records_dir is not None) > 1
        if persisted:
            records = records.persist()
        try:
            if len(self.targets) > 1:
                # side by side, each thread with this one's Spark properties (the query's
                # id, which a DeltaTarget records)
                apply = inheritable_thread_target(records.sparkSession)(self._apply)
                with ThreadPoolExecutor(max_workers=min(4, len(self.targets))) as pool:
                    for future in [pool.submit(apply, records, t, batch_id)
                                   for t in self.targets]:
                        future.result()
            elif self.targets:
                self._apply(records, self.targets[0], batch_id)
            if self.records_dir is None:
                if not self.targets:
                    records.count()
                return 0
            target = self.records_dir / f"part-{batch_id:012d}.parquet"
            out = pa.Table.from_batches(
                [b for b in to_arrow_table(records).cast(_RECORDS_ARROW).to_batches()],
                schema=_RECORDS_ARROW)
            if out.num_rows and not target.exists():
                write_atomic(target, lambda p: pq.write_table(out, p))
            return int(out.num_rows)
        finally:
            if persisted:
                records.unpersist()

    def single_table(self) -> str | None:
        """The table whose flattened changes every target takes, when there is one such
        table and no records file: its micro-batches are decoded straight to its changes
        (:class:`~pgcdc_events.spark.decode.TableChangesFunction`), no records rows in
        between; :attr:`single_passes` counts them."""
        if self.records_dir is not None or not self.targets:
            return None
        tables = {table for table, _ in self.targets}
        if len(tables) != 1 or not all(callable(getattr(f, "apply_changes", None))
                                       for _, f in self.targets):
            return None
        return tables.pop()

    def write_changes(self, changes: DataFrame, batch_id: int) -> None:
        """A batch's outputs when :meth:`single_table` holds: the table's changes to each
        of its targets."""
        self.single_passes += 1
        persisted = len(self.targets) > 1
        if persisted:
            changes = changes.persist()
        try:
            if persisted:
                apply = inheritable_thread_target(changes.sparkSession)(self._apply)
                with ThreadPoolExecutor(max_workers=min(4, len(self.targets))) as pool:
                    for future in [pool.submit(apply, None, t, batch_id, changes)
                                   for t in self.targets]:
                        future.result()
            else:
                self._apply(None, self.targets[0], batch_id, changes)
        finally:
            if persisted:
                changes.unpersist()

    def _apply(self, records: DataFrame | None,
               target: tuple[str, Callable[[DataFrame, int], object] | ChangesTarget],
               batch_id: int, changes: DataFrame | None = None) -> None:
        table, function = target
        layout = self.layout(table)
        try:
            take = getattr(function, "apply_changes", None)
            if callable(take):  # a ChangesTarget: the flattened changes and the keys
                keys = () if layout.key_type is None else tuple(layout.key_type.fieldNames())
                if changes is None:
                    assert records is not None
                    changes = table_changes(records, layout, self.flat, strict=True)
                take(changes, batch_id, keys)
            else:
                assert callable(function) and records is not None
                function(_table_events(records, layout, tombstones=False), batch_id)
        except Exception as exc:
            if isinstance(exc, SparkQueryError):
                raise
            cause = _cause(exc)
            if not isinstance(exc, PgCdcError) and cause.startswith(f"{ChunkError.__name__}: "):
                # the decoding's failure, in the tasks the target's job ran (the records
                # are computed by the first job that reads them): not the target's
                raise
            raise SparkDecodeError(f"applying {table}: {cause}") from None  # in the text

    def apply_new_tables(self, target: Callable[[str, TableLayout], Any]) -> DecodedStream:
        """Apply the tables the catalog does not have (created after it was taken) too:
        when a micro-batch first holds such a table's Relation message (and at each
        restart, from the decoder's state), ``target(name, layout)`` gives its target, as
        :meth:`apply` takes one (``None``: the table is not applied). Its shape is the
        decoder's schema of the table (no catalog: every column optional, the replica
        identity as key); before :meth:`start`. Returns the stream."""
        if self.query is not None:
            raise SparkDecodeError("add the targets before the query starts")
        self._new_target = target
        return self

    def discover(self, plan: ChunkPlan) -> None:
        """Give a target to each table of ``plan``'s Relation messages that neither the
        catalog nor an earlier batch had (:meth:`apply_new_tables`)."""
        if self._new_target is None:
            return
        versions = capture_tables(plan.schema, self.config, self.catalog)
        for name, schemas in versions.items():
            if name in self._schemas or name in self._new:
                continue
            layout = self._new[name] = TableLayout(name, schemas, self.options)
            target = self._new_target(name, layout)
            if target is not None:
                self.targets.append((name, target))

    @property
    def tables(self) -> tuple[str, ...]:
        """The catalog's tables (``schema.table``) the configuration includes."""
        return tuple(self._schemas)

    def flat_counts(self) -> tuple[int, int]:
        """Rows of flattened changes given to the targets so far: straight from
        column-wise runs, and from single records' events."""
        return int(self.flat[0].value), int(self.flat[1].value)

    def report(self, progress: BatchProgress) -> None:
        """Record a batch's progress (and pass it on)."""
        self.batches.append(progress)
        if self.progress is not None:
            self.progress(progress)

    def load_state(self, *, before: int) -> StreamState:
        """The state after the last batch before ``before`` (empty at the start)."""
        latest: tuple[int, Path] | None = None
        if self.state_dir.exists():
            for entry in self.state_dir.iterdir():
                match = _STATE.fullmatch(entry.name)
                if match is not None:
                    number = int(match.group(1))
                    if number < before and (latest is None or number > latest[0]):
                        latest = (number, entry)
        if latest is None:
            return StreamState()
        try:
            obj = json.loads(latest[1].read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SparkDecodeError(f"{latest[1]}: cannot read the stream state: {exc}") from None
        return StreamState.from_json(obj, path=str(latest[1]))

    def start(self, *, trigger_seconds: float | None = None, query_name: str | None = None
              ) -> StreamingQuery:
        """Start the decoding query (once)."""
        if self.query is not None:
            return self.query
        if self.records_dir is None and not self.targets and self._new_target is None:
            raise SparkDecodeError("decode_stream has nowhere to put the records: give it a "
                                   "path, or targets with DecodedStream.apply")
        for directory in (self.records_dir, self.state_dir):
            if directory is not None:
                directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        writer = (self.source.writeStream.foreachBatch(_BatchWriter(self))
                  .option("checkpointLocation", self.checkpoint))
        if trigger_seconds is not None:
            writer = writer.trigger(processingTime=f"{trigger_seconds} seconds")
        if query_name is not None:
            writer = writer.queryName(query_name)
        self.query = writer.start()
        return self.query

    def stop(self) -> None:
        """Stop the decoding query."""
        if self.query is not None:
            self.query.stop()
            self.query = None

    @property
    def records(self) -> DataFrame:
        """Every record, as a streaming DataFrame of ``RECORDS_TYPE`` (the decoded batches'
        files, in batch order); needs the stream's ``path``."""
        if self.records_dir is None:
            raise SparkDecodeError("the records are written only with decode_stream(path=...)")
        self.records_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        return self.spark.readStream.schema(RECORDS_TYPE).parquet(str(self.records_dir))

    def layout(self, table: str) -> TableLayout:
        """``table``'s output shape: the catalog's schema of it."""
        if table in self._new:
            return self._new[table]
        schema = self._schemas.get(table)
        if schema is None:
            raise SparkDecodeError(f"no table {table!r} in the catalog (or not included); "
                                   f"tables: {', '.join(self._schemas) or 'none'}")
        return TableLayout(table, [schema], self.options)

    def table(self, table: str, *, tombstones: bool = False) -> DataFrame:
        """``table``'s Debezium events as a streaming DataFrame (the columns of
        :meth:`DecodedCapture.table <pgcdc_events.spark.decode.DecodedCapture.table>`).
        A column the catalog does not have (an ``ALTER TABLE ... ADD COLUMN`` after it was
        taken) fails the query with :class:`SparkDecodeError` naming it: restart the
        query, from its checkpoint, with a catalog taken after the change."""
        return _table_events(self.records, self.layout(table), tombstones=tombstones)


def _table_events(records: DataFrame, layout: TableLayout, *, tombstones: bool) -> DataFrame:
    """A table's events from records (a stream's or a micro-batch's), in the layout's
    shape; a column the layout lacks fails, naming it."""
    rows = records.filter((F.col("table") == layout.table) & F.col("kind").isin(*TABLE_KINDS))
    if not tombstones:
        rows = rows.filter(F.col("kind") != "tombstone")
    return map_in_arrow(rows.select("position", "index", "kind", "lsn", "payload"),
                        EventsFunction(layout, strict=True), layout.output_type())


def decode_stream(stream_df: DataFrame, config: EventConfig, *, catalog: CatalogSnapshot,
                  checkpoint: str, path: str | None = None,
                  targets: Mapping[str, Callable[[DataFrame, int], object] | ChangesTarget]
                  | None = None,
                  chunk_messages: int | None = None, flavour: Flavour = "semantic",
                  options: SparkSchemaOptions | None = None,
                  clock: Callable[[], int] = time.time_ns, run_id: str | None = None,
                  lines: bool = False, progress: Callable[[BatchProgress], None] | None = None
                  ) -> DecodedStream:
    """Decode a streaming DataFrame of capture rows continuously (see the module docstring).

    ``stream_df`` has ``position`` (an integer column: the stream order), ``lsn`` and
    ``data`` as :func:`~pgcdc_events.spark.decode.decode_capture` reads them, and
    optionally ``segment`` (:func:`read_capture_stream`); or it is
    :func:`read_capture_files`' files (exactly the columns :data:`FILE_COLUMNS`), whose
    lines the micro-batch's Python tasks read (the faster path for rotating files).
    ``catalog`` gives the tables' shapes; ``checkpoint`` is the query's checkpoint
    location (the decoder's state lives in it). ``targets`` maps tables
    (``schema.table``) to ``foreachBatch`` functions that each micro-batch's events of
    the table are applied to, in the same query
    (:meth:`DecodedStream.apply`); ``path``, if given, receives the records (for
    :meth:`DecodedStream.table`). ``chunk_messages`` is the least number of rows of a
    chunk decoded by one task (default: a micro-batch's rows over four chunks per core, at
    least 5,000). Call :meth:`DecodedStream.start`.
    """
    if not stream_df.isStreaming:
        raise SparkDecodeError("decode_stream needs a streaming DataFrame (spark.readStream);"
                               " decode a DataFrame at rest with decode_capture")
    if config.plugin_name != "pgoutput":
        raise SparkDecodeError(f"decode_stream implements plugin.name=pgoutput, not "
                               f"{config.plugin_name}")
    fields = {f.name: f.dataType for f in stream_df.schema.fields}
    if CHUNK_COLUMN in fields and not isinstance(fields[CHUNK_COLUMN], StringType):
        raise SparkDecodeError(f"column {CHUNK_COLUMN!r} (incremental snapshot chunk lines) "
                               "must be a string")
    if "segment" in fields and not isinstance(fields["segment"], IntegralType):
        raise SparkDecodeError("column 'segment' must be an integer type")
    files = sorted(fields) == sorted(FILE_COLUMNS)  # read_capture_files' files
    if files:
        source = stream_df
    else:
        keep = tuple(c for c in ("segment", CHUNK_COLUMN) if c in fields)
        source = normalize_capture(stream_df, "position", keep=keep)
    config = config.with_catalog(catalog)
    stream = DecodedStream(source, config, catalog, path, checkpoint,
                           options or SparkSchemaOptions(flavour), clock=clock,
                           run_id=run_id or str(uuid.uuid4()), lines=lines, progress=progress,
                           chunk_messages=chunk_messages, files=files)
    for table, target in (targets or {}).items():
        stream.apply(table, target)
    return stream
