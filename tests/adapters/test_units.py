"""The unit assembler on real captures: complete, contiguous units in commit order.

Decoding the units' rows one after the other must give exactly the records of
decoding the capture as the server sent it; units at or before ``after`` are
marked seen; what is incomplete when a read ends is never handed out, and an
unresolved PREPARE holds the slot back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pgcdc_events.adapters import CaptureRowCodec, UnitAssembler
from pgcdc_events.adapters.units import CHUNK_LINES, SchemaTracker
from pgcdc_events.errors import ProtocolError
from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.protocol import (
    BeginPrepare,
    CaptureRow,
    CommitPrepared,
    Lsn,
    dump_capture_row,
    encode_message,
    iter_capture,
    parse_message,
)
from pgcdc_events.protocol.transactions import Prelude, TransactionResolver
from pgcdc_events.spill import MemoryBudget

CAPTURES = Path(__file__).resolve().parent.parent / "protocol" / "captures"
NAMES = ["basic_v2", "messages", "origin", "stream_abort", "stream_commit", "stream_interleaved",
         "stream_messages", "truncate", "two_phase", "types", "toast"]
CLOCK = 1_700_000_000_000_000_000


def _rows(name: str) -> list[CaptureRow]:
    with open(CAPTURES / f"{name}.jsonl", encoding="utf-8") as fh:
        return list(iter_capture(fh))


def _assemble(rows: list[CaptureRow], **kwargs: object) -> tuple[list, UnitAssembler]:
    assembler = UnitAssembler(**kwargs)  # type: ignore[arg-type]
    units = []
    for row in rows:
        unit = assembler.feed(row)
        if unit is not None:
            units.append(unit)
    return units, assembler


def _records(rows: list[CaptureRow]) -> list[str]:
    config = EventConfig.from_properties({"topic.prefix": "t",
                                          "provide.transaction.metadata": "true"})
    decoder = EventDecoder(config, clock=lambda: CLOCK, run_id="r")
    writer = JsonRecordWriter(config.json)
    return [writer.record_line(r) for r in decoder.feed_rows(rows)]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("budget", [None, 0])
def test_units_decode_to_the_records_of_the_capture(name: str, budget: int | None) -> None:
    rows = _rows(name)
    units, assembler = _assemble(rows, budget=None if budget is None else MemoryBudget(budget))
    assert assembler.incomplete == 0
    assert [u.end_lsn for u in units] == sorted(u.end_lsn for u in units)
    tracker = SchemaTracker()
    regrouped = [row for unit in units for row in tracker.rows(unit)]
    assert _records(regrouped) == _records(rows)
    # nothing invented, nothing lost: every row is in exactly one unit, except the rows of
    # transactions that aborted whole and of rolled-back prepared transactions
    plain = [row for unit in units for row in unit]
    assert len(plain) <= len(rows)
    assert len(set(map(id, plain))) == len(plain)


def test_a_streamed_transaction_becomes_one_contiguous_unit() -> None:
    units, _ = _assemble(_rows("stream_interleaved"))
    streamed = [u for u in units if u.kind == "streamed"]
    assert len(streamed) == 2
    for unit in streamed:
        types = "".join(chr(r.data[0]) for r in unit)
        assert types.startswith("S") and types.endswith("Ec")
        xids = {parse_message(r.data).xid for r in unit if r.data[:1] in (b"S", b"c")}
        assert xids == {unit.xid}


def test_rolled_back_and_aborted_transactions() -> None:
    units, _ = _assemble(_rows("two_phase"))
    kinds = [u.kind for u in units]
    assert kinds.count("rolled_back") == 2
    assert all(len(u) == 0 and u.changes == 0 for u in units if u.kind == "rolled_back")
    prepared = [u for u in units if u.kind == "prepared"]
    assert prepared and all("".join(chr(r.data[0]) for r in u).endswith("K") for u in prepared)
    stream_units, _ = _assemble(_rows("stream_abort"))
    assert all(u.kind != "streamed" or u.changes for u in stream_units)


def test_seen_marks_units_up_to_after() -> None:
    rows = _rows("stream_messages")
    units, _ = _assemble(rows)
    cut = units[1].end_lsn
    again, _ = _assemble(rows, after=cut)
    assert [u.seen for u in again] == [u.end_lsn <= cut for u in units]
    assert again[0].seen and again[1].seen and not again[-1].seen


def test_a_read_cut_inside_transactions_hands_out_only_complete_units() -> None:
    rows = _rows("two_phase")
    types = "".join(chr(r.data[0]) for r in rows)
    first_prepare = types.index("P") + 1
    units, assembler = _assemble(rows[:first_prepare])
    assert units == []
    begin = parse_message(rows[0].data)
    assert isinstance(begin, BeginPrepare)
    assert assembler.hold_lsn == begin.prepare_lsn
    assert assembler.incomplete == 1
    # a read ending inside a streamed transaction: nothing of it, and no hold
    stream_start = types.index("S")
    units, assembler = _assemble(rows[:stream_start + 5])
    assert all(u.kind != "streamed" for u in units)
    assert assembler.incomplete >= 1
    # reset: the next read starts from scratch and gets the same units as one full read
    assembler.reset()
    assert assembler.incomplete == 0 and assembler.hold_lsn is None
    full, _ = _assemble(rows)
    again = [u for u in (assembler.feed(r) for r in rows) if u is not None]
    assert [(u.kind, u.end_lsn, len(u)) for u in again] == [(u.kind, u.end_lsn, len(u))
                                                             for u in full]


def test_commit_prepared_without_its_prepare_is_an_error() -> None:
    message = CommitPrepared(0, 100, 200, 0, 7, "gid")
    assembler = UnitAssembler()
    with pytest.raises(ProtocolError, match="prepared before this read") as info:
        assembler.feed(CaptureRow(Lsn(200), 7, encode_message(message)))
    assert info.value.message_type == "K"


def test_a_non_transactional_message_ends_just_after_its_lsn() -> None:
    rows = _rows("messages")
    units, _ = _assemble(rows)
    lone = [u for u in units if u.kind == "message"]
    assert lone
    for unit in lone:
        (row,) = list(unit)
        assert unit.end_lsn == row.lsn and unit.changes == 1


def test_capture_row_codec_round_trip() -> None:
    codec = CaptureRowCodec()
    for row in (CaptureRow(Lsn(2**64 - 1), None, b""), CaptureRow(Lsn(5), 2**32 - 1, b"B\x00")):
        assert codec.decode(codec.encode(row)) == row


@pytest.mark.parametrize("name", NAMES)
def test_output_written_in_two_runs_decodes_like_the_capture(name: str) -> None:
    """Run 1 writes the units up to a cut; run 2 (a new process: fresh tracker) reads the
    whole slot again after the cut, skipping seen units. Every cut gives an output that
    decodes to exactly the capture's records."""
    rows = _rows(name)
    units, _ = _assemble(rows)
    expected = _records(rows)
    for cut_index in range(len(units)):
        cut = units[cut_index].end_lsn
        first = SchemaTracker()
        out = [row for u in units[:cut_index + 1] for row in first.rows(u)]
        again, _ = _assemble(rows, after=cut)
        second = SchemaTracker()
        out += [row for u in again if not u.seen for row in second.rows(u)]
        assert _records(out) == expected, f"cut after unit {cut_index}"


@pytest.mark.parametrize("name", NAMES)
def test_what_the_tracker_handed_on_is_the_prelude_of_its_output(name: str) -> None:
    """The tracker's state is the protocol layer's: its prelude is the one a resolver fed
    the rows it handed on gives, and a tracker started from it (a new process, the output
    kept) hands on what the first tracker would have, repeating no schema row."""
    rows = _rows(name)
    units, _ = _assemble(rows)
    expected = _records(rows)
    for cut_index in range(len(units)):
        first = SchemaTracker()
        out = [row for u in units[:cut_index + 1] for row in first.rows(u)]
        resolver: TransactionResolver[tuple[int, bytes]] = TransactionResolver()
        for row in out:
            message = parse_message(row.data, in_stream=resolver.in_stream)
            resolver.feed_message(message, int(row.lsn), item=(int(row.lsn), row.data))
        prelude = first.prelude()
        assert prelude.schema == resolver.prelude(lambda item: item).schema
        assert Prelude.from_json(prelude.to_json()) == prelude
        second = SchemaTracker(prelude)
        rest = units[cut_index + 1:]
        again = [row for u in rest for row in second.rows(u)]
        assert again == [row for u in rest for row in first.rows(u)]
        assert _records(out + again) == expected, f"cut after unit {cut_index}"


def test_a_tracker_refuses_a_prelude_that_is_not_schema() -> None:
    begin = encode_message(BeginPrepare(1, 2, 3, 4, "g"))
    with pytest.raises(ProtocolError, match="Relation or Type"):
        SchemaTracker(Prelude(schema=((1, bytes(begin)),)))


def test_a_change_relying_on_a_held_prepared_transactions_relation_gets_it() -> None:
    rows = _rows("two_phase")
    units, _ = _assemble(rows)
    plain = next(u for u in units if u.kind == "transaction")
    assert "".join(chr(r.data[0]) for r in plain) == "BIC"
    assert [chr(r.data[0]) for r in plain.schema] == ["R"]
    tracker = SchemaTracker()
    assert "".join(chr(r.data[0]) for r in tracker.rows(plain)) == "RBIC"
    assert "".join(chr(r.data[0]) for r in tracker.rows(plain)) == "BIC"  # known now


def test_a_commit_prepared_delivered_before_may_come_alone() -> None:
    """A later PREPARE held the slot past this transaction's PREPARE, not its COMMIT
    PREPARED: the server sends the COMMIT PREPARED alone, and it was delivered before."""
    message = CommitPrepared(0, 100, 200, 0, 7, "gid")
    assembler = UnitAssembler(after=200)
    unit = assembler.feed(CaptureRow(Lsn(200), 7, encode_message(message)))
    assert unit is not None and unit.seen and unit.partial and unit.end_lsn == 200


def _broken_inserts() -> list[tuple[str, bytes]]:
    """An Insert of the basic capture, broken in its head in each way the head can be."""
    insert = next(r for r in _rows("basic_v2") if r.data[:1] == b"I").data
    relid = int.from_bytes(insert[1:5], "big")
    width = int.from_bytes(insert[6:8], "big")
    return [
        ("unknown relation", insert[:1] + (relid + 1).to_bytes(4, "big") + insert[5:]),
        ("no 'N'", insert[:5] + b"K" + insert[6:]),
        ("wider tuple", insert[:6] + (width + 1).to_bytes(2, "big") + insert[8:]),
        ("cut in its head", insert[:7]),
        ("trailing bytes", insert + b"\x00"),
    ]


@pytest.mark.parametrize("case", range(5))
def test_a_broken_change_is_the_protocol_readers_error(case: int) -> None:
    """Inserts, updates and deletes are read from their heads alone; whatever the head
    shows wrong is the error the full reader gives, naming the message and offset. A
    value that breaks inside the tuple is left to the decoder (checked: it names it)."""
    from pgcdc_events.protocol import PgOutputReader  # noqa: PLC0415

    name, broken = _broken_inserts()[case]
    rows = _rows("basic_v2")
    at = next(i for i, r in enumerate(rows) if r.data[:1] == b"I")
    rows[at] = CaptureRow(rows[at].lsn, rows[at].xid, broken)
    reader = PgOutputReader()
    with pytest.raises(ProtocolError) as expected:
        for row in rows:
            reader.read(row.data)
    if name == "trailing bytes":  # the head is sound: the capture passes it on unchanged
        units, _ = _assemble(rows)
        assert broken in [row.data for unit in units for row in unit]
        with pytest.raises(ProtocolError, match="trailing bytes"):
            _records(rows)
        return
    with pytest.raises(ProtocolError) as got:
        _assemble(rows)
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("budget", [None, 0])
def test_rendered_units_hold_the_lines_of_their_rows(name: str, budget: int | None) -> None:
    """``render=True``: each unit holds its rows as the capture lines ``dump_capture_row``
    writes (the same units as without it), reads back as the same rows, and the schema
    tracker hands on the same lines, schema rows included, spilled or not."""
    rows = _rows(name)
    plain, _ = _assemble(rows)
    rendered, assembler = _assemble(
        rows, render=True, budget=None if budget is None else MemoryBudget(budget))
    assert assembler.incomplete == 0
    assert [(u.kind, u.xid, u.end_lsn, u.changes, len(u)) for u in rendered] == \
        [(u.kind, u.xid, u.end_lsn, u.changes, len(u)) for u in plain]
    assert all(u.rendered for u in rendered) and not any(u.rendered for u in plain)
    for ours, theirs in zip(rendered, plain, strict=True):
        assert "".join(ours.text()) == "".join(dump_capture_row(r) + "\n" for r in theirs)
        assert list(ours) == list(theirs)
        assert [r.data for r in ours.marks] == [r.data for r in theirs
                                                 if r.data[:1] in (b"S", b"E", b"R", b"Y")]
    by_rows, by_text = SchemaTracker(), SchemaTracker()
    expected = "".join(dump_capture_row(row) + "\n" for unit in plain for row in by_rows.rows(unit))
    assert "".join(block for unit in rendered for block in by_text.text(unit)) == expected


def test_a_rendered_unit_joins_its_lines_in_blocks() -> None:
    """A transaction of more rows than a block holds comes out in several blocks."""
    rows = _rows("basic_v2")
    begin = next(i for i, r in enumerate(rows) if r.data[:1] == b"B")
    first = next(i for i in range(begin, len(rows)) if rows[i].data[:1] == b"I")
    commit = next(r for r in rows[first:] if r.data[:1] == b"C")
    many = [*rows[begin:first], *[rows[first]] * (2 * CHUNK_LINES + 5), commit]
    assembler = UnitAssembler(render=True)
    units = [u for u in map(assembler.feed, many) if u is not None]
    assert len(units) == 1
    blocks = list(units[0].text())
    assert len(blocks) == 3 and len(units[0]) == len(many)
    assert "".join(blocks) == "".join(dump_capture_row(r) + "\n" for r in many)
