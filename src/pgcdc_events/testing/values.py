"""Hypothesis strategies for PostgreSQL values, one per column type, weighted towards edges.

:func:`values` gives the strategy for a column type as written in DDL
(``values("numeric(10,2)")``, ``values("timestamptz[]")``); every value it draws is a
:class:`~pgcdc_events.testing.pgtext.PgValue` holding exactly what PostgreSQL 15
prints and sends for it. Edges come often: NaN and infinities, BC and far-future
dates, odd time-zone offsets, huge numerics, empty and NULL-filled arrays, any
Unicode text. ``long_values`` adds values big enough that PostgreSQL TOASTs them
out of line (they then travel as unchanged-TOAST markers in updates that leave
them alone).
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from hypothesis import strategies as st

from pgcdc_events.testing import pgtext as pt
from pgcdc_events.testing._explain import hide_from_explanations
from pgcdc_events.testing.pgtext import PgValue
from pgcdc_events.testing.tables import ColumnType, column_type

hide_from_explanations()  # the user's lines, not ours, explain a failure

__all__ = [
    "BINARY_TYPES",
    "SUPPORTED_TYPES",
    "TOAST_THRESHOLD",
    "text_strings",
    "values",
]

#: Base types with value strategies (arrays of them are written ``name[]``).
SUPPORTED_TYPES: Final = (
    "bool", "int2", "int4", "int8", "oid", "float4", "float8", "numeric", "money",
    "date", "time", "timetz", "timestamp", "timestamptz", "interval",
    "text", "varchar", "bpchar", "name", '"char"', "bytea", "bit", "varbit",
    "json", "jsonb", "xml", "uuid", "inet", "cidr", "macaddr", "macaddr8", "tsvector",
    "int4range", "int8range", "numrange", "daterange", "tsrange", "tstzrange", "point",
    "citext", "hstore", "ltree", "geometry", "geography",
)
#: Element types whose arrays the type mapper maps (Debezium drops the others).
ARRAY_TYPES: Final = (
    "bool", "int2", "int4", "int8", "oid", "float4", "float8", "numeric", "date", "time",
    "timetz", "timestamp", "timestamptz", "text", "varchar", "bpchar", '"char"', "bytea",
    "json", "jsonb", "uuid", "inet", "cidr", "macaddr", "macaddr8", "int4range",
    "daterange",
)
#: Types that have a binary form both here and in the type mapper.
BINARY_TYPES: Final = frozenset(SUPPORTED_TYPES) - {
    "tsvector", "int4range", "int8range", "numrange", "daterange", "tsrange", "tstzrange",
    "xml", "name", "bit", "varbit"}
#: Byte length from which generated long values count as TOASTed.
TOAST_THRESHOLD: Final = 2100

_TEXT_CHARS = st.characters(codec="utf-8", exclude_characters="\x00")
_NICE: Final = ("", " ", "NULL", "null", 'quo"te', "back\\slash", "comma,semi;", "{brace}",
                "ünïcödé", "日本語", "emoji 🙂", "tab\there", "new\nline", "'single'")


@functools.lru_cache(maxsize=64)
def text_strings(max_size: int = 12) -> st.SearchStrategy[str]:
    """Any Unicode text PostgreSQL can store (no NUL), with tricky samples mixed in."""
    return st.one_of(st.sampled_from(_NICE), st.text(_TEXT_CHARS, max_size=max_size))


def _long(short: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Texts of at least TOAST_THRESHOLD bytes made by repeating a short text."""
    def grow(seed: str) -> str:
        seed = seed or "x"
        n = len(seed.encode("utf-8"))
        return seed * (TOAST_THRESHOLD // n + 1)

    return short.map(grow)


# ---------------------------------------------------------------- per type
def _ints(name: str, bits: int, signed: bool = True) -> st.SearchStrategy[PgValue]:
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    edges = st.sampled_from(sorted({lo, hi, 0, 1, -1 if signed else 2, lo + 1, hi - 1}))
    return st.one_of(edges, st.integers(lo, hi), st.integers(-1000 if signed else 0, 1000)
                     ).map(lambda v: pt.int_value(name, v))


def _float(name: str) -> st.SearchStrategy[PgValue]:
    single = name == "float4"
    edges = [0.0, -0.0, math.nan, math.inf, -math.inf, 1.0, -1.5, 1e15, 1e16, 1e-5, 0.0001,
             123456.0, 1234567.0]
    if single:
        edges += [3.4028234663852886e38, 1.401298464324817e-45, 1e6, 100000.0]
    else:
        edges += [1.7976931348623157e308, 5e-324, 123456789012345.0, 1234567890123456.0]
    base = st.one_of(st.sampled_from(edges), st.floats(width=32 if single else 64),
                     st.integers(-10**6, 10**6).map(float),
                     st.integers(-10**6, 10**6).map(lambda i: i / 1000))
    if single:
        base = base.map(lambda v: struct.unpack(">f", struct.pack(">f", v))[0]
                        if math.isfinite(v) and abs(v) < 3.4e38 else v)
    return base.map(lambda v: pt.float_value(name, v))


def _numeric(args: tuple[int, ...]) -> st.SearchStrategy[PgValue]:
    if args:
        precision = args[0]
        scale = args[1] if len(args) > 1 else 0
        bound = 10**precision - 1
        return st.one_of(
            st.just("NaN"),
            st.sampled_from([bound, -bound, 0, 1]).map(lambda u: (u, scale)),
            st.integers(-bound, bound).map(lambda u: (u, scale)),
        ).map(pt.numeric_value)
    huge = st.integers(1, 400).flatmap(
        lambda d: st.tuples(st.integers(-(10**d), 10**d), st.integers(0, min(d, 60))))
    return st.one_of(
        st.sampled_from(["NaN", "Infinity", "-Infinity"]),
        st.sampled_from([(0, 0), (0, 5), (1, 0), (-1, 20), (10**40, 0), (123, 130)]),
        st.tuples(st.integers(-(10**12), 10**12), st.integers(0, 8)),
        huge,
    ).map(pt.numeric_value)


def _money() -> st.SearchStrategy[PgValue]:
    lo, hi = -(2**63), 2**63 - 1
    return st.one_of(st.sampled_from([lo, hi, 0, -1, 1, 123456]),
                     st.integers(-(10**9), 10**9), st.integers(lo, hi)).map(pt.money_value)


def _days() -> st.SearchStrategy[int]:
    return st.one_of(
        st.sampled_from([pt.DATE_MIN, pt.DATE_MAX, 0, -1, -730_120 - 365, -719_893, 2_932_896,
                         -10_957]),
        st.integers(-40_000, 40_000),
        st.integers(pt.DATE_MIN, pt.DATE_MAX),
    )


def _date() -> st.SearchStrategy[PgValue]:
    return st.one_of(st.sampled_from([pt.DATE_NEG_INF, pt.DATE_POS_INF]), _days()
                     ).map(pt.date_value)


def _round_us(us: int, precision: int | None) -> int:
    if precision is None or precision >= 6:
        return us
    step = int(10 ** (6 - precision))
    return us - us % step


_DAY_US: Final = 86_400_000_000


def _time_us(precision: int | None, allow_24: bool = True) -> st.SearchStrategy[int]:
    top = _DAY_US if allow_24 else _DAY_US - 1
    return st.one_of(st.sampled_from([0, top, 1, 43_200_000_000, _DAY_US - 1]),
                     st.integers(0, _DAY_US - 1)).map(lambda us: _round_us(us, precision))


_OFFSETS: Final = (0, 3600, -3600, 19_800, -12_600, 20_700, 1172, -17_762, 57_599, -57_599,
                   50_400, 45_900)


def _offsets(minutes: bool = False) -> st.SearchStrategy[int]:
    """Offsets east of UTC up to 15:59:59; ``minutes``: whole minutes only (what a session
    time zone can be set to, so what timestamptz output can show)."""
    if minutes:
        return st.one_of(st.sampled_from([o for o in _OFFSETS if o % 60 == 0]),
                         st.integers(-959, 959).map(lambda m: m * 60))
    return st.one_of(st.sampled_from(_OFFSETS), st.integers(-57_599, 57_599))


def _timestamp_us(precision: int | None) -> st.SearchStrategy[int]:
    recent = st.integers(0, 40 * 365 * _DAY_US)
    return st.one_of(
        st.sampled_from([pt.TIMESTAMP_MIN, pt.TIMESTAMP_MAX, 0, -1,
                         -730_485 * _DAY_US - 1]),
        recent, st.integers(pt.TIMESTAMP_MIN, pt.TIMESTAMP_MAX),
    ).map(lambda us: _round_us(us, precision))


#: Instants whose local time stays in the timestamp range at any offset (whole seconds).
_TZ_LOW: Final = pt.TIMESTAMP_MIN + 57_600_000_000
_TZ_HIGH: Final = pt.TIMESTAMP_MAX + 1 - 57_600_000_000


def _timestamp(name: str, precision: int | None) -> st.SearchStrategy[PgValue]:
    inf = st.sampled_from([pt.TS_NEG_INF, pt.TS_POS_INF])
    if name == "timestamp":
        return st.one_of(inf, _timestamp_us(precision)).map(pt.timestamp_value)
    # Keep the local time inside the timestamp range when shifting by an offset.
    finite = st.tuples(_timestamp_us(precision), st.one_of(st.just(0), _offsets(minutes=True))).map(
        lambda p: (_round_us(min(max(p[0], _TZ_LOW), _TZ_HIGH), precision) if p[1] else p[0],
                   p[1]))
    return st.one_of(inf.map(lambda us: (us, 0)), finite).map(
        lambda p: pt.timestamptz_value(p[0], p[1]))


def _interval() -> st.SearchStrategy[PgValue]:
    return st.one_of(
        st.sampled_from([(0, 0, 0), (1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (12, 0, 0),
                         (14, -3, 3_600_000_001), (0, 0, -1), (-13, 5, -86_399_999_999),
                         (0, 0, 86_400_000_000 * 40), (2_147_483_647, 2_147_483_647,
                                                        9_223_372_036_854_775)]),
        st.tuples(st.integers(-1200, 1200), st.integers(-400, 400),
                  st.integers(-(10**12), 10**12)),
    ).map(lambda t: pt.interval_value(*t))


def _text_like(name: str, args: tuple[int, ...], long_values: bool
               ) -> st.SearchStrategy[PgValue]:
    limit = args[0] if args else None
    if name == "char":
        return st.characters(min_codepoint=1, max_codepoint=127).map(
            lambda c: pt.text_value(c, "char"))
    if name == "name":
        return text_strings(20).filter(lambda s: len(s.encode("utf-8")) <= 63).map(
            lambda s: pt.text_value(s, "name"))
    strings = text_strings(limit if limit is not None else 16)
    if limit is not None:
        strings = strings.filter(lambda s: len(s) <= limit)
    if name == "bpchar":
        size = limit or 1
        return strings.map(lambda s: pt.text_value(s.ljust(size), "bpchar"))
    if long_values and limit is None:
        strings = st.one_of(strings, _long(text_strings(6)))
    return strings.map(lambda s: pt.text_value(s, name))


def _bits(name: str, args: tuple[int, ...]) -> st.SearchStrategy[PgValue]:
    size = args[0] if args else None
    bit = st.sampled_from("01")
    if name == "bit":
        n = size or 1
        return st.lists(bit, min_size=n, max_size=n).map(lambda b: pt.bit_value("".join(b), "bit"))
    return st.lists(bit, max_size=size if size is not None else 40).map(
        lambda b: pt.bit_value("".join(b), "varbit"))


def _bytea(long_values: bool) -> st.SearchStrategy[PgValue]:
    data = st.one_of(st.sampled_from([b"", b"\x00", b"\\", b"\xff" * 3]), st.binary(max_size=24))
    if long_values:
        data = st.one_of(data, st.binary(min_size=1, max_size=8).map(
            lambda b: b * (_toast_repeats(len(b)))))
    return data.map(pt.bytea_value)


def _toast_repeats(n: int) -> int:
    """How many repetitions of an ``n``-byte seed exceed the TOAST threshold."""
    return TOAST_THRESHOLD // n + 1


def _json_docs() -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(-(2**70), 2**70),
        st.tuples(st.integers(-(10**8), 10**8), st.integers(1, 5)), text_strings(8))
    keys = text_strings(6)
    return st.recursive(scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)), max_leaves=8)


def _json(name: str, long_values: bool) -> st.SearchStrategy[PgValue]:
    docs = _json_docs()
    if long_values:
        docs = st.one_of(docs, _long(text_strings(6)).map(lambda s: {"long": s}))
    return docs.map(lambda d: pt.json_value(d, name))


def _ip(cidr: bool) -> st.SearchStrategy[PgValue]:
    def make(address: bytes, bits: int) -> PgValue:
        if cidr:
            full = len(address) * 8
            mask = ((1 << full) - 1) ^ ((1 << (full - bits)) - 1)
            address = (int.from_bytes(address, "big") & mask).to_bytes(len(address), "big")
        return pt.inet_value(address, bits, "cidr" if cidr else "inet")

    v4 = st.tuples(st.binary(min_size=4, max_size=4), st.integers(0, 32))
    v4_host = st.binary(min_size=4, max_size=4).map(lambda a: (a, 32))
    mapped = st.binary(min_size=4, max_size=4).map(lambda a: (b"\0" * 10 + b"\xff\xff" + a, 128))
    sparse = st.lists(st.sampled_from([0, 0, 1, 0xFFFF, 0x2001]), min_size=8, max_size=8).map(
        lambda ws: b"".join(w.to_bytes(2, "big") for w in ws))
    v6 = st.tuples(st.one_of(st.binary(min_size=16, max_size=16), sparse),
                   st.integers(0, 128))
    return st.one_of(v4_host, v4, v6, mapped).map(lambda p: make(*p))


def _tsvector() -> st.SearchStrategy[PgValue]:
    word = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789"), min_size=1,
                   max_size=8)
    return st.lists(word, max_size=5).map(pt.tsvector_value)


def _range(name: str) -> st.SearchStrategy[PgValue]:
    if name in ("int4range", "int8range", "daterange"):
        if name == "daterange":
            bound: st.SearchStrategy[int] = st.integers(-800_000, 3_000_000)
            make: Callable[[int], PgValue] = pt.date_value
        else:
            bits = 31 if name == "int4range" else 63
            bound = st.integers(-(2**bits), 2**bits - 2)
            make = functools.partial(pt.int_value, "int4" if name == "int4range" else "int8")

        def discrete(lo: int | None, hi: int | None) -> PgValue:
            if lo is not None and hi is not None:
                lo, hi = min(lo, hi), max(lo, hi)
                if lo == hi:
                    return pt.range_value(name, None, None, False, False, empty=True)
            return pt.range_value(name, None if lo is None else make(lo),
                                  None if hi is None else make(hi), True, False)

        return st.builds(discrete, st.none() | bound, st.none() | bound)
    if name == "numrange":
        point: st.SearchStrategy[Any] = st.tuples(st.integers(-(10**6), 10**6), st.just(2))
        point_value: Callable[[Any], PgValue] = pt.numeric_value
        key: Callable[[Any], Any] = lambda p: p[0]  # noqa: E731
    else:
        point = _timestamp_us(None).filter(lambda us: us > pt.TIMESTAMP_MIN + _DAY_US)
        point_value = (pt.timestamp_value if name == "tsrange"
                       else lambda us: pt.timestamptz_value(us, 0))
        key = lambda p: p  # noqa: E731

    def continuous(lo: Any, hi: Any, lo_inc: bool, hi_inc: bool) -> PgValue:
        if lo is not None and hi is not None:
            lo, hi = sorted((lo, hi), key=key)
            if key(lo) == key(hi) and not (lo_inc and hi_inc):
                return pt.range_value(name, None, None, False, False, empty=True)
        return pt.range_value(name, None if lo is None else point_value(lo),
                              None if hi is None else point_value(hi), lo_inc, hi_inc)

    return st.builds(continuous, st.none() | point, st.none() | point, st.booleans(),
                     st.booleans())


def _point() -> st.SearchStrategy[PgValue]:
    coord = st.one_of(st.sampled_from([0.0, -0.0, 1.5, -1e300, math.inf, math.nan]),
                      st.floats(allow_nan=False, allow_infinity=False))
    return st.builds(pt.point_value, coord, coord)


def _postgis(name: str) -> st.SearchStrategy[PgValue]:
    if name == "geography":
        lon = st.floats(-180, 180, allow_nan=False)
        lat = st.floats(-90, 90, allow_nan=False)
        return st.builds(lambda x, y: pt.postgis_point_value(x, y, 4326, "geography"), lon, lat)
    coord = st.floats(-1e9, 1e9, allow_nan=False)
    srid = st.one_of(st.none(), st.sampled_from([4326, 3857, 2154]))
    return st.builds(pt.postgis_point_value, coord, coord, srid)


def _hstore() -> st.SearchStrategy[PgValue]:
    return st.dictionaries(text_strings(6), st.none() | text_strings(6), max_size=4).map(
        pt.hstore_value)


def _ltree() -> st.SearchStrategy[PgValue]:
    label = st.text(st.sampled_from("abcXYZ019_"), min_size=1, max_size=6)
    return st.lists(label, max_size=4).map(pt.ltree_value)


def _scalar(t: ColumnType, long_values: bool) -> st.SearchStrategy[PgValue]:  # noqa: C901
    name, args = t.name, t.args
    if t.enum_labels is not None:
        labels = t.enum_labels
        return st.sampled_from(labels).map(lambda label: pt.enum_value(label, name))
    if name == "bool":
        return st.booleans().map(pt.bool_value)
    if name in ("int2", "int4", "int8"):
        return _ints(name, {"int2": 16, "int4": 32, "int8": 64}[name])
    if name == "oid":
        return _ints("oid", 32, signed=False)
    if name in ("float4", "float8"):
        return _float(name)
    if name == "numeric":
        return _numeric(args)
    if name == "money":
        return _money()
    if name == "date":
        return _date()
    precision = args[0] if args else None
    if name == "time":
        return _time_us(precision).map(pt.time_value)
    if name == "timetz":
        return st.builds(pt.timetz_value, _time_us(precision), _offsets())
    if name in ("timestamp", "timestamptz"):
        return _timestamp(name, precision)
    if name == "interval":
        return _interval()
    if name in ("text", "varchar", "bpchar", "name", "char", "citext"):
        return _text_like(name, args, long_values)
    if name in ("bit", "varbit"):
        return _bits(name, args)
    if name == "bytea":
        return _bytea(long_values)
    if name in ("json", "jsonb"):
        return _json(name, long_values)
    if name == "xml":
        return st.text(st.characters(codec="utf-8", min_codepoint=0x20,
                                     exclude_characters="\x7f\ufffe\uffff"),
                       max_size=12).map(pt.xml_value)
    if name == "uuid":
        return st.one_of(st.just(b"\0" * 16), st.binary(min_size=16, max_size=16)).map(
            pt.uuid_value)
    if name in ("inet", "cidr"):
        return _ip(name == "cidr")
    if name in ("macaddr", "macaddr8"):
        n = 6 if name == "macaddr" else 8
        return st.binary(min_size=n, max_size=n).map(pt.macaddr_value)
    if name == "tsvector":
        return _tsvector()
    if name.endswith("range"):
        return _range(name)
    if name == "point":
        return _point()
    if name in ("geometry", "geography"):
        return _postgis(name)
    if name == "hstore":
        return _hstore()
    if name == "ltree":
        return _ltree()
    raise ValueError(f"no value strategy for type {t.sql}")


def _typed(value: PgValue, sql: str) -> PgValue:
    """The value labelled with the column's SQL type (``numeric(10,2)``, ``"mood"``)."""
    return PgValue(sql, value.text, value.binary, value.model)


def values(type_sql: str | ColumnType, *, enums: Mapping[str, Sequence[str]] | None = None,
           long_values: bool = False, max_items: int = 4) -> st.SearchStrategy[PgValue]:
    """Non-NULL values of a column type (as written in DDL, or resolved), edges weighted in.

    Arrays are one-dimensional: empty, NULL-filled, or a mix of NULLs and values.
    ``long_values`` adds TOAST-sized values for the types in
    :data:`~pgcdc_events.testing.tables.TOASTABLE`.
    """
    t = type_sql if isinstance(type_sql, ColumnType) else column_type(type_sql, enums)
    return _values(t, long_values, max_items)


@functools.lru_cache(maxsize=1024)
def _values(t: ColumnType, long_values: bool, max_items: int) -> st.SearchStrategy[PgValue]:
    """:func:`values`, built once per type (building and validating strategies is costly)."""
    element_sql = t.sql.removesuffix("[]")
    element = _scalar(t, long_values and not t.is_array).map(lambda v: _typed(v, element_sql))
    if not t.is_array:
        return element
    delimiter = ";" if t.name == "box" else ","

    def make(items: list[PgValue | None]) -> PgValue:
        return pt.array_value(t.sql, t.element_oid, items, delimiter)

    items: st.SearchStrategy[list[PgValue | None]] = st.one_of(
        st.just([]),
        st.integers(1, 3).map(lambda n: [None] * n),
        st.lists(st.none() | element, max_size=max_items),
    )
    return items.map(make)
