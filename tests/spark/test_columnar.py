"""Spark's column-wise runs give the events of the record-by-record path, whole.

The tables' events decoded with runs taken column-wise (:mod:`pgcdc_events.spark.columnar`,
runs of one message too) must be exactly those decoded with every message through the
``EventDecoder`` (whose records ``tests/spark/test_batch_golden.py`` checks against one
decoder's): every golden capture and generated workloads, both flavours, with and without
tombstones, without Spark; and a long-run capture through a real Spark session, its
tables' DataFrames and their written Parquet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest
from hypothesis import HealthCheck, given, settings

from pgcdc_events.events import EventConfig
from pgcdc_events.protocol import CaptureRow
from pgcdc_events.testing import Transaction, op_delete, op_insert, op_update, render, table
from pgcdc_events.testing.strategies import workloads
from pgcdc_events.testing.workload import Workload
from pgcdc_events.types.catalog import CatalogSnapshot
from support.golden import Recording, recordings
from support.spark_records import CLOCK_NS, canonical

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from pgcdc_events.spark import SparkSchemaOptions, capture_dataframe, decode_capture
from pgcdc_events.spark.layout import RUN_KIND
from pgcdc_events.spark.local import by_position, decode_to_arrow, records_to_arrow
from pgcdc_events.spark.write import write_tables

RECORDINGS = [r for r in recordings("*") if not r.meta.get("connector_failed")]


def _tables(rows: Sequence[CaptureRow], config: EventConfig, catalog: CatalogSnapshot | None,
            *, columnar: bool, flavour: str = "semantic", tombstones: bool = True,
            min_run: int = 1, batch_size: int = 7) -> dict[str, Any]:
    options = SparkSchemaOptions(flavour)  # type: ignore[arg-type]
    return decode_to_arrow(rows, config, catalog, options=options, tombstones=tombstones,
                           clock=lambda: CLOCK_NS, chunk_messages=3, batch_size=batch_size,
                           columnar=columnar, min_run=min_run)


def assert_same_events(got: dict[str, Any], want: dict[str, Any], *, exact: bool = True
                       ) -> None:
    """Every table's events: the same Spark schema and the same values, row by row
    (``exact=False``: types equal up to nullability, as Spark hands them back)."""
    def loose(schema: Any) -> list[tuple[str, str]]:
        return [(f.name, str(f.type).replace(" not null", "")) for f in schema]

    assert list(got) == list(want)
    for name, expected in want.items():
        if exact:
            assert got[name].schema == expected.schema, name
        else:
            assert loose(got[name].schema) == loose(expected.schema), name
        for column in expected.column_names:
            assert canonical(got[name].column(column)) == canonical(expected.column(column)), (
                name, column)


def _runs(rows: Sequence[CaptureRow], config: EventConfig, catalog: CatalogSnapshot | None,
          min_run: int = 1, batch_size: int = 7) -> int:
    records, _ = records_to_arrow(rows, config, catalog, clock=lambda: CLOCK_NS,
                                  chunk_messages=3, batch_size=batch_size, min_run=min_run)
    return records.column("kind").to_pylist().count(RUN_KIND)


@pytest.mark.parametrize("flavour", ["semantic", "literal"])
@pytest.mark.parametrize("recording", RECORDINGS, ids=[r.key for r in RECORDINGS])
def test_golden_capture_runs_equal_the_decoder(recording: Recording, flavour: str) -> None:
    config = EventConfig.from_properties(recording.properties)
    rows, catalog = recording.capture, recording.catalog
    assert_same_events(_tables(rows, config, catalog, columnar=True, flavour=flavour),
                       _tables(rows, config, catalog, columnar=False, flavour=flavour))


def test_golden_captures_have_runs() -> None:
    runs = sum(_runs(r.capture, EventConfig.from_properties(r.properties), r.catalog)
               for r in RECORDINGS)
    assert runs > 100, runs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(max_transactions=5, max_ops=8, interleave=False))
def test_generated_workload_runs_equal_the_decoder(workload: Workload) -> None:
    config, catalog, rows = workload.decoder().config, workload.catalog, workload.capture()
    assert_same_events(_tables(rows, config, catalog, columnar=True),
                       _tables(rows, config, catalog, columnar=False))


T = table("public.t", {"id": "int8", "name": "text", "amount": "numeric(12,2)", "ok": "bool",
                       "at": "timestamptz", "note": "varchar(20)"}, primary_key="id")


def long_runs(n: int = 60) -> Workload:
    """Runs of ``n`` inserts, updates and deletes of a six-column table."""
    rows = [{"id": i, "name": f"name {i}", "amount": f"{i * 1.25:.2f}", "ok": i % 2 == 0,
             "at": f"2024-03-10 01:30:{i % 60:02d}.25+00", "note": None if i % 3 else "x"}
            for i in range(1, n + 1)]
    ops = ([op_insert(T, r) for r in rows]
           + [op_update(T, r, {**r, "name": "renamed"}) for r in rows]
           + [op_delete(T, {**r, "name": "renamed"}) for r in rows])
    return render([T], [Transaction(tuple(ops[:n])), Transaction(tuple(ops[n:]))])


@pytest.mark.parametrize("tombstones", [True, False])
def test_long_runs_equal_the_decoder(tombstones: bool) -> None:
    workload = long_runs()
    config, catalog, rows = workload.decoder().config, workload.catalog, workload.capture()
    got = _tables(rows, config, catalog, columnar=True, tombstones=tombstones, min_run=32,
                  batch_size=1000)
    assert_same_events(got, _tables(rows, config, catalog, columnar=False,
                                    tombstones=tombstones))
    assert _runs(rows, config, catalog, min_run=32, batch_size=1000) == 3
    assert got["public.t"].num_rows == (240 if tombstones else 180)


def test_spark_session_runs_equal_the_decoder(spark: SparkSession, tmp_path: Any) -> None:
    """Through Spark (default run length): the tables' DataFrames and written Parquet."""
    workload = long_runs(300)
    config, catalog, rows = workload.decoder().config, workload.catalog, workload.capture()
    want = _tables(rows, config, catalog, columnar=False, tombstones=False)
    decoded = decode_capture(capture_dataframe(spark, rows), config, catalog=catalog,
                             clock=lambda: CLOCK_NS, chunk_messages=100)
    try:
        assert decoded.records.filter(decoded.records.kind == RUN_KIND).count() == 3
        assert_same_events(decoded.to_arrow(), want, exact=False)
        written = write_tables(decoded, str(tmp_path))
        assert written == {"public.t": 900}
        back = by_position(pq.read_table(tmp_path / "public.t").select(
            want["public.t"].column_names))
        assert_same_events({"public.t": back}, want, exact=False)
    finally:
        decoded.unpersist()


@pytest.mark.parametrize("flavour", ["semantic", "literal"])
@pytest.mark.parametrize("fraction", ["", ".5", ".123456", ".000001"])
def test_runs_of_timestamps_of_one_length(fraction: str, flavour: str) -> None:
    """Runs whose timestamptz values all have one length (the bytes moved at once when the
    fraction has the converter's width, else the string functions): equal to the decoder."""
    tz = table("public.z", {"id": "int8", "at": "timestamptz", "label": "text"},
               primary_key="id")
    rows = [{"id": i, "at": f"20{i % 90 + 10:02d}-0{i % 9 + 1}-1{i % 10} 0{i % 10}:3{i % 10}:"
             f"{i % 60:02d}{fraction}+00", "label": "x" * (i % 3)} for i in range(1, 81)]
    workload = render([tz], [Transaction(tuple(op_insert(tz, r) for r in rows))])
    config, catalog, capture = workload.decoder().config, workload.catalog, workload.capture()
    assert _runs(capture, config, catalog, min_run=32, batch_size=1000) == 1
    assert_same_events(_tables(capture, config, catalog, columnar=True, min_run=32,
                               batch_size=1000, flavour=flavour),
                       _tables(capture, config, catalog, columnar=False, flavour=flavour))
