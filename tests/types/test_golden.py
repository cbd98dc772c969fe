"""Conformance of the type mapper with the real Debezium connector, column by column.

For every golden recording of a ``types*`` corpus (tests/golden, recorded by
tools/record_debezium from Debezium 3.6.3.Final), every column of every captured
row is mapped with our type mapper under the recording's connector properties,
and its schema and value (as JsonConverter writes them) are compared with what
Debezium put in the event's ``before``/``after``. Every difference must be
listed in docs/differences-from-debezium.md, and every listed difference must
occur.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from typing import Any

import pytest

from pgcdc_events.events.config import JsonConverterConfig
from pgcdc_events.protocol import KIND_NULL, KIND_UNCHANGED_TOAST, Delete, Insert, TupleData
from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.jsonvalue import value_to_json
from pgcdc_events.types.mapper import ColumnMapping, TypeMapper
from pgcdc_events.types.registry import TypeRegistry
from support.golden import Recording, changes, documented_differences, recordings

RECORDINGS = [r for r in recordings("types*") if not r.meta.get("connector_failed")]


def _value(mapping: ColumnMapping, tup: TupleData, i: int, old: TupleData | None, table: str
           ) -> Any:
    kind = tup.kinds[i]
    if kind == KIND_NULL:
        return None
    if kind == KIND_UNCHANGED_TOAST:
        if old is not None and old.kinds[i] not in (KIND_UNCHANGED_TOAST, KIND_NULL):
            return _value(mapping, old, i, None, table)
        return mapping.toast
    raw = tup.values[i]
    assert raw is not None
    return mapping.convert(raw, binary=kind == ord("b"), table=table)


@cache
def compare(recording: Recording) -> tuple[Counter[str], dict[str, str]]:
    """Counts of compared values per mode, and every difference keyed by its golden case."""
    config = TypeConfig.from_properties(recording.properties)
    json_config = JsonConverterConfig.from_properties(recording.properties)
    paired, types = changes(recording)
    registry = TypeRegistry(recording.catalog)
    for t in types:
        registry.observe(t)
    mapper = TypeMapper(config, registry)
    compared: Counter[str] = Counter()
    diffs: dict[str, str] = {}
    mappings: dict[int, list[ColumnMapping | None]] = {}
    for change in paired:
        rel, m, record = change.relation, change.message, change.record
        table = f"{rel.namespace}.{rel.name}"
        if rel.name == "recorder_sentinel":
            continue
        assert record is not None, f"{recording.key}: no Debezium record for a change to {table}"
        cols = mappings.get(id(rel))
        if cols is None:
            ctable = recording.catalog.table(rel.namespace, rel.name) if recording.catalog else None
            cols = [
                mapper.relation_column(c, table=table, replica_identity=rel.replica_identity,
                                       catalog_column=ctable.column(c.name) if ctable else None)
                for c in rel.columns
            ]
            mappings[id(rel)] = cols
        value = record["value"]
        schema_fields = {f["field"]: f for f in value["schema"]["fields"]}
        sides: dict[str, TupleData | None] = {
            "after": None if isinstance(m, Delete) else m.new,
            "before": None if isinstance(m, Insert) else m.old,
        }
        old = None if isinstance(m, Insert) else m.old
        for side, tup in sides.items():
            payload = value["payload"][side]
            if payload is None or tup is None:
                if (payload is None) != (tup is None):
                    diffs[f"{recording.key}/{rel.name}.{side}"] = f"presence: {payload!r} vs {tup}"
                continue
            theirs = {f["field"]: f for f in schema_fields[side]["fields"]}
            row_id = tup.values[0].decode() if tup.values and tup.values[0] else "?"
            for i, (col, mapping) in enumerate(zip(rel.columns, cols, strict=True)):
                key = f"{recording.key}/{rel.name}.{col.name}[id={row_id}]"
                their_schema = theirs.get(col.name)
                if mapping is None or their_schema is None:
                    if (mapping is None) != (their_schema is None):
                        diffs[key] = (f"column presence: Debezium "
                                      f"{'has' if their_schema else 'drops'} it, we "
                                      f"{'drop' if mapping is None else 'map'} it")
                    continue
                compared[recording.mode] += 1
                ours_schema = {**mapping.schema.to_json(), "field": col.name}
                if ours_schema != their_schema:
                    diffs[key] = f"schema: ours {json.dumps(ours_schema)} theirs {json.dumps(their_schema)}"
                    # the values are still compared, as their own golden case ("... value")
                    key += " value"
                ours = value_to_json(
                    mapping.schema,
                    _value(mapping, tup, i, old if side == "after" else None, table),
                    replace_null_with_default=json_config.replace_null_with_default,
                    decimal_format=json_config.decimal_format,
                )
                if ours != payload.get(col.name):
                    raw = tup.values[i]
                    diffs[key] = (f"value of {raw!r:.80}: ours {json.dumps(ours)[:200]} theirs "
                                  f"{json.dumps(payload.get(col.name))[:200]}")
    return compared, diffs


@pytest.mark.parametrize("recording", RECORDINGS, ids=[r.key for r in RECORDINGS])
def test_every_difference_is_documented(recording: Recording) -> None:
    compared, diffs = compare(recording)
    documented = documented_differences(recording.corpus)
    unlisted = {k: v for k, v in diffs.items() if not any(d.matches(k) for d in documented)}
    assert not unlisted, "\n".join(f"{k}: {v}" for k, v in sorted(unlisted.items())[:60]) + (
        f"\n... {len(unlisted)} undocumented differences of {sum(compared.values())} values")


def test_every_documented_difference_occurs() -> None:
    if not RECORDINGS:
        pytest.fail("no golden recordings found under tests/golden")
    all_diffs = [k for r in RECORDINGS for k in compare(r)[1]]
    stale = [d for d in documented_differences("types*") if not any(d.matches(k) for k in all_diffs)]
    assert not stale, "documented but not observed: " + ", ".join(f"{d.case} (line {d.line})" for d in stale)


def test_compared_value_count() -> None:
    total = Counter[str]()
    for r in RECORDINGS:
        total.update(compare(r)[0])
    print("compared (column, mode) values:", dict(total), "total", sum(total.values()))
    assert sum(total.values()) > 0
