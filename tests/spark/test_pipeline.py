"""End to end: workload -> capture -> Spark decode -> latest state per key = SELECT *.

Runs the functions of examples/spark_pipeline.py on the test cluster; the same
decoded capture checks the events against the event layer (with transaction
metadata), ExtractNewRecordState flattening in its three delete modes, and the
per-message Python UDF against the Arrow path.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pg8000.native
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812

from pgcdc_events.events import EventConfig
from pgcdc_events.spark import capture_dataframe, decode_capture
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.flatten import flatten
from pgcdc_events.spark.state import latest_state
from pgcdc_events.spark.udf import message_udf
from pgcdc_events.types.catalog import fetch_catalog
from support.capture import Capturer
from support.spark_records import RUN_ID, decoder_lines, first_difference

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_pipeline.py"
CLOCK_NS = 1_700_000_000_000_000_000


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("spark_pipeline_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


example = _example()


@pytest.fixture(scope="module")
def pipeline(pg_cluster: Any, spark: SparkSession) -> Iterator[dict[str, Any]]:
    """The workload captured from its own database, decoded once by Spark and once by the
    event layer; the connection stays open for SELECT *."""
    admin = pg8000.native.Connection(**pg_cluster.dsn())
    admin.run('CREATE DATABASE "spark_pipeline"')
    admin.close()
    conn = pg8000.native.Connection(**{**pg_cluster.dsn(), "database": "spark_pipeline"})
    try:
        for statement in example.WORKLOAD_SETUP:
            conn.run(statement)
        capturer = Capturer(conn, slot="pipeline")
        example.workload(conn)
        rows = capturer.changes(proto_version=2, streaming=True)
        catalog = fetch_catalog(conn)
        capturer.drop()
        config = EventConfig.from_properties(example.CONFIG)
        decoded = decode_capture(capture_dataframe(spark, rows), config, catalog=catalog,
                                 flavour="semantic", tombstones=True, clock=lambda: CLOCK_NS,
                                 run_id=RUN_ID, lines=True)
        records = decoder_lines(rows, config, catalog)
        yield {"conn": conn, "decoded": decoded, "records": records, "rows": rows}
        decoded.unpersist()
    finally:
        conn.close()
        admin = pg8000.native.Connection(**pg_cluster.dsn())
        admin.run('DROP DATABASE IF EXISTS "spark_pipeline" WITH (FORCE)')
        admin.close()


def test_latest_state_equals_select_star(pipeline: dict[str, Any], spark: SparkSession) -> None:
    checked = example.compare(spark, pipeline["decoded"], pipeline["conn"])
    assert checked == {"public.accounts": 38, "public.orders": 103, "public.ledger": 2}


def test_events_equal_the_event_layer(pipeline: dict[str, Any]) -> None:
    decoded = pipeline["decoded"]
    got = [r["line"] for r in decoded.records.orderBy("position", "index").collect()]
    problem = first_difference(got, pipeline["records"])
    assert not problem, problem
    tables = decoded.to_arrow()
    orders = tables["public.orders"]
    blocks = [b for b in orders.column("transaction").to_pylist() if b is not None]
    assert blocks and all(b["total_order"] >= b["data_collection_order"] >= 1 for b in blocks)


def test_flatten_delete_handling_modes(pipeline: dict[str, Any]) -> None:
    events = pipeline["decoded"].table("public.orders")
    ops = {r["op"]: r["n"] for r in events.groupBy("op").agg(F.count("*").alias("n")).collect()}
    fields = "op,table,lsn,source.ts_ms"
    dropped = flatten(events, add_fields=fields)
    assert dropped.columns == ["id", "account_id", "amount", "paid", "placed", "items", "__op",
                               "__table", "__lsn", "__source_ts_ms"]
    rows = dropped.collect()
    assert len(rows) == ops["c"] + ops["u"]
    assert {r["__op"] for r in rows} == {"c", "u"} and {r["__table"] for r in rows} == {"orders"}
    kept = flatten(events, delete_handling_mode="none", drop_tombstones=False, include_key=True)
    rows = kept.collect()
    assert len(rows) == ops["c"] + ops["u"] + 2 * ops["d"]  # deletes and their tombstones
    nulls = [r for r in rows if r["id"] is None]
    assert len(nulls) == 2 * ops["d"] and all(r["__key"] is not None for r in nulls)
    rewritten = flatten(events, delete_handling_mode="rewrite", add_fields="op")
    assert rewritten.columns[-2:] == ["__op", "__deleted"]
    rows = rewritten.collect()
    deleted = [r for r in rows if r["__deleted"] == "true"]
    assert len(deleted) == ops["d"] and all(r["id"] % 7 == 0 for r in deleted)
    assert {r["__deleted"] for r in rows if r["__op"] != "d"} == {"false"}
    with pytest.raises(SparkDecodeError):
        flatten(events, add_fields="nonexistent.field")


def test_latest_state_needs_a_key(pipeline: dict[str, Any]) -> None:
    events = pipeline["decoded"].table("public.orders").drop("key")
    with pytest.raises(SparkDecodeError):
        latest_state(events)


def test_python_udf_equals_the_arrow_path(pipeline: dict[str, Any], spark: SparkSession) -> None:
    decoded = pipeline["decoded"]
    table = "public.orders"
    decode = message_udf(decoded, table)
    in_stream, flags = False, []
    for row in pipeline["rows"]:
        kind = row.data[:1]
        in_stream = (in_stream or kind == b"S") and kind != b"E"
        flags.append(in_stream)
    messages = spark.createDataFrame(
        [(i, bytes(r.data), flag) for i, (r, flag) in enumerate(zip(pipeline["rows"], flags,
                                                                   strict=True))],
        "position long, data binary, in_stream boolean")
    exploded = messages.select("position", F.posexplode(
        decode("data", "position", "in_stream")).alias("i", "r"))
    slow = sorted((r["position"], r["r"]["index"], r["r"]["op"], r["r"]["kind"],
                   r["r"]["key"]["id"], r["r"]["after"] and r["r"]["after"]["amount"])
                  for r in exploded.collect())
    fast = sorted((r["_position"]["message"], r["_position"]["index"], r["op"], r["_kind"],
                   r["key"]["id"], r["after"] and r["after"]["amount"])
                  for r in decoded.table(table).collect())
    assert slow == fast
