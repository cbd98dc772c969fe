"""A read-only incremental snapshot's capture (``read.only=true``) decoded by Spark.

One real capture, made by ``pgcdc-events capture`` with ``read.only=true`` on a real
PostgreSQL: a signal asks for two tables while a workload updates, inserts and deletes rows
of one of them and of a third table. The capture takes ``pg_current_snapshot()`` around
each chunk it reads and writes each chunk with both watermarks as a chunk line; the windows
close at the stream's commits (and chunk lines read where a commit closed one), not at
watermark rows. Spark's ``decode_capture`` gives the records ``pgcdc-events decode`` gives
for it (the referee: the event layer's ``RecordedChunks`` over ``ReadOnlyChunkWindow``),
whole, with the capture cut into chunks decoded in parallel before the windows' span.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from pgcdc_events.cli._parallel import DecodeJob, run_decode
from pgcdc_events.cli.decode_cmd import load_config
from pgcdc_events.events import EventConfig
from pgcdc_events.protocol.capture import read_chunk_line
from pgcdc_events.spark import decode_capture, read_capture
from pgcdc_events.testing.cluster import TempCluster
from support.databases import database_url, fresh_database
from support.signals import (
    PROPS,
    SIGNAL_DDL,
    STREAM_COMMIT_CLOSE,
    MixedWorkload,
    capture,
    capture_closed_at_a_stream_commit,
)
from support.spark_records import CLOCK_NS, RUN_ID, first_difference

#: The connector properties of the decodings (the capture's, less its chunk size).
OVERRIDES = [*(p for p in PROPS if p != "-c"), "read.only=true"]
CAPTURE = ("-c", "read.only=true", "-c", "incremental.snapshot.chunk.size=20")


@pytest.fixture(scope="module")
def recorded(pg_cluster: TempCluster, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[Path]:
    """The capture file (see the module docstring), in a database of its own."""
    with fresh_database(pg_cluster, "sparkro") as (conn, name):
        yield _record(conn, database_url(pg_cluster, name),
                      tmp_path_factory.mktemp("readonly") / "cap.jsonl",
                      {**pg_cluster.dsn(), "database": name})


def _record(conn: Any, url: str, cap: Path, dsn: dict[str, Any]) -> Path:
    import pg8000.native  # noqa: PLC0415

    conn.run(SIGNAL_DDL)
    conn.run("CREATE TABLE w (id int PRIMARY KEY, v int, s text)")
    conn.run("INSERT INTO w SELECT g, g, 's' || g FROM generate_series(1, 200) g")
    # read by the snapshot, never changed: no Relation message of it in the capture
    conn.run("CREATE TABLE q (id int PRIMARY KEY, name text)")
    conn.run("INSERT INTO q SELECT g, 'n' || g FROM generate_series(1, 45) g")
    conn.run("CREATE TABLE other (id int PRIMARY KEY, n int)")
    conn.run("CREATE TABLE c (id int PRIMARY KEY, t text)")
    conn.run("INSERT INTO c SELECT g, 't' || g FROM generate_series(1, 50) g")
    slot = ("--create-slot", "--create-publication")
    assert capture(url, cap, *slot, *CAPTURE, slot="ro") == 0
    # the stream before the snapshot: transactions the parallel chunks before the span hold
    for n in range(40):
        conn.run("INSERT INTO other VALUES (:k, :n)", k=100 + n, n=n)
    with MixedWorkload(url, keys=230, at_least=40,
                       also="INSERT INTO other VALUES (:n % 17, :n % 17) ON CONFLICT (id) "
                            "DO UPDATE SET n = other.n + 1"):
        time.sleep(0.05)
        conn.run("INSERT INTO debezium_signal VALUES ('ro-s', 'execute-snapshot', :d)",
                 d=json.dumps({"data-collections": ["public.w", "public.q"]}))
        for _ in range(60):  # until the snapshot is done (each run goes on from the last)
            assert capture(url, cap, *CAPTURE, slot="ro") == 0
            if "incremental" not in json.loads(Path(f"{cap}.checkpoint.json").read_text()):
                break
    # a second snapshot on a quiet database. A transaction in progress while the first
    # chunk is read (the high watermark's xmin): the window closes at its commit
    held = pg8000.native.Connection(**dsn)
    try:
        held.run("BEGIN")
        held.run("UPDATE other SET n = n + 1 WHERE id = 1")
        conn.run("INSERT INTO debezium_signal VALUES ('ro-c', 'execute-snapshot', :d)",
                 d=json.dumps({"data-collections": ["public.c"]}))
        assert capture(url, cap, *CAPTURE, slot="ro") == 0
        held.run("COMMIT")
    finally:
        held.close()
    # then one transaction at a time: an idle poll or the next commit closes the window,
    # and the next chunk read there closes at once ("again")
    for n in range(12):
        conn.run("UPDATE other SET n = n + 100 WHERE id = :k", k=n % 17)
        assert capture(url, cap, *CAPTURE, slot="ro") == 0
        if "incremental" not in json.loads(Path(f"{cap}.checkpoint.json").read_text()):
            break
    conn.run("UPDATE other SET n = n + 1 WHERE id = 3")  # the stream after the snapshots
    assert capture(url, cap, *CAPTURE, slot="ro") == 0
    assert "incremental" not in json.loads(Path(f"{cap}.checkpoint.json").read_text())
    return cap


def _reference(cap: Path, config: EventConfig) -> list[str]:
    """The records ``pgcdc-events decode`` writes (its own code, one decoder), with the
    processing time and run id of the Spark side."""
    out = io.BytesIO()
    job = DecodeJob(config, None, None, None, 64 << 20, RUN_ID, clock=lambda: CLOCK_NS)
    with open(cap, "rb") as src:
        run_decode(job, src, out, workers=1)
    return out.getvalue().decode().splitlines()


def chunk_lines(cap: Path) -> list[tuple[int, dict[str, Any]]]:
    """The chunk lines of a capture, with their line index."""
    out = []
    for i, line in enumerate(cap.read_text().splitlines()):
        chunk = read_chunk_line(line)
        if chunk is not None:
            out.append((i, chunk.chunk))
    return out


@pytest.mark.parametrize("stored", ["jsonl", "parquet"])
def test_decode_capture_gives_decode_records(spark: SparkSession, recorded: Path,
                                             tmp_path: Path, stored: str) -> None:
    """Every record, whole and in order, equals ``decode``'s: the ``r`` events a commit
    closes a window at, and those of a chunk line read where a commit closed the window
    before it; the chunks before the windows' span are decoded in parallel."""
    config = load_config(None, OVERRIDES)
    want = _reference(recorded, config)
    lines = chunk_lines(recorded)
    assert len(lines) > 5 and all("low" in c or "idle" in c for _, c in lines)
    reads = {json.loads(x)["topic"]: 0 for x in want}
    for x in want:
        value = json.loads(x)["value"]
        if value is not None and value["payload"]["op"] == "r":
            reads[json.loads(x)["topic"]] += 1
    assert reads["pgcdc.public.q"] == 45  # q's rows came only from the chunk lines
    assert reads["pgcdc.public.w"] > 0
    frame = read_capture(spark, str(recorded))
    if stored == "parquet":  # the DataFrame's columns as a Parquet dataset, read back
        frame.write.parquet(str(tmp_path / "cap.parquet"))
        frame = read_capture(spark, str(tmp_path / "cap.parquet"))
    decoded = decode_capture(frame, config, chunk_messages=40, clock=lambda: CLOCK_NS,
                             run_id=RUN_ID, lines=True, tombstones=True)
    try:
        got = [r["line"] for r in decoded.records.orderBy("position", "index")
               .select("line").collect()]
        problem = first_difference(got, want)
        assert not problem, problem
        assert decoded.source is not None
        window = decoded.source.make.window
        # the span runs to the capture's end: the window's chunk is the last one
        assert window is not None and 0 < window == decoded.plan.chunks - 1, \
            (window, decoded.plan.chunks)
        q = decoded.table("public.q").orderBy("_position").collect()
        assert [r["after"]["id"] for r in q] == list(range(1, 46))
        assert {r["source"]["snapshot"] for r in q} == {"incremental"}
    finally:
        decoded.unpersist()



def test_decode_stream_refuses_a_read_only_chunk_line(spark: SparkSession, recorded: Path,
                                                      tmp_path: Path) -> None:
    """``decode_stream`` replays the windows of watermark rows, not those a read-only
    snapshot closes at commits and idle polls: the query fails in one line naming the
    first such chunk line's position, where it would have dropped its ``r`` events."""
    from pgcdc_events.adapters.rotating import capture_file_name  # noqa: PLC0415
    from pgcdc_events.protocol.lsn import Lsn  # noqa: PLC0415
    from pgcdc_events.spark.stream import (  # noqa: PLC0415
        STREAM_READ_ONLY_REFUSED,
        decode_stream,
        read_capture_stream,
    )
    from pgcdc_events.types.catalog import CatalogSnapshot  # noqa: PLC0415

    text = recorded.read_text()
    last = json.loads(text.splitlines()[-1])["lsn"]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / capture_file_name(0, int(Lsn.parse(last)))).write_text(text)
    first = chunk_lines(recorded)[0][0]
    stream = decode_stream(read_capture_stream(spark, str(tmp_path / "in")),
                           load_config(None, OVERRIDES), catalog=CatalogSnapshot("db", "15", ()),
                           checkpoint=str(tmp_path / "cp"), path=str(tmp_path / "out"))
    stream.start()
    assert stream.query is not None
    with pytest.raises(Exception, match="read-only") as caught:
        stream.query.processAllAvailable()
    stream.stop()
    message = str(caught.value)
    assert f"position {first}: {STREAM_READ_ONLY_REFUSED}" in message, message
    with contextlib.suppress(Exception):
        spark.streams.resetTerminated()


def test_a_window_a_stream_commit_closes(spark: SparkSession, pg_cluster: TempCluster,
                                         pg_conn: Any, tmp_path: Path) -> None:
    """A read-only window that a Stream Commit closes (``committed`` after the Commit, as
    ``decode`` calls it; the capture of ``tests/adapters/test_readonly_capture.py``'s
    ``test_a_window_closed_at_a_stream_commit``): ``decode_capture`` gives ``decode``'s
    records, every row of ``t`` read once."""
    pg_conn.run(SIGNAL_DDL)
    database = pg_conn.run("SELECT current_database()")[0][0]
    cap = tmp_path / "cap.jsonl"
    capture_closed_at_a_stream_commit(database_url(pg_cluster, database), pg_conn, cap)
    config = load_config(None, [*(p for p in PROPS if p != "-c"),
                                *(o for o in STREAM_COMMIT_CLOSE[2:] if o != "-c")])
    want = _reference(cap, config)
    reads = [json.loads(x)["value"]["payload"]["after"]["id"] for x in want
             if json.loads(x)["topic"] == "pgcdc.public.t" and json.loads(x)["value"]
             and json.loads(x)["value"]["payload"]["op"] == "r"]
    assert sorted(reads) == [1, 2, 3, 4, 5]
    decoded = decode_capture(read_capture(spark, str(cap)), config, chunk_messages=40,
                             clock=lambda: CLOCK_NS, run_id=RUN_ID, lines=True,
                             tombstones=True)
    try:
        got = [r["line"] for r in decoded.records.orderBy("position", "index")
               .select("line").collect()]
        problem = first_difference(got, want)
        assert not problem, problem
    finally:
        decoded.unpersist()
