"""The decoder's fast paths give what its general paths give, on real captures.

Every fast path is checked against the general code it shortcuts, over the pgoutput of
every golden recording (real PostgreSQL 15, every type family, TOAST, NULLs, old tuples,
key changes, truncates, messages) and of the protocol captures (binary tuples, streamed
and prepared transactions):

- the tuple parsers generated per width against the general loop (``_tuple_general``),
  on every message and on every truncation of it (same message, or same error);
- the structs generated per table against the general row loop (``_row``), under every
  value-failure mode, compared with their Python types (``1`` is not ``1.0``);
- objects built by :func:`pgcdc_events._frozen.factory` against their ``attrs``
  constructor;
- the source fields shared per transaction and table, and the cached halves of
  ``sequence`` and the transaction block's ``id``, against the values that define them,
  where they change mid-transaction (an Origin message, a non-transactional message).

Whole records against Debezium's own are tests/events/test_golden.py.
"""

from __future__ import annotations

import contextlib
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import attrs
import pytest

from pgcdc_events._frozen import builder_of, factory, slot_setters
from pgcdc_events.errors import PgCdcError
from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.events.records import ChangeRecord, Header, make_record
from pgcdc_events.events.source import sequence
from pgcdc_events.protocol import (
    Begin,
    Commit,
    Delete,
    Insert,
    LogicalMessage,
    Origin,
    PgOutputReader,
    Relation,
    RelationColumn,
    TupleData,
    Update,
    encode_message,
    iter_capture,
)
from pgcdc_events.protocol import decoder as protocol_decoder
from pgcdc_events.protocol.decoder import parse_message
from pgcdc_events.types.schema import STRUCT_BUILDER, Schema, Struct, make_struct
from support.golden import recordings

CAPTURES = sorted((Path(__file__).resolve().parents[1] / "protocol" / "captures")
                  .glob("*.jsonl"))
RECORDINGS = recordings()


def _all_datas() -> list[tuple[bytes, bool]]:
    """Every distinct pgoutput message of the golden recordings and protocol captures, with
    whether it sits in a stream block (then a change starts with its xid)."""
    seen: dict[tuple[bytes, bool], None] = {}
    streams = [[row.data for row in recording.capture] for recording in RECORDINGS]
    for path in CAPTURES:
        with open(path, encoding="utf-8") as fh:
            streams.append([row.data for row in iter_capture(fh)])
    for datas in streams:
        reader = PgOutputReader()
        for data in datas:
            in_stream = reader.in_stream
            reader.read(data)
            seen[(data, in_stream)] = None
    return list(seen)


DATAS = _all_datas()


def typed(value: Any) -> Any:
    """``value`` with the type of every part in it: equal only when the types are too."""
    if isinstance(value, Struct):  # a builder's object that was not made a Struct differs
        return (type(value).__name__, value.schema, tuple(typed(v) for v in value.values))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(typed(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((typed(k), typed(v)) for k, v in value.items()))
    if isinstance(value, float) and value != value:
        return ("float", "nan")
    return (type(value).__name__, value)


def _outcome(function: Any, *args: Any) -> Any:
    try:
        return ("ok", function(*args))
    except PgCdcError as error:
        return ("error", type(error).__name__, str(error))


# -- the tuple parsers ------------------------------------------------------------------------


@pytest.fixture
def general_tuples(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every tuple parsed by the general loop: no width has a generated parser."""
    monkeypatch.setattr(protocol_decoder, "_PARSERS_BY_WIDTH", {})
    monkeypatch.setattr(protocol_decoder, "_MAX_UNROLLED", -1)


def _parse_all(datas: list[tuple[bytes, bool]]) -> list[Any]:
    return [_outcome(lambda d, s: parse_message(d, in_stream=s), data, in_stream)
            for data, in_stream in datas]


def test_the_captures_have_what_the_parsers_take() -> None:
    """The messages below hold tuples of text, NULL, unchanged-TOAST and binary columns."""
    kinds: set[int] = set()
    for data, in_stream in DATAS:
        message = parse_message(data, in_stream=in_stream)
        for tup in (getattr(message, "new", None), getattr(message, "old", None)):
            if isinstance(tup, TupleData):
                kinds.update(tup.kinds)
    assert kinds == set(b"tnub")


def test_generated_tuple_parsers_equal_the_general_loop(general_tuples: None) -> None:
    general = _parse_all(DATAS)
    assert protocol_decoder._PARSERS_BY_WIDTH == {}
    assert len(general) == len(DATAS) > 1000
    _check_fast_equals(general, DATAS)


def _check_fast_equals(general: list[Any], datas: list[tuple[bytes, bool]]) -> None:
    """Parse again with the generated parsers (module state restored) and compare."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(protocol_decoder, "_PARSERS_BY_WIDTH", {})
        patch.setattr(protocol_decoder, "_MAX_UNROLLED", 128)
        fast = _parse_all(datas)
        assert protocol_decoder._PARSERS_BY_WIDTH, "no generated parser was used"
    assert fast == general
    for a, b in zip(fast, general, strict=True):
        if a[0] == "ok":
            assert type(a[1]) is type(b[1])


def _row_messages() -> list[tuple[bytes, bool]]:
    return [(d, s) for d, s in DATAS if d[:1] in (b"I", b"U", b"D")]


def test_truncated_and_damaged_tuples_fail_as_in_the_general_loop(
        general_tuples: None) -> None:
    """Every prefix of a sample of row messages, and each with its last column's length
    raised past the end: the same error (offset, what was expected) as the general loop."""
    sample = _row_messages()[::7][:120]
    damaged = []
    for data, in_stream in sample:
        damaged += [(data[:cut], in_stream) for cut in range(1, len(data))]
        damaged += [(data + b"\0", in_stream), (data + b"n", in_stream)]
        if len(data) > 12:  # the last column's length (a text one's) past the end
            damaged.append((data[:-5] + struct.pack(">I", 0x7FFFFFF0) + data[-1:], in_stream))
    general = _parse_all(damaged)
    assert sum(1 for g in general if g[0] == "error") > len(damaged) // 2
    _check_fast_equals(general, damaged)


# -- the generated structs --------------------------------------------------------------------

MODES = ["fail", "warn", "skip"]


def _pairs(decoder: EventDecoder, message: Any) -> list[tuple[TupleData, TupleData | None]]:
    if isinstance(message, Insert):
        return [(message.new, None)]
    if isinstance(message, Update):
        out = [(message.new, message.old if message.old_kind == "O" else None)]
        return out + ([(message.old, None)] if message.old is not None else [])
    return [(message.old, None)]


@pytest.mark.parametrize("mode", MODES)
def test_generated_structs_equal_the_general_row_loop(mode: str) -> None:
    """``TableSchema.structs`` (generated per table) against ``key``/``value`` of the
    general loop, for every row tuple of every golden recording under its own properties,
    with and without its catalog: values and their types, errors and conversion counts."""
    compared = generated = 0
    for recording in RECORDINGS:
        properties = dict(recording.properties)
        properties["event.converting.failure.handling.mode"] = mode
        for catalog in (recording.catalog, None):
            config = EventConfig.from_properties(properties)
            decoder = EventDecoder(config, catalog=catalog, clock=lambda: 0)
            for row in recording.capture:
                message = decoder.reader.read(row.data)
                if isinstance(message, (Insert, Update, Delete)):
                    table = decoder._tables.get(message.relation_id)
                    for tup, old in (_pairs(decoder, message) if table else []):
                        before = decoder.metrics.conversion_errors
                        fast = _outcome(table.structs, tup, old)
                        middle = decoder.metrics.conversion_errors
                        slow = _outcome(table._structs, tup, old)
                        after = decoder.metrics.conversion_errors
                        assert middle - before == after - middle
                        assert typed(fast) == typed(slow), (recording.key, table.qualified)
                        # structs_of, the same on the tuple's kinds and values
                        parts = _outcome(table.structs_of, tup.kinds, tup.values, old)
                        assert decoder.metrics.conversion_errors - after == after - middle
                        assert typed(parts) == typed(slow), (recording.key, table.qualified)
                        compared += 1
                        generated += not tup.kinds.translate(None, b"tn")
                with contextlib.suppress(PgCdcError):
                    decoder.handle(message, row.lsn, snapshot=row.snapshot)
    assert compared > 2500 and generated > 2000


def test_structs_take_the_general_loop_for_toast_and_binary() -> None:
    """A tuple with an unchanged-TOAST column takes the old row's value (FULL identity),
    a binary one its binary converter: the generated path hands both over."""
    columns = (RelationColumn(1, "id", 23, -1), RelationColumn(0, "t", 25, -1))
    relation = Relation(5000, "public", "t", "f", columns)
    decoder = EventDecoder(EventConfig.from_properties({"topic.prefix": "p"}))
    decoder.handle(relation, 1)
    table = decoder.table(5000)
    assert table is not None
    old = TupleData(b"tt", (b"1", b"kept"))
    key, value = table.structs(TupleData(b"tu", (b"1", None)), old)
    assert typed(value) == typed(make_struct(table.value_schema, (1, "kept")))
    assert key is None  # REPLICA IDENTITY FULL without a catalog: no key
    key, value = table.structs(TupleData(b"bt", (struct.pack(">i", 7), b"x")), None)
    assert typed(value) == typed(make_struct(table.value_schema, (7, "x")))
    key, value = table.structs(TupleData(b"tn", (b"8", None)), None)
    assert typed(value) == typed(make_struct(table.value_schema, (8, None)))


# -- objects built without __init__ ------------------------------------------------------------


def test_factory_builds_what_the_constructor_builds() -> None:
    schema = Schema("struct", fields=())
    built = make_struct(schema, (1, Decimal("2.50"), None))
    assert type(built) is Struct
    assert built == Struct(schema, (1, Decimal("2.50"), None))
    assert hash(built) == hash(Struct(schema, (1, Decimal("2.50"), None)))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        built.values = ()  # type: ignore[misc]
    header = (Header("h", Schema("string"), "v"),)
    record = make_record("t", None, None, schema, built, header, 42, "change")
    assert record == ChangeRecord("t", None, None, schema, built, header, 42)
    assert attrs.evolve(record) == record and hash(attrs.evolve(record)) == hash(record)
    tup = protocol_decoder._make_tuple(b"tn", (b"1", None))
    assert tup == TupleData(b"tn", (b"1", None)) and type(tup) is TupleData


def test_builders_build_what_the_constructor_builds() -> None:
    """A builder (``_frozen.builder``) gives the constructor's object: same class, equal,
    hashing alike, frozen, and its fields in their places (a factory that put a value in
    another field, or a builder whose object stayed a builder, fails here)."""
    schema = Schema("struct", fields=())
    built = STRUCT_BUILDER()
    built.schema = schema
    built.values = (1, None)
    built.__class__ = Struct
    assert type(built) is Struct and built == Struct(schema, (1, None))
    assert hash(built) == hash(Struct(schema, (1, None)))
    assert built.schema is schema and built.values == (1, None)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        built.values = ()  # type: ignore[misc]
    for cls, values in ((Struct, (schema, (2,))),
                        (ChangeRecord, ("t", None, None, schema, None, (), 7, "tombstone")),
                        (TupleData, (b"t", (b"1",))), (Insert, (5, TupleData(b"", ()), 9))):
        make = factory(cls)
        assert make is not cls and builder_of(cls) is not None  # the fast path is in use
        made = make(*values)
        assert type(made) is cls and made == cls(*values) and hash(made) == hash(cls(*values))
        assert tuple(getattr(made, f.name) for f in attrs.fields(cls)) == values
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            made.lsn = 0
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            del made.lsn


def _exact(value: Any) -> list[str]:
    """Where ``value`` holds an object of a subclass of Struct, ChangeRecord or Header (a
    builder's object that was not made the class's own): none, when all is as built by
    the constructors."""
    out: list[str] = []
    for cls in (Struct, ChangeRecord, Header):
        if isinstance(value, cls) and type(value) is not cls:
            out.append(f"{type(value).__qualname__} {value!r}")
    if isinstance(value, Struct):
        for v in value.values:
            out += _exact(v)
    elif isinstance(value, ChangeRecord):
        for v in (value.key, value.value, *value.headers):
            out += _exact(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            out += _exact(v)
    return out


@pytest.mark.parametrize("entry", ["feed_row", "handle"])
def test_every_record_of_the_golden_recordings_is_of_its_own_class(entry: str) -> None:
    """The records, their structs (key, value, source, transaction block, rows) and their
    headers are the classes' own objects, not their builders' (see ``_frozen.builder``)."""
    for recording in RECORDINGS:
        decoder = EventDecoder(EventConfig.from_properties(recording.properties),
                               catalog=recording.catalog)
        records = _decoded_through(entry, decoder, recording.capture)
        assert records
        assert _exact(records) == [], recording.key


def _shape(value: Any) -> Any:
    """:func:`typed`, with each schema as its text: two decoders' schemas are equal objects
    but for a NaN default, which is not equal to itself."""
    if isinstance(value, Struct):
        return (type(value).__name__, repr(value.schema), tuple(_shape(v) for v in value.values))
    return typed(value)


def _form(record: ChangeRecord) -> tuple[Any, ...]:
    """A record as :func:`_shape` shows its parts."""
    return (type(record), record.topic, record.lsn, record.kind, repr(record.key_schema),
            repr(record.value_schema), _shape(record.key), _shape(record.value),
            [(h.name, repr(h.schema), _shape(h.value)) for h in record.headers])


def _row_by_row(entry: str, decoder: EventDecoder, capture: Any, skip: set[bytes]
                ) -> tuple[list[Any], int, int]:
    """Each row's outcome through ``entry`` (its records, or its error) with the metrics
    after it, up to the first error; how many Inserts (but those in ``skip``) went
    through ``read``, and how many messages did."""
    read = decoder.reader.read
    read_inserts = []

    def counting(data: bytes) -> Any:
        message = read(data)
        read_inserts.append(type(message) is Insert and not decoder.reader.in_stream
                            and decoder.reader.in_transaction and data not in skip)
        return message

    decoder.reader.read = counting  # type: ignore[method-assign]
    out: list[Any] = []
    for row in capture:
        got = _outcome(_decoded_through, entry, decoder, [row])
        if got[0] == "ok":
            got = ("ok", [_form(r) for r in got[1]])
        out.append((got, attrs.asdict(decoder.metrics), decoder.reader.messages_read))
        if got[0] != "ok":
            break
    return out, sum(read_inserts), len(read_inserts)


def _damaged(capture: list[Any]) -> list[Any]:
    """``capture`` with its first Insert in a transaction one column short (a width no
    Relation announced; hand-built: PostgreSQL cannot send it) and its count fixed."""
    reader = PgOutputReader()
    for at, row in enumerate(capture):
        message = reader.read(row.data)
        if type(message) is Insert and reader.in_transaction and not reader.in_stream \
                and len(message.new.values) > 1 and not row.snapshot:
            new = message.new
            short = Insert(message.relation_id, TupleData(new.kinds[:-1], new.values[:-1]))
            return [*capture[:at], attrs.evolve(row, data=bytes(encode_message(short))),
                    *capture[at + 1:]]
    raise AssertionError("no Insert to damage")


@pytest.mark.parametrize("mode", MODES)
def test_feed_row_reads_inserts_as_parts_and_decodes_as_handle(mode: str) -> None:
    """feed_row reads an Insert in a transaction as its parts (``read_insert``: no Insert
    or TupleData object, ``read`` never called for it) and gives, row by row, the records,
    metrics and count of messages read that ``handle`` gives for the parsed message, on
    every golden recording (filtered tables, failed conversions under each failure mode)
    and protocol capture (binary tuples, streamed and prepared transactions), and the same
    error for an Insert whose width is not its Relation's."""
    parts_read = damaged = 0
    sources = [(r.key, r.properties, r.catalog, r.capture) for r in RECORDINGS]
    for path in CAPTURES:
        with open(path, encoding="utf-8") as fh:
            sources.append((path.name, {"topic.prefix": "p"}, None, list(iter_capture(fh))))
    for key, props, catalog, capture in sources:
        config = EventConfig.from_properties(
            {**props, "event.converting.failure.handling.mode": mode})
        snapshot_rows = {row.data for row in capture if row.snapshot}  # read events
        variants = [capture]
        with contextlib.suppress(AssertionError):
            variants.append(_damaged(list(capture)))
        for variant in variants:
            outcomes = []
            for entry in ("feed_row", "handle"):
                decoder = EventDecoder(config, catalog=catalog, clock=lambda: 5, run_id="r")
                rows, read_inserts, reads = _row_by_row(entry, decoder, variant,
                                                        snapshot_rows)
                outcomes.append(rows)
                if entry == "feed_row":
                    assert read_inserts == 0, key  # no Insert went through read
                    parts_read += decoder.reader.messages_read - reads
            assert outcomes[0] == outcomes[1], key
            if variant is not capture:
                assert outcomes[0][-1][0][0] == "error", key
                damaged += 1
    assert parts_read > 800 and damaged > 20


def test_factory_keeps_the_constructor_where_init_does_more() -> None:
    @attrs.frozen
    class Validated:
        a: int = attrs.field(validator=attrs.validators.instance_of(int))

    @attrs.frozen
    class Converted:
        a: int = attrs.field(converter=int)

    @attrs.frozen
    class PostInit:
        a: int

        def __attrs_post_init__(self) -> None:
            pass

    @attrs.frozen(slots=False)
    class NoSlots:
        a: int

    @attrs.frozen
    class Private:
        _a: int

    for cls in (Validated, Converted, PostInit, NoSlots, Private):
        assert factory(cls) is cls
        assert slot_setters(cls) is None
        assert builder_of(cls) is None
    assert factory(Schema) is Schema  # a field outside __init__ (its field index)


# -- what the records of one transaction share ------------------------------------------------

_REL = Relation(6000, "public", "t", "d", (RelationColumn(1, "id", 23, -1),))


def _feed(decoder: EventDecoder, messages: list[tuple[Any, int]]) -> list[ChangeRecord]:
    out: list[ChangeRecord] = []
    for message, lsn in messages:
        out += decoder.feed(encode_message(message), lsn)
    return out


def _insert(i: int) -> Insert:
    return Insert(6000, TupleData(b"t", (str(i).encode(),)))


def test_origin_and_sequence_follow_changes_within_a_transaction() -> None:
    """An Origin after a change, and a non-transactional message (a transaction of its own
    in Debezium: its LSN becomes the last commit LSN), change the source of the changes
    that follow them in the same transaction."""
    config = EventConfig.from_properties({"topic.prefix": "p",
                                          "provide.transaction.metadata": "true"})
    decoder = EventDecoder(config, clock=lambda: 1_700_000_000_000_000_000)
    records = _feed(decoder, [
        (Begin(300, 0, 77), 100), (_REL, 100), (_insert(1), 110),
        (Origin(5555, "upstream"), 120), (_insert(2), 130),
        (LogicalMessage(0, 140, "x", b"m"), 140), (_insert(3), 150),
        (Commit(0, 300, 310, 0), 300),
        (Begin(400, 0, 78), 320), (_insert(4), 330), (Commit(0, 400, 410, 0), 400),
    ])
    changes = [r for r in records if r.kind == "change" and r.value is not None
               and r.value["source"]["table"] == "t"]
    sources = [c.value["source"] for c in changes if c.value is not None]
    assert [s["origin"] for s in sources] == [None, "upstream", "upstream", None]
    assert [s["origin_lsn"] for s in sources] == [None, 5555, 5555, None]
    assert [s["sequence"] for s in sources] == [
        sequence(None, 110), sequence(None, 130), sequence(140, 150), sequence(310, 330)]
    assert [s["txId"] for s in sources] == [77, 77, 77, 78]
    blocks = [c.value["transaction"] for c in changes if c.value is not None]
    assert [b["id"] for b in blocks] == ["77:110", "77:130", "77:150", "78:330"]
    assert [b["total_order"] for b in blocks] == [1, 2, 3, 1]


def test_a_new_configuration_rebuilds_the_shared_source() -> None:
    decoder = EventDecoder(EventConfig.from_properties({"topic.prefix": "one"}),
                           clock=lambda: 0)
    first = _feed(decoder, [(Begin(300, 0, 7), 100), (_REL, 100), (_insert(1), 110)])
    decoder.config = EventConfig.from_properties({"topic.prefix": "two"})
    second = _feed(decoder, [(_insert(2), 120)])
    assert first[-1].value is not None and second[-1].value is not None
    assert first[-1].value["source"]["name"] == "one"
    assert second[-1].value["source"]["name"] == "two"


# -- numeric(p, s) text already at its scale ---------------------------------------------------


def _numeric_mapping(precision: int, scale: int) -> Any:
    from pgcdc_events.types.config import TypeConfig  # noqa: PLC0415
    from pgcdc_events.types.numeric import _numeric  # noqa: PLC0415
    from pgcdc_events.types.registry import TypeRegistry  # noqa: PLC0415

    pg_type = TypeRegistry(None).resolve(1700)
    return _numeric(pg_type, ((precision << 16) | scale) + 4, TypeConfig())


NUMERIC_TEXTS = [
    b"1.25", b"-1.25", b"0.00", b"-0.00", b"12345678.99", b"1.2", b"1.250", b"1", b"-1", b"0",
    b".25", b"-.25", b"1.", b"-1.", b"--1.25", b"1-.25", b"+1.25", b" 1.25", b"1.25 ", b"1_0.25",
    b"1e5", b"1.2e", b"NaN", b"Infinity", b"-Infinity", b"nan", b"inf", b"sNaN", b"1.2.3",
    b"", b"-", b".", b"-.", b"\xd9\xa1.25", b"1.2\x00", b"9" * 200 + b".25", b"1,25",
]


@pytest.mark.parametrize("scale", [0, 2, 3])
def test_numeric_at_its_scale_parses_as_the_pattern_says(scale: int) -> None:
    """numeric(p, s) text at the column's scale skips the pattern after a cheaper check of
    the same shape: the same Decimal (exponent included) or the same error as
    ``convert(_parse_decimal(raw))``, the general path, for valid and damaged text."""
    from pgcdc_events.types.numeric import _CONTEXT, _parse_decimal  # noqa: PLC0415

    mapping = _numeric_mapping(12, scale)
    quantum = Decimal(1).scaleb(-scale)

    def general(raw: bytes) -> Any:
        value = _parse_decimal(raw)
        if not value.is_finite():
            return None
        if value.as_tuple().exponent == -scale:
            return value
        return value.quantize(quantum, context=_CONTEXT)

    for raw in NUMERIC_TEXTS:
        fast, slow = _outcome(mapping.from_text, raw), _outcome(general, raw)
        if fast[0] == "ok" and slow[0] == "ok":
            assert (str(fast[1]), typed(fast[1])) == (str(slow[1]), typed(slow[1])), raw
        else:
            assert fast == slow, raw


# -- a subclass's row builders ------------------------------------------------------------------


class _Tagging(EventDecoder):
    """Overrides the row builders the fast dispatch (``_direct``) would call as the base
    class defines them: each records what it was given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[str] = []

    def _insert(self, table: Any, message: Any, lsn: int) -> list[ChangeRecord]:
        self.seen.append(f"c {lsn}")
        return super()._insert(table, message, lsn)

    def _update(self, table: Any, message: Any, lsn: int) -> list[ChangeRecord]:
        self.seen.append(f"u {lsn}")
        return super()._update(table, message, lsn)

    def _delete(self, table: Any, message: Any, lsn: int) -> list[ChangeRecord]:
        self.seen.append(f"d {lsn}")
        return super()._delete(table, message, lsn)


def _decoded_through(entry: str, decoder: EventDecoder, capture: Any) -> list[ChangeRecord]:
    """The records of ``capture``'s rows fed to ``decoder`` through ``entry``: ``feed_row``,
    ``iter_feed`` or ``handle``."""
    out: list[ChangeRecord] = []
    for row in capture:
        if entry == "feed_row":
            out += decoder.feed_row(row)
        elif entry == "iter_feed":
            out += decoder.iter_feed(row.data, row.lsn, snapshot=row.snapshot)
        else:
            out += decoder.handle(decoder.reader.read(row.data), row.lsn,
                                  snapshot=row.snapshot)
    return out


@pytest.mark.parametrize("entry", ["feed_row", "iter_feed", "handle"])
def test_a_subclass_overriding_a_row_builder_is_not_bypassed(entry: str) -> None:
    """feed_row and iter_feed dispatch row changes to the builders themselves: a subclass
    that overrides ``_insert``, ``_update`` or ``_delete`` gets every row change of a real
    capture through its own method, as through :meth:`EventDecoder.handle`, and the same
    records as the base class."""
    recording = next(r for r in RECORDINGS if r.key == "events/events-default")
    kinds = {b"I": "c", b"U": "u", b"D": "d"}
    expected = [f"{kinds[row.data[:1]]} {int(row.lsn)}" for row in recording.capture
                if row.data[:1] in kinds and not row.snapshot]
    assert {e[0] for e in expected} == {"c", "u", "d"}
    config = EventConfig.from_properties(recording.properties)
    decoders = [cls(config, catalog=recording.catalog, clock=lambda: 0, run_id="r")
                for cls in (_Tagging, EventDecoder)]
    outputs = [_decoded_through(entry, decoder, recording.capture) for decoder in decoders]
    tagging = decoders[0]
    assert isinstance(tagging, _Tagging)
    # the recording's tables may be filtered: only the changes of included ones reach a builder
    assert tagging.seen and set(tagging.seen) <= set(expected)
    assert tagging.seen == [e for e in expected if e in set(tagging.seen)]
    assert outputs[0] == outputs[1]


class _TaggingTransactions(EventDecoder):
    """Overrides the handlers of Begin, Commit and Relation, which the dispatch of
    ``feed_row``, ``iter_feed`` and ``handle`` looks up by message type: each records
    what it was given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[str] = []

    def _begin(self, message: Any, lsn: int) -> list[ChangeRecord]:
        self.seen.append(f"B {lsn}")
        return super()._begin(message, lsn)

    def _commit(self, message: Any, lsn: int) -> list[ChangeRecord]:
        self.seen.append(f"C {lsn}")
        return super()._commit(message, lsn)

    def _relation(self, message: Any, lsn: int) -> list[ChangeRecord]:
        self.seen.append(f"R {lsn}")
        return super()._relation(message, lsn)


@pytest.mark.parametrize("entry", ["feed_row", "iter_feed", "handle"])
def test_a_subclass_overriding_begin_or_commit_is_not_bypassed(entry: str) -> None:
    """The dispatch by message type calls a subclass's ``_begin``, ``_commit`` and
    ``_relation`` (as it calls its row builders: above), for every such message of a real
    capture, and the records are the base class's."""
    recording = next(r for r in RECORDINGS if r.key == "events/events-default")
    kinds = {b"B": "B", b"C": "C", b"R": "R"}
    expected = [f"{kinds[row.data[:1]]} {int(row.lsn)}" for row in recording.capture
                if row.data[:1] in kinds and not row.snapshot]
    assert {e[0] for e in expected} == {"B", "C", "R"}
    config = EventConfig.from_properties(recording.properties)
    decoders = [cls(config, catalog=recording.catalog, clock=lambda: 0, run_id="r")
                for cls in (_TaggingTransactions, EventDecoder)]
    outputs = [_decoded_through(entry, decoder, recording.capture) for decoder in decoders]
    tagging = decoders[0]
    assert isinstance(tagging, _TaggingTransactions)
    assert tagging.seen == expected
    assert outputs[0] == outputs[1]


class _EagerStreamCommit(EventDecoder):
    """Overrides the eager handler of Stream Commit only: ``iter_feed`` must not take the
    base class's lazy one past it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commits = 0

    def _stream_commit(self, message: Any, lsn: int) -> list[ChangeRecord]:
        self.commits += 1
        return super()._stream_commit(message, lsn)


def test_a_subclass_overriding_stream_commit_is_not_bypassed_by_iter_feed() -> None:
    """On a protocol capture with streamed transactions, ``iter_feed`` calls a subclass's
    ``_stream_commit`` once per Stream Commit, and gives the base class's records."""
    capture = next(p for p in CAPTURES if p.name == "stream_commit.jsonl")
    with open(capture, encoding="utf-8") as fh:
        rows = list(iter_capture(fh))
    stream_commits = sum(1 for row in rows if row.data[:1] == b"c")
    assert stream_commits
    config = EventConfig.from_properties({"topic.prefix": "t"})
    outputs = []
    decoders = [cls(config, clock=lambda: 0, run_id="r", proto_version=2, streaming="on")
                for cls in (_EagerStreamCommit, EventDecoder)]
    for decoder in decoders:
        out: list[ChangeRecord] = []
        for row in rows:
            out += decoder.iter_feed(row.data, row.lsn, snapshot=row.snapshot)
        outputs.append(out)
    eager = decoders[0]
    assert isinstance(eager, _EagerStreamCommit)
    assert eager.commits == stream_commits
    assert outputs[0] == outputs[1]


def test_a_handler_replaced_on_the_class_later_is_what_a_new_decoder_calls(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The dispatch table is looked up when a decoder is made: a handler replaced on the
    class after other decoders were made (a test's spy, a patch) is what the next one
    calls."""
    recording = next(r for r in RECORDINGS if r.key == "events/events-default")
    config = EventConfig.from_properties(recording.properties)
    _TaggingTransactions(config, catalog=recording.catalog, clock=lambda: 0, run_id="r")
    commits: list[int] = []
    commit = _TaggingTransactions._commit

    def spy(self: EventDecoder, message: Any, lsn: int) -> list[ChangeRecord]:
        commits.append(lsn)
        return commit(self, message, lsn)  # type: ignore[arg-type]

    monkeypatch.setattr(_TaggingTransactions, "_commit", spy)
    decoder = _TaggingTransactions(config, catalog=recording.catalog, clock=lambda: 0,
                                   run_id="r")
    for row in recording.capture:
        decoder.feed_row(row)
    assert commits == [int(row.lsn) for row in recording.capture
                       if row.data[:1] == b"C" and not row.snapshot]


@pytest.mark.parametrize("entry", ["feed_row", "iter_feed", "handle"])
def test_skipped_creates_are_left_out_by_the_insert_path(entry: str) -> None:
    """``skipped.operations=c`` on a real capture, through each entry (``feed_row`` and
    ``iter_feed`` take the direct row handler, ``_direct``): the records are those
    of the same capture decoded with nothing skipped, less its creates, and each create
    left out is counted as filtered."""
    recording = next(r for r in RECORDINGS if r.key == "events/events-default")
    outputs = []
    decoders = []
    for skipped in ("none", "c"):
        config = EventConfig.from_properties({**recording.properties,
                                              "skipped.operations": skipped})
        decoder = EventDecoder(config, catalog=recording.catalog, clock=lambda: 0, run_id="r")
        decoders.append(decoder)
        outputs.append(_decoded_through(entry, decoder, recording.capture))
    everything, skipped_c = outputs
    creates = [r for r in everything if r.op == "c"]
    assert creates

    def changes(records: list[ChangeRecord]) -> list[tuple[Any, ...]]:
        # (the transaction blocks' orders and counts differ: a skipped event is not counted)
        return [(r.kind, r.op, r.topic, r.key, r.lsn) for r in records]

    assert changes(skipped_c) == changes([r for r in everything if r.op != "c"])
    filtered = decoders[1].metrics.events_filtered - decoders[0].metrics.events_filtered
    assert filtered == len(creates)


@pytest.mark.parametrize("entry", ["feed_row", "iter_feed", "handle"])
def test_a_filtered_table_is_left_out_and_counted_by_the_row_path(entry: str) -> None:
    """``table.exclude.list`` on a real capture, through each entry (the row handlers'
    one path, ``_row_on``, for Inserts read as parts and for messages): the records are
    those of the same capture decoded with nothing excluded, less the excluded table's,
    and each of its row changes is counted as filtered, once."""
    recording = next(r for r in RECORDINGS if r.key == "events/events-default")
    outputs, decoders = [], []
    for exclude in ({}, {"table.exclude.list": "public.ev_other"}):
        config = EventConfig.from_properties({**recording.properties, **exclude})
        decoder = EventDecoder(config, catalog=recording.catalog, clock=lambda: 0, run_id="r")
        decoders.append(decoder)
        outputs.append(_decoded_through(entry, decoder, recording.capture))
    everything, kept = outputs
    topic = next(r.topic for r in everything if r.topic.endswith(".public.ev_other"))
    reader = PgOutputReader()
    relations: dict[int, str] = {}
    changes_to_it = 0
    for row in recording.capture:
        message = reader.read(row.data)
        if isinstance(message, Relation):
            relations[message.relation_id] = message.name
        elif isinstance(message, (Insert, Update, Delete)) and not row.snapshot:
            changes_to_it += relations[message.relation_id] == "ev_other"
    assert changes_to_it > 3

    def changes(records: list[ChangeRecord]) -> list[tuple[Any, ...]]:
        return [(r.kind, r.op, r.topic, r.key, r.lsn) for r in records if r.kind != "transaction"]

    assert changes(kept) == changes([r for r in everything if r.topic != topic])
    filtered = decoders[1].metrics.events_filtered - decoders[0].metrics.events_filtered
    assert filtered == changes_to_it
