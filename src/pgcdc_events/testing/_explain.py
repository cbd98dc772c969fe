"""Keep the testing layer's own lines out of hypothesis's explanation of a failure.

When a test fails, hypothesis traces the lines each test case runs and reports the
first ones that only failing cases ran ("These lines were always and only run by failing
test cases"). The strategies and builders of this package run before the user's code,
and which of their lines run depends on what was drawn: they were the lines reported,
and the user's own were never reached. Hypothesis does not trace its own files; the
tracer asks ``hypothesis.internal.scrutineer.should_trace_file``, which this wraps, once,
so that the files of ``pgcdc_events.testing`` are not traced either: the explanation
names the consumer's lines. Without that function (another hypothesis version) nothing
changes. The test is ``tests/testing/test_explanations.py``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Final

__all__ = ["hide_from_explanations"]

_PACKAGE: Final = os.path.dirname(os.path.realpath(__file__)) + os.sep
_MARK: Final = "_pgcdc_events_testing_hidden"


def _ours(filename: str) -> bool:
    return filename.startswith(_PACKAGE) or os.path.realpath(filename).startswith(_PACKAGE)


def hide_from_explanations() -> None:
    """Leave this package's files out of hypothesis's explanation traces (idempotent)."""
    try:
        from hypothesis.internal import scrutineer  # noqa: PLC0415
    except ImportError:
        return
    original: Callable[[str], bool] | None = getattr(scrutineer, "should_trace_file", None)
    if original is None or getattr(original, _MARK, False):
        return

    @functools.cache
    def should_trace_file(filename: str) -> bool:
        return original(filename) and not _ours(filename)

    setattr(should_trace_file, _MARK, True)
    scrutineer.should_trace_file = should_trace_file
