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
