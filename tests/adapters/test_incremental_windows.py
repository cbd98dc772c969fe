"""The window's rules, with the changes run at the snapshotter's own steps (no timing).

``IncrementalSnapshotter``'s ``on_step`` hook runs a change right after the open
watermark is written (before the chunk is read: the chunk sees the change) or right
before the close watermark (after the read: the buffered row is stale). The rules are
Debezium's (``AbstractIncrementalSnapshotChangeEventSource.processMessage`` drops the
buffered row of any streamed event's key of the chunk's table; ``closeWindow`` emits the
rest), on the cases test_incremental_snapshotter.py does not cover: two changes of one
key in one window, a change of the same key in another table, and a change to a row of a
later chunk.
"""

from __future__ import annotations

from typing import Any

import pytest

from adapters.test_incremental_snapshotter import (
    Harness,
    check_invariants,
    labels,
    simple_table,
)

TWICE = {
    "delete, insert": ("DELETE FROM t WHERE id = 20", "INSERT INTO t VALUES (20, 'again')",
                       ["d:20", "c:20"]),
    "update, delete": ("UPDATE t SET v = 'changed' WHERE id = 20", "DELETE FROM t WHERE id = 20",
                       ["u:20", "d:20"]),
}


@pytest.mark.parametrize("strategy", ["insert_insert", "insert_delete"])
@pytest.mark.parametrize("changes", list(TWICE))
def test_two_changes_of_one_key_in_one_window(pg_conn: Any, changes: str,
                                              strategy: str) -> None:
    """Key 20 changed right after the open watermark and again right before the close
    (deleted and inserted again; or updated, then deleted after the chunk read it): both
    events stream, the read of 20 is not emitted, the consumer ends with the table."""
    initial = simple_table(pg_conn)
    first, second, streamed = TWICE[changes]
    h = Harness(pg_conn, strategy=strategy)
    h.at(0, "after_open", first)
    h.at(0, "before_close", second)
    h.signal("ad-hoc", "execute-snapshot", {"data-collections": ["public.t"]})
    h.pump()
    reads = [f"r:{k[0]}" for k in initial if k != (20,)]
    assert labels(h.out) == [["open", *streamed, *reads, "close"], ["open", "close"]]
    check_invariants(h, "t", initial, {(20,)})


@pytest.mark.parametrize("step", ["after_open", "before_close"])
def test_a_change_of_the_same_key_in_another_table_keeps_the_row(pg_conn: Any,
                                                                  step: str) -> None:
    """An update of key 20 in another table inside the window: the chunk's row 20 is read
    all the same (the rule is per table)."""
    initial = simple_table(pg_conn)
    pg_conn.run("CREATE TABLE other (id int PRIMARY KEY, v text)")
    pg_conn.run("INSERT INTO other VALUES (20, 'o')")
    h = Harness(pg_conn)
    h.at(0, step, "UPDATE other SET v = 'changed' WHERE id = 20")
    h.signal("ad-hoc", "execute-snapshot", {"data-collections": ["public.t"]})
    h.pump()
    assert h.reads("t") == initial
    assert labels(h.out)[0] == ["open", "u:20", *(f"r:{k[0]}" for k in initial), "close"]
    check_invariants(h, "t", initial)


@pytest.mark.parametrize("step", ["after_open", "before_close"])
def test_a_change_to_a_row_of_a_later_chunk(pg_conn: Any, step: str) -> None:
    """Chunks of 2: key 50 (the third chunk's) updated in the first window. The first
    window's reads are untouched; the later chunk reads the row as it is now, after the
    update event: the consumer ends with the update's value, read once."""
    initial = simple_table(pg_conn)
    h = Harness(pg_conn, chunk_size=2)
    h.at(0, step, "UPDATE t SET v = 'later' WHERE id = 50")
    h.signal("ad-hoc", "execute-snapshot", {"data-collections": ["public.t"]})
    h.pump()
    windows = labels(h.out)
    assert windows[0] == ["open", "u:50", "r:10", "r:20", "close"]
    assert windows[2] == ["open", "r:50", "r:60", "close"]
    assert h.reads("t") == initial
    read = next(r for r in h.of("t") if r.op == "r" and r.key is not None
                and r.key["id"] == 50)
    assert read.value is not None and read.value["after"]["v"] == "later"
    check_invariants(h, "t", initial, {(50,)})
