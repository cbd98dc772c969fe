"""Decoding a capture in chunks (``pgcdc_events.events.chunks``) gives one decoder's records.

Every golden capture is cut as finely as the planner allows (after every ordinary Commit
outside streamed and prepared transactions); the chunks are decoded in a shuffled order
by one ``ChunkDecoder`` (each chunk primed from the plan alone) and, separately, each by
a fresh one; put back in chunk order the records must be the single decoder's, whole.
"""

from __future__ import annotations

import random

import pytest

from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.events.chunks import ChunkDecoder, ChunkError, control_messages, plan_chunks
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
    assert plan.boundaries == (kinds.rindex("C"),)  # only the Commit after Commit Prepared


def test_a_bad_message_names_its_position() -> None:
    t = table("public.t", {"id": "int4"}, primary_key="id")
    rows = [(i, int(r.lsn), bytes(r.data)) for i, r in
            enumerate(render([t], [Transaction((op_insert(t, {"id": 1}),))]).capture())]
    rows[2] = (2, rows[2][1], rows[2][2][:3])  # the Insert, cut short
    plan = plan_chunks(control_messages(rows))
    decoder = ChunkDecoder(plan, lambda: EventDecoder(EventConfig(topic_prefix="p")))
    with pytest.raises(ChunkError, match=r"^position 2: ProtocolError"):
        list(decoder.decode(0, rows))
