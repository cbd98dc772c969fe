"""Snapshot read events carry the same row values as streamed inserts of the same rows."""

from __future__ import annotations

import io
import json
import re
from typing import Any

import pytest

from pgcdc_events.errors import ConfigurationError
from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.types.catalog import fetch_catalog
from support.capture import Capturer

_ESCAPES = {b"b": b"\b", b"f": b"\f", b"n": b"\n", b"r": b"\r", b"t": b"\t", b"v": b"\v"}


def copy_rows(conn: Any, table: str) -> list[list[bytes | None]]:
    """A table's rows in COPY text format: what the type output functions print."""
    buffer = io.BytesIO()
    conn.run(f"COPY {table} TO STDOUT", stream=buffer)
    return [[None if f == b"\\N" else re.sub(rb"\\(.)", lambda m: _ESCAPES.get(m.group(1),
                                                                                m.group(1)), f)
             for f in line.split(b"\t")] for line in buffer.getvalue().splitlines()]


def test_snapshot_events_match_streamed_inserts(pg_conn: Any) -> None:
    pg_conn.run("CREATE TYPE mood AS ENUM ('sad', 'ok')")
    pg_conn.run("CREATE TABLE a (id int PRIMARY KEY, m mood, n numeric(8,2), t text[], "
                "ts timestamptz DEFAULT '2000-01-01 00:00+00')")
    pg_conn.run("CREATE TABLE b (k text PRIMARY KEY, j jsonb, tab text)")
    pg_conn.run("CREATE TABLE skipped (id int PRIMARY KEY)")
    cap = Capturer(pg_conn)
    pg_conn.run("INSERT INTO a VALUES (1, 'ok', 1.5, '{x,\"y z\"}', now()), (2, NULL, NULL, "
                "NULL, DEFAULT), (3, 'sad', -2, '{}', now())")
    pg_conn.run("INSERT INTO b VALUES ('k\tey', '{\"a\": [1, null]}', E'tab\\there')")
    pg_conn.run("INSERT INTO skipped VALUES (1)")
    catalog = fetch_catalog(pg_conn)
    config = EventConfig.from_properties({"topic.prefix": "s",
                                          "table.exclude.list": "public\\.skipped"})
    writer = JsonRecordWriter(config.json)
    clock = lambda: 1_700_000_000_000_000_000  # noqa: E731
    streamed = [json.loads(writer.record_line(r)) for r in
                EventDecoder(config, catalog=catalog, clock=clock).feed_rows(cap.changes())]
    decoder = EventDecoder(config, catalog=catalog, clock=clock)
    tables = [(catalog.table("public", n), copy_rows(pg_conn, n)) for n in ("a", "b", "skipped")]
    snap = [json.loads(writer.record_line(r)) for r in decoder.snapshot(
        [(t, rows) for t, rows in tables if t is not None], lsn=0x1234, xid=77)]
    assert [r["value"]["payload"]["op"] for r in snap] == ["r"] * 4
    assert [r["value"]["payload"]["source"]["snapshot"] for r in snap] == [
        "first", "true", "last_in_data_collection", "last"]
    assert all(r["value"]["payload"]["source"]["txId"] == 77 for r in snap)
    assert [(r["key"], r["value"]["payload"]["after"]) for r in snap] == [
        (r["key"], r["value"]["payload"]["after"]) for r in streamed]
    assert snap[0]["value"]["schema"] == streamed[0]["value"]["schema"]
    incremental = list(decoder.snapshot([tables[1]], lsn=1, incremental=True))
    assert [r.value["source"]["snapshot"] for r in incremental] == ["incremental"]  # type: ignore[index]


def test_snapshot_rows_must_have_the_tables_width(pg_conn: Any) -> None:
    pg_conn.run("CREATE TABLE w (id int PRIMARY KEY, v text)")
    catalog = fetch_catalog(pg_conn)
    table = catalog.table("public", "w")
    assert table is not None
    decoder = EventDecoder(EventConfig(topic_prefix="x"), catalog=catalog)
    with pytest.raises(ConfigurationError, match="has 1 values, expected 2"):
        list(decoder.snapshot([(table, [["1"]])], lsn=1))
