"""Real captures from PostgreSQL 15 (tests/protocol/captures) parse and re-encode byte for byte.

The captures and the SQL that produced them come from tools/make_protocol_captures.py;
index.json says which options each was taken with.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pgcdc_events.protocol import (
    KIND_BINARY,
    KIND_UNCHANGED_TOAST,
    BeginPrepare,
    CaptureRow,
    CommitPrepared,
    Delete,
    Insert,
    LogicalMessage,
    Message,
    Origin,
    PgOutputReader,
    Prepare,
    Relation,
    RollbackPrepared,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
    Truncate,
    Type,
    Update,
    encode_message,
    iter_capture,
)

CAPTURES = Path(__file__).parent / "captures"
INDEX = json.loads((CAPTURES / "index.json").read_text())["captures"]


def _reader(entry: dict[str, Any]) -> PgOutputReader:
    return PgOutputReader(proto_version=entry["proto_version"],
                          streaming="on" if entry["streaming"] else "off")


def read(name: str) -> list[tuple[CaptureRow, Message]]:
    """Every row of a capture with its parsed message."""
    entry = next(e for e in INDEX if e["name"] == name)
    reader = _reader(entry)
    with open(CAPTURES / entry["capture"], encoding="utf-8") as fh:
        return [(row, reader.read(row.data)) for row in iter_capture(fh)]


def messages_of(name: str) -> Iterator[Message]:
    return (m for _, m in read(name))


@pytest.mark.parametrize("entry", INDEX, ids=[e["name"] for e in INDEX])
def test_capture_round_trips_byte_for_byte(entry: dict[str, Any]) -> None:
    rows = read(entry["name"])
    assert len(rows) == entry["rows"]
    for row, message in rows:
        assert encode_message(message) == row.data
    assert sorted({row.data[:1].decode() for row, _ in rows}) == entry["message_types"]


def test_v1_v2_v3_send_the_same_bytes_without_streaming() -> None:
    v1, v2, v3 = (read(f"basic_v{n}") for n in (1, 2, 3))
    assert [m for _, m in v1] == [m for _, m in v2] == [m for _, m in v3]


def test_quoted_mixed_case_non_ascii_identifiers() -> None:
    names = {(m.namespace, m.name) for m in messages_of("basic_v1") if isinstance(m, Relation)}
    assert ("Sales Ö", "Order-Items") in names
    columns = {c.name for m in messages_of("basic_v1") if isinstance(m, Relation) for c in m.columns}
    assert "Ünit Price" in columns


def test_replica_identities_and_old_tuples() -> None:
    messages = list(messages_of("basic_v1"))
    identities = {m.replica_identity for m in messages if isinstance(m, Relation)}
    assert identities >= {"d", "f", "i"}
    old_kinds = {m.old_kind for m in messages if isinstance(m, (Update, Delete))}
    assert old_kinds == {None, "K", "O"}
    full = {m.relation_id for m in messages if isinstance(m, Relation) and m.replica_identity == "f"}
    for m in messages:
        if isinstance(m, Relation) and m.replica_identity == "f":
            assert all(c.is_key for c in m.columns)
        if isinstance(m, Delete) and m.relation_id in full:
            assert m.old_kind == "O"


def test_truncate_options() -> None:
    truncates = [m for m in messages_of("truncate") if isinstance(m, Truncate)]
    assert {m.options for m in truncates} == {0, 1, 2, 3}
    assert any(len(m.relation_ids) >= 2 for m in truncates)
    assert any(m.cascade and not m.restart_identity for m in truncates)


def test_unchanged_toast_marker() -> None:
    updates = [m for m in messages_of("toast") if isinstance(m, Update)]
    assert any(KIND_UNCHANGED_TOAST in m.new.kinds for m in updates)
    # Under REPLICA IDENTITY FULL the old tuple carries the value the new one omits.
    assert any(m.old_kind == "O" and m.old is not None and KIND_UNCHANGED_TOAST in m.new.kinds
               and m.old.kinds[m.new.kinds.index(KIND_UNCHANGED_TOAST)] != KIND_UNCHANGED_TOAST
               for m in updates)


def test_type_messages_precede_their_relation() -> None:
    messages = list(messages_of("types"))
    types = {m.type_oid: m for m in messages if isinstance(m, Type)}
    assert {t.name for t in types.values()} >= {"hstore", "int4"}  # a domain arrives as its base
    for i, m in enumerate(messages):
        if isinstance(m, Relation):
            for col in m.columns:
                if col.type_oid >= 10000:
                    assert any(isinstance(p, Type) and p.type_oid == col.type_oid
                               for p in messages[:i])


def test_relation_resent_after_alter_table() -> None:
    relations = [m for m in messages_of("types") if isinstance(m, Relation)]
    by_table: dict[int, list[tuple[str, ...]]] = {}
    for m in relations:
        by_table.setdefault(m.relation_id, []).append(tuple(c.name for c in m.columns))
    assert any(len(set(versions)) > 1 for versions in by_table.values())


def test_binary_tuples() -> None:
    inserts = [m for m in messages_of("binary") if isinstance(m, Insert)]
    assert any(KIND_BINARY in m.new.kinds for m in inserts)


def test_logical_messages() -> None:
    ms = [m for m in messages_of("messages") if isinstance(m, LogicalMessage)]
    assert {m.transactional for m in ms} == {True, False}
    assert all(m.xid is None for m in ms)


def test_origin() -> None:
    origins = [m for m in messages_of("origin") if isinstance(m, Origin)]
    assert origins and origins[0].name == "origin_x" and origins[0].origin_lsn == 0xABCDEF


def test_streamed_transactions() -> None:
    messages = list(messages_of("stream_commit"))
    starts = [m for m in messages if isinstance(m, StreamStart)]
    assert starts[0].first_segment and not all(s.first_segment for s in starts)
    assert any(isinstance(m, StreamCommit) for m in messages)
    streamed = [m for m in messages if isinstance(m, Insert) and m.xid is not None]
    plain = [m for m in messages if isinstance(m, Insert) and m.xid is None]
    assert streamed and plain


def test_stream_abort_of_a_subtransaction() -> None:
    aborts = [m for m in messages_of("stream_abort") if isinstance(m, StreamAbort)]
    assert any(a.is_subtransaction for a in aborts)
    assert any(not a.is_subtransaction for a in aborts)
    assert all(a.abort_lsn is None for a in aborts)


def test_interleaved_streams() -> None:
    xids = [m.xid for m in messages_of("stream_interleaved") if isinstance(m, StreamStart)]
    changes = [xids[0] != x for x in xids[1:]]
    assert len(set(xids)) >= 2 and any(changes)


def test_two_phase() -> None:
    messages = list(messages_of("two_phase"))
    kinds = {type(m) for m in messages}
    assert {BeginPrepare, Prepare, CommitPrepared, RollbackPrepared, StreamPrepare} <= kinds
    gids = {m.gid for m in messages if isinstance(m, (Prepare, CommitPrepared))}
    assert gids
