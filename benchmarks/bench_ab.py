"""A/B: the same figures for two source trees, on the same inputs, in interleaved rounds.

Run: ``.venv/bin/python benchmarks/bench_ab.py [--a /tmp/base/src] [--b ./src]
[--changes 200000] [--rounds 5] [--spark-rounds 3] [--no-spark] [--keep DIR]``.

``--a`` and ``--b`` are the ``src`` directories of two checkouts (default: ``/tmp/base/src``,
a worktree of the commit before a change, and this checkout's ``src``). Every measurement is
a fresh process with ``PYTHONPATH=<tree>`` (each child checks that ``pgcdc_events`` comes from
its tree), started from compiled bytecode (a temporary ``PYTHONPYCACHEPREFIX``, compiled once
before the rounds: neither tree gets a ``__pycache__`` written into it).

The input, made once: a throwaway PostgreSQL 15 (``TempCluster``), the six-column table of
``_common.py``, and ``--changes`` changes: inserts, updates and deletes in transactions of
1 to 3,000 rows, about a third of the transactions holding one row. Before the workload, one
pgoutput slot per capture round per tree and one reference slot are created, so each
``capture`` round reads the same WAL from a fresh slot. The reference slot is captured once
(by tree B, untimed) into the capture file that the other figures read; ``catalog`` is
written once (tree B, untimed). The figures:

- ``capture``: ``pgcdc-events capture`` whole (start-up included) from its own slot into a
  temporary directory (``--snapshot-mode no_data``; it stops once caught up); each round's
  capture file must equal the reference one byte for byte;
- ``decode -w1`` / ``decode -w2``: ``pgcdc-events decode --workers 1`` / ``--workers 2`` of the
  capture whole, into a temporary file (both trees must write as many lines);
- ``read`` / ``feed_row``: in one child process per round, the capture is loaded, then
  ``PgOutputReader.read`` over every message and ``EventDecoder.feed_row`` over every row
  are timed (one pass each; start-up and loading not timed);
- ``spark decode`` (``--spark-rounds``, default 3, as each round starts a JVM): in a child,
  a ``local[2]`` session and ``read_capture`` of the JSON Lines capture (not timed), one
  untimed warm-up pass, then ``decode_capture(persist=False)`` + every table written to
  Spark's ``noop`` sink, timed.

All runs use ``topic.prefix=pgcdc`` and ``provide.transaction.metadata=true``. A round runs
every figure for both trees, the tree that goes first alternating from round to round
(A B, B A, A B...), so a change in the machine's load falls on both. The table gives each
figure's median wall seconds for A and for B (and the rate: messages, records or event
objects per second), the ratio of the medians B/A (above 1: B is slower), the range and the
median of the per-round ratios (each B run over the A run of its round), the ratio of the
CPU-second medians (user + system of the process and its workers; the in-process figures'
``process_time``; none for Spark, whose work is in the JVM and its Python workers), and
"within 5%" or "slower by X%" (of the wall B/A). On a loaded machine the CPU ratio is the
steadier one; ``capture``'s wall time also holds the server's decoding of the WAL. The load
average is printed before and after. ``--figures`` runs a subset (``--no-spark``: all but
Spark).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PROPS = ["-c", "topic.prefix=pgcdc", "-c", "provide.transaction.metadata=true"]
TREES = ("A", "B")
FIGURES = ("capture", "decode -w1", "decode -w2", "read", "feed_row", "spark decode")

#: Transaction sizes in turn: 100 one-row transactions, then larger ones (4,200 changes).
SIZES = (1,) * 100 + (10, 3000, 50, 1000, 40)


def workload(changes: int) -> list[tuple[str, int]]:
    """(kind, rows) of each transaction: kinds in turn insert, update, insert, delete,
    where an update or delete needs that many live rows (else an insert)."""
    plan: list[tuple[str, int]] = []
    live = total = i = 0
    kinds = ("insert", "update", "insert", "delete")
    while total < changes:
        size = min(SIZES[i % len(SIZES)], changes - total)
        kind = kinds[i % len(kinds)]
        if kind != "insert" and live < size:
            kind = "insert"
        live += size if kind == "insert" else -size if kind == "delete" else 0
        plan.append((kind, size))
        total += size
        i += 1
    return plan


def prepare(dsn: dict[str, object], changes: int, slots: list[str]) -> int:
    """The table, a publication, the slots, then the workload; the transactions' count."""
    import pg8000.native
    from _common import SIX_COLUMN_TABLE

    con = pg8000.native.Connection(**dsn)
    con.run(SIX_COLUMN_TABLE)
    con.run("CREATE PUBLICATION ab_pub FOR ALL TABLES")
    for slot in slots:
        con.run("SELECT pg_create_logical_replication_slot(:s, 'pgoutput')", s=slot)
    lo = hi = 1  # live ids: [lo, hi)
    plan = workload(changes)
    for kind, size in plan:
        if kind == "insert":
            con.run("INSERT INTO bench SELECT g, 'name ' || g, now() - g * interval '1 second',"
                    " g * 1.25, g % 2 = 0, repeat('x', (g % 40)::int)"
                    " FROM generate_series(CAST(:a AS bigint), CAST(:b AS bigint)) g",
                    a=hi, b=hi + size - 1)
            hi += size
        elif kind == "update":
            # the newest rows, so that an update and a later delete touch different ones
            con.run("UPDATE bench SET amount = amount + 1, active = NOT active,"
                    " note = note || 'u' WHERE id BETWEEN :a AND :b", a=hi - size, b=hi - 1)
        else:
            con.run("DELETE FROM bench WHERE id BETWEEN :a AND :b", a=lo, b=lo + size - 1)
            lo += size
    con.close()
    return len(plan)


# ---------------------------------------------------------------------------- children
# Run as ``python bench_ab.py --child KIND ...`` with PYTHONPATH=<tree>: JSON on stdout.

def _check_tree(tree: str) -> None:
    import pgcdc_events

    where = Path(pgcdc_events.__file__).resolve()
    if not str(where).startswith(str(Path(tree).resolve()) + os.sep):
        raise SystemExit(f"pgcdc_events came from {where}, not from {tree}")


def child_in_process(tree: str, capture: str, catalog_path: str) -> dict[str, float]:
    """``PgOutputReader.read`` and ``EventDecoder.feed_row`` over the capture, one pass each."""
    import time

    from pgcdc_events.events import EventConfig, EventDecoder
    from pgcdc_events.protocol import PgOutputReader, iter_capture
    from pgcdc_events.types.catalog import CatalogSnapshot

    _check_tree(tree)
    catalog = CatalogSnapshot.load(catalog_path)
    with open(capture, encoding="utf-8") as fh:
        rows = list(iter_capture(fh))
    config = EventConfig.from_properties({"topic.prefix": "pgcdc",
                                          "provide.transaction.metadata": "true"})
    reader = PgOutputReader()
    started, cpu = time.perf_counter(), time.process_time()
    for row in rows:
        reader.read(row.data)
    read_s, read_cpu = time.perf_counter() - started, time.process_time() - cpu
    decoder = EventDecoder(config, catalog=catalog)
    started, cpu = time.perf_counter(), time.process_time()
    objects = sum(len(decoder.feed_row(row)) for row in rows)
    feed_s, feed_cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"read": read_s, "read_cpu": read_cpu, "feed_row": feed_s, "feed_row_cpu": feed_cpu,
            "messages": len(rows), "objects": objects}


def child_spark(tree: str, capture: str, catalog_path: str) -> dict[str, float]:
    """``decode_capture`` + every table to the ``noop`` sink on local[2], after a warm-up."""
    import time

    from pgcdc_events.events import EventConfig
    from pgcdc_events.spark import decode_capture, read_capture
    from pgcdc_events.spark._session import local_session
    from pgcdc_events.types.catalog import CatalogSnapshot

    _check_tree(tree)
    spark = local_session("local[2]", "bench_ab", conf={
        "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "2g",
        "spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    # the Python workers import the tree's code too
    seen = set(spark.sparkContext.parallelize(range(2), 2).map(
        lambda _: __import__("pgcdc_events").__file__).collect())
    if not all(str(Path(s).resolve()).startswith(str(Path(tree).resolve())) for s in seen):
        raise SystemExit(f"Spark workers imported pgcdc_events from {seen}, not {tree}")
    catalog = CatalogSnapshot.load(catalog_path)
    config = EventConfig.from_properties({"topic.prefix": "pgcdc",
                                          "provide.transaction.metadata": "true"})
    df = read_capture(spark, capture)

    def once() -> float:
        started = time.perf_counter()
        decoded = decode_capture(df, config, catalog=catalog, persist=False)
        for table in decoded.tables:
            decoded.table(table).write.format("noop").mode("overwrite").save()
        return time.perf_counter() - started

    once()
    seconds = once()
    spark.stop()
    return {"spark": seconds}


# ---------------------------------------------------------------------------- parent

def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


#: Runs one command and reports its wall seconds, CPU seconds (user + system, its waited-for
#: children included: the workers of ``decode --workers 2``) and exit status as JSON; as
#: bench_cli's launcher, a small fresh interpreter so that nothing of this one is counted.
_LAUNCHER = r"""
import json, os, subprocess, sys, time
started = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
err = proc.stderr.read()
_, status, usage = os.wait4(proc.pid, 0)
seconds = time.perf_counter() - started
sys.stderr.buffer.write(err)
print(json.dumps({"seconds": seconds, "cpu": usage.ru_utime + usage.ru_stime,
                  "code": os.waitstatus_to_exitcode(status)}))
"""


class Runner:
    """Runs commands under one tree's PYTHONPATH, from precompiled bytecode."""

    def __init__(self, trees: dict[str, str], pycache: str) -> None:
        base = {k: v for k, v in os.environ.items()
                if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
        base["PYTHONPYCACHEPREFIX"] = pycache
        self.env = {name: {**base, "PYTHONPATH": src} for name, src in trees.items()}
        self.trees = trees
        for name, src in trees.items():
            subprocess.run([sys.executable, "-m", "compileall", "-q", src], env=self.env[name],
                           check=True, stdout=subprocess.DEVNULL)

    def cli(self, tree: str, args: list[str]) -> tuple[float, float]:
        """Wall and CPU seconds of ``python -m pgcdc_events ARGS``; it must succeed."""
        launched = subprocess.run([sys.executable, "-c", _LAUNCHER, sys.executable, "-m",
                                   "pgcdc_events", *args], env=self.env[tree], check=False,
                                  capture_output=True, text=True, errors="replace")
        report = json.loads(launched.stdout) if launched.stdout.strip() else {"code": -1}
        if launched.returncode != 0 or report["code"] != 0:
            raise SystemExit(f"{args[0]} (tree {tree}) failed: {launched.stderr[-2000:]}")
        return float(report["seconds"]), float(report["cpu"])

    def child(self, tree: str, kind: str, *args: str) -> dict[str, float]:
        out = subprocess.run([sys.executable, __file__, "--child", kind, self.trees[tree],
                              *args], env=self.env[tree], capture_output=True, text=True,
                             check=False)
        if out.returncode != 0:
            raise SystemExit(f"{kind} child of tree {tree} failed: {out.stderr[-3000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])


def count_lines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


def verdict(ratio: float) -> str:
    if ratio > 1.05:
        return f"slower by {(ratio - 1) * 100:.1f}%"
    if ratio < 0.95:
        return f"within 5% (faster by {(1 - ratio) * 100:.1f}%)"
    return "within 5%"


Results = dict[str, dict[str, list[tuple[float, float | None]]]]


def print_table(results: Results, counts: dict[str, float]) -> None:
    """Per figure: wall-second medians, rates, B/A of the medians, the per-round ratios'
    range and median, the B/A of the CPU-second medians, and the verdict (on wall B/A)."""
    print(f"\n{'figure':13} {'n':>2} {'A med s':>8} {'B med s':>8} {'A per s':>9} "
          f"{'B per s':>9} {'B/A':>6} {'round B/A min-max':>18} {'(med)':>6} {'CPU B/A':>7}"
          "  verdict")
    for figure, by_tree in results.items():
        a, b = by_tree["A"], by_tree["B"]
        if not a or not b:
            continue
        ma, mb = statistics.median(w for w, _ in a), statistics.median(w for w, _ in b)
        ratios = [y[0] / x[0] for x, y in zip(a, b, strict=True)]
        cpu_a = [c for _, c in a if c is not None]
        cpu_b = [c for _, c in b if c is not None]
        cpu = (f"{statistics.median(cpu_b) / statistics.median(cpu_a):>7.3f}"
               if cpu_a and cpu_b else f"{'-':>7}")
        count = counts.get(figure, 0.0)
        rate_a = f"{count / ma:>9,.0f}" if count else f"{'-':>9}"
        rate_b = f"{count / mb:>9,.0f}" if count else f"{'-':>9}"
        spread = f"{min(ratios):.3f}-{max(ratios):.3f}"
        print(f"{figure:13} {len(a):>2} {ma:>8.3f} {mb:>8.3f} {rate_a} {rate_b} "
              f"{mb / ma:>6.3f} {spread:>18} {statistics.median(ratios):>6.3f} {cpu}"
              f"  {verdict(mb / ma)}", flush=True)


def chosen_figures(names: str, *, no_spark: bool) -> list[str]:
    """The figures ``--figures`` names (comma-separated), less Spark's with ``--no-spark``."""
    figures = [f.strip() for f in names.split(",")]
    if no_spark and "spark decode" in figures:
        figures.remove("spark decode")
    if unknown := set(figures) - set(FIGURES):
        raise SystemExit(f"unknown figures: {', '.join(sorted(unknown))}")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", default="/tmp/base/src", help="tree A's src (default %(default)s)")
    parser.add_argument("--b", default=str(ROOT / "src"), help="tree B's src (default: this "
                        "checkout's)")
    parser.add_argument("--changes", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--spark-rounds", type=int, default=3)
    parser.add_argument("--no-spark", action="store_true")
    parser.add_argument("--figures", default=",".join(FIGURES),
                        help="comma-separated subset of: %(default)s")
    parser.add_argument("--keep", metavar="DIR", help="keep the capture and catalog here")
    parser.add_argument("--child", nargs=4, metavar=("KIND", "TREE", "CAPTURE", "CATALOG"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, tree, capture, catalog = args.child
        run = {"in-process": child_in_process, "spark": child_spark}[kind]
        print(json.dumps(run(tree, capture, catalog)))
        return

    trees = {"A": str(Path(args.a).resolve()), "B": str(Path(args.b).resolve())}
    sys.path.insert(0, trees["B"])  # TempCluster, for the workload
    from pgcdc_events.testing.cluster import TempCluster

    print(f"A = {trees['A']}\nB = {trees['B']}\npython {sys.version.split()[0]}, "
          f"{os.cpu_count()} cores; load average before: {loadavg()}", flush=True)
    pycache = tempfile.mkdtemp(prefix="bench-ab-pycache-")
    runner = Runner(trees, pycache)
    figures = chosen_figures(args.figures, no_spark=args.no_spark)
    results: Results = {f: {"A": [], "B": []} for f in FIGURES}
    counts: dict[str, float] = {}
    slots = ["ref"] + [f"cap_{t.lower()}{r}" for r in range(args.rounds) for t in TREES
                       if "capture" in figures]
    with TempCluster(settings={"max_wal_size": "8GB"}) as cluster, \
            tempfile.TemporaryDirectory(prefix="bench-ab-") as tmp:
        work = Path(tmp)
        transactions = prepare(cluster.dsn(), args.changes, slots)
        dsn = (f"host={cluster.host} port={cluster.port} user={cluster.user} "
               f"dbname={cluster.database}")
        slot_args = ["--dsn", dsn, "--publication", "ab_pub", "--quiet",
                     "--snapshot-mode", "no_data"]
        catalog = work / "catalog.json"
        runner.cli("B", ["catalog", "--dsn", dsn, "--output", str(catalog)])
        (work / "ref").mkdir()
        runner.cli("B", ["capture", "--output", str(work / "ref"), "--slot", "ref", *slot_args])
        capture = work / "ref" / "capture.jsonl"
        reference = sha256(capture)
        messages = count_lines(capture)
        counts.update({"capture": messages, "read": messages})
        print(f"{args.changes:,} changes in {transactions:,} transactions: {messages:,} "
              f"messages ({capture.stat().st_size / 1e6:.0f} MB)", flush=True)
        if args.keep:
            Path(args.keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(capture, Path(args.keep) / "capture.jsonl")
            shutil.copy(catalog, Path(args.keep) / "catalog.json")

        for r in range(args.rounds if set(figures) - {"spark decode"} else 0):
            order = TREES if r % 2 == 0 else TREES[::-1]
            for tree in order if "capture" in figures else ():
                out = work / f"cap-{tree}{r}"
                out.mkdir()
                results["capture"][tree].append(runner.cli(
                    tree, ["capture", "--output", str(out), "--slot", f"cap_{tree.lower()}{r}",
                           *slot_args]))
                if sha256(out / "capture.jsonl") != reference:
                    raise SystemExit(f"tree {tree}'s capture (round {r}) differs from the "
                                     "reference capture")
                shutil.rmtree(out)
            for workers in [w for w in ("1", "2") if f"decode -w{w}" in figures]:
                lines = {}
                for tree in order:
                    out = work / f"decoded-{tree}.jsonl"
                    results[f"decode -w{workers}"][tree].append(runner.cli(
                        tree, ["decode", "--capture", str(capture), "--catalog", str(catalog),
                               *PROPS, "--workers", workers, "--quiet", "--output", str(out)]))
                    lines[tree] = count_lines(out)
                    out.unlink()
                if lines["A"] != lines["B"]:
                    raise SystemExit(f"decode --workers {workers}: A wrote {lines['A']} lines, "
                                     f"B {lines['B']}")
                counts[f"decode -w{workers}"] = lines["B"]
            objects = {}
            for tree in order if {"read", "feed_row"} & set(figures) else ():
                got = runner.child(tree, "in-process", str(capture), str(catalog))
                results["read"][tree].append((got["read"], got["read_cpu"]))
                results["feed_row"][tree].append((got["feed_row"], got["feed_row_cpu"]))
                objects[tree] = got["objects"]
            if objects and objects["A"] != objects["B"]:
                raise SystemExit(f"feed_row: A made {objects['A']} objects, B {objects['B']}")
            counts["feed_row"] = objects.get("B", 0)
            print(f"round {r + 1}/{args.rounds} done, load average {loadavg()}", flush=True)
            print_table(results, counts)

        if "spark decode" in figures:
            for r in range(args.spark_rounds):
                for tree in (TREES if r % 2 == 0 else TREES[::-1]):
                    got = runner.child(tree, "spark", str(capture), str(catalog))
                    results["spark decode"][tree].append((got["spark"], None))
                print(f"spark round {r + 1}/{args.spark_rounds} done, "
                      f"load average {loadavg()}", flush=True)
            counts["spark decode"] = messages
    shutil.rmtree(pycache, ignore_errors=True)
    print(f"\n{args.changes:,} changes, {messages:,} messages; rounds: {args.rounds} "
          f"(spark: {args.spark_rounds if 'spark decode' in figures else 0}); per s = count / median "
          f"(messages for capture, read and spark decode; records for decode; event objects "
          f"for feed_row)")
    print_table(results, counts)
    print(f"\nload average after: {loadavg()}")


if __name__ == "__main__":
    main()
