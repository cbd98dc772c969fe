"""The change-application rules of AUTO CDC, as a pure function over Arrow tables.

Spark's open-source AutoCDC (``pyspark.pipelines.create_auto_cdc_flow``) and Databricks'
AUTO CDC give these rules their parameter names; this module gives them to any target.
:func:`plan_changes` takes a batch of flattened changes (:func:`changes_from_events`
turns a table's events into them) and the target's current state (:class:`CdcState`:
its rows for the keys the batch touches, and its tombstones), and returns what to write
(:class:`CdcPlan`); :func:`apply_plan` applies a plan to a whole in-memory state, and
:func:`apply_changes` does both. No Spark is needed: the Delta target
(:mod:`pgcdc_events.spark.delta`) runs the same function in ``foreachBatch``.

The rules (:class:`AutoCdc`):

- ``keys`` identify a row; ``sequence_by`` (one column, or several compared in order)
  orders the changes. The default, ``__sequence``, is the change's position in the
  stream: Debezium's ``source.sequence`` (the last commit's LSN, then the change's LSN),
  written as two 16-digit hexadecimal numbers so that it sorts as text
  (``0000000001512268/00000000015122A0``). It is never the timestamp. Incremental-snapshot
  reads carry no ``source.lsn`` but do carry ``source.sequence``, so they are ordered by it
  like any change. A null sequence is an error.
- An older change never overwrites a newer one, across batches too: the target keeps, per
  key, the sequence of the change that wrote it (``__SEQUENCE``) and, for deleted keys, a
  tombstone (the delete's sequence, ``__DELETED_AT``) for ``tombstone_retention_seconds``
  of wall-clock time after it was recorded, so that an older upsert arriving later does
  not bring the row back. A change whose sequence is not greater than the key's is
  skipped, so a replayed batch changes nothing.
- ``apply_as_deletes`` / ``apply_as_truncates``: Arrow expressions over the changes
  (default: ``__op`` is ``d`` / ``t``). A truncate removes every row older than it and
  bars older changes from then on (SCD type 1 only, as in AUTO CDC).
- ``column_list`` / ``except_column_list`` choose the target's columns (the keys always
  stay; ``__op`` and the default sequence column are never written).
- An update's column that holds the unchanged-TOAST placeholder
  (``unavailable.value.placeholder``; in the forms the type mapper gives it: the string,
  its bytes, ``[placeholder]`` for text arrays, ``{placeholder: placeholder}`` for hstore
  maps, the JSON object for hstore as JSON) keeps the value the target holds.
- A column the target does not have yet is added (older rows hold null in it).
- ``stored_as_scd_type=2`` keeps the history: one row per version with ``__START_AT`` (the
  sequence of the change that began it) and ``__END_AT`` (of the one that ended it, null
  for the current version). A change that leaves the tracked columns
  (``track_history_column_list`` / ``track_history_except_column_list``; default all)
  unchanged updates the current version in place. Changes arriving out of order are put
  in their place in the history.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import attrs
import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.compute as pc  # type: ignore[import-untyped]
import pyarrow.dataset as ds  # type: ignore[import-untyped]

from pgcdc_events.spark.errors import SparkDecodeError

__all__ = [
    "DELETED_AT", "END_AT", "OP", "RECORDED_MS", "ROW_SEQUENCE", "SEQUENCE", "START_AT",
    "TRUNCATE", "AutoCdc", "AutoCdcError", "CdcPlan", "CdcState", "apply_changes",
    "apply_plan", "changes_from_events", "empty_state", "format_sequence", "format_sequences",
    "plan_changes", "sequence_column", "sequence_value",
]

OP: Final = "__op"                 #: the change's Debezium op (c, u, d, r, t)
SEQUENCE: Final = "__sequence"     #: the default ``sequence_by`` column
ROW_SEQUENCE: Final = "__SEQUENCE"  #: the sequence of the change that last wrote a row
START_AT: Final = "__START_AT"
END_AT: Final = "__END_AT"
DELETED_AT: Final = "__DELETED_AT"  #: a tombstone's delete sequence
RECORDED_MS: Final = "__RECORDED_MS"  #: when a tombstone was recorded (ms since the epoch)
TRUNCATE: Final = "__TRUNCATE"     #: marks the tombstone row holding the last truncate
DEFAULT_PLACEHOLDER: Final = "__debezium_unavailable_value"
DEFAULT_RETENTION: Final = 7 * 24 * 3600.0
_TARGET_META: Final = (ROW_SEQUENCE, START_AT, END_AT)


class AutoCdcError(SparkDecodeError):
    """Changes or options the rules cannot apply (a null sequence, a missing key...)."""


def _names(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    return (value,) if isinstance(value, str) else tuple(value)


@attrs.frozen(kw_only=True)
class AutoCdc:
    """The rules of one target table, named as in ``create_auto_cdc_flow``."""

    keys: tuple[str, ...] = attrs.field(converter=_names)
    sequence_by: tuple[str, ...] = attrs.field(default=SEQUENCE, converter=_names)
    apply_as_deletes: Any = None     #: a ``pyarrow.compute.Expression``; default __op == "d"
    apply_as_truncates: Any = None   #: default __op == "t"
    column_list: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    except_column_list: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    stored_as_scd_type: int = 1
    track_history_column_list: tuple[str, ...] | None = attrs.field(default=None,
                                                                   converter=_names)
    track_history_except_column_list: tuple[str, ...] | None = attrs.field(
        default=None, converter=_names)
    tombstone_retention_seconds: float = DEFAULT_RETENTION
    toast_placeholder: str = DEFAULT_PLACEHOLDER

    def __attrs_post_init__(self) -> None:
        if not self.keys:
            raise AutoCdcError("keys: at least one key column is needed")
        if not self.sequence_by:
            raise AutoCdcError("sequence_by: at least one column is needed")
        if self.stored_as_scd_type not in (1, 2):
            raise AutoCdcError(f"stored_as_scd_type must be 1 or 2, not "
                               f"{self.stored_as_scd_type!r}")
        if self.column_list is not None and self.except_column_list is not None:
            raise AutoCdcError("give column_list or except_column_list, not both")
        if (self.track_history_column_list is not None
                and self.track_history_except_column_list is not None):
            raise AutoCdcError("give track_history_column_list or "
                               "track_history_except_column_list, not both")
        if self.stored_as_scd_type == 1 and (self.track_history_column_list is not None or
                                             self.track_history_except_column_list is not None):
            raise AutoCdcError("track_history_* needs stored_as_scd_type=2")
        if self.tombstone_retention_seconds < 0:
            raise AutoCdcError("tombstone_retention_seconds must not be negative")

    def target_columns(self, change_columns: Iterable[str]) -> list[str]:
        """The target's data columns for changes with these columns."""
        names = [n for n in change_columns if n not in (OP, SEQUENCE) and n not in _TARGET_META]
        if self.column_list is not None:
            missing = [c for c in self.column_list if c not in names]
            if missing:
                raise AutoCdcError(f"column_list: the changes have no column {missing[0]!r}")
            names = [n for n in names if n in self.column_list or n in self.keys]
        elif self.except_column_list is not None:
            names = [n for n in names if n not in self.except_column_list or n in self.keys]
        for key in self.keys:
            if key not in names:
                raise AutoCdcError(f"keys: the changes have no column {key!r}")
        return names

    def tracked(self, columns: Iterable[str]) -> list[str]:
        """The columns whose change starts a new SCD type 2 version."""
        names = [c for c in columns if c not in self.keys]
        if self.track_history_column_list is not None:
            return [c for c in names if c in self.track_history_column_list]
        if self.track_history_except_column_list is not None:
            return [c for c in names if c not in self.track_history_except_column_list]
        return names


@attrs.frozen
class CdcState:
    """A target's state: ``rows`` (the table: data columns plus ``__SEQUENCE``, and for
    SCD type 2 ``__START_AT``/``__END_AT``) and ``tombstones`` (key columns,
    ``__DELETED_AT``, ``__RECORDED_MS``, ``__TRUNCATE``; the row marked ``__TRUNCATE``
    holds the last truncate's sequence). For :func:`plan_changes`, ``rows`` need only
    hold the keys the batch touches; ``tombstones`` must be whole."""

    rows: Any
    tombstones: Any


def empty_state() -> CdcState:
    """The state of a target that holds nothing yet."""
    return CdcState(pa.table({}), pa.table({}))


@attrs.frozen
class CdcPlan:
    """What a batch does to its target.

    ``upserts``: rows to write, matched on the keys (SCD type 1) or on the keys and
    ``__START_AT`` (type 2); ``removes``: the key (and ``__START_AT``) columns of rows to
    delete; ``truncate_before``: every row not in ``upserts`` whose ``__SEQUENCE`` is
    lower goes (``None``: no truncate); ``tombstones``: the whole tombstone table after the
    batch; ``applied``/``skipped``: changes taken / skipped as older than the target."""

    upserts: Any
    removes: Any
    truncate_before: Any
    tombstones: Any
    applied: int
    skipped: int

    @property
    def empty(self) -> bool:
        """Nothing to write to the table (the tombstones may still change)."""
        return (not self.upserts.num_rows and not self.removes.num_rows
                and self.truncate_before is None)


# -- flattened changes from a table's events ------------------------------------------


def format_sequence(last_commit_lsn: int | None, lsn: int) -> str:
    """The default sequence value: ``"%016X/%016X"`` of the last commit's LSN (0 when there
    is none) and the change's LSN."""
    return f"{last_commit_lsn or 0:016X}/{lsn:016X}"


def _parse_sequence(text: str | None, lsn: int | None) -> str | None:
    if text is not None:
        try:
            head, tail = json.loads(text)
        except (ValueError, TypeError):
            raise AutoCdcError(f"source.sequence {text!r} is not a JSON pair of LSNs") from None
        if tail is not None:
            return format_sequence(int(head) if head is not None else None, int(tail))
        if lsn is not None:  # no LSN in the sequence: the record's own
            return format_sequence(int(head) if head is not None else None, lsn)
        return None
    return format_sequence(None, lsn) if lsn is not None else None


_SEQUENCE_PAIR: Final = (r'^\[(?:null|"(?P<head>[0-9]{1,20})"),'
                         r'(?:null|"(?P<tail>[0-9]{1,20})")\]$')
_SEQUENCE_PAIR_RE: Final = re.compile(_SEQUENCE_PAIR)


def sequence_value(text: str | None, lsn: int | None) -> str | None:
    """:func:`sequence_column` of one change, with the same check of the pair: for a few
    values (a run's first and last), where the column's compute kernels cost about half a
    millisecond a call whatever the length."""
    if text is not None and _SEQUENCE_PAIR_RE.fullmatch(text) is None:
        raise AutoCdcError(f"source.sequence {text!r} is not a JSON pair of LSNs")
    return _parse_sequence(text, lsn)
#: ``%02X`` of every byte value, as 2 ASCII bytes.
_HEX_PAIRS: Final = np.frombuffer(b"".join(b"%02X" % i for i in range(256)),
                                  np.uint8).reshape(256, 2)


def _hex16(values: Any) -> Any:
    """``%016X`` of each of ``values`` (non-negative integers, or one), as rows of 16 ASCII
    bytes."""
    octets = np.atleast_1d(np.asarray(values, np.int64)).astype(">u8").view(np.uint8
                                                                           ).reshape(-1, 8)
    return _HEX_PAIRS[octets].reshape(-1, 16)


def format_sequences(last_commit_lsns: Any, lsns: Any, valid: Any = None) -> Any:
    """:func:`format_sequence` of many changes at once: an Arrow string array (null where
    ``valid``, a boolean array, is false), without a Python loop per value.
    ``last_commit_lsns``: one a change, or one integer for all of them (a transaction's
    changes), written out once."""
    tails = np.asarray(lsns, np.int64)
    count = len(tails)
    rows = np.empty((count, 33), np.uint8)
    rows[:, :16] = _hex16(last_commit_lsns)  # one row for a single head: broadcast
    rows[:, 16] = ord("/")
    rows[:, 17:] = _hex16(tails)
    present = np.ones(count, np.bool_) if valid is None else np.asarray(valid, np.bool_)
    sizes = np.where(present, 33, 0)
    offsets = np.zeros(count + 1, np.int32)
    np.cumsum(sizes, out=offsets[1:])
    data = rows[present].reshape(-1)
    nulls = count - int(np.count_nonzero(present))
    validity = None if nulls == 0 else pa.py_buffer(np.packbits(present, bitorder="little"))
    return pa.Array.from_buffers(pa.string(), count, [validity, pa.py_buffer(offsets),
                                                     pa.py_buffer(data)], null_count=nulls)


def sequence_column(sequences: Any, lsns: Any) -> Any:
    """The default sequence (:data:`SEQUENCE`) of changes, from their ``source.sequence``
    (the connector's JSON pair of LSNs, or null) and their LSN (``source.lsn``, or the
    record's), both Arrow arrays: :func:`format_sequence` of the pair's LSNs; the record's
    LSN where the pair has none; null where neither has one. Vectorized; a value that is
    not such a pair raises :class:`AutoCdcError`."""
    sequences = _combined(sequences).cast(pa.string())
    lsns = _combined(lsns).cast(pa.int64())
    count = len(sequences)
    if not count:
        return pa.array([], pa.string())
    parts = pc.extract_regex(sequences, _SEQUENCE_PAIR)
    bad = pc.and_(sequences.is_valid(), parts.is_null())
    if pc.any(bad).as_py():
        at = pc.index(bad, True).as_py()
        _parse_sequence(sequences[at].as_py(), lsns[at].as_py())  # raises, naming the value
        raise AutoCdcError(f"source.sequence {sequences[at].as_py()!r} is not a JSON pair "
                           "of LSNs")
    heads = pc.struct_field(parts, ["head"])
    tails = pc.struct_field(parts, ["tail"])
    has_head = pc.fill_null(pc.not_equal(heads, ""), False)
    has_tail = pc.fill_null(pc.not_equal(tails, ""), False)
    head = pc.if_else(has_head, heads, "0").cast(pa.uint64()).cast(pa.int64())
    tail = pc.if_else(has_tail, tails, None).cast(pa.uint64()).cast(pa.int64())
    lsn = pc.coalesce(tail, lsns)
    valid = lsn.is_valid().to_numpy(zero_copy_only=False)
    return format_sequences(head.to_numpy(zero_copy_only=False),
                            pc.fill_null(lsn, 0).to_numpy(zero_copy_only=False), valid)


def _combined(array: Any) -> Any:
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def changes_from_events(events: Any) -> Any:
    """A table's events (the columns of :meth:`DecodedCapture.table
    <pgcdc_events.spark.decode.DecodedCapture.table>`, as Arrow) as flattened changes:
    the row's columns (``after``, or ``before`` for deletes, the key columns from
    ``key``), ``__op`` and ``__sequence`` (:func:`sequence_column`). Tombstone records are
    dropped; a truncate is a row of nulls with ``__op`` ``t``."""
    for needed in ("op", "after", "source"):
        if needed not in events.column_names:
            raise AutoCdcError(f"the events have no column {needed!r}: give the events of one "
                               "table (DecodedCapture.table or DecodedStream.table)")
    if "_kind" in events.column_names:
        events = events.filter(pc.fill_null(pc.not_equal(events.column("_kind"), "tombstone"),
                                            True))
    events = events.filter(pc.is_valid(events.column("op")))
    op = events.column("op")
    is_delete = pc.fill_null(pc.equal(op, "d"), False)
    after = events.column("after")
    before = events.column("before") if "before" in events.column_names else None
    key = events.column("key") if "key" in events.column_names else None
    key_names = {key.type.field(i).name for i in range(key.type.num_fields)} if key else set()
    columns: dict[str, Any] = {}
    for i in range(after.type.num_fields):
        name = after.type.field(i).name
        value = pc.struct_field(after, [i])
        if before is not None:
            value = pc.if_else(is_delete, pc.struct_field(before, [i]), value)
        if name in key_names:
            assert key is not None
            value = pc.struct_field(key, [key.type.get_field_index(name)])
        columns[name] = value
    source = events.column("source")
    lsns = (events.column("_lsn") if "_lsn" in events.column_names
            else pc.struct_field(source, ["lsn"]))
    columns[OP] = op
    columns[SEQUENCE] = sequence_column(pc.struct_field(source, ["sequence"]), lsns)
    return pa.table(columns)


# -- the rules ---------------------------------------------------------------------


def _physical_type(t: Any) -> Any:
    """``t`` with its temporal types as the integers they store (Python's ``datetime``
    cannot hold every PostgreSQL value: ``infinity``, years past 9999)."""
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return pa.int32()
    if (pa.types.is_date64(t) or pa.types.is_timestamp(t) or pa.types.is_duration(t)
            or pa.types.is_time64(t)):
        return pa.int64()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(t.field(i).name, _physical_type(t.field(i).type))
                          for i in range(t.num_fields)])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(pa.field(t.value_field.name, _physical_type(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(t.key_type, _physical_type(t.item_type))
    return t


def _physical_schema(schema: Any) -> Any:
    return pa.schema([pa.field(f.name, _physical_type(f.type)) for f in schema])


def _physical(table: Any) -> Any:
    schema = _physical_schema(table.schema)
    return table if schema == table.schema else table.cast(schema)


def _from_rows(rows: list[dict[str, Any]], schema: Any) -> Any:
    return pa.Table.from_pylist(rows, schema=_physical_schema(schema)).cast(schema)


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


def _mask(table: Any, expression: Any) -> Any:
    """Where ``expression`` holds on ``table``'s rows (null: false), as a numpy array."""
    if not table.num_rows:
        return np.zeros(0, np.bool_)
    try:
        result = ds.dataset(table).to_table(columns={"m": expression}).column("m")
        result = result.cast(pa.bool_())
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise AutoCdcError(f"apply_as_deletes/apply_as_truncates: {expression} cannot be "
                           f"evaluated on the changes ({str(exc).splitlines()[0]})") from None
    return pc.fill_null(result, False).to_numpy(zero_copy_only=False)


def _placeholders(text: str) -> list[Any]:
    """The unchanged-TOAST placeholder in every form the type mapper gives it
    (``types.array.toast_placeholder`` and the scalar families)."""
    raw = text.encode("utf-8")
    name_uuid = str(uuid.UUID(bytes=hashlib.md5(raw).digest(), version=3))
    return [text, raw, [text], [raw], {text: text}, [(text, text)], [name_uuid],
            json.dumps({text: text}, separators=(",", ":")), json.dumps({text: text}),
            [b - 256 if b > 127 else b for b in raw]]


class _Rules:
    """One batch's rules (see :func:`plan_changes`)."""

    def __init__(self, spec: AutoCdc, changes: Any, now_ms: int) -> None:
        self.spec = spec
        self.now_ms = now_ms
        names = changes.column_names
        for column in spec.sequence_by:
            if column not in names:
                raise AutoCdcError(f"sequence_by: the changes have no column {column!r}")
        self.columns = spec.target_columns(names)
        self.placeholders = _placeholders(spec.toast_placeholder)
        self.key_of: Callable[[dict[str, Any]], tuple[Any, ...]] = (
            lambda row: tuple(_hashable(row.get(k)) for k in spec.keys))

    def sequence_of(self, row: dict[str, Any], where: str) -> Any:
        values = tuple(row.get(c) for c in self.spec.sequence_by)
        if any(v is None for v in values):
            raise AutoCdcError(f"{where}: the sequence ({', '.join(self.spec.sequence_by)}) is "
                               "null; null sequence values are not supported")
        return values[0] if len(values) == 1 else values

    def is_placeholder(self, value: Any) -> bool:
        if value is None or isinstance(value, (int, float, bool)):
            return False
        return any(value == p for p in self.placeholders)

    def fill_toast(self, row: dict[str, Any], stored: dict[str, Any] | None) -> dict[str, Any]:
        if stored is None:
            return row
        for column in self.columns:
            if column not in self.spec.keys and self.is_placeholder(row.get(column)):
                row[column] = stored.get(column)
        return row


def _ordered_changes(rules: _Rules, changes: Any) -> list[tuple[Any, int, str, dict[str, Any]]]:
    spec = rules.spec
    op_present = OP in changes.column_names
    none = [False] * changes.num_rows
    delete_rule = spec.apply_as_deletes if spec.apply_as_deletes is not None else (
        pc.field(OP) == "d" if op_present else None)
    truncate_rule = spec.apply_as_truncates if spec.apply_as_truncates is not None else (
        pc.field(OP) == "t" if op_present else None)
    deletes = none if delete_rule is None else _mask(changes, delete_rule)
    truncates = none if truncate_rule is None else _mask(changes, truncate_rule)
    rows = changes.to_pylist()
    out = []
    for i, row in enumerate(rows):
        kind = "t" if truncates[i] else "d" if deletes[i] else "u"
        out.append((rules.sequence_of(row, f"change {i}"), i, kind, row))
    out.sort(key=lambda c: (c[0], c[1]))
    return out


def _key_rows(rules: _Rules, table: Any) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    found: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    if table.num_rows and all(k in table.column_names for k in rules.spec.keys):
        for row in table.to_pylist():
            found.setdefault(rules.key_of(row), []).append(row)
    return found


def _row_schema(rules: _Rules, changes: Any, state: CdcState, meta: Sequence[str]) -> Any:
    fields = [changes.schema.field(n) for n in rules.columns]
    have = set(rules.columns)
    old = state.rows.schema if state.rows.num_columns else pa.schema([])
    merged = [old.field(n) for n in old.names if n not in meta]
    names = {f.name for f in merged}
    merged += [f for f in fields if f.name not in names]
    result = []
    for f in merged:
        if f.name in have and f.name in names and f.type != changes.schema.field(f.name).type:
            new = changes.schema.field(f.name).type
            try:
                unified = pa.unify_schemas([pa.schema([f]), pa.schema([pa.field(f.name, new)])],
                                           promote_options="permissive").field(0)
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                raise AutoCdcError(f"column {f.name!r} changes type from {f.type} to {new}, "
                                   "which the target cannot widen to", column=f.name) from None
            f = unified
        result.append(f)
    seq_type = (changes.schema.field(rules.spec.sequence_by[0]).type
                if len(rules.spec.sequence_by) == 1 else
                pa.struct([changes.schema.field(c) for c in rules.spec.sequence_by]))
    return pa.schema(result + [pa.field(m, seq_type) for m in meta]), seq_type


def _tombstone_schema(rules: _Rules, row_schema: Any, seq_type: Any) -> Any:
    return pa.schema([row_schema.field(k) for k in rules.spec.keys]
                     + [pa.field(DELETED_AT, seq_type), pa.field(RECORDED_MS, pa.int64()),
                        pa.field(TRUNCATE, pa.bool_())])


def _to_struct_sequence(rules: _Rules, value: Any) -> Any:
    if len(rules.spec.sequence_by) == 1 or isinstance(value, dict):
        return value
    return dict(zip(rules.spec.sequence_by, value, strict=True))


def _from_struct_sequence(rules: _Rules, value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(value[c] for c in rules.spec.sequence_by)
    return value


def plan_changes(changes: Any, state: CdcState, spec: AutoCdc, *, now_ms: int) -> CdcPlan:
    """The plan for one batch of ``changes`` against ``state`` (see the module docstring).

    ``now_ms`` is the wall clock (ms since the epoch) that tombstones are recorded with and
    expire by. The result depends only on the changes, not on their order in the batch.
    SCD type 1 is planned column-wise (:func:`_plan_scd1`: Arrow and numpy, no Python step
    per change), type 2 change by change.
    """
    rules = _Rules(spec, changes, now_ms)
    logical = changes
    meta = (ROW_SEQUENCE,) if spec.stored_as_scd_type == 1 else (START_AT, END_AT, ROW_SEQUENCE)
    row_schema, seq_type = _row_schema(rules, logical, state, meta)
    tomb_schema = _tombstone_schema(rules, row_schema, seq_type)
    if spec.stored_as_scd_type == 1:
        try:
            return _plan_scd1(rules, logical, state, row_schema, tomb_schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise AutoCdcError(f"the changes do not fit the target's columns: {exc}") from None
    changes = _physical(changes)
    ordered = _ordered_changes(rules, changes)
    stored = _key_rows(rules, _physical(state.rows))
    tombs = _physical(state.tombstones)
    truncated_at = None
    tomb_rows: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    expire = now_ms - int(spec.tombstone_retention_seconds * 1000)
    for row in (tombs.to_pylist() if tombs.num_rows else []):
        if row.get(TRUNCATE):
            truncated_at = _from_struct_sequence(rules, row[DELETED_AT])
        elif row[RECORDED_MS] >= expire:
            tomb_rows.setdefault(rules.key_of(row), []).append(row)
    upserts, removes, _, new_tombs, applied, skipped = _plan_scd2(rules, ordered, stored,
                                                                  tomb_rows)
    for row in upserts:
        for m in meta:
            if m in row:
                row[m] = _to_struct_sequence(rules, row[m])
    tomb_list = [dict(t, **{DELETED_AT: _to_struct_sequence(rules, t[DELETED_AT])})
                 for rows in new_tombs.values() for t in rows]
    if truncated_at is not None:
        tomb_list.append({DELETED_AT: _to_struct_sequence(rules, truncated_at),
                          RECORDED_MS: now_ms, TRUNCATE: True})
    remove_schema = pa.schema([row_schema.field(n) for n in (*spec.keys, START_AT)])
    for row in removes:
        row[START_AT] = _to_struct_sequence(rules, row[START_AT])
    try:
        return CdcPlan(
            upserts=_from_rows(upserts, row_schema),
            removes=_from_rows(removes, remove_schema),
            truncate_before=None,
            tombstones=_from_rows(tomb_list, tomb_schema),
            applied=applied, skipped=skipped)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise AutoCdcError(f"the changes do not fit the target's columns: {exc}") from None


_Plan = tuple[list[dict[str, Any]], list[dict[str, Any]], Any,
              dict[tuple[Any, ...], list[dict[str, Any]]], int, int]

_UPSERT: Final = 0
_DELETE: Final = 1
_TRUNCATE: Final = 2


def _kinds(rules: _Rules, changes: Any) -> Any:
    """Each change's kind (``_UPSERT``, ``_DELETE``, ``_TRUNCATE``: ``apply_as_truncates``
    first, then ``apply_as_deletes``), as a numpy array; ``changes`` physical."""
    spec = rules.spec
    op_present = OP in changes.column_names
    delete_rule = spec.apply_as_deletes if spec.apply_as_deletes is not None else (
        pc.field(OP) == "d" if op_present else None)
    truncate_rule = spec.apply_as_truncates if spec.apply_as_truncates is not None else (
        pc.field(OP) == "t" if op_present else None)
    kinds = np.zeros(changes.num_rows, np.int8)
    if delete_rule is not None:
        kinds[_mask(changes, delete_rule)] = _DELETE
    if truncate_rule is not None:
        kinds[_mask(changes, truncate_rule)] = _TRUNCATE
    return kinds


def _sequence_parts(rules: _Rules, table: Any, column: str, types: list[Any]) -> list[Any]:
    """The sequence columns of ``table``'s ``column`` (the sequence itself, or a struct of
    the ``sequence_by`` columns), cast to ``types``."""
    values = _combined(table.column(column))
    if len(rules.spec.sequence_by) == 1:
        return [values.cast(types[0])]
    return [pc.struct_field(values, [name]).cast(t)
            for name, t in zip(rules.spec.sequence_by, types, strict=True)]


def _dense_ranks(parts: list[list[Any]]) -> list[Any]:
    """For several sources of sequence values (each a list of one array per ``sequence_by``
    column), every value's rank among all of them (equal values, equal ranks), as numpy
    arrays: comparing ranks is comparing sequences."""
    sizes = [len(p[0]) for p in parts]
    total = sum(sizes)
    if not total:
        return [np.zeros(0, np.int64) for _ in parts]
    columns = [pa.concat_arrays([_combined(p[i]) for p in parts])
               for i in range(len(parts[0]))]
    table = pa.table({str(i): c for i, c in enumerate(columns)})
    order = pc.sort_indices(table, sort_keys=[(str(i), "ascending")
                                              for i in range(len(columns))]).to_numpy()
    differs = np.zeros(total, np.bool_)
    for column in columns:
        ordered = column.take(order)
        if total > 1:
            step = pc.not_equal(ordered.slice(1), ordered.slice(0, total - 1))
            differs[1:] |= pc.fill_null(step, True).to_numpy(zero_copy_only=False)
    ranks = np.empty(total, np.int64)
    ranks[order] = np.cumsum(differs)
    out, start = [], 0
    for size in sizes:
        out.append(ranks[start:start + size])
        start += size
    return out


def _key_ids(rules: _Rules, tables: list[Any]) -> list[Any]:
    """Each row's key as an integer (equal keys, equal integers; a null key is a key), for
    several tables holding the key columns, as numpy arrays."""
    keys = rules.spec.keys
    sizes = [t.num_rows for t in tables]
    if not sum(sizes):
        return [np.zeros(0, np.int64) for _ in tables]
    first = tables[0]
    codes = []
    try:
        for key in keys:
            target = first.schema.field(key).type
            if pa.types.is_nested(target):
                raise pa.ArrowNotImplementedError("a nested key")
            values = pa.concat_arrays([_combined(t.column(key)).cast(target) if key in
                                       t.column_names else pa.nulls(t.num_rows, target)
                                       for t in tables])
            encoded = pc.dictionary_encode(values)
            indices = encoded.indices.cast(pa.int64())
            codes.append(pc.fill_null(indices, len(encoded.dictionary)).to_numpy())
        if len(codes) == 1:
            ids = codes[0]
        else:
            ids = np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True)[1]
            ids = np.asarray(ids, np.int64).reshape(-1)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        seen: dict[tuple[Any, ...], int] = {}
        found = []
        for t in tables:
            rows = _physical(t.select([k for k in keys if k in t.column_names])).to_pylist()
            found += [seen.setdefault(rules.key_of(row), len(seen)) for row in rows]
        ids = np.asarray(found, np.int64)
    out, start = [], 0
    for size in sizes:
        out.append(ids[start:start + size])
        start += size
    return out


def _last_per_key(ids: Any, size: int, where: Any = None) -> Any:
    """For each key id below ``size``, the last position holding it (``-1``: none), among
    the positions where ``where`` holds."""
    last = np.full(size, -1, np.int64)
    positions = np.arange(len(ids), dtype=np.int64)
    if where is not None:
        ids, positions = ids[where], positions[where]
    np.maximum.at(last, ids, positions)
    return last


def _placeholder_mask(rules: _Rules, values: Any) -> Any:
    """Where ``values`` (a physical column) hold the unchanged-TOAST placeholder in one of
    its forms (:func:`_placeholders`), as a numpy array."""
    t = values.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        forms = pa.array([p for p in rules.placeholders if isinstance(p, str)], t)
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        forms = pa.array([p for p in rules.placeholders if isinstance(p, bytes)], t)
    elif pa.types.is_nested(t):
        return np.array([rules.is_placeholder(v) for v in values.to_pylist()], np.bool_)
    else:  # numbers, booleans, times, decimals: never the placeholder
        return np.zeros(len(values), np.bool_)
    return pc.fill_null(pc.is_in(values, value_set=forms), False).to_numpy(zero_copy_only=False)


def _count_between(marks: Any, low: Any, high: Any) -> Any:
    """How many of the sorted ``marks`` lie strictly between ``low`` and ``high``."""
    return np.maximum(0, np.searchsorted(marks, high, "left")
                      - np.searchsorted(marks, low, "right"))


def _plan_scd1(rules: _Rules, changes: Any, state: CdcState,  # noqa: C901, PLR0915
               row_schema: Any, tomb_schema: Any) -> CdcPlan:
    """The SCD type 1 plan, column-wise. The rules, in terms of the changes in sequence
    order (ties in batch order):

    - a key's standing sequence is its stored row's (unless older than the last truncate
      recorded) or its live tombstone's, whichever is newer; the stored row is its current
      value unless the tombstone is newer;
    - a change not newer than the last truncate before it, or than its key's standing
      sequence, or than an earlier change of its key in the batch, is skipped; a truncate
      not newer than the last truncate is skipped;
    - a truncate empties every key whose value is older than it; the tombstones older
      than it go;
    - a key's last change applied gives its value (a delete: none, and its tombstone; an
      upsert: its row, and no tombstone), unless a newer truncate empties it;
    - an update's unchanged-TOAST column takes the key's value before it: the change
      before it in the batch (back to a delete or a truncate, which leave nothing), or
      the stored row when it was current then.
    """
    spec = rules.spec
    n = changes.num_rows
    physical = _physical(changes)
    kinds = _kinds(rules, physical)
    for name in spec.sequence_by:
        column = _combined(changes.column(name))
        if column.null_count:
            at = int(np.flatnonzero(~column.is_valid().to_numpy(zero_copy_only=False))[0])
            raise AutoCdcError(f"change {at}: the sequence ({', '.join(spec.sequence_by)}) is "
                               "null; null sequence values are not supported")
    seq_types = [changes.schema.field(c).type for c in spec.sequence_by]
    rows = _combined_table(state.rows)
    if not (rows.num_rows and all(k in rows.column_names for k in spec.keys)
            and ROW_SEQUENCE in rows.column_names):
        rows = None
    tombs = _combined_table(state.tombstones)
    truncated_row = None
    live = None
    if tombs.num_rows:
        truncate_flags = (pc.fill_null(tombs.column(TRUNCATE), False).to_numpy(
            zero_copy_only=False) if TRUNCATE in tombs.column_names
            else np.zeros(tombs.num_rows, np.bool_))
        if truncate_flags.any():
            truncated_row = tombs.slice(int(np.flatnonzero(truncate_flags)[-1]), 1)
        expire = rules.now_ms - int(spec.tombstone_retention_seconds * 1000)
        recorded = pc.fill_null(tombs.column(RECORDED_MS), expire - 1).to_numpy(
            zero_copy_only=False)
        live = tombs.filter(pa.array(~truncate_flags & (recorded >= expire)))
        if not live.num_rows:
            live = None
    # the sequences, as ranks comparable across the changes, stored rows and tombstones
    parts = [[changes.column(c) for c in spec.sequence_by]]
    if rows is not None:
        parts.append(_sequence_parts(rules, rows, ROW_SEQUENCE, seq_types))
    if live is not None:
        parts.append(_sequence_parts(rules, live, DELETED_AT, seq_types))
    if truncated_row is not None:
        parts.append(_sequence_parts(rules, truncated_row, DELETED_AT, seq_types))
    ranks = _dense_ranks(parts)
    rank = ranks[0]
    stored_rank = ranks[1] if rows is not None else np.zeros(0, np.int64)
    live_rank = ranks[1 + (rows is not None)] if live is not None else np.zeros(0, np.int64)
    truncated = int(ranks[-1][0]) if truncated_row is not None else -1
    # the keys, as integers
    empty_keys = changes.select(list(spec.keys)).slice(0, 0)
    ids = _key_ids(rules, [changes.select(list(spec.keys)),
                           rows if rows is not None else empty_keys,
                           live if live is not None else empty_keys])
    key, stored_key, live_key = ids
    size = int(max([int(a.max()) + 1 for a in ids if len(a)], default=0))
    # each key's standing: its stored row and tombstone (the last of each)
    last_stored = _last_per_key(stored_key, size)
    last_live = _last_per_key(live_key, size)
    has_stored = last_stored >= 0
    s_rank = np.where(has_stored, stored_rank[np.maximum(last_stored, 0)]
                      if len(stored_rank) else -1, -1)
    kept = has_stored & (s_rank >= truncated)
    has_tomb = last_live >= 0
    d_rank = np.where(has_tomb, live_rank[np.maximum(last_live, 0)] if len(live_rank)
                      else -1, -1)
    current = kept & ~(has_tomb & (d_rank > s_rank))
    standing = np.maximum(np.where(kept, s_rank, -1), np.where(has_tomb, d_rank, -1))
    # the changes in sequence order; the truncates applied, each newer than the last
    order = np.lexsort((np.arange(n), rank))
    valid = rank > truncated
    truncates: list[int] = []
    latest = truncated
    for at in order[(kinds[order] == _TRUNCATE) & valid[order]]:
        if rank[at] > latest:
            truncates.append(int(at))
            latest = int(rank[at])
    marks = np.asarray([rank[t] for t in truncates], np.int64)  # ascending
    last_truncate = int(marks[-1]) if len(marks) else -1
    # a change ordered after a truncate of the same sequence is skipped
    position = np.empty(n, np.int64)
    position[order] = np.arange(n)
    barred = np.zeros(n, np.bool_)
    for t in truncates:
        barred |= (rank == rank[t]) & (position > position[t])
    candidate = valid & ~barred & (kinds != _TRUNCATE) & (rank > standing[key])
    # of a key's changes of one sequence, the first in batch order
    picked = np.flatnonzero(candidate)
    by_key = picked[np.lexsort((picked, rank[picked], key[picked]))]
    first = np.ones(len(by_key), np.bool_)
    first[1:] = (key[by_key][1:] != key[by_key][:-1]) | (rank[by_key][1:] != rank[by_key][:-1])
    chain = by_key[first]  # the changes applied, by key then sequence
    applied = len(chain) + len(truncates)
    chain_key, chain_rank, chain_kind = key[chain], rank[chain], kinds[chain]
    last = np.ones(len(chain), np.bool_)
    last[:-1] = chain_key[1:] != chain_key[:-1]
    finals = np.flatnonzero(last)  # in chain: each key's last change applied
    final_key = chain_key[finals]
    survives = chain_rank[finals] >= last_truncate
    upsert_at = finals[survives & (chain_kind[finals] == _UPSERT)]
    delete_at = finals[chain_kind[finals] == _DELETE]
    # touched: each key with a change applied, and each current key a truncate empties
    touched = np.zeros(size, np.bool_)
    touched[final_key] = True
    touched |= current & (s_rank < last_truncate)
    upserted = np.zeros(size, np.bool_)
    upserted[chain_key[upsert_at]] = True
    removed = np.flatnonzero(touched & ~upserted & has_stored)
    # the upserts: each surviving upsert's row, its unchanged-TOAST columns filled in
    taken = chain[upsert_at]
    upsert_keys = chain_key[upsert_at]
    fill = _toast_sources(rules, physical, kinds, chain, chain_key, chain_rank, upsert_at,
                          marks, current, s_rank)
    columns: dict[str, Any] = {}
    for field in row_schema:
        name = field.name
        if name == ROW_SEQUENCE:
            columns[name] = _sequence_values(rules, changes, taken, field.type)
        elif name in rules.columns:
            values = _combined(changes.column(name)).cast(field.type)
            index = taken
            codes = fill.get(name)
            if codes is not None:  # a change's value (>= 0), the stored one (-1), its own
                index = np.where(codes >= 0, codes,
                                 np.where(codes == -1, n + last_stored[upsert_keys], taken))
                held = (_combined(rows.column(name)).cast(field.type)
                        if rows is not None and name in rows.column_names
                        else pa.nulls(0 if rows is None else rows.num_rows, field.type))
                values = pa.concat_arrays([values, held])
            columns[name] = values.take(pa.array(np.asarray(index, np.int64)))
        else:
            columns[name] = pa.nulls(len(taken), field.type)
    upserts = pa.table(columns, schema=row_schema)
    remove_schema = pa.schema([row_schema.field(k) for k in spec.keys])
    if len(removed):
        assert rows is not None
        removes = rows.take(pa.array(last_stored[removed])).select(list(spec.keys)).cast(
            remove_schema)
    else:
        removes = remove_schema.empty_table()
    # the tombstones: each key's last delete applied (unless a truncate after it), the
    # live ones of the keys not changed (unless older than the batch's last truncate)
    tables = []
    if live is not None:
        changed = np.zeros(size, np.bool_)
        changed[final_key] = True
        keep = ~changed[live_key] & (d_rank[live_key] >= last_truncate)
        if keep.any():
            tables.append(live.filter(pa.array(keep)).select(tomb_schema.names).cast(
                tomb_schema))
    deleted = chain[delete_at[chain_rank[delete_at] >= last_truncate]]
    if len(deleted):
        tables.append(pa.table({
            **{k: _combined(changes.column(k)).cast(tomb_schema.field(k).type).take(deleted)
               for k in spec.keys},
            DELETED_AT: _sequence_values(rules, changes, deleted,
                                         tomb_schema.field(DELETED_AT).type),
            RECORDED_MS: pa.array(np.full(len(deleted), rules.now_ms, np.int64)),
            TRUNCATE: pa.array(np.zeros(len(deleted), np.bool_))}, schema=tomb_schema))
    truncate_before = None
    if truncates or truncated_row is not None:
        if truncates:
            source, at = changes, truncates[-1]
            truncate_before = _sequence_value(rules, physical, at)
            sequence = _sequence_values(rules, source, np.array([at]),
                                        tomb_schema.field(DELETED_AT).type)
        else:
            assert truncated_row is not None
            sequence = _combined(truncated_row.column(DELETED_AT)).cast(
                tomb_schema.field(DELETED_AT).type)
        tables.append(pa.table({
            **{k: pa.nulls(1, tomb_schema.field(k).type) for k in spec.keys},
            DELETED_AT: sequence, RECORDED_MS: pa.array([rules.now_ms], pa.int64()),
            TRUNCATE: pa.array([True])}, schema=tomb_schema))
    tombstones = (pa.concat_tables(tables) if tables else tomb_schema.empty_table())
    return CdcPlan(upserts=upserts, removes=removes, truncate_before=truncate_before,
                   tombstones=tombstones, applied=applied, skipped=n - applied)


def _combined_table(table: Any) -> Any:
    return table.combine_chunks() if table.num_rows else table


def _sequence_values(rules: _Rules, changes: Any, at: Any, target: Any) -> Any:
    """The sequence of the changes at ``at`` as stored (one column's values, or a struct of
    the ``sequence_by`` columns), of type ``target``."""
    index = pa.array(np.asarray(at, np.int64))
    names = rules.spec.sequence_by
    if len(names) == 1:
        return _combined(changes.column(names[0])).take(index).cast(target)
    return pa.StructArray.from_arrays(
        [_combined(changes.column(c)).take(index) for c in names], names=list(names)
    ).cast(target)


def _sequence_value(rules: _Rules, physical: Any, at: int) -> Any:
    """The sequence of change ``at`` as a Python value (``truncate_before``): physical
    values; a dict for several ``sequence_by`` columns."""
    values = {c: physical.column(c)[at].as_py() for c in rules.spec.sequence_by}
    return values[rules.spec.sequence_by[0]] if len(values) == 1 else values


def _toast_sources(rules: _Rules, physical: Any, kinds: Any, chain: Any, chain_key: Any,
                   chain_rank: Any, upsert_at: Any, marks: Any, current: Any, s_rank: Any
                   ) -> dict[str, Any]:
    """For each column with an unchanged-TOAST placeholder in an update that is a key's
    value: per upsert (``upsert_at``, positions in ``chain``), where its value comes from:
    ``>= 0`` the change at that index, ``-1`` the key's stored row, ``-2`` its own."""
    if OP not in physical.column_names or not len(upsert_at):
        return {}
    ops = _combined(physical.column(OP))
    is_update = pc.fill_null(pc.equal(ops, "u"), False).to_numpy(zero_copy_only=False)
    updates = is_update[chain]
    if not updates[upsert_at].any():
        return {}
    count = len(chain)
    # a change starts a new stretch of values after another key's, a delete, or a truncate
    start = np.ones(count, np.bool_)
    if count > 1:
        start[1:] = ((chain_key[1:] != chain_key[:-1]) | (kinds[chain][:-1] == _DELETE)
                     | (_count_between(marks, chain_rank[:-1], chain_rank[1:]) > 0))
    index = np.arange(count)
    stretch = np.maximum.accumulate(np.where(start, index, 0))
    key_first = np.ones(count, np.bool_)
    key_first[1:] = chain_key[1:] != chain_key[:-1]
    first_of_key = np.maximum.accumulate(np.where(key_first, index, 0))
    # the stored row is the value before a key's first stretch if it was current then
    keys = chain_key
    from_stored = ((stretch == first_of_key) & current[keys]
                   & (_count_between(marks, s_rank[keys], chain_rank[first_of_key]) == 0))
    out: dict[str, Any] = {}
    for name in rules.columns:
        if name in rules.spec.keys:
            continue
        wanted = upsert_at[updates[upsert_at]]
        values = _combined(physical.column(name))
        mask = np.zeros(count, np.bool_)
        candidates = np.flatnonzero(updates)
        if not len(candidates):
            continue
        mask[candidates] = _placeholder_mask(rules, values.take(pa.array(chain[candidates])))
        if not mask[wanted].any():
            continue
        source = np.maximum.accumulate(np.where(mask, -1, index))
        chosen = np.where(~mask, -2, np.where(source >= stretch, source,
                                              np.where(from_stored, -1, -2)))
        out[name] = np.where(chosen >= 0, chain[np.maximum(chosen, 0)], chosen)[upsert_at]
    return out


def _plan_scd2(rules: _Rules, ordered: list[tuple[Any, int, str, dict[str, Any]]],  # noqa: C901, PLR0915
               stored: dict[tuple[Any, ...], list[dict[str, Any]]],
               tombs: dict[tuple[Any, ...], list[dict[str, Any]]]) -> _Plan:
    batch: dict[tuple[Any, ...], list[tuple[Any, str, dict[str, Any]]]] = {}
    for seq, _, kind, row in ordered:
        if kind == "t":
            raise AutoCdcError("stored_as_scd_type=2 does not apply truncates (nor does AUTO "
                               "CDC): decode with Debezium's default skipped.operations=t, or "
                               "filter them out")
        batch.setdefault(rules.key_of(row), []).append((seq, kind, row))
    tracked = rules.spec.tracked(rules.columns)
    upserts: list[dict[str, Any]] = []
    removes: list[dict[str, Any]] = []
    new_tombs = {k: list(v) for k, v in tombs.items()}
    applied = skipped = 0
    for key, items in batch.items():
        versions = stored.get(key, [])
        # every change the key's history stands for: seq -> (kind, row, new)
        points: dict[Any, tuple[str, dict[str, Any], bool]] = {}
        starts = set()
        for v in versions:
            start = _from_struct_sequence(rules, v[START_AT])
            starts.add(start)
            points[start] = ("u", v, False)
            last = _from_struct_sequence(rules, v[ROW_SEQUENCE])
            if last != start:
                points[last] = ("u", v, False)
        for v in versions:
            end = v[END_AT]
            if end is not None:
                end = _from_struct_sequence(rules, end)
                if end not in starts and end not in points:
                    points[end] = ("d", v, False)
        for t in tombs.get(key, []):
            points.setdefault(_from_struct_sequence(rules, t[DELETED_AT]), ("d", t, False))
        changed = False
        for seq, kind, row in items:
            if seq in points:
                skipped += 1
                continue
            applied += 1
            changed = True
            points[seq] = (kind, row, True)
        if not changed:
            continue
        out: list[dict[str, Any]] = []
        key_tombs: list[dict[str, Any]] = []
        current: dict[str, Any] | None = None
        previous: dict[str, Any] | None = None
        key_values = {k: items[0][2].get(k) for k in rules.spec.keys}
        for seq in sorted(points):
            kind, row, new = points[seq]
            if kind == "d":
                if current is not None:
                    current[END_AT] = seq
                    out.append(current)
                    current = None
                else:
                    key_tombs.append({**key_values, DELETED_AT: seq,
                                      RECORDED_MS: rules.now_ms if new else row.get(
                                          RECORDED_MS, rules.now_ms),
                                      TRUNCATE: False})
                previous = None
                continue
            values = {c: row.get(c) for c in rules.columns} if new else {
                c: row.get(c) for c in row if c not in _TARGET_META}
            if new and row.get(OP) == "u":
                values = rules.fill_toast(values, previous)
            if current is not None and all(
                    _hashable(current.get(c)) == _hashable(values.get(c)) for c in tracked):
                current.update(values)
                current[ROW_SEQUENCE] = seq
            else:
                if current is not None:
                    current[END_AT] = seq
                    out.append(current)
                current = {**values, START_AT: seq, END_AT: None, ROW_SEQUENCE: seq}
            previous = values
        if current is not None:
            out.append(current)
        if key_tombs:
            new_tombs[key] = key_tombs
        else:
            new_tombs.pop(key, None)
        old = {_from_struct_sequence(rules, v[START_AT]): v for v in versions}
        new_starts = {v[START_AT] for v in out}
        for start, v in old.items():
            if start not in new_starts:
                removes.append({**{k: v[k] for k in rules.spec.keys}, START_AT: start})
        for v in out:
            before = old.get(v[START_AT])
            if before is None or _version_differs(rules, before, v):
                upserts.append(v)
    return upserts, removes, None, new_tombs, applied, skipped


def _version_differs(rules: _Rules, stored: dict[str, Any], new: dict[str, Any]) -> bool:
    for name, value in new.items():
        old = stored.get(name)
        if name in _TARGET_META and old is not None:
            old = _from_struct_sequence(rules, old)
        if _hashable(old) != _hashable(value):
            return True
    return False


def apply_plan(state: CdcState, plan: CdcPlan, spec: AutoCdc) -> CdcState:
    """``state`` (whole) after ``plan``: what a target does with it, in memory."""
    match = list(spec.keys) + ([START_AT] if spec.stored_as_scd_type == 2 else [])

    def ident(row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(_hashable(row.get(c)) for c in match)

    rows = _physical(state.rows).to_pylist() if state.rows.num_rows else []
    gone = {ident(r) for r in _physical(plan.removes).to_pylist()}
    written = {ident(r): r for r in _physical(plan.upserts).to_pylist()}
    kept = []
    for row in rows:
        i = ident(row)
        if i in gone or i in written:
            continue
        if plan.truncate_before is not None and _seq_key(row[ROW_SEQUENCE]) < _seq_key(
                plan.truncate_before):
            continue
        kept.append(row)
    out = _from_rows(kept + list(written.values()), plan.upserts.schema)
    return CdcState(out, plan.tombstones)


def _seq_key(value: Any) -> Any:
    return tuple(value.values()) if isinstance(value, dict) else value


def apply_changes(changes: Any, state: CdcState, spec: AutoCdc, *, now_ms: int) -> CdcState:
    """``state`` (whole) after one batch of ``changes``: :func:`plan_changes` then
    :func:`apply_plan`."""
    return apply_plan(state, plan_changes(changes, state, spec, now_ms=now_ms), spec)
