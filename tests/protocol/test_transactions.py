"""The transaction resolver, the one home of pgoutput's transaction rules, against what we
did not write: PostgreSQL's own ``xid`` column beside every message of the committed
protocol captures (``pg_logical_slot_peek_binary_changes``), and the protocol reader's
independent ordering state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgcdc_events.errors import ProtocolError
from pgcdc_events.protocol import CaptureRow, PgOutputReader, encode_message, iter_capture
from pgcdc_events.protocol.messages import (
    Begin,
    Commit,
    CommitPrepared,
    LogicalMessage,
    StreamCommit,
)
from pgcdc_events.protocol.transactions import (
    COMMITS,
    Prelude,
    Step,
    TransactionResolver,
    outside_form,
)

CAPTURES = Path(__file__).resolve().parent / "captures"
INDEX = json.loads((CAPTURES / "index.json").read_text())["captures"]


def _rows(entry: dict[str, object]) -> list[CaptureRow]:
    with open(CAPTURES / str(entry["capture"])) as fh:
        return list(iter_capture(fh))


@pytest.mark.parametrize("entry", INDEX, ids=[e["name"] for e in INDEX])
def test_the_owner_of_every_message_is_the_xid_postgresql_reports(entry: dict) -> None:  # type: ignore[type-arg]
    """Read from the heads alone, each message's transaction is the ``xid`` the SQL
    interface printed beside it; parsed, the same answer and the same steps."""
    by_head: TransactionResolver[None] = TransactionResolver()
    by_message: TransactionResolver[None] = TransactionResolver()
    reader = PgOutputReader()
    compared = 0
    for row in _rows(entry):
        message = reader.read(row.data)
        head_step = by_head.feed_head(row.data, int(row.lsn))
        step = by_message.feed_message(message, int(row.lsn))
        assert head_step is step, (row.lsn, type(message).__name__)
        assert by_head.owner == by_message.owner
        if row.xid is not None and not _unknowable(message, row):
            assert by_head.owner == row.xid, (row.lsn, type(message).__name__)
            compared += 1
        # the reader keeps its own ordering state: the two never disagree
        assert by_message.in_stream == reader.in_stream
        assert (by_message.current is not None) == reader.in_transaction
    assert compared > 0
    assert by_message.idle  # every capture ends with its transactions resolved


def _unknowable(message: object, row: CaptureRow) -> bool:
    """A non-transactional message sent by a transaction that had an xid: PostgreSQL
    reports that xid, which the message does not carry (we report 0)."""
    return isinstance(message, LogicalMessage) and not message.transactional and row.xid != 0


def _first(entry_name: str) -> dict:  # type: ignore[type-arg]
    return next(e for e in INDEX if e["name"] == entry_name)


def test_streamed_and_prepared_transactions_are_held_until_resolved() -> None:
    """On the real streamed captures: a transaction is held (``streams``) from its first
    segment to its Stream Commit or Abort, ``held_since`` is where the earliest still held
    began, and a cut is allowed only after a commit that leaves nothing open."""
    for name in ("stream_commit", "stream_abort", "stream_interleaved", "two_phase"):
        resolver: TransactionResolver[None] = TransactionResolver()
        reader = PgOutputReader()
        starts: dict[int, int] = {}
        steps = []
        for row in _rows(_first(name)):
            message = reader.read(row.data)
            step = resolver.feed_message(message, int(row.lsn))
            steps.append(step)
            if step is Step.STREAM_OPEN:
                starts[resolver.block] = int(row.lsn)  # type: ignore[index]
            if step in (Step.STREAM_COMMIT, Step.STREAM_ABORT, Step.STREAM_PREPARE):
                starts.pop(resolver.owner, None)  # type: ignore[arg-type]
            assert set(resolver.streams) == set(starts)
            if starts:
                assert resolver.held_since is not None
                assert resolver.held_since <= min(starts.values())
            if step in COMMITS and resolver.idle:
                assert not resolver.streams and not resolver.prepared
        assert any(s in COMMITS for s in steps), name
    aborts = [resolver_step for resolver_step in _steps("stream_abort")]
    assert Step.STREAM_ABORT in aborts or Step.SUBXACT_ABORT in aborts


def _steps(name: str) -> list[Step]:
    resolver: TransactionResolver[None] = TransactionResolver()
    reader = PgOutputReader()
    return [resolver.feed_message(reader.read(row.data), int(row.lsn))
            for row in _rows(_first(name))]


def test_two_phase_steps_follow_the_server() -> None:
    steps = _steps("two_phase")
    assert Step.BEGIN_PREPARE in steps and Step.PREPARE in steps
    assert Step.COMMIT_PREPARED in steps or Step.ROLLBACK_PREPARED in steps
    # every Begin Prepare is followed by its Prepare before anything else opens
    opened = None
    for step in steps:
        if step is Step.BEGIN_PREPARE:
            assert opened is None
            opened = step
        elif step is Step.PREPARE:
            assert opened is Step.BEGIN_PREPARE
            opened = None


def test_a_first_segment_starts_a_streamed_transaction_over() -> None:
    resolver: TransactionResolver[None] = TransactionResolver()
    assert resolver.feed(b"S"[0], 7, lsn=10, first_segment=True) is Step.STREAM_OPEN
    assert resolver.feed(b"E"[0]) is Step.STREAM_STOP
    assert resolver.feed(b"S"[0], 7, lsn=20) is Step.STREAM_CONTINUE
    assert resolver.streams == {7: 10}
    resolver.feed(b"E"[0])
    # sent again from its beginning after a reconnect
    assert resolver.feed(b"S"[0], 7, lsn=30, first_segment=True) is Step.STREAM_OPEN
    assert resolver.streams == {7: 30}
    resolver.feed(b"E"[0])
    assert resolver.feed(b"A"[0], 7, subxid=8) is Step.SUBXACT_ABORT
    assert resolver.streams == {7: 30}
    assert resolver.feed(b"p"[0], 7, lsn=40) is Step.STREAM_PREPARE
    assert resolver.streams == {} and resolver.prepared == {7: 30}
    assert resolver.held_since == 30 and not resolver.idle
    assert resolver.feed(b"K"[0], 7) is Step.COMMIT_PREPARED
    assert resolver.idle and resolver.held_since is None


def test_a_non_transactional_message_is_a_commit_of_its_own_only_outside_transactions() -> None:
    resolver: TransactionResolver[str] = TransactionResolver()
    m = b"M"[0]
    assert resolver.feed(m, transactional=False, item="alone") is Step.MESSAGE
    assert resolver.owner == 0 and resolver.last_message == "alone"
    resolver.feed(b"B"[0], 5, item="B")
    assert resolver.feed(m, transactional=False, item="inside") is Step.MESSAGE
    assert resolver.owner == 5 and resolver.last_message == "alone"  # not after a commit
    assert resolver.feed(m, transactional=True) is Step.CHANGE
    resolver.feed(b"C"[0], item="C")
    assert resolver.last_transaction == ("B", "C") and resolver.last_message is None


def test_reset_keeps_or_forgets_the_held_transactions() -> None:
    resolver: TransactionResolver[None] = TransactionResolver()
    resolver.feed(b"S"[0], 3, lsn=1, first_segment=True)
    resolver.feed(b"B"[0], 4)
    resolver.reset(keep_held=True)
    assert resolver.block is None and resolver.current is None and resolver.streams == {3: 1}
    resolver.reset(keep_held=False)
    assert resolver.idle


def test_the_prelude_stands_a_streamed_commit_in_for_begin_and_commit() -> None:
    commit = StreamCommit(xid=9, flags=0, commit_lsn=100, end_lsn=108, commit_time=123)
    resolver: TransactionResolver[bytes] = TransactionResolver()
    resolver.feed(b"S"[0], 9, first_segment=True)
    resolver.feed(b"E"[0])
    data = bytes(encode_message(commit))
    assert resolver.feed_head(data, item=data) is Step.STREAM_COMMIT
    prelude = resolver.prelude(lambda item: (100, item))
    assert prelude.transaction == (
        (100, bytes(encode_message(Begin(100, 123, 9)))),
        (100, bytes(encode_message(Commit(0, 100, 108, 123)))))
    cp = CommitPrepared(flags=0, commit_lsn=200, end_lsn=208, commit_time=5, xid=11, gid="g")
    assert Prelude.stand_in(cp, 200)[1] == (200, bytes(encode_message(Commit(0, 200, 208, 5))))


def test_prelude_schema_is_in_its_form_outside_stream_blocks() -> None:
    """A Relation sent inside a stream block carries the xid; a decoder starting after a
    cut is fed it without (the one place that rewrites it)."""
    rows = _rows(_first("stream_commit"))
    resolver: TransactionResolver[CaptureRow] = TransactionResolver()
    reader = PgOutputReader()
    in_stream_relations = 0
    for row in rows:
        message = reader.read(row.data)
        if row.data[:1] == b"R" and reader.in_stream:
            in_stream_relations += 1
        resolver.feed_message(message, int(row.lsn), item=row)
    assert in_stream_relations > 0
    prelude = resolver.prelude(lambda row: (int(row.lsn), bytes(row.data)))
    assert prelude.schema
    fresh = PgOutputReader()
    for _, data in prelude.schema:
        fresh.read(data)  # outside any block: parses only in the outside form
    assert set(fresh.relations) == set(reader.relations)
    assert Prelude.from_json(json.loads(json.dumps(prelude.to_json()))) == prelude
    assert outside_form(prelude.schema[0][1], in_stream=False) == prelude.schema[0][1]


def test_a_malformed_prelude_is_refused_by_name() -> None:
    with pytest.raises(ProtocolError, match=r"a prelude as Prelude\.to_json writes it"):
        Prelude.from_json({"schema": [[1, "zz"]], "transaction": None, "message": None})
    with pytest.raises(ProtocolError, match=r"Prelude\.to_json"):
        Prelude.from_json({"schema": []})
