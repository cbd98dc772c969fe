"""Raw WAL DataFrames decoded by the event layer, in one pass, into per-table DataFrames.

:func:`decode_capture` takes a DataFrame with the capture columns (``lsn``, ``data``)
and an explicit ordering column, and returns a :class:`DecodedCapture`. The records are
:class:`~pgcdc_events.events.EventDecoder`'s own: the capture is cut into chunks of
whole transactions (:mod:`pgcdc_events.events.chunks`: the few control messages are
collected to the driver to find the cuts and each chunk's prelude), every chunk is
decoded by an ``EventDecoder`` in a Spark task, and the result is one DataFrame of
records (:attr:`DecodedCapture.records`: one row per record, every table's, persisted
once). Each table's events DataFrame is a projection of it: the table's rows, given the
table's Spark types.

Columns of an event DataFrame: ``key`` (the record key struct; absent for a table that
never has one), the envelope ``before``, ``after``, ``source``, ``transaction`` (null
unless ``provide.transaction.metadata``), ``op``, ``ts_ms``, ``ts_us``, ``ts_ns``, and
the metadata ``_kind`` (``change``, ``truncate`` or ``tombstone``), ``_position``
(``struct<message, index>``: sorting by it gives the decoder's order), ``_lsn`` and
``_related_key`` (the other key of a primary-key change, which Debezium puts in the
``__debezium.newkey``/``oldkey`` headers).

:meth:`DecodedCapture.changes` is a table's flattened changes instead (its columns,
``__op``, ``__sequence``: what the apply targets consume), made in the same tasks by
:class:`~pgcdc_events.spark.flatten.ChangesFlattener` with no event built for a
column-wise run.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import attrs
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.compute as pc  # type: ignore[import-untyped]
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    IntegerType,
    IntegralType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from pgcdc_events.events.chunks import CONTROL_TYPES, ChunkDecoder, ChunkPlan, plan_chunks
from pgcdc_events.events.chunks import control_messages as parse_control
from pgcdc_events.events.config import EventConfig
from pgcdc_events.events.decoder import EventDecoder
from pgcdc_events.events.jsonconv import JsonRecordWriter
from pgcdc_events.events.tables import TableSchema
from pgcdc_events.protocol.messages import Relation
from pgcdc_events.spark._session import map_in_arrow, to_arrow_table
from pgcdc_events.spark.capture import (
    CHUNK_COLUMN,
    FileCapture,
    WindowDecoder,
    control_columns,
    file_capture,
    window_span,
)
from pgcdc_events.spark.columnar import MIN_RUN, ColumnarRun, RunDecoder
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.flatten import ChangesFlattener, FlatStats, changes_type
from pgcdc_events.spark.layout import (
    RUN_KIND,
    TABLE_KINDS,
    TableLayout,
    record_parts,
    record_payload,
    record_table,
    run_payload,
)
from pgcdc_events.spark.schema import Flavour, SparkSchemaOptions
from pgcdc_events.types.catalog import CatalogSnapshot

__all__ = ["RECORDS_TYPE", "ChangesFunction", "DecodedCapture", "DecodingSource",
           "TableChangesFunction", "capture_tables", "decode_capture", "decode_items",
           "table_changes"]

#: One row per record: where it goes, what it is, where it came from, and its contents
#: (``payload``: key, value and related key for :class:`TableLayout`; ``line``: the
#: JsonConverter line ``pgcdc-events decode`` writes).
RECORDS_TYPE: Final = StructType([
    StructField("topic", StringType(), False), StructField("table", StringType(), True),
    StructField("kind", StringType(), False), StructField("op", StringType(), True),
    StructField("position", LongType(), False),
    StructField("index", IntegerType(), False), StructField("lsn", LongType(), True),
    StructField("txId", LongType(), True), StructField("payload", BinaryType(), True),
    StructField("line", StringType(), True),
])
_RECORDS_ARROW: Final = pa.schema([
    pa.field("topic", pa.string(), False), pa.field("table", pa.string()),
    pa.field("kind", pa.string(), False),
    pa.field("op", pa.string()), pa.field("position", pa.int64(), False),
    pa.field("index", pa.int32(), False), pa.field("lsn", pa.int64()),
    pa.field("txId", pa.int64()), pa.field("payload", pa.binary()),
    pa.field("line", pa.string()),
])
_BATCH: Final = 4096


class _Decode:
    """What every task's decoder is made from (picklable)."""

    def __init__(self, config: EventConfig, catalog: CatalogSnapshot | None,
                 clock: Callable[[], int], run_id: str) -> None:
        self.config, self.catalog, self.clock, self.run_id = config, catalog, clock, run_id
        #: The chunk holding the incremental snapshot's windows (capture.WindowSpan), decoded
        #: by a WindowDecoder; None: no chunk lines.
        self.window: int | None = None
        #: The read-only window's state at that chunk's start (WindowDecoder's ``state``):
        #: what decode_stream carries from one micro-batch to the next; None: none.
        self.window_state: dict[str, Any] | None = None

    def decoder(self) -> EventDecoder:
        return EventDecoder(self.config, catalog=self.catalog, clock=self.clock,
                            run_id=self.run_id)


def decode_items(plan: ChunkPlan, make: _Decode, batches: Iterator[Any], *,
                 files: FileCapture | None = None, columnar: bool = True,
                 min_run: int = MIN_RUN) -> Iterator[tuple[int, Any]]:
    """A task's decoding: its rows in (Arrow batches ``(_chunk, position, lsn, data[,
    snapshot])`` in chunk and position order; with ``files``, batches of chunk numbers
    (column ``id``) whose rows the task reads itself), the
    :class:`~pgcdc_events.spark.columnar.RunDecoder`'s items out, each with its chunk."""
    runner = RunDecoder(ChunkDecoder(plan, make.decoder), min_run=min_run, columnar=columnar)
    window = None if make.window is None else WindowDecoder(plan, make.window, make.decoder,
                                                            make.window_state)
    if files is not None:
        chunks = [int(c) for batch in batches for c in batch.column("id").to_pylist()]
        for chunk_ids, positions, lsns, data, snapshot in files.rows(plan.boundaries, chunks):
            for item in runner.feed(chunk_ids, positions, lsns, data, snapshot):
                yield runner.chunk or 0, item
    else:
        for batch in batches:
            if window is not None:  # the window's chunk to its decoder, the rest as before
                ids = batch.column("_chunk").to_numpy(zero_copy_only=False)
                lo, hi = (int(i) for i in ids.searchsorted([window.chunk, window.chunk + 1]))
                if lo < hi:
                    yield from _fed(runner, batch.slice(0, lo))
                    part = batch.slice(lo, hi - lo)
                    for item in window.feed(*_columns(part)[1:], part.column(CHUNK_COLUMN)):
                        yield window.chunk, item
                    batch = batch.slice(hi)
            yield from _fed(runner, batch)
        if window is not None:
            window.finish()
    runner.finish()


def _columns(batch: Any) -> tuple[Any, Any, Any, Any, Any]:
    """A batch's ``_chunk``, ``position``, ``lsn`` (numpy), ``data`` (Arrow) and
    ``snapshot`` (numpy, or None)."""
    return (batch.column("_chunk").to_numpy(zero_copy_only=False),
            batch.column("position").to_numpy(zero_copy_only=False),
            batch.column("lsn").to_numpy(zero_copy_only=False), batch.column("data"),
            batch.column("snapshot").to_numpy(zero_copy_only=False)
            if "snapshot" in batch.schema.names else None)


def _fed(runner: RunDecoder, batch: Any) -> Iterator[tuple[int, Any]]:
    """The items of ``batch``'s rows fed to ``runner``, each with its chunk."""
    for item in runner.feed(*_columns(batch)):
        yield runner.chunk or 0, item


def _plan(plan: Any) -> ChunkPlan:
    """A broadcast plan's value (or the plan itself)."""
    return plan if isinstance(plan, ChunkPlan) else plan.value


class RecordsFunction:
    """The ``mapInArrow`` function of the decoding pass: rows ``(_chunk, position, lsn, data,
    snapshot)`` sorted by chunk and position in, :data:`RECORDS_TYPE` batches out.

    Runs of at least ``min_run`` changes are decoded column-wise
    (:class:`~pgcdc_events.spark.columnar.RunDecoder`) into one row of kind
    :data:`~pgcdc_events.spark.layout.RUN_KIND` each, unless ``columnar`` is false or the
    rows are rendered as JSON lines (``lines``)."""

    def __init__(self, plan: Any, make: _Decode, *, payload: bool, lines: bool,
                 columnar: bool = True, min_run: int = MIN_RUN,
                 files: FileCapture | None = None, counters: tuple[Any, Any] | None = None
                 ) -> None:
        self.plan = plan  # a broadcast ChunkPlan, or the plan itself
        self.make = make
        self.payload = payload
        self.lines = lines
        self.columnar = columnar
        self.min_run = min_run
        self.files = files  # the tasks read their chunks' rows (batches of chunk numbers in)
        self.counters = counters  # Spark accumulators: chunks decoded, records made

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        # Runs of changes are decoded column-wise into one row each, for the tables'
        # projections; JSON lines are rendered record by record.
        items = decode_items(_plan(self.plan), self.make, batches, files=self.files,
                             min_run=self.min_run,
                             columnar=self.columnar and self.payload and not self.lines)
        render = (JsonRecordWriter.for_config(self.make.config).record_line if self.lines
                  else None)
        out: dict[str, list[Any]] = {name: [] for name in _RECORDS_ARROW.names}
        name: str | None = None
        chunks: set[int] = set()
        made = 0
        for chunk, item in items:
            chunks.add(chunk)
            made += 1
            if isinstance(item, ColumnarRun):
                made += item.batch.num_rows - 1
                name = item.qualified
                first = item.batch.slice(0, 1).to_pylist()[0]
                self._append(out, item.table.topic, name, RUN_KIND, None,
                             first["position"], 0, first["lsn"], first["source"]["txId"],
                             run_payload(item.batch), None)
            else:
                position, index, record = item
                value = record.value
                name = record_table(record, name)
                table = name is not None
                self._append(
                    out, record.topic, name, record.kind, record.op, position, index,
                    record.lsn,
                    value["source"]["txId"] if table and value is not None else None,
                    record_payload(record) if self.payload and table else None,
                    render(record) if render is not None else None)
            if len(out["topic"]) >= _BATCH:
                yield pa.RecordBatch.from_pydict(out, schema=_RECORDS_ARROW)
                out = {n: [] for n in _RECORDS_ARROW.names}
        if out["topic"]:
            yield pa.RecordBatch.from_pydict(out, schema=_RECORDS_ARROW)
        if self.counters is not None:
            self.counters[0].add(len(chunks))
            self.counters[1].add(made)

    @staticmethod
    def _append(out: dict[str, list[Any]], *row: Any) -> None:
        for name, value in zip(_RECORDS_ARROW.names, row, strict=True):
            out[name].append(value)


class EventsFunction:
    """The ``mapInArrow`` function of a table's projection: its records in, events out."""

    def __init__(self, layout: TableLayout, tombstones: bool = True, *,
                 strict: bool = False) -> None:
        self.layout = layout
        self.tombstones = tombstones
        self.strict = strict  # refuse a column the layout does not have (a stream's)

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            if batch.num_rows:
                yield from self.layout.batches(zip(
                    batch.column("position").to_pylist(), batch.column("index").to_pylist(),
                    batch.column("kind").to_pylist(), batch.column("lsn").to_pylist(),
                    batch.column("payload").to_pylist(), strict=True),
                    tombstones=self.tombstones, strict=self.strict)


class TableEventsFunction:
    """The ``mapInArrow`` function decoding the capture and projecting one table in the
    same task (:meth:`DecodedCapture.table` of a capture not persisted): no records rows
    in between, runs handed over as Arrow batches."""

    def __init__(self, plan: Any, make: _Decode, layout: TableLayout, tombstones: bool, *,
                 files: FileCapture | None = None) -> None:
        self.plan, self.make, self.layout = plan, make, layout
        self.tombstones, self.files = tombstones, files

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        wanted = self.layout.table
        pending: list[tuple[int, int, str, int, Any]] = []
        name: str | None = None
        for _, item in decode_items(_plan(self.plan), self.make, batches, files=self.files):
            if isinstance(item, ColumnarRun):
                name = item.qualified
                if name != wanted:
                    continue
                if pending:
                    yield from self.layout.batches(pending, tombstones=self.tombstones)
                    pending = []
                yield from self.layout.batches([(0, 0, RUN_KIND, 0, item.batch)],
                                               tombstones=self.tombstones)
                continue
            position, index, record = item
            name = record_table(record, name)
            if name != wanted or (record.kind == "tombstone" and not self.tombstones):
                continue
            pending.append((position, index, record.kind, record.lsn, record_parts(record)))
            if len(pending) >= _BATCH:
                yield from self.layout.batches(pending, tombstones=self.tombstones)
                pending = []
        if pending:
            yield from self.layout.batches(pending, tombstones=self.tombstones)


class TableChangesFunction:
    """The ``mapInArrow`` function decoding the capture and flattening one table's changes
    in the same task (:meth:`DecodedCapture.changes` of a capture not persisted, and a
    stream's micro-batch whose targets all take one table's changes): runs are flattened
    column-wise (:class:`~pgcdc_events.spark.flatten.ChangesFlattener`), with no event
    built for them. ``counters``: Spark accumulators of the rows made from runs and from
    single records; ``decoded``: of the chunks decoded and the records made (each run's
    records counted), as :class:`RecordsFunction` counts them; ``strict`` refuses a
    column the layout does not have (a stream's)."""

    def __init__(self, plan: Any, make: _Decode, layout: TableLayout, *,
                 files: FileCapture | None = None, counters: tuple[Any, Any] | None = None,
                 decoded: tuple[Any, Any] | None = None, strict: bool = False) -> None:
        self.plan, self.make, self.layout = plan, make, layout
        self.files, self.counters = files, counters
        self.decoded, self.strict = decoded, strict

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        wanted = self.layout.table
        flat = ChangesFlattener(self.layout, strict=self.strict)
        pending: list[tuple[int, int, str, int, Any]] = []
        name: str | None = None
        chunks: set[int] = set()
        made = 0
        for chunk, item in decode_items(_plan(self.plan), self.make, batches,
                                        files=self.files):
            chunks.add(chunk)
            made += 1
            if isinstance(item, ColumnarRun):
                made += item.batch.num_rows - 1
                name = item.qualified
                if name != wanted:
                    continue
                if pending:
                    yield from flat.batches(pending)
                    pending = []
                out = flat.run(item.batch)
                if out.num_rows:
                    yield out
                continue
            position, index, record = item
            name = record_table(record, name)
            if name != wanted or record.kind == "tombstone":
                continue
            pending.append((position, index, record.kind, record.lsn, record_parts(record)))
            if len(pending) >= _BATCH:
                yield from flat.batches(pending)
                pending = []
        if pending:
            yield from flat.batches(pending)
        _count(self.counters, flat.stats)
        if self.decoded is not None:
            self.decoded[0].add(len(chunks))
            self.decoded[1].add(made)


class ChangesFunction:
    """The ``mapInArrow`` function flattening a table's records (persisted records rows, or
    a stream's micro-batch) into its changes; ``strict`` refuses a column the layout does
    not have (a stream's)."""

    def __init__(self, layout: TableLayout, counters: tuple[Any, Any] | None = None, *,
                 strict: bool = False) -> None:
        self.layout, self.counters, self.strict = layout, counters, strict

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        flat = ChangesFlattener(self.layout, strict=self.strict)
        for batch in batches:
            if batch.num_rows:
                yield from flat.batches(zip(
                    batch.column("position").to_pylist(), batch.column("index").to_pylist(),
                    batch.column("kind").to_pylist(), batch.column("lsn").to_pylist(),
                    batch.column("payload").to_pylist(), strict=True))
        _count(self.counters, flat.stats)


def table_changes(records: DataFrame, layout: TableLayout,
                  counters: tuple[Any, Any] | None = None, *, strict: bool = False
                  ) -> DataFrame:
    """``layout``'s table's flattened changes (:func:`~pgcdc_events.spark.flatten.changes_type`)
    from :data:`RECORDS_TYPE` rows (a capture's persisted records, or a stream's
    micro-batch), by :class:`ChangesFunction`: its runs flattened with no event built, no
    tombstones. ``counters``: accumulators of the rows made from runs and from single
    records; ``strict`` refuses a column the layout does not have (a stream's)."""
    rows = records.filter((F.col("table") == layout.table) & F.col("kind").isin(*TABLE_KINDS)
                          & (F.col("kind") != "tombstone"))
    return map_in_arrow(rows.select("position", "index", "kind", "lsn", "payload"),
                        ChangesFunction(layout, counters, strict=strict), changes_type(layout))


def _count(counters: tuple[Any, Any] | None, stats: FlatStats) -> None:
    if counters is not None:
        counters[0].add(stats.runs)
        counters[1].add(stats.records)


def capture_tables(schema: Iterable[tuple[int, int, Any]], config: EventConfig,
                   catalog: CatalogSnapshot | None) -> dict[str, list[TableSchema]]:
    """Every included table's schema versions, as an ``EventDecoder`` fed the capture's
    Relation and Type messages builds them (consecutive equal versions are one)."""
    decoder = EventDecoder(config, catalog=catalog)
    tables: dict[str, list[TableSchema]] = {}
    for _, lsn, message in schema:
        decoder.handle(message, lsn)
        if isinstance(message, Relation):
            built = decoder.table(message.relation_id)
            if built is None:
                continue
            versions = tables.setdefault(built.qualified, [])
            if not versions or (versions[-1].value_schema, versions[-1].key_schema) != (
                    built.value_schema, built.key_schema):
                versions.append(built)
    return tables


class DecodedCapture:
    """A decoded capture: every record in :attr:`records`, each table's events by
    :meth:`table`.

    ``tables`` are the captured tables (``schema.table``) in order of appearance,
    ``plan`` the chunks the capture was decoded in. Call :meth:`unpersist` when done.
    """

    def __init__(self, records: DataFrame, plan: ChunkPlan,
                 versions: dict[str, list[TableSchema]], config: EventConfig,
                 options: SparkSchemaOptions, *, tombstones: bool, lines: bool,
                 source: DecodingSource | None = None) -> None:
        self.records = records
        self.source = source
        self.plan = plan
        self.config = config
        self.options = options
        self.tombstones = tombstones
        self.lines = lines
        self.spark = records.sparkSession
        self.versions = versions
        self._layouts = {name: TableLayout(name, v, options) for name, v in versions.items()}
        self._tables: dict[str, DataFrame] = {}
        self._flat_counters: tuple[Any, Any] | None = None

    @property
    def tables(self) -> tuple[str, ...]:
        """The captured tables (``schema.table``) the configuration includes."""
        return tuple(self._layouts)

    def __getitem__(self, table: str) -> DataFrame:
        return self.table(table)

    def layout(self, table: str) -> TableLayout:
        """The output shape of ``table`` (its union of schema versions)."""
        layout = self._layouts.get(table)
        if layout is None:
            raise SparkDecodeError(f"no table {table!r} in the capture; captured: "
                                   f"{', '.join(self._layouts) or 'none'}")
        return layout

    def topic(self, table: str) -> str:
        """The Kafka topic Debezium writes ``table``'s records to."""
        return self.layout(table).topic

    def table_records(self, table: str) -> DataFrame:
        """The rows of :attr:`records` that are ``table``'s events (tombstones included)."""
        self.layout(table)  # an unknown table is named in the error
        return self.records.filter((F.col("table") == table)
                                   & F.col("kind").isin(*TABLE_KINDS))

    def table(self, table: str) -> DataFrame:
        """The events of ``table`` (``schema.table``): a lazy projection of :attr:`records`
        when they are persisted (``decode_capture(persist=True)``, the default), else a
        decoding pass of its own that keeps only this table's events (no records in
        between: the fastest way to one table, but each table's DataFrame decodes the
        capture again)."""
        cached = self._tables.get(table)
        if cached is None and self.source is not None and not self.records.is_cached:
            layout = self.layout(table)
            source = self.source
            cached = self._tables[table] = map_in_arrow(
                source.frame, TableEventsFunction(source.plan, source.make, layout,
                                                  self.tombstones, files=source.files),
                layout.output_type())
        if cached is None:
            layout = self.layout(table)
            rows = self.table_records(table)
            if not self.tombstones:
                rows = rows.filter(F.col("kind") != "tombstone")
            cached = self._tables[table] = map_in_arrow(
                rows.select("position", "index", "kind", "lsn", "payload"),
                EventsFunction(layout, self.tombstones), layout.output_type())
        return cached

    def changes(self, table: str) -> DataFrame:
        """The flattened changes of ``table`` (``schema.table``), what the apply targets
        consume (:func:`~pgcdc_events.spark.autocdc.changes_from_events` of its events):
        its columns, ``__op`` and ``__sequence``; no tombstones; a truncate is a row of
        nulls. Column-wise runs are flattened in the task, no event built for them: the
        fast way to a target. Made from the persisted records, or, for a capture not
        persisted, by a decoding pass of its own. :meth:`flat_counts` tells how many rows
        each way."""
        layout = self.layout(table)
        if self._flat_counters is None:
            context = self.spark.sparkContext
            self._flat_counters = (context.accumulator(0), context.accumulator(0))
        counters = self._flat_counters
        if self.source is not None and not self.records.is_cached:
            source = self.source
            return map_in_arrow(source.frame, TableChangesFunction(
                source.plan, source.make, layout, files=source.files, counters=counters),
                changes_type(layout))
        return table_changes(self.records, layout, counters)

    def flat_counts(self) -> tuple[int, int]:
        """Rows of :meth:`changes` made so far (by the actions run on them) straight from
        column-wise runs, and from single records' events."""
        if self._flat_counters is None:
            return 0, 0
        return int(self._flat_counters[0].value), int(self._flat_counters[1].value)

    def json_lines(self, table: str) -> DataFrame:
        """``table``'s JsonConverter lines (column ``value``) in the decoder's order, in one
        partition: the records ``pgcdc-events decode`` writes (needs ``lines=True``)."""
        if not self.lines:
            raise SparkDecodeError("JSON lines need decode_capture(..., lines=True)")
        return (self.table_records(table).repartition(1)
                .sortWithinPartitions("position", "index").select(F.col("line").alias("value")))

    def to_arrow(self, tables: Iterable[str] | None = None) -> dict[str, Any]:
        """The events of several tables as Arrow tables in the decoder's order (everything
        comes to the driver: for small captures, tests and notebooks)."""
        names = list(self.tables if tables is None else tables)
        with ThreadPoolExecutor(max_workers=max(1, min(4, len(names)))) as pool:
            results = pool.map(lambda name: by_position(to_arrow_table(self.table(name))), names)
            return dict(zip(names, results, strict=True))

    def unpersist(self) -> None:
        """Release the persisted records."""
        self.records.unpersist()


def by_position(table: Any) -> Any:
    """An events table in the decoder's order (``_position``)."""
    if table.num_rows < 2:
        return table
    position = table.column("_position").combine_chunks()
    keys = pa.table({"m": pc.struct_field(position, [0]), "i": pc.struct_field(position, [1])})
    return table.take(pc.sort_indices(keys, sort_keys=[("m", "ascending"), ("i", "ascending")]))


def normalize_capture(df: DataFrame, order_by: str = "position", *,
                      keep: tuple[str, ...] = ()) -> DataFrame:
    """The capture columns as the layer reads them: ``position`` (long, from ``order_by``),
    ``lsn`` (long; ``X/Y`` strings are parsed), ``data`` (binary; hex text is decoded) and
    ``snapshot`` (boolean: false when the column is absent or null), then the columns
    ``keep`` as they are."""
    fields = {f.name: f.dataType for f in df.schema.fields}
    for required in ("lsn", "data", order_by):
        if required not in fields:
            raise SparkDecodeError(
                f"the capture DataFrame has no column {required!r} (columns: "
                f"{', '.join(df.columns)}); it needs lsn, data and an ordering column")
    if not isinstance(fields[order_by], IntegralType):
        raise SparkDecodeError(f"the ordering column {order_by!r} must be an integer type, "
                               f"not {fields[order_by].simpleString()}")
    data = F.col("data")
    if isinstance(fields["data"], StringType):
        data = F.unhex(data)  # the capture file's hex text
    elif not isinstance(fields["data"], BinaryType):
        raise SparkDecodeError(f"column 'data' must be binary (or hex text), not "
                               f"{fields['data'].simpleString()}")
    lsn = F.col("lsn")
    if isinstance(fields["lsn"], StringType):
        halves = F.split(lsn, "/")
        lsn = F.when(lsn.contains("/"),
                     F.conv(halves.getItem(0), 16, 10).cast("long") * F.lit(1 << 32)
                     + F.conv(halves.getItem(1), 16, 10).cast("long")).otherwise(lsn.cast("long"))
    elif isinstance(fields["lsn"], IntegralType):
        lsn = lsn.cast("long")
    else:
        raise SparkDecodeError(f"column 'lsn' must be an X/Y string or an integer, not "
                               f"{fields['lsn'].simpleString()}")
    snapshot = F.lit(False)
    if "snapshot" in fields:
        if not isinstance(fields["snapshot"], BooleanType):
            raise SparkDecodeError(f"column 'snapshot' must be boolean, not "
                                   f"{fields['snapshot'].simpleString()}")
        snapshot = F.coalesce(F.col("snapshot"), F.lit(False))
    return df.select(F.col(f"`{order_by}`").cast("long").alias("position"), lsn.alias("lsn"),
                     data.alias("data"), snapshot.alias("snapshot"),
                     *(F.col(f"`{name}`") for name in keep))


def _chunk_column(position: Column, bounds: Sequence[int], lo: int = 0,
                  hi: int | None = None, labels: Sequence[int] | None = None) -> Column:
    """The chunk of ``position`` (how many bounds are below it), as a binary search tree;
    with ``labels``, ``labels[chunk]``."""
    hi = len(bounds) if hi is None else hi
    if lo == hi:
        return F.lit(lo if labels is None else labels[lo])
    mid = (lo + hi) // 2
    return F.when(position <= F.lit(bounds[mid]),
                  _chunk_column(position, bounds, lo, mid, labels)
                  ).otherwise(_chunk_column(position, bounds, mid + 1, hi, labels))


def spark_hash_int(value: int) -> int:
    """Spark's hash of an integer (``hash()``, ``Murmur3Hash`` with seed 42: Murmur3
    x86_32's ``hashInt``), by which a ``repartition(n, column)`` puts a row in partition
    ``hash % n``."""
    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF

    k1 = rotl((value & 0xFFFFFFFF) * 0xCC9E2D51 & 0xFFFFFFFF, 15) * 0x1B873593 & 0xFFFFFFFF
    h1 = (rotl(42 ^ k1, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF
    h1 ^= 4  # the input's length in bytes
    h1 = (h1 ^ (h1 >> 16)) * 0x85EBCA6B & 0xFFFFFFFF
    h1 = (h1 ^ (h1 >> 13)) * 0xC2B2AE35 & 0xFFFFFFFF
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def partition_keys(partitions: int) -> list[int]:
    """For each partition ``i`` of a ``repartition(partitions, column)``, the least
    non-negative integer that Spark puts there: a column of these values sends each row
    to the partition chosen for it."""
    keys: dict[int, int] = {}
    value = 0
    while len(keys) < partitions:
        keys.setdefault(spark_hash_int(value) % partitions, value)
        value += 1
    return [keys[i] for i in range(partitions)]


def chunk_tasks(ready: DataFrame, plan: ChunkPlan, first: int, last: int, tasks: int
                ) -> DataFrame:
    """The rows of a capture or micro-batch (``ready``: positions ``first`` to ``last``)
    with their chunk (``_chunk``), in ``tasks`` partitions of consecutive chunks, as many
    chunks in each (give or take one): the chunks cut into ``tasks`` runs, and each row
    shuffled to its run's partition by a key of :func:`partition_keys`. (Shuffled by the
    chunk's number, the partitions were as uneven as the numbers' hashes: on two cores,
    a stream's decoding tasks of 0.36, 0.87, 0.90 and 0.08 s, the job 0.13 s longer than
    its share.)"""
    chunked = ready.withColumn("_chunk", _chunk_column(F.col("position"), plan.boundaries))
    if tasks <= 1:
        return chunked.coalesce(1)  # one task needs no shuffle: one stage less
    lo, hi = plan.chunk_of(first), plan.chunk_of(last)
    count = hi - lo + 1
    # the last chunk of each run but the last: run i takes chunks up to lo + count(i+1)/n - 1
    ends = [lo + count * (i + 1) // tasks - 1 for i in range(tasks - 1)]
    bounds = [plan.boundaries[e] for e in ends if 0 <= e < len(plan.boundaries)]
    return chunked.withColumn("_task", _chunk_column(
        F.col("position"), bounds, labels=partition_keys(tasks))
        ).repartition(tasks, "_task").drop("_task")


def decode_capture(df: DataFrame, config: EventConfig, *, catalog: CatalogSnapshot | None = None,
                   order_by: str = "position", flavour: Flavour = "semantic",
                   options: SparkSchemaOptions | None = None, tombstones: bool = False,
                   clock: Callable[[], int] = time.time_ns, run_id: str | None = None,
                   lines: bool = False, payload: bool = True, persist: bool = True,
                   chunk_messages: int | None = None) -> DecodedCapture:
    """Decode a capture DataFrame, every table in one pass.

    ``df`` has the capture columns ``lsn`` (``X/Y`` string or long), ``data`` (binary,
    or hex text) and the integer column ``order_by`` giving the stream order (an
    ``xid`` column is not needed: the decoder finds transactions by stream order); a
    ``chunk`` column carries an incremental snapshot's chunk lines, whose windows are
    replayed as ``pgcdc-events decode`` replays them (:mod:`pgcdc_events.spark.capture`).
    ``catalog`` is the snapshot the decoder reads NOT NULL, keys, defaults and enum
    labels from. ``flavour`` (or ``options``) chooses the Spark types of the row
    values; ``tombstones`` keeps the tombstone records in the tables' DataFrames;
    ``clock`` stamps the envelope's processing time (``ts_ms``...), ``run_id`` the
    ``__debezium.context.runId`` header. ``lines`` adds each record's JsonConverter line
    (:meth:`DecodedCapture.json_lines`); ``payload`` (default) the data the tables'
    DataFrames are made from. ``persist`` keeps the records once computed (every table
    reads them). ``chunk_messages`` is the least number of messages in a chunk (default:
    the capture over eight chunks per core, at least 20,000).

    Runs one Spark job, which collects the control messages (Begin, Commit, Relation...
    few; the tasks read a Parquet capture from ``read_capture`` themselves, row group by
    row group); decoding runs when the records or a table are first used.
    """
    options = options or SparkSchemaOptions(flavour)
    if config.plugin_name != "pgoutput":  # the YugabyteDB connector's rules are not here
        raise SparkDecodeError(
            f"decode_capture implements plugin.name=pgoutput, not {config.plugin_name}: decode "
            "a yboutput capture with pgcdc_events.events.yugabyte.YugabyteEventDecoder and "
            "pgcdc_events.spark.yugabyte (docs/yugabytedb.md)")
    config = config.with_catalog(catalog)
    keep = (CHUNK_COLUMN,) if CHUNK_COLUMN in df.columns else ()  # chunk lines (capture.py)
    raw = normalize_capture(df, order_by, keep=keep)
    files = file_capture(df, order_by)
    if files is not None:  # the tasks read the files' row groups themselves
        control_rows = files.control(raw.sparkSession, CONTROL_TYPES)
    else:
        first = F.substring(F.col("data"), 1, 1)
        wanted, columns = control_columns(raw, first.isin(*(bytes([t]) for t in CONTROL_TYPES)))
        control_rows = raw.filter(wanted).select(*columns).collect()
    control = sorted((r["position"], r["lsn"], bytes(r["data"])) for r in control_rows)
    snapshot = frozenset(r["position"] for r in control_rows if r["snapshot"])
    parsed = list(parse_control(control))
    if chunk_messages is None:
        span = control[-1][0] - control[0][0] if control else 0
        cores = raw.sparkSession.sparkContext.defaultParallelism
        chunk_messages = max(20_000, span // (8 * max(1, cores)))
    plan = plan_chunks(parsed, min_messages=chunk_messages, snapshot=snapshot)
    span = window_span(raw, control_rows, parsed) if keep else None
    if span is not None:
        plan = span.plan(plan)
    versions = capture_tables(plan.schema, config, catalog)
    make = _Decode(config, catalog, clock, run_id or str(uuid.uuid4()))
    if span is not None:  # the windows in one chunk, one decoder; the tables they read
        make.window = plan.chunk_of(span.first)
        for table in span.table_schemas(config, catalog):
            known = versions.setdefault(table.qualified, [])
            if all((v.value_schema, v.key_schema) != (table.value_schema, table.key_schema)
                   for v in known):
                known.append(table)
    spark = raw.sparkSession
    partitions = max(1, min(plan.chunks, 2 * spark.sparkContext.defaultParallelism))
    shared = spark.sparkContext.broadcast(plan)
    if files is not None:
        # the tasks read their chunks' rows from the files, by position: consecutive
        # chunks in each task, no shuffle, no sort
        frame = spark.range(0, plan.chunks, 1, partitions)
    else:
        frame = (chunk_tasks(raw, plan, -(1 << 63), (1 << 63) - 1, partitions)
                 .sortWithinPartitions("_chunk", "position")
                 .select("_chunk", "position", "lsn", "data", "snapshot", *keep))
    source = DecodingSource(frame, shared, make, files)
    records = map_in_arrow(frame, RecordsFunction(shared, make, payload=payload, lines=lines,
                                                  files=files), RECORDS_TYPE)
    if persist:
        records = records.persist()
    return DecodedCapture(records, plan, versions, config, options, tombstones=tombstones,
                          lines=lines, source=source)


@attrs.frozen
class DecodingSource:
    """What a decoding pass reads: ``frame`` (the capture's rows cut into chunks, or with
    ``files`` the chunk numbers whose rows the tasks read), the broadcast ``plan`` and
    what every task's decoder is made from."""

    frame: DataFrame
    plan: Any
    make: _Decode
    files: FileCapture | None
