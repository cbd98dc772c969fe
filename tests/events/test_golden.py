"""Conformance of whole records with the real Debezium connector.

For every golden recording of an ``events*`` corpus (tests/golden, recorded by
tools/record_debezium from Debezium 3.6.3.Final), the capture is decoded with the
recording's connector properties and catalog snapshot, serialized with the
recording's JsonConverter settings, and compared record by record with what
Debezium emitted: topic, key, value (schema and payload) and headers. Ignored are
only fields that are processing time or run identity by definition (the
envelope's ``ts_ms``/``ts_us``/``ts_ns``, ``source.version``, the
``__debezium.context.runId`` header, and the source times of non-transactional
messages read before any transaction, which the connector takes from its clock).
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
from pgcdc_events.testing.conformance import compare_records
from support.golden import Recording, documented_differences, recordings

RECORDINGS = [r for r in recordings("events*") if not r.meta.get("connector_failed")]
_CLOCK_NS = 1_700_000_000_000_000_000


def _decode(recording: Recording) -> list[dict[str, Any]]:
    """Our records for the recording's capture, as JsonConverter JSON objects."""
    config = EventConfig.from_properties(recording.properties)
    decoder = EventDecoder(config, catalog=recording.catalog, clock=lambda: _CLOCK_NS)
    writer = JsonRecordWriter.for_config(config)
    records = [json.loads(writer.record_line(r)) for r in decoder.feed_rows(recording.capture)]
    # the generated paths ran: a tuple leaves them only for a value that fails to convert
    metrics = decoder.metrics
    assert decoder.fast_path_fallbacks <= metrics.conversion_errors + metrics.failed_events, (
        f"{decoder.fast_path_fallbacks} tuples fell back to the general loop")
    return records


@cache
def compare(recording: Recording) -> tuple[int, dict[str, str]]:
    """How many records were compared, and every difference keyed by its golden case."""
    ours = _decode(recording)
    theirs = recording.records
    diffs = compare_records(ours, theirs, recording.key, recording.capture)
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


NANOS_CRASHES = [r for r in recordings("events_crash_nanos_*") if r.meta.get("connector_failed")]


@pytest.mark.parametrize("recording", NANOS_CRASHES, ids=[r.key for r in NANOS_CRASHES])
def test_connector_fails_on_a_missing_not_null_timestamp_in_nanoseconds(
        recording: Recording) -> None:
    """The connector stops on a NOT NULL timestamp missing from an old key under
    time.precision.mode=nanoseconds (found by the referee); we emit the records it emitted
    before stopping, then the change with the epoch as that column's zero, as the same
    recording's control mode (default) shows the connector does in microseconds."""
    assert "null used for required field: \\\"ts\\\"" in json.dumps(recording.meta["error"])
    ours = _decode(recording)
    theirs = recording.records
    assert not compare_records(ours[:len(theirs)], theirs, recording.key)
    control = next(r for r in recordings(recording.corpus) if r.mode == "default")
    zero_before = [rec["value"]["payload"]["before"] for rec in control.records
                   if rec["value"] and rec["value"]["payload"].get("op") == "d"]
    assert zero_before and zero_before[0]["ts"] == 0  # the connector's zero, microseconds
    deletes = [rec["value"]["payload"]["before"] for rec in ours
               if rec["value"] and rec["value"]["payload"].get("op") == "d"]
    assert deletes and deletes[0]["ts"] == 0 and deletes[0]["id"] == 1


def test_connector_fails_on_a_not_null_bit_array() -> None:
    """A NOT NULL bit(n)[] stops the connector (found by the referee); we emit the change
    without the column, as for a nullable bit(n)[] (events_referee)."""
    (recording,) = recordings("events_crash_bitarray_notnull")
    assert recording.meta["connector_failed"]
    assert "null used for required field: \\\"b8a\\\"" in json.dumps(recording.meta["error"])
    ours = _decode(recording)
    assert not compare_records(ours[:len(recording.records)], recording.records, recording.key)
    (change,) = [r for r in ours if r["topic"] == "pgcdc.public.t_bitarr_nn"]
    assert change["value"]["payload"]["after"] == {"id": 1}
