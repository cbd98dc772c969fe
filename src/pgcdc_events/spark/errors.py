"""The Spark layer's error: a :class:`~pgcdc_events.errors.PgCdcError` with decoding context."""

from __future__ import annotations

import re
from typing import Final

from pgcdc_events.errors import PgCdcError

#: Spark's message for a job cancelled with its job group (what stopping a streaming query
#: does to the jobs of its running micro-batch).
_CANCELLED: Final = re.compile(r"[^\n]*\bcancelled\b[^\n]*\bjob group\b[^\n]*")

__all__ = ["SparkDecodeError", "SparkQueryError", "cancelled_job", "query_failure"]


class SparkDecodeError(PgCdcError, ValueError):
    """A capture DataFrame, schema or option the Spark layer cannot decode or map.

    ``table`` (``schema.table``) and ``column`` are set when the problem is one
    column's; ``position`` when it is one message's (the value of the ordering
    column).
    """

    def __init__(self, message: str, *, table: str | None = None, column: str | None = None,
                 position: int | None = None) -> None:
        self.table = table
        self.column = column
        self.position = position
        where = []
        if table is not None:
            where.append(table + (f".{column}" if column is not None else ""))
        if position is not None:
            where.append(f"position {position}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


class SparkQueryError(SparkDecodeError):
    """A streaming query's micro-batch failed: the message names the query, the batch and
    the cause (its class and message), in one line. Raised from the ``foreachBatch``
    functions, it is the last line of the Python traceback that Spark carries in its
    ``StreamingQueryException``, where ``pgcdc-events spark`` finds it."""


def query_failure(query: str, batch_id: int, exc: BaseException) -> SparkQueryError:
    """The :class:`SparkQueryError` of ``exc`` raised by ``query``'s batch ``batch_id``."""
    return SparkQueryError(f"{query} failed at micro-batch {batch_id}: {describe(exc)}")


def describe(exc: BaseException) -> str:
    """``Class: message`` of an exception, with its cause's, on one line."""
    text = f"{type(exc).__name__}: {_first_line(exc)}"
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    if cause is not None and not isinstance(exc, SparkQueryError):
        text += f" (caused by {type(cause).__name__}: {_first_line(cause)})"
    return text


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[0].strip() if lines else "(no message)"


def cancelled_job(exc: BaseException) -> str | None:
    """The line of Spark's message saying that a job of ``exc`` (or of its causes) was
    cancelled with its job group, at most 500 characters; ``None`` if none does.

    Stopping a streaming query cancels its micro-batch's jobs, then asks whether the
    ``foreachBatch`` call's failure was that stop: for a Python function, by looking for
    ``org.apache.spark.SparkException``, ``cancelled`` and the query's job group (its run
    id) in the Python traceback py4j hands back. Before that it matches the traceback
    against a regular expression that recurses once per character after
    ``py4j.protocol.Py4JJavaError: An error occurred while calling``: a traceback
    carrying a Java stack overflows the JVM's stack (``java.lang.StackOverflowError``,
    printed on stderr). A ``foreachBatch`` function raises one short line instead.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        match = _CANCELLED.search(str(current))
        if match is not None:
            line = match.group(0).strip()
            for prefix in ("Caused by: ", "org.apache.spark.SparkException: "):
                line = line.removeprefix(prefix)
            return line[:500]
        current = current.__cause__ or current.__context__
    return None
