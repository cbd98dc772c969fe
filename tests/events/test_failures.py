"""Values that do not convert: an error naming the table, column, type and value, or — when the
embedder asks for it — the change is skipped and counted, never silently altered."""

from __future__ import annotations

import pytest

from pgcdc_events.errors import ConversionError
from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.protocol import Begin, Commit, Insert, Relation, RelationColumn, TupleData

RELATION = Relation(1, "public", "t", "d", (RelationColumn(1, "id", 23, -1),
                                             RelationColumn(0, "n", 1700, -1)))


def run(mode: str) -> tuple[EventDecoder, list[str]]:
    decoder = EventDecoder(EventConfig.from_properties({
        "topic.prefix": "p", "event.converting.failure.handling.mode": mode}))
    ops = []
    for message in (Begin(10, 0, 5), RELATION, Insert(1, TupleData.from_text(("1", "1.5"))),
                    Insert(1, TupleData.from_text(("2", "one point five"))),
                    Insert(1, TupleData.from_text(("3", "2"))), Commit(0, 10, 11, 0)):
        ops += [str(r.key["id"]) for r in decoder.handle(message, 100) if r.key is not None]
    return decoder, ops


def test_fail_names_table_column_type_and_value() -> None:
    with pytest.raises(ConversionError) as info:
        run("fail")
    error = info.value
    assert (error.table, error.column, error.type_name) == ("public.t", "n", "numeric")
    assert error.value == b"one point five"
    assert "public.t.n (numeric)" in str(error) and "'one point five'" in str(error)


@pytest.mark.parametrize("mode", ["warn", "skip"])
def test_warn_and_skip_drop_the_change_and_count_it(mode: str,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    decoder, ops = run(mode)
    assert ops == ["1", "3"]
    assert decoder.metrics.events_skipped_on_error == 1
    assert ("did not convert" in caplog.text) is (mode == "warn")


def test_invalid_mode_is_rejected() -> None:
    with pytest.raises(Exception, match="allowed: fail, warn, skip"):
        EventConfig.from_properties({"topic.prefix": "p",
                                     "event.converting.failure.handling.mode": "ignore"})
