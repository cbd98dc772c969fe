"""A table of no column (``CREATE TABLE t ()``, which PostgreSQL allows and publishes) is in
the catalog snapshot: it was left out, so decoding its changes warned that the table was
not in the snapshot and keyed it by a replica identity it does not have."""

from __future__ import annotations

import warnings
from typing import Any

from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.types.catalog import CatalogMismatchWarning, fetch_catalog
from support.capture import Capturer


def test_a_table_of_no_column_is_in_the_snapshot_and_decodes_quietly(pg_conn: Any) -> None:
    pg_conn.run("CREATE TABLE empty ()")
    pg_conn.run("CREATE TABLE other (id int PRIMARY KEY)")
    capturer = Capturer(pg_conn, slot="zero_columns")
    pg_conn.run("INSERT INTO empty DEFAULT VALUES")
    rows = capturer.changes()
    catalog = fetch_catalog(pg_conn)
    capturer.drop()
    empty = catalog.table("public", "empty")
    assert empty is not None and empty.columns == ()
    assert catalog.table("public", "other") is not None
    decoder = EventDecoder(EventConfig.from_properties({"topic.prefix": "p"}), catalog=catalog)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CatalogMismatchWarning)
        records = decoder.feed_rows(rows)
    assert [(r.topic, r.op) for r in records] == [("p.public.empty", "c")]
