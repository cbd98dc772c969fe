"""Blocking snapshots (``execute-snapshot`` with ``"type": "blocking"``), end to end on a
real PostgreSQL: the capture stops reading the slot after the unit that held the signal,
writes the listed tables as a snapshot block (the initial snapshot's markers), commits it,
then streams on.

Ports of ``debezium/debezium``
``debezium-embedded/src/test/java/io/debezium/pipeline/AbstractBlockingSnapshotTest.java``
and ``debezium-connector-postgres/src/test/java/io/debezium/connector/postgresql/
BlockingSnapshotIT.java`` (each test names its methods; the expected counts and values are
the Java assertions', on our tables' sizes).
"""

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

from pgcdc_events.adapters import CaptureSink, DurableOutput, SlotReader, run_capture
from pgcdc_events.adapters.connection import parse_conninfo
from pgcdc_events.adapters.incremental import IncrementalCapture
from pgcdc_events.cli import main
from pgcdc_events.events import EventConfig
from pgcdc_events.protocol.capture import CaptureRow
from pgcdc_events.protocol.decoder import parse_message
from pgcdc_events.testing.cluster import TempCluster
from support.signals import PROPS, capture, decode, signal_url

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def url(pg_cluster: TempCluster, pg_conn: Any) -> str:
    return signal_url(pg_cluster, pg_conn)


def blocking(conn: Any, signal_id: str, collections: list[str],
             conditions: dict[str, str] | None = None) -> None:
    data: dict[str, Any] = {"data-collections": collections, "type": "blocking"}
    if conditions:
        data["additional-conditions"] = [{"data-collection": k, "filter": v}
                                         for k, v in conditions.items()]
    conn.run("INSERT INTO debezium_signal VALUES (:i, 'execute-snapshot', :d)", i=signal_id,
             d=json.dumps(data))


def events(records: list[dict[str, Any]]) -> list[tuple[str, str, Any]]:
    """(table, op, after) of each record with a value, in order."""
    return [(r["topic"].rsplit(".", 1)[1], r["value"]["payload"]["op"],
             r["value"]["payload"]["after"]) for r in records if r["value"] is not None]


def rows(conn: Any, sql: str) -> list[dict[str, Any]]:
    return [v[0] if isinstance(v[0], dict) else json.loads(v[0])
            for v in conn.run(f"SELECT to_json(t) FROM ({sql}) t")]


def test_a_blocking_snapshot_of_two_tables_while_another_streams(
        url: str, pg_conn: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Ports of ``executeBlockingSnapshot``, ``executeBlockingSnapshotWhileStreaming`` and
    ``executeMultipleBlockingSnapshots``: the listed tables' rows come as ``r`` events equal
    to ``SELECT *``, with the initial snapshot's markers, after what was streamed before
    the signal; what is streamed after comes after the block; a second signal makes a
    second block; an unknown table is named in a warning."""
    pg_conn.run("CREATE TABLE a (id int PRIMARY KEY, v text)")
    pg_conn.run("CREATE TABLE b (id int PRIMARY KEY, v numeric, w text[])")
    pg_conn.run("CREATE TABLE c (id int PRIMARY KEY, v int)")
    pg_conn.run("INSERT INTO a SELECT g, 'a' || g FROM generate_series(1, 5) g")
    pg_conn.run("INSERT INTO b SELECT g, g / 3.0, ARRAY['x', NULL, 'y\\z'] FROM "
                "generate_series(1, 4) g")
    cap, live = tmp_path / "cap.jsonl", tmp_path / "live.jsonl"
    assert capture(url, cap, "--create-slot", "--create-publication") == 0
    assert capture(url, live, "--decode", "--create-slot", slot="s2") == 0
    pg_conn.run("INSERT INTO c VALUES (1, 1)")
    blocking(pg_conn, "b-1", ["public\\.[ab]", "public.nosuch"])
    pg_conn.run("INSERT INTO c VALUES (2, 2)")
    pg_conn.run("UPDATE a SET v = 'changed' WHERE id = 1")
    assert capture(url, cap) == 0
    err = capsys.readouterr().err
    assert "public.nosuch" in err and "no such table" in err and "Traceback" not in err
    checkpoint = json.loads((tmp_path / "cap.jsonl.checkpoint.json").read_text())
    assert "blocking" not in checkpoint.get("incremental", {})  # taken: nothing left
    records = decode(cap, tmp_path)
    got = events(records)
    first_a = next(i for i, e in enumerate(got) if e[1] == "r")
    # the stream up to the signal's transaction, the block, the stream after it
    assert [(t, op) for t, op, _ in got[:first_a]] == [("c", "c"), ("debezium_signal", "c")]
    block = got[first_a:first_a + 9]
    assert [t for t, _, _ in block] == ["a"] * 5 + ["b"] * 4
    assert all(op == "r" for _, op, _ in block)
    # the rows are the tables' as the snapshot read them (a's update came after the signal:
    # streamed after the block; the rows read may already hold it, as in the connector)
    a_now, b_now = rows(pg_conn, "SELECT * FROM a"), rows(pg_conn, "SELECT * FROM b")
    assert sorted((e[2] for e in block[:5]), key=lambda r: r["id"]) == \
        sorted(a_now, key=lambda r: r["id"])
    b_read = sorted((e[2] for e in block[5:]), key=lambda r: r["id"])
    assert [(r["id"], r["w"]) for r in b_read] == [(r["id"], r["w"]) for r in
                                                   sorted(b_now, key=lambda r: r["id"])]
    assert [(t, op) for t, op, _ in got[first_a + 9:]] == [("c", "c"), ("a", "u")]
    # the initial snapshot's markers, the snapshot transaction's id and WAL position
    sources = [r["value"]["payload"]["source"] for r in records
               if r["value"] is not None and r["value"]["payload"]["op"] == "r"]
    assert [s["snapshot"] for s in sources] == (
        ["first", "true", "true", "true", "last_in_data_collection",
         "first_in_data_collection", "true", "true", "last"])
    assert all(s["txId"] is not None and s["lsn"] is not None for s in sources)
    assert len({(s["txId"], s["lsn"]) for s in sources}) == 1
    # decoded on two cores: the block read in one process, the same records
    assert events(decode(cap, tmp_path, "--workers", "2")) == got
    # the same from the capture that decodes as it goes
    assert capture(url, live, "--decode", slot="s2") == 0
    streamed = [json.loads(x) for x in live.read_text().splitlines()]
    assert [(t, op) for t, op, _ in events(streamed)] == [(t, op) for t, op, _ in got]
    # a second blocking snapshot, with a filter (a whole SELECT: the blocking form)
    blocking(pg_conn, "b-2", ["public.b"], {"public.b": "SELECT * FROM public.b WHERE id > 2"})
    pg_conn.run("INSERT INTO c VALUES (3, 3)")
    assert capture(url, cap) == 0
    again = events(decode(cap, tmp_path))
    assert again[:len(got)] == got
    assert [(t, op, e["id"] if t != "debezium_signal" else None)
            for t, op, e in again[len(got):]] == [
        ("debezium_signal", "c", None), ("b", "r", 3), ("b", "r", 4), ("c", "c", 3)]


def test_an_additional_condition_is_a_whole_select(url: str, pg_conn: Any,
                                                   tmp_path: Path) -> None:
    """Port of ``executeBlockingSnapshotWithAdditionalCondition`` (``SELECT * FROM %s WHERE
    aa < 500``: 500 of 1000 rows): the filter matches its table by a case-insensitive
    regular expression; the other table is read whole."""
    pg_conn.run("CREATE TABLE a (pk int PRIMARY KEY, aa int)")
    pg_conn.run("CREATE TABLE b (pk int PRIMARY KEY, aa int)")
    pg_conn.run("INSERT INTO a SELECT g, g FROM generate_series(0, 999) g")
    pg_conn.run("INSERT INTO b SELECT g, g FROM generate_series(0, 9) g")
    cap = tmp_path / "cap.jsonl"
    assert capture(url, cap, "--create-slot", "--create-publication") == 0
    blocking(pg_conn, "b-1", ["public.a", "public.b"],
             {"PUBLIC.A": "SELECT * FROM public.a WHERE aa < 500 ORDER BY pk DESC;"})
    assert capture(url, cap) == 0
    got = events(decode(cap, tmp_path))
    assert [e["aa"] for t, op, e in got if t == "a"] == list(range(499, -1, -1))
    assert [e["aa"] for t, op, e in got if t == "b"] == list(range(10))


def test_a_failing_select_writes_nothing_and_the_stream_resumes(
        url: str, pg_conn: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Ports of ``anErrorDuringBlockingSnapshotShouldLeaveTheConnectorInAGoodState`` and
    ``anErrorDuringBlockingSnapshotShouldNotLeaveTheStreamingPaused``: a filter the server
    refuses (``SELECT WITH AN ERROR``) is named in a warning, no row of the snapshot is
    written (the table read before it too), and the changes after it stream as usual."""
    pg_conn.run("CREATE TABLE a (pk int PRIMARY KEY, aa int)")
    pg_conn.run("CREATE TABLE b (pk int PRIMARY KEY, aa int)")
    pg_conn.run("INSERT INTO a SELECT g, g FROM generate_series(0, 9) g")
    pg_conn.run("INSERT INTO b SELECT g, g FROM generate_series(0, 9) g")
    cap, live = tmp_path / "cap.jsonl", tmp_path / "live.jsonl"
    assert capture(url, cap, "--create-slot", "--create-publication") == 0
    assert capture(url, live, "--decode", "--create-slot", slot="s2") == 0
    blocking(pg_conn, "b-bad", ["public.a", "public.b"], {"public.b": "SELECT WITH AN ERROR"})
    pg_conn.run("INSERT INTO a VALUES (100, 100)")
    assert capture(url, cap) == 0
    err = capsys.readouterr().err
    assert "'b-bad' failed" in err and "42601" in err and "Traceback" not in err
    assert '"snapshot": true' not in cap.read_text()
    assert [(t, op) for t, op, _ in events(decode(cap, tmp_path))] == [
        ("debezium_signal", "c"), ("a", "c")]
    assert capture(url, live, "--decode", slot="s2") == 0
    assert [(t, op) for t, op, _ in events([json.loads(x) for x in
                                            live.read_text().splitlines()])] == [
        ("debezium_signal", "c"), ("a", "c")]
    # a good one afterwards works (the connection was left in a good state)
    blocking(pg_conn, "b-good", ["public.b"])
    assert capture(url, cap) == 0
    assert [op for t, op, _ in events(decode(cap, tmp_path)) if t == "b"] == ["r"] * 10


def test_sigkill_during_a_blocking_snapshot_takes_it_again(url: str, pg_conn: Any,
                                                          tmp_path: Path) -> None:
    """A capture killed while it writes the block: the request is in the checkpoint (it was
    committed with the unit that held the signal), the half block past the checkpoint is
    cut when the output is opened again, and the next run takes the snapshot again from
    the start: every row read once, the changes after the signal after the block (the
    connector's ``blockingSnapshotMustReuseExistingOffsetAsSnapshotOffset``: the stream
    goes on from where it paused)."""
    pg_conn.run("CREATE TABLE big (id int PRIMARY KEY, v text)")
    pg_conn.run("INSERT INTO big SELECT g, repeat('x', 100) || g FROM "
                "generate_series(1, 100000) g")
    pg_conn.run("CREATE TABLE c (id int PRIMARY KEY)")
    cap = tmp_path / "cap.jsonl"
    checkpoint = tmp_path / "cap.jsonl.checkpoint.json"
    assert capture(url, cap, "--create-slot", "--create-publication") == 0
    blocking(pg_conn, "b-k", ["public.big"])
    pg_conn.run("INSERT INTO c VALUES (1)")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pgcdc_events", "capture", "--dsn", url, "--slot", "s",
         "--publication", "p", "--output", str(cap), "--snapshot-mode", "no_data", "-q",
         "--follow", "--poll-interval", "0.05", *PROPS],
        cwd=ROOT, env=os.environ.copy(), stderr=subprocess.PIPE)
    killed_inside = False
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
            state = json.loads(checkpoint.read_text())
            if "blocking" in state.get("incremental", {}) and \
                    cap.stat().st_size > state["offset"] + (1 << 20):
                killed_inside = True  # 1 MiB of the block on disk, not committed
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
    assert b"Traceback" not in err
    assert killed_inside, (err.decode(), checkpoint.read_text())
    state = json.loads(checkpoint.read_text())
    assert state["incremental"]["blocking"][0]["id"] == "b-k"
    assert capture(url, cap) == 0
    assert "incremental" not in json.loads(checkpoint.read_text())
    got = events(decode(cap, tmp_path))
    ids = [e["id"] for t, op, e in got if t == "big"]
    assert sorted(ids) == list(range(1, 100001)) and len(ids) == 100000
    assert [(t, op) for t, op, _ in got if t != "big"] == [("debezium_signal", "c"),
                                                          ("c", "c")]
    assert got[-1][0] == "c"


def test_a_slot_behind_a_block_is_read_on(url: str, pg_conn: Any, tmp_path: Path) -> None:
    """The output ends with a blocking snapshot's block and the slot was not acknowledged
    (a crash after the block's commit, before the slot moved): the next run gets the
    signal's transaction again, recognises it as the output's by its LSN (the output's last
    line is the block's, not the transaction's), skips it and streams on."""
    pg_conn.run("CREATE TABLE a (id int PRIMARY KEY)")
    pg_conn.run("INSERT INTO a VALUES (1), (2)")
    cap = tmp_path / "cap.jsonl"
    assert capture(url, cap, "--create-slot", "--create-publication") == 0
    blocking(pg_conn, "b-1", ["public.a"])
    properties = {"topic.prefix": "pgcdc", "signal.data.collection": "public.debezium_signal"}
    settings = parse_conninfo(url)
    incremental = IncrementalCapture(lambda: settings.connect()[0], properties,
                                     EventConfig.from_properties(properties), decode=False,
                                     publications=["p"])
    reader = SlotReader(url, slot="s", publications=["p"])
    output = DurableOutput(cap, kind="capture", slot="s", publications=("p",))
    output.open()
    try:
        run_capture(reader, output, CaptureSink(), incremental=incremental, advance=False)
    finally:
        output.close()
        reader.close()
        incremental.close()
    assert cap.read_text().splitlines()[-1].endswith('"snapshot": true}')
    pg_conn.run("INSERT INTO a VALUES (3)")
    assert capture(url, cap) == 0
    assert [(t, op, e["id"]) for t, op, e in events(decode(cap, tmp_path)) if t == "a"] == [
        ("a", "r", 1), ("a", "r", 2), ("a", "c", 3)]


def test_an_uncommitted_block_is_cut_whatever_its_commit_says(url: str, pg_conn: Any,
                                                            tmp_path: Path) -> None:
    """A process killed after writing a whole block (its Commit on disk) but before
    committing it: the block is an uncommitted tail, cut when the output is opened again,
    even when its Commit's LSN (the server's WAL position when the snapshot began) is not
    past the checkpoint's (a snapshot block is not a transaction of the stream). The lines
    are a real capture's, replayed into a new output."""
    pg_conn.run("CREATE TABLE a (id int PRIMARY KEY)")
    pg_conn.run("INSERT INTO a VALUES (1), (2)")
    cap = tmp_path / "cap.jsonl"
    assert capture(url, cap, "--create-slot", "--create-publication") == 0
    blocking(pg_conn, "b-1", ["public.a"])
    assert capture(url, cap) == 0
    lines = cap.read_bytes().splitlines(keepends=True)
    cut = next(i for i, x in enumerate(lines) if b'"snapshot": true' in x)
    stream, block = lines[:cut], lines[cut:]
    block_end = int(parse_message(CaptureRow.from_line(block[-1]).data).end_lsn)
    stream_end = json.loads((tmp_path / "cap.jsonl.checkpoint.json").read_text())["lsn"]
    hi, lo = stream_end.split("/")
    lsn = max(block_end, (int(hi, 16) << 32) | int(lo, 16))  # the Commit not past it
    path = tmp_path / "replay.jsonl"
    out = DurableOutput(path, kind="capture", slot="s", publications=("p",))
    out.open()
    out.write(b"".join(stream))
    out.commit(lsn, 1, 1)
    out.write(b"".join(block))
    out._flush()  # as if the process died after writing the block, before committing it
    os.close(out._fd)  # type: ignore[arg-type]
    out._fd = None
    out._unlock()  # a dead process holds no lock
    again = DurableOutput(path, kind="capture", slot="s", publications=("p",))
    again.open()
    again.close()
    assert again.truncated == len(b"".join(block))
    assert path.read_bytes() == b"".join(stream)


def test_a_table_named_with_quotes(url: str, pg_conn: Any, tmp_path: Path) -> None:
    """Port of ``executeBlockingSnapshotWithEscapedCollectionName`` (DBZ-7718; the
    PostgreSQL IT names the table ``\\"s1\\".\\"a\\"``): a data collection written as
    double-quoted identifiers names its table."""
    pg_conn.run("CREATE SCHEMA s1")
    pg_conn.run("CREATE TABLE s1.a (pk int PRIMARY KEY, aa int)")
    pg_conn.run("INSERT INTO s1.a SELECT g, g FROM generate_series(0, 9) g")
    cap = tmp_path / "cap.jsonl"
    assert capture(url, cap, "--create-slot", "--create-publication") == 0
    blocking(pg_conn, "b-q", ['"s1"."a"'])  # the Java string, once in the signal's JSON
    assert capture(url, cap) == 0
    pg_conn.run("INSERT INTO s1.a VALUES (10, 10)")
    assert capture(url, cap) == 0
    got = [(op, e["aa"]) for t, op, e in events(decode(cap, tmp_path)) if t == "a"]
    assert got == [("r", v) for v in range(10)] + [("c", 10)]


def test_just_after_the_initial_snapshot_from_signal_file(url: str, pg_conn: Any,
                                                          tmp_path: Path) -> None:
    """Port of ``BlockingSnapshotIT.executeBlockingSnapshotJustAfterInitialSnapshotAndNo
    EventStreamedYet``: an initial snapshot, then a blocking one asked for through
    ``signal.file`` before anything streamed: the table's rows twice (two blocks, each
    with its markers), then the stream."""
    pg_conn.run("CREATE TABLE a (pk int PRIMARY KEY, aa int)")
    pg_conn.run("INSERT INTO a SELECT g, g FROM generate_series(0, 4) g")
    cap, signals = tmp_path / "cap.jsonl", tmp_path / "signals.jsonl"
    props = ("-c", "signal.enabled.channels=file", "-c", f"signal.file={signals}")
    assert main(["capture", "--dsn", url, "--slot", "s", "--publication", "p",
                 "--output", str(cap), "--snapshot-mode", "initial", "--create-slot",
                 "--create-publication", "-q", *PROPS, *props]) == 0
    signals.write_text(json.dumps({"id": "f-1", "type": "execute-snapshot",
                                   "data": {"data-collections": ["public.a"],
                                            "type": "BLOCKING"}}) + "\n")
    assert capture(url, cap, *props) == 0
    assert signals.read_text() == ""
    pg_conn.run("INSERT INTO a VALUES (5, 5)")
    assert capture(url, cap, *props) == 0
    records = [r for r in decode(cap, tmp_path, *props) if r["topic"] == "pgcdc.public.a"]
    got = [(r["value"]["payload"]["op"], r["value"]["payload"]["after"]["aa"],
            r["value"]["payload"]["source"]["snapshot"]) for r in records]
    markers = ["first", "true", "true", "true", "last"]
    assert got == [("r", v, m) for v, m in zip(range(5), markers, strict=True)] * 2 + [
        ("c", 5, "false")]


def test_a_damaged_blocking_queue_in_the_checkpoint_is_named(
        url: str, pg_conn: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The checkpoint's ``incremental.blocking`` is ours to read: anything but the list
    the capture writes is refused by name, one line, nothing read from the slot."""
    cap = tmp_path / "cap.jsonl"
    assert capture(url, cap, "--create-slot", "--create-publication") == 0
    path = tmp_path / "cap.jsonl.checkpoint.json"
    checkpoint = json.loads(path.read_text())
    checkpoint["incremental"] = {"blocking": [{"id": 1, "tables": "public.a"}]}
    path.write_text(json.dumps(checkpoint))
    capsys.readouterr()
    assert capture(url, cap) == 1
    err = capsys.readouterr().err
    assert "'incremental.blocking' is malformed" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_table_the_filters_leave_out_is_named_and_skipped(
        url: str, pg_conn: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As the connector snapshots captured tables only: a table ``table.include.list``
    leaves out is named in a warning, the other one is read."""
    pg_conn.run("CREATE TABLE a (pk int PRIMARY KEY)")
    pg_conn.run("CREATE TABLE b (pk int PRIMARY KEY)")
    pg_conn.run("INSERT INTO a VALUES (1)")
    pg_conn.run("INSERT INTO b VALUES (1)")
    only = ("-c", "table.include.list=public.a")
    cap = tmp_path / "cap.jsonl"
    assert capture(url, cap, "--create-slot", "--create-publication", *only) == 0
    blocking(pg_conn, "b-f", ["public.b", "public.a"])
    assert capture(url, cap, *only) == 0
    err = capsys.readouterr().err
    assert "public.b" in err and "table filters leave it out" in err
    assert [(t, op) for t, op, _ in events(decode(cap, tmp_path, *only))] == [
        ("debezium_signal", "c"), ("a", "r")]
