"""LSNs, PostgreSQL timestamps and the replication CopyData frames."""

from __future__ import annotations

import struct
from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgcdc_events.protocol import (
    Lsn,
    PrimaryKeepalive,
    ProtocolError,
    StandbyStatusUpdate,
    XLogData,
    encode_copy_data,
    parse_copy_data,
    pg_timestamp_to_datetime,
    pg_timestamp_to_unix_us,
    unix_us_to_pg_timestamp,
)


def test_lsn_text_form() -> None:
    assert str(Lsn.parse("16/B374D848")) == "16/B374D848"
    assert Lsn.parse("0/16B3748") == 0x16B3748
    assert Lsn.parse("1/0") > Lsn.parse("0/FFFFFFFF")
    assert repr(Lsn(0x100000000)) == "Lsn('1/0')"
    assert f"{Lsn(255)}" == "0/FF" and f"{Lsn(255):x}" == "ff"


@pytest.mark.parametrize("text", ["", "0", "/1", "1/", "G/0", "123456789/0", "0/1/2", " 0/1"])
def test_lsn_rejects_bad_text(text: str) -> None:
    with pytest.raises(ProtocolError):
        Lsn.parse(text)


def test_lsn_range() -> None:
    with pytest.raises(ProtocolError):
        Lsn(-1)
    with pytest.raises(ProtocolError):
        Lsn(2**64)


@given(st.integers(0, 2**64 - 1))
def test_lsn_round_trip(value: int) -> None:
    assert Lsn.parse(str(Lsn(value))) == value


def test_pg_timestamps() -> None:
    assert pg_timestamp_to_unix_us(0) == 946_684_800_000_000
    assert unix_us_to_pg_timestamp(946_684_800_000_000) == 0
    assert pg_timestamp_to_datetime(1) == datetime(2000, 1, 1, 0, 0, 0, 1, tzinfo=timezone.utc)
    with pytest.raises(ProtocolError, match="years 1-9999"):
        pg_timestamp_to_datetime(2**63 - 1)


def test_xlogdata_frame() -> None:
    payload = b"B" + struct.pack(">QqI", 1, 2, 3)
    frame = b"w" + struct.pack(">QQq", 0x10, 0x10, 77) + payload
    parsed = parse_copy_data(frame)
    assert parsed == XLogData(0x10, 0x10, 77, payload)
    assert encode_copy_data(parsed) == frame


def test_keepalive_frame() -> None:
    frame = b"k" + struct.pack(">QqB", 0x20, 88, 1)
    parsed = parse_copy_data(frame)
    assert parsed == PrimaryKeepalive(0x20, 88, True)
    assert encode_copy_data(parsed) == frame


def test_standby_status_update_layout() -> None:
    update = StandbyStatusUpdate(1, 2, 3, 4, False)
    assert encode_copy_data(update) == b"r" + struct.pack(">QQQqB", 1, 2, 3, 4, 0)
    assert len(encode_copy_data(StandbyStatusUpdate.now(5))) == 34


@pytest.mark.parametrize(
    "frame, match",
    [(b"", "empty"), (b"w" + b"\0" * 10, "24 bytes"), (b"k" + b"\0" * 16, "17 bytes"),
     (b"k" + b"\0" * 16 + b"\x05", "0 or 1"), (b"x", "unknown frame type")],
)
def test_bad_frames(frame: bytes, match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        parse_copy_data(frame)
