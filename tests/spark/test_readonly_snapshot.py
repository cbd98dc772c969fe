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

import io
import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from pgcdc_events.adapters.rotating import capture_file_name
from pgcdc_events.cli import main
from pgcdc_events.cli._parallel import DecodeJob, run_decode
from pgcdc_events.cli.decode_cmd import load_config
from pgcdc_events.events import EventConfig
from pgcdc_events.events.decoder import EventDecoder
from pgcdc_events.events.incremental import ReadOnlyChunkWindow, RecordedChunks
from pgcdc_events.protocol.capture import CaptureRow, read_chunk_line
from pgcdc_events.protocol.lsn import Lsn
from pgcdc_events.spark import decode_capture, read_capture
from pgcdc_events.testing.cluster import TempCluster
from pgcdc_events.types.catalog import CatalogSnapshot
from support.capture_files import stamp
from support.databases import database_url, fresh_database
from support.signals import (
    PROPS,
    SIGNAL_DDL,
    STREAM_COMMIT_CLOSE,
    MixedWorkload,
    capture,
    capture_closed_at_a_stream_commit,
    follow_read_only_snapshot,
)
from support.spark_records import CLOCK_NS, RUN_ID, first_difference, last_rows_per_key

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
    assert main(["catalog", "--dsn", url, "-o", str(cap.parent / "catalog.json")]) == 0
    return cap


def _reference(cap: Path, config: EventConfig, catalog: CatalogSnapshot | None = None
               ) -> list[str]:
    """The records ``pgcdc-events decode`` writes (its own code, one decoder), with the
    processing time and run id of the Spark side (and ``--catalog``'s ``catalog``)."""
    out = io.BytesIO()
    if catalog is not None:
        config = config.with_catalog(catalog)
    job = DecodeJob(config, catalog, None, None, 64 << 20, RUN_ID, clock=lambda: CLOCK_NS)
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
    problem = first_difference(_spark_lines(spark, cap, config, 40), want)
    assert not problem, problem


# -- decode_stream ----------------------------------------------------------------------


def _open_windows(cap: Path, config: EventConfig) -> list[bool]:
    """For each line of the capture, whether a read-only window is open (a chunk in flight)
    after it, as the event layer's ``RecordedChunks`` replays the capture."""
    decoder = EventDecoder(config)
    chunks = RecordedChunks(decoder)
    out = []
    for line in cap.read_text().splitlines():
        chunk = read_chunk_line(line)
        if chunk is not None:
            chunks.chunk(chunk.chunk)
        else:
            row = CaptureRow.from_line(line)
            assert row is not None
            list(chunks.through(decoder.iter_feed(row.data, int(row.lsn))))
            if row.data[:1] in (b"C", b"c"):
                list(chunks.committed(int(row.lsn)))
        out.append(chunks.window is not None and chunks.window.pending_chunk is not None)
    return out


def _rotating(cap: Path, directory: Path, cuts: set[int]) -> list[Path]:
    """The capture's lines as rotating capture files (as ``capture --rotate-every`` names
    them), a file starting at each of ``cuts`` (line indexes). Returns the files."""
    lines = cap.read_text().splitlines(keepends=True)
    directory.mkdir(exist_ok=True)
    files = []
    for seq, (lo, hi) in enumerate(itertools.pairwise(sorted(cuts | {0, len(lines)}))):
        part = lines[lo:hi]
        path = directory / capture_file_name(seq, int(Lsn.parse(json.loads(part[-1])["lsn"])))
        path.write_text("".join(part))
        stamp(path)  # in order, for Spark's file source
        files.append(path)
    return files


def _inside_windows(cap: Path, config: EventConfig, every: int) -> set[int]:
    """Every ``every``-th line index that falls while a read-only window is open (a file
    starting there cuts the window), and each chunk line read where the window before it
    closed (``again``: it closes at once when the watermarks did not change, which only
    the window before knows)."""
    opened = _open_windows(cap, config)
    inside = [i for i in range(1, len(opened)) if opened[i - 1]]
    assert len(inside) > 10, inside
    again = [i for i, chunk in chunk_lines(cap) if "again" in chunk]
    assert again
    return set(inside[::every]) | set(again)


def _stream(spark: SparkSession, directory: Path, tmp_path: Path, config: EventConfig,
            catalog: CatalogSnapshot, *, files: bool = False) -> Any:
    """The files' lines read in the JVM, or with ``files`` in the Python tasks."""
    from pgcdc_events.spark.stream import (  # noqa: PLC0415
        decode_stream,
        read_capture_files,
        read_capture_stream,
    )

    reader = read_capture_files if files else read_capture_stream
    return decode_stream(
        reader(spark, str(directory), max_files_per_trigger=1), config,
        catalog=catalog, path=str(tmp_path / "out"), checkpoint=str(tmp_path / "cp"),
        lines=True, clock=lambda: CLOCK_NS, run_id=RUN_ID, chunk_messages=20)


def _run(stream: Any) -> None:
    stream.start()
    assert stream.query is not None
    try:
        stream.query.processAllAvailable()
    finally:
        stream.stop()


def _stream_records(spark: SparkSession, tmp_path: Path) -> list[str]:
    return [r["line"] for r in spark.read.parquet(str(tmp_path / "out" / "records"))
            .orderBy("position", "index").select("line").collect()]


def _states(tmp_path: Path) -> list[dict[str, Any]]:
    """The decoder's states in the query's checkpoint, by batch."""
    return [json.loads(p.read_text()) for p in
            sorted((tmp_path / "cp" / "_decoder").glob("state-*.json"))]


@pytest.mark.parametrize("files", ["one", "inside-windows"])
def test_decode_stream_gives_decode_records(spark: SparkSession, recorded: Path,
                                            tmp_path: Path, files: str) -> None:
    """``decode_stream`` of the read-only capture as rotating files, one a micro-batch:
    every record, whole and in order, equals ``decode``'s. Cut while windows are open, a
    batch decodes up to its last cut where no chunk is in flight, the rest waits in the
    state, and the read-only window there (its last watermarks, the last change's
    sequence) is carried in the state to the next batch."""
    config = load_config(None, OVERRIDES)
    catalog = CatalogSnapshot.load(str(recorded.parent / "catalog.json"))
    want = _reference(recorded, config, catalog)
    cuts = set() if files == "one" else _inside_windows(recorded, config, 3)
    names = _rotating(recorded, tmp_path / "in", cuts)
    stream = _stream(spark, tmp_path / "in", tmp_path, config, catalog)
    _run(stream)
    assert len([b for b in stream.batches if not b.skipped]) >= len(names)
    problem = first_difference(_stream_records(spark, tmp_path), want)
    assert not problem, problem
    if files != "one":  # windows were held, and a read-only window carried
        assert any(b.pending for b in stream.batches)
        assert any(s["window"] is not None and s["chunks"] for s in _states(tmp_path))


def test_decode_stream_restarts_inside_a_window(spark: SparkSession, recorded: Path,
                                               tmp_path: Path) -> None:
    """The query stopped while a read-only window is open (its chunk line, and the rows
    after the last cut where none was, wait in the state; the window before it is carried)
    and started again from its checkpoint, with the rest of the files: every record equals
    ``decode``'s. The files read in the Python tasks (``read_capture_files``, what ``spark
    stream`` reads), each file once."""
    config = load_config(None, OVERRIDES)
    catalog = CatalogSnapshot.load(str(recorded.parent / "catalog.json"))
    want = _reference(recorded, config, catalog)
    cuts = sorted(_inside_windows(recorded, config, 4))
    files = _rotating(recorded, tmp_path / "all", set(cuts))
    (tmp_path / "in").mkdir()
    half = len(files) // 2
    for path in files[:half]:
        path.rename(tmp_path / "in" / path.name)
    first = _stream(spark, tmp_path / "in", tmp_path, config, catalog, files=True)
    _run(first)
    assert first.files_parsed.value == half
    stopped = _states(tmp_path)[-1]
    assert stopped["window"] is not None and stopped["chunks"], stopped  # inside a window
    for path in files[half:]:
        path.rename(tmp_path / "in" / path.name)
    second = _stream(spark, tmp_path / "in", tmp_path, config, catalog, files=True)
    _run(second)
    assert second.files_parsed.value == len(files) - half
    problem = first_difference(_stream_records(spark, tmp_path), want)
    assert not problem, problem


def test_spark_stream_keeps_delta_tables_of_the_snapshot(spark: SparkSession, recorded: Path,
                                                        tmp_path: Path) -> None:
    """What a user runs: ``pgcdc-events spark stream`` of the read-only capture as rotating
    files cut inside windows, a file a micro-batch, into Delta tables: each snapshotted
    table holds the rows the last event per key of ``decode``'s records gives."""
    deltalake = pytest.importorskip("deltalake")
    config = load_config(None, OVERRIDES)
    catalog = CatalogSnapshot.load(str(recorded.parent / "catalog.json"))
    want = _reference(recorded, config, catalog)
    _rotating(recorded, tmp_path / "in", _inside_windows(recorded, config, 3))
    properties = tmp_path / "connector.properties"
    properties.write_text("signal.data.collection=public.debezium_signal\nread.only=true\n")
    assert main(["spark", "stream", "--input", str(tmp_path / "in"), "--config",
                 str(properties), "--catalog", str(recorded.parent / "catalog.json"),
                 "--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "cp"),
                 "--max-files-per-trigger", "1", "--trigger", "0.2",
                 "--stop-when-idle", "5", "-q"]) == 0
    for table, columns in (("w", ("id", "v", "s")), ("q", ("id", "name")),
                           ("c", ("id", "t"))):
        expected = last_rows_per_key(want, f"pgcdc.public.{table}", columns)
        assert expected, table
        delta = deltalake.DeltaTable(str(tmp_path / "out" / "tables" / f"public.{table}"))
        got = sorted(tuple(r[c] for c in columns) for r in delta.to_pyarrow_table().to_pylist())
        assert got == expected, table
        if table == "q":
            assert [r[0] for r in got] == list(range(1, 46))


def test_a_corrupt_window_in_the_state_is_named(tmp_path: Path) -> None:
    """A checkpointed read-only window that is not one fails in one line naming the state
    file and what is wrong, before anything is decoded."""
    from pgcdc_events.spark import SparkDecodeError  # noqa: PLC0415
    from pgcdc_events.spark.stream import StreamState  # noqa: PLC0415

    window = ReadOnlyChunkWindow(EventDecoder(load_config(None, OVERRIDES)),
                                 signal_data_collection="public.debezium_signal")
    good = {**StreamState(cut=7).to_json(), "window": window.export_state()}
    path = str(tmp_path / "state-000000000003.json")
    assert StreamState.from_json(json.loads(json.dumps(good)), path=path).window == \
        window.export_state()
    for broken, words in (({"lsn": -1}, "lsn is not a non-negative integer"),
                          ({"previous": ["1:2:", "x"]}, "'x' is not a pg_current_snapshot"),
                          ({"format": "nope"}, "its format is not"),
                          ({"context": {}}, "it lacks 'collections'")):
        obj = json.loads(json.dumps({**good, "window": {**good["window"], **broken}}))
        with pytest.raises(SparkDecodeError) as caught:
            StreamState.from_json(obj, path=path)
        message = str(caught.value)
        assert message.startswith(f"{path}: a malformed stream state") and words in message, \
            message
        assert "\n" not in message


# -- a window open over a commit ----------------------------------------------------------


def _spark_lines(spark: SparkSession, cap: Path, config: EventConfig, chunk_messages: int
                 ) -> list[str]:
    """The record lines Spark's batch decoding makes of the capture file ``cap``, in order."""
    decoded = decode_capture(read_capture(spark, str(cap)), config,
                             chunk_messages=chunk_messages, clock=lambda: CLOCK_NS,
                             run_id=RUN_ID, lines=True, tombstones=True)
    try:
        return [r["line"] for r in decoded.records.orderBy("position", "index")
                .select("line").collect()]
    finally:
        decoded.unpersist()


def _capture_a_window_over_a_commit(url: str, conn: Any, cap: Path) -> None:
    """A read-only incremental snapshot of table ``t`` (5 rows, chunks of 2) whose first
    window stays open over a commit: two transactions are in progress when the chunk is
    read (the older one is the high watermark's ``xmin``); the younger commits first (its
    id is above ``xmin`` and not ``xmax``: the window stays open), then the older (its
    commit closes the window: the ``r`` events go out there). The next chunks are read on
    a quiet database: at that commit (``again``), at idle polls (their ``r`` events carry
    the older transaction's change's sequence, which only the window knows). One more
    transaction after the snapshot ends the capture."""
    from pgcdc_events.adapters.connection import parse_conninfo  # noqa: PLC0415

    conn.run(SIGNAL_DDL)
    conn.run("CREATE TABLE t (id int PRIMARY KEY, v int)")
    conn.run("INSERT INTO t SELECT g, g FROM generate_series(1, 5) g")
    conn.run("CREATE TABLE other (id int PRIMARY KEY, n int)")
    conn.run("INSERT INTO other VALUES (1, 0), (2, 0)")
    assert capture(url, cap, "--create-slot", "--create-publication", "-c",
                   "read.only=true") == 0
    settings = parse_conninfo(url)
    older, younger = settings.connect()[0], settings.connect()[0]
    try:
        older.run("START TRANSACTION")
        older.run("UPDATE other SET n = n + 1 WHERE id = 1")
        younger.run("START TRANSACTION")
        younger.run("UPDATE other SET n = n + 1 WHERE id = 2")
        conn.run("INSERT INTO debezium_signal VALUES ('over', 'execute-snapshot', "
                 "'{\"data-collections\": [\"public.t\"]}')")

        def commit() -> None:  # the chunk is read: younger, then older
            younger.run("UPDATE other SET n = n + 10 WHERE id = 2")
            younger.run("COMMIT")
            older.run("COMMIT")

        follow_read_only_snapshot(url, cap, commit, after_snapshot=lambda: conn.run(
            "UPDATE other SET n = n + 100 WHERE id = 1"))  # the stream after the snapshot
    finally:
        older.close()
        younger.close()


@pytest.fixture(scope="module")
def over_a_commit(pg_cluster: TempCluster, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[tuple[Path, Path]]:
    """The capture of :func:`_capture_a_window_over_a_commit`, and its lines up to the one
    before the first chunk line after the first window closed (where a capture stopped
    after that commit would end)."""
    with fresh_database(pg_cluster, "sparkover") as (conn, name):
        cap = tmp_path_factory.mktemp("over") / "cap.jsonl"
        url = database_url(pg_cluster, name)
        _capture_a_window_over_a_commit(url, conn, cap)
        assert main(["catalog", "--dsn", url, "-o", str(cap.parent / "catalog.json")]) == 0
    config = load_config(None, OVERRIDES)
    opened = _open_windows(cap, config)
    lines = cap.read_text().splitlines(keepends=True)
    first = next(i for i, o in enumerate(opened) if o)
    closed = next(i for i in range(first, len(opened)) if not opened[i])
    chunked = [i for i, _ in chunk_lines(cap)]
    end = next((i for i in chunked if i > closed), len(lines))
    # the window stays open over a commit (the younger transaction's)
    commits = [i for i in range(first + 1, closed)
               if bytes.fromhex(json.loads(lines[i])["data"])[:1] == b"C"]
    assert commits, (first, closed)
    prefix = cap.parent / "prefix.jsonl"
    prefix.write_text("".join(lines[:end]))
    yield cap, prefix


def test_the_span_runs_past_the_last_chunk_line(spark: SparkSession,
                                               over_a_commit: tuple[Path, Path]) -> None:
    """``decode_capture`` of a capture whose last chunk line's read-only window closes at
    a commit after another commit: the windows' span runs to the capture's end
    (``window_span``), not to the last chunk line, so the chunk that holds the closing
    commit is decoded by the window's decoder, and its ``r`` events go out there, as in
    ``decode``'s records (the first chunk's rows read once)."""
    _, cap = over_a_commit
    config = load_config(None, OVERRIDES)
    want = _reference(cap, config)
    reads = sorted(json.loads(x)["value"]["payload"]["after"]["id"] for x in want
                   if json.loads(x)["topic"] == "pgcdc.public.t"
                   and json.loads(x)["value"]["payload"]["op"] == "r")
    assert reads == [1, 2]
    problem = first_difference(_spark_lines(spark, cap, config, 1), want)
    assert not problem, problem


def test_decode_stream_carries_a_window_over_a_batch(spark: SparkSession,
                                                    over_a_commit: tuple[Path, Path],
                                                    tmp_path: Path) -> None:
    """``decode_stream`` of that capture as rotating files, a file starting at each line
    while a window is open (a micro-batch ends after the commit the first window stays
    open over) and at each chunk line: its records equal ``decode``'s (every row of ``t``
    read once), the ``r`` events closed at idle polls carrying the sequence the window
    carried from the batch before."""
    cap, _ = over_a_commit
    config = load_config(None, OVERRIDES)
    catalog = CatalogSnapshot.load(str(cap.parent / "catalog.json"))
    want = _reference(cap, config, catalog)
    reads = sorted(json.loads(x)["value"]["payload"]["after"]["id"] for x in want
                   if json.loads(x)["topic"] == "pgcdc.public.t"
                   and json.loads(x)["value"]["payload"]["op"] == "r")
    assert reads == [1, 2, 3, 4, 5]
    opened = _open_windows(cap, config)
    cuts = {i for i in range(1, len(opened)) if opened[i - 1]}
    _rotating(cap, tmp_path / "in", cuts | {i for i, _ in chunk_lines(cap)})
    stream = _stream(spark, tmp_path / "in", tmp_path, config, catalog)
    _run(stream)
    problem = first_difference(_stream_records(spark, tmp_path), want)
    assert not problem, problem
    assert any(b.pending for b in stream.batches)
