"""Default-expression rules that the golden recording (events_defaults) cannot exercise."""

from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from pgcdc_events.types.defaults import _FUNCTION, extract_literal

#: Debezium 3.6.3's FUNCTION_DEFAULT_PATTERN as written (Java find() of a ^-anchored pattern).
_DEBEZIUM_FUNCTION = re.compile(r"[(]?[A-Za-z0-9_.]+\((?:.+(?:, ?.+)*)?\)")


_PIECES = st.sampled_from(["(", ")", "a", "_", ".", ",", ", ", " ", "'", "\n", "now", "f(",
                           "::", "1"])


@settings(max_examples=600, deadline=None)
@given(st.lists(_PIECES, max_size=8).map("".join))
def test_function_pattern_is_debeziums(expression: str) -> None:
    assert bool(_FUNCTION.match(expression)) == bool(_DEBEZIUM_FUNCTION.match(expression))


def test_function_pattern_is_linear_on_an_unclosed_call() -> None:
    started = time.perf_counter()
    assert not _FUNCTION.match("f(" + "a, " * 5000)
    assert time.perf_counter() - started < 1.0


def test_literal_is_the_first_quoted_string() -> None:
    assert extract_literal("('a'::text || 'b'::text)") == "a"
    assert extract_literal("'it''s'::text") == "it's"
    assert extract_literal("'-7'::integer") == "-7"
    assert extract_literal("42") == "42"
    assert extract_literal("NULL::text") is None
    assert extract_literal("'unterminated") is None
