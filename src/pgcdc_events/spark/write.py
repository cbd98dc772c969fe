"""Every table of a decoded capture written in one Spark job.

A table's events DataFrame is a projection of the persisted records, and Spark's writers
write one DataFrame, of one schema, per job: a capture of hundreds of tables would cost
hundreds of jobs. :func:`write_tables` writes them all in one: the records are
partitioned by table and sorted, and each task writes its tables' files itself
(``pyarrow.fs``: local paths and the URIs it knows, ``s3://``, ``gs://``, ``hdfs://``...),
one dataset per table under ``path/schema.table/``: Parquet events of the table's Spark
schema, or the JsonConverter lines ``pgcdc-events decode`` writes, in the decoder's order.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator, Sequence
from typing import Any, Final, Literal

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.fs as pafs  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.types import LongType, StringType, StructField, StructType

from pgcdc_events.spark._session import map_in_arrow
from pgcdc_events.spark.decode import DecodedCapture
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.layout import TABLE_KINDS, TableLayout

__all__ = ["table_directory", "write_tables"]

_WRITTEN: Final = StructType([StructField("table", StringType(), False),
                              StructField("rows", LongType(), False)])
_WRITTEN_ARROW: Final = pa.schema([pa.field("table", pa.string(), False),
                                   pa.field("rows", pa.int64(), False)])
Format = Literal["parquet", "json"]


def table_directory(table: str) -> str:
    """The directory name of ``schema.table`` (path separators replaced)."""
    return re.sub(r"[\\/\x00]", "_", table)


def _filesystem(path: str) -> tuple[Any, str]:
    if "://" not in path:
        path = os.path.abspath(path)
    return pafs.FileSystem.from_uri(path if "://" in path else f"file://{path}")  # type: ignore[no-any-return]


class _Writer:
    """The ``mapInArrow`` function: one task's records, sorted by table and order, written."""

    def __init__(self, root: str, tables: dict[str, tuple[str, TableLayout]], fmt: Format,
                 token: str, tombstones: bool = True) -> None:
        self.root, self.tables, self.fmt, self.token = root, tables, fmt, token
        self.tombstones = tombstones

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext  # noqa: PLC0415

        context = TaskContext.get()
        part = context.partitionId() if context is not None else 0
        fs, base = _filesystem(self.root)
        counts: dict[str, int] = {}
        current: tuple[str, Any] | None = None

        def close() -> None:
            if current is not None:
                current[1].close()

        try:
            for batch in batches:
                names = batch.column("table").to_pylist()
                start = 0
                while start < len(names):
                    table = names[start]
                    end = start
                    while end < len(names) and names[end] == table:
                        end += 1
                    piece = batch.slice(start, end - start)
                    if current is None or current[0] != table:
                        close()
                        current = (table, self._open(fs, base, table, part))
                    written = self._write(current[1], table, piece)
                    counts[table] = counts.get(table, 0) + written
                    start = end
        finally:
            close()
        if counts:
            yield pa.RecordBatch.from_pydict({"table": list(counts),
                                              "rows": list(counts.values())},
                                             schema=_WRITTEN_ARROW)

    def _open(self, fs: Any, base: str, table: str, part: int) -> Any:
        directory, layout = self.tables[table]
        name = f"{base}/{directory}/part-{part:05d}-{self.token}"
        if self.fmt == "json":
            return fs.open_output_stream(name + ".json")
        return pq.ParquetWriter(name + ".parquet", layout.batch([]).schema, filesystem=fs)

    def _write(self, out: Any, table: str, piece: Any) -> int:
        """Write a piece of ``table``'s records rows; the number of events written."""
        if self.fmt == "json":
            out.write("".join(line + "\n" for line in piece.column("line").to_pylist()
                              ).encode("utf-8"))
            return int(piece.num_rows)
        _, layout = self.tables[table]
        written = 0
        for part in layout.batches(zip(
                piece.column("position").to_pylist(), piece.column("index").to_pylist(),
                piece.column("kind").to_pylist(), piece.column("lsn").to_pylist(),
                piece.column("payload").to_pylist(), strict=True), tombstones=self.tombstones):
            out.write_batch(part)
            written += part.num_rows
        return written


def write_tables(decoded: DecodedCapture, path: str, *, tables: Sequence[str] | None = None,
                 fmt: Format = "parquet") -> dict[str, int]:
    """Write ``tables`` (default: all) under ``path`` in one Spark job: each table's
    directory (``schema.table``) replaced by a dataset of its events (Parquet, the
    table's Spark schema; tombstones as ``decode_capture`` was asked) or, with
    ``fmt="json"``, its JsonConverter lines (needs ``lines=True``; tombstones always).
    Returns the rows written per table."""
    names = list(decoded.tables if tables is None else tables)
    if fmt == "json" and not decoded.lines:
        raise SparkDecodeError("JSON lines need decode_capture(..., lines=True)")
    chosen = {n: (table_directory(n), decoded.layout(n)) for n in names}
    fs, base = _filesystem(path)
    for directory, _ in chosen.values():
        target = f"{base}/{directory}"
        if fs.get_file_info(target).type != pafs.FileType.NotFound:
            fs.delete_dir(target)
        fs.create_dir(target, recursive=True)
    kinds = list(TABLE_KINDS)
    if fmt == "parquet" and not decoded.tombstones:
        kinds.remove("tombstone")  # (and from runs, when written)
    rows = decoded.records.filter(F.col("table").isin(*chosen) & F.col("kind").isin(*kinds))
    partitions = max(1, min(len(chosen), decoded.spark.sparkContext.defaultParallelism * 2))
    ordered = (rows.select("table", "position", "index", "kind", "lsn", "payload", "line")
               .repartition(partitions, "table")
               .sortWithinPartitions("table", "position", "index"))
    writer = _Writer(path, chosen, fmt, uuid.uuid4().hex[:12],
                     tombstones=fmt == "json" or decoded.tombstones)
    written = {r["table"]: r["rows"] for r in map_in_arrow(ordered, writer, _WRITTEN).collect()}
    out: dict[str, int] = {}
    for name in names:
        count = written.get(name, 0)
        if not count:  # an empty dataset still has its schema
            directory, layout = chosen[name]
            if fmt == "parquet":
                pq.write_table(pa.Table.from_batches([], schema=layout.batch([]).schema),
                               f"{base}/{directory}/part-00000-empty.parquet", filesystem=fs)
        out[name] = count
    return out
