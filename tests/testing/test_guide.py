"""The worked example of docs/testing.md: testing a per-customer balance kept from change events.

``Balances`` is the consumer under test: it reads Debezium change events of a
``shop.payments`` table and keeps, per customer, the sum of the settled payments.
It must survive what real streams do: updates that carry no ``before`` (REPLICA
IDENTITY DEFAULT), deletes that carry only the key, payments moving to another
id (a delete and a create), truncates, and amounts Debezium cannot represent.
The consumer and ``expected_totals`` ship in ``examples/balances.py``, which the guide
imports; this file holds the guide's tests and the planted-bug checks.
"""

from __future__ import annotations

import importlib.util
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, find, given, settings

from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.testing import Workload, delete, insert, truncate, update
from pgcdc_events.testing.strategies import workloads


def _load_example() -> Any:
    """examples/balances.py, the consumer the guide ships (one home for it)."""
    path = Path(__file__).resolve().parents[2] / "examples" / "balances.py"
    spec = importlib.util.spec_from_file_location("pgcdc_examples_balances", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_example = _load_example()
PAYMENTS, CONFIG, TOPIC = _example.PAYMENTS, _example.CONFIG, _example.TOPIC
Balances, expected_totals = _example.Balances, _example.expected_totals


# ---------------------------------------------------------------- hand-written cases
def test_a_settled_payment_counts() -> None:
    b = Balances()
    b.apply(insert(PAYMENTS, {"id": 1, "customer_id": 7, "amount": Decimal("12.50"),
                              "status": "settled"}, config=CONFIG))
    assert b.totals() == {7: Decimal("12.50")}


def test_an_update_without_before_replaces_the_old_amount() -> None:
    b = Balances()
    row = {"id": 1, "customer_id": 7, "amount": Decimal("12.50"), "status": "settled"}
    b.apply(insert(PAYMENTS, row, config=CONFIG))
    event = update(PAYMENTS, row, amount=Decimal("20.00"), config=CONFIG)
    assert event.value["before"] is None  # what makes the consumer keep its own copy
    b.apply(event)
    assert b.totals() == {7: Decimal("20.00")}


def test_refunds_deletes_and_truncates() -> None:
    b = Balances()
    paid = {"id": 1, "customer_id": 7, "amount": Decimal("5.00"), "status": "settled"}
    other = {"id": 2, "customer_id": 8, "amount": Decimal("1.00"), "status": "settled"}
    for row in (paid, other):
        b.apply(insert(PAYMENTS, row, config=CONFIG))
    b.apply(update(PAYMENTS, paid, status="refunded", config=CONFIG))
    assert b.totals() == {8: Decimal("1.00")}
    b.apply(delete(PAYMENTS, other, config=CONFIG))
    assert b.totals() == {}
    b.apply(insert(PAYMENTS, paid, config=CONFIG))
    b.apply(truncate(PAYMENTS, config=CONFIG))
    assert b.totals() == {}


# ---------------------------------------------------------------- the property
@settings(max_examples=150, deadline=None)
@given(workloads([PAYMENTS], streaming=True, two_phase=True, max_transactions=6, max_ops=5))
def test_balances_match_the_final_table_state(w: Workload) -> None:
    b = Balances()
    for record in w.records(CONFIG):
        b.apply(record)
    assert b.totals() == expected_totals(w)


class TrustingBalances(Balances):
    """A plausible bug: trusting ``before`` to undo the old amount."""

    def apply(self, record: ChangeRecord) -> None:
        if record.topic != TOPIC or record.value is None or record.value["op"] == "t":
            return super().apply(record)
        before, after = record.value["before"], record.value["after"]
        for row, sign in ((before, -1), (after, 1)):
            if row is not None and row["status"] == "settled" and row["amount"] is not None:
                self.balance[row["customer_id"]] += sign * row["amount"]
        return None


def _trusting_is_wrong(w: Workload) -> bool:
    b = TrustingBalances()
    for record in w.records(CONFIG):
        b.apply(record)
    return b.totals() != expected_totals(w)


def test_the_property_catches_a_consumer_that_trusts_before() -> None:
    w: Any = find(workloads([PAYMENTS]), _trusting_is_wrong,
                  settings=settings(max_examples=500, database=None, phases=[Phase.generate]))
    assert any(e.op in ("u", "d") for e in w.expected)


@pytest.mark.slow
def test_the_counterexample_shrinks_to_a_few_lines_of_sql() -> None:
    """The shrunk failure docs/testing.md shows (slow: 10-100 s of shrinking). Usually the
    table and one or two transactions; shrinking a stateful workload can stop at a local
    minimum (over seeds 0-7 of ``find``: 2 to 6 lines, 2 or 3 for five of them)."""
    w: Any = find(workloads([PAYMENTS]), _trusting_is_wrong,
                  settings=settings(max_examples=500, database=None))
    script = w.script()
    print("\n".join(script))
    assert len(script) <= 6
    assert any("UPDATE" in line or "DELETE" in line for line in script)
