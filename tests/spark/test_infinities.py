"""``infinity`` and ``-infinity`` dates and timestamps, from a real server through the Spark
batch path: the semantic flavour holds them at the ends of Spark's range (docs/spark.md,
"Infinite dates and timestamps"), so ``collect()`` gives Python objects instead of
PySpark's "year 294247 is out of range"; the literal flavour keeps Debezium's sentinels."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from pgcdc_events.events import EventConfig
from pgcdc_events.spark import decode_capture
from pgcdc_events.spark.capture import capture_dataframe
from pgcdc_events.types.catalog import fetch_catalog
from support.capture import Capturer

UTC = dt.timezone.utc
COLUMNS = "d date, ts timestamp, ts3 timestamp(3), tstz timestamptz, tstz3 timestamptz(3)"
ROWS = [
    "(1, 'infinity', 'infinity', 'infinity', 'infinity', 'infinity')",
    "(2, '-infinity', '-infinity', '-infinity', '-infinity', '-infinity')",
    "(3, '2024-02-29', '2024-02-29 13:14:15.5', '2024-02-29 13:14:15.5', "
    "'2024-02-29 13:14:15.5+00', '2024-02-29 13:14:15.5+00')",
    "(4, '9999-12-31', '9999-12-31 23:59:59.999999', '9999-12-31 23:59:59.999', "
    "'0001-01-02 00:00:00+00', '0001-01-02 00:00:00+00')",
]
PLUS = {"d": dt.date(9999, 12, 31), "ts": dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
        "ts3": dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
        "tstz": dt.datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=UTC),
        "tstz3": dt.datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=UTC)}
MINUS = {"d": dt.date(1, 1, 1), "ts": dt.datetime(1, 1, 1), "ts3": dt.datetime(1, 1, 1),
         "tstz": dt.datetime(1, 1, 2, tzinfo=UTC), "tstz3": dt.datetime(1, 1, 2, tzinfo=UTC)}
FINITE = {"d": dt.date(2024, 2, 29), "ts": dt.datetime(2024, 2, 29, 13, 14, 15, 500000),
          "ts3": dt.datetime(2024, 2, 29, 13, 14, 15, 500000),
          "tstz": dt.datetime(2024, 2, 29, 13, 14, 15, 500000, tzinfo=UTC),
          "tstz3": dt.datetime(2024, 2, 29, 13, 14, 15, 500000, tzinfo=UTC)}


@pytest.fixture
def infinities(pg_conn: Any) -> Any:
    """Capture rows and catalog of a table of infinite and finite dates and timestamps."""
    pg_conn.run(f"CREATE TABLE t (id int PRIMARY KEY, {COLUMNS})")
    capturer = Capturer(pg_conn, slot="infinities")
    pg_conn.run("INSERT INTO t VALUES " + ", ".join(ROWS))
    rows = capturer.changes()
    catalog = fetch_catalog(pg_conn)
    capturer.drop()
    return rows, catalog


def _instant(value: dt.datetime) -> dt.datetime:
    """A collected TimestampType value (naive, in the Python process's zone) as UTC."""
    return value.astimezone(UTC)


@pytest.mark.parametrize("mode", ["adaptive", "connect", "nanoseconds"])
def test_collect_gives_the_ends_of_sparks_range(spark: SparkSession, infinities: Any,
                                                mode: str) -> None:
    rows, catalog = infinities
    config = EventConfig.from_properties({"topic.prefix": "p", "time.precision.mode": mode})
    decoded = decode_capture(capture_dataframe(spark, rows), config, catalog=catalog)
    got = {r["after"]["id"]: r["after"].asDict() for r in decoded["public.t"].collect()}
    for key, want in ((1, PLUS), (2, MINUS), (3, FINITE)):
        row = {k: _instant(v) if k.startswith("tstz") else v for k, v in got[key].items()
               if k != "id"}
        assert row == want, (key, mode)
    # Values at the ends themselves are real values, kept (a finite 9999-12-31...).
    assert got[4]["d"] == dt.date(9999, 12, 31)
    finite_end = {"adaptive": dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
                  "connect": dt.datetime(9999, 12, 31, 23, 59, 59, 999000),
                  "nanoseconds": None}  # past int64 nanoseconds: null, as in Debezium
    assert got[4]["ts"] == finite_end[mode]


def test_the_literal_flavour_keeps_debeziums_sentinels(spark: SparkSession,
                                                       infinities: Any) -> None:
    rows, catalog = infinities
    config = EventConfig.from_properties({"topic.prefix": "p"})
    decoded = decode_capture(capture_dataframe(spark, rows), config, catalog=catalog,
                             flavour="literal")
    got = {r["after"]["id"]: r["after"] for r in decoded["public.t"].collect()}
    assert (got[1]["d"], got[1]["ts"], got[1]["tstz"]) == (
        2_146_033_979, 9_223_372_036_825_200_000, "infinity")
    assert (got[2]["d"], got[2]["ts"], got[2]["tstz"]) == (
        -2_147_472_691, -9_223_372_036_832_400_000, "-infinity")
