"""The default ``sequence_by`` column, computed for whole columns of changes at once.

:func:`~pgcdc_events.spark.autocdc.sequence_column` must give, for every change, what
:func:`~pgcdc_events.spark.autocdc.format_sequence` gives for the LSNs of its
``source.sequence`` (the event layer's :func:`~pgcdc_events.events.source.sequence`),
the record's LSN standing in where the pair has none.
"""

from __future__ import annotations

import pyarrow as pa  # type: ignore[import-untyped]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgcdc_events.events.source import sequence
from pgcdc_events.spark.autocdc import (
    AutoCdcError,
    _parse_sequence,
    format_sequence,
    format_sequences,
    sequence_column,
    sequence_value,
)

LSNS = st.one_of(st.none(), st.integers(0, 2**63 - 1), st.sampled_from([0, 1, 2**32, 15]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(LSNS, LSNS, LSNS, st.booleans()), max_size=40))
def test_a_column_of_sequences_is_each_one_formatted(changes: list[tuple[
        int | None, int | None, int | None, bool]]) -> None:
    texts = [sequence(last, lsn) if present else None for last, lsn, _, present in changes]
    records = [record for _, _, record, _ in changes]
    want = [_parse_sequence(t, r) for t, r in zip(texts, records, strict=True)]
    got = sequence_column(pa.array(texts, pa.string()), pa.array(records, pa.int64()))
    assert got.to_pylist() == want
    assert [sequence_value(t, r) for t, r in zip(texts, records, strict=True)] == want
    for (last, lsn, _, present), value in zip(changes, want, strict=True):
        if present and lsn is not None:
            assert value == format_sequence(last, lsn)


@pytest.mark.parametrize("text", ["x", "[]", '["1"]', '["1",2]', '["-1","2"]', '["1","2"] '])
def test_a_value_that_is_no_pair_of_lsns_is_named(text: str) -> None:
    with pytest.raises(AutoCdcError, match="is not a JSON pair of LSNs"):
        sequence_column(pa.array(["[null,\"5\"]", text]), pa.array([1, 2]))
    with pytest.raises(AutoCdcError, match="is not a JSON pair of LSNs"):
        sequence_value(text, 2)  # the one-value twin refuses what the column refuses


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**63 - 1), st.lists(st.integers(0, 2**63 - 1), max_size=30))
def test_one_head_for_all_is_each_ones(head: int, lsns: list[int]) -> None:
    """``format_sequences`` given one last commit LSN for all the changes (a transaction's
    run) gives what it gives with that LSN repeated, and :func:`format_sequence`'s text."""
    once = format_sequences(head, lsns).to_pylist()
    assert once == format_sequences([head] * len(lsns), lsns).to_pylist()
    assert once == [format_sequence(head, lsn) for lsn in lsns]
