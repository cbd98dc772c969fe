"""``pgcdc-events capture`` driving incremental snapshots, end to end on a real PostgreSQL.

A signal row inserted while the capture streams makes it read the tables in chunks; the
capture file records each chunk (a chunk line) among the stream's lines, and ``decode``
replays the window from them. The checks are the connector's
(``consumeMixedWithIncrementalSnapshot`` in ``debezium/debezium``
``AbstractIncrementalSnapshotTest``): the last event per key equals the table's row, and
every row no change touched is read (``op: r``) exactly once.
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

from pgcdc_events.cli import main
from pgcdc_events.testing.cluster import TempCluster

ROOT = Path(__file__).resolve().parents[2]
SIGNAL_DDL = ("CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) "
              "NOT NULL, data varchar(2048) NULL)")
PROPS = ["-c", "signal.data.collection=public.debezium_signal"]


@pytest.fixture
def url(pg_cluster: TempCluster, pg_conn: Any) -> str:
    database = pg_conn.run("SELECT current_database()")[0][0]
    pg_conn.run(SIGNAL_DDL)
    return f"postgresql://{pg_cluster.user}@{pg_cluster.host}:{pg_cluster.port}/{database}"


def capture(url: str, out: Path, *extra: str, slot: str = "s") -> int:
    return main(["capture", "--dsn", url, "--slot", slot, "--publication", "p",
                 "--output", str(out), "--snapshot-mode", "no_data", "-q", *PROPS, *extra])


def signal_snapshot(conn: Any, signal_id: str, data: dict[str, Any]) -> None:
    conn.run("INSERT INTO debezium_signal VALUES (:i, 'execute-snapshot', :d)", i=signal_id,
             d=json.dumps(data))


def decode(capture_file: Path, tmp_path: Path, *extra: str) -> list[dict[str, Any]]:
    out = tmp_path / f"records-{len(list(tmp_path.iterdir()))}.jsonl"
    assert main(["decode", "--capture", str(capture_file), "--output", str(out), "-q",
                 "--workers", "1", *PROPS, *extra]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def payloads(records: list[dict[str, Any]], table: str) -> list[dict[str, Any]]:
    return [r["value"]["payload"] for r in records
            if r["topic"] == f"pgcdc.public.{table}" and r["value"] is not None]


def keyed(records: list[dict[str, Any]], table: str) -> list[tuple[str, Any, Any]]:
    """(op, key, after) of each record of ``table``: what two runs must agree on."""
    out = []
    for r in records:
        if r["topic"] == f"pgcdc.public.{table}" and r["value"] is not None:
            payload = r["value"]["payload"]
            out.append((payload["op"], json.dumps(r["key"]["payload"], sort_keys=True),
                        json.dumps(payload["after"], sort_keys=True)))
    return out


def check_invariants(records: list[dict[str, Any]], table: str, conn: Any, key: list[str],
                     touched: set[Any]) -> None:
    """The last event per key is the row ``SELECT *`` gives; each untouched row is read
    exactly once."""
    state: dict[Any, Any] = {}
    reads: dict[Any, int] = {}
    for payload in payloads(records, table):
        row = payload["after"] if payload["op"] != "d" else payload["before"]
        k = tuple(row[c] for c in key)
        if payload["op"] == "d":
            state.pop(k, None)
        else:
            state[k] = payload["after"]
        if payload["op"] == "r":
            reads[k] = reads.get(k, 0) + 1
    columns = [c for c, in conn.run(
        "SELECT attname FROM pg_attribute WHERE attrelid = CAST(:t AS regclass) AND attnum > 0 "
        "AND NOT attisdropped ORDER BY attnum", t=table)]
    expected = {}
    for values in conn.run(f"SELECT to_json(t) FROM {table} t"):  # noqa: S608 - test tables
        row = values[0] if isinstance(values[0], dict) else json.loads(values[0])
        expected[tuple(row[c] for c in key)] = {c: row[c] for c in columns}
    assert set(state) == set(expected)
    for k, row in expected.items():
        assert {c: state[k][c] for c in columns} == row, k
    untouched = set(expected) - touched
    assert all(reads.get(k) == 1 for k in untouched), \
        [(k, reads.get(k)) for k in untouched if reads.get(k) != 1][:5]


def test_capture_then_decode_reads_every_row_once(url: str, pg_conn: Any,
                                                   tmp_path: Path) -> None:
    """``capture`` with the signal table, then ``decode``: the chunk lines replay the
    windows; a second capture with ``--decode`` on its own slot gives the same records."""
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    pg_conn.run("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 10) g")
    cap, events = tmp_path / "cap.jsonl", tmp_path / "events.jsonl"
    assert capture(url, cap, "--create-slot", "--create-publication") == 0
    assert capture(url, events, "--decode", "--create-slot", slot="s2") == 0
    signal_snapshot(pg_conn, "ad-hoc-1", {"data-collections": ["public.t"]})
    assert capture(url, cap, "-c", "incremental.snapshot.chunk.size=3") == 0
    lines = cap.read_text().splitlines()
    chunks = [json.loads(x)["chunk"] for x in lines if '"chunk": {' in x]
    assert [len(c["rows"]) for c in chunks] == [3, 3, 3, 1, 0]
    assert [c["key"] for c in chunks] == [["id"]] * 5
    checkpoint = json.loads((tmp_path / "cap.jsonl.checkpoint.json").read_text())
    assert "incremental" not in checkpoint  # finished: no progress left to keep
    records = decode(cap, tmp_path, "-c", "incremental.snapshot.chunk.size=3")
    reads = [p["after"]["id"] for p in payloads(records, "t") if p["op"] == "r"]
    assert reads == list(range(1, 11))
    source = next(p["source"] for p in payloads(records, "t") if p["op"] == "r")
    assert source["snapshot"] == "incremental" and source["lsn"] is None
    check_invariants(records, "t", pg_conn, ["id"], set())
    # the same signal, read by a capture that decodes as it goes
    assert capture(url, events, "--decode", "-c", "incremental.snapshot.chunk.size=3",
                   slot="s2") == 0
    live = [json.loads(x) for x in events.read_text().splitlines()]
    assert keyed(live, "t") == keyed(records, "t")


def test_the_capture_refuses_what_it_cannot_do(url: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert capture(url, tmp_path / "o.jsonl", "--create-slot", "--create-publication",
                   "-c", "read.only=true") == 1
    err = capsys.readouterr().err
    assert "read.only=true" in err and "not supported" in err and "Traceback" not in err
    assert capture(url, tmp_path / "o.jsonl", "-c", "signal.enabled.channels=kafka") == 1
    assert "not 'kafka'" in capsys.readouterr().err
