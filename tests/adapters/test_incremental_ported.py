"""More of the connector's own incremental snapshot tests, ported to :class:`IncrementalSnapshotter`.

Source: ``debezium/debezium``, branch ``3.6`` at 6f830f234f (the 3.6.3.Final tag is not in
the mirror; 3.6.1.Final and the branch hold the same methods but one, named below):
``debezium-embedded/src/test/java/io/debezium/pipeline/source/snapshot/incremental/
AbstractIncrementalSnapshotTest.java`` (``Abstract``) and ``debezium-connector-postgres/src/
test/java/io/debezium/connector/postgresql/IncrementalSnapshotIT.java`` (``PG IT``), whose
tables these are (``s1.a``, ``s1.b``, ``s1.a4``, ``s1.a42``, ``s1.anumeric``,
``s1.gencol_table``, in ``public`` here). The Java tests use ``ROW_COUNT = 1000`` and chunks
of 10 (the PG IT's configuration) or as the method sets; here ``ROW_COUNT`` is 100 and the
chunk sizes are scaled with it, so that each test still spans several windows. The
expected values are the Java assertions' (``consumeMixedWithIncrementalSnapshot``: the last
event per key, key ``i + 1`` maps to ``aa = i``). Where the Java test waits or sleeps for
a change to race the snapshot, the change runs at a snapshotter step here (``on_step``,
see the harness in test_incremental_snapshotter.py). The methods ported elsewhere are
listed in docs/snapshots.md.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from adapters.test_incremental_snapshotter import SIGNAL_DDL, Harness, replay
from pgcdc_events.adapters.incremental import IncrementalSnapshotter

ROW_COUNT = 100


def _populate(conn: Any, table: str, count: int = ROW_COUNT, start: int = 0) -> None:
    """``populateTable``: rows ``pk = i + 1``, ``aa = i``."""
    conn.run(f"INSERT INTO {table} (pk, aa) SELECT g + 1, g FROM generate_series(CAST(:a AS int), CAST(:b AS int)) g",
             a=start, b=start + count - 1)


def _populate4(conn: Any, table: str, count: int = ROW_COUNT, start: int = 0) -> None:
    """``populate4PkTable``: the id ``i + 1`` spread over four key columns by digit."""
    conn.run(f"INSERT INTO {table} (pk1, pk2, pk3, pk4, aa) SELECT (g + 1) / 1000, "
             "((g + 1) / 100) % 10, ((g + 1) / 10) % 10, (g + 1) % 10, g "
             "FROM generate_series(CAST(:a AS int), CAST(:b AS int)) g", a=start, b=start + count - 1)


def _changes(harness: Harness, table: str) -> dict[int, int]:
    """``consumeMixedWithIncrementalSnapshot``'s map: the key as one int -> ``aa``."""
    out: dict[int, int] = {}
    for key, after in replay(harness.of(table)).items():
        number = 0
        for part in key:
            number = number * 10 + int(part) if len(key) > 1 else int(Decimal(str(part)))
        out[number] = after["aa"]
    return out


def _setup(conn: Any) -> None:
    conn.run(SIGNAL_DDL)
    conn.run("CREATE TABLE a (pk serial PRIMARY KEY, aa integer)")
    conn.run("CREATE TABLE b (pk serial PRIMARY KEY, aa integer)")


def test_inserts_without_pks(pg_conn: Any) -> None:
    """Abstract ``insertsWithoutPks``: ``s1.a42`` has no primary key; the PG IT's
    ``message.key.columns=s1.a42:pk1,pk2,pk3,pk4`` keys its events and its chunks. Every
    row is read: ``entry(i + 1, i)`` for each of the ``ROW_COUNT`` rows."""
    pg_conn.run(SIGNAL_DDL)
    pg_conn.run("CREATE TABLE a42 (pk1 integer, pk2 integer, pk3 integer, pk4 integer, "
                "aa integer)")
    _populate4(pg_conn, "a42")
    h = Harness(pg_conn, chunk_size=10,
                properties={"message.key.columns": "public.a42:pk1,pk2,pk3,pk4"})
    h.signal("ad-hoc", "execute-snapshot", {"data-collections": ["public.a42"]})
    h.pump()
    changes = _changes(h, "a42")
    assert changes == {i + 1: i for i in range(ROW_COUNT)}
    assert len(h.reads("a42")) == ROW_COUNT


def test_inserts_4_pks(pg_conn: Any) -> None:
    """PG IT ``inserts4Pks``: a four-column primary key; ``ROW_COUNT`` more rows are
    inserted while the snapshot runs (the Java test sleeps 5 s; here: right after the
    open watermark of the fourth chunk). ``entry(i + 1, i)`` for ``ROW_COUNT * 2`` rows."""
    pg_conn.run(SIGNAL_DDL)
    pg_conn.run("CREATE TABLE a4 (pk1 integer, pk2 integer, pk3 integer, pk4 integer, "
                "aa integer, PRIMARY KEY (pk1, pk2, pk3, pk4))")
    _populate4(pg_conn, "a4")
    h = Harness(pg_conn, chunk_size=10)
    h.hooks.append(lambda n, step: _populate4(pg_conn, "a4", start=ROW_COUNT)
                   if (n, step) == (3, "after_open") else None)
    h.signal("ad-hoc", "execute-snapshot", {"data-collections": ["public.a4"]})
    h.pump()
    assert _changes(h, "a4") == {i + 1: i for i in range(ROW_COUNT * 2)}


def test_updates_large_chunk(pg_conn: Any) -> None:
    """Abstract ``updatesLargeChunk``: one chunk of ``ROW_COUNT`` rows; ``UPDATE ... SET
    aa = aa + 2000`` runs inside its window (right after the open watermark): no row is
    read (every key changed in the window) and the last event per key is the update,
    ``entry(i + 1, i + 2000)``."""
    _setup(pg_conn)
    _populate(pg_conn, "a")
    h = Harness(pg_conn, chunk_size=ROW_COUNT)
    h.at(0, "after_open", "UPDATE a SET aa = aa + 2000")
    h.signal("ad-hoc", "execute-snapshot", {"data-collections": ["public.a"]})
    h.pump()
    assert _changes(h, "a") == {i + 1: i + 2000 for i in range(ROW_COUNT)}
    assert h.reads("a") == []


def test_inserts_numeric_pk(pg_conn: Any) -> None:
    """PG IT ``insertsNumericPk``: ``s1.anumeric (pk numeric PRIMARY KEY)``, the key a
    VariableScaleDecimal; ``entry(i + 1, i)`` for every row."""
    pg_conn.run(SIGNAL_DDL)
    pg_conn.run("CREATE TABLE anumeric (pk numeric PRIMARY KEY, aa integer)")
    _populate(pg_conn, "anumeric")
    h = Harness(pg_conn, chunk_size=10)
    h.signal("ad-hoc", "execute-snapshot", {"data-collections": ["public.anumeric"]})
    h.pump()
    reads = [r for r in h.of("anumeric") if r.op == "r"]
    assert len(reads) == ROW_COUNT
    pk = reads[0].key_schema.field("pk") if reads[0].key_schema else None
    assert pk is not None and pk.schema.name == "io.debezium.data.VariableScaleDecimal"
    assert {int(r.key["pk"]["value"] if isinstance(r.key["pk"], dict) else
                _decimal(r.key["pk"])): r.value["after"]["aa"]
            for r in reads if r.key is not None and r.value is not None} == {
        i + 1: i for i in range(ROW_COUNT)}


def _decimal(struct: Any) -> Decimal:
    """A VariableScaleDecimal struct (``scale``, ``value`` as unscaled big-endian bytes)."""
    unscaled = int.from_bytes(struct["value"], "big", signed=True)
    return Decimal(unscaled).scaleb(-struct["scale"])


def test_regular_snapshot_when_additional_conditions_are_empty(pg_conn: Any) -> None:
    """Abstract ``shouldExecuteRegularSnapshotWhenAdditionalConditionEmpty``: an empty
    ``additional-conditions`` list and an empty ``surrogate-key`` snapshot the whole table
    by its primary key: ``ROW_COUNT`` rows."""
    _setup(pg_conn)
    _populate(pg_conn, "a")
    h = Harness(pg_conn, chunk_size=10)
    h.signal("ad-hoc", "execute-snapshot", {"data-collections": ["public.a"],
                                            "additional-conditions": [],
                                            "surrogate-key": ""})
    h.pump()
    assert len(h.reads("a")) == ROW_COUNT
    assert _changes(h, "a") == {i + 1: i for i in range(ROW_COUNT)}


def test_snapshot_with_new_additional_conditions_field(pg_conn: Any) -> None:
    """Abstract ``snapshotWithNewAdditionalConditionsField``: ``ROW_COUNT`` rows and 10
    more with ``aa = 12345678`` (``populateTableWithSpecificValue(2000, 10, 12345678)``);
    ``additional-conditions`` ``aa = 12345678``: exactly those 10 are read, each with
    that value."""
    _setup(pg_conn)
    _populate(pg_conn, "a")
    pg_conn.run("INSERT INTO a (pk, aa) SELECT g, 12345678 FROM generate_series(2001, 2010) g")
    h = Harness(pg_conn, chunk_size=10)
    h.signal("ad-hoc", "execute-snapshot", {
        "data-collections": ["public.a"], "surrogate-key": "",
        "additional-conditions": [{"data-collection": "public.a", "filter": "aa = 12345678"}]})
    h.pump()
    reads = [r for r in h.of("a") if r.op == "r"]
    assert len(reads) == 10
    assert all(r.value is not None and r.value["after"]["aa"] == 12345678 for r in reads)


def test_pause_during_snapshot(pg_conn: Any) -> None:
    """Abstract ``testPauseDuringSnapshot``: a ``pause-snapshot`` signal while chunks are
    read stops the reading (here it arrives in the third window: nothing after that
    window's rows is read, however long the stream runs); ``resume-snapshot`` goes on,
    and the rows after the pause are read: ``entry(i + 1, i)``."""
    _setup(pg_conn)
    _populate(pg_conn, "a")
    h = Harness(pg_conn, chunk_size=10)
    h.at(2, "after_open", "INSERT INTO debezium_signal VALUES ('test-pause', 'pause-snapshot', '')")
    h.signal("ad-hoc", "execute-snapshot", {"data-collections": ["public.a"]})
    h.pump()
    before_resume = len(h.reads("a"))
    assert before_resume == 30 and h.snap.context.paused and not h.snap.waiting
    pg_conn.run("INSERT INTO b (aa) VALUES (1)")  # the stream goes on: still paused
    h.pump()
    assert len(h.reads("a")) == before_resume
    h.signal("test-resume", "resume-snapshot", "")
    h.pump()
    assert len(h.reads("a")) == ROW_COUNT
    assert _changes(h, "a") == {i + 1: i for i in range(ROW_COUNT)}


def test_stop_with_all_collections_then_a_new_snapshot_after_restart(pg_conn: Any) -> None:
    """Abstract ``stopCurrentIncrementalSnapshotWithAllCollectionsAndTakeNewNewIncremental
    SnapshotAfterRestart``: a ``stop-snapshot`` naming the table being read ends the
    snapshot; a row inserted after it streams; a snapshotter restarted from the state
    saved then has no snapshot in progress; a new ``execute-snapshot`` with ``ROW_COUNT``
    rows inserted meanwhile gives ``entry(i + 1, i)`` for ``ROW_COUNT * 2 + 1`` rows."""
    _setup(pg_conn)
    _populate(pg_conn, "a")
    h = Harness(pg_conn, chunk_size=10)
    h.at(1, "after_open", "INSERT INTO debezium_signal VALUES ('ad-hoc-stop', 'stop-snapshot', "
                          "'{\"type\": \"INCREMENTAL\", \"data-collections\": [\"public.a\"]}')")
    h.signal("ad-hoc", "execute-snapshot", {"data-collections": ["public.a"]})
    h.pump()
    assert len(h.reads("a")) == 20 and not h.snap.context.running
    pg_conn.run("INSERT INTO a (pk, aa) VALUES (:pk, :aa)", pk=2 * ROW_COUNT + 1,
                aa=2 * ROW_COUNT)
    h.pump()
    assert h.saved == {}
    # the restart
    h.snap = IncrementalSnapshotter.from_properties(
        pg_conn, h.catalog, h.decoder,
        {"signal.data.collection": "public.debezium_signal",
         "incremental.snapshot.chunk.size": "10"}, state=h.saved, on_step=h._step)
    h.snap.start()
    assert not h.snap.context.running and not h.snap.waiting
    h.signal("ad-hoc-2", "execute-snapshot", {"data-collections": ["public.a"]})
    _populate(pg_conn, "a", start=ROW_COUNT)
    h.pump()
    assert _changes(h, "a") == {i + 1: i for i in range(ROW_COUNT * 2 + 1)}


def test_remove_started_collection_from_in_progress_snapshot(pg_conn: Any) -> None:
    """Abstract ``removeStartedCapturedCollectionFromInProgressIncrementalSnapshot``
    (chunks of 250 of 1000 rows there, 25 of 100 here): a snapshot of ``a`` and ``b``, then
    at once a stop of ``a``: the stop comes back in the stream after ``a``'s first chunk
    was read, and removes ``a`` from then on; ``b`` is snapshotted whole, with ``ROW_COUNT``
    rows inserted meanwhile: ``entry(i + 1, i)`` for ``ROW_COUNT * 2`` rows of ``b``."""
    _setup(pg_conn)
    _populate(pg_conn, "a")
    _populate(pg_conn, "b")
    h = Harness(pg_conn, chunk_size=25)
    h.signal("ad-hoc", "execute-snapshot", {"data-collections": ["public.a", "public.b"]})
    h.signal("ad-hoc-stop", "stop-snapshot", {"type": "INCREMENTAL",
                                              "data-collections": ["public.a"]})
    _populate(pg_conn, "b", start=ROW_COUNT)
    h.pump()
    assert _changes(h, "b") == {i + 1: i for i in range(ROW_COUNT * 2)}
    assert len(h.reads("a")) < ROW_COUNT
    assert len(h.reads("b")) == ROW_COUNT * 2


@pytest.mark.parametrize("exclude", [True, False], ids=["excluded", "not-excluded"])
def test_generated_column_left_out(pg_conn: Any, exclude: bool) -> None:
    """PG IT ``ignoreGeneratedColumn``: pgoutput does not send a stored generated column,
    and ``column.exclude.list`` leaves it out; the snapshot's ``r`` event has the same
    schema as the streamed inserts before and after it: no ``gencol`` field. The same
    without ``column.exclude.list`` (the Java test always sets it): the chunk query lists
    the stored columns, since ``SELECT *`` would return the generated one too."""
    pg_conn.run(SIGNAL_DDL)
    pg_conn.run("CREATE TABLE gencol_table (pk int, gencol varchar(10) GENERATED ALWAYS AS "
                "('aa') STORED, aa integer, bb varchar(2), PRIMARY KEY (pk))")
    h = Harness(pg_conn, chunk_size=10, properties={
        "column.exclude.list": "public.gencol_table.gencol"} if exclude else {})
    pg_conn.run("INSERT INTO gencol_table (pk, aa, bb) VALUES (1, 1, 'a')")
    h.signal("ad-hoc", "execute-snapshot", {"data-collections": ["public.gencol_table"]})
    h.pump()
    pg_conn.run("INSERT INTO gencol_table (pk, aa, bb) VALUES (2, 2, 'b')")
    h.pump()
    records = h.of("gencol_table")
    assert [r.op for r in records] == ["c", "r", "c"]
    for record in records:
        assert record.value_schema is not None
        after = record.value_schema.field("after").schema
        assert [f.name for f in after.fields] == ["pk", "aa", "bb"]
    read = records[1].value
    assert read is not None and read["after"].as_dict() == {"pk": 1, "aa": 1, "bb": "a"}


class _CrashError(Exception):
    pass


def test_snapshot_with_additional_condition_with_restart(pg_conn: Any) -> None:
    """Abstract ``snapshotWithAdditionalConditionWithRestart``: the filtered snapshot of
    ``snapshotWithNewAdditionalConditionsField`` (``aa = 12345678``, 10 rows among
    ``ROW_COUNT + 10``), and the connector restarted in the middle of it (there after 50
    records; here the snapshotter dies handling its second close watermark, as it reads
    the third chunk; chunks of 3).
    A snapshotter made from the state saved with the last output goes on with the same
    condition: ``dbChanges`` has the 10 keys, every value ``12345678``. (The 10 rows are
    every other key of 2001..2020 here, not 2001..2010, so that a condition lost in the
    restart would show: the rows between would be read.)"""
    _setup(pg_conn)
    _populate(pg_conn, "a")
    pg_conn.run("INSERT INTO a (pk, aa) SELECT g, CASE WHEN g % 2 = 1 THEN 12345678 ELSE 0 END "
                "FROM generate_series(2001, 2020) g")
    h = Harness(pg_conn, chunk_size=3)

    def crash(n: int, step: str) -> None:
        if (n, step) == (2, "before_close"):
            raise _CrashError

    h.hooks.append(crash)
    h.signal("ad-hoc", "execute-snapshot", {
        "data-collections": ["public.a"], "surrogate-key": "",
        "additional-conditions": [{"data-collection": "public.a", "filter": "aa = 12345678"}]})
    try:
        h.pump()
    except _CrashError:
        pass
    else:
        raise AssertionError("the snapshotter did not die")
    # the second window's r events were lost with it: only the first went out
    assert h.reads("a") == [(k,) for k in range(2001, 2007, 2)]
    restarted = Harness(pg_conn, chunk_size=3, cap=h.cap, decoder=h.decoder, state=h.saved)
    restarted.out = list(h.out)
    restarted.snap.start()
    restarted.pump()
    changes = _changes(restarted, "a")
    reads = [r for r in restarted.of("a") if r.op == "r"]
    assert sorted({r.key["pk"] for r in reads if r.key is not None}) == list(range(2001, 2021, 2))
    assert all(r.value is not None and r.value["after"]["aa"] == 12345678 for r in reads)
    assert {k: v for k, v in changes.items() if v == 12345678} == {
        k: 12345678 for k in range(2001, 2021, 2)}
    assert restarted.snap.state() == {}
