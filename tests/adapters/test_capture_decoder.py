"""``capture --decode`` with its decoding process: the same records as one process, and the
delivery guarantee across SIGKILLs of either process, Ctrl-C, a failing decoder and a full
disk (the campaign and the crash points of ``test_delivery``, on a records output).

The referee is ``test_delivery``'s: the slot created before the workload, read once at the
end and decoded in this process with the same properties; the records of the output must be
those, in the same order, each once (the processing times, the run id and
``source.sequence``, whose last commit a restarted decoder learns again, set aside), and
rebuild every table. The referee is decoded with the database's catalog, as the capture
reads it from its connection (keys, ``source.db``).
"""

from __future__ import annotations

import errno
import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pg8000.native
import pytest

from adapters import test_delivery
from pgcdc_events.adapters import DurableOutput, EventSink
from pgcdc_events.cli import _capture_decoder, capture_cmd, main
from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.protocol import Lsn
from pgcdc_events.testing.cluster import TempCluster
from pgcdc_events.types import catalog as catalog_module
from pgcdc_events.types.catalog import fetch_catalog

cluster = test_delivery.cluster  # the fixture: a cluster of its own with the referee slot
PROPS = [item for key, value in test_delivery.DECODE_PROPS.items()
         for item in ("-c", f"{key}={value}")]
DIED = b"ended unexpectedly"


def decode_args(c: TempCluster, output: Path, *extra: str) -> list[str]:
    return test_delivery.capture_args(c, output, "--decode", *PROPS, *extra)


_VARIES = ("ts_ms", "ts_us", "ts_ns")


def _same(record: dict[str, Any]) -> Any:
    """A record without what differs from run to run or restart to restart."""
    value = record["value"]
    payload = value.get("payload", value) if isinstance(value, dict) and "schema" in value \
        else value
    if isinstance(payload, dict):
        payload = {k: v for k, v in payload.items() if k not in _VARIES}
        if isinstance(payload.get("source"), dict):  # (a message outside a transaction
            # has the processing time there)
            payload["source"] = {k: v for k, v in payload["source"].items()
                                 if k not in (*_VARIES, "sequence")}
    return record["topic"], record["key"], payload


def _referee(c: TempCluster) -> list[dict[str, Any]]:
    """The referee slot's changes decoded here, with the database's catalog."""
    conn = pg8000.native.Connection(**c.dsn())
    try:
        catalog = fetch_catalog(conn)
    finally:
        conn.close()
    config = EventConfig.from_properties(test_delivery.DECODE_PROPS)
    decoder = EventDecoder(config, catalog=catalog, clock=lambda: test_delivery.CLOCK,
                           run_id="r")
    writer = JsonRecordWriter(config.json)
    return [json.loads(writer.record_line(r))
            for r in decoder.feed_rows(test_delivery._oracle_rows(c))]


def _exact(record: dict[str, Any]) -> Any:
    """A record but for its processing time and run id."""
    record = json.loads(json.dumps(record))
    value = record["value"]
    payload = value.get("payload", value) if isinstance(value, dict) and "schema" in value \
        else value
    if isinstance(payload, dict):
        for key in _VARIES:
            payload.pop(key, None)
    if isinstance(record.get("headers"), dict):
        record["headers"].pop("__debezium.context.runId", None)
    return record


def verify_events(c: TempCluster, output: Path) -> dict[str, int]:
    """Each record once, in commit order, as the referee's; the tables rebuilt."""
    with open(output / "events.jsonl", encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh]
    expected = _referee(c)
    ours, theirs = [_same(r) for r in records], [_same(r) for r in expected]
    seen = {json.dumps(x, sort_keys=True) for x in ours}
    lost = sum(json.dumps(x, sort_keys=True) not in seen for x in theirs)
    duplicates = len(ours) - len(seen)
    missing = [x for x in theirs if json.dumps(x, sort_keys=True) not in seen]
    theirset = {json.dumps(x, sort_keys=True) for x in theirs}
    extra = [x for x in ours if json.dumps(x, sort_keys=True) not in theirset]
    assert (lost, duplicates) == (0, 0), (lost, duplicates, missing[:2], extra[:2])
    assert ours == theirs
    rebuilt = {name: sorted(rows.values(), key=json.dumps)
               for name, rows in test_delivery._apply(records).items()}
    assert rebuilt == test_delivery._select_all(c)
    return {"records": len(records), "lost": lost, "duplicates": duplicates}


def finish(c: TempCluster, output: Path) -> None:
    """One more run without --follow: must exit 0, caught up."""
    proc = subprocess.run([sys.executable, "-m", "pgcdc_events", *decode_args(c, output)],
                          capture_output=True, timeout=300, cwd=test_delivery.ROOT,
                          check=False)
    assert proc.returncode == 0, proc.stderr.decode()


def decoding_process(pid: int, timeout: float = 60) -> int | None:
    """The PID of the capture's decoding process (its only child), once it is running;
    ``None`` when the capture ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return None
        if children:
            return int(children[0])
        time.sleep(0.05)
    raise AssertionError("no decoding process started")


def _one_error_line(err: bytes) -> str:
    lines = [x for x in err.decode().splitlines() if x.strip()]
    assert "Traceback" not in err.decode(), err.decode()
    errors = [x for x in lines if ": error: " in x]
    assert len(errors) == 1, lines
    return errors[0]


# ---------------------------------------------------------------- the tests


_DECODED_BY = re.compile(r"; records decoded (?:by (\d+) processes \(([\d,+ ]+)\)|in this "
                         r"process)$", re.MULTILINE)


def decoded_by(err: str) -> list[int] | None:
    """The records each decoding process decoded, from a run's last line (``None``: the
    records were decoded in the capture process)."""
    found = _DECODED_BY.findall(err)
    assert len(found) == 1, err
    processes, counts = found[0]
    if not processes:
        return None
    each = [int(n.replace(",", "")) for n in counts.split(" + ")]
    assert len(each) == int(processes), err
    return each


def test_the_decoding_process_writes_what_one_process_writes(
        cluster: TempCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    """Two outputs of the same changes, --workers 2 and --workers 1: the same records (but
    for the processing time and the run id), a table created while the capture runs (once
    it read the catalog: the catalog read again, by the decoding processes on connections
    of their own, said once; its enum column comes out as the catalog says) included. Each
    run of --workers 2 says that both
    decoding processes decoded records (a capture that fell back to decoding in its own
    process would write the same records), and their counts add up to the output's."""
    started: list[int] = []
    start = _capture_decoder.DecodingOutput.start

    def counted(self: _capture_decoder.DecodingOutput) -> None:
        start(self)
        started.append(1)

    monkeypatch.setattr(_capture_decoder.DecodingOutput, "start", counted)
    # small segments and pieces: many of them, owned in turn, units sent in pieces
    monkeypatch.setattr(_capture_decoder, "_SEGMENT", 20_000)
    monkeypatch.setattr(_capture_decoder, "_PIECE", 3_000)
    decoded: dict[str, list[list[int] | None]] = {"2": [], "1": []}
    conn = pg8000.native.Connection(**cluster.dsn())
    create: list[str] = []
    connected_catalog = capture_cmd._connected_catalog

    def then_create(*args: Any, **kwargs: Any) -> Any:
        catalog = connected_catalog(*args, **kwargs)
        while create:
            conn.run(create.pop(0))
        return catalog

    monkeypatch.setattr(capture_cmd, "_connected_catalog", then_create)
    try:
        conn.run("SELECT pg_create_logical_replication_slot('one', 'pgoutput', false, true)")
        for step in range(3):
            conn.run("INSERT INTO acct SELECT g, 'o' || g, g * 1.5, g % 2 = 0 FROM "
                     "generate_series(CAST(:a AS int), CAST(:b AS int)) g",
                     a=step * 1000 + 1, b=step * 1000 + 1000)
            conn.run("UPDATE acct SET balance = balance + 1 WHERE id % 7 = 0")
            if step == 1:  # by the next run (--workers 2), once it has read the catalog
                create[:] = ["CREATE TYPE mood AS ENUM ('sad', 'ok')",
                             "CREATE TABLE later (id int PRIMARY KEY, m mood)",
                             "INSERT INTO later VALUES (1, 'ok'), (2, 'sad')"]
            for workers, slot in (("2", "cap"), ("1", "one")):
                args = [x for x in decode_args(cluster, tmp_path / workers, "--workers",
                                               workers) if x != "--quiet"]
                args[args.index("cap")] = slot
                assert main(args) == 0
                err = capfd.readouterr().err  # (the decoding processes' lines too)
                decoded[workers].append(decoded_by(err))
                again = err.count("catalog read again from database 'postgres'")
                assert again == (step == 1 and workers == "2"), err
    finally:
        conn.close()
    two, one = ([json.loads(x) for x in (tmp_path / w / "events.jsonl").read_text()
                 .splitlines()] for w in ("2", "1"))
    assert len(two) > 3000 and [_exact(r) for r in two] == [_exact(r) for r in one]
    assert decoded["1"] == [None, None, None], decoded
    assert all(each is not None and len(each) == 2 and min(each) > 0
               for each in decoded["2"]), decoded
    assert sum(sum(each or ()) for each in decoded["2"]) == len(two), decoded
    assert len(started) == 3  # decoding processes for each run with --workers 2 only
    moods = [r["value"]["payload"]["after"]["m"] for r in two
             if r["topic"].endswith(".later")]
    assert moods == ["ok", "sad"]
    later = next(r for r in two if r["topic"].endswith(".later"))
    field = next(f for f in later["value"]["schema"]["fields"] if f["field"] == "after")
    m = next(f for f in field["fields"] if f["field"] == "m")
    assert m["name"] == "io.debezium.data.Enum"


def test_an_initial_snapshot_decoded_by_the_decoding_processes(
        cluster: TempCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An initial snapshot (one segment, skimmed by the other process), then changes: the
    records of --workers 1 (the snapshot's read events and their markers included)."""
    monkeypatch.setattr(_capture_decoder, "_SEGMENT", 20_000)
    monkeypatch.setattr(_capture_decoder, "_PIECE", 3_000)
    conn = pg8000.native.Connection(**cluster.dsn())
    try:
        conn.run("INSERT INTO acct SELECT g, 'o' || g, g, true FROM generate_series(1, 700) g")
        conn.run("INSERT INTO pair SELECT g, 'b', g FROM generate_series(1, 300) g")
        outputs = {}
        for workers in ("2", "1"):
            args = [*decode_args(cluster, tmp_path / workers, "--workers", workers)]
            args[args.index("cap")] = f"snap{workers}"
            args[args.index("no_data")] = "initial"
            assert main([*args, "--create-slot"]) == 0
            outputs[workers] = args
        conn.run("UPDATE acct SET balance = balance + 1 WHERE id % 3 = 0")
        conn.run("DELETE FROM pair WHERE a % 2 = 0")
        for args in outputs.values():
            assert main(args) == 0
    finally:
        conn.close()
    two, one = ([json.loads(x) for x in (tmp_path / w / "events.jsonl").read_text()
                 .splitlines()] for w in ("2", "1"))
    reads = [r for r in two if r["value"]["payload"]["op"] == "r"]
    assert len(reads) == 1000 and len(two) > 1300
    assert len({r["value"]["payload"]["source"]["snapshot"] for r in reads}) > 1  # markers

    def comparable(record: dict[str, Any]) -> Any:
        topic, key, payload = _same(record)
        if payload["op"] == "r":  # each slot's snapshot has its own position and xid
            payload["source"] = {k: v for k, v in payload["source"].items()
                                 if k not in ("lsn", "txId")}
        return topic, key, payload

    assert [comparable(r) for r in two] == [comparable(r) for r in one]


def _terminate_walsender(conn: Any) -> None:
    """The capture's replication connection ended by the server (as an administrator's
    pg_terminate_backend does), once it is gone."""
    pid = conn.run("SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'cap'")[0][0]
    assert pid is not None
    conn.run("SELECT pg_terminate_backend(:p)", p=pid)
    deadline = time.monotonic() + 30
    while conn.run("SELECT count(*) FROM pg_stat_activity WHERE pid = :p", p=pid)[0][0]:
        assert time.monotonic() < deadline, "the walsender did not end"
        time.sleep(0.02)


def test_a_read_rolled_back_after_half_a_unit_was_sent(
        cluster: TempCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The replication connection lost in the middle of a read (the server terminates the
    walsender while it sends a big transaction), after a big streamed transaction was
    written whole, its first block sent to the decoding processes and the rest still held
    in the capture process: the read is rolled back and read again. The decoding
    processes must get what the capture process held first (they stopped inside one of
    the streamed transaction's stream blocks, where no decoder fed the stream stops);
    the records are then the referee's, each once."""
    # the big transaction's first block (2,048 lines, 235 kB) is sent, its rest (113 kB) held
    monkeypatch.setattr(_capture_decoder, "_PIECE", 200_000)
    conn = pg8000.native.Connection(**cluster.dsn())
    terminated: list[int] = []
    write = _capture_decoder.ForwardingSink.write

    def write_then_lose(self: _capture_decoder.ForwardingSink, unit: Any,
                        output: Any) -> None:
        write(self, unit, output)
        if unit.changes == 3000 and not terminated:
            assert 0 < len(self.output._piece) < _capture_decoder._PIECE
            terminated.append(unit.changes)
            _terminate_walsender(conn)

    try:
        conn.run("INSERT INTO acct VALUES (1, 'a', 1, true), (2, 'b', 2, false)")
        # streamed (logical_decoding_work_mem is 64kB), narrow rows: short lines
        conn.run("INSERT INTO item SELECT g, 'n', g FROM generate_series(1, 3000) g")
        # wide rows (small in the WAL, 20 MB on the wire): still on their way when the
        # walsender is terminated
        conn.run("INSERT INTO item SELECT 10000 + g, repeat('w', 20000), g FROM "
                 "generate_series(1, 1000) g")
        conn.run("UPDATE acct SET balance = balance + 1")
        monkeypatch.setattr(_capture_decoder.ForwardingSink, "write", write_then_lose)
        args = [x for x in decode_args(cluster, tmp_path / "out", "--workers", "2")
                if x != "--quiet"]
        assert main([*args, "--batch-rows", "100000"]) == 0, capsys.readouterr().err
    finally:
        conn.close()
    err = capsys.readouterr().err
    assert terminated == [3000], err
    assert "retrying for up to 120 s" in err, err
    assert "Traceback" not in err
    figures = verify_events(cluster, tmp_path / "out")
    assert figures["records"] == 4004


@pytest.mark.parametrize("workers", ["2", "1"])
@pytest.mark.filterwarnings('ignore:table "public"."later" does not match the catalog')
def test_a_catalog_read_again_loses_its_connection(
        cluster: TempCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str], workers: str) -> None:
    """A column renamed since the table's changes were written (the catalog read when the
    capture starts does not describe them): the catalog is read again (by each decoding process on
    a connection of its own, or on the capture's), and the server terminates that session
    (pg_terminate_backend) in the middle of the read. The read is retried as
    the capture's connections are, and the records are the referee's."""
    terminations = tmp_path / "terminated"
    calls = [0]
    real = catalog_module.fetch_catalog

    def terminated_once(conn: Any) -> Any:
        calls[0] += 1  # (a decoding process counts on from the capture's first read)
        if calls[0] == 2:  # this process's first read again: its session terminated
            pid = conn.run("SELECT pg_backend_pid()")[0][0]
            admin = pg8000.native.Connection(**cluster.dsn())
            try:
                admin.run("SELECT pg_terminate_backend(:p)", p=pid)
                while admin.run("SELECT count(*) FROM pg_stat_activity WHERE pid = :p",
                                p=pid)[0][0]:
                    time.sleep(0.02)
            finally:
                admin.close()
            with open(terminations, "a", encoding="utf-8") as fh:
                fh.write(f"{os.getpid()}\n")
        return real(conn)

    conn = pg8000.native.Connection(**cluster.dsn())
    try:
        conn.run("INSERT INTO acct SELECT g, 'o' || g, g, true FROM generate_series(1, 500) g")
        conn.run("CREATE TYPE mood AS ENUM ('sad', 'ok')")
        conn.run("CREATE TABLE later (id int PRIMARY KEY, m mood)")
        conn.run("INSERT INTO later VALUES (1, 'ok'), (2, 'sad')")
        conn.run("UPDATE acct SET balance = balance + 1 WHERE id % 3 = 0")
        conn.run("ALTER TABLE later RENAME COLUMN m TO feeling")
        conn.run("INSERT INTO later VALUES (3, 'ok')")
    finally:
        conn.close()
    monkeypatch.setattr(catalog_module, "fetch_catalog", terminated_once)
    args = [x for x in decode_args(cluster, tmp_path / "out", "--workers", workers)
            if x != "--quiet"]
    assert main(args) == 0, capfd.readouterr().err
    err = capfd.readouterr().err  # (the decoding processes' lines too)
    assert "Traceback" not in err
    # each process that read the catalog again lost its session once, and said it retries
    died = terminations.read_text().split()
    assert len(died) == int(workers) and len(set(died)) == len(died), (died, err)
    assert err.count("read the catalog again: ") == len(died), err
    assert err.count("; retrying for up to 120 s") == len(died), err
    assert "catalog read again from database 'postgres'" in err
    with open(tmp_path / "out" / "events.jsonl", encoding="utf-8") as fh:
        ours = [_same(json.loads(line)) for line in fh]
    assert ours == [_same(r) for r in _referee(cluster)]  # (a table the workload lacks)
    assert len(ours) == 500 + 2 + 166 + 1


LOST_CATALOG = textwrap.dedent('''
    """Run the CLI; every catalog read but the first ends its own session on the server."""
    import sys
    from pgcdc_events.cli import main
    from pgcdc_events.types import catalog

    real, calls = catalog.fetch_catalog, [0]

    def lost(conn):
        calls[0] += 1
        if calls[0] > 1:  # (decoding processes count on from the capture's first read)
            conn.run("SELECT pg_terminate_backend(pg_backend_pid())")
        return real(conn)

    catalog.fetch_catalog = lost
    sys.exit(main(sys.argv[1:]))
''')


@pytest.mark.filterwarnings('ignore:table "public"."later" does not match the catalog')
def test_ctrl_c_while_a_catalog_read_is_retried(cluster: TempCluster, tmp_path: Path) -> None:
    """A following capture whose decoding processes cannot read the catalog again (every
    session they open is terminated): they retry for ever, and the capture waits for the
    segment; Ctrl-C says it stops after the current read, a second Ctrl-C stops it now:
    the decoding processes give up their retries at once (the capture process's life line
    closed) and end, the capture exits 130 without a traceback; the next run delivers
    every record once."""
    conn = pg8000.native.Connection(**cluster.dsn())
    try:
        conn.run("INSERT INTO acct SELECT g, 'o' || g, g, true FROM generate_series(1, 50) g")
        conn.run("CREATE TYPE mood AS ENUM ('sad', 'ok')")
        conn.run("CREATE TABLE later (id int PRIMARY KEY, m mood)")
        conn.run("INSERT INTO later VALUES (1, 'ok'), (2, 'sad')")
        conn.run("ALTER TABLE later RENAME COLUMN m TO feeling")  # (read again for m)
    finally:
        conn.close()
    script = tmp_path / "lost.py"
    script.write_text(LOST_CATALOG)
    output = tmp_path / "out"
    args = [x for x in decode_args(cluster, output, "--follow", "--workers", "2")
            if x != "--quiet"]
    proc = subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, cwd=test_delivery.ROOT)
    assert proc.stderr is not None
    lines = []
    try:
        deadline = time.monotonic() + 60
        while not any("retrying until it succeeds (--follow)" in x for x in lines):
            assert time.monotonic() < deadline, lines
            lines.append(proc.stderr.readline().decode())
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert len(children) == 2, children
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        time.sleep(1)
        assert proc.poll() is None  # waiting for the segment
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=30)  # (not the 60 s the capture waits at most)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = "".join(lines) + rest.decode()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert err.splitlines()[-1] == "pgcdc-events capture: interrupted", err
    assert not any(Path(f"/proc/{child}").exists() for child in children)
    finish(cluster, output)
    with open(output / "events.jsonl", encoding="utf-8") as fh:
        ours = [_same(json.loads(line)) for line in fh]
    assert ours == [_same(r) for r in _referee(cluster)]
    assert len(ours) == 52


@pytest.mark.parametrize("workers", ["2", "1"])
def test_a_connection_lost_during_the_initial_snapshot(
        cluster: TempCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str], workers: str) -> None:
    """The snapshot's session terminated by the server between two tables (the first one's
    rows written): the capture rolls back, reconnects and takes the snapshot again; the
    decoders, which saw part of the first snapshot block, forget it (each decoding process
    told to reset, as the capture's own decoder is): every row once, as read events."""
    conn = pg8000.native.Connection(**cluster.dsn())
    sink = _capture_decoder.ForwardingSink if workers == "2" else EventSink
    write_row = sink.write_row
    rows = [0]

    def terminate_once(self: Any, row: Any, output: Any) -> None:
        write_row(self, row, output)
        rows[0] += 1
        if rows[0] == 1500:  # (inside acct's rows: its COPY is over, pair's to come)
            pids = conn.run("SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND "
                            "backend_type = 'client backend' "
                            "AND state = 'idle in transaction'")
            assert len(pids) == 1, pids
            conn.run("SELECT pg_terminate_backend(:p)", p=pids[0][0])

    try:
        conn.run("INSERT INTO acct SELECT g, 'o' || g, g, true FROM generate_series(1, 3000) g")
        conn.run("INSERT INTO pair SELECT g, 'b', g FROM generate_series(1, 3000) g")
        monkeypatch.setattr(sink, "write_row", terminate_once)
        args = [x for x in decode_args(cluster, tmp_path / "out", "--workers", workers)
                if x != "--quiet"]
        args[args.index("cap")] = "snap"
        args[args.index("no_data")] = "initial"
        assert main([*args, "--create-slot"]) == 0, capfd.readouterr().err
    finally:
        conn.close()
    err = capfd.readouterr().err
    assert rows[0] > 6000 and "retrying for up to 120 s" in err, err
    records = [json.loads(x) for x in (tmp_path / "out" / "events.jsonl").read_text()
               .splitlines()]
    payloads = [r["value"]["payload"] for r in records]
    assert {p["op"] for p in payloads} == {"r"}
    keys = sorted((p["source"]["table"], json.dumps(p["after"], sort_keys=True))
                  for p in payloads)
    assert len(keys) == len(set(keys)) == 6000


def test_spool_files_left_by_a_killed_run_are_removed(cluster: TempCluster,
                                                      tmp_path: Path) -> None:
    """Segments' records wait beside the output, in a 0700 directory of the run's own; one
    a killed run left for this output is removed by the next run, another output's is not
    touched, and a run that ends leaves none."""
    output = tmp_path / "out"
    output.mkdir()
    stale = output / ".events.jsonl.decoding-killed"
    stale.mkdir(mode=0o700)
    (stale / "123-1").write_bytes(b"records of a killed run\n")
    other = output / ".other.jsonl.decoding-running"
    other.mkdir(mode=0o700)
    seen: list[tuple[str, int]] = []
    start = _capture_decoder.DecodingOutput.start

    def noted(self: _capture_decoder.DecodingOutput) -> None:
        start(self)
        assert self.spool is not None
        seen.append((Path(self.spool).name, Path(self.spool).stat().st_mode & 0o777))

    conn = pg8000.native.Connection(**cluster.dsn())
    try:
        conn.run("INSERT INTO acct VALUES (1, 'a', 1, true)")
    finally:
        conn.close()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_capture_decoder.DecodingOutput, "start", noted)
        assert main([*decode_args(cluster, output, "--workers", "2")]) == 0
    assert len(seen) == 1 and seen[0][0].startswith(".events.jsonl.decoding-")
    assert seen[0][1] == 0o700
    assert not stale.exists() and other.exists()
    assert sorted(p.name for p in output.iterdir()) == [
        ".other.jsonl.decoding-running", "events.jsonl", "events.jsonl.checkpoint.json",
        "events.jsonl.lock"]


def test_workers_is_checked(cluster: TempCluster, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    args = test_delivery.capture_args(cluster, tmp_path / "o")
    assert main([*args, "--workers", "2"]) == 1
    assert capsys.readouterr().err == ("pgcdc-events capture: error: --workers says where "
                                       "records are decoded: add --decode\n")
    assert main([*args, "--decode", "--workers", "0"]) == 1
    assert capsys.readouterr().err == ("pgcdc-events capture: error: --workers must be "
                                       "positive, got 0\n")
    assert not (tmp_path / "o").exists()


DECODER_CRASH = test_delivery.crash_wrapper(
    "from pgcdc_events.adapters import checkpoint\n"
    "from pgcdc_events.cli import _capture_decoder", '''
    Spool = _capture_decoder._SpoolFile
    write, close = Spool.write, Spool.close
    append = checkpoint.DurableOutput.append_file

    if point == "torn-append":  # the capture process: half of a segment's records reach
        # the output (cut inside a line), then death: the records of the decoding
        # processes are not written by DurableOutput.write, where "torn-write" dies
        def torn(self, path, size):
            if passing():
                self._flush()
                with open(path, "rb") as fh:
                    os.write(self._fd, fh.read(size)[:size // 2 + 1])
                die()
            return append(self, path, size)
        checkpoint.DurableOutput.append_file = torn
    elif point == "mid-segment":  # records of a segment written, then a decoding process dies
        def torn(self, data):
            write(self, data)
            if passing():
                self.file.flush()
                die()
        Spool.write = torn
    elif point == "before-answer":  # a segment's records complete, not answered for
        def unanswered(self):
            close(self)
            if passing():
                die()
        Spool.close = unanswered
''')
#: Where each process dies: the capture process (a segment's records appended in part,
#: then the output's fsync and checkpoint, the slot's advance: test_delivery's points but
#: its torn write, which the records never pass through here), a decoding process.
CRASH_POINTS = [(DECODER_CRASH, "torn-append"),
                *((test_delivery.CRASH_WRAPPER, point) for point in test_delivery.CRASH_POINTS
                  if point != "torn-write"),
                (DECODER_CRASH, "mid-segment"), (DECODER_CRASH, "before-answer")]


def test_a_crash_at_every_step_of_either_process(cluster: TempCluster, tmp_path: Path) -> None:
    """``test_delivery``'s crash points, in the capture process (which appends the
    segments' records to the output, torn here, then writes its checkpoint and advances
    the slot: its decoding processes die with it), and a decoding process dying in the
    middle of a segment's records or once they are complete but not answered for (the
    capture stops saying so); each point is passed and dies at least once; restarted,
    the output is exact: 0 lost, 0 duplicated."""
    workload = test_delivery.Workload(cluster, seed=5, big_every=10)
    conn = workload.connect()
    output = tmp_path / "out"
    crashes = {"decoder": 0, "capture": 0}
    died: dict[str, int] = dict.fromkeys((point for _, point in CRASH_POINTS), 0)
    try:
        for number, (wrapper, point) in enumerate(CRASH_POINTS):
            script = tmp_path / f"crash{number}.py"
            script.write_text(wrapper)
            for nth in (1, 3):
                for _ in range(20):
                    try:
                        workload.step(conn)
                    except Exception:
                        conn.run("ROLLBACK")
                proc = test_delivery.start_capture(
                    decode_args(cluster, output, "--workers", "2"),
                    {"CRASH_AT": point, "CRASH_NTH": str(nth)}, script)
                _, err = proc.communicate(timeout=300)
                if proc.returncode == -signal.SIGKILL:
                    crashes["capture"] += 1
                    died[point] += 1
                elif proc.returncode == 1 and DIED in err:
                    line = _one_error_line(err)
                    assert "killed by signal 9 (SIGKILL)" in line, line
                    crashes["decoder"] += 1
                    died[point] += 1
                else:  # caught up before passing the crash point that many times
                    assert proc.returncode == 0, err.decode()
        for gid in workload.prepared:
            conn.run(f"COMMIT PREPARED '{gid}'")
    finally:
        conn.close()
    assert all(died.values()), died  # (a point never passed proves nothing)
    assert crashes["decoder"] >= 3 and crashes["capture"] >= 7, crashes
    finish(cluster, output)
    figures = verify_events(cluster, output)
    assert figures["records"] > 500, figures


def test_sigkill_of_either_process_at_random_moments(cluster: TempCluster,
                                                     tmp_path: Path) -> None:
    """A following ``capture --decode`` under the workload; its decoding process or the
    capture itself SIGKILLed at random moments, restarted each time; then Ctrl-C (to the
    process group, as a terminal sends it) stops it cleanly: 0 lost, 0 duplicated."""
    rng = random.Random(31)
    workload = test_delivery.Workload(cluster, 31)
    workload.start()
    output = tmp_path / "out"
    args = decode_args(cluster, output, "--follow", "--workers", "2")

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-m", "pgcdc_events", *args],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                cwd=test_delivery.ROOT, start_new_session=True)

    proc = start()
    kills = {"decoder": 0, "capture": 0}
    try:
        for victim in ["decoder"] * 6 + ["capture"] * 2:
            time.sleep(rng.uniform(0.3, 1.5))
            if victim == "capture":
                proc.kill()
                proc.wait()
            else:
                child = decoding_process(proc.pid)
                assert child is not None, proc.communicate()[1].decode()
                os.kill(child, signal.SIGKILL)
                _, err = proc.communicate(timeout=120)
                assert proc.returncode == 1, err.decode()
                assert DIED in _one_error_line(err).encode()
            kills[victim] += 1
            proc = start()
    finally:
        workload.finish()
    time.sleep(3)
    child = decoding_process(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)  # both processes get it, as from a terminal
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    assert "Traceback" not in err.decode()
    assert child is not None and not Path(f"/proc/{child}").exists()
    finish(cluster, output)
    figures = verify_events(cluster, output)
    assert kills == {"decoder": 6, "capture": 2} and figures["records"] > 100
    assert not list(output.glob(".events.jsonl.decoding-*"))  # (a killed run's: removed)
    assert workload.transactions > 50


FAILURES = test_delivery.crash_wrapper(
    "from pgcdc_events.adapters import checkpoint\n"
    "from pgcdc_events.errors import ConversionError\n"
    "from pgcdc_events.events import decoder", '''
    import errno
    feed, fsync = decoder.EventDecoder.iter_feed, os.fsync

    if point == "decoder":  # the decoder fails on a change (a bug, a value it refuses)
        def failing(self, data, *a, **k):
            if data[:1] == b"I" and passing():
                raise ConversionError("column public.acct.owner: cannot convert (planted)")
            return feed(self, data, *a, **k)
        decoder.EventDecoder.iter_feed = failing
    elif point == "disk-full":  # the records output's file system is full
        def full(fd):
            if passing():
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return fsync(fd)
        checkpoint.os.fsync = full
''')


@pytest.mark.parametrize(("point", "nth"), [("decoder", 900), ("disk-full", 6)])
def test_a_failing_decoder_or_a_full_disk(cluster: TempCluster, tmp_path: Path,
                                          point: str, nth: int) -> None:
    """The error reaches the user as the capture says it in one process (one line, the
    same text, exit status 1), nothing past what is durable is acknowledged, and the next
    run delivers every change once."""
    conn = pg8000.native.Connection(**cluster.dsn())
    script = tmp_path / "fail.py"
    script.write_text(FAILURES)
    lines = {}
    try:
        for workers in ("2", "1"):
            output = tmp_path / workers
            for step in range(4):
                conn.run("INSERT INTO acct SELECT g, 'o' || g, g, true FROM "
                         "generate_series(CAST(:a AS int), CAST(:b AS int)) g",
                         a=step * 500 + 1, b=step * 500 + 500)
            proc = test_delivery.start_capture(
                decode_args(cluster, output, "--workers", workers),
                {"CRASH_AT": point, "CRASH_NTH": str(nth)}, script)
            _, err = proc.communicate(timeout=300)
            assert proc.returncode == 1, err.decode()
            lines[workers] = _one_error_line(err).replace(str(output), "OUT")
            saved = json.loads((output / "events.jsonl.checkpoint.json").read_text())
            confirmed = conn.run("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                                 "WHERE slot_name = 'cap'")[0][0]
            assert saved["lsn"] is not None  # what came before the failure is durable
            assert Lsn.parse(confirmed) <= Lsn.parse(saved["lsn"])
            finish(cluster, output)
            verify_events(cluster, output)
            # the next round: new slots, empty tables
            conn.run("SELECT pg_drop_replication_slot('oracle')")
            conn.run("SELECT pg_drop_replication_slot('cap')")
            conn.run("SELECT pg_create_logical_replication_slot('oracle', 'pgoutput')")
            conn.run("SELECT pg_create_logical_replication_slot('cap', 'pgoutput', false, "
                     "true)")
            conn.run("TRUNCATE acct")
    finally:
        conn.close()
    assert lines["2"] == lines["1"], lines
    expected = ("cannot convert (planted)" if point == "decoder"
                else "No space left on device")
    assert expected in lines["2"], lines


@pytest.mark.parametrize("kernel", [True, False])
def test_append_file_appends_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      kernel: bool) -> None:
    """A segment's spool file appended after what was written (copy_file_range at explicit
    offsets, the output being O_APPEND; read and write where the kernel cannot copy), the
    file removed; a rollback cuts it again."""
    copies: list[int] = []
    real = os.copy_file_range

    def copy(src: int, dst: int, count: int, *offsets: int) -> int:
        if not kernel:
            raise OSError(errno.EXDEV, "not here")
        copied = real(src, dst, count, *offsets)
        copies.append(copied)  # (by the kernel: a destination opened O_APPEND is refused)
        return copied

    monkeypatch.setattr(os, "copy_file_range", copy)
    out = DurableOutput(tmp_path / "events.jsonl", kind="events", slot="s", publications=("p",))
    out.open()
    try:
        out.write(b"one\n")
        out.commit(100, 1, 1)
        for number, text in ((1, b"two\nthree\n"), (2, b"four\n" * 50_000)):
            spool = tmp_path / f"seg{number}"
            spool.write_bytes(text)
            out.append_file(spool, len(text))
            assert not spool.exists()
        out.write(b"five\n")
        out.commit(200, 2, 2)
        expected = b"one\ntwo\nthree\n" + b"four\n" * 50_000 + b"five\n"
        assert (tmp_path / "events.jsonl").read_bytes() == expected
        assert out.checkpoint.offset == len(expected)
        assert bool(copies) is kernel
        spool = tmp_path / "seg3"
        spool.write_bytes(b"six\n")
        out.append_file(spool, 4)
        out.rollback()
        assert (tmp_path / "events.jsonl").read_bytes() == expected
    finally:
        out.close()
