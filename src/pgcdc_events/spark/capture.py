"""Capture DataFrames: the input contract of the Spark layer, from files or from memory.

A capture DataFrame has the columns of the capture interchange format — ``lsn``
(``X/Y`` text or a long), ``xid`` (long, may be null), ``data`` (the pgoutput
message: binary, or hex text), ``snapshot`` (boolean, optional: the rows of an initial
snapshot block) — plus an explicit integer ordering column (``position`` here): the
stream's order, which a DataFrame does not keep.

A capture that ran an incremental snapshot also holds *chunk lines* (the rows of each
chunk the capture read while it streamed, see :mod:`pgcdc_events.protocol.capture`). In
a capture DataFrame a chunk line is a row whose column ``chunk`` (string, nullable,
optional) holds the line itself as JSON text, with an empty ``data``; every other row has
``chunk`` null. :func:`read_capture` of a JSON Lines capture adds the column; a DataFrame
or Parquet dataset without it has no chunk lines, and reads as before
(:func:`~pgcdc_events.spark.stream.read_capture_stream` adds it too). A reader that does
not take chunk lines (:func:`parse_capture_lines` by default) refuses the first one,
naming it.

:func:`~pgcdc_events.spark.decode.decode_capture` replays the windows with the event
layer's :class:`~pgcdc_events.events.incremental.RecordedChunks` (its rules are not
copied here): a window spans several transactions and carries state from chunk to chunk,
so the span from the first chunk line to the last change of the signalling table after
the last one (:func:`window_span`) is decoded in order by one decoder in one task
(:class:`WindowDecoder`), and the rest of the capture in parallel as before (a
read-only snapshot's span runs to the capture's end). A micro-batch of
:func:`~pgcdc_events.spark.stream.decode_stream` does the same from a cut before its
first chunk line to a cut where no chunk is in flight (:attr:`WindowDecoder.quiet`).
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

import attrs
import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.compute as pc  # type: ignore[import-untyped]
import pyarrow.fs as pafs  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    IntegralType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from pgcdc_events.errors import PgCdcError
from pgcdc_events.events.chunks import ChunkDecoder, ChunkError, ChunkPlan
from pgcdc_events.events.config import EventConfig
from pgcdc_events.events.decoder import EventDecoder
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.events.tables import TableSchema
from pgcdc_events.protocol import wire
from pgcdc_events.protocol.capture import (
    CaptureRow,
    dump_capture_row,
    read_chunk_line,
    read_copy_block,
    rows_of_line,
)
from pgcdc_events.protocol.messages import Message, Relation
from pgcdc_events.spark._session import map_in_arrow
from pgcdc_events.spark.columnar import binary_buffers
from pgcdc_events.spark.errors import SparkDecodeError

__all__ = ["CAPTURE_TYPE", "CHUNK_COLUMN", "FileCapture", "WindowDecoder", "WindowSpan",
           "capture_dataframe", "capture_table", "check_capture", "control_columns",
           "expand_block_lines", "expand_blocks",
           "file_capture", "filesystem", "parse_capture_lines", "read_capture",
           "window_span", "write_capture_parquet"]

#: How many messages of a JSON Lines capture :func:`check_capture` parses before Spark
#: starts (a line each, a COPY block line its rows).
CHECKED_LINES: Final = 10_000

#: The capture columns with the ordering column, as the layer writes them.
CAPTURE_TYPE: Final = StructType([
    StructField("position", LongType(), False), StructField("lsn", LongType(), False),
    StructField("xid", LongType(), True), StructField("data", BinaryType(), False),
    StructField("snapshot", BooleanType(), False),
])
_JSON_FIELDS: Final = "lsn string, xid string, data string, snapshot boolean, chunk string"
#: The column of a capture DataFrame holding a chunk line (the line's JSON text; null on
#: the other rows).
CHUNK_COLUMN: Final = "chunk"
#: Why a reader that does not take chunk lines refuses one.
CHUNK_REFUSED: Final = (
    "it holds an incremental snapshot chunk line (a line with \"chunk\"), which "
    "decode_stream does not read: decode the capture with decode_capture, `pgcdc-events "
    "spark decode` or `pgcdc-events decode`")
#: Why :func:`~pgcdc_events.spark.stream.decode_stream` refuses a snapshot line.
STREAM_SNAPSHOT_REFUSED: Final = (
    "it holds an initial snapshot (lines with \"snapshot\": true), which decode_stream does "
    "not read: decode the snapshot with decode_capture or `pgcdc-events decode`, and follow "
    "a capture made with `--snapshot-mode no_data`")


def capture_table(rows: Iterable[CaptureRow], *, start: int = 0) -> pa.Table:
    """Capture rows as an Arrow table of :data:`CAPTURE_TYPE` (positions from ``start``)."""
    positions: list[int] = []
    lsns: list[int] = []
    xids: list[int | None] = []
    datas: list[bytes] = []
    snapshot: list[bool] = []
    for i, row in enumerate(rows, start):
        positions.append(i)
        lsns.append(int(row.lsn))
        xids.append(row.xid)
        datas.append(row.data)
        snapshot.append(row.snapshot)
    return pa.table({"position": pa.array(positions, pa.int64()),
                     "lsn": pa.array(lsns, pa.int64()), "xid": pa.array(xids, pa.int64()),
                     "data": pa.array(datas, pa.binary()),
                     "snapshot": pa.array(snapshot, pa.bool_())})


def capture_dataframe(spark: SparkSession, rows: Iterable[CaptureRow], *, start: int = 0
                      ) -> DataFrame:
    """A capture DataFrame of rows held in memory (a JVM-local relation: no Python scans)."""
    return spark.createDataFrame(capture_table(rows, start=start), CAPTURE_TYPE)


#: The footer key of a Parquet capture holding its control messages, as
#: :func:`write_capture_parquet` writes them (Arrow IPC of :data:`_CONTROL_ARROW` rows),
#: and the key of the message types they are (the bytes, sorted), of the file's rows and
#: of its first and last positions (JSON), by which :meth:`FileCapture.control` knows
#: they still describe the file.
CONTROL_KEY: Final = b"pgcdc_events.control"
_CONTROL_OF_KEY: Final = b"pgcdc_events.control_of"
#: At most this many control messages a file are kept in its footer (a capture of
#: one-row transactions is two thirds control messages: read by the control job).
CONTROL_KEPT: Final = 1 << 16


def write_capture_parquet(rows: Iterable[CaptureRow], path: str, *,
                          rows_per_group: int = 1 << 20) -> int:
    """Write capture rows as a Parquet file of :data:`CAPTURE_TYPE`; returns the row count.
    The control messages (:data:`~pgcdc_events.events.chunks.CONTROL_TYPES`: Begin,
    Commit, Relation...), when there are at most :data:`CONTROL_KEPT`, go into the file's
    footer too (:data:`CONTROL_KEY`), so that :func:`~pgcdc_events.spark.decode.decode_capture`
    plans the file without a Spark job reading every message."""
    from pgcdc_events.events.chunks import CONTROL_TYPES  # noqa: PLC0415

    types = bytes(sorted(CONTROL_TYPES))
    writer = None
    count = 0
    chunk: list[CaptureRow] = []
    control: list[Any] | None = []
    kept = 0

    def write(table: Any) -> None:
        nonlocal writer, control, kept
        writer = writer or pq.ParquetWriter(path, table.schema)
        writer.write_table(table)
        if control is not None:
            control.append(_control_rows(table, types, "position", snapshot=True))
            kept += control[-1].num_rows
            if kept > CONTROL_KEPT:
                control = None

    try:
        for row in rows:
            chunk.append(row)
            if len(chunk) == rows_per_group:
                write(capture_table(chunk, start=count))
                count += len(chunk)
                chunk = []
        write(capture_table(chunk, start=count))
        count += len(chunk)
        if control is not None and writer is not None:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, _CONTROL_ARROW) as ipc:
                for table in control:
                    ipc.write_table(table)
            writer.add_key_value_metadata({
                CONTROL_KEY: sink.getvalue().to_pybytes(),
                _CONTROL_OF_KEY: json.dumps({"types": types.hex(), "rows": count,
                                             "first": 0 if count else None,
                                             "last": count - 1 if count else None})})
    finally:
        if writer is not None:
            writer.close()
    return count


def check_capture(path: str, *, order_by: str = "position") -> str:
    """Refuse what is not a capture, without Spark: a missing path, an empty file, a file
    whose first lines (:data:`CHECKED_LINES`) are not capture JSON Lines (a CSV, garbage),
    a Parquet dataset without the capture columns or rows. Returns ``"jsonl"`` or
    ``"parquet"``; raises :class:`SparkDecodeError` naming the path (and line)."""
    if not os.path.exists(path):
        raise SparkDecodeError(f"no capture at {path}")
    if os.path.isfile(path) and not _is_parquet(path):
        rows = 0
        try:
            with open(path, encoding="utf-8") as fh:
                for number, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    made = 1
                    if read_chunk_line(line, line_number=number) is None:
                        # a COPY block: its rows, each counted (the tasks expand the rest)
                        made = max(1, len(rows_of_line(line, line_number=number)))
                    rows += made
                    if rows >= CHECKED_LINES:
                        break
        except UnicodeDecodeError:
            raise SparkDecodeError(f"{path} is not a capture: not UTF-8 text (a capture is "
                                   "JSON Lines of {lsn, xid, data} or a Parquet dataset)"
                                   ) from None
        except PgCdcError as exc:
            raise SparkDecodeError(f"{path} is not a capture: {exc}") from None
        if not rows:
            raise SparkDecodeError(f"{path} is not a capture: it holds no messages")
        return "jsonl"
    try:
        dataset = pq.ParquetDataset(path)
        names = set(dataset.schema.names)
        count = sum(f.metadata.num_rows for f in dataset.fragments)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise SparkDecodeError(f"{path} is not a capture: not a JSON Lines file nor a Parquet "
                               f"dataset ({exc})") from None
    missing = [c for c in ("lsn", "data", order_by) if c not in names]
    if missing:
        raise SparkDecodeError(f"the Parquet capture {path} has no column "
                               f"{', '.join(map(repr, missing))} (columns: "
                               f"{', '.join(sorted(names))}); --order-by names the ordering "
                               "column")
    if not count:
        raise SparkDecodeError(f"{path} is not a capture: it holds no messages")
    return "parquet"


def read_capture(spark: SparkSession, path: str, *, order_by: str = "position") -> DataFrame:
    """A capture DataFrame from a capture JSON Lines file or a Parquet dataset.

    A JSON Lines capture must be one file (its line order is the stream order: the
    ordering column ``position`` comes from ``monotonically_increasing_id``, which
    follows the file's splits). A Parquet dataset keeps its columns and must have
    ``order_by``. What is not a capture is refused first (:func:`check_capture`); a bad
    line past the first checked ones fails the job that reads it.
    """
    if check_capture(path, order_by=order_by) == "jsonl":
        lines = spark.read.text(path)
        if _has_blocks(path):  # COPY block lines, expanded in the tasks
            numbered = expand_blocks(lines, where=path)
        else:
            numbered = lines.filter(F.trim(F.col("value")) != "").select(
                F.monotonically_increasing_id().alias("position"), F.col("value"))
        return parse_capture_lines(numbered, where=path, chunks=True)
    frame = spark.read.parquet(path)
    # the tasks may read the files themselves, by position (file_capture); a DataFrame
    # derived from this one is another DataFrame, without the mark
    setattr(frame, _FILES, path)
    return frame


def _has_blocks(path: str) -> bool:
    """Whether the capture file holds a COPY block line (its key, searched in bulk)."""
    mark, tail = b'"copy"', b""
    with open(path, "rb") as fh:
        while piece := fh.read(1 << 20):
            if mark in tail + piece[:len(mark)] or mark in piece:
                return True
            tail = piece[-len(mark):]
    return False


#: The lines :func:`expand_blocks` makes: a position and a capture line.
_EXPANDED: Final = StructType([StructField("position", LongType(), False),
                               StructField("value", StringType(), True)])
_EXPANDED_ARROW: Final = pa.schema([pa.field("position", pa.int64(), False),
                                    pa.field("value", pa.string())])
#: The bits of ``monotonically_increasing_id`` that number a row within its partition.
_ROW_BITS: Final = 33


def expand_blocks(lines: DataFrame, *, where: str) -> DataFrame:
    """The lines of one capture file (Spark's ``text`` source: column ``value``, the
    partitions in file order) with each COPY block line (an initial snapshot's rows as
    COPY text, see :mod:`pgcdc_events.protocol.capture`) replaced by its rows, a line a
    message (:meth:`~pgcdc_events.protocol.capture.CopyBlock.capture_rows`, the one
    expansion), numbered ``position`` in stream order; blank lines are dropped.

    The expansion runs in the tasks: a first small job counts each partition's lines and
    the most rows a block line holds (its ``rows``, read in the JVM), so that line ``i``
    of the file (from 0) gets the positions from ``i * width`` (``width``: that most, at
    least 1). The lines without the key ``"copy"`` stay in the JVM; only the block lines
    go to Python. A block line that does not parse, or whose rows are not COPY text,
    fails the job with a :class:`SparkDecodeError` naming ``where``, the line and the
    row."""
    value = F.col("value")
    block = value.contains('"copy"')
    rows = F.when(block, F.get_json_object(value, "$.rows").cast("long"))
    sizes = (lines.select(F.spark_partition_id().alias("p"), rows.alias("n"))
             .groupBy("p").agg(F.count(F.lit(1)).alias("lines"), F.max("n").alias("most"))
             .collect())
    starts: list[int] = []
    total = width = 0
    for row in sorted(sizes, key=lambda r: r["p"]):
        starts.extend([total] * (int(row["p"]) + 1 - len(starts)))
        starts[int(row["p"])] = total
        total += int(row["lines"])
        width = max(width, int(row["most"] or 0))
    width = max(width, 1)
    if total * width >= 1 << 62:
        raise SparkDecodeError(f"{where}: {total:,} lines with blocks of up to {width:,} rows "
                               "are too many to number")
    identity = F.monotonically_increasing_id()
    start = F.element_at(F.array(*(F.lit(s) for s in starts or [0])),
                         F.spark_partition_id() + 1)
    numbered = lines.select(
        (start + identity.bitwiseAND(F.lit((1 << _ROW_BITS) - 1))).alias("line"), value)
    plain = numbered.filter(~block & (F.trim(value) != "")).select(
        (F.col("line") * F.lit(width)).alias("position"), value)
    expanded = map_in_arrow(numbered.filter(block), _BlockExpander(where, width), _EXPANDED)
    return plain.unionByName(expanded)


class _BlockExpander:
    """The task function of :func:`expand_blocks` (picklable): rows ``(line, value)`` of
    block lines in, their rows out, at ``line * width`` and on."""

    def __init__(self, where: str, width: int) -> None:
        self.where, self.width = where, width

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        width = self.width
        for batch in batches:
            positions: list[int] = []
            values: list[str] = []
            for index, text in zip(batch.column("line").to_pylist(),
                                   batch.column("value").to_pylist(), strict=True):
                position = index * width
                try:
                    block = read_copy_block(text, line_number=index + 1)
                    made = None if block is None else block.capture_rows(
                        line_number=index + 1)
                except PgCdcError as exc:
                    raise SparkDecodeError(f"{self.where}: {exc}", position=position) from None
                if made is None:  # the key elsewhere (a chunk line's column, not JSON...)
                    positions.append(position)
                    values.append(text)
                    continue
                if len(made) > width:  # the count job read the same 'rows'
                    raise SparkDecodeError(f"{self.where}: line {index + 1} holds more rows "
                                           f"({len(made):,}) than counted ({width:,})",
                                           position=position)
                positions.extend(range(position, position + len(made)))
                values.extend(map(dump_capture_row, made))
            yield pa.RecordBatch.from_arrays(
                [pa.array(positions, pa.int64()), pa.array(values, pa.string())],
                schema=_EXPANDED_ARROW)


def expand_block_lines(text: str | None, where: str | None = None,
                       segment: int | None = None) -> str | None:
    """Capture text (lines) with each COPY block line replaced by its rows, a line a
    message (:func:`~pgcdc_events.protocol.capture.rows_of_line`); other lines as they
    are. For a streaming reader that takes a file's text whole: ``where`` names the file
    and ``segment`` its sequence number in errors. A block line that does not parse, or
    whose rows are not COPY text (a hostile line), is a :class:`SparkDecodeError` naming
    the file, the line, its position (``segment << 32 | line index``) and, as ``decode``
    does, the row and column."""
    if text is None or '"copy"' not in text:
        return text
    out: list[str] = []
    for number, line in enumerate(text.split("\n"), 1):
        try:
            block = read_copy_block(line, line_number=number) if '"copy"' in line else None
            rows = None if block is None else block.capture_rows(line_number=number)
        except PgCdcError as exc:
            position = None if segment is None else (segment << 32) + number - 1
            raise SparkDecodeError(f"{where or 'capture text'}: {exc}",
                                   position=position) from None
        if rows is None:
            out.append(line)
        else:
            out.extend(map(dump_capture_row, rows))
    return "\n".join(out)


#: The attribute marking a DataFrame that is a Parquet capture as read_capture read it.
_FILES: Final = "_pgcdc_events_capture_files"


def filesystem(path: str) -> tuple[Any, str]:
    """The ``pyarrow.fs`` filesystem of ``path`` (a local path or a URI it knows) and the
    path in it."""
    if "://" not in path:
        path = os.path.abspath(path)
    return pafs.FileSystem.from_uri(path if "://" in path else f"file://{path}")  # type: ignore[no-any-return]


class FileCapture:
    """A Parquet capture the Spark tasks read themselves, by position ranges: each task
    reads the rows of its chunks (whole transactions) with ``pyarrow.dataset``, the row
    groups outside the range skipped by their statistics, so that no shuffle brings a
    chunk's rows together. Picklable."""

    def __init__(self, path: str, order_by: str, snapshot: bool) -> None:
        self.path, self.order_by, self.snapshot = path, order_by, snapshot
        #: Whether the last :meth:`control` took the control messages from the footers.
        self.from_footers = False

    def _dataset(self) -> Any:
        import pyarrow.dataset as ds  # type: ignore[import-untyped]  # noqa: PLC0415

        fs, base = filesystem(self.path)
        return ds.dataset(base, filesystem=fs, format="parquet")

    def control(self, spark: SparkSession, types: Collection[int]) -> list[Any]:
        """The rows ``(position, lsn, data, snapshot)`` whose message type is one of
        ``types``: from the files' footers when each holds them
        (:func:`write_capture_parquet`'s, for these types, of as many rows, positions
        ordered by ``position``, first and last as its statistics say), else by a Spark
        job whose tasks read the files' row groups themselves. :attr:`from_footers` says
        which."""
        fragments = list(self._dataset().get_fragments())
        footers = _footer_control(fragments, bytes(sorted(types)), self.order_by)
        self.from_footers = footers is not None
        if footers is not None:
            return footers
        pieces = [(fragment.path, group.id) for fragment in fragments
                  for group in fragment.row_groups]
        if not pieces:
            return []
        # the row groups by number (the function holds the list): no data to ship
        frame = spark.range(0, len(pieces), 1,
                            min(len(pieces), spark.sparkContext.defaultParallelism * 2))
        return map_in_arrow(frame, _ControlFunction(self, bytes(sorted(types)), pieces),
                            _CONTROL).collect()

    def read_group(self, path: str, group: int, columns: list[str]) -> Any:
        """One row group of one of the files."""
        fs, _ = filesystem(self.path)
        with fs.open_input_file(path) as handle:
            return pq.ParquetFile(handle).read_row_group(group, columns=columns)

    def rows(self, bounds: Sequence[int], chunks: Iterable[int]
             ) -> Iterator[tuple[Any, Any, Any, Any, Any]]:
        """The rows of ``chunks`` (a chunk ``k`` holds the positions after ``bounds[k - 1]``
        up to ``bounds[k]``), in chunk and position order, as batches ``(chunk, position,
        lsn, data, snapshot)``: numpy arrays and the Arrow binary ``data``."""
        import pyarrow.dataset as ds  # noqa: PLC0415

        dataset = self._dataset()
        cuts = np.asarray(bounds, np.int64)
        position = ds.field(self.order_by)
        columns = {"position": position.cast(pa.int64()), "lsn": ds.field("lsn").cast(pa.int64()),
                   "data": ds.field("data")}
        if self.snapshot:
            columns["snapshot"] = ds.field("snapshot")
        for first, last in _spans(sorted(set(chunks))):
            where = None
            if first > 0:
                where = position > int(cuts[first - 1])
            if last < len(cuts):
                below = position <= int(cuts[last])
                where = below if where is None else where & below
            # the positions first (one column): in order as stored, the rows are streamed
            # as they are read, else the range is sorted in memory
            held = dataset.to_table(columns={"position": columns["position"]}, filter=where
                                    ).column(0).to_numpy()
            if len(held) and bool(np.all(held[1:] > held[:-1])):
                batches = dataset.scanner(columns=columns, filter=where,
                                          batch_size=1 << 16).to_batches()
            else:
                batches = dataset.to_table(columns=columns, filter=where).sort_by(
                    "position").to_batches(max_chunksize=1 << 16)
            for batch in batches:
                if not batch.num_rows:
                    continue
                positions = batch.column("position").to_numpy()
                snapshot = (np.asarray(pc.fill_null(batch.column("snapshot"), False)
                                       .to_numpy(zero_copy_only=False), np.bool_)
                            if self.snapshot else None)
                yield (np.searchsorted(cuts, positions, side="left"), positions,
                       batch.column("lsn").to_numpy(), batch.column("data"), snapshot)


_CONTROL: Final = StructType([
    StructField("position", LongType(), False), StructField("lsn", LongType(), False),
    StructField("data", BinaryType(), False), StructField("snapshot", BooleanType(), False),
])
_CONTROL_ARROW: Final = pa.schema([
    pa.field("position", pa.int64(), False), pa.field("lsn", pa.int64(), False),
    pa.field("data", pa.binary(), False), pa.field("snapshot", pa.bool_(), False),
])


def _control_rows(table: Any, types: bytes, order_by: str, *, snapshot: bool) -> Any:
    """The rows of ``table`` (capture columns: ``order_by``, ``lsn``, ``data`` and, with
    ``snapshot``, ``snapshot``) whose message's first byte is one of ``types``, as a table
    of :data:`_CONTROL_ARROW` (no ``snapshot`` column: false)."""
    wanted = np.zeros(256, np.bool_)
    wanted[list(types)] = True
    data = table.column("data").combine_chunks()
    offsets, buf = binary_buffers(data)
    sizes = np.diff(offsets)
    first = buf[np.minimum(offsets[:-1], max(0, len(buf) - 1))] if len(buf) else \
        np.zeros(len(sizes), np.uint8)
    mask = pa.array((sizes > 0) & wanted[first])
    flags = (pc.fill_null(table.column("snapshot"), False) if snapshot
             else pa.repeat(pa.scalar(False), table.num_rows))
    return pa.table([
        pc.filter(table.column(order_by), mask).cast(pa.int64()),
        pc.filter(table.column("lsn"), mask).cast(pa.int64()),
        pc.filter(data, mask), pc.filter(flags, mask)], schema=_CONTROL_ARROW)


def _footer_control(fragments: list[Any], types: bytes, order_by: str) -> list[Any] | None:
    """The control messages the files' footers hold (:data:`CONTROL_KEY`), as rows, or
    ``None`` when a file has none, for other types, another order column, or a count or
    positions that are not the file's own any more (rewritten with its metadata kept)."""
    from pyspark.sql import Row  # noqa: PLC0415

    if order_by != "position" or not fragments:
        return None
    out: list[Any] = []
    for fragment in fragments:
        meta = fragment.metadata
        keys = meta.metadata or {}
        if CONTROL_KEY not in keys or _CONTROL_OF_KEY not in keys:
            return None
        try:
            of = json.loads(keys[_CONTROL_OF_KEY])
        except ValueError:
            return None
        if not isinstance(of, dict) or of.get("types") != types.hex() \
                or of.get("rows") != meta.num_rows:
            return None
        column = meta.schema.to_arrow_schema().get_field_index("position")
        if column < 0 or (meta.num_row_groups == 0 and meta.num_rows):
            return None
        stats = [meta.row_group(g).column(column).statistics
                 for g in range(meta.num_row_groups) if meta.row_group(g).num_rows]
        if any(st is None or not st.has_min_max for st in stats) or (stats and (
                min(st.min for st in stats) != of.get("first")
                or max(st.max for st in stats) != of.get("last"))):
            return None
        try:
            table = pa.ipc.open_stream(pa.py_buffer(keys[CONTROL_KEY])).read_all()
        except (pa.ArrowInvalid, OSError):  # not Arrow IPC: the job reads the file
            return None
        if table.schema != _CONTROL_ARROW:
            return None
        out.extend(Row(position=r["position"], lsn=r["lsn"], data=bytearray(r["data"]),
                       snapshot=r["snapshot"]) for r in table.to_pylist())
    return out


class _ControlFunction:
    """The ``mapInArrow`` function of :meth:`FileCapture.control`: row groups in, the
    rows of the control messages out."""

    def __init__(self, files: FileCapture, types: bytes, pieces: list[tuple[str, int]]
                 ) -> None:
        self.files, self.types, self.pieces = files, types, pieces

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        files = self.files
        columns = [files.order_by, "lsn", "data"] + (["snapshot"] if files.snapshot else [])
        for batch in batches:
            for number in batch.column("id").to_pylist():
                path, group = self.pieces[number]
                table = _control_rows(files.read_group(path, group, columns), self.types,
                                      files.order_by, snapshot=files.snapshot)
                yield from table.to_batches()


def _spans(chunks: list[int]) -> Iterator[tuple[int, int]]:
    """Runs of consecutive numbers, as ``(first, last)``."""
    start = None
    previous = None
    for chunk in chunks:
        if start is None:
            start = chunk
        elif chunk != previous + 1:  # type: ignore[operator]
            yield start, previous  # type: ignore[misc]
            start = chunk
        previous = chunk
    if start is not None:
        yield start, previous  # type: ignore[misc]


def file_capture(df: DataFrame, order_by: str) -> FileCapture | None:
    """The Parquet files of ``df`` when it is a capture :func:`read_capture` read (not a
    DataFrame derived from one) whose columns the tasks can read as they are (an integer
    ``order_by`` and ``lsn``, binary ``data``), on a filesystem ``pyarrow`` knows; else
    ``None``."""
    path = getattr(df, _FILES, None)
    if not isinstance(path, str) or CHUNK_COLUMN in df.columns:
        return None  # chunk lines go to the tasks through the DataFrame
    fields = {f.name: f.dataType for f in df.schema.fields}
    if not (isinstance(fields.get(order_by), IntegralType)
            and isinstance(fields.get("lsn"), IntegralType)
            and isinstance(fields.get("data"), BinaryType)
            and isinstance(fields.get("snapshot", BooleanType()), BooleanType)):
        return None
    files = FileCapture(path, order_by, "snapshot" in fields)
    try:
        stored = set(files._dataset().schema.names)  # the files' own columns
    except (pa.ArrowException, ValueError, OSError):
        return None  # a filesystem pyarrow does not know, or files it cannot read
    if not {order_by, "lsn", "data"} <= stored:
        return None  # e.g. a column from the directory names (Hive partitioning)
    return files


def parse_capture_lines(lines: DataFrame, *, where: str, snapshots: bool = True,
                        chunks: bool = False) -> DataFrame:
    """Capture JSON Lines (column ``value``) as the capture columns ``lsn`` (text),
    ``xid``, ``data`` (binary) and ``snapshot`` (boolean), keeping the other columns; a
    line that is not one fails the job that reads it (naming ``where`` and the line), and
    so does a snapshot line when ``snapshots`` is false (a reader that cannot take them).
    ``chunks`` adds the column :data:`CHUNK_COLUMN` (a chunk line's text, its ``data``
    empty); without it a chunk line fails the job (:data:`CHUNK_REFUSED`)."""
    others = [c for c in lines.columns if c != "value"]
    parsed = F.from_json(F.col("value"), _JSON_FIELDS)
    rows = lines.select(*others, F.col("value"), parsed.alias("r"))
    snapshot = F.coalesce(F.col("r.snapshot"), F.lit(False))
    is_chunk = F.col("r.chunk").isNotNull()
    # CaptureRow.from_json's rules (protocol.capture), as Spark SQL: the same lines are
    # refused, with the same words
    checked = None
    if not chunks:
        checked = F.when(is_chunk, F.raise_error(F.concat(
            F.lit(f"{where}: {CHUNK_REFUSED}; the first such line: "),
            F.substring(F.col("value"), 1, 120))))
    for bad, expected in _line_rules(chunks):
        failure = F.raise_error(F.concat(F.lit(f"{where}: capture line: {expected}: "),
                                         F.substring(F.col("value"), 1, 120)))
        checked = F.when(bad, failure) if checked is None else checked.when(bad, failure)
    assert checked is not None
    if not snapshots:
        checked = checked.when(snapshot, F.raise_error(F.concat(
            F.lit(f"{where}: {STREAM_SNAPSHOT_REFUSED}; the first such line: "),
            F.substring(F.col("value"), 1, 120))))
    data = F.unhex(F.col("r.data"))
    extra = []
    if chunks:  # a chunk line: its text, and no message
        data = F.when(is_chunk, F.unhex(F.lit(""))).otherwise(data)
        extra = [F.when(is_chunk, F.col("value")).alias(CHUNK_COLUMN)]
    return rows.select(*others, F.coalesce(checked, F.col("r.lsn")).alias("lsn"),
                       F.col("r.xid").cast("long").alias("xid"),
                       data.alias("data"), snapshot.alias("snapshot"), *extra)


_LSN_TEXT: Final = r"^([0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}|[0-9]{1,20})$"


def _line_rules(chunks: bool) -> list[tuple[Column, str]]:
    """The checks of :func:`parse_capture_lines`, each with what a valid line has instead
    (:meth:`~pgcdc_events.protocol.CaptureRow.from_json`'s wording); with ``chunks``, a
    chunk line's ``data`` (a sentence) is not checked."""
    lsn, xid, data = F.col("r.lsn"), F.col("r.xid"), F.col("r.data")
    hexed = F.col("r.chunk").isNull() if chunks else F.lit(True)
    return [
        # from_json reads what is not JSON as a row of nulls (a JSON object with none of
        # the keys reads the same, and is named the same here; from_json names its lsn)
        (F.col("r").isNull() | (lsn.isNull() & xid.isNull() & data.isNull()),
         "not valid JSON"),
        (lsn.isNull() | ~lsn.rlike(_LSN_TEXT), "'lsn' in X/Y form"),
        (xid.isNotNull() & ~xid.rlike(r"^[0-9]{1,19}$"),
         "'xid' as a non-negative integer or null"),
        # unhex gives null for a character that is not a hex digit (the data column's
        # own expression); a regex scan of the data cost about a third of the time
        # Spark took to read a capture file
        (hexed & (data.isNull() | (F.length(data) % 2 == 1) | F.unhex(data).isNull()),
         "'data' as a hex string"),
    ]


def _is_parquet(path: str) -> bool:
    with open(path, "rb") as fh:
        return fh.read(4) == b"PAR1"


# -- chunk lines: the span of the incremental snapshot's windows ---------------------------

_CHANGE_TYPES: Final = (wire.INSERT, wire.UPDATE, wire.DELETE)
#: The first byte of a Commit and of a Stream Commit message.
_COMMITS: Final = (wire.COMMIT, wire.STREAM_COMMIT)


def control_columns(raw: DataFrame, wanted: Column) -> tuple[Column, list[Column]]:
    """What :func:`~pgcdc_events.spark.decode.decode_capture` collects of a normalized
    capture ``raw`` to plan it: the filter (the control messages ``wanted``, and the chunk
    lines) and the columns ``position``, ``lsn``, ``data``, ``snapshot``, with, when
    ``raw`` has :data:`CHUNK_COLUMN`, ``_chunk`` (a chunk line), ``_signal`` (its
    signalling table), ``_table`` (the JSON of its table) and ``_read_only`` (a line of a
    read-only snapshot, :data:`READ_ONLY_KEYS`): not its rows."""
    columns = [F.col("position"), F.col("lsn"), F.col("data"), F.col("snapshot")]
    if CHUNK_COLUMN not in raw.columns:
        return wanted, columns
    chunk = F.col(CHUNK_COLUMN)
    read_only = F.lit(False)
    for key in sorted(READ_ONLY_KEYS):
        read_only = read_only | F.get_json_object(chunk, f"$.chunk.{key}").isNotNull()
    return wanted | chunk.isNotNull(), [
        *columns, chunk.isNotNull().alias("_chunk"),
        F.get_json_object(chunk, "$.chunk.signal").alias("_signal"),
        F.get_json_object(chunk, "$.chunk.table").alias("_table"),
        read_only.alias("_read_only")]


@attrs.frozen
class WindowSpan:
    """The positions one decoder must see in order to replay an incremental snapshot's
    windows: from the first chunk line (``first``) to ``last`` (``None``: the capture's
    end); ``signal`` is the signalling table the chunk lines name, ``tables`` the JSON of
    the tables they read (distinct, in order)."""

    first: int
    last: int | None
    signal: str
    tables: tuple[str, ...]

    def plan(self, plan: ChunkPlan) -> ChunkPlan:
        """``plan`` without its cuts inside the span: the span is in one chunk."""
        last = self.last
        cuts = tuple(c for c in plan.cuts
                     if c.position < self.first or (last is not None and c.position >= last))
        return ChunkPlan(plan.schema, cuts)

    def table_schemas(self, config: EventConfig, catalog: Any) -> list[TableSchema]:
        """The schemas of the tables the chunks read, as the window builds their ``r``
        events (a table may have no Relation message in the capture)."""
        from pgcdc_events.events.incremental import (  # noqa: PLC0415
            ChunkWindow,
            catalog_table_from_json,
        )

        window = ChunkWindow(EventDecoder(config, catalog=catalog),
                             signal_data_collection=self.signal)
        return [window.begin_chunk("", catalog_table_from_json(json.loads(text)))
                for text in self.tables]


#: What marks a chunk line of a read-only snapshot (``read.only=true``): its watermarks
#: are the server's snapshots, and its windows close at commits and idle polls.
READ_ONLY_KEYS: Final = frozenset({"low", "high", "idle"})


def window_span(raw: DataFrame, control_rows: Sequence[Any],
                control: Iterable[tuple[int, int, Message]]) -> WindowSpan | None:
    """The span of the windows of a capture's chunk lines, ``None`` when it has none.

    ``control_rows`` are the rows collected with :func:`control_columns`, ``control``
    the parsed control messages. The window of the last chunk closes at a change of the
    signalling table (its close watermark) after the last chunk line: the span ends at
    the last such change, found by a Spark job over the rows after the last chunk line
    by their type byte and relation id (a message of a streamed transaction, whose xid
    comes first, too; a false match only lengthens the span). Without any, the span ends
    at the last chunk line (no window closed after it: what follows goes out unchanged);
    without a Relation message of the signalling table, at the capture's end. A read-only
    snapshot's window closes at a commit, an idle poll or a streamed change, by
    transaction ids only the window knows: with a chunk line of one, the span ends at the
    capture's end."""
    if CHUNK_COLUMN not in raw.columns:
        return None
    lines = sorted((r["position"], r["_signal"], r["_table"], bool(r["_read_only"]))
                   for r in control_rows if r["_chunk"])
    if not lines:
        return None
    signals = {s for _, s, _, _ in lines if s}
    signal = lines[0][1] or ""
    tables = tuple(dict.fromkeys(t for _, _, t, _ in lines if t))
    names = {tuple(s.split(".")[-2:]) for s in signals}
    relids = sorted({m.relation_id for _, _, m in control
                     if isinstance(m, Relation) and (m.namespace, m.name) in names})
    first, last_line = lines[0][0], lines[-1][0]
    if not relids or any(read_only for _, _, _, read_only in lines):
        return WindowSpan(first, None, signal, tables)
    data = F.col("data")
    ids = [r.to_bytes(4, "big") for r in relids]
    types = list(_CHANGE_TYPES)
    heads = [t + i for t in types for i in ids]
    change = (F.substring(data, 1, 5).isin(*heads)
              | (F.substring(data, 1, 1).isin(*types) & F.substring(data, 6, 4).isin(*ids)))
    found = (raw.filter((F.col("position") > F.lit(last_line)) & change)
             .agg(F.max("position")).first())
    last = found[0] if found is not None and found[0] is not None else last_line
    return WindowSpan(first, int(last), signal, tables)


class WindowDecoder:
    """A task's decoder of the chunk ``chunk`` of ``plan`` that holds a :class:`WindowSpan`:
    one :class:`~pgcdc_events.events.EventDecoder`, primed at the chunk's start, its
    records passed through the event layer's
    :class:`~pgcdc_events.events.incremental.RecordedChunks`, which takes the chunk lines.
    Feed it the chunk's rows in position order (:meth:`feed`), then :meth:`finish`."""

    def __init__(self, plan: ChunkPlan, chunk: int,
                 make_decoder: Callable[[], EventDecoder],
                 state: Mapping[str, Any] | None = None) -> None:
        self.chunks = ChunkDecoder(plan, make_decoder)
        self.chunk = chunk
        #: The read-only window the chunk starts with (its
        #: :meth:`~pgcdc_events.events.incremental.ReadOnlyChunkWindow.export_state`), from
        #: the micro-batch before; ``None``: none.
        self.state = state
        self._recorded: Any = None

    def feed(self, positions: Any, lsns: Any, data: Any, snapshot: Any, lines: Any
             ) -> Iterator[tuple[int, int, ChangeRecord]]:
        """The records of rows (numpy-convertible ``positions``, ``lsns``, ``snapshot`` or
        ``None``, Arrow ``data`` and ``lines``: :data:`CHUNK_COLUMN`) as ``(position,
        index, record)``; errors are :class:`~pgcdc_events.events.chunks.ChunkError`
        naming the position."""
        recorded = self._recorded
        if recorded is None:
            from pgcdc_events.events.incremental import (  # noqa: PLC0415
                ReadOnlyChunkWindow,
                RecordedChunks,
            )

            recorded = self._recorded = RecordedChunks(self.chunks.start(self.chunk))
            if self.state is not None:
                recorded.window = ReadOnlyChunkWindow.from_state(recorded.decoder, self.state)
        decoder = recorded.decoder
        flags = [False] * len(data) if snapshot is None else np.asarray(snapshot, np.bool_)
        texts = lines.to_pylist() if lines is not None else [None] * len(data)
        for position, lsn, raw, flag, text in zip(
                np.asarray(positions, np.int64).tolist(), np.asarray(lsns, np.int64).tolist(),
                data.to_pylist(), flags, texts, strict=True):
            try:
                if text is not None:
                    line = read_chunk_line(text)
                    if line is None:
                        raise SparkDecodeError(f"not a chunk line: {text[:80]!r}")
                    # a read-only window the capture closed here: its r events
                    for index, record in enumerate(recorded.chunk(
                            line.chunk, where=f"position {position}")):
                        yield position, index, record
                    continue
                records = recorded.through(decoder.iter_feed(raw, lsn, snapshot=bool(flag)))
                if raw[:1] in _COMMITS:  # a read-only window may close at a commit
                    records = itertools.chain(records, recorded.committed(lsn))
                for index, record in enumerate(records):
                    yield position, index, record
            except PgCdcError as exc:
                raise ChunkError(exc, position) from None

    @property
    def quiet(self) -> bool:
        """Whether no chunk is in flight after the rows fed so far: every chunk line's
        window closed (or none came), so that what follows goes through the event layer's
        window unchanged and a decoder started afresh there gives the same records."""
        recorded = self._recorded
        window = None if recorded is None else recorded.window
        return window is None or window.pending_chunk is None

    def export(self) -> dict[str, Any] | None:
        """When :attr:`quiet`: the read-only window's state after the rows fed so far
        (:meth:`~pgcdc_events.events.incremental.ReadOnlyChunkWindow.export_state`), which
        a decoder started there needs to go on as this one would (its last watermarks,
        the last change's sequence); ``None`` without a read-only window (a writable
        snapshot's window carries nothing from one closed window to the next)."""
        from pgcdc_events.events.incremental import ReadOnlyChunkWindow  # noqa: PLC0415

        recorded = self._recorded
        window = self.state if recorded is None else recorded.window
        if isinstance(window, ReadOnlyChunkWindow):
            return window.export_state()
        return dict(window) if isinstance(window, Mapping) else None

    def finish(self) -> None:
        """The chunk's rows were all fed."""
        if self._recorded is not None:
            self.chunks.end(self.chunk)
            self._recorded = None
