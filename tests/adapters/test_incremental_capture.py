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
    MixedWorkload,
    capture,
    check_invariants,
    decode,
    keyed,
    payloads,
    signal_url,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def url(pg_cluster: TempCluster, pg_conn: Any) -> str:
    return signal_url(pg_cluster, pg_conn)


def signal_snapshot(conn: Any, signal_id: str, data: dict[str, Any]) -> None:
    conn.run("INSERT INTO debezium_signal VALUES (:i, 'execute-snapshot', :d)", i=signal_id,
             d=json.dumps(data))


@pytest.mark.parametrize("strategy", ["insert_insert", "insert_delete"])
def test_capture_then_decode_reads_every_row_once(url: str, pg_conn: Any, tmp_path: Path,
                                                   strategy: str) -> None:
    """``capture`` with the signal table (its connector properties from ``--config``),
    then ``decode``: the chunk lines replay the windows; a second capture with
    ``--decode`` on its own slot gives the same records (ports of
    ``insertInsertWatermarkingStrategy``, ``insertDeleteWatermarkingStrategy``)."""
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    pg_conn.run("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 10) g")
    cap, events = tmp_path / "cap.jsonl", tmp_path / "events.jsonl"
    properties = tmp_path / "connector.properties"
    properties.write_text("signal.data.collection=public.debezium_signal\n"
                          f"incremental.snapshot.watermarking.strategy={strategy}\n")
    config = ("--config", str(properties))
    assert capture(url, cap, "--create-slot", "--create-publication", *config) == 0
    assert capture(url, events, "--decode", "--create-slot", *config, slot="s2") == 0
    signal_snapshot(pg_conn, "ad-hoc-1", {"data-collections": ["public.t"]})
    assert capture(url, cap, "-c", "incremental.snapshot.chunk.size=3", *config) == 0
    closes = pg_conn.run("SELECT count(*) FROM debezium_signal WHERE type = "
                         "'snapshot-window-close'")[0][0]
    assert (closes > 0) == (strategy == "insert_insert")
    lines = cap.read_text().splitlines()
    chunks = [json.loads(x)["chunk"] for x in lines if '"chunk": {' in x]
    assert [len(c["rows"]) for c in chunks] == [3, 3, 3, 1, 0]
    assert [c["key"] for c in chunks] == [["id"]] * 5
    checkpoint = json.loads((tmp_path / "cap.jsonl.checkpoint.json").read_text())
    assert "incremental" not in checkpoint  # finished: no progress left to keep
    records = decode(cap, tmp_path, "-c", "incremental.snapshot.chunk.size=3", *config)
    reads = [p["after"]["id"] for p in payloads(records, "t") if p["op"] == "r"]
    assert reads == list(range(1, 11))
    source = next(p["source"] for p in payloads(records, "t") if p["op"] == "r")
    assert source["snapshot"] == "incremental" and source["lsn"] is None
    check_invariants(records, "t", pg_conn, ["id"], set())
    # decoded on two cores: the window's part in one process, the same records
    assert keyed(decode(cap, tmp_path, "-c", "incremental.snapshot.chunk.size=3", *config,
                        workers=2), "t") == keyed(records, "t")
    # the same signal, read by a capture that decodes as it goes
    assert capture(url, events, "--decode", "-c", "incremental.snapshot.chunk.size=3",
                   *config, slot="s2") == 0
    live = [json.loads(x) for x in events.read_text().splitlines()]
    assert keyed(live, "t") == keyed(records, "t")


def test_the_capture_refuses_what_it_cannot_do(url: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert capture(url, tmp_path / "o.jsonl", "--create-slot", "--create-publication",
                   "-c", "signal.enabled.channels=kafka") == 1
    assert "not 'kafka'" in capsys.readouterr().err
    assert main(["tail", "--dsn", url, "--slot", "s", "--publication", "p", *PROPS]) == 1
    assert "not on standard output" in capsys.readouterr().err
    assert capture(url, tmp_path / "dir", "--rotate-every", "5") == 1
    assert "not into rotating files" in capsys.readouterr().err


def reads_of(records: list[dict[str, Any]], table: str) -> list[tuple[Any, ...]]:
    """(key values..., v) of the ``r`` events of ``table``, in the order they came."""
    return [(*r["key"]["payload"].values(), r["value"]["payload"]["after"]["v"])
            for r in records if r["topic"] == f"pgcdc.public.{table}" and r["value"]
            and r["value"]["payload"]["op"] == "r"]


def test_keys_of_every_kind_surrogate_keys_and_filters(url: str, pg_conn: Any,
                                                       tmp_path: Path) -> None:
    """Composite, numeric (NaN, ±Infinity) and enum keys, a surrogate key and an
    ``additional-conditions`` filter, chunk by chunk (ports of ``inserts4Pks``,
    ``insertsNumericPkWithSpecialValues``, ``insertsEnumPk``, ``snapshotWithSurrogateKey``,
    ``snapshotWithAdditionalCondition``: the rows each reads)."""
    pg_conn.run("CREATE TABLE comp (a int, b text, v int, PRIMARY KEY (a, b))")
    pg_conn.run("INSERT INTO comp SELECT g % 3, 'b' || g, g FROM generate_series(1, 7) g")
    pg_conn.run("CREATE TABLE num (id numeric PRIMARY KEY, v int)")
    pg_conn.run("INSERT INTO num VALUES ('NaN', 1), ('Infinity', 2), ('-Infinity', 3), "
                "(1.5, 4), (-2, 5), (0, 6)")
    pg_conn.run("CREATE TYPE mood AS ENUM ('UP', 'DOWN', 'LEFT', 'RIGHT', 'STORY')")
    pg_conn.run("CREATE TABLE en (id mood PRIMARY KEY, v int)")
    pg_conn.run("INSERT INTO en VALUES ('STORY', 5), ('UP', 1), ('LEFT', 3), ('DOWN', 2)")
    pg_conn.run("CREATE TABLE sur (id int PRIMARY KEY, sk int NOT NULL, v int)")
    pg_conn.run("INSERT INTO sur SELECT g, 10 - g, g FROM generate_series(1, 5) g")
    cap = tmp_path / "cap.jsonl"
    props = ["-c", "incremental.snapshot.chunk.size=2", "-c", "decimal.handling.mode=string"]
    assert capture(url, cap, "--create-slot", "--create-publication", *props) == 0
    signal_snapshot(pg_conn, "s1", {"data-collections": ["public.comp", "public.num",
                                                         "public.en"]})
    signal_snapshot(pg_conn, "s2", {"data-collections": ["public.sur"], "surrogate-key": "sk"})
    signal_snapshot(pg_conn, "s3", {"data-collections": ["public.comp"],
                                    "additional-conditions": [{"data-collection": "public.comp",
                                                               "filter": "a = 1"}]})
    assert capture(url, cap, *props) == 0
    catalog = tmp_path / "catalog.json"  # the enum's type, as for its streamed events
    assert main(["catalog", "--dsn", url, "--output", str(catalog)]) == 0
    records = decode(cap, tmp_path, *props, "--catalog", str(catalog))
    comp = sorted(pg_conn.run("SELECT a, b, v FROM comp"))
    filtered = [tuple(r) for r in comp if r[0] == 1]
    assert reads_of(records, "comp") == [tuple(r) for r in comp] + filtered
    # numeric keys in the server's order (NaN last), bound back as text between chunks;
    # decimal.handling.mode=string spells the special values as the connector does
    assert reads_of(records, "num") == [("NEGATIVE_INFINITY", 3), ("-2", 5), ("0", 6),
                                        ("1.5", 4), ("POSITIVE_INFINITY", 2), ("NAN", 1)]
    assert reads_of(records, "en") == [("UP", 1), ("DOWN", 2), ("LEFT", 3), ("STORY", 5)]
    # chunked by the surrogate key, keyed by the primary key
    assert reads_of(records, "sur") == [(5, 5), (4, 4), (3, 3), (2, 2), (1, 1)]
    sur_keys = [json.loads(x)["chunk"]["key"] for x in cap.read_text().splitlines()
                if '"chunk": {' in x and '"name":"sur"' in x]
    assert sur_keys and all(k == ["sk"] for k in sur_keys if k)


def test_a_bad_signal_and_a_table_without_key_are_named_and_skipped(
        url: str, pg_conn: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pg_conn.run("CREATE TABLE nokey (v int)")
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v int)")
    pg_conn.run("INSERT INTO t VALUES (1, 1), (2, 2)")
    pg_conn.run("INSERT INTO nokey VALUES (1)")
    cap = tmp_path / "cap.jsonl"
    # the signalling table is captured although the table filter leaves it out
    only = ("-c", "table.include.list=public.t,public.nokey")
    assert capture(url, cap, "--create-slot", "--create-publication", *only) == 0
    pg_conn.run("INSERT INTO debezium_signal VALUES ('bad-1', 'execute-snapshot', '{not json')")
    signal_snapshot(pg_conn, "s1", {"data-collections": ["public.nokey", "public.t"]})
    pg_conn.run("INSERT INTO t VALUES (3, 3)")
    assert capture(url, cap, *only) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "'bad-1'" in err and "Traceback" not in err
    assert "public.nokey" in err and "no primary key" in err
    records = decode(cap, tmp_path, *only)
    assert reads_of(records, "t") == [(1, 1), (2, 2), (3, 3)]
    ids = [r["value"]["payload"]["after"]["id"] for r in records
           if r["topic"] == "pgcdc.public.debezium_signal"]
    assert ids[:2] == ["bad-1", "s1"] and ids[2].endswith("-open") and ids[3].endswith("-close")
    assert [r["value"]["payload"]["op"] for r in records if r["topic"] == "pgcdc.public.t"] \
        == ["c", "r", "r", "r"]


def test_a_signal_while_a_workload_runs(url: str, pg_conn: Any, tmp_path: Path) -> None:
    """The signal inserted while updates, inserts and deletes run: the last event per key
    is the table's row, every row the workload never touched is read once (ports of
    ``inserts``, ``updates``: the connector's ``consumeMixedWithIncrementalSnapshot``)."""
    pg_conn.run("CREATE TABLE w (id int PRIMARY KEY, v int, s text)")
    pg_conn.run("INSERT INTO w SELECT g, g, 's' || g FROM generate_series(1, 300) g")
    cap = tmp_path / "cap.jsonl"
    props = ("-c", "incremental.snapshot.chunk.size=20")
    assert capture(url, cap, "--create-slot", "--create-publication", *props) == 0
    with MixedWorkload(url, keys=330, at_least=30) as work:
        time.sleep(0.05)
        signal_snapshot(pg_conn, "ad-hoc-w", {"data-collections": ["public.w"]})
        assert capture(url, cap, *props) == 0
    touched = work.touched
    assert capture(url, cap, *props) == 0  # the workload's end
    records = decode(cap, tmp_path, *props)
    check_invariants(records, "w", pg_conn, ["id"], touched)
    assert len([p for p in payloads(records, "w") if p["op"] == "r"]) >= 300 - len(touched)


def _kill_and_resume(url: str, pg_conn: Any, tmp_path: Path, kills: int,
                     mode: tuple[str, ...] = ()) -> None:
    """SIGKILL a following capture ``kills`` times between chunks, then let a capture
    finish: each row is read once, and a finished table never again. ``mode`` is
    ``("--decode",)`` for a capture of records."""
    pg_conn.run("CREATE TABLE a (id int PRIMARY KEY, v int)")
    pg_conn.run("INSERT INTO a SELECT g, g FROM generate_series(1, 30) g")
    pg_conn.run("CREATE TABLE b (id int PRIMARY KEY, v int)")
    pg_conn.run("INSERT INTO b SELECT g, g FROM generate_series(1, 3000) g")
    cap = tmp_path / "cap.jsonl"
    props = ("-c", "incremental.snapshot.chunk.size=10", *mode)
    assert capture(url, cap, "--create-slot", "--create-publication", *props) == 0
    signal_snapshot(pg_conn, "ad-hoc-k", {"data-collections": ["public.a", "public.b"]})
    checkpoint = tmp_path / "cap.jsonl.checkpoint.json"
    seen_keys: list[Any] = []
    for kill in range(kills):
        proc = subprocess.Popen(
            [sys.executable, "-m", "pgcdc_events", "capture", "--dsn", url, "--slot", "s",
             "--publication", "p", "--output", str(cap), "--snapshot-mode", "no_data", "-q",
             "--follow", "--poll-interval", "0.05", "--batch-rows", "20", *PROPS, *props],
            cwd=ROOT, env=os.environ.copy(), stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # a few chunks of b made durable
                time.sleep(0.05)
                state = json.loads(checkpoint.read_text()).get("incremental", {})
                collections = state.get("incremental_snapshot_collections") or "[]"
                key = state.get("incremental_snapshot_primary_key")
                if '"public.b"' in collections and '"public.a"' not in collections \
                        and key is not None and key not in seen_keys[-1:] \
                        and int(key[0]) >= 100 * (kill + 1):
                    seen_keys.append(key)
                    break
        finally:
            proc.send_signal(signal.SIGKILL)
            _, err = proc.communicate(timeout=30)
        assert b"Traceback" not in err
        assert len(seen_keys) == kill + 1, (err.decode(), checkpoint.read_text())
    assert len(seen_keys) == kills
    assert capture(url, cap, *props) == 0
    assert "incremental" not in json.loads(checkpoint.read_text())
    records = [json.loads(x) for x in cap.read_text().splitlines()] if mode else \
        decode(cap, tmp_path, *props)
    check_invariants(records, "a", pg_conn, ["id"], set())
    check_invariants(records, "b", pg_conn, ["id"], set())


def test_sigkill_between_chunks_resumes_after_the_last_durable_chunk(
        url: str, pg_conn: Any, tmp_path: Path) -> None:
    """Ports of ``snapshotOnlyWithRestart`` and
    ``whenSnapshotMultipleTablesAndConnectorRestartsThenOnlyNotAlreadyProcessedTableMust
    BeProcessed``: a capture killed mid-table resumes after its checkpoint's key."""
    _kill_and_resume(url, pg_conn, tmp_path, 1)


def test_sigkill_between_chunks_of_a_capture_of_records(url: str, pg_conn: Any,
                                                         tmp_path: Path) -> None:
    """The same with ``--decode``: the ``r`` events of a chunk whose close watermark was
    not committed are not in the output, and its rows are read again."""
    _kill_and_resume(url, pg_conn, tmp_path, 1, ("--decode",))


@pytest.mark.slow
def test_sigkill_again_and_again(url: str, pg_conn: Any, tmp_path: Path) -> None:
    _kill_and_resume(url, pg_conn, tmp_path, 8)


def test_changes_right_after_the_open_and_right_before_the_close_watermark(
        url: str, pg_conn: Any, tmp_path: Path) -> None:
    """Deterministic windows (``IncrementalCapture(on_step=...)``): changes committed right
    after a chunk's open watermark and right before its close come back inside the window,
    and ``decode`` drops the rows they changed from the chunk's ``r`` events (the
    connector's ``processMessage``; Flink CDC's ``PostgresScanFetchTaskTest`` hooks)."""
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v int)")
    pg_conn.run("INSERT INTO t SELECT g, g FROM generate_series(1, 6) g")
    cap = tmp_path / "cap.jsonl"
    assert capture(url, cap, "--create-slot", "--create-publication") == 0
    signal_snapshot(pg_conn, "ad-hoc-h", {"data-collections": ["public.t"]})
    steps: list[tuple[int, str]] = []
    sql = {(0, "after_open"): ["UPDATE t SET v = 100 WHERE id = 2", "DELETE FROM t WHERE id = 3"],
           (0, "before_close"): ["UPDATE t SET v = 200 WHERE id = 1"],
           (1, "after_open"): ["DELETE FROM t WHERE id = 5"],
           (1, "before_close"): ["INSERT INTO t VALUES (7, 7)"]}

    def on_step(step: str, chunk_id: str) -> None:
        if step == "after_open":
            steps.append((len(steps), step))
        for statement in sql.get((len(steps) - 1, step), ()):
            pg_conn.run(statement)

    properties = {"topic.prefix": "pgcdc", "signal.data.collection": "public.debezium_signal",
                  "incremental.snapshot.chunk.size": "3"}
    settings = parse_conninfo(url)
    incremental = IncrementalCapture(lambda: settings.connect()[0], properties,
                                     EventConfig.from_properties(properties), decode=False,
                                     publications=["p"], on_step=on_step)
    reader = SlotReader(url, slot="s", publications=["p"])
    output = DurableOutput(cap, kind="capture", slot="s", publications=("p",))
    output.open()
    try:
        stats = run_capture(reader, output, CaptureSink(), incremental=incremental)
    finally:
        output.close()
        reader.close()
        incremental.close()
    assert stats.stopped_by == "caught-up" and len(steps) == 3  # two chunks and the empty one
    records = decode(cap, tmp_path)
    assert reads_of(records, "t") == [(4, 4), (6, 6)]
    check_invariants(records, "t", pg_conn, ["id"], {(1,), (2,), (3,), (5,), (7,)})
    # the signal, then each window: its open watermark, the changes it saw, the rows no
    # change touched (3 was deleted before chunk 0 was read: 1, 2, 4 read, 4 sent), the
    # close watermark; then the last window (the empty chunk), whose close watermark a
    # capture without --follow waits for
    sig, t = "debezium_signal", "t"
    window = [(r["topic"].rsplit(".", 1)[1], r["value"]["payload"]["op"]) for r in records
              if r["value"] is not None]
    assert window == [(sig, "c"), (sig, "c"), (t, "u"), (t, "d"), (t, "u"), (t, "r"), (sig, "c"),
                      (sig, "c"), (t, "d"), (t, "c"), (t, "r"), (sig, "c"), (sig, "c"),
                      (sig, "c")]


def test_signals_from_a_file_and_progress_on_stderr(url: str, pg_conn: Any, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """``signal.enabled.channels=source,file``: a signal appended to ``signal.file`` is
    acted on (the file is emptied), a line that is not a signal is named and skipped."""
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v int)")
    pg_conn.run("INSERT INTO t SELECT g, g FROM generate_series(1, 5) g")
    cap, signals = tmp_path / "cap.jsonl", tmp_path / "signals.jsonl"
    props = ("-c", "signal.enabled.channels=source,file", "-c", f"signal.file={signals}",
             "-c", "incremental.snapshot.chunk.size=2")
    assert capture(url, cap, "--create-slot", "--create-publication", *props) == 0
    signals.write_text('{"id": "f-1", "type": "execute-snapshot", "data": '
                       '{"data-collections": ["public.t"]}}\nnot a signal\n')
    assert main(["capture", "--dsn", url, "--slot", "s", "--publication", "p", "--output",
                 str(cap), "--snapshot-mode", "no_data", *PROPS, *props]) == 0
    err = capsys.readouterr().err
    assert "warning: skipped line 2 of signal.file" in err
    assert "incremental snapshot of public.t: chunk 1, 2 rows up to key ['2']" in err
    assert "incremental snapshot of public.t: finished (5 rows read by this run)" in err
    assert signals.read_text() == ""
    assert reads_of(decode(cap, tmp_path), "t") == [(i, i) for i in range(1, 6)]


def test_a_signal_inside_a_streamed_transaction(url: str, pg_conn: Any, tmp_path: Path) -> None:
    """``--streaming on``: the signal row comes in a stream block (its relation OID after
    the xid), among the changes of another table, which the capture's signal reader
    leaves out."""
    database = pg_conn.run("SELECT current_database()")[0][0]
    pg_conn.run(f'ALTER DATABASE "{database}" SET logical_decoding_work_mem = \'64kB\'')
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v int)")
    pg_conn.run("INSERT INTO t SELECT g, g FROM generate_series(1, 5) g")
    pg_conn.run("CREATE TABLE bulk (id int PRIMARY KEY, pad text)")
    cap = tmp_path / "cap.jsonl"
    stream = ("--streaming", "on", "-c", "incremental.snapshot.chunk.size=2")
    assert capture(url, cap, "--create-slot", "--create-publication", *stream) == 0
    pg_conn.run("START TRANSACTION")
    pg_conn.run("INSERT INTO bulk SELECT g, repeat('x', 100) FROM generate_series(1, 3000) g")
    signal_snapshot(pg_conn, "in-stream", {"data-collections": ["public.t"]})
    pg_conn.run("INSERT INTO bulk SELECT g, 'y' FROM generate_series(3001, 4000) g")
    pg_conn.run("COMMIT")
    assert capture(url, cap, *stream) == 0
    text = cap.read_text()
    assert '"data": "53' in text  # a Stream Start: the transaction was streamed
    records = decode(cap, tmp_path, *stream[2:])
    assert reads_of(records, "t") == [(i, i) for i in range(1, 6)]
    assert sum(r["topic"] == "pgcdc.public.bulk" for r in records) == 4000


def test_pause_stop_and_resume_across_runs(url: str, pg_conn: Any, tmp_path: Path) -> None:
    """``pause-snapshot`` stops the reading of chunks (a capture without ``--follow`` then
    stops too, its progress in the checkpoint); the next run goes on (a pause lives in
    memory, as the connector's ``AtomicBoolean`` does); ``stop-snapshot`` removes a queued
    table (ports of ``testPauseDuringSnapshot`` and
    ``removeNotYetCapturedCollectionFromInProgressIncrementalSnapshot``)."""
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v int)")
    pg_conn.run("INSERT INTO t SELECT g, g FROM generate_series(1, 10) g")
    pg_conn.run("CREATE TABLE u (id int PRIMARY KEY, v int)")
    pg_conn.run("INSERT INTO u VALUES (1, 1)")
    cap = tmp_path / "cap.jsonl"
    props = ("-c", "incremental.snapshot.chunk.size=2")
    assert capture(url, cap, "--create-slot", "--create-publication", *props) == 0
    pg_conn.run("START TRANSACTION")
    signal_snapshot(pg_conn, "go", {"data-collections": ["public.t", "public.u"]})
    pg_conn.run("INSERT INTO debezium_signal VALUES ('hold', 'pause-snapshot', NULL)")
    pg_conn.run("COMMIT")
    assert capture(url, cap, *props) == 0
    state = json.loads((tmp_path / "cap.jsonl.checkpoint.json").read_text())["incremental"]
    assert state["incremental_snapshot_primary_key"] == ["2"]  # one chunk, then paused
    assert len(reads_of(decode(cap, tmp_path, *props), "t")) == 2
    pg_conn.run("INSERT INTO debezium_signal VALUES ('drop-u', 'stop-snapshot', "
                "'{\"data-collections\": [\"public.u\"], \"type\": \"incremental\"}')")
    pg_conn.run("INSERT INTO debezium_signal VALUES ('again', 'resume-snapshot', NULL)")
    assert capture(url, cap, *props) == 0
    records = decode(cap, tmp_path, *props)
    assert reads_of(records, "t") == [(i, i) for i in range(1, 11)]
    assert reads_of(records, "u") == []


def test_file_signals_are_taken_once_across_a_crash(url: str, pg_conn: Any, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A capture that committed the effect of ``signal.file`` lines and stopped before it
    removed them from the file (a crash): the next run does not act on them again (the
    checkpoint records their length and SHA-256), removes them, and acts on a line
    appended since."""
    import pgcdc_events.adapters.incremental as incremental  # noqa: PLC0415

    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v int)")
    pg_conn.run("INSERT INTO t SELECT g, g FROM generate_series(1, 5) g")
    pg_conn.run("CREATE TABLE u (id int PRIMARY KEY, v int)")
    pg_conn.run("INSERT INTO u SELECT g, g FROM generate_series(1, 3) g")
    cap, signals = tmp_path / "cap.jsonl", tmp_path / "signals.jsonl"
    props = ("-c", "signal.enabled.channels=source,file", "-c", f"signal.file={signals}")
    assert capture(url, cap, "--create-slot", "--create-publication", *props) == 0
    first = ('{"id": "f-1", "type": "execute-snapshot", "data": '
             '{"data-collections": ["public.t"]}}\n')
    signals.write_text(first)

    def crash(path: str, prefix: bytes) -> bytes:
        raise KeyboardInterrupt  # the process ends before the file is rewritten

    monkeypatch.setattr(incremental, "_remove_prefix", crash)
    assert capture(url, cap, *props) == 130
    checkpoint = json.loads((tmp_path / "cap.jsonl.checkpoint.json").read_text())
    assert checkpoint["incremental"]["signal_file"]["bytes"] == len(first)
    assert signals.read_text() == first  # acted on, committed, not removed
    monkeypatch.undo()
    with signals.open("a") as fh:
        fh.write('{"id": "f-2", "type": "execute-snapshot", "data": '
                 '{"data-collections": ["public.u"]}}\n')
    for _ in range(3):
        assert capture(url, cap, *props) == 0
    assert signals.read_text() == ""
    records = decode(cap, tmp_path)
    assert reads_of(records, "t") == [(i, i) for i in range(1, 6)]  # once, not twice
    assert reads_of(records, "u") == [(i, i) for i in range(1, 4)]
