"""Raw WAL DataFrames decoded into per-table DataFrames of Debezium change events.

:func:`decode_capture` takes a DataFrame with the capture columns (``lsn``,
``xid``, ``data``) and an explicit ordering column, and returns a
:class:`DecodedCapture`: one DataFrame per captured table, each row one event
(or, with ``tombstones=True``, one tombstone) with exactly the values the
pure-Python :class:`~pgcdc_events.events.EventDecoder` gives for the same
capture and configuration. Each table's DataFrame is an independent, lazy
query; only the control messages (Begin, Commit, Relation... few) are
processed when the capture is opened.

Columns of an event DataFrame: ``key`` (the record key struct; absent for a
table that never has one), the envelope ``before``, ``after``, ``source``,
``transaction`` (null unless ``provide.transaction.metadata``), ``op``,
``ts_ms``, ``ts_us``, ``ts_ns``, and the metadata ``_kind`` (``change``,
``truncate`` or ``tombstone``), ``_position`` (``struct<commit, message,
index>``: sorting by it gives the decoder's order, commit order),
``_version`` (the table schema version the event was decoded with), ``_lsn``
and ``_related_key`` (the other key of a primary-key change, which Debezium
puts in the ``__debezium.newkey``/``oldkey`` headers).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, Literal

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from pgcdc_events.events.config import EventConfig
from pgcdc_events.events.special import MESSAGE_COLLECTION
from pgcdc_events.spark._session import map_in_arrow, to_arrow_table
from pgcdc_events.spark.batch import (
    BLOCK_TYPE,
    DECODE_INPUT,
    POSITION_TYPE,
    SOURCE_TYPE,
    TableDecoder,
    TableLayout,
)
from pgcdc_events.spark.context import (
    DML_TYPES,
    annotate_control,
    control_frame,
    forward_fill,
    normalize_capture,
    transaction_frame,
)
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.registry import RelationRegistry
from pgcdc_events.spark.schema import Flavour, SparkSchemaOptions
from pgcdc_events.types.catalog import CatalogSnapshot

__all__ = ["DecodedCapture", "decode_capture"]

#: Transaction tables up to this many rows are broadcast to the change rows.
BROADCAST_TRANSACTIONS: Final = 2_000_000
#: Registries with up to this many versions are looked up with an expression, not a join.
INLINE_VERSIONS: Final = 64
_VERSIONS: Final = StructType([
    StructField("v_relid", BinaryType(), False), StructField("v_start", LongType(), False),
    StructField("v_end", LongType(), False), StructField("version", IntegerType(), False),
    StructField("table_index", IntegerType(), False),
])
_ORDERS: Final = StructType([
    StructField("position", LongType(), False), StructField("index", IntegerType(), False),
    StructField("xid", LongType(), True), StructField("collection", StringType(), False),
])

ContextMode = Literal["auto", "xid", "order"]


class DecodedCapture:
    """The tables of one decoded capture; :meth:`table` gives each one's events DataFrame.

    ``registry`` is the versioned relation registry (broadcast to the workers),
    ``tables`` the captured tables (``schema.table``) in order of appearance.
    Call :meth:`unpersist` when done to free the cached control messages.
    """

    def __init__(self, raw: DataFrame, control: DataFrame, transactions: DataFrame,
                 registry: RelationRegistry, config: EventConfig, options: SparkSchemaOptions,
                 *, tombstones: bool, clock: Callable[[], int], fill_context: bool,
                 transaction_count: int, cache: bool | None) -> None:
        self.raw = raw
        self.control = control
        self.transactions = transactions
        self.registry = registry
        self.config = config
        self.options = options
        self.tombstones = tombstones
        self.clock = clock
        self.spark = raw.sparkSession
        self._broadcast = self.spark.sparkContext.broadcast(registry)
        self._token = uuid.uuid4().hex
        self._fill_context = fill_context
        self._txn_count = transaction_count
        self._cache = len(registry.tables) > 1 if cache is None else cache
        self._changes: DataFrame | None = None
        self._orders: DataFrame | None = None
        self._tables: dict[str, DataFrame] = {}

    @property
    def broadcast_registry(self) -> Any:
        """The registry as a Spark broadcast variable (``.value`` on the workers)."""
        return self._broadcast

    @property
    def tables(self) -> tuple[str, ...]:
        """The captured tables (``schema.table``) the configuration includes."""
        return self.registry.tables

    def __getitem__(self, table: str) -> DataFrame:
        return self.table(table)

    def layout(self, table: str) -> TableLayout:
        """The output shape of ``table`` (its union of schema versions)."""
        return TableLayout(self.registry, table, self.options)

    def topic(self, table: str) -> str:
        """The Kafka topic Debezium writes ``table``'s records to."""
        return self.layout(table).topic

    def table(self, table: str) -> DataFrame:
        """The events of ``table`` (``schema.table``), a lazy DataFrame."""
        cached = self._tables.get(table)
        if cached is None:
            cached = self._tables[table] = self._decode_table(table)
        return cached

    def to_arrow(self, tables: Iterable[str] | None = None) -> dict[str, Any]:
        """The events of several tables as Arrow tables in the decoder's order (everything
        comes to the driver: for small captures, tests and notebooks). The tables' jobs run
        concurrently."""
        from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

        names = list(self.tables if tables is None else tables)
        frames = {name: self.table(name) for name in names}
        if self._cache and names:
            self.changes().count()  # fill the caches once, before the tables read them
        if self.config.provide_transaction_metadata and names:
            self.orders().count()
        from pgcdc_events.spark.local import by_position  # noqa: PLC0415

        with ThreadPoolExecutor(max_workers=max(1, min(8, len(names)))) as pool:
            results = pool.map(lambda name: by_position(to_arrow_table(frames[name])), names)
            return dict(zip(names, results, strict=True))

    def unpersist(self) -> None:
        """Release the cached control messages, transactions and change rows."""
        self.control.unpersist()
        self.transactions.unpersist()
        if self._changes is not None and self._cache:
            self._changes.unpersist()
        if self._orders is not None:
            self._orders.unpersist()

    # -- the change rows, with transaction context and schema version ------------------------
    def changes(self) -> DataFrame:
        """Every committed change message with its context: the decoder's input columns plus
        ``table_index`` and ``mtype``."""
        if self._changes is None:
            self._changes = self._prepare()
        return self._changes

    def _prepare(self) -> DataFrame:
        changes = self.raw.filter(F.col("mtype").isin(*DML_TYPES)).select(
            "position", "lsn", "xid", "data", "mtype")
        if self._fill_context:
            changes = self._xid_from_order(changes)
        txns = self.transactions
        if self._txn_count <= BROADCAST_TRANSACTIONS:
            txns = F.broadcast(txns)
        joined = changes.join(txns, "xid", "left")
        missing = F.col("streamed").isNull()
        in_stream = F.coalesce(F.col("streamed"), F.lit(False))
        subxid = F.conv(F.hex(F.substring("data", 2, 4)), 16, 10).cast("long")
        aborted = F.when(F.col("aborts").isNotNull(), F.exists(
            F.col("aborts"),
            lambda a: (a["subxid"] == subxid) & (a["position"] > F.col("position"))))
        kept = joined.filter(missing | (F.col("emit") & ~(in_stream & F.coalesce(
            aborted, F.lit(False)))))
        orphan = F.raise_error(F.concat(
            F.lit("ProtocolError: a change outside any transaction: no Begin, Begin Prepare or "
                  "Stream Start before position "), F.col("position").cast("string")))
        # The relation OID's four bytes, compared as bytes (no per-row number conversion).
        relid = F.when(F.col("mtype") != "T", F.when(in_stream, F.substring("data", 6, 4))
                       .otherwise(F.substring("data", 2, 4)))
        with_relid = kept.select(
            "position", "lsn", "data", "mtype", in_stream.alias("in_stream"),
            relid.alias("relid"),
            F.when(missing, orphan.cast("long")).otherwise(F.col("xid")).alias("xid"))
        prepared = self._with_versions(with_relid).select(
            "position", "lsn", "data", "in_stream", "version", "xid", "mtype",
            F.coalesce(F.col("table_index"), F.lit(-2)).alias("table_index"))
        if self._cache:
            prepared = prepared.persist()
        return prepared

    def _with_versions(self, df: DataFrame) -> DataFrame:
        """``version`` and ``table_index`` of each change: the version of its relation in force
        at its position (null for a relation never announced; a Truncate has none)."""
        registry = self.registry
        position, relid = F.col("position"), F.col("relid")
        index = {t: i for i, t in enumerate(registry.tables)}
        if len(registry.versions) <= INLINE_VERSIONS:
            version: Column = F.lit(None).cast("int")
            table: Column = F.lit(None).cast("int")
            for v in registry.versions:
                oid = F.lit(v.relation_id.to_bytes(4, "big"))
                hit = (relid == oid) & (position > v.start) & (position < v.end)
                version = F.when(hit, F.lit(v.index)).otherwise(version)
                table = F.when(hit, F.lit(index.get(v.table, -1) if v.table else -1)
                               ).otherwise(table)
            return df.withColumn("version", version).withColumn("table_index", table)
        versions = self.spark.createDataFrame(pa.table({
            "v_relid": pa.array([v.relation_id.to_bytes(4, "big") for v in registry.versions],
                                pa.binary()),
            "v_start": pa.array([v.start for v in registry.versions], pa.int64()),
            "v_end": pa.array([v.end for v in registry.versions], pa.int64()),
            "version": pa.array([v.index for v in registry.versions], pa.int32()),
            "table_index": pa.array([index[v.table] if v.table is not None else -1
                                     for v in registry.versions], pa.int32()),
        }), _VERSIONS)
        on = (relid == F.col("v_relid")) & (position > F.col("v_start")) & (
            position < F.col("v_end"))
        return df.join(F.broadcast(versions), on, "left")

    def _xid_from_order(self, changes: DataFrame) -> DataFrame:
        """Changes whose ``xid`` is null or names no transaction get the one of the enclosing
        Begin, Begin Prepare or Stream Start."""
        xids = F.broadcast(self.transactions.select("xid"))
        known = changes.join(xids, "xid", "left_semi")
        unknown = changes.join(xids, "xid", "left_anti").withColumn(  # null, or a subxid
            "xid", F.lit(None).cast("long"))
        mtype = F.col("mtype")
        markers = self.control.filter(mtype.isin("B", "b", "S", "C", "P", "E")).select(
            "position", F.lit(None).cast("long").alias("lsn"),
            F.when(mtype.isin("B", "b", "S"), F.col("xid")).otherwise(F.lit(-1)).alias("xid"),
            F.lit(None).cast("binary").alias("data"), F.lit("-").alias("mtype"))
        filled = forward_fill(unknown.unionByName(markers),
                              {"_block": (F.when(mtype == "-", F.col("xid")), True)})
        resolved = (filled.filter(F.col("mtype") != "-")
                    .withColumn("xid", F.when(F.col("_block") >= 0, F.col("_block")))
                    .drop("_block"))
        return known.unionByName(resolved)

    # -- one table ----------------------------------------------------------------------------
    def _decode_table(self, table: str) -> DataFrame:
        index = self.registry.table_index(table)
        decoder = _DecoderFactory(self._broadcast, self._token, table, self.options,
                                  self.tombstones, self.clock)
        layout = TableLayout(self.registry, table, self.options)
        # Changes of unannounced relations (-2) go everywhere: the decoder reports them.
        rows = self.changes().filter(
            (F.col("table_index") == index) | (F.col("mtype") == "T")
            | (F.col("table_index") == -2))
        decoded = map_in_arrow(rows.select(*DECODE_INPUT), decoder, layout.core_type())
        return self._events(decoded, layout)

    def _events(self, decoded: DataFrame, layout: TableLayout) -> DataFrame:
        """The envelope around the decoder's records: each transaction's context joined in by
        xid (a broadcast of the transaction table), ``source`` and the rest built in the JVM."""
        config = self.config
        txns = self.transactions.select("xid", "commit_us", "prev_commit", "origin",
                                        "origin_lsn", "order_pos")
        if self._txn_count <= BROADCAST_TRANSACTIONS:
            txns = F.broadcast(txns)
        rows = decoded.join(txns, "xid", "left")
        tombstone = F.col("kind") == "tombstone"
        commit_us = F.col("commit_us")
        prev = F.col("prev_commit")
        sequence = F.concat(F.lit("["), F.coalesce(F.concat(F.lit('"'), prev.cast("string"),
                                                            F.lit('"')), F.lit("null")),
                            F.lit(',"'), F.col("lsn").cast("string"), F.lit('"]'))
        source = F.struct(
            F.lit(config.version).alias("version"), F.lit("postgresql").alias("connector"),
            F.lit(config.topic_prefix).alias("name"), _floor_div(commit_us, 1000).alias("ts_ms"),
            F.lit(None).cast("string").alias("snapshot"), F.lit(config.database).alias("db"),
            sequence.alias("sequence"), commit_us.alias("ts_us"),
            (commit_us * F.lit(1000)).alias("ts_ns"), F.lit(layout.schema_name).alias("schema"),
            F.lit(layout.table_name).alias("table"), F.col("xid").alias("txId"),
            F.col("lsn").alias("lsn"), F.lit(None).cast("long").alias("xmin"),
            F.col("origin"), F.col("origin_lsn"))
        block = F.lit(None).cast(BLOCK_TYPE)
        if config.provide_transaction_metadata:
            orders = self.orders().select(F.col("position").alias("_m"),
                                          F.col("index").alias("_i"), "total_order",
                                          "data_collection_order")
            rows = rows.join(orders, (F.col("position") == F.col("_m"))
                             & (F.col("index") == F.col("_i")), "left")
            block = F.when(~tombstone, F.struct(
                F.concat(F.col("xid").cast("string"), F.lit(":"), F.col("lsn").cast("string"))
                .alias("id"), F.col("total_order"), F.col("data_collection_order")))
        ts_ns = F.col("ts_ns")
        columns: list[Column] = []
        if layout.key_type is not None:
            columns.append(F.col("key"))
        columns += [
            F.col("before"), F.col("after"),
            F.when(~tombstone, source).cast(SOURCE_TYPE).alias("source"),
            block.cast(BLOCK_TYPE).alias("transaction"), F.col("op"),
            F.when(~tombstone, _floor_div(ts_ns, 1_000_000)).alias("ts_ms"),
            F.when(~tombstone, _floor_div(ts_ns, 1000)).alias("ts_us"),
            F.when(~tombstone, ts_ns).alias("ts_ns"),
            F.col("kind").alias("_kind"),
            F.struct(F.col("order_pos").alias("commit"), F.col("position").alias("message"),
                     F.col("index").alias("index")).cast(POSITION_TYPE).alias("_position"),
            F.col("version").alias("_version"), F.col("lsn").alias("_lsn"),
        ]
        if layout.key_type is not None:
            columns.append(F.col("related_key").alias("_related_key"))
        return rows.select(*columns)

    # -- transaction metadata -------------------------------------------------------------------
    def orders(self) -> DataFrame:
        """``(position, index, total_order, data_collection_order)`` of every record that
        counts in its transaction's order (``provide.transaction.metadata``)."""
        if self._orders is None:
            counter = _CounterFactory(self._broadcast, self.options, self.clock)
            rows = self.changes().filter(F.col("table_index") != -1)
            counted = map_in_arrow(rows.select(*DECODE_INPUT, "table_index"), counter, _ORDERS)
            messages = self._message_orders()
            if messages is not None:
                counted = counted.unionByName(messages)
            total = Window.partitionBy("xid").orderBy("position", "index")
            per = Window.partitionBy("xid", "collection").orderBy("position", "index")
            self._orders = counted.select(
                "position", "index",
                F.row_number().over(total).cast("long").alias("total_order"),
                F.row_number().over(per).cast("long").alias("data_collection_order")).persist()
        return self._orders

    def _message_orders(self) -> DataFrame | None:
        """The transactional logical messages that produce records (their prefix included),
        in transactions that commit and subtransactions that do not abort."""
        config = self.config
        mtype = F.col("mtype")
        ctl = self.control.filter((mtype == "M") & F.col("transactional")).select(
            "position", F.col("block.xid").alias("xid"), F.col("xid").alias("subxid"), "prefix")
        if config.message_prefix_include is not None or config.message_prefix_exclude is not None:
            keep = F.udf(config.includes_message_prefix, "boolean")
            ctl = ctl.filter(keep(F.col("prefix")))
        joined = ctl.join(self.transactions, "xid")
        aborted = F.exists(F.coalesce(F.col("aborts"), F.array()),
                           lambda a: (a["subxid"] == F.col("subxid"))
                           & (a["position"] > F.col("position")))
        return joined.filter(F.col("emit") & ~aborted).select(
            "position", F.lit(0).alias("index"), "xid",
            F.lit(MESSAGE_COLLECTION).alias("collection"))


def _floor_div(column: Column, divisor: int) -> Column:
    """Exact integer floor division of a long (Spark's ``div`` truncates toward zero)."""
    return F.call_function("div", column - F.pmod(column, F.lit(divisor)), F.lit(divisor))


class _DecoderFactory:
    """A picklable mapInArrow function that builds its :class:`TableDecoder` once per worker."""

    def __init__(self, registry: Any, token: str, table: str, options: SparkSchemaOptions,
                 tombstones: bool, clock: Callable[[], int]) -> None:
        self.registry = registry
        self.token = token
        self.table = table
        self.options = options
        self.tombstones = tombstones
        self.clock = clock

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        key = (self.token, self.table, self.options, self.tombstones)
        decoder = _DECODERS.get(key)
        if decoder is None:
            decoder = TableDecoder(self.registry.value, self.table, self.options,
                                   tombstones=self.tombstones, clock=self.clock)
            _DECODERS[key] = decoder
        return decoder(batches)


_DECODERS: dict[Any, TableDecoder] = {}


class _CounterFactory:
    """mapInArrow: the records of every table that count in their transaction's order."""

    def __init__(self, registry: Any, options: SparkSchemaOptions, clock: Callable[[], int]
                 ) -> None:
        self.registry = registry
        self.options = options
        self.clock = clock

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow.compute as pc  # type: ignore[import-untyped]  # noqa: PLC0415

        registry: RelationRegistry = self.registry.value
        decoders: dict[int, TableDecoder] = {}
        schema = pa.schema([pa.field("position", pa.int64(), False),
                            pa.field("index", pa.int32(), False), pa.field("xid", pa.int64()),
                            pa.field("collection", pa.string(), False)])
        for batch in batches:
            table_index = batch.column("table_index")
            truncate = pc.equal(pc.binary_slice(batch.column("data"), 0, 1), b"T")
            parts = []
            for index in set(table_index.to_pylist()) | (set(range(len(registry.tables)))
                                                          if pc.any(truncate).as_py() else set()):
                if index is None or index < 0:
                    continue
                decoder = decoders.get(index)
                if decoder is None:
                    decoder = decoders[index] = TableDecoder(registry, registry.tables[index],
                                                             self.options, clock=self.clock)
                mask = pc.or_(pc.equal(table_index, index), truncate)
                out = decoder.decode(batch.filter(mask).drop_columns(["table_index"]))
                kept = pc.not_equal(out.column("kind"), "tombstone")
                out = out.filter(kept)
                parts.append(pa.RecordBatch.from_arrays([
                    out.column("position"), out.column("index"), out.column("xid"),
                    pa.array([registry.tables[index]] * out.num_rows, pa.string())],
                    schema=schema))
            for part in parts:
                if part.num_rows:
                    yield part


def decode_capture(df: DataFrame, config: EventConfig, *, catalog: CatalogSnapshot | None = None,
                   order_by: str = "position", flavour: Flavour = "semantic",
                   options: SparkSchemaOptions | None = None, tombstones: bool = False,
                   transaction_context: ContextMode = "auto", cache: bool | None = None,
                   clock: Callable[[], int] = time.time_ns) -> DecodedCapture:
    """Open a capture DataFrame for decoding.

    ``df`` has the capture columns ``lsn`` (``X/Y`` string or long), ``xid`` (long,
    may be null or absent), ``data`` (binary, or hex text) and the integer column
    ``order_by`` giving the stream order. ``catalog`` is the snapshot the decoder
    reads NOT NULL, keys, defaults and enum labels from. ``flavour`` (or ``options``)
    chooses the Spark types of the row values; ``tombstones`` includes the
    tombstone records of deletes; ``transaction_context`` says how changes find
    their transaction: by ``xid``, by stream ``order``, or ``auto`` (by xid where it
    is set). ``cache`` keeps the change rows with their context once computed (default:
    when the capture has more than one table, whose DataFrames all read them).
    ``clock`` stamps the envelope's processing time (``ts_ms``...).

    Runs one Spark job, which reads the control messages (cached) and collects the
    Relation and Type messages; the tables' DataFrames stay lazy.
    """
    options = options or SparkSchemaOptions(flavour)
    if config.plugin_name != "pgoutput":  # the YugabyteDB connector's rules are not here
        raise SparkDecodeError(
            f"decode_capture implements plugin.name=pgoutput, not {config.plugin_name}: decode "
            "a yboutput capture with pgcdc_events.events.yugabyte.YugabyteEventDecoder and "
            "pgcdc_events.spark.yugabyte (docs/yugabytedb.md)")
    config = config.with_catalog(catalog)
    if transaction_context not in ("auto", "xid", "order"):
        raise SparkDecodeError(f"transaction_context must be auto, xid or order, "
                               f"not {transaction_context!r}")
    raw = normalize_capture(df, order_by)
    control = annotate_control(control_frame(raw)).persist()
    transactions = transaction_frame(control).persist()
    # One job: the Relation and Type messages, the number of transactions, and whether
    # any change lacks an xid.
    schema_rows = control.filter(F.col("mtype").isin("R", "Y")).select(
        F.lit("s").alias("kind"), "position", "in_stream", "data")
    count = transactions.agg(F.count(F.lit(1)).alias("n")).select(
        F.lit("n").alias("kind"), F.col("n").alias("position"),
        F.lit(None).cast("boolean").alias("in_stream"), F.lit(None).cast("binary").alias("data"))
    parts = schema_rows.unionByName(count)
    if transaction_context == "auto":  # does any message lack an xid naming a transaction?
        # Only the xid column is read (no message bytes); 0 is a non-transactional message's.
        unresolved = raw.select("position", "xid").filter(
            F.col("xid").isNull() | (F.col("xid") != 0)).join(
            F.broadcast(transactions.select("xid")), "xid", "left_anti")
        parts = parts.unionByName(unresolved.limit(1).select(
            F.lit("x").alias("kind"), "position", F.lit(None).cast("boolean").alias("in_stream"),
            F.lit(None).cast("binary").alias("data")))
    collected = parts.collect()
    registry = RelationRegistry(((r["position"], r["in_stream"], r["data"]) for r in collected
                                 if r["kind"] == "s"), config, catalog)
    transaction_count = next(r["position"] for r in collected if r["kind"] == "n")
    if transaction_context == "order":
        raw = raw.withColumn("xid", F.lit(None).cast("long"))
    fill = transaction_context == "order" or any(r["kind"] == "x" for r in collected)
    return DecodedCapture(raw, control, transactions, registry, config, options,
                          tombstones=tombstones, clock=clock, fill_context=fill,
                          transaction_count=transaction_count, cache=cache)
