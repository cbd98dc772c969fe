"""Hypothesis strategies for pgoutput message objects (any field values the wire format allows).

These generate *structurally* valid messages: every one encodes, and parses
back to itself. They do not model a server's semantics (for that, see the
workload strategies); use them to test code that handles message objects.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from pgcdc_events.protocol import (
    Begin,
    BeginPrepare,
    Commit,
    CommitPrepared,
    Delete,
    Insert,
    LogicalMessage,
    Message,
    Origin,
    Prepare,
    Relation,
    RelationColumn,
    RollbackPrepared,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
    StreamStop,
    Truncate,
    TupleData,
    Type,
    Update,
)
from pgcdc_events.testing._explain import hide_from_explanations

hide_from_explanations()  # the user's lines, not ours, explain a failure

__all__ = ["messages", "names", "tuple_data"]

u8 = st.integers(0, 255)
u32 = st.integers(0, 2**32 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
u64 = st.integers(0, 2**64 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)

#: Identifiers and other NUL-terminated strings: any Unicode text without NUL.
names = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x00"),
    max_size=20,
)


@st.composite
def tuple_data(draw: st.DrawFn, ncols: int | None = None) -> TupleData:
    """TupleData with a mix of NULL, unchanged-TOAST, text and binary columns."""
    n = draw(st.integers(0, 8)) if ncols is None else ncols
    kinds = draw(st.lists(st.sampled_from(b"ntub"), min_size=n, max_size=n))
    values = tuple(
        draw(st.binary(max_size=40)) if k in b"tb" else None for k in kinds
    )
    return TupleData(bytes(kinds), values)


def _xid(in_stream: bool) -> st.SearchStrategy[int | None]:
    return u32 if in_stream else st.none()


def _dml(in_stream: bool, yboutput: bool = False) -> st.SearchStrategy[Message]:
    xid = _xid(in_stream)
    identities = "dnfic" if yboutput else "dnfi"
    columns = st.builds(RelationColumn, u8, names, u32, i32)
    update_old = st.one_of(
        st.tuples(st.none(), st.none()),
        st.tuples(st.sampled_from(["K", "O"]), tuple_data()),
    )
    return st.one_of(
        st.builds(Relation, u32, names, names, st.sampled_from(identities),
                  st.lists(columns, max_size=6).map(tuple), xid),
        st.builds(Type, u32, names, names, xid),
        st.builds(Insert, u32, tuple_data(), xid),
        st.builds(lambda rel, old, new, x: Update(rel, old[0], old[1], new, x),
                  u32, update_old, tuple_data(), xid),
        st.builds(Delete, u32, st.sampled_from(["K", "O"]), tuple_data(), xid),
        st.builds(Truncate, u8, st.lists(u32, max_size=5).map(tuple), xid),
        st.builds(LogicalMessage, u8, u64, names, st.binary(max_size=64), xid),
    )


def _control() -> st.SearchStrategy[Message]:
    abort_info: st.SearchStrategy[tuple[Any, Any]] = st.one_of(
        st.tuples(st.none(), st.none()), st.tuples(u64, i64)
    )
    return st.one_of(
        st.builds(Begin, u64, i64, u32),
        st.builds(Commit, u8, u64, u64, i64),
        st.builds(Origin, u64, names),
        st.builds(StreamStart, u32, st.booleans()),
        st.just(StreamStop()),
        st.builds(StreamCommit, u32, u8, u64, u64, i64),
        st.builds(lambda x, s, info: StreamAbort(x, s, *info), u32, u32, abort_info),
        st.builds(BeginPrepare, u64, u64, i64, u32, names),
        st.builds(Prepare, u8, u64, u64, i64, u32, names),
        st.builds(CommitPrepared, u8, u64, u64, i64, u32, names),
        st.builds(RollbackPrepared, u8, u64, u64, i64, i64, u32, names),
        st.builds(StreamPrepare, u8, u64, u64, i64, u32, names),
    )


def messages(*, in_stream: bool | None = None, yboutput: bool = False
             ) -> st.SearchStrategy[Message]:
    """Any message; ``in_stream`` fixes whether DML-like messages carry an xid (``None``: both).

    ``yboutput``: messages YugabyteDB's ``yboutput`` can send, so Relations may also carry
    replica identity ``c`` (CHANGE); encode and parse them with ``yboutput=True``.
    """
    if in_stream is None:
        return st.one_of(_control(), _dml(False, yboutput), _dml(True, yboutput))
    return st.one_of(_control(), _dml(in_stream, yboutput))
