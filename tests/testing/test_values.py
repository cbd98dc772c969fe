"""Generated values are what PostgreSQL prints and sends: checked on the throwaway server.

Every generated value is inserted on the server (as its text literal), captured in
text and in binary, and compared with what was generated: the same text bytes,
the same binary bytes, and the same Connect value once decoded. timestamptz
values are printed in the session's time zone, so their text is compared under a
session whose zone is the value's offset.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgcdc_events.protocol import Insert, PgOutputReader, Type
from pgcdc_events.testing import pgtext as pt
from pgcdc_events.testing.pgtext import PgValue
from pgcdc_events.testing.tables import column_type, quote_ident
from pgcdc_events.testing.values import ARRAY_TYPES, BINARY_TYPES, SUPPORTED_TYPES, values
from pgcdc_events.testing.workload import is_toasted
from pgcdc_events.types.mapper import TypeMapper
from pgcdc_events.types.registry import TypeRegistry
from support.capture import Capturer

EXTENSIONS = ("hstore", "citext", "ltree", "postgis")
TYPES = [*SUPPORTED_TYPES, "numeric(10,2)", "numeric(3,3)", "varchar(5)", "bpchar(3)", "bit(3)",
         "varbit(5)", "time(3)", "timestamp(0)", "timetz(2)", "timestamptz(4)",
         *(t + "[]" for t in ARRAY_TYPES)]
SETTINGS = settings(max_examples=25, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


def _mapper(conn: Any) -> tuple[TypeMapper, dict[str, int]]:
    """A type mapper that knows the server's extension types by their real OIDs."""
    registry = TypeRegistry()
    oids: dict[str, int] = {}
    for name, oid in conn.run("SELECT typname, oid::int FROM pg_type WHERE typname IN "
                              "('hstore', 'citext', 'ltree', 'geometry', 'geography')"):
        oids[name] = oid
    for name, oid in oids.items():
        registry.observe(Type(oid, "public", name))
    return TypeMapper(registry=registry), oids


def _convert(mapper: TypeMapper, oids: dict[str, int], sql: str, raw: bytes, binary: bool
             ) -> Any:
    t = column_type(sql)
    oid = oids.get(t.name, t.oid)
    mapping = mapper.column("c", oid, t.type_modifier)
    if mapping is None:  # a type Debezium drops: nothing to compare
        return "<dropped>"
    return mapping.convert(raw, binary=binary)


@SETTINGS
@given(data=st.data())
def test_every_generated_value_round_trips_through_the_server(pg_conn: Any, data: Any) -> None:
    pg_conn.run("SET TIME ZONE 'UTC'")
    if not pg_conn.run("SELECT 1 FROM pg_class WHERE relname = 'v'"):
        for extension in EXTENSIONS:
            pg_conn.run(f"CREATE EXTENSION IF NOT EXISTS {extension}")
        cols = ", ".join(f"c{i} {t}" for i, t in enumerate(TYPES))
        pg_conn.run(f"CREATE TABLE v (id serial PRIMARY KEY, {cols})")
        Capturer(pg_conn, tables=["v"])
    cap = Capturer(pg_conn, tables=["v"], create=False)
    row = [data.draw(values(t), label=t) for t in TYPES]
    columns = ", ".join(f"c{i}" for i in range(len(TYPES)))
    pg_conn.run(f"INSERT INTO v ({columns}) VALUES ({', '.join(v.sql() for v in row)})")
    text = [m for m in _read(cap.changes(peek=True)) if isinstance(m, Insert)]
    binary = [m for m in _read(cap.changes(binary=True)) if isinstance(m, Insert)]
    assert len(text) == len(binary) == 1
    mapper, oids = _mapper(pg_conn)
    for i, (sql, value) in enumerate(zip(TYPES, row, strict=True)):
        got_text = text[0].new.values[i + 1]
        got_binary = binary[0].new.values[i + 1]
        assert got_text is not None and got_binary is not None
        if not _zoned(value):
            assert got_text == value.text_bytes, (sql, value)
        assert _same(_convert(mapper, oids, sql, value.text_bytes, False),
                     _convert(mapper, oids, sql, got_text, False)), (sql, value)
        base = sql.split("(")[0].removesuffix("[]")
        if base in BINARY_TYPES and value.binary is not None:
            assert got_binary == value.binary, (sql, value, got_binary.hex())
            assert _same(_convert(mapper, oids, sql, value.binary, True),
                         _convert(mapper, oids, sql, got_binary, True)), (sql, value)


def _same(a: Any, b: Any) -> bool:
    """Equal Connect values, NaN equal to NaN."""
    return a == b or repr(a) == repr(b)


def _zoned(value: PgValue) -> bool:
    """timestamptz values (and arrays of them) shown at an offset other than UTC's."""
    model = value.model
    if (value.type.startswith("timestamptz") and not value.type.endswith("]")
            and isinstance(model, tuple)):
        return bool(model[1])
    if isinstance(model, tuple) and model and all(isinstance(v, PgValue) or v is None
                                                  for v in model):
        return any(v is not None and _zoned(v) for v in model)
    return False


def _read(rows: list[Any]) -> list[Any]:
    reader = PgOutputReader()
    return [reader.read(r.data) for r in rows]


@pytest.mark.parametrize("offset", [19_800, -12_600, 3600, -57_540, 0])
def test_timestamptz_text_at_a_session_offset(pg_conn: Any, offset: int) -> None:
    pg_conn.run("CREATE TABLE z (id int PRIMARY KEY, t timestamptz)")
    cap = Capturer(pg_conn, tables=["z"])
    samples = [pt.timestamptz_value(us, offset) for us in
               (0, 760_000_123_456, -63_113_904_000_000_001, pt.TIMESTAMP_MAX - 60_000_000_000,
                pt.TIMESTAMP_MIN + 60_000_000_000)]
    for i, v in enumerate(samples):
        pg_conn.run(f"INSERT INTO z VALUES ({i}, {v.sql()})")
    sign = "-" if offset < 0 else "+"
    hours, minutes = divmod(abs(offset) // 60, 60)
    pg_conn.run(f"SET TIME ZONE INTERVAL '{sign}{hours:02d}:{minutes:02d}' HOUR TO MINUTE")
    got = [m.new.values[1] for m in _read(cap.changes()) if isinstance(m, Insert)]
    assert got == [v.text_bytes for v in samples]


def test_the_largest_float4_decodes_from_binary() -> None:
    # Found by the round trip: the binary float4 converter overflowed on 3.4028235e38.
    mapping = TypeMapper().column("c", 700)
    assert mapping is not None
    assert mapping.convert(b"\x7f\x7f\xff\xff", binary=True) == 3.4028235e38


def test_float_text_is_the_servers_shortest_form() -> None:
    # Found by the round trip: PostgreSQL's Ryu never takes a boundary as the shortest form.
    assert pt.float_text(4.671430835253034e16) == "4.6714308352530336e+16"
    assert pt.float_text(1e15) == "1e+15"
    assert pt.float_text(123456789012345.0) == "123456789012345"
    assert pt.float_text(1e6, single=True) == "1e+06"
    assert pt.float_text(-0.0) == "-0"
    assert pt.float_text(0.0001) == "0.0001"
    assert pt.float_text(1.5e-5) == "1.5e-05"


@pytest.mark.parametrize("sql", ["numeric(10,2)", "text[]", '"char"', "timestamptz(3)",
                                 "character varying(7)", "double precision", "mood"])
def test_values_carry_the_column_type(sql: str) -> None:
    enums = {"mood": ("sad", "ok")}
    t = column_type(sql, enums)

    @given(values(sql, enums=enums))
    @settings(max_examples=20, database=None)
    def check(v: PgValue) -> None:
        assert v.type == t.sql

    check()


def test_long_values_exceed_the_toast_threshold() -> None:
    @given(values("text", long_values=True), values("bytea", long_values=True))
    @settings(max_examples=50, database=None)
    def check(a: PgValue, b: PgValue) -> None:
        assert is_toasted(a) == (len(a.text_bytes) >= 2000)
        assert is_toasted(b) == (b.binary is not None and len(b.binary) >= 2000)

    check()
    assert quote_ident('a"b') == '"a""b"'


def test_float_text_of_powers_of_two_is_the_servers(pg_conn: Any) -> None:
    """Next to a power of two the nearest shortest decimal may read back as the float
    below; float8out then prints the next one up (2**-24 is 5.960464477539063e-08, which
    the round-trip property test found as a point coordinate). Every power of two, and
    its float4 where it has one, as the server prints it."""
    exponents = list(range(-1074, 1024))
    rows = pg_conn.run("SELECT e, (2.0::float8 ^ e)::text, CASE WHEN e BETWEEN -149 AND 127 "
                       "THEN (2.0::float8 ^ e)::float4::text END "
                       "FROM unnest(CAST(:e AS int[])) AS e", e=exponents)
    assert len(rows) == len(exponents)
    for e, text8, text4 in rows:
        assert pt.float_text(2.0 ** e) == text8, e
        if text4 is not None:
            assert pt.float_text(2.0 ** e, single=True) == text4, e
