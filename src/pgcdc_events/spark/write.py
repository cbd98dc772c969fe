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

import re
import uuid
from collections.abc import Iterator, Sequence
from typing import Any, Final, Literal

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.fs as pafs  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from pyspark.sql.types import LongType, StringType, StructField, StructType

from pgcdc_events.events.chunks import ChunkPlan
from pgcdc_events.events.jsonconv import JsonRecordWriter
from pgcdc_events.spark._session import map_in_arrow
from pgcdc_events.spark.capture import filesystem
from pgcdc_events.spark.columnar import ColumnarRun
from pgcdc_events.spark.decode import DecodedCapture, DecodingSource, decode_items
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.layout import RUN_KIND, TableLayout, record_parts, record_table

__all__ = ["table_directory", "write_tables"]

_WRITTEN: Final = StructType([StructField("table", StringType(), False),
                              StructField("rows", LongType(), False)])
_WRITTEN_ARROW: Final = pa.schema([pa.field("table", pa.string(), False),
                                   pa.field("rows", pa.int64(), False)])
Format = Literal["parquet", "json"]
#: How many of a table's records (not in runs) a task holds before writing them.
_PENDING: Final = 4096


def table_directory(table: str) -> str:
    """The directory name of ``schema.table`` (path separators replaced)."""
    return re.sub(r"[\\/\x00]", "_", table)


class _Writer:
    """The ``mapInArrow`` function: one task decodes its chunks and writes its tables' events
    itself, each table's in the decoder's order, into files named by the chunk they start
    at (reading a table's files in name order gives the decoder's order)."""

    def __init__(self, source: DecodingSource, root: str,
                 tables: dict[str, tuple[str, TableLayout]], fmt: Format, token: str,
                 tombstones: bool = True) -> None:
        # what the tasks need of the source (not its DataFrame)
        self.plan, self.make, self.files = source.plan, source.make, source.files
        self.root, self.tables, self.fmt = root, tables, fmt
        self.token, self.tombstones = token, tombstones

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:  # noqa: C901, PLR0915
        plan = self.plan if isinstance(self.plan, ChunkPlan) else self.plan.value
        json = self.fmt == "json"
        render = JsonRecordWriter.for_config(self.make.config).record_line if json else None
        fs, base = filesystem(self.root)
        counts: dict[str, int] = {}
        files: dict[str, Any] = {}
        pending: dict[str, list[Any]] = {}
        opened_at = -2  # the chunk the open files start at
        last = -2

        def flush(table: str) -> None:
            rows = pending.pop(table, None)
            if not rows:
                return
            out = files.get(table)
            if out is None:
                out = files[table] = self._open(fs, base, table, opened_at)
            if json:
                out.write("".join(line + "\n" for line in rows).encode("utf-8"))
                counts[table] = counts.get(table, 0) + len(rows)
                return
            for part in self.tables[table][1].batches(rows, tombstones=self.tombstones):
                out.write_batch(part)
                counts[table] = counts.get(table, 0) + part.num_rows

        def close() -> None:
            for table in list(pending):
                flush(table)
            for out in files.values():
                out.close()
            files.clear()

        name: str | None = None
        try:
            for chunk, item in decode_items(plan, self.make, batches, files=self.files,
                                            columnar=not json):
                if chunk != last:
                    if chunk != last + 1:  # not the next chunk: files of its own
                        close()
                        opened_at = chunk
                    last = chunk
                if isinstance(item, ColumnarRun):
                    name = item.qualified
                    if name in self.tables:
                        flush(name)
                        pending[name] = [(0, 0, RUN_KIND, 0, item.batch)]
                        flush(name)
                    continue
                position, index, record = item
                name = record_table(record, name)
                if name is None or name not in self.tables:
                    continue
                if record.kind == "tombstone" and not self.tombstones:
                    continue
                rows = pending.setdefault(name, [])
                rows.append(render(record) if render is not None else
                            (position, index, record.kind, record.lsn, record_parts(record)))
                if len(rows) >= _PENDING:
                    flush(name)
        finally:
            close()
        if counts:
            yield pa.RecordBatch.from_pydict({"table": list(counts),
                                              "rows": list(counts.values())},
                                             schema=_WRITTEN_ARROW)

    def _open(self, fs: Any, base: str, table: str, chunk: int) -> Any:
        directory, layout = self.tables[table]
        name = f"{base}/{directory}/part-{max(0, chunk):08d}-{self.token}"
        if self.fmt == "json":
            return fs.open_output_stream(name + ".json")
        return pq.ParquetWriter(name + ".parquet", layout.batch([]).schema, filesystem=fs)


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
    fs, base = filesystem(path)
    for directory, _ in chosen.values():
        target = f"{base}/{directory}"
        if fs.get_file_info(target).type != pafs.FileType.NotFound:
            fs.delete_dir(target)
        fs.create_dir(target, recursive=True)
    if decoded.source is None:
        raise SparkDecodeError("write_tables needs a capture decoded by decode_capture")
    writer = _Writer(decoded.source, path, chosen, fmt, uuid.uuid4().hex[:12],
                     tombstones=fmt == "json" or decoded.tombstones)
    written: dict[str, int] = {}
    for row in map_in_arrow(decoded.source.frame, writer, _WRITTEN).collect():
        written[row["table"]] = written.get(row["table"], 0) + row["rows"]
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
