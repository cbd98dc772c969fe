"""``pgcdc-events spark decode``: JsonConverter records identical to ``pgcdc-events decode``,
Parquet events and flattened rows, one dataset per table."""

from __future__ import annotations

import glob
import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from pgcdc_events.cli import main

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = str(ROOT / "examples" / "demo-capture.jsonl")
CATALOG = str(ROOT / "examples" / "demo-catalog.json")


def _normalized(line: str) -> dict[str, Any]:
    """A record without what is processing time or run identity by definition."""
    record = json.loads(line)
    value = record["value"]
    payload = value.get("payload") if isinstance(value, dict) else None
    if isinstance(payload, dict):
        for name in ("ts_ms", "ts_us", "ts_ns"):
            payload.pop(name, None)
    record["headers"].pop("__debezium.context.runId", None)
    return record  # type: ignore[no-any-return]


def test_json_output_equals_decode(tmp_path: Path, spark: SparkSession) -> None:
    reference = tmp_path / "decode.jsonl"
    assert main(["decode", "--capture", CAPTURE, "--catalog", CATALOG, "-o", str(reference),
                 "-q"]) == 0
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for line in reference.read_text().splitlines():
        record = _normalized(line)
        by_topic.setdefault(record["topic"], []).append(record)
    out = tmp_path / "spark"
    assert main(["spark", "decode", "--capture", CAPTURE, "--catalog", CATALOG,
                 "--output", str(out), "--format", "json", "-q"]) == 0
    written = sorted(p.name for p in out.iterdir())
    assert written == ["public.customers", "public.orders"]
    for table in written:
        lines = [line for part in sorted(glob.glob(str(out / table / "part-*")))
                 for line in Path(part).read_text().splitlines()]
        ours = [_normalized(line) for line in lines]
        assert ours == by_topic[f"pgcdc.{table}"], table


def test_parquet_events_and_flattened_rows(tmp_path: Path, spark: SparkSession) -> None:
    events = tmp_path / "events"
    assert main(["spark", "decode", "--capture", CAPTURE, "--catalog", CATALOG,
                 "--output", str(events), "-q"]) == 0
    orders = spark.read.parquet(str(events / "public.orders"))
    assert orders.columns[:4] == ["key", "before", "after", "source"]
    assert sorted(r["op"] for r in orders.select("op").collect()) == ["c", "c", "d", "u"]
    flat = tmp_path / "flat"
    assert main(["spark", "decode", "--capture", CAPTURE, "--catalog", CATALOG,
                 "--output", str(flat), "--flatten", "--tables", "public.orders", "-q"]) == 0
    rows = spark.read.parquet(str(flat / "public.orders")).collect()
    assert {r["__op"] for r in rows} == {"c", "u", "d"}
    assert sorted(r["__deleted"] for r in rows) == ["false", "false", "false", "true"]
    assert list(rows[0].asDict())[:3] == ["id", "customer_id", "status"]


def test_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spark", "decode", "--capture", str(tmp_path / "missing.jsonl"),
                 "--output", str(tmp_path / "out"), "-q"]) == 1
    assert "no capture at" in capsys.readouterr().err
