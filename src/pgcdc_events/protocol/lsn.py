"""Log sequence numbers and PostgreSQL timestamps."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from pgcdc_events.errors import ProtocolError

__all__ = [
    "PG_EPOCH_OFFSET_US",
    "Lsn",
    "pg_timestamp_to_datetime",
    "pg_timestamp_to_unix_us",
    "unix_us_to_pg_timestamp",
]

#: Microseconds between the Unix epoch and PostgreSQL's epoch (2000-01-01 UTC).
PG_EPOCH_OFFSET_US = 946_684_800_000_000

_MAX_LSN = (1 << 64) - 1
_UTC = timezone.utc
_UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=_UTC)


class Lsn(int):
    """A WAL position: an unsigned 64-bit integer printed as ``X/Y`` (two hex halves).

    It is an ``int``, so it orders, hashes and does arithmetic like one; ``str()``
    gives PostgreSQL's text form and :meth:`parse` reads it.
    """

    __slots__ = ()

    def __new__(cls, value: int = 0) -> Lsn:
        if not 0 <= value <= _MAX_LSN:
            raise ProtocolError(f"an LSN between 0 and 2**64-1, got {value}")
        return super().__new__(cls, value)

    @classmethod
    def parse(cls, text: str) -> Lsn:
        """Read ``"16/B374D848"``; raises :class:`ProtocolError` on anything else."""
        hi, sep, lo = text.partition("/")
        if (
            not sep
            or not 0 < len(hi) <= 8
            or not 0 < len(lo) <= 8
            or not all(c in "0123456789abcdefABCDEF" for c in hi + lo)
        ):
            raise ProtocolError(
                "an LSN of the form X/Y with 1-8 hex digits each", detail=repr(text)
            )
        return cls((int(hi, 16) << 32) | int(lo, 16))

    def __str__(self) -> str:
        return f"{int(self) >> 32:X}/{int(self) & 0xFFFFFFFF:X}"

    def __repr__(self) -> str:
        return f"Lsn('{self}')"

    def __format__(self, spec: str) -> str:
        return str(self) if not spec else int.__format__(int(self), spec)


def pg_timestamp_to_unix_us(value: int) -> int:
    """Convert microseconds since 2000-01-01 UTC to microseconds since 1970-01-01 UTC."""
    return value + PG_EPOCH_OFFSET_US


def unix_us_to_pg_timestamp(value: int) -> int:
    """Convert microseconds since the Unix epoch to PostgreSQL's epoch."""
    return value - PG_EPOCH_OFFSET_US


def pg_timestamp_to_datetime(value: int) -> datetime:
    """Convert a PostgreSQL timestamp (µs since 2000-01-01 UTC) to an aware UTC ``datetime``.

    Raises :class:`ProtocolError` when the value lies outside ``datetime``'s range
    (years 1 to 9999), as the sentinel values for infinity do.
    """
    try:
        return _UNIX_EPOCH + timedelta(microseconds=value + PG_EPOCH_OFFSET_US)
    except OverflowError:
        raise ProtocolError(
            "a timestamp within years 1-9999", detail=f"{value} µs since 2000-01-01"
        ) from None
