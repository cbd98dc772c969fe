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
figure's median seconds for A and for B, the ratio of the medians B/A (above 1: B is
slower), the range of the per-round ratios (each B run over the A run of its round), and
"within 5%" or "slower by X%". The load average is printed before and after.
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
    started = time.perf_counter()
    for row in rows:
        reader.read(row.data)
    read_s = time.perf_counter() - started
    decoder = EventDecoder(config, catalog=catalog)
    started = time.perf_counter()
    objects = sum(len(decoder.feed_row(row)) for row in rows)
    feed_s = time.perf_counter() - started
    return {"read": read_s, "feed_row": feed_s, "messages": len(rows), "objects": objects}


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

    def cli(self, tree: str, args: list[str]) -> float:
        """Wall seconds of ``python -m pgcdc_events ARGS`` (bench_cli's launcher)."""
        from bench_cli import timed

        seconds, _ = timed([sys.executable, "-m", "pgcdc_events", *args], self.env[tree])
        return seconds

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


def print_table(results: dict[str, dict[str, list[float]]], counts: dict[str, float]) -> None:
    print(f"\n{'figure':28} {'n':>3} {'A median s':>11} {'B median s':>11} {'A per s':>10} "
          f"{'B per s':>10} {'B/A':>6} {'round B/A':>13}  verdict")
    for figure, by_tree in results.items():
        a, b = by_tree["A"], by_tree["B"]
        if not a or not b:
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        ratios = [y / x for x, y in zip(a, b, strict=True)]
        count = counts.get(figure, 0.0)
        rate_a = f"{count / ma:>10,.0f}" if count else f"{'-':>10}"
        rate_b = f"{count / mb:>10,.0f}" if count else f"{'-':>10}"
        print(f"{figure:28} {len(a):>3} {ma:>11.3f} {mb:>11.3f} {rate_a} {rate_b} "
              f"{mb / ma:>6.3f} {min(ratios):>6.3f}-{max(ratios):<6.3f}  {verdict(mb / ma)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", default="/tmp/base/src", help="tree A's src (default %(default)s)")
    parser.add_argument("--b", default=str(ROOT / "src"), help="tree B's src (default: this "
                        "checkout's)")
    parser.add_argument("--changes", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--spark-rounds", type=int, default=3)
    parser.add_argument("--no-spark", action="store_true")
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
    figures = ["capture", "decode -w1", "decode -w2", "read", "feed_row"]
    if not args.no_spark:
        figures.append("spark decode")
    results: dict[str, dict[str, list[float]]] = {f: {"A": [], "B": []} for f in figures}
    counts: dict[str, float] = {}
    slots = ["ref"] + [f"cap_{t.lower()}{r}" for r in range(args.rounds) for t in TREES]
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

        for r in range(args.rounds):
            order = TREES if r % 2 == 0 else TREES[::-1]
            for tree in order:
                out = work / f"cap-{tree}{r}"
                out.mkdir()
                results["capture"][tree].append(runner.cli(
                    tree, ["capture", "--output", str(out), "--slot", f"cap_{tree.lower()}{r}",
                           *slot_args]))
                if sha256(out / "capture.jsonl") != reference:
                    raise SystemExit(f"tree {tree}'s capture (round {r}) differs from the "
                                     "reference capture")
                shutil.rmtree(out)
            for workers in ("1", "2"):
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
            for tree in order:
                got = runner.child(tree, "in-process", str(capture), str(catalog))
                results["read"][tree].append(got["read"])
                results["feed_row"][tree].append(got["feed_row"])
                objects[tree] = got["objects"]
            if objects["A"] != objects["B"]:
                raise SystemExit(f"feed_row: A made {objects['A']} objects, B {objects['B']}")
            counts["feed_row"] = objects["B"]
            print(f"round {r + 1}/{args.rounds} done, load average {loadavg()}", flush=True)
            print_table(results, counts)

        if not args.no_spark:
            for r in range(args.spark_rounds):
                for tree in (TREES if r % 2 == 0 else TREES[::-1]):
                    got = runner.child(tree, "spark", str(capture), str(catalog))
                    results["spark decode"][tree].append(got["spark"])
                print(f"spark round {r + 1}/{args.spark_rounds} done, "
                      f"load average {loadavg()}", flush=True)
            counts["spark decode"] = messages
    shutil.rmtree(pycache, ignore_errors=True)
    print(f"\n{args.changes:,} changes, {messages:,} messages; rounds: {args.rounds} "
          f"(spark: {0 if args.no_spark else args.spark_rounds}); per s = count / median "
          f"(messages for capture, read and spark decode; records for decode; event objects "
          f"for feed_row)")
    print_table(results, counts)
    print(f"\nload average after: {loadavg()}")


if __name__ == "__main__":
    main()
