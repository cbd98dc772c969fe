"""Hypothesis strategies for tables and workloads (needs the ``testing`` extra: hypothesis).

:func:`tables` draws table definitions: schema, table and column names that are
quoted, mixed-case or non-ASCII, columns of every type the type mapper maps
(arrays included), primary keys of one or several columns or none, and every
replica identity. :func:`workloads` draws transactions over a set of tables that
are valid against the tables' state (updates and deletes touch existing rows,
keys change, tables are truncated, logical messages are emitted), optionally
streamed with interleaved blocks and aborted subtransactions, and two-phase;
the result renders into bytes, messages, Debezium records and the final state
(:class:`~pgcdc_events.testing.workload.Workload`).
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Sequence
from typing import Any, Final

from hypothesis import strategies as st

from pgcdc_events.protocol.reader import Streaming
from pgcdc_events.testing._explain import hide_from_explanations
from pgcdc_events.testing.pgtext import PgValue
from pgcdc_events.testing.tables import ColumnDef, ColumnType, TableDef, column_type
from pgcdc_events.testing.values import (
    ARRAY_TYPES,
    BINARY_TYPES,
    SUPPORTED_TYPES,
    text_strings,
    values,
)
from pgcdc_events.testing.workload import (
    Change,
    Item,
    LogicalMsg,
    Op,
    Row,
    Schedule,
    TableState,
    Transaction,
    TruncateTables,
    Workload,
    render,
)
from pgcdc_events.types.mapper import TypeMapper

hide_from_explanations()  # the user's lines, not ours, explain a failure

__all__ = [
    "KEY_TYPES",
    "column_types",
    "identifiers",
    "rows",
    "table_sets",
    "tables",
    "workloads",
]

#: Types generated tables use for key columns: equal values have equal text.
KEY_TYPES: Final = ("int4", "int8", "int2", "text", "varchar(20)", "uuid", "date", "bytea")
#: Extension types, left out unless asked for (the server needs the extensions).
EXTENSION_TYPE_NAMES: Final = ("citext", "hstore", "ltree", "geometry", "geography")
_PLAIN: Final = ("id", "name", "amount", "Customer ID", "ÄÖÜ", "日付", "x-y", "select",
                 'quo"te', "MixedCase", "with.dot", "a b")


@functools.lru_cache(maxsize=64)
def identifiers(max_size: int = 10) -> st.SearchStrategy[str]:
    """Identifiers a server accepts when quoted: up to 63 bytes, no NUL; samples first."""
    chars = st.characters(codec="utf-8", exclude_characters="\x00")
    return st.one_of(st.sampled_from(_PLAIN), st.text(chars, min_size=1, max_size=max_size)
                     ).filter(lambda s: len(s.encode("utf-8")) <= 63)


@functools.lru_cache(maxsize=64)
def column_types(*, binary: bool = False, arrays: bool = True, extensions: bool = False
                 ) -> st.SearchStrategy[str]:
    """Column types as written in DDL, modifiers included (``numeric(12,3)``, ``time(3)``)."""
    bases = [t if t != "bit" else "bit(1)" for t in SUPPORTED_TYPES
             if extensions or t not in EXTENSION_TYPE_NAMES]
    if binary:
        bases = [t for t in bases if t in BINARY_TYPES]
    with_args: list[st.SearchStrategy[str]] = [
        st.sampled_from(bases),
        st.builds(lambda p, s: f"numeric({p},{min(s, p)})", st.integers(1, 40),
                  st.integers(0, 10)),
        st.builds(lambda n: f"varchar({n})", st.integers(1, 20)),
        st.builds(lambda n: f"bpchar({n})", st.integers(1, 5)),
        st.builds(lambda t, p: f"{t}({p})", st.sampled_from(
            ["time", "timetz", "timestamp", "timestamptz"]), st.integers(0, 6)),
    ]
    if not binary:
        with_args.append(st.builds(lambda t, n: f"{t}({n})", st.sampled_from(["bit", "varbit"]),
                                   st.integers(1, 12)))
    if arrays:
        elements = [t for t in ARRAY_TYPES if not binary or t in BINARY_TYPES]
        with_args.append(st.sampled_from(elements).map(lambda t: t + "[]"))
    return st.one_of(with_args)


_SCHEMAS: Final = st.one_of(st.sampled_from(["public", "Sales Ö", "üñí", "CamelSchema"]),
                           identifiers(8))
_N_KEYS: Final = st.sampled_from([0, 1, 1, 1, 2, 3])
_ONE_IN_FIVE: Final = st.integers(0, 4)
_ONE_IN_SIX: Final = st.integers(0, 5)
_ENUM_NAMES: Final = st.sampled_from(["α", "b", "Ç"])
_ENUM_LABELS: Final = st.lists(text_strings(6).filter(lambda s: 0 < len(s.encode()) <= 63),
                               min_size=1, max_size=4, unique=True).map(tuple)
_ARRAY_SUFFIX: Final = st.sampled_from(["", "[]"])
_RELATION_IDS: Final = st.integers(16_384, 2**31)


@functools.lru_cache(maxsize=64)
def _column_names(min_size: int, max_size: int) -> st.SearchStrategy[list[str]]:
    return st.lists(identifiers(8), min_size=min_size, max_size=max_size, unique_by=str.lower)


@functools.lru_cache(maxsize=8)
def _key_types(binary: bool) -> st.SearchStrategy[str]:
    return st.sampled_from([t for t in KEY_TYPES if not binary or t.split("(")[0]
                            in BINARY_TYPES])


@functools.lru_cache(maxsize=32)
def _identities(choices: tuple[str, ...]) -> st.SearchStrategy[str]:
    return st.sampled_from(choices)


@st.composite
def tables(draw: st.DrawFn, *, min_columns: int = 1, max_columns: int = 6,
           binary: bool = False, arrays: bool = True, extensions: bool = False,
           replica_identities: Sequence[str] = ("d", "f", "i", "n"),
           relation_id: int | None = None, schema: str | None = None,
           name: str | None = None, enums: bool = True) -> TableDef:
    """A table definition: names, columns of any mapped type, a key and a replica identity.

    The primary key has zero to three columns of :data:`KEY_TYPES`; identity ``i``
    uses a unique index on NOT NULL columns. ``binary`` keeps to types with a binary
    form; ``extensions`` adds citext, hstore, ltree and PostGIS columns.
    """
    rid = relation_id if relation_id is not None else draw(_RELATION_IDS)
    schema = schema if schema is not None else draw(_SCHEMAS)
    name = name if name is not None else draw(identifiers())
    n_keys = draw(_N_KEYS)
    names = draw(_column_names(max(n_keys, min_columns), n_keys + max_columns))
    enum_defs: dict[str, tuple[str, ...]] = {}
    # Rare, complex choices take the top value of a draw: hypothesis shrinks integers towards
    # 0, so counterexamples lose them (no enum, no key change, no abort...).
    if enums and draw(_ONE_IN_FIVE) == 4:
        labels = draw(_ENUM_LABELS)
        # the labels' digest in the name: a server keeps the first enum of a name it sees
        digest = zlib.crc32("\x00".join(labels).encode("utf-8"))
        enum_defs[f"mood {draw(_ENUM_NAMES)}{rid} {digest:08x}"] = labels
    col_types = column_types(binary=binary, arrays=arrays, extensions=extensions)
    key_types = _key_types(binary)
    cols = []
    for i, col in enumerate(names):
        if i < n_keys:
            cols.append(ColumnDef(col, draw(key_types), True))
        elif enum_defs and draw(_ONE_IN_FIVE) == 4:
            enum_name = next(iter(enum_defs))
            cols.append(ColumnDef(col, enum_name + draw(_ARRAY_SUFFIX), False))
        else:
            cols.append(ColumnDef(col, draw(col_types), draw(_ONE_IN_SIX) == 0))
    primary_key = tuple(names[:n_keys])
    identity = draw(_identities(tuple(replica_identities)))
    identity_columns: tuple[str, ...] = ()
    if identity == "i":
        if primary_key:
            identity_columns = primary_key
        else:
            identity = "f" if "f" in replica_identities else "d"
    used = {c.type.removesuffix("[]") for c in cols}
    return TableDef(schema, name, tuple(cols), primary_key, identity, identity_columns, rid,
                    tuple((k, v) for k, v in enum_defs.items() if k in used))


def table_sets(*, min_tables: int = 1, max_tables: int = 3, **options: Any
               ) -> st.SearchStrategy[tuple[TableDef, ...]]:
    """Several tables with distinct names and relation OIDs (options as for :func:`tables`)."""
    def build(n: int) -> st.SearchStrategy[tuple[TableDef, ...]]:
        return st.tuples(*[tables(relation_id=17_000 + i, **options) for i in range(n)]).filter(
            lambda ts: len({(t.schema, t.name) for t in ts}) == len(ts))

    return st.integers(min_tables, max_tables).flatmap(build)


@functools.lru_cache(maxsize=256)
def rows(table: TableDef, *, long_values: bool = False) -> st.SearchStrategy[Row]:
    """Rows of ``table``: NOT NULL columns always get a value, others NULL now and then;
    ``long_values`` (TOAST-sized values) never go to key columns."""
    enums = dict(table.enums)
    keys = set(table.primary_key) | set(table.identity_columns)
    parts: list[st.SearchStrategy[PgValue | None]] = []
    for col in table.columns:
        t = column_type(col.type, enums)
        strategy = values(t, long_values=long_values and col.name not in keys)
        parts.append(_representable(strategy, t) if col.not_null or col.name in keys
                     else st.one_of(st.none(), strategy))
    return st.tuples(*parts)


#: Types with values that only ``null`` represents under the default handling modes.
_NULLABLE_VALUES: Final = frozenset({"numeric", "date", "time", "timetz", "timestamp",
                                     "timestamptz", "interval"})


def _representable(strategy: st.SearchStrategy[PgValue], t: ColumnType
                   ) -> st.SearchStrategy[PgValue]:
    """A NOT NULL column's values, less those whose Connect value under the default modes
    is ``null`` (a NaN numeric, a timestamp past int64 microseconds): a required field
    cannot carry them, so decoding them is an error, as it is for Debezium."""
    if t.is_array or t.name not in _NULLABLE_VALUES:
        return strategy
    mapping = TypeMapper().column("c", t.oid, t.type_modifier, table="t")
    if mapping is None:
        return strategy
    return strategy.filter(lambda v: mapping.convert(v.text_bytes, table="t") is not None)


# ---------------------------------------------------------------- workloads
class _Model:
    """Table states while a workload is drawn, with the keys each unique index holds."""

    def __init__(self, tables: Sequence[TableDef]) -> None:
        self.states = {t.relation_id: TableState(t) for t in tables}

    def copy(self) -> _Model:
        out = _Model(())
        out.states = {k: v.copy() for k, v in self.states.items()}
        return out

    def fits(self, table: TableDef, row: Row, replacing: Row | None = None) -> bool:
        state = self.states[table.relation_id]
        if not state.key_index:
            return True
        key = state.key(row)
        if replacing is not None and state.key(replacing) == key:
            return True
        return key not in state.rows


def _footprint(op: Op) -> set[tuple[str, Any]]:
    if isinstance(op, LogicalMsg):
        return set()
    if isinstance(op, TruncateTables):
        return {(t.qualified, "*") for t in op.tables}
    table = op.table
    if not table.primary_key:
        return {(table.qualified, "*" if op.old is not None else None)}
    idx = [table.column_index(k) for k in table.primary_key]
    out = set()
    for row in (op.old, op.new):
        if row is not None:
            out.add((table.qualified, tuple(_text(row[i]) for i in idx)))
    return out


def _text(value: PgValue | None) -> str | None:
    return None if value is None else value.text


def _conflict(a: set[tuple[str, Any]], b: set[tuple[str, Any]]) -> bool:
    for qa, ka in a:
        for qb, kb in b:
            if qa == qb and ((ka == kb and ka is not None) or ka == "*" or kb == "*"):
                return True
    return False


_PREFIXES: Final = st.sampled_from(["app", "audit", "ünï", ""])
_CONTENT: Final = st.binary(max_size=12)


@functools.lru_cache(maxsize=8)
def _kinds(truncates: bool, messages: bool) -> st.SearchStrategy[str]:
    kinds = ["insert", "insert", "update", "update", "delete"]
    if truncates:
        kinds.append("truncate")
    if messages:
        kinds.append("message")
    return st.sampled_from(kinds)


@st.composite
def _change(draw: st.DrawFn, model: _Model, tables: Sequence[TableDef], *, truncates: bool,
            messages: bool, long_values: bool) -> Op | None:
    kind = draw(_kinds(truncates, messages))
    if kind == "message":
        return LogicalMsg(draw(_PREFIXES), draw(_CONTENT), True)
    if kind == "truncate":
        chosen = draw(st.lists(st.sampled_from(list(tables)), min_size=1, max_size=len(tables),
                               unique_by=lambda t: t.relation_id))
        for t in chosen:
            model.states[t.relation_id].rows.clear()
        return TruncateTables(tuple(chosen), draw(st.booleans()), draw(st.booleans()))
    table = draw(st.sampled_from(list(tables)))
    state = model.states[table.relation_id]
    if kind == "insert" or not table.can_update or not state.rows:
        new = draw(rows(table, long_values=long_values))
        if not model.fits(table, new):
            return None
        change = Change(table, None, new)
    else:
        # rows in the model's order (least recently written first), not sorted by value
        key = draw(st.sampled_from(list(state.rows)))
        old = state.rows[key]
        if kind == "delete":
            change = Change(table, old, None)
        else:
            fresh = draw(rows(table, long_values=long_values))
            keep = draw(st.lists(st.booleans(), min_size=len(old), max_size=len(old)))
            change_key = draw(st.integers(0, 3)) == 3
            key_cols = {table.column_index(k) for k in table.primary_key}
            new = tuple((f if change_key else o) if i in key_cols else (o if k else f)
                        for i, (o, f, k) in enumerate(zip(old, fresh, keep, strict=True)))
            if not model.fits(table, new, replacing=old):
                return None
            change = Change(table, old, new)
    state.apply(change)
    return change


@st.composite
def _transaction(draw: st.DrawFn, model: _Model, tables: Sequence[TableDef], *, max_ops: int,
                 streamed: bool, two_phase: bool, truncates: bool, messages: bool,
                 long_values: bool, gid: str) -> Transaction:
    start = model.copy()
    ops: list[Op] = []
    aborted: set[int] = set()
    n = draw(st.integers(1, max_ops))
    sub = 0
    saved: _Model | None = None
    block_ends: list[int] = []
    for _ in range(n):
        if streamed and saved is None and draw(st.integers(0, 4)) == 4:
            sub += 1
            saved = model.copy()
        op = draw(_change(model, tables, truncates=truncates, messages=messages,
                          long_values=long_values))
        if op is None:
            continue
        if sub and saved is not None:
            op = _with_sub(op, sub)
        ops.append(op)
        if saved is not None and draw(st.integers(0, 2)) == 0:
            if draw(st.booleans()):  # ROLLBACK TO SAVEPOINT
                aborted.add(sub)
                model.states = saved.states
                block_ends.append(len(ops))
            saved = None
    if not ops or all(op.subtransaction in aborted for op in ops):
        model.states = start.states
        op = draw(_change(model, tables, truncates=False, messages=False,
                          long_values=long_values))
        ops.append(op or LogicalMsg("app", b"filler", True))
    if saved is not None and sub:
        saved = None  # the savepoint is released at commit
    outcome = "commit"
    if (streamed or two_phase) and draw(st.integers(0, 4)) == 4:
        outcome = "abort"
        model.states = start.states
    if streamed:
        cuts = draw(st.lists(st.integers(1, len(ops)), max_size=2))
        block_ends = sorted({*block_ends, *cuts, len(ops)})
    return Transaction(tuple(ops), outcome, streamed, two_phase,  # type: ignore[arg-type]
                       frozenset(aborted), tuple(block_ends), gid)


def _with_sub(op: Op, sub: int) -> Op:
    if isinstance(op, Change):
        return Change(op.table, op.old, op.new, sub)
    if isinstance(op, TruncateTables):
        return TruncateTables(op.tables, op.cascade, op.restart_identity, sub)
    return LogicalMsg(op.prefix, op.content, op.transactional, sub)


@st.composite
def workloads(draw: st.DrawFn, /, tables: Sequence[TableDef] | st.SearchStrategy[
        Sequence[TableDef]] | None = None, *, min_transactions: int = 1,
        max_transactions: int = 5, max_ops: int = 4, streaming: bool | Streaming = False,
        two_phase: bool = False, truncates: bool = True, messages: bool = True,
        binary: bool = False, long_values: bool = False, interleave: bool = True,
        **table_options: Any) -> Workload:
    """A workload over ``tables`` (drawn with :func:`table_sets` when not given).

    Transactions are valid against the table state at their commit. With
    ``streaming`` some are streamed in blocks, interleaved with other transactions
    (``interleave``), with savepoints rolled back and some aborted; ``two_phase``
    prepares some before they commit or roll back; ``messages`` emits logical
    messages, transactional and not; ``truncates`` truncates tables. LSNs and
    commit times increase monotonically.
    """
    if tables is None:
        tables = table_sets(binary=binary, **table_options)
    chosen = list(draw(tables) if isinstance(tables, st.SearchStrategy) else tables)
    mode: Streaming = "off"
    if streaming:
        mode = "on" if streaming is True else streaming
    model = _Model(chosen)
    items: list[Item] = []
    n = draw(st.integers(min_transactions, max_transactions))
    for i in range(n):
        if messages and draw(st.integers(0, 6)) == 6:
            items.append(LogicalMsg(draw(st.sampled_from(["heartbeat", "app"])),
                                    draw(st.binary(max_size=8)), False))
            continue
        streamed = mode != "off" and draw(st.booleans())
        prepared = two_phase and draw(st.integers(0, 2)) == 2
        items.append(draw(_transaction(model, chosen, max_ops=max_ops, streamed=streamed,
                                       two_phase=prepared, truncates=truncates,
                                       messages=messages, long_values=long_values,
                                       gid=f"gid-{i}")))
    schedule = draw(_schedules(items, interleave)) if interleave else Schedule.serial(items)
    return render(chosen, items, schedule, streaming=mode, binary=binary)


@st.composite
def _schedules(draw: st.DrawFn, items: Sequence[Item], interleave: bool) -> Schedule:
    """Interleave the early parts (stream blocks, prepares) of each transaction with the
    ends of earlier ones it does not conflict with."""
    timeline: list[tuple[int, tuple[Any, ...]]] = []
    ends: dict[int, int] = {}
    footprints: dict[int, set[tuple[str, Any]]] = {}
    for i, item in enumerate(items):
        if isinstance(item, Transaction):
            fp: set[tuple[str, Any]] = set()
            for op in item.ops:
                fp |= _footprint(op)
            footprints[i] = fp
            early: list[tuple[Any, ...]] = []
            if item.streamed:
                early += [("block", k) for k in range(len(item.block_ends))]
            if item.two_phase:
                early.append(("prepare",))
            if early:
                lower = 0
                for j, other in footprints.items():
                    if j != i and _conflict(fp, other):
                        lower = max(lower, _position(timeline, j) + 1)
                spots = sorted(draw(st.lists(st.integers(lower, len(timeline)),
                                             min_size=len(early), max_size=len(early))))
                for offset, (spot, part) in enumerate(zip(spots, early, strict=True)):
                    timeline.insert(spot + offset, (i, part))
        timeline.append((i, ("end",)))
        ends[i] = len(timeline) - 1
    return Schedule(tuple(timeline))


def _position(timeline: list[tuple[int, tuple[Any, ...]]], index: int) -> int:
    for pos, (i, part) in enumerate(timeline):
        if i == index and part == ("end",):
            return pos
    return -1
