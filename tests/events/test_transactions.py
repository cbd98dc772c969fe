"""Streamed and two-phase transactions give exactly the events of the same changes sent whole.

Debezium never uses streaming or two-phase (it asks for protocol 1), so there is no
golden recording of them; the referee here is PostgreSQL itself: the same changes
decoded from a second slot without streaming or two-phase are the expected events.
"""

from __future__ import annotations

import itertools
from typing import Any

import pg8000.native

from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.protocol import (
    CaptureRow,
    PgOutputReader,
    StreamAbort,
    StreamCommit,
    StreamStart,
)
from pgcdc_events.types.catalog import fetch_catalog
from support.capture import Capturer

CLOCK = 1_700_000_000_000_000_000
SETUP = [
    "CREATE TABLE acct (id int PRIMARY KEY, owner text NOT NULL, balance numeric(12,2),"
    " note text)",
    "ALTER TABLE acct REPLICA IDENTITY FULL",
    "CREATE TABLE log (id bigserial PRIMARY KEY, msg text)",
]


def decode(rows: list[CaptureRow], catalog: Any, **options: Any) -> list[str]:
    config = EventConfig.from_properties({"topic.prefix": "t", "provide.transaction.metadata":
                                          "true", "skipped.operations": "none"})
    decoder = EventDecoder(config, catalog=catalog, clock=lambda: CLOCK, run_id="run", **options)
    writer = JsonRecordWriter(config.json)
    return [writer.record_line(r) for r in decoder.feed_rows(rows)]


def _setup(pg_conn: Any) -> tuple[Capturer, Capturer]:
    for sql in SETUP:
        pg_conn.run(sql)
    whole = Capturer(pg_conn, slot="whole", publication="p_whole")
    streamed = Capturer(pg_conn, slot="streamed", publication="p_streamed")
    return whole, streamed


def test_streamed_transactions_match_whole_ones(pg_conn: Any) -> None:
    whole, streamed = _setup(pg_conn)
    pg_conn.run("INSERT INTO acct SELECT g, 'owner ' || g, g, repeat('n', 200)"
                " FROM generate_series(1, 400) g")
    pg_conn.run("BEGIN")
    pg_conn.run("UPDATE acct SET balance = balance + 1, note = repeat('u', 300)")
    pg_conn.run("SAVEPOINT a")
    pg_conn.run("DELETE FROM acct WHERE id > 200")
    pg_conn.run("INSERT INTO log (msg) SELECT repeat('x', 300) FROM generate_series(1, 300)")
    pg_conn.run("ROLLBACK TO SAVEPOINT a")
    pg_conn.run("UPDATE acct SET id = id + 1000 WHERE id <= 5")
    pg_conn.run("INSERT INTO log (msg) VALUES ('kept')")
    pg_conn.run("COMMIT")
    pg_conn.run("BEGIN")
    pg_conn.run("INSERT INTO log (msg) SELECT repeat('y', 300) FROM generate_series(1, 400)")
    pg_conn.run("ROLLBACK")
    pg_conn.run("INSERT INTO log (msg) VALUES ('after')")
    catalog = fetch_catalog(pg_conn)
    expected = decode(whole.changes(proto_version=1), catalog)
    rows = streamed.changes(proto_version=2, streaming=True, work_mem=64)
    kinds = {type(m) for m in _messages(rows)}
    assert {StreamStart, StreamCommit, StreamAbort} <= kinds, "the workload did not stream"
    got = decode(rows, catalog, proto_version=2, streaming="on")
    assert len(got) == len(expected) > 800
    assert got == expected


def test_two_phase_transactions_match_whole_ones(pg_conn: Any) -> None:
    for sql in SETUP:
        pg_conn.run(sql)
    whole = Capturer(pg_conn, slot="whole", publication="p_whole")
    prepared = Capturer(pg_conn, slot="prepared", publication="p_prepared", two_phase=True)
    for gid, finish, n in (("g1", "COMMIT", 1), ("g2", "ROLLBACK", 2), ("g3", "COMMIT", 3)):
        pg_conn.run("BEGIN")
        pg_conn.run(f"INSERT INTO acct VALUES ({n}, 'o{n}', {n}, NULL)")
        pg_conn.run(f"INSERT INTO log (msg) SELECT repeat('z', 300) FROM generate_series(1, {n})")
        pg_conn.run(f"PREPARE TRANSACTION '{gid}'")
        pg_conn.run(f"{finish} PREPARED '{gid}'")
    catalog = fetch_catalog(pg_conn)
    expected = decode(whole.changes(proto_version=1), catalog)
    got = decode(prepared.changes(proto_version=3, two_phase=True), catalog, proto_version=3)
    assert got == expected
    assert not any('"o2"' in line for line in got)


def test_large_prepared_streamed_transaction(pg_conn: Any) -> None:
    for sql in SETUP:
        pg_conn.run(sql)
    whole = Capturer(pg_conn, slot="whole", publication="p_whole")
    prepared = Capturer(pg_conn, slot="prepared", publication="p_prepared", two_phase=True)
    pg_conn.run("BEGIN")
    pg_conn.run("INSERT INTO log (msg) SELECT repeat('s', 300) FROM generate_series(1, 600)")
    pg_conn.run("PREPARE TRANSACTION 'big'")
    pg_conn.run("COMMIT PREPARED 'big'")
    catalog = fetch_catalog(pg_conn)
    expected = decode(whole.changes(proto_version=1), catalog)
    rows = prepared.changes(proto_version=3, two_phase=True, streaming=True, work_mem=64)
    assert any(r.data[:1] == b"p" for r in rows), "no Stream Prepare"
    got = decode(rows, catalog, proto_version=3, streaming="on")
    assert got == expected and len(got) == 600 + 2


def _messages(rows: list[CaptureRow]) -> list[Any]:
    reader = PgOutputReader()
    return [reader.read(r.data) for r in rows]


def test_interleaved_streamed_transactions_match_whole_ones(pg_conn: Any, pg_cluster: Any
                                                            ) -> None:
    whole, streamed = _setup(pg_conn)
    database = pg_conn.run("SELECT current_database()")[0][0]
    other = pg8000.native.Connection(**{**pg_cluster.dsn(), "database": database})
    try:
        pg_conn.run("BEGIN")
        other.run("BEGIN")
        for batch in range(4):  # alternate big batches so both transactions stream, interleaved
            pg_conn.run("INSERT INTO log (msg) SELECT 'first ' || repeat('a', 300) "
                        "FROM generate_series(1, 150)")
            other.run(f"INSERT INTO acct SELECT g, 'o', g, repeat('b', 300) FROM "
                      f"generate_series({batch * 150 + 1}, {batch * 150 + 150}) g")
        other.run("COMMIT")  # the later-started transaction commits first
        pg_conn.run("COMMIT")
    finally:
        other.close()
    catalog = fetch_catalog(pg_conn)
    expected = decode(whole.changes(proto_version=1), catalog)
    rows = streamed.changes(proto_version=2, streaming=True, work_mem=64)
    starts = [m.xid for m in _messages(rows) if isinstance(m, StreamStart)]
    switches = sum(a != b for a, b in itertools.pairwise(starts))
    assert len(set(starts)) == 2 and switches >= 2, "the segments did not interleave"
    got = decode(rows, catalog, proto_version=2, streaming="on")
    assert got == expected and len(got) == 1200 + 4
