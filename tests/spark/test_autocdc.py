"""The AUTO CDC rules by themselves (no Spark): for random histories of changes delivered
in random batch splits and orders, with replays, the SCD type 1 target is the state after
the changes in sequence order, and the SCD type 2 history is the sequence of states."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgcdc_events.spark.autocdc import (
    END_AT,
    OP,
    ROW_SEQUENCE,
    SEQUENCE,
    START_AT,
    AutoCdc,
    AutoCdcError,
    apply_changes,
    empty_state,
    format_sequence,
    plan_changes,
)

PLACEHOLDER = "__debezium_unavailable_value"
KEYS = st.integers(0, 3)
VALUES = st.sampled_from(["a", "b", "c", None])


def _change(seq: int, key: int | None, op: str, v: Any = None, t: Any = None) -> dict[str, Any]:
    return {"id": key, "v": v, "t": t, OP: op, SEQUENCE: format_sequence(seq // 7, seq)}


def _table(changes: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(changes, schema=pa.schema([
        ("id", pa.int64()), ("v", pa.string()), ("t", pa.string()), (OP, pa.string()),
        (SEQUENCE, pa.string())]))


@st.composite
def histories(draw: st.DrawFn, *, truncates: bool = False, toast: bool = False
              ) -> list[dict[str, Any]]:
    """A source table's changes in commit order (sequence 1, 2, ...): inserts of missing
    keys, updates (with unchanged-TOAST ``t`` when ``toast``) and deletes of present ones,
    truncates when ``truncates``."""
    present: set[int] = set()
    out = []
    for seq in range(1, draw(st.integers(1, 30)) + 1):
        if truncates and draw(st.integers(0, 12)) == 0:
            out.append(_change(seq, None, "t"))
            present.clear()
            continue
        key = draw(KEYS)
        if key not in present:
            out.append(_change(seq, key, "c", draw(VALUES), draw(VALUES)))
            present.add(key)
        elif draw(st.booleans()):
            t = PLACEHOLDER if toast and draw(st.booleans()) else draw(VALUES)
            out.append(_change(seq, key, "u", draw(VALUES), t))
        else:
            out.append(_change(seq, key, "d", None, None))
            present.discard(key)
    return out


def _states(history: list[dict[str, Any]]) -> list[dict[int, tuple[Any, Any]]]:
    """The source table after each change (key -> (v, t)), TOAST kept from before."""
    state: dict[int, tuple[Any, Any]] = {}
    out = []
    for c in history:
        if c[OP] == "t":
            state = {}
        elif c[OP] == "d":
            state.pop(c["id"], None)
        else:
            t = state[c["id"]][1] if c["t"] == PLACEHOLDER else c["t"]
            state[c["id"]] = (c["v"], t)
        out.append(dict(state))
    return out


@st.composite
def deliveries(draw: st.DrawFn, history: list[dict[str, Any]], *, in_order: bool = False
               ) -> list[list[dict[str, Any]]]:
    """The changes cut into batches, the batches shuffled (unless ``in_order``), some
    delivered again later (replays), each batch's rows shuffled."""
    changes = list(history)
    batches: list[list[dict[str, Any]]] = []
    while changes:
        n = draw(st.integers(1, max(1, len(changes))))
        batches.append(changes[:n])
        changes = changes[n:]
    if not in_order:
        batches = draw(st.permutations(batches))
    out = []
    for batch in batches:
        out.append(draw(st.permutations(batch)))
        if draw(st.integers(0, 3)) == 0:
            out.append(draw(st.sampled_from(out)))  # a replay of a batch already given
    return out


def _scd1(state: Any) -> dict[int, tuple[Any, Any]]:
    rows = state.rows.to_pylist() if state.rows.num_rows else []
    return {r["id"]: (r["v"], r["t"]) for r in rows}


def _run(spec: AutoCdc, batches: list[list[dict[str, Any]]], now_ms: int = 0) -> Any:
    state = empty_state()
    for batch in batches:
        state = apply_changes(_table(batch), state, spec, now_ms=now_ms)
    return state


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_scd1_is_the_state_after_the_changes_in_sequence_order(data: st.DataObject) -> None:
    history = data.draw(histories(truncates=True))
    batches = data.draw(deliveries(history))
    state = _run(AutoCdc(keys="id"), batches)
    assert _scd1(state) == _states(history)[-1]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_scd1_unchanged_toast_keeps_the_stored_value(data: st.DataObject) -> None:
    history = data.draw(histories(toast=True))
    batches = data.draw(deliveries(history, in_order=True))
    state = _run(AutoCdc(keys="id"), batches)
    assert _scd1(state) == _states(history)[-1]


def _history(history: list[dict[str, Any]]) -> list[tuple[int, Any, Any, int, int | None]]:
    """The versions the source went through: (key, v, t, start, end) of each run of one
    key's equal rows, from the sequence of states."""
    versions: list[tuple[int, Any, Any, int, int | None]] = []
    current: dict[int, tuple[Any, Any, int]] = {}
    for seq, state in enumerate(_states(history), start=1):
        for key in sorted(set(current) | set(state)):
            before, after = current.get(key), state.get(key)
            if before is not None and (after is None or after != before[:2]):
                versions.append((key, before[0], before[1], before[2], seq))
                del current[key]
            if after is not None and key not in current:
                current[key] = (*after, seq)
    versions += [(key, v, t, start, None) for key, (v, t, start) in current.items()]
    return sorted(versions, key=repr)


def _scd2(state: Any) -> list[tuple[int, Any, Any, int, int | None]]:
    def seq(value: str | None) -> int | None:
        return None if value is None else int(value.split("/")[1], 16)

    return sorted(((r["id"], r["v"], r["t"], seq(r[START_AT]), seq(r[END_AT]))
                  for r in state.rows.to_pylist()), key=repr)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_scd2_history_is_the_sequence_of_states(data: st.DataObject) -> None:
    history = data.draw(histories())
    batches = data.draw(deliveries(history))
    state = _run(AutoCdc(keys="id", stored_as_scd_type=2), batches)
    assert _scd2(state) == _history(history)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_scd2_with_toast_in_order(data: st.DataObject) -> None:
    history = data.draw(histories(toast=True))
    batches = data.draw(deliveries(history, in_order=True))
    state = _run(AutoCdc(keys="id", stored_as_scd_type=2), batches)
    assert _scd2(state) == _history(history)


def test_scd2_untracked_columns_update_the_version_in_place() -> None:
    spec = AutoCdc(keys="id", stored_as_scd_type=2, track_history_except_column_list=["t"])
    state = _run(spec, [[_change(1, 1, "c", "a", "x"), _change(2, 1, "u", "a", "y")],
                        [_change(3, 1, "u", "b", "y")]])
    assert _scd2(state) == [(1, "a", "y", 1, 3), (1, "b", "y", 3, None)]
    # a replay of the first batch changes nothing
    again = apply_changes(_table([_change(1, 1, "c", "a", "x"), _change(2, 1, "u", "a", "y")]),
                          state, spec, now_ms=0)
    assert _scd2(again) == _scd2(state)


def test_a_late_delete_is_a_tombstone_until_its_retention_ends() -> None:
    """A delete arrives before the insert it follows: the insert, older, must not bring the
    row back while the tombstone is kept (10 s here); after that it does (as documented)."""
    spec = AutoCdc(keys="id", tombstone_retention_seconds=10)
    state = _run(spec, [[_change(5, 1, "d")]], now_ms=1_000_000)
    assert state.tombstones.num_rows == 1
    kept = apply_changes(_table([_change(3, 1, "c", "old")]), state, spec, now_ms=1_009_999)
    assert _scd1(kept) == {}
    expired = apply_changes(_table([_change(3, 1, "c", "old")]), state, spec, now_ms=1_010_001)
    assert _scd1(expired) == {1: ("old", None)}
    assert expired.tombstones.num_rows == 0
    newer = apply_changes(_table([_change(6, 1, "c", "new")]), state, spec, now_ms=1_000_001)
    assert _scd1(newer) == {1: ("new", None)} and newer.tombstones.num_rows == 0


def test_a_late_truncate_keeps_newer_rows_and_bars_older_ones() -> None:
    spec = AutoCdc(keys="id")
    state = _run(spec, [[_change(1, 1, "c", "a"), _change(4, 2, "c", "b")],
                        [_change(3, None, "t")], [_change(2, 3, "c", "older")]])
    assert _scd1(state) == {2: ("b", None)}


def test_columns_options_and_new_columns() -> None:
    spec = AutoCdc(keys="id", except_column_list=["t"])
    state = _run(spec, [[_change(1, 1, "c", "a", "x")]])
    assert state.rows.column_names == ["id", "v", ROW_SEQUENCE]
    wider = _table([_change(2, 1, "u", "b")]).append_column("w", pa.array([7]))
    state = apply_changes(wider, state, spec, now_ms=0)
    assert state.rows.to_pylist() == [{"id": 1, "v": "b", ROW_SEQUENCE: format_sequence(0, 2),
                                       "w": 7}]
    only = AutoCdc(keys="id", column_list=["v"])
    assert _run(only, [[_change(1, 1, "c", "a", "x")]]).rows.column_names == [
        "id", "v", ROW_SEQUENCE]


def test_custom_sequence_deletes_and_errors() -> None:
    changes = pa.table({"id": [1, 1, 2], "v": ["a", "b", "c"], "version": [2, 1, 1],
                        "gone": [False, False, True]})
    spec = AutoCdc(keys="id", sequence_by="version", apply_as_deletes=pc.field("gone"))
    state = apply_changes(changes, empty_state(), spec, now_ms=0)
    assert [(r["id"], r["v"]) for r in state.rows.to_pylist()] == [(1, "a")]
    with pytest.raises(AutoCdcError, match="null sequence"):
        plan_changes(pa.table({"id": [1], "version": pa.array([None], pa.int64()),
                               "gone": [False]}),
                     empty_state(), spec, now_ms=0)
    with pytest.raises(AutoCdcError, match="cannot be evaluated"):
        plan_changes(pa.table({"id": [1], "version": [1]}), empty_state(), spec, now_ms=0)
    with pytest.raises(AutoCdcError, match="truncates"):
        plan_changes(_table([_change(1, None, "t")]), empty_state(),
                     AutoCdc(keys="id", stored_as_scd_type=2), now_ms=0)
    with pytest.raises(AutoCdcError, match="not both"):
        AutoCdc(keys="id", column_list=["v"], except_column_list=["t"])


def _split(change: dict[str, Any]) -> dict[str, Any]:
    """A change with its key as two columns and its sequence as two (``s1``, ``s2``)."""
    seq = int(change[SEQUENCE].split("/")[1], 16)
    key = change["id"]
    return {"k1": None if key is None else key // 2, "k2": None if key is None else key % 2,
            "v": change["v"], "t": change["t"], OP: change[OP], "s1": seq // 5, "s2": seq}


def _split_table(changes: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist([_split(c) for c in changes], schema=pa.schema([
        ("k1", pa.int64()), ("k2", pa.int64()), ("v", pa.string()), ("t", pa.string()),
        (OP, pa.string()), ("s1", pa.int64()), ("s2", pa.int64())]))


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_scd1_with_two_key_columns_and_two_sequence_columns(data: st.DataObject) -> None:
    """The same rules with a key of two columns and ``sequence_by`` of two (compared in
    order; stored as a struct in ``__SEQUENCE`` and the tombstones): batches out of order,
    replays, truncates, unchanged TOAST delivered in order."""
    toast = data.draw(st.booleans())
    history = data.draw(histories(truncates=not toast, toast=toast))
    batches = data.draw(deliveries(history, in_order=toast))
    spec = AutoCdc(keys=["k1", "k2"], sequence_by=["s1", "s2"])
    state = empty_state()
    for batch in batches:
        state = apply_changes(_split_table(batch), state, spec, now_ms=0)
    rows = state.rows.to_pylist() if state.rows.num_rows else []
    assert {r["k1"] * 2 + r["k2"]: (r["v"], r["t"]) for r in rows} == _states(history)[-1]
