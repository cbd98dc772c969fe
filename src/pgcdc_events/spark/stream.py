"""Structured Streaming: a live capture decoded micro-batch by micro-batch, exactly once.

:func:`decode_stream` takes a *streaming* DataFrame of capture rows (the rotating files
of ``pgcdc-events capture --rotate-every``, read by :func:`read_capture_stream`, or the
Kafka layout of docs/spark.md) and starts a query that decodes each micro-batch with the
event layer and writes its records (:data:`~pgcdc_events.spark.decode.RECORDS_TYPE`) as
one Parquet file per batch under ``path``. The :class:`DecodedStream` it returns gives
streaming DataFrames over those files: :attr:`~DecodedStream.records`, and each table's
Debezium events (:meth:`~DecodedStream.table`, shaped by the catalog's schema).

What a stream carries from one micro-batch to the next (:class:`StreamState`) is what
:mod:`pgcdc_events.events.chunks` needs to start decoding anywhere: the Relation and Type
messages in force, the Begin and Commit of the last transaction decoded, and the rows
after it that cannot be decoded yet (a transaction not yet whole in the batches seen: a
streamed or prepared one still open, or one cut by the batch's end). Each batch appends
its rows, cuts after the last commit where nothing is open, decodes up to the cut with
:class:`~pgcdc_events.events.chunks.ChunkDecoder` (the records are
:class:`~pgcdc_events.events.EventDecoder`'s) and keeps the rest. With a ``segment``
column (the rotating files' sequence numbers), segments are decoded in order: a file
that arrives before one it follows (so possibly before the Relation its changes need) is
held until the gap is filled (segments are numbered from 0).

The state lives under the query's checkpoint location (``_decoder/state-<batch>.json``),
written atomically after the batch's records file; a batch Spark replays after a failure
finds its state written and is skipped, or (a crash between the two writes) is decoded
again from the previous state into the records file already there. Decoding runs on the
driver, one batch at a time: a pgoutput stream has one order.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final

import attrs
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.compute as pc  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import IntegralType

from pgcdc_events.errors import PgCdcError
from pgcdc_events.events.chunks import (
    ChunkPlan,
    Cut,
    control_messages,
    plan_chunks,
)
from pgcdc_events.events.config import EventConfig
from pgcdc_events.protocol.decoder import parse_message
from pgcdc_events.protocol.messages import Relation, Type
from pgcdc_events.protocol.transactions import Prelude
from pgcdc_events.spark._session import map_in_arrow, to_arrow_table
from pgcdc_events.spark.capture import STREAM_SNAPSHOT_REFUSED, parse_capture_lines
from pgcdc_events.spark.decode import (
    _RECORDS_ARROW,
    RECORDS_TYPE,
    EventsFunction,
    RecordsFunction,
    _Decode,
    normalize_capture,
)
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.layout import TABLE_KINDS, TableLayout, catalog_table_schemas
from pgcdc_events.spark.schema import Flavour, SparkSchemaOptions
from pgcdc_events.types.catalog import CatalogSnapshot

__all__ = ["BatchProgress", "DecodedStream", "StreamState", "decode_rows", "decode_stream",
           "read_capture_stream", "write_atomic"]

_SEGMENT_BITS: Final = 32
_FILE_GLOB: Final = "capture-*.jsonl"
_FILE_SEQ: Final = r"capture-(\d{10})-[0-9A-F]{16}\.jsonl$"
_STATE: Final = re.compile(r"state-(\d{12})\.json")


def read_capture_stream(spark: SparkSession, directory: str, *,
                        max_files_per_trigger: int | None = None) -> DataFrame:
    """A streaming DataFrame of the capture rows in a directory of rotating capture files
    (``capture --rotate-every/--rotate-size``): ``segment`` (the file's sequence number),
    ``position`` (``segment << 32 | line``: the stream order), ``lsn``, ``xid``, ``data``.

    Each file is read whole (``wholetext``), so a micro-batch never holds part of one.
    """
    reader = (spark.readStream.format("text").option("wholetext", "true")
              .option("pathGlobFilter", _FILE_GLOB))
    if max_files_per_trigger is not None:
        reader = reader.option("maxFilesPerTrigger", str(max_files_per_trigger))
    files = reader.load(directory).select(
        F.regexp_extract(F.col("_metadata.file_name"), _FILE_SEQ, 1).cast("long")
        .alias("segment"), F.col("value"))
    lines = files.select("segment", F.posexplode(F.split(F.col("value"), "\n"))
                         .alias("line", "value")).filter(F.col("value") != "")
    rows = lines.select("segment", "value", (F.col("segment") * F.lit(1 << _SEGMENT_BITS)
                                             + F.col("line")).alias("position"))
    parsed = parse_capture_lines(rows, where=directory, snapshots=False)
    return parsed.select("segment", "position", "lsn", "xid", "data")


# ------------------------------------------------------------------ the state, sans Spark


_STATE_FORMAT: Final = "pgcdc-events stream state 2"


@attrs.frozen
class StreamState:
    """What decoding needs from the micro-batches before (see the module docstring).

    ``prelude``: the decoder's state at the last cut, in the one form the event layer
    keeps it (:class:`~pgcdc_events.protocol.transactions.Prelude`: the Type and Relation
    messages in force, the Begin and Commit of the last transaction decoded); ``cut``: the
    position of that cut; ``pending``: ``(position, lsn, data hex)`` rows not decoded
    yet; ``held``: ``(segment, position, lsn, data hex)`` rows of segments that came
    before the one they follow; ``segment``: the next segment expected; ``position``: the
    last position taken in.
    """

    prelude: Prelude = attrs.field(factory=Prelude)
    cut: int | None = None
    pending: tuple[tuple[int, int, str], ...] = ()
    held: tuple[tuple[int, int, int, str], ...] = ()
    segment: int | None = None
    position: int | None = None
    lsn: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The state as JSON."""
        return {"format": _STATE_FORMAT, "prelude": self.prelude.to_json(), "cut": self.cut,
                "pending": self.pending, "held": self.held, "segment": self.segment,
                "position": self.position, "lsn": self.lsn}

    @classmethod
    def from_json(cls, obj: Any, *, path: str) -> StreamState:
        """Load :meth:`to_json`'s output (or the first format's); errors name ``path``."""
        if not isinstance(obj, dict):
            raise SparkDecodeError(f"{path}: not a stream state file")
        fmt = obj.pop("format", None)
        try:
            if fmt == "pgcdc-events stream state 1":  # schema and cut spelled apart
                prelude, cut = _prelude_v1(obj["schema"], obj["cut"])
            elif fmt == _STATE_FORMAT:
                prelude, cut = Prelude.from_json(obj["prelude"]), obj["cut"]
            else:
                raise SparkDecodeError(f"{path}: not a stream state file")
            return cls(prelude=prelude, cut=cut,
                       pending=tuple(tuple(p) for p in obj["pending"]),
                       held=tuple(tuple(h) for h in obj["held"]),
                       segment=obj["segment"], position=obj["position"], lsn=obj["lsn"])
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


def _prelude_v1(schema: Any, cut: Any) -> tuple[Prelude, int | None]:
    """A state of the first format: ``schema`` as ``(position, lsn, hex)``, ``cut`` as
    ``(position, begin lsn, Begin hex, commit lsn, Commit hex)``."""
    rows = tuple((int(lsn), bytes.fromhex(data)) for _, lsn, data in schema)
    if cut is None:
        return Prelude(rows), None
    position, begin_lsn, begin, commit_lsn, commit = cut
    return Prelude(rows, ((int(begin_lsn), bytes.fromhex(begin)),
                          (int(commit_lsn), bytes.fromhex(commit)))), int(position)


def decode_rows(state: StreamState, rows: Iterable[tuple[int | None, int, int, bytes]],
                make: _Decode, *, lines: bool = False
                ) -> tuple[list[Any], StreamState, int]:
    """Decode one micro-batch's rows ``(segment, position, lsn, data)`` after ``state``:
    the records (Arrow batches of ``RECORDS_TYPE``), the state after them, and how many
    rows were taken in (rows of segments held back wait for the gap before them)."""
    new = sorted(rows, key=lambda r: r[1])
    taken: list[tuple[int, int, bytes]] = []
    held = list(state.held)
    segment = state.segment
    if any(r[0] is not None for r in new) or held:
        by_segment: dict[int, list[tuple[int, int, bytes]]] = {}
        for seg, position, lsn, data in new:
            if seg is None:
                raise SparkDecodeError("a row without a segment in a stream of segments",
                                       position=position)
            by_segment.setdefault(seg, []).append((position, lsn, data))
        for seg, position, lsn, text in held:
            by_segment.setdefault(seg, []).append((position, lsn, bytes.fromhex(text)))
        if segment is None:
            segment = 0  # the rotating files' numbers start at 0
        stale = [s for s in by_segment if s < segment]
        if stale:
            raise SparkDecodeError(f"segment {stale[0]} arrives after segment {segment - 1} "
                                   "was decoded: the stream is not in order (a capture file "
                                   "written twice, or two captures into one directory?)")
        while segment in by_segment:
            taken += by_segment.pop(segment)
            segment += 1
        held = [(s, p, lsn, d.hex()) for s, rows_ in sorted(by_segment.items())
                for p, lsn, d in rows_]
    else:
        taken = [(p, lsn, d) for _, p, lsn, d in new]
    taken.sort(key=lambda r: r[0])
    if taken and state.position is not None and taken[0][0] <= state.position:
        raise SparkDecodeError(f"the stream goes back: position {taken[0][0]} after "
                               f"{state.position} was taken in", position=taken[0][0])
    pending = [(p, lsn, bytes.fromhex(d)) for p, lsn, d in state.pending]
    all_rows = pending + taken
    schema, cuts = state.plan_prefix()
    inner = plan_chunks(control_messages(all_rows), min_messages=1)
    plan = ChunkPlan(tuple(schema) + inner.schema, tuple(cuts) + inner.cuts)
    first_chunk = len(cuts)  # chunk 0 is what came before the state's cut: nothing here
    batches: list[Any] = []
    last = inner.cuts[-1] if inner.cuts else None
    if last is not None:
        ready = [r for r in all_rows if r[0] <= last.position]
        keep = [r for r in all_rows if r[0] > last.position]
        chunk_of = plan.chunk_of
        table = pa.RecordBatch.from_pydict({
            "_chunk": [chunk_of(p) for p, _, _ in ready],
            "position": [p for p, _, _ in ready], "lsn": [lsn for _, lsn, _ in ready],
            "data": [d for _, _, d in ready]})
        assert not ready or chunk_of(ready[0][0]) >= first_chunk
        batches = list(RecordsFunction(plan, make, payload=True, lines=lines)(iter([table])))
        prelude = plan.prelude(len(plan.cuts))  # the state after the last cut
        new_cut: int | None = last.position
        decoded_lsn: int | None = last.commit_lsn
    else:
        keep = all_rows
        prelude, new_cut, decoded_lsn = state.prelude, state.cut, state.lsn
    after = StreamState(
        prelude=prelude, cut=new_cut,
        pending=tuple((p, lsn, d.hex()) for p, lsn, d in keep),
        held=tuple(held), segment=segment,
        position=taken[-1][0] if taken else state.position, lsn=decoded_lsn)
    return batches, after, len(taken)


# ------------------------------------------------------------------ the query


@attrs.frozen
class BatchProgress:
    """One micro-batch: its id, the rows taken in, the records written, rows waiting,
    the last commit decoded (LSN, and its time in ms), the newest LSN the input holds,
    and the seconds the batch took."""

    batch_id: int
    rows: int
    records: int
    pending: int
    lsn: int | None
    commit_ms: int | None
    input_lsn: int | None
    seconds: float
    skipped: bool = False

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


def _commit_ms(batches: list[Any]) -> int | None:
    """The commit time (``source.ts_ms``) of the last record of a table, from its line or
    payload (only its source block is read)."""
    from pgcdc_events.spark.layout import _load_payload  # noqa: PLC0415

    for batch in reversed(batches):
        payloads = batch.column("payload").to_pylist()
        for payload in reversed(payloads):
            if payload is not None:
                value = _load_payload(payload)[1]
                if value is not None and value.get("source"):
                    return int(value["source"]["ts_ms"])
    return None


class _BatchWriter:
    """The ``foreachBatch`` function of the decoding query."""

    def __init__(self, stream: DecodedStream) -> None:
        self.stream = stream

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        stream = self.stream
        started = time.monotonic()
        state_dir = stream.state_dir
        done = state_dir / f"state-{batch_id:012d}.json"
        if done.exists():  # a replay of a batch whose results are written
            stream.report(BatchProgress(batch_id, 0, 0, 0, None, None, None,
                                        time.monotonic() - started, skipped=True))
            return
        state = stream.load_state(before=batch_id)
        columns = ["segment", "position", "lsn", "data"] if "segment" in df.columns else \
            ["position", "lsn", "data"]
        if "snapshot" in df.columns:
            columns.append("snapshot")
        table = to_arrow_table(df.select(*columns))
        if "snapshot" in columns and pc.any(table.column("snapshot")).as_py():
            first = table.filter(table.column("snapshot")).column("position")[0].as_py()
            raise SparkDecodeError(f"the stream {STREAM_SNAPSHOT_REFUSED}", position=first)
        data = table.column("data").to_pylist()
        positions = table.column("position").to_pylist()
        lsns = table.column("lsn").to_pylist()
        segments = (table.column("segment").to_pylist() if "segment" in columns
                    else [None] * len(data))
        rows = list(zip(segments, positions, lsns, data, strict=True))
        batches, after, taken = decode_rows(state, rows, stream.make, lines=stream.lines)
        records = sum(b.num_rows for b in batches)
        target = stream.records_dir / f"part-{batch_id:012d}.parquet"
        if batches and not target.exists():
            out = pa.Table.from_batches(batches, schema=_RECORDS_ARROW)
            write_atomic(target, lambda p: pq.write_table(out, p))
        text = json.dumps(after.to_json())
        write_atomic(done, lambda p: _write_text(p, text))
        for old in state_dir.iterdir():  # keep the last few
            match = _STATE.fullmatch(old.name)
            if match is not None and int(match.group(1)) < batch_id - 2:
                with contextlib.suppress(OSError):
                    old.unlink()
        stream.report(BatchProgress(
            batch_id, taken, records, len(after.pending) + len(after.held), after.lsn,
            _commit_ms(batches), max(lsns) if lsns else None, time.monotonic() - started))


class DecodedStream:
    """A running decode of a capture stream: the records under ``path/records``, each
    table's events as a streaming DataFrame (:meth:`table`).

    :meth:`start` starts the decoding query (checkpointed at ``checkpoint``); the
    DataFrames can be used before or after. ``progress`` is called after each micro-batch.
    """

    def __init__(self, source: DataFrame, config: EventConfig, catalog: CatalogSnapshot,
                 path: str, checkpoint: str, options: SparkSchemaOptions, *,
                 clock: Callable[[], int], run_id: str, lines: bool,
                 progress: Callable[[BatchProgress], None] | None) -> None:
        self.source = source
        self.config = config
        self.catalog = catalog
        self.spark = source.sparkSession
        self.path = Path(path)
        self.records_dir = self.path / "records"
        self.checkpoint = checkpoint
        self.state_dir = Path(checkpoint) / "_decoder"
        self.options = options
        self.lines = lines
        self.progress = progress
        self.make = _Decode(config, catalog, clock, run_id)
        self.query: StreamingQuery | None = None
        self.batches: list[BatchProgress] = []
        self._schemas = catalog_table_schemas(catalog, config)

    @property
    def tables(self) -> tuple[str, ...]:
        """The catalog's tables (``schema.table``) the configuration includes."""
        return tuple(self._schemas)

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
        for directory in (self.records_dir, self.state_dir):
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
        files, in batch order)."""
        self.records_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        return self.spark.readStream.schema(RECORDS_TYPE).parquet(str(self.records_dir))

    def layout(self, table: str) -> TableLayout:
        """``table``'s output shape: the catalog's schema of it."""
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
        layout = self.layout(table)
        rows = self.records.filter((F.col("table") == table)
                                   & F.col("kind").isin(*TABLE_KINDS))
        if not tombstones:
            rows = rows.filter(F.col("kind") != "tombstone")
        return map_in_arrow(rows.select("position", "index", "kind", "lsn", "payload"),
                            EventsFunction(layout, strict=True), layout.output_type())


def decode_stream(stream_df: DataFrame, config: EventConfig, *, catalog: CatalogSnapshot,
                  path: str, checkpoint: str, flavour: Flavour = "semantic",
                  options: SparkSchemaOptions | None = None,
                  clock: Callable[[], int] = time.time_ns, run_id: str | None = None,
                  lines: bool = False, progress: Callable[[BatchProgress], None] | None = None
                  ) -> DecodedStream:
    """Decode a streaming DataFrame of capture rows continuously (see the module docstring).

    ``stream_df`` has ``position`` (an integer column: the stream order), ``lsn`` and
    ``data`` as :func:`~pgcdc_events.spark.decode.decode_capture` reads them, and
    optionally ``segment`` (:func:`read_capture_stream`). ``catalog`` gives the tables'
    shapes; ``path`` receives the records, ``checkpoint`` is the decoding query's
    checkpoint location (the decoder's state lives in it). Call
    :meth:`DecodedStream.start`.
    """
    if not stream_df.isStreaming:
        raise SparkDecodeError("decode_stream needs a streaming DataFrame (spark.readStream);"
                               " decode a DataFrame at rest with decode_capture")
    if config.plugin_name != "pgoutput":
        raise SparkDecodeError(f"decode_stream implements plugin.name=pgoutput, not "
                               f"{config.plugin_name}")
    fields = {f.name: f.dataType for f in stream_df.schema.fields}
    if "segment" in fields and not isinstance(fields["segment"], IntegralType):
        raise SparkDecodeError("column 'segment' must be an integer type")
    keep = ("segment",) if "segment" in fields else ()
    source = normalize_capture(stream_df, "position", keep=keep)
    config = config.with_catalog(catalog)
    return DecodedStream(source, config, catalog, path, checkpoint,
                         options or SparkSchemaOptions(flavour), clock=clock,
                         run_id=run_id or str(uuid.uuid4()), lines=lines, progress=progress)
