"""Golden recordings of the real Debezium connector (tests/golden, made by tools/record_debezium).

Each recording holds the raw pgoutput capture of a corpus of changes and the
records Debezium 3.6.3 emitted for the same changes under one set of connector
properties. These helpers load them and pair every captured change with the
Debezium record it produced.
"""

from __future__ import annotations

import fnmatch
import json
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pgcdc_events.properties import load_properties
from pgcdc_events.protocol import (
    CaptureRow,
    Delete,
    Insert,
    Message,
    PgOutputReader,
    Relation,
    Type,
    Update,
    iter_capture,
)
from pgcdc_events.testing.conformance import DocumentedDifference, parse_documented
from pgcdc_events.types.catalog import CatalogSnapshot

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
DIFFERENCES = ROOT / "docs" / "differences-from-debezium.md"


@dataclass(eq=False)
class Recording:
    """One corpus recorded under one mode."""

    corpus: str
    mode: str
    path: Path

    @property
    def key(self) -> str:
        return f"{self.corpus}/{self.mode}"

    @cached_property
    def properties(self) -> dict[str, str]:
        return load_properties(str(self.path / "connector.properties"))

    @cached_property
    def meta(self) -> dict[str, Any]:
        return json.loads((self.path / "meta.json").read_text())

    @cached_property
    def records(self) -> list[dict[str, Any]]:
        with open(self.path / "debezium.jsonl", encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]

    @cached_property
    def capture(self) -> list[CaptureRow]:
        with open(self.path / "capture.jsonl", encoding="utf-8") as fh:
            return list(iter_capture(fh))

    @cached_property
    def catalog(self) -> CatalogSnapshot | None:
        path = self.path / "catalog.json"
        return CatalogSnapshot.load(str(path)) if path.exists() else None


def recordings(corpus_glob: str = "*", *, incremental: bool = False) -> list[Recording]:
    """Every recording whose corpus name matches ``corpus_glob``.

    Recordings of incremental snapshots (``meta.json`` counts
    ``checks.incremental_reads_per_table``) are left out unless ``incremental``: their
    ``r`` events were read by the connector with SQL, so no decoder makes them of the
    capture alone (tests/adapters/test_incremental_golden.py runs the snapshot live).
    """
    found = []
    for corpus_dir in sorted(GOLDEN.iterdir()):
        if not corpus_dir.is_dir() or not fnmatch.fnmatch(corpus_dir.name, corpus_glob):
            continue
        for mode_dir in sorted(corpus_dir.iterdir()):
            if (mode_dir / "debezium.jsonl").exists():
                recording = Recording(corpus_dir.name, mode_dir.name, mode_dir)
                reads = "incremental_reads_per_table" in recording.meta.get("checks", {})
                if reads == incremental:
                    found.append(recording)
    return found


@dataclass
class Change:
    """A captured row change, the Relation it refers to, and Debezium's record for it."""

    relation: Relation
    message: Insert | Update | Delete
    record: dict[str, Any] | None
    types: list[Type] = field(default_factory=list)


def changes(recording: Recording) -> tuple[list[Change], list[Type]]:
    """Pair each Insert/Update/Delete with Debezium's c/u/d record for the same table, in order."""
    reader = PgOutputReader()
    messages: list[Message] = [reader.read(row.data) for row in recording.capture]
    types = [m for m in messages if isinstance(m, Type)]
    relations: dict[int, Relation] = {}
    pending: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in recording.records:
        value = record.get("value")
        if value and value["payload"].get("op") in ("c", "u", "d"):
            pending[record["topic"]].append(record)
    out = []
    prefix = recording.properties.get("topic.prefix", "pgcdc")
    for m in messages:
        if isinstance(m, Relation):
            relations[m.relation_id] = m
        elif isinstance(m, (Insert, Update, Delete)):
            rel = relations[m.relation_id]
            queue = pending[f"{prefix}.{rel.namespace}.{rel.name}"]
            out.append(Change(rel, m, queue.pop(0) if queue else None))
    return out, types


def documented_differences(corpus_glob: str = "*") -> list[DocumentedDifference]:
    """The golden cases listed in the differences document (first column, in backticks)."""
    return parse_documented(DIFFERENCES.read_text(), corpus_glob)


#: JsonConverter settings that change what surrounds a record's payloads or how they are
#: written: the tests of the line writers run each recording under each.
CONVERTER_SETTINGS: list[dict[str, str]] = [
    {},
    {"converter.schemas.enable": "false"},
    {"key.converter.schemas.enable": "false"},
    {"value.converter.schemas.enable": "false", "header.converter.schemas.enable": "false"},
    {"value.converter.decimal.format": "NUMERIC",
     "value.converter.replace.null.with.default": "false"},
]

