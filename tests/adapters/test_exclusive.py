"""An exclusive output: one writer per output, a slot moved behind the capture's back is
refused before anything is committed, and an output is never continued on another server (or
one whose WAL is behind its checkpoint), where it would silently skip changes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pg8000.native
import pytest

from pgcdc_events.adapters import (
    CaptureSink,
    DurableOutput,
    SlotMovedError,
    SlotReader,
    StreamReader,
    run_capture,
)
from pgcdc_events.cli import main
from pgcdc_events.protocol import Insert, PgOutputReader, iter_capture
from pgcdc_events.testing.cluster import TempCluster

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def url(pg_cluster: TempCluster, pg_conn: Any) -> str:
    database = pg_conn.run("SELECT current_database()")[0][0]
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    return f"postgresql://{pg_cluster.user}@{pg_cluster.host}:{pg_cluster.port}/{database}"


def _args(url: str, out: Path, *extra: str) -> list[str]:
    return ["capture", "--dsn", url, "--slot", "s", "--publication", "p", "--output",
            f"{out}/", "--snapshot-mode", "no_data", *extra]


def _inserted_ids(path: Path) -> list[int]:
    """The ids of the inserts in a capture (text tuples: the first column)."""
    reader = PgOutputReader()
    ids = []
    with open(path, encoding="utf-8") as fh:
        for row in iter_capture(fh):
            message = reader.read(row.data)
            if isinstance(message, Insert):
                ids.append(int(message.new.values[0] or b""))
    return ids


def test_a_second_writer_is_refused(url: str, pg_conn: Any, tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert main(_args(url, out, "--create-slot", "--create-publication", "-q")) == 0
    first = subprocess.Popen([sys.executable, "-m", "pgcdc_events",
                              *_args(url, out, "--follow", "--poll-interval", "0.05")],
                             stderr=subprocess.PIPE, cwd=ROOT)
    try:
        lock = out / "capture.jsonl.lock"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (
                not lock.exists() or lock.read_text().strip() != str(first.pid)):
            time.sleep(0.05)
        for i in range(50):
            pg_conn.run("INSERT INTO t VALUES (:i, 'x')", i=i)
        second = subprocess.run([sys.executable, "-m", "pgcdc_events", *_args(url, out)],
                                capture_output=True, timeout=60, cwd=ROOT, check=False)
        assert second.returncode == 1
        assert f"another capture (PID {first.pid}) is writing to" in second.stderr.decode()
        for i in range(50, 100):
            pg_conn.run("INSERT INTO t VALUES (:i, 'x')", i=i)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(_inserted_ids(out / "capture.jsonl")) < 100:
            time.sleep(0.1)
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, err.decode()
    assert _inserted_ids(out / "capture.jsonl") == list(range(100))  # once each, in order
    checkpoint = json.loads((out / "capture.jsonl.checkpoint.json").read_text())
    assert checkpoint["changes"] == 100
    # the lock is released with the process: a new run may write
    assert main(_args(url, out, "-q")) == 0


def test_another_reader_moving_the_slot_between_polls_is_refused(
        url: str, pg_conn: Any, tmp_path: Path) -> None:
    """The review's case: a one-off capture into another output takes change 1 between two
    polls of a running capture; the running capture must stop, not record 0 and 2."""
    assert main(_args(url, tmp_path / "a", "--create-slot", "--create-publication", "-q")) == 0
    pg_conn.run("INSERT INTO t VALUES (0, 'x')")
    output = DurableOutput(tmp_path / "a" / "capture.jsonl", kind="capture", slot="s",
                           publications=("p",))
    output.open()
    interfered = []

    def sleep(seconds: float) -> None:
        interfered.append(True)
        if len(interfered) == 1:
            pg_conn.run("INSERT INTO t VALUES (1, 'x')")
            assert main(_args(url, tmp_path / "b", "-q")) == 0  # takes change 1
            pg_conn.run("INSERT INTO t VALUES (2, 'x')")

    reader = SlotReader(url, slot="s", publications=["p"])
    try:
        with pytest.raises(SlotMovedError, match="moved by another client"):
            run_capture(reader, output, CaptureSink(), follow=True, poll_interval=0.01,
                        sleep=sleep, should_stop=lambda: len(interfered) > 20)
    finally:
        output.close()
        reader.close()
    assert _inserted_ids(tmp_path / "a" / "capture.jsonl") == [0]  # nothing past the move
    assert _inserted_ids(tmp_path / "b" / "capture.jsonl") == [1]
    # and the next run sees the gap at once
    assert main(_args(url, tmp_path / "a", "-q")) == 1


def test_an_output_is_not_continued_on_another_server(url: str, pg_conn: Any,
                                                      tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """A checkpoint ahead of the slot (an output reused against a restored or another
    cluster) would make every change up to it look delivered: refused, nothing skipped."""
    out = tmp_path / "o"
    assert main(_args(url, out, "--create-slot", "--create-publication", "-q")) == 0
    for i in range(3):  # move this server's WAL well past a new cluster's
        pg_conn.run("INSERT INTO t VALUES (:i, 'x')", i=i)
        pg_conn.run("SELECT pg_switch_wal()")
    assert main(_args(url, out, "-q")) == 0
    assert _inserted_ids(out / "capture.jsonl") == [0, 1, 2]
    checkpoint_path = out / "capture.jsonl.checkpoint.json"
    with TempCluster() as other:
        conn = pg8000.native.Connection(**other.dsn())
        try:
            conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
            conn.run("CREATE PUBLICATION p FOR ALL TABLES")
            conn.run("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
            conn.run("INSERT INTO t VALUES (10, 'new'), (11, 'new')")
            assert int(conn.run("SELECT pg_current_wal_lsn() - :cp::text::pg_lsn",
                                cp=json.loads(checkpoint_path.read_text())["lsn"])[0][0]) < 0
        finally:
            conn.close()
        assert main(_args(other.url(), out, "-q")) == 1
        assert "system identifier" in capsys.readouterr().err
        # an older checkpoint without the server's identity: its LSN alone gives it away
        saved = json.loads(checkpoint_path.read_text())
        del saved["server"]
        checkpoint_path.write_text(json.dumps(saved))
        assert main(_args(other.url(), out, "-q")) == 1
        assert "ahead of the server's WAL" in capsys.readouterr().err
    assert _inserted_ids(out / "capture.jsonl") == [0, 1, 2]


def test_a_failed_first_run_leaves_nothing_behind(url: str, pg_conn: Any,
                                                  tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert main(_args(url, out, "-q")) == 1  # no publication, no slot
    assert sorted(p.name for p in out.iterdir()) == ["capture.jsonl.lock"]
    pg_conn.run("CREATE PUBLICATION p FOR ALL TABLES")
    pg_conn.run("SELECT pg_create_logical_replication_slot('other', 'pgoutput')")
    # a wrong slot name first, then the right one: the output is not tied to the wrong one
    assert main(["capture", "--dsn", url, "--slot", "wrong", "--publication", "p",
                 "--output", f"{out}/", "-q", "--snapshot-mode", "no_data"]) == 1
    assert main(["capture", "--dsn", url, "--slot", "other", "--publication", "p",
                 "--output", f"{out}/", "-q", "--snapshot-mode", "no_data"]) == 0
    assert json.loads((out / "capture.jsonl.checkpoint.json").read_text())["slot"] == "other"
    assert os.stat(out / "capture.jsonl").st_size == 0


def test_a_connection_lost_while_reporting_progress_is_retried(url: str, pg_conn: Any,
                                                               tmp_path: Path) -> None:
    """The progress report asks the server for the slot's status; when that connection is
    lost, the reader closes itself. The capture must connect again and go on, not stop
    with "call prepare() before reading" (seen when a server restarted under --follow)."""
    from pgcdc_events.adapters import ConnectionLostError  # noqa: PLC0415
    from pgcdc_events.adapters.stream import StreamReader  # noqa: PLC0415

    assert main(_args(url, tmp_path / "a", "--create-slot", "--create-publication", "-q")) == 0
    pg_conn.run("INSERT INTO t VALUES (0, 'x')")

    class LosesItsConnectionOnce(StreamReader):
        lost = False

        def status(self) -> Any:
            if not LosesItsConnectionOnce.lost:
                LosesItsConnectionOnce.lost = True
                self.close()  # what the SQL helper does when the connection is gone
                raise ConnectionLostError("status: connection to the server lost")
            return super().status()

    output = DurableOutput(tmp_path / "a" / "capture.jsonl", kind="capture", slot="s",
                           publications=("p",))
    output.open()
    polls = []

    def sleep(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) == 3:
            pg_conn.run("INSERT INTO t VALUES (1, 'x')")

    reader = LosesItsConnectionOnce(url, slot="s", publications=["p"])
    try:
        deadline = time.monotonic() + 60
        stats = run_capture(
            reader, output, CaptureSink(), follow=True, poll_interval=0.01,
            progress=lambda stats, status: None, progress_every=0.0, sleep=sleep,
            should_stop=lambda: time.monotonic() > deadline or (
                len(polls) > 3 and _inserted_ids(tmp_path / "a" / "capture.jsonl") == [0, 1]))
    finally:
        output.close()
        reader.close()
    assert LosesItsConnectionOnce.lost and stats.reconnects >= 1
    assert _inserted_ids(tmp_path / "a" / "capture.jsonl") == [0, 1]


def test_a_walsender_ended_before_the_acknowledgement_is_a_lost_connection(
        url: str, pg_conn: Any, tmp_path: Path) -> None:
    """The server ends the walsender after a read was written and before it is
    acknowledged (capdec2's finding): nobody holds the slot and it did not move, so the
    capture reconnects and goes on, where it stopped with "no longer held by this
    reader ... may have been taken by another client"; every change once."""
    assert main(_args(url, tmp_path / "a", "--create-slot", "--create-publication", "-q")) == 0
    for i in range(5):
        pg_conn.run("INSERT INTO t VALUES (:i, 'x')", i=i)
    output = DurableOutput(tmp_path / "a" / "capture.jsonl", kind="capture", slot="s",
                           publications=("p",))
    output.open()
    ended: list[int] = []

    class Reader(StreamReader):
        def check_position(self) -> None:
            if not ended:  # the first check (before a commit) while the walsender runs
                ended.extend(row[0] for row in pg_conn.run(
                    "SELECT pg_terminate_backend(active_pid, 5000) FROM pg_replication_slots"
                    " WHERE slot_name = 's' AND active_pid IS NOT NULL"))
                if ended:
                    pg_conn.run("INSERT INTO t VALUES (5, 'x')")
            super().check_position()

    reader = Reader(url, slot="s", publications=["p"])
    try:
        stats = run_capture(reader, output, CaptureSink(), retry_for=30, sleep=lambda _: None)
    finally:
        output.close()
        reader.close()
    assert ended == [True]
    assert stats.reconnects >= 1
    assert _inserted_ids(tmp_path / "a" / "capture.jsonl") == [0, 1, 2, 3, 4, 5]
