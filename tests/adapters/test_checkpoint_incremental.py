"""The incremental snapshot's progress in the checkpoint, and chunk lines at the end of a
committed output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgcdc_events.adapters import DurableOutput
from pgcdc_events.adapters.errors import CheckpointError
from pgcdc_events.protocol.capture import dump_chunk_line

STATE = {"incremental_snapshot_primary_key": ["20"], "incremental_snapshot_maximum_key": ["99"],
         "incremental_snapshot_collections": '[{"incremental_snapshot_collections_id":"public.t"}]',
         "incremental_snapshot_correlation_id": "ad-hoc-1"}
UNIT = b'{"lsn": "0/10", "xid": 5, "data": "43"}\n'


def output(path: Path) -> DurableOutput:
    out = DurableOutput(path, kind="capture", slot="s", publications=("p",))
    out.open()
    return out


def test_the_progress_is_committed_with_the_output_and_only_then(tmp_path: Path) -> None:
    path = tmp_path / "cap.jsonl"
    out = output(path)
    out.write(UNIT)
    out.stage_incremental(STATE)
    out.rollback()  # dropped with what it went with
    out.write(UNIT)
    out.commit(0x10, 1, 0)
    assert out.checkpoint.incremental == {}
    out.write(UNIT)
    out.stage_incremental(STATE)
    out.commit(0x20, 1, 0)
    out.write(UNIT)
    out.commit(0x30, 1, 0)  # nothing staged: kept
    out.close()
    again = output(path)
    assert again.checkpoint.incremental == STATE
    again.stage_incremental({})  # the snapshot finished
    again.write(UNIT)
    again.commit(0x40, 1, 0)
    again.close()
    assert "incremental" not in json.loads((tmp_path / "cap.jsonl.checkpoint.json").read_text())


def test_a_malformed_progress_is_named(tmp_path: Path) -> None:
    path = tmp_path / "cap.jsonl"
    out = output(path)
    out.write(UNIT)
    out.commit(0x10, 1, 0)
    out.close()
    checkpoint = tmp_path / "cap.jsonl.checkpoint.json"
    obj = json.loads(checkpoint.read_text())
    obj["incremental"] = ["not", "an", "object"]
    checkpoint.write_text(json.dumps(obj))
    with pytest.raises(CheckpointError, match="field 'incremental' is malformed"):
        output(path)


def test_the_last_line_of_the_last_unit_is_found_past_chunk_lines(tmp_path: Path) -> None:
    """What a restart compares with the slot's first unit (``DeliveredCheck``): chunk lines
    written after the last unit are passed over."""
    path = tmp_path / "cap.jsonl"
    out = output(path)
    out.write(UNIT)
    chunk = {"id": "c", "table": {}, "rows": [["x" * 70_000]]}  # longer than a read back
    out.write(dump_chunk_line(0x10, chunk).encode() + b"\n")
    out.write(dump_chunk_line(0x10, chunk).encode() + b"\n")
    out.commit(0x10, 1, 0)
    assert out.last_line() == UNIT.rstrip(b"\n")
    out.close()
