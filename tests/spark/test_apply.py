"""Applying change events to a Parquet directory batch by batch (``ParquetTarget``), a batch
replayed, equals the table rebuilt independently: ``latest_state`` (one Spark aggregation) on
the whole capture, and the event layer's own records applied in order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from pgcdc_events.events import EventConfig
from pgcdc_events.spark import decode_capture
from pgcdc_events.spark._session import to_arrow_table
from pgcdc_events.spark.apply import ParquetTarget, net_changes
from pgcdc_events.spark.capture import capture_dataframe
from pgcdc_events.spark.state import latest_state
from support.golden import recordings
from support.spark_records import canonical

RECORDING = next(r for r in recordings("events") if r.mode == "events-txmeta-truncate-notombstones")


def _rows(table: Any) -> list[str]:
    columns = {name: canonical(table.column(name)) for name in table.column_names}
    return sorted(json.dumps(dict(zip(columns, values, strict=True)), sort_keys=True,
                             default=str) for values in zip(*columns.values(), strict=True))


def test_parquet_target_follows_the_table(spark: SparkSession, tmp_path: Path) -> None:
    config = EventConfig.from_properties(RECORDING.properties)
    assert "t" not in config.skipped_operations
    rows = list(RECORDING.capture)
    decoded = decode_capture(capture_dataframe(spark, rows), config, catalog=RECORDING.catalog)
    checked = 0
    for table in decoded.tables:
        events = decoded.to_arrow([table])[table]
        if "key" not in events.column_names:
            continue
        target = ParquetTarget(str(tmp_path / table), buckets=4)
        step = max(1, events.num_rows // 5)
        batches = [events.slice(i, step) for i in range(0, events.num_rows, step)]
        for batch_id, batch in enumerate(batches):
            target.apply(batch, batch_id)
            if batch_id == 1:  # a replay of an applied batch (the marker not yet written)
                target.apply(batch, batch_id)
        target(spark.createDataFrame([], "x int"), 1)  # a replayed id: skipped, no read
        got = pa_read(spark, tmp_path / table)
        want = to_arrow_table(latest_state(decoded.table(table)))
        assert _rows(got) == _rows(want), table
        # only the touched files were rewritten: a one-key batch rewrites one file
        assert all(n <= 4 for _, _, n in target.applied)
        checked += 1
    decoded.unpersist()
    assert checked >= 2


def pa_read(spark: SparkSession, path: Path) -> Any:
    return to_arrow_table(spark.read.option("mergeSchema", "true").parquet(str(path)))


def test_net_changes_follow_the_decoders_order(spark: SparkSession) -> None:
    """A key changed, deleted, re-inserted, truncated: the net effect, from events given out
    of order (Spark keeps no order), is by ``_position``."""
    config = EventConfig.from_properties(RECORDING.properties)
    decoded = decode_capture(capture_dataframe(spark, list(RECORDING.capture)), config,
                             catalog=RECORDING.catalog)
    table = next(t for t in decoded.tables
                 if "key" in decoded.to_arrow([t])[t].column_names)
    events = decoded.to_arrow([table])[table]
    shuffled = events.take(list(reversed(range(events.num_rows))))
    a, b = net_changes(events), net_changes(shuffled)
    assert a.rows == b.rows and a.truncated == b.truncated and a.events == b.events > 0
    decoded.unpersist()
