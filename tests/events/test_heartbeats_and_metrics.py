"""Heartbeats (shape checked against the connector's) and streaming metrics."""

from __future__ import annotations

import json

from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from support.golden import recordings

NAMES_AVRO = next(r for r in recordings("events_wide") if r.mode == "wide-names-avro")


class Clock:
    """A settable clock in nanoseconds."""

    def __init__(self, ns: int) -> None:
        self.ns = ns

    def __call__(self) -> int:
        return self.ns


def test_heartbeat_record_has_the_connectors_shape() -> None:
    theirs = [r for r in NAMES_AVRO.records if r["topic"].startswith("__debezium-heartbeat")]
    assert theirs, "the recording has heartbeats"
    config = EventConfig.from_properties(NAMES_AVRO.properties)
    clock = Clock(theirs[0]["value"]["payload"]["ts_ms"] * 1_000_000)
    decoder = EventDecoder(config, clock=clock)
    writer = JsonRecordWriter(config.json)
    ours = [json.loads(writer.record_line(r)) for r in decoder.keepalive(0x1000)]
    assert ours == [theirs[0]]


def test_heartbeats_follow_the_interval() -> None:
    config = EventConfig.from_properties({"topic.prefix": "p", "heartbeat.interval.ms": "1000"})
    clock = Clock(10**18)
    decoder = EventDecoder(config, clock=clock)
    assert len(decoder.keepalive(1)) == 1
    clock.ns += 999_000_000
    assert decoder.keepalive(2) == []
    clock.ns += 1_000_000
    beat = decoder.keepalive(3)
    assert [r.topic for r in beat] == ["__debezium-heartbeat.p"] and beat[0].lsn == 3
    off = EventDecoder(EventConfig.from_properties({"topic.prefix": "p"}), clock=clock)
    assert off.keepalive(4) == []


def test_metrics_count_what_the_decoder_saw() -> None:
    recording = next(r for r in recordings("events") if r.mode == "events-filters-masking")
    config = EventConfig.from_properties(recording.properties)
    decoder = EventDecoder(config, catalog=recording.catalog, clock=lambda: 10**18)
    records = decoder.feed_rows(recording.capture)
    metrics = decoder.metrics
    changes = [r for r in records if r.kind in ("change", "message")]
    assert metrics.events_seen == len(changes)
    assert metrics.events_filtered > 0  # tables outside table.include.list
    commits = sum(1 for row in recording.capture if row.data[:1] == b"C")
    assert metrics.committed_transactions == commits
    assert metrics.last_lsn == int(recording.capture[-1].lsn)
    names = metrics.as_dict()
    assert names["TotalNumberOfEventsSeen"] == len(changes)
    assert metrics.milliseconds_behind_source(now_ns=10**18 + 5 * 10**9) is not None
