"""Tables of the same column types share their generated code (``events/tables.py``): the
sources hold only column numbers, so each distinct source is compiled once, and each table
binds its own converters to it. A hostile capture of many wide Relations spent most of its
time compiling (``benchmarks/bench_wide_relations.py``)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.types.catalog import fetch_catalog
from support.capture import Capturer

COLUMNS = "(id int PRIMARY KEY, a text, n numeric(12,2), at timestamptz)"


def test_same_column_types_compile_once_and_convert_as_their_own(pg_conn: Any) -> None:
    pg_conn.run(f"CREATE TABLE one {COLUMNS}")
    pg_conn.run(f"CREATE TABLE two {COLUMNS}")
    pg_conn.run("CREATE TABLE other (id int PRIMARY KEY, a varchar(9), n numeric(5,1), b bytea)")
    pg_conn.run("CREATE TABLE rekeyed (id int, a text, n numeric(12,2), at timestamptz, "
                "PRIMARY KEY (a))")
    capturer = Capturer(pg_conn, slot="code_cache")
    pg_conn.run("INSERT INTO one VALUES (1, 'x', 1.5, '2024-02-29 12:00+00')")
    pg_conn.run("INSERT INTO two VALUES (2, 'y', NULL, NULL)")
    pg_conn.run("INSERT INTO other VALUES (3, 'z', 2.25, '\\x00ff')")
    pg_conn.run("INSERT INTO rekeyed VALUES (4, 'k', 3, NULL)")
    rows = capturer.changes()
    catalog = fetch_catalog(pg_conn)
    capturer.drop()
    decoder = EventDecoder(EventConfig.from_properties({"topic.prefix": "p"}), catalog=catalog)
    records = [r for r in decoder.feed_rows(rows) if r.value is not None]
    after = {r.topic.rsplit(".", 1)[1]: r.value["after"] for r in records}
    assert (after["one"]["id"], after["one"]["a"], after["one"]["n"]) == (1, "x", Decimal("1.50"))
    assert (after["two"]["id"], after["two"]["a"], after["two"]["n"]) == (2, "y", None)
    assert (after["other"]["n"], after["other"]["b"]) == (Decimal("2.3"), b"\x00\xff")
    assert after["rekeyed"]["id"] == 4 and records[-1].key["a"] == "k"
    schemas = {}
    for row in rows:
        if row.data[:1] == b"R":
            oid = int.from_bytes(row.data[1:5], "big")
            table = decoder.table(oid)
            assert table is not None
            schemas[table.table_name] = table
    one, two, other, rekeyed = (schemas[n] for n in ("one", "two", "other", "rekeyed"))
    # one code for the three (a text column second; the others' converters are bound by
    # name), each table converting with its own (numeric scale, bytea); another key: other code
    for table in (two, other):
        assert table.structs.__code__ is one.structs.__code__
        assert table._fast_row.__code__ is one._fast_row.__code__
    assert rekeyed.structs.__code__ is not one.structs.__code__
