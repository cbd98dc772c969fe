"""Decoding a capture in chunks (``pgcdc_events.events.chunks``) gives one decoder's records.

Every golden capture is cut as finely as the planner allows (after every commit where no
other streamed or prepared transaction is open); the chunks are decoded in a shuffled order
by one ``ChunkDecoder`` (each chunk primed from the plan alone) and, separately, each by
a fresh one; put back in chunk order the records must be the single decoder's, whole.
"""

from __future__ import annotations

import random

import pytest

from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.events.chunks import (
    ChunkDecoder,
    ChunkError,
    CutPlanner,
    control_messages,
    plan_chunks,
)
from pgcdc_events.protocol import CaptureRow, Lsn
from pgcdc_events.testing import Transaction, op_insert, render, table
from pgcdc_events.testing.workload import Schedule
from support.golden import Recording, recordings

# Snapshot blocks are not chunked: rows are (position, lsn, data) without the snapshot
# flag, and the Spark layer refuses such captures (tests/spark/test_cli.py).
RECORDINGS = [r for r in recordings("*") if not r.meta.get("connector_failed")
              and not any(row.snapshot for row in r.capture)]
CLOCK_NS = 1_700_000_000_000_000_000


def _decode(recording: Recording, order: str) -> tuple[list[str], list[str], int]:
    config = EventConfig.from_properties(recording.properties)
    render_line = JsonRecordWriter.for_config(config).record_line

    def make() -> EventDecoder:
        return EventDecoder(config, catalog=recording.catalog, clock=lambda: CLOCK_NS,
                            run_id="r")

    want = [render_line(r) for r in make().feed_rows(recording.capture)]
    rows = [(i, int(r.lsn), bytes(r.data)) for i, r in enumerate(recording.capture)]
    plan = plan_chunks(control_messages(rows), min_messages=1)
    chunks: dict[int, list[tuple[int, int, bytes]]] = {}
    for row in rows:
        chunks.setdefault(plan.chunk_of(row[0]), []).append(row)
    ids = sorted(chunks)
    if order == "shuffled":
        random.Random(12).shuffle(ids)
    shared = ChunkDecoder(plan, make)
    got: dict[int, list[str]] = {}
    for chunk in ids:
        decoder = shared if order == "shuffled" else ChunkDecoder(plan, make)
        got[chunk] = [render_line(r) for _, _, r in decoder.decode(chunk, chunks[chunk])]
    return [line for chunk in sorted(got) for line in got[chunk]], want, plan.chunks


@pytest.mark.parametrize("order", ["shuffled", "fresh"])
@pytest.mark.parametrize("recording", RECORDINGS, ids=[r.key for r in RECORDINGS])
def test_chunks_decode_as_one_decoder(recording: Recording, order: str) -> None:
    got, want, chunks = _decode(recording, order)
    assert chunks > 1
    assert got == want


def test_no_cut_while_a_prepared_transaction_is_open() -> None:
    t = table("public.t", {"id": "int4"}, primary_key="id")
    first = Transaction((op_insert(t, {"id": 1}),))
    prepared = Transaction((op_insert(t, {"id": 2}),), two_phase=True, gid="g")
    last = Transaction((op_insert(t, {"id": 3}),))
    schedule = Schedule(((1, ("prepare",)), (0, ("end",)), (1, ("end",)), (2, ("end",))))
    rows = [(i, int(r.lsn), bytes(r.data))
            for i, r in enumerate(render([t], [first, prepared, last], schedule).capture())]
    kinds = "".join(chr(r[2][0]) for r in rows)
    assert kinds.count("C") == 2 and kinds.index("K") > kinds.index("C")  # C while prepared
    plan = plan_chunks(control_messages(rows), min_messages=1)
    # not the Commit while the prepared transaction is open; its Commit Prepared, which
    # ends it, and the Commit after
    assert plan.boundaries == (kinds.index("K"), kinds.rindex("C"))


@pytest.mark.parametrize("last", ["streamed", "prepared", "plain after"])
def test_streamed_and_prepared_commits_are_cuts(last: str) -> None:
    """A Stream Commit or Commit Prepared with nothing else open ends a chunk: a reader that
    decodes up to the last cut (decode_stream) does not hold such a transaction back until
    a later plain one. The next chunk starts from the commit time and end LSN it left
    (``source.sequence`` of the plain transaction after it), as one decoder does."""
    t = table("public.t", {"id": "int4"}, primary_key="id")
    plain = Transaction((op_insert(t, {"id": 1}),))
    streamed = Transaction(tuple(op_insert(t, {"id": i}) for i in range(2, 6)),
                           streamed=True, block_ends=(2, 4))
    prepared = Transaction((op_insert(t, {"id": 6}),), two_phase=True, gid="g")
    after = Transaction((op_insert(t, {"id": 7}),))
    items = [plain, streamed, prepared, after]
    events: list[tuple[int, tuple[object, ...]]] = [
        (0, ("end",)), (1, ("block", 0)), (1, ("block", 1)), (1, ("end",)),
        (2, ("prepare",)), (2, ("end",))]
    if last == "streamed":
        items, events = items[:2], events[:4]
    elif last == "plain after":
        events.append((3, ("end",)))
    else:
        items = items[:3]
    rows = [(i, int(r.lsn), bytes(r.data))
            for i, r in enumerate(render([t], items, Schedule(tuple(events))).capture())]
    kinds = "".join(chr(r[2][0]) for r in rows)
    plan = plan_chunks(control_messages(rows), min_messages=1)
    ends = [kinds.index("C"), kinds.index("c")]
    if last != "streamed":
        ends.append(kinds.index("K"))
    if last == "plain after":
        ends.append(kinds.rindex("C"))
    assert plan.boundaries == tuple(ends)
    config = EventConfig.from_properties({"topic.prefix": "p"})

    def make() -> EventDecoder:
        return EventDecoder(config, clock=lambda: CLOCK_NS, run_id="r")

    render_line = JsonRecordWriter.for_config(config).record_line
    want = [render_line(r) for r in make().feed_rows(
        [CaptureRow(Lsn(lsn), None, data) for _, lsn, data in rows])]
    decoder = ChunkDecoder(plan, make)
    got = []
    for chunk in random.Random(3).sample(range(plan.chunks), plan.chunks):
        part = [row for row in rows if plan.chunk_of(row[0]) == chunk]
        got.append((chunk, [render_line(r) for _, _, r in decoder.decode(chunk, part)]))
    assert [line for _, lines in sorted(got) for line in lines] == want
    assert len(want) == len(items) - 1 + 4


def test_a_bad_message_names_its_position() -> None:
    t = table("public.t", {"id": "int4"}, primary_key="id")
    rows = [(i, int(r.lsn), bytes(r.data)) for i, r in
            enumerate(render([t], [Transaction((op_insert(t, {"id": 1}),))]).capture())]
    rows[2] = (2, rows[2][1], rows[2][2][:3])  # the Insert, cut short
    plan = plan_chunks(control_messages(rows))
    decoder = ChunkDecoder(plan, lambda: EventDecoder(EventConfig(topic_prefix="p")))
    with pytest.raises(ChunkError, match=r"^position 2: ProtocolError"):
        list(decoder.decode(0, rows))


def test_planner_cuts_and_preludes_by_message_type() -> None:
    """The planner by itself, as ``decode --workers`` feeds it (lines by type byte): a cut
    after a Commit or a non-transactional message (the decoder's commit of its own), not
    inside a transaction or while a streamed one is open; the prelude is the last Type and
    Relation of every OID, then the last transaction's Begin and commit and a non-transactional message after it."""
    planner: CutPlanner[str] = CutPlanner(min_messages=1, start=0)
    feed = [(b"R", "R1", 1), (b"Y", "Y1", 9), (b"B", "B1", 0), (b"M", "M-in-tx", 0),
            (b"C", "C1", 0), (b"M", "M-alone", 0), (b"R", "R1'", 1), (b"S", "S", 7),
            (b"B", "B2", 0), (b"C", "C2", 0), (b"E", "E", 0), (b"c", "c", 7),
            (b"B", "B3", 0), (b"R", "R2", 2)]
    cuts = [item for position, (kind, item, key) in enumerate(feed, 1)
            if planner.feed(position, kind[0], item, xid=key, oid=key)]
    assert cuts == ["C1", "M-alone", "c"]  # not C2: the streamed transaction was open
    # the Stream Commit ended the last transaction: it stands alone (plan_chunks makes a
    # Begin and Commit of it)
    resolver = planner.resolver
    assert list(resolver.schema_items()) == ["Y1", "R1'", "R2"]
    assert resolver.last_transaction == (None, "c") and resolver.last_message is None
    assert planner.last_cut == 12 and resolver.open_begin == "B3"
    assert resolver.current == 0 and not resolver.idle  # B3 is open
