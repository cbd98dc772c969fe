"""One local SparkSession for the whole run, and helpers comparing Spark with the event layer.

The session is ``local[2]`` with two shuffle partitions and UTC as its time zone;
Python workers run on this interpreter. Every test using it is marked ``spark``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from pgcdc_events.events import EventConfig
from pgcdc_events.protocol import CaptureRow
from pgcdc_events.types.catalog import CatalogSnapshot
from support.spark_records import (
    CLOCK_NS,
    RUN_ID,
    canonical,
    decoder_lines,
    first_difference,
)

pyspark = pytest.importorskip("pyspark")

from pyspark.sql import SparkSession  # noqa: E402

from pgcdc_events.spark import DecodedCapture, SparkSchemaOptions, decode_capture  # noqa: E402
from pgcdc_events.spark._session import local_session  # noqa: E402
from pgcdc_events.spark.capture import capture_dataframe  # noqa: E402
from pgcdc_events.spark.columnar import VERIFY_ENV  # noqa: E402
from pgcdc_events.spark.local import decode_to_arrow, records_to_arrow  # noqa: E402

# The test mode of Spark's column-wise runs, here and in the Spark workers started from this
# process: every value a vectorized converter gives is compared with its scalar converter's.
os.environ.setdefault(VERIFY_ENV, "1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests that use the session ``spark``."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The run's SparkSession (``local[2]``)."""
    session = local_session("local[2]", "pgcdc-events-tests", conf={
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.adaptive.enabled": "true",
        "spark.driver.memory": "2g",
        "spark.ui.showConsoleProgress": "false",
    })
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def spark_matches_decoder(spark: SparkSession) -> Callable[..., DecodedCapture]:
    """Decode a capture with Spark; assert its records are the event layer's, whole (topic,
    key, value, headers as JsonConverter lines), and that each table's DataFrame holds its
    topic's records in order."""

    def check(rows: Sequence[CaptureRow], config: EventConfig,
              catalog: CatalogSnapshot | None = None, *, flavour: str = "literal",
              **kwargs: Any) -> DecodedCapture:
        want = decoder_lines(rows, config, catalog)
        decoded = decode_capture(capture_dataframe(spark, rows), config, catalog=catalog,
                                 flavour=flavour, tombstones=True,  # type: ignore[arg-type]
                                 clock=lambda: CLOCK_NS, run_id=RUN_ID, lines=True, **kwargs)
        got = [r["line"] for r in decoded.records.orderBy("position", "index")
               .select("line").collect()]
        problem = first_difference(got, want)
        assert not problem, problem
        tables = decoded.to_arrow()
        decoded.unpersist()
        topics = {decoded.topic(name): name for name in tables}
        ops = [json.loads(line) for line in want]
        for name, table in tables.items():
            expected = [(r["value"] or {}).get("payload", r["value"] or {}).get("op")
                        if r["value"] else None
                        for r in ops if r["topic"] == decoded.topic(name)
                        and topics.get(r["topic"]) == name]
            assert table.column("op").to_pylist() == expected, name
        return decoded

    return check


@pytest.fixture(scope="session")
def arrow_matches_decoder() -> Callable[..., dict[str, Any]]:
    """Run the Spark tasks' functions in-process, the capture cut into small chunks; assert
    the records are the event layer's, whole."""

    def check(rows: Sequence[CaptureRow], config: EventConfig,
              catalog: CatalogSnapshot | None = None, *, flavour: str = "literal",
              batch_size: int = 10_000, chunk_messages: int = 3) -> dict[str, Any]:
        want = decoder_lines(rows, config, catalog)
        records, _ = records_to_arrow(rows, config, catalog, clock=lambda: CLOCK_NS,
                                      run_id=RUN_ID, lines=True, chunk_messages=chunk_messages,
                                      batch_size=batch_size)
        problem = first_difference(records.column("line").to_pylist(), want)
        assert not problem, problem
        return decode_to_arrow(rows, config, catalog,
                               options=SparkSchemaOptions(flavour),  # type: ignore[arg-type]
                               tombstones=True, clock=lambda: CLOCK_NS,
                               chunk_messages=chunk_messages, batch_size=batch_size)

    return check


@pytest.fixture(scope="session")
def canonical_values() -> Callable[[Any], list[Any]]:
    """:func:`canonical`: Arrow values as comparable Python (temporal as integers)."""
    return canonical
