"""``pgcdc-events catalog`` against the live server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pgcdc_events.cli import main
from pgcdc_events.types.catalog import CatalogSnapshot


def test_catalog_command_writes_the_snapshot(pg_conn: Any, pg_cluster: Any, tmp_path: Path
                                             ) -> None:
    pg_conn.run("CREATE SCHEMA keep")
    pg_conn.run("CREATE TABLE keep.t (id int PRIMARY KEY, v text NOT NULL DEFAULT 'x')")
    pg_conn.run("CREATE TABLE public.other (id int)")
    database = pg_conn.run("SELECT current_database()")[0][0]
    out = tmp_path / "catalog.json"
    dsn = f"postgresql://postgres@{pg_cluster.host}:{pg_cluster.port}/{database}"
    assert main(["catalog", "--dsn", dsn, "--schema", "keep", "--output", str(out)]) == 0
    snapshot = CatalogSnapshot.from_json(out.read_text())
    assert [t.name for t in snapshot.tables] == ["t"]
    table = snapshot.table("keep", "t")
    assert table is not None and table.primary_key == ("id",)
    assert json.loads(out.read_text())["database"] == database


def test_catalog_reports_connection_failures(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "--dsn", "postgresql://nobody@127.0.0.1:1/none"]) == 1
    err = capsys.readouterr().err
    assert "cannot connect" in err and "Traceback" not in err


def test_catalog_errors_do_not_echo_the_password(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "--dsn", "postgresql://u:s3cret@127.0.0.1:1/db"]) == 1
    err = capsys.readouterr().err
    assert "s3cret" not in err and "cannot connect to 127.0.0.1:1: " in err
    assert main(["catalog", "--dsn", "postgresql://u@h:notaport/db"]) == 1
    assert "port" in capsys.readouterr().err


def test_catalog_against_a_wrong_port_says_connection_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Not the driver's "(timeout is None and source_address is None)"."""
    assert main(["catalog", "--dsn", "postgresql://nobody@127.0.0.1:1/none"]) == 1
    assert capsys.readouterr().err == ("pgcdc-events catalog: error: cannot connect to "
                                       "127.0.0.1:1: connection refused\n")
