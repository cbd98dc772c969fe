"""``pgcdc-events capture`` against ``pg_recvlogical`` on the same WAL, in one run.

Run: ``.venv/bin/python benchmarks/bench_capture.py [--rows 200000 1000000] [--batch 1000]
[--baseline SRC]``

For each size, a throwaway cluster gets one slot per contender, created at the
same point, then ``--rows`` single-table inserts in transactions of ``--batch``
rows (a six-column table, as in the other benchmarks). Each contender then reads
its slot to the end of that WAL, in a fresh process:

- ``pg_recvlogical``: ``--start --endpos <WAL end> -o proto_version=1 -o
  publication_names=bench_pub -f FILE`` (writes the raw pgoutput messages);
- ``capture (stream)``: ``pgcdc-events capture`` with the default streaming reader
  (writes capture JSON Lines, fsyncs, checkpoints, acknowledges);
- ``capture (sql)``: the same with ``--reader sql``;
- with ``--baseline SRC`` (the ``src`` directory of another checkout, say the
  last release), ``capture (stream) @base``: that code's streaming capture, on its
  own slot created at the same point: before and after a change, in one run.

Reported per contender: seconds, rows/s, the ratio to ``pg_recvlogical``'s rows/s
(the issue's goal is 0.8x or more) and the process's peak RSS (``ru_maxrss`` of
the child alone: each contender runs under its own small wrapper).

The ``capture`` processes start as an installed package does, from compiled bytecode:
their environment drops ``PYTHONDONTWRITEBYTECODE`` and keeps the bytecode in a
temporary ``PYTHONPYCACHEPREFIX``, filled by importing pg8000 and running
``capture --help`` with each source tree before the runs (without it every run compiles the modules it imports, 0.1 s
that no installed copy spends).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import SIX_COLUMN_TABLE, measure_process  # noqa: E402


def run(rows: int, batch: int, baseline: str | None = None) -> dict[str, dict[str, float]]:
    import pg8000.native

    from pgcdc_events.testing.cluster import TempCluster

    with TempCluster(settings={"max_wal_size": "4GB"}) as cluster, \
            tempfile.TemporaryDirectory(prefix="bench-capture-") as tmp:
        conn = pg8000.native.Connection(**cluster.dsn())
        try:
            conn.run(SIX_COLUMN_TABLE)
            conn.run("CREATE PUBLICATION bench_pub FOR TABLE bench")
            for slot in ("recv", "stream", "sql", "base"):
                conn.run("SELECT pg_create_logical_replication_slot(:s, 'pgoutput')", s=slot)
            for start in range(0, rows, batch):
                conn.run(
                    "INSERT INTO bench SELECT g, 'name ' || g, now() - g * interval '1 second',"
                    " g * 1.25, g % 2 = 0, repeat('x', (g % 40)::int) FROM "
                    "generate_series(CAST(:a AS bigint), CAST(:b AS bigint)) g",
                    a=start + 1, b=min(start + batch, rows))
            end = conn.run("SELECT pg_current_wal_flush_lsn()::text")[0][0]
        finally:
            conn.close()
        env = {key: value for key, value in os.environ.items()
               if key != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPATH=str(ROOT / "src"), PYTHONPYCACHEPREFIX=f"{tmp}/pycache")
        for src in (str(ROOT / "src"), baseline):  # compile once, as an install does
            if src is not None:
                subprocess.run([sys.executable, "-c", "import pg8000.native; from "
                                "pgcdc_events.cli import main; main(['capture', '--help'])"],
                               env={**env, "PYTHONPATH": src}, stdout=subprocess.DEVNULL,
                               check=True)
        dsn = f"host={cluster.host} port={cluster.port} user={cluster.user} dbname=postgres"
        results = {}
        results["pg_recvlogical"] = measure_process(
            [str(cluster.bindir / "pg_recvlogical"), "-d", dsn, "--slot", "recv", "--start",
             "--endpos", end, "--no-loop", "-o", "proto_version=1",
             "-o", "publication_names=bench_pub", "-f", f"{tmp}/recv.out"], env)
        for name, extra in (("capture (stream)", []), ("capture (sql)", ["--reader", "sql"])):
            slot = "stream" if "stream" in name else "sql"
            results[name] = measure_process(
                [sys.executable, "-m", "pgcdc_events", "capture", "--dsn", dsn, "--slot", slot,
                 "--publication", "bench_pub", "--proto-version", "1", "--quiet",
                 "--output", f"{tmp}/{slot}/", "--snapshot-mode", "no_data", *extra], env)
        if baseline is not None:
            # an older checkout may not know --snapshot-mode (it took no snapshot then)
            knows = "snapshot-mode" in (Path(baseline) / "pgcdc_events" / "cli" /
                                        "capture_cmd.py").read_text()
            results["capture (stream) @base"] = measure_process(
                [sys.executable, "-m", "pgcdc_events", "capture", "--dsn", dsn, "--slot",
                 "base", "--publication", "bench_pub", "--proto-version", "1", "--quiet",
                 "--output", f"{tmp}/base/",
                 *(["--snapshot-mode", "no_data"] if knows else [])],
                {**env, "PYTHONPATH": baseline})
        for result in results.values():
            result["rows_per_s"] = rows / result["seconds"]
        base = results["pg_recvlogical"]["rows_per_s"]
        for result in results.values():
            result["ratio"] = result["rows_per_s"] / base
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[200_000, 1_000_000])
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--baseline", metavar="SRC",
                        help="also run the streaming capture of this src directory")
    args = parser.parse_args()
    print(f"{'rows':>9}  {'contender':<22} {'seconds':>8} {'rows/s':>10} {'ratio':>6} "
          f"{'peak RSS':>9}")
    for rows in args.rows:
        started = time.perf_counter()
        for name, r in run(rows, args.batch, args.baseline).items():
            print(f"{rows:>9,}  {name:<22} {r['seconds']:>8.2f} {r['rows_per_s']:>10,.0f} "
                  f"{r['ratio']:>5.2f}x {r['rss_kib'] / 1024:>7.0f} MiB", flush=True)
        print(f"           (setup and runs: {time.perf_counter() - started:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
