"""The Spark layer's error: a :class:`~pgcdc_events.errors.PgCdcError` with decoding context."""

from __future__ import annotations

from pgcdc_events.errors import PgCdcError

__all__ = ["SparkDecodeError"]


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
