"""Messages built byte by byte from the documented layouts parse to the right objects.

PostgreSQL 15 cannot produce protocol 4 (a Stream Abort carrying the abort LSN and
time under ``streaming 'parallel'``), so those bytes are built here from the
"Logical Replication Message Formats" page of PostgreSQL 16+.
"""

from __future__ import annotations

import struct

import pytest

from pgcdc_events.protocol import (
    BeginPrepare,
    CommitPrepared,
    LogicalMessage,
    PgOutputReader,
    ProtocolError,
    RollbackPrepared,
    StreamAbort,
    StreamCommit,
    StreamStart,
    Truncate,
    encode_message,
    parse_message,
)


def test_protocol_4_stream_abort_with_abort_lsn_and_time() -> None:
    data = b"A" + struct.pack(">IIQq", 1000, 1001, 0x16B3748, 812345678901234)
    message = parse_message(data, abort_info=True)
    assert message == StreamAbort(1000, 1001, 0x16B3748, 812345678901234)
    assert message.is_subtransaction
    assert encode_message(message) == data


def test_stream_abort_form_is_inferred_from_length_when_not_told() -> None:
    short = b"A" + struct.pack(">II", 7, 7)
    long = b"A" + struct.pack(">IIQq", 7, 7, 1, 2)
    assert parse_message(short) == StreamAbort(7, 7)
    assert parse_message(long) == StreamAbort(7, 7, 1, 2)


def test_stream_abort_form_must_match_the_streaming_option() -> None:
    short = b"A" + struct.pack(">II", 7, 7)
    with pytest.raises(ProtocolError, match="streaming 'parallel'") as info:
        PgOutputReader(proto_version=4, streaming="parallel").read(short)
    assert info.value.message_type == "A"
    long = b"A" + struct.pack(">IIQq", 7, 7, 1, 2)
    with pytest.raises(ProtocolError, match="streaming 'on'"):
        PgOutputReader(proto_version=4, streaming="on").read(long)


def test_parallel_streaming_needs_protocol_4() -> None:
    with pytest.raises(ProtocolError, match="version 4"):
        PgOutputReader(proto_version=3, streaming="parallel")


def test_protocol_4_stream_sequence_with_parallel_abort() -> None:
    reader = PgOutputReader(proto_version=4, streaming="parallel")
    relation = (
        b"R" + struct.pack(">II", 900, 16384) + b"public\0t\0d" + struct.pack(">h", 1)
        + b"\x01id\0" + struct.pack(">Ii", 23, -1)
    )
    insert = b"I" + struct.pack(">II", 901, 16384) + b"N" + struct.pack(">H", 1) + b"t" + \
        struct.pack(">i", 1) + b"7"
    seq = [
        b"S" + struct.pack(">IB", 900, 1),
        relation,
        insert,
        b"E",
        b"A" + struct.pack(">IIQq", 900, 901, 0x2000, 99),
        b"c" + struct.pack(">IBQQq", 900, 0, 0x3000, 0x3010, 100),
    ]
    out = [reader.read(m) for m in seq]
    assert out[0] == StreamStart(900, True)
    assert out[2].xid == 901  # type: ignore[union-attr]
    assert out[4] == StreamAbort(900, 901, 0x2000, 99)
    assert out[5] == StreamCommit(900, 0, 0x3000, 0x3010, 100)
    assert [encode_message(m) for m in out] == seq


def test_two_phase_layouts() -> None:
    b = b"b" + struct.pack(">QQqI", 10, 20, 30, 40) + b"gid-1\0"
    k = b"K" + struct.pack(">BQQqI", 0, 11, 21, 31, 40) + b"gid-1\0"
    r = b"r" + struct.pack(">BQQqqI", 0, 12, 22, 32, 42, 40) + b"gid-1\0"
    assert parse_message(b) == BeginPrepare(10, 20, 30, 40, "gid-1")
    assert parse_message(k) == CommitPrepared(0, 11, 21, 31, 40, "gid-1")
    assert parse_message(r) == RollbackPrepared(0, 12, 22, 32, 42, 40, "gid-1")


def test_truncate_option_bits() -> None:
    data = b"T" + struct.pack(">iB2I", 2, 3, 16384, 16390)
    message = parse_message(data)
    assert message == Truncate(3, (16384, 16390))
    assert message.cascade and message.restart_identity


def test_logical_message_fields() -> None:
    data = b"M" + struct.pack(">BQ", 1, 0x1234) + b"pfx\0" + struct.pack(">i", 3) + b"a\0b"
    message = parse_message(data)
    assert message == LogicalMessage(1, 0x1234, "pfx", b"a\0b")
    assert message.transactional
