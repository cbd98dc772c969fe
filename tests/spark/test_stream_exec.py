"""``decode_stream`` decodes on the executors, in one query: the driver reads the control
messages and plans the chunks, the tasks decode them (the batch layer's task function) and
the tables' targets are applied in the same ``foreachBatch``; transactions of every size
(ordinary ones from one row to 100,000, and a streamed one) give the batch layer's events;
targets with ``apply_changes`` get the flattened changes and keep the same tables."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pg8000.native
import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from pgcdc_events.events import EventConfig
from pgcdc_events.events.chunks import CONTROL_TYPES
from pgcdc_events.events.decoder import EventDecoder
from pgcdc_events.protocol import CaptureRow
from pgcdc_events.spark import decode_capture
from pgcdc_events.spark._session import to_arrow_table
from pgcdc_events.spark.apply import ParquetTarget, PostgresTarget
from pgcdc_events.spark.capture import capture_dataframe
from pgcdc_events.spark.delta import DeltaTarget
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.stream import control_input, decode_stream, read_capture_stream
from pgcdc_events.types.catalog import fetch_catalog
from support.capture import Capturer
from support.capture_files import write_files
from support.golden import recordings
from support.spark_records import CLOCK_NS, RUN_ID, decoder_lines, first_difference, table_rows

RECORDING = next(r for r in recordings("events") if r.mode == "events-txmeta-truncate-notombstones")


def records_lines(path: Path, spark: SparkSession) -> list[str]:
    df = spark.read.parquet(str(path / "records"))
    return [r["line"] for r in df.orderBy("position", "index").select("line").collect()]


class Collect:
    """A ``foreachBatch`` target keeping every batch's events (as Arrow) by batch id."""

    def __init__(self) -> None:
        self.batches: dict[int, Any] = {}
        self.queries: set[str | None] = set()

    def __call__(self, df: Any, batch_id: int) -> None:
        self.batches[batch_id] = to_arrow_table(df)
        # what a DeltaTarget records as its application id
        self.queries.add(df.sparkSession.sparkContext.getLocalProperty(
            "sql.streaming.queryId"))

    def rows(self) -> list[dict[str, Any]]:
        return sorted((r for t in self.batches.values() for r in table_rows(t)),
                      key=lambda r: (r["_position"]["message"], r["_position"]["index"]))


def _strip(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "_position"}


def test_tasks_decode_and_the_driver_does_not(spark: SparkSession, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The chunks are decoded in Spark's Python workers (an accumulator the tasks add to
    counts them) and the driver's process decodes no change (no ``EventDecoder`` is fed
    a message there); the records and each table's events are one decoder's, through
    one streaming query."""
    fed = [0]
    for name in ("feed", "iter_feed"):
        original = getattr(EventDecoder, name)

        def counting(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            fed[0] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(EventDecoder, name, counting)
    rows = list(RECORDING.capture)
    config = EventConfig.from_properties(RECORDING.properties)
    write_files(tmp_path / "f", rows, [len(rows) // 3, 2 * len(rows) // 3])
    batch = decode_capture(capture_dataframe(spark, rows), config, catalog=RECORDING.catalog,
                           clock=lambda: CLOCK_NS, run_id=RUN_ID)
    want = batch.to_arrow()  # (the batch layer's driver feeds a decoder: its schemas)
    batch.unpersist()
    fed[0] = 0
    targets = {table: Collect() for table in want}
    stream = decode_stream(read_capture_stream(spark, str(tmp_path / "f"),
                                               max_files_per_trigger=1),
                           config, catalog=RECORDING.catalog, path=str(tmp_path / "o"),
                           checkpoint=str(tmp_path / "c"), clock=lambda: CLOCK_NS,
                           run_id=RUN_ID, lines=True, targets=targets, chunk_messages=5)
    query = stream.start()
    assert [q.id for q in spark.streams.active] == [query.id]  # one query
    query.processAllAvailable()
    stream.stop()
    assert fed[0] == 0, "the driver decoded"
    assert stream.chunks.value > len(stream.batches) >= 3  # several chunks per batch
    assert sum(b.chunks for b in stream.batches) == stream.chunks.value
    assert sum(b.records for b in stream.batches) == len(records_lines(tmp_path / "o", spark))
    problem = first_difference(records_lines(tmp_path / "o", spark),
                               decoder_lines(rows, config, RECORDING.catalog))
    assert not problem, problem
    assert len(targets) > 1  # applied side by side, each knowing the query
    for table, collect in targets.items():
        assert collect.queries == {str(query.id)}, table
        assert [_strip(r) for r in collect.rows()] == \
            [_strip(r) for r in table_rows(want[table])], table


def test_the_control_job_reads_only_the_control_messages_bytes(spark: SparkSession) -> None:
    """What the micro-batch's control job ships to the Python workers: every row's position,
    but the bytes of the control messages (Begin, Commit, Relation...) only."""
    rows = list(RECORDING.capture)
    df = capture_dataframe(spark, rows).selectExpr(
        "position", "lsn", "data", "false AS snapshot", "CAST(NULL AS long) AS segment")
    got = sorted((r["position"], r["data"]) for r in control_input(df).collect())
    assert [p for p, _ in got] == list(range(len(rows)))
    want = {i: bytes(r.data) for i, r in enumerate(rows) if r.data[0] in CONTROL_TYPES}
    assert {p: bytes(d) for p, d in got if d is not None} == want
    assert len(want) < len(rows) and any(r.data[:1] == b"I" for r in rows)


SIZES = (1, 31, 32, 1000, 100_000)


def test_transactions_of_every_size(spark: SparkSession, tmp_path: Path, pg_conn: Any) -> None:
    """Ordinary transactions of 1, 31, 32, 1,000 and 100,000 rows of one table (31 is
    decoded record by record, 32 and more column-wise) and a transaction the server
    streamed, in rotating files cut inside transactions: the target gets the batch
    layer's events, in as many chunks as the plan makes."""
    pg_conn.run("CREATE TABLE big (id int PRIMARY KEY, note text, n numeric(12, 2))")
    capturer = Capturer(pg_conn, tables=["big"])
    first = 0
    for size in SIZES:
        pg_conn.run("INSERT INTO big SELECT g, 'n' || g, g / 7.0 FROM generate_series("
                    "CAST(:a AS int), CAST(:b AS int)) g", a=first + 1, b=first + size)
        first += size
    pg_conn.run("UPDATE big SET note = 'u' WHERE id <= 40")
    rows: list[CaptureRow] = capturer.changes(proto_version=2)
    pg_conn.run("INSERT INTO big SELECT g, repeat('s', 200), 1 FROM generate_series("
                "CAST(:a AS int), CAST(:b AS int)) g", a=first + 1, b=first + 3000)
    pg_conn.run("DELETE FROM big WHERE id <= 31")
    rows += capturer.changes(proto_version=2, streaming=True, work_mem=64)
    assert any(r.data[:1] == b"S" for r in rows)  # a streamed transaction
    catalog = fetch_catalog(pg_conn)
    config = EventConfig.from_properties({"topic.prefix": "s", "skipped.operations": "none"})
    # files cut at the start, inside the big transaction, inside the streamed one
    starts = [i for i, r in enumerate(rows) if r.data[:1] == b"S"]
    write_files(tmp_path / "f", rows, [3, 60, len(rows) // 2, starts[1], starts[1] + 7])
    collect = Collect()
    stream = decode_stream(read_capture_stream(spark, str(tmp_path / "f"),
                                               max_files_per_trigger=2),
                           config, catalog=catalog, checkpoint=str(tmp_path / "c"),
                           clock=lambda: CLOCK_NS, run_id=RUN_ID,
                           targets={"public.big": collect}, chunk_messages=20_000)
    stream.start().processAllAvailable()
    stream.stop()
    assert not stream.batches[-1].pending
    assert any(b.chunks > 1 for b in stream.batches)  # the big batch in several chunks
    batch = decode_capture(capture_dataframe(spark, rows), config, catalog=catalog,
                           clock=lambda: CLOCK_NS, run_id=RUN_ID)
    want = table_rows(batch.to_arrow(["public.big"])["public.big"])
    batch.unpersist()
    got = collect.rows()
    assert len(got) == len(want) == sum(SIZES) + 40 + 3000 + 31
    for got_row, want_row in itertools.zip_longest(got, want):
        assert _strip(got_row) == _strip(want_row)


def test_a_failing_target_fails_the_query_in_one_line(spark: SparkSession,
                                                      tmp_path: Path) -> None:
    """A target's error stops the query with one line naming the batch, the table and
    the cause; a stream with neither a path nor a target is refused before it starts."""
    rows = list(RECORDING.capture)
    config = EventConfig.from_properties(RECORDING.properties)
    write_files(tmp_path / "f", rows, [])

    def broken(df: Any, batch_id: int) -> None:
        raise ValueError("the target is full")

    table = "public.ev_main"
    stream = decode_stream(read_capture_stream(spark, str(tmp_path / "f")), config,
                           catalog=RECORDING.catalog, checkpoint=str(tmp_path / "c"),
                           targets={table: broken})
    query = stream.start()
    with pytest.raises(Exception) as raised:
        query.processAllAvailable()
    stream.stop()
    line = ("SparkQueryError: the decoding query failed at micro-batch 0: SparkDecodeError: "
            f"applying {table}: ValueError: the target is full")
    assert line in str(raised.value).splitlines()[-1] or any(
        text.strip().endswith(line) for text in str(raised.value).splitlines()), raised.value
    assert not list((tmp_path / "c" / "_decoder").glob("state-*"))  # nothing recorded
    bare = decode_stream(read_capture_stream(spark, str(tmp_path / "f")), config,
                         catalog=RECORDING.catalog, checkpoint=str(tmp_path / "c2"))
    with pytest.raises(SparkDecodeError, match="nowhere to put the records"):
        bare.start()


# -- the targets get the flattened changes ----------------------------------------------

FLAT_TABLE = "public.flat"
COLUMNS = "id int PRIMARY KEY, note text, n numeric(12, 2), at timestamptz, flag boolean"


class EventsOf:
    """A plain ``foreachBatch`` function around a target: the events path."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.batches = 0

    def __call__(self, df: Any, batch_id: int) -> None:
        assert "after" in df.columns and "key" in df.columns  # the table's events
        self.batches += 1
        events = to_arrow_table(df)
        if isinstance(self.target, DeltaTarget):
            self.target.apply(events, batch_id, app_id=self.target.app_id_of(df))
        else:
            self.target.apply(events, batch_id)


def _rows(table: Any, columns: list[str]) -> list[str]:
    return sorted(repr({c: r.get(c) for c in columns}) for r in table.to_pylist())


def _parquet(spark: SparkSession, path: Path) -> Any:
    return to_arrow_table(spark.read.option("mergeSchema", "true").parquet(str(path)))


def _workload(conn: Any) -> None:
    """Ordinary transactions of 1 and 31 rows (record by record), a truncate, 32 and 1,000
    rows (column-wise runs), updates, a key change, deletes."""
    first = 0
    for size in (1, 31, 32, 1000):
        if size == 32:
            conn.run("TRUNCATE flat")
        conn.run("INSERT INTO flat SELECT g, 'n' || g, g / 7.0, "
                 "timestamptz '2024-01-01 00:00:00+00' + g * interval '1 minute', "
                 "g % 3 = 0 FROM generate_series(CAST(:a AS int), CAST(:b AS int)) g",
                 a=first + 1, b=first + size)
        first += size
    conn.run("UPDATE flat SET note = 'u', flag = NULL WHERE id <= 40")
    conn.run("UPDATE flat SET id = 5000 WHERE id = 5")
    conn.run("DELETE FROM flat WHERE id BETWEEN 100 AND 140")
    conn.run("UPDATE flat SET n = n + 1 WHERE id BETWEEN 500 AND 600")


def test_targets_get_the_flattened_changes_and_keep_the_same_tables(
        spark: SparkSession, tmp_path: Path, pg_conn: Any, pg_cluster: Any) -> None:
    """A target with ``apply_changes`` (Delta, Parquet, PostgreSQL) gets the table's
    flattened changes (runs flattened in the task, no event built: counted) and its key
    columns; the tables it keeps are those the same targets keep from the table's events
    (a plain ``foreachBatch`` function, which still gets the events), and ``SELECT *``."""
    pytest.importorskip("deltalake")
    pg_conn.run(f"CREATE TABLE flat ({COLUMNS})")
    pg_conn.run("CREATE SCHEMA tgt")
    pg_conn.run(f"CREATE TABLE tgt.flat ({COLUMNS})")
    capturer = Capturer(pg_conn, tables=["flat"])
    _workload(pg_conn)
    rows: list[CaptureRow] = capturer.changes(proto_version=2)
    catalog = fetch_catalog(pg_conn)
    database = pg_conn.run("SELECT current_database()")[0][0]

    def connect() -> Any:
        return pg8000.native.Connection(**{**pg_cluster.dsn(), "database": database})

    config = EventConfig.from_properties({"topic.prefix": "s", "skipped.operations": "none"})
    write_files(tmp_path / "f", rows, [2, 40, len(rows) // 2, len(rows) - 30])
    out = tmp_path / "o"
    flat = [DeltaTarget(str(out / "delta")), ParquetTarget(str(out / "parquet"), buckets=3),
            PostgresTarget(connect, "tgt", "flat")]
    events = [EventsOf(DeltaTarget(str(out / "delta-events"))),
              EventsOf(ParquetTarget(str(out / "parquet-events"), buckets=3))]
    stream = decode_stream(read_capture_stream(spark, str(tmp_path / "f"),
                                               max_files_per_trigger=2),
                           config, catalog=catalog, checkpoint=str(tmp_path / "c"),
                           chunk_messages=500)
    for target in [*flat, *events]:
        stream.apply(FLAT_TABLE, target)
    stream.start().processAllAvailable()
    stream.stop()
    assert len(stream.batches) >= 3 and not stream.batches[-1].pending
    assert all(e.batches for e in events)  # the plain functions got the events
    runs, records = stream.flat_counts()
    assert runs >= 1000 + 32 and records >= 31, (runs, records)  # both ways ran

    columns = ["id", "note", "n", "at", "flag"]
    source = pg_conn.run("SELECT id, note, n::text, at, flag FROM flat")
    assert len(source) == 1032 - 41
    delta = flat[0].read()
    assert _rows(delta, [*columns, "__SEQUENCE"]) == \
        _rows(events[0].target.read(), [*columns, "__SEQUENCE"])
    assert sorted(r["id"] for r in delta.to_pylist()) == sorted(r[0] for r in source)
    assert _rows(_parquet(spark, out / "parquet"), columns) == \
        _rows(_parquet(spark, out / "parquet-events"), columns)
    target = connect()
    try:
        assert sorted(map(tuple, target.run("SELECT id, note, n::text, at, flag FROM tgt.flat"))
                      ) == sorted(map(tuple, source))
    finally:
        target.close()
    assert stream.single_passes == 0  # targets given the events: the records are made

    # the same files, every target taking the one table's changes: decoded straight to
    # them (TableChangesFunction, no records rows), the same tables
    single = [DeltaTarget(str(out / "delta-single")),
              ParquetTarget(str(out / "parquet-single"), buckets=3)]
    again = decode_stream(read_capture_stream(spark, str(tmp_path / "f"),
                                              max_files_per_trigger=2),
                          config, catalog=catalog, checkpoint=str(tmp_path / "c-single"),
                          chunk_messages=500, targets={FLAT_TABLE: single[0]})
    again.apply(FLAT_TABLE, single[1])
    again.start().processAllAvailable()
    again.stop()
    assert _rows(single[0].read(), [*columns, "__SEQUENCE"]) == \
        _rows(delta, [*columns, "__SEQUENCE"])
    assert _rows(_parquet(spark, out / "parquet-single"), columns) == \
        _rows(_parquet(spark, out / "parquet"), columns)
    assert again.single_passes >= 3
    assert sum(b.records for b in again.batches) == sum(b.records for b in stream.batches)
    runs, records = again.flat_counts()
    assert runs >= 1000 + 32 and records >= 31, (runs, records)  # both ways ran


def test_a_table_created_after_the_catalog_is_applied(spark: SparkSession, tmp_path: Path,
                                                      pg_conn: Any) -> None:
    """``DecodedStream.apply_new_tables``: a table the catalog does not have (created after
    it was taken) gets its target when a micro-batch first holds its Relation message, and
    ends equal to ``SELECT *``; the catalog's tables are applied as before."""
    pytest.importorskip("deltalake")
    pg_conn.run("CREATE TABLE old (id int PRIMARY KEY, v text)")
    capturer = Capturer(pg_conn)  # FOR ALL TABLES
    catalog = fetch_catalog(pg_conn)
    pg_conn.run("INSERT INTO old SELECT g, 'o' FROM generate_series(1, 5) g")
    pg_conn.run("CREATE TABLE fresh (id int PRIMARY KEY, v text, n int)")
    pg_conn.run("INSERT INTO fresh SELECT g, 'f' || g, g FROM generate_series(1, 40) g")
    pg_conn.run("UPDATE fresh SET v = 'u' WHERE id <= 3")
    pg_conn.run("DELETE FROM fresh WHERE id = 4")
    pg_conn.run("INSERT INTO old VALUES (6, 'late')")
    rows = capturer.changes(proto_version=2)
    write_files(tmp_path / "f", rows, [len(rows) // 3, 2 * len(rows) // 3])
    config = EventConfig.from_properties({"topic.prefix": "s", "skipped.operations": "none"})
    made: list[str] = []

    def new_target(name: str, layout: Any) -> DeltaTarget:
        made.append(name)
        assert layout.key_type is not None and layout.key_type.fieldNames() == ["id"]
        return DeltaTarget(str(tmp_path / "o" / name))

    old = DeltaTarget(str(tmp_path / "o" / "old"))
    stream = decode_stream(read_capture_stream(spark, str(tmp_path / "f"),
                                               max_files_per_trigger=1),
                           config, catalog=catalog, checkpoint=str(tmp_path / "c"),
                           targets={"public.old": old})
    stream.apply_new_tables(new_target)
    stream.start().processAllAvailable()
    stream.stop()
    assert made == ["public.fresh"]
    fresh = DeltaTarget(str(tmp_path / "o" / "public.fresh")).read().to_pylist()
    assert sorted((r["id"], r["v"], r["n"]) for r in fresh) == \
        sorted(tuple(r) for r in pg_conn.run("SELECT id, v, n FROM fresh"))
    assert sorted((r["id"], r["v"]) for r in old.read().to_pylist()) == \
        sorted(tuple(r) for r in pg_conn.run("SELECT id, v FROM old"))
