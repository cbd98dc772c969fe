"""``source.db`` and ``source.snapshot`` say the same thing in Python objects, in JSON and in
Spark rows, from the shipped demo capture and its catalog (taken from database ``postgres``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.protocol import iter_capture
from pgcdc_events.types.catalog import CatalogSnapshot

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CATALOG = CatalogSnapshot.load(str(EXAMPLES / "demo-catalog.json"))


def _rows() -> list:
    with (EXAMPLES / "demo-capture.jsonl").open() as fh:
        return list(iter_capture(fh))


def _changes(props: dict[str, str]) -> tuple[EventConfig, list]:
    config = EventConfig.from_properties(props)
    records = EventDecoder(config, catalog=CATALOG).feed_rows(_rows())
    return config, [r for r in records if r.kind == "change"]


def test_source_db_comes_from_the_catalog_when_dbname_is_unset() -> None:
    assert json.loads((EXAMPLES / "demo-catalog.json").read_text())["database"] == "postgres"
    config, changes = _changes({"topic.prefix": "demo"})
    writer = JsonRecordWriter(config.json)
    assert changes
    for record in changes:
        assert record.value["source"]["db"] == "postgres"
        line = json.loads(writer.record_line(record))
        assert line["value"]["payload"]["source"]["db"] == "postgres"


def test_database_dbname_still_wins() -> None:
    _, changes = _changes({"topic.prefix": "demo", "database.dbname": "app"})
    assert {r.value["source"]["db"] for r in changes} == {"app"}


def test_without_a_catalog_source_db_is_the_configured_one() -> None:
    config = EventConfig.from_properties({"topic.prefix": "demo"})
    records = [r for r in EventDecoder(config).feed_rows(_rows()) if r.kind == "change"]
    assert {r.value["source"]["db"] for r in records} == {""}


@pytest.mark.parametrize("replace", ["true", "false"])
def test_source_snapshot_in_python_equals_the_json(replace: str) -> None:
    config, changes = _changes({"topic.prefix": "demo",
                                "value.converter.replace.null.with.default": replace})
    writer = JsonRecordWriter(config.json)
    for record in changes:
        source = record.value["source"]
        written = json.loads(writer.record_line(record))["value"]["payload"]["source"]
        shown = source.get_or_default("snapshot") if replace == "true" else source["snapshot"]
        assert shown == written["snapshot"]
    assert written["snapshot"] == ("false" if replace == "true" else None)


def test_spark_rows_carry_the_catalog_database() -> None:
    pytest.importorskip("pyarrow")
    pytest.importorskip("pyspark")
    from pgcdc_events.spark import local  # noqa: PLC0415

    config = EventConfig.from_properties({"topic.prefix": "demo"})
    tables = local.decode_to_arrow(_rows(), config, CATALOG)
    dbs = {row["db"] for t in tables.values() for row in t.column("source").to_pylist()}
    assert dbs == {"postgres"}
