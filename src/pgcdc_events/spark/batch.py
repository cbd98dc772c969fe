"""Decoding the change messages of one table, one Arrow batch at a time (the fast path).

Each batch of change messages is split in one Python pass into per-column raw
values (no message objects), then converted column by column: with Arrow
compute casts where they give exactly what the type mapper gives (integers,
floats, booleans, text, ``numeric(p, s)``, dates, ``timestamp``,
``timestamptz`` in UTC), with the type mapper's own converters elsewhere and
whenever a cast refuses a value. Converters are built once per table version,
not per batch or row. The records a message produces (a create, an update, a
delete and its tombstone, the delete/tombstone/create of a key change, a
truncate) follow :class:`~pgcdc_events.events.EventDecoder` rule for rule.

:class:`TableLayout` is the output shape of one table across all its schema
versions: one struct type for ``before``/``after`` covering every version's
columns (a column a version did not have is null), one for the key.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

import attrs
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.compute as pc  # type: ignore[import-untyped]
from pyspark.sql.types import (
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    IntegralType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

from pgcdc_events.errors import ConversionError, ProtocolError
from pgcdc_events.events.masking import column_transform
from pgcdc_events.events.source import SOURCE_SCHEMA
from pgcdc_events.events.tables import TRANSACTION_BLOCK_SCHEMA, ColumnPlan, TableSchema
from pgcdc_events.protocol.decoder import parse_message
from pgcdc_events.protocol.messages import Truncate
from pgcdc_events.spark._session import arrow_type
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.registry import RelationRegistry
from pgcdc_events.spark.schema import SparkSchemaOptions, decimal_type, spark_type, struct_type
from pgcdc_events.spark.values import ValueConverter
from pgcdc_events.types import text as text_types
from pgcdc_events.types.jsonvalue import DECIMAL_LOGICAL
from pgcdc_events.types.mapper import conversion_error
from pgcdc_events.types.schema import Schema

__all__ = [
    "BLOCK_TYPE", "DECODE_INPUT", "POSITION_TYPE", "SOURCE_TYPE", "TableDecoder",
    "TableLayout", "fast_path",
]

#: The columns the decoder reads from each input batch.
DECODE_INPUT: Final = ("position", "lsn", "data", "in_stream", "version", "xid")
#: The ``source`` block, the ``transaction`` block and the ordering key of the events.
SOURCE_TYPE: Final = struct_type(SOURCE_SCHEMA, SparkSchemaOptions("literal",
                                                                  respect_optional=False))
BLOCK_TYPE: Final = struct_type(TRANSACTION_BLOCK_SCHEMA,
                                SparkSchemaOptions("literal", respect_optional=False))
POSITION_TYPE: Final = StructType([
    StructField("commit", LongType(), True), StructField("message", LongType(), False),
    StructField("index", IntegerType(), False),
])

_LOG = logging.getLogger("pgcdc_events")
_I32 = struct.Struct(">i").unpack_from
_N, _U, _T, _B = 110, 117, 116, 98
_INSERT, _UPDATE, _DELETE, _TRUNCATE = 73, 85, 68, 84
_WIDER_INTEGRAL: Final = (ByteType(), ShortType(), IntegerType(), LongType())


class _MalformedError(Exception):
    """The fast splitter met something it does not handle; the protocol parser reports it."""


# -- output layout -------------------------------------------------------------------------


@attrs.frozen
class _Field:
    name: str
    spark: DataType


class TableLayout:
    """The output shape of one table over all its versions, and per-version column plans."""

    def __init__(self, registry: RelationRegistry, table: str, options: SparkSchemaOptions
                 ) -> None:
        self.registry = registry
        self.table = table
        self.options = SparkSchemaOptions(options.flavour, options.variable_scale_decimal_scale,
                                          respect_optional=False)
        self.versions = registry.table_versions(table)
        if not self.versions:
            registry.table_index(table)  # raises: no such table
        schemas = [registry.schema(v.index) for v in self.versions]
        self.schemas: dict[int, TableSchema] = {
            v.index: s for v, s in zip(self.versions, schemas, strict=True) if s is not None}
        latest_first = [self.schemas[v.index] for v in reversed(self.versions)]
        self.value_fields = self._union(table, [s.value_schema for s in latest_first])
        keys = [s.key_schema for s in latest_first if s.key_schema is not None]
        self.key_fields = self._union(table, keys) if keys else None
        self.value_type = StructType([StructField(f.name, f.spark, True)
                                      for f in self.value_fields])
        self.key_type = (None if self.key_fields is None else
                         StructType([StructField(f.name, f.spark, True) for f in self.key_fields]))
        self.value_arrow = arrow_type(self.value_type)
        self.key_arrow = None if self.key_type is None else arrow_type(self.key_type)
        latest = latest_first[0]
        self.schema_name = latest.schema_name
        self.table_name = latest.table_name
        self.topic = latest.topic

    def _union(self, table: str, structs: Sequence[Schema]) -> list[_Field]:
        out: dict[str, _Field] = {}
        for schema in structs:
            for f in schema.fields or ():
                dt = spark_type(f.schema, self.options)
                known = out.get(f.name)
                if known is None:
                    out[f.name] = _Field(f.name, dt)
                elif known.spark != dt:
                    out[f.name] = _Field(f.name, _widen(known.spark, dt, table, f.name))
        return list(out.values())

    def core_type(self) -> StructType:
        """The Spark schema of :class:`TableDecoder` batches: the records, before the
        envelope's transaction-wide parts (``source``...) are added around them."""
        fields = [
            StructField("position", LongType(), False), StructField("index", IntegerType(), False),
            StructField("version", IntegerType(), False), StructField("lsn", LongType(), True),
            StructField("xid", LongType(), True), StructField("op", StringType(), True),
            StructField("kind", StringType(), False),
        ]
        if self.key_type is not None:
            fields += [StructField("key", self.key_type, True),
                       StructField("related_key", self.key_type, True)]
        fields += [StructField("before", self.value_type, True),
                   StructField("after", self.value_type, True),
                   StructField("ts_ns", LongType(), True)]
        return StructType(fields)

    def output_type(self) -> StructType:
        """The Spark schema of the table's events."""
        fields: list[StructField] = []
        if self.key_type is not None:
            fields.append(StructField("key", self.key_type, True))
        fields += [
            StructField("before", self.value_type, True),
            StructField("after", self.value_type, True),
            StructField("source", SOURCE_TYPE, True),
            StructField("transaction", BLOCK_TYPE, True),
            StructField("op", StringType(), True),
            StructField("ts_ms", LongType(), True),
            StructField("ts_us", LongType(), True),
            StructField("ts_ns", LongType(), True),
            StructField("_kind", StringType(), False),
            StructField("_position", POSITION_TYPE, False),
            StructField("_version", IntegerType(), False),
            StructField("_lsn", LongType(), True),
        ]
        if self.key_type is not None:
            fields.append(StructField("_related_key", self.key_type, True))
        return StructType(fields)


def _widen(a: DataType, b: DataType, table: str, column: str) -> DataType:
    """The Spark type covering a column whose type changed between schema versions."""
    if isinstance(a, IntegralType) and isinstance(b, IntegralType):
        return max(a, b, key=_WIDER_INTEGRAL.index)
    if {type(a), type(b)} == {FloatType, DoubleType}:
        return DoubleType()
    if isinstance(a, DecimalType) and isinstance(b, DecimalType):
        scale = max(a.scale, b.scale)
        digits = max(a.precision - a.scale, b.precision - b.scale)
        if digits + scale <= 38:
            return DecimalType(digits + scale, scale)
    raise SparkDecodeError(f"the column changed type across schema versions ({a.simpleString()} "
                           f"and {b.simpleString()}) and no Spark type holds both; decode the "
                           f"capture in parts split at the ALTER TABLE", table=table, column=column)


# -- fast paths ------------------------------------------------------------------------------

FastPath = Callable[[Any], Any]
_STRING = pa.string()
_T_F = pa.array(["t", "f"])


def fast_path(plan: ColumnPlan, converter: ValueConverter, *, transformed: bool = False
              ) -> FastPath | None:
    """A vectorized converter from a column's raw text values (a binary array) to its output
    array, where Arrow's casts give exactly the type mapper's values; ``None`` elsewhere.

    The function raises (``pa.ArrowInvalid``...) on any value it cannot take; the caller
    then converts that batch's column with the type mapper. SQL NULLs become the column's
    null fallback (a NOT NULL column's default or zero value, as the event layer has it).
    ``transformed``: the column is masked or truncated (no fast path). A NOT NULL column's
    converter refuses values without a representation (``numeric`` NaN); a cast refuses
    them too, so the fast path stands.
    """
    if transformed:
        return None
    convert = _fast_path(plan, converter)
    if convert is None or plan.null_value is None:
        return convert
    fallback = converter.array([plan.null_value])[0]

    def filled(raw: Any) -> Any:
        array = convert(raw)
        return pc.fill_null(array, fallback) if array.null_count else array

    return filled


def _fast_path(plan: ColumnPlan, converter: ValueConverter) -> FastPath | None:
    mapping = plan.mapping
    pg_type = mapping.pg_type.root
    name, schema = pg_type.name, mapping.schema
    kind, sname = schema.type, schema.name
    literal = converter.literal_type
    finish = converter.from_literal
    if pg_type.kind != "base":
        return None
    if sname is None and (name, kind) in {("int2", "int16"), ("int4", "int32"),
                                          ("int8", "int64"), ("oid", "int64"),
                                          ("float4", "float32"), ("float8", "float64")}:
        return lambda raw: finish(pc.cast(raw.cast(_STRING), literal))
    if name == "bool" and kind == "boolean":
        def booleans(raw: Any) -> Any:
            text = raw.cast(_STRING)
            if (pc.sum(pc.is_in(text, value_set=_T_F)).as_py() or 0) != len(text) - text.null_count:
                raise pa.ArrowInvalid("not a boolean")
            return pc.equal(text, "t")
        return booleans
    if kind == "string" and mapping.from_text is text_types.utf8:
        return lambda raw: finish(raw.cast(_STRING))
    if sname == DECIMAL_LOGICAL and name == "numeric" and decimal_type(schema) is not None:
        return lambda raw: finish(pc.cast(raw.cast(_STRING), literal))
    if name == "date" and kind == "int32":
        def dates(raw: Any) -> Any:
            if pc.any(pc.not_equal(pc.binary_length(raw), 10)).as_py():
                raise pa.ArrowInvalid("not a plain ISO date")
            return finish(pc.cast(raw.cast(_STRING), pa.date32()).cast(pa.int32()))
        return dates
    if name == "timestamp" and sname == "io.debezium.time.MicroTimestamp":
        def timestamps(raw: Any) -> Any:
            parsed = pc.cast(raw.cast(_STRING), pa.timestamp("us"))
            return finish(parsed.cast(pa.int64()))
        return timestamps
    if name == "timestamptz" and sname == "io.debezium.time.ZonedTimestamp":
        typmod = mapping.type_modifier
        width = typmod if 0 <= typmod <= 6 else 6
        unit = {0: "s", 3: "ms", 6: "us"}.get(width)
        if unit is None:
            return None
        semantic = converter.options.flavour == "semantic"

        def zoned(raw: Any) -> Any:
            parsed = pc.cast(raw.cast(_STRING), pa.timestamp("us", tz="UTC"))
            if semantic:
                return parsed
            at_unit = parsed.cast(pa.timestamp(unit, tz="UTC"))  # exact: PG rounded it already
            return pc.strftime(at_unit, format="%Y-%m-%dT%H:%M:%SZ")
        return zoned
    return None


# -- per-version plans -----------------------------------------------------------------------


class _ColumnSlot:
    """One planned column of one version: its converters and where its values go."""

    __slots__ = ("binary", "converter", "fast", "label", "plan", "target", "text")

    def __init__(self, plan: ColumnPlan, options: SparkSchemaOptions, target: pa.DataType,
                 table: str, transformed: bool) -> None:
        self.plan = plan
        self.converter = ValueConverter(plan.mapping.schema, options)
        self.fast = fast_path(plan, self.converter, transformed=transformed)
        self.text = plan.from_text
        self.binary = plan.from_binary
        # The array type of this version's values when the union widened the column.
        self.target = None if target == self.converter.arrow_type else target
        self.label = table


class _VersionPlan:
    """How one version's tuples become value and key struct arrays of the table's layout."""

    def __init__(self, layout: TableLayout, version: int) -> None:
        schema = layout.schemas[version]
        self.schema = schema
        self.index = version
        self.ncols = len(schema.relation.columns)
        value_types = {f.name: layout.value_arrow.field(i).type
                       for i, f in enumerate(layout.value_fields)}
        if layout.key_fields is not None and layout.key_arrow is not None:
            for i, f in enumerate(layout.key_fields):
                value_types.setdefault(f.name, layout.key_arrow.field(i).type)
        config = layout.registry.config
        columns = schema.relation.columns
        self.slots = [_ColumnSlot(p, layout.options, value_types.get(p.name) or
                                  _own_type(p, layout), schema.qualified,
                                  column_transform(config, schema.schema_name, schema.table_name,
                                                   columns[p.position].name, p.mapping.schema,
                                                   p.mapping.pg_type,
                                                   columns[p.position].type_modifier) is not None)
                      for p in schema.columns]
        in_value = (range(len(schema.columns)) if schema.value_positions is None
                    else schema.value_positions)
        by_name = {schema.columns[i].name: i for i in in_value}
        self.value_sources = [by_name.get(f.name) for f in layout.value_fields]
        self.key_sources: list[int | None] | None = None
        if layout.key_fields is not None:
            key_by_name = {schema.columns[i].name: i for i in schema.key_positions}
            self.key_sources = ([key_by_name.get(f.name) for f in layout.key_fields]
                                if schema.key_schema is not None else None)


def _own_type(plan: ColumnPlan, layout: TableLayout) -> pa.DataType:
    return arrow_type(spark_type(plan.mapping.schema, layout.options))


# -- the decoder -----------------------------------------------------------------------------


class _Group:
    """The messages of one batch that one version decodes."""

    __slots__ = ("new", "new_kinds", "old", "old_kinds", "plan", "rows")

    def __init__(self, plan: _VersionPlan) -> None:
        self.plan = plan
        self.rows: list[tuple[int, int, int, int, int]] = []  # row, type, new#, old#, old kind
        self.new: list[bytes | None] = []
        self.old: list[bytes | None] = []
        self.new_kinds: dict[int, bytes] = {}
        self.old_kinds: dict[int, bytes] = {}


class TableDecoder:
    """Decodes Arrow batches of one table's change messages (plus every Truncate message).

    Input columns: :data:`DECODE_INPUT`; output: :meth:`TableLayout.output_type`.
    ``tombstones`` adds the tombstone records of deletes (when
    ``tombstones.on.delete`` asks for them); ``clock`` returns nanoseconds since
    the epoch for the envelope's processing time (read once per batch).
    """

    def __init__(self, registry: RelationRegistry, table: str, options: SparkSchemaOptions,
                 *, tombstones: bool = False, clock: Callable[[], int] = time.time_ns) -> None:
        self.registry = registry
        self.table = table
        self.layout = TableLayout(registry, table, options)
        self.config = registry.config
        self.tombstones = tombstones and self.config.tombstones_on_delete
        self.clock = clock
        self.plans = {v: _VersionPlan(self.layout, v) for v in self.layout.schemas}
        self.output = self.layout.core_type()
        self.output_arrow = pa.schema([pa.field(f.name, arrow_type(f.dataType), f.nullable)
                                       for f in self.output.fields])
        skipped = self.config.skipped_operations
        self.skip_c, self.skip_u = "c" in skipped, "u" in skipped
        self.skip_d, self.skip_t = "d" in skipped, "t" in skipped

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        """The ``mapInArrow`` function."""
        for batch in batches:
            out = self.decode(batch)
            if out.num_rows:
                yield out

    # -- splitting ---------------------------------------------------------------------------
    def decode(self, batch: Any) -> Any:
        """One output batch of records for one input batch of messages."""
        datas = batch.column("data").to_pylist()
        in_stream = batch.column("in_stream").to_pylist()
        versions = batch.column("version").to_pylist()
        positions = batch.column("position")
        groups: dict[int, _Group] = {}
        truncates: list[int] = []
        for row, data in enumerate(datas):
            mtype = data[0]
            if mtype == _TRUNCATE:
                truncates.append(row)
                continue
            version = versions[row]
            group = groups.get(version) if version is not None else None
            if group is None:
                plan = self.plans.get(version) if version is not None else None
                if plan is None:
                    self._unknown(data, bool(in_stream[row]), positions[row].as_py())
                    continue
                group = groups[version] = _Group(plan)
            try:
                self._split(group, row, data, 5 if in_stream[row] else 1)
            except (_MalformedError, IndexError, struct.error):
                parse_message(data, in_stream=bool(in_stream[row]))  # raises ProtocolError
                raise ProtocolError("a change message of the announced relation's shape",
                                    message_type=chr(mtype), offset=0,
                                    detail=f"position {positions[row].as_py()}") from None
        parts = [self._records(group, batch) for group in groups.values()]
        if truncates:
            parts.append(self._truncates(batch, truncates, in_stream))
        return self._assemble(batch, parts)

    def _unknown(self, data: bytes, in_stream: bool, position: int) -> None:
        message = parse_message(data, in_stream=in_stream)
        relid = getattr(message, "relation_id", None)
        version = (self.registry.version_at(relid, position) if relid is not None else None)
        if version is None:
            raise ProtocolError("a change to an announced relation", offset=0,
                                detail=f"no Relation message for OID {relid} before position "
                                       f"{position}")
        # A version of another table (the input was not filtered to this table): ignore it.

    def _split(self, group: _Group, row: int, data: bytes, pos: int) -> None:
        mtype = data[0]
        pos += 4  # relation OID (already resolved to a version)
        ncols = group.plan.ncols
        new_index = old_index = -1
        old_kind = 0
        if mtype == _INSERT:
            if data[pos] != 78:  # 'N'
                raise _MalformedError
            new_index = len(group.new) // ncols
            pos, kinds = _split_tuple(data, pos + 1, ncols, group.new)
            if kinds is not None:
                group.new_kinds[new_index] = kinds
        elif mtype in (_UPDATE, _DELETE):
            tag = data[pos]
            if tag in (75, 79):  # 'K', 'O'
                old_kind = tag
                old_index = len(group.old) // ncols
                pos, kinds = _split_tuple(data, pos + 1, ncols, group.old)
                if kinds is not None:
                    group.old_kinds[old_index] = kinds
                tag = data[pos] if pos < len(data) else 0
            if mtype == _UPDATE:
                if tag != 78:
                    raise _MalformedError
                new_index = len(group.new) // ncols
                pos, kinds = _split_tuple(data, pos + 1, ncols, group.new)
                if kinds is not None:
                    group.new_kinds[new_index] = kinds
            elif old_index < 0:
                raise _MalformedError
        else:
            raise _MalformedError
        if pos != len(data):
            raise _MalformedError
        group.rows.append((row, mtype, new_index, old_index, old_kind))

    # -- conversion ---------------------------------------------------------------------------
    def _columns(self, group: _Group, new: bool, failed: set[int]) -> list[Any]:
        """One output array per planned column, over the group's new (or old) tuples."""
        plan = group.plan
        flat = group.new if new else group.old
        kinds = group.new_kinds if new else group.old_kinds
        ncols = plan.ncols
        old_of: dict[int, int] | None = None
        if new and kinds:
            old_of = {n: o for _, _, n, o, k in group.rows if k == 79 and n >= 0}
        arrays = []
        for slot in plan.slots:
            position = slot.plan.position
            raws = flat[position::ncols]
            special = [j for j, k in kinds.items() if k[position] in (_U, _B)] if kinds else ()
            array = None
            if slot.fast is not None and not special:
                try:
                    array = slot.fast(pa.array(raws, pa.binary()))
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                    array = None
            if array is None:
                values = self._python(slot, raws, kinds, position, group, old_of, failed)
                array = slot.converter.array(values)
            if slot.target is not None:
                array = array.cast(slot.target)
            arrays.append(array)
        return arrays

    def _python(self, slot: _ColumnSlot, raws: list[bytes | None], kinds: dict[int, bytes],
                position: int, group: _Group, old_of: dict[int, int] | None,
                failed: set[int]) -> list[Any]:
        """A column's Connect values through the type mapper's converters."""
        plan, text, binary = slot.plan, slot.text, slot.binary
        null = plan.null_value
        out: list[Any] = []
        append = out.append
        for j, raw in enumerate(raws):
            k = kinds.get(j) if kinds else None
            kind = k[position] if k is not None else (_T if raw is not None else _N)
            if raw is None:
                if kind == _U:
                    append(self._toast(slot, group, old_of, j, failed))
                else:
                    append(null)
                continue
            try:
                if kind == _B:
                    if binary is None:
                        raise ConversionError(
                            f"type {plan.mapping.pg_type.name} has no binary-format converter; "
                            "capture with text tuples (binary 'false')")
                    append(binary(raw))
                else:
                    append(text(raw))
            except (ConversionError, ValueError, ArithmeticError, IndexError, KeyError,
                    TypeError) as exc:
                append(self._failure(slot, raw, kind == _B, exc, j, failed))
        return out

    def _toast(self, slot: _ColumnSlot, group: _Group, old_of: dict[int, int] | None, j: int,
               failed: set[int]) -> Any:
        """An unchanged TOASTed value: from the FULL old tuple when it has it, else the stand-in."""
        o = old_of.get(j) if old_of else None
        if o is not None:
            ncols = group.plan.ncols
            position = slot.plan.position
            raw = group.old[o * ncols + position]
            okinds = group.old_kinds.get(o)
            kind = okinds[position] if okinds is not None else (_T if raw is not None else _N)
            if raw is not None and kind in (_T, _B):
                try:
                    if kind == _B and slot.binary is not None:
                        return slot.binary(raw)
                    return slot.text(raw)
                except (ConversionError, ValueError, ArithmeticError, IndexError, KeyError,
                        TypeError) as exc:
                    return self._failure(slot, raw, kind == _B, exc, j, failed)
        return slot.plan.toast

    def _failure(self, slot: _ColumnSlot, raw: bytes, binary: bool, exc: Exception, j: int,
                 failed: set[int]) -> Any:
        """A value that did not convert, as the event layer handles it: with
        ``event.converting.failure.handling.mode`` warn/skip it becomes the column's null
        fallback; under ``fail``, ``event.processing.failure.handling.mode`` raises or drops
        the change (tuple ``j`` is marked failed)."""
        if isinstance(exc, ConversionError) and getattr(exc, "column", None) is not None:
            error = exc
        else:
            reason = (str(exc) if isinstance(exc, ConversionError)
                      else f"{type(exc).__name__}: {exc}")
            error = conversion_error(slot.label, slot.plan.mapping, raw, binary, reason)
        converting = self.config.event_converting_failure_handling_mode
        if converting != "fail":
            if converting == "warn":
                _LOG.warning("%s; the value is replaced by null", error)
            return slot.plan.null_value
        processing = self.config.event_processing_failure_handling_mode
        if processing == "fail":
            raise error
        failed.add(j)
        if processing == "warn":
            _LOG.warning("skipped a %s change: %s", slot.label, error)
        return None

    # -- records ------------------------------------------------------------------------------
    def _records(self, group: _Group, batch: Any) -> dict[str, Any]:
        plan = group.plan
        failed_new: set[int] = set()
        failed_old: set[int] = set()
        new_cols = self._columns(group, True, failed_new)
        old_cols = self._columns(group, False, failed_old)
        n_new = len(group.new) // plan.ncols
        n_old = len(group.old) // plan.ncols
        layout = self.layout
        new_value = _struct(new_cols, plan.value_sources, layout.value_arrow, n_new)
        old_value = _struct(old_cols, plan.value_sources, layout.value_arrow, n_old)
        keys = None
        if plan.key_sources is not None:
            assert layout.key_arrow is not None
            new_key = _struct(new_cols, plan.key_sources, layout.key_arrow, n_new)
            old_key = _struct(old_cols, plan.key_sources, layout.key_arrow, n_old)
            keys = pa.concat_arrays([new_key, old_key])
        changed = self._key_changes(group, plan, new_cols, old_cols)
        rows: list[int] = []
        index: list[int] = []
        ops: list[str | None] = []
        kinds: list[str] = []
        before: list[int | None] = []
        after: list[int | None] = []
        key: list[int | None] = []
        related: list[int | None] = []
        has_key = keys is not None

        def add(row: int, i: int, op: str | None, kind: str, b: int | None, a: int | None,
                k: int | None, r: int | None) -> None:
            rows.append(row)
            index.append(i)
            ops.append(op)
            kinds.append(kind)
            before.append(b)
            after.append(a)
            key.append(k if has_key else None)
            related.append(r if has_key else None)

        tombstones = self.tombstones
        tombstones_on = self.config.tombstones_on_delete
        if (not self.skip_c and not failed_new and not failed_old and not n_old
                and all(r[1] == _INSERT for r in group.rows)):
            # Only inserts (the common batch): the record lists in one go.
            count = len(group.rows)
            rows = [r[0] for r in group.rows]
            index, ops, kinds = [0] * count, ["c"] * count, ["change"] * count
            before = related = [None] * count
            after = list(range(count))  # the i-th insert holds the i-th new tuple
            key = after if has_key else [None] * count
        for row, mtype, ni, oi, _ in (() if rows else group.rows):
            if ni in failed_new or oi in failed_old:
                continue
            old_key_at = n_new + oi if oi >= 0 else None
            if mtype == _INSERT:
                if not self.skip_c:
                    add(row, 0, "c", "change", None, ni, ni, None)
            elif mtype == _UPDATE:
                if oi >= 0 and oi in changed:
                    i = 0
                    if not self.skip_d:
                        add(row, 0, "d", "change", oi, None, old_key_at, ni)
                        i = 1
                        if tombstones_on:
                            if tombstones:
                                add(row, 1, None, "tombstone", None, None, old_key_at, ni)
                            i = 2
                    if not self.skip_c:
                        add(row, i, "c", "change", None, ni, ni, old_key_at)
                elif not self.skip_u:
                    add(row, 0, "u", "change", oi if oi >= 0 else None, ni, ni, None)
            elif not self.skip_d:  # delete
                add(row, 0, "d", "change", oi, None, old_key_at, None)
                if tombstones:
                    add(row, 1, None, "tombstone", None, None, old_key_at, None)
        return {
            "rows": rows, "index": index, "op": ops, "kind": kinds,
            "version": [plan.index] * len(rows),
            "before": old_value.take(pa.array(before, pa.int64())),
            "after": new_value.take(pa.array(after, pa.int64())),
            "key": keys.take(pa.array(key, pa.int64())) if keys is not None else None,
            "related_key": keys.take(pa.array(related, pa.int64())) if keys is not None else None,
        }

    def _key_changes(self, group: _Group, plan: _VersionPlan, new_cols: list[Any],
                     old_cols: list[Any]) -> set[int]:
        """Old-tuple indexes of updates whose key differs from the new key."""
        if plan.schema.key_schema is None:
            return set()
        pairs = [(ni, oi) for _, mtype, ni, oi, _ in group.rows if mtype == _UPDATE and oi >= 0]
        if not pairs:
            return set()
        new_idx = pa.array([p[0] for p in pairs], pa.int64())
        old_idx = pa.array([p[1] for p in pairs], pa.int64())
        equal = [True] * len(pairs)
        for position in plan.schema.key_positions:
            a = new_cols[position].take(new_idx)
            b = old_cols[position].take(old_idx)
            try:
                same = pc.fill_null(pc.or_kleene(pc.equal(a, b),
                                                 pc.and_(a.is_null(), b.is_null())), False)
                flags = same.to_pylist()
            except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
                flags = [x == y for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True)]
            equal = [e and f for e, f in zip(equal, flags, strict=True)]
        return {oi for (_, oi), e in zip(pairs, equal, strict=True) if not e}

    def _truncates(self, batch: Any, rows: list[int], in_stream: list[Any]) -> dict[str, Any]:
        datas = batch.column("data")
        positions = batch.column("position")
        out_rows: list[int] = []
        index: list[int] = []
        versions: list[int] = []
        for row in rows:
            position = positions[row].as_py()
            message = parse_message(datas[row].as_py(), in_stream=bool(in_stream[row]))
            assert isinstance(message, Truncate)
            emitted = 0
            for relid in message.relation_ids:
                version = self.registry.version_at(relid, position)
                if version is None:
                    raise ProtocolError("a change to an announced relation", offset=0,
                                        detail=f"no Relation message for OID {relid} before "
                                               f"position {position}")
                if version.table is None or self.skip_t:
                    continue
                if version.table == self.table:
                    out_rows.append(row)
                    index.append(emitted)
                    versions.append(version.index)
                emitted += 1
        n = len(out_rows)
        layout = self.layout
        return {
            "rows": out_rows, "index": index, "op": ["t"] * n, "kind": ["truncate"] * n,
            "version": versions,
            "before": pa.nulls(n, layout.value_arrow), "after": pa.nulls(n, layout.value_arrow),
            "key": pa.nulls(n, layout.key_arrow) if layout.key_arrow is not None else None,
            "related_key": (pa.nulls(n, layout.key_arrow) if layout.key_arrow is not None
                            else None),
        }

    def _assemble(self, batch: Any, parts: list[dict[str, Any]]) -> Any:
        """The output batch: the records of every part, in order."""
        rows = [r for p in parts for r in p["rows"]]
        take = pa.array(rows, pa.int64())
        n = len(rows)
        layout = self.layout

        def cat(name: str, dtype: Any) -> Any:
            arrays = [p[name] for p in parts if len(p["rows"])]
            if not arrays:
                return pa.nulls(0, dtype)
            return pa.concat_arrays(arrays) if len(arrays) > 1 else arrays[0]

        columns: dict[str, Any] = {
            "position": batch.column("position").take(take),
            "index": pa.array([i for p in parts for i in p["index"]], pa.int32()),
            "version": pa.array([v for p in parts for v in p["version"]], pa.int32()),
            "lsn": batch.column("lsn").take(take),
            "xid": batch.column("xid").take(take),
            "op": pa.array([o for p in parts for o in p["op"]], pa.string()),
            "kind": pa.array([k for p in parts for k in p["kind"]], pa.string()),
            "before": cat("before", layout.value_arrow),
            "after": cat("after", layout.value_arrow),
            "ts_ns": pa.array([self.clock()] * n, pa.int64()),
        }
        if layout.key_arrow is not None:
            columns["key"] = cat("key", layout.key_arrow)
            columns["related_key"] = cat("related_key", layout.key_arrow)
        out = pa.RecordBatch.from_arrays([columns[f.name] for f in self.output_arrow],
                                         schema=self.output_arrow)
        if len(parts) > 1:  # versions and truncates were decoded apart: back in stream order
            order = pc.sort_indices(pa.table({"p": columns["position"], "i": columns["index"]}),
                                    sort_keys=[("p", "ascending"), ("i", "ascending")])
            out = out.take(order)
        return out


def _struct(columns: list[Any], sources: Sequence[int | None] | None, dtype: Any, n: int) -> Any:
    """A struct array of the layout's type from one version's column arrays."""
    assert sources is not None
    children = [columns[s] if s is not None else pa.nulls(n, dtype.field(i).type)
                for i, s in enumerate(sources)]
    return pa.StructArray.from_arrays(children, fields=list(dtype)) if children else \
        pa.nulls(n, dtype)


def _split_tuple(data: bytes, pos: int, ncols: int, out: list[bytes | None]
                 ) -> tuple[int, bytes | None]:
    """Append the values of the TupleData at ``pos`` to ``out``; returns the end offset and the
    kind bytes when any column is unchanged TOAST or binary (else ``None``). The hot loop of
    the fast path: one branch, one unpack and one slice per text value."""
    if ((data[pos] << 8) | data[pos + 1]) != ncols:
        raise _MalformedError
    pos += 2
    append = out.append
    i32 = _I32
    special: bytearray | None = None
    for i in range(ncols):
        kind = data[pos]
        if kind == 116:  # 't'
            size = i32(data, pos + 1)[0]
            if size < 0:
                raise _MalformedError
            pos += 5
            append(data[pos:pos + size])
            pos += size
        elif kind == 110:  # 'n'
            append(None)
            pos += 1
        elif kind == 117 or kind == 98:  # 'u', 'b'  # noqa: PLR1714
            if special is None:
                special = bytearray(b"t" * ncols)
            special[i] = kind
            if kind == 117:
                append(None)
                pos += 1
            else:
                size = i32(data, pos + 1)[0]
                if size < 0:
                    raise _MalformedError
                pos += 5
                append(data[pos:pos + size])
                pos += size
        else:
            raise _MalformedError
    if pos > len(data):  # a length ran past the message
        raise _MalformedError
    return pos, (bytes(special) if special is not None else None)
