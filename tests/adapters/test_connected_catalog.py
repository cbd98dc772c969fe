"""``capture --decode`` and ``tail`` read the catalog from their connection: enum, domain
and PostGIS columns and ``source.db`` come out as ``decode --catalog`` gives them; a
catalog of another database is refused unless the user says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pgcdc_events.cli import main
from pgcdc_events.testing.cluster import TempCluster
from support.records import without_run_fields

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def url(pg_cluster: TempCluster, pg_conn: Any) -> str:
    pg_conn.run("CREATE EXTENSION IF NOT EXISTS postgis")
    pg_conn.run("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')")
    pg_conn.run("CREATE DOMAIN positive AS int NOT NULL CHECK (VALUE > 0)")
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, m mood NOT NULL, p positive, "
                "g geometry(Point, 4326), note text NOT NULL DEFAULT 'n')")
    pg_conn.run("CREATE PUBLICATION p FOR TABLE t")
    for slot in ("by_file", "by_capture", "by_tail"):
        pg_conn.run("SELECT pg_create_logical_replication_slot(:s, 'pgoutput')", s=slot)
    pg_conn.run("INSERT INTO t VALUES (1, 'happy', 3, 'SRID=4326;POINT(1 2)', 'a'), "
                "(2, 'sad', 7, NULL, 'b')")
    pg_conn.run("UPDATE t SET m = 'ok', g = 'SRID=4326;POINT(3 4)' WHERE id = 2")
    pg_conn.run("DELETE FROM t WHERE id = 1")
    database = pg_conn.run("SELECT current_database()")[0][0]
    return f"postgresql://{pg_cluster.user}@{pg_cluster.host}:{pg_cluster.port}/{database}"


def _stable(text: str) -> list[dict[str, Any]]:
    return [without_run_fields(line) for line in text.splitlines()]


def _slot(url: str, slot: str) -> list[str]:
    return ["--dsn", url, "--slot", slot, "--publication", "p", "--snapshot-mode", "no_data"]


def test_connected_commands_read_the_catalog_themselves(
        url: str, pg_conn: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    database = pg_conn.run("SELECT current_database()")[0][0]
    catalog = tmp_path / "catalog.json"
    assert main(["catalog", "--dsn", url, "--output", str(catalog)]) == 0
    assert main(["capture", *_slot(url, "by_file"), "--output", f"{tmp_path}/rows/", "-q"]) == 0
    assert main(["decode", "--capture", str(tmp_path / "rows" / "capture.jsonl"),
                 "--catalog", str(catalog), "--output", str(tmp_path / "theirs.jsonl"),
                 "-q"]) == 0
    theirs = _stable((tmp_path / "theirs.jsonl").read_text())
    assert main(["capture", "--decode", *_slot(url, "by_capture"),
                 "--output", f"{tmp_path}/events/"]) == 0
    err = capsys.readouterr().err
    assert main(["tail", *_slot(url, "by_tail"), "-q"]) == 0
    tailed = capsys.readouterr()
    assert tailed.err == ""
    captured = _stable((tmp_path / "events" / "events.jsonl").read_text())
    assert captured == theirs
    assert _stable(tailed.out) == theirs
    assert f"catalog read from database '{database}'" in err and "warning" not in err
    # what the catalog changes: the enum, the domain, PostGIS, source.db
    created = theirs[0]["value"]
    fields = {f["field"]: f for f in created["schema"]["fields"][1]["fields"]}
    assert fields["m"]["name"] == "io.debezium.data.Enum" and not fields["m"]["optional"]
    assert created["payload"]["after"]["m"] == "happy"
    assert fields["p"]["type"] == "int32"  # the domain's base type
    assert fields["g"]["name"] == "io.debezium.data.geometry.Geometry"
    assert created["payload"]["source"]["db"] == database


def test_a_catalog_of_another_database_is_refused_unless_asked(
        url: str, pg_conn: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    # (capfd: capture --decode's decoding process, which warns, writes to the real stderr)
    capsys = capfd
    catalog = tmp_path / "catalog.json"
    assert main(["catalog", "--dsn", url, "--output", str(catalog)]) == 0
    other = json.loads(catalog.read_text())
    other["database"] = "elsewhere"
    for table in other["tables"]:
        table["oid"] += 1  # another database's table of the same name
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps(other))
    capsys.readouterr()
    assert main(["tail", *_slot(url, "by_tail"), "-q", "--catalog", str(foreign)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    database = pg_conn.run("SELECT current_database()")[0][0]
    assert captured.err == (
        f"pgcdc-events tail: error: --catalog '{foreign}' is a snapshot of database "
        f"'elsewhere', but the slot is read from database '{database}': every record would "
        "say source.db 'elsewhere' and be decoded with another database's tables; leave "
        "--catalog out (the catalog is then read from the connection), take it from "
        f"'{database}' (pgcdc-events catalog), or add --catalog-from-another-database to "
        "use it anyway\n")
    assert main(["capture", "--decode", *_slot(url, "by_capture"), "-q", "--output",
                 f"{tmp_path}/events/", "--catalog", str(foreign),
                 "--catalog-from-another-database"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "warning: table \"public\".\"t\" does not match" in err[0], err
    records = _stable((tmp_path / "events" / "events.jsonl").read_text())
    assert main(["tail", *_slot(url, "by_tail"), "-q", "--catalog", str(foreign),
                 "--catalog-from-another-database"]) == 0
    tailed = capsys.readouterr()
    assert _stable(tailed.out) == records
    assert len(tailed.err.splitlines()) == 1, tailed.err  # the warning, once
    assert {r["value"]["payload"]["source"]["db"] for r in records if r["value"]} == \
        {"elsewhere"}


@pytest.mark.parametrize("reader", ["stream", "sql"])
def test_a_table_created_while_capturing_is_decoded_with_its_catalog(
        url: str, pg_conn: Any, tmp_path: Path, reader: str) -> None:
    """A table (and its enum type) created after ``capture --decode`` read the catalog:
    its Relation message is not in that catalog, so the catalog is read again, and its
    records are those of ``decode --catalog`` with a catalog taken afterwards (without the
    second read, the enum column was dropped with a CatalogMismatchWarning)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pgcdc_events", "capture", "--decode", *_slot(url, "by_capture"),
         "--reader", reader, "--follow", "--poll-interval", "0.1", "--max-changes", "6",
         "--output", f"{tmp_path}/events/"],
        env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert "catalog read from database" in first, first
        pg_conn.run("CREATE TYPE late_mood AS ENUM ('meh', 'yay')")
        pg_conn.run("CREATE TABLE late (id int PRIMARY KEY, m late_mood NOT NULL)")
        pg_conn.run("ALTER PUBLICATION p ADD TABLE late")
        pg_conn.run("INSERT INTO late VALUES (1, 'yay')")
        pg_conn.run("UPDATE late SET m = 'meh' WHERE id = 1")
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "warning" not in err, err
    assert err.count("catalog read again from database") == 1, err
    catalog = tmp_path / "catalog.json"
    assert main(["catalog", "--dsn", url, "--output", str(catalog)]) == 0
    assert main(["capture", *_slot(url, "by_file"), "--output", f"{tmp_path}/rows/", "-q"]) == 0
    assert main(["decode", "--capture", str(tmp_path / "rows" / "capture.jsonl"),
                 "--catalog", str(catalog), "--output", str(tmp_path / "theirs.jsonl"),
                 "-q"]) == 0
    theirs = _stable((tmp_path / "theirs.jsonl").read_text())
    captured = _stable((tmp_path / "events" / "events.jsonl").read_text())
    assert captured == theirs
    late = [r["value"] for r in captured
            if r["value"] and r["value"]["payload"]["source"]["table"] == "late"]
    assert [v["payload"]["after"]["m"] for v in late] == ["yay", "meh"]
    fields = {f["field"]: f for f in late[0]["schema"]["fields"][1]["fields"]}
    assert fields["m"]["name"] == "io.debezium.data.Enum" and not fields["m"]["optional"]
