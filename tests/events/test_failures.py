"""Values that do not convert: an error naming the table, column, type and value, or — when the
embedder asks for it with Debezium's ``warn``/``skip`` — the value becomes null, counted (and
logged for ``warn``), as Debezium does it."""

from __future__ import annotations

import pytest

from pgcdc_events.errors import ConversionError
from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.protocol import Begin, Commit, Insert, Relation, RelationColumn, TupleData

RELATION = Relation(1, "public", "t", "d", (RelationColumn(1, "id", 23, -1),
                                             RelationColumn(0, "n", 1700, -1)))


def run(mode: str) -> tuple[EventDecoder, list[tuple[int, object]]]:
    decoder = EventDecoder(EventConfig.from_properties({
        "topic.prefix": "p", "event.converting.failure.handling.mode": mode}))
    ops: list[tuple[int, object]] = []
    for message in (Begin(10, 0, 5), RELATION, Insert(1, TupleData.from_text(("1", "1.5"))),
                    Insert(1, TupleData.from_text(("2", "one point five"))),
                    Insert(1, TupleData.from_text(("3", "2"))), Commit(0, 10, 11, 0)):
        ops += [(r.key["id"], r.value["after"]["n"]) for r in decoder.handle(message, 100)
                if r.value is not None]
    return decoder, ops


def test_fail_names_table_column_type_and_value() -> None:
    with pytest.raises(ConversionError) as info:
        run("fail")
    error = info.value
    assert (error.table, error.column, error.type_name) == ("public.t", "n", "numeric")
    assert error.value == b"one point five"
    assert "public.t.n (numeric)" in str(error) and "'one point five'" in str(error)


@pytest.mark.parametrize("mode", ["warn", "skip"])
def test_warn_and_skip_null_the_value_and_count_it(mode: str,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    decoder, ops = run(mode)
    assert [(k, v is None) for k, v in ops] == [(1, False), (2, True), (3, False)]
    assert decoder.metrics.conversion_errors == 1
    assert ("replaced by null" in caplog.text) is (mode == "warn")


def test_invalid_mode_is_rejected() -> None:
    with pytest.raises(Exception, match="allowed: fail, warn, skip"):
        EventConfig.from_properties({"topic.prefix": "p",
                                     "event.converting.failure.handling.mode": "ignore"})
