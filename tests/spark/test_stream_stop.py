"""``pgcdc-events spark stream`` stopped by SIGINT (Ctrl-C) or SIGTERM while a micro-batch
runs: it exits 0 with its one ``stopped`` line and no Java stack on stderr (Spark's check of
whether a failed ``foreachBatch`` call was interrupted by the stop ran a regular expression
that recurses once per character over the Python traceback; a long one, carrying the Java
stack of the cancelled job, overflowed the stack: ``java.lang.StackOverflowError`` in
``java.util.regex``), and a restart applies every change once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
import uuid
from pathlib import Path
from typing import Any, cast

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

import deltalake
from pyspark.sql import SparkSession

from pgcdc_events.spark._session import map_in_arrow, to_arrow_table
from pgcdc_events.spark.stream import _BatchWriter
from pgcdc_events.types.catalog import fetch_catalog
from support.capture import Capturer
from support.capture_files import write_files

PROGRESS = "pgcdc-events spark stream: batch "
STOPPED = "pgcdc-events spark stream: stopped; 1 tables under "


def _command(tmp: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pgcdc_events.cli", "spark", "stream",
            "--input", str(tmp / "in"), "--catalog", str(tmp / "catalog.json"),
            "-c", "topic.prefix=s", "--output", str(tmp / "out"),
            "--checkpoint", str(tmp / "cp"), "--trigger", "0.2",
            "--max-files-per-trigger", "1", "--master", "local[2]", *extra]


def _in_flight(offsets: Path, commits: Path, process: subprocess.Popen[bytes],
               timeout: float = 300) -> int:
    """A micro-batch after the first that has started (its offsets written) and is still
    running (no commit) a moment later."""
    deadline = time.monotonic() + timeout
    batch = 1
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1].decode()
        if (offsets / str(batch)).exists():
            time.sleep(0.3)  # inside the foreachBatch call, past the reading of the files
            if not (commits / str(batch)).exists():
                return batch
            batch += 1
        time.sleep(0.02)
    raise AssertionError("no micro-batch caught running")


@pytest.mark.slow  # two JVMs and 80,000 changes: 1.5-7 min; the bug is caught by the next test
def test_a_stop_during_a_batch_is_clean_and_loses_nothing(tmp_path: Path, pg_conn: Any) -> None:
    """SIGINT (Ctrl-C; SIGTERM takes the same path) while a micro-batch runs: exit 0, the
    progress lines and the one ``stopped`` line, no Java stack; the restart finishes."""
    pg_conn.run("CREATE TABLE big (id int PRIMARY KEY, note text, n int)")
    capturer = Capturer(pg_conn, tables=["big"])
    size, files = 10_000, 4
    for i in range(files):
        pg_conn.run("INSERT INTO big SELECT g, 'n' || g, 0 FROM generate_series("
                    "CAST(:a AS int), CAST(:b AS int)) g", a=i * size + 1, b=(i + 1) * size)
        pg_conn.run("UPDATE big SET n = n + 1, note = 'u' WHERE id % 7 = CAST(:i AS int)", i=i)
    rows = capturer.changes(proto_version=2)
    fetch_catalog(pg_conn).save(str(tmp_path / "catalog.json"))
    commits = [i + 1 for i, r in enumerate(rows) if r.data[:1] == b"C"]
    write_files(tmp_path / "in", rows, commits[1:-1:2])  # a file: an INSERT, an UPDATE
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    process = subprocess.Popen(_command(tmp_path), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env)
    try:
        decode = tmp_path / "cp" / "decode"
        batch = _in_flight(decode / "offsets", decode / "commits", process)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = err.decode()
    lines = [line for line in text.splitlines() if line.strip()]
    assert process.returncode == 0, text
    assert "StackOverflowError" not in text and "\tat " not in text, text
    assert "Traceback" not in text and "Exception" not in text, text
    assert lines and lines[-1].startswith(STOPPED), text
    assert all(line.startswith(PROGRESS) for line in lines[:-1]), text
    assert not (decode / "commits" / str(batch + 1)).exists()  # stopped within the batch
    # the restart takes the interrupted batch again: every change once
    again = subprocess.run([*_command(tmp_path), "--stop-when-idle", "4", "-q"],
                           capture_output=True, env=env, timeout=600, check=False)
    assert again.returncode == 0 and not again.stderr.strip(), again.stderr.decode()
    table = tmp_path / "out" / "tables" / "public.big"
    got = sorted(tuple(r.values()) for r in deltalake.DeltaTable(str(table))
                 .to_pyarrow_table().select(["id", "note", "n"]).to_pylist())
    want = sorted(tuple(r) for r in pg_conn.run("SELECT id, note, n FROM big"))
    assert len(got) == size * files and got == want
    versions = []  # each micro-batch committed once, in order
    for log in sorted((table / "_delta_log").glob("*.json")):
        with open(log, encoding="utf-8") as fh:
            versions += [json.loads(line)["txn"]["version"] for line in fh
                         if '"txn"' in line]
    assert versions == sorted(set(versions)) and len(versions) >= files // 2, versions


def _cancelled_job(spark: SparkSession) -> Exception:
    """The error a micro-batch's Spark job raises when its query is stopped: a real job
    cancelled with its job group, as ``StreamingQuery.stop`` cancels them."""
    context = spark.sparkContext
    group = f"pgcdc-events-test-{uuid.uuid4()}"
    raised: list[Exception] = []

    def slow(batches: Any) -> Any:
        time.sleep(120)
        yield from batches

    def job() -> None:
        context.setJobGroup(group, "a micro-batch", interruptOnCancel=True)
        try:
            to_arrow_table(map_in_arrow(spark.range(1), slow, spark.range(1).schema))
        except Exception as exc:  # what the job raised, kept
            raised.append(exc)

    thread = threading.Thread(target=job)
    thread.start()
    deadline = time.monotonic() + 120
    while not context.statusTracker().getJobIdsForGroup(group):
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.05)
    context.cancelJobGroup(group)
    thread.join(120)
    assert raised, "the job was not cancelled"
    setattr(raised[0], "group", group)  # noqa: B010
    return raised[0]


def test_a_cancelled_batch_is_a_stop_for_spark(spark: SparkSession,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """What the decoding query's ``foreachBatch`` function raises when the query is
    stopped during a batch, as py4j hands it to Spark (``traceback.format_exc()``), is
    taken by Spark for the stop it is: no StackOverflowError in Spark's regular
    expression, no failure reported."""
    cancelled = _cancelled_job(spark)

    def batch(self: Any, df: Any, batch_id: int) -> None:
        raise cancelled

    monkeypatch.setattr(_BatchWriter, "_batch", batch)
    writer = _BatchWriter(cast("Any", None))
    try:
        writer(None, 7)
    except Exception:  # py4j's callback server does the same
        text = traceback.format_exc()
    else:
        raise AssertionError("the failure was not raised")
    assert len(text.splitlines()[-1]) < 1000 and "micro-batch 7 cancelled" in text, text
    jvm, context = spark.sparkContext._jvm, spark.sparkContext
    assert jvm is not None
    error = jvm.py4j.Py4JException("An exception was raised by the Python Proxy. Return "
                                   f"Message: {text}")
    context.setLocalProperty("spark.jobGroup.id", cancelled.group)  # type: ignore[attr-defined]
    try:  # what StreamExecution asks once stop() has interrupted the batch
        stop = jvm.org.apache.spark.sql.execution.streaming.runtime.StreamExecution
        assert stop.isInterruptionException(error, context._jsc.sc()) is True
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
