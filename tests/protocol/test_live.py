"""The parser against a live PostgreSQL server: every protocol version and option it supports."""

from __future__ import annotations

from typing import Any

import pytest

from pgcdc_events.protocol import (
    KIND_BINARY,
    Insert,
    PgOutputReader,
    StreamAbort,
    encode_message,
)
from support.capture import Capturer

WORKLOAD = [
    "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
    'CREATE TABLE "Mixed Case" (id int PRIMARY KEY, "Ünï" text, m mood, n numeric(8, 2),'
    " ts timestamptz, arr int[], b bytea)",
    "ALTER TABLE \"Mixed Case\" REPLICA IDENTITY FULL",
]
CHANGES = [
    "INSERT INTO \"Mixed Case\" VALUES (1, 'héllo', 'ok', 12.5, '2024-01-01 00:00+00',"
    " '{1,NULL,3}', '\\x00ff')",
    "UPDATE \"Mixed Case\" SET m = 'happy', arr = '{}' WHERE id = 1",
    "INSERT INTO \"Mixed Case\" SELECT g, repeat('x', 300), 'sad', g, now(), '{}', NULL"
    " FROM generate_series(2, 600) g",
    "DELETE FROM \"Mixed Case\" WHERE id > 300",
    "TRUNCATE \"Mixed Case\"",
]


def _round_trip(rows: Any, reader: PgOutputReader) -> list[Any]:
    out = []
    for row in rows:
        message = reader.read(row.data)
        assert encode_message(message) == row.data
        out.append(message)
    return out


@pytest.mark.parametrize("proto_version", [1, 2, 3])
@pytest.mark.parametrize("binary", [False, True])
def test_each_version_and_tuple_format(pg_conn: Any, proto_version: int, binary: bool) -> None:
    for sql in WORKLOAD:
        pg_conn.run(sql)
    cap = Capturer(pg_conn)
    for sql in CHANGES:
        pg_conn.run(sql)
    rows = cap.changes(proto_version=proto_version, binary=binary)
    messages = _round_trip(rows, PgOutputReader(proto_version=proto_version, streaming="off"))
    inserts = [m for m in messages if isinstance(m, Insert)]
    assert len(inserts) == 600
    assert any(KIND_BINARY in m.new.kinds for m in inserts) is binary


def test_streaming_with_savepoint_rollback(pg_conn: Any) -> None:
    for sql in WORKLOAD:
        pg_conn.run(sql)
    cap = Capturer(pg_conn)
    pg_conn.run("BEGIN")
    pg_conn.run(CHANGES[2])
    pg_conn.run("SAVEPOINT sp")
    pg_conn.run("INSERT INTO \"Mixed Case\" SELECT g, repeat('y', 300), 'ok', g, now(), '{}',"
                " NULL FROM generate_series(1000, 1600) g")
    pg_conn.run("ROLLBACK TO SAVEPOINT sp")
    pg_conn.run("DELETE FROM \"Mixed Case\" WHERE id < 10")
    pg_conn.run("COMMIT")
    rows = cap.changes(proto_version=2, streaming=True, work_mem=64)
    messages = _round_trip(rows, PgOutputReader(proto_version=2, streaming="on"))
    aborts = [m for m in messages if isinstance(m, StreamAbort)]
    assert aborts and all(a.is_subtransaction for a in aborts)


def test_two_phase_live(pg_conn: Any) -> None:
    for sql in WORKLOAD:
        pg_conn.run(sql)
    cap = Capturer(pg_conn, two_phase=True)
    for gid, finish in (("g1", "COMMIT PREPARED 'g1'"), ("g2", "ROLLBACK PREPARED 'g2'")):
        pg_conn.run("BEGIN")
        pg_conn.run(CHANGES[0].replace("(1,", "(11," if gid == "g1" else "(12,"))
        pg_conn.run(f"PREPARE TRANSACTION '{gid}'")
        pg_conn.run(finish)
    rows = cap.changes(proto_version=3, two_phase=True)
    messages = _round_trip(rows, PgOutputReader(proto_version=3))
    assert [m.TYPE for m in messages if m.TYPE in b"bPKr"] == [b"b", b"P", b"K", b"b", b"P", b"r"]
