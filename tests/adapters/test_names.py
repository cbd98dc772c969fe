"""Names: identifiers quoted, values bound, table names read by the server, publication names
read as pgoutput reads them, and an output tied to its publication list."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pgcdc_events.adapters.names import (
    check_slot_name,
    quote_ident,
    quote_literal,
    split_identifiers,
)
from pgcdc_events.cli import main
from pgcdc_events.errors import ConfigurationError
from pgcdc_events.testing.cluster import TempCluster

INJECTION = 'public."t"; DROP TABLE victim; --'


@pytest.fixture
def url(pg_cluster: TempCluster, pg_conn: Any) -> str:
    database = pg_conn.run("SELECT current_database()")[0][0]
    pg_conn.run("CREATE TABLE t (id int PRIMARY KEY, v text)")
    pg_conn.run("CREATE TABLE victim (id int)")
    return f"postgresql://{pg_cluster.user}@{pg_cluster.host}:{pg_cluster.port}/{database}"


def _capture(url: str, out: Path, *extra: str, publication: str = "p") -> int:
    return main(["capture", "--dsn", url, "--slot", "s", "--publication", publication,
                 "--output", f"{out}/", "-q", "--snapshot-mode", "no_data", *extra])


def _published(pg_conn: Any, pub: str) -> list[str]:
    return sorted(f"{s}.{t}" for s, t in pg_conn.run(
        "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = :p", p=pub))


def test_a_table_name_cannot_inject_sql(url: str, pg_conn: Any, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert _capture(url, tmp_path / "o", "--create-slot", "--create-publication",
                    "--table", INJECTION) == 1
    err = capsys.readouterr().err
    assert "--table" in err and "Traceback" not in err
    # the victim survives, and nothing was created
    assert pg_conn.run("SELECT to_regclass('victim') IS NOT NULL")[0][0] is True
    assert pg_conn.run("SELECT count(*) FROM pg_publication")[0][0] == 0
    assert pg_conn.run("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 's'"
                       )[0][0] == 0


def test_table_names_are_read_as_sql_reads_them(url: str, pg_conn: Any, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    pg_conn.run('CREATE SCHEMA "Odd Schema"')
    pg_conn.run('CREATE TABLE "Odd Schema"."Mixed ""Q"" t" (id int PRIMARY KEY)')
    # unquoted: folded to lower case, as SQL does, so "T" is t
    assert _capture(url, tmp_path / "o", "--create-slot", "--create-publication",
                    "--table", "PUBLIC.T", "--table", '"Odd Schema"."Mixed ""Q"" t"') == 0
    assert _published(pg_conn, "p") == ['Odd Schema.Mixed "Q" t', "public.t"]
    assert _capture(url, tmp_path / "o2", "--create-publication", "--table", "Victim",
                    "--table", "nosuch", publication="p2") == 1
    err = capsys.readouterr().err
    assert "--table 'nosuch': no such table" in err


def test_publication_names_as_pgoutput_reads_them(url: str, pg_conn: Any, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    pg_conn.run("CREATE PUBLICATION upperpub FOR TABLE t")
    pg_conn.run('CREATE PUBLICATION "a,b" FOR TABLE t')
    pg_conn.run('CREATE PUBLICATION "Mixed" FOR TABLE t')
    pg_conn.run("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    pg_conn.run("INSERT INTO t VALUES (1, 'x')")
    # folded like pg_recvlogical -o publication_names=UpperPub; "a,b" is one name
    assert _capture(url, tmp_path / "o", publication='UpperPub, "a,b",  "Mixed"') == 0
    lines = (tmp_path / "o" / "capture.jsonl").read_text().splitlines()
    assert len(lines) == 4  # B R I C
    assert _capture(url, tmp_path / "o2", publication="Mixed") == 1  # means "mixed"
    assert "publication(s) 'mixed' do not exist" in capsys.readouterr().err


def test_a_changed_publication_list_is_refused(url: str, pg_conn: Any, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    pg_conn.run("CREATE PUBLICATION q FOR TABLE t")
    assert _capture(url, tmp_path / "o", "--create-slot", "--create-publication") == 0
    assert _capture(url, tmp_path / "o", publication="p,q") == 1
    err = capsys.readouterr().err
    assert "was captured with publication(s) p" in err
    assert _capture(url, tmp_path / "o", publication=" P ") == 0  # the same list


def test_split_identifiers() -> None:
    assert split_identifiers('UpperPub, "Mixed""Q" ,"a,b"') == ("upperpub", 'Mixed"Q', "a,b")
    assert split_identifiers("ÄBC") == ("Äbc",)  # only ASCII letters fold
    assert split_identifiers("x" * 70) == ("x" * 63,)  # truncated to NAMEDATALEN - 1
    assert split_identifiers('A"b') == ('a"b',)  # as the server: a quote inside is kept
    for bad in ("", "a,,b", '"', '""', "a b", "a,"):
        with pytest.raises(ConfigurationError):
            split_identifiers(bad, what="--publication")


def test_slot_names_and_quoting() -> None:
    assert check_slot_name("ok_1") == "ok_1"
    for bad in ("", "Upper", "a-b", "s; DROP", "x" * 64):
        with pytest.raises(ConfigurationError):
            check_slot_name(bad)
    assert quote_ident('a"b') == '"a""b"'
    with pytest.raises(ConfigurationError):
        quote_ident("a\x00b")


@pytest.mark.parametrize("conforming", ["on", "off"])
def test_quote_literal_reads_back_as_the_value(pg_conn: Any, conforming: str) -> None:
    """A string constant the adapters write into SQL (chunk bounds, snapshot names) reads
    back as the value itself on a real server, whatever ``standard_conforming_strings``
    says: backslashes, quotes, an ``E'`` of the value's own, non-ASCII."""
    pg_conn.run(f"SET standard_conforming_strings = {conforming}")
    pg_conn.run("SET escape_string_warning = off")
    values = ["plain", "it's", "back\\slash", "\\'; SELECT 1; --", "E'x'", "\\\\n", "é€😀",
              "", "tab\there", "new\nline"]
    for value in values:
        assert pg_conn.run(f"SELECT {quote_literal(value)}")[0][0] == value, value
    assert pg_conn.run(f"SELECT {quote_literal(None)} IS NULL")[0][0] is True
