"""Generated messages survive encode -> parse -> encode unchanged."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given

from pgcdc_events.protocol import (
    STREAMABLE_TYPES,
    Message,
    ProtocolError,
    Relation,
    RelationColumn,
    StreamAbort,
    encode_message,
    parse_message,
)
from pgcdc_events.testing.protocol import messages


def _parse_back(message: Message, data: bytes) -> Message:
    in_stream = data[0] in STREAMABLE_TYPES and getattr(message, "xid", None) is not None
    abort_info = isinstance(message, StreamAbort) and message.abort_lsn is not None
    return parse_message(data, in_stream=in_stream, abort_info=abort_info)


@given(messages())
def test_every_generated_message_round_trips(message: Message) -> None:
    data = encode_message(message)
    assert data[:1] == message.TYPE
    back = _parse_back(message, data)
    assert back == message
    assert encode_message(back) == data


@given(messages(in_stream=True))
def test_streamed_dml_messages_start_with_their_xid(message: Message) -> None:
    data = encode_message(message)
    if data[0] in STREAMABLE_TYPES:
        assert int.from_bytes(data[1:5], "big") == message.xid  # type: ignore[union-attr]


def test_the_encoder_refuses_a_relation_it_could_not_read_back() -> None:
    """Every field the parser checks, the encoder checks too: decode(encode(m)) == m or an
    error, never bytes the parser rejects."""
    relation = Relation(16400, "public", "t", "x", (RelationColumn(1, "id", 23, -1),))
    with pytest.raises(ProtocolError, match="replica identity"):
        encode_message(relation)
    ok = attrs.evolve(relation, replica_identity="f")
    assert parse_message(encode_message(ok)) == ok
