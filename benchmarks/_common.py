"""Shared benchmark helpers: real captures made on a throwaway server, and timing."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent
DATA = ROOT / ".data"

#: Runs a command (its output thrown away); prints its peak RSS (KiB), wall time and CPU
#: time (user and system) as JSON on stderr's last line.
_WRAPPER = (
    "import json, resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
    "e = time.perf_counter() - t\n"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(json.dumps({'rc': p.returncode, 'seconds': e, 'rss_kib': u.ru_maxrss,\n"
    "                  'cpu': u.ru_utime + u.ru_stime}), file=sys.stderr)\n"
)


def measure_process(cmd: list[str], env: dict[str, str]) -> dict[str, float]:
    """``cmd`` run whole, as its own process: ``seconds`` (wall), ``rss_kib`` (peak) and
    ``cpu`` (user and system seconds); a failure ends the benchmark with its stderr."""
    proc = subprocess.run([sys.executable, "-c", _WRAPPER, *cmd], capture_output=True,
                          text=True, env=env, check=False)
    result: dict[str, float] = json.loads(proc.stderr.strip().splitlines()[-1])
    if result["rc"] != 0:
        raise SystemExit(f"{cmd[0]} failed: {proc.stderr[-2000:]}")
    return result


def load_average() -> str:
    """The machine's load averages (1, 5 and 15 minutes), to print beside figures."""
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


SIX_COLUMN_TABLE = """
CREATE TABLE bench (
    id bigint PRIMARY KEY,
    name text NOT NULL,
    created timestamptz NOT NULL,
    amount numeric(12, 2),
    active boolean,
    note varchar(200)
)
"""


def make_capture(path: Path, inserts: int, *, updates: int = 0, deletes: int = 0,
                 batch: int = 1000, binary: bool = False) -> Path:
    """Capture ``inserts`` rows (then updates and deletes) of a six-column table."""
    import pg8000.native

    from pgcdc_events.protocol import CaptureRow, Lsn, write_capture
    from pgcdc_events.testing.cluster import TempCluster

    path.parent.mkdir(parents=True, exist_ok=True)
    with TempCluster(settings={"max_wal_size": "4GB"}) as cluster:
        con = pg8000.native.Connection(**cluster.dsn())
        con.run(SIX_COLUMN_TABLE)
        con.run("CREATE PUBLICATION bench_pub FOR TABLE bench")
        con.run("SELECT pg_create_logical_replication_slot('bench', 'pgoutput')")
        rows = 0
        partial = path.with_suffix(".partial")
        with open(partial, "w", encoding="utf-8") as out:

            def drain() -> int:
                fetched = con.run(
                    "SELECT lsn::text, xid::text, data FROM pg_logical_slot_get_binary_changes("
                    "'bench', NULL, NULL, 'proto_version', '1', 'publication_names', 'bench_pub',"
                    f" 'binary', '{str(binary).lower()}')"
                )
                return write_capture(
                    (CaptureRow(Lsn.parse(lsn), int(xid), bytes(data)) for lsn, xid, data in fetched),
                    out,
                )

            for start in range(0, inserts, batch):
                end = min(start + batch, inserts)
                con.run(
                    "INSERT INTO bench SELECT g, 'name ' || g, now() - g * interval '1 second',"
                    " g * 1.25, g % 2 = 0, repeat('x', (g % 40)::int) FROM generate_series(CAST(:a AS bigint), CAST(:b AS bigint)) g",
                    a=start + 1, b=end,
                )
                if end % 50_000 == 0 or end == inserts:
                    rows += drain()
            for start in range(0, updates, batch):
                end = min(start + batch, updates)
                con.run("UPDATE bench SET amount = amount + 1 WHERE id BETWEEN :a AND :b",
                        a=start + 1, b=end)
            for start in range(0, deletes, batch):
                end = min(start + batch, deletes)
                con.run("DELETE FROM bench WHERE id BETWEEN :a AND :b",
                        a=inserts - end + 1, b=inserts - start)
            rows += drain()
        partial.rename(path)
        con.close()
    print(f"captured {rows} messages into {path}", file=sys.stderr)
    return path


def load_messages(path: Path) -> list[bytes]:
    """The message bytes of a capture file."""
    from pgcdc_events.protocol import iter_capture

    with open(path, encoding="utf-8") as fh:
        return [row.data for row in iter_capture(fh)]


def median_time(fn: Callable[[], object], repeat: int = 5) -> float:
    """Median wall time of ``repeat`` calls of ``fn``, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def report(rows: Sequence[tuple[str, float, int]], baseline: str) -> None:
    """Print name, seconds, items/s and the ratio to ``baseline`` for each row."""
    base = next(seconds / count for name, seconds, count in rows if name == baseline)
    print(f"{'':34} {'items':>9} {'median s':>9} {'items/s':>12} {'µs/item':>8} {'ratio':>7}")
    for name, seconds, count in rows:
        per = seconds / count
        print(f"{name:34} {count:9d} {seconds:9.3f} {count / seconds:12,.0f} {per * 1e6:8.2f}"
              f" {base / per:7.2f}x")
