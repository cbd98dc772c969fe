"""A capture cut inside a transaction: decoded without that transaction, with a warning
naming it (docs/operations.md, 'Running for weeks'), never silently."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgcdc_events.cli import main
from pgcdc_events.cli.decode_cmd import unfinished_transaction
from support.records import without_run_fields

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "events" / "events-txmeta-truncate-notombstones"


def _lines() -> list[str]:
    return (GOLDEN / "capture.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)


def _decode(capture: Path, out: Path, workers: str, capsys: pytest.CaptureFixture[str]
            ) -> tuple[list[str], str]:
    assert main(["decode", "--capture", str(capture), "--catalog",
                 str(GOLDEN / "catalog.json"), "--config", str(GOLDEN / "connector.properties"),
                 "--output", str(out), "--workers", workers, "-q"]) == 0
    records = []
    for line in out.read_text(encoding="utf-8").splitlines():
        records.append(json.dumps(without_run_fields(line), sort_keys=True))
    return records, capsys.readouterr().err


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_capture_cut_inside_a_transaction_is_decoded_without_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], workers: str) -> None:
    lines = _lines()
    begin = max(i for i, line in enumerate(lines) if '"data": "42' in line)
    begin_row = json.loads(lines[begin])
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:-1]), encoding="utf-8")  # the last COMMIT is missing
    whole = tmp_path / "whole.jsonl"
    whole.write_text("".join(lines[:begin]), encoding="utf-8")  # ends at a boundary
    theirs, quiet = _decode(whole, tmp_path / "a.jsonl", workers, capsys)
    ours, err = _decode(cut, tmp_path / "b.jsonl", workers, capsys)
    assert ours == theirs  # nothing of the unfinished transaction
    assert quiet == ""  # a capture that ends at a boundary: no word
    assert err == (f"pgcdc-events decode: warning: the capture ends inside transaction xid "
                   f"{begin_row['xid']} (BEGIN at LSN {begin_row['lsn']}, the last "
                   f"{len(lines) - 1 - begin} lines): it was cut before its COMMIT, so it is "
                   "left out and its changes are not decoded; capture again (or continue the "
                   "capture) to get it whole\n")


def test_the_unfinished_transaction_is_found_across_blocks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pgcdc_events.cli.decode_cmd as decode_cmd  # noqa: PLC0415

    monkeypatch.setattr(decode_cmd, "_TAIL_BLOCK", 7)  # lines split across many reads
    lines = _lines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:-1]), encoding="utf-8")
    found = unfinished_transaction(str(cut))
    begin = max(i for i, line in enumerate(lines) if '"data": "42' in line)
    assert found is not None
    assert found.offset == len("".join(lines[:begin]).encode())
    assert unfinished_transaction(str(GOLDEN / "capture.jsonl")) is None
    assert unfinished_transaction(str(tmp_path / "missing.jsonl")) is None
