"""A consumer's failing property test: hypothesis's explanation names the consumer's lines,
not the testing layer's strategies or builders (``testing/_explain.py``).

The test runs in a pytest of its own (a subprocess), as a user's test suite would, with
a fixed seed: its consumer counts ``numeric(p,s)`` columns twice, so only test cases that
drew one fail, and the strategies took the branch building such a column only in those.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CONSUMER_TEST = '''\
from hypothesis import given, settings

from pgcdc_events.testing.strategies import tables


def column_count(table) -> int:
    count = 0
    for column in table.columns:
        if column.type.startswith("numeric("):
            count += 2  # the consumer's bug
        else:
            count += 1
    return count


@settings(max_examples=200, deadline=None, database=None)
@given(tables())
def test_columns(t) -> None:
    assert column_count(t) == len(t.columns)
'''


def test_the_explanation_names_the_consumers_line(tmp_path: Path) -> None:
    (tmp_path / "test_consumer.py").write_text(CONSUMER_TEST)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HYPOTHESIS"))}
    env["PYTHONPATH"] = str(ROOT / "src")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         "--hypothesis-seed=0", "test_consumer.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    report = proc.stdout + proc.stderr
    assert proc.returncode == 1, report
    explanation = report.split("Explanation:")[1].split("\n\n")[0]
    lines = re.findall(r"^E\s+(\S+\.py):(\d+)$", explanation, re.MULTILINE)
    assert lines, report
    assert (str(tmp_path / "test_consumer.py"), "10") in lines, explanation
    assert "pgcdc_events" not in explanation, explanation
