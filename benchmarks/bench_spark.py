"""Spark decoding on local[2]: throughput next to the pure-Python decoder and the Arrow floor,
and the cost of many tables.

Run: ``.venv/bin/python benchmarks/bench_spark.py [--changes 1000000] [--flavour semantic]
[--tables 1,40,500 --table-inserts 20000]``.
The first run captures the workload (Insert messages of the six-column table of
``_common.py``: bigint, text, timestamptz, numeric(12,2), boolean, varchar) from a
throwaway PostgreSQL into ``benchmarks/.data/`` and converts it to Parquet with an
ordering column; later runs reuse both. One run of each, in one process:

- the pure-Python :class:`EventDecoder` over the capture held in memory (one core);
- a no-op ``mapInArrow`` over the Parquet capture DataFrame: the transfer floor
  (Parquet scan, JVM -> Python -> JVM Arrow exchange) on local[2];
- the Spark decoder: ``decode_capture`` of the capture ``read_capture`` gives (its tasks
  read the file by positions: no shuffle), not persisted, plus one table's events
  written to Spark's ``noop`` sink (every value computed, nothing stored): decoding
  and projection in one pass;
- the same to the table's flattened changes (``DecodedCapture.changes``: columns, ``__op``,
  ``__sequence``; what the apply targets consume): runs flattened in the task, no event
  struct built nor sent to the JVM;
- the same with the records persisted and the table projected from them (the default);
  the same from a plain ``spark.read.parquet`` DataFrame (shuffled into chunks); and
  ``decode_capture`` + ``write_tables`` (every table's Parquet written in one pass);
- the same task functions in this process on Arrow batches (one core: the chunked
  ``EventDecoder`` pass, then the table's projection), and the per-batch column-wise
  decoder alone (``RunDecoder``, one core, wall and CPU seconds);
- table scaling: the same number of inserts (``--table-inserts``) into 1 table and into
  each count of ``--tables`` six-column tables, each capture written by
  ``pgcdc-events spark decode`` (Parquet, every table), in this one Spark session; the
  ratio of each to the 1-table run.

``--skip-reference`` leaves out the slow references (the pure-Python decoder and the
task functions record by record).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from _common import DATA, SIX_COLUMN_TABLE, make_capture

from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.protocol import iter_capture


def _timed(label: str, fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    print(f"  {label}: {seconds:.2f}s", file=sys.stderr)
    return seconds, result


def floor_run(spark: Any, df: Any) -> None:
    """The no-op ``mapInArrow`` over a capture DataFrame to Spark's ``noop`` sink: the
    transfer floor (the scan, the JVM -> Python -> JVM Arrow exchange)."""
    from pyspark.sql.types import LongType, StructField, StructType

    from pgcdc_events.spark._session import map_in_arrow

    def noop(batches: Iterator[Any]) -> Iterator[Any]:  # pickled by value (a local)
        for batch in batches:
            yield batch.select(["position"])

    schema = StructType([StructField("position", LongType())])
    map_in_arrow(df, noop, schema).write.format("noop").mode("overwrite").save()


def changes_run(df: Any, config: EventConfig, options: Any = None
                ) -> tuple[float, float, tuple[int, int]]:
    """``decode_capture`` (not persisted) and the first table's flattened changes to the
    ``noop`` sink: the seconds of the control job and of the changes' pass, and the
    changes flattened from runs and from single records."""
    from pgcdc_events.spark import decode_capture

    started = time.perf_counter()
    decoded = decode_capture(df, config, options=options, persist=False)
    opened = time.perf_counter()
    decoded.changes(decoded.tables[0]).write.format("noop").mode("overwrite").save()
    return opened - started, time.perf_counter() - opened, decoded.flat_counts()


def insert_capture(changes: int) -> tuple[Any, Any, list[Any]]:
    """The capture of ``changes`` inserts (transactions of 5,000) this benchmark decodes,
    made once into ``benchmarks/.data/`` with its Parquet copy: the two paths and the rows."""
    from pgcdc_events.spark import write_capture_parquet

    jsonl = DATA / f"spark-{changes}.jsonl"
    parquet = DATA / f"spark-{changes}.parquet"
    if not jsonl.exists():
        make_capture(jsonl, changes, batch=5000)
    with open(jsonl, encoding="utf-8") as fh:
        rows = list(iter_capture(fh))
    if not parquet.exists():
        write_capture_parquet(rows, str(parquet), rows_per_group=1 << 16)
    return jsonl, parquet, rows


def decode_vs_floor(spark: Any, changes: int, rounds: int = 5) -> dict[str, Any]:
    """The goal's measure of the batch layer: the decode to one table's flattened changes
    of :func:`insert_capture` (``read_capture``'s DataFrame: the tasks read the Parquet
    file by positions) against the no-op floor over the same DataFrame, the session's
    input splits set to 4 MB (every core gets row groups). One untimed pass of each, then
    ``rounds`` rounds of the two one after the other (a single pair moved by a fifth
    from one to the next on the 2-core machine). Returns the medians of the seconds, the
    ratio of the medians (the floor's speed over the decode's: 1 is the floor) and each
    round's ratio."""
    import statistics

    from pgcdc_events.spark import read_capture

    _, parquet, rows = insert_capture(changes)
    config = EventConfig.from_properties({"topic.prefix": "bench"})
    key = "spark.sql.files.maxPartitionBytes"
    before = spark.conf.get(key)
    spark.conf.set(key, str(4 << 20))
    runs: list[tuple[float, float, float, float]] = []
    try:
        df = read_capture(spark, str(parquet))
        floor_run(spark, df)
        changes_run(df, config)
        for _ in range(rounds):
            floor_s, _ = _timed("no-op mapInArrow", lambda: floor_run(spark, df))
            flat_s, (open_s, table_s, _) = _timed("Spark decode to flattened changes",
                                                  lambda: changes_run(df, config))
            runs.append((floor_s, flat_s, open_s, table_s))
    finally:
        spark.conf.set(key, before)
    floor_s, flat_s, open_s, table_s = (statistics.median(r[i] for r in runs)
                                        for i in range(4))
    return {"floor_s": floor_s, "decode_changes_s": flat_s, "control_s": open_s,
            "changes_pass_s": table_s, "rows": len(rows), "rounds": rounds,
            "decode_vs_floor": floor_s / flat_s,
            "round_ratios": [round(f / d, 3) for f, d, _, _ in runs]}


def arrow_batches(rows: list[Any], batch: int = 65_536) -> list[tuple[Any, ...]]:
    """The capture as the Arrow batches a Spark task gets: ``(chunk, position, lsn, data)``."""
    import numpy as np
    import pyarrow as pa

    numbered = [(i, int(r.lsn), bytes(r.data)) for i, r in enumerate(rows)]
    return [(np.zeros(len(part), np.int64), np.array([n[0] for n in part], np.int64),
             np.array([n[1] for n in part], np.int64),
             pa.array([n[2] for n in part], pa.binary()))
            for part in (numbered[i:i + batch] for i in range(0, len(numbered), batch))]


def batch_plan(batches: list[tuple[Any, ...]]) -> Any:
    """The chunk plan of the capture's Arrow batches, one chunk (what the driver gives the
    tasks, made before the per-batch decoder is timed)."""
    from pgcdc_events.events.chunks import control_messages, plan_chunks

    control = ((int(p), int(lsn), d) for _, position, lsns, data in batches
               for p, lsn, d in zip(position, lsns, data.to_pylist(), strict=True)
               if d[:1] not in (b"I", b"U", b"D"))
    return plan_chunks(control_messages(control), min_messages=2**62)


def batch_decoder(batches: list[tuple[Any, ...]], plan: Any, config: EventConfig) -> int:
    """The column-wise run decoder alone (:class:`RunDecoder`) over the capture's Arrow
    batches, one chunk: the number of records it gives (runs' rows and single records)."""
    from pgcdc_events.events.chunks import ChunkDecoder
    from pgcdc_events.spark.columnar import ColumnarRun, RunDecoder

    runner = RunDecoder(ChunkDecoder(plan, lambda: EventDecoder(config)))
    count = 0
    for chunk, position, lsn, data in batches:
        for item in runner.feed(chunk, position, lsn, data):
            count += item.batch.num_rows if isinstance(item, ColumnarRun) else 1
    runner.finish()
    return count


def make_tables_capture(path: Any, inserts: int, tables: int) -> None:
    """``inserts`` rows spread evenly over ``tables`` six-column tables (one INSERT per table
    per transaction of 1,000 rows), captured from a throwaway server."""
    import pg8000.native

    from pgcdc_events.protocol import CaptureRow, Lsn, write_capture
    from pgcdc_events.testing.cluster import TempCluster

    path.parent.mkdir(parents=True, exist_ok=True)
    names = [f"bench_{i}" for i in range(tables)]
    with TempCluster() as cluster:
        con = pg8000.native.Connection(**cluster.dsn())
        for name in names:
            con.run(SIX_COLUMN_TABLE.replace("TABLE bench", f"TABLE {name}"))
        con.run("CREATE PUBLICATION bench_pub FOR ALL TABLES")
        con.run("SELECT pg_create_logical_replication_slot('bench', 'pgoutput')")
        per = max(1, inserts // tables)
        for start in range(0, per, 1000):
            for name in names:
                con.run(f"INSERT INTO {name} SELECT g, 'name ' || g, now(), g * 1.25, g % 2 = 0,"
                        " 'x' FROM generate_series(CAST(:a AS bigint), CAST(:b AS bigint)) g",
                        a=start + 1, b=min(start + 1000, per))
        fetched = con.run(
            "SELECT lsn::text, xid::text, data FROM pg_logical_slot_get_binary_changes('bench',"
            " NULL, NULL, 'proto_version', '1', 'publication_names', 'bench_pub')")
        with open(path, "w", encoding="utf-8") as out:
            write_capture((CaptureRow(Lsn.parse(lsn), int(xid), bytes(data))
                           for lsn, xid, data in fetched), out)
        con.close()


def table_scaling(counts: list[int], inserts: int, master: str) -> None:
    """Seconds of ``pgcdc-events spark decode`` for the same inserts over 1..N tables."""

    from pgcdc_events.cli import main as cli

    results = []
    for tables in counts:
        path = DATA / f"spark-tables-{inserts}-{tables}.jsonl"
        if not path.exists():
            make_tables_capture(path, inserts, tables)
        args = ["spark", "decode", "--capture", str(path), "--master", master, "-q"]
        with tempfile.TemporaryDirectory() as out:
            cli([*args, "--output", out])  # warm-up
        with tempfile.TemporaryDirectory() as out:
            command = [*args, "--output", out]
            seconds, _ = _timed(f"spark decode, {tables} tables",
                                lambda command=command: cli(command))
            written = len(os.listdir(out))
        results.append((tables, seconds, written))
    print()
    base = results[0][1]
    for tables, seconds, written in results:
        print(f"spark decode, {inserts} inserts in {tables:4} tables ({written} written): "
              f"{seconds:7.2f} s  {seconds / base:5.2f}x the {counts[0]}-table run")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--changes", type=int, default=1_000_000, help="Insert messages")
    parser.add_argument("--flavour", choices=("literal", "semantic"), default="semantic")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--tables", default="",
                        help="table counts for the scaling run, e.g. 1,40,500 (none: skipped)")
    parser.add_argument("--table-inserts", type=int, default=20_000,
                        help="inserts of each scaling capture")
    parser.add_argument("--skip-throughput", action="store_true",
                        help="only the table scaling run")
    parser.add_argument("--skip-reference", action="store_true",
                        help="not the slow references (pure-Python decoder, record by record)")
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from pgcdc_events.spark import (
        SparkSchemaOptions,
        decode_capture,
        read_capture,
    )
    from pgcdc_events.spark._session import local_session
    from pgcdc_events.spark.local import decode_to_arrow
    from pgcdc_events.spark.write import write_tables

    # Small input splits, so that every core gets row groups of the one Parquet file.
    spark = local_session(args.master, "bench_spark", conf={
        "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "4g",
        "spark.sql.files.maxPartitionBytes": str(4 << 20),
        "spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    if args.tables:
        table_scaling([int(n) for n in args.tables.split(",")], args.table_inserts,
                      args.master)
    if args.skip_throughput:
        spark.stop()
        return
    jsonl, parquet, rows = insert_capture(args.changes)
    changes = sum(1 for r in rows if r.data[:1] == b"I")
    config = EventConfig.from_properties({"topic.prefix": "bench"})

    options = SparkSchemaOptions(args.flavour)
    df = read_capture(spark, str(parquet))  # its tasks read the file by positions
    plain = spark.read.parquet(str(parquet))  # any DataFrame: shuffled into chunks
    print(f"capture: {jsonl.name}, {len(rows)} messages, {changes} inserts; "
          f"Parquet {parquet.stat().st_size / 1e6:.0f} MB in {df.rdd.getNumPartitions()} "
          f"splits; flavour {args.flavour}; master {args.master}; "
          f"python {sys.version.split()[0]}")

    def floor() -> None:
        floor_run(spark, df)

    def spark_decode(frame: Any = df, persist: bool = False) -> tuple[float, float]:
        started = time.perf_counter()
        decoded = decode_capture(frame, config, options=options, persist=persist)
        opened = time.perf_counter()
        decoded.table(decoded.tables[0]).write.format("noop").mode("overwrite").save()
        done = time.perf_counter()
        decoded.unpersist()
        return opened - started, done - opened

    flat_counts: list[tuple[int, int]] = []

    def spark_changes() -> tuple[float, float]:
        open_s, table_s, counts = changes_run(df, config, options)
        flat_counts.append(counts)
        return open_s, table_s

    def spark_write() -> None:
        decoded = decode_capture(df, config, options=options, persist=False)
        with tempfile.TemporaryDirectory() as out:
            write_tables(decoded, out)

    # One untimed pass of each Spark pipeline: JVM JIT, code generation, Python workers.
    floor()
    spark_decode()
    spark_changes()

    print("timing (one run each, after the warm-up pass):", file=sys.stderr)
    python_s = 0.0
    if not args.skip_reference:
        python_s, _ = _timed("pure-Python EventDecoder",
                             lambda: EventDecoder(config).feed_rows(rows))
    noop_s, _ = _timed("no-op mapInArrow", floor)
    _, (open_s, table_s) = _timed("Spark decode", spark_decode)
    spark_s = open_s + table_s
    _, (flat_open_s, flat_table_s) = _timed("Spark decode to flattened changes", spark_changes)
    flat_s = flat_open_s + flat_table_s
    persisted_s, _ = _timed("Spark decode, persisted records",
                            lambda: sum(spark_decode(persist=True)))
    shuffled_s, _ = _timed("Spark decode, any DataFrame (shuffled into chunks)",
                           lambda: sum(spark_decode(plain)))
    write_s, _ = _timed("decode_capture + write_tables (Parquet)", spark_write)
    local_s, _ = _timed("task functions in process", lambda: decode_to_arrow(
        rows, config, options=options, chunk_messages=len(rows) // 8 + 1))
    record_s = 0.0
    if not args.skip_reference:
        record_s, _ = _timed("task functions, record by record", lambda: decode_to_arrow(
            rows, config, options=options, chunk_messages=len(rows) // 8 + 1, columnar=False))
    prepared = arrow_batches(rows)
    plan = batch_plan(prepared)
    batch_decoder(prepared[:2], plan, config)  # warm-up (imports, first conversions)
    batch_cpu = time.process_time()
    batch_s, batch_records = _timed("per-batch columnar decoder", lambda: batch_decoder(
        prepared, plan, config))
    batch_cpu = time.process_time() - batch_cpu
    spark.stop()

    def line(name: str, seconds: float, count: int) -> None:
        print(f"{name:44} {seconds:8.2f} s {count / seconds:12,.0f} rows/s")

    print()
    if python_s:
        line("pure-Python EventDecoder (1 process)", python_s, changes)
    line(f"no-op mapInArrow ({args.master}, transfer floor)", noop_s, len(rows))
    line(f"Spark decode ({args.master}, {args.flavour})", spark_s, changes)
    line("  of which decode_capture (control job)", open_s, changes)
    line("  of which the table's events", table_s, changes)
    line("Spark decode to flattened changes", flat_s, changes)
    line("  of which decode_capture (control job)", flat_open_s, changes)
    line("  of which the table's changes", flat_table_s, changes)
    runs, records = flat_counts[-1]
    print(f"  (rows flattened from column-wise runs: {runs:,}; from single records: "
          f"{records:,})")
    line("Spark decode, persisted records + projection", persisted_s, changes)
    line("Spark decode, any DataFrame (shuffled)", shuffled_s, changes)
    line("decode_capture + write_tables (Parquet)", write_s, changes)
    line("the task functions in this process (1 core)", local_s, changes)
    if record_s:
        line("  the same, every message by EventDecoder", record_s, changes)
    line("the per-batch columnar decoder alone (1 core)", batch_s, batch_records)
    line("  the same, in CPU seconds of this process", batch_cpu, batch_records)
    reachable = noop_s + local_s / 2
    print()
    if python_s:
        print(f"Spark decode / pure-Python decoder:  {python_s / spark_s:5.2f}x faster")
    print(f"Spark decode / no-op floor:          {spark_s / noop_s:5.2f}x the floor's time "
          f"({noop_s / spark_s:4.2f}x the floor's speed)")
    print(f"Spark decode to changes / no-op floor: {flat_s / noop_s:5.2f}x the floor's time "
          f"({noop_s / flat_s:4.2f}x the floor's speed; the changes' pass alone "
          f"{noop_s / flat_table_s:4.2f}x)")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"Spark decode / (floor + decode / 2): {spark_s / reachable:5.2f}x "
          f"(floor + per-batch decode spread over 2 cores = {reachable:.2f} s)")


if __name__ == "__main__":
    main()
