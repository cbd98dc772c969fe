"""Hostile inputs cost time in proportion to their size, and claimed sizes allocate nothing.

Linearity is asserted on relative scaling, never on wall-clock thresholds: each
pathological input is timed at size n and 4n (CPU time of this process, best of
several runs of a calibrated number of calls); a linear parser takes about 4 times
as long, a quadratic one 16 times. The bound, 9, leaves room for noise; a measurement
over it is repeated up to twice (a quadratic parser fails all three).

numeric in the ``precise`` decimal mode is the one exception: turning the digits into
Kafka Connect's two's-complement unscaled integer is a base conversion, quadratic in
CPython 3.11; PostgreSQL's own limit (131072 digits before the point, 16383 after) caps
it, and longer text is rejected before any conversion (see the last tests).
"""

from __future__ import annotations

import contextlib
import struct
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from pgcdc_events.errors import ConversionError, ProtocolError
from pgcdc_events.protocol import (
    Insert,
    LogicalMessage,
    Relation,
    RelationColumn,
    TupleData,
    encode_message,
    parse_message,
)
from pgcdc_events.types.array import parse_binary, parse_text
from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.hstore import hstore_from_binary, hstore_from_text
from pgcdc_events.types.mapper import TypeMapper
from pgcdc_events.types.registry import PgType, TypeRegistry
from pgcdc_events.types.temporal import parse_interval

RATIO = 9.0


def _column(oid: int, **config: Any) -> Callable[[bytes], Any]:
    col = TypeMapper(TypeConfig(**config), TypeRegistry()).column("c", oid, -1, table="s.t")
    assert col is not None
    return lambda raw: col.convert(raw, table="s.t")


def _ewkb_from_text() -> Callable[[bytes], Any]:
    mapping = TypeMapper().value_mapping(PgType(90020, "public", "geometry", "base"), -1)
    assert mapping is not None
    return mapping.from_text


def _run(fn: Callable[[bytes], Any], raw: bytes, calls: int, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        for _ in range(calls):
            with contextlib.suppress(ConversionError, ProtocolError):
                fn(raw)
        best = min(best, time.process_time() - started)
    return best


def scaling(fn: Callable[[bytes], Any], make: Callable[[int], bytes], n: int) -> float:
    """time(4n) / time(n), with enough calls that time(n) is at least 10 ms of CPU."""
    small, large = make(n), make(4 * n)
    calls = 1
    while _run(fn, small, calls, repeat=1) < 0.01 and calls < 10_000:
        calls *= 4
    return _run(fn, large, calls) / _run(fn, small, calls)


CASES: dict[str, tuple[Callable[[bytes], Any], Callable[[int], bytes], int]] = {
    "array: thousands of escaped quotes and backslashes":
        (parse_text, lambda n: b'{"' + b'\\"\\\\' * n + b'"}', 4000),
    "array: many quoted elements": (parse_text, lambda n: b"{" + b'"a\\\\b",' * n + b"1}", 2000),
    "array: an unterminated quote full of backslashes": (parse_text, lambda n: b'{"' + b"\\\\" * n,
                                                         20000),
    "array: many sub-arrays": (parse_text, lambda n: b"{" + b"{1,2}," * n + b"{1,2}}", 2000),
    "array: deep nesting": (parse_text, lambda n: b"{" * n + b"}" * n, 20000),
    "array: a long dimension prefix": (parse_text, lambda n: b"[1:2]" * n + b"={1,2}", 20000),
    "hstore: many escaped pairs": (hstore_from_text,
                                   lambda n: b'"k\\"x"=>"v\\\\", ' * n + b'"z"=>NULL', 1000),
    "hstore: an unterminated key": (hstore_from_text, lambda n: b'"' + b'\\"' * n, 20000),
    "hstore: spaces before the arrow": (hstore_from_text, lambda n: b'"k"' + b" " * n + b"x",
                                        20000),
    "interval: many fields": (parse_interval, lambda n: b"1 day " * n + b"00:00:01", 4000),
    "numeric: long, decimal.handling.mode=string":
        (_column(1700, decimal_handling_mode="string"), lambda n: b"9" * n + b".5", 30000),
    "numeric: long, decimal.handling.mode=double":
        (_column(1700, decimal_handling_mode="double"), lambda n: b"9" * n + b".5", 30000),
    "numeric: long garbage": (_column(1700), lambda n: b"9" * n + b"x", 30000),
    "money: long": (_column(790), lambda n: b"$" + b"1," * n, 20000),
    "bit varying: long": (_column(1562), lambda n: b"01" * n, 20000),
    "geometry: long EWKB hex": (_ewkb_from_text(), lambda n: b"0101000000" + b"00" * n, 20000),
    "pgoutput: an Insert of many columns": (
        parse_message,
        lambda n: encode_message(Insert(1, TupleData(b"t" * n, (b"xyz",) * n))), 2000),
    "pgoutput: a Relation of many columns": (
        parse_message,
        lambda n: encode_message(Relation(1, "s", "t", "d", tuple(
            RelationColumn(0, f"c{i}", 25, -1) for i in range(n)))), 2000),
    "pgoutput: a long logical message": (
        parse_message,
        lambda n: encode_message(LogicalMessage(0, 1, "p", b"x" * n)), 200000),
}


@pytest.mark.parametrize("name", list(CASES))
def test_time_grows_linearly(name: str) -> None:
    fn, make, n = CASES[name]
    ratios = []
    for _ in range(3):
        ratios.append(scaling(fn, make, n))
        if ratios[-1] < RATIO:
            break
    ratio = min(ratios)
    assert ratio < RATIO, f"{name}: 4 times the input took {ratio:.1f} times as long"


# ---------------------------------------------------------------- claimed sizes


def _peak(fn: Callable[[], Any]) -> int:
    tracemalloc.start()
    try:
        with pytest.raises((ConversionError, ProtocolError)):
            fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(("name", "call"), [
    ("array binary: a billion elements",
     lambda: parse_binary(struct.pack(">iiIii", 1, 0, 23, 1_000_000_000, 1) + b"\0\0\0\4")),
    ("array binary: 65536 x 65536 elements",
     lambda: parse_binary(struct.pack(">iiIiiii", 2, 0, 23, 65536, 1, 65536, 1))),
    ("array text: a dimension of a billion",
     lambda: parse_text(b"[1:1000000000]={1}")),
    ("array text: six dimensions of a billion",
     lambda: parse_text(b"[1:1000000000]" * 6 + b"={1}")),
    ("hstore binary: a billion pairs",
     lambda: hstore_from_binary(struct.pack(">i", 1_000_000_000) + b"\0" * 16)),
    ("hstore binary: a key of 2 GB", lambda: hstore_from_binary(struct.pack(">ii", 1, 2**31 - 1))),
    ("pgoutput: a Relation of 32767 columns in 20 bytes",
     lambda: parse_message(b"R" + struct.pack(">I", 1) + b"s\0t\0d" + struct.pack(">h", 32767))),
    ("pgoutput: a Truncate of 2**31 - 1 relations",
     lambda: parse_message(b"T" + struct.pack(">iB", 2**31 - 1, 0))),
    ("pgoutput: a message of 2 GB",
     lambda: parse_message(b"M\0" + struct.pack(">Q", 1) + b"p\0" + struct.pack(">i", 2**31 - 1))),
    ("pgoutput: a column of 2 GB",
     lambda: parse_message(b"I" + struct.pack(">I", 1) + b"N" + struct.pack(">hci", 1, b"t",
                                                                             2**31 - 1))),
])
def test_claimed_sizes_allocate_nothing(name: str, call: Callable[[], Any]) -> None:
    assert _peak(call) < 64 * 1024, name


def test_numeric_beyond_postgresql_limits_is_rejected_before_conversion() -> None:
    """The capped exception to linearity: no text beyond PostgreSQL's limits is converted."""
    convert = _column(1700)
    for raw in (b"9" * 131073, b"1." + b"9" * 16384, b"1e131072", b"1" * 10**6):
        with pytest.raises(ConversionError, match="not numeric text output"):
            convert(raw)
    # within the limits it converts (the quadratic base conversion, capped by the limits)
    assert convert(b"9" * 20000 + b"." + b"9" * 100) is not None
