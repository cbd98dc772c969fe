"""Smoke tests for the live-server fixtures and :class:`support.capture.Capturer`."""

from __future__ import annotations

from typing import Any

from support.capture import Capturer, message_types, pgoutput_options


def test_insert_yields_begin_relation_insert_commit(pg_conn: Any) -> None:
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    cap = Capturer(pg_conn)
    pg_conn.run("INSERT INTO t VALUES (1, 'one')")
    peeked = cap.changes(peek=True)
    assert message_types(peeked) == ["B", "R", "I", "C"]
    rows = cap.changes()
    assert rows == peeked
    assert {row.xid for row in rows} == {rows[0].xid}
    assert rows[0].lsn >= (cap.start_lsn or 0)
    assert cap.changes() == []  # consumed


def test_streaming_with_small_work_mem(pg_conn: Any) -> None:
    pg_conn.run("CREATE TABLE big (id int PRIMARY KEY, pad text)")
    cap = Capturer(pg_conn, slot="stream", publication="p")
    pg_conn.run("INSERT INTO big SELECT g, repeat('x', 500) FROM generate_series(1, 1000) g")
    types = message_types(cap.changes(proto_version=2, streaming=True, work_mem=64))
    assert types[0] == "S" and types[-1] == "c"
    assert types.count("S") == types.count("E") >= 2
    assert "B" not in types


def test_two_phase_and_options(pg_conn: Any) -> None:
    assert pgoutput_options("a", proto_version=3, binary=True, two_phase=True) == [
        ("proto_version", "3"),
        ("publication_names", "a"),
        ("binary", "true"),
        ("two_phase", "true"),
    ]
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY)")
    cap = Capturer(pg_conn, two_phase=True, tables=["t"])
    pg_conn.run("BEGIN")
    pg_conn.run("INSERT INTO t VALUES (1)")
    pg_conn.run("PREPARE TRANSACTION 'smoke'")
    assert message_types(cap.changes(proto_version=3, two_phase=True)) == ["b", "R", "I", "P"]
    # left prepared on purpose: the pg_conn teardown must roll it back and drop the slot
