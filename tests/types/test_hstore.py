"""hstore: text and binary parsing, Java HashMap key order, Jackson JSON, and live round trips."""

from __future__ import annotations

import itertools
import json
import struct
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgcdc_events.errors import ConversionError
from pgcdc_events.protocol import KIND_BINARY, Insert, PgOutputReader, Type
from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.hstore import (
    hstore_from_binary,
    hstore_from_text,
    java_hashmap_order,
    java_json_object,
    java_string_hash,
)
from pgcdc_events.types.mapper import TypeMapper
from pgcdc_events.types.registry import PgType, TypeRegistry
from support.capture import Capturer, quote_literal

HSTORE = PgType(90010, "public", "hstore", "base")


def mapping(**config: Any) -> Any:
    result = TypeMapper(TypeConfig(**config)).value_mapping(HSTORE, -1)
    assert result is not None
    return result


# ---------------------------------------------------------------- text and binary parsing


@pytest.mark.parametrize(("raw", "expected"), [
    (b"", {}),
    (b"  ", {}),
    (b'"a"=>"1", "b"=>NULL', {"a": "1", "b": None}),
    (b'"k"=>"NULL"', {"k": "NULL"}),
    (b'"k"=>null', {"k": None}),
    (b'"quo\\"te"=>"back\\\\slash", "com,ma"=>"x=>y", "sp ace"=>"", "=>"=>"NULL"',
     {'quo"te': "back\\slash", "com,ma": "x=>y", "sp ace": "", "=>": "NULL"}),
    ('"ключ"=>"✓ 日本", "é"=>"ü"'.encode(), {"ключ": "✓ 日本", "é": "ü"}),
    (b'"a"  =>  "1" ,"b"=>"2"', {"a": "1", "b": "2"}),
    (b'"a"=>"1", "a"=>"2", "b"=>"3"', {"a": "2", "b": "3"}),  # first position, last value
])
def test_hstore_from_text(raw: bytes, expected: dict[str, str | None]) -> None:
    assert hstore_from_text(raw) == expected


@pytest.mark.parametrize("raw", [
    b"a=>b", b'"a"', b'"a"=>', b'"a"="b"', b'"a"=>"b" "c"=>"d"', b'"a"=>"b', b'"a',
    b'"a"=>NULLX', b'"a"=>"b"x', b'"a"=>b',
])
def test_hstore_from_text_rejects(raw: bytes) -> None:
    with pytest.raises(ConversionError):
        hstore_from_text(raw)


def hstore_send(pairs: dict[str, str | None]) -> bytes:
    out = struct.pack(">i", len(pairs))
    for key, value in pairs.items():
        k = key.encode()
        out += struct.pack(">i", len(k)) + k
        out += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value.encode())) \
            + value.encode()
    return out


@pytest.mark.parametrize("pairs", [{}, {"a": "1", "b": None}, {"": "", "é": "✓", "k": "NULL"}])
def test_hstore_from_binary(pairs: dict[str, str | None]) -> None:
    assert hstore_from_binary(hstore_send(pairs)) == pairs


@pytest.mark.parametrize("raw", [
    b"", b"\x00\x00\x00",
    struct.pack(">i", -1),
    struct.pack(">i", 1),
    struct.pack(">ii", 1, -1) + struct.pack(">i", -1),  # a NULL key
    struct.pack(">ii", 1, 5) + b"abc",
    struct.pack(">ii", 1, 5) + b"abc" + struct.pack(">i", -1),  # the key swallows "\xff\xff"
    struct.pack(">ii", 1, 1) + b"\xff" + struct.pack(">i", -1),
    struct.pack(">ii", 1, 1) + b"a" + struct.pack(">i", 9) + b"b",
    hstore_send({"a": "b"}) + b"x",
])
def test_hstore_from_binary_rejects(raw: bytes) -> None:
    with pytest.raises(ConversionError):
        hstore_from_binary(raw)


def test_hstore_from_binary_checks_the_count_before_allocating() -> None:
    raw = struct.pack(">i", 2**31 - 1) + hstore_send({"a": "b"})[4:]
    tracemalloc.start()
    try:
        with pytest.raises(ConversionError, match="exceeds"):
            hstore_from_binary(raw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100_000


# ---------------------------------------------------------------- Java HashMap order


@pytest.mark.parametrize(("key", "expected"), [
    # String.hashCode() as printed by OpenJDK 17
    ("", 0), ("a", 97), ("new", 108960), ("Aa", 2112), ("BB", 2112), ("\U0001f600", 1772899),
    ("héllo ✓", 289802561), ("k31", 104457), ("polygenelubricants", -2147483648),
])
def test_java_string_hash(key: str, expected: int) -> None:
    assert java_string_hash(key) == expected


def _ordered(keys: list[str]) -> list[str]:
    return [keys[i] for i in java_hashmap_order(keys)]


def test_hashmap_order_as_recorded() -> None:
    # types/*/t_hstore_range.c_hstore[id=1] after the update: {"a":"1","new":"val","b":null}
    assert _ordered(["a", "b", "new"]) == ["a", "new", "b"]
    # types_toast/*/t_toast_default.c_hstore: 250 keys k1..k250 (HashMap resized to 512)
    keys = [f"k{i}" for i in range(1, 251)]
    assert _ordered(keys)[:8] == ["k31", "k30", "k33", "k32", "k35", "k34", "k37", "k36"]


def test_hashmap_order_with_tree_bins() -> None:
    # 32 keys with one hash ("Aa" and "BB" collide) interleaved with k0..k59: the colliding
    # bin becomes a red-black tree whose root moves to the bin's front. Expected order
    # printed by OpenJDK 17's HashMap for the same insertions.
    colliding = ["".join(p) for p in itertools.product(["Aa", "BB"], repeat=5)][::-1]
    keys: list[str] = []
    for i in range(60):
        keys.append(f"k{i}")
        if i < 32:
            keys.append(colliding[i])
    assert java_hashmap_order(keys) == [
        62, 60, 65, 64, 67, 66, 69, 68, 71, 70, 15, 7, 1, 3, 5, 9, 11, 13, 17, 19, 21, 23, 25,
        27, 29, 31, 33, 35, 37, 39, 41, 43, 45, 47, 49, 51, 53, 55, 57, 59, 61, 63, 0, 2, 72, 4,
        6, 74, 8, 73, 10, 76, 12, 75, 14, 78, 16, 77, 18, 80, 79, 81, 83, 82, 85, 84, 22, 87, 20,
        86, 26, 89, 24, 88, 30, 91, 28, 90, 34, 32, 38, 36, 40, 44, 42, 48, 46, 52, 50, 56, 54,
        58]


def test_hashmap_order_is_a_permutation_at_scale() -> None:
    keys = [f"key-{i}-{'Aa' if i % 3 else 'BB'}" for i in range(20_000)]
    order = java_hashmap_order(keys)
    assert sorted(order) == list(range(len(keys)))


# ---------------------------------------------------------------- JSON and mapping


def test_json_object_escapes_as_jackson() -> None:
    text = java_json_object([('q"\\', "\x01\x1f\b\t\n\f\r/é✓\U0001f600\x7f"), ("n", None)])
    assert text == '{"q\\"\\\\":"\\u0001\\u001F\\b\\t\\n\\f\\r/é✓\U0001f600\x7f","n":null}'
    assert json.loads(text) == {'q"\\': "\x01\x1f\b\t\n\f\r/é✓\U0001f600\x7f", "n": None}


def test_json_mode() -> None:
    m = mapping()
    assert m.schema.to_json() == {"type": "string", "optional": False,
                                  "name": "io.debezium.data.Json", "version": 1}
    # types/default/t_hstore_range.c_hstore[id=1], after the update
    assert m.from_text(b'"a"=>"1", "b"=>NULL, "new"=>"val"') == \
        '{"a":"1","new":"val","b":null}'
    assert m.from_binary(hstore_send({"a": "1", "b": None, "new": "val"})) == \
        '{"a":"1","new":"val","b":null}'
    assert m.from_text(b"") == "{}"
    # types_toast/*/t_toast_default.c_hstore
    assert m.toast == '{"__debezium_unavailable_value":"__debezium_unavailable_value"}'
    assert mapping(unavailable_value_placeholder=bytes.fromhex("deadbeef")).toast == \
        '{"\u07ad\ufffd\ufffd":"\u07ad\ufffd\ufffd"}'


def test_map_mode() -> None:
    m = mapping(hstore_handling_mode="map")
    assert m.schema.to_json() == {
        "type": "map", "keys": {"type": "string", "optional": False},
        "values": {"type": "string", "optional": True}, "optional": False}
    value = m.from_text(b'"a"=>"1", "b"=>NULL, "new"=>"val"')
    assert list(value.items()) == [("a", "1"), ("new", "val"), ("b", None)]
    assert m.toast == {"__debezium_unavailable_value": "__debezium_unavailable_value"}


# ---------------------------------------------------------------- live round trips

TEXTS = st.one_of(
    st.sampled_from(["", "NULL", "null", "=>", '"', "\\", '\\"', ",", " ", "a b", "é✓", "\n"]),
    st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=10),
)
HSTORES = st.dictionaries(TEXTS, st.one_of(st.none(), TEXTS), max_size=12)


def sql_hstore(pairs: dict[str, str | None]) -> str:
    if not pairs:
        return "''::hstore"
    keys = ", ".join(quote_literal(k) for k in pairs)
    values = ", ".join("NULL" if v is None else quote_literal(v) for v in pairs.values())
    return f"hstore(ARRAY[{keys}]::text[], ARRAY[{values}]::text[])"


def decode(rows: Any, config: TypeConfig) -> list[list[Any]]:
    reader, registry = PgOutputReader(), TypeRegistry()
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
                column = mapper.column(col.name, col.type_oid, col.type_modifier)
                assert column is not None
                values.append(None if raw is None
                              else column.convert(raw, binary=kind == KIND_BINARY))
            out.append(values)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(HSTORES, min_size=1, max_size=6))
def test_hstore_round_trip(pg_conn: Any, values: list[dict[str, str | None]]) -> None:
    if not pg_conn.run("SELECT 1 FROM pg_extension WHERE extname = 'hstore'"):
        pg_conn.run("CREATE EXTENSION hstore")
        pg_conn.run("CREATE TABLE h (id serial PRIMARY KEY, h hstore, a hstore[])")
        Capturer(pg_conn, tables=["h"])
    cap = Capturer(pg_conn, tables=["h"], create=False)
    for pairs in values:
        pg_conn.run(f"INSERT INTO h (h, a) VALUES ({sql_hstore(pairs)},"
                    f" ARRAY[{sql_hstore(pairs)}, NULL])")
    json_mode, map_mode = TypeConfig(), TypeConfig(hstore_handling_mode="map")
    rows = cap.changes(peek=True)
    as_map = decode(rows, map_mode)
    as_json = decode(rows, json_mode)
    binary_rows = cap.changes(binary=True)
    assert [[list(r[1].items()), r[2]] for r in decode(binary_rows, map_mode)] == \
        [[list(r[1].items()), r[2]] for r in as_map]
    assert decode(binary_rows, json_mode) == as_json
    assert [r[1] for r in as_map] == values
    assert [json.loads(r[1]) for r in as_json] == values
    assert [r[2] for r in as_map] == [[v, None] for v in values]
    for m, j in zip(as_map, as_json, strict=True):  # both in Java HashMap key order
        assert list(json.loads(j[1])) == list(m[1])
