"""Counters comparable to the connector's streaming metrics, for embedders to export."""

from __future__ import annotations

import time

import attrs

__all__ = ["StreamingMetrics"]


@attrs.define
class StreamingMetrics:
    """What the decoder has seen; mirrors Debezium's ``StreamingChangeEventSourceMetrics``.

    ``events_seen`` counts emitted data-change and message events (tombstones and
    transaction records are not events); ``events_filtered`` counts changes dropped
    by table, column-less, prefix or ``skipped.operations`` rules;
    ``conversion_errors`` counts values replaced by null under
    ``event.converting.failure.handling.mode`` ``warn`` or ``skip``; ``failed_events``
    counts changes skipped under ``event.processing.failure.handling.mode`` ``warn``
    or ``skip``. Debezium's ``NumberOfErroneousEvents`` is their sum.
    """

    events_seen: int = 0
    events_filtered: int = 0
    conversion_errors: int = 0
    failed_events: int = 0
    committed_transactions: int = 0
    last_transaction_id: int | None = None
    last_lsn: int | None = None
    last_event_commit_us: int | None = None

    def milliseconds_behind_source(self, now_ns: int | None = None) -> int | None:
        """Milliseconds between the last event's commit time and now (``None`` before any)."""
        if self.last_event_commit_us is None:
            return None
        now = time.time_ns() if now_ns is None else now_ns
        return max(0, (now // 1000 - self.last_event_commit_us) // 1000)

    def as_dict(self) -> dict[str, int | None]:
        """The counters under Debezium's metric names."""
        return {
            "TotalNumberOfEventsSeen": self.events_seen,
            "NumberOfEventsFiltered": self.events_filtered,
            "NumberOfErroneousEvents": self.conversion_errors + self.failed_events,
            "NumberOfCommittedTransactions": self.committed_transactions,
            "LastTransactionId": self.last_transaction_id,
            "LastLsn": self.last_lsn,
            "MilliSecondsBehindSource": self.milliseconds_behind_source(),
        }
