"""Conformance of whole records with the real Debezium connector.

For every golden recording of an ``events*`` corpus (tests/golden, recorded by
tools/record_debezium from Debezium 3.6.3.Final), the capture is decoded with the
recording's connector properties and catalog snapshot, serialized with the
recording's JsonConverter settings, and compared record by record with what
Debezium emitted: topic, key, value (schema and payload) and headers. Ignored are
only fields that are processing time or run identity by definition (the
envelope's ``ts_ms``/``ts_us``/``ts_ns``, ``source.version``, the
``__debezium.context.runId`` header, the source times of non-transactional
messages read before any transaction, which the connector takes from its clock,
and the snapshot's own transaction, position and time in ``r`` events).
Every other difference must be listed in
docs/differences-from-debezium.md (section "Events"), and every listed one must
occur.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from typing import Any

import pytest

from pgcdc_events.events.config import EventConfig
from pgcdc_events.events.decoder import EventDecoder
from pgcdc_events.events.jsonconv import JsonRecordWriter
from pgcdc_events.protocol import Begin, LogicalMessage, PgOutputReader
from support.golden import Recording, documented_differences, recordings

RECORDINGS = [r for r in recordings("events*") if not r.meta.get("connector_failed")]
_CLOCK_NS = 1_700_000_000_000_000_000


def _normalize(record: dict[str, Any], clock_message: bool = False) -> dict[str, Any]:
    """Drop the fields that are processing time or run identity by definition.

    ``clock_message``: the record is a non-transactional message whose source time we
    took from the clock (no transaction had begun yet), as the connector does.
    """
    out = json.loads(json.dumps(record))
    headers = out.get("headers") or {}
    run = headers.get("__debezium.context.runId")
    if isinstance(run, dict) and "payload" in run:
        run["payload"] = "<run>"
    elif run is not None:
        headers["__debezium.context.runId"] = "<run>"
    value = out.get("value")
    payload = value.get("payload", value) if isinstance(value, dict) and "schema" in value else value
    if isinstance(payload, dict):
        for name in ("ts_ms", "ts_us", "ts_ns"):
            if name in payload and "op" in payload:
                payload[name] = "<now>"
        source = payload.get("source")
        if isinstance(source, dict):
            source["version"] = "<version>"
            if payload.get("op") == "r":
                # a snapshot of its own (another transaction, slot and moment) on each
                # side; tests/events/test_golden_snapshot.py checks what these hold
                for name in ("ts_ms", "ts_us", "ts_ns", "txId", "lsn", "sequence"):
                    source[name] = "<snapshot>"
            if clock_message and payload.get("op") == "m" and source.get("txId") is None:
                for name in ("ts_ms", "ts_us", "ts_ns"):
                    source[name] = "<now>"
    return out


def _messages_before_first_begin(recording: Recording) -> int:
    """How many non-transactional messages the capture holds before its first BEGIN."""
    reader = PgOutputReader()
    count = 0
    for row in recording.capture:
        message = reader.read(row.data)
        if isinstance(message, Begin):
            break
        if isinstance(message, LogicalMessage) and not message.transactional:
            count += 1
    return count


def _is_message(record: dict[str, Any]) -> bool:
    value = record.get("value")
    payload = value.get("payload") if isinstance(value, dict) else None
    return isinstance(payload, dict) and payload.get("op") == "m"


def _label(record: dict[str, Any]) -> str:
    value = record.get("value")
    payload = value.get("payload", value) if isinstance(value, dict) and "schema" in value else value
    if payload is None:
        return "tombstone"
    if isinstance(payload, dict):
        return str(payload.get("op") or payload.get("status") or "?")
    return "?"


def _diff(path: str, ours: Any, theirs: Any, out: dict[str, str]) -> None:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in dict.fromkeys([*theirs, *ours]):
            _diff(f"{path}.{key}", ours.get(key, "<absent>"), theirs.get(key, "<absent>"), out)
        if list(ours) != list(theirs) and set(ours) == set(theirs):
            out[f"{path}.<order>"] = f"key order: ours {list(ours)} theirs {list(theirs)}"
    elif isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            _diff(f"{path}[{i}]", a, b, out)
    elif ours != theirs or type(ours) is not type(theirs):
        out[path] = f"ours {json.dumps(ours)[:160]} theirs {json.dumps(theirs)[:160]}"


@cache
def compare(recording: Recording) -> tuple[int, dict[str, str]]:
    """How many records were compared, and every difference keyed by its golden case."""
    config = EventConfig.from_properties(recording.properties)
    decoder = EventDecoder(config, catalog=recording.catalog, clock=lambda: _CLOCK_NS)
    writer = JsonRecordWriter.for_config(config)
    ours = [json.loads(writer.record_line(r)) for r in decoder.feed_rows(recording.capture)]
    theirs = recording.records
    diffs: dict[str, str] = {}
    by_topic_ours: dict[str, list[dict[str, Any]]] = {}
    by_topic_theirs: dict[str, list[dict[str, Any]]] = {}
    for rec in ours:
        by_topic_ours.setdefault(rec["topic"], []).append(rec)
    for rec in theirs:
        if rec["topic"].startswith("__debezium-heartbeat"):
            continue  # emitted on a wall-clock schedule; shape is tested separately
        by_topic_theirs.setdefault(rec["topic"], []).append(rec)
    # the emission order across topics too (BEGIN/END around data events, messages)
    order_ours = [(rec["topic"], _label(rec)) for rec in ours]
    order_theirs = [(rec["topic"], _label(rec)) for rec in theirs
                    if not rec["topic"].startswith("__debezium-heartbeat")]
    if order_ours != order_theirs:
        at = next((i for i, (a, b) in enumerate(zip(order_ours, order_theirs, strict=False))
                   if a != b),
                  min(len(order_ours), len(order_theirs)))
        diffs[f"{recording.key}/<order>"] = (
            f"first difference at record {at}: ours {order_ours[at:at + 1]} "
            f"theirs {order_theirs[at:at + 1]}")
    for topic in dict.fromkeys([*by_topic_theirs, *by_topic_ours]):
        mine, real = by_topic_ours.get(topic, []), by_topic_theirs.get(topic, [])
        if len(mine) != len(real):
            diffs[f"{recording.key}/{topic}[count]"] = f"ours {len(mine)} records, theirs {len(real)}"
        clock_messages = _messages_before_first_begin(recording)
        for a, b in zip(mine, real, strict=False):
            found: dict[str, str] = {}
            clock = _is_message(b) and clock_messages > 0
            clock_messages -= clock
            _diff("", _normalize(a, clock), _normalize(b, clock), found)
            label = _label(b)
            for path, text in found.items():
                diffs[f"{recording.key}/{topic}[{label}]{path}"] = text
    return len(theirs), diffs


@pytest.mark.parametrize("recording", RECORDINGS, ids=[r.key for r in RECORDINGS])
def test_records_equal_debeziums(recording: Recording) -> None:
    count, diffs = compare(recording)
    documented = documented_differences(recording.corpus)
    unlisted = {k: v for k, v in diffs.items() if not any(d.matches(k) for d in documented)}
    assert not unlisted, "\n".join(f"{k}: {v}" for k, v in sorted(unlisted.items())[:80]) + (
        f"\n... {len(unlisted)} undocumented differences over {count} records")


def test_every_documented_event_difference_occurs() -> None:
    if not RECORDINGS:
        pytest.fail("no events golden recordings found under tests/golden")
    all_diffs = [k for r in RECORDINGS for k in compare(r)[1]]
    stale = [d for d in documented_differences("events*")
             if not any(d.matches(k) for k in all_diffs)]
    assert not stale, "documented but not observed: " + ", ".join(
        f"{d.case} (line {d.line})" for d in stale)


def test_record_counts() -> None:
    counts = Counter({r.key: compare(r)[0] for r in RECORDINGS})
    print("Debezium records compared per recording:", dict(counts))
    assert sum(counts.values()) > 0
