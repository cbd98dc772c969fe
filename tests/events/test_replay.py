"""Replaying decoded events reproduces the source tables exactly.

Hypothesis generates workloads (inserts, updates including primary-key changes,
deletes, truncates, over several tables; some in large transactions that stream,
some rolled back, some with a rolled-back savepoint). The workload runs on the
throwaway server, the slot is decoded with streaming on, and the events are applied
in order to an in-memory table per topic (filling unchanged TOASTed values, which
the REPLICA IDENTITY DEFAULT table sends as placeholders, from the row it holds). At
the end each in-memory table must equal
``SELECT *`` of its source table, converted with the same column mappings.
"""

from __future__ import annotations

import io
import json
import re
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.types.catalog import fetch_catalog
from support.capture import Capturer

TABLES = {
    "t_full": "CREATE TABLE t_full (id int PRIMARY KEY, v text, n numeric(10,2), "
              "ts timestamptz, arr int[], big text)",
    "t_pair": "CREATE TABLE t_pair (k1 int, k2 text, doc jsonb, d date, PRIMARY KEY (k1, k2))",
    "t_plain": "CREATE TABLE t_plain (id bigint PRIMARY KEY, flag boolean, amount float8)",
    # REPLICA IDENTITY DEFAULT, with a value stored out of line: updates that leave it
    # alone carry the unavailable-value placeholder, which the consumer fills in
    "t_default": "CREATE TABLE t_default (id int PRIMARY KEY, v int, big text); "
                 "ALTER TABLE t_default ALTER COLUMN big SET STORAGE EXTERNAL",
}
IDENTITY = {"t_full": "FULL", "t_pair": "FULL", "t_plain": "FULL", "t_default": "DEFAULT"}
PLACEHOLDER = "__debezium_unavailable_value"

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


_BULK = ("INSERT INTO t_full SELECT g, 'bulk', g, now(), '{}', repeat('b', 300) "
         "FROM generate_series(1000, 1400) g ON CONFLICT (id) DO NOTHING")
#: Over logical_decoding_work_mem (64kB) both times: streamed, aborted, then committed.
STREAMED = [("rollback", [_BULK]),
            ("commit", [_BULK, "UPDATE t_full SET n = n + 1 WHERE id BETWEEN 1000 AND 1010",
                        "DELETE FROM t_full WHERE id = 1400"])]


@st.composite
def statements(draw: st.DrawFn, table: str) -> list[str]:  # noqa: C901
    """One or a few statements against ``table``, valid whatever its current rows."""
    kind = draw(st.sampled_from(["insert", "insert", "update", "rekey", "delete", "truncate",
                                 "bulk"]))
    key = draw(st.integers(1, 3))  # few keys, so updates and deletes usually hit a row
    if table == "t_full":
        if kind == "insert":
            return [f"INSERT INTO t_full VALUES ({key}, {_literal(draw(texts))}, "
                    f"{draw(st.integers(-999, 999))}.25, now(), '{{1,NULL,3}}', NULL) "
                    "ON CONFLICT (id) DO UPDATE SET v = excluded.v"]
        if kind == "update":
            return [f"UPDATE t_full SET v = {_literal(draw(texts))}, n = n + 1 WHERE id = {key}"]
        if kind == "rekey":
            return [f"UPDATE t_full SET id = id + 100 WHERE id = {key} "
                    f"AND NOT EXISTS (SELECT 1 FROM t_full WHERE id = {key + 100})"]
        if kind == "delete":
            return [f"DELETE FROM t_full WHERE id = {key}"]
        if kind == "truncate":
            return ["TRUNCATE t_full"]
        return [_BULK]
    if table == "t_pair":
        k2 = _literal(draw(st.sampled_from(["a", "b", "Ö", "x y"])))
        if kind in ("insert", "bulk"):
            return [f"INSERT INTO t_pair VALUES ({key}, {k2}, '{{\"n\": {key}}}', "
                    f"'2024-01-0{key % 9 + 1}') ON CONFLICT DO NOTHING"]
        if kind in ("update", "truncate"):
            return [f"UPDATE t_pair SET doc = '[1, 2]' WHERE k1 = {key}"]
        if kind == "rekey":
            return [f"UPDATE t_pair SET k1 = k1 + 50 WHERE k1 = {key} AND k2 = {k2} "
                    f"AND NOT EXISTS (SELECT 1 FROM t_pair WHERE k1 = {key + 50} AND k2 = {k2})"]
        return [f"DELETE FROM t_pair WHERE k1 = {key}"]
    if table == "t_default":
        if kind in ("insert", "bulk"):
            return [f"INSERT INTO t_default VALUES ({key}, 0, repeat('{key}', 3000 + {key})) "
                    "ON CONFLICT (id) DO UPDATE SET v = t_default.v + 1"]
        if kind == "update":
            return [f"UPDATE t_default SET v = v + 1 WHERE id = {key}"]
        if kind == "rekey":
            return [f"UPDATE t_default SET id = id + 100 WHERE id = {key} "
                    f"AND NOT EXISTS (SELECT 1 FROM t_default WHERE id = {key + 100})"]
        if kind == "truncate":
            return [f"UPDATE t_default SET big = repeat('n', 2500 + {key}) WHERE id = {key}"]
        return [f"DELETE FROM t_default WHERE id = {key}"]
    if kind in ("insert", "bulk", "rekey"):
        return [f"INSERT INTO t_plain VALUES ({key}, {draw(st.booleans())}, "
                f"{draw(st.floats(-1e6, 1e6, allow_nan=False))}) ON CONFLICT (id) DO NOTHING"]
    if kind == "update":
        return [f"UPDATE t_plain SET flag = NOT flag WHERE id = {key}"]
    if kind == "truncate":
        return ["TRUNCATE t_plain"]
    return [f"DELETE FROM t_plain WHERE id = {key}"]


@st.composite
def transactions(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A transaction: how it ends (commit, rollback, savepoint rollback) and its statements."""
    end = draw(st.sampled_from(["commit", "commit", "commit", "rollback", "savepoint"]))
    body = [s for table in draw(st.lists(st.sampled_from(sorted(TABLES)), min_size=1,
                                         max_size=4))
            for s in draw(statements(table))]
    return end, body


def _run(conn: Any, end: str, body: list[str]) -> None:
    conn.run("BEGIN")
    if end == "savepoint":
        conn.run(body[0])
        conn.run("SAVEPOINT s")
        for sql in body[1:]:
            conn.run(sql)
        conn.run("ROLLBACK TO SAVEPOINT s")
        conn.run("COMMIT")
        return
    for sql in body:
        conn.run(sql)
    conn.run("ROLLBACK" if end == "rollback" else "COMMIT")


def _apply(records: list[dict[str, Any]], state: dict[str, dict[str, Any]]) -> None:
    for rec in records:
        topic = rec["topic"].rsplit(".", 1)[-1]
        if topic == "transaction" or rec["value"] is None:
            continue
        payload = rec["value"]["payload"]
        rows = state.setdefault(topic, {})
        op = payload["op"]
        if op == "t":
            rows.clear()
        elif op in ("c", "u", "r"):
            key = json.dumps(rec["key"]["payload"], sort_keys=True)
            after = payload["after"]
            # an unchanged TOASTed value: the consumer keeps what it has for the row (under
            # its old key when the update changed the key)
            old_key = rec["headers"].get("__debezium.oldkey")
            previous = (rows.pop(json.dumps(old_key["payload"], sort_keys=True), None)
                        if old_key else rows.get(key)) or {}
            rows[key] = {name: previous.get(name) if value == PLACEHOLDER else value
                         for name, value in after.items()}
        elif op == "d" and not rec["headers"].get("__debezium.newkey"):
            rows.pop(json.dumps(rec["key"]["payload"], sort_keys=True), None)
        elif op == "d":  # the delete half of a key change: the create half moves the row
            pass


_COPY_ESCAPES = {b"b": b"\b", b"f": b"\f", b"n": b"\n", b"r": b"\r", b"t": b"\t",
                 b"v": b"\v", b"\\": b"\\"}


def _copy_rows(conn: Any, query: str) -> list[list[bytes | None]]:
    """Rows as the types' output functions print them (COPY text format), like pgoutput."""
    buffer = io.BytesIO()
    conn.run(f"COPY ({query}) TO STDOUT", stream=buffer)
    rows = []
    for line in buffer.getvalue().split(b"\n"):
        if line:
            rows.append([None if f == b"\\N" else re.sub(
                rb"\\(.)", lambda m: _COPY_ESCAPES.get(m.group(1), m.group(1)), f)
                for f in line.split(b"\t")])
    return rows


def _expected(conn: Any, decoder: EventDecoder, writer: JsonRecordWriter
              ) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    tables = {t.table_name: t for t in decoder._tables.values() if t is not None}
    for name in TABLES:
        schema = tables.get(name)
        if schema is None:
            assert not conn.run(f"SELECT 1 FROM {name} LIMIT 1"), f"{name}: rows but no events"
            continue
        cols = [schema.relation.columns[c.position].name for c in schema.columns]
        table_rows = out.setdefault(name, {})
        for row in _copy_rows(conn, f"SELECT {', '.join(cols)} FROM {name}"):
            values = tuple(None if v is None else schema.columns[i].from_text(v)
                           for i, v in enumerate(row))
            key = json.loads(writer.payload(schema.key_schema, schema.key(values)))
            after = json.loads(writer.payload(schema.value_schema, schema.value(values)))
            table_rows[json.dumps(key, sort_keys=True)] = after
    return out


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@example([("commit", ["INSERT INTO t_plain VALUES (1, true, 1.5)",
                       "INSERT INTO t_full VALUES (1, 'a', 1, now(), '{}', repeat('x', 5000))"]),
          ("commit", ["UPDATE t_full SET id = 9 WHERE id = 1", "DELETE FROM t_plain"]),
          ("rollback", ["TRUNCATE t_full"])])
@example([("commit", ["INSERT INTO t_default VALUES (1, 0, repeat('1', 3001))",
                      "INSERT INTO t_default VALUES (2, 0, repeat('2', 3002))"]),
          ("commit", ["UPDATE t_default SET v = v + 1 WHERE id = 1",
                      "UPDATE t_default SET id = id + 100 WHERE id = 2"])])
@example(STREAMED)
@given(st.lists(transactions(), min_size=1, max_size=10))
def test_replayed_events_equal_select_star(pg_conn: Any, workload: list[Any]) -> None:
    for name, ddl in TABLES.items():
        pg_conn.run(f"DROP TABLE IF EXISTS {name}")
        for statement in ddl.split("; "):
            pg_conn.run(statement)
        pg_conn.run(f"ALTER TABLE {name} REPLICA IDENTITY {IDENTITY[name]}")
    pg_conn.run("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = 'replay'")
    pg_conn.run("DROP PUBLICATION IF EXISTS replay_pub")
    cap = Capturer(pg_conn, slot="replay", publication="replay_pub")
    for end, body in workload:
        _run(pg_conn, end, body)
    rows = cap.changes(proto_version=2, streaming=True, work_mem=64)
    if workload is STREAMED:  # a streamed rollback, then a streamed commit: both happen here
        types = b"".join(row.data[:1] for row in rows)
        assert b"S" in types and b"A" in types and b"c" in types, types
    config = EventConfig.from_properties({"topic.prefix": "r", "skipped.operations": "none",
                                          "provide.transaction.metadata": "true"})
    decoder = EventDecoder(config, catalog=fetch_catalog(pg_conn), proto_version=2,
                           streaming="on")
    writer = JsonRecordWriter(config.json)
    records = [json.loads(writer.record_line(r)) for r in decoder.feed_rows(rows)]
    state: dict[str, dict[str, Any]] = {}
    _apply(records, state)
    expected = _expected(pg_conn, decoder, writer)
    for name in TABLES:
        assert state.get(name, {}) == expected.get(name, {}), name
