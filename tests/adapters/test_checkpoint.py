"""The output and its checkpoint: exactly the committed bytes survive, whatever happened."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from pgcdc_events.adapters import (
    CheckpointError,
    DurableOutput,
    StreamOutput,
    output_paths,
)
from pgcdc_events.adapters import checkpoint as module
from pgcdc_events.errors import ConfigurationError, PgCdcError


def _output(path: Path, **kwargs: object) -> DurableOutput:
    options = {"kind": "capture", "slot": "s", "publications": ("p",), **kwargs}
    return DurableOutput(path, **options)  # type: ignore[arg-type]


def test_paths_for_a_file_and_a_directory(tmp_path: Path) -> None:
    assert output_paths(tmp_path / "x.jsonl", "capture") == (
        tmp_path / "x.jsonl", tmp_path / "x.jsonl.checkpoint.json")
    assert output_paths(tmp_path, "events")[0] == tmp_path / "events.jsonl"
    assert output_paths(f"{tmp_path}/new/", "capture")[0] == tmp_path / "new" / "capture.jsonl"


def test_commit_then_reopen(tmp_path: Path) -> None:
    out = _output(tmp_path / "o.jsonl")
    first = out.open()
    assert first.lsn is None and first.offset == 0
    out.write(b"one\n")
    out.write(b"two\n")
    checkpoint = out.commit(0x1000, 2, 5)
    assert (checkpoint.lsn, checkpoint.offset, checkpoint.units, checkpoint.changes) == (
        0x1000, 8, 2, 5)
    out.close()
    again = _output(tmp_path / "o.jsonl")
    assert again.open() == checkpoint
    saved = json.loads((tmp_path / "o.jsonl.checkpoint.json").read_text())
    assert saved["lsn"] == "0/1000" and saved["offset"] == 8


def test_an_uncommitted_tail_is_cut_on_open(tmp_path: Path) -> None:
    out = _output(tmp_path / "o.jsonl")
    out.open()
    out.write(b"kept\n")
    out.commit(10, 1, 1)
    out.write(b"not committed\n")
    out._flush()  # as if the process died after writing, before committing
    os.close(out._fd)  # type: ignore[arg-type]
    out._fd = None
    out._unlock()  # a dead process holds no lock
    with open(tmp_path / "o.jsonl", "ab") as fh:
        fh.write(b'{"half a li')
    again = _output(tmp_path / "o.jsonl")
    again.open()
    assert again.truncated == len(b"not committed\n") + len(b'{"half a li')
    assert (tmp_path / "o.jsonl").read_bytes() == b"kept\n"


def test_rollback_drops_what_was_not_committed(tmp_path: Path) -> None:
    out = _output(tmp_path / "o.jsonl")
    out.open()
    out.write(b"a\n")
    out.commit(1, 1, 1)
    out.write(b"b" * (2 << 20))  # large enough to have reached the file
    out.rollback()
    out.write(b"c\n")
    out.commit(2, 1, 1)
    out.close()
    assert (tmp_path / "o.jsonl").read_bytes() == b"a\nc\n"


@pytest.mark.parametrize("failure", [KeyboardInterrupt, OSError])
def test_an_interrupt_after_the_checkpoint_is_replaced_keeps_the_unit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: type[BaseException]) -> None:
    """A second Ctrl-C (or a failing directory fsync) once the new checkpoint is in place:
    closing must not cut the unit that checkpoint counts, and the output must reopen."""
    out = _output(tmp_path / "o.jsonl")
    out.open()
    out.write(b"one\n")
    out.commit(1, 1, 1)

    def interrupted(path: Path) -> None:
        raise failure()

    monkeypatch.setattr(module, "_fsync_dir", interrupted)
    out.write(b"two\n")
    with pytest.raises((KeyboardInterrupt, CheckpointError)):
        out.commit(2, 1, 1)
    out.close()
    monkeypatch.undo()
    again = _output(tmp_path / "o.jsonl")
    assert again.open().offset == 8
    assert (tmp_path / "o.jsonl").read_bytes() == b"one\ntwo\n"


def test_refuses_an_output_without_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "o.jsonl").write_text("something\n")
    with pytest.raises(CheckpointError, match="no checkpoint"):
        _output(tmp_path / "o.jsonl").open()


def test_refuses_an_output_shorter_than_its_checkpoint(tmp_path: Path) -> None:
    out = _output(tmp_path / "o.jsonl")
    out.open()
    out.write(b"0123456789\n")
    out.commit(5, 1, 1)
    out.close()
    (tmp_path / "o.jsonl").write_bytes(b"0123")
    with pytest.raises(CheckpointError, match="truncated or replaced") as info:
        _output(tmp_path / "o.jsonl").open()
    assert info.value.path == str(tmp_path / "o.jsonl")


def test_refuses_another_slot_or_kind(tmp_path: Path) -> None:
    out = _output(tmp_path / "o.jsonl")
    out.open()
    out.bind({}, {})  # the slot was found readable: from here the output is tied to it
    out.close()
    with pytest.raises(ConfigurationError, match="--slot 'other'"):
        _output(tmp_path / "o.jsonl", slot="other").open()
    with pytest.raises(ConfigurationError, match="capture output"):
        DurableOutput(tmp_path / "o.jsonl", kind="events", slot="s", publications=("p",)).open()


@pytest.mark.parametrize("content", [
    "not json", "[]", '{"format": "other"}',
    '{"format": "pgcdc-events checkpoint 1", "lsn": "zz", "offset": 0}',
    '{"format": "pgcdc-events checkpoint 1", "lsn": null, "offset": -1, "units": 0,'
    ' "changes": 0, "kind": "capture", "slot": "s", "publications": [], "options": {}}',
    '{"format": "pgcdc-events checkpoint 1", "lsn": null, "offset": true, "units": 0}',
])
def test_a_damaged_checkpoint_is_a_clear_error(tmp_path: Path, content: str) -> None:
    (tmp_path / "o.jsonl.checkpoint.json").write_text(content)
    with pytest.raises(CheckpointError) as info:
        _output(tmp_path / "o.jsonl").open()
    assert str(tmp_path / "o.jsonl.checkpoint.json") in str(info.value)
    assert isinstance(info.value, PgCdcError)


def test_checkpoint_is_replaced_atomically(tmp_path: Path) -> None:
    out = _output(tmp_path / "o.jsonl")
    out.open()
    for i in range(5):
        out.write(b"x\n")
        out.commit(i + 1, 1, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "o.jsonl", "o.jsonl.checkpoint.json", "o.jsonl.lock"]


def test_stream_output_flushes_on_commit_only() -> None:
    sink = io.BytesIO()
    out = StreamOutput(sink)
    out.write(b"a\n")
    assert sink.getvalue() == b""
    out.commit(7, 1, 1)
    out.write(b"b\n")
    out.rollback()
    out.commit(8, 0, 0)
    assert sink.getvalue() == b"a\n"
    assert out.checkpoint.lsn == 8
