"""A Parquet capture read by the tasks themselves, and decoding fused with the tables' output.

``read_capture`` of a Parquet dataset gives a DataFrame whose decoding tasks read their
chunks' rows from the files by position (no shuffle into chunks); a capture decoded
without persisting (``persist=False``) gives each table's events from a decoding pass of
their own; ``write_tables`` decodes and writes in one pass. Each must give the records of
one ``EventDecoder`` fed the capture, whole: golden captures (snapshot blocks, transaction
metadata, truncates, filters and masks), generated workloads (streamed and two-phase
transactions), runs decoded column-wise, Parquet files whose rows are not in order.
"""

from __future__ import annotations

import glob
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest
from hypothesis import HealthCheck, given, settings

from pgcdc_events.events import EventConfig
from pgcdc_events.events.chunks import CONTROL_TYPES
from pgcdc_events.protocol import CaptureRow
from pgcdc_events.testing import Transaction, op_delete, op_insert, op_update, render, table
from pgcdc_events.testing.strategies import workloads
from pgcdc_events.testing.workload import Workload
from pgcdc_events.types.catalog import CatalogSnapshot
from support.golden import recordings
from support.spark_records import CLOCK_NS, RUN_ID, canonical, decoder_lines, first_difference

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

import pgcdc_events.spark.capture as capture_module
from pgcdc_events.spark import SparkSchemaOptions, decode_capture, read_capture
from pgcdc_events.spark.capture import (
    CONTROL_KEY,
    FileCapture,
    capture_table,
    write_capture_parquet,
)
from pgcdc_events.spark.local import by_position, decode_to_arrow
from pgcdc_events.spark.write import write_tables

SAMPLE = ("events/events-default", "events/events-txmeta-truncate-notombstones",
          "events_snapshot/snapshot-initial", "events_wide/wide-filters-masks")
GOLDEN = [r for r in recordings("*") if r.key in SAMPLE]
_TIME = ("ts_ms", "ts_us", "ts_ns")


def _parquet(rows: Sequence[CaptureRow], path: Path, *, reverse: bool = False,
             group: int = 5) -> str:
    """The capture as a Parquet file of small row groups (``reverse``: rows stored last
    first, positions unchanged)."""
    data = capture_table(rows)
    if reverse:
        data = data.take(pa.array(range(data.num_rows - 1, -1, -1)))
    pq.write_table(data, str(path), row_group_size=group)
    return str(path)


def _same_tables(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert list(got) == list(want)
    for name, expected in want.items():
        for column in expected.column_names:
            assert canonical(got[name].column(column)) == canonical(expected.column(column)), (
                name, column)


def check(spark: SparkSession, tmp_path: Path, rows: Sequence[CaptureRow], config: EventConfig,
          catalog: CatalogSnapshot | None, *, reverse: bool = False,
          chunk_messages: int = 3, footer: bool = False) -> None:
    """Records, tables (fused and projected) and written tables of the file path, each
    equal to the event layer's. ``footer``: the file written by ``write_capture_parquet``,
    its control messages taken from its footer (else by the control job)."""
    want = decoder_lines(rows, config, catalog)
    if footer:
        path = str(tmp_path / "capture.parquet")
        write_capture_parquet(rows, path, rows_per_group=5)
    else:
        path = _parquet(rows, tmp_path / "capture.parquet", reverse=reverse)
    frame = read_capture(spark, path)
    common: dict[str, Any] = dict(catalog=catalog, clock=lambda: CLOCK_NS, run_id=RUN_ID,
                                  chunk_messages=chunk_messages)
    decoded = decode_capture(frame, config, lines=True, tombstones=True, **common)
    try:
        assert decoded.source is not None and decoded.source.files is not None
        assert decoded.source.files.from_footers is footer
        got = [r["line"] for r in decoded.records.orderBy("position", "index")
               .select("line").collect()]
        problem = first_difference(got, want)
        assert not problem, problem
        # the JsonConverter lines write_tables writes, table by table, in file name order
        written = write_tables(decoded, str(tmp_path / "json"), fmt="json")
    finally:
        decoded.unpersist()
    by_topic: dict[str, list[str]] = {}
    for line in want:
        by_topic.setdefault(json.loads(line)["topic"], []).append(line)
    assert set(written) == set(decoded.tables)
    for name, count in written.items():
        lines = [line for part in sorted(glob.glob(str(tmp_path / "json" / name / "part-*")))
                 for line in Path(part).read_text().splitlines()]
        assert len(lines) == count
        assert lines == by_topic.get(decoded.topic(name), []), name
    # the tables: fused decoding passes and write_tables' Parquet, against the
    # record-by-record path in process
    reference = decode_to_arrow(rows, config, catalog, options=SparkSchemaOptions("semantic"),
                                tombstones=True, clock=lambda: CLOCK_NS, chunk_messages=3,
                                columnar=False)
    fused = decode_capture(frame, config, tombstones=True, persist=False, **common)
    _same_tables(fused.to_arrow(), reference)
    out = tmp_path / "parquet"
    counts = write_tables(fused, str(out))
    assert counts == {name: t.num_rows for name, t in reference.items()}
    back = {name: by_position(pq.read_table(out / name).select(reference[name].column_names))
            for name in fused.tables}
    _same_tables(back, reference)


@pytest.mark.parametrize("footer", [False, True], ids=["control-job", "footer"])
@pytest.mark.parametrize("recording", GOLDEN, ids=[r.key for r in GOLDEN])
def test_golden_parquet_capture_equals_the_decoder(recording: Any, spark: SparkSession,
                                                   tmp_path: Path, footer: bool) -> None:
    check(spark, tmp_path, recording.capture, EventConfig.from_properties(recording.properties),
          recording.catalog, footer=footer)


def test_a_footer_that_no_longer_describes_its_file_is_not_taken(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """write_capture_parquet's footer holds the file's control messages; a file rewritten
    from it with rows left out and the footer's key-value metadata copied (a tool that
    keeps them), or a capture with more control messages than ``CONTROL_KEPT``, is planned
    by the control job, and decodes as the decoder does."""
    recording = GOLDEN[0]
    rows = list(recording.capture)
    config = EventConfig.from_properties(recording.properties)
    whole = tmp_path / "whole.parquet"
    write_capture_parquet(rows, str(whole), rows_per_group=5)
    assert CONTROL_KEY in pq.ParquetFile(whole).metadata.metadata
    # the footer's rows are the control job's, read from the same rows without a footer
    from_job = FileCapture(_parquet(rows, tmp_path / "plain.parquet"), "position", True)
    from_footer = FileCapture(str(whole), "position", True)

    def control(files: FileCapture) -> list[tuple[Any, ...]]:
        return sorted((r["position"], r["lsn"], bytes(r["data"]), r["snapshot"])
                      for r in files.control(spark, CONTROL_TYPES))

    assert control(from_footer) == control(from_job)
    assert from_footer.from_footers and not from_job.from_footers
    assert len(control(from_job)) == sum(1 for r in rows if r.data[:1] in
                                         {bytes([t]) for t in CONTROL_TYPES})
    kept = len(rows) - 3  # the last 3 rows cut, the whole file's footer copied
    short = tmp_path / "short.parquet"
    footer = {k: v for k, v in pq.ParquetFile(whole).metadata.metadata.items()
              if k.startswith(b"pgcdc_events.")}
    with pq.ParquetWriter(short, pq.read_schema(whole)) as rewrite:
        rewrite.write_table(pq.read_table(whole).slice(0, kept))
        rewrite.add_key_value_metadata(footer)
    assert CONTROL_KEY in pq.ParquetFile(short).metadata.metadata  # the stale copy
    decoded = decode_capture(read_capture(spark, str(short)), config,
                             catalog=recording.catalog, lines=True, clock=lambda: CLOCK_NS,
                             run_id=RUN_ID, chunk_messages=3)
    assert decoded.source is not None and decoded.source.files is not None
    assert decoded.source.files.from_footers is False
    got = [r["line"] for r in decoded.records.orderBy("position", "index")
           .select("line").collect()]
    assert not first_difference(got, decoder_lines(rows[:kept], config, recording.catalog))
    decoded.unpersist()
    # a footer whose messages are not Arrow IPC, or whose description is not JSON: the job
    for broken in ({CONTROL_KEY: b"not arrow"}, {b"pgcdc_events.control_of": b"[1]"}):
        bad = tmp_path / "bad.parquet"
        with pq.ParquetWriter(bad, pq.read_schema(whole)) as rewrite:
            rewrite.write_table(pq.read_table(whole))
            rewrite.add_key_value_metadata({**footer, **broken})
        files = FileCapture(str(bad), "position", True)
        assert control(files) == control(from_job) and not files.from_footers
    controls = sum(1 for r in rows if r.data[:1] in (b"B", b"C", b"R"))
    many = tmp_path / "many.parquet"
    monkeypatch.setattr(capture_module, "CONTROL_KEPT", controls - 1)
    write_capture_parquet(rows, str(many))
    assert CONTROL_KEY not in (pq.ParquetFile(many).metadata.metadata or {})


def test_rows_out_of_order_in_the_files(spark: SparkSession, tmp_path: Path) -> None:
    recording = next(r for r in GOLDEN if r.key == "events/events-default")
    check(spark, tmp_path, recording.capture, EventConfig.from_properties(recording.properties),
          recording.catalog, reverse=True)


T = table("public.t", {"id": "int8", "name": "text", "amount": "numeric(12,2)",
                       "at": "timestamptz"}, primary_key="id")


def test_runs_read_from_the_files(spark: SparkSession, tmp_path: Path) -> None:
    rows = [{"id": i, "name": f"name {i}", "amount": f"{i * 1.25:.2f}",
             "at": f"2024-03-10 01:30:{i % 60:02d}.25+00"} for i in range(1, 201)]
    ops = ([op_insert(T, r) for r in rows] + [op_update(T, r, {**r, "name": "x"}) for r in rows]
           + [op_delete(T, {**r, "name": "x"}) for r in rows])
    workload = render([T], [Transaction(tuple(ops[:300])), Transaction(tuple(ops[300:]))])
    check(spark, tmp_path, workload.capture(), workload.decoder().config, workload.catalog,
          chunk_messages=50)


@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(workload=workloads(max_transactions=4, max_ops=5, streaming=True, two_phase=True))
def test_streamed_and_prepared_workloads(workload: Workload, spark: SparkSession,
                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    check(spark, tmp_path_factory.mktemp("w"), workload.capture(), workload.decoder().config,
          workload.catalog)


def test_a_derived_dataframe_is_shuffled(spark: SparkSession, tmp_path: Path) -> None:
    """A DataFrame made from read_capture's is another DataFrame: its rows are shuffled
    into chunks (a filter may have dropped rows the files still have)."""
    recording = next(r for r in GOLDEN if r.key == "events/events-default")
    config = EventConfig.from_properties(recording.properties)
    frame = read_capture(spark, _parquet(recording.capture, tmp_path / "c.parquet"))
    decoded = decode_capture(frame.filter("position >= 0"), config, catalog=recording.catalog)
    assert decoded.source is not None and decoded.source.files is None
    decoded.unpersist()
