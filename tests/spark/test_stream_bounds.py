"""What bounds a micro-batch of ``spark stream``, and what it says when Spark's JVM dies:
``--max-mb-per-trigger`` (Spark's ``maxBytesPerTrigger``, on by default) cuts a backlog of
capture files into micro-batches; a JVM that dies under the command (out of memory, killed)
is one line naming its exit, never py4j's "Answer from Java side is empty"; and how many
Spark jobs a micro-batch runs (the serial part of each one)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812

from pgcdc_events.cli import build_parser
from pgcdc_events.cli.spark_stream_cmd import max_bytes_per_trigger
from pgcdc_events.errors import PgCdcError
from pgcdc_events.events import EventConfig
from pgcdc_events.events.chunks import ChunkPlan, Cut
from pgcdc_events.spark.decode import chunk_tasks, partition_keys, spark_hash_int
from pgcdc_events.spark.delta import DeltaTarget
from pgcdc_events.spark.stream import decode_stream, read_capture_stream
from support.capture_files import write_files
from support.golden import recordings

RECORDING = next(r for r in recordings("events") if r.mode == "events-txmeta-truncate-notombstones")
PROGRESS = "pgcdc-events spark stream: batch "


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recording as four rotating capture files, its catalog and connector settings."""
    tmp = tmp_path_factory.mktemp("bounds")
    rows = list(RECORDING.capture)
    commits = [i + 1 for i, r in enumerate(rows) if r.data[:1] == b"C"]
    # cut after a commit near each quarter: no micro-batch leaves rows for the next
    write_files(tmp / "in", rows, [min(commits, key=lambda c: abs(c - q * len(rows) // 4))
                                   for q in (1, 2, 3)])
    RECORDING.catalog.save(str(tmp / "catalog.json"))
    (tmp / "c.properties").write_text(
        "".join(f"{k}={v}\n" for k, v in RECORDING.properties.items()))
    return tmp


def _command(files: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pgcdc_events.cli", "spark", "stream",
            "--input", str(files / "in"), "--catalog", str(files / "catalog.json"),
            "--config", str(files / "c.properties"), "--output", str(out / "out"),
            "--checkpoint", str(out / "cp"), "--trigger", "0.2", "--master", "local[1]",
            *extra]


def _run(files: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*_command(files, out, *extra), "--stop-when-idle", "3"],
                          capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable})


def _batches(spark: SparkSession, files: Path, out: Path, **bound: int) -> int:
    """How many micro-batches one query over the files takes, bounded as given."""
    stream = decode_stream(read_capture_stream(spark, str(files / "in"), **bound),
                           EventConfig.from_properties(RECORDING.properties),
                           catalog=RECORDING.catalog, checkpoint=str(out / "cp"),
                           targets={"public.ev_main": DeltaTarget(str(out / "d"))})
    stream.start().processAllAvailable()
    stream.stop()
    return len(stream.batches)


def test_a_backlog_is_read_in_micro_batches_of_at_most_the_bytes_given(
        spark: SparkSession, files: Path, tmp_path: Path) -> None:
    """A bytes bound below a file's size: one file a micro-batch (the four files, four
    micro-batches), where a bound above the backlog takes it in one; and what
    ``--max-mb-per-trigger`` gives (64 MB unless given; none with
    ``--max-files-per-trigger``). One query each in the suite's session: the command's own
    JVM is tested below."""
    assert _batches(spark, files, tmp_path / "small", max_bytes_per_trigger=1) == 4
    assert _batches(spark, files, tmp_path / "whole", max_bytes_per_trigger=10**9) == 1
    parser = build_parser()
    base = ["spark", "stream", "--input", "in", "--catalog", "c", "--output", "o",
            "--checkpoint", "cp"]
    assert [max_bytes_per_trigger(parser.parse_args([*base, *extra])) for extra in (
        [], ["--max-mb-per-trigger", "0.000001"], ["--max-mb-per-trigger", "1000"],
        ["--max-files-per-trigger", "2"])] == [64_000_000, 1, 1_000_000_000, None]


def test_the_bounds_are_checked(files: Path, tmp_path: Path, spark: SparkSession) -> None:
    done = _run(files, tmp_path, "--max-mb-per-trigger", "0")
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert "--max-mb-per-trigger must be positive" in done.stderr
    with pytest.raises(PgCdcError, match="not both"):
        read_capture_stream(spark, str(files / "in"), max_files_per_trigger=1,
                            max_bytes_per_trigger=1)


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(
                int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _java(pid: int) -> int:
    for child in _descendants(pid):
        try:
            if Path(f"/proc/{child}/comm").read_text().strip() == "java":
                return child
        except OSError:
            continue
    raise AssertionError("no JVM under the command")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the JVM through /proc")
def test_a_jvm_that_dies_is_one_line_naming_its_exit(files: Path, tmp_path: Path) -> None:
    """The JVM killed (as the system's out-of-memory killer kills it) while the command
    follows the files: exit 1, one line naming the signal, not py4j's words."""
    process = subprocess.Popen(_command(files, tmp_path, "--max-files-per-trigger", "1"),
                               stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    try:
        assert process.stderr is not None
        seen = []
        while not (seen and seen[-1].startswith(PROGRESS)):  # a micro-batch done
            seen.append(process.stderr.readline())
            assert seen[-1], seen
        os.kill(_java(process.pid), signal.SIGKILL)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith(PROGRESS)
             and "has no key" not in x]
    assert process.returncode == 1, err
    assert lines == ["pgcdc-events spark: error: Spark's JVM was killed by signal 9 "
                     "(SIGKILL: the system's out-of-memory killer sends it)"], err


def test_a_micro_batch_runs_three_spark_jobs(spark: SparkSession, files: Path,
                                             tmp_path: Path) -> None:
    """One table's changes into Delta: per micro-batch the control job, the decoding job
    (and its shuffle's, with more than one chunk: the status tracker's jobs of the query's
    run): what each micro-batch runs one after the other, whatever its size."""
    stream = decode_stream(
        read_capture_stream(spark, str(files / "in"), max_files_per_trigger=1),
        EventConfig.from_properties(RECORDING.properties), catalog=RECORDING.catalog,
        checkpoint=str(tmp_path / "cp"),
        targets={"public.ev_main": DeltaTarget(str(tmp_path / "d"))})
    query = stream.start()
    try:
        query.processAllAvailable()
        time.sleep(0.5)  # the last job's end reaches the status store
        jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(str(query.runId))
    finally:
        stream.stop()
    batches = stream.batches
    waiting = sum(1 for b in batches if b.pending)  # + the job collecting the rows kept
    assert len(batches) == 4 and stream.single_passes >= 1
    assert len(batches) <= len(jobs) <= 3 * len(batches) + waiting, (jobs, batches)


def test_spark_hash_int_is_sparks(spark: SparkSession) -> None:
    """``spark_hash_int`` gives what Spark's ``hash()`` gives (the hash by which
    ``repartition(n, column)`` places a row), for small, large and negative integers."""
    values = [*range(-40, 40), 2**31 - 1, -(2**31), 123_456_789, -987_654_321]
    got = spark.createDataFrame([(v,) for v in values], "v int").select(
        "v", F.hash("v").alias("h")).collect()
    assert {r["v"]: r["h"] for r in got} == {v: spark_hash_int(v) for v in values}
    assert len(set(partition_keys(4))) == 4
    assert [spark_hash_int(k) % 4 for k in partition_keys(4)] == [0, 1, 2, 3]


@pytest.mark.parametrize("tasks", [2, 3, 4, 6])
def test_chunk_tasks_are_even_runs_of_whole_chunks(spark: SparkSession, tasks: int) -> None:
    """``chunk_tasks``: every row once, in ``tasks`` partitions (none empty), each a run of
    consecutive whole chunks (a chunk's decoder needs all its rows), the runs' lengths
    within one chunk of each other."""
    positions = list(range(0, 1200, 7)) + [(1 << 32) + i for i in range(0, 500, 5)]
    bounds = positions[10::17]  # 15 chunk ends, chunks of 17 rows
    plan = ChunkPlan((), tuple(Cut(p, ((p, b""), (p, b""))) for p in bounds))
    df = spark.createDataFrame([(p,) for p in reversed(positions)], "position long")
    parts = [[(r["_chunk"], r["position"]) for r in part] for part in
             chunk_tasks(df, plan, positions[0], positions[-1], tasks).rdd.glom().collect()]
    assert len(parts) == tasks
    assert sorted(p for part in parts for _, p in part) == positions
    assert all(c == plan.chunk_of(p) for part in parts for c, p in part)
    runs = sorted(sorted({c for c, _ in part}) for part in parts)
    assert [c for run in runs for c in run] == list(range(plan.chunks)), runs
    assert all(run == list(range(run[0], run[-1] + 1)) for run in runs), runs
    assert max(map(len, runs)) - min(map(len, runs)) <= 1, runs
