"""Two tables whose names topic name adjustment maps alike share a Kafka topic (as in
Debezium); each keeps its own events in Spark. Found by the workload property
(``"::".":::"`` and ``"日付"."ÄÖÜ"``): the projections once filtered by topic and mixed the
two tables' rows (an int4 value in a bool column)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from pgcdc_events.events import EventConfig
from pgcdc_events.spark import capture_dataframe, decode_capture
from pgcdc_events.spark.local import decode_to_arrow
from pgcdc_events.spark.write import write_tables
from pgcdc_events.types.catalog import fetch_catalog
from support.capture import Capturer

A, B = '"::".":::"', '"日付"."ÄÖÜ"'


def test_tables_sharing_a_topic_keep_their_own_events(pg_conn: Any, spark: SparkSession,
                                                       tmp_path: Any) -> None:
    pg_conn.run('CREATE SCHEMA "::"')
    pg_conn.run('CREATE SCHEMA "日付"')
    pg_conn.run(f"CREATE TABLE {A} (id int4 PRIMARY KEY)")
    pg_conn.run(f"CREATE TABLE {B} (id bool PRIMARY KEY)")
    capturer = Capturer(pg_conn, slot="shared_topic")
    pg_conn.run(f"INSERT INTO {A} VALUES (-2147483648), (7)")
    pg_conn.run(f"INSERT INTO {B} VALUES (false)")
    pg_conn.run(f"DELETE FROM {A} WHERE id = 7")
    rows = capturer.changes()
    catalog = fetch_catalog(pg_conn)
    capturer.drop()
    # what the server holds, and what each table went through, not our decoder
    want = {"::.:::": [("c", -2147483648), ("c", 7), ("d", 7)], "日付.ÄÖÜ": [("c", False)]}
    config = EventConfig.from_properties({"topic.prefix": "pgcdc"})

    local = decode_to_arrow(rows, config, catalog)
    assert {name: [(r["op"], (r["after"] or r["before"])["id"]) for r in t.to_pylist()]
            for name, t in local.items()} == want

    decoded = decode_capture(capture_dataframe(spark, rows), config, catalog=catalog)
    assert decoded.topic("::.:::") == decoded.topic("日付.ÄÖÜ")  # the premise: one topic
    got = {name: [(r["op"], (r["after"] or r["before"])["id"])
                  for r in decoded.table(name).orderBy("_position").collect()]
           for name in decoded.tables}
    assert got == want
    written = write_tables(decoded, str(tmp_path / "out"))
    assert written == {"::.:::": 3, "日付.ÄÖÜ": 1}
    decoded.unpersist()
