"""Fuzz every value parser through the type mapper's converters, and the configuration parser.

Run: ``.venv/bin/python tools/fuzz_values.py [--cases 1000000] [--family NAME ...]
[--seed N] [--workers 2]``. ``--cases`` is per family.

Families: arrays, hstore, intervals, timestamps (with zones; also dates and times),
numerics, money, geometry (EWKB; and points), bit strings, ranges, and ``config``
(connector properties). Each value case is a valid value PostgreSQL prints (or
sends), mutated: truncated, bit-flipped, spliced with another, stuffed with
tokens that matter to the parsers (quotes, backslashes, braces, exponents, huge
digit runs...), or a slice repeated up to thousands of times. Each goes through
``ColumnMapping.convert`` (text or binary) under several handling modes.

A failure is: an exception that is not the library's own; a ConversionError
without its table and column; a case that takes more than two seconds of CPU; a
converted value whose JsonConverter JSON, read back with the standard library's
``json.loads``, is not that value (strings exactly, numbers exactly, bytes and
decimals decoded from base64, through arrays, maps and structs). Counted
too (not failures): the parsers' internal exceptions that the converter wraps
into ConversionError. The report prints the counts per family.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import multiprocessing
import random
import struct
import sys
import time
from collections import Counter
from collections.abc import Callable
from decimal import MAX_PREC, Context, Decimal
from typing import Any

from pgcdc_events.errors import ConfigurationError, ConversionError, PgCdcError
from pgcdc_events.events.config import JsonConverterConfig
from pgcdc_events.events.jsonconv import JsonRecordWriter
from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.mapper import ColumnMapping, TypeMapper
from pgcdc_events.types.registry import PgType, TypeRegistry
from pgcdc_events.types.schema import Schema, Struct

TABLE = "fuzz.t"
SLOW_SECONDS = 2.0

# ---------------------------------------------------------------- seeds


def _array_binary(oid: int, elements: list[bytes | None], dims: list[int] | None = None) -> bytes:
    dims = dims or [len(elements)]
    out = struct.pack(">iiI", len(dims), int(None in elements), oid)
    for d in dims:
        out += struct.pack(">ii", d, 1)
    for e in elements:
        out += struct.pack(">i", -1) if e is None else struct.pack(">i", len(e)) + e
    return out


def _hstore_binary(pairs: list[tuple[bytes, bytes | None]]) -> bytes:
    out = struct.pack(">i", len(pairs))
    for k, v in pairs:
        out += struct.pack(">i", len(k)) + k
        out += struct.pack(">i", -1) if v is None else struct.pack(">i", len(v)) + v
    return out


def _ewkb(srid: int | None, kind: int, body: bytes, order: int = 1) -> bytes:
    fmt = "<" if order else ">"
    flag = 0x20000000 if srid is not None else 0
    head = bytes([order]) + struct.pack(fmt + "I", kind | flag)
    if srid is not None:
        head += struct.pack(fmt + "i", srid)
    return head + body


_POINT = struct.pack("<dd", 1.5, -2.25)
_POLYGON = struct.pack("<II", 1, 4) + struct.pack("<8d", 0, 0, 1, 0, 1, 1, 0, 0)

#: (text seeds, binary seeds) per family.
SEEDS: dict[str, tuple[list[bytes], list[bytes]]] = {
    "arrays": ([
        b"{1,2,3}", b"{}", b"{{1,2},{3,4}}", b"[0:2]={1,2,3}", b"[1:1][2:3]={{5,6}}",
        b'{"a b","c\\"d","e\\\\f",NULL,""}', b"{NULL}", b'{"",""}', b"{{{1}}}",
        b"{1.5,NaN,-Infinity,3e5}", b'{"2024-01-01 00:00:00+00",infinity}',
        b'{"{\\"k\\": [1, 2]}",null}', b"{ 1 , 2 }", b'{"\\\\x00ff",NULL}',
    ], [
        _array_binary(23, [b"\x00\x00\x00\x01", None, b"\xff\xff\xff\xff"]),
        _array_binary(23, [b"\x00\x00\x00\x02"] * 4, [2, 2]),
        _array_binary(25, [b"abc", b"", None]),
        _array_binary(23, []),
    ]),
    "hstore": ([
        b'"a"=>"1", "b"=>NULL', b"", b'"k"=>"NULL"', b'"quo\\"te"=>"back\\\\slash"',
        '"ключ"=>"✓ 日本"'.encode(), b'"a"  =>  "1" ,"b"=>"2"', b'"a"=>"1", "a"=>"2"',
    ], [
        _hstore_binary([(b"a", b"1"), (b"b", None)]), _hstore_binary([]),
        _hstore_binary([("é".encode(), b"x" * 40)]),
    ]),
    "intervals": ([
        b"1 year 2 mons 3 days 04:05:06.789", b"-1 years -2 mons +3 days -04:05:06.5",
        b"00:00:00", b"178000000 years", b"-00:00:00.000001", b"1 day", b"2 mons",
        b"-178956970 years -8 mons -2147483648 days -2562047788:00:54.775808",
    ], [
        struct.pack(">qii", 14_706_789_000, 3, 14), struct.pack(">qii", -1, -1, -1),
        struct.pack(">qii", 2**63 - 1, 2**31 - 1, 2**31 - 1),
    ]),
    "timestamps": ([
        b"2024-01-01 12:34:56.789+00", b"0044-03-15 12:00:00+00:53:28 BC", b"infinity",
        b"-infinity", b"294276-12-31 23:59:59.999999+00", b"2024-02-29 00:00:00-09:30",
        b"1999-12-31 23:59:59.5", b"4713-01-01 00:00:00 BC", b"12:34:56+05:30", b"24:00:00",
        b"24:00:00-15:59:59", b"2024-02-29", b"5874897-12-31", b"0001-01-01 BC",
        b"00:00:00.000001", b"23:59:59.999999",
    ], [
        struct.pack(">q", 0), struct.pack(">q", 2**63 - 1), struct.pack(">i", -(2**31)),
        struct.pack(">qi", 86_400_000_000, -50400),
    ]),
    "numerics": ([
        b"123.45", b"-0.001", b"NaN", b"Infinity", b"-Infinity", b"0", b"1" * 60 + b".5",
        b"0." + b"0" * 40 + b"1", b"100000000000000000000", b"-99999999.99",
    ], [
        struct.pack(">hhHH", 2, 0, 0, 2) + struct.pack(">hh", 123, 4500),
        struct.pack(">hhHH", 0, 0, 0xC000, 0), struct.pack(">hhHH", 1, -2, 0x4000, 8)
        + struct.pack(">h", 7),
    ]),
    "money": ([
        b"$1,234.56", b"-$0.01", b"($5.00)", b"$0.00", b"$92,233,720,368,547,758.07",
        b"-$92,233,720,368,547,758.08", "1.234,56 €".encode(),
    ], [struct.pack(">q", 123456), struct.pack(">q", -(2**63))]),
    "geometry": ([
        _ewkb(4326, 1, _POINT).hex().encode(), _ewkb(None, 3, _POLYGON).hex().upper().encode(),
        _ewkb(3857, 1, struct.pack(">dd", 1, 2), 0).hex().encode(), b"(1,2)", b"(-1.5e300,NaN)",
    ], [_ewkb(4326, 1, _POINT), _ewkb(None, 3, _POLYGON), struct.pack(">dd", 1.0, 2.0)]),
    "bits": ([b"0101", b"1" * 64, b"0", b"", b"1" * 1000], [
        struct.pack(">i", 4) + b"\x50", struct.pack(">i", 0), struct.pack(">i", 9) + b"\xff\x80",
    ]),
    "ranges": ([
        b"[1,10)", b"empty", b"(,)", b'["2024-01-01 00:00:00+00","2024-02-01 00:00:00+00")',
        b"[1.5,2.5]", b"[2024-01-01,2024-02-01)", b"(,5]",
    ], []),
}

#: Tokens that matter to the parsers, inserted and repeated by the mutator.
TOKENS = [
    b"{", b"}", b'"', b"\\", b",", b"NULL", b"=>", b"e999999999", b"E-999999999", b"e+308",
    b"9" * 40, b"0" * 30, b"-", b"+", b":", b".", b" ", b" BC", b"infinity", b"\x00", b"\xff",
    b"\xc3", b"\xe2\x82", b"[", b"]", b"=", b"(", b")", b"$", b" years", b" mons", b" days",
    b"T", b"Z", b"NaN", b"Infinity", b"[-2147483648:2147483647]=", b"\t", b"\n", b"24:00:00",
    b"+99", b"-00:00:01", b"1e-999999999", struct.pack(">i", 2**31 - 1), struct.pack(">i", -2),
    struct.pack(">i", 1_000_000_000), b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00",
    # a backslash before "u" in text (C:\users, \u00e9): JSON escaping must keep it as it is
    b"\\u", b"\\\\u00e9", b"\\users", b"\x01",
]

# ---------------------------------------------------------------- targets

_REGISTRY = TypeRegistry()
_WRITER = JsonRecordWriter(JsonConverterConfig())
_CONFIGS = [
    TypeConfig(),
    TypeConfig(decimal_handling_mode="string", time_precision_mode="connect",
               interval_handling_mode="string", hstore_handling_mode="map",
               binary_handling_mode="hex", map_unsupported_types=True),
    TypeConfig(decimal_handling_mode="double", time_precision_mode="isostring",
               binary_handling_mode="base64"),
    TypeConfig(time_precision_mode="adaptive_time_microseconds", money_fraction_digits=4,
               include_unknown_datatypes=True),
]
#: Type OIDs (or extension types) each family's converters are built for.
_TYPES: dict[str, list[int | PgType]] = {
    "arrays": [1007, 1009, 1231, 1185, 1000, 1016, 1001, 1115, 1182, 1183, 1270, 3807, 2951],
    "hstore": [PgType(90010, "public", "hstore", "base")],
    "intervals": [1186],
    "timestamps": [1184, 1114, 1266, 1082, 1083],
    "numerics": [1700, (1700, (12 << 16 | 2) + 4), 21, 23, 20, 700, 701],  # type: ignore[list-item]
    "money": [790],
    "geometry": [PgType(90020, "public", "geometry", "base"),
                 PgType(90021, "public", "geography", "base"), 600],
    "bits": [1560, (1560, 1), (1562, 8), 1562],  # type: ignore[list-item]
    "ranges": [3904, 3906, 3910, 3912, 3926, 3908],
}


def _column(target: int | PgType | tuple[int, int], config: TypeConfig, i: int
            ) -> ColumnMapping | None:
    mapper = TypeMapper(config, _REGISTRY)
    if isinstance(target, PgType):
        mapping = mapper.value_mapping(target, -1)
        if mapping is None:
            return None
        return ColumnMapping(f"c{i}", target, -1, mapping.schema, mapping.from_text,
                             mapping.from_binary, mapping.toast)
    oid, typmod = target if isinstance(target, tuple) else (target, -1)
    return mapper.column(f"c{i}", oid, typmod, table=TABLE)


def columns(family: str) -> list[ColumnMapping]:
    """Every converter of a family, under every fuzzed handling mode."""
    out = []
    for config in _CONFIGS:
        for i, target in enumerate(_TYPES[family]):
            col = _column(target, config, i)
            if col is not None:
                out.append(col)
    return out


# ---------------------------------------------------------------- mutation


def mutate(rng: random.Random, seeds: list[bytes]) -> bytes:
    """One fuzz case derived from the seeds (1-3 mutations)."""
    raw = bytearray(rng.choice(seeds)) if seeds else bytearray()
    for _ in range(rng.randint(1, 3)):
        action = rng.randrange(9)
        n = len(raw)
        if action == 0 and n:  # truncate
            del raw[rng.randrange(n):]
        elif action == 1 and n:  # flip bits
            for _ in range(rng.randint(1, 3)):
                raw[rng.randrange(n)] ^= 1 << rng.randrange(8)
        elif action == 2:  # insert a token
            pos = rng.randint(0, n)
            raw[pos:pos] = rng.choice(TOKENS)
        elif action == 3:  # repeat a token many times (nesting, quotes, backslashes, digits)
            pos = rng.randint(0, n)
            raw[pos:pos] = rng.choice(TOKENS) * rng.choice((2, 10, 100, 1000, 5000))
        elif action == 4 and n:  # repeat a slice
            a = rng.randrange(n)
            b = min(n, a + rng.randint(1, 16))
            raw[b:b] = raw[a:b] * rng.choice((1, 5, 50, 500))
        elif action == 5 and n:  # delete a range
            a = rng.randrange(n)
            del raw[a:a + rng.randint(1, 8)]
        elif action == 6 and seeds:  # splice with another seed
            other = rng.choice(seeds)
            raw = raw[:rng.randint(0, n)] + other[rng.randint(0, len(other)):]
        elif action == 7:  # random bytes
            raw = bytearray(rng.randbytes(rng.randrange(40)))
        elif n:  # overwrite a byte with an interesting one
            raw[rng.randrange(n)] = rng.choice(b"\x00\x7f\x80\xff0-9.{}\"\\,:")
    return bytes(raw)


# ---------------------------------------------------------------- running


DECIMAL = "org.apache.kafka.connect.data.Decimal"


def reads_back(schema: Schema, value: Any, parsed: Any, path: str = "$") -> str | None:
    """Where ``parsed`` (``json.loads`` of the written JSON) is not ``value``, or None."""
    if value is None:
        return None  # a null may be written as the schema's default (replace.null.with.default)
    kind = schema.type
    if schema.name == DECIMAL and isinstance(value, Decimal):
        scale = int(schema.params.get("scale", "0"))
        if isinstance(parsed, str):
            unscaled = int.from_bytes(base64.b64decode(parsed), "big", signed=True)
            ok = Decimal(unscaled).scaleb(-scale, Context(prec=MAX_PREC)) == value
        else:
            ok = Decimal(str(parsed)) == value
        return None if ok else f"{path}: decimal {value} read back as {parsed!r}"
    if kind == "string" or kind in ("int8", "int16", "int32", "int64"):
        ok = parsed == value and type(parsed) is type(value)
    elif kind == "boolean":
        ok = parsed is bool(value)
    elif kind in ("float32", "float64"):
        if math.isfinite(value):
            ok = isinstance(parsed, (int, float)) and float(parsed) == value
        else:
            ok = parsed == ("NaN" if math.isnan(value) else
                            "Infinity" if value > 0 else "-Infinity")
    elif kind == "bytes":
        ok = isinstance(parsed, str) and base64.b64decode(parsed) == bytes(value)
    elif kind == "array":
        assert schema.items is not None
        if not isinstance(parsed, list) or len(parsed) != len(value):
            return f"{path}: array of {len(value)} read back as {parsed!r}"[:300]
        for i, (item, got) in enumerate(zip(value, parsed, strict=True)):
            found = reads_back(schema.items, item, got, f"{path}[{i}]")
            if found:
                return found
        return None
    elif kind == "map":
        assert schema.keys is not None and schema.values is not None
        pairs = list(parsed.items()) if isinstance(parsed, dict) else [tuple(p) for p in parsed]
        if len(pairs) != len(value):
            return f"{path}: map of {len(value)} read back with {len(pairs)} entries"
        for (key, item), (got_key, got) in zip(value.items(), pairs, strict=True):
            found = (reads_back(schema.keys, key, got_key, f"{path}<key>")
                     or reads_back(schema.values, item, got, f"{path}[{key!r}]"))
            if found:
                return found
        return None
    elif kind == "struct":
        assert isinstance(value, Struct) and isinstance(parsed, dict)
        for field, item in zip(schema.fields or (), value.values, strict=True):
            found = reads_back(field.schema, item, parsed.get(field.name), f"{path}.{field.name}")
            if found:
                return found
        return None
    else:
        return f"{path}: unexpected schema type {kind}"
    return None if ok else f"{path}: {value!r} read back as {parsed!r}"[:300]


def check(col: ColumnMapping, raw: bytes, binary: bool, stats: Counter[str]) -> str | None:
    """Convert one case; returns a failure description, or None."""
    fn = col.from_binary if binary else col.from_text
    if fn is None:
        return None
    started = time.process_time()
    failure = None
    try:
        value = col.convert(raw, binary=binary, table=TABLE)
        stats["converted"] += 1
        try:  # what the converter returned must serialize too (JsonConverter JSON)
            if value is not None:
                text = _WRITER.payload(col.schema, value)
                failure = reads_back(col.schema, value, json.loads(text))
                if failure is not None:
                    failure = f"the JSON does not read back: {failure}: {text[:200]}"
        except Exception as exc:
            failure = f"serializing the converted value: {type(exc).__name__}: {exc}"
    except ConversionError as exc:
        stats["ConversionError"] += 1
        if exc.table != TABLE or exc.column != col.name:
            failure = f"ConversionError without table/column: {exc}"
    except PgCdcError as exc:
        failure = f"{type(exc).__name__} from a converter: {exc}"
    except Exception as exc:  # that is what we look for
        failure = f"{type(exc).__name__}: {exc}"
    elapsed = time.process_time() - started
    if elapsed > SLOW_SECONDS:
        failure = f"took {elapsed:.1f} s"
    if failure is None and stats["ConversionError"] and stats.total() % 7 == 0:
        # what the parser itself raised, before the converter wrapped it (sampled)
        try:
            fn(raw)
        except ConversionError:
            pass
        except Exception as exc:
            stats[f"wrapped {type(exc).__name__}"] += 1
    return failure


def run_family(family: str, cases: int, seed: int) -> tuple[Counter[str], list[str], float]:
    """Fuzz one family; returns counts, failures (with the bytes) and the slowest case."""
    rng = random.Random(f"{family}:{seed}")
    stats: Counter[str] = Counter()
    failures: list[str] = []
    slowest = 0.0
    if family == "config":
        return run_config(cases, rng)
    text_seeds, binary_seeds = SEEDS[family]
    cols = columns(family)
    for _ in range(cases):
        binary = bool(binary_seeds) and rng.random() < 0.3
        raw = mutate(rng, binary_seeds if binary else text_seeds)
        col = rng.choice(cols)
        t0 = time.process_time()
        failure = check(col, raw, binary, stats)
        slowest = max(slowest, time.process_time() - t0)
        stats["cases"] += 1
        if failure:
            failures.append(f"{family} {col.pg_type.name} {'binary' if binary else 'text'} "
                            f"{raw[:200]!r}{'...' if len(raw) > 200 else ''}: {failure}")
    return stats, failures, slowest


# ---------------------------------------------------------------- the configuration parser

_CONFIG_VALUES = ["", "true", "false", "TRUE", "yes", "0", "-1", "99999999999999999999", "abc",
                  "(", "a.*,b[", "public.t", "c,u,d,t", "x", "precise", "string", "map",
                  "avro", "none", "hex:zz", "hex:00ff", "\\u12", "1e3", " ", "*", ".*", "fail"]


def run_config(cases: int, rng: random.Random) -> tuple[Counter[str], list[str], float]:
    """Random property sets: only ConfigurationError may escape, naming a property."""
    from pgcdc_events.events.config import APPLIED_PROPERTIES, EventConfig
    from pgcdc_events.events.connector_properties import CONNECTOR_PROPERTIES

    names = [*sorted(set(APPLIED_PROPERTIES) | set(CONNECTOR_PROPERTIES)),
             "column.mask.with.5.chars", "column.mask.hash.SHA-256.with.salt.s",
             "column.truncate.to.3.chars", "tabel.include.list", "x", "converter.schemas.enable"]
    stats: Counter[str] = Counter()
    failures: list[str] = []
    slowest = 0.0
    for _ in range(cases):
        props = {"topic.prefix": "p"} if rng.random() < 0.9 else {}
        for _ in range(rng.randint(0, 4)):
            props[rng.choice(names)] = rng.choice(_CONFIG_VALUES) if rng.random() < 0.8 \
                else rng.randbytes(rng.randrange(8)).decode("latin-1")
        t0 = time.perf_counter()
        try:
            EventConfig.from_properties(props)
            stats["accepted"] += 1
        except ConfigurationError as exc:
            stats["ConfigurationError"] += 1
            message = str(exc)
            named = [*props, "topic.prefix"]  # a missing topic.prefix is named too
            if not any(name in message for name in named):
                failures.append(f"config {props!r}: error names no property: {message}")
        except Exception as exc:
            failures.append(f"config {props!r}: {type(exc).__name__}: {exc}")
        slowest = max(slowest, time.perf_counter() - t0)
        stats["cases"] += 1
    return stats, failures, slowest


FAMILIES = [*SEEDS, "config"]


def _work(args: tuple[str, int, int]) -> tuple[str, Counter[str], list[str], float, float]:
    family, cases, seed = args
    started = time.perf_counter()
    stats, failures, slowest = run_family(family, cases, seed)
    return family, stats, failures, slowest, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=1_000_000, help="cases per family")
    parser.add_argument("--family", action="append", choices=FAMILIES)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--chunks", type=int, default=1, help="split each family in N seeds")
    args = parser.parse_args(argv)
    families = args.family or FAMILIES
    per = args.cases // args.chunks
    jobs = [(f, per, args.seed * 1000 + c) for f in families for c in range(args.chunks)]
    run: Callable[[Any], Any]
    if args.workers > 1:
        pool = multiprocessing.Pool(args.workers)
        run = pool.imap_unordered
    else:
        run = map
    totals: dict[str, Counter[str]] = {f: Counter() for f in families}
    slow: dict[str, float] = dict.fromkeys(families, 0.0)
    seconds: dict[str, float] = dict.fromkeys(families, 0.0)
    failed = 0
    for family, stats, failures, slowest, elapsed in run(_work, jobs):
        totals[family] += stats
        slow[family] = max(slow[family], slowest)
        seconds[family] += elapsed
        kinds = Counter(line.rsplit(": ", 1)[-1][:60] for line in failures)
        for line in failures[:5]:
            print("FAIL", line[:600], flush=True)
        for kind, count in kinds.most_common(10):
            print(f"  {family}: {count} x {kind}", flush=True)
        failed += len(failures)
    for family in families:
        counts = ", ".join(f"{k} {v:,}" for k, v in sorted(totals[family].items()) if k != "cases")
        print(f"{family:>10}: {totals[family]['cases']:,} cases ({counts}); slowest case "
              f"{slow[family] * 1000:.1f} ms; {seconds[family]:.0f} s", flush=True)
    print(f"seed {args.seed}: {failed} failures", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
