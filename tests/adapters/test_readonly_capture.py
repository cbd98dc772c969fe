"""``pgcdc-events capture`` with ``read.only=true``, then ``decode``, end to end on a real
PostgreSQL, as a user runs them.

The capture takes ``pg_current_snapshot()`` around each chunk read and writes nothing to
the source; each chunk line carries the two watermarks, and ``decode`` with the same
properties replays the window (:class:`~pgcdc_events.events.incremental.RecordedChunks`
over :class:`~pgcdc_events.events.incremental.ReadOnlyChunkWindow`). The checks are the
connector's ``consumeMixedWithIncrementalSnapshot``: the last event per key equals the
table's row, and every row no change touched is read (``op: r``) exactly once.

Ports (``debezium/debezium``, ``debezium-connector-postgres/src/test/java/io/debezium/
connector/postgresql/ReadOnlyIncrementalSnapshotIT.java``, which runs ``IncrementalSnapshotIT``
and ``debezium-embedded/src/test/java/io/debezium/pipeline/source/snapshot/incremental/
AbstractIncrementalSnapshotTest.java`` with ``read.only=true``); each test names the methods
it ports.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pgcdc_events.adapters import CaptureSink, DurableOutput, SlotReader, run_capture
from pgcdc_events.adapters.connection import parse_conninfo
from pgcdc_events.adapters.incremental import IncrementalCapture
from pgcdc_events.cli import main
from pgcdc_events.events import EventConfig
from pgcdc_events.testing.cluster import TempCluster
from support.signals import (
    PROPS,
    STREAM_COMMIT_CLOSE,
    MixedWorkload,
    capture,
    capture_closed_at_a_stream_commit,
    check_invariants,
    decode,
    keyed,
    payloads,
    signal_url,
)

ROOT = Path(__file__).resolve().parents[2]
RO = ("-c", "read.only=true")


@pytest.fixture
def url(pg_cluster: TempCluster, pg_conn: Any) -> str:
    return signal_url(pg_cluster, pg_conn)


def writes_to_signal_table(conn: Any) -> int:
    """Rows ever inserted, updated or deleted in the signalling table (its statistics)."""
    conn.run("SELECT pg_stat_force_next_flush()")
    return int(conn.run("SELECT n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables "
                        "WHERE relname = 'debezium_signal'")[0][0])


def reads_of(records: list[dict[str, Any]], table: str) -> list[int]:
    return [p["after"]["id"] for p in payloads(records, table) if p["op"] == "r"]


def chunk_lines(path: Path, *, idle: bool = False) -> list[dict[str, Any]]:
    """The chunk lines of a capture (with ``idle``: its idle lines too)."""
    lines = [json.loads(x)["chunk"] for x in path.read_text().splitlines() if '"chunk": {' in x]
    return [c for c in lines if idle or "idle" not in c]


def test_snapshot_only_capture_then_decode(url: str, pg_conn: Any, tmp_path: Path) -> None:
    """A user's signal row (the ``source`` channel, read-only: it is read, the capture
    writes no watermark row), ``capture`` then ``decode`` with the same properties: every
    row read once, in key order, with the incremental source block; each chunk line holds
    both watermarks; a second capture with ``--decode`` on its own slot gives the same
    records. Ports ``snapshotOnly`` (``AbstractIncrementalSnapshotTest``, as
    ``ReadOnlyIncrementalSnapshotIT`` runs it)."""
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    pg_conn.run("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 25) g")
    cap, events = tmp_path / "cap.jsonl", tmp_path / "events.jsonl"
    props = (*RO, "-c", "incremental.snapshot.chunk.size=10")
    assert capture(url, cap, "--create-slot", "--create-publication", *props) == 0
    assert capture(url, events, "--decode", "--create-slot", *props, slot="s2") == 0
    pg_conn.run("INSERT INTO debezium_signal VALUES ('ad-hoc', 'execute-snapshot', "
                "'{\"data-collections\": [\"public.t\"]}')")
    written = writes_to_signal_table(pg_conn)
    assert capture(url, cap, *props) == 0
    assert capture(url, events, "--decode", *props, slot="s2") == 0
    assert writes_to_signal_table(pg_conn) == written == 1  # the user's row, nothing else
    assert [r[0] for r in pg_conn.run("SELECT id FROM debezium_signal")] == ["ad-hoc"]
    chunks = chunk_lines(cap)
    assert [len(c["rows"]) for c in chunks] == [10, 10, 5, 0]
    assert all(":" in c["low"] and ":" in c["high"] for c in chunks)
    records = decode(cap, tmp_path, *props)
    assert reads_of(records, "t") == list(range(1, 26))
    source = next(p["source"] for p in payloads(records, "t") if p["op"] == "r")
    assert (source["snapshot"], source["lsn"], source["txId"], source["xmin"]) == \
        ("incremental", None, None, None)
    signals = [r["value"]["payload"]["after"]["id"] for r in records
               if r["topic"] == "pgcdc.public.debezium_signal"]
    assert signals == ["ad-hoc"]  # no watermark row in the stream
    live = [json.loads(x) for x in events.read_text().splitlines()]
    assert keyed(live, "t") == keyed(records, "t")
    # decoded on two cores: the window's part in one process, the same records
    assert keyed(decode(cap, tmp_path, *props, workers=2), "t") == keyed(records, "t")
    assert "incremental" not in json.loads((tmp_path / "cap.jsonl.checkpoint.json").read_text())


def test_a_damaged_read_only_chunk_line_is_named(url: str, pg_conn: Any, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A chunk line whose watermark does not parse, or an idle line before any chunk: one
    line on stderr naming the line of the capture, no traceback."""
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY)")
    pg_conn.run("INSERT INTO t SELECT generate_series(1, 3)")
    cap = tmp_path / "cap.jsonl"
    assert capture(url, cap, "--create-slot", "--create-publication", *RO) == 0
    pg_conn.run("INSERT INTO debezium_signal VALUES ('ad-hoc', 'execute-snapshot', "
                "'{\"data-collections\": [\"public.t\"]}')")
    assert capture(url, cap, *RO) == 0
    lines = cap.read_text().splitlines()
    first = next(n for n, x in enumerate(lines) if '"low": ' in x or '"low":"' in x)
    bad = tmp_path / "bad.jsonl"
    damaged = json.loads(lines[first])
    damaged["chunk"]["low"] = "12:x:"
    bad.write_text("\n".join([*lines[:first], json.dumps(damaged), *lines[first + 1:]]) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["decode", "--capture", str(bad), "--output", str(out), "-q", *PROPS, *RO]) == 1
    err = capsys.readouterr().err
    assert f"line {first + 1}" in err and "'12:x:'" in err and "pg_current_snapshot" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    # the next chunk's line before the Commit that closed the window: decoded with other
    # properties than the capture's, the window was still open (its rows were dropped)
    chunked = [n for n, x in enumerate(lines) if '"low": ' in x or '"low":"' in x]
    second = chunked[1]
    early = [*lines[:first + 1], lines[second], *lines[first + 1:second], *lines[second + 1:]]
    bad.write_text("\n".join(early) + "\n")
    assert main(["decode", "--capture", str(bad), "--output", str(out), "-q", *PROPS, *RO]) == 1
    err = capsys.readouterr().err
    assert f"line {first + 2}" in err and "still open" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    idle = {"lsn": "0/0", "xid": None, "data": "x",
            "chunk": {"id": "c", "idle": 7, "signal": "public.debezium_signal"}}
    bad.write_text(json.dumps(idle) + "\n")
    assert main(["decode", "--capture", str(bad), "--output", str(out), "-q", *PROPS, *RO]) == 1
    err = capsys.readouterr().err
    assert "line 1" in err and "idle poll" in err and "Traceback" not in err


def test_a_workload_during_the_snapshot(url: str, pg_conn: Any, tmp_path: Path) -> None:
    """Inserts, updates and deletes while the capture runs the read-only snapshot, then
    ``decode``: the last event per key is the table's row, every row the workload never
    touched is read once, and nothing was written to the signalling table. Ports
    ``inserts``, ``updates``, ``deletes`` (``AbstractIncrementalSnapshotTest``'s
    ``consumeMixedWithIncrementalSnapshot``, as ``ReadOnlyIncrementalSnapshotIT`` runs it)."""
    pg_conn.run("CREATE TABLE w (id int PRIMARY KEY, v int, s text)")
    pg_conn.run("INSERT INTO w SELECT g, g, 's' || g FROM generate_series(1, 400) g")
    cap = tmp_path / "cap.jsonl"
    props = (*RO, "-c", "incremental.snapshot.chunk.size=20")
    assert capture(url, cap, "--create-slot", "--create-publication", *props) == 0
    with MixedWorkload(url, keys=440, at_least=40) as work:
        time.sleep(0.05)
        pg_conn.run("INSERT INTO debezium_signal VALUES ('ad-hoc-w', 'execute-snapshot', "
                    "'{\"data-collections\": [\"public.w\"]}')")
        for _ in range(50):  # until the snapshot is done (each run goes on from the last)
            assert capture(url, cap, *props) == 0
            if any(len(c.get("rows", ())) == 0 and "low" in c for c in chunk_lines(cap)):
                break
    touched = work.touched
    pg_conn.run("INSERT INTO w VALUES (100000, 0, 'a last transaction')")
    touched.add((100000,))
    for _ in range(5):
        assert capture(url, cap, *props) == 0  # the workload's end, the last windows
    assert "incremental" not in json.loads((tmp_path / "cap.jsonl.checkpoint.json").read_text())
    records = decode(cap, tmp_path, *props)
    check_invariants(records, "w", pg_conn, ["id"], touched, read_once=True)
    assert len(reads_of(records, "w")) >= 400 - len(touched)
    assert writes_to_signal_table(pg_conn) == 1


def test_a_quiet_database_closes_its_windows_at_the_heartbeat(
        url: str, pg_conn: Any, tmp_path: Path) -> None:
    """A signal from ``signal.file`` on a database where nothing commits: a capture
    without ``--follow`` reads the first chunk and stops (no transaction to close its
    window on), keeping its progress; a ``--follow`` capture whose
    ``heartbeat.action.query`` makes a transaction closes the windows at its idle polls,
    one chunk of one row after the other. Ports ``insertsEnumPk`` as
    ``ReadOnlyIncrementalSnapshotIT`` runs it (its ``additionalConfiguration``: chunk size
    1, ``heartbeat.interval.ms``; its ``assertExpectedRecordsEnumPk``: the rows in the
    enum's order, ``aa`` = 0..4)."""
    pg_conn.run("CREATE TYPE dir AS ENUM ('UP', 'DOWN', 'LEFT', 'RIGHT', 'STORY')")
    pg_conn.run("CREATE TABLE enumpk (id dir PRIMARY KEY, aa int)")
    pg_conn.run("INSERT INTO enumpk VALUES ('STORY', 4), ('UP', 0), ('RIGHT', 3), "
                "('DOWN', 1), ('LEFT', 2)")
    pg_conn.run("CREATE TABLE beat (id int PRIMARY KEY, ts timestamptz)")
    pg_conn.run("INSERT INTO beat VALUES (1, now())")
    cap, signals = tmp_path / "cap.jsonl", tmp_path / "signals.jsonl"
    props = (*RO, "-c", "incremental.snapshot.chunk.size=1",
             "-c", "signal.enabled.channels=file", "-c", f"signal.file={signals}")
    assert capture(url, cap, "--create-slot", "--create-publication", *props) == 0
    pg_conn.run("UPDATE beat SET ts = now()")  # the capture's last transaction, long ago
    assert capture(url, cap, *props) == 0
    signals.write_text('{"id": "ad-hoc", "type": "execute-snapshot", "data": '
                       '{"data-collections": ["public.enumpk"], "type": "INCREMENTAL"}}\n')
    assert capture(url, cap, *props) == 0  # quiet: one chunk read, its window still open
    checkpoint = tmp_path / "cap.jsonl.checkpoint.json"
    assert [len(c["rows"]) for c in chunk_lines(cap)] == [1]
    assert "incremental" in json.loads(checkpoint.read_text())
    beat = ("-c", "heartbeat.interval.ms=100",
            "-c", "heartbeat.action.query=UPDATE beat SET ts = now() WHERE id = 1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pgcdc_events", "capture", "--dsn", url, "--slot", "s",
         "--publication", "p", "--output", str(cap), "--snapshot-mode", "no_data", "-q",
         "--follow", "--poll-interval", "0.05", *PROPS, *props, *beat],
        cwd=ROOT, env=os.environ.copy(), stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and \
                "incremental" in json.loads(checkpoint.read_text()):
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err.decode()
    assert "incremental" not in json.loads(checkpoint.read_text())
    lines = chunk_lines(cap)
    assert any("idle" in c for c in chunk_lines(cap, idle=True))  # closed at an idle poll
    assert lines[1].get("start") is True  # the second run read the chunk again
    catalog = tmp_path / "catalog.json"
    assert main(["catalog", "--dsn", url, "--output", str(catalog)]) == 0
    records = decode(cap, tmp_path, *props, "--catalog", str(catalog))
    reads = [(r["key"]["payload"]["id"], r["value"]["payload"]["after"]["aa"])
             for r in records if r["topic"] == "pgcdc.public.enumpk"
             and r["value"]["payload"]["op"] == "r"]
    assert reads == [("UP", 0), ("DOWN", 1), ("LEFT", 2), ("RIGHT", 3), ("STORY", 4)]
    assert writes_to_signal_table(pg_conn) == 0


def test_pause_stop_and_resume_across_runs(url: str, pg_conn: Any, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """``pause-snapshot`` in the signal's transaction: a read-only capture acts on the
    signals at the transaction's commit, so no chunk is read; a capture without
    ``--follow`` then stops, its progress in the checkpoint (with the last transaction
    id, ``txId``). The next run, given ``stop-snapshot`` of a queued table and
    ``resume-snapshot`` by ``signal.file`` (no transaction since), closes its windows at
    its idle polls with that id, and reads the rest. Ports
    ``testPauseDuringSnapshot`` and
    ``removeNotYetCapturedCollectionFromInProgressIncrementalSnapshot``
    (``AbstractIncrementalSnapshotTest``, as ``ReadOnlyIncrementalSnapshotIT`` runs them)."""
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v int)")
    pg_conn.run("INSERT INTO t SELECT g, g FROM generate_series(1, 10) g")
    pg_conn.run("CREATE TABLE u (id int PRIMARY KEY, v int)")
    pg_conn.run("INSERT INTO u VALUES (1, 1)")
    cap, signals = tmp_path / "cap.jsonl", tmp_path / "signals.jsonl"
    props = (*RO, "-c", "incremental.snapshot.chunk.size=2", "-c",
             "signal.enabled.channels=source,file", "-c", f"signal.file={signals}")
    assert capture(url, cap, "--create-slot", "--create-publication", *props) == 0
    pg_conn.run("START TRANSACTION")
    pg_conn.run("INSERT INTO debezium_signal VALUES ('go', 'execute-snapshot', "
                "'{\"data-collections\": [\"public.t\", \"public.u\"]}')")
    pg_conn.run("INSERT INTO debezium_signal VALUES ('hold', 'pause-snapshot', NULL)")
    pg_conn.run("COMMIT")
    assert capture(url, cap, *props) == 0
    state = json.loads((tmp_path / "cap.jsonl.checkpoint.json").read_text())["incremental"]
    assert state["incremental_snapshot_primary_key"] is None and "txId" in state
    assert chunk_lines(cap) == []
    saved = (tmp_path / "cap.jsonl.checkpoint.json").read_text()
    damaged = json.loads(saved)
    damaged["incremental"]["txId"] = "twelve"
    (tmp_path / "cap.jsonl.checkpoint.json").write_text(json.dumps(damaged))
    capsys.readouterr()
    assert capture(url, cap, *props) == 1
    err = capsys.readouterr().err
    assert "incremental.txId" in err and "'twelve'" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    (tmp_path / "cap.jsonl.checkpoint.json").write_text(saved)
    signals.write_text('{"id": "drop-u", "type": "stop-snapshot", "data": '
                       '{"data-collections": ["public.u"], "type": "incremental"}}\n'
                       '{"id": "again", "type": "resume-snapshot"}\n')
    assert capture(url, cap, *props) == 0
    assert "incremental" not in json.loads((tmp_path / "cap.jsonl.checkpoint.json").read_text())
    records = decode(cap, tmp_path, *props)
    assert reads_of(records, "t") == list(range(1, 11))
    assert reads_of(records, "u") == []
    assert writes_to_signal_table(pg_conn) == 2


def _kill_and_resume(url: str, pg_conn: Any, tmp_path: Path, kills: int) -> None:
    """SIGKILL a following read-only capture ``kills`` times mid-table, under a workload,
    then let captures finish: replaying the records equals ``SELECT *`` and every row
    the workload never touched is read once."""
    pg_conn.run("CREATE TABLE a (id int PRIMARY KEY, v int)")
    pg_conn.run("INSERT INTO a SELECT g, g FROM generate_series(1, 30) g")
    pg_conn.run("CREATE TABLE b (id int PRIMARY KEY, v int)")
    pg_conn.run("INSERT INTO b SELECT g, g FROM generate_series(1, 3000) g")
    cap = tmp_path / "cap.jsonl"
    props = (*RO, "-c", "incremental.snapshot.chunk.size=10")
    assert capture(url, cap, "--create-slot", "--create-publication", *props) == 0
    pg_conn.run("INSERT INTO debezium_signal VALUES ('ad-hoc-k', 'execute-snapshot', "
                "'{\"data-collections\": [\"public.a\", \"public.b\"]}')")
    checkpoint = tmp_path / "cap.jsonl.checkpoint.json"
    seen_keys: list[Any] = []
    touched: set[int] = set()
    stop = threading.Event()

    def workload() -> None:
        conn = parse_conninfo(url).connect()[0]
        try:
            n = 0
            while not stop.is_set():
                n += 1
                key = (n * 131) % 3000 + 1
                touched.add(key)
                conn.run("UPDATE b SET v = v + 1 WHERE id = :k", k=key)
                time.sleep(0.01)
        finally:
            conn.close()

    thread = threading.Thread(target=workload)
    thread.start()
    try:
        for kill in range(kills):
            proc = subprocess.Popen(
                [sys.executable, "-m", "pgcdc_events", "capture", "--dsn", url, "--slot", "s",
                 "--publication", "p", "--output", str(cap), "--snapshot-mode", "no_data",
                 "-q", "--follow", "--poll-interval", "0.05", "--batch-rows", "20", *PROPS,
                 *props], cwd=ROOT, env=os.environ.copy(), stderr=subprocess.PIPE)
            try:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:  # a few chunks of b made durable
                    time.sleep(0.05)
                    state = json.loads(checkpoint.read_text()).get("incremental", {})
                    collections = state.get("incremental_snapshot_collections") or "[]"
                    key = state.get("incremental_snapshot_primary_key")
                    if '"public.b"' in collections and '"public.a"' not in collections \
                            and key is not None and int(key[0]) >= 300 * (kill + 1):
                        seen_keys.append(key)
                        break
            finally:
                proc.send_signal(signal.SIGKILL)
                _, err = proc.communicate(timeout=30)
            assert b"Traceback" not in err
            assert len(seen_keys) == kill + 1, (err.decode(), checkpoint.read_text())
    finally:
        stop.set()
        thread.join()
    for _ in range(400):  # the rest, a run at a time (the checkpoint keeps the last txId)
        assert capture(url, cap, *props) == 0
        if "incremental" not in json.loads(checkpoint.read_text()):
            break
    assert "incremental" not in json.loads(checkpoint.read_text())
    assert sum(bool(c.get("start")) for c in chunk_lines(cap)) >= kills
    records = decode(cap, tmp_path, *props)
    check_invariants(records, "a", pg_conn, ["id"], set(), read_once=True)
    check_invariants(records, "b", pg_conn, ["id"], {(k,) for k in touched},
                     read_once=True)
    assert writes_to_signal_table(pg_conn) == 1


def test_sigkill_mid_table_resumes_after_the_last_durable_chunk(
        url: str, pg_conn: Any, tmp_path: Path) -> None:
    """Ports ``snapshotOnlyWithRestart`` and ``updatesWithRestart``
    (``AbstractIncrementalSnapshotTest``, as ``ReadOnlyIncrementalSnapshotIT`` runs them):
    a read-only capture killed mid-table resumes after its checkpoint's key."""
    _kill_and_resume(url, pg_conn, tmp_path, 1)


@pytest.mark.slow
def test_sigkill_again_and_again(url: str, pg_conn: Any, tmp_path: Path) -> None:
    _kill_and_resume(url, pg_conn, tmp_path, 5)


def test_decode_replays_the_windows_the_capture_closed(url: str, pg_conn: Any,
                                                        tmp_path: Path) -> None:
    """Deterministic windows (``IncrementalCapture(on_step=...)``): changes committed right
    after a chunk's low watermark and right before its high one, some in a transaction
    left open across the watermarks. The capture's own snapshotter makes the ``r`` events
    too (and drops them: ``decode`` makes them from the chunk lines): ``decode`` gives
    exactly those, in the same order, and the invariants hold. Ports ``inserts``,
    ``updates``, ``deletes`` with the change placed in the window, as
    ``ReadOnlyIncrementalSnapshotIT`` runs them."""
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v int)")
    pg_conn.run("INSERT INTO t SELECT g, g FROM generate_series(1, 40) g")
    cap = tmp_path / "cap.jsonl"
    props = (*RO, "-c", "incremental.snapshot.chunk.size=6")
    assert capture(url, cap, "--create-slot", "--create-publication", *props) == 0
    pg_conn.run("INSERT INTO debezium_signal VALUES ('ad-hoc', 'execute-snapshot', "
                "'{\"data-collections\": [\"public.t\"]}')")
    other = parse_conninfo(url).connect()[0]
    chunks: list[str] = []
    sql = {(0, "after_open"): ["UPDATE t SET v = 100 WHERE id = 2", "DELETE FROM t WHERE id = 3"],
           (0, "before_close"): ["UPDATE t SET v = 200 WHERE id = 1"],
           (1, "after_open"): ["DELETE FROM t WHERE id = 8"],
           (1, "before_close"): ["INSERT INTO t VALUES (41, 41)", "BEGIN",
                                 "UPDATE t SET v = 300 WHERE id = 10"],
           (2, "after_open"): ["COMMIT", "UPDATE t SET v = 400 WHERE id = 15"],
           (3, "before_close"): ["DELETE FROM t WHERE id = 20", "INSERT INTO t VALUES (0, 0)"]}

    def on_step(step: str, chunk_id: str) -> None:
        if step == "after_open":
            chunks.append(chunk_id)
        for statement in sql.get((len(chunks) - 1, step), ()):
            # a transaction left open across chunk 1's high watermark, on its own session
            (other if statement in ("BEGIN", "COMMIT") or "300" in statement
             else pg_conn).run(statement)

    touched = {1, 2, 3, 8, 41, 10, 15, 20, 0}

    properties = {"topic.prefix": "pgcdc", "signal.data.collection": "public.debezium_signal",
                  "incremental.snapshot.chunk.size": "6", "read.only": "true"}
    settings = parse_conninfo(url)
    incremental = IncrementalCapture(lambda: settings.connect()[0], properties,
                                     EventConfig.from_properties(properties), decode=False,
                                     publications=["p"], on_step=on_step)
    made: list[Any] = []  # the r events the capture's window made (and dropped)
    start = incremental.start

    def started(*args: Any, **kwargs: Any) -> None:
        start(*args, **kwargs)
        snapshotter = incremental.snapshotter
        assert snapshotter is not None
        receive, commit = snapshotter.receive, snapshotter.commit

        def kept(records: list[Any]) -> list[Any]:
            made.extend(r for r in records if r.op == "r")
            return records

        snapshotter.receive = lambda record: kept(receive(record))  # type: ignore[method-assign]
        snapshotter.commit = lambda *a, **k: kept(commit(*a, **k))  # type: ignore[method-assign]

    incremental.start = started  # type: ignore[method-assign]
    try:
        for _ in range(10):
            reader = SlotReader(url, slot="s", publications=["p"])
            output = DurableOutput(cap, kind="capture", slot="s", publications=("p",))
            output.open()
            try:
                run_capture(reader, output, CaptureSink(), incremental=incremental)
            finally:
                output.close()
                reader.close()
            if "incremental" not in json.loads(
                    (tmp_path / "cap.jsonl.checkpoint.json").read_text()):
                break
    finally:
        incremental.close()
        other.close()
    assert len(chunks) >= 4
    records = decode(cap, tmp_path, *props)
    replayed = [(r["key"]["payload"]["id"], r["value"]["payload"]["after"]["v"])
                for r in records if r["topic"] == "pgcdc.public.t" and r["value"]
                and r["value"]["payload"]["op"] == "r"]
    assert replayed == [(r.key["id"], r.value["after"]["v"]) for r in made]
    assert len(replayed) >= 40 - len(touched)
    check_invariants(records, "t", pg_conn, ["id"], {(k,) for k in touched},
                     read_once=True)


def test_a_window_closed_at_a_stream_commit(url: str, pg_conn: Any, tmp_path: Path) -> None:
    """``--streaming on``: a big transaction (streamed) is in progress when the first
    chunk is read, so the chunk's high watermark has it as ``xmin``; it commits while the
    capture follows, and its Stream Commit closes the window (``commit`` with its id) and
    reads the next chunk there (``again``). ``decode`` closes it at the same Stream Commit
    message: every row read once."""
    cap = tmp_path / "cap.jsonl"
    capture_closed_at_a_stream_commit(url, pg_conn, cap)
    assert '"data": "53' in cap.read_text()  # a Stream Start: the transaction was streamed
    lines = chunk_lines(cap)
    assert [len(c["rows"]) for c in lines] == [2, 2, 1, 0]
    assert lines[1].get("again") is not None  # read where the Stream Commit closed chunk 1
    records = decode(cap, tmp_path, *STREAM_COMMIT_CLOSE[2:])
    assert reads_of(records, "t") == [1, 2, 3, 4, 5]
    assert sum(r["topic"] == "pgcdc.public.bulk" for r in records) == 4000


def test_a_file_signal_before_the_first_unit_waits_in_the_file(
        url: str, pg_conn: Any, tmp_path: Path) -> None:
    """A ``signal.file`` signal acted on by a read-only capture whose output holds no unit
    yet (nothing to commit its progress at): the run stops with the signal still in the
    file, where it was emptied and the signal lost; the next run, once a transaction
    came, takes it and reads every row once."""
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v int)")
    pg_conn.run("INSERT INTO t SELECT g, g FROM generate_series(1, 6) g")
    cap, signals = tmp_path / "cap.jsonl", tmp_path / "signals.jsonl"
    props = (*RO, "-c", "incremental.snapshot.chunk.size=4",
             "-c", "signal.enabled.channels=file", "-c", f"signal.file={signals}")
    assert capture(url, cap, "--create-slot", "--create-publication", *props) == 0
    signal_line = ('{"id": "early", "type": "execute-snapshot", "data": '
                   '{"data-collections": ["public.t"]}}\n')
    signals.write_text(signal_line)
    assert capture(url, cap, *props) == 0  # no transaction: nothing committed
    assert signals.read_text() == signal_line
    assert "incremental" not in json.loads((tmp_path / "cap.jsonl.checkpoint.json").read_text())
    pg_conn.run("INSERT INTO t VALUES (100, 100)")
    for _ in range(5):
        assert capture(url, cap, *props) == 0
        pg_conn.run("UPDATE t SET v = v + 1 WHERE id = 100")  # transactions close windows
    assert capture(url, cap, *props) == 0
    assert signals.read_text() == ""
    records = decode(cap, tmp_path, *props)
    assert sorted(reads_of(records, "t"))[:6] == [1, 2, 3, 4, 5, 6]
    check_invariants(records, "t", pg_conn, ["id"], {(100,)}, read_once=True)
