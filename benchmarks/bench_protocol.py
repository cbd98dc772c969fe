"""Parse throughput of the protocol layer on a large real capture, against pypgoutput.

Run: ``.venv/bin/python benchmarks/bench_protocol.py [--messages 200000]``. The
first run captures the workload from a throwaway PostgreSQL server into
``benchmarks/.data/`` (PostgreSQL binaries required); later runs reuse it.
Every figure comes from the same process and the same bytes; ratios are
against pypgoutput 0.0.3, which parses one message per object from raw bytes.
"""

from __future__ import annotations

import argparse
import struct
import sys

from _common import DATA, load_messages, make_capture, median_time, report

from pgcdc_events.protocol import PgOutputReader, parse_message


def pypgoutput_parser():  # type: ignore[no-untyped-def]
    """A dispatcher over pypgoutput's classes for the message types it knows."""
    from pypgoutput import decoders as d

    table = {ord("B"): d.Begin, ord("C"): d.Commit, ord("R"): d.Relation, ord("I"): d.Insert,
             ord("U"): d.Update, ord("D"): d.Delete, ord("T"): d.Truncate}

    def parse_all(messages: list[bytes]) -> None:
        for data in messages:
            table[data[0]](data)

    return parse_all, set(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=200_000, help="insert count")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    path = DATA / f"protocol-{args.messages}.jsonl"
    if not path.exists():
        make_capture(path, args.messages, updates=args.messages // 10,
                     deletes=args.messages // 20)
    messages = load_messages(path)
    counts: dict[str, int] = {}
    for m in messages:
        counts[chr(m[0])] = counts.get(chr(m[0]), 0) + 1
    print(f"capture: {path.name}, {len(messages)} messages {dict(sorted(counts.items()))}")
    print(f"python {sys.version.split()[0]}")

    def ours_reader() -> None:
        read = PgOutputReader(proto_version=1).read
        for data in messages:
            read(data)

    def ours(batch: list[bytes]) -> None:
        # the same loop as pypgoutput's below: each result dropped, as a streaming consumer would
        for data in batch:
            parse_message(data)

    def ours_parse() -> None:
        ours(messages)

    pyp, known = pypgoutput_parser()
    supported = [m for m in messages if m[0] in known]

    inserts = [m for m in messages if m[0] == ord("I")]
    six_text = b"I" + struct.pack(">I", 16384) + b"N" + struct.pack(">H", 6) + b"".join(
        b"t" + struct.pack(">i", len(v)) + v
        for v in (b"12345", b"name 12345", b"2024-05-01 12:00:00.123456+00", b"15431.25",
                  b"t", b"xxxxxxxxxxxxx")
    )
    micro = [six_text] * 200_000

    rows = [
        ("pgcdc_events PgOutputReader.read", median_time(ours_reader, args.repeat), len(messages)),
        ("pgcdc_events parse_message", median_time(ours_parse, args.repeat), len(messages)),
        ("pypgoutput 0.0.3 (B C R I U D T)", median_time(lambda: pyp(supported), args.repeat),
         len(supported)),
    ]
    report(rows, baseline="pypgoutput 0.0.3 (B C R I U D T)")
    print()
    print("Insert messages only (the capture's inserts):")
    report([
        ("pgcdc_events parse_message", median_time(lambda: ours(inserts), args.repeat),
         len(inserts)),
        ("pypgoutput 0.0.3", median_time(lambda: pyp(inserts), args.repeat), len(inserts)),
    ], baseline="pypgoutput 0.0.3")
    print()
    print("Synthetic Insert of six text columns:")
    report([
        ("pgcdc_events parse_message", median_time(lambda: ours(micro), args.repeat),
         len(micro)),
        ("pypgoutput 0.0.3", median_time(lambda: pyp(micro), args.repeat), len(micro)),
    ], baseline="pypgoutput 0.0.3")


if __name__ == "__main__":
    main()
