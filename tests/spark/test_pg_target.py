"""The PostgreSQL target writes every type family the type mapper maps as it left the source.

A table with a column of every type the testing layer generates values for
(:data:`~pgcdc_events.testing.values.SUPPORTED_TYPES`, with type modifiers, and arrays of
:data:`~pgcdc_events.testing.values.ARRAY_TYPES`), rows drawn by its value strategies,
inserted, updated and deleted on a real server, captured, decoded by Spark, applied by
:class:`~pgcdc_events.spark.apply.PostgresTarget` to a table of the same definition in
another database: the target's ``SELECT *`` equals the source's, column by column. The
values Debezium does not carry whole are left out of the draw (a Connect value of null:
``NaN`` numerics, an array holding one) or compared as Debezium keeps them (a ``timetz``'s
offset, an unconstrained ``numeric``'s trailing zeros, a ``bit varying``'s leading zeros). Also: a table named ``"x.y"`` goes to
``"x.y"``, never to ``"x"."y"``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import pg8000.native
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from pgcdc_events.events import EventConfig
from pgcdc_events.protocol.messages import Type
from pgcdc_events.spark import decode_capture
from pgcdc_events.spark._session import to_arrow_table
from pgcdc_events.spark.apply import PostgresTarget
from pgcdc_events.spark.capture import capture_dataframe
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.values import parse_zoned_timestamp
from pgcdc_events.testing.pgtext import PgValue
from pgcdc_events.testing.tables import column_type
from pgcdc_events.testing.values import ARRAY_TYPES, SUPPORTED_TYPES, values
from pgcdc_events.types.catalog import fetch_catalog
from pgcdc_events.types.mapper import TypeMapper
from pgcdc_events.types.registry import TypeRegistry
from support.capture import Capturer

EXTENSIONS = ("hstore", "citext", "ltree", "postgis")
TYPES = [*SUPPORTED_TYPES, "numeric(10,2)", "numeric(3,3)", "varchar(5)", "bpchar(3)",
         "bit(3)", "varbit(5)", "time(3)", "timestamp(0)", "timetz(2)", "timestamptz(4)",
         *(t + "[]" for t in ARRAY_TYPES)]
#: Exact intervals (numeric mode's months are 30.4375 days: Debezium's, not exact).
PROPS = {"topic.prefix": "t", "skipped.operations": "none",
         "interval.handling.mode": "string"}
SETTINGS = settings(max_examples=4, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck),
                    phases=(Phase.explicit, Phase.generate))  # no shrinking: a Spark run each


def _compared(i: int, sql: str) -> str:
    """Column ``c{i}`` as compared: Debezium keeps a timetz in UTC (its offset is lost), an
    unconstrained numeric without trailing zeros and a bit varying without leading zeros."""
    name = f"c{i}"
    base = column_type(sql).name
    if base == "timetz":
        if sql.endswith("[]"):
            return f"ARRAY(SELECT x AT TIME ZONE 'UTC' FROM unnest({name}) x)::text"
        return f"({name} AT TIME ZONE 'UTC')::text"
    if base == "numeric" and column_type(sql).type_modifier < 0:
        if sql.endswith("[]"):
            return f"ARRAY(SELECT trim_scale(x) FROM unnest({name}) x)::text"
        return f"trim_scale({name})::text"
    if base == "varbit":
        return f"ltrim({name}::text, '0')"
    return f"{name}::text"


class Databases:
    def __init__(self, cluster: Any, source: Any) -> None:
        self.cluster = cluster
        self.source = source
        self.db = source.run("SELECT current_database()")[0][0]
        self.target_db = f"{self.db}_t"
        self.mappers: tuple[TypeMapper, dict[str, int]] = (TypeMapper(), {})

    def mapper(self) -> tuple[TypeMapper, dict[str, int]]:
        """A type mapper that knows the server's extension types by their OIDs."""
        oids = dict(self.source.run("SELECT typname, oid::int FROM pg_type WHERE typname IN "
                               "('hstore', 'citext', 'ltree', 'geometry', 'geography')"))
        registry = TypeRegistry()
        for name, oid in oids.items():
            registry.observe(Type(oid, "public", name))
        return TypeMapper(registry=registry), oids

    def target(self) -> Any:
        return pg8000.native.Connection(**{**self.cluster.dsn(), "database": self.target_db})

    def whole(self, sql: str, value: PgValue) -> bool:
        """Whether Debezium carries ``value`` whole: a Connect value, and for an array no
        null element but the source's NULL ones (and, for a timestamptz, a Spark value: not
        past 294247-01-10, where the semantic flavour has null)."""
        t = column_type(sql)
        mapper, oids = self.mappers
        mapping = mapper.column("c", oids.get(t.name, t.oid), t.type_modifier)
        assert mapping is not None, sql
        converted = mapping.convert(value.text_bytes)
        if converted is None:
            return False
        if t.name == "timestamptz":  # the semantic flavour's nulls past int64 microseconds
            items = converted if isinstance(converted, list) else [converted]
            if any(x is not None and not -(2**63) <= parse_zoned_timestamp(x) < 2**63
                   for x in items):
                return False
        if t.name == "timestamp" and _past_spark_range(value.text):
            return False  # Spark's timestamps are int64 microseconds: up to 294247-01-10
        if isinstance(converted, list) and isinstance(value.model, tuple):
            return converted.count(None) == value.model.count(None)
        return True


def _past_spark_range(text: str) -> bool:
    """A timestamp's text (or an array's) holding a year past 294246: no Spark value."""
    return any(int(year) > 294246 for year in re.findall(r"(?<![0-9])(\d{6})-\d\d-\d\d", text))


@pytest.fixture
def dbs(pg_cluster: Any, pg_conn: Any) -> Iterator[Databases]:
    d = Databases(pg_cluster, pg_conn)
    admin = pg8000.native.Connection(**pg_cluster.dsn())
    admin.run(f'CREATE DATABASE "{d.target_db}"')
    admin.close()
    try:
        yield d
    finally:
        admin = pg8000.native.Connection(**pg_cluster.dsn())
        with contextlib.suppress(Exception):
            admin.run(f'DROP DATABASE IF EXISTS "{d.target_db}" WITH (FORCE)')
        admin.close()


def _create(conn: Any, name: str = "every") -> None:
    for extension in EXTENSIONS:
        conn.run(f"CREATE EXTENSION IF NOT EXISTS {extension}")
    columns = ", ".join(f"c{i} {t}" for i, t in enumerate(TYPES))
    conn.run(f"CREATE TABLE {name} (id int PRIMARY KEY, {columns})")
    conn.run(f"ALTER TABLE {name} REPLICA IDENTITY FULL")


def _apply(spark: SparkSession, dbs: Databases, capturer: Capturer, target: PostgresTarget,
           batch: int, table: str = "public.every", flat: PostgresTarget | None = None
           ) -> None:
    rows = capturer.changes()
    catalog = fetch_catalog(dbs.source)
    decoded = decode_capture(capture_dataframe(spark, rows), EventConfig.from_properties(PROPS),
                             catalog=catalog)
    target.apply(to_arrow_table(decoded.table(table)), batch)
    if flat is not None:  # the flattened changes, as DecodedStream.apply gives them
        flat.apply(to_arrow_table(decoded.changes(table)), batch, keys=["id"])
    decoded.unpersist()


def _select(conn: Any, table: str = "every") -> list[list[Any]]:
    columns = ", ".join(_compared(i, t) for i, t in enumerate(TYPES))
    return [list(r) for r in conn.run(f"SELECT id, {columns} FROM {table} ORDER BY id")]


@SETTINGS
@given(data=st.data())
def test_every_type_family_arrives_as_it_left(spark: SparkSession, dbs: Databases,
                                              data: Any) -> None:
    source = dbs.source
    source.run("SET TIME ZONE 'UTC'")
    if not source.run("SELECT 1 FROM pg_class WHERE relname = 'every'"):
        _create(source)
        target = dbs.target()
        _create(target)
        _create(target, "every_flat")
        target.close()
        Capturer(source, tables=["every"])
    dbs.mappers = dbs.mapper()
    source.run("TRUNCATE every")
    capturer = Capturer(source, tables=["every"], create=False)
    capturer.changes()  # the truncate: not this example's
    target = dbs.target()
    target.run("TRUNCATE every, every_flat")
    target.run("DROP TABLE IF EXISTS pgcdc_applied")
    target.close()

    def draw_row() -> list[PgValue]:
        return [data.draw(values(t).filter(lambda v, t=t: dbs.whole(t, v)), label=t)
                for t in TYPES]

    columns = ", ".join(f"c{i}" for i in range(len(TYPES)))
    for key in range(1, 5):
        row = draw_row()
        source.run(f"INSERT INTO every (id, {columns}) VALUES ({key}, "
                   f"{', '.join(v.sql() for v in row)})")
    source.run("INSERT INTO every (id) VALUES (5)")  # every column NULL
    changed = draw_row()
    source.run("UPDATE every SET " + ", ".join(f"c{i} = {v.sql()}" for i, v in
                                               enumerate(changed)) + " WHERE id = 2")
    source.run("DELETE FROM every WHERE id = 3")
    pg = PostgresTarget(dbs.target, "public", "every")
    _apply(spark, dbs, capturer, pg, 0,
           flat=PostgresTarget(dbs.target, "public", "every_flat", name="flat"))
    target = dbs.target()
    target.run("SET TIME ZONE 'UTC'")
    try:
        want, got, flat = _select(source), _select(target), _select(target, "every_flat")
    finally:
        target.close()
    assert [r[0] for r in got] == [r[0] for r in want] == [r[0] for r in flat] == [1, 2, 4, 5]
    for w, g, f in zip(want, got, flat, strict=True):
        for i, (a, b, c) in enumerate(zip(w[1:], g[1:], f[1:], strict=True)):
            assert a == b, f"id {w[0]}, column c{i} {TYPES[i]}: source {a!r}, target {b!r}"
            assert a == c, f"id {w[0]}, column c{i} {TYPES[i]}: source {a!r}, from the " \
                f"flattened changes {c!r}"


def test_a_dotted_table_name_is_not_split(spark: SparkSession, dbs: Databases) -> None:
    """``public."x.y"`` goes to ``public."x.y"``; a table ``"public.x"."y"`` stays empty."""
    for conn in (dbs.source, dbs.target()):
        conn.run('CREATE TABLE "x.y" (id int PRIMARY KEY, v text)')
        conn.run('CREATE SCHEMA "public.x"')
        conn.run('CREATE TABLE "public.x"."y" (id int PRIMARY KEY, v text)')
    capturer = Capturer(dbs.source, tables=['"x.y"'])
    dbs.source.run("""INSERT INTO "x.y" VALUES (1, 'dotted')""")
    pg = PostgresTarget(dbs.target, "public", "x.y")
    _apply(spark, dbs, capturer, pg, 0, table="public.x.y")
    target = dbs.target()
    try:
        assert target.run('SELECT * FROM public."x.y"') == [[1, "dotted"]]
        assert target.run('SELECT * FROM "public.x"."y"') == []
    finally:
        target.close()


def test_a_missing_target_table_is_named(dbs: Databases) -> None:
    import pyarrow as pa  # noqa: PLC0415

    events = pa.table({"key": pa.array([{"id": 1}]), "after": pa.array([{"id": 1}]),
                       "op": ["c"], "_kind": ["change"],
                       "_position": pa.array([{"message": 1, "index": 0}])})
    with pytest.raises(SparkDecodeError, match=r'"public"\."nowhere" does not exist'):
        PostgresTarget(dbs.target, "public", "nowhere").apply(events, 0)


def test_text_for_a_bytea_column_is_refused() -> None:
    """binary.handling.mode=base64 or hex gives text: written as it is into bytea it would
    be other bytes, so the target names the column and the setting instead."""
    import pyarrow as pa  # noqa: PLC0415

    from pgcdc_events.spark.pgtext import PgColumn, column_text  # noqa: PLC0415

    column = PgColumn("b", "bytea", "bytea")
    assert column_text(pa.array([b"\x00\xff", None]), column, table="public.t") == [
        "\\x00ff", None]
    with pytest.raises(SparkDecodeError, match=r"public\.t\.b: .*binary\.handling\.mode=bytes"):
        column_text(pa.array(["AP8=", None]), column, table="public.t")


def test_targets_starting_at_once_create_the_bookkeeping_table_once(
        pg_conn: Any, pg_cluster: Any) -> None:
    """Several targets (one query per table) applying their first batch at the same moment:
    each creates ``pgcdc_applied`` if missing, which PostgreSQL's ``CREATE TABLE IF NOT
    EXISTS`` does not make safe (a unique violation on ``pg_type_typname_nsp_index``, seen
    in a full run of test_e2e_delta); every apply succeeds, every batch is recorded."""
    import threading  # noqa: PLC0415

    import pyarrow as pa  # noqa: PLC0415

    database = pg_conn.run("SELECT current_database()")[0][0]

    def connect() -> Any:
        return pg8000.native.Connection(**{**pg_cluster.dsn(), "database": database})

    for round_ in range(40):
        pg_conn.run("DROP TABLE IF EXISTS pgcdc_applied")
        targets = [PostgresTarget(connect, "public", f"t{i}") for i in range(8)]
        start = threading.Barrier(len(targets))
        errors: list[BaseException] = []

        def apply(target: PostgresTarget, start: threading.Barrier, batch: int,
                  errors: list[BaseException]) -> None:
            try:
                start.wait()
                target.apply(pa.table({}), batch)
            except BaseException as error:  # reported below
                errors.append(error)

        threads = [threading.Thread(target=apply, args=(t, start, round_, errors))
                   for t in targets]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors[0]
        assert pg_conn.run("SELECT count(*) FROM pgcdc_applied")[0][0] == len(targets)
