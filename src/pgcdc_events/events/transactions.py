"""Transactions being assembled: the current one, streamed ones and prepared ones.

pgoutput sends an ordinary transaction whole, between Begin and Commit, after it
committed. Streamed transactions (protocol 2+) arrive in blocks before they
commit and may abort, wholly or by subtransaction; two-phase transactions
(protocol 3+) are prepared first and committed or rolled back later. Their
changes are held in a :class:`ChangeBuffer` until the outcome is known, so that
nothing of an aborted (sub)transaction ever surfaces and every event is emitted
in commit order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs

__all__ = ["ChangeBuffer", "TransactionContext"]


@attrs.define
class TransactionContext:
    """What the events of one transaction share: xid, commit time, origin, counters."""

    xid: int
    commit_us: int
    begin_lsn: int
    origin: str | None = None
    origin_lsn: int | None = None
    total_order: int = 0
    per_collection: dict[str | tuple[str, int], int] = attrs.field(factory=dict)

    def next_order(self, collection: str) -> tuple[int, int]:
        """Advance and return ``(total_order, data_collection_order)`` for one more event."""
        self.total_order += 1
        order = self.per_collection.get(collection, 0) + 1
        self.per_collection[collection] = order
        return self.total_order, order

    def next_message_order(self, collection: str) -> tuple[int, int]:
        """Like :meth:`next_order` for a logical message, which Debezium counts as a data
        collection of its own (each message has a distinct collection id)."""
        self.total_order += 1
        self.per_collection[(collection, self.total_order)] = 1
        return self.total_order, 1


class ChangeBuffer:
    """Buffered changes of one transaction, in arrival order, tagged by (sub)transaction id.

    Each entry is whatever the decoder needs to replay the change later (the table
    schema in force, the message and its LSN). Discarding a subtransaction drops its
    entries; nothing is ever dropped otherwise.
    """

    __slots__ = ("_entries", "origin", "origin_lsn")

    def __init__(self) -> None:
        self._entries: list[tuple[int | None, Any]] = []
        self.origin: str | None = None
        self.origin_lsn: int | None = None

    def append(self, subxid: int | None, entry: Any) -> None:
        """Buffer one change of (sub)transaction ``subxid``."""
        self._entries.append((subxid, entry))

    def discard(self, subxid: int) -> int:
        """Drop every change of an aborted subtransaction; returns how many were dropped."""
        before = len(self._entries)
        self._entries = [e for e in self._entries if e[0] != subxid]
        return before - len(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Any]:
        return (entry for _, entry in self._entries)
