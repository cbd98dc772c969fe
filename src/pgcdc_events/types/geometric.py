"""Geometric types: ``point`` and PostGIS ``geometry``/``geography``.

``point`` becomes ``io.debezium.data.geometry.Point``: its coordinates plus a
21-byte little-endian WKB point and no SRID. PostGIS values arrive as hex
EWKB text (binary: the raw EWKB); Debezium keeps the EWKB unchanged in
``wkb`` (SRID flag and SRID included) and reads the SRID from the
``0x20000000`` flag of the type word. box, circle, line, lseg, path and polygon
are unknown to Debezium 3.6 and are left to :func:`text.unknown_mapping`.
"""

from __future__ import annotations

import math
import re
import struct
from typing import Final

from pgcdc_events.errors import ConversionError
from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.mapping import Builder, Converter, ValueMapping
from pgcdc_events.types.registry import PgType
from pgcdc_events.types.schema import Schema, Struct, struct_schema

__all__ = [
    "BUILDERS", "GEOGRAPHY_SCHEMA", "GEOMETRY_SCHEMA", "POINT_SCHEMA", "ewkb_srid", "point_wkb",
]

POINT_SCHEMA: Final = struct_schema(
    "io.debezium.data.geometry.Point",
    [("x", Schema("float64")), ("y", Schema("float64")),
     ("wkb", Schema("bytes", optional=True)), ("srid", Schema("int32", optional=True))],
    version=1, doc="Geometry (POINT)",
)
_EWKB_MEMBERS: Final = [("wkb", Schema("bytes")), ("srid", Schema("int32", optional=True))]
GEOMETRY_SCHEMA: Final = struct_schema("io.debezium.data.geometry.Geometry", _EWKB_MEMBERS,
                                       version=1, doc="Geometry")
GEOGRAPHY_SCHEMA: Final = struct_schema("io.debezium.data.geometry.Geography", _EWKB_MEMBERS,
                                        version=1, doc="Geography")

_WKB_POINT: Final = struct.Struct("<BIdd")
_POINT_TEXT: Final = re.compile(rb"\s*\(\s*([^,()\s]+)\s*,\s*([^,()\s]+)\s*\)\s*")
_EWKB_SRID_FLAG: Final = 0x20000000


def _coordinate(value: float) -> float:
    """NaN in its canonical form, as Java's ``Double.parseDouble("NaN")`` produces it."""
    return math.nan if math.isnan(value) else value


def point_wkb(x: float, y: float) -> bytes:
    """Debezium's ``Point.buildWKBPoint``: byte order 1, type 1, x, y (little-endian)."""
    return _WKB_POINT.pack(1, 1, x, y)


def _point(x: float, y: float) -> Struct:
    x, y = _coordinate(x), _coordinate(y)
    return Struct(POINT_SCHEMA, (x, y, point_wkb(x, y), None))


def _point_from_text(raw: bytes) -> Struct:
    match = _POINT_TEXT.fullmatch(raw)
    try:
        if match is not None:
            return _point(float(match.group(1)), float(match.group(2)))
    except ValueError:
        pass
    raise ConversionError("point: expected '(x,y)' with two float8 coordinates")


def _point_from_binary(raw: bytes) -> Struct:
    if len(raw) != 16:
        raise ConversionError(f"point binary: expected 16 bytes, got {len(raw)}")
    x, y = struct.unpack(">dd", raw)
    return _point(x, y)


def ewkb_srid(ewkb: bytes) -> int | None:
    """An EWKB value's SRID (``None`` without the SRID flag), as ``PostgisGeometry`` reads it."""
    if len(ewkb) < 9:
        raise ConversionError(f"EWKB: {len(ewkb)} bytes is too short")
    order = "<" if ewkb[0] else ">"
    (kind,) = struct.unpack_from(order + "I", ewkb, 1)
    if not kind & _EWKB_SRID_FLAG:
        return None
    (srid,) = struct.unpack_from(order + "i", ewkb, 5)
    return int(srid)


def _ewkb_converters(schema: Schema) -> tuple[Converter, Converter]:
    def from_binary(raw: bytes) -> Struct:
        ewkb = bytes(raw)
        return Struct(schema, (ewkb, ewkb_srid(ewkb)))

    def from_text(raw: bytes) -> Struct:
        try:
            ewkb = bytes.fromhex(raw.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            raise ConversionError("EWKB: invalid hex text") from None
        return from_binary(ewkb)

    return from_text, from_binary


def _point_builder(t: PgType, typmod: int, config: TypeConfig) -> ValueMapping:
    return ValueMapping(POINT_SCHEMA, _point_from_text, _point_from_binary)


def _postgis(schema: Schema) -> Builder:
    from_text, from_binary = _ewkb_converters(schema)
    # Debezium 3.6 has no placeholder for an unchanged TOASTed geometry: its string
    # placeholder fails the struct schema and the field becomes null (types_toast).
    mapping = ValueMapping(schema, from_text, from_binary, None)

    def build(t: PgType, typmod: int, config: TypeConfig) -> ValueMapping:
        return mapping

    return build


BUILDERS: Final[dict[str, Builder]] = {
    "point": _point_builder,
    "geometry": _postgis(GEOMETRY_SCHEMA),
    "geography": _postgis(GEOGRAPHY_SCHEMA),
}
