"""The temporal family: date, time, timetz, timestamp, timestamptz and interval.

Unit tests pin Debezium's schemas and the edge values the golden recordings show
(each cites its case: ``corpus/mode/table.column[id=row]`` under tests/golden).
Property tests insert generated values on the throwaway server, capture them as
text and as binary tuples, and check in every ``time.precision.mode`` that the
text and binary converters agree and that the value matches what SQL itself
computes for the stored value (``extract``, ``to_char``, float8 arithmetic).
"""

from __future__ import annotations

import contextlib
import datetime
import struct
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgcdc_events.errors import ConversionError
from pgcdc_events.protocol import Insert, PgOutputReader, Relation, TupleData
from pgcdc_events.types import temporal
from pgcdc_events.types.config import IntervalHandlingMode, TimePrecisionMode, TypeConfig
from pgcdc_events.types.mapper import ColumnMapping, TypeMapper
from pgcdc_events.types.mapping import ValueMapping
from pgcdc_events.types.registry import PgType
from pgcdc_events.types.schema import Schema
from support.capture import Capturer
from support.golden import changes, recordings

MODES: tuple[TimePrecisionMode, ...] = (
    "adaptive", "adaptive_time_microseconds", "connect", "isostring", "microseconds", "nanoseconds")
INTERVAL_MODES: tuple[IntervalHandlingMode, ...] = ("numeric", "string")
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
#: Debezium's sentinels, as the golden recordings show them (types/*/t_time row 2 = infinity,
#: row 3 = -infinity), except the date +infinity, a documented difference.
DATE_INF = {"infinity": 2146033979, "-infinity": -2147472691}
DATE_INF_ISO = {"infinity": "+5877611-06-21Z", "-infinity": "-5877611-06-22Z"}
TS_INF_US = {"Infinity": 9223372036825200000, "-Infinity": -9223372036832400000}
TS_INF_ISO = {"Infinity": "+294247-01-10T04:00:25.2Z", "-Infinity": "-290308-12-21T19:59:27.6Z"}


def mapping(type_name: str, typmod: int = -1, **config: Any) -> ValueMapping:
    """The temporal family's mapping for a type under a configuration."""
    pg_type = PgType(0, "pg_catalog", type_name, "base")
    result = temporal.BUILDERS[type_name](pg_type, typmod, TypeConfig(**config))
    assert result is not None
    return result


def text(type_name: str, raw: bytes, typmod: int = -1, **config: Any) -> Any:
    return mapping(type_name, typmod, **config).from_text(raw)


def binary(type_name: str, raw: bytes, typmod: int = -1, **config: Any) -> Any:
    from_binary = mapping(type_name, typmod, **config).from_binary
    assert from_binary is not None
    return from_binary(raw)


# ---------------------------------------------------------------- schemas


def _schema(kind: str, name: str) -> Schema:
    return Schema(kind, name=name, version=1)


DEBEZIUM = "io.debezium.time."
CONNECT = "org.apache.kafka.connect.data."


# The schemas of types/<mode>/t_time.* (columns c_date, c_time0..c_time, c_ts0..c_ts,
# c_tstz*, c_timetz*, c_interval*) in each recorded mode.
@pytest.mark.parametrize(("type_name", "typmod", "config", "expected"), [
    ("date", -1, {}, _schema("int32", DEBEZIUM + "Date")),
    ("date", -1, {"time_precision_mode": "nanoseconds"}, _schema("int32", DEBEZIUM + "Date")),
    ("date", -1, {"time_precision_mode": "connect"}, _schema("int32", CONNECT + "Date")),
    ("date", -1, {"time_precision_mode": "isostring"}, _schema("string", DEBEZIUM + "IsoDate")),
    ("time", 0, {}, _schema("int32", DEBEZIUM + "Time")),
    ("time", 3, {}, _schema("int32", DEBEZIUM + "Time")),
    ("time", 6, {}, _schema("int64", DEBEZIUM + "MicroTime")),
    ("time", -1, {}, _schema("int64", DEBEZIUM + "MicroTime")),
    ("time", 0, {"time_precision_mode": "adaptive_time_microseconds"},
     _schema("int64", DEBEZIUM + "MicroTime")),
    ("time", 0, {"time_precision_mode": "microseconds"}, _schema("int64", DEBEZIUM + "MicroTime")),
    ("time", 0, {"time_precision_mode": "nanoseconds"}, _schema("int64", DEBEZIUM + "NanoTime")),
    ("time", 6, {"time_precision_mode": "connect"}, _schema("int32", CONNECT + "Time")),
    ("time", 6, {"time_precision_mode": "isostring"}, _schema("string", DEBEZIUM + "IsoTime")),
    ("timestamp", 0, {}, _schema("int64", DEBEZIUM + "Timestamp")),
    ("timestamp", 3, {"time_precision_mode": "adaptive_time_microseconds"},
     _schema("int64", DEBEZIUM + "Timestamp")),
    ("timestamp", 6, {}, _schema("int64", DEBEZIUM + "MicroTimestamp")),
    ("timestamp", -1, {}, _schema("int64", DEBEZIUM + "MicroTimestamp")),
    ("timestamp", 0, {"time_precision_mode": "microseconds"},
     _schema("int64", DEBEZIUM + "MicroTimestamp")),
    ("timestamp", 0, {"time_precision_mode": "nanoseconds"},
     _schema("int64", DEBEZIUM + "NanoTimestamp")),
    ("timestamp", -1, {"time_precision_mode": "connect"}, _schema("int64", CONNECT + "Timestamp")),
    ("timestamp", -1, {"time_precision_mode": "isostring"},
     _schema("string", DEBEZIUM + "IsoTimestamp")),
    ("timestamptz", 0, {}, _schema("string", DEBEZIUM + "ZonedTimestamp")),
    ("timestamptz", -1, {"time_precision_mode": "connect"},
     _schema("string", DEBEZIUM + "ZonedTimestamp")),
    ("timetz", 3, {"time_precision_mode": "isostring"}, _schema("string", DEBEZIUM + "ZonedTime")),
    ("interval", -1, {}, _schema("int64", DEBEZIUM + "MicroDuration")),
    ("interval", -1, {"interval_handling_mode": "string"},
     _schema("string", DEBEZIUM + "Interval")),
])
def test_schema(type_name: str, typmod: int, config: dict[str, Any], expected: Schema) -> None:
    assert mapping(type_name, typmod, **config).schema == expected


def test_toast_placeholder_only_for_string_schemas() -> None:
    # Temporal values are never TOASTed; the layer's convention stands in anyway.
    assert mapping("date").toast is None
    assert mapping("timestamptz", unavailable_value_placeholder=b"X").toast == "X"


# ---------------------------------------------------------------- golden edge values


@pytest.mark.parametrize(("type_name", "typmod", "mode", "raw", "expected"), [
    # types/*/t_time.c_date: BC, 5-digit years, the -infinity sentinel (LocalDate -5877611-06-22)
    ("date", -1, "adaptive", b"0044-03-15 BC", -735160),
    ("date", -1, "adaptive", b"12345-01-01", 3789391),
    ("date", -1, "adaptive", b"-infinity", -2147472691),
    ("date", -1, "isostring", b"0044-03-15 BC", "-0043-03-15Z"),
    ("date", -1, "isostring", b"12345-01-01", "+12345-01-01Z"),
    ("date", -1, "isostring", b"-infinity", "-5877611-06-22Z"),
    # documented difference types/*/t_time.c_date[id=2]: +infinity after every date
    ("date", -1, "adaptive", b"infinity", 2146033979),
    ("date", -1, "isostring", b"infinity", "+5877611-06-21Z"),
    # types/*/t_time.c_time*: 24:00:00 is one whole day in every numeric schema
    ("time", 0, "adaptive", b"24:00:00", 86400000),
    ("time", -1, "nanoseconds", b"24:00:00", 86400000000000),
    ("time", 6, "connect", b"00:00:00.000001", 0),
    ("time", 1, "isostring", b"13:14:15.1", "13:14:15.1Z"),
    # documented difference types/isostring*/t_time.c_time*[id=3]: 24:00:00 is not midnight
    ("time", -1, "isostring", b"24:00:00", "24:00:00Z"),
    # types/*/t_time.c_timetz*: UTC, variable fraction, 24:00:00+05 is 19:00 UTC
    ("timetz", -1, "adaptive", b"13:14:15.123456+05:45", "07:29:15.123456Z"),
    ("timetz", -1, "adaptive", b"00:00:00-00:30", "00:30:00Z"),
    ("timetz", -1, "adaptive", b"24:00:00+05", "19:00:00Z"),
    ("timetz", 3, "adaptive", b"12:00:00.5+01", "11:00:00.5Z"),
    # types_crash_timetz_seconds: Debezium fails on an offset with seconds
    ("timetz", -1, "adaptive", b"12:00:00+05:30:15", "06:29:45Z"),
    # 24:00:00 at UTC stays the end of the day (Debezium's dbz#2100 boundary value)
    ("timetz", -1, "adaptive", b"24:00:00+00", "24:00:00Z"),
    # types/*/t_time.c_ts*: sentinels per schema, floor to milliseconds, BC, large years
    ("timestamp", 0, "adaptive", b"infinity", 9223372036825200),
    ("timestamp", 0, "connect", b"-infinity", -9223372036832400),
    ("timestamp", -1, "adaptive", b"infinity", 9223372036825200000),
    ("timestamp", -1, "nanoseconds", b"-infinity", -9223372036854775808),
    ("timestamp", -1, "isostring", b"infinity", "+294247-01-10T04:00:25.2Z"),
    ("timestamp", -1, "isostring", b"-infinity", "-290308-12-21T19:59:27.6Z"),
    ("timestamp", -1, "connect", b"1969-12-31 23:59:59.999999", -1),
    ("timestamp", 0, "adaptive", b"0044-03-15 12:00:00 BC", -63517780800000),
    ("timestamp", 3, "isostring", b"0001-01-01 00:00:00.001 BC", "0000-01-01T00:00:00.001Z"),
    ("timestamp", 6, "connect", b"294276-12-31 23:59:59.999999", 9224318015999999),
    ("timestamp", -1, "isostring", b"12345-06-07 08:09:10", "+12345-06-07T08:09:10Z"),
    # types/nanos-*/t_time.c_ts[id=7]: outside int64 nanoseconds Debezium emits null
    ("timestamp", -1, "nanoseconds", b"1582-10-04 12:00:00", None),
    # documented difference types/*/t_time.c_ts6[id=5]: past int64 microseconds
    ("timestamp", 6, "adaptive", b"294276-12-31 23:59:59.999999", None),
    # types/*/t_time.c_tstz*: fixed fraction width, UTC, infinity strings
    ("timestamptz", -1, "adaptive", b"2038-01-19 03:14:08+00", "2038-01-19T03:14:08.000000Z"),
    ("timestamptz", 0, "adaptive", b"2024-02-29 13:14:15+02", "2024-02-29T11:14:15Z"),
    ("timestamptz", 3, "adaptive", b"2024-02-29 13:14:15.123-03:30", "2024-02-29T16:44:15.123Z"),
    ("timestamptz", 3, "adaptive", b"0001-12-31 23:59:59.999+00 BC", "0000-12-31T23:59:59.999Z"),
    ("timestamptz", 0, "adaptive", b"12345-06-07 08:09:10+00", "+12345-06-07T08:09:10Z"),
    ("timestamptz", -1, "adaptive", b"infinity", "infinity"),
    # TimeZone Europe/Amsterdam prints old timestamps in local mean time (+00:19:32)
    ("timestamptz", -1, "adaptive", b"1900-01-01 00:19:32+00:19:32", "1900-01-01T00:00:00.000000Z"),
])
def test_text_value(type_name: str, typmod: int, mode: str, raw: bytes, expected: Any) -> None:
    assert text(type_name, raw, typmod, time_precision_mode=mode) == expected


@pytest.mark.parametrize(("raw", "numeric", "string"), [
    # types/*/t_time.c_interval*, c_interval_ym: doubles with 30.4375-day months
    (b"1 year 2 mons 3 days 04:05:06.789", 37091106789000, "P1Y2M3DT4H5M6.789S"),
    (b"-1 years -2 mons +3 days -04:05:06.5", -36572706500000, "P-1Y-2M3DT-4H-5M-6.5S"),
    (b"1 day -00:00:01", 86399000000, "P0Y0M1DT0H0M-1S"),
    (b"-00:00:00.000001", -1, "P0Y0M0DT0H0M-0.000001S"),
    (b"-11 mons", -28927800000000, "P0Y-11M0DT0H0M0S"),
    (b"00:00:00", 0, "P0Y0M0DT0H0M0S"),
    # saturates as Java's (long) cast does
    (b"178000000 years", 9223372036854775807, "P178000000Y0M0DT0H0M0S"),
    (b"-178000000 years", -9223372036854775808, "P-178000000Y0M0DT0H0M0S"),
])
def test_interval_text(raw: bytes, numeric: int, string: str) -> None:
    assert text("interval", raw) == numeric
    assert text("interval", raw, interval_handling_mode="string") == string


def test_interval_string_seconds_are_exact() -> None:
    # Debezium goes through a double (1.003691 -> 1.0036909999999999); we print what PG stored.
    assert text("interval", b"00:00:01.003691", interval_handling_mode="string") == (
        "P0Y0M0DT0H0M1.003691S")
    # ...while MicroDuration keeps Debezium's double arithmetic, truncation included.
    assert text("interval", b"00:00:01.003691") == int((1 + 3691 / 1e6) * 1e6)


def test_interval_needs_postgres_style() -> None:
    with pytest.raises(ConversionError, match="IntervalStyle"):
        text("interval", b"P1Y2M3DT4H5M6S")
    with pytest.raises(ConversionError, match="IntervalStyle"):
        text("interval", b"1-2 +3 +4:05:06")


def test_crash_corpus_timetz_with_offset_seconds() -> None:
    # types_crash_timetz_seconds: Debezium stops on '12:00:00+05:30:15'; we convert it.
    found = []
    for recording in recordings("types_crash_timetz_seconds"):
        mapper = TypeMapper(TypeConfig.from_properties(recording.properties))
        for change in changes(recording)[0]:
            if change.relation.name != "t_timetz_sec":
                continue
            col = change.relation.columns[1]
            column = mapper.column(col.name, col.type_oid, col.type_modifier)
            assert column is not None and isinstance(change.message, Insert)
            raw = change.message.new.values[1]
            assert raw is not None
            found.append((raw, column.convert(raw)))
    assert (b"12:00:00+05:30:15", "06:29:45Z") in found
    assert (b"12:00:00+05:30", "06:30:00Z") in found


# ---------------------------------------------------------------- binary format


def test_binary_infinities_and_units() -> None:
    # PostgreSQL's markers: INT32_MIN/MAX days, INT64_MIN/MAX microseconds.
    assert binary("date", struct.pack(">i", 2**31 - 1)) == text("date", b"infinity")
    assert binary("date", struct.pack(">i", -(2**31))) == text("date", b"-infinity")
    for mode in MODES:
        for marker, word in ((INT64_MAX, b"infinity"), (INT64_MIN, b"-infinity")):
            raw = struct.pack(">q", marker)
            assert binary("timestamp", raw, time_precision_mode=mode) == text(
                "timestamp", word, time_precision_mode=mode)
            assert binary("timestamptz", raw) == word.decode()
    # timetz: microseconds and zone seconds WEST of UTC (+05:45 is -20700).
    assert binary("timetz", struct.pack(">qi", 47655123456, -20700)) == "07:29:15.123456Z"
    # interval: microseconds, days, months.
    assert binary("interval", struct.pack(">qii", 14706789000, 3, 14)) == 37091106789000


# ---------------------------------------------------------------- fast paths


@contextlib.contextmanager
def slicing_only() -> Iterator[None]:
    """Parse as on Python 3.10, without fromisoformat."""
    saved = temporal._FROMISOFORMAT
    temporal._FROMISOFORMAT = False  # type: ignore[misc]
    try:
        yield
    finally:
        temporal._FROMISOFORMAT = saved  # type: ignore[misc]


def pg_timestamp_text(moment: datetime.datetime) -> str:
    """``moment`` as PostgreSQL prints a timestamp (DateStyle ISO, trailing zeros trimmed)."""
    fraction = f".{moment.microsecond:06d}".rstrip("0") if moment.microsecond else ""
    return f"{moment.year:04d}-{moment:%m-%d %H:%M:%S}{fraction}"


@given(st.datetimes(), st.integers(-(16 * 3600 - 1), 16 * 3600 - 1))
def test_slicing_parsers_agree_with_fromisoformat(moment: datetime.datetime, offset: int) -> None:
    sign, east = ("-" if offset < 0 else "+"), abs(offset)
    zone = f"{sign}{east // 3600:02d}" + (f":{east // 60 % 60:02d}" if east % 3600 else "")
    zone += f":{east % 60:02d}" if east % 60 else ""
    ts = pg_timestamp_text(moment).encode()
    tstz = ts + zone.encode()
    time = ts[11:]
    fast = (temporal.parse_date(ts[:10]), temporal.parse_time(time),
            temporal.parse_timestamp(ts), temporal.parse_timestamptz(tstz))
    with slicing_only():
        assert (temporal.parse_date(ts[:10]), temporal.parse_time(time),
                temporal.parse_timestamp(ts), temporal.parse_timestamptz(tstz)) == fast


@given(st.datetimes(), st.sampled_from((0, 1, 3, 6)))
def test_utc_text_shortcut_agrees_with_parsing(moment: datetime.datetime, width: int) -> None:
    # ZonedTimestamp rewrites UTC text in place; it must equal parsing and rendering.
    moment = moment.replace(microsecond=moment.microsecond // 10 ** (6 - width) * 10 ** (6 - width))
    raw = (pg_timestamp_text(moment) + "+00").encode()
    shortcut = temporal.BUILDERS["timestamptz"](PgType(0, "pg_catalog", "timestamptz", "base"),
                                               width, TypeConfig()).from_text
    assert shortcut(raw) == binary("timestamptz", struct.pack(
        ">q", temporal.parse_timestamptz(raw)), width)


# ---------------------------------------------------------------- calendar


@given(st.dates())
def test_calendar_matches_datetime(day: datetime.date) -> None:
    epoch = (day - datetime.date(1970, 1, 1)).days
    assert temporal.days_from_civil(day.year, day.month, day.day) == epoch
    assert temporal.civil_from_days(epoch) == (day.year, day.month, day.day)


@given(st.integers(-(2**40), 2**40))
def test_calendar_round_trips_outside_datetime(days: int) -> None:
    assert temporal.days_from_civil(*temporal.civil_from_days(days)) == days


# ---------------------------------------------------------------- live server

#: Days since 2000-01-01 of PostgreSQL's limits (4714-11-24 BC; 5874897-12-31; 294276-12-31).
DATE_MIN, DATE_MAX, TS_MAX = -2451545, 2145031948, 106751982
#: Interesting days since 2000-01-01: 1 BC/AD 1, 1582 Gregorian switch, 1969/1970, 10000.
SPECIAL_DAYS = (-730120, -730119, -152384, -152385, -10958, -10957, 0, 2921940)
ZONES = ("UTC", "Asia/Kathmandu", "America/St_Johns", "Europe/Amsterdam", "Pacific/Chatham",
         "Africa/Monrovia", "America/Caracas", "Pacific/Kiritimati", "Etc/GMT+12")
US_PER_DAY = 86_400_000_000


class Server:
    """A table ``t`` on the throwaway server; each batch is inserted and captured twice."""

    def __init__(self, conn: Any, columns: str) -> None:
        self.conn = conn
        conn.run("SET TIME ZONE 'UTC'")
        conn.run(f"CREATE TABLE t (id int PRIMARY KEY, {columns})")
        self.capturer = Capturer(conn, tables=["t"])

    def batch(self, rows: Sequence[str], facts: str, zone: str = "UTC"
              ) -> tuple[Relation, list[tuple[TupleData, TupleData, list[str | None]]]]:
        """Insert ``rows`` (SQL value lists after the id); return the relation and, per row, its
        text tuple, binary tuple and the ``facts`` SELECT list computed by the server."""
        self.conn.run("TRUNCATE t")
        values = ", ".join(f"({i}, {row})" for i, row in enumerate(rows))
        self.conn.run(f"INSERT INTO t VALUES {values}")
        self.conn.run(f"SET TIME ZONE '{zone}'")
        try:
            texts = self._decode(self.capturer.changes(peek=True))
            binaries = self._decode(self.capturer.changes(binary=True))
        finally:
            self.conn.run("SET TIME ZONE 'UTC'")
        relation = texts[0]
        assert isinstance(relation, Relation)
        facts_rows = self.conn.run(f"SELECT {facts} FROM t ORDER BY id")
        text_rows = [m.new for m in texts if isinstance(m, Insert)]
        binary_rows = [m.new for m in binaries if isinstance(m, Insert)]
        assert len(text_rows) == len(binary_rows) == len(facts_rows) == len(rows)
        return relation, list(zip(text_rows, binary_rows, facts_rows, strict=True))

    @staticmethod
    def _decode(rows: Sequence[Any]) -> list[Any]:
        reader = PgOutputReader()
        return [m for m in (reader.read(r.data) for r in rows) if isinstance(m, Relation | Insert)]


def check(relation: Relation, rows: Sequence[tuple[TupleData, TupleData, list[Any]]],
          expected: Callable[[Schema, int, list[Any]], Any], facts_per_column: int) -> None:
    """For every mode and column: text == binary == ``expected(schema, typmod, facts)``."""
    for mode in MODES:
        for interval_mode in INTERVAL_MODES:
            mapper = TypeMapper(TypeConfig(time_precision_mode=mode,
                                           interval_handling_mode=interval_mode))
            columns: list[ColumnMapping | None] = [
                mapper.column(c.name, c.type_oid, c.type_modifier) for c in relation.columns]
            for text_row, binary_row, facts in rows:
                for i, column in enumerate(columns[1:], 1):
                    assert column is not None
                    raw_text, raw_binary = text_row.values[i], binary_row.values[i]
                    assert raw_text is not None and raw_binary is not None
                    ours = column.convert(raw_text)
                    assert column.convert(raw_binary, binary=True) == ours, (mode, raw_text)
                    start = (i - 1) * facts_per_column
                    want = expected(column.schema, column.type_modifier,
                                    facts[start:start + facts_per_column])
                    assert ours == want, (mode, interval_mode, column.name, raw_text)


def java_year(era_year: str) -> str:
    """``extract(year)`` (``-44`` is 44 BC) as java.time prints the proleptic year."""
    year = int(era_year)
    if year < 0:
        year += 1
    if year > 9999:
        return f"+{year}"
    return f"-{-year:04d}" if year < 0 else f"{year:04d}"


def iso_fraction(us_digits: str) -> str:
    """``.US`` digits as ISO_LOCAL_TIME prints them (no trailing zeros, none at all for 0)."""
    digits = us_digits.rstrip("0")
    return "." + digits if digits else ""


def micros(seconds: str) -> int:
    """An exact numeric number of seconds as microseconds."""
    return int(Decimal(seconds) * 1_000_000)


def settings_for_server() -> Callable[[Any], Any]:
    return settings(max_examples=30, deadline=None)


# -- date


DATE_FACTS = ("CASE WHEN isfinite({c}) THEN ({c} - date '1970-01-01')::text ELSE {c}::text END,"
              " extract(year from {c})::text, extract(month from {c})::text,"
              " extract(day from {c})::text")


def expect_date(schema: Schema, typmod: int, facts: list[Any]) -> Any:
    days, year, month, day = facts
    if schema.name == DEBEZIUM + "IsoDate":
        if days in DATE_INF_ISO:
            return DATE_INF_ISO[days]
        return f"{java_year(year)}-{int(month):02d}-{int(day):02d}Z"
    return DATE_INF[days] if days in DATE_INF else int(days)


dates = st.one_of(st.integers(DATE_MIN, DATE_MAX), st.sampled_from(SPECIAL_DAYS),
                  st.sampled_from(("infinity", "-infinity")))


def date_sql(value: int | str) -> str:
    return f"'{value}'::date" if isinstance(value, str) else f"date '2000-01-01' + {value}"


def test_date_against_server(pg_conn: Any) -> None:
    server = Server(pg_conn, "c date")

    @settings_for_server()
    @given(st.lists(dates, min_size=1, max_size=25))
    def run(values: list[int | str]) -> None:
        relation, rows = server.batch([date_sql(v) for v in values], DATE_FACTS.format(c="c"))
        check(relation, rows, expect_date, 4)

    run()


# -- time and timetz


def time_literal(us: int) -> str:
    seconds, fraction = divmod(us, 1_000_000)
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{fraction:06d}"


TIME_FACTS = "extract(epoch from {c})::text, to_char({c}::interval, 'HH24:MI:SS.US')"


def expect_time(schema: Schema, typmod: int, facts: list[Any]) -> Any:
    epoch, clock = facts
    us = micros(epoch)
    return {
        DEBEZIUM + "Time": us // 1000, CONNECT + "Time": us // 1000,
        DEBEZIUM + "MicroTime": us, DEBEZIUM + "NanoTime": us * 1000,
        DEBEZIUM + "IsoTime": clock[:8] + iso_fraction(clock[9:]) + "Z",
    }[schema.name or ""]


times = st.one_of(st.integers(0, US_PER_DAY),
                  st.sampled_from((0, US_PER_DAY, US_PER_DAY - 1, US_PER_DAY - 400_000)))


def test_time_against_server(pg_conn: Any) -> None:
    server = Server(pg_conn, "c0 time(0), c3 time(3), c time")
    facts = ", ".join(TIME_FACTS.format(c=c) for c in ("c0", "c3", "c"))

    @settings_for_server()
    @given(st.lists(times, min_size=1, max_size=25))
    def run(values: list[int]) -> None:
        rows = [", ".join([f"'{time_literal(v)}'"] * 3) for v in values]
        relation, captured = server.batch(rows, facts)
        check(relation, captured, expect_time, 2)

    run()


TIMETZ_FACTS = ("({c}::time = '24:00' AND extract(timezone from {c}) = 0)::text,"
                " to_char(({c} AT TIME ZONE 'UTC')::time::interval, 'HH24:MI:SS.US')")


def expect_timetz(schema: Schema, typmod: int, facts: list[Any]) -> Any:
    end_of_day, clock = facts
    assert schema.name == DEBEZIUM + "ZonedTime"
    return "24:00:00Z" if end_of_day == "true" else clock[:8] + iso_fraction(clock[9:]) + "Z"


offsets = st.one_of(st.integers(-(16 * 3600 - 1), 16 * 3600 - 1),
                    st.sampled_from((0, 20700, -1800, 19815, -30)))


def timetz_literal(us: int, offset: int) -> str:
    sign = "-" if offset < 0 else "+"
    east = abs(offset)
    return f"'{time_literal(us)}{sign}{east // 3600:02d}:{east // 60 % 60:02d}:{east % 60:02d}'"


def test_timetz_against_server(pg_conn: Any) -> None:
    server = Server(pg_conn, "c timetz, c3 timetz(3)")
    facts = ", ".join(TIMETZ_FACTS.format(c=c) for c in ("c", "c3"))

    @settings_for_server()
    # 24:00:00+00 is the one value whose UTC time is not wrapped to 00:00.
    @given(st.lists(st.tuples(times, offsets) | st.just((US_PER_DAY, 0)), min_size=1, max_size=25))
    def run(values: list[tuple[int, int]]) -> None:
        rows = [", ".join([timetz_literal(us, offset)] * 2) for us, offset in values]
        relation, captured = server.batch(rows, facts)
        check(relation, captured, expect_timetz, 2)

    run()


# -- timestamp and timestamptz


TS_FACTS = ("extract(epoch from {c})::text, extract(year from {c})::text,"
            " to_char({c}, 'MM-DD\"T\"HH24:MI:SS.US')")


def expect_timestamp(schema: Schema, typmod: int, facts: list[Any]) -> Any:
    epoch, year, rest = facts
    infinite = epoch in TS_INF_US
    us = TS_INF_US[epoch] if infinite else micros(epoch)
    name = schema.name or ""
    if name == DEBEZIUM + "IsoTimestamp":
        return TS_INF_ISO[epoch] if infinite else (
            f"{java_year(year)}-{rest[:14]}{iso_fraction(rest[15:])}Z")
    if name == DEBEZIUM + "NanoTimestamp":
        if infinite:
            return INT64_MAX if us > 0 else INT64_MIN
        return us * 1000 if INT64_MIN <= us * 1000 <= INT64_MAX else None
    if name == DEBEZIUM + "MicroTimestamp":
        return us if us <= INT64_MAX else None  # documented difference past 294247-01-10
    assert name in (DEBEZIUM + "Timestamp", CONNECT + "Timestamp")
    return us // 1000


def timestamp_sql(day: int | str, us: int) -> str:
    if isinstance(day, str):
        return f"'{day}'::timestamp"
    return f"(date '2000-01-01' + {day}) + {us} * interval '1 microsecond'"


# The last day is left out: timestamp(0) may round 23:59:59.5 past the end of the range.
timestamps = st.tuples(
    st.one_of(st.integers(DATE_MIN, TS_MAX - 1), st.sampled_from(SPECIAL_DAYS),
              st.sampled_from(("infinity", "-infinity"))),
    st.integers(0, US_PER_DAY - 1))


def test_timestamp_against_server(pg_conn: Any) -> None:
    server = Server(pg_conn, "c0 timestamp(0), c3 timestamp(3), c timestamp")
    facts = ", ".join(TS_FACTS.format(c=c) for c in ("c0", "c3", "c"))

    @settings_for_server()
    @given(st.lists(timestamps, min_size=1, max_size=25))
    def run(values: list[tuple[int | str, int]]) -> None:
        rows = [", ".join([timestamp_sql(day, us)] * 3) for day, us in values]
        relation, captured = server.batch(rows, facts)
        check(relation, captured, expect_timestamp, 3)

    run()


TSTZ_FACTS = ("isfinite({c})::text || {c}::text, extract(year from {c} AT TIME ZONE 'UTC')::text,"
              " to_char({c} AT TIME ZONE 'UTC', 'MM-DD\"T\"HH24:MI:SS.US')")


def expect_timestamptz(schema: Schema, typmod: int, facts: list[Any]) -> Any:
    finite, year, rest = facts
    assert schema.name == DEBEZIUM + "ZonedTimestamp"
    if finite.startswith("false"):
        return finite[5:]
    width = typmod if typmod >= 0 else 6
    fraction = "." + rest[15:15 + width] if width else ""
    return f"{java_year(year)}-{rest[:14]}{fraction}Z"


def test_timestamptz_against_server(pg_conn: Any) -> None:
    server = Server(pg_conn, "c0 timestamptz(0), c3 timestamptz(3), c timestamptz")
    facts = ", ".join(TSTZ_FACTS.format(c=c) for c in ("c0", "c3", "c"))
    # A day's margin at both ends: the session zone's offset must not push the text out of range.
    days = st.one_of(st.integers(DATE_MIN + 1, TS_MAX - 2), st.sampled_from(SPECIAL_DAYS),
                     st.sampled_from(("infinity", "-infinity")))

    @settings_for_server()
    @given(st.lists(st.tuples(days, st.integers(0, US_PER_DAY - 1)), min_size=1, max_size=25),
           st.sampled_from(ZONES))
    def run(values: list[tuple[int | str, int]], zone: str) -> None:
        rows = [", ".join([f"({timestamp_sql(day, us)}) AT TIME ZONE 'UTC'"] * 3)
                for day, us in values]
        relation, captured = server.batch(rows, facts, zone)
        check(relation, captured, expect_timestamptz, 3)

    run()


# -- interval


INTERVAL_FACTS = (
    "extract(year from {c})::text, extract(month from {c})::text, extract(day from {c})::text,"
    " extract(hour from {c})::text, extract(minute from {c})::text,"
    " extract(second from {c})::text,"
    # MicroDuration.durationMicros, step by step in float8 as Java does in double
    " ((((((extract(year from {c}) * 12 + extract(month from {c}))::float8 * 30.4375"
    "      + extract(day from {c})::float8) * 24.0 + extract(hour from {c})::float8) * 60.0"
    "      + extract(minute from {c})::float8) * 60.0"
    "   + (trunc(extract(second from {c}))::float8"
    "      + ((extract(second from {c}) - trunc(extract(second from {c}))) * 1000000)::float8"
    "        / 1000000.0)) * 1000000.0)::text"
)


def expect_interval(schema: Schema, typmod: int, facts: list[Any]) -> Any:
    years, months, days, hours, minutes, seconds, micro_duration = facts
    if schema.name == DEBEZIUM + "Interval":
        secs = format(Decimal(seconds).normalize(), "f")
        return f"P{years}Y{months}M{days}DT{hours}H{minutes}M{secs}S"
    assert schema.name == DEBEZIUM + "MicroDuration"
    value = float(micro_duration)  # Java's (long): truncate, saturate at the int64 bounds
    return INT64_MAX if value >= 2.0**63 else INT64_MIN if value <= -(2.0**63) else int(value)


def interval_literal(months: int, days: int, us: int) -> str:
    sign = "-" if us < 0 else ""
    seconds, fraction = divmod(abs(us), 1_000_000)
    return (f"'{months} mons {days} days {sign}{seconds // 3600}:{seconds // 60 % 60:02d}:"
            f"{seconds % 60:02d}.{fraction:06d}'")


intervals = st.tuples(
    st.one_of(st.integers(-(2**31) + 1, 2**31 - 1), st.integers(-30, 30)),
    st.one_of(st.integers(-(2**31) + 1, 2**31 - 1), st.integers(-40, 40)),
    st.one_of(st.integers(-(2**63) + 10**6, 2**63 - 10**6), st.integers(-10**8, 10**8)))


def test_interval_against_server(pg_conn: Any) -> None:
    server = Server(pg_conn, "c interval, c3 interval(3), c_ym interval year to month")
    facts = ", ".join(INTERVAL_FACTS.format(c=c) for c in ("c", "c3", "c_ym"))

    @settings_for_server()
    @given(st.lists(intervals, min_size=1, max_size=25))
    def run(values: list[tuple[int, int, int]]) -> None:
        rows = [", ".join([interval_literal(*v)] * 3) for v in values]
        relation, captured = server.batch(rows, facts)
        check(relation, captured, expect_interval, 7)

    run()


# ---------------------------------------------------------------- ZonedTimestamp's first branch


def _closure(fn: Callable[..., Any], name: str) -> Any:
    """The cell of ``name`` in ``fn``'s closure (the converter's general branch)."""
    assert fn.__closure__ is not None
    return fn.__closure__[fn.__code__.co_freevars.index(name)]


def _outcome(fn: Callable[[bytes], Any], raw: bytes) -> tuple[str, str]:
    try:
        return "value", repr(fn(raw))
    except Exception as exc:  # the same error, word for word, from both branches
        return type(exc).__name__, str(exc)


def _tstz_from_text(width: int) -> Callable[[bytes], Any]:
    return temporal.BUILDERS["timestamptz"](PgType(0, "pg_catalog", "timestamptz", "base"),
                                           width, TypeConfig()).from_text


def _replaced(text: bytes, at: int, byte: int) -> bytes:
    return text[:at] + bytes((byte,)) + text[at + 1:]


_tstz_texts = st.one_of(
    # PostgreSQL's own text: years 1..9999, UTC or another session zone, BC, infinities
    st.builds(lambda m, zone, bc: (pg_timestamp_text(m) + zone + bc).encode(), st.datetimes(),
              st.sampled_from(("+00", "+00", "+05:30", "-08", "+00:00:01", "+0")),
              st.sampled_from(("", "", " BC"))),
    st.builds(lambda year, rest: f"{year:05d}{rest}+00".encode(), st.integers(10000, 294276),
              st.sampled_from(("-01-01 00:00:00", "-12-31 23:59:59.999999", "-06-01 12:00:00.5"))),
    st.sampled_from((b"infinity", b"-infinity", b"", b"+00", b"2024-05-01 12:00:00.+00",
                     b"2024-05-01 12:00:00.1234567+00", b"2024-05-01T12:00:00.123+00",
                     b"2024-05-01 12:00:00x123+00", b"2024-05-01 12:00:00.12\xc3\xa9+00")),
    # the common shape with any byte anywhere in it
    st.builds(lambda m, at, byte: _replaced((pg_timestamp_text(m) + "+00").encode(), at, byte),
              st.datetimes(), st.integers(0, 28), st.integers(0, 255)),
)


@given(_tstz_texts, st.sampled_from((0, 1, 3, 6)))
def test_zoned_timestamp_first_branch_equals_the_general_one(raw: bytes, width: int) -> None:
    convert = _tstz_from_text(width)
    general = _closure(convert, "general").cell_contents
    assert _outcome(convert, raw) == _outcome(general, raw)


@given(st.datetimes(), st.sampled_from((1, 3, 6)))
def test_zoned_timestamp_first_branch_takes_the_common_form(moment: datetime.datetime,
                                                             width: int) -> None:
    # UTC text with 1 to ``width`` fraction digits never reaches the general branch
    moment = moment.replace(microsecond=moment.microsecond // 10 ** (6 - width) * 10 ** (6 - width)
                            or 10 ** (6 - width))
    raw = (pg_timestamp_text(moment) + "+00").encode()
    convert = _tstz_from_text(width)
    cell = _closure(convert, "general")
    want = cell.cell_contents(raw)

    def refused(raw: bytes) -> Any:
        raise AssertionError(f"{raw!r} took the general branch")

    general, cell.cell_contents = cell.cell_contents, refused
    try:
        assert convert(raw) == want
    finally:
        cell.cell_contents = general
