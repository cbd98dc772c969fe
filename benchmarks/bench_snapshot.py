"""The initial snapshot against ``psql \\copy`` of the same tables, in one run.

Run: ``.venv/bin/python benchmarks/bench_snapshot.py [--rows 200000 1000000]
[--threads 1 2] [--baseline SRC]``

For each size, a throwaway cluster gets two tables of ``--rows`` rows between them (the
six-column table of the other benchmarks, and a ten-column one of mixed types with NULLs
and escaped text), published. Each contender then reads both tables whole, in a fresh
process, into a file:

- ``psql \\copy``: ``\\copy (SELECT columns FROM ONLY table) TO FILE`` for each table, in
  one ``psql`` (the COPY text, written by psql);
- ``capture``: ``pgcdc-events capture --create-slot --snapshot-mode initial_only`` (a
  durable output, as a user runs it: the snapshot's rows in COPY block lines, the COPY
  text as it came in hex, checkpointed and fsynced); with ``--threads N`` above 1, also ``capture threads=N``
  (``-c snapshot.max.threads=N``);
- ``read_snapshot(write)`` and ``... threads=N``: the same snapshot taken by
  :func:`pgcdc_events.adapters.snapshot.read_snapshot` with ``write`` (block lines, what
  the capture does once it passes its output's ``write``), into a file, whole process;
- with ``--baseline SRC`` (the ``src`` of another checkout), ``capture @base``: that
  code's capture, for before and after in one run.

Every contender has its own slot, created by itself (the snapshot a slot exports is the
one it reads). The contenders run in turn, ``--repeat`` rounds (3), and the fastest run
of each is reported (the machine is shared: a round's contenders run under like load).
Reported: seconds, rows/s, the ratio to ``psql \\copy``'s rows/s (the
goal is 0.5x or more), peak RSS, output size, and the CPU seconds the contender's process
used (its user and system time: on a shared machine the wall time counts the other
processes' share too, and ``uptime`` is printed before and after). The processes start
from compiled bytecode, as in ``bench_capture.py``.
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

from _common import SIX_COLUMN_TABLE, load_average, measure_process  # noqa: E402

MIXED_TABLE = """
CREATE TABLE mixed (
    id bigint PRIMARY KEY,
    name text NOT NULL,
    created timestamptz NOT NULL,
    amount numeric(12, 2),
    active boolean,
    note varchar(200),
    ratio double precision,
    day date,
    uid uuid,
    doc jsonb
)
"""

#: A snapshot through the library, into a file: ``python -c LIBRARY dsn slot file threads``.
LIBRARY = (
    "import sys\n"
    "from pgcdc_events.adapters import StreamReader\n"
    "from pgcdc_events.adapters.snapshot import read_snapshot\n"
    "dsn, slot, path, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])\n"
    "reader = StreamReader(dsn, slot=slot, publications=['bench_pub'])\n"
    "reader.connect()\n"
    "reader.prepare(create_slot=True, snapshot=True)\n"
    "with open(path, 'wb') as fh:\n"
    "    read_snapshot(reader, lambda row: None, write=fh.write, threads=threads)\n"
    "    fh.flush()\n"
    "reader.finish_snapshot()\n"
    "reader.close()\n"
)


def run(rows: int, threads: list[int], baseline: str | None, repeat: int
        ) -> dict[str, dict[str, float]]:
    import pg8000.native

    from pgcdc_events.testing.cluster import TempCluster

    half = rows // 2
    with TempCluster(settings={"max_wal_size": "4GB"}) as cluster, \
            tempfile.TemporaryDirectory(prefix="bench-snapshot-") as tmp:
        conn = pg8000.native.Connection(**cluster.dsn())
        try:
            conn.run(SIX_COLUMN_TABLE)
            conn.run(MIXED_TABLE)
            conn.run(
                "INSERT INTO bench SELECT g, 'name ' || g, now() - g * interval '1 second',"
                " g * 1.25, g % 2 = 0, repeat('x', (g % 40)::int) FROM "
                "generate_series(1, CAST(:n AS bigint)) g", n=half)
            conn.run(
                "INSERT INTO mixed SELECT g, 'name ' || g || CASE WHEN g % 50 = 0 THEN "
                "E'\\ttab' ELSE '' END, now() - g * interval '1 second', g * 1.25, g % 2 = 0, "
                "CASE WHEN g % 10 = 0 THEN NULL ELSE repeat('x', (g % 40)::int) END, g / 7.0, "
                "date '2020-01-01' + (g % 1000)::int, md5(g::text)::uuid, "
                "jsonb_build_object('k', g) FROM generate_series(1, CAST(:n AS bigint)) g",
                n=rows - half)
            conn.run("CREATE PUBLICATION bench_pub FOR TABLE bench, mixed")
            conn.run("VACUUM ANALYZE")
        finally:
            conn.close()
        env = {key: value for key, value in os.environ.items()
               if key != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPATH=str(ROOT / "src"), PYTHONPYCACHEPREFIX=f"{tmp}/pycache")
        for src in (str(ROOT / "src"), baseline):  # compile once, as an install does
            if src is not None:
                subprocess.run([sys.executable, "-c", "import pg8000.native; from "
                                "pgcdc_events.cli import main; main(['capture', '--help']); "
                                "import pgcdc_events.adapters.snapshot, pgcdc_events.events."
                                "snapshot, pgcdc_events.types.catalog"],
                               env={**env, "PYTHONPATH": src}, stdout=subprocess.DEVNULL,
                               check=True)
        dsn = f"host={cluster.host} port={cluster.port} user={cluster.user} dbname=postgres"
        results: dict[str, dict[str, float]] = {}
        script = Path(tmp) / "copy.psql"
        script.write_text("".join(
            f"\\copy (SELECT * FROM ONLY {table}) TO '{tmp}/psql.{table}'\n"
            for table in ("bench", "mixed")))

        def contenders(round_: int) -> list[tuple[str, list[str], dict[str, str], list[str]]]:
            """(name, command, environment, output files) of each contender, its slots
            named for the round (a snapshot needs a slot created for it)."""
            out = [("psql \\copy", [str(cluster.bindir / "psql"), "-X", "-q", "-d", dsn, "-f",
                                     str(script)], env,
                    [f"{tmp}/psql.bench", f"{tmp}/psql.mixed"]),
                   ("capture", [sys.executable, "-m", "pgcdc_events", "capture", "--dsn", dsn,
                                "--slot", f"cli{round_}", "--publication", "bench_pub",
                                "--quiet", "--create-slot", "--snapshot-mode", "initial_only",
                                "--output", f"{tmp}/cli{round_}/"], env,
                    [f"{tmp}/cli{round_}/capture.jsonl"])]
            for n in threads:
                if n > 1:
                    out.append((f"capture threads={n}", [
                        sys.executable, "-m", "pgcdc_events", "capture", "--dsn", dsn, "--slot",
                        f"cli{n}_{round_}", "--publication", "bench_pub", "--quiet",
                        "--create-slot", "--snapshot-mode", "initial_only", "--output",
                        f"{tmp}/cli{n}_{round_}/", "-c", f"snapshot.max.threads={n}"], env,
                        [f"{tmp}/cli{n}_{round_}/capture.jsonl"]))
                name = "read_snapshot(write)" + (f" threads={n}" if n > 1 else "")
                out.append((name, [sys.executable, "-c", LIBRARY, dsn, f"lib{n}_{round_}",
                                   f"{tmp}/lib{n}.jsonl", str(n)], env, [f"{tmp}/lib{n}.jsonl"]))
            if baseline is not None:
                out.append(("capture @base", [
                    sys.executable, "-m", "pgcdc_events", "capture", "--dsn", dsn, "--slot",
                    f"base{round_}", "--publication", "bench_pub", "--quiet", "--create-slot",
                    "--snapshot-mode", "initial_only", "--output", f"{tmp}/base{round_}/"],
                    {**env, "PYTHONPATH": baseline}, [f"{tmp}/base{round_}/capture.jsonl"]))
            return out

        for round_ in range(repeat):  # contenders interleaved: each round under like load
            for name, command, run_env, outputs in contenders(round_):
                result = measure_process(command, run_env)
                result["bytes"] = sum(os.path.getsize(path) for path in outputs)
                for path in outputs:
                    os.unlink(path)
                best = results.get(name)
                if best is None or result["seconds"] < best["seconds"]:
                    results[name] = result
        for result in results.values():
            result["rows_per_s"] = rows / result["seconds"]
        base = results["psql \\copy"]["rows_per_s"]
        for result in results.values():
            result["ratio"] = result["rows_per_s"] / base
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[200_000, 1_000_000])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=3,
                        help="rounds of every contender; the fastest of each is reported")
    parser.add_argument("--baseline", metavar="SRC",
                        help="also run the capture of this src directory")
    args = parser.parse_args()
    print(f"{'rows':>9}  {'contender':<30} {'seconds':>8} {'rows/s':>10} {'ratio':>6} "
          f"{'CPU s':>6} {'peak RSS':>9} {'output':>9}")
    for rows in args.rows:
        started = time.perf_counter()
        print(f"   (before: {load_average()})", flush=True)
        for name, r in run(rows, args.threads, args.baseline, args.repeat).items():
            print(f"{rows:>9,}  {name:<30} {r['seconds']:>8.2f} {r['rows_per_s']:>10,.0f} "
                  f"{r['ratio']:>5.2f}x {r['cpu']:>6.2f} {r['rss_kib'] / 1024:>7.0f}MB "
                  f"{r['bytes'] / 1e6:>7.0f}MB", flush=True)
        print(f"   (after: {load_average()}; {time.perf_counter() - started:.0f} s in all)",
              flush=True)


if __name__ == "__main__":
    main()
