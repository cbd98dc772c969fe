"""Running for weeks: a quiet captured database beside a busy one on the same server.

The slot of the quiet database must follow the server's WAL (retained WAL under one
segment, 16 MB), through the idle acknowledgement alone and with heartbeats; only
what is durable is ever acknowledged, and the output holds every change once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pgcdc_events.protocol import Lsn
from pgcdc_events.testing.cluster import TempCluster

ROOT = Path(__file__).resolve().parents[2]
_MB = 1024 * 1024
#: How long the busy database writes beside the capture at least (longer under ``-m slow``).
SHORT, LONG = 12.0, 240.0
#: The WAL the busy database writes at least: past one segment with a margin, so that a
#: slot that never moved (retained WAL = all of it) fails the 16 MB bound.
ENOUGH = 24 * 1024 * 1024


def _url(cluster: TempCluster, database: str) -> str:
    return f"postgresql://{cluster.user}@{cluster.host}:{cluster.port}/{database}"


class Busy:
    """Another database of the same cluster, written to by a thread (WAL the quiet
    database's slot must not hold)."""

    def __init__(self, cluster: TempCluster) -> None:
        import pg8000.native  # noqa: PLC0415 - server tests only

        self.cluster = cluster
        self.name = f"busy_{os.getpid()}_{time.monotonic_ns()}"
        admin = pg8000.native.Connection(**cluster.dsn())
        try:
            admin.run(f'CREATE DATABASE "{self.name}"')
        finally:
            admin.close()
        self.conn = pg8000.native.Connection(**{**cluster.dsn(), "database": self.name})
        self.conn.run("CREATE TABLE noise (id bigserial PRIMARY KEY, pad text)")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._write, daemon=True)
        self.error: BaseException | None = None

    def _write(self) -> None:
        try:
            while not self._stop.is_set():  # about 2 MB of WAL a second
                self.conn.run("INSERT INTO noise (pad) SELECT repeat('n', 300) "
                              "FROM generate_series(1, 1000)")
                self.conn.run("DELETE FROM noise")
                time.sleep(0.2)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        import pg8000.native  # noqa: PLC0415 - server tests only

        self.conn.close()
        admin = pg8000.native.Connection(**self.cluster.dsn())
        try:
            admin.run(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        finally:
            admin.close()


@pytest.fixture
def busy(pg_cluster: TempCluster) -> Iterator[Busy]:
    writer = Busy(pg_cluster)
    try:
        yield writer
    finally:
        writer.stop()


@pytest.fixture
def quiet(pg_cluster: TempCluster, pg_conn: Any) -> str:
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    pg_conn.run("CREATE TABLE beats (at timestamptz)")  # outside the publication
    pg_conn.run("CREATE PUBLICATION p FOR TABLE t")
    return _url(pg_cluster, pg_conn.run("SELECT current_database()")[0][0])


def _capture(url: str, out: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "pgcdc_events", "capture", "--dsn", url, "--slot", "s",
         "--publication", "p", "--output", f"{out}/", "--snapshot-mode", "no_data",
         "--follow", "--poll-interval", "0.2", *extra],
        stderr=subprocess.PIPE, cwd=ROOT)


def position(checkpoint: Path) -> int:
    """How far a checkpoint says the output is complete: its last unit's end (``lsn``) or
    a later position recorded while nothing was pending (``idle``)."""
    saved = json.loads(checkpoint.read_text())
    return max(int(Lsn.parse(saved[key])) for key in ("lsn", "idle") if saved.get(key))


def _slot(pg_conn: Any) -> tuple[int, int, int | None]:
    """(retained WAL past the confirmed position, confirmed position, active pid)."""
    retained, confirmed, pid = pg_conn.run(
        "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint, "
        "confirmed_flush_lsn::text, active_pid FROM pg_replication_slots "
        "WHERE slot_name = 's'")[0]
    return int(retained), int(Lsn.parse(confirmed)), pid


def _run_beside(pg_conn: Any, busy: Busy, url: str, out: Path, seconds: float,
                *extra: str, kind: str = "capture") -> tuple[list[int], str, int]:
    """Capture the quiet database while ``busy`` writes for ``seconds``; the retained WAL
    sampled after a short start, the capture's stderr, the WAL the busy one wrote."""
    pg_conn.run("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    pg_conn.run("INSERT INTO t VALUES (1, 'before')")
    proc = _capture(url, out, *extra)
    checkpoint = out / f"{kind}.jsonl.checkpoint.json"
    samples: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while not checkpoint.exists():  # the first change is captured
            assert proc.poll() is None, proc.stderr.read().decode()  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the capture never started"
            time.sleep(0.1)
        start = int(Lsn.parse(pg_conn.run("SELECT pg_current_wal_lsn()::text")[0][0]))
        busy.start()
        began = time.monotonic()
        while not _long_enough(pg_conn, start, time.monotonic() - began, seconds):
            time.sleep(0.5)
            assert proc.poll() is None, proc.stderr.read().decode()  # type: ignore[union-attr]
            retained, confirmed, _ = _slot(pg_conn)
            if checkpoint.exists():  # never acknowledged past what is on disk
                assert confirmed <= position(checkpoint)
            if time.monotonic() - began > 8:  # the capture has seen the first writes
                samples.append(retained)
        end = int(Lsn.parse(pg_conn.run("SELECT pg_current_wal_lsn()::text")[0][0]))
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert busy.error is None, busy.error
    assert proc.returncode == 0, err.decode()
    return samples, err.decode(), end - start


def _long_enough(pg_conn: Any, start: int, elapsed: float, seconds: float) -> bool:
    """At least ``seconds`` and ``ENOUGH`` WAL written (a slow machine writes longer),
    or two minutes."""
    if elapsed < seconds:
        return False
    now = int(Lsn.parse(pg_conn.run("SELECT pg_current_wal_lsn()::text")[0][0]))
    return now - start >= ENOUGH or elapsed > 120


def _ids(path: Path) -> list[int]:
    ids = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record["topic"].endswith(".public.t"):
            ids.append(record["value"]["payload"]["after"]["id"])
    return ids


@pytest.mark.parametrize("reader", ["stream", "sql"])
@pytest.mark.parametrize("seconds", [
    SHORT, pytest.param(LONG, marks=pytest.mark.slow, id="long")])
def test_without_heartbeats_the_idle_acknowledgement_keeps_the_slot_up(
        pg_conn: Any, busy: Busy, quiet: str, tmp_path: Path, seconds: float,
        reader: str) -> None:
    samples, _, written = _run_beside(pg_conn, busy, quiet, tmp_path / "out", seconds,
                                      "--reader", reader)
    assert written >= ENOUGH, f"the busy database wrote only {written / _MB:.1f} MB"
    assert samples and max(samples) < 16 * _MB, \
        f"retained WAL up to {max(samples) / _MB:.1f} MB of {written / _MB:.1f} MB written"
    checkpoint = json.loads((tmp_path / "out" / "capture.jsonl.checkpoint.json").read_text())
    assert checkpoint["units"] == 1  # the quiet database's own change, once
    lines = (tmp_path / "out" / "capture.jsonl").read_text().splitlines()
    inserts = [json.loads(line) for line in lines if json.loads(line)["data"].startswith("49")]
    assert len(inserts) == checkpoint["changes"]


@pytest.mark.parametrize("seconds", [
    SHORT, pytest.param(LONG, marks=pytest.mark.slow, id="long")])
def test_heartbeats_are_written_and_keep_the_slot_up(
        pg_conn: Any, busy: Busy, quiet: str, tmp_path: Path, seconds: float) -> None:
    samples, _, written = _run_beside(
        pg_conn, busy, quiet, tmp_path / "out", seconds, "--decode",
        "-c", "heartbeat.interval.ms=1000",
        "-c", "heartbeat.action.query=INSERT INTO beats VALUES (now())", kind="events")
    assert written >= ENOUGH, f"the busy database wrote only {written / _MB:.1f} MB"
    assert samples and max(samples) < 16 * _MB, \
        f"retained WAL up to {max(samples) / _MB:.1f} MB of {written / _MB:.1f} MB written"
    events = tmp_path / "out" / "events.jsonl"
    records = [json.loads(line) for line in events.read_text().splitlines()]
    beats = [r for r in records if r["topic"] == "__debezium-heartbeat.pgcdc"]
    assert len(beats) >= seconds / 3, f"{len(beats)} heartbeats in {seconds:g} s"
    assert all(r["key"]["payload"] == {"serverName": "pgcdc"} for r in beats)
    ids = _ids(events)
    assert ids[0] == 1 and len(ids) == len(set(ids))  # every change once
    runs = pg_conn.run("SELECT count(*) FROM beats")[0][0]
    assert runs >= seconds / 3, f"heartbeat.action.query ran {runs} times in {seconds:g} s"


@pytest.fixture(scope="module")
def keep_little() -> Iterator[TempCluster]:
    """A cluster of our own whose slots may keep 32 MB of WAL at most."""
    cluster = TempCluster(settings={"max_slot_wal_keep_size": "32MB", "wal_keep_size": "0"})
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_a_slot_invalidated_under_the_capture_stops_it_saying_so(
        keep_little: TempCluster, tmp_path: Path) -> None:
    import pg8000.native  # noqa: PLC0415 - server tests only

    cluster = keep_little
    conn = pg8000.native.Connection(**cluster.dsn())
    holder = pg8000.native.Connection(**cluster.dsn())
    out = tmp_path / "out"
    try:
        conn.run("CREATE TABLE t (id int PRIMARY KEY)")
        conn.run("CREATE TABLE filler (x text)")
        conn.run("CREATE PUBLICATION p FOR TABLE t")
        conn.run("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
        conn.run("INSERT INTO t VALUES (1)")
        proc = _capture(cluster.url(), out, "--warn-retained", "4")
        try:
            deadline = time.monotonic() + 60
            while conn.run("SELECT active_pid FROM pg_replication_slots")[0][0] is None:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
            holder.run("BEGIN")
            holder.run("SELECT txid_current()")  # an open transaction holds restart_lsn

            def fill(segments: int) -> None:
                for _ in range(segments):
                    conn.run("INSERT INTO filler SELECT repeat('x', 1000) "
                             "FROM generate_series(1, 4000)")
                    conn.run("SELECT pg_switch_wal()")

            fill(1)
            time.sleep(5)  # a progress report: over --warn-retained, not invalidated yet
            fill(4)
            while proc.poll() is None and time.monotonic() < deadline + 60:
                conn.run("CHECKPOINT")
                time.sleep(0.5)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        holder.run("ROLLBACK")
        assert conn.run("SELECT wal_status FROM pg_replication_slots")[0][0] == "lost"
        lines = err.decode().splitlines()
        assert proc.returncode == 1, err.decode()
        warning = [line for line in lines if "warning" in line]
        assert len(warning) == 1 and "over --warn-retained 4 MB" in warning[0]
        assert "of WAL for slot 's'" in warning[0]
        assert any(", retained " in line for line in lines)  # the progress line
        error = lines[-1]
        assert "Traceback" not in err.decode()
        assert ("was invalidated by the server" in error or "no longer" in error), error
        assert "--snapshot-mode when_needed --create-slot" in error
        assert "appends a new snapshot" in error
        # what the error says when_needed does, it does
        again = subprocess.run(
            [sys.executable, "-m", "pgcdc_events", "capture", "--dsn", cluster.url(),
             "--slot", "s", "--publication", "p", "--output", f"{out}/", "-q",
             "--snapshot-mode", "when_needed", "--create-slot"],
            capture_output=True, timeout=120, cwd=ROOT, check=False)
        assert again.returncode == 0, again.stderr.decode()
        checkpoint = json.loads((out / "capture.jsonl.checkpoint.json").read_text())
        assert checkpoint["snapshot"]["state"] == "done" and checkpoint["snapshot"]["rows"] == 1
        assert conn.run("SELECT wal_status FROM pg_replication_slots")[0][0] == "reserved"
    finally:
        holder.close()
        conn.run("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots")
        conn.close()
