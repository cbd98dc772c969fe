"""Regression tests for what the fuzzing campaign found (tools/fuzz_values.py, fuzz_protocol.py).

Each case is the smallest input of its kind; the fix is named in the test's docstring.
"""

from __future__ import annotations

import struct
import time
import tracemalloc

import pytest

from pgcdc_events.errors import ConfigurationError, ConversionError, ProtocolError
from pgcdc_events.events import EventConfig, EventDecoder
from pgcdc_events.events.jsonconv import JsonRecordWriter
from pgcdc_events.protocol import (
    Begin,
    CaptureError,
    CaptureRow,
    Insert,
    Relation,
    RelationColumn,
    TupleData,
    encode_message,
    parse_message,
)
from pgcdc_events.testing.validate import validate_record
from pgcdc_events.types.catalog import CatalogError, CatalogSnapshot
from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.mapper import TypeMapper
from pgcdc_events.types.registry import TypeRegistry

MODES = [TypeConfig(), TypeConfig(decimal_handling_mode="string"),
         TypeConfig(decimal_handling_mode="double")]


def _column(oid: int, typmod: int = -1, config: TypeConfig | None = None):  # type: ignore[no-untyped-def]
    col = TypeMapper(config or TypeConfig(), TypeRegistry()).column("c", oid, typmod, table="s.t")
    assert col is not None
    return col


@pytest.mark.parametrize(("oid", "raw"), [
    (23, b"\x00\x01\x02"),  # int4
    (21, b""),  # int2
    (20, b"\x00" * 9),  # int8
    (700, b"\x00"),  # float4
    (790, b"\x00\x00"),  # money
    (1186, b"\x00" * 15),  # interval
    (1266, b"\x00" * 11),  # timetz
])
def test_binary_values_of_the_wrong_length_are_conversion_errors(oid: int, raw: bytes) -> None:
    """struct.error escaped ColumnMapping.convert and TableSchema rows; both now wrap it."""
    with pytest.raises(ConversionError) as info:
        _column(oid).convert(raw, binary=True, table="s.t")
    assert (info.value.table, info.value.column) == ("s.t", "c")


def test_a_binary_row_with_a_short_int4_names_table_and_column() -> None:
    decoder = EventDecoder(EventConfig.from_properties({"topic.prefix": "p"}))
    decoder.feed(encode_message(Begin(100, 0, 7)), 1)
    decoder.feed(encode_message(Relation(16400, "s", "t", "d",
                                         (RelationColumn(1, "id", 23, -1),))), 2)
    with pytest.raises(ConversionError) as info:
        decoder.feed(encode_message(Insert(16400, TupleData(b"b", (b"\x00\x01",)))), 3)
    assert info.value.table == "s.t" and info.value.column == "id"


@pytest.mark.parametrize("oid", [1082, 1083, 1114, 1184])
def test_binary_dates_and_times_of_any_length_are_rejected(oid: int) -> None:
    """int.from_bytes of any length made integers of thousands of digits that no JSON
    writer could print; the send formats are 4 or 8 bytes."""
    with pytest.raises(ConversionError, match="4- or 8-byte"):
        _column(oid).convert(b"\x7f" * 3000, binary=True, table="s.t")


@pytest.mark.parametrize("raw", [b"1e999999999", b"1E+131071", b"-1e-999999", b"-nan",
                                 b"9" * 131073])
@pytest.mark.parametrize("typmod", [-1, (10 << 16 | 0) + 4])
@pytest.mark.parametrize("config", MODES)
def test_numeric_text_that_postgresql_never_prints(raw: bytes, typmod: int,
                                                   config: TypeConfig) -> None:
    """'1e999999999' (11 bytes) took minutes to turn into a billion-digit integer; numeric
    text is now checked against numeric_out's grammar (no exponent, PostgreSQL's limits)."""
    started = time.process_time()
    with pytest.raises(ConversionError) as info:
        _column(1700, typmod, config).convert(raw, table="s.t")
    assert info.value.column == "c"
    assert time.process_time() - started < 5  # was minutes; a generous bound, not a benchmark


def test_numeric_text_postgresql_prints_still_converts() -> None:
    writer = JsonRecordWriter()
    for raw in (b"0", b"-12.50", b"NaN", b"Infinity", b"-Infinity", b"1" * 1000 + b".5"):
        for config in MODES:
            for typmod in (-1, (1002 << 16 | 1) + 4):
                col = _column(1700, typmod, config)
                value = col.convert(raw, table="s.t")
                if value is not None:
                    writer.payload(col.schema, value)


def test_money_with_more_digits_than_an_int64_is_rejected() -> None:
    """A money literal of 100,000 digits parsed, then took seconds to serialize."""
    with pytest.raises(ConversionError, match="not a money value"):
        _column(790).convert(b"$1," + b"0" * 100_000, table="s.t")
    assert _column(790).convert(b"-$92,233,720,368,547,758.08", table="s.t") is not None


@pytest.mark.parametrize(("name", "value"), [
    ("column.include.list", "*"),
    ("table.exclude.list", "a.*,b["),
    ("message.prefix.include.list", "("),
    ("datatype.propagate.source.type", "\\u12"),
    ("column.propagate.source.type", "+"),
    ("column.mask.with.5.chars", "x["),
    ("column.truncate.to.3.chars", "("),
    ("column.mask.hash.SHA-256.with.salt.pepper", "*"),
])
def test_an_invalid_pattern_names_its_property(name: str, value: str) -> None:
    """'invalid regular expression' did not say which property held it."""
    with pytest.raises(ConfigurationError, match="invalid regular expression") as info:
        EventConfig.from_properties({"topic.prefix": "p", name: value})
    assert str(info.value).startswith(f"{name}: ")


def test_a_tuple_claiming_32767_columns_allocates_nothing_for_them() -> None:
    """The column list was allocated before checking that the bytes could hold it."""
    data = b"I" + struct.pack(">I", 16400) + b"N" + struct.pack(">H", 32767) + b"t"
    tracemalloc.start()
    try:
        # refused by PostgreSQL's 1664-column limit now, before the bytes are even counted
        with pytest.raises(ProtocolError, match="the count is 32767") as info:
            parse_message(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024  # [None] * 32767 alone is 256 KiB
    assert info.value.message_type == "I" and info.value.offset == 6


@pytest.mark.parametrize("line", ["[" * 100_000, '{"lsn": "0/1", "xid": "²", "data": ""}',
                                  '{"lsn": "0/1", "xid": "١٢", "data": ""}'])
def test_capture_lines_that_json_or_int_choke_on_are_capture_errors(line: str) -> None:
    """Deep nesting raised RecursionError and a non-ASCII digit xid a bare ValueError (or
    was read as a number); both are CaptureError naming the line now."""
    with pytest.raises(CaptureError, match="line 7"):
        CaptureRow.from_line(line, line_number=7)


def test_a_deeply_nested_catalog_or_record_is_a_clear_error() -> None:
    """The same RecursionError in the catalog loader and the record validator."""
    with pytest.raises(CatalogError, match="nested too deeply"):
        CatalogSnapshot.from_json("[" * 100_000)
    report = validate_record("[" * 100_000)
    assert not report.ok and "nested too deeply" in str(report.problems[0])
