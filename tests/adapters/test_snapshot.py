"""The initial snapshot: consistent with the slot (nothing lost or doubled across snapshot and
stream, even with writes while it runs), each --snapshot-mode, and a crash while it runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pgcdc_events.adapters import CaptureSink, DurableOutput, Output, StreamReader, run_capture
from pgcdc_events.adapters.errors import SnapshotError
from pgcdc_events.cli import main
from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.protocol import CaptureRow, iter_capture
from pgcdc_events.testing.cluster import TempCluster

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def url(pg_cluster: TempCluster, pg_conn: Any) -> str:
    database = pg_conn.run("SELECT current_database()")[0][0]
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    pg_conn.run("CREATE TABLE u (k text PRIMARY KEY, n int)")
    pg_conn.run("CREATE PUBLICATION p FOR ALL TABLES")
    return f"postgresql://{pg_cluster.user}@{pg_cluster.host}:{pg_cluster.port}/{database}"


def _capture(url: str, out: Path, *extra: str, slot: str = "s") -> int:
    return main(["capture", "--dsn", url, "--slot", slot, "--publication", "p", "--output",
                 f"{out}/", "-q", *extra])


def _rows(out: Path) -> list[CaptureRow]:
    with open(out / "capture.jsonl", encoding="utf-8") as fh:
        return list(iter_capture(fh))


def _checkpoint(out: Path) -> dict[str, Any]:
    return json.loads((out / "capture.jsonl.checkpoint.json").read_text())  # type: ignore[no-any-return]


def _events(out: Path) -> list[dict[str, Any]]:
    """The capture decoded: every record's payload, in order (tombstones left out)."""
    config = EventConfig.from_properties({"topic.prefix": "x"})
    writer = JsonRecordWriter(config.json)
    decoder = EventDecoder(config)
    out_records = []
    for record in decoder.feed_rows(_rows(out)):
        if record.value is not None:
            out_records.append(json.loads(writer.record_line(record))["value"]["payload"])
    return out_records


def _apply(events: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    """The tables the events describe, applied to empty tables: {table: {key: row}}; a
    create or read of a key already present, or a change to a missing one, fails."""
    state: dict[str, dict[Any, Any]] = {}
    for e in events:
        table = state.setdefault(e["source"]["table"], {})
        row = e["after"] if e["op"] in ("r", "c", "u") else e["before"]
        k = row[key] if key in row else row["k"]
        if e["op"] in ("r", "c"):
            assert k not in table, f"{e['op']} of {k} in {e['source']['table']}: doubled"
            table[k] = e["after"]
        elif e["op"] == "u":
            assert k in table, f"update of {k} never read or created: lost"
            table[k] = e["after"]
        elif e["op"] == "d":
            assert table.pop(k, None) is not None, f"delete of {k} never read or created"
    return state


def _tables(pg_conn: Any) -> dict[str, dict[Any, Any]]:
    return {
        "t": {i: {"id": i, "v": v} for i, v in pg_conn.run("SELECT id, v FROM t")},
        "u": {k: {"k": k, "n": n} for k, n in pg_conn.run("SELECT k, n FROM u")},
    }


class _WritingSink(CaptureSink):
    """Writes snapshot rows, and at the ``at``-th Insert of the snapshot runs ``during``:
    changes committed while the snapshot is being read."""

    def __init__(self, at: int, during: Any) -> None:
        super().__init__()
        self.at, self.during, self.inserts = at, during, 0

    def write_row(self, row: CaptureRow, output: Output) -> None:
        super().write_row(row, output)
        if row.data[:1] == b"I":
            self.inserts += 1
            if self.inserts == self.at:
                self.during()


class _LateReader(StreamReader):
    """Runs ``before`` just before the snapshot transaction begins: changes committed
    after the slot's consistent point, before the exported snapshot is imported."""

    before: Any = None

    def run_sql(self, sql: str, *, action: str, **params: Any) -> list[list[Any]]:
        if action == "start snapshot" and self.before is not None:
            self.before()
        return super().run_sql(sql, action=action, **params)


def test_writes_during_the_snapshot_are_neither_lost_nor_doubled(
        url: str, pg_conn: Any, pg_cluster: TempCluster, tmp_path: Path) -> None:
    import pg8000.native  # noqa: PLC0415 - only server tests need the driver

    pg_conn.run("INSERT INTO t SELECT g, 'before ' || g FROM generate_series(1, 2000) g")
    pg_conn.run("INSERT INTO u SELECT 'k' || g, g FROM generate_series(1, 50) g")
    database = pg_conn.run("SELECT current_database()")[0][0]
    writer = pg8000.native.Connection(**{**pg_cluster.dsn(), "database": database})
    during: list[str] = []

    def write() -> None:
        # rows the snapshot has read (id 1..) and not read yet (id 2000), new rows, the
        # other table (not read yet), each in its own transaction, while the COPY runs
        for sql in ("UPDATE t SET v = 'during' WHERE id IN (1, 1000, 2000)",
                    "DELETE FROM t WHERE id IN (2, 1999)",
                    "INSERT INTO t SELECT g, 'new ' || g FROM generate_series(2001, 2100) g",
                    "UPDATE u SET n = -n WHERE k IN ('k1', 'k50')",
                    "DELETE FROM u WHERE k = 'k2'",
                    "INSERT INTO u VALUES ('fresh', 0)"):
            writer.run(sql)
            during.append(sql)

    def write_early() -> None:
        writer.run("UPDATE t SET v = 'early' WHERE id IN (5, 6)")
        writer.run("INSERT INTO t VALUES (3000, 'early')")
        during.append("early")

    out = tmp_path / "o"
    output = DurableOutput(f"{out}/", kind="capture", slot="s", publications=("p",))
    output.open()
    reader = _LateReader(url, slot="s", publications=["p"])
    reader.before = write_early
    sink = _WritingSink(1500, write)
    try:
        stats = run_capture(reader, output, sink, create_slot=True, snapshot_mode="initial")
    finally:
        output.close()
        reader.close()
        writer.close()
    assert len(during) == 7  # the writes ran while the snapshot was being read
    assert stats.snapshot_rows == 2050 and stats.snapshot_tables == 2
    pg_conn.run("UPDATE t SET v = 'after' WHERE id = 3")
    assert _capture(url, out) == 0  # the rest of the stream
    rows = _rows(out)
    snapshot = [r for r in rows if r.snapshot]
    assert snapshot == rows[:len(snapshot)]  # one block, first
    assert len({r.lsn for r in snapshot}) == 1
    assert all(r.lsn >= snapshot[0].lsn for r in rows)
    events = _events(out)
    ops = [e["op"] for e in events]
    assert ops.count("r") == 2050  # the state before the writes, whole
    assert {e["after"]["v"] for e in events if e["op"] == "r" and "v" in e["after"]} == {
        f"before {i}" for i in range(1, 2001)}
    assert ops[2050:].count("c") == 102 and ops[2050:].count("d") == 3
    assert _apply(events, "id") == _tables(pg_conn)
    assert _checkpoint(out)["snapshot"]["state"] == "done"


def test_initial_takes_one_snapshot_then_streams(url: str, pg_conn: Any,
                                                  tmp_path: Path) -> None:
    pg_conn.run("INSERT INTO t VALUES (1, 'a'), (2, NULL)")
    out = tmp_path / "o"
    assert _capture(url, out, "--create-slot") == 0  # the default mode is initial
    pg_conn.run("INSERT INTO t VALUES (3, 'c')")
    assert _capture(url, out) == 0
    assert _capture(url, out) == 0  # a third run: no second snapshot, nothing new
    events = _events(out)
    assert [(e["op"], e["source"]["snapshot"], e["after"]["id"]) for e in events] == [
        ("r", "first", 1), ("r", "last", 2), ("c", "false", 3)]
    checkpoint = _checkpoint(out)
    assert checkpoint["snapshot"]["state"] == "done" and checkpoint["snapshot"]["rows"] == 2
    assert checkpoint["changes"] == 3


def test_initial_refuses_a_slot_that_exists(url: str, pg_conn: Any, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    pg_conn.run("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    out = tmp_path / "o"
    assert _capture(url, out, "--create-slot") == 1
    err = capsys.readouterr().err
    assert "exists already" in err and "--snapshot-mode no_data" in err
    assert not (out / "capture.jsonl.checkpoint.json").exists()  # nothing ties the output
    pg_conn.run("INSERT INTO t VALUES (1, 'a')")
    assert _capture(url, out, "--snapshot-mode", "no_data") == 0  # today's behaviour
    assert [e["op"] for e in _events(out)] == ["c"]


def test_no_data_streams_without_a_snapshot(url: str, pg_conn: Any, tmp_path: Path) -> None:
    pg_conn.run("INSERT INTO t VALUES (1, 'before the slot')")
    out = tmp_path / "o"
    assert _capture(url, out, "--create-slot", "--snapshot-mode", "no_data") == 0
    pg_conn.run("INSERT INTO t VALUES (2, 'after')")
    assert _capture(url, out, "--snapshot-mode", "no_data") == 0
    assert not any(r.snapshot for r in _rows(out))
    assert [(e["op"], e["after"]["id"]) for e in _events(out)] == [("c", 2)]
    assert _checkpoint(out)["snapshot"] == {"state": "skipped"}
    # an output without a snapshot never gets one later (the connector: offsets exist)
    pg_conn.run("INSERT INTO t VALUES (3, 'later')")
    assert _capture(url, out) == 0
    assert [(e["op"], e["after"]["id"]) for e in _events(out)] == [("c", 2), ("c", 3)]


def test_initial_only_takes_the_snapshot_and_stops(url: str, pg_conn: Any,
                                                   tmp_path: Path) -> None:
    pg_conn.run("INSERT INTO u VALUES ('a', 1), ('b', 2)")
    out = tmp_path / "o"
    assert _capture(url, out, "--create-slot", "--snapshot-mode", "initial_only") == 0
    pg_conn.run("INSERT INTO u VALUES ('c', 3)")
    assert _capture(url, out, "--snapshot-mode", "initial_only") == 0  # done: no stream
    # t, the first table, is empty: no "first" (as the connector marks)
    assert [(e["op"], e["source"]["snapshot"]) for e in _events(out)] == [
        ("r", "first_in_data_collection"), ("r", "last")]
    slot = pg_conn.run("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 's'")
    assert slot == [[1]]  # kept: streaming can continue from the consistent point
    assert _capture(url, out, "--snapshot-mode", "initial") == 0
    assert [(e["op"], e["after"]["k"]) for e in _events(out)] == [
        ("r", "a"), ("r", "b"), ("c", "c")]


def test_when_needed_snapshots_a_new_output_and_again_when_the_slot_is_gone(
        url: str, pg_conn: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pg_conn.run("INSERT INTO t VALUES (1, 'a')")
    out = tmp_path / "o"
    assert _capture(url, out, "--create-slot", "--snapshot-mode", "when_needed") == 0
    pg_conn.run("INSERT INTO t VALUES (2, 'b')")
    assert _capture(url, out, "--snapshot-mode", "when_needed") == 0
    first_snapshot = _checkpoint(out)["snapshot"]
    pg_conn.run("SELECT pg_drop_replication_slot('s')")  # the slot is lost
    pg_conn.run("INSERT INTO t VALUES (3, 'lost with the slot')")
    # initial does not snapshot an output that has one
    assert _capture(url, out) == 1
    assert "does not exist" in capsys.readouterr().err
    assert _capture(url, out, "--create-slot", "--snapshot-mode", "when_needed") == 0
    pg_conn.run("INSERT INTO t VALUES (4, 'd')")
    assert _capture(url, out, "--snapshot-mode", "when_needed") == 0
    events = _events(out)
    assert [(e["op"], e["source"]["snapshot"], e["after"]["id"]) for e in events] == [
        ("r", "last", 1), ("c", "false", 2),  # a one-row snapshot: its only row is "last"
        ("r", "first", 1), ("r", "true", 2), ("r", "last", 3), ("c", "false", 4)]
    second = _checkpoint(out)["snapshot"]
    assert second["state"] == "done" and second["lsn"] != first_snapshot["lsn"]


def test_no_data_refuses_to_continue_an_unfinished_snapshot(url: str, pg_conn: Any,
                                                            tmp_path: Path) -> None:
    out = tmp_path / "o"
    output = DurableOutput(f"{out}/", kind="capture", slot="s", publications=("p",))
    output.open()
    output.mark_snapshot({"state": "running", "mode": "initial"})
    output.close()
    reader = StreamReader(url, slot="s", publications=["p"])
    output = DurableOutput(f"{out}/", kind="capture", slot="s", publications=("p",))
    output.open()
    try:
        with pytest.raises(SnapshotError, match="did not finish"):
            run_capture(reader, output, CaptureSink(), create_slot=True,
                        snapshot_mode="no_data")
    finally:
        output.close()
        reader.close()


def test_a_snapshot_killed_while_it_runs_starts_again_cleanly(
        url: str, pg_conn: Any, tmp_path: Path) -> None:
    """SIGKILL during the snapshot: the next run cuts what the killed one wrote, drops the
    slot it created, creates it again with a new snapshot; the output holds one snapshot
    and every change once."""
    pg_conn.run("INSERT INTO t SELECT g, repeat('x', 50) FROM generate_series(1, 120000) g")
    out = tmp_path / "o"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "pgcdc_events", "capture", "--dsn", url,
                             "--slot", "s", "--publication", "p", "--output", f"{out}/", "-q",
                             "--create-slot"], env=env)
    path = out / "capture.jsonl"
    deadline = time.monotonic() + 120
    killed_at = 0
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if path.exists() and path.stat().st_size > 2_000_000:
                proc.send_signal(signal.SIGKILL)
                killed_at = path.stat().st_size
                break
            time.sleep(0.01)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert killed_at, "the snapshot ended before it could be killed"
    checkpoint = _checkpoint(out)
    assert checkpoint["snapshot"]["state"] == "running" and checkpoint["offset"] == 0
    first = pg_conn.run("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                        "WHERE slot_name = 's'")[0][0]
    pg_conn.run("DELETE FROM t WHERE id = 1")  # after the killed snapshot's point
    pg_conn.run("INSERT INTO t VALUES (0, 'new')")
    assert _capture(url, out) == 0  # no --create-slot needed: the slot was this output's
    rows = _rows(out)
    snapshot = [r for r in rows if r.snapshot]
    assert len(snapshot) == len(rows) == 120000 + 3 + 1  # Begin, 2 Relations, Commit
    assert sum(1 for r in snapshot if r.data[:1] == b"B") == 1
    second = pg_conn.run("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                         "WHERE slot_name = 's'")[0][0]
    assert second != first  # a new slot, a new snapshot: it saw the delete and the insert
    pg_conn.run("UPDATE t SET v = 'y' WHERE id = 2")
    assert _capture(url, out) == 0
    events = _events(out)
    assert [e["op"] for e in events].count("r") == 120000
    assert _apply(events, "id")["t"] == _tables(pg_conn)["t"]
    assert _checkpoint(out)["snapshot"]["state"] == "done"


def test_the_snapshots_schema_messages_are_the_streams(url: str, pg_conn: Any,
                                                      tmp_path: Path) -> None:
    """The Type and Relation messages the snapshot writes are byte for byte those pgoutput
    sends for the same tables (every replica identity, enum, domain, array, generated)."""
    pg_conn.run("CREATE TYPE e AS ENUM ('x', 'y')")
    pg_conn.run("CREATE DOMAIN pos AS int CHECK (VALUE > 0)")
    pg_conn.run("CREATE TABLE r_d (a int, b text, c e, PRIMARY KEY (b, a))")
    pg_conn.run("CREATE TABLE r_f (a int PRIMARY KEY, d pos, arr e[]) ")
    pg_conn.run("ALTER TABLE r_f REPLICA IDENTITY FULL")
    pg_conn.run("CREATE TABLE r_i (a int PRIMARY KEY, u int NOT NULL UNIQUE, "
                "g int GENERATED ALWAYS AS (a * 2) STORED)")
    pg_conn.run("ALTER TABLE r_i REPLICA IDENTITY USING INDEX r_i_u_key")
    pg_conn.run("CREATE TABLE r_n (a int PRIMARY KEY, v varchar(7), n numeric(5,2))")
    pg_conn.run("ALTER TABLE r_n REPLICA IDENTITY NOTHING")
    pg_conn.run('CREATE TABLE "Odd ""Name""" (id int PRIMARY KEY)')
    out = tmp_path / "o"
    assert _capture(url, out, "--create-slot") == 0
    for table in ("r_d", "r_f", "r_i", "r_n", '"Odd ""Name"""'):
        columns = {"r_d": "(a, b) VALUES (1, 'b')", "r_f": "(a) VALUES (1)",
                   "r_i": "(a, u) VALUES (1, 2)", "r_n": "(a) VALUES (1)"}
        pg_conn.run(f"INSERT INTO {table} {columns.get(table, 'VALUES (1)')}")
    assert _capture(url, out) == 0
    rows = _rows(out)

    def schema(snapshot: bool) -> dict[tuple[bytes, bytes], bytes]:
        return {(r.data[:1], r.data[1:5]): r.data for r in rows
                if r.snapshot == snapshot and r.data[:1] in (b"R", b"Y")}

    snapshot, stream = schema(True), schema(False)
    relations = [key for key in snapshot if key[0] == b"R"]
    assert len(relations) == 7 and sum(key[0] == b"Y" for key in snapshot) == 3
    assert {k: v for k, v in snapshot.items() if k in stream} == stream
    assert {k for k in snapshot if k[0] == b"R"} - {k for k in stream if k[0] == b"R"} == {
        k for k in relations if k not in stream}  # t and u: no change streamed
    assert len([k for k in relations if k in stream]) == 5


@pytest.mark.slow
def test_snapshot_kill_campaign(url: str, pg_conn: Any, pg_cluster: TempCluster,
                                tmp_path: Path) -> None:
    """SIGKILL a following capture again and again, at random moments, while a workload
    writes: the first half of the kills land in the snapshot (each restart takes it again
    on a new slot), the rest mostly in the stream. At the end the events applied to empty tables equal the tables, and no
    row was read or created twice. PGCDC_SNAPSHOT_KILLS sets the number of kills."""
    import random  # noqa: PLC0415
    import threading  # noqa: PLC0415

    import pg8000.native  # noqa: PLC0415 - only server tests need the driver

    kills = int(os.environ.get("PGCDC_SNAPSHOT_KILLS", "30"))
    rng = random.Random(13)
    pg_conn.run("INSERT INTO t SELECT g, 'start' FROM generate_series(1, 150000) g")
    pg_conn.run("INSERT INTO u SELECT 'k' || g, g FROM generate_series(1, 20000) g")
    database = pg_conn.run("SELECT current_database()")[0][0]
    stop = threading.Event()
    written = [0]

    def workload() -> None:
        conn = pg8000.native.Connection(**{**pg_cluster.dsn(), "database": database})
        n = 1_000_000
        while not stop.is_set():
            n += 1
            conn.run("BEGIN")
            conn.run("INSERT INTO t VALUES (:n, 'w')", n=n)
            conn.run("UPDATE t SET v = 'u' || :n WHERE id = :id", n=n, id=rng.randint(1, 150000))
            conn.run("DELETE FROM u WHERE k = :k", k=f"k{rng.randint(1, 20000)}")
            conn.run("COMMIT")
            written[0] += 1
            time.sleep(0.002)
        conn.close()

    thread = threading.Thread(target=workload, daemon=True)
    thread.start()
    out = tmp_path / "o"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    in_snapshot = 0
    try:
        for kill in range(kills):
            proc = subprocess.Popen(
                [sys.executable, "-m", "pgcdc_events", "capture", "--dsn", url, "--slot", "s",
                 "--publication", "p", "--output", f"{out}/", "-q", "--create-slot",
                 "--follow", "--poll-interval", "0.05"], env=env)
            # the first half short enough to land in the snapshot (every restart takes it
            # again from the start), the rest anywhere once it is done
            time.sleep(rng.uniform(0.2, 1.5) if kill < kills // 2 else rng.uniform(0.3, 6.0))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            checkpoint = out / "capture.jsonl.checkpoint.json"
            if checkpoint.exists() and _checkpoint(out)["snapshot"]["state"] == "running":
                in_snapshot += 1
    finally:
        stop.set()
        thread.join()
    assert _capture(url, out) == 0
    events = _events(out)
    reads = sum(e["op"] == "r" for e in events)
    assert _apply(events, "id") == _tables(pg_conn)
    print(f"\nsnapshot kill campaign: {kills} kills ({in_snapshot} during the snapshot), "
          f"{written[0]} workload transactions, {len(events)} events ({reads} reads)")
    assert in_snapshot >= kills // 3


def test_snapshot_max_threads_gives_the_capture_one_thread_gives(
        url: str, pg_conn: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``capture -c snapshot.max.threads=N`` (without --decode too) reads tables at once
    and writes, through the bulk path, the snapshot one thread writes: the same messages,
    LSNs and transaction ids aside (each capture has its own slot); a bad value is one
    line naming the property."""
    pg_conn.run("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 3000) g")
    pg_conn.run("INSERT INTO u SELECT 'k' || g, g FROM generate_series(1, 2000) g")
    assert _capture(url, tmp_path / "one", "--create-slot", "--snapshot-mode", "initial_only",
                    slot="one") == 0
    assert _capture(url, tmp_path / "two", "--create-slot", "--snapshot-mode", "initial_only",
                    "-c", "snapshot.max.threads=2", slot="two") == 0
    one, two = _rows(tmp_path / "one"), _rows(tmp_path / "two")
    assert all(r.snapshot for r in one + two)
    # Begin and Commit carry each snapshot's LSN and xid
    assert [r.data for r in one[1:-1]] == [r.data for r in two[1:-1]]
    assert sum(r.data[:1] == b"I" for r in two) == 5000
    capsys.readouterr()
    assert _capture(url, tmp_path / "bad", "--create-slot", "-c", "snapshot.max.threads=0",
                    slot="bad") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "snapshot.max.threads: expected a number of threads" in err[0]
