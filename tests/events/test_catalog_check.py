"""A catalog snapshot that does not describe the capture is named, not used silently.

The capture and catalog are the shipped demo (examples/), taken from one PostgreSQL 15
database; each test changes the catalog the way a wrong one differs (another database,
a renamed column, an altered type, a table created after the snapshot).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.protocol import iter_capture
from pgcdc_events.types.catalog import CatalogMismatchWarning, CatalogSnapshot

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _catalog() -> dict[str, Any]:
    return json.loads((EXAMPLES / "demo-catalog.json").read_text())


def _table(cat: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in cat["tables"] if t["name"] == name)


def _decode(cat: dict[str, Any]) -> tuple[list[Any], list[str]]:
    decoder = EventDecoder(EventConfig.from_properties({"topic.prefix": "demo"}),
                           catalog=CatalogSnapshot.from_json(cat))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with (EXAMPLES / "demo-capture.jsonl").open() as fh:
            records = decoder.feed_rows(iter_capture(fh))
    return records, [str(w.message) for w in caught if w.category is CatalogMismatchWarning]


def test_the_matching_catalog_gives_no_warning() -> None:
    records, warned = _decode(_catalog())
    assert records and warned == []


def test_a_renamed_column_is_named() -> None:
    cat = _catalog()
    col = next(c for c in _table(cat, "customers")["columns"] if c["name"] == "email")
    col["name"] = "mail"
    _, warned = _decode(cat)
    assert len(warned) == 1
    assert '"public"."customers"' in warned[0] and "column 'email'" in warned[0]


def test_an_altered_type_is_named() -> None:
    cat = _catalog()
    col = next(c for c in _table(cat, "orders")["columns"] if c["name"] == "total")
    col["type_modifier"] = (12 << 16 | 3) + 4  # numeric(12,3) instead of numeric(10,2)
    _, warned = _decode(cat)
    assert len(warned) == 1
    assert '"public"."orders"' in warned[0] and "column 'total'" in warned[0]


def test_another_databases_catalog_is_named() -> None:
    cat = _catalog()
    for t in cat["tables"]:
        t["oid"] += 1000
    cat["database"] = "elsewhere"
    _, warned = _decode(cat)
    assert sorted(w.split(" does not match")[0] for w in warned) == [
        'table "public"."customers"', 'table "public"."orders"']
    assert all("'elsewhere'" in w and "another database" in w for w in warned)


def test_a_table_missing_from_the_catalog_is_named() -> None:
    cat = _catalog()
    cat["tables"] = [t for t in cat["tables"] if t["name"] != "orders"]
    _, warned = _decode(cat)
    assert len(warned) == 1 and warned[0].startswith('table "public"."orders" is not in')


def test_the_cli_prints_the_warning_as_one_line(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from pgcdc_events.cli import main  # noqa: PLC0415

    cat = _catalog()
    _table(cat, "customers")["oid"] += 1000
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(cat))
    status = main(["decode", "--capture", str(EXAMPLES / "demo-capture.jsonl"),
                   "--catalog", str(path)])
    err = capsys.readouterr().err
    assert status == 0
    assert err.startswith("pgcdc-events decode: warning: table \"public\".\"customers\"")
    assert "Traceback" not in err and "CatalogMismatchWarning" not in err
