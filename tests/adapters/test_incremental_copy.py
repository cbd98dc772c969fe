"""The chunk reads of ``IncrementalSnapshotter`` through ``COPY (query) TO STDOUT`` (a
chunk query without an additional condition, its bound values written in as string
constants) give exactly the rows the extended protocol gives with the values bound:
the same text of every value, NULLs, and the same chunk boundaries, for keys and values
that COPY's text format escapes (tabs, newlines, backslashes, ``\\N`` as text) and keys
that quote, dollar or question-mark characters would break if they were pasted in."""

from __future__ import annotations

from typing import Any

from pgcdc_events.adapters.incremental import IncrementalSettings, IncrementalSnapshotter
from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.events.snapshot_sql import ChunkQueryBuilder, ChunkTable
from pgcdc_events.types.catalog import fetch_catalog

KEYS = ["plain", "it's", "back\\slash", "tab\there", "new\nline", "cr\rret", "ünïcødé ✓",
        "", "E'x", "\\N", "$1 ? :name", "'; SELECT 1; --", "\\x41"]


def test_copy_reads_equal_bound_reads(pg_conn: Any) -> None:
    pg_conn.run("CREATE TABLE t (k text, m int, v text, n numeric, a text[], b bytea, "
                "j jsonb, PRIMARY KEY (k, m))")
    for i, key in enumerate(KEYS):
        pg_conn.run("INSERT INTO t VALUES (:k, :m, :v, :n, :a, :b, :j)", k=key, m=i % 2,
                    v=None if i % 3 == 0 else key + "\t" + key, n=f"{i}.5" if i % 4 else "NaN",
                    a=[key, None, "x,y", "{q}"], b=key.encode(),
                    j=None if i % 5 == 0 else {"k": key})
    catalog = fetch_catalog(pg_conn)
    config = EventConfig.from_properties({"topic.prefix": "x"})
    settings = IncrementalSettings.from_properties({"signal.data.collection": "public.sig"})
    snapshotter = IncrementalSnapshotter(pg_conn, catalog, EventDecoder(config, catalog=catalog),
                                         settings)
    table = catalog.table("public", "t")
    assert table is not None
    chunk_table = ChunkTable.from_catalog(table, config)
    builder = ChunkQueryBuilder(chunk_size=2)
    width = len(table.columns)
    top = snapshotter._query(builder.max_key_query(chunk_table), None, width)
    maximum = [top[0][0], top[0][1]]
    end: list[Any] | None = None
    read: list[list[str | None]] = []
    while True:
        query = builder.chunk_query(chunk_table, chunk_end=end, maximum_key=maximum)
        copied = snapshotter._query(query, None, width, copy=True)
        bound = snapshotter._query(query, None, width, copy=False)
        assert copied == bound
        if not copied:
            break
        read += copied
        end = [copied[-1][0], copied[-1][1]]
    assert sorted(r[0] or "" for r in read) == sorted(KEYS)
    assert any(r[2] is None for r in read) and any(r[6] is None for r in read)
