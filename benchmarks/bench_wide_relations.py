"""A hostile capture of wide tables: what it costs `pgcdc-events decode`, time and memory.

Run: ``.venv/bin/python benchmarks/bench_wide_relations.py [--relations 64] [--columns 1600]``.
The capture (hand-built: PostgreSQL sends each Relation once per table and session) holds
``--relations`` tables of ``--columns`` columns of the same types, each Relation followed
by a transaction inserting one row of NULLs, about 1.4 MB with the defaults. ``decode``
runs in a process of its own; its wall and CPU time and peak RSS are printed.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pgcdc_events.protocol import (
    Begin,
    CaptureRow,
    Commit,
    Insert,
    Lsn,
    Relation,
    RelationColumn,
    TupleData,
    write_capture,
)
from pgcdc_events.protocol.encoder import encode_message

#: The column types, repeated: int4, text, numeric, timestamptz, bool.
TYPES = ((23, -1), (25, -1), (1700, (12 << 16 | 2) + 4), (1184, -1), (16, -1))


def hostile_capture(path: Path, relations: int, columns: int) -> int:
    """Write the capture; returns its size in bytes."""
    rows = []
    lsn = 0x1000000
    for n in range(relations):
        oid = 20_000 + n
        cols = tuple(RelationColumn(1 if i == 0 else 0, f"c{i}", *TYPES[i % len(TYPES)])
                     for i in range(columns))
        xid = 1000 + n
        rows.append(CaptureRow(Lsn(lsn), xid, encode_message(Begin(lsn + 100, 0, xid))))
        rows.append(CaptureRow(Lsn(lsn), xid, encode_message(
            Relation(oid, "public", f"wide_{n}", "d", cols))))
        values = (b"1",) + (None,) * (columns - 1)
        rows.append(CaptureRow(Lsn(lsn + 10), xid, encode_message(
            Insert(oid, TupleData(b"t" + b"n" * (columns - 1), values)))))
        rows.append(CaptureRow(Lsn(lsn + 100), xid, encode_message(
            Commit(0, lsn + 100, lsn + 200, 0))))
        lsn += 1000
    with path.open("w") as fh:
        write_capture(rows, fh)
    return path.stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--relations", type=int, default=64)
    parser.add_argument("--columns", type=int, default=1600)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        capture = Path(tmp) / "wide.jsonl"
        size = hostile_capture(capture, args.relations, args.columns)
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pgcdc_events", "decode", "--capture",
                               str(capture), "--output", str(Path(tmp) / "out.jsonl"), "-q"],
                              capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - start
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak, cpu = usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return 1
        print(f"{args.relations} relations of {args.columns} columns, {size / 1e6:.2f} MB: "
              f"decode {elapsed:.2f} s ({cpu:.2f} s CPU), peak RSS {peak:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
