"""Out-of-order input never lets an older change win in a Delta table.

Generated histories of a few keys (creates, updates, deletes, in sequence order) are cut
into batches that reach :class:`~pgcdc_events.spark.delta.DeltaTarget` in any order: some
replayed under the same batch id (Spark after a failure: the table's ``txn`` skips them),
some delivered again later under a new id (a capture file delivered late: every change in
it is older than what the table holds). The SCD type 1 table is the state after the last
change of each key; the SCD type 2 table is the sequence of states, each version from the
change that began it to the one that ended it. A delete that arrives before an older
create is kept as a tombstone for its retention, measured on the target's clock: the old
create does not bring the row back before it ends, and may after."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("deltalake")

import deltalake
import pyarrow as pa

from pgcdc_events.spark.autocdc import END_AT, OP, SEQUENCE, START_AT, format_sequence
from pgcdc_events.spark.delta import DeltaTarget

KEYS = (1, 2, 3)


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[int, str, int, str]]:
    """(sequence, op, key, value) in sequence order, valid against the keys' existence."""
    exists: set[int] = set()
    out = []
    for seq in range(1, draw(st.integers(1, 14)) + 1):
        key = draw(st.sampled_from(KEYS))
        if key in exists:
            op = draw(st.sampled_from(["u", "u", "d"]))
        else:
            op = "c"
        (exists.discard if op == "d" else exists.add)(key)
        out.append((seq, op, key, f"v{seq}"))
    return out


def _batch(changes: list[tuple[int, str, int, str]]) -> Any:
    return pa.table({"id": pa.array([c[2] for c in changes], pa.int64()),
                     "v": [c[3] for c in changes], OP: [c[1] for c in changes],
                     SEQUENCE: [format_sequence(1, c[0]) for c in changes]})


def _deliver(target: DeltaTarget, history: list[tuple[int, str, int, str]], rng: random.Random
             ) -> None:
    batches, i = [], 0
    while i < len(history):
        n = rng.randint(1, 3)
        batches.append(history[i:i + n])
        i += n
    rng.shuffle(batches)
    batch_id = 0
    late = []
    for batch in batches:
        target.apply(_batch(batch), batch_id)
        if rng.random() < 0.4:  # Spark replays the batch: the same id
            assert target.apply(_batch(batch), batch_id) is None
        if rng.random() < 0.4:
            late.append(batch)
        batch_id += 1
    for batch in late:  # files delivered again, late, under new ids: all older
        plan = target.apply(_batch(batch), batch_id)
        assert plan is None or plan.applied == 0, batch
        batch_id += 1


def _final(history: list[tuple[int, str, int, str]]) -> dict[int, str]:
    state: dict[int, str] = {}
    for _, op, key, value in history:
        if op == "d":
            state.pop(key, None)
        else:
            state[key] = value
    return state


def _versions(history: list[tuple[int, str, int, str]]) -> set[tuple[Any, ...]]:
    out = set()
    open_: dict[int, tuple[int, str]] = {}
    for seq, op, key, value in history:
        if key in open_:
            start, old = open_.pop(key)
            out.add((key, old, format_sequence(1, start), format_sequence(1, seq)))
        if op != "d":
            open_[key] = (seq, value)
    out |= {(key, value, format_sequence(1, start), None)
            for key, (start, value) in open_.items()}
    return out


SETTINGS = settings(max_examples=25, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


@SETTINGS
@given(history=histories(), seed=st.integers(0, 2**16))
def test_scd1_an_older_change_never_wins(tmp_path_factory: pytest.TempPathFactory,
                                         history: list[tuple[int, str, int, str]],
                                         seed: int) -> None:
    target = DeltaTarget(str(tmp_path_factory.mktemp("scd1")), keys="id")
    _deliver(target, history, random.Random(seed))
    rows = deltalake.DeltaTable(target.path).to_pyarrow_table().to_pylist()
    assert {r["id"]: r["v"] for r in rows} == _final(history)
    assert len(rows) == len(_final(history))


@SETTINGS
@given(history=histories(), seed=st.integers(0, 2**16))
def test_scd2_versions_are_the_sequence_of_states(tmp_path_factory: pytest.TempPathFactory,
                                                  history: list[tuple[int, str, int, str]],
                                                  seed: int) -> None:
    target = DeltaTarget(str(tmp_path_factory.mktemp("scd2")), keys="id", stored_as_scd_type=2)
    _deliver(target, history, random.Random(seed))
    rows = deltalake.DeltaTable(target.path).to_pyarrow_table().to_pylist()
    got = {(r["id"], r["v"], r[START_AT], r[END_AT]) for r in rows}
    assert got == _versions(history)
    assert len(rows) == len(got)


@pytest.mark.parametrize("scd", [1, 2])
def test_a_late_delete_bars_older_changes_for_its_retention(tmp_path: Path, scd: int) -> None:
    """The delete (sequence 5) arrives first; the create it deletes (sequence 2) arrives
    later: within the retention (on the target's clock) the row stays deleted; in SCD type 1 a
    create older than the delete arriving after the retention ends comes back, as
    documented; in SCD type 2 the delete is the end of a version, which does not expire."""
    now = [1_000_000.0]
    target = DeltaTarget(str(tmp_path / "t"), keys="id", stored_as_scd_type=scd,
                         tombstone_retention_seconds=3600, clock=lambda: now[0])
    target.apply(_batch([(5, "d", 1, "v5")]), 0)
    now[0] += 3599
    target.apply(_batch([(2, "c", 1, "v2")]), 1)
    rows = deltalake.DeltaTable(target.path).to_pyarrow_table().to_pylist() \
        if deltalake.DeltaTable.is_deltatable(target.path) else []
    current = [r for r in rows if r.get(END_AT) is None]
    assert current == [], rows  # the tombstone held (SCD 2: the version ends at the delete)
    if scd == 1:
        assert target.tombstones().num_rows == 1
    now[0] += 3600 * 2  # the delete's tombstone (recorded at 1,000,000) has expired
    target.apply(_batch([(1, "c", 2, "w1"), (3, "u", 2, "w3")]), 2)  # another key: a commit
    target.apply(_batch([(4, "c", 1, "v4")]), 3)
    rows = deltalake.DeltaTable(target.path).to_pyarrow_table().to_pylist()
    if scd == 1:
        assert sorted((r["id"], r["v"]) for r in rows) == [(1, "v4"), (2, "w3")]
    else:  # the history holds the delete itself (an __END_AT): nothing to expire
        assert sorted((r["id"], r["v"], r[START_AT], r[END_AT]) for r in rows if r["id"] == 1
                      ) == [(1, "v2", format_sequence(1, 2), format_sequence(1, 4)),
                            (1, "v4", format_sequence(1, 4), format_sequence(1, 5))]
