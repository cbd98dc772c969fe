"""The layer order and the "never" rules of docs/architecture.md hold, and the check that
enforces them (import-linter, with the contracts in pyproject.toml) fails on a planted
upward import: a contract that cannot fail would prove nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed")


def _lint(src: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run([str(LINT), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
                          capture_output=True, text=True, env=env, cwd=src, timeout=300,
                          check=False)


def test_the_tree_keeps_every_contract() -> None:
    result = _lint(ROOT / "src")
    assert result.returncode == 0, result.stdout[-3000:]
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(("module", "planted", "named"), [
    ("protocol/lsn.py", "import pgcdc_events.events.records", "pgcdc_events.protocol is not "
     "allowed to import pgcdc_events.events"),
    ("types/oids.py", "import pgcdc_events.adapters.names", "pgcdc_events.types is not "
     "allowed to import pgcdc_events.adapters"),
    ("events/records.py", "import numpy", "pgcdc_events.events is not allowed to import "
     "numpy"),
    ("spark/schema.py", "import pgcdc_events.testing.tables", "pgcdc_events.spark is not "
     "allowed to import pgcdc_events.testing"),
])
def test_a_planted_upward_import_breaks_a_contract(tmp_path: Path, module: str, planted: str,
                                                   named: str) -> None:
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "pgcdc_events", copy / "pgcdc_events",
                    ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / "pgcdc_events" / module
    target.write_text(target.read_text() + f"\n{planted}  # planted\n")
    result = _lint(copy)
    assert result.returncode != 0
    assert named in result.stdout, result.stdout[-3000:]
