"""Peak memory of one streamed transaction of a million changes, with and without a limit.

Run: ``.venv/bin/python benchmarks/bench_memory.py [--changes 1000000] [--limit 64]``
(``--limit`` in MiB; add ``--tracemalloc`` for Python-heap peaks, ~3x slower).

The transaction is what PostgreSQL sends for a big streamed insert (protocol 2):
Stream Start, the Relation, ``--changes`` Inserts of a six-column row (about 120
bytes of values) in blocks of 10,000, each block closed by Stream Stop, then Stream
Commit. Each mode runs in a fresh subprocess feeding the bytes to
``EventDecoder.feed`` and reports:

- ``buffered``: peak RSS (and tracemalloc peak) while the transaction is held,
  i.e. up to the Stream Commit: this is what the memory limit bounds;
- ``commit``: peak RSS once the Stream Commit's records were all out. Without a
  limit they come from ``EventDecoder.feed`` as one list (a million
  ``ChangeRecord`` objects at once); with it, from ``EventDecoder.iter_feed``, one
  at a time, read back from the spill file and written as JsonConverter lines (to
  nowhere), as ``pgcdc-events decode`` and ``capture --decode`` do.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc

from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.protocol import (
    Insert,
    Relation,
    RelationColumn,
    StreamCommit,
    StreamStart,
    StreamStop,
    TupleData,
    encode_message,
)

XID = 1234
RELID = 16400
BLOCK = 10_000
COLUMNS = (
    RelationColumn(1, "id", 20, -1),
    RelationColumn(0, "name", 25, -1),
    RelationColumn(0, "created", 1184, -1),
    RelationColumn(0, "amount", 1700, 786438),
    RelationColumn(0, "active", 16, -1),
    RelationColumn(0, "note", 1043, 204),
)


def _rss_mib() -> float:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _insert(i: int) -> bytes:
    values = (str(i).encode(), b"customer name %d" % i, b"2024-05-01 12:34:56.789012+00",
              b"%d.25" % (i % 100000), b"t" if i % 2 else b"f", b"x" * (i % 40 + 20))
    return encode_message(Insert(RELID, TupleData(b"tttttt", values), XID))


def run_one(changes: int, limit_mib: float | None, trace: bool) -> dict[str, object]:
    """Feed the transaction to one decoder; returns the figures (runs in the subprocess)."""
    config = EventConfig.from_properties({"topic.prefix": "bench"})
    limit = None if limit_mib is None else int(limit_mib * 1024 * 1024)
    decoder = EventDecoder(config, proto_version=2, streaming="on", memory_limit=limit)
    rss_start = _rss_mib()
    if trace:
        tracemalloc.start()
    started = time.perf_counter()
    lsn = 1 << 32
    stop = encode_message(StreamStop())
    relation = encode_message(Relation(RELID, "public", "bench", "d", COLUMNS, XID))
    for start in range(0, changes, BLOCK):
        decoder.feed(encode_message(StreamStart(XID, start == 0)), lsn)
        if start == 0:
            decoder.feed(relation, lsn)
        for i in range(start, min(start + BLOCK, changes)):
            lsn += 64
            decoder.feed(_insert(i), lsn)
        decoder.feed(stop, lsn)
    buffered_s = time.perf_counter() - started
    traced_buffered = tracemalloc.get_traced_memory()[1] if trace else None
    rss_buffered = _rss_mib()
    commit = encode_message(StreamCommit(XID, 0, lsn + 8, lsn + 64, 0))
    if limit is None:
        records = len(decoder.feed(commit, lsn + 64))
    else:
        line = JsonRecordWriter(config.json).record_line
        records = sum(1 for r in decoder.iter_feed(commit, lsn + 64) if line(r))
    total_s = time.perf_counter() - started
    traced_commit = tracemalloc.get_traced_memory()[1] if trace else None
    budget = decoder._budget
    return {
        "changes": changes,
        "limit_mib": limit_mib,
        "records": records,
        "rss_start_mib": round(rss_start, 1),
        "rss_buffered_peak_mib": round(rss_buffered, 1),
        "rss_commit_peak_mib": round(_rss_mib(), 1),
        "tracemalloc_buffered_peak_mib": None if traced_buffered is None
        else round(traced_buffered / 2**20, 1),
        "tracemalloc_commit_peak_mib": None if traced_commit is None
        else round(traced_commit / 2**20, 1),
        "budget_peak_estimate_mib": None if budget is None else round(budget.peak / 2**20, 1),
        "spills": None if budget is None else budget.spills,
        "spilled_mib": None if budget is None else round(budget.spilled_bytes / 2**20, 1),
        "buffer_seconds": round(buffered_s, 1),
        "total_seconds": round(total_s, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--limit", type=float, default=64.0, help="memory limit in MiB")
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--child", choices=("bounded", "unbounded"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        limit = args.limit if args.child == "bounded" else None
        print(json.dumps(run_one(args.changes, limit, args.tracemalloc)))
        return
    print(f"one streamed transaction of {args.changes:,} inserts; limit {args.limit} MiB; "
          f"python {sys.version.split()[0]}", flush=True)
    for mode in ("unbounded", "bounded"):
        cmd = [sys.executable, __file__, "--child", mode, "--changes", str(args.changes),
               "--limit", str(args.limit)] + (["--tracemalloc"] if args.tracemalloc else [])
        out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": "0"})
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{mode:>9}: " + ", ".join(f"{k}={v}" for k, v in figures.items()), flush=True)


if __name__ == "__main__":
    main()
