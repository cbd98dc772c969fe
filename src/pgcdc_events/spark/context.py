"""Stream order in Spark: normalizing captures, forward fills, and the transaction table.

A pgoutput stream is ordered; a DataFrame is not. Everything a change needs
from the messages before it is attached with Spark operations over the explicit
ordering column, never by collecting rows to the driver:

- :func:`forward_fill` carries the last non-null value of a column forward in
  stream order, scalably: a window per bucket of positions, plus a carry from
  the buckets before (a small per-bucket table);
- :func:`control_frame` parses the control messages (everything but Insert,
  Update, Delete and Truncate: Begin, Commit, stream and two-phase messages,
  Origin, Relation, Type, logical messages), which are few;
- :func:`transaction_frame` resolves every transaction the way the event layer
  does: an ordinary transaction's changes are emitted where they stand; a
  streamed or prepared one's at its Stream Commit or Commit Prepared (or never,
  when it aborts or is rolled back; aborted subtransactions drop their changes);
  each gets its xid, commit time, origin, and the end LSN of the transaction
  committed before it (``source.sequence``).

A change finds its transaction by the capture's ``xid`` column (what
``pg_logical_slot_*_changes`` reports: the top-level xid of every message of a
transaction) or, where that is null, by the stream order (the enclosing Begin,
Begin Prepare or Stream Start: one more shuffle of the changes).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegralType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from pgcdc_events.protocol.decoder import parse_message
from pgcdc_events.protocol.lsn import PG_EPOCH_OFFSET_US
from pgcdc_events.protocol.messages import (
    Begin,
    BeginPrepare,
    Commit,
    CommitPrepared,
    LogicalMessage,
    Origin,
    Prepare,
    RollbackPrepared,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
)
from pgcdc_events.spark._session import arrow_schema, map_in_arrow
from pgcdc_events.spark.errors import SparkDecodeError

__all__ = [
    "BUCKET_SIZE",
    "CONTROL_TYPE",
    "DML_TYPES",
    "TRANSACTION_TYPE",
    "annotate_control",
    "control_frame",
    "forward_fill",
    "normalize_capture",
    "transaction_frame",
]

#: Positions per forward-fill bucket: bounds the rows one window task sorts.
BUCKET_SIZE: Final = 1 << 17
DML_TYPES: Final = ("I", "U", "D", "T")

#: Parsed control messages (one row each).
CONTROL_TYPE: Final = StructType([
    StructField("position", LongType(), False), StructField("lsn", LongType(), True),
    StructField("mtype", StringType(), False), StructField("in_stream", BooleanType(), False),
    StructField("xid", LongType(), True), StructField("subxid", LongType(), True),
    StructField("commit_us", LongType(), True), StructField("end_lsn", LongType(), True),
    StructField("origin", StringType(), True), StructField("origin_lsn", LongType(), True),
    StructField("transactional", BooleanType(), True), StructField("prefix", StringType(), True),
    StructField("content", BinaryType(), True), StructField("data", BinaryType(), True),
])
_CONTROL_ARROW: Final = arrow_schema(CONTROL_TYPE)


def normalize_capture(df: DataFrame, order_by: str = "position") -> DataFrame:
    """The capture columns as the layer reads them: ``position`` (long, from ``order_by``),
    ``lsn`` (long; ``X/Y`` strings are parsed), ``xid`` (long or null), ``data`` (binary)
    and ``mtype`` (the message type as a one-character string)."""
    fields = {f.name: f.dataType for f in df.schema.fields}
    for required in ("lsn", "data", order_by):
        if required not in fields:
            raise SparkDecodeError(
                f"the capture DataFrame has no column {required!r} (columns: "
                f"{', '.join(df.columns)}); it needs lsn, xid, data and an ordering column")
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
    xid = F.col("xid").cast("long") if "xid" in fields else F.lit(None).cast("long")
    return df.select(F.col(f"`{order_by}`").cast("long").alias("position"), lsn.alias("lsn"),
                     xid.alias("xid"), data.alias("data"),
                     F.decode(F.substring(data, 1, 1), "US-ASCII").alias("mtype"))


def forward_fill(df: DataFrame, values: dict[str, tuple[Column, bool]], *,
                 bucket_size: int | None = BUCKET_SIZE) -> DataFrame:
    """``df`` plus, for each name, the last non-null value of its column in ``position``
    order: up to and including the row itself when the flag says inclusive, else strictly
    before it.

    With ``bucket_size``, one window per bucket of that many positions does the work and
    the value carried into each bucket comes from a per-bucket table small enough to order
    globally (scalable to any number of rows); with ``None``, one window over all rows
    (one task: for the few control messages).
    """
    def frame(spec: Any, inclusive: bool) -> Any:
        return spec.rowsBetween(Window.unboundedPreceding,
                                Window.currentRow if inclusive else -1)

    if bucket_size is None:
        ordered = Window.orderBy("position")
        return df.select("*", *[F.last(v, ignorenulls=True).over(frame(ordered, inc)).alias(n)
                                for n, (v, inc) in values.items()])
    bucketed = df.withColumn("_bk", F.col("position").bitwiseAND(F.lit(-bucket_size)))
    within = Window.partitionBy("_bk").orderBy("position")
    tails = bucketed.groupBy("_bk").agg(*[
        F.max_by(v, F.when(v.isNotNull(), F.col("position"))).alias(n)
        for n, (v, _) in values.items()])
    before = Window.orderBy("_bk").rowsBetween(Window.unboundedPreceding, -1)
    carry = tails.select("_bk", *[F.last(n, ignorenulls=True).over(before).alias(f"_c_{n}")
                                  for n in values])
    out = bucketed.select("*", *[F.last(v, ignorenulls=True).over(frame(within, inc))
                                 .alias(f"_w_{n}") for n, (v, inc) in values.items()])
    out = out.join(F.broadcast(carry), "_bk", "left")
    out = out.select("*", *[F.coalesce(F.col(f"_w_{n}"), F.col(f"_c_{n}")).alias(n)
                            for n in values])
    return out.drop("_bk", *[f"_w_{n}" for n in values], *[f"_c_{n}" for n in values])


def control_frame(raw: DataFrame) -> DataFrame:
    """The parsed control messages of a normalized capture (:data:`CONTROL_TYPE`)."""
    ctl = raw.filter(~F.col("mtype").isin(*DML_TYPES))
    stream = F.when(F.col("mtype") == "S", F.lit(True)).when(F.col("mtype") == "E", F.lit(False))
    ctl = forward_fill(ctl, {"_open": (stream, False)}, bucket_size=None)
    ctl = ctl.select("position", "lsn", "data",
                     F.coalesce(F.col("_open"), F.lit(False)).alias("in_stream"))
    return map_in_arrow(ctl, _parse_control, CONTROL_TYPE)


def _parse_control(batches: Iterator[Any]) -> Iterator[Any]:
    """mapInArrow: parse control messages into :data:`CONTROL_TYPE` rows."""
    for batch in batches:
        out: dict[str, list[Any]] = {f.name: [] for f in CONTROL_TYPE.fields}
        rows = zip(batch.column("position").to_pylist(), batch.column("lsn").to_pylist(),
                   batch.column("data").to_pylist(), batch.column("in_stream").to_pylist(),
                   strict=True)
        for position, lsn, data, in_stream in rows:
            try:
                message = parse_message(data, in_stream=bool(in_stream))
            except Exception as exc:
                raise SparkDecodeError(str(exc), position=position) from None
            row = _control_row(message)
            row.update(position=position, lsn=lsn, mtype=chr(data[0]),
                       in_stream=bool(in_stream))
            if data[:1] in (b"R", b"Y"):
                row["data"] = data
            for name, values in out.items():
                values.append(row.get(name))
        yield pa.RecordBatch.from_pydict(out, schema=_CONTROL_ARROW)


def _control_row(m: Any) -> dict[str, Any]:
    epoch = PG_EPOCH_OFFSET_US
    if isinstance(m, Begin):
        return {"xid": m.xid, "commit_us": m.commit_time + epoch}
    if isinstance(m, (Commit, StreamCommit, CommitPrepared)):
        return {"xid": getattr(m, "xid", None), "commit_us": m.commit_time + epoch,
                "end_lsn": m.end_lsn}
    if isinstance(m, (StreamStart, BeginPrepare, Prepare, StreamPrepare, RollbackPrepared)):
        return {"xid": m.xid}
    if isinstance(m, StreamAbort):
        return {"xid": m.xid, "subxid": m.subxid}
    if isinstance(m, Origin):
        return {"origin": m.name, "origin_lsn": m.origin_lsn}
    if isinstance(m, LogicalMessage):
        return {"xid": m.xid, "transactional": m.transactional, "prefix": m.prefix,
                "content": m.content}
    return {"xid": getattr(m, "xid", None)}


#: Transactions, one row per top-level xid.
TRANSACTION_TYPE: Final = StructType([
    StructField("xid", LongType(), False), StructField("streamed", BooleanType(), False),
    StructField("emit", BooleanType(), False), StructField("order_pos", LongType(), True),
    StructField("commit_us", LongType(), True), StructField("prev_commit", LongType(), True),
    StructField("origin", StringType(), True), StructField("origin_lsn", LongType(), True),
    StructField("aborts", ArrayType(StructType([
        StructField("subxid", LongType(), True), StructField("position", LongType(), True)])),
        True),
])


def annotate_control(control: DataFrame) -> DataFrame:
    """Parsed control messages plus ``prev_commit`` (the end LSN of the last commit before,
    or the LSN of a non-transactional message: what ``source.sequence`` starts with) and
    ``block`` (``struct<kind, xid>`` of the enclosing Begin, Begin Prepare or Stream Start,
    or of the closing Commit, Prepare or Stream Stop outside any)."""
    mtype = F.col("mtype")
    commit_event = (F.when(mtype.isin("C", "c", "K"), F.col("end_lsn"))
                    .when((mtype == "M") & ~F.col("transactional"), F.col("lsn")))
    opener = F.when(mtype.isin("B", "b", "S"), F.struct(mtype.alias("kind"), F.col("xid")))
    closer = F.when(mtype.isin("C", "P", "E"),
                    F.struct(mtype.alias("kind"), F.lit(None).cast("long").alias("xid")))
    return forward_fill(control, {"prev_commit": (commit_event, False),
                                  "block": (F.coalesce(opener, closer), True)},
                        bucket_size=None)


def transaction_frame(ctl: DataFrame) -> DataFrame:
    """Every transaction of the capture (:data:`TRANSACTION_TYPE`), from the annotated control
    messages (:func:`annotate_control`): one aggregation by top-level xid."""
    mtype = F.col("mtype")
    position = F.col("position")
    own = mtype.isin("B", "S", "b", "c", "K", "A")
    xid = F.when(own, F.col("xid")).when(mtype == "O", F.col("block.xid"))
    moment = F.struct("position", "commit_us", "prev_commit")
    grouped = ctl.filter(xid.isNotNull()).groupBy(xid.alias("xid")).agg(
        F.max_by(moment, F.when(mtype == "B", position)).alias("b"),
        F.min_by(moment, F.when(mtype.isin("c", "K"), position)).alias("c"),
        F.max(mtype == "S").alias("streamed"),
        F.max_by(F.struct("origin", "origin_lsn"), F.when(mtype == "O", position)).alias("o"),
        F.collect_list(F.when((mtype == "A") & (F.col("subxid") != F.col("xid")),
                              F.struct(F.col("subxid"), position))).alias("aborts"),
    )
    ordinary = F.col("b").isNotNull()
    chosen = F.when(ordinary, F.col("b")).otherwise(F.col("c"))
    return grouped.select(
        "xid", "streamed", (ordinary | F.col("c").isNotNull()).alias("emit"),
        chosen["position"].alias("order_pos"), chosen["commit_us"].alias("commit_us"),
        chosen["prev_commit"].alias("prev_commit"), F.col("o.origin").alias("origin"),
        F.col("o.origin_lsn").alias("origin_lsn"), "aborts")
