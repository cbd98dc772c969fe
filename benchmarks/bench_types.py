"""Per-type conversion throughput of the type mapper (text and binary formats).

Run: ``.venv/bin/python benchmarks/bench_types.py [--values 50000]``. For each type, the
converter is chosen once (as the decoder does per column) and applied to a list of
typical values as PostgreSQL prints them; the binary column converts the same values in
PostgreSQL's send format (encoded here with the documented layouts). Median of several
runs; values per second and µs per value.
"""

from __future__ import annotations

import argparse
import struct
from datetime import date, datetime, timezone

from _common import median_time

from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.mapper import TypeMapper
from pgcdc_events.types.oids import OID_BY_NAME

EPOCH_2000 = datetime(2000, 1, 1, tzinfo=timezone.utc)

#: (type, typmod, text values, binary values or None)
CASES: list[tuple[str, int, list[bytes], list[bytes] | None]] = [
    ("bool", -1, [b"t", b"f"], [b"\x01", b"\x00"]),
    ("int4", -1, [b"123456", b"-42"], [struct.pack(">i", 123456), struct.pack(">i", -42)]),
    ("int8", -1, [b"9223372036854775807", b"7"], [struct.pack(">q", 2**62), struct.pack(">q", 7)]),
    ("float8", -1, [b"3.141592653589793", b"-1e-10"],
     [struct.pack(">d", 3.141592653589793), struct.pack(">d", -1e-10)]),
    ("numeric", (12 << 16 | 2) + 4, [b"12345.67", b"-0.50"], None),
    ("numeric", -1, [b"1234567.891", b"0.000123"], None),
    ("text", -1, [b"hello world", "héllo ✓".encode()], [b"hello world", "héllo ✓".encode()]),
    ("uuid", -1, [b"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"],
     [bytes.fromhex("a0eebc999c0b4ef8bb6d6bb9bd380a11")]),
    ("jsonb", -1, [b'{"a": 1, "b": [1, 2]}'], [b'\x01{"a": 1, "b": [1, 2]}']),
    ("date", -1, [b"2024-05-01", b"1999-12-31"],
     [struct.pack(">i", (date(2024, 5, 1) - date(2000, 1, 1)).days)]),
    ("timestamp", -1, [b"2024-05-01 12:34:56.123456", b"1999-12-31 23:59:59"],
     [struct.pack(">q", 768_000_000_000_000)]),
    ("timestamptz", -1, [b"2024-05-01 12:34:56.123456+00", b"2024-05-01 12:34:56+05:30"],
     [struct.pack(">q", 768_000_000_000_000)]),
    ("interval", -1, [b"1 year 2 mons 3 days 04:05:06.789"],
     [struct.pack(">qii", 14_706_789_000, 3, 14)]),
    ("bytea", -1, [b"\\x00ff10deadbeef"], [bytes.fromhex("00ff10deadbeef")]),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--values", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    mapper = TypeMapper(TypeConfig())
    print(f"{'type':28} {'text values/s':>14} {'µs':>6} {'binary values/s':>16} {'µs':>6}")
    for name, typmod, texts, binaries in CASES:
        mapping = mapper.value_mapping(mapper.registry.resolve(OID_BY_NAME[name]), typmod)
        assert mapping is not None, name
        label = name if typmod == -1 else f"{name}({typmod})"
        values = (texts * (args.values // len(texts) + 1))[: args.values]
        convert = mapping.from_text
        text_s = median_time(lambda: [convert(v) for v in values], args.repeat)  # noqa: B023
        line = f"{label:28} {args.values / text_s:14,.0f} {text_s / args.values * 1e6:6.2f}"
        if binaries is not None and mapping.from_binary is not None:
            raw = (binaries * (args.values // len(binaries) + 1))[: args.values]
            convert_b = mapping.from_binary
            bin_s = median_time(lambda: [convert_b(v) for v in raw], args.repeat)  # noqa: B023
            line += f" {args.values / bin_s:16,.0f} {bin_s / args.values * 1e6:6.2f}"
        print(line)


if __name__ == "__main__":
    main()
