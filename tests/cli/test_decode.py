"""``pgcdc-events decode``: the library's records as JSON lines; errors name the capture line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgcdc_events.cli import main
from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.properties import load_properties
from pgcdc_events.protocol import iter_capture
from pgcdc_events.types.catalog import CatalogSnapshot
from support.records import without_run_fields

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "events" / "events-txmeta-truncate-notombstones"
CAPTURES = ROOT / "tests" / "protocol" / "captures"


def _library(capture: Path, props: dict[str, str], catalog: Path | None = None) -> list[dict]:
    config = EventConfig.from_properties(props)
    decoder = EventDecoder(config, catalog=CatalogSnapshot.load(catalog) if catalog else None,
                           run_id="r")
    writer = JsonRecordWriter.for_config(config)
    with open(capture, encoding="utf-8") as fh:
        return [without_run_fields(json.loads(writer.record_line(r)))
                for r in decoder.feed_rows(iter_capture(fh))]


def _decoded(out: str) -> list[dict]:
    return [without_run_fields(line) for line in out.splitlines()]


def test_decode_writes_the_decoders_records_under_a_connector_configuration(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "events.jsonl"
    assert main(["decode", "--capture", str(GOLDEN / "capture.jsonl"),
                 "--catalog", str(GOLDEN / "catalog.json"),
                 "--config", str(GOLDEN / "connector.properties"), "-o", str(target)]) == 0
    ours = _decoded(target.read_text())
    expected = _library(GOLDEN / "capture.jsonl",
                        load_properties(GOLDEN / "connector.properties"), GOLDEN / "catalog.json")
    assert ours == expected
    topics = {r["topic"] for r in ours}
    assert "pgcdc.transaction" in topics  # provide.transaction.metadata=true took effect
    err = capsys.readouterr().err
    note = next(line for line in err.splitlines() if "do not shape events, ignored: " in line)
    assert "slot.name" in note.split("ignored: ")[1].split(", ")


def test_overrides_win_over_the_file_and_the_prefix_defaults_to_pgcdc(
        capsys: pytest.CaptureFixture[str]) -> None:
    capture = CAPTURES / "basic_v1.jsonl"
    assert main(["decode", "--capture", str(capture), "-q"]) == 0
    assert _decoded(capsys.readouterr().out) == _library(capture, {"topic.prefix": "pgcdc"})
    assert main(["decode", "--capture", str(capture), "-q", "-c", "topic.prefix=shop",
                 "-c", "tombstones.on.delete=false"]) == 0
    records = _decoded(capsys.readouterr().out)
    assert records == _library(capture, {"topic.prefix": "shop",
                                         "tombstones.on.delete": "false"})
    assert records and all(r["topic"].startswith("shop.") for r in records)


@pytest.mark.parametrize("limit", ["0", "0.01"])
def test_a_memory_limit_changes_nothing_in_the_output(
        limit: str, capsys: pytest.CaptureFixture[str]) -> None:
    capture = CAPTURES / "stream_interleaved.jsonl"
    assert main(["decode", "--capture", str(capture), "-q"]) == 0
    in_memory = _decoded(capsys.readouterr().out)
    assert main(["decode", "--capture", str(capture), "-q", "--memory-limit", limit]) == 0
    assert _decoded(capsys.readouterr().out) == in_memory


@pytest.mark.parametrize(("lines", "message"), [
    (['{"lsn": "0/1", "xid": 1, "data": "4200"}'], "line 1: "),
    (["", '{"lsn": "0/1", "xid": 1, "data": "zz"}'], "line 2: 'data' as a hex string"),
    # an Insert for a relation never announced: the decoder's error, with the line
    (['{"lsn": "0/1", "xid": 5, "data": "'
      + "42" + "0" * 16 + "0" * 16 + "00000005" + '"}',
      '{"lsn": "0/2", "xid": 5, "data": "49000040004e0000"}'], "line 2: "),
])
def test_errors_name_the_capture_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      lines: list[str], message: str) -> None:
    capture = tmp_path / "bad.jsonl"
    capture.write_text("\n".join(lines) + "\n")
    assert main(["decode", "--capture", str(capture)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pgcdc-events decode: error: ") and message in err
    assert "Traceback" not in err


def test_bad_configuration_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    capture = CAPTURES / "basic_v1.jsonl"
    assert main(["decode", "--capture", str(capture), "-c", "tombstone.on.delete=false"]) == 1
    assert "did you mean tombstones.on.delete" in capsys.readouterr().err
    assert main(["decode", "--capture", str(capture), "--memory-limit", "-1"]) == 1
    assert "--memory-limit must not be negative" in capsys.readouterr().err


@pytest.mark.parametrize("mask", ["column.mask.with.5.chars",
                                  "column.mask.hash.SHA-256.with.salt.pepper"])
def test_a_masked_value_is_never_shown_in_a_conversion_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], mask: str) -> None:
    """The review's case: a masked column's value appeared in clear in the error. Invalid
    UTF-8 in a text column cannot come from PostgreSQL 15: the bytes are built by hand."""
    from pgcdc_events.protocol import (  # noqa: PLC0415
        Begin,
        CaptureRow,
        Commit,
        Insert,
        Lsn,
        Relation,
        RelationColumn,
        TupleData,
        dump_capture_row,
        encode_message,
    )

    relation = Relation(16384, "public", "t", "d", (RelationColumn(1, "id", 23, -1),
                                                    RelationColumn(0, "secret", 25, -1)))
    messages = (Begin(0x200, 0, 700), relation,
                Insert(16384, TupleData(b"tt", (b"1", b"\xffhunter2-pass"))),
                Commit(0, 0x1F0, 0x200, 0))
    capture = tmp_path / "c.jsonl"
    capture.write_text("".join(
        dump_capture_row(CaptureRow(Lsn(0x100 + i), 700, encode_message(m))) + "\n"
        for i, m in enumerate(messages)))
    assert main(["decode", "--capture", str(capture), "-c", "topic.prefix=p",
                 "-c", f"{mask}=public.t.secret"]) == 1
    err = capsys.readouterr().err
    assert "hunter2" not in err
    assert "public.t.secret (text): cannot convert value of a masked column (value not " \
           "shown, 13 bytes): UnicodeDecodeError" in err
    assert err.count("\n") == 1, err
