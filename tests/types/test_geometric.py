"""point and PostGIS geometry/geography: schemas, text and binary values, live agreement."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from pgcdc_events.errors import ConversionError
from pgcdc_events.protocol import KIND_BINARY, Insert, PgOutputReader, Type
from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.geometric import BUILDERS, ewkb_srid
from pgcdc_events.types.jsonvalue import value_to_json
from pgcdc_events.types.mapper import TypeMapper
from pgcdc_events.types.registry import PgType, TypeRegistry
from support.capture import Capturer


def mapping(name: str) -> Any:
    return BUILDERS[name](PgType(0, "public", name, "base"), -1, TypeConfig())


def as_json(name: str, value: Any) -> Any:
    return value_to_json(mapping(name).schema, value)


def test_point_schema() -> None:
    # as recorded for types/*/t_geo.c_point (the mapper adds the column's optionality)
    assert mapping("point").schema.with_(optional=True).to_json() == {
        "type": "struct", "fields": [
            {"type": "double", "optional": False, "field": "x"},
            {"type": "double", "optional": False, "field": "y"},
            {"type": "bytes", "optional": True, "field": "wkb"},
            {"type": "int32", "optional": True, "field": "srid"}],
        "optional": True, "name": "io.debezium.data.geometry.Point", "version": 1,
        "doc": "Geometry (POINT)"}


@pytest.mark.parametrize(("raw", "expected"), [
    # types/default/t_geo.c_point
    (b"(1.5,-2.25)", {"x": 1.5, "y": -2.25, "wkb": "AQEAAAAAAAAAAAD4PwAAAAAAAALA", "srid": None}),
    (b"(0,0)", {"x": 0.0, "y": 0.0, "wkb": "AQEAAAAAAAAAAAAAAAAAAAAAAAAA", "srid": None}),
    (b"(1e+300,-1e-300)",
     {"x": 1e300, "y": -1e-300, "wkb": "AQEAAACcdQCIPOQ3flnz+MIfbqWB", "srid": None}),
    (b"(NaN,Infinity)",
     {"x": "NaN", "y": "Infinity", "wkb": "AQEAAAAAAAAAAAD4fwAAAAAAAPB/", "srid": None}),
])
def test_point_text(raw: bytes, expected: dict[str, Any]) -> None:
    assert as_json("point", mapping("point").from_text(raw)) == expected


def test_point_binary_matches_text() -> None:
    m = mapping("point")
    for x, y in [(1.5, -2.25), (1e300, -1e-300), (float("inf"), -0.0)]:
        assert as_json("point", m.from_binary(struct.pack(">dd", x, y))) == \
            as_json("point", m.from_text(f"({x!r},{y!r})".replace("inf", "Infinity").encode()))
    # any NaN (sign, payload) becomes the canonical NaN, as Java re-reads the text "NaN"
    odd_nan = bytes.fromhex("fff8000000000001")
    value = as_json("point", m.from_binary(odd_nan + struct.pack(">d", 0.0)))
    assert value["wkb"] == as_json("point", m.from_text(b"(NaN,0)"))["wkb"]


@pytest.mark.parametrize("raw", [b"(1,2", b"1,2", b"(a,b)", b"(1,2,3)", b""])
def test_point_text_rejects(raw: bytes) -> None:
    with pytest.raises(ConversionError):
        mapping("point").from_text(raw)


def test_point_binary_rejects() -> None:
    with pytest.raises(ConversionError):
        mapping("point").from_binary(b"\x00" * 15)


@pytest.mark.parametrize(("hex_ewkb", "wkb", "srid"), [
    # types/default/t_geo.c_geom and c_geog: the EWKB is kept whole, SRID flag included
    ("0101000000000000000000F03F0000000000000040", "AQEAAAAAAAAAAADwPwAAAAAAAABA", None),
    ("0101000020E6100000000000000000F03F0000000000000040",
     "AQEAACDmEAAAAAAAAAAA8D8AAAAAAAAAQA==", 4326),
    ("0101000080000000000000F03F00000000000000400000000000000840",
     "AQEAAIAAAAAAAADwPwAAAAAAAABAAAAAAAAACEA=", None),
    ("010700000000000000", "AQcAAAAAAAAA", None),
])
def test_geometry_text(hex_ewkb: str, wkb: str, srid: int | None) -> None:
    for name in ("geometry", "geography"):
        assert as_json(name, mapping(name).from_text(hex_ewkb.encode())) == \
            {"wkb": wkb, "srid": srid}
        assert mapping(name).from_binary(bytes.fromhex(hex_ewkb)) == \
            mapping(name).from_text(hex_ewkb.encode())


def test_geometry_schemas_and_placeholders() -> None:
    for name, logical in (("geometry", "Geometry"), ("geography", "Geography")):
        m = mapping(name)
        assert m.schema.with_(optional=True).to_json() == {
            "type": "struct", "fields": [
                {"type": "bytes", "optional": False, "field": "wkb"},
                {"type": "int32", "optional": True, "field": "srid"}],
            "optional": True, "name": f"io.debezium.data.geometry.{logical}", "version": 1,
            "doc": logical}
        assert m.toast is None  # types_toast/*/t_toast_default.c_geom


def test_ewkb_srid() -> None:
    assert ewkb_srid(bytes.fromhex("0020000001000010E6") + b"\x00" * 16) == 4326  # big-endian
    assert ewkb_srid(bytes.fromhex("01010000A0110F0000") + b"\x00" * 24) == 3857  # Z + SRID
    for bad in (b"", b"\x01" * 8, bytes.fromhex("0101000020E61000")):
        with pytest.raises(ConversionError):
            ewkb_srid(bad)
    with pytest.raises(ConversionError):
        mapping("geometry").from_text(b"not hex")


def test_live_text_and_binary_agree(pg_conn: Any) -> None:
    pg_conn.run("CREATE EXTENSION postgis")
    pg_conn.run("CREATE TABLE g (id int PRIMARY KEY, p point, g geometry, gg geography)")
    cap = Capturer(pg_conn, tables=["g"])
    for values in [
        "1, '(1.5,-2.25)', 'POINT(1 2)', 'POINT(-71.06 42.36)'",
        "2, '(NaN,Infinity)', 'SRID=3857;POLYGON((0 0,4 0,4 4,0 4,0 0))',"
        " 'SRID=4326;LINESTRING(0 0,1 1)'",
        "3, '(1e300,-1e-300)', 'POINT Z (1 2 3)', NULL",
        "4, '(-0,0)', 'GEOMETRYCOLLECTION EMPTY', 'POINT EMPTY'",
    ]:
        pg_conn.run(f"INSERT INTO g VALUES ({values})")
    text = decode(cap.changes(peek=True))
    binary = decode(cap.changes(binary=True))
    assert text == binary
    assert [row[2]["srid"] for row in text] == [None, 3857, None, None]
    assert [row[3] and row[3]["srid"] for row in text] == [4326, 4326, None, 4326]


def decode(rows: Any) -> list[list[Any]]:
    reader, registry = PgOutputReader(), TypeRegistry()
    mapper = TypeMapper(TypeConfig(), registry)
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
                value = None if raw is None else column.convert(raw, binary=kind == KIND_BINARY)
                values.append(value_to_json(column.schema, value))
            out.append(values)
    return out
