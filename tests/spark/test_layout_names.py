"""A table's events go by its schema and table taken apart: a dot inside a name is part of
it (``public."x.y"``), and two tables whose names join alike are refused, not merged."""

from __future__ import annotations

from typing import Any

import pytest

from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.layout import (
    TableLayout,
    catalog_table_schemas,
    record_parts,
    record_table,
)
from pgcdc_events.spark.schema import SparkSchemaOptions
from pgcdc_events.types.catalog import fetch_catalog
from support.capture import Capturer

CONFIG = EventConfig.from_properties({"topic.prefix": "pgcdc"})


def test_a_table_named_with_a_dot(pg_conn: Any) -> None:
    pg_conn.run('CREATE TABLE public."x.y" (id int4 PRIMARY KEY, v text)')
    pg_conn.run("CREATE TABLE public.x (id int4 PRIMARY KEY)")
    capturer = Capturer(pg_conn, slot="dotted")
    pg_conn.run("""INSERT INTO public."x.y" VALUES (1, 'a'), (2, 'b')""")
    pg_conn.run("INSERT INTO public.x VALUES (9)")
    pg_conn.run("""UPDATE public."x.y" SET v = 'c' WHERE id = 1""")
    pg_conn.run("""DELETE FROM public."x.y" WHERE id = 2""")
    rows = capturer.changes()
    catalog = fetch_catalog(pg_conn)
    capturer.drop()

    decoder = EventDecoder(CONFIG, catalog=catalog)
    named: list[tuple[str | None, Any]] = []
    name = None
    for row in rows:
        for record in decoder.feed(row.data, row.lsn):
            name = record_table(record, name)
            named.append((name, record))
    dotted = [r for n, r in named if n == "public.x.y"]
    # what the server did to the table: two inserts, an update, a delete and its tombstone
    assert [(r.kind, r.op) for r in dotted] == [
        ("change", "c"), ("change", "c"), ("change", "u"), ("change", "d"), ("tombstone", None)]
    assert [n for n, r in named if r.kind in ("change", "tombstone")].count("public.x") == 1

    # the schema and the table apart, or their joined name: the same table
    by_pair = catalog_table_schemas(catalog, CONFIG, [("public", "x.y")])
    assert list(by_pair) == ["public.x.y"]
    assert (by_pair["public.x.y"].schema_name, by_pair["public.x.y"].table_name) == (
        "public", "x.y")
    assert list(catalog_table_schemas(catalog, CONFIG, ["public.x.y"])) == ["public.x.y"]

    layout = TableLayout("public.x.y", [by_pair["public.x.y"]],
                         SparkSchemaOptions("semantic"))
    batch = layout.batch([(i, 0, r.kind, r.lsn, record_parts(r)) for i, r in enumerate(dotted)])
    out = batch.to_pylist()
    assert [(r["op"], r["source"]["schema"], r["source"]["table"]) for r in out[:4]] == [
        ("c", "public", "x.y"), ("c", "public", "x.y"), ("u", "public", "x.y"),
        ("d", "public", "x.y")]
    assert [r["key"]["id"] for r in out] == [1, 2, 1, 2, 2]


def test_two_tables_whose_names_join_alike_are_refused(pg_conn: Any) -> None:
    pg_conn.run('CREATE TABLE public."x.y" (id int4 PRIMARY KEY)')
    pg_conn.run('CREATE SCHEMA "public.x"')
    pg_conn.run('CREATE TABLE "public.x".y (id text PRIMARY KEY)')
    catalog = fetch_catalog(pg_conn)
    with pytest.raises(SparkDecodeError) as caught:
        catalog_table_schemas(catalog, CONFIG)
    message = str(caught.value)
    assert "\n" not in message
    assert '"public"."x.y"' in message
    assert '"public.x"."y"' in message
    # excluding one of them leaves the other (the table filters see both as public.x.y)
    config = EventConfig.from_properties({"topic.prefix": "pgcdc",
                                          "schema.exclude.list": r"public\.x"})
    tables = catalog_table_schemas(catalog, config)
    assert [(t.schema_name, t.table_name) for t in tables.values()] == [("public", "x.y")]
