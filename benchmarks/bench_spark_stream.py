"""Spark Structured Streaming: sustained changes/s from rotating capture files into a Delta
table on local[1] and local[2], end-to-end latency (commit on the source -> visible in the
Delta table), and the batch layer's decode against the no-op floor.

Run: ``.venv/bin/python benchmarks/bench_spark_stream.py [--changes 100000]
[--masters local[1],local[2]] [--rate 20 --seconds 30] [--latency-paths events,changes]
[--sustained-changes 1000000 [--files-per-trigger 16]] [--floor-changes 1000000]
[--confine]``. Every goal of issue 22 in one run, each master's parts confined to its CPUs:
``--confine --skip-throughput --sustained-changes 1000000`` (about 5 minutes); the goals
met or not are printed last.

1. **Throughput**, on each master of ``--masters`` (a session of its own each). A capture
   of ``--changes`` inserts into the six-column table of ``_common.py`` (plus updates and
   deletes of a fifth and a tenth of the rows, in transactions of 1,000 rows), cut into
   rotating files of ``--file-transactions`` transactions each, as ``capture
   --rotate-every`` names them. Timed, one ``decode_stream`` query over the files each,
   until it has processed everything: to a target that only computes the table's events
   (Spark's ``noop`` sink: the decoding alone); to a ``DeltaTarget`` given the table's
   events (a plain ``foreachBatch`` function: the path before); to a ``DeltaTarget``
   given the flattened changes (what ``DecodedStream.apply`` gives it now). For the two
   Delta runs, the seconds spent collecting the micro-batches (the decoding job) and
   applying them (the rules and delta-rs, on the driver); for each stream run, the CPU
   seconds of the driver, the JVM and its Python workers (what the load of other processes
   changes less than the seconds), and how many micro-batches were decoded straight to the
   table's changes (``DecodedStream.single_passes``). An untimed run goes first
   (``--no-warm-up`` leaves it out). Next to them: the batch layer on the same capture
   (``decode_capture`` + ``changes`` applied to a Delta table as one batch), the batch
   decode of the capture as Parquet (``decode_capture(persist=False)`` + the table's
   changes to the ``noop`` sink) against the no-op ``mapInArrow`` floor, and the
   pure-Python ``EventDecoder`` alone.
2. **Sustained** (``--sustained-changes N``, on each master): a backlog of N inserts (with
   updates and deletes of a fifth and a tenth of the rows) in rotating files, read by ONE
   query, in micro-batches of at most ``spark stream``'s default 64 MB
   (``maxBytesPerTrigger``; ``--files-per-trigger``: that many files,
   ``maxFilesPerTrigger``), into a
   ``DeltaTarget`` given the flattened changes, after an untimed query over the first
   files. Changes/s over the steady-state micro-batches: the changes of every micro-batch
   but the first, over the seconds from the end of the first micro-batch to the end of
   the last (the query's start-up and first micro-batch reported apart), their CPU
   seconds, the Spark jobs a micro-batch ran (the status tracker's jobs of the query's
   run id), and the batch layer on the same capture (``decode_capture`` + ``changes`` to
   a Delta table, one batch).
3. **Latency** (on the last master), once per ``--latency-paths`` entry (the events, the
   flattened changes). A throwaway PostgreSQL; ``pgcdc-events capture --follow
   --rotate-every 0.2``; one ``decode_stream`` query (trigger 0.2 s) applying to a
   ``DeltaTarget`` that records when each key became visible (its MERGE committed). A
   steady ``--rate`` of one-row transactions for ``--seconds``; each row's latency is the
   time from its COMMIT returning to its commit in the Delta table. Median, p99.
4. **Batch decode against the floor** (``--floor-changes N``, on the last master), as
   ``bench_spark.py`` measures it: the decode of N inserts' capture to the table's
   flattened changes against the no-op ``mapInArrow`` over the same Parquet capture,
   medians of five rounds of the two (``bench_spark.decode_vs_floor``; the throughput
   part's figure is on its small capture, where the jobs' fixed costs weigh).

``--confine`` runs each master's throughput and sustained parts in a child process
confined to as many CPUs as the master has task slots (``bench_spark_cores.py``), the
latency and floor parts in this process.
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
from pgcdc_events.cli.spark_stream_cmd import DEFAULT_MB_PER_TRIGGER
from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.protocol import dump_capture_row, iter_capture

PROPS = {"topic.prefix": "bench", "skipped.operations": "none"}
#: The bytes of capture files a micro-batch of ``pgcdc-events spark stream`` reads at most
#: by default (``--max-mb-per-trigger``).
DEFAULT_BYTES = int(DEFAULT_MB_PER_TRIGGER * 1e6)


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


def cpu_seconds() -> float:
    """CPU seconds (user and system) of this process and every process under it (the JVM,
    its Python workers; children already reaped included): the work a run did, which the
    load of other processes on the machine changes less than its wall time."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[tuple[int, list[str]]]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        children.setdefault(int(fields[1]), []).append((int(entry), fields))
    own = Path(f"/proc/{os.getpid()}/stat").read_text()
    total = sum(int(x) for x in own[own.rindex(")") + 2:].split()[11:15])
    todo = [os.getpid()]
    while todo:
        for pid, fields in children.get(todo.pop(), []):
            total += sum(int(x) for x in fields[11:15])
            todo.append(pid)
    return total / tick


def _noop(batches: Any) -> Any:
    for batch in batches:
        yield batch.select(["position"])


class Phases:
    """Seconds a stream's Delta target spends collecting its micro-batches (the Spark job
    that decodes them) and applying them (the AUTO CDC rules and delta-rs, on the
    driver)."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.collect_s = 0.0
        self.apply_s = 0.0
        self.rows = 0

    def _apply(self, df: Any, batch_id: int, keys: Any) -> Any:
        from pgcdc_events.spark._session import to_arrow_table

        started = time.perf_counter()
        table = to_arrow_table(df)
        collected = time.perf_counter()
        self.target.apply(table, batch_id, app_id=self.target.app_id_of(df), keys=keys)
        self.collect_s += collected - started
        self.apply_s += time.perf_counter() - collected
        self.rows += table.num_rows
        return table


class ChangesPhases(Phases):
    """The flattened changes (a ``ChangesTarget``: what ``DeltaTarget`` is given)."""

    def apply_changes(self, df: Any, batch_id: int, keys: Any) -> None:
        self._apply(df, batch_id, keys)


class EventsPhases(Phases):
    """The table's events (a plain ``foreachBatch`` function: the path before)."""

    def __call__(self, df: Any, batch_id: int) -> None:
        self._apply(df, batch_id, None)


def capture_reader(per_line: bool) -> Any:
    """What the stream runs read the rotating files with: the files read in the Python
    tasks (``read_capture_files``, what ``spark stream`` uses), or, with ``per_line``, the
    lines split and parsed in the JVM (``read_capture_stream``: the path before)."""
    from pgcdc_events.spark.stream import read_capture_files, read_capture_stream

    return read_capture_stream if per_line else read_capture_files


def throughput(spark: Any, changes: int, per_file: int, catalog: Any, *,
               warm_up: bool = True, per_line: bool = False) -> dict[str, float]:
    from deltalake import DeltaTable
    from pyspark.sql.types import LongType, StructField, StructType

    from pgcdc_events.spark import decode_capture, read_capture
    from pgcdc_events.spark._session import map_in_arrow, to_arrow_table
    from pgcdc_events.spark.capture import capture_dataframe, write_capture_parquet
    from pgcdc_events.spark.delta import DeltaTarget
    from pgcdc_events.spark.state import latest_state
    from pgcdc_events.spark.stream import decode_stream

    reader = capture_reader(per_line)
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

        cpu: dict[str, float] = {}
        passes: dict[str, int] = {}

        def run_stream(name: str, target: Any) -> tuple[float, Any]:
            before = cpu_seconds()
            started = time.perf_counter()
            # a micro-batch bounded as spark stream bounds it by default (the capture of
            # --changes 100000, 42 MB, is one micro-batch; a larger one is several)
            stream = decode_stream(reader(spark, str(work / "files"),
                                          max_bytes_per_trigger=DEFAULT_BYTES), config,
                                   catalog=catalog, checkpoint=str(work / f"cp-{name}"),
                                   targets={"public.bench": target})
            stream.start().processAllAvailable()
            seconds = time.perf_counter() - started
            cpu[name] = cpu_seconds() - before
            passes[name] = getattr(stream, "single_passes", 0)  # 0: a version without it
            stream.stop()
            return seconds, stream

        warm = decode_capture(capture_dataframe(spark, rows[:3000]), config, catalog=catalog)
        latest_state(warm.table("public.bench")).count()  # the JVM and the workers warmed up
        warm.unpersist()
        if warm_up:
            run_stream("warm", noop)
        noop_stream_s, _ = run_stream("noop", noop)
        events = EventsPhases(DeltaTarget(str(work / "delta-events")))
        events_s, _ = run_stream("events", events)
        flat = ChangesPhases(DeltaTarget(str(work / "delta-changes")))
        stream_s, stream = run_stream("changes", flat)
        # the batch layer on the same capture: decoded to the table's flattened changes,
        # applied to a Delta table by the same rules, as one batch
        started = time.perf_counter()
        decoded = decode_capture(read_capture(spark, str(capture)), config, catalog=catalog,
                                 persist=False)
        DeltaTarget(str(work / "delta-batch")).apply(
            to_arrow_table(decoded.changes("public.bench")), 0, keys=["id"])
        batch_s = time.perf_counter() - started
        counts = {name: DeltaTable(str(work / name)).to_pyarrow_dataset().count_rows()
                  for name in ("delta-events", "delta-changes", "delta-batch")}
        assert len(set(counts.values())) == 1, counts

        df = read_capture(spark, str(parquet))
        schema = StructType([StructField("position", LongType())])

        def floor() -> None:
            map_in_arrow(df, _noop, schema).write.format("noop").mode("overwrite").save()

        def batch_decode() -> None:
            decoded = decode_capture(df, config, catalog=catalog, persist=False)
            decoded.changes("public.bench").write.format("noop").mode("overwrite").save()

        floor()
        batch_decode()
        started = time.perf_counter()
        floor()
        floor_s = time.perf_counter() - started
        started = time.perf_counter()
        batch_decode()
        decode_s = time.perf_counter() - started
        chunks = sum(b.chunks for b in stream.batches)
        runs, singles = stream.flat_counts()
        print(f"throughput on {master}: {n_changes:,} changes ({records:,} records) in "
              f"{files} files of {per_file} transactions; one query, "
              f"{len(stream.batches)} micro-batches, {chunks} chunks decoded in tasks; "
              f"flattened changes: {runs:,} from runs, {singles:,} from single records")
        for name, phases in (("events", events), ("changes", flat)):
            print(f"  Delta target ({name}): {phases.rows:,} rows collected in "
                  f"{phases.collect_s:.2f} s (the decoding job), applied in "
                  f"{phases.apply_s:.2f} s (rules + delta-rs, on the driver)")
        print("  CPU seconds of each stream run (driver, JVM and Python workers): "
              + ", ".join(f"{name} {seconds:.2f}" for name, seconds in cpu.items())
              + "; micro-batches decoded straight to the table's changes (one pass): "
              + ", ".join(f"{name} {count}" for name, count in passes.items()))
        print(f"{'':60} {'seconds':>8} {'changes/s':>10}")
        for name, seconds in (
                ("stream: files -> decode_stream -> noop target (events)", noop_stream_s),
                ("stream: files -> Delta target, events (before)", events_s),
                ("stream: files -> Delta target, flattened changes (after)", stream_s),
                ("batch: decode_capture -> changes -> Delta (one batch)", batch_s),
                ("batch decode (Parquet capture) -> changes -> noop sink", decode_s),
                ("no-op mapInArrow over the Parquet capture (floor)", floor_s),
                ("EventDecoder alone (one process)", python_s)):
            print(f"{name:60} {seconds:8.2f} {n_changes / seconds:10,.0f}")
        print(f"batch decode / no-op floor: {floor_s / decode_s:.2f}x the floor's speed")
        return {"stream_changes_per_s": n_changes / stream_s,
                "stream_events_changes_per_s": n_changes / events_s,
                "stream_noop_changes_per_s": n_changes / noop_stream_s,
                "batch_changes_per_s": n_changes / batch_s,
                "apply_s": flat.apply_s, "collect_s": flat.collect_s,
                "cpu_changes_s": cpu["changes"], "cpu_noop_s": cpu["noop"],
                "decode_vs_floor": floor_s / decode_s}
    finally:
        shutil.rmtree(work, ignore_errors=True)


class BatchClock:
    """When each micro-batch of a sustained run ended (its state written: ``progress``),
    and the CPU seconds of the run by then."""

    def __init__(self) -> None:
        self.ends: list[tuple[int, float, float, int]] = []  # (batch, time, CPU s, rows)

    def __call__(self, progress: Any) -> None:
        if progress.rows and not progress.skipped:
            self.ends.append((progress.batch_id, time.perf_counter(), cpu_seconds(),
                              progress.rows))


class CountedChanges(ChangesPhases):
    """The flattened changes, with the rows each micro-batch gave the target."""

    def __init__(self, target: Any) -> None:
        super().__init__(target)
        self.per_batch: dict[int, int] = {}
        self.phases: dict[int, tuple[float, float]] = {}

    def apply_changes(self, df: Any, batch_id: int, keys: Any) -> None:
        collect, apply = self.collect_s, self.apply_s
        self.per_batch[batch_id] = self._apply(df, batch_id, keys).num_rows
        self.phases[batch_id] = (self.collect_s - collect, self.apply_s - apply)

    def collect_s_of(self, batches: Any) -> list[float]:
        return [self.phases.get(b.batch_id, (0.0, 0.0))[0] for b in batches]

    def apply_s_of(self, batches: Any) -> list[float]:
        return [self.phases.get(b.batch_id, (0.0, 0.0))[1] for b in batches]


def sustained(spark: Any, changes: int, per_file: int, per_trigger: int | None,
              catalog: Any,
              per_line: bool = False
              ) -> dict[str, float]:
    """One long-running query over a backlog of rotating files, ``per_trigger`` files a
    micro-batch (``None``: as many as ``spark stream``'s default bound of megabytes takes)
    micro-batch, into a Delta target given the flattened changes: changes/s over the
    steady-state micro-batches (from the end of the first to the end of the last; the
    query's start-up and first micro-batch reported apart), next to the batch layer on
    the same capture."""
    from deltalake import DeltaTable

    from pgcdc_events.spark import decode_capture, read_capture
    from pgcdc_events.spark._session import to_arrow_table
    from pgcdc_events.spark.delta import DeltaTarget
    from pgcdc_events.spark.stream import decode_stream

    reader = capture_reader(per_line)
    capture = DATA / f"stream-{changes}.jsonl"
    if not capture.exists():
        make_capture(capture, changes, updates=changes // 5, deletes=changes // 10)
    work = Path(tempfile.mkdtemp(prefix="bench-sustained-"))
    config = EventConfig.from_properties(PROPS)
    master = spark.sparkContext.master
    tracker = spark.sparkContext.statusTracker()
    try:
        files = split_files(capture, work / "files", per_file)
        with open(capture, encoding="utf-8") as fh:
            n_changes = sum(1 for r in iter_capture(fh) if r.data[:1] in (b"I", b"U", b"D"))
        # untimed: the same query over the first files (the JVM and the workers warmed up)
        (work / "warm").mkdir()
        for path in sorted((work / "files").iterdir())[:min(per_trigger or 3, 3)]:
            shutil.copy(path, work / "warm" / path.name)
        warm = decode_stream(reader(spark, str(work / "warm")), config,
                             catalog=catalog, checkpoint=str(work / "cp-warm"),
                             targets={"public.bench": DeltaTarget(str(work / "delta-warm"))})
        warm.start().processAllAvailable()
        warm.stop()
        clock = BatchClock()
        target = CountedChanges(DeltaTarget(str(work / "delta")))
        cpu_before = cpu_seconds()
        started = time.perf_counter()
        stream = decode_stream(
            reader(spark, str(work / "files"), max_files_per_trigger=per_trigger,
                   max_bytes_per_trigger=None if per_trigger else DEFAULT_BYTES),
            config, catalog=catalog, checkpoint=str(work / "cp"),
            targets={"public.bench": target}, progress=clock)
        query = stream.start()
        query.processAllAvailable()
        ended = time.perf_counter()
        cpu_total = cpu_seconds() - cpu_before
        jobs = len(tracker.getJobIdsForGroup(str(query.runId)))
        stream.stop()
        if len(clock.ends) < 3:
            raise SystemExit(f"sustained: {len(clock.ends)} micro-batches; give more "
                             "--sustained-changes or fewer --files-per-trigger")
        first_id, first_end, first_cpu, _ = clock.ends[0]
        _, last_end, last_cpu, _ = clock.ends[-1]
        steady = sum(target.per_batch.get(b, 0) for b, _, _, _ in clock.ends[1:])
        steady_s = last_end - first_end
        rows = DeltaTable(str(work / "delta")).to_pyarrow_dataset().count_rows()
        # the batch layer on the same capture, as one batch
        b_started = time.perf_counter()
        decoded = decode_capture(read_capture(spark, str(capture)), config, catalog=catalog,
                                 persist=False)
        DeltaTarget(str(work / "delta-batch")).apply(
            to_arrow_table(decoded.changes("public.bench")), 0, keys=["id"])
        batch_s = time.perf_counter() - b_started
        batch_rows = DeltaTable(str(work / "delta-batch")).to_pyarrow_dataset().count_rows()
        assert rows == batch_rows, (rows, batch_rows)
        seconds = sorted(b.seconds for b in stream.batches if b.rows)
        print(f"sustained on {master}: {n_changes:,} changes in {files} files of "
              f"{per_file} transactions, " + (f"{per_trigger} files" if per_trigger else
                                               f"{DEFAULT_BYTES / 1e6:g} MB (spark stream's "
                                               "default)") + " a micro-batch: one query, "
              f"{len(clock.ends)} micro-batches (median {statistics.median(seconds):.2f} s, "
              f"max {seconds[-1]:.2f} s), {jobs} Spark jobs "
              f"({jobs / len(clock.ends):.1f} a micro-batch), "
              f"{stream.single_passes} decoded in one pass, {stream.files_parsed.value} "
              f"files read in Python tasks; {target.rows:,} changes "
              f"collected in {target.collect_s:.2f} s, applied in {target.apply_s:.2f} s")
        print(f"  start-up and first micro-batch (batch {first_id}): "
              f"{first_end - started:.2f} s; steady state: {steady:,} changes in "
              f"{steady_s:.2f} s = {steady / steady_s:,.0f} changes/s, "
              f"{last_cpu - first_cpu:.2f} CPU s ({steady / (last_cpu - first_cpu):,.0f} "
              f"changes per CPU s); whole run {ended - started:.2f} s, {cpu_total:.2f} CPU s "
              f"= {n_changes / (ended - started):,.0f} changes/s")
        later = [b for b in stream.batches if b.rows and not b.skipped][1:]
        steps: dict[str, float] = {}
        for b in later:
            for name, sec in getattr(b, "steps", ()):  # () : a version without them
                steps[name] = steps.get(name, 0.0) + sec
        inside = sum(b.seconds for b in later)
        print("  steady state, where the seconds went: "
              + ", ".join(f"{name} {sec:.2f} s" for name, sec in steps.items())
              + f" (of which collecting the changes {sum(target.collect_s_of(later)):.2f} s, "
              f"applying {sum(target.apply_s_of(later)):.2f} s); outside the micro-batches "
              f"(the query's own work: listing, offset and commit logs) "
              f"{steady_s - inside:.2f} s")
        print(f"  batch layer, decode_capture + changes to Delta (one batch): "
              f"{batch_s:.2f} s = {n_changes / batch_s:,.0f} changes/s")
        return {"sustained_changes_per_s": steady / steady_s,
                "sustained_startup_s": first_end - started,
                "sustained_whole_changes_per_s": n_changes / (ended - started),
                "sustained_cpu_s": last_cpu - first_cpu,
                "sustained_batches": len(clock.ends),
                "sustained_jobs_per_batch": jobs / len(clock.ends),
                "sustained_batch_layer_changes_per_s": n_changes / batch_s}
    finally:
        shutil.rmtree(work, ignore_errors=True)


class TimedTarget:
    """A Delta target that records when each key became visible (its MERGE committed):
    given the flattened changes, or (``events``) the table's events."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.visible: dict[int, float] = {}

    def _apply(self, df: Any, batch_id: int, keys: Any, column: str) -> None:
        from pgcdc_events.spark._session import to_arrow_table

        table = to_arrow_table(df)
        self.target.apply(table, batch_id, app_id=self.target.app_id_of(df), keys=keys)
        now = time.time()
        for value in table.column(column).to_pylist():
            self.visible.setdefault(value if column == "id" else value["id"], now)


class TimedChanges(TimedTarget):
    def apply_changes(self, df: Any, batch_id: int, keys: Any) -> None:
        self._apply(df, batch_id, keys, "id")


class TimedEvents(TimedTarget):
    def __call__(self, df: Any, batch_id: int) -> None:
        self._apply(df, batch_id, None, "key")


def latency(spark: Any, rate: float, seconds: float, path: str, *, per_line: bool = False
            ) -> dict[str, float]:
    import pg8000.native

    from pgcdc_events.cli import main as cli
    from pgcdc_events.spark.delta import DeltaTarget
    from pgcdc_events.spark.stream import decode_stream
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
        timed = (TimedChanges if path == "changes" else TimedEvents)(
            DeltaTarget(str(work / "target")))
        stream = decode_stream(capture_reader(per_line)(spark, str(work / "files")),
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
    print(f"latency ({path} to a Delta target): micro-batches: {len(batch_s)}, median "
          f"{statistics.median(batch_s):.2f} s each, max {batch_s[-1]:.2f} s")
    print(f"latency ({path}) at {rate:g} transactions/s for {seconds:g} s ({len(lat)} rows; "
          f"capture --rotate-every 0.2, triggers 0.2 s): median {statistics.median(lat):.2f} "
          f"s, p99 {p99:.2f} s, max {lat[-1]:.2f} s")
    return {"median_s": round(statistics.median(lat), 3), "p99_s": round(p99, 3)}


def goals(figures: dict[str, dict[str, float]], latencies: dict[str, dict[str, float]],
          floor: dict[str, Any] | None, *, confined: bool) -> list[tuple[str, str, bool]]:
    """Issue 22's goals against this run's figures: ``(goal, figure, met)`` for each one
    the run measured."""
    out: list[tuple[str, str, bool]] = []
    two, one = figures.get("local[2]", {}), figures.get("local[1]", {})
    if "sustained_changes_per_s" in two:
        value = two["sustained_changes_per_s"]
        out.append(("sustained into Delta on local[2] >= 50,000 changes/s",
                    f"{value:,.0f}", value >= 50_000))
    if "sustained_changes_per_s" in two and "sustained_changes_per_s" in one:
        ratio = two["sustained_changes_per_s"] / one["sustained_changes_per_s"]
        how = "each on its CPUs" if confined else "unconfined: local[1] uses more than a core"
        out.append((f"local[2] >= 1.6x local[1], sustained ({how})", f"{ratio:.2f}x",
                    ratio >= 1.6))
    changes = latencies.get("changes")
    if changes is not None:
        out.append(("latency at 20 transactions/s, median <= 1.5 s",
                    f"{changes['median_s']:.2f} s", changes["median_s"] <= 1.5))
        out.append(("latency at 20 transactions/s, p99 <= 3 s", f"{changes['p99_s']:.2f} s",
                    changes["p99_s"] <= 3.0))
    if floor is not None:
        out.append((f"batch decode >= 0.6x the no-op floor ({floor['rows']:,} rows, "
                    f"medians of {floor['rounds']} rounds)",
                    f"{floor['decode_vs_floor']:.2f}x", floor["decode_vs_floor"] >= 0.6))
    return out


def child_arguments(argv: list[str]) -> list[str]:
    """This run's arguments for a confined child running one master's throughput and
    sustained parts: without ``--confine`` and ``--masters`` (the child is given its
    own), with no latency and no floor part (this process runs them)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--masters":
            skip = True
        elif arg != "--confine" and not arg.startswith("--masters="):
            out.append(arg)
    return [*out, "--skip-latency", "--floor-changes", "0", "--child"]


def arguments() -> argparse.Namespace:
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
    parser.add_argument("--sustained-changes", type=int, default=0, metavar="N",
                        help="also a sustained run: a capture of N inserts (with updates and "
                        "deletes of a fifth and a tenth) read by one query, "
                        "--files-per-trigger files a micro-batch (0: none)")
    parser.add_argument("--files-per-trigger", type=int, default=None, metavar="N",
                        help="maxFilesPerTrigger of the sustained run (default: none, "
                        "spark stream's default bound of megabytes, --max-mb-per-trigger)")
    parser.add_argument("--per-line", action="store_true",
                        help="the stream runs read the lines in the JVM "
                        "(read_capture_stream: the path before read_capture_files)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting of the sessions (to compare settings)")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--latency-paths", default="events,changes",
                        help="what the latency runs' Delta target is given, in turn: the "
                        "table's events (the path before) and its flattened changes")
    parser.add_argument("--floor-changes", type=int, default=1_000_000, metavar="N",
                        help="the batch decode against the no-op floor on bench_spark.py's "
                        "capture of N inserts, in the last master's session (0: not run)")
    parser.add_argument("--confine", action="store_true",
                        help="each master's throughput and sustained parts in a child "
                        "process confined to as many CPUs as it has task slots "
                        "(bench_spark_cores.py); the latency and floor parts here, on the "
                        "last master, unconfined")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


def per_master(args: argparse.Namespace, masters: list[str], conf: dict[str, str]
               ) -> tuple[Any, dict[str, dict[str, float]]]:
    """The throughput and sustained parts on each master (``--confine``: each in a
    confined child process): the last master's session and the figures by master."""
    from pgcdc_events.spark import session

    spark = None
    figures: dict[str, dict[str, float]] = {}
    if args.confine:
        from bench_spark_cores import run_confined, slots

        allowed = sorted(os.sched_getaffinity(0))
        extra = child_arguments(sys.argv[1:])
        for master in masters:
            if slots(master) > len(allowed):
                raise SystemExit(f"{master}: more task slots than this process's CPUs")
            figures[master] = run_confined(master, allowed[:slots(master)], extra)
        spark = session(masters[-1], "bench-spark-stream", quiet=True, conf=conf)
    catalog = None if args.skip_throughput or args.confine else catalog_of_bench()
    for master in [] if args.confine else masters:
        if spark is not None:
            spark.stop()
        spark = session(master, "bench-spark-stream", quiet=True, conf=conf)
        if not args.skip_throughput:
            figures[master] = throughput(spark, args.changes, args.file_transactions,
                                         catalog, warm_up=not args.no_warm_up,
                                         per_line=args.per_line)
        if args.sustained_changes:
            catalog = catalog or catalog_of_bench()
            figures.setdefault(master, {}).update(sustained(
                spark, args.sustained_changes, args.file_transactions,
                args.files_per_trigger, catalog, per_line=args.per_line))
    return spark, figures


def main() -> None:
    args = arguments()
    masters = [m.strip() for m in args.masters.split(",") if m.strip()]
    conf = {"spark.sql.shuffle.partitions": "2", **dict(c.split("=", 1) for c in args.conf)}
    spark, figures = per_master(args, masters, conf)
    if len(figures) > 1:
        first, *rest = masters
        for master in rest:
            for key in ("stream_noop_changes_per_s", "stream_events_changes_per_s",
                        "stream_changes_per_s", "sustained_changes_per_s"):
                if key not in figures[master] or key not in figures[first]:
                    continue
                ratio = figures[master][key] / figures[first][key]
                print(f"{key}: {master} / {first}: {ratio:.2f}x")
    print(json.dumps(figures))
    latencies: dict[str, dict[str, float]] = {}
    if not args.skip_latency and spark is not None:
        for path in [p.strip() for p in args.latency_paths.split(",") if p.strip()]:
            latencies[path] = latency(spark, args.rate, args.seconds, path,
                                      per_line=args.per_line)
            print(json.dumps({f"latency_{path}": latencies[path]}), flush=True)
    assert spark is not None
    floor = None
    if args.floor_changes:
        from bench_spark import decode_vs_floor

        floor = decode_vs_floor(spark, args.floor_changes)
        print(f"batch decode ({spark.sparkContext.master}) of {floor['rows']:,} capture rows "
              f"to one table's flattened changes, medians of {floor['rounds']} rounds: "
              f"{floor['decode_changes_s']:.2f} s (control job {floor['control_s']:.2f} s), "
              f"the no-op floor {floor['floor_s']:.2f} s: {floor['decode_vs_floor']:.2f}x "
              f"the floor's speed (each round: {floor['round_ratios']})")
        print(json.dumps({"floor": floor}), flush=True)
    spark.stop()
    reached = goals(figures, latencies, floor, confined=args.confine)
    if reached and not args.child:  # a child's figures are its parent's to judge
        print(f"\ngoals (issue 22), load average {os.getloadavg()[0]:.2f} at the end:")
        for goal, figure, met in reached:
            print(f"  {'met    ' if met else 'NOT MET'}  {goal}: {figure}")
    threading.Event().wait(0)


if __name__ == "__main__":
    main()
