"""The chunk SQL of incremental snapshots: ports of the connector's query-builder unit tests.

Expected strings and bound values are those of the Java assertions in
``debezium/debezium`` at ``refs/heads/3.6`` (commit 6f830f234f, 3.6.2-SNAPSHOT, the newest
3.6 commit stored; no v3.6.3.Final tag is), files
``debezium-connector-common/src/test/java/io/debezium/pipeline/source/snapshot/incremental/
RowValueConstructorChunkQueryBuilderTest.java`` (RVC below) and ``.../DefaultChunkQueryBuilderTest.java``
(DEFAULT below). The PostgreSQL connector uses the row-value builder
(``PostgresConnection.chunkQueryBuilder``) with NULLs sorting last; the default builder's
tests are ported too because the row-value builder falls back to it for nullable keys.
The Java tests hand the builder the additional condition directly; the connector wraps
it in parentheses first (``DataCollection.getAdditionalCondition``), checked last here
and in the 3.6.3.Final jar's bytecode.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from pgcdc_events.events import EventConfig
from pgcdc_events.events.incremental import SnapshotCollection
from pgcdc_events.events.snapshot_sql import (
    ChunkColumn,
    ChunkQuery,
    ChunkQueryBuilder,
    ChunkTable,
    SnapshotSqlError,
    parenthesized,
    quote_ident,
)
from pgcdc_events.types.catalog import fetch_catalog

RVC = "debezium-connector-common/src/test/java/io/debezium/pipeline/source/snapshot/incremental/" \
      "RowValueConstructorChunkQueryBuilderTest.java"

ROW_VALUES = ChunkQueryBuilder()
DEFAULT = ChunkQueryBuilder(row_values=False)
FOO = '"val1"=foo'


def table(*key: str, optional: tuple[str, ...] = (), others: tuple[str, ...] = ("val1", "val2"),
          projection: tuple[str, ...] | None = None) -> ChunkTable:
    """``s1.table1`` with the given key columns (``optional`` ones nullable) and others."""
    names = [*key, *others] if key else ["pk1", "pk2", "pk3", *others]
    columns = tuple(ChunkColumn(n, n in optional or n in others) for n in names)
    return ChunkTable("s1", "table1", columns, key, projection)


def three_optional(builder: ChunkQueryBuilder) -> tuple[ChunkQueryBuilder, ChunkTable]:
    """``message.key.columns=s1.table1:pk1,pk2,pk3`` on a table without PK, pk1/pk2 nullable."""
    columns = (ChunkColumn("pk1", True), ChunkColumn("pk2", True), ChunkColumn("pk3", False),
               ChunkColumn("val1", True))
    return builder, ChunkTable("s1", "table1", columns, ("pk1", "pk2", "pk3"))


# -- RowValueConstructorChunkQueryBuilderTest ---------------------------------------------


def test_rvc_build_query_one_pk_column() -> None:
    """debezium/debezium RVC ``testBuildQueryOnePkColumn``."""
    t = table("pk1")
    assert ROW_VALUES.chunk_query(t) == ChunkQuery(
        'SELECT * FROM "s1"."table1" ORDER BY "pk1" LIMIT 1024')
    assert ROW_VALUES.chunk_query(t, chunk_end=[1], maximum_key=[10]) == ChunkQuery(
        'SELECT * FROM "s1"."table1" WHERE "pk1" > ? AND "pk1" <= ? ORDER BY "pk1" LIMIT 1024',
        (1, 10))


def test_rvc_build_query_one_pk_column_with_additional_condition() -> None:
    """debezium/debezium RVC ``testBuildQueryOnePkColumnWithAdditionalCondition``."""
    t = table("pk1")
    assert ROW_VALUES.chunk_query(t, additional_condition=FOO).sql == \
        'SELECT * FROM "s1"."table1" WHERE "val1"=foo ORDER BY "pk1" LIMIT 1024'
    assert ROW_VALUES.chunk_query(t, chunk_end=[1], maximum_key=[10],
                                  additional_condition=FOO).sql == (
        'SELECT * FROM "s1"."table1" WHERE "pk1" > ? AND "pk1" <= ? AND "val1"=foo '
        'ORDER BY "pk1" LIMIT 1024')


def test_rvc_build_query_two_pk_columns_with_additional_condition_with_surrogate_key() -> None:
    """debezium/debezium RVC ``testBuildQueryTwoPkColumnsWithAdditionalConditionWithSurrogateKey``."""
    t = table("pk1", "pk2")
    assert ROW_VALUES.chunk_query(t, additional_condition=FOO, surrogate_key="pk2").sql == \
        'SELECT * FROM "s1"."table1" WHERE "val1"=foo ORDER BY "pk2" LIMIT 1024'
    assert ROW_VALUES.chunk_query(t, chunk_end=[1], maximum_key=[10], additional_condition=FOO,
                                  surrogate_key="pk2") == ChunkQuery(
        'SELECT * FROM "s1"."table1" WHERE "pk2" > ? AND "pk2" <= ? AND "val1"=foo '
        'ORDER BY "pk2" LIMIT 1024', (1, 10))


def test_rvc_build_query_three_pk_columns() -> None:
    """debezium/debezium RVC ``testBuildQueryThreePkColumns``."""
    t = table("pk1", "pk2", "pk3")
    assert ROW_VALUES.chunk_query(t).sql == \
        'SELECT * FROM "s1"."table1" ORDER BY "pk1", "pk2", "pk3" LIMIT 1024'
    assert ROW_VALUES.chunk_query(t, chunk_end=[1, 5, 3], maximum_key=[10, 50, 30]) == ChunkQuery(
        'SELECT * FROM "s1"."table1" WHERE ROW("pk1", "pk2", "pk3") > ROW(?, ?, ?) AND '
        'ROW("pk1", "pk2", "pk3") <= ROW(?, ?, ?) ORDER BY "pk1", "pk2", "pk3" LIMIT 1024',
        (1, 5, 3, 10, 50, 30))


def test_rvc_build_query_three_pk_columns_with_additional_condition() -> None:
    """debezium/debezium RVC ``testBuildQueryThreePkColumnsWithAdditionalCondition``."""
    t = table("pk1", "pk2", "pk3")
    assert ROW_VALUES.chunk_query(t, additional_condition=FOO).sql == \
        'SELECT * FROM "s1"."table1" WHERE "val1"=foo ORDER BY "pk1", "pk2", "pk3" LIMIT 1024'
    assert ROW_VALUES.chunk_query(t, chunk_end=[1, 5, 3], maximum_key=[10, 50, 30],
                                  additional_condition=FOO).sql == (
        'SELECT * FROM "s1"."table1" WHERE ROW("pk1", "pk2", "pk3") > ROW(?, ?, ?) AND '
        'ROW("pk1", "pk2", "pk3") <= ROW(?, ?, ?) AND "val1"=foo '
        'ORDER BY "pk1", "pk2", "pk3" LIMIT 1024')


@pytest.mark.parametrize("row_values", [True, False])
def test_build_query_optional_throws_unsupported(row_values: bool) -> None:
    """debezium/debezium RVC and DEFAULT ``testBuildQueryOptionalThrowsUnsupported``: a
    nullable key column with an unknown NULL sort order."""
    builder = ChunkQueryBuilder(row_values=row_values, nulls_sort_last=None)
    t = ChunkTable("s1", "table1", (ChunkColumn("pk1", True), ChunkColumn("val1", True)),
                   ("pk1",))
    with pytest.raises(SnapshotSqlError, match="^" + re.escape(
            "The sort order of NULL values in the incremental snapshot key is unknown.") + "$"):
        builder.chunk_query(t)


def test_rvc_build_query_optional_keys_nulls() -> None:
    """debezium/debezium RVC ``testBuildQueryOptionalKeysNulls``: a nullable key falls back
    to the OR form (the Java test uses NULLs first)."""
    builder, t = three_optional(ChunkQueryBuilder(nulls_sort_last=False))
    assert builder.chunk_query(t).sql == \
        'SELECT * FROM "s1"."table1" ORDER BY "pk1", "pk2", "pk3" LIMIT 1024'
    assert builder.chunk_query(t, chunk_end=[1, 5, 3], maximum_key=[10, 50, 30]).sql == (
        'SELECT * FROM "s1"."table1" WHERE '
        '((("pk1" > ? AND "pk1" IS NOT NULL)) '
        'OR ("pk1" = ? AND ("pk2" > ? AND "pk2" IS NOT NULL)) '
        'OR ("pk1" = ? AND "pk2" = ? AND "pk3" > ?)) '
        'AND NOT ((("pk1" > ? AND "pk1" IS NOT NULL)) '
        'OR ("pk1" = ? AND ("pk2" > ? AND "pk2" IS NOT NULL)) '
        'OR ("pk1" = ? AND "pk2" = ? AND "pk3" > ?)) '
        'ORDER BY "pk1", "pk2", "pk3" LIMIT 1024')


# -- DefaultChunkQueryBuilderTest ------------------------------------------------------------


def test_default_build_query_one_pk_column() -> None:
    """debezium/debezium DEFAULT ``testBuildQueryOnePkColumn``."""
    t = table("pk1")
    assert DEFAULT.chunk_query(t).sql == 'SELECT * FROM "s1"."table1" ORDER BY "pk1" LIMIT 1024'
    assert DEFAULT.chunk_query(t, chunk_end=[1], maximum_key=[10]) == ChunkQuery(
        'SELECT * FROM "s1"."table1" WHERE ("pk1" > ?) AND NOT ("pk1" > ?) '
        'ORDER BY "pk1" LIMIT 1024', (1, 10))


def test_default_build_query_one_pk_column_with_additional_condition() -> None:
    """debezium/debezium DEFAULT ``testBuildQueryOnePkColumnWithAdditionalCondition``."""
    t = table("pk1")
    assert DEFAULT.chunk_query(t, additional_condition=FOO).sql == \
        'SELECT * FROM "s1"."table1" WHERE "val1"=foo ORDER BY "pk1" LIMIT 1024'
    assert DEFAULT.chunk_query(t, chunk_end=[1], maximum_key=[10],
                               additional_condition=FOO).sql == (
        'SELECT * FROM "s1"."table1" WHERE ("pk1" > ?) AND NOT ("pk1" > ?) AND "val1"=foo '
        'ORDER BY "pk1" LIMIT 1024')


def test_default_build_query_two_pk_columns_with_additional_condition_with_surrogate_key(
        ) -> None:
    """debezium/debezium DEFAULT ``testBuildQueryTwoPkColumnsWithAdditionalConditionWithSurrogateKey``."""
    t = table("pk1", "pk2")
    assert DEFAULT.chunk_query(t, additional_condition=FOO, surrogate_key="pk2").sql == \
        'SELECT * FROM "s1"."table1" WHERE "val1"=foo ORDER BY "pk2" LIMIT 1024'
    assert DEFAULT.chunk_query(t, chunk_end=[1], maximum_key=[10], additional_condition=FOO,
                               surrogate_key="pk2").sql == (
        'SELECT * FROM "s1"."table1" WHERE ("pk2" > ?) AND NOT ("pk2" > ?) AND "val1"=foo '
        'ORDER BY "pk2" LIMIT 1024')


def test_default_build_query_three_pk_columns() -> None:
    """debezium/debezium DEFAULT ``testBuildQueryThreePkColumns``."""
    t = table("pk1", "pk2", "pk3")
    assert DEFAULT.chunk_query(t).sql == \
        'SELECT * FROM "s1"."table1" ORDER BY "pk1", "pk2", "pk3" LIMIT 1024'
    assert DEFAULT.chunk_query(t, chunk_end=[1, 5, 3], maximum_key=[10, 50, 30]) == ChunkQuery(
        'SELECT * FROM "s1"."table1" WHERE (("pk1" > ?) OR ("pk1" = ? AND "pk2" > ?) OR '
        '("pk1" = ? AND "pk2" = ? AND "pk3" > ?)) AND NOT (("pk1" > ?) OR ("pk1" = ? AND '
        '"pk2" > ?) OR ("pk1" = ? AND "pk2" = ? AND "pk3" > ?)) '
        'ORDER BY "pk1", "pk2", "pk3" LIMIT 1024',
        (1, 1, 5, 1, 5, 3, 10, 10, 50, 10, 50, 30))


def test_default_build_query_three_pk_columns_with_additional_condition() -> None:
    """debezium/debezium DEFAULT ``testBuildQueryThreePkColumnsWithAdditionalCondition``."""
    t = table("pk1", "pk2", "pk3")
    assert DEFAULT.chunk_query(t, additional_condition=FOO).sql == \
        'SELECT * FROM "s1"."table1" WHERE "val1"=foo ORDER BY "pk1", "pk2", "pk3" LIMIT 1024'
    assert DEFAULT.chunk_query(t, chunk_end=[1, 5, 3], maximum_key=[10, 50, 30],
                               additional_condition=FOO).sql == (
        'SELECT * FROM "s1"."table1" WHERE (("pk1" > ?) OR ("pk1" = ? AND "pk2" > ?) OR '
        '("pk1" = ? AND "pk2" = ? AND "pk3" > ?)) AND NOT (("pk1" > ?) OR ("pk1" = ? AND '
        '"pk2" > ?) OR ("pk1" = ? AND "pk2" = ? AND "pk3" > ?)) AND "val1"=foo '
        'ORDER BY "pk1", "pk2", "pk3" LIMIT 1024')


@pytest.mark.parametrize("builder", [DEFAULT, ROW_VALUES], ids=["default", "row_values"])
def test_build_query_two_pk_columns_with_surrogate_key(builder: ChunkQueryBuilder) -> None:
    """debezium/debezium DEFAULT ``testBuildQueryTwoPkColumnsWithSurrogateKey``."""
    assert builder.chunk_query(table("pk1", "pk2"), surrogate_key="pk2").sql == \
        'SELECT * FROM "s1"."table1" ORDER BY "pk2" LIMIT 1024'


def test_max_query() -> None:
    """debezium/debezium DEFAULT ``testMaxQuery``."""
    assert DEFAULT.max_key_query(table("pk1", "pk2")) == ChunkQuery(
        'SELECT * FROM "s1"."table1" ORDER BY "pk1" DESC, "pk2" DESC LIMIT 1')


def test_max_query_with_additional_condition() -> None:
    """debezium/debezium DEFAULT ``testMaxQueryWithAdditionalCondition``."""
    assert DEFAULT.max_key_query(table("pk1", "pk2"), additional_condition=FOO).sql == \
        'SELECT * FROM "s1"."table1" WHERE "val1"=foo ORDER BY "pk1" DESC, "pk2" DESC LIMIT 1'


def test_max_query_with_surrogate_key() -> None:
    """debezium/debezium DEFAULT ``testMaxQueryWithSurrogateKey``."""
    assert DEFAULT.max_key_query(table("pk1", "pk2"), surrogate_key="pk2").sql == \
        'SELECT * FROM "s1"."table1" ORDER BY "pk2" DESC LIMIT 1'


def test_build_projection_with_column_include_list() -> None:
    """debezium/debezium DEFAULT ``testBuildProjectionWithColumnIncludeList`` (DBZ-5727):
    ``column.include.list=.*\\.(pk1|pk2|val1|val2)$`` on a table with val3 too."""
    config = EventConfig.from_properties({"topic.prefix": "core",
                                          "column.include.list": r".*\.(pk1|pk2|val1|val2)$"})
    t = _two_pk_table(config)
    assert DEFAULT.chunk_query(t).sql == \
        'SELECT "pk1", "pk2", "val1", "val2" FROM "s1"."table1" ORDER BY "pk1", "pk2" LIMIT 1024'


def test_build_projection_with_column_exclude_list() -> None:
    """debezium/debezium DEFAULT ``testBuildProjectionWithColumnExcludeList`` (DBZ-5727)."""
    config = EventConfig.from_properties({"topic.prefix": "core",
                                          "column.exclude.list": r".*\.(pk2|val3)$"})
    t = _two_pk_table(config)
    assert DEFAULT.chunk_query(t).sql == \
        'SELECT "pk1", "val1", "val2" FROM "s1"."table1" ORDER BY "pk1", "pk2" LIMIT 1024'


def _two_pk_table(config: EventConfig) -> ChunkTable:
    """``createTwoPrimaryKeysTable`` with the configuration's column filter applied, as
    :meth:`ChunkTable.from_catalog` applies it."""
    names = ("pk1", "pk2", "val1", "val2", "val3")
    projection = tuple(n for n in names if config.includes_column("s1", "table1", n))
    return ChunkTable("s1", "table1", tuple(ChunkColumn(n, n.startswith("val")) for n in names),
                      ("pk1", "pk2"), projection)


def test_build_query_optional_keys_nulls_first() -> None:
    """debezium/debezium DEFAULT ``testBuildQueryOptionalKeysNullsFirst``."""
    builder, t = three_optional(ChunkQueryBuilder(row_values=False, nulls_sort_last=False))
    assert builder.chunk_query(t).sql == \
        'SELECT * FROM "s1"."table1" ORDER BY "pk1", "pk2", "pk3" LIMIT 1024'
    assert builder.chunk_query(t, chunk_end=[1, 5, 3], maximum_key=[10, 50, 30]).sql == (
        'SELECT * FROM "s1"."table1" WHERE '
        '((("pk1" > ? AND "pk1" IS NOT NULL)) '
        'OR ("pk1" = ? AND ("pk2" > ? AND "pk2" IS NOT NULL)) '
        'OR ("pk1" = ? AND "pk2" = ? AND "pk3" > ?)) '
        'AND NOT ((("pk1" > ? AND "pk1" IS NOT NULL)) '
        'OR ("pk1" = ? AND ("pk2" > ? AND "pk2" IS NOT NULL)) '
        'OR ("pk1" = ? AND "pk2" = ? AND "pk3" > ?)) '
        'ORDER BY "pk1", "pk2", "pk3" LIMIT 1024')
    query = builder.chunk_query(t, chunk_end=[1, None, 3], maximum_key=[None, 50, 30])
    assert query.sql == (
        'SELECT * FROM "s1"."table1" WHERE '
        '((("pk1" > ? AND "pk1" IS NOT NULL)) '
        'OR ("pk1" = ? AND "pk2" IS NOT NULL) '
        'OR ("pk1" = ? AND "pk2" IS NULL AND "pk3" > ?)) '
        'AND NOT (("pk1" IS NOT NULL) '
        'OR ("pk1" IS NULL AND ("pk2" > ? AND "pk2" IS NOT NULL)) '
        'OR ("pk1" IS NULL AND "pk2" = ? AND "pk3" > ?)) '
        'ORDER BY "pk1", "pk2", "pk3" LIMIT 1024')
    # bindTriangularParamsSkipNulls: one value per placeholder, NULLs left out
    assert query.params == (1, 1, 1, 3, 50, 50, 30)
    assert query.sql.count("?") == len(query.params)


def test_build_query_optional_keys_nulls_last() -> None:
    """debezium/debezium DEFAULT ``testBuildQueryOptionalKeysNullsLast``: PostgreSQL's
    order, and what the row-value builder PostgreSQL uses falls back to for these keys."""
    for builder in (ChunkQueryBuilder(row_values=False), ROW_VALUES):
        _, t = three_optional(builder)
        assert builder.chunk_query(t).sql == \
            'SELECT * FROM "s1"."table1" ORDER BY "pk1", "pk2", "pk3" LIMIT 1024'
        assert builder.chunk_query(t, chunk_end=[1, 5, 3], maximum_key=[10, 50, 30]) == \
            ChunkQuery(
                'SELECT * FROM "s1"."table1" WHERE '
                '((("pk1" > ? OR "pk1" IS NULL)) '
                'OR ("pk1" = ? AND ("pk2" > ? OR "pk2" IS NULL)) '
                'OR ("pk1" = ? AND "pk2" = ? AND "pk3" > ?)) '
                'AND NOT ((("pk1" > ? OR "pk1" IS NULL)) '
                'OR ("pk1" = ? AND ("pk2" > ? OR "pk2" IS NULL)) '
                'OR ("pk1" = ? AND "pk2" = ? AND "pk3" > ?)) '
                'ORDER BY "pk1", "pk2", "pk3" LIMIT 1024',
                (1, 1, 5, 1, 5, 3, 10, 10, 50, 10, 50, 30))
        query = builder.chunk_query(t, chunk_end=[1, None, 3], maximum_key=[None, 50, 30])
        assert query.sql == (
            'SELECT * FROM "s1"."table1" WHERE '
            '((("pk1" > ? OR "pk1" IS NULL)) '
            'OR ("pk1" = ? AND 1 = 0) '
            'OR ("pk1" = ? AND "pk2" IS NULL AND "pk3" > ?)) '
            'AND NOT ((1 = 0) '
            'OR ("pk1" IS NULL AND ("pk2" > ? OR "pk2" IS NULL)) '
            'OR ("pk1" IS NULL AND "pk2" = ? AND "pk3" > ?)) '
            'ORDER BY "pk1", "pk2", "pk3" LIMIT 1024')
        assert query.params == (1, 1, 1, 3, 50, 50, 30)


def test_build_query_three_pk_columns_and_message_key_columns_order() -> None:
    """debezium/debezium DEFAULT ``testBuildQueryThreePkColumnsAndMessageKeyColumnsOrder``
    (DBZ-7617): ``message.key.columns=s1.table1:pk2,pk1,pk3`` orders and bounds the chunks."""
    config = EventConfig.from_properties({"topic.prefix": "core",
                                          "message.key.columns": "s1.table1:pk2,pk1,pk3"})
    key = config.key_columns_for("s1", "table1")
    assert key == ("pk2", "pk1", "pk3")
    t = table(*key)
    assert DEFAULT.chunk_query(t).sql == \
        'SELECT * FROM "s1"."table1" ORDER BY "pk2", "pk1", "pk3" LIMIT 1024'
    assert DEFAULT.chunk_query(t, chunk_end=[1, 5, 3], maximum_key=[10, 50, 30]).sql == (
        'SELECT * FROM "s1"."table1" WHERE (("pk2" > ?) OR ("pk2" = ? AND "pk1" > ?) OR '
        '("pk2" = ? AND "pk1" = ? AND "pk3" > ?)) AND NOT (("pk2" > ?) OR ("pk2" = ? AND '
        '"pk1" > ?) OR ("pk2" = ? AND "pk1" = ? AND "pk3" > ?)) '
        'ORDER BY "pk2", "pk1", "pk3" LIMIT 1024')


def test_query_builder_throws_if_surrogate_key_does_not_exist() -> None:
    """debezium/debezium DEFAULT ``testQueryBuilderThrowsIllegalArgumentExceptionIfSurrogateKeyDoesNotExist``."""
    with pytest.raises(SnapshotSqlError,
                       match="^" + re.escape('Surrogate key "sk" doesn\'t exist in table '
                                             '"s1.table1"') + "$"):
        DEFAULT.chunk_query(table("pk1"), additional_condition=FOO, surrogate_key="sk")


# -- our own -----------------------------------------------------------------------------------


def test_the_connector_parenthesizes_additional_conditions() -> None:
    """3.6.3's ``DataCollection.getAdditionalCondition`` returns ``"(" + filter + ")"``
    (debezium-connector-common ``DataCollection.java`` at refs/heads/3.6, and the
    ``(\\u0001)`` concatenation in the 3.6.3.Final jar): an ``OR`` in a filter stays inside."""
    collection = SnapshotCollection("s1.table1", "color = 'blue' OR color = 'red'")
    assert collection.condition == "(color = 'blue' OR color = 'red')"
    assert parenthesized("") is None and parenthesized(None) is None
    t = table("id")
    assert ROW_VALUES.chunk_query(t, chunk_end=["5"], maximum_key=["9"],
                                  additional_condition=collection.condition).sql == (
        'SELECT * FROM "s1"."table1" WHERE "id" > ? AND "id" <= ? '
        "AND (color = 'blue' OR color = 'red') ORDER BY \"id\" LIMIT 1024")
    assert ROW_VALUES.max_key_query(t, additional_condition=collection.condition).sql == (
        "SELECT * FROM \"s1\".\"table1\" WHERE (color = 'blue' OR color = 'red') "
        'ORDER BY "id" DESC LIMIT 1')


def test_identifiers_are_quoted() -> None:
    weird = ChunkTable('Sch"ema', "Tab le", (ChunkColumn('i"d'), ChunkColumn("v")), ('i"d',))
    assert quote_ident('a"b') == '"a""b"'
    assert ROW_VALUES.chunk_query(weird, chunk_end=[1], maximum_key=[2], limit=7).sql == (
        'SELECT * FROM "Sch""ema"."Tab le" WHERE "i""d" > ? AND "i""d" <= ? '
        'ORDER BY "i""d" LIMIT 7')


def test_a_chunk_needs_a_key_and_matching_bounds() -> None:
    keyless = ChunkTable("s", "t", (ChunkColumn("v", True),), ())
    with pytest.raises(SnapshotSqlError, match="has no primary key"):
        ROW_VALUES.chunk_query(keyless)
    with pytest.raises(SnapshotSqlError, match="needs the table's maximum key"):
        ROW_VALUES.chunk_query(table("pk1"), chunk_end=[1])
    with pytest.raises(SnapshotSqlError, match="has 1 values for 2 key columns"):
        ROW_VALUES.chunk_query(table("pk1", "pk2"), chunk_end=[1], maximum_key=[1, 2])


def _literal_sql(query: ChunkQuery) -> str:
    """The query with its values inlined as quoted literals (for ``COPY (...) TO STDOUT``)."""
    out = query.sql
    for value in query.params:
        out = out.replace("?", "'" + str(value).replace("'", "''") + "'", 1)
    return out


def _run(conn: Any, query: ChunkQuery) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.run(_literal_sql(query))]


def test_chunks_walk_a_real_table_once(pg_conn: Any) -> None:
    """Against PostgreSQL 15: walking a table with nullable and composite keys chunk by
    chunk, the max-key query first, gives every row once, in key order (the NULL
    boundaries of ``insertsWithoutPksAndNull`` included: pk1, pk2 in {NULL, 20/2, 30/3})."""
    pg_conn.run("CREATE TABLE a42 (pk1 int, pk2 int, pk3 int NOT NULL, aa int)")
    rows = [(p1, p2, p3, i) for i, (p1, p2, p3) in enumerate(
        (p1, p2, p3) for p1 in (None, 20, 30) for p2 in (None, 2, 3) for p3 in (1, 2))]
    for row in rows:
        pg_conn.run("INSERT INTO a42 VALUES (:a, :b, :c, :d)", a=row[0], b=row[1], c=row[2],
                    d=row[3])
    pg_conn.run('CREATE TABLE "Odd ""t""" (k text PRIMARY KEY, n int)')
    pg_conn.run('INSERT INTO "Odd ""t""" SELECT \'k\' || g, g FROM generate_series(1, 7) g')
    catalog = fetch_catalog(pg_conn)
    config = EventConfig.from_properties({"topic.prefix": "x",
                                          "message.key.columns": "public.a42:pk1,pk2,pk3"})
    for name, size in (("a42", 1), ("a42", 4), ('Odd "t"', 3)):
        catalog_table = catalog.table("public", name)
        assert catalog_table is not None
        t = ChunkTable.from_catalog(catalog_table, config)
        builder = ChunkQueryBuilder(chunk_size=size)
        keys = builder.key_columns(t)
        positions = [t.columns.index(c) for c in keys]
        top = _run(pg_conn, builder.max_key_query(t))
        maximum = [top[0][p] for p in positions]
        seen: list[tuple[Any, ...]] = []
        end = None
        while True:
            chunk = _run(pg_conn, builder.chunk_query(t, chunk_end=end, maximum_key=maximum))
            if not chunk:
                break
            seen += chunk
            end = [chunk[-1][p] for p in positions]
        everything = _run(pg_conn, ChunkQuery(
            builder.chunk_query(t, limit=1000).sql))
        assert seen == everything, (name, size)
        assert len(seen) == (len(rows) if name == "a42" else 7)


def test_chunk_tables_from_the_catalog(pg_conn: Any) -> None:
    """``ChunkTable.from_catalog``: the event key (a unique index when there is no primary
    key, ``message.key.columns`` first), nullability from NOT NULL, and the projection of
    the included columns under ``column.exclude.list`` (``buildProjection``)."""
    pg_conn.run("CREATE TABLE u (a int NOT NULL, b text, c int, UNIQUE (a))")
    pg_conn.run("CREATE TABLE p (x int, y int, z text, PRIMARY KEY (y, x))")
    catalog = fetch_catalog(pg_conn)
    u, p = catalog.table("public", "u"), catalog.table("public", "p")
    assert u is not None and p is not None
    plain = ChunkTable.from_catalog(u)
    assert plain.key == ("a",) and plain.projection is None
    assert [(c.name, c.optional) for c in plain.columns] == [("a", False), ("b", True),
                                                             ("c", True)]
    config = EventConfig.from_properties({"topic.prefix": "x",
                                          "column.exclude.list": r"public\.p\.z",
                                          "message.key.columns": "public.u:b"})
    assert ChunkTable.from_catalog(p, config) == ChunkTable(
        "public", "p", (ChunkColumn("x"), ChunkColumn("y"), ChunkColumn("z", True)), ("y", "x"),
        ("x", "y"))
    assert ROW_VALUES.chunk_query(ChunkTable.from_catalog(p, config), chunk_end=[1, 2],
                                  maximum_key=[3, 4]).sql == (
        'SELECT "x", "y" FROM "public"."p" WHERE ROW("y", "x") > ROW(?, ?) AND '
        'ROW("y", "x") <= ROW(?, ?) ORDER BY "y", "x" LIMIT 1024')
    keyed = ChunkTable.from_catalog(u, config)
    assert keyed.key == ("b",)
    assert ROW_VALUES.chunk_query(keyed, chunk_end=["k"], maximum_key=["z"]).sql == (
        'SELECT "a", "b", "c" FROM "public"."u" WHERE (("b" > ? OR "b" IS NULL)) AND NOT '
        '(("b" > ? OR "b" IS NULL)) ORDER BY "b" LIMIT 1024')
