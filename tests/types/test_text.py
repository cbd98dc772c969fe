"""The text family against a live server: strings, bytea in every binary mode, uuid, json,
jsonb and network types, captured as text and binary tuples and checked against SQL."""

from __future__ import annotations

import base64
import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgcdc_events.protocol import Insert, PgOutputReader, Relation
from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.mapper import TypeMapper
from pgcdc_events.types.text import bytea_from_text
from support.capture import Capturer

SETTINGS = settings(max_examples=20, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
COLUMNS = "t text, b bytea, u uuid, j json, jb jsonb, i inet, c cidr, m macaddr"

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=30)


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@SETTINGS
@given(st.lists(st.tuples(texts, st.binary(max_size=40), st.uuids(), texts,
                          st.ip_addresses(), st.integers(0, 8)), min_size=1, max_size=5))
def test_text_family_text_and_binary_agree_with_sql(pg_conn: Any, rows: list[Any]) -> None:
    pg_conn.run("DROP TABLE IF EXISTS tx")
    pg_conn.run(f"CREATE TABLE tx (id int PRIMARY KEY, {COLUMNS})")
    pg_conn.run("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = 'tx'")
    pg_conn.run("DROP PUBLICATION IF EXISTS tx_pub")
    cap = Capturer(pg_conn, slot="tx", publication="tx_pub")
    for n, (text, raw, ident, json_text, address, mac) in enumerate(rows):
        prefix = 8 if address.version == 4 else 64
        pg_conn.run(
            f"INSERT INTO tx VALUES ({n}, {_lit(text)}, '\\x{raw.hex()}', '{ident}', "
            f"json_build_object('k', {_lit(json_text)}), jsonb_build_object('k', "
            f"{_lit(json_text)}), '{address}', set_masklen('{address}'::cidr, {prefix}), "
            f"'08:00:2b:01:02:0{mac}')")
    # format('%s', x) prints with the type's output function, as pgoutput's text tuples do.
    names = [c.split()[0] for c in COLUMNS.split(", ")]
    expected = pg_conn.run(f"SELECT {', '.join(f'format(%s, {n})' for n in names)} "
                           "FROM tx ORDER BY id".replace("%s", "'%s'"))
    peeked = {b: cap.changes(peek=True, binary=b) for b in (False, True)}
    for binary, capture in peeked.items():
        reader = PgOutputReader()
        relation = None
        inserts = []
        for row in capture:
            message = reader.read(row.data)
            if isinstance(message, Relation):
                relation = message
            elif isinstance(message, Insert):
                inserts.append(message.new)
        assert relation is not None and len(inserts) == len(rows)
        for tup, sql_row in zip(inserts, expected, strict=True):
            for mode in ("bytes", "base64", "hex"):
                mapper = TypeMapper(TypeConfig(binary_handling_mode=mode))  # type: ignore[arg-type]
                for i, column in enumerate(relation.columns[1:], start=1):
                    mapping = mapper.column(column.name, column.type_oid, column.type_modifier)
                    assert mapping is not None
                    value = mapping.convert(tup.values[i], binary=tup.is_binary(i))
                    want: Any = sql_row[i - 1]
                    if column.name == "b":
                        data = bytea_from_text(want.encode())
                        want = {"bytes": data, "base64": base64.b64encode(data).decode(),
                                "hex": data.hex()}[mode]
                    elif column.name == "u":
                        want = str(uuid.UUID(want))
                    assert value == want, (column.name, binary, mode)


def test_ipv6_forms_print_as_postgresql_prints_them(pg_conn: Any) -> None:
    """Found by the property test above: IPv4-mapped and -compatible IPv6 in binary tuples."""
    addresses = ["::ffff:0.0.0.0", "::2", "::", "::0.0.1.2", "::1:2", "0:0:0:0:0:1:2:3",
                 "2001:db8::ffff:1.2.3.4", "::ffff:1.2.3.4/120"]
    pg_conn.run("CREATE TABLE ip6 (id int PRIMARY KEY, a inet)")
    cap = Capturer(pg_conn, slot="ip6", publication="ip6_pub")
    for n, address in enumerate(addresses):
        pg_conn.run(f"INSERT INTO ip6 VALUES ({n}, '{address}')")
    expected = [r[0] for r in pg_conn.run("SELECT format('%s', a) FROM ip6 ORDER BY id")]
    reader = PgOutputReader()
    got = []
    for row in cap.changes(binary=True):
        message = reader.read(row.data)
        if isinstance(message, Relation):
            mapping = TypeMapper().column("a", message.columns[1].type_oid)
        elif isinstance(message, Insert):
            assert mapping is not None and message.new.is_binary(1)
            got.append(mapping.convert(message.new.values[1], binary=True))
    assert got == expected


def test_ranges_and_tsvector_in_binary_tuples_print_as_in_text(pg_conn: Any) -> None:
    """Binary range and tsvector values give the same strings as the text tuples."""
    values = {
        "r4": ["'[1,5)'", "'(,10]'", "'empty'", "'[-3,)'"],
        "r8": ["'[9223372036854775000,9223372036854775806]'", "NULL", "'(,)'", "'[0,1)'"],
        "rn": ["'[1.50,2.5]'", "'(-0.001,)'", "'empty'", "'[1e20,1e21)'"],
        "rd": ["'[2024-01-01,2024-02-01)'", "'[0044-03-15 BC,2024-01-01)'", "'(,infinity)'",
               "'[12345-01-01,)'"],
        "rts": ["'[2024-01-01 10:00:00.5,2024-01-02)'", "'[-infinity,infinity]'", "'empty'",
                "'(2000-01-01 00:00:00 BC,)'"],
        "rtz": ["'[2024-01-01 10:00:00+05:30,2024-01-02 00:00:00.123456+00)'", "'empty'",
                "'(,infinity)'", "'[1999-12-31 23:59:59.999999+00,2000-01-01 00:00:00+00]'"],
        "tv": ["'a fat cat:3A sat:1,2B'", "''", "$$'it''s':1 'back\\slash'$$", "'x:16383C'"],
    }
    types = {"r4": "int4range", "r8": "int8range", "rn": "numrange", "rd": "daterange",
             "rts": "tsrange", "rtz": "tstzrange", "tv": "tsvector"}
    pg_conn.run("CREATE TABLE rg (id int PRIMARY KEY, "
                + ", ".join(f"{c} {t}" for c, t in types.items()) + ")")
    cap = Capturer(pg_conn, slot="rg", publication="rg_pub")
    for n in range(4):
        pg_conn.run(f"INSERT INTO rg VALUES ({n}, "
                    + ", ".join(values[c][n] for c in types) + ")")
    decoded = {}
    for binary in (False, True):
        reader = PgOutputReader()
        rows = []
        for row in cap.changes(peek=True, binary=binary):
            message = reader.read(row.data)
            if isinstance(message, Relation):
                mappings = [TypeMapper().column(c.name, c.type_oid, c.type_modifier)
                            for c in message.columns]
            elif isinstance(message, Insert):
                assert binary == message.new.is_binary(1)
                rows.append([None if message.new.is_null(i) else
                             m.convert(message.new.values[i], binary=message.new.is_binary(i))
                             for i, m in enumerate(mappings) if m is not None])
        decoded[binary] = rows
    assert decoded[True] == decoded[False]
    assert decoded[True][2][1] == "empty" and "'cat':3A" in decoded[True][0][7]
