"""Dates, times, timestamps and intervals in every ``time.precision.mode``.

A value is first read, from its text output or its binary send format, into
PostgreSQL's own representation (the one the send format carries): a date is
days since 2000-01-01, a time microseconds since midnight, a timetz
(microseconds, zone seconds west of UTC), a timestamp or timestamptz
microseconds since 2000-01-01 00:00 (UTC for timestamptz), an interval
(microseconds, days, months); ``-infinity``/``infinity`` are PostgreSQL's own
markers (``INT32_MIN``/``INT32_MAX`` for dates, ``INT64_MIN``/``INT64_MAX`` for
timestamps). One renderer per column, chosen by the builder, then writes the
Connect value, so the text and binary converters agree by construction.

Text parsing assumes what the walsender prints with ``DateStyle=ISO`` and
``IntervalStyle=postgres`` (PostgreSQL's defaults); timestamptz values may carry
any UTC offset, including one with seconds (``+00:53:28``).
"""

from __future__ import annotations

import datetime
import math
import struct
import sys
from collections.abc import Callable
from typing import Any, Final

import attrs

from pgcdc_events.errors import ConversionError
from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.mapping import Builder, ValueMapping, VectorForm
from pgcdc_events.types.registry import PgType
from pgcdc_events.types.schema import Schema

__all__ = [
    "BUILDERS",
    "UtcZonedText",
    "civil_from_days",
    "days_from_civil",
    "micro_duration",
    "parse_date",
    "parse_interval",
    "parse_time",
    "parse_timestamp",
    "parse_timestamptz",
    "parse_timetz",
]

INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1

#: PostgreSQL's date infinities (DATEVAL_NOBEGIN / DATEVAL_NOEND), days since 2000-01-01.
DATE_NEG_INF: Final = INT32_MIN
DATE_POS_INF: Final = INT32_MAX
#: PostgreSQL's timestamp infinities (DT_NOBEGIN / DT_NOEND), microseconds since 2000-01-01.
TS_NEG_INF: Final = INT64_MIN
TS_POS_INF: Final = INT64_MAX

_PG_EPOCH_DAYS: Final = 10_957  # 2000-01-01 in days since 1970-01-01
_US_PER_S: Final = 1_000_000
_US_PER_MIN: Final = 60 * _US_PER_S
_US_PER_HOUR: Final = 3600 * _US_PER_S
_US_PER_DAY: Final = 86_400 * _US_PER_S
_PG_EPOCH_US: Final = _PG_EPOCH_DAYS * _US_PER_DAY
_ORDINAL_1970: Final = 719_163  # datetime.date(1970, 1, 1).toordinal()
#: The days since 1970 of datetime.date.min and datetime.date.max (years 1..9999).
_MIN_ORDINAL_DAYS: Final = 1 - _ORDINAL_1970
_MAX_ORDINAL_DAYS: Final = 3_652_059 - _ORDINAL_1970
#: Microseconds per unit of the last digit of a 1..6 digit fraction.
_FRACTION_SCALE: Final = (0, 100_000, 10_000, 1_000, 100, 10, 1)
_ORDINAL_2000: Final = _ORDINAL_1970 + _PG_EPOCH_DAYS
_EPOCH_1970: Final = datetime.datetime(1970, 1, 1)
_EPOCH_2000: Final = datetime.datetime(2000, 1, 1)
_EPOCH_2000_UTC: Final = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)
#: From Python 3.11, fromisoformat reads every form PostgreSQL prints for years 1..9999 AD
#: (1 to 6 fraction digits; offsets +HH, +HH:MM, +HH:MM:SS) in C, several times faster than
#: slicing; before 3.11 the slicing parsers do all the work.
_FROMISOFORMAT: Final = sys.version_info >= (3, 11)

# Debezium's sentinels for infinite values (PostgresValueConverter, 3.6.3).
#: date -infinity: LocalDate -5877611-06-22 (golden types/*/t_time.c_date[id=3]).
_DATE_NEG_INF_DAYS: Final = -2_147_472_691
#: date infinity: LocalDate +5877611-06-21, the value debezium/dbz#2524 corrects the constant
#: to; Debezium 3.6.3 emits -5877611-06-21, before -infinity (documented difference).
_DATE_POS_INF_DAYS: Final = 2_146_033_979
#: timestamp ±infinity: pgjdbc's DATE_POSITIVE/NEGATIVE_INFINITY (milliseconds) read as
#: microseconds, as documented in Debezium's postgresql.adoc (golden t_time.c_ts[id=2,3]).
_TS_POS_INF_US: Final = 9_223_372_036_825_200_000
_TS_NEG_INF_US: Final = -9_223_372_036_832_400_000
#: MicroDuration's days per month (MicroDuration.DAYS_PER_MONTH_AVG = 365.25 / 12).
_DAYS_PER_MONTH_AVG: Final = 365.25 / 12.0

_TIMETZ: Final = struct.Struct(">qi")
_INTERVAL: Final = struct.Struct(">qii")


# ---------------------------------------------------------------- calendar


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (astronomical year: 1 BC = 0)."""
    if 1 <= year <= 9999:
        return datetime.date(year, month, day).toordinal() - _ORDINAL_1970
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    return era * 146_097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719_468


def civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of ``days`` since 1970-01-01, proleptic Gregorian, astronomical year."""
    if _MIN_ORDINAL_DAYS <= days <= _MAX_ORDINAL_DAYS:
        d = datetime.date.fromordinal(days + _ORDINAL_1970)
        return d.year, d.month, d.day
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def _iso_date(days: int) -> str:
    """``days`` since 1970 as java.time prints a LocalDate: ``+12345-01-01``, ``-0043-03-15``."""
    year, month, day = civil_from_days(days)
    if 0 <= year <= 9999:
        return f"{year:04d}-{month:02d}-{day:02d}"
    if year > 9999:
        return f"+{year}-{month:02d}-{day:02d}"
    return f"-{-year:04d}-{month:02d}-{day:02d}"


def _iso_time(us: int) -> str:
    """Microseconds since midnight as ISO_LOCAL_TIME prints them (fraction without trailing 0s).

    24:00:00 stays ``24:00:00`` (PostgreSQL's end of day), unlike java.time.
    """
    seconds, fraction = divmod(us, _US_PER_S)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    if fraction:
        return f"{hour:02d}:{minute:02d}:{second:02d}.{fraction:06d}".rstrip("0")
    return f"{hour:02d}:{minute:02d}:{second:02d}"


def _iso_datetime6(epoch_us: int) -> str:
    """Microseconds since 1970 as ``[+-]YYYY-MM-DDTHH:MM:SS.ffffff`` (always 6 digits)."""
    days, us = divmod(epoch_us, _US_PER_DAY)
    seconds, fraction = divmod(us, _US_PER_S)
    if _MIN_ORDINAL_DAYS <= days <= _MAX_ORDINAL_DAYS:
        text = (_EPOCH_1970 + datetime.timedelta(days, seconds, fraction)).isoformat()
        return text if fraction else text + ".000000"
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return f"{_iso_date(days)}T{hour:02d}:{minute:02d}:{second:02d}.{fraction:06d}"


def _iso_datetime(epoch_us: int) -> str:
    """Microseconds since 1970 as ISO_LOCAL_DATE_TIME prints them (fraction without trailing
    zeros), without a zone."""
    text = _iso_datetime6(epoch_us).rstrip("0")
    return text[:-1] if text[-1] == "." else text


# ---------------------------------------------------------------- text parsers


def _delta_us(delta: datetime.timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * _US_PER_S + delta.microseconds


def _ymd(raw: bytes, bc: bool) -> int:
    """Days since 2000-01-01 of an ISO date ``YYYY-MM-DD`` (the year may have 5+ digits)."""
    year = int(raw[:-6])
    if bc:
        year = 1 - year
    return days_from_civil(year, int(raw[-5:-3]), int(raw[-2:])) - _PG_EPOCH_DAYS


def parse_date(raw: bytes) -> int:
    """A date's text output (``2024-02-29``, ``0044-03-15 BC``, ``infinity``) as PG days."""
    if raw[-1:] == b"y":
        if raw == b"infinity":
            return DATE_POS_INF
        if raw == b"-infinity":
            return DATE_NEG_INF
    if len(raw) == 10:  # YYYY-MM-DD, years 1..9999 AD
        return datetime.date.fromisoformat(raw.decode("ascii")).toordinal() - _ORDINAL_2000
    if raw[-3:] == b" BC":
        return _ymd(raw[:-3], True)
    return _ymd(raw, False)


def parse_time(raw: bytes) -> int:
    """A time's text output (``HH:MM:SS[.ffffff]``, ``24:00:00`` included) as microseconds."""
    if _FROMISOFORMAT and raw[0:2] != b"24":
        t = datetime.time.fromisoformat(raw.decode("ascii"))
        return ((t.hour * 60 + t.minute) * 60 + t.second) * _US_PER_S + t.microsecond
    us = (int(raw[0:2]) * 3600 + int(raw[3:5]) * 60 + int(raw[6:8])) * _US_PER_S
    if len(raw) > 9:
        fraction = raw[9:]
        us += int(fraction) * _FRACTION_SCALE[len(fraction)]
    return us


def _offset_seconds(raw: bytes) -> int:
    """A UTC offset (``+05``, ``-00:30``, ``+00:53:28``) as seconds east of UTC."""
    seconds = int(raw[1:3]) * 3600
    if len(raw) > 3:
        seconds += int(raw[4:6]) * 60
        if len(raw) > 6:
            seconds += int(raw[7:9])
    return -seconds if raw[0] == 0x2D else seconds


def _offset_start(raw: bytes) -> int:
    """Index of the sign of the UTC offset that follows ``HH:MM:SS[.f]`` in ``raw``."""
    i = raw.find(b"+", 8)
    return raw.find(b"-", 8) if i < 0 else i


def parse_timetz(raw: bytes) -> tuple[int, int]:
    """A timetz's text output as (microseconds, zone seconds WEST of UTC), as PG stores it."""
    i = _offset_start(raw)
    return parse_time(raw[:i]), -_offset_seconds(raw[i:])


def _timestamp_parts(raw: bytes) -> tuple[bytes, bytes, bool]:
    """Split ``YYYY-MM-DD HH:MM:SS...[ BC]`` into date, time and whether it is BC."""
    bc = raw[-3:] == b" BC"
    if bc:
        raw = raw[:-3]
    i = raw.index(b" ")
    return raw[:i], raw[i + 1:], bc


def parse_timestamp(raw: bytes) -> int:
    """A timestamp's text output as microseconds since 2000-01-01 (or an infinity marker)."""
    if _FROMISOFORMAT and raw[4:5] == b"-" and raw[-1:] != b"C":  # years 1..9999 AD
        return _delta_us(datetime.datetime.fromisoformat(raw.decode("ascii")) - _EPOCH_2000)
    if raw[-1:] == b"y":
        if raw == b"infinity":
            return TS_POS_INF
        if raw == b"-infinity":
            return TS_NEG_INF
    date, time, bc = _timestamp_parts(raw)
    return _ymd(date, bc) * _US_PER_DAY + parse_time(time)


def parse_timestamptz(raw: bytes) -> int:
    """A timestamptz's text output (any offset) as UTC microseconds since 2000-01-01."""
    if _FROMISOFORMAT and raw[4:5] == b"-" and raw[-1:] != b"C":  # years 1..9999 AD
        return _delta_us(datetime.datetime.fromisoformat(raw.decode("ascii")) - _EPOCH_2000_UTC)
    if raw[-1:] == b"y":
        if raw == b"infinity":
            return TS_POS_INF
        if raw == b"-infinity":
            return TS_NEG_INF
    date, time, bc = _timestamp_parts(raw)
    i = _offset_start(time)
    local = _ymd(date, bc) * _US_PER_DAY + parse_time(time[:i])
    return local - _offset_seconds(time[i:]) * _US_PER_S


def _interval_time(raw: bytes) -> int:
    """The ``[-]H+:MM:SS[.f]`` part of an interval as signed microseconds."""
    negative = raw[0] == 0x2D
    if raw[0] in b"+-":
        raw = raw[1:]
    hours, minutes, seconds = raw.split(b":")
    us = (int(hours) * 3600 + int(minutes) * 60) * _US_PER_S
    if len(seconds) > 2:
        whole, fraction = seconds.split(b".")
        us += int(whole) * _US_PER_S + int(fraction) * _FRACTION_SCALE[len(fraction)]
    else:
        us += int(seconds) * _US_PER_S
    return -us if negative else us


_INTERVAL_MONTHS: Final = {b"year": 12, b"years": 12, b"mon": 1, b"mons": 1}


def parse_interval(raw: bytes) -> tuple[int, int, int]:
    """An interval's text output (IntervalStyle ``postgres``) as (microseconds, days, months).

    E.g. ``1 year 2 mons 3 days 04:05:06.789`` or ``-1 years -2 mons +3 days -04:05:06.5``.
    """
    us = days = months = 0
    tokens = raw.split(b" ")
    i, n = 0, len(tokens)
    while i < n:
        token = tokens[i]
        if b":" in token:
            us = _interval_time(token)
            i += 1
            continue
        unit = tokens[i + 1] if i + 1 < n else b""
        if unit in (b"day", b"days"):
            days = int(token)
        elif unit in _INTERVAL_MONTHS:
            months += int(token) * _INTERVAL_MONTHS[unit]
        else:
            raise ConversionError(
                f"cannot read interval {raw[:60]!r}: expected IntervalStyle 'postgres' output")
        i += 2
    return us, days, months


# ---------------------------------------------------------------- binary parsers


def _int_be(raw: bytes) -> int:
    """A big-endian signed integer: date (int32), time and timestamp[tz] (int64) send formats."""
    if len(raw) not in (4, 8):  # any length would make an integer of any size
        raise ConversionError(f"expected a 4- or 8-byte integer, got {len(raw)} bytes")
    return int.from_bytes(raw, "big", signed=True)


def _timetz_binary(raw: bytes) -> tuple[int, int]:
    """timetz's send format: int64 microseconds, int32 zone seconds west of UTC."""
    us, zone = _TIMETZ.unpack(raw)
    return us, zone


def _interval_binary(raw: bytes) -> tuple[int, int, int]:
    """interval's send format: int64 microseconds, int32 days, int32 months."""
    us, days, months = _INTERVAL.unpack(raw)
    return us, days, months


# ---------------------------------------------------------------- renderers


def _date_epoch_days(days: int) -> int:
    """PG days as io.debezium.time.Date / Connect Date: days since 1970, Debezium's infinities."""
    if days == DATE_POS_INF:
        return _DATE_POS_INF_DAYS
    if days == DATE_NEG_INF:
        return _DATE_NEG_INF_DAYS
    return days + _PG_EPOCH_DAYS


def _date_iso(days: int) -> str:
    """PG days as io.debezium.time.IsoDate (``2024-02-29Z``)."""
    return _iso_date(_date_epoch_days(days)) + "Z"


def _time_millis(us: int) -> int:
    return us // 1000


def _time_micros(us: int) -> int:
    return us


def _time_nanos(us: int) -> int:
    return us * 1000


def _time_iso(us: int) -> str:
    """io.debezium.time.IsoTime; 24:00:00 stays 24:00:00 (documented difference)."""
    return _iso_time(us) + "Z"


def _zoned_time(value: tuple[int, int]) -> str:
    """timetz as io.debezium.time.ZonedTime: the time in UTC, wrapped to one day.

    ``24:00:00+00`` stays ``24:00:00Z`` (as Debezium's dbz#2100 boundary fix emits it);
    every other value wraps as PostgreSQL's ``AT TIME ZONE 'UTC'`` does.
    """
    us, zone = value
    if us == _US_PER_DAY and zone == 0:
        return "24:00:00Z"
    return _iso_time((us + zone * _US_PER_S) % _US_PER_DAY) + "Z"


def _timestamp_micros(us: int) -> int | None:
    """io.debezium.time.MicroTimestamp; ``None`` past 294247-01-10 (documented difference)."""
    if us == TS_POS_INF:
        return _TS_POS_INF_US
    if us == TS_NEG_INF:
        return _TS_NEG_INF_US
    epoch = us + _PG_EPOCH_US
    return epoch if epoch <= INT64_MAX else None


def _timestamp_millis(us: int) -> int:
    """io.debezium.time.Timestamp / Connect Timestamp: milliseconds, floored like Instant."""
    if us == TS_POS_INF:
        return _TS_POS_INF_US // 1000
    if us == TS_NEG_INF:
        return _TS_NEG_INF_US // 1000
    return (us + _PG_EPOCH_US) // 1000


def _timestamp_nanos(us: int) -> int | None:
    """io.debezium.time.NanoTimestamp; ``None`` outside int64 nanoseconds, as Debezium does
    (golden types/nanos-*/t_time.c_ts[id=7]); infinities are Long.MAX/MIN_VALUE (dbz#1833)."""
    if us == TS_POS_INF:
        return INT64_MAX
    if us == TS_NEG_INF:
        return INT64_MIN
    nanos = (us + _PG_EPOCH_US) * 1000
    return nanos if INT64_MIN <= nanos <= INT64_MAX else None


def _timestamp_iso(us: int) -> str:
    """io.debezium.time.IsoTimestamp; infinities print the MicroTimestamp sentinels as instants
    (golden types/isostring-*/t_time.c_ts[id=2]: ``+294247-01-10T04:00:25.2Z``)."""
    if us == TS_POS_INF:
        return _iso_datetime(_TS_POS_INF_US) + "Z"
    if us == TS_NEG_INF:
        return _iso_datetime(_TS_NEG_INF_US) + "Z"
    return _iso_datetime(us + _PG_EPOCH_US) + "Z"


def _zoned_timestamp(width: int) -> Callable[[int], str]:
    """io.debezium.time.ZonedTimestamp in UTC with exactly ``width`` fraction digits (the
    column's precision, 6 when unspecified: golden t_time.c_tstz ``...T03:14:08.000000Z``),
    or for ``timestamptz(0)`` the digits there are, trailing zeros dropped (only a default
    literal has more digits than its column, and the connector truncates it to the
    precision, or keeps it whole under (0): golden events_defaults ``12:00:00.5Z``,
    events_defaults_edge ``00:00:00.123Z``); infinities are ``infinity``/``-infinity``."""

    def render(us: int) -> str:
        if us == TS_POS_INF:
            return "infinity"
        if us == TS_NEG_INF:
            return "-infinity"
        text = _iso_datetime6(us + _PG_EPOCH_US)
        fraction = text[-6:width - 6 or None] if width else text[-6:].rstrip("0")
        return f"{text[:-7]}.{fraction}Z" if fraction else f"{text[:-7]}Z"

    return render


@attrs.frozen
class UtcZonedText(VectorForm):
    """timestamptz text printed in UTC, years 1..9999 AD (``YYYY-MM-DD HH:MM:SS[.f]+00``,
    ASCII), as a ZonedTimestamp with ``width`` fraction digits (0: the digits printed) by
    rewriting the text in place (:func:`_zoned_timestamp_from_text`); other values are
    parsed and rendered by the scalar converter."""

    width: int


def _zoned_timestamp_from_text(width: int) -> Callable[[bytes], str]:
    """ZonedTimestamp from text: values printed in UTC (``+00``, years 1..9999 AD) are
    rewritten in place (:class:`UtcZonedText`); the rest are parsed and rendered."""
    render = _zoned_timestamp(width)

    def general(raw: bytes) -> str:
        if raw[-3:] == b"+00" and raw[4:5] == b"-":
            if width and len(raw) == 23 + width:  # exactly the width's digits: as they are
                text = raw.decode("ascii")
                return f"{text[:10]}T{text[11:19]}.{text[20:-3]}Z"
            text = raw[:-3].decode("ascii")  # YYYY-MM-DD HH:MM:SS[.f], no trailing zeros
            fraction = text[20:].ljust(width, "0")[:width] if width else text[20:]
            if fraction:
                return f"{text[:10]}T{text[11:19]}.{fraction}Z"
            return f"{text[:10]}T{text[11:19]}Z"
        return render(parse_timestamptz(raw))

    # the common form first: 1 to ``width`` fraction digits printed (``YYYY-MM-DD
    # HH:MM:SS.f+00``; PostgreSQL drops trailing zeros), told by its length and three
    # separators, one decode and one f-string with the missing zeros: what ``general``
    # gives it, in about a quarter fewer instructions
    full = 23 + width if width else -1
    zeros = tuple("0" * n for n in range(width))

    def convert(raw: bytes) -> str:
        missing = full - len(raw)
        if 0 <= missing < width and raw[19] == 46 and raw[4] == 45 and raw[-3:] == b"+00":
            text = raw.decode("ascii")
            if missing:
                return f"{text[:10]}T{text[11:-3]}{zeros[missing]}Z"
            return f"{text[:10]}T{text[11:-3]}Z"
        return general(raw)

    return convert


def _interval_fields(value: tuple[int, int, int]) -> tuple[int, int, int, int, int, int, int]:
    """(years, months, days, hours, minutes, seconds, microseconds) as PostgreSQL prints them:
    each part truncated toward zero and carrying the sign of its whole (pgjdbc PGInterval)."""
    us, days, months = value
    msign = -1 if months < 0 else 1
    years, mons = divmod(abs(months), 12)
    sign = -1 if us < 0 else 1
    hours, rest = divmod(abs(us), _US_PER_HOUR)
    minutes, rest = divmod(rest, _US_PER_MIN)
    seconds, micros = divmod(rest, _US_PER_S)
    return (msign * years, msign * mons, days, sign * hours, sign * minutes, sign * seconds,
            sign * micros)


def _java_long(value: float) -> int:
    """Java's ``(long)`` of a double: truncation, saturating at the int64 bounds, NaN -> 0."""
    if math.isnan(value):
        return 0
    if value >= 9.223372036854775807e18:
        return INT64_MAX
    if value <= -9.223372036854775808e18:
        return INT64_MIN
    return int(value)


def micro_duration(value: tuple[int, int, int]) -> int:
    """io.debezium.time.MicroDuration, computed in doubles exactly as MicroDuration.durationMicros
    does from pgjdbc's PGInterval fields (30.4375-day months; ``178000000 years`` saturates to
    Long.MAX_VALUE, golden types/default/t_time.c_interval3[id=3])."""
    years, months, days, hours, minutes, seconds, micros = _interval_fields(value)
    number_of_days = float(years * 12 + months) * _DAYS_PER_MONTH_AVG + days
    number_of_seconds = ((number_of_days * 24.0 + hours) * 60.0 + minutes) * 60.0 + (
        seconds + micros / 1_000_000)
    return _java_long(number_of_seconds * 1_000_000.0)


def _interval_iso(value: tuple[int, int, int]) -> str:
    """io.debezium.time.Interval: ``P{y}Y{m}M{d}DT{h}H{m}M{s}S``, each part signed, seconds
    without trailing zeros (golden t_time.c_interval: ``P0Y0M0DT0H0M-0.000001S``)."""
    years, months, days, hours, minutes, seconds, micros = _interval_fields(value)
    if micros:
        text = f"{abs(seconds)}.{abs(micros):06d}".rstrip("0")
        secs = "-" + text if seconds < 0 or micros < 0 else text
    else:
        secs = str(seconds)
    return f"P{years}Y{months}M{days}DT{hours}H{minutes}M{secs}S"


# ---------------------------------------------------------------- builders


def _schema(kind: str, name: str) -> Schema:
    return Schema(kind, name=name, version=1)


def _mapping(schema: Schema, render: Callable[[Any], Any], parse_text: Callable[[bytes], Any],
             parse_binary: Callable[[bytes], Any], config: TypeConfig,
             from_text: Callable[[bytes], Any] | None = None,
             vector: VectorForm | None = None) -> ValueMapping:
    """The column's mapping: ``render`` applied to the parsed text or binary value (or a
    dedicated ``from_text``, whose vector form is ``vector``)."""
    toast = config.placeholder_text if schema.type == "string" else None
    return ValueMapping(
        schema,
        from_text or (lambda raw: render(parse_text(raw))),
        lambda raw: render(parse_binary(raw)),
        toast,
        vector,
    )


def _adaptive_millis(mode: str, precision: int) -> bool:
    """Whether adaptive modes keep this precision in milliseconds (0..3 digits)."""
    return mode in ("adaptive", "adaptive_time_microseconds") and 0 <= precision <= 3


def _date(t: PgType, typmod: int, config: TypeConfig) -> ValueMapping:
    mode = config.time_precision_mode
    if mode == "isostring":
        return _mapping(_schema("string", "io.debezium.time.IsoDate"), _date_iso, parse_date,
                        _int_be, config)
    name = "org.apache.kafka.connect.data.Date" if mode == "connect" else "io.debezium.time.Date"
    return _mapping(_schema("int32", name), _date_epoch_days, parse_date, _int_be, config)


def _time(t: PgType, typmod: int, config: TypeConfig) -> ValueMapping:
    mode = config.time_precision_mode
    render: Callable[[int], Any]
    if mode == "connect":
        schema, render = _schema("int32", "org.apache.kafka.connect.data.Time"), _time_millis
    elif mode == "isostring":
        schema, render = _schema("string", "io.debezium.time.IsoTime"), _time_iso
    elif mode == "nanoseconds":
        schema, render = _schema("int64", "io.debezium.time.NanoTime"), _time_nanos
    elif mode == "adaptive" and 0 <= typmod <= 3:  # adaptive_time_microseconds: MicroTime
        schema, render = _schema("int32", "io.debezium.time.Time"), _time_millis
    else:
        schema, render = _schema("int64", "io.debezium.time.MicroTime"), _time_micros
    return _mapping(schema, render, parse_time, _int_be, config)


def _timetz(t: PgType, typmod: int, config: TypeConfig) -> ValueMapping:
    return _mapping(_schema("string", "io.debezium.time.ZonedTime"), _zoned_time, parse_timetz,
                    _timetz_binary, config)


def _timestamp(t: PgType, typmod: int, config: TypeConfig) -> ValueMapping:
    mode = config.time_precision_mode
    render: Callable[[int], Any]
    if mode == "connect":
        schema, render = (_schema("int64", "org.apache.kafka.connect.data.Timestamp"),
                          _timestamp_millis)
    elif mode == "isostring":
        schema, render = _schema("string", "io.debezium.time.IsoTimestamp"), _timestamp_iso
    elif mode == "nanoseconds":
        schema, render = _schema("int64", "io.debezium.time.NanoTimestamp"), _timestamp_nanos
    elif _adaptive_millis(mode, typmod):
        schema, render = _schema("int64", "io.debezium.time.Timestamp"), _timestamp_millis
    else:
        schema, render = _schema("int64", "io.debezium.time.MicroTimestamp"), _timestamp_micros
    return _mapping(schema, render, parse_timestamp, _int_be, config)


def _timestamptz(t: PgType, typmod: int, config: TypeConfig) -> ValueMapping:
    width = typmod if 0 <= typmod <= 6 else 6
    return _mapping(_schema("string", "io.debezium.time.ZonedTimestamp"),
                    _zoned_timestamp(width), parse_timestamptz, _int_be, config,
                    _zoned_timestamp_from_text(width), UtcZonedText(width))


def _interval(t: PgType, typmod: int, config: TypeConfig) -> ValueMapping:
    if config.interval_handling_mode == "string":
        return _mapping(_schema("string", "io.debezium.time.Interval"), _interval_iso,
                        parse_interval, _interval_binary, config)
    return _mapping(_schema("int64", "io.debezium.time.MicroDuration"), micro_duration,
                    parse_interval, _interval_binary, config)


BUILDERS: Final[dict[str, Builder]] = {
    "date": _date,
    "time": _time,
    "timetz": _timetz,
    "timestamp": _timestamp,
    "timestamptz": _timestamptz,
    "interval": _interval,
}


# ---------------------------------------------------------------- PostgreSQL's own text


def pg_date_text(days_since_2000: int) -> str:
    """A date as PostgreSQL prints it (DateStyle ISO): ``2024-05-01``, ``0044-03-15 BC``."""
    if days_since_2000 in (-(2**31), 2**31 - 1):
        return "-infinity" if days_since_2000 < 0 else "infinity"
    year, month, day = civil_from_days(days_since_2000 + _PG_EPOCH_DAYS)
    if year <= 0:
        return f"{1 - year:04d}-{month:02d}-{day:02d} BC"
    return f"{year:04d}-{month:02d}-{day:02d}"


def pg_timestamp_text(us_since_2000: int, *, with_zone: bool = False) -> str:
    """A timestamp as PostgreSQL prints it (DateStyle ISO; ``+00`` for timestamptz in UTC)."""
    if us_since_2000 in (-(2**63), 2**63 - 1):
        return "-infinity" if us_since_2000 < 0 else "infinity"
    days, us = divmod(us_since_2000, _US_PER_DAY)
    date_text = pg_date_text(days)
    bc = date_text.endswith(" BC")
    time_text = _iso_time(us)
    zone = "+00" if with_zone else ""
    if bc:
        return f"{date_text[:-3]} {time_text}{zone} BC"
    return f"{date_text} {time_text}{zone}"
