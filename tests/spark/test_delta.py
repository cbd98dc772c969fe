"""The Delta target end to end: real changes (golden captures of a real PostgreSQL, every
type family the type mapper maps, unchanged TOAST, truncates and key changes) decoded by
Spark, applied batch by batch in shuffled order with replays. The SCD type 1 table equals
``latest_state`` (one Spark aggregation over the whole capture), the SCD type 2 table the
sequence of states the events describe; a replayed batch is not applied twice, whether
Spark replays it (same batch id: the table's ``txn``) or it comes again under a new id."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

import deltalake
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from pgcdc_events.events import EventConfig
from pgcdc_events.spark import decode_capture
from pgcdc_events.spark._session import to_arrow_table
from pgcdc_events.spark.autocdc import (
    END_AT,
    OP,
    ROW_SEQUENCE,
    SEQUENCE,
    START_AT,
    format_sequence,
)
from pgcdc_events.spark.capture import capture_dataframe
from pgcdc_events.spark.delta import TOMBSTONES, DeltaTarget
from pgcdc_events.spark.state import latest_state
from support.delta_history import duckdb_with_delta
from support.golden import recordings
from support.spark_records import canonical

RECORDINGS = ["types/default", "types_toast/default", "events/events-txmeta-truncate-notombstones"]
PLACEHOLDER = "__debezium_unavailable_value"
META = (ROW_SEQUENCE, START_AT, END_AT)


@pytest.fixture(scope="module")
def tables(spark: SparkSession) -> dict[str, tuple[Any, Any]]:
    """``recording:schema.table`` -> (its events as Arrow, ``latest_state`` as Arrow), for
    every keyed table of the recordings."""
    out = {}
    for recording in recordings():
        if recording.key not in RECORDINGS:
            continue
        config = EventConfig.from_properties(recording.properties)
        decoded = decode_capture(capture_dataframe(spark, list(recording.capture)), config,
                                 catalog=recording.catalog)
        for name in decoded.tables:
            events = decoded.to_arrow([name])[name]
            if "key" in events.column_names and events.num_rows > 1:
                out[f"{recording.key}:{name}"] = (
                    events, to_arrow_table(latest_state(decoded.table(name))))
        decoded.unpersist()
    assert len(out) >= 12, sorted(out)
    return out


def _rows(table: Any, drop: tuple[str, ...] = META) -> list[str]:
    names = sorted(n for n in table.column_names if n not in drop)
    columns = [canonical(table.column(n)) for n in names]
    return sorted(json.dumps(dict(zip(names, values, strict=True)), sort_keys=True, default=str)
                  for values in zip(*columns, strict=True))


def _order(events: Any) -> list[int]:
    positions = events.column("_position").to_pylist()
    return sorted(range(events.num_rows),
                  key=lambda i: (positions[i]["message"], positions[i]["index"]))


def _deliver(target: DeltaTarget, events: Any, seed: int) -> None:
    """The events cut into batches, delivered out of order, some twice: under the same
    batch id (Spark's replay) or under a new one (a file delivered again)."""
    rng = random.Random(seed)
    ordered = events.take(_order(events))
    batches, i = [], 0
    while i < ordered.num_rows:
        n = rng.randint(1, 4)
        batches.append(ordered.slice(i, n))
        i += n
    rng.shuffle(batches)
    batch_id = 0
    for batch in batches:
        target.apply(batch, batch_id)
        if rng.random() < 0.3:
            assert target.apply(batch, batch_id) is None  # the same id: skipped by txn
        if rng.random() < 0.3:
            batch_id += 1
            plan = target.apply(batch, batch_id)  # again under a new id: every change older
            assert plan is not None and plan.applied == 0
        batch_id += 1


def test_scd1_delta_table_equals_latest_state(tables: dict[str, tuple[Any, Any]],
                                              tmp_path: Path) -> None:
    checked = set()
    for n, (name, (events, want)) in enumerate(sorted(tables.items())):
        if PLACEHOLDER in json.dumps(canonical(want.to_struct_array()), default=str):
            continue  # latest_state keeps the TOAST placeholder: checked below
        for seed in range(3):
            target = DeltaTarget(str(tmp_path / f"{n}-{seed}"))
            _deliver(target, events, seed)
            got = deltalake.DeltaTable(target.path).to_pyarrow_table()
            assert _rows(got) == _rows(want), (name, seed)
        checked.add(name.split(":")[0])
    assert {"types/default", "events/events-txmeta-truncate-notombstones"} <= checked


def _states(events: Any, rows_from: Any = None
            ) -> list[tuple[tuple[int, int], str, dict[str, Any] | None]]:
    """(sequence, key, the row after) of each change in the decoder's order. With
    ``rows_from`` (the same statements on a table with REPLICA IDENTITY FULL), the rows are
    that table's: the source's real values, where ``events`` may hold unchanged-TOAST
    placeholders."""
    def changes(table: Any) -> list[tuple[str, Any, Any, Any]]:
        ordered = table.take(_order(table))
        return [(op, key, after, json.loads(source["sequence"])) for op, kind, key, after, source
                in zip(ordered.column("op").to_pylist(), ordered.column("_kind").to_pylist(),
                       canonical(ordered.column("key")), canonical(ordered.column("after")),
                       ordered.column("source").to_pylist(), strict=True)
                if kind == "change"]

    mine = changes(events)
    rows = [after for _, _, after, _ in changes(rows_from if rows_from is not None else events)]
    assert len(rows) == len(mine)
    return [((int(head or 0), int(lsn)), json.dumps(key, sort_keys=True, default=str),
             None if op == "d" else row)
            for (op, key, _, (head, lsn)), row in zip(mine, rows, strict=True)]


def _expected_history(events: Any, rows_from: Any = None) -> list[str]:
    versions = []
    current: dict[str, tuple[tuple[int, int], dict[str, Any]]] = {}
    for seq, key, row in _states(events, rows_from):
        if key in current and current[key][1] != row:
            versions.append((current[key][1], current[key][0], seq))
            del current[key]
        if row is not None and key not in current:
            current[key] = (seq, row)
    versions += [(row, start, None) for start, row in current.values()]
    return sorted(json.dumps({**row, "start": list(start), "end": end and list(end)},
                             sort_keys=True, default=str) for row, start, end in versions)


def _history(table: Any, drop: tuple[str, ...] = ()) -> list[str]:
    def seq(value: str | None) -> list[int] | None:
        return None if value is None else [int(p, 16) for p in value.split("/")]

    names = sorted(n for n in table.column_names if n not in META and n not in drop)
    columns = [canonical(table.column(n)) for n in names]
    starts, ends = table.column(START_AT).to_pylist(), table.column(END_AT).to_pylist()
    return sorted(json.dumps({**dict(zip(names, values, strict=True)), "start": seq(s),
                              "end": seq(e)}, sort_keys=True, default=str)
                  for s, e, *values in zip(starts, ends, *columns, strict=True))


# Debezium writes null, not a placeholder, for these unchanged TOASTed values (a
# variable-scale numeric and a geometry): nothing tells them from a real null.
NULL_TOAST = ("c_numeric", "c_geom")


def _without(rows: list[str], drop: tuple[str, ...]) -> list[str]:
    return sorted(json.dumps({k: v for k, v in json.loads(r).items() if k not in drop},
                             sort_keys=True) for r in rows)


def test_scd2_delta_table_is_the_sequence_of_states(tables: dict[str, tuple[Any, Any]],
                                                    tmp_path: Path) -> None:
    toast = 0
    for n, (name, (events, _)) in enumerate(sorted(tables.items())):
        if "t" in events.column("op").to_pylist():
            continue  # SCD type 2 applies no truncates (as AUTO CDC)
        target = DeltaTarget(str(tmp_path / str(n)), stored_as_scd_type=2)
        _deliver(target, events, n)
        got = deltalake.DeltaTable(target.path).to_pyarrow_table()
        if name.endswith("t_toast_default"):
            full = tables[name.replace("t_toast_default", "t_toast_full")][0]
            assert _without(_history(got), NULL_TOAST) == _without(
                _expected_history(events, full), NULL_TOAST)
            toast += 1
        else:
            assert _history(got) == _expected_history(events), name
        assert PLACEHOLDER not in json.dumps(canonical(got.to_struct_array()), default=str)
    assert toast == 1


def test_toast_in_scd1_keeps_the_stored_value(tables: dict[str, tuple[Any, Any]],
                                              tmp_path: Path) -> None:
    """The TOAST tables end with a delete: stop before it; the rows are the REPLICA
    IDENTITY FULL table's (the same statements), but for the values Debezium nulls."""
    name = "types_toast/default:public.t_toast_default"
    events = tables[name][0]
    full = tables["types_toast/default:public.t_toast_full"][0]
    order = _order(events)
    ops = events.column("op").to_pylist()
    last = max(i for i, j in enumerate(order) if ops[j] == "u")
    target = DeltaTarget(str(tmp_path / "toast"))
    _deliver(target, events.take(order[:last + 1]), 7)
    got = deltalake.DeltaTable(target.path).to_pyarrow_table()
    full_order = _order(full)
    want = full.take(full_order[:last + 1])
    rows: dict[str, Any] = {}
    for _, key, row in _states(want):
        rows[key] = row
    expected = sorted(json.dumps(r, sort_keys=True, default=str) for r in rows.values())
    assert _without(_rows(got), NULL_TOAST) == _without(expected, NULL_TOAST)
    assert PLACEHOLDER not in json.dumps(canonical(got.to_struct_array()), default=str)


def test_spark_replay_and_a_crash_between_the_two_commits(
        spark: SparkSession, tables: dict[str, tuple[Any, Any]], tmp_path: Path) -> None:
    """Through foreachBatch: a batch id the table records is skipped without reading the
    batch; a batch whose tombstones were written but not its MERGE is completed."""
    name = "events/events-txmeta-truncate-notombstones:public.ev_main"
    events, want = tables[name]
    ordered = events.take(_order(events))
    half = ordered.num_rows // 2
    target = DeltaTarget(str(tmp_path / "t"), app_id="q")
    target(spark.createDataFrame(ordered.slice(0, half).to_pylist(),
                                 schema=_spark_schema(spark, events)), 0)
    version = deltalake.DeltaTable(target.path).version()
    target(spark.createDataFrame([], "x int"), 0)  # a replayed id: not even read
    assert deltalake.DeltaTable(target.path).version() == version
    assert deltalake.DeltaTable(target.path).transaction_version("q") == 0

    class CrashError(Exception):
        pass

    merge = target._merge

    def crash(*args: Any) -> None:
        raise CrashError

    target._merge = crash  # type: ignore[method-assign]
    with pytest.raises(CrashError):
        target.apply(ordered.slice(half), 1)
    assert deltalake.DeltaTable(target.tombstone_path).transaction_version("q") == 1
    target._merge = merge  # type: ignore[method-assign]
    target.apply(ordered.slice(half), 1)  # the replay after the crash
    got = deltalake.DeltaTable(target.path)
    assert got.transaction_version("q") == 1
    assert _rows(got.to_pyarrow_table()) == _rows(want)
    assert Path(target.tombstone_path).name == TOMBSTONES


def _spark_schema(spark: SparkSession, events: Any) -> Any:
    return from_arrow_schema(events.schema)


def test_a_streaming_query_writes_one_merge_commit_per_batch(
        spark: SparkSession, tables: dict[str, tuple[Any, Any]], tmp_path: Path) -> None:
    """A real streaming query: its id names the application transaction, its batch ids are
    the versions; each batch is one commit of the table."""
    events, want = tables["types/default:public.t_scalar"]
    ordered = events.take(_order(events))
    source = tmp_path / "events"
    schema = _spark_schema(spark, events)
    step = max(1, ordered.num_rows // 3)
    for i in range(0, ordered.num_rows, step):
        spark.createDataFrame(ordered.slice(i, step).to_pylist(), schema=schema) \
            .coalesce(1).write.mode("append").parquet(str(source))
    target = DeltaTarget(str(tmp_path / "delta"))
    query = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
             .parquet(str(source)).writeStream.foreachBatch(target)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    table = deltalake.DeltaTable(target.path)
    batches = [b for b, _, _ in target.applied]
    assert batches == list(range(len(batches))) and len(batches) >= 3
    assert table.transaction_version(f"pgcdc-events:{query.id}") == batches[-1]
    assert table.version() == len(batches) - 1  # one commit per batch
    assert [h["operation"] for h in table.history()][:-1] == ["MERGE"] * (len(batches) - 1)
    assert _rows(table.to_pyarrow_table()) == _rows(want)


def test_duckdb_reads_the_table(tables: dict[str, tuple[Any, Any]], tmp_path: Path) -> None:
    duckdb = duckdb_with_delta()
    events, want = tables["types/default:public.t_scalar"]
    target = DeltaTarget(str(tmp_path / "d"))
    target.apply(events, 0)
    got = duckdb.sql(f"SELECT count(*) FROM delta_scan('{target.path}')").fetchone()
    assert got == (want.num_rows,)


def test_a_time_column_is_stored_as_microseconds(tables: dict[str, tuple[Any, Any]],
                                                 tmp_path: Path) -> None:
    events, want = tables["types/default:public.t_time"]
    target = DeltaTarget(str(tmp_path / "time"))
    target.apply(events, 0)
    got = deltalake.DeltaTable(target.path).to_pyarrow_table()
    durations = [f.name for f in want.schema if pa.types.is_duration(f.type)]
    assert durations
    for name in durations:
        assert got.schema.field(name).type == pa.int64()
        assert sorted(got.column(name).to_pylist(), key=repr) == sorted(
            want.column(name).cast(pa.int64()).to_pylist(), key=repr)


def test_a_new_column_is_added_without_stopping(tmp_path: Path) -> None:
    """Changes with a column the table does not have (``ADD COLUMN`` mid-stream): the MERGE
    adds it; older rows hold null in it. Also SCD type 2, and a late older change."""
    def batch(rows: list[tuple[int, str, str, int]], extra: list[Any] | None = None) -> Any:
        table = pa.table({"id": [r[0] for r in rows], "v": [r[1] for r in rows],
                          OP: [r[2] for r in rows],
                          SEQUENCE: [format_sequence(1, r[3]) for r in rows]})
        return table if extra is None else table.append_column("added", pa.array(extra))

    for scd in (1, 2):
        target = DeltaTarget(str(tmp_path / str(scd)), keys="id", stored_as_scd_type=scd)
        target.apply(batch([(1, "a", "c", 1), (2, "b", "c", 2)]), 0)
        target.apply(batch([(3, "c", "c", 5), (1, "a2", "u", 6)], [30, 10]), 1)
        target.apply(batch([(1, "late", "u", 3)]), 2)  # older than the stored row
        got = deltalake.DeltaTable(target.path).to_pyarrow_table()
        assert "added" in got.column_names
        rows = {(r["id"], r["v"], r["added"]) for r in got.to_pylist()
                if r.get(END_AT) is None}
        assert rows == {(1, "a2", 10), (2, "b", None), (3, "c", 30)}, scd
        if scd == 2:
            history = sorted((r["id"], r["v"]) for r in got.to_pylist() if r["id"] == 1)
            assert history == [(1, "a"), (1, "a2"), (1, "late")]
