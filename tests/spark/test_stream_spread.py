"""The decoding job's chunks are spread evenly over its tasks: chunk ``c`` in partition
``c mod n`` (``spread_chunks``), where hash partitioning by the chunk number left tasks
empty and others with most chunks (8 chunks in 4 partitions: 0, 1, 3, 4), so that a
micro-batch of a few chunks ran on one core; and ``spark_int_hash`` is Spark's ``hash()``."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812

from pgcdc_events.spark.decode import spark_int_hash, spread_chunks


def test_spark_int_hash_is_sparks_hash(spark: SparkSession) -> None:
    values = [*range(-300, 700), 2**31 - 1, -(2**31), 123_456_789, -987_654_321]
    frame = spark.createDataFrame([(v,) for v in values], "v int")
    got = {r["v"]: r["h"] for r in frame.select("v", F.hash("v").alias("h")).collect()}
    assert {v: spark_int_hash(v) for v in values} == got


@pytest.mark.parametrize(("chunks", "partitions"), [(8, 4), (4, 4), (2, 2), (5, 2), (16, 4),
                                                    (3, 3)])
def test_each_partition_takes_every_nth_chunk(spark: SparkSession, chunks: int,
                                              partitions: int) -> None:
    rows = [(c, i) for c in range(chunks) for i in range(3)]
    frame = spark.createDataFrame(rows, "_chunk int, position long")
    spread = spread_chunks(frame, "_chunk", partitions)
    assert spread.rdd.getNumPartitions() == partitions
    placed = {(r["p"], r["_chunk"]) for r in
              spread.select(F.spark_partition_id().alias("p"), "_chunk").collect()}
    assert placed == {(c % partitions, c) for c in range(chunks)}
