"""Every vectorized converter gives its scalar converter's value, on every value.

The type families declare the vector form of a column's text beside its scalar converter
(``ValueMapping.vector``); ``pgcdc_events.spark.vectorized`` holds one kernel per form.
Here each kernel converts whole columns, and each value is compared with what the
column's ``from_text`` gives for it (:func:`vectorized.mismatch`: same type, equal, same
decimal exponent; a value the scalar converter refuses must make the kernel decline):

- values of every type with a form, drawn by ``pgcdc_events.testing.values`` (what
  PostgreSQL 15 prints), as whole columns with NULLs, one by one, and grouped by length
  (the timestamp kernel's one-copy path);
- text near the form and arbitrary bytes (the kernel must decline what the scalar
  converter refuses or reads otherwise);
- real PostgreSQL text: rows inserted into a throwaway server and captured through
  pgoutput, column by column;
- the test mode of :class:`RunDecoder` catches a kernel wrong on one value of a run,
  which a per-run sample did not.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgcdc_events.events.chunks import ChunkDecoder, control_messages, plan_chunks
from pgcdc_events.protocol import CaptureRow
from pgcdc_events.protocol.messages import Insert, Relation
from pgcdc_events.protocol.reader import PgOutputReader
from pgcdc_events.spark import vectorized
from pgcdc_events.spark.columnar import (
    ColumnarRun,
    RunDecoder,
    VectorMismatchError,
    arrow_type,
)
from pgcdc_events.testing import Transaction, op_insert, render, table
from pgcdc_events.testing.pgtext import PgValue
from pgcdc_events.testing.values import values
from pgcdc_events.types import TypeConfig, TypeMapper
from pgcdc_events.types.mapper import ColumnMapping
from pgcdc_events.types.mapping import VectorForm
from pgcdc_events.types.numeric import BooleanText, DecimalText, IntegerText
from pgcdc_events.types.oids import OID_BY_NAME
from pgcdc_events.types.temporal import UtcZonedText
from pgcdc_events.types.text import Utf8Text
from support.capture import Capturer

#: Column types with a vector form (as written in DDL), and the form's class.
CASES: dict[str, type[VectorForm]] = {
    "int2": IntegerText, "int4": IntegerText, "int8": IntegerText, "oid": IntegerText,
    "bool": BooleanText,
    "text": Utf8Text, "varchar(20)": Utf8Text, "bpchar(5)": Utf8Text, "json": Utf8Text,
    "uuid": Utf8Text,
    "numeric(12,2)": DecimalText, "numeric(5,0)": DecimalText, "numeric(38,10)": DecimalText,
    "numeric(3,3)": DecimalText,
    "timestamptz": UtcZonedText, "timestamptz(0)": UtcZonedText,
    "timestamptz(3)": UtcZonedText, "timestamptz(6)": UtcZonedText,
}


def _typmod(name: str, args: list[int]) -> int:
    if not args:
        return -1
    if name == "numeric":
        return ((args[0] << 16) | (args[1] if len(args) > 1 else 0)) + 4
    if name in ("varchar", "bpchar"):
        return args[0] + 4
    return args[0]


def column(ddl: str, config: TypeConfig | None = None) -> ColumnMapping:
    """The type mapper's column of type ``ddl`` (``numeric(12,2)``)."""
    match = re.fullmatch(r"(\w+)(?:\(([\d,]+)\))?", ddl)
    assert match is not None
    name, args = match[1], [int(a) for a in (match[2] or "").split(",") if a]
    mapped = TypeMapper(config).column("c", OID_BY_NAME[name], _typmod(name, args))
    assert mapped is not None
    return mapped


def check(col: ColumnMapping, raw: Sequence[bytes | None]) -> bool:
    """Convert ``raw`` by the column's kernel; every value it gives must be the scalar
    converter's. Whether the kernel took the values."""
    assert col.vector is not None
    array = pa.array(raw, pa.binary())
    out = vectorized.convert(col.vector, array, arrow_type(col.schema))
    if out is None:
        return False
    assert len(out) == len(raw)
    assert vectorized.mismatch(array, out, col.from_text) is None, (col.pg_type.name, raw)
    return True


def check_every_way(col: ColumnMapping, raw: Sequence[bytes | None]) -> Counter[str]:
    """:func:`check` of the whole column, of each value alone and of the values grouped by
    length (the one-copy paths); how many of each the kernel took."""
    took: Counter[str] = Counter()
    took["column"] += check(col, raw)
    for value in raw:
        took["value"] += check(col, [value])
    lengths: dict[int, list[bytes]] = {}
    for value in raw:
        if value is not None:
            lengths.setdefault(len(value), []).append(value)
    for group in lengths.values():
        took["length"] += check(col, group)
    return took


def test_every_form_has_a_kernel_and_the_cases_cover_it() -> None:
    forms: set[type[VectorForm]] = set()
    pending = [VectorForm]
    while pending:
        for sub in pending.pop().__subclasses__():
            forms.add(sub)
            pending.append(sub)
    assert forms == set(vectorized.KERNELS) == set(CASES.values())
    for ddl, form in CASES.items():
        assert type(column(ddl).vector) is form, ddl


def test_forms_carry_the_scalar_converters_parameters() -> None:
    """The form is built from what the scalar converter is built from (the typmod), and
    only where the kernel's reading is the converter's (precise decimals)."""
    assert column("numeric(12,2)").vector == DecimalText(12, 2)
    assert column("timestamptz(3)").vector == UtcZonedText(3)
    assert column("timestamptz").vector == UtcZonedText(6)
    assert column("int2").vector == IntegerText(16)
    assert column("numeric(12,2)", TypeConfig(decimal_handling_mode="string")).vector is None
    assert column("numeric").vector is None  # VariableScaleDecimal: a struct
    assert column("float8").vector is None


@pytest.mark.parametrize("ddl", list(CASES))
def test_kernel_equals_scalar_on_generated_values(ddl: str) -> None:
    col = column(ddl)
    took: Counter[str] = Counter()

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(st.none() | values(ddl), max_size=40))
    def run(drawn: list[PgValue | None]) -> None:
        took.update(check_every_way(col, [None if v is None else v.text_bytes
                                          for v in drawn]))

    run()
    # the kernel took most columns: a kernel that always declined would pass the rest
    assert took["value"] > 0 and took["column"] > 0 and took["length"] > 0, took


#: Bytes near each form: its own characters, and the ones a looser parser would take.
_NEAR = "0123456789-.+ eExXnNaIfT:Z\u00e9"


def _mutations(value: PgValue) -> st.SearchStrategy[bytes]:
    text = value.text

    def edit(at: int, char: str, how: int) -> bytes:
        at = min(at, len(text))
        if how == 0:
            return (text[:at] + char + text[at + 1:]).encode()
        if how == 1:
            return (text[:at] + char + text[at:]).encode()
        return (text[:at] + text[at + 1:]).encode()

    return st.builds(edit, st.integers(0, 40), st.sampled_from(_NEAR), st.integers(0, 2))


@pytest.mark.parametrize("ddl", list(CASES))
def test_kernel_declines_what_the_scalar_refuses(ddl: str) -> None:
    """Near misses and arbitrary bytes: the kernel takes a column only if it gives the
    scalar converter's value for every value in it."""
    col = column(ddl)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(st.none() | values(ddl).flatmap(_mutations) | st.binary(max_size=30)
                    | st.text(_NEAR, max_size=30).map(str.encode), max_size=12))
    def run(raw: list[bytes | None]) -> None:
        check_every_way(col, raw)

    run()


@pytest.mark.parametrize(("ddl", "raw"), [
    ("int8", [b"0x10"]), ("int8", [b"+5"]), ("int8", [b" 5"]), ("int8", [b"1_000"]),
    ("numeric(12,2)", [b".50"]), ("numeric(12,2)", [b"5."]), ("numeric(12,2)", [b"+1.50"]),
    ("numeric(12,2)", [b"1e2"]), ("numeric(12,2)", [b"1.5"]), ("numeric(12,2)", [b"NaN"]),
    ("numeric(12,2)", [b"1.-5"]), ("numeric(5,0)", [b"1.0"]), ("numeric(5,0)", [b"-"]),
    ("bool", [b"true"]), ("text", [b"\xed\xa0\x80"]),
    ("timestamptz(3)", [b"2024-03-10 01:30:00.25+00", "2024-03-10 01:30:00.2\u00e9+00"
                        .encode()]),
    ("timestamptz", [b"1234-+00"]), ("timestamptz", [b"2024-03-10 01:30:00+01"]),
    ("timestamptz", [b"infinity"]), ("timestamptz", [b"0044-03-15 10:00:00+00 BC"]),
])
def test_known_near_misses(ddl: str, raw: list[bytes]) -> None:
    """Texts a plain Arrow cast or string slicing reads otherwise than the scalar
    converter: the kernel declines them or gives the scalar's value."""
    check_every_way(column(ddl), raw)


_SERVER_COLUMNS = ["int2", "int4", "int8", "oid", "bool", "text", "varchar(20)", "bpchar(5)",
                   "json", "uuid", "numeric(12,2)", "numeric(5,0)", "numeric(38,10)",
                   "numeric(3,3)", "timestamptz", "timestamptz(0)", "timestamptz(3)"]


class Server:
    """A table with a column of each type on the throwaway server, in UTC."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        conn.run("SET TIME ZONE 'UTC'")
        columns = ", ".join(f"c{i} {ddl}" for i, ddl in enumerate(_SERVER_COLUMNS))
        conn.run(f"CREATE TABLE v (id serial PRIMARY KEY, {columns})")
        self.capturer = Capturer(conn, tables=["v"])

    def columns(self, insert: str) -> tuple[Relation, list[list[bytes | None]]]:
        """Run ``insert``; the relation and, per column, the text values pgoutput sent."""
        self.conn.run(insert)
        reader = PgOutputReader()
        relation = None
        rows = []
        for row in self.capturer.changes():
            message = reader.read(row.data)
            if isinstance(message, Relation):
                relation = message
            elif isinstance(message, Insert):
                rows.append(message.new.values)
        assert relation is not None and rows
        return relation, [list(c) for c in zip(*rows, strict=True)]


def _server_check(relation: Relation, columns: list[list[bytes | None]]) -> Counter[str]:
    took: Counter[str] = Counter()
    mapper = TypeMapper()
    for rel_col, raw in zip(relation.columns[1:], columns[1:], strict=True):
        col = mapper.column(rel_col.name, rel_col.type_oid, rel_col.type_modifier)
        assert col is not None and col.vector is not None
        took.update({f"{rel_col.name} {k}": n for k, n in check_every_way(col, raw).items()})
    return took


def test_kernels_equal_scalar_on_postgresql_text(pg_conn: Any) -> None:
    """Values PostgreSQL computes (every fraction length, signs, scales), 2000 rows: each
    kernel takes its whole column and agrees with the scalar converter on every value."""
    server = Server(pg_conn)
    relation, columns = server.columns(
        "INSERT INTO v (c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, "
        "c16) SELECT (i % 65535 - 32767)::int2, (i::int8 * 1000003 % 2147483647 - 1000000000)::int4,"
        " (i::int8 * 4611686018427) * (1 - 2 * (i % 2)), (i * 3)::oid, i % 3 = 0,"
        " repeat(chr(32 + i % 90) || 'é', i % 7), left(md5(i::text), i % 21), left(md5(i::text),"
        " i % 6), json_build_object('i', i)::text::json, md5(i::text)::uuid,"
        " round((i * 7919 - 5000000)::numeric / (1 + i % 1000), 2),"
        " (i * 13 % 99999 - 49999)::numeric(5,0),"
        " (i::numeric * 98765432109876543.21 / 7)::numeric(38,10), (i % 1000)::numeric / 1000,"
        " timestamptz '1970-01-01 00:00:00+00' + (i * 126700000000007 % 253402300799000000)"
        " * interval '1 microsecond', timestamptz '2024-03-10 01:30:00+00' + i * interval"
        " '1.5 second', timestamptz '0001-01-01 00:00:00+00' + i * interval '111 day 1.125 ms'"
        " FROM generate_series(1, 2000) AS i")
    took = _server_check(relation, columns)
    for i in range(len(_SERVER_COLUMNS)):
        assert took[f"c{i} column"] == 1, (i, _SERVER_COLUMNS[i], took)
        assert took[f"c{i} value"] == 2000, (i, _SERVER_COLUMNS[i])


def test_kernels_equal_scalar_on_generated_values_through_postgresql(pg_conn: Any) -> None:
    """Values drawn by the testing strategies, inserted, printed by PostgreSQL and
    captured: every value compared (infinities, BC dates, NaN and all)."""
    server = Server(pg_conn)
    took: Counter[str] = Counter()

    @settings(max_examples=25, deadline=None, suppress_health_check=[
        HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(st.lists(st.tuples(*(st.none() | values(ddl) for ddl in _SERVER_COLUMNS)),
                    min_size=1, max_size=12))
    def run(rows: list[tuple[PgValue | None, ...]]) -> None:
        names = ", ".join(f"c{i}" for i in range(len(_SERVER_COLUMNS)))
        tuples = ", ".join("(" + ", ".join("NULL" if v is None else v.sql() for v in row) + ")"
                           for row in rows)
        took.update(_server_check(*server.columns(f"INSERT INTO v ({names}) VALUES {tuples}")))

    run()
    for i in range(len(_SERVER_COLUMNS)):
        assert took[f"c{i} value"] > 0, (i, _SERVER_COLUMNS[i])


# -- the test mode of RunDecoder


T = table("public.t", {"id": "int8", "at": "timestamptz(3)", "amount": "numeric(12,2)"},
          primary_key="id")


def _capture(n: int = 40) -> tuple[list[CaptureRow], Callable[[], Any]]:
    rows = [{"id": i, "at": f"2024-03-10 01:30:{i % 60:02d}.{i % 7 + 1}25+00",
             "amount": f"{i * 1.25:.2f}"} for i in range(1, n + 1)]
    workload = render([T], [Transaction(tuple(op_insert(T, r) for r in rows))])
    return workload.capture(), workload.decoder


def _decode(capture: list[CaptureRow], make: Callable[[], Any], *, verify: bool
            ) -> tuple[list[Any], RunDecoder]:
    data = [(i, int(r.lsn), bytes(r.data)) for i, r in enumerate(capture)]
    plan = plan_chunks(control_messages(data), min_messages=1000)
    runner = RunDecoder(ChunkDecoder(plan, make), min_run=8, verify=verify)
    out: list[Any] = []
    for item in runner.feed([plan.chunk_of(r[0]) for r in data], [r[0] for r in data],
                            [r[1] for r in data], pa.array([r[2] for r in data], pa.binary())):
        out += item.records() if isinstance(item, ColumnarRun) else [item[2]]
    runner.finish()
    return out, runner


def _wrong_on_one_value(kernel: Callable[[Any, Any, Any], Any], index: int
                        ) -> Callable[[Any, Any, Any], Any]:
    """``kernel`` with value ``index`` of each column off by one fraction digit."""
    def planted(form: Any, raw: Any, target: Any) -> Any:
        out = kernel(form, raw, target)
        if out is None or len(out) <= index:
            return out
        values = out.to_pylist()
        values[index] = values[index][:-2] + "Z"
        return pa.array(values, pa.string())
    return planted


def test_the_test_mode_catches_a_kernel_wrong_on_one_value(monkeypatch: Any) -> None:
    """A kernel wrong for one value of a run that is neither its first, middle nor last
    (what the old per-run sample looked at): the test mode names the column and the value;
    without it the records differ (which the equality tests compare)."""
    capture, make = _capture()
    want, runner = _decode(capture, make, verify=True)
    assert runner.stats.runs == 1 and runner.stats.kernels["UtcZonedText"] == 1
    monkeypatch.setitem(vectorized.KERNELS, UtcZonedText,
                        _wrong_on_one_value(vectorized.KERNELS[UtcZonedText], 7))
    with pytest.raises(VectorMismatchError, match=(
            r"^public\.t\.at \(timestamptz\): the UtcZonedText kernel is wrong for value 7 of"
            r" the run \(b'2024-03-10 01:30:08\.225\+00'\): the kernel gave "
            r"'2024-03-10T01:30:08\.22Z', the scalar converter '2024-03-10T01:30:08\.225Z'$")):
        _decode(capture, make, verify=True)
    got, _ = _decode(capture, make, verify=False)
    assert [r.value for r in got] != [r.value for r in want]
