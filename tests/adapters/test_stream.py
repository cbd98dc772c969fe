"""The streaming reader: the same capture as the SQL reader on the same WAL, the slot held so
that the server refuses every other reader, and only durable positions acknowledged."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pgcdc_events.adapters.stream import StreamReader
from pgcdc_events.adapters.units import UnitAssembler
from pgcdc_events.cli import main
from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.protocol import CaptureRow, Lsn, dump_capture_row, iter_capture
from pgcdc_events.testing.cluster import TempCluster

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def url(pg_cluster: TempCluster, pg_conn: Any) -> str:
    database = pg_conn.run("SELECT current_database()")[0][0]
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    pg_conn.run("CREATE TABLE big (id int, pad text)")
    pg_conn.run("CREATE PUBLICATION p FOR ALL TABLES")
    return f"postgresql://{pg_cluster.user}@{pg_cluster.host}:{pg_cluster.port}/{database}"


def _args(url: str, slot: str, out: Path, *extra: str) -> list[str]:
    return ["capture", "--dsn", url, "--slot", slot, "--publication", "p", "--output",
            f"{out}/", "-q", "--snapshot-mode", "no_data", *extra]


def _wait_active(pg_conn: Any, slot: str, active: bool = True) -> int | None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        rows = pg_conn.run("SELECT active_pid FROM pg_replication_slots WHERE slot_name = :s",
                           s=slot)
        pid = rows[0][0] if rows else None
        if (pid is not None) == active:
            return pid  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise AssertionError(f"slot {slot} never became {'active' if active else 'inactive'}")


def test_the_stream_writes_what_the_sql_reader_writes(url: str, pg_conn: Any,
                                                      tmp_path: Path) -> None:
    """Both readers on two slots created at the same point: byte-identical captures (LSNs of
    Relation messages, xids of every row, streamed and prepared transactions included)."""
    pg_conn.run("SELECT pg_create_logical_replication_slot('by_sql', 'pgoutput', false, true)")
    pg_conn.run("SELECT pg_create_logical_replication_slot('by_stream', 'pgoutput', false, "
                "true)")
    database = pg_conn.run("SELECT current_database()")[0][0]
    # both readers' sessions decode with 64kB: the big transaction streams
    pg_conn.run(f'ALTER DATABASE "{database}" SET logical_decoding_work_mem = \'64kB\'')
    pg_conn.run("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    pg_conn.run("UPDATE t SET v = 'c' WHERE id = 1")
    pg_conn.run("SELECT pg_logical_emit_message(false, 'nt', 'outside')")
    pg_conn.run("BEGIN")
    pg_conn.run("INSERT INTO t VALUES (3, 'x')")
    pg_conn.run("SELECT pg_logical_emit_message(true, 'tx', 'inside')")
    pg_conn.run("SELECT pg_logical_emit_message(false, 'nt', 'inside, not transactional')")
    pg_conn.run("COMMIT")
    pg_conn.run("INSERT INTO big SELECT g, repeat('p', 200) FROM generate_series(1, 3000) g")
    pg_conn.run("BEGIN")
    pg_conn.run("INSERT INTO t VALUES (4, 'prepared')")
    pg_conn.run("PREPARE TRANSACTION 'g1'")
    pg_conn.run("COMMIT PREPARED 'g1'")
    pg_conn.run("TRUNCATE big")
    extra = ("--streaming", "on", "--two-phase", "--batch-rows", "500")
    assert main(_args(url, "by_sql", tmp_path / "sql", "--reader", "sql", *extra)) == 0
    assert main(_args(url, "by_stream", tmp_path / "stream", *extra)) == 0
    with open(tmp_path / "sql" / "capture.jsonl", encoding="utf-8") as fh:
        sql = list(iter_capture(fh))
    with open(tmp_path / "stream" / "capture.jsonl", encoding="utf-8") as fh:
        stream = list(iter_capture(fh))
    assert len(sql) > 3000 and any(r.data[:1] == b"c" for r in sql)  # a Stream Commit
    # The same messages at the same LSNs with the same xids, but for two things the stream
    # cannot be asked: a SQL read is a new decoding session that announces its relations
    # again, and a non-transactional message emitted inside a transaction gets that
    # transaction's xid from the SQL functions, 0 on the stream (it precedes the Begin).
    def comparable(rows: list[CaptureRow]) -> list[tuple[int, int | None, bytes]]:
        return [(int(r.lsn), 0 if r.data[:1] == b"M" and not r.data[1] & 1 else r.xid, r.data)
                for r in rows if r.data[:1] != b"R"]

    assert comparable(stream) == comparable(sql)
    # and each relation the stream announces is one the SQL reader announced at that LSN
    announced = {(int(r.lsn), r.xid, r.data) for r in sql if r.data[:1] == b"R"}
    relations = [(int(r.lsn), r.xid, r.data) for r in stream if r.data[:1] == b"R"]
    assert relations and set(relations) <= announced
    assert [r.xid for r in stream if r.data[:1] == b"M" and not r.data[1] & 1] == [0, 0]
    config = EventConfig.from_properties({"topic.prefix": "x"})
    decoded = [[JsonRecordWriter(config.json).record_line(record) for record in EventDecoder(
        config, clock=lambda: 0, run_id="r").feed_rows(rows)] for rows in (sql, stream)]
    assert decoded[0] == decoded[1] and len(decoded[0]) > 3000
    checkpoints = [json.loads((tmp_path / d / "capture.jsonl.checkpoint.json").read_text())
                   for d in ("sql", "stream")]
    assert checkpoints[0]["lsn"] == checkpoints[1]["lsn"]
    assert checkpoints[0]["changes"] == checkpoints[1]["changes"]
    # the stream acknowledged what is on disk, and the server took it
    confirmed = pg_conn.run("SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                            "WHERE slot_name = 'by_stream'")[0][0]
    assert Lsn.parse(confirmed) == Lsn.parse(checkpoints[1]["lsn"])


def test_while_it_runs_the_server_refuses_every_other_reader(url: str, pg_conn: Any,
                                                             tmp_path: Path) -> None:
    assert main(_args(url, "s", tmp_path / "a", "--create-slot")) == 0
    first = subprocess.Popen(
        [sys.executable, "-m", "pgcdc_events",
         *_args(url, "s", tmp_path / "a", "--follow", "--poll-interval", "0.05")],
        stderr=subprocess.PIPE, cwd=ROOT)
    try:
        pid = _wait_active(pg_conn, "s")
        for i in range(20):
            pg_conn.run("INSERT INTO t VALUES (:i, 'x')", i=i)
        # the same output: the lock
        same = subprocess.run([sys.executable, "-m", "pgcdc_events",
                               *_args(url, "s", tmp_path / "a")],
                              capture_output=True, timeout=60, cwd=ROOT, check=False)
        assert same.returncode == 1 and b"another capture" in same.stderr
        # another output: the server
        other = subprocess.run([sys.executable, "-m", "pgcdc_events",
                                *_args(url, "s", tmp_path / "b", "--retry-for", "1")],
                               capture_output=True, timeout=60, cwd=ROOT, check=False)
        assert other.returncode == 1
        assert f'replication slot "s" is active for PID {pid}'.encode() in other.stderr
        # another process moving or consuming the slot: the server
        for sql in ("SELECT pg_replication_slot_advance('s', pg_current_wal_lsn())",
                    "SELECT count(*) FROM pg_logical_slot_get_binary_changes('s', NULL, NULL,"
                    " 'proto_version', '1', 'publication_names', 'p')"):
            with pytest.raises(Exception, match="is active for PID") as info:
                pg_conn.run(sql)
            assert info.value.args[0]["C"] == "55006"
        for i in range(20, 40):
            pg_conn.run("INSERT INTO t VALUES (:i, 'x')", i=i)
        deadline = time.monotonic() + 60
        out = tmp_path / "a" / "capture.jsonl.checkpoint.json"
        while time.monotonic() < deadline and json.loads(out.read_text())["changes"] < 40:
            # acknowledged never ahead of what is on disk
            confirmed = pg_conn.run("SELECT confirmed_flush_lsn::text FROM pg_replication_slots"
                                    " WHERE slot_name = 's'")[0][0]
            on_disk = json.loads(out.read_text())["lsn"]
            assert Lsn.parse(confirmed) <= Lsn.parse(on_disk)
            time.sleep(0.05)
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, err.decode()
    assert json.loads(out.read_text())["changes"] == 40
    assert not (tmp_path / "b" / "capture.jsonl.checkpoint.json").exists()
    _wait_active(pg_conn, "s", active=False)  # released at the end of the run


def test_a_read_stopped_early_still_names_the_prepare_holding_the_slot(url: str,
                                                                       pg_conn: Any) -> None:
    """A read the caller stops after a unit (as capture does for --rotate-size and
    --max-changes) still reports the unresolved PREPARE the slot must not pass. It was
    left unset: the capture then acknowledged past the PREPARE, and a later read met its
    COMMIT PREPARED alone and stopped (a SIGKILL campaign with rotation found it)."""
    from pgcdc_events.adapters.pg8000 import DecodingOptions  # noqa: PLC0415

    reader = StreamReader(url, slot="lib", publications=["p"],
                          options=DecodingOptions(two_phase=True))
    reader.connect()
    try:
        reader.prepare(create_slot=True)
        pg_conn.run("BEGIN")
        pg_conn.run("INSERT INTO t VALUES (10, 'prepared')")
        pg_conn.run("PREPARE TRANSACTION 'held'")
        prepare_lsn = Lsn.parse(pg_conn.run(
            "SELECT pg_current_wal_insert_lsn()::text")[0][0])
        pg_conn.run("INSERT INTO t VALUES (11, 'after')")
        pg_conn.run("INSERT INTO t VALUES (12, 'after')")
        reading = reader.read()
        unit = next(reading)  # the first plain transaction: the PREPARE came before it
        assert unit.kind == "transaction" and unit.end_lsn > prepare_lsn
        unit.close()
        reading.close()
        hold = reader.last_batch.hold_lsn
        assert hold is not None and hold < unit.end_lsn
    finally:
        pg_conn.run("ROLLBACK PREPARED 'held'")
        reader.close()


def test_the_reader_is_a_slot_reader(url: str, pg_conn: Any) -> None:
    """The library interface: prepare, read, advance, status, on one held slot."""
    reader = StreamReader(url, slot="lib", publications=["p"])
    reader.connect()
    try:
        info = reader.prepare(create_slot=True)
        pg_conn.run("INSERT INTO t VALUES (1, 'x')")
        units = []
        for unit in reader.read():
            units.append((unit.kind, unit.changes))
            unit.close()
        assert units == [("transaction", 1)]
        assert reader.status().active_pid is not None
        moved = reader.advance(reader.last_batch.last_end or 0)
        assert moved is not None and info.confirmed_lsn is not None and moved > info.confirmed_lsn
    finally:
        reader.close()
    _wait_active(pg_conn, "lib", active=False)


def test_xids_of_short_or_unknown_messages_are_left_to_the_protocol_reader() -> None:
    from pgcdc_events.adapters.stream import XidTracker  # noqa: PLC0415

    tracker = XidTracker()
    for data in (b"", b"B", b"B\x00", b"S\x00", b"K" + b"\x00" * 10, b"r\x01", b"?"):
        assert tracker.xid(data) is None


def test_changes_read_from_their_heads_are_written_as_the_sql_reader_writes_them(
        url: str, pg_conn: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream writes an Insert, Update or Delete of an open transaction as its capture
    line straight from the received bytes, matched on its first bytes
    (``wire.change_heads``), never parsed. On a transaction of more lines than a block
    holds (spilled under a small memory limit), a value larger than one socket read,
    updates and deletes with key and old tuples, and a column added between transactions
    (new heads): the same capture as the SQL reader's, which parses every message."""
    for slot in ("by_sql", "by_stream", "by_decode"):
        pg_conn.run(f"SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')")
    pg_conn.run("CREATE TABLE full_t (id int PRIMARY KEY, v text)")
    pg_conn.run("ALTER TABLE full_t REPLICA IDENTITY FULL")
    pg_conn.run("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 5000) g")
    pg_conn.run("INSERT INTO t VALUES (0, repeat('big', 1000000))")  # 3 MB on the wire
    pg_conn.run("UPDATE t SET v = 'u' WHERE id <= 10")
    pg_conn.run("UPDATE t SET id = id + 100000 WHERE id = 11")  # the old key goes too
    pg_conn.run("DELETE FROM t WHERE id <= 5")
    pg_conn.run("INSERT INTO full_t VALUES (1, 'a'), (2, 'b')")
    pg_conn.run("UPDATE full_t SET v = 'c'")
    pg_conn.run("DELETE FROM full_t WHERE id = 1")
    pg_conn.run("ALTER TABLE t ADD COLUMN w int")
    pg_conn.run("INSERT INTO t VALUES (-1, 'after', 7)")
    pg_conn.run("UPDATE t SET w = 1 WHERE id = 20")
    extra = ("--memory-limit", "0.25", "--batch-rows", "700")
    assert main(_args(url, "by_sql", tmp_path / "sql", "--reader", "sql", *extra)) == 0
    fed: list[int] = []
    feed = UnitAssembler.feed

    def counting(self: UnitAssembler, row: CaptureRow) -> object:
        fed.append(1)
        return feed(self, row)

    monkeypatch.setattr(UnitAssembler, "feed", counting)
    assert main(_args(url, "by_stream", tmp_path / "stream", *extra)) == 0
    with open(tmp_path / "sql" / "capture.jsonl", encoding="utf-8") as fh:
        sql = list(iter_capture(fh))
    with open(tmp_path / "stream" / "capture.jsonl", "rb") as fh:
        text = fh.read()
    stream = list(iter_capture(text.decode("ascii").splitlines()))
    assert text == b"".join(dump_capture_row(row).encode() + b"\n" for row in stream)
    changes = [r for r in stream if r.data[:1] in (b"I", b"U", b"D")]
    assert len(changes) == 5000 + 1 + 11 + 1 + 6 + 2 + 2 + 1 + 1 + 1  # id 0 is <= 10
    assert max(len(r.data) for r in changes) > 3_000_000
    # only the other messages took the general path, and the change right after each
    # Relation (which waits for that change's LSN)
    relations = [(int(r.lsn), r.xid, r.data) for r in stream if r.data[:1] == b"R"]
    assert len(fed) == len(stream) - len(changes) + len(relations)

    def comparable(rows: list[CaptureRow]) -> list[tuple[int, int | None, bytes]]:
        return [(int(r.lsn), r.xid, r.data) for r in rows if r.data[:1] != b"R"]

    assert comparable(stream) == comparable(sql)
    announced = {(int(r.lsn), r.xid, r.data) for r in sql if r.data[:1] == b"R"}
    assert len(relations) == 3 and set(relations) <= announced  # t, full_t, t again
    # capture --decode takes the same path with rows (unrendered): the records of decoding
    # the SQL reader's capture, but for the time of processing and the run's id
    fed.clear()
    assert main(_args(url, "by_decode", tmp_path / "dec", "--decode", *extra)) == 0
    assert len(fed) == len(stream) - len(changes) + len(relations)
    # (capture --decode reads the catalog from its connection: decode is given it)
    assert main(["catalog", "--dsn", url, "-o", str(tmp_path / "catalog.json")]) == 0
    assert main(["decode", "--capture", str(tmp_path / "sql" / "capture.jsonl"), "--output",
                 str(tmp_path / "sql.jsonl"), "-q", "--catalog",
                 str(tmp_path / "catalog.json")]) == 0

    def records(path: Path) -> list[Any]:
        with open(path, encoding="utf-8") as fh:
            lines = [json.loads(line) for line in fh]
        for line in lines:
            line.pop("headers")
            for key in ("ts_ms", "ts_us", "ts_ns"):
                if line["value"] is not None:
                    line["value"]["payload"].pop(key)
        return lines

    assert records(tmp_path / "dec" / "events.jsonl") == records(tmp_path / "sql.jsonl")


def _fed_reader(frames: bytes, *, max_message_size: int | None = None) -> tuple[Any, Any]:
    """A stream reader (never connected) whose socket receives ``frames``, hand-built: the
    server cannot be made to announce a frame larger than PostgreSQL's own limit."""
    import socket  # noqa: PLC0415

    reader = StreamReader("postgresql://nobody@127.0.0.1:1/db", slot="s", publications=["p"])
    ours, server = socket.socketpair()
    reader._sock = ours
    if max_message_size is not None:
        reader.max_message_size = max_message_size
    server.sendall(frames)
    return reader, server


def _xlog_frame(message: bytes, *, announced: int | None = None) -> bytes:
    import struct  # noqa: PLC0415

    body = b"w" + struct.pack("!QQQ", 0x16B3748, 0x16B3748, 0) + message
    return b"d" + struct.pack("!I", 4 + len(body) if announced is None else announced) + body


def test_a_frame_announcing_more_than_the_largest_message_is_refused_before_it_is_gathered(
        ) -> None:
    """A CopyData head announcing a frame larger than an XLogData of ``max_message_size``
    bytes: our error naming the frame's place in the stream and its size, at once (not
    after waiting for, or gathering, gigabytes); a frame of exactly the limit is read."""
    from pgcdc_events.adapters.pg8000 import BatchInfo  # noqa: PLC0415
    from pgcdc_events.errors import ProtocolError  # noqa: PLC0415

    keepalive = b"d" + (4 + 18).to_bytes(4, "big") + b"k" + b"\x00" * 17
    # at the limit (100 bytes of message): read whole
    reader, server = _fed_reader(keepalive + _xlog_frame(b"x" * 100), max_message_size=100)
    assert reader._message(1.0)[0] == b"d"
    tag, body = reader._message(1.0)
    assert (tag, len(body)) == (b"d", 1 + 24 + 100)
    server.close()
    reader.close()
    # one byte more: refused, naming where it starts (after the 23-byte keepalive)
    reader, server = _fed_reader(keepalive + _xlog_frame(b"x" * 101), max_message_size=100)
    assert reader._message(1.0)[0] == b"d"
    with pytest.raises(ProtocolError) as caught:
        reader._message(1.0)
    assert str(caught.value) == (
        "message 'd': a replication frame's length of at most 129 bytes (a message of at "
        "most 100 bytes, max_message_size) (the frame at byte 23 of slot 's''s stream "
        "announces a length of 130 bytes; refused before reading it)")
    assert reader._sock is None  # dropped: the stream cannot go on
    server.close()
    # the default limit, on the capture's path: a head announcing 4 GiB, 64 bytes sent
    reader, server = _fed_reader(keepalive * 3 + _xlog_frame(b"I" * 32, announced=0xFFFFFFF0))
    reader._assembler = UnitAssembler()
    units = reader._units(reader._assembler, BatchInfo(), 1.0)
    with pytest.raises(ProtocolError, match=r"at byte 69 of slot 's''s stream announces "
                       r"a length of 4,294,967,280 bytes"):
        next(units)
    assert len(reader._buf) < 1000
    server.close()
