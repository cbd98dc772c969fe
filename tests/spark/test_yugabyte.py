"""YugabyteDB records in Spark (pgcdc_events.spark.yugabyte): PGCompatible over a DataFrame.

The reference is the pure-Python transform (pgcdc_events.events.yugabyte_transforms
.pg_compatible, itself refereed by PGCompatibleTest, tests/yugabyte/test_transforms.py: the
yugabyte/debezium copy at 52515b4ac and the yugabyte/debezium-connector-yugabytedb copy at
9607fea3cea1425f9df675dd77bea194b0ce98f1):
the DataFrame path must give, row for row, the values it gives.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from pyspark.sql import Row, SparkSession

from pgcdc_events.events.yugabyte_transforms import pg_compatible
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.yugabyte import pg_compatible_columns, yugabyte_dataframe
from pgcdc_events.testing.yugabyte import YugabyteWorkload, yugabyte_workloads
from support.yboutput import run_python_blocks


def _plain(value: Any) -> Any:
    if isinstance(value, Row):
        return {k: _plain(v) for k, v in value.asDict().items()}
    return value


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(yugabyte_workloads())
def test_pg_compatible_columns_equals_the_record_transform(spark: SparkSession,
                                                           workload: YugabyteWorkload) -> None:
    records = [r for r in workload.records() if r.value is not None]
    frame = pg_compatible_columns(yugabyte_dataframe(spark, records))
    rows = frame.collect()
    assert len(rows) == len(records)
    for row, record in zip(rows, records, strict=True):
        expected = pg_compatible(record)
        assert expected.value is not None and expected.key is not None
        assert _plain(row["key"]) == expected.key.as_dict()
        for part in ("before", "after"):
            want = expected.value[part]
            assert _plain(row[part]) == (None if want is None else want.as_dict())
        assert row["op"] == expected.value["op"]
        assert _plain(row["source"]) == expected.value["source"].as_dict()


def test_yugabyte_dataframe_refuses_tombstones(spark: SparkSession) -> None:
    from pgcdc_events.testing.yugabyte import YbColumn, YbOp  # noqa: PLC0415
    workload = YugabyteWorkload("public", "t", (YbColumn("pk", "integer", key=True),), (
        (YbOp("insert", (1,), {"pk": 1}),), (YbOp("delete", (1,)),)))
    with pytest.raises(SparkDecodeError, match="tombstone"):
        yugabyte_dataframe(spark, workload.records())


def test_the_spark_example_of_the_docs_runs(spark: SparkSession, tmp_path: Any,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/yugabytedb.md, "A YugabyteDB pipeline on Spark", as written (getOrCreate gives
    the run's session)."""
    monkeypatch.chdir(tmp_path)
    namespace = run_python_blocks(spark=True)
    assert namespace["spark"] is spark
    assert len(namespace["changes"]) == 2


def test_decode_capture_refuses_a_yboutput_configuration(spark: SparkSession) -> None:
    """The Spark decoder implements the PostgreSQL connector's rules: under
    plugin.name=yboutput it says so instead of producing records of the wrong shape."""
    from pgcdc_events.events import EventConfig  # noqa: PLC0415
    from pgcdc_events.spark import decode_capture  # noqa: PLC0415
    frame = spark.createDataFrame([("0/1", 1, b"B", 0)], "lsn string, xid long, data binary, "
                                  "position long")
    config = EventConfig.from_properties({"topic.prefix": "p", "plugin.name": "yboutput"})
    with pytest.raises(SparkDecodeError, match="yboutput"):
        decode_capture(frame, config)
