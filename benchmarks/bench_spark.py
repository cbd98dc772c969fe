"""Spark decoding throughput on local[2], next to the pure-Python decoder and the Arrow floor.

Run: ``.venv/bin/python benchmarks/bench_spark.py [--changes 1000000] [--flavour semantic]``.
The first run captures the workload (Insert messages of the six-column table of
``_common.py``: bigint, text, timestamptz, numeric(12,2), boolean, varchar) from a
throwaway PostgreSQL into ``benchmarks/.data/`` and converts it to Parquet with an
ordering column; later runs reuse both. One run of each, in one process:

- the pure-Python :class:`EventDecoder` over the capture held in memory (one core);
- a no-op ``mapInArrow`` over the Parquet capture DataFrame: the transfer floor
  (Parquet scan, JVM -> Python -> JVM Arrow exchange) on local[2];
- the Spark decoder: ``decode_capture`` (its control-message job) plus one table's
  events written to Spark's ``noop`` sink (every value computed, nothing stored);
- the same per-batch decoder in this process on Arrow batches (one core), to show
  where the time goes: transfer floor + decode / 2 cores is what local[2] can reach.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from _common import DATA, make_capture

from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.protocol import iter_capture


def _timed(label: str, fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    print(f"  {label}: {seconds:.2f}s", file=sys.stderr)
    return seconds, result


def _noop(batches: Iterator[Any]) -> Iterator[Any]:
    for batch in batches:
        yield batch.select(["position"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--changes", type=int, default=1_000_000, help="Insert messages")
    parser.add_argument("--flavour", choices=("literal", "semantic"), default="semantic")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql.types import LongType, StructField, StructType

    from pgcdc_events.spark import SparkSchemaOptions, decode_capture, write_capture_parquet
    from pgcdc_events.spark._session import local_session, map_in_arrow
    from pgcdc_events.spark.batch import TableDecoder
    from pgcdc_events.spark.local import _batch, stream_context

    jsonl = DATA / f"spark-{args.changes}.jsonl"
    parquet = DATA / f"spark-{args.changes}.parquet"
    if not jsonl.exists():
        make_capture(jsonl, args.changes, batch=5000)
    with open(jsonl, encoding="utf-8") as fh:
        rows = list(iter_capture(fh))
    if not parquet.exists():
        write_capture_parquet(rows, str(parquet), rows_per_group=1 << 16)
    changes = sum(1 for r in rows if r.data[:1] == b"I")
    config = EventConfig.from_properties({"topic.prefix": "bench"})

    # Small input splits, so that every core gets row groups of the one Parquet file.
    spark = local_session(args.master, "bench_spark", conf={
        "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "4g",
        "spark.sql.files.maxPartitionBytes": str(4 << 20),
        "spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    options = SparkSchemaOptions(args.flavour)
    df = spark.read.parquet(str(parquet))
    print(f"capture: {jsonl.name}, {len(rows)} messages, {changes} inserts; "
          f"Parquet {parquet.stat().st_size / 1e6:.0f} MB in {df.rdd.getNumPartitions()} "
          f"splits; flavour {args.flavour}; master {args.master}; "
          f"python {sys.version.split()[0]}")

    floor_schema = StructType([StructField("position", LongType())])

    def floor() -> None:
        map_in_arrow(df, _noop, floor_schema).write.format("noop").mode("overwrite").save()

    def spark_decode() -> tuple[float, float]:
        started = time.perf_counter()
        decoded = decode_capture(df, config, options=options)
        opened = time.perf_counter()
        decoded.table(decoded.tables[0]).write.format("noop").mode("overwrite").save()
        done = time.perf_counter()
        decoded.unpersist()
        return opened - started, done - opened

    # One untimed pass of each Spark pipeline: JVM JIT, code generation, Python workers.
    floor()
    spark_decode()

    print("timing (one run each, after the warm-up pass):", file=sys.stderr)
    python_s, _ = _timed("pure-Python EventDecoder", lambda: EventDecoder(config).feed_rows(rows))
    noop_s, _ = _timed("no-op mapInArrow", floor)
    _, (open_s, table_s) = _timed("Spark decode", spark_decode)
    spark_s = open_s + table_s
    context = stream_context(rows, config)
    table = context.registry.tables[0]
    decoder = TableDecoder(context.registry, table, options)
    batches = [_batch(context.changes[i:i + 10_000])
               for i in range(0, len(context.changes), 10_000)]
    local_s, _ = _timed("per-batch decoder in process", lambda: [
        decoder.decode(b) for b in batches])
    spark.stop()

    def line(name: str, seconds: float, count: int) -> None:
        print(f"{name:44} {seconds:8.2f} s {count / seconds:12,.0f} rows/s")

    print()
    line("pure-Python EventDecoder (1 process)", python_s, changes)
    line(f"no-op mapInArrow ({args.master}, transfer floor)", noop_s, len(rows))
    line(f"Spark decode ({args.master}, {args.flavour})", spark_s, changes)
    line("  of which decode_capture (control job)", open_s, changes)
    line("  of which the table's events", table_s, changes)
    line("per-batch decoder in this process (1 core)", local_s, changes)
    reachable = noop_s + local_s / 2
    print()
    print(f"Spark decode / pure-Python decoder:  {python_s / spark_s:5.2f}x faster")
    print(f"Spark decode / no-op floor:          {spark_s / noop_s:5.2f}x the floor's time")
    print(f"Spark decode / (floor + decode / 2): {spark_s / reachable:5.2f}x "
          f"(floor + per-batch decode spread over 2 cores = {reachable:.2f} s)")


if __name__ == "__main__":
    main()
