"""The hypothesis strategy behind :func:`pgcdc_events.testing.yugabyte.yugabyte_workloads`."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from pgcdc_events.testing._explain import hide_from_explanations
from pgcdc_events.testing.yugabyte import YbColumn, YbOp, YugabyteWorkload

hide_from_explanations()  # the user's lines, not ours, explain a failure

_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "integer": st.integers(-(2**31), 2**31 - 1),
    "bigint": st.integers(-(2**63), 2**63 - 1),
    "text": st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12),
    "varchar(20)": st.text(st.characters(codec="utf-8", exclude_characters="\x00"),
                           max_size=20),
    "boolean": st.booleans(),
}
_NAMES = ["aa", "bb", "cc", "dd", "Mixed Case", "é"]


@st.composite
def workloads(draw: st.DrawFn, *, identities: tuple[str, ...], max_transactions: int
              ) -> YugabyteWorkload:
    identity = draw(st.sampled_from(identities))
    key_type = draw(st.sampled_from(["integer", "bigint", "text"]))
    names = draw(st.lists(st.sampled_from(_NAMES), min_size=1, max_size=4, unique=True))
    columns = (YbColumn("pk", key_type, key=True),
               *(YbColumn(n, draw(st.sampled_from(sorted(_VALUES)))) for n in names))
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    transactions = []
    for _ in range(draw(st.integers(1, max_transactions))):
        ops: list[YbOp] = []
        for _ in range(draw(st.integers(1, 5))):
            kinds = ["insert"] if identity == "n" or not rows else ["insert", "update", "delete"]
            kind = draw(st.sampled_from(kinds))
            if kind == "insert":
                key = draw(_VALUES[key_type].filter(lambda k: (k,) not in rows))
                values = {"pk": key, **{c.name: draw(st.none() | _VALUES[c.type])
                                        for c in columns[1:]}}
                rows[(key,)] = values
                ops.append(YbOp("insert", (key,), values))
                continue
            key = draw(st.sampled_from(sorted(rows, key=repr)))
            if kind == "delete":
                del rows[key]
                ops.append(YbOp("delete", key))
                continue
            changed = draw(st.lists(st.sampled_from(columns), min_size=1, unique=True))
            changes = {c.name: draw(_VALUES[c.type] if c.key else st.none() | _VALUES[c.type])
                       for c in changed}
            if "pk" in changes and (changes["pk"],) != key and (changes["pk"],) in rows:
                del changes["pk"]  # the new key must be free
            if not changes:
                continue
            new = {**rows.pop(key), **changes}
            rows[(new["pk"],)] = new
            ops.append(YbOp("update", key, changes))
        if ops:
            transactions.append(tuple(ops))
    if not transactions:
        key = draw(_VALUES[key_type])
        transactions.append((YbOp("insert", (key,), {"pk": key}),))
    return YugabyteWorkload("public", "yb_table", columns, tuple(transactions),
                            identity)  # type: ignore[arg-type]
