"""What ``decode`` loads at start-up: not the incremental-snapshot modules of the event
layer, nor the RE2 library of the filters when no filter is configured, nor the YugabyteDB
decoder unless ``plugin.name=yboutput`` (each whole ``decode`` process pays for what it
imports; issues 23 and 24 found them in its start-up)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pgcdc_events

SRC = str(Path(pgcdc_events.__file__).resolve().parent.parent)
_PROBE = r"""
import json, sys
from pgcdc_events.cli import main
code = main(sys.argv[1:])
loaded = sorted(m for m in sys.modules if m == "re2" or m.startswith((
    "pgcdc_events.events.incremental", "pgcdc_events.events.signals",
    "pgcdc_events.events.snapshot_sql", "pgcdc_events.events.yugabyte")))
print(json.dumps({"code": code, "loaded": loaded}))
"""


def _loaded(tmp_path: Path, *extra: str) -> list[str]:
    capture = tmp_path / "empty.jsonl"
    capture.write_bytes(b"")
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run([sys.executable, "-c", _PROBE, "decode", "--capture", str(capture),
                          "--output", str(tmp_path / "out.jsonl"), "--quiet", *extra],
                         env=env, capture_output=True, text=True, check=True)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["code"] == 0
    return list(report["loaded"])


def test_decode_without_filters_loads_neither_re2_nor_the_incremental_modules(
        tmp_path: Path) -> None:
    assert _loaded(tmp_path) == []


def test_decode_with_one_worker_loads_the_yugabyte_decoder_only_for_its_plugin(
        tmp_path: Path) -> None:
    assert _loaded(tmp_path, "--workers", "1") == []
    assert _loaded(tmp_path, "--workers", "1", "-c", "plugin.name=yboutput") == [
        "pgcdc_events.events.yugabyte"]


def test_a_filter_loads_re2_when_it_is_compiled(tmp_path: Path) -> None:
    assert _loaded(tmp_path, "-c", "table.include.list=public\\.t.*") == ["re2"]


def test_the_lazy_names_of_the_event_layer_are_still_there() -> None:
    from pgcdc_events import events  # noqa: PLC0415

    for name in events.__all__:
        assert getattr(events, name) is not None, name
    assert set(events.__all__) <= set(dir(events))
    from pgcdc_events.events import ChunkWindow, parse_signal  # noqa: PLC0415
    from pgcdc_events.events.incremental import ChunkWindow as Same  # noqa: PLC0415

    assert ChunkWindow is Same and callable(parse_signal)


def test_capture_without_decode_loads_no_event_layer() -> None:
    """``capture`` (no ``--decode``, no signals) starts without the event layer, nor RE2:
    the incremental snapshots' modules load when ``signal.data.collection`` is set (a
    top-level import of them made every capture 0.1 s slower in benchmarks/bench_ab.py)."""
    probe = ("import json, sys; import pgcdc_events.cli, pgcdc_events.cli.capture_cmd; "
             "print(json.dumps(sorted(m for m in sys.modules if m == 're2' or "
             "m.startswith('pgcdc_events.events'))))")
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                         text=True, check=True)
    assert json.loads(out.stdout) == []


_RARE = ("hashlib", "_hashlib", "ipaddress", "difflib")
_RARE_PROBE = (
    "import json, sys\n"
    "from pgcdc_events.cli import main\n"
    "code = main(sys.argv[1:])\n"
    f"print(json.dumps({{'code': code, 'loaded': sorted(m for m in sys.modules if m in {_RARE!r})}}))\n")


def test_decode_loads_what_only_rare_columns_and_errors_need_when_they_come(
        tmp_path: Path) -> None:
    """``decode`` starts without OpenSSL's ``hashlib`` (column hash masks, a placeholder of
    a ``uuid[]`` column), ``ipaddress`` (a binary ``inet``) and ``difflib`` (suggestions for
    a misspelt name): each loads when first needed (tests/events and tests/types run those
    paths)."""
    capture = tmp_path / "empty.jsonl"
    capture.write_bytes(b"")
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run([sys.executable, "-c", _RARE_PROBE, "decode", "--capture",
                          str(capture), "--output", str(tmp_path / "out.jsonl"), "--quiet",
                          "-c", "column.mask.hash.SHA-256.with.salt.s=public.t.c"],
                         env=env, capture_output=True, text=True, check=True)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["code"] == 0
    assert report["loaded"] == []
