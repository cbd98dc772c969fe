"""Arrays: the text and binary parsers, the mapping rules, and round trips through a live server."""

from __future__ import annotations

import json
import struct
import tracemalloc
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgcdc_events.errors import ConversionError
from pgcdc_events.protocol import KIND_BINARY, Insert, PgOutputReader, Type
from pgcdc_events.protocol.capture import CaptureRow
from pgcdc_events.types.array import build, parse_binary, parse_text, toast_placeholder
from pgcdc_events.types.catalog import CatalogSnapshot, fetch_catalog
from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.mapper import TypeMapper
from pgcdc_events.types.registry import PgType, TypeRegistry
from pgcdc_events.types.schema import Schema
from support.capture import Capturer, quote_literal

TEXT_ARRAY, INT4_ARRAY, BOX_ARRAY, MONEY_ARRAY, POINT_ARRAY = 1009, 1007, 1020, 791, 1017


# ---------------------------------------------------------------- text parser


@pytest.mark.parametrize(("raw", "expected"), [
    (b"{}", []),
    (b"{NULL}", [None]),
    (b'{"NULL",NULL,null,"null",Null}', [b"NULL", None, None, b"null", None]),
    (b'{""}', [b""]),
    (b"{1,-2,32767}", [b"1", b"-2", b"32767"]),
    (b'{plain,"a,b","{c}","\\"q\\"","back\\\\slash","with space","",h\xc3\xa9llo}',
     [b"plain", b"a,b", b"{c}", b'"q"', b"back\\slash", b"with space", b"", b"h\xc3\xa9llo"]),
    (b'{"a\\bc"}', [b"abc"]),  # a backslash escapes any character
    (b"{ 1 , 2 }", [b"1", b"2"]),
    (b'{ "a" ,NULL }', [b"a", None]),
    (b"{{1,2},{3,4}}", [b"1", b"2", b"3", b"4"]),
    (b"{{1,NULL},{NULL,4}}", [b"1", None, None, b"4"]),
    (b"{{{1},{2}},{{3},{4}}}", [b"1", b"2", b"3", b"4"]),
    (b"[0:1]={1,2}", [b"1", b"2"]),
    (b"[-5:-3]={7,8,9}", [b"7", b"8", b"9"]),
    (b"[1:2][3:4]={{1,2},{3,4}}", [b"1", b"2", b"3", b"4"]),
    (b"[3]={1,2,3}", [b"1", b"2", b"3"]),
])
def test_parse_text(raw: bytes, expected: list[bytes | None]) -> None:
    assert parse_text(raw) == expected


def test_parse_text_other_delimiter() -> None:
    # box is the built-in type whose delimiter is ';': commas are part of its elements
    assert parse_text(b"{(1,1),(0,0);(3,4),(1,2)}", b";") == [b"(1,1),(0,0)", b"(3,4),(1,2)"]
    assert parse_text(b'{"(1,1),(0,0)";NULL}', b";") == [b"(1,1),(0,0)", None]
    assert parse_text(b"{a,b}", b";") == [b"a,b"]


@pytest.mark.parametrize("raw", [
    b"", b"{", b"}", b"{1,}", b"{,1}", b"{1,,2}", b"{1}x", b"x{1}", b'{"a}', b"{a b}",
    b"{{1},2}", b"{1,{2}}", b"{{1,2},{3}}", b"{{}}", b"{{1}}}", b"[1:3]={1,2}",
    b"[1:2][1:1]={1,2}", b"[1:2]{1,2}", b"{1}{2}", b'{a"b"}', b"{" * 7 + b"1" + b"}" * 7,
])
def test_parse_text_rejects(raw: bytes) -> None:
    with pytest.raises(ConversionError):
        parse_text(raw)


def test_parse_text_hostile_values() -> None:
    assert parse_text(b'{"' + b"\\\\" * 5000 + b'"}') == [b"\\" * 5000]
    with pytest.raises(ConversionError, match="misplaced"):
        parse_text(b"{" * 100_000)


# ---------------------------------------------------------------- binary parser


def array_send(elements: Sequence[bytes | None], dims: Sequence[tuple[int, int]] | None = None,
               oid: int = 25) -> bytes:
    """``array_send`` output for ``elements`` with dims ``[(length, lower bound)...]``."""
    if dims is None:
        dims = [(len(elements), 1)] if elements else []
    out = struct.pack(">iiI", len(dims), int(None in elements), oid)
    for length, lower in dims:
        out += struct.pack(">ii", length, lower)
    for e in elements:
        out += struct.pack(">i", -1) if e is None else struct.pack(">i", len(e)) + e
    return out


@pytest.mark.parametrize(("elements", "dims"), [
    ([], None),
    ([b"a"], None),
    ([b"", None, b"NULL", b"\x00\xff"], None),
    ([b"1", b"2", b"3", b"4"], [(2, 1), (2, 1)]),
    ([b"7", b"8", b"9"], [(3, -5)]),
])
def test_parse_binary(elements: list[bytes | None], dims: list[tuple[int, int]] | None) -> None:
    assert parse_binary(array_send(elements, dims), 25) == elements


@pytest.mark.parametrize("raw", [
    b"",
    b"\x00" * 11,
    array_send([b"a"])[:-1],  # truncated element
    array_send([b"a"]) + b"x",  # trailing byte
    array_send([b"a"], oid=23),  # wrong element type
    struct.pack(">iiI", 7, 0, 25) + struct.pack(">ii", 1, 1) * 7 + struct.pack(">i", -1) * 1,
    struct.pack(">iiI", 1, 2, 25) + struct.pack(">ii", 0, 1),  # bad flags
    struct.pack(">iiI", 1, 0, 25) + struct.pack(">ii", -1, 1),  # negative length
    struct.pack(">iiI", 1, 0, 25) + struct.pack(">ii", 1, 1) + struct.pack(">i", 5) + b"abc",
    struct.pack(">iiI", 1, 0, 25) + struct.pack(">ii", 1, 1) + struct.pack(">i", -2),
])
def test_parse_binary_rejects(raw: bytes) -> None:
    with pytest.raises(ConversionError):
        parse_binary(raw, 25)


@pytest.mark.parametrize("dims", [
    [(2**31 - 1, 1)],
    [(65536, 1), (65536, 1)],  # 2**32 elements: the product, not each dimension, is checked
    [(2**31 - 1, 1)] * 6,
])
def test_parse_binary_checks_counts_before_allocating(dims: list[tuple[int, int]]) -> None:
    raw = struct.pack(">iiI", len(dims), 0, 25)
    raw += b"".join(struct.pack(">ii", n, lb) for n, lb in dims) + struct.pack(">i", 1) + b"x"
    tracemalloc.start()
    try:
        with pytest.raises(ConversionError, match="exceed"):
            parse_binary(raw, 25)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100_000


def test_parse_binary_element_length_is_checked() -> None:
    raw = struct.pack(">iiI", 1, 0, 25) + struct.pack(">ii", 1, 1) + struct.pack(">i", 2**31 - 1)
    with pytest.raises(ConversionError, match="exceeds"):
        parse_binary(raw + b"abc", 25)


# ---------------------------------------------------------------- mapping


def _mapper(**config: Any) -> TypeMapper:
    return TypeMapper(TypeConfig(**config))


def test_text_array_schema_and_values() -> None:
    column = _mapper().column("a", TEXT_ARRAY)
    assert column is not None
    assert column.schema.to_json() == {
        "type": "array", "items": {"type": "string", "optional": True}, "optional": True}
    assert column.convert(b'{a,NULL,"NULL","x y"}') == ["a", None, "NULL", "x y"]
    assert column.convert(array_send([b"a", None, b"\xc3\xa9"]), binary=True) == ["a", None, "é"]


def test_multidimensional_arrays_flatten_row_major() -> None:
    column = _mapper().column("a", INT4_ARRAY)
    assert column is not None
    assert column.convert(b"{{1,2},{3,NULL}}") == [1, 2, 3, None]
    raw = array_send([struct.pack(">i", i) for i in (1, 2, 3, 4)], [(2, 0), (2, 0)], oid=23)
    assert column.convert(raw, binary=True) == [1, 2, 3, 4]


def test_unsupported_element_types_are_dropped_unless_asked() -> None:
    for oid in (MONEY_ARRAY, POINT_ARRAY):
        assert _mapper().column("a", oid) is None
        assert _mapper(include_unknown_datatypes=True).column("a", oid) is None
    points = _mapper(map_unsupported_types=True).column("a", POINT_ARRAY)
    assert points is not None and points.schema.items is not None
    assert points.schema.items.name == "io.debezium.data.geometry.Point"
    assert [p["x"] for p in points.convert(b'{"(1,2)",NULL,"(3.5,-4)"}') if p] == [1.0, 3.5]


def test_domain_arrays_are_dropped() -> None:
    base = TypeRegistry().resolve(25)
    domain = PgType(90001, "public", "d_text", "domain", base=base)
    array = PgType(90002, "public", "_d_text", "array", element=domain)
    element = _mapper().value_mapping(base, -1)
    assert build(array, -1, TypeConfig(), element) is None
    assert build(array, -1, TypeConfig(map_unsupported_types=True), element) is not None
    assert build(array, -1, TypeConfig(), None) is None


def test_enum_items_are_optional() -> None:
    enum = PgType(90003, "public", "mood", "enum", enum_labels=("sad", "ok"))
    array = PgType(90004, "public", "_mood", "array", element=enum)
    mapping = _mapper().value_mapping(array, -1)
    assert mapping is not None and mapping.schema.items is not None
    assert mapping.schema.items.optional
    assert mapping.from_text(b"{sad,NULL}") == ["sad", None]


def test_box_arrays_use_the_box_delimiter() -> None:
    column = _mapper(include_unknown_datatypes=True, map_unsupported_types=True).column(
        "a", BOX_ARRAY)
    assert column is not None
    assert len(column.convert(b"{(1,1),(0,0);(3,4),(1,2)}")) == 2


DEFAULT = b"__debezium_unavailable_value"
INTS = [95, 95, 100, 101, 98, 101, 122, 105, 117, 109, 95, 117, 110, 97, 118, 97, 105, 108,
        97, 98, 108, 101, 95, 118, 97, 108, 117, 101]


@pytest.mark.parametrize(("type_name", "items", "placeholder", "expected"), [
    # as recorded in tests/golden/types_toast/*/ (t_toast_default after the first update)
    ("_text", Schema("string", True), DEFAULT, ["__debezium_unavailable_value"]),
    ("_json", Schema("string", True, "io.debezium.data.Json", 1), bytes.fromhex("deadbeef"),
     ["\u07ad\ufffd\ufffd"]),
    ("_int4", Schema("int32", True), DEFAULT, INTS),
    ("_int4", Schema("int32", True), bytes.fromhex("deadbeef"), [-34, -83, -66, -17]),
    ("_int8", Schema("int64", True), DEFAULT, INTS),
    ("_date", Schema("int32", True, "io.debezium.time.Date", 1), DEFAULT, INTS),
    ("_date", Schema("int32", True, "org.apache.kafka.connect.data.Date", 1), DEFAULT, None),
    ("_date", Schema("string", True, "io.debezium.time.IsoDate", 1), DEFAULT, None),
    ("_uuid", Schema("string", True, "io.debezium.data.Uuid", 1), DEFAULT,
     ["b68a35a7-17ad-35b3-af2a-ae46edb4545a"]),
    ("_bytea", Schema("bytes", True), DEFAULT, [DEFAULT]),
    ("_bytea", Schema("string", True), DEFAULT, None),
    ("_citext", Schema("string", True), DEFAULT, None),
    ("_geometry", Schema("string", True), DEFAULT, None),
])
def test_toast_placeholders(type_name: str, items: Schema, placeholder: bytes,
                            expected: list[Any] | None) -> None:
    assert toast_placeholder(type_name, items, placeholder) == expected


# ---------------------------------------------------------------- live round trips


def decode_inserts(rows: list[CaptureRow], config: TypeConfig | None = None,
                   catalog: CatalogSnapshot | None = None) -> list[list[Any]]:
    """Every Insert's converted values (text or binary as sent), through the type mapper."""
    reader, registry = PgOutputReader(), TypeRegistry(catalog)
    mapper = TypeMapper(config, registry)
    out = []
    for row in rows:
        message = reader.read(row.data)
        if isinstance(message, Type):
            registry.observe(message)
        elif isinstance(message, Insert):
            relation = reader.relations[message.relation_id]
            values = []
            for col, kind, raw in zip(relation.columns, message.new.kinds, message.new.values,
                                      strict=True):
                mapping = mapper.column(col.name, col.type_oid, col.type_modifier)
                assert mapping is not None, col.name
                values.append(None if raw is None
                              else mapping.convert(raw, binary=kind == KIND_BINARY))
            out.append(values)
    return out


def capture_both(conn: Any, cap: Capturer, config: TypeConfig | None = None
                 ) -> tuple[list[list[Any]], list[list[Any]]]:
    """The inserts decoded from text tuples and from binary tuples (then consumed)."""
    catalog = fetch_catalog(conn)
    text = decode_inserts(cap.changes(peek=True), config, catalog)
    binary = decode_inserts(cap.changes(binary=True), config, catalog)
    return text, binary


def capturer(conn: Any, table: str) -> Capturer:
    """A capturer for ``table``, reusing the slot of an earlier hypothesis example."""
    if conn.run("SELECT 1 FROM pg_replication_slots WHERE slot_name = 's'"):
        return Capturer(conn, tables=[table], create=False)
    return Capturer(conn, tables=[table])


def sql_array(values: Sequence[str | None], cast: str) -> str:
    if not values:
        return f"'{{}}'::{cast}"
    return "ARRAY[" + ", ".join("NULL" if v is None else quote_literal(v) for v in values) + \
        f"]::{cast}"


NASTY = st.sampled_from(["", "NULL", "null", " ", "{", "}", "{}", ",", ";", '"', "\\", "\\\\",
                         '\\"', "a b", "\t", "\n", "é", "✓", "\U0001f600", "'", "[1:2]={x}"])
TEXTS = st.one_of(NASTY, st.text(st.characters(exclude_categories=["Cs"],
                                               exclude_characters="\x00"), max_size=12))
ARRAYS = st.lists(st.one_of(st.none(), TEXTS), max_size=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arrays=st.lists(ARRAYS, min_size=1, max_size=8))
def test_text_arrays_round_trip(pg_conn: Any, arrays: list[list[str | None]]) -> None:
    pg_conn.run("CREATE TABLE IF NOT EXISTS t (id serial PRIMARY KEY, a text[], v varchar[],"
                " j jsonb[])")
    cap = capturer(pg_conn, "t")
    for values in arrays:
        json_values = [None if v is None else json.dumps(v) for v in values]
        pg_conn.run(f"INSERT INTO t (a, v, j) VALUES ({sql_array(values, 'text[]')},"
                    f" {sql_array(values, 'varchar[]')}, {sql_array(json_values, 'jsonb[]')})")
    text, binary = capture_both(pg_conn, cap)
    assert text == binary
    assert [row[1] for row in text] == arrays
    assert [row[2] for row in text] == arrays
    assert [[None if j is None else json.loads(j) for j in row[3]] for row in text] == arrays


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(matrix=st.integers(1, 3).flatmap(
    lambda cols: st.lists(st.lists(st.one_of(st.none(), TEXTS), min_size=cols, max_size=cols),
                          min_size=1, max_size=3)))
def test_multidimensional_arrays_round_trip(pg_conn: Any, matrix: list[list[str | None]]
                                            ) -> None:
    pg_conn.run("CREATE TABLE IF NOT EXISTS m (id serial PRIMARY KEY, a text[], b text[])")
    cap = capturer(pg_conn, "m")
    rows = ", ".join(sql_array(r, "text[]") for r in matrix)
    pg_conn.run(f"INSERT INTO m (a, b) VALUES (ARRAY[{rows}], '[-3:-1][0:0]={{{{x}},{{y}},{{z}}}}')")
    text, binary = capture_both(pg_conn, cap)
    assert text == binary
    assert text[0][1] == [v for r in matrix for v in r]
    assert text[0][2] == ["x", "y", "z"]


def test_arrays_of_every_family_agree_in_text_and_binary(pg_conn: Any) -> None:
    for extension in ("hstore", "postgis", "ltree", "citext"):
        pg_conn.run(f"CREATE EXTENSION {extension}")
    pg_conn.run("CREATE TYPE mood AS ENUM ('sad', 'with space', 'quo\"te')")
    pg_conn.run(
        "CREATE TABLE x (id int PRIMARY KEY, a_bytea bytea[], a_uuid uuid[], a_json json[],"
        " a_inet inet[], a_cidr cidr[], a_macaddr macaddr[], a_ltree ltree[], a_citext citext[],"
        " a_hstore hstore[], a_geom geometry[], a_geog geography[], a_char \"char\"[],"
        " a_bpchar char(3)[], a_mood mood[])")
    cap = Capturer(pg_conn, tables=["x"])
    pg_conn.run(
        "INSERT INTO x VALUES (1, '{\"\\\\x00ff\",NULL,\"\\\\x\"}',"
        " '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,NULL}', ARRAY['{\"a\": 1}'::json, NULL],"
        " '{192.168.1.5/24,::1,10.0.0.1}', '{10.0.0.0/8,2001:db8::/32}', '{08:00:2b:01:02:03}',"
        " '{Top.Science,NULL}', '{MiXeD,NULL}',"
        " ARRAY['\"a\"=>\"1\", \"b\"=>NULL'::hstore, ''::hstore, NULL],"
        " ARRAY['POINT(1 2)'::geometry, 'SRID=4326;POINT(3 4)'::geometry, NULL],"
        " ARRAY['SRID=4326;POINT(3 4)'::geography], '{a,b}', '{a,\"bc \"}',"
        " '{sad,\"with space\",\"quo\\\"te\",NULL}')")
    pg_conn.run("INSERT INTO x (id) VALUES (2)")
    config = TypeConfig(binary_handling_mode="hex")
    text, binary = capture_both(pg_conn, cap, config)
    assert text == binary
    row = text[0]
    assert row[1] == ["00ff", None, ""]
    assert row[9] == ['{"a":"1","b":null}', "{}", None]
    assert [g["srid"] for g in row[10][:2]] == [None, 4326] and row[10][2] is None
    assert row[13] == ["a  ", "bc "]
    assert row[14] == ["sad", "with space", 'quo"te', None]
