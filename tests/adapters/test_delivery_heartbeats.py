"""Delivery with heartbeats on: the idle acknowledgement (a position recorded in the
checkpoint while nothing is pending, then confirmed) keeps 0 lost and 0 duplicated
through SIGKILLs at random moments (the campaign of ``test_delivery``)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pg8000.native
import pytest

from adapters import test_delivery
from adapters.test_running_for_weeks import position
from pgcdc_events.protocol import Lsn, iter_capture
from pgcdc_events.testing.cluster import TempCluster

cluster = test_delivery.cluster  # the fixture: a cluster of its own with the referee slot


def test_sigkill_with_heartbeats(cluster: TempCluster, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    plain = test_delivery.capture_args

    def with_heartbeats(c: TempCluster, output: Path, *extra: str, reader: str = "stream"
                        ) -> list[str]:
        return plain(c, output, *extra, "-c", "heartbeat.interval.ms=100", reader=reader)

    monkeypatch.setattr(test_delivery, "capture_args", with_heartbeats)
    output = tmp_path / "out"
    figures = test_delivery.kill_campaign(cluster, output, kills=8, restarts=0, seed=23)
    assert figures["kills"] == 8 and figures["lost"] == 0 and figures["duplicates"] == 0
    # the idle acknowledgement runs: after WAL that publishes nothing (a temporary
    # table's catalog rows), a follower records the server's position past its
    # checkpoint, and the slot is never confirmed past the checkpoint
    proc = test_delivery.start_capture(with_heartbeats(cluster, output, "--follow"))
    conn = pg8000.native.Connection(**cluster.dsn())
    checkpoint = output / "capture.jsonl.checkpoint.json"
    try:
        time.sleep(2)
        with open(output / "capture.jsonl", encoding="utf-8") as fh:
            captured = list(iter_capture(fh))
        before = position(checkpoint)
        assert before >= max(int(row.lsn) for row in captured)
        conn.run("CREATE TEMPORARY TABLE nothing_published (x int)")
        deadline = time.monotonic() + 30
        while position(checkpoint) <= before:
            assert time.monotonic() < deadline, "no idle position was recorded"
            time.sleep(0.2)
        confirmed = conn.run("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                             "WHERE slot_name = 'cap'")[0][0]
        assert int(Lsn.parse(confirmed)) <= position(checkpoint)
        # the checkpoint's lsn is still the end of the last transaction in the output
        saved = json.loads(checkpoint.read_text())
        assert int(Lsn.parse(saved["lsn"])) < int(Lsn.parse(saved["idle"]))
    finally:
        conn.close()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    test_delivery.finish_capture(cluster, output)
    assert test_delivery.verify(cluster, output)["duplicates"] == 0


IDLE_CRASH = test_delivery.crash_wrapper("from pgcdc_events.adapters import checkpoint", '''
    record = checkpoint.DurableOutput.record_idle

    if point == "after-idle":  # the idle position is on disk, the slot not confirmed
        def recorded_not_confirmed(self, lsn):
            record(self, lsn)
            if passing():
                die()
        checkpoint.DurableOutput.record_idle = recorded_not_confirmed
''')


def test_a_crash_between_recording_and_confirming_an_idle_position(
        cluster: TempCluster, tmp_path: Path) -> None:
    """The slot is then behind the recorded position, with no transaction ending there:
    the next run continues (the checkpoint's lsn is still its last transaction's end, which
    the check of what is skipped as delivered finds again), exactly once."""
    workload = test_delivery.Workload(cluster, seed=29)
    conn = workload.connect()
    script = tmp_path / "crash.py"
    script.write_text(IDLE_CRASH)
    output = tmp_path / "out"
    checkpoint = output / "capture.jsonl.checkpoint.json"
    args = test_delivery.capture_args(cluster, output, "--follow",
                                      "-c", "heartbeat.interval.ms=100")
    try:
        for _ in range(20):
            workload.step(conn)
        for gid in workload.prepared:  # (an unresolved PREPARE leaves nothing idle)
            conn.run(f"COMMIT PREPARED '{gid}'")
        workload.prepared = []
        proc = test_delivery.start_capture(args, {"CRASH_AT": "after-idle", "CRASH_NTH": "1"},
                                           script)
        deadline = time.monotonic() + 60
        while proc.poll() is None:  # WAL that publishes nothing, until it dies
            assert time.monotonic() < deadline, "the capture never recorded an idle position"
            conn.run("CREATE TEMPORARY TABLE IF NOT EXISTS nothing_published (x int)")
            conn.run("DROP TABLE nothing_published")
            time.sleep(0.3)
        assert proc.returncode == -signal.SIGKILL, proc.communicate()[1].decode()
        saved = json.loads(checkpoint.read_text())
        confirmed = conn.run("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                             "WHERE slot_name = 'cap'")[0][0]
        assert int(Lsn.parse(confirmed)) < int(Lsn.parse(saved["idle"]))
        for _ in range(20):
            workload.step(conn)
        for gid in workload.prepared:
            conn.run(f"COMMIT PREPARED '{gid}'")
    finally:
        conn.close()
    test_delivery.finish_capture(cluster, output)
    test_delivery.verify(cluster, output)
