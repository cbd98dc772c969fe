"""Values that do not convert: an error naming the table, column, type and value, or — when the
embedder asks for it with Debezium's ``warn``/``skip`` — the value becomes null, counted (and
logged for ``warn``), as Debezium does it."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from pgcdc_events.errors import ConversionError
from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.protocol import Begin, Commit, Insert, Relation, RelationColumn, TupleData
from pgcdc_events.types.catalog import CatalogColumn, CatalogTable, fetch_catalog
from support.capture import Capturer

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


# ---------------------------------------------------------- event.processing.failure.handling.mode


def run_processing(mode: str) -> tuple[EventDecoder, list[int]]:
    """Changes 1..3 where change 2 fails to convert and the converting mode is ``fail``."""
    decoder = EventDecoder(EventConfig.from_properties({
        "topic.prefix": "p", "event.processing.failure.handling.mode": mode}))
    ids: list[int] = []
    for lsn, message in enumerate((
            Begin(10, 0, 5), RELATION, Insert(1, TupleData.from_text(("1", "1.5"))),
            Insert(1, TupleData.from_text(("2", "one point five"))),
            Insert(1, TupleData.from_text(("3", "2"))), Commit(0, 10, 11, 0)), 100):
        ids += [r.key["id"] for r in decoder.handle(message, lsn) if r.value is not None]
    return decoder, ids


def test_processing_fail_raises_with_the_lsn_of_the_change() -> None:
    with pytest.raises(ConversionError) as info:
        run_processing("fail")
    assert (info.value.lsn, info.value.column) == (103, "n")


@pytest.mark.parametrize("mode", ["warn", "skip"])
def test_processing_warn_and_skip_drop_the_failing_change_and_count_it(
        mode: str, caplog: pytest.LogCaptureFixture) -> None:
    decoder, ids = run_processing(mode)
    assert ids == [1, 3]
    assert decoder.metrics.failed_events == 1 and decoder.metrics.conversion_errors == 0
    assert decoder.metrics.as_dict()["NumberOfErroneousEvents"] == 1
    assert ("skipped the public.t change at LSN 0/67" in caplog.text) is (mode == "warn")


def test_converting_mode_decides_first() -> None:
    """A value nulled under the converting mode never reaches the processing mode."""
    decoder = EventDecoder(EventConfig.from_properties({
        "topic.prefix": "p", "event.converting.failure.handling.mode": "skip",
        "event.processing.failure.handling.mode": "skip"}))
    out = [decoder.handle(m, 100) for m in (
        Begin(10, 0, 5), RELATION, Insert(1, TupleData.from_text(("2", "x"))))]
    assert out[-1][0].value["after"]["n"] is None  # type: ignore[index]
    assert (decoder.metrics.conversion_errors, decoder.metrics.failed_events) == (1, 0)


@pytest.mark.parametrize(("properties", "expected"), [
    ({}, ConversionError),
    ({"event.processing.failure.handling.mode": "skip"}, [1, 3]),
    ({"event.converting.failure.handling.mode": "skip"}, [1, 2, 3]),
])
def test_snapshot_rows_follow_both_modes(properties: dict[str, str], expected: object) -> None:
    table = CatalogTable(1, "public", "t", "d", (
        CatalogColumn("id", 1, 23, not_null=True, primary_key_position=1),
        CatalogColumn("n", 2, 1700)))
    decoder = EventDecoder(EventConfig.from_properties({"topic.prefix": "p", **properties}))
    rows = [["1", "1.5"], ["2", "one point five"], ["3", "2"]]
    if expected is ConversionError:
        with pytest.raises(ConversionError, match=r"public\.t\.n"):
            list(decoder.snapshot([(table, rows)], lsn=1))
    else:
        records = list(decoder.snapshot([(table, rows)], lsn=1))
        assert [r.key["id"] for r in records] == expected  # type: ignore[index]


# ---------------------------------------------------------- values a required field cannot carry


def test_unrepresentable_values_of_not_null_columns_are_errors(pg_conn: Any) -> None:
    """``null`` would break a required field: fail raises; warn/skip use the column's fallback."""
    pg_conn.run("CREATE TABLE req (id int PRIMARY KEY, n numeric(6,2) NOT NULL, "
                "o numeric(6,2), ts timestamp NOT NULL DEFAULT '2000-01-01')")
    cap = Capturer(pg_conn)
    pg_conn.run("INSERT INTO req VALUES (1, 'NaN', 'NaN', '2000-01-02'), "
                "(2, 1, 1, '294276-12-31 23:59:59')")
    rows, catalog = cap.changes(), fetch_catalog(pg_conn)
    with pytest.raises(ConversionError, match="NOT NULL") as info:
        EventDecoder(EventConfig(topic_prefix="p"), catalog=catalog).feed_rows(rows)
    assert (info.value.column, info.value.value) == ("n", b"NaN")
    decoder = EventDecoder(EventConfig.from_properties({
        "topic.prefix": "p", "event.converting.failure.handling.mode": "skip"}), catalog=catalog)
    after = [r.value["after"] for r in decoder.feed_rows(rows) if r.value is not None]
    assert [(a["n"], a["o"]) for a in after] == [(Decimal("0.00"), None), (Decimal("1.00"),) * 2]
    assert after[1]["ts"] == 946684800000000  # the column's default, as Debezium's fallback
    assert decoder.metrics.conversion_errors == 2
    # the string mode represents NaN: no error
    string = EventDecoder(EventConfig.from_properties({
        "topic.prefix": "p", "decimal.handling.mode": "string",
        "time.precision.mode": "connect"}), catalog=catalog)
    assert [r.value["after"]["n"] for r in string.feed_rows(rows)
            if r.value is not None] == ["NAN", "1.00"]
