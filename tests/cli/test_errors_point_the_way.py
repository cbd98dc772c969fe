"""Errors a new user meets first say what was expected and how to get it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgcdc_events.adapters.pg8000 import parse_dsn
from pgcdc_events.cli import main
from pgcdc_events.errors import ConfigurationError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CAPTURE = str(EXAMPLES / "demo-capture.jsonl")


@pytest.mark.parametrize("dsn", [
    "postgressql://cdc:s3cret@db/app",   # a misspelled scheme
    "postgresql:/cdc:s3cret@db/app",     # one slash
    "postgresql//cdc:s3cret@db/app",     # no colon
    "cdc:s3cret@db/app",                 # no scheme at all
])
def test_a_url_shaped_dsn_with_a_typo_is_called_a_url(dsn: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_dsn(dsn)
    text = str(caught.value)
    assert "looks like a URL" in text and "postgresql://" in text
    assert "key=value, got" not in text
    assert "s3cret" not in text  # never print a secret


def test_key_value_dsns_still_parse() -> None:
    assert parse_dsn("host=db dbname=app user=cdc")["database"] == "app"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main(argv)
    return status, capsys.readouterr().err


def test_a_kafka_connect_json_as_config_asks_for_properties(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rest = tmp_path / "connector.json"
    rest.write_text(json.dumps({"name": "inventory", "config": {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "topic.prefix": "inventory"}}, indent=2))
    status, err = _run(["decode", "--capture", CAPTURE, "--config", str(rest)], capsys)
    assert status == 1
    assert "unknown connector property" not in err
    assert "this is JSON" in err and "Java .properties file" in err
    assert "jq -r" in err  # how to convert it


def test_a_non_catalog_json_as_catalog_says_what_a_catalog_is(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "settings.json"
    other.write_text('{"topic.prefix": "inventory"}')
    status, err = _run(["decode", "--capture", CAPTURE, "--catalog", str(other)], capsys)
    assert status == 1
    assert "format None" not in err
    assert "not a catalog snapshot" in err and "pgcdc-events catalog --dsn" in err


def test_a_capture_as_catalog_says_one_document_is_expected(
        capsys: pytest.CaptureFixture[str]) -> None:
    status, err = _run(["decode", "--capture", CAPTURE, "--catalog", CAPTURE], capsys)
    assert status == 1 and "one JSON document is expected" in err


def test_counts_of_one_are_singular(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pgcdc_events.cli._io import count  # noqa: PLC0415

    assert [count(1, "table"), count(2, "table"), count(1234, "change")] == [
        "1 table", "2 tables", "1,234 changes"]
    one = tmp_path / "one.jsonl"
    one.write_text('{"topic": "t", "key": null, "value": null}\n')
    status, err = _run(["validate", str(one)], capsys)
    assert status == 0 and "1 record," in err and "1 records" not in err


def test_the_summary_counts_records_by_topic_and_op(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The README demo's table, checked against the records it summarises."""
    target = tmp_path / "records.jsonl"
    status, err = _run(["decode", "--capture", CAPTURE, "--catalog",
                        str(EXAMPLES / "demo-catalog.json"), "--output", str(target),
                        "--summary"], capsys)
    assert status == 0
    records = [json.loads(line) for line in target.read_text().splitlines()]
    lines = err.splitlines()
    assert lines[0] == (f"{len(records)} records from 21 messages, written to {target}"
                        " (JsonConverter JSON, one a line)")
    header = lines[1].split()
    table = {row.split()[0]: dict(zip(header[1:], row.split()[1:], strict=True))
             for row in lines[2:] if row.startswith("  ") and not row.startswith("  (")}
    for topic, cells in table.items():
        for op, cell in cells.items():
            expected = sum(1 for r in records if r["topic"] == topic and (
                (r["value"] is None and op == "tombstone")
                or (r["value"] is not None and r["value"]["payload"].get("op") == op)))
            assert (cell if cell != "." else "0") == str(expected), (topic, op)
    assert sorted(table) == sorted({r["topic"] for r in records})


@pytest.mark.parametrize(("dsn", "message"), [
    ("host=db password=my secret words",
     "--dsn: expected key=value, got a word (not shown) without '=' after password=: a value "
     "with spaces must be quoted, as in password='two words'"),
    ("host=db password=my secret=words",
     "--dsn: parameter(s) 1 word(s) that are no libpq parameter (not shown: an unquoted value "
     "with spaces, such as a password, splits into words; quote it as in password='two "
     "words') not supported by pgcdc-events (pg8000): remove them (they are refused rather "
     "than ignored)"),
    ("host=db port= password=secret", "--dsn: port must be a number from 1 to 65535"),
    ("host=db sslmode= secret", "--dsn: sslmode (value not shown) is not supported (only "
     "disable, allow, prefer, require, verify-ca, verify-full)"),
    ("host=db connect_timeout= secret", "--dsn: connect_timeout must be a number of seconds "
     "(the value given is not one)"),
])
def test_dsn_errors_never_echo_a_word_of_the_password(dsn: str, message: str) -> None:
    """The review's case: an unquoted password with spaces had a word of it printed."""
    with pytest.raises(ConfigurationError) as caught:
        parse_dsn(dsn)
    assert str(caught.value) == message
    assert "secret" not in str(caught.value)


@pytest.mark.parametrize("dsn", ["postgresql://cdc:pw@[::1/app", "postgresql://cdc@::1]:5432/app",
                                 "postgresql://cdc@[::1:5432/app"])
def test_a_malformed_ipv6_url_is_one_line(dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, err = _run(["catalog", "--dsn", dsn], capsys)
    assert status == 1
    assert err == ("pgcdc-events catalog: error: --dsn: the URL's host is malformed (an IPv6 "
                   "address goes in brackets, as in postgresql://cdc@[2001:db8::1]:5432/app)\n")


# ---------------------------------------------------------------- messages, as a user sees them


@pytest.mark.parametrize("argv", [["inspect", "{path}"],
                                  ["decode", "--capture", "{path}", "--workers", "1"],
                                  ["decode", "--capture", "{path}", "--workers", "2"],
                                  ["spark", "decode", "--capture", "{path}", "--output",
                                   "{out}", "-q"]])
def test_a_line_that_is_not_json_says_not_valid_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """It read "line 2: valid JSON (Unterminated string...)": a word was missing."""
    path = tmp_path / "c.jsonl"
    good = Path(CAPTURE).read_text().splitlines()[0]
    path.write_text(good + '\n{"lsn": "0/1", "xid": 1, "data": "42\n')
    args = [a.format(path=path, out=tmp_path / "out") for a in argv]
    status, err = _run(args, capsys)
    assert status == 1
    where = f"{path} is not a capture: " if argv[0] == "spark" else ""
    assert err == (f"pgcdc-events {argv[0]}: error: {where}line 2: not valid JSON (Invalid "
                   "control character at: line 1 column 37 (char 36))\n")


def test_a_directory_as_capture_says_it_is_one(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """It gave a bare "[Errno 21] Is a directory"."""
    for command in (["decode", "--capture"], ["inspect"]):
        status, err = _run([*command, f"{tmp_path}/"], capsys)
        assert status == 1
        assert err == (f"pgcdc-events {command[0]}: error: {tmp_path}/ is a directory, not a "
                       "file: give a file's path\n")
    (tmp_path / "capture-0000000000-0000000001000000.jsonl").write_text("")
    status, err = _run(["decode", "--capture", str(tmp_path)], capsys)
    assert status == 1
    assert err == (f"pgcdc-events decode: error: {tmp_path} is a directory of rotating capture "
                   f"files, not a capture file: read its files in order, as one capture: cat "
                   f"{tmp_path}/capture-*.jsonl | pgcdc-events decode --capture - (or follow it "
                   "with pgcdc-events spark stream)\n")
