"""Transactions being assembled: the current one, streamed ones and prepared ones.

pgoutput sends an ordinary transaction whole, between Begin and Commit, after it
committed. Streamed transactions (protocol 2+) arrive in blocks before they
commit and may abort, wholly or by subtransaction; two-phase transactions
(protocol 3+) are prepared first and committed or rolled back later. Their
changes are held in a :class:`ChangeBuffer` until the outcome is known, so that
nothing of an aborted (sub)transaction ever surfaces and every event is emitted
in commit order.

Memory is bounded by a :class:`~pgcdc_events.spill.MemoryBudget` shared by the
buffers of one decoder (see :mod:`pgcdc_events.spill`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs

# The spill machinery has its own module; these names stay importable from here.
from pgcdc_events.spill import (
    AttrsEntryCodec,
    EntryCodec,
    MemoryBudget,
    SpillError,
    SpillList,
    message_size,
)

__all__ = [
    "AttrsEntryCodec",
    "ChangeBuffer",
    "EntryCodec",
    "MemoryBudget",
    "SpillError",
    "SpillList",
    "TransactionContext",
    "message_size",
]


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
        self.total_order = total = self.total_order + 1
        counts = self.per_collection
        counts[collection] = order = counts.get(collection, 0) + 1
        return total, order

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
    entries; nothing is ever dropped otherwise. With a :class:`MemoryBudget` the
    entries spill to a temporary file beyond the budget (see :class:`SpillList`).
    """

    __slots__ = ("_entries", "origin", "origin_lsn")

    def __init__(self, budget: MemoryBudget | None = None) -> None:
        codec = AttrsEntryCodec() if budget is not None else _NO_CODEC
        self._entries: SpillList[Any] = SpillList(codec, budget)
        self.origin: str | None = None
        self.origin_lsn: int | None = None

    def append(self, subxid: int | None, entry: Any) -> None:
        """Buffer one change of (sub)transaction ``subxid``."""
        self._entries.append(subxid, entry)

    def discard(self, subxid: int) -> int:
        """Drop every change of an aborted subtransaction; returns how many were dropped."""
        return self._entries.discard(subxid)

    def close(self) -> None:
        """Drop every change and delete the spill file (the transaction aborted or was replayed)."""
        self._entries.close()

    @property
    def spilled(self) -> bool:
        """Whether some of the changes live in a spill file."""
        return self._entries.spilled

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._entries)


class _NoCodec:
    """The codec of a buffer without a budget: it never spills, so it never encodes."""

    def size(self, entry: Any) -> int:
        return 0

    def encode(self, entry: Any) -> bytes:  # pragma: no cover - never called without a budget
        raise SpillError("this buffer has no memory budget and never spills")

    def decode(self, data: bytes) -> Any:  # pragma: no cover - never called without a budget
        raise SpillError("this buffer has no memory budget and never spills")


_NO_CODEC = _NoCodec()
