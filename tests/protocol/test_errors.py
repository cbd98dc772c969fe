"""Bad bytes raise ProtocolError naming the type byte and offset, never anything else."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgcdc_events import PgCdcError
from pgcdc_events.protocol import (
    STREAMABLE_TYPES,
    Message,
    PgOutputReader,
    ProtocolError,
    encode_message,
    parse_message,
)
from pgcdc_events.testing.protocol import messages

INSERT = b"I" + struct.pack(">I", 16384) + b"N" + struct.pack(">H", 2) + \
    b"t" + struct.pack(">i", 1) + b"1" + b"t" + struct.pack(">i", 1) + b"a"


def _parse_any(data: bytes) -> None:
    for in_stream in (False, True):
        try:
            parse_message(data, in_stream=in_stream)
        except ProtocolError as exc:
            assert exc.offset is not None or data == b""
            assert str(exc)


def test_empty_message() -> None:
    with pytest.raises(ProtocolError, match="empty"):
        parse_message(b"")


def test_unknown_type_byte() -> None:
    with pytest.raises(ProtocolError, match="unknown type b'Z'") as info:
        parse_message(b"Z\x00\x00")
    assert info.value.message_type == "Z" and info.value.offset == 0


@pytest.mark.parametrize("cut", range(1, len(INSERT)))
def test_every_truncation_of_an_insert_names_its_offset(cut: int) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_message(INSERT[:cut])
    assert info.value.message_type == "I"
    assert info.value.offset is not None and info.value.offset <= cut


def test_negative_value_length() -> None:
    data = b"I" + struct.pack(">I", 1) + b"N" + struct.pack(">H", 1) + b"t" + struct.pack(">i", -5)
    with pytest.raises(ProtocolError, match=r"length of column 1 .*-5") as info:
        parse_message(data)
    assert info.value.offset == 9


def test_oversized_value_length_does_not_allocate() -> None:
    data = b"I" + struct.pack(">I", 1) + b"N" + struct.pack(">H", 1) + b"t" + \
        struct.pack(">i", 2**31 - 1) + b"x"
    with pytest.raises(ProtocolError, match="2147483647 bytes of column 1"):
        parse_message(data)


def test_oversized_truncate_count_does_not_allocate() -> None:
    data = b"T" + struct.pack(">iB", 2**31 - 1, 0) + struct.pack(">I", 1)
    with pytest.raises(ProtocolError, match="2147483647 relation OIDs"):
        parse_message(data)


def test_oversized_relation_column_count() -> None:
    # within PostgreSQL's 1600 columns (more: tests/protocol/test_wide_caps.py), but more
    # than the bytes left can describe
    data = b"R" + struct.pack(">I", 1) + b"s\0t\0d" + struct.pack(">h", 1600) + b"\x01a\0"
    with pytest.raises(ProtocolError, match="1600 column descriptions"):
        parse_message(data)


def test_invalid_utf8_in_a_name() -> None:
    data = b"R" + struct.pack(">I", 1) + b"s\xff\0t\0d" + struct.pack(">h", 0)
    with pytest.raises(ProtocolError, match="namespace in UTF-8") as info:
        parse_message(data)
    assert info.value.offset == 6


def test_missing_nul_terminator() -> None:
    with pytest.raises(ProtocolError, match="no terminating NUL"):
        parse_message(b"Y" + struct.pack(">I", 1) + b"public\0name")


def test_trailing_garbage() -> None:
    with pytest.raises(ProtocolError, match="2 trailing bytes") as info:
        parse_message(INSERT + b"zz")
    assert info.value.offset == len(INSERT)


def test_unknown_column_kind() -> None:
    data = b"I" + struct.pack(">I", 1) + b"N" + struct.pack(">H", 1) + b"x"
    with pytest.raises(ProtocolError, match="column kind n, u, t or b"):
        parse_message(data)


def test_bad_replica_identity_and_first_segment_flag() -> None:
    with pytest.raises(ProtocolError, match="replica identity"):
        parse_message(b"R" + struct.pack(">I", 1) + b"s\0t\0x" + struct.pack(">h", 0))
    with pytest.raises(ProtocolError, match="first-segment flag"):
        parse_message(b"S" + struct.pack(">IB", 1, 2))


def test_error_is_a_value_error_and_a_library_error() -> None:
    with pytest.raises(PgCdcError):
        parse_message(b"B")
    with pytest.raises(ValueError):
        parse_message(b"B")


@given(st.binary(max_size=64))
def test_random_bytes_only_raise_protocol_errors(data: bytes) -> None:
    _parse_any(data)


@given(messages(), st.data())
@settings(max_examples=300)
def test_mutated_messages_only_raise_protocol_errors(message: Message, data: st.DataObject) -> None:
    raw = bytearray(encode_message(message))
    action = data.draw(st.sampled_from(["truncate", "flip", "splice", "extend"]))
    if action == "truncate":
        raw = raw[: data.draw(st.integers(0, max(len(raw) - 1, 0)))]
    elif action == "flip" and raw:
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] ^= 1 << data.draw(st.integers(0, 7))
    elif action == "splice":
        other = encode_message(data.draw(messages()))
        cut = data.draw(st.integers(0, len(raw)))
        raw = raw[:cut] + other[data.draw(st.integers(0, len(other))):]
    else:
        raw += data.draw(st.binary(min_size=1, max_size=8))
    _parse_any(bytes(raw))


def test_seeded_bit_flip_campaign() -> None:
    """A fixed-seed sample of the campaign in tools/fuzz_protocol.py, for every CI run."""
    rng = random.Random(20261122)
    seeds = [
        INSERT,
        b"B" + struct.pack(">QqI", 1, 2, 3),
        b"R" + struct.pack(">I", 1) + b"s\0t\0d" + struct.pack(">h", 1) + b"\x01a\0" +
        struct.pack(">Ii", 23, -1),
        b"U" + struct.pack(">I", 1) + b"O" + INSERT[6:] + b"N" + INSERT[6:],
    ]
    for _ in range(5000):
        raw = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 3)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        _parse_any(bytes(raw[: rng.randint(0, len(raw))]))


def test_reader_state_is_unchanged_after_an_error() -> None:
    reader = PgOutputReader()
    reader.read(b"B" + struct.pack(">QqI", 1, 2, 3))
    with pytest.raises(ProtocolError):
        reader.read(b"B" + struct.pack(">QqI", 1, 2, 3))
    assert reader.in_transaction
    reader.read(b"C" + struct.pack(">BQQq", 0, 1, 2, 3))
    assert not reader.in_transaction


def test_streamable_types_constant() -> None:
    assert frozenset(b"RYIUDTM") == STREAMABLE_TYPES


def test_relation_ending_before_a_column_flags_byte() -> None:
    """Found by tools/fuzz_protocol.py: column count passes the size check, names eat the rest."""
    data = bytes.fromhex(
        "52000038fcc285000069000507c390c2a0c293f2b0ba8a00000007b200064a0d07c390c2a0c293f2b0ba8a"
        "00000007b200064a0de815f1a19999000000c2a145c3b800"
    )
    with pytest.raises(ProtocolError, match="the flags of column"):
        parse_message(data)
