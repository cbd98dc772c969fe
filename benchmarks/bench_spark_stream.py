"""Spark Structured Streaming: sustained changes/s from rotating capture files to a Parquet
target on local[1] and local[2], end-to-end latency (commit on the source -> visible in the
target), and the batch layer's decode against the no-op floor.

Run: ``.venv/bin/python benchmarks/bench_spark_stream.py [--changes 100000]
[--masters local[1],local[2]] [--rate 20 --seconds 30]``.

1. **Throughput**, on each master of ``--masters`` (a session of its own each). A capture
   of ``--changes`` inserts into the six-column table of ``_common.py`` (plus updates and
   deletes of a fifth and a tenth of the rows, in transactions of 1,000 rows), cut into
   rotating files of ``--file-transactions`` transactions each, as ``capture
   --rotate-every`` names them. Timed: one ``decode_stream`` query over the files, each
   micro-batch decoded in Spark tasks and applied to a ``ParquetTarget`` (16 bucket files)
   in the same ``foreachBatch``, until it has processed everything; and the same with a
   target that only computes the events (Spark's ``noop`` sink): the decoding alone. An
   untimed run goes first (``--no-warm-up`` leaves it out). Next to it: the batch layer on the same capture
   (``decode_capture`` + ``latest_state`` written to Parquet), the batch decode of the
   capture as Parquet (``decode_capture(persist=False)`` + the table to the ``noop`` sink)
   against the no-op ``mapInArrow`` floor, and the pure-Python ``EventDecoder`` alone.
2. **Latency** (on the last master). A throwaway PostgreSQL; ``pgcdc-events capture
   --follow --rotate-every 0.2``; one ``decode_stream`` query (trigger 0.2 s) applying to
   a ``ParquetTarget`` that records when each key became visible (its bucket file renamed
   into place). A steady ``--rate`` of one-row transactions for ``--seconds``; each row's
   latency is the time from its COMMIT returning to its file being in place. Median, p99.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import DATA, make_capture

from pgcdc_events.adapters.rotating import capture_file_name
from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.protocol import dump_capture_row, iter_capture

PROPS = {"topic.prefix": "bench", "skipped.operations": "none"}


def split_files(capture: Path, directory: Path, per_file: int) -> int:
    """The capture as rotating files of ``per_file`` transactions; returns the file count."""
    directory.mkdir(parents=True)
    with open(capture, encoding="utf-8") as fh:
        rows = list(iter_capture(fh))
    seq, lines, commits = 0, [], 0
    for row in rows:
        lines.append(dump_capture_row(row))
        if row.data[:1] == b"C":
            commits += 1
            if commits == per_file:
                (directory / capture_file_name(seq, int(row.lsn))).write_text(
                    "\n".join(lines) + "\n")
                seq, lines, commits = seq + 1, [], 0
    if lines:
        (directory / capture_file_name(seq, int(rows[-1].lsn))).write_text(
            "\n".join(lines) + "\n")
        seq += 1
    return seq


def catalog_of_bench() -> Any:
    """The six-column table's catalog, read from a throwaway server."""
    import pg8000.native
    from _common import SIX_COLUMN_TABLE

    from pgcdc_events.testing.cluster import TempCluster
    from pgcdc_events.types.catalog import CatalogSnapshot

    with TempCluster() as cluster:
        con = pg8000.native.Connection(**cluster.dsn())
        con.run(SIX_COLUMN_TABLE)
        con.close()
        DATA.mkdir(parents=True, exist_ok=True)
        path = DATA / "bench-catalog.json"
        from pgcdc_events.cli import main as cli

        url = f"postgresql://{cluster.user}@{cluster.host}:{cluster.port}/postgres"
        assert cli(["catalog", "--dsn", url, "--schema", "public", "-o", str(path)]) == 0
        return CatalogSnapshot.load(str(path))


def _noop(batches: Any) -> Any:
    for batch in batches:
        yield batch.select(["position"])


def throughput(spark: Any, changes: int, per_file: int, catalog: Any, *,
               warm_up: bool = True) -> dict[str, float]:
    from pyspark.sql.types import LongType, StructField, StructType

    from pgcdc_events.spark import decode_capture, read_capture
    from pgcdc_events.spark._session import map_in_arrow
    from pgcdc_events.spark.apply import ParquetTarget
    from pgcdc_events.spark.capture import capture_dataframe, write_capture_parquet
    from pgcdc_events.spark.state import latest_state
    from pgcdc_events.spark.stream import decode_stream, read_capture_stream

    capture = DATA / f"stream-{changes}.jsonl"
    if not capture.exists():
        make_capture(capture, changes, updates=changes // 5, deletes=changes // 10)
    parquet = DATA / f"stream-{changes}.parquet"
    work = Path(tempfile.mkdtemp(prefix="bench-stream-"))
    config = EventConfig.from_properties(PROPS)
    master = spark.sparkContext.master
    try:
        files = split_files(capture, work / "files", per_file)
        with open(capture, encoding="utf-8") as fh:
            rows = list(iter_capture(fh))
        if not parquet.exists():
            write_capture_parquet(rows, str(parquet), rows_per_group=1 << 16)
        n_changes = sum(1 for r in rows if r.data[:1] in (b"I", b"U", b"D"))
        started = time.perf_counter()
        decoder = EventDecoder(config, catalog=catalog)
        records = sum(1 for _ in decoder.feed_rows(rows))
        python_s = time.perf_counter() - started

        def noop(df: Any, batch_id: int) -> None:
            df.write.format("noop").mode("overwrite").save()

        def run_stream(name: str, parquet: bool = True) -> tuple[float, Any]:
            started = time.perf_counter()
            target = (ParquetTarget(str(work / f"target-{name}"), buckets=16) if parquet
                      else noop)
            stream = decode_stream(read_capture_stream(spark, str(work / "files")), config,
                                   catalog=catalog, checkpoint=str(work / f"cp-{name}"),
                                   targets={"public.bench": target})
            stream.start().processAllAvailable()
            seconds = time.perf_counter() - started
            stream.stop()
            return seconds, stream

        warm = decode_capture(capture_dataframe(spark, rows[:3000]), config, catalog=catalog)
        latest_state(warm.table("public.bench")).count()  # the JVM and the workers warmed up
        warm.unpersist()
        if warm_up:
            run_stream("warm", parquet=False)
        noop_stream_s, _ = run_stream("noop", parquet=False)
        stream_s, stream = run_stream("timed")
        started = time.perf_counter()
        decoded = decode_capture(read_capture(spark, str(capture)), config, catalog=catalog)
        latest_state(decoded.table("public.bench")).write.mode("overwrite").parquet(
            str(work / "batch"))
        decoded.unpersist()
        batch_s = time.perf_counter() - started
        got = spark.read.parquet(str(work / "target-timed")).count()
        want = spark.read.parquet(str(work / "batch")).count()
        assert got == want, (got, want)

        df = read_capture(spark, str(parquet))
        schema = StructType([StructField("position", LongType())])

        def floor() -> None:
            map_in_arrow(df, _noop, schema).write.format("noop").mode("overwrite").save()

        def batch_decode() -> None:
            decoded = decode_capture(df, config, catalog=catalog, persist=False)
            decoded.table("public.bench").write.format("noop").mode("overwrite").save()

        floor()
        batch_decode()
        started = time.perf_counter()
        floor()
        floor_s = time.perf_counter() - started
        started = time.perf_counter()
        batch_decode()
        decode_s = time.perf_counter() - started
        chunks = sum(b.chunks for b in stream.batches)
        print(f"throughput on {master}: {n_changes:,} changes ({records:,} records) in "
              f"{files} files of {per_file} transactions; one query, "
              f"{len(stream.batches)} micro-batches, {chunks} chunks decoded in tasks")
        print(f"{'':52} {'seconds':>8} {'changes/s':>10}")
        for name, seconds in (("stream: files -> decode_stream -> noop target", noop_stream_s),
                              ("stream: files -> decode_stream -> Parquet target", stream_s),
                              ("batch: decode_capture + latest_state -> Parquet", batch_s),
                              ("batch decode (Parquet capture) -> noop sink", decode_s),
                              ("no-op mapInArrow over the Parquet capture (floor)", floor_s),
                              ("EventDecoder alone (one process)", python_s)):
            print(f"{name:52} {seconds:8.2f} {n_changes / seconds:10,.0f}")
        print(f"batch decode / no-op floor: {floor_s / decode_s:.2f}x the floor's speed")
        return {"stream_changes_per_s": n_changes / stream_s,
                "stream_noop_changes_per_s": n_changes / noop_stream_s,
                "batch_changes_per_s": n_changes / batch_s,
                "decode_vs_floor": floor_s / decode_s}
    finally:
        shutil.rmtree(work, ignore_errors=True)


class TimedTarget:
    """A ParquetTarget that records when each key became visible."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.visible: dict[int, float] = {}

    def __call__(self, df: Any, batch_id: int) -> None:
        from pgcdc_events.spark._session import to_arrow_table

        events = to_arrow_table(df)
        self.target.apply(events, batch_id)
        now = time.time()
        for key in events.column("key").to_pylist():
            self.visible.setdefault(key["id"], now)


def latency(spark: Any, rate: float, seconds: float) -> None:
    import pg8000.native

    from pgcdc_events.cli import main as cli
    from pgcdc_events.spark.apply import ParquetTarget
    from pgcdc_events.spark.stream import decode_stream, read_capture_stream
    from pgcdc_events.testing.cluster import TempCluster
    from pgcdc_events.types.catalog import CatalogSnapshot

    work = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    with TempCluster() as cluster:
        con = pg8000.native.Connection(**cluster.dsn())
        con.run("CREATE TABLE lat (id bigint PRIMARY KEY, v text)")
        url = f"postgresql://{cluster.user}@{cluster.host}:{cluster.port}/postgres"
        args = ["capture", "--dsn", url, "--slot", "lat", "--publication", "latp",
                "--snapshot-mode", "no_data", "--output", str(work / "files"),
                "--rotate-every", "0.2", "--poll-interval", "0.05", "--quiet"]
        assert cli([*args, "--create-slot", "--create-publication"]) == 0
        assert cli(["catalog", "--dsn", url, "--schema", "public", "-o",
                    str(work / "catalog.json")]) == 0
        catalog = CatalogSnapshot.load(str(work / "catalog.json"))
        capture = subprocess.Popen([sys.executable, "-m", "pgcdc_events", *args, "--follow"],
                                   env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        while not any((work / "files").glob("_capture.checkpoint.json")):
            time.sleep(0.1)
        con.run("INSERT INTO lat VALUES (0, 'warm-up')")
        while not list((work / "files").glob("capture-*")):
            time.sleep(0.1)
        timed = TimedTarget(ParquetTarget(str(work / "target"), buckets=16))
        stream = decode_stream(read_capture_stream(spark, str(work / "files")),
                               EventConfig.from_properties(PROPS), catalog=catalog,
                               checkpoint=str(work / "cp"), targets={"public.lat": timed})
        stream.start(trigger_seconds=0.2)
        while 0 not in timed.visible:  # warmed up: the first batches are slow
            time.sleep(0.1)
        committed: dict[int, float] = {}
        total = int(rate * seconds)
        started = time.monotonic()
        for i in range(1, total + 1):
            due = started + i / rate
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            con.run("INSERT INTO lat VALUES (:i, 'x')", i=i)
            committed[i] = time.time()
        deadline = time.monotonic() + 120
        while len([i for i in committed if i in timed.visible]) < total \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        stream.stop()
        capture.send_signal(signal.SIGINT)
        capture.wait(60)
        con.close()
    lat = sorted(timed.visible[i] - committed[i] for i in committed if i in timed.visible)
    shutil.rmtree(work, ignore_errors=True)
    if len(lat) < total:
        print(f"latency: only {len(lat)} of {total} rows became visible")
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    batch_s = sorted(b.seconds for b in stream.batches)
    print(f"micro-batches: {len(batch_s)}, median {statistics.median(batch_s):.2f} s each, "
          f"max {batch_s[-1]:.2f} s")
    print(f"latency at {rate:g} transactions/s for {seconds:g} s ({len(lat)} rows; capture "
          f"--rotate-every 0.2, triggers 0.2 s): median {statistics.median(lat):.2f} s, "
          f"p99 {p99:.2f} s, max {lat[-1]:.2f} s")
    print(json.dumps({"median_s": round(statistics.median(lat), 3), "p99_s": round(p99, 3)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--file-transactions", type=int, default=10)
    parser.add_argument("--masters", default="local[1],local[2]",
                        help="comma-separated Spark masters for the throughput runs")
    parser.add_argument("--no-warm-up", action="store_true",
                        help="no untimed stream run before the timed one")
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    args = parser.parse_args()
    from pgcdc_events.spark import session

    masters = [m.strip() for m in args.masters.split(",") if m.strip()]
    spark = None
    figures: dict[str, dict[str, float]] = {}
    catalog = None if args.skip_throughput else catalog_of_bench()
    for master in masters:
        if spark is not None:
            spark.stop()
        spark = session(master, "bench-spark-stream", quiet=True,
                        conf={"spark.sql.shuffle.partitions": "2"})
        if not args.skip_throughput:
            figures[master] = throughput(spark, args.changes, args.file_transactions,
                                         catalog, warm_up=not args.no_warm_up)
    if len(figures) > 1:
        first, *rest = masters
        for master in rest:
            for key in ("stream_noop_changes_per_s", "stream_changes_per_s"):
                ratio = figures[master][key] / figures[first][key]
                print(f"{key}: {master} / {first}: {ratio:.2f}x")
    print(json.dumps(figures))
    if not args.skip_latency and spark is not None:
        latency(spark, args.rate, args.seconds)
    assert spark is not None
    spark.stop()
    threading.Event().wait(0)


if __name__ == "__main__":
    main()
