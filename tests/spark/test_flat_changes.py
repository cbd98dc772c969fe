"""The flattened changes the apply targets consume, decoded straight from the capture.

:meth:`DecodedCapture.changes` flattens a table's column-wise runs in the Spark task (no
event struct); everything else goes through the table's events. Its rows must be what the
apply targets made before from the events (``changes_from_events`` of
:meth:`DecodedCapture.table`), and their columns what Debezium's flattening
(:func:`~pgcdc_events.spark.flatten.flatten`) gives, on every type family the type mapper
maps (:data:`~pgcdc_events.testing.values.SUPPORTED_TYPES` with type modifiers, and the
arrays of :data:`~pgcdc_events.testing.values.ARRAY_TYPES`), rows drawn by the testing
layer's value strategies, written by a real server. The types are split by the type mapper,
not by hand: a table of the columns a column-wise run can hold (whose runs must take the
fast path, counted by :meth:`DecodedCapture.flat_counts`) and a table of the others.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from pgcdc_events.events import EventConfig
from pgcdc_events.protocol.messages import Type
from pgcdc_events.spark import decode_capture
from pgcdc_events.spark._session import to_arrow_table
from pgcdc_events.spark.autocdc import OP, SEQUENCE, _physical, changes_from_events
from pgcdc_events.spark.capture import capture_dataframe
from pgcdc_events.spark.columnar import MIN_RUN, arrow_type
from pgcdc_events.spark.decode import ChangesFunction, by_position
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.flatten import flatten
from pgcdc_events.spark.layout import RUN_KIND, TableLayout
from pgcdc_events.spark.local import records_to_arrow
from pgcdc_events.spark.schema import SparkSchemaOptions
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
PROPS = {"topic.prefix": "t", "skipped.operations": "none"}
ROWS = MIN_RUN + 8  # one statement's changes: a run decoded column-wise
DELETED = ROWS - 5  # the deletes' run
SETTINGS = settings(max_examples=2, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck),
                    phases=(Phase.explicit, Phase.generate))  # no shrinking: Spark runs


def _split(conn: Any) -> tuple[list[str], list[str]]:
    """The types whose columns a column-wise run holds (an Arrow type for the Connect
    schema the type mapper gives), and the others."""
    oids = dict(conn.run("SELECT typname, oid::int FROM pg_type WHERE typname IN "
                         "('hstore', 'citext', 'ltree', 'geometry', 'geography')"))
    registry = TypeRegistry()
    for name, oid in oids.items():
        registry.observe(Type(oid, "public", name))
    mapper = TypeMapper(registry=registry)
    runs, others = [], []
    for sql in TYPES:
        t = column_type(sql)
        mapping = mapper.column("c", oids.get(t.name, t.oid), t.type_modifier)
        assert mapping is not None, sql
        (runs if arrow_type(mapping.schema) is not None else others).append(sql)
    return runs, others


def _ordered(table: Any) -> Any:
    """Changes in stream order (a key change's delete and create share their sequence)."""
    return table.take(pc.sort_indices(table, sort_keys=[(SEQUENCE, "ascending"),
                                                        (OP, "ascending")]))


def _first_difference(got: Any, want: Any) -> str:
    """Where two tables of changes differ ("": nowhere), temporal values as integers."""
    if got.num_rows != want.num_rows:
        return f"{got.num_rows} rows, want {want.num_rows}"
    if got.equals(want):
        return ""
    got, want = _physical(got), _physical(want)
    for name in want.column_names:
        a, b = got.column(name).to_pylist(), want.column(name).to_pylist()
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if repr(x) != repr(y):  # NaN is NaN
                return f"row {i}, column {name}: {x!r}, want {y!r}"
    return "schemas differ" if got.schema != want.schema else ""  # equal but for NaN


def _rows(table: Any) -> list[str]:
    """A table's rows as a sorted list of their texts (temporal values as integers)."""
    return sorted(repr(r) for r in _physical(table).to_pylist())


@pytest.fixture
def source(pg_conn: Any) -> Any:
    for extension in EXTENSIONS:
        pg_conn.run(f"CREATE EXTENSION IF NOT EXISTS {extension}")
    pg_conn.run("SET TIME ZONE 'UTC'")
    return pg_conn


@SETTINGS
@given(data=st.data())
def test_flattened_changes_are_the_events_flattened_on_every_type_family(
        spark: SparkSession, source: Any, data: Any) -> None:
    runs, others = _split(source)
    assert runs and others
    tables = {"runs": runs, "others": others}
    source.run("DROP TABLE IF EXISTS runs, others")
    source.run("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots")
    source.run("DROP PUBLICATION IF EXISTS pub")
    for name, types in tables.items():
        columns = ", ".join(f"c{i} {t}" for i, t in enumerate(types))
        source.run(f"CREATE TABLE {name} (id int PRIMARY KEY, {columns})")
    source.run("ALTER TABLE others REPLICA IDENTITY FULL")
    capturer = Capturer(source, tables=list(tables))

    def draw(types: list[str]) -> list[str]:
        return [data.draw(values(t), label=t).sql() for t in types]

    for name, types in tables.items():
        names = ", ".join(f"c{i}" for i in range(len(types)))
        drawn = [draw(types) for _ in range(3)]
        rows = ", ".join(f"({k}, {', '.join(drawn[k % 3])})" for k in range(1, ROWS + 1))
        source.run(f"INSERT INTO {name} (id, {names}) VALUES {rows}")  # a run of inserts
        changed = draw(types)
        source.run(f"UPDATE {name} SET " + ", ".join(
            f"c{i} = {v}" for i, v in enumerate(changed)))  # a run of updates
        source.run(f"DELETE FROM {name} WHERE id > {ROWS - DELETED}")  # a run of deletes
        source.run(f"INSERT INTO {name} (id) VALUES ({ROWS + 1})")  # single records
        source.run(f"UPDATE {name} SET c0 = {draw(types[:1])[0]} WHERE id = 1")
        source.run(f"UPDATE {name} SET id = {ROWS + 2} WHERE id = 2")  # a key change
    source.run("TRUNCATE runs")
    changes = capturer.changes()
    catalog = fetch_catalog(source)
    config = EventConfig.from_properties(PROPS)
    for persist in (False, True):
        decoded = decode_capture(capture_dataframe(spark, changes), config, catalog=catalog,
                                 persist=persist)
        try:
            for name in tables:
                table = f"public.{name}"
                before = decoded.flat_counts()
                got = _ordered(to_arrow_table(decoded.changes(table)))
                after = decoded.flat_counts()
                fast, slow = after[0] - before[0], after[1] - before[1]
                events = by_position(to_arrow_table(decoded.table(table)))
                want = _ordered(changes_from_events(events))
                problem = _first_difference(got, want)
                assert not problem, f"{table} (persisted: {persist}): {problem}"
                assert fast + slow == got.num_rows
                if name == "runs":  # the three runs took the fast path, the rest did not
                    assert fast == 2 * ROWS + DELETED, (fast, slow)
                else:
                    assert fast == 0, (fast, slow)
                # Debezium's flattening of the same events: the same rows
                flat = to_arrow_table(flatten(decoded.table(table),
                                              delete_handling_mode="rewrite"))
                flat = flat.drop_columns(["__deleted"])
                mine = got.filter(pc.not_equal(got.column(OP), "t")).drop_columns([OP, SEQUENCE])
                assert _rows(mine) == _rows(flat.cast(mine.schema)), table
        finally:
            decoded.unpersist()


def test_a_large_table_is_flattened_from_runs_alone(spark: SparkSession, source: Any) -> None:
    """Ordinary transactions of thousands of rows: every change but the truncate comes
    from a column-wise run."""
    source.run("CREATE TABLE big (id bigint PRIMARY KEY, name text, at timestamptz, "
               "amount numeric(12,2), flag boolean, note varchar(20))")
    capturer = Capturer(source, tables=["big"])
    source.run("INSERT INTO big SELECT g, 'name ' || g, now(), g * 1.25, g % 2 = 0, 'x' "
               "FROM generate_series(1, 5000) g")
    source.run("UPDATE big SET amount = amount + 1 WHERE id <= 2000")
    source.run("DELETE FROM big WHERE id > 4000")
    source.run("TRUNCATE big")
    decoded = decode_capture(capture_dataframe(spark, capturer.changes()),
                             EventConfig.from_properties(PROPS), catalog=fetch_catalog(source),
                             persist=False)
    got = to_arrow_table(decoded.changes("public.big"))
    assert decoded.flat_counts() == (5000 + 2000 + 1000, 1)
    ops = pc.value_counts(got.column(OP)).to_pylist()
    assert sorted((o["values"], o["counts"]) for o in ops) == [
        ("c", 5000), ("d", 1000), ("t", 1), ("u", 2000)]
    want = changes_from_events(by_position(to_arrow_table(decoded.table("public.big"))))
    assert not _first_difference(_ordered(got), _ordered(want))
    assert pa.types.is_string(got.schema.field(SEQUENCE).type)


def test_a_stream_layout_refuses_a_column_it_does_not_have(source: Any) -> None:
    """``strict`` (a stream's, whose layout is its catalog's): a change with a column added
    after the layout was made is refused, naming it, from a run and from a single record
    alike, as the events' projection refuses it; not strict, the column is left out."""
    source.run("CREATE TABLE grows (id int PRIMARY KEY, a int)")
    capturer = Capturer(source, tables=["grows"])
    source.run("INSERT INTO grows VALUES (0, 0)")
    source.run("ALTER TABLE grows ADD COLUMN b text")
    source.run(f"INSERT INTO grows SELECT g, g, 'x' FROM generate_series(1, {ROWS}) g")
    source.run("INSERT INTO grows VALUES (-1, -1, 'y')")
    records, versions = records_to_arrow(capturer.changes(), EventConfig.from_properties(PROPS))
    old = TableLayout("public.grows", versions["public.grows"][:1], SparkSchemaOptions("semantic"))
    mine = records.filter(pc.equal(records.column("table"), "public.grows"))
    run = mine.filter(pc.equal(mine.column("kind"), RUN_KIND))
    single = mine.filter(pc.equal(mine.column("position"), pc.max(mine.column("position"))))
    assert run.num_rows == 1 and single.column("kind").to_pylist() == ["change"]
    for part in (run, single):
        rows = part.select(["position", "index", "kind", "lsn", "payload"]).to_batches()
        with pytest.raises(SparkDecodeError, match=r"column 'b'|b\b") as caught:
            list(ChangesFunction(old, strict=True)(iter(rows)))
        assert "\n" not in str(caught.value)
        flat = pa.Table.from_batches(list(ChangesFunction(old)(iter(rows))))
        assert flat.column_names == ["id", "a", OP, SEQUENCE]
