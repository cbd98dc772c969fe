"""The consumer of docs/testing.md's worked example: per-customer balances from payments.

``Balances`` reads the Debezium change events of a ``shop.payments`` table and keeps,
per customer, the sum of the settled payments. It must survive what real streams do:
updates that carry no ``before`` (REPLICA IDENTITY DEFAULT), deletes that carry only
the key, payments moving to another id (a delete and a create), truncates, and
amounts Debezium cannot represent. ``expected_totals`` is the independent answer a
property test compares it with: the balances implied by a workload's final table
state. tests/testing/test_guide.py runs the guide's tests against this file.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.testing import Workload, table

PAYMENTS = table(
    "shop.payments",
    {"id": "bigint", "customer_id": "int4", "amount": "numeric(12,2)", "status": "pay_status"},
    primary_key="id", not_null=["customer_id"],
    enums={"pay_status": ["pending", "settled", "refunded"]},
)
CONFIG = {"topic.prefix": "shop", "skipped.operations": "none"}  # truncates included
TOPIC = "shop.shop.payments"


class Balances:
    """Settled amount per customer, from the change events of shop.payments.

    Keeps its own copy of each payment (by id): an update under REPLICA IDENTITY
    DEFAULT has no ``before``, and a delete's ``before`` holds only the key.
    """

    def __init__(self) -> None:
        self.payments: dict[int, tuple[int, Decimal]] = {}  # id -> (customer, settled amount)
        self.balance: dict[int, Decimal] = defaultdict(Decimal)

    def apply(self, record: ChangeRecord) -> None:
        if record.topic != TOPIC or record.value is None:  # other topics; tombstones
            return
        op = record.value["op"]
        if op == "t":
            self.payments.clear()
            self.balance.clear()
            return
        if op in ("u", "d"):
            self._forget(record.key["id"] if record.key is not None else None)
        if op in ("c", "u", "r"):
            after = record.value["after"]
            settled = after["status"] == "settled" and after["amount"] is not None
            amount = after["amount"] if settled else Decimal(0)  # NaN arrives as null
            self.payments[after["id"]] = (after["customer_id"], amount)
            self.balance[after["customer_id"]] += amount

    def _forget(self, payment_id: int | None) -> None:
        if payment_id in self.payments:
            customer, amount = self.payments.pop(payment_id)
            self.balance[customer] -= amount

    def totals(self) -> dict[int, Decimal]:
        return {c: v for c, v in self.balance.items() if v}


def expected_totals(w: Workload) -> dict[int, Decimal]:
    """The balances the final table state implies (from the rows, not from the events).

    ``w.final_state`` maps each table's qualified name to its rows, each row a tuple of
    ``PgValue`` (or ``None`` for NULL) in column order; ``.text`` is what PostgreSQL prints.
    """
    out: dict[int, Decimal] = defaultdict(Decimal)
    for row in w.final_state[PAYMENTS.qualified]:
        _, customer, amount, status = row
        assert customer is not None
        if status is not None and status.text == "settled" and amount is not None and (
                amount.text != "NaN"):
            out[int(customer.text)] += Decimal(amount.text)
    return {c: v for c, v in out.items() if v}
