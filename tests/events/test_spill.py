"""Bounded memory in the transaction assembler: buffers spill to disk and read back in order.

The decoder with a memory limit (even 0, spilling every change) must produce
exactly the records it produces without one, for streamed transactions with
subtransaction aborts, interleaved streams and two-phase transactions; aborted
subtransactions are gone from memory and from the spill file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import attrs
import pytest

from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.events.transactions import (
    AttrsEntryCodec,
    ChangeBuffer,
    MemoryBudget,
    SpillList,
    message_size,
)
from pgcdc_events.protocol import Insert, TupleData, iter_capture

CAPTURES = Path(__file__).resolve().parent.parent / "protocol" / "captures"
CLOCK = 1_700_000_000_000_000_000


@attrs.frozen
class Entry:
    table: object
    message: Any
    lsn: int
    tables: tuple[object, ...] = ()


class BytesCodec:
    def size(self, entry: bytes) -> int:
        return len(entry)

    def encode(self, entry: bytes) -> bytes:
        return entry

    def decode(self, data: bytes) -> bytes:
        return data


def _insert(i: int, xid: int | None = None, width: int = 100) -> Insert:
    return Insert(16384, TupleData(b"tt", (str(i).encode(), b"x" * width)), xid)


def test_spill_list_keeps_append_order_across_spills() -> None:
    budget = MemoryBudget(1000)
    buf: SpillList[bytes] = SpillList(BytesCodec(), budget)
    items = [bytes([i % 256]) * (i % 37 + 1) for i in range(500)]
    for i, item in enumerate(items):
        buf.append(i % 3, item)
    assert buf.spilled and budget.spills > 1
    assert buf.memory_bytes <= 1000
    assert list(buf) == items
    assert list(buf) == items  # iterating twice reads the file twice
    assert len(buf) == 500


def test_discard_drops_a_subtransaction_from_memory_and_disk() -> None:
    budget = MemoryBudget(200)
    buf: SpillList[bytes] = SpillList(BytesCodec(), budget)
    expected = []
    for i in range(300):
        tag = 7 if i % 3 else 8
        item = f"{tag}:{i}".encode()
        buf.append(tag, item)
        if tag == 8:
            expected.append(item)
    size_before = buf.file_bytes
    assert buf.discard(7) == 200
    assert list(buf) == expected and len(buf) == 100
    # most of the file was dead: it was rewritten without them
    assert 0 < buf.file_bytes < size_before
    assert buf.discard(7) == 0


def test_discard_of_a_small_subtransaction_skips_it_and_compacts_later() -> None:
    buf: SpillList[bytes] = SpillList(BytesCodec(), MemoryBudget(0))
    for i in range(100):
        buf.append(1, b"keep%d" % i)
    buf.append(2, b"drop")
    buf.append(None, b"top")
    assert buf.discard(2) == 1
    assert list(buf) == [b"keep%d" % i for i in range(100)] + [b"top"]
    # the tag is reused after its abort: the old entry stays gone
    buf.append(2, b"again")
    assert list(buf)[-2:] == [b"top", b"again"]


def _open_files_in(directory: Path) -> int:
    """Open file descriptors of this process on files in ``directory`` (deleted ones too)."""
    fds = Path("/proc/self/fd")
    count = 0
    for fd in os.listdir(fds):
        try:
            target = os.readlink(fds / fd)
        except OSError:
            continue
        count += target.startswith(str(directory) + "/")
    return count


def test_close_deletes_the_spill_file_and_releases_the_budget(tmp_path: Path) -> None:
    budget = MemoryBudget(10, spill_dir=tmp_path)
    buf: SpillList[bytes] = SpillList(BytesCodec(), budget)
    for i in range(50):
        buf.append(None, b"%05d" % i)
    assert _open_files_in(tmp_path) == 1
    buf.close()
    assert _open_files_in(tmp_path) == 0
    assert list(buf) == [] and len(buf) == 0
    assert list(tmp_path.iterdir()) == []  # anonymous files: nothing ever visible


def test_budget_is_shared_and_dropped_buffers_stop_counting() -> None:
    budget = MemoryBudget(10_000)
    first: SpillList[bytes] = SpillList(BytesCodec(), budget)
    for _ in range(9):
        first.append(None, b"x" * 1000)
    del first  # a transaction that aborted: its buffer is simply dropped
    second: SpillList[bytes] = SpillList(BytesCodec(), budget)
    for _ in range(9):
        second.append(None, b"y" * 1000)
    assert not second.spilled  # the dropped buffer's 9000 bytes no longer count
    second.append(None, b"z" * 2000)
    assert second.spilled and budget.used <= budget.limit


def test_attrs_codec_round_trips_entries_and_shares_objects() -> None:
    codec = AttrsEntryCodec()
    table = object()
    entries = [
        Entry(table, _insert(1, xid=77), 2**64 - 1, (table, None)),
        Entry(None, _insert(2), -5),
        Entry(table, _insert(3, xid=0), 0, ()),
    ]
    for entry in entries:
        back = codec.decode(codec.encode(entry))
        assert back == entry
        assert back.table is entry.table


def test_message_size_grows_with_values() -> None:
    small, big = message_size(_insert(1, width=10)), message_size(_insert(1, width=10_000))
    assert big - small == 9_990


def test_change_buffer_without_budget_never_spills() -> None:
    buf = ChangeBuffer()
    for i in range(1000):
        buf.append(None, Entry(None, _insert(i), i))
    assert not buf.spilled and len(buf) == 1000


def _decode(name: str, *, lazily: bool = False, **kwargs: Any) -> list[str]:
    """The capture's records as JSON lines, from ``feed`` or (``lazily``) ``iter_feed``."""
    config = EventConfig.from_properties({"topic.prefix": "t",
                                          "provide.transaction.metadata": "true"})
    decoder = EventDecoder(config, clock=lambda: CLOCK, run_id="r", **kwargs)
    writer = JsonRecordWriter(config.json)
    with open(CAPTURES / f"{name}.jsonl", encoding="utf-8") as fh:
        rows = list(iter_capture(fh))
    if lazily:
        records = [r for row in rows for r in decoder.iter_feed(row.data, row.lsn)]
    else:
        records = decoder.feed_rows(rows)
    return [writer.record_line(r) for r in records]


@pytest.mark.parametrize("name", ["stream_commit", "stream_abort", "stream_interleaved",
                                  "stream_messages", "two_phase"])
@pytest.mark.parametrize("limit", [0, 4096])
def test_decoder_with_a_memory_limit_gives_the_same_records(name: str, limit: int) -> None:
    unbounded = _decode(name)
    assert unbounded
    assert _decode(name, memory_limit=limit) == unbounded


def test_decoder_memory_limit_spills_a_streamed_transaction() -> None:
    config = EventConfig.from_properties({"topic.prefix": "t"})
    decoder = EventDecoder(config, clock=lambda: CLOCK, memory_limit=0)
    with open(CAPTURES / "stream_commit.jsonl", encoding="utf-8") as fh:
        rows = list(iter_capture(fh))
    spilled = False
    for row in rows:
        decoder.feed_row(row)
        spilled = spilled or any(b.spilled for b in decoder._buffers.values())
    assert spilled
    assert decoder._budget is not None and decoder._budget.spills > 0
    payloads = [json.loads(line) for line in _decode("stream_commit", memory_limit=0)]
    assert payloads


def test_memory_budget_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="memory limit"):
        MemoryBudget(-1)


@pytest.mark.parametrize("name", ["stream_commit", "stream_interleaved", "two_phase"])
@pytest.mark.parametrize("limit", [None, 0])
def test_iter_feed_gives_the_same_records(name: str, limit: int | None) -> None:
    assert _decode(name, lazily=True, memory_limit=limit) == _decode(name)


def test_iter_feed_reads_a_committed_transaction_back_one_change_at_a_time() -> None:
    """The records of a Stream Commit come from the spill file as they are asked for; the
    buffer (and its share of the budget) is released once they are all out."""
    config = EventConfig.from_properties({"topic.prefix": "t"})
    decoder = EventDecoder(config, clock=lambda: CLOCK, memory_limit=0)
    with open(CAPTURES / "stream_commit.jsonl", encoding="utf-8") as fh:
        rows = list(iter_capture(fh))
    commit = next(i for i, row in enumerate(rows) if row.data[:1] == b"c")
    for row in rows[:commit]:
        list(decoder.iter_feed(row.data, row.lsn))
    (buffer,) = decoder._buffers.values()
    assert buffer.spilled and len(buffer) == 64  # 60 inserts, 3 updates, a delete
    changes, committed = len(buffer), decoder.metrics.committed_transactions
    records = decoder.iter_feed(rows[commit].data, rows[commit].lsn)
    first = next(records)  # the first record, before the others are decoded
    assert first.value is not None and first.value["op"] == "c"
    assert decoder.metrics.committed_transactions == committed
    assert 1 + len(list(records)) == changes + 1  # and the delete's tombstone
    assert decoder.metrics.committed_transactions == committed + 1
    assert decoder._budget is not None and decoder._budget.used == 0
