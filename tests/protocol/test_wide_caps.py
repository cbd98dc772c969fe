"""Column counts past PostgreSQL's limits are refused before anything is built for them.

A hostile capture of 1.4 MB, made of Relation messages of 32767 columns and their
tuples, cost 17 s and 600 MB to decode. PostgreSQL never sends more than 1600 columns
in a Relation (``MaxHeapAttributeNumber``) nor 1664 in a tuple
(``MaxTupleAttributeNumber``): the parser now refuses more, naming the offset of the
count. The hand-built messages below are ones PostgreSQL cannot produce.
"""

from __future__ import annotations

import pytest

from pgcdc_events.errors import ProtocolError
from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.protocol import (
    Begin,
    Insert,
    PgOutputReader,
    Relation,
    RelationColumn,
    TupleData,
    parse_message,
)
from pgcdc_events.protocol.decoder import MAX_RELATION_COLUMNS, MAX_TUPLE_COLUMNS
from pgcdc_events.protocol.encoder import encode_message
from support.capture import Capturer


def relation_bytes(ncols: int) -> bytes:
    return encode_message(Relation(
        16384, "public", "t", "d", tuple(RelationColumn(0, f"c{i}", 23, -1)
                                         for i in range(ncols))))


def insert_bytes(ncols: int) -> bytes:
    return encode_message(Insert(16384, TupleData(b"n" * ncols, (None,) * ncols)))


#: The offset of a Relation's column count: type, OID, "public\0", "t\0", identity.
RELATION_COUNT_AT = 1 + 4 + 7 + 2 + 1
#: The offset of an Insert's tuple column count: type, OID, 'N'.
INSERT_COUNT_AT = 1 + 4 + 1


@pytest.mark.parametrize("ncols", [MAX_RELATION_COLUMNS + 1, 32767])
def test_a_relation_wider_than_postgresql_allows_is_refused(ncols: int) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_message(relation_bytes(ncols))
    assert info.value.offset == RELATION_COUNT_AT
    assert str(info.value) == (
        f"message 'R', offset {RELATION_COUNT_AT}: at most 1600 columns in a relation "
        f"(PostgreSQL's MaxHeapAttributeNumber) (the count is {ncols})")


@pytest.mark.parametrize("ncols", [MAX_TUPLE_COLUMNS + 1, 32767])
def test_a_tuple_wider_than_postgresql_allows_is_refused(ncols: int) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_message(insert_bytes(ncols))
    assert info.value.offset == INSERT_COUNT_AT
    assert str(info.value) == (
        f"message 'I', offset {INSERT_COUNT_AT}: at most 1664 columns in a tuple "
        f"(PostgreSQL's MaxTupleAttributeNumber) (the count is {ncols})")


def test_the_limits_themselves_parse() -> None:
    relation = parse_message(relation_bytes(MAX_RELATION_COLUMNS))
    assert isinstance(relation, Relation) and len(relation.columns) == 1600
    insert = parse_message(insert_bytes(MAX_TUPLE_COLUMNS))
    assert isinstance(insert, Insert) and len(insert.new.values) == 1664


def test_the_decoder_stops_at_the_first_wide_relation() -> None:
    """Through the reader and the event decoder, as ``decode`` reads a capture: the
    wide Relation is refused before any table schema is built for it."""
    decoder = EventDecoder(EventConfig.from_properties({"topic.prefix": "p"}))
    decoder.feed(encode_message(Begin(100, 0, 7)), 100)
    with pytest.raises(ProtocolError, match=r"^message 'R', offset 15: at most 1600 columns"):
        decoder.feed(relation_bytes(32767), 100)
    reader = PgOutputReader()
    reader.read(encode_message(Begin(100, 0, 7)))
    with pytest.raises(ProtocolError, match=r"^message 'R', offset 15: "):
        reader.read(relation_bytes(1601))
    assert not reader.relations


@pytest.mark.postgres
def test_a_real_1600_column_table_still_decodes(pg_conn) -> None:
    columns = ", ".join(f"c{i} int" for i in range(1600))
    pg_conn.run(f"CREATE TABLE wide ({columns})")
    cap = Capturer(pg_conn, tables=["wide"])
    pg_conn.run(f"INSERT INTO wide VALUES ({', '.join(str(i) for i in range(1600))})")
    rows = cap.changes()
    records = EventDecoder(EventConfig.from_properties({"topic.prefix": "p"})).feed_rows(rows)
    (record,) = [r for r in records if r.topic == "p.public.wide"]
    assert record.value is not None
    after = record.value["after"]
    assert [after[f"c{i}"] for i in range(1600)] == list(range(1600))
