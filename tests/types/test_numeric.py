"""The numeric family against a live server: values inserted, captured as text and binary tuples,
converted, and checked against what SQL itself computes for the stored value.

``scale(trim_scale(v))`` and ``trim_scale(v) * 10^scale`` are the independent
computation for Debezium's ``VariableScaleDecimal``; ``v::float8`` for the double mode;
``v::text`` for the string mode; ``v * 100`` for money's minor units; ``get_bit`` for bit
strings.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgcdc_events.protocol import Insert, PgOutputReader, Relation
from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.jsonvalue import decimal_from_bytes
from pgcdc_events.types.mapper import TypeMapper
from pgcdc_events.types.numeric import BUILDERS, _bits_to_bytes, numeric_modifier
from pgcdc_events.types.registry import PgType
from support.capture import Capturer

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

numerics = st.one_of(
    st.decimals(allow_nan=False, allow_infinity=False, places=6,
                min_value=Decimal("-1e12"), max_value=Decimal("1e12")),
    st.decimals(allow_nan=False, allow_infinity=False, min_value=Decimal("-1e40"),
                max_value=Decimal("1e40")),
    st.sampled_from([Decimal("0"), Decimal("-0.000"), Decimal("100"), Decimal("1E+30"),
                     Decimal("0.0000000000001"), Decimal("123.4500")]),
)


def _capture(pg_conn: Any, ddl: str, values: list[str], *, binary: bool) -> list[Any]:
    """Insert ``values`` (SQL literals) one row each; the captured tuples and the relation."""
    pg_conn.run("DROP TABLE IF EXISTS num_t")
    pg_conn.run(f"CREATE TABLE num_t (id int PRIMARY KEY, v {ddl})")
    pg_conn.run("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = 'num'")
    pg_conn.run("DROP PUBLICATION IF EXISTS num_pub")
    cap = Capturer(pg_conn, slot="num", publication="num_pub")
    for i, value in enumerate(values):
        pg_conn.run(f"INSERT INTO num_t VALUES ({i}, {value})")
    reader = PgOutputReader()
    out = []
    relation = None
    for row in cap.changes(binary=binary):
        message = reader.read(row.data)
        if isinstance(message, Relation):
            relation = message
        if isinstance(message, Insert):
            out.append((relation, message.new))
    return out


def _convert(relation: Relation, tup: Any, config: TypeConfig) -> Any:
    column = relation.columns[1]
    mapping = TypeMapper(config).column("v", column.type_oid, column.type_modifier)
    assert mapping is not None
    return mapping.convert(tup.values[1], binary=tup.is_binary(1))


@SETTINGS
@given(st.lists(numerics, min_size=1, max_size=8))
def test_unconstrained_numeric_in_every_mode(pg_conn: Any, values: list[Decimal]) -> None:
    literals = [f"'{v}'::numeric" for v in values]
    expected = pg_conn.run(
        "SELECT scale(trim_scale(v)), trim_scale(v)::text, "
        "v::float8, v::text FROM (SELECT unnest(ARRAY[" + ",".join(literals) + "]) AS v) s")
    for binary in (False, True):
        rows = _capture(pg_conn, "numeric", literals, binary=binary)
        for (relation, tup), (scale, unscaled, as_double, as_text) in zip(rows, expected,
                                                                          strict=True):
            struct = _convert(relation, tup, TypeConfig())
            # SQL trimmed the trailing zeros; the unscaled value is its digits without the
            # point. Debezium never emits a negative scale (trim_scale keeps 100 as 100).
            want_scale = int(scale)
            want = Decimal(unscaled.replace(".", ""))
            assert struct["scale"] == want_scale
            assert decimal_from_bytes(struct["value"], 0) == want
            assert _convert(relation, tup, TypeConfig(decimal_handling_mode="double")) == as_double
            assert _convert(relation, tup, TypeConfig(decimal_handling_mode="string")) == as_text


@SETTINGS
@given(st.lists(st.decimals(allow_nan=False, allow_infinity=False, places=3,
                            min_value=Decimal("-99999999"), max_value=Decimal("99999999")),
                min_size=1, max_size=8))
def test_numeric_with_precision_and_scale(pg_conn: Any, values: list[Decimal]) -> None:
    literals = [f"'{v}'" for v in values]
    expected = [r[0] for r in pg_conn.run(
        "SELECT v::numeric(12,2)::text FROM unnest(ARRAY[" + ",".join(literals)
        + "]::numeric[]) AS v")]
    for binary in (False, True):
        rows = _capture(pg_conn, "numeric(12,2)", literals, binary=binary)
        for (relation, tup), text in zip(rows, expected, strict=True):
            assert numeric_modifier(relation.columns[1].type_modifier) == (12, 2)
            value = _convert(relation, tup, TypeConfig())
            assert value == Decimal(text) and value.as_tuple().exponent == -2


@SETTINGS
@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=8),
       st.lists(st.floats(width=32, allow_nan=False), min_size=1, max_size=8))
def test_integers_and_floats(pg_conn: Any, ints: list[int], floats: list[float]) -> None:
    for binary in (False, True):
        rows = _capture(pg_conn, "int8", [str(i) for i in ints], binary=binary)
        assert [_convert(r, t, TypeConfig()) for r, t in rows] == ints
        literals = [f"'{f!r}'::float4" for f in floats]
        texts = [float(r[0]) for r in pg_conn.run(
            "SELECT v::text FROM unnest(ARRAY[" + ",".join(literals) + "]) AS v")]
        rows = _capture(pg_conn, "float4", literals, binary=binary)
        assert [_convert(r, t, TypeConfig()) for r, t in rows] == texts


@SETTINGS
@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=8))
def test_money_in_minor_units(pg_conn: Any, cents: list[int]) -> None:
    literals = [f"({c}::numeric / 100)::money" for c in cents]
    stored = [int(Decimal(r[0])) for r in pg_conn.run(
        "SELECT (m::numeric * 100)::text FROM unnest(ARRAY[" + ",".join(literals) + "]) AS m")]
    for binary in (False, True):
        rows = _capture(pg_conn, "money", literals, binary=binary)
        values = [_convert(r, t, TypeConfig()) for r, t in rows]
        assert [int(v * 100) for v in values] == stored


@SETTINGS
@given(st.lists(st.text(alphabet="01", min_size=2, max_size=40), min_size=1, max_size=6))
def test_bit_strings(pg_conn: Any, bits: list[str]) -> None:
    literals = [f"B'{b}'" for b in bits]
    for binary in (False, True):
        rows = _capture(pg_conn, "varbit", literals, binary=binary)
        for (relation, tup), text in zip(rows, bits, strict=True):
            got = _convert(relation, tup, TypeConfig())
            # Debezium's Bits: the bit string as a little-endian number, bit 0 rightmost.
            assert int.from_bytes(got, "little") == int(text, 2)
            assert got == _bits_to_bytes(text)


# -- numeric(p, s)'s first branch: the common text form, the general branch's value


def _fixed_from_text(precision: int, scale: int) -> Any:
    typmod = ((precision << 16) | (scale & 0x7FF)) + 4
    assert numeric_modifier(typmod) == (precision, scale)
    return BUILDERS["numeric"](PgType(0, "pg_catalog", "numeric", "base"), typmod,
                              TypeConfig()).from_text


def _general(from_text: Any) -> Any:
    names = from_text.__code__.co_freevars
    return from_text.__closure__[names.index("general")]


def _outcome(fn: Any, raw: bytes) -> tuple[str, str]:
    try:
        return "value", repr(fn(raw))  # repr: the exponent too (1.20 is not 1.2)
    except Exception as exc:
        return type(exc).__name__, str(exc)


_numeric_texts = st.one_of(
    st.decimals(allow_nan=False, allow_infinity=False, places=2).map(lambda v: f"{v:f}".encode()),
    st.decimals(allow_nan=False, allow_infinity=False, places=0).map(lambda v: f"{v:f}".encode()),
    st.decimals(allow_nan=False, allow_infinity=False).map(lambda v: f"{v:f}".encode()),
    st.sampled_from((b"NaN", b"Infinity", b"-Infinity", b"", b".", b".25", b"-.25", b"1.",
                     b"1.2.34", b"+1.25", b" 1.25", b"1_0.25", b"1e5", b"1.2e", b"-0.00",
                     b"1" * 131070 + b".25", b"1" * 131071 + b".25", b"1" * 131072,
                     b"1" * 131073, b"\xd9\xa1.25")),
    st.text(alphabet="0123456789.-+e_ ", max_size=12).map(str.encode),
)


@given(_numeric_texts, st.sampled_from(((12, 2), (10, 0), (5, 5), (20, 7))))
def test_fixed_numeric_first_branch_equals_the_general_one(raw: bytes, modifier: Any) -> None:
    from_text = _fixed_from_text(*modifier)
    assert _outcome(from_text, raw) == _outcome(_general(from_text).cell_contents, raw)


@given(st.integers(0, 10**12), st.sampled_from(((12, 2), (10, 0), (5, 5), (20, 7))))
def test_fixed_numeric_first_branch_takes_the_common_form(unscaled: int, modifier: Any) -> None:
    scale = modifier[1]
    digits = f"{unscaled:0{scale + 1}d}"
    raw = (f"{digits[:-scale]}.{digits[-scale:]}" if scale else digits).encode()
    from_text = _fixed_from_text(*modifier)
    cell = _general(from_text)
    want = cell.cell_contents(raw)

    def refused(raw: bytes) -> Any:
        raise AssertionError(f"{raw!r} took the general branch")

    general, cell.cell_contents = cell.cell_contents, refused
    try:
        assert repr(from_text(raw)) == repr(want)
    finally:
        cell.cell_contents = general
