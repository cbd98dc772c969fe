"""Per-table schemas and row converters, built once per Relation message version.

A :class:`TableSchema` holds everything needed to turn a tuple of that table into
key and value structs: the included columns with their converters (masks and
truncation applied), the key columns, and the Key, Value and Envelope schemas
with Debezium's names. The decoder builds one whenever a Relation message
arrives and reuses it for every change until the next one.
"""

from __future__ import annotations

import functools
import operator
import struct
from collections.abc import Callable
from types import CodeType
from typing import Any, Final

import attrs

from pgcdc_events.errors import ConversionError
from pgcdc_events.events.config import EventConfig
from pgcdc_events.events.envelope import TRANSACTION_BLOCK_SCHEMA, envelope_schema
from pgcdc_events.events.masking import column_transform
from pgcdc_events.events.naming import adjuster, topic_name
from pgcdc_events.protocol.messages import (
    KIND_BINARY,
    KIND_NULL,
    KIND_TEXT,
    KIND_UNCHANGED_TOAST,
    Relation,
    TupleData,
)
from pgcdc_events.types.catalog import CatalogTable
from pgcdc_events.types.defaults import null_fallback
from pgcdc_events.types.mapper import ColumnMapping, TypeMapper, conversion_error
from pgcdc_events.types.schema import (
    STRUCT_BUILDER,
    Field,
    Schema,
    Struct,
    make_struct,
    struct_schema,
)
from pgcdc_events.types.source_type import without_source_parameters
from pgcdc_events.types.text import utf8

__all__ = ["TRANSACTION_BLOCK_SCHEMA", "ColumnPlan", "TableSchema", "build_table_schema"]



@attrs.frozen
class ColumnPlan:
    """One included column: where it sits in the tuple and how its values convert."""

    position: int
    name: str
    mapping: ColumnMapping
    from_text: Callable[[bytes], Any]
    from_binary: Callable[[bytes], Any] | None
    toast: Any
    null_value: Any = None


class TableSchema:
    """Schemas and converters of one version of one table."""

    __slots__ = ("_all_text", "_fast_row", "_key_values", "_value_values", "columns",
                 "envelope_schema", "fallbacks", "fast_row_source", "fast_structs_source",
                 "key_positions",
                 "key_schema", "on_error", "qualified", "relation", "schema_name", "structs",
                 "structs_of", "table_name", "topic", "value_positions", "value_schema")

    def __init__(self, relation: Relation, topic: str, columns: tuple[ColumnPlan, ...],
                 key_positions: tuple[int, ...], value_positions: tuple[int, ...] | None,
                 key_schema: Schema | None, value_schema: Schema, envelope_schema: Schema
                 ) -> None:
        self.relation = relation
        self.schema_name = relation.namespace
        self.table_name = relation.name
        self.qualified = f"{relation.namespace}.{relation.name}"
        self.topic = topic
        self.columns = columns
        self.key_positions = key_positions
        self.value_positions = value_positions
        self.key_schema = key_schema
        self.value_schema = value_schema
        self.envelope_schema = envelope_schema
        #: How many tuples a generated path gave up on for the general loop (a value that
        #: failed to convert there). Only a value that fails in the general loop too (an
        #: error, or a null under ``event.converting.failure.handling.mode``) justifies
        #: one: tests compare it with the conversion errors to prove the fast paths ran.
        self.fallbacks = 0
        self._all_text = bytes((KIND_TEXT,)) * len(relation.columns)
        self.fast_row_source, self._fast_row = _compile_fast_row(relation, columns)
        self._key_values = _picker(key_positions)
        self._value_values = None if value_positions is None else _picker(value_positions)
        #: ``structs(tup, old=None)``: ``(key(row), value(row))`` of ``row = self.row(tup,
        #: old)``, straight from the tuple. Tuples whose columns are all text, or text and
        #: NULL, take a path generated for the table (``fast_structs_source``) that
        #: converts each column and builds both structs in one go; any other tuple, or a
        #: value that fails to convert there, takes :meth:`row`'s general loop, which
        #: names the failing column.
        self.structs: Callable[[TupleData, TupleData | None], tuple[Struct | None, Struct]]
        #: ``structs_of(kinds, values, old=None)``: ``structs`` of the tuple whose kinds and
        #: values these are (:func:`~pgcdc_events.protocol.decoder.insert_parts`), for a
        #: caller that has them without the :class:`TupleData` (the decoder's Inserts).
        self.structs_of: Callable[[bytes, tuple[bytes | None, ...], TupleData | None],
                                  tuple[Struct | None, Struct]]
        self.fast_structs_source, self.structs, self.structs_of = _compile_structs(self)
        #: Called with each value that does not convert (then ``null`` is used); ``None``
        #: raises instead (``event.converting.failure.handling.mode=fail``).
        self.on_error: Callable[[ConversionError], None] | None = None

    def row(self, tup: TupleData, old: TupleData | None = None) -> tuple[Any, ...]:
        """Connect values of the planned columns; ``old`` fills unchanged TOAST (FULL identity).

        The row holds the value's columns and any key column excluded from the value;
        :meth:`key` and :meth:`value` pick theirs from it. Rows whose columns all came as
        text take a generated path (``fast_row_source``); any other row, or a value that
        fails to convert there, takes the general loop, which names the failing column.
        """
        if tup.kinds == self._all_text:
            try:
                return self._fast_row(tup.values)
            except Exception:
                self.fallbacks += 1
        return self._row(tup, old)

    def _row(self, tup: TupleData, old: TupleData | None) -> tuple[Any, ...]:
        kinds = tup.kinds
        values = tup.values
        out: list[Any] = []
        append = out.append
        for col in self.columns:
            pos = col.position
            kind = kinds[pos]
            raw = values[pos]
            try:
                if raw is not None:
                    append(col.from_text(raw) if kind != KIND_BINARY else
                           _binary(col)(raw))
                elif kind == KIND_NULL:
                    append(col.null_value)
                else:  # unchanged TOAST
                    append(self._toast(col, old))
            except ConversionError as exc:
                error = exc if getattr(exc, "column", None) is not None \
                    and not _masked(col) else _error(self, col, raw, kind, str(exc))
                append(self._failed(col, error))
            except (ValueError, ArithmeticError, IndexError, KeyError, TypeError,
                    struct.error) as exc:
                append(self._failed(col, _error(self, col, raw, kind,
                                                f"{type(exc).__name__}: {exc}")))
        return tuple(out)

    def _failed(self, col: ColumnPlan, error: ConversionError) -> Any:
        """A value that did not convert: raise, or (warn/skip modes) report it and use null."""
        if self.on_error is None:
            raise error
        self.on_error(error)
        return col.null_value

    def _toast(self, col: ColumnPlan, old: TupleData | None) -> Any:
        if old is not None and old.kinds[col.position] not in (KIND_UNCHANGED_TOAST, KIND_NULL):
            raw = old.values[col.position]
            assert raw is not None
            if old.kinds[col.position] == KIND_BINARY:
                return _binary(col)(raw)
            return col.from_text(raw)
        return col.toast

    def key(self, row: tuple[Any, ...]) -> Struct | None:
        """The key struct of a row (``None`` for tables without a key)."""
        if self.key_schema is None:
            return None
        return make_struct(self.key_schema, self._key_values(row))

    def value(self, row: tuple[Any, ...]) -> Struct:
        """The Value struct of a row."""
        if self._value_values is not None:
            row = self._value_values(row)
        return make_struct(self.value_schema, row)

    def _structs(self, tup: TupleData, old: TupleData | None) -> tuple[Struct | None, Struct]:
        """``structs`` of a tuple its generated path does not take."""
        row = self._row(tup, old)
        return self.key(row), self.value(row)


@functools.lru_cache(maxsize=128)
def _compiled(source: str, kind: str) -> CodeType:
    """``source`` compiled, once per distinct text: the generated sources hold only column
    numbers, never a name or value, so tables of the same column types (and key) share
    one (compiling a 1600-column table's cost 0.2 s; a hostile capture of many such
    Relations spent most of its time there). ``kind`` names the code in tracebacks."""
    return compile(source, f"<pgcdc {kind}>", "exec")


def _compile_fast_row(relation: Relation, columns: tuple[ColumnPlan, ...]
                      ) -> tuple[str, Callable[[tuple[bytes | None, ...]], tuple[Any, ...]]]:
    """Generate ``fast_row(values)`` for all-text tuples: one converter call per column."""
    namespace: dict[str, Any] = {f"c{i}": col.from_text for i, col in enumerate(columns)}
    items = "".join(f"c{i}(v[{col.position}]), " for i, col in enumerate(columns))
    source = f"def fast_row(v):\n    return ({items})\n"
    exec(_compiled(source, "row"), namespace)  # the converters are bound in the namespace
    return source, namespace["fast_row"]


_TEXT_OR_NULL: Final = bytes((KIND_TEXT, KIND_NULL))


def _picker(positions: tuple[int, ...]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """``row -> tuple(row[i] for i in positions)``, as one C call where there can be."""
    if len(positions) > 1:
        return operator.itemgetter(*positions)
    if positions:
        at = positions[0]
        return lambda row: (row[at],)
    return lambda row: ()


class _NoValueError(Exception):
    """A NOT NULL column's value has no representation: the generated path hands the tuple
    to the general loop, which raises the error naming it."""


def _compile_structs(table: TableSchema) -> tuple[
        str, Callable[[TupleData, TupleData | None], tuple[Struct | None, Struct]],
        Callable[[bytes, tuple[bytes | None, ...], TupleData | None],
                 tuple[Struct | None, Struct]]]:
    """Generate ``structs(tup, old=None)`` and ``structs_of(kinds, values, old=None)`` (see
    ``TableSchema.structs``), one body for both: one branch for
    tuples whose columns all came as text, one for text and NULL columns (a NULL takes the
    column's ``null_value``, as in the general loop), the general loop for the rest and
    for any value that fails to convert. The source holds only column numbers."""
    columns = table.columns
    namespace: dict[str, Any] = {"B": STRUCT_BUILDER, "S": Struct, "KS": table.key_schema,
                                 "VS": table.value_schema, "TEXT": table._all_text,
                                 "TEXT_OR_NULL": _TEXT_OR_NULL, "general": table._structs,
                                 "T": table, "NONE": _NoValueError, "TupleData": TupleData}
    text = []
    mixed = []
    for i, col in enumerate(columns):
        # a NOT NULL column's converter that may find no value (_required): its converter,
        # then the check, spelled out; a None goes to the general loop, which names it
        required_of = getattr(col.from_text, "required_of", None)
        namespace[f"c{i}"] = col.from_text if required_of is None else required_of
        namespace[f"n{i}"] = col.null_value
        # utf8 (text, varchar...) is spelled out: a call of it costs more than its work
        call = "{}.decode('utf-8')" if col.from_text is utf8 else f"c{i}({{}})"
        check = "" if required_of is None else f"            if a{i} is None:\n" \
            "                raise NONE\n"
        text.append(f"            a{i} = {call.format(f'v[{col.position}]')}\n{check}")
        mixed.append(f"            x = v[{col.position}]\n"
                     f"            a{i} = n{i} if x is None else {call.format('x')}\n"
                     + check.replace(" is None:", " is None and x is not None:"))
    if not columns:
        text = mixed = ["            pass\n"]
    in_value = range(len(columns)) if table.value_positions is None else table.value_positions
    value = "".join(f"a{i}, " for i in in_value)
    # Struct(KS, key values) and Struct(VS, values), built as make_struct does
    if table.key_schema is None:
        key = "            k = None\n"
    else:
        key = ("            k = B()\n            k.schema = KS\n"
               f"            k.values = ({''.join(f'a{i}, ' for i in table.key_positions)})\n"
               "            k.__class__ = S\n")
    built = (f"        else:\n{key}            r = B()\n            r.schema = VS\n"
             f"            r.values = ({value})\n            r.__class__ = S\n"
             "            return k, r\n")
    # one body, two entries: a tuple's kinds and values (structs_of), or the tuple
    body = (
        "    if kinds == TEXT:\n"
        f"        try:\n{''.join(text)}        except Exception:\n            T.fallbacks += 1\n"
        f"{built}"
        "    elif not kinds.translate(None, TEXT_OR_NULL):\n"
        f"        try:\n{''.join(mixed)}        except Exception:\n            T.fallbacks += 1\n"
        f"{built}")
    source = (
        "def structs(tup, old=None):\n"
        "    kinds = tup.kinds\n"
        "    v = tup.values\n"
        f"{body}"
        "    return general(tup, old)\n"
        "def structs_of(kinds, v, old=None):\n"
        f"{body}"
        "    return general(TupleData(kinds, v), old)\n")
    exec(_compiled(source, "structs"), namespace)
    return source, namespace["structs"], namespace["structs_of"]


def _binary(col: ColumnPlan) -> Callable[[bytes], Any]:
    if col.from_binary is None:
        raise ConversionError(f"type {col.mapping.pg_type.name} has no binary-format converter; "
                              "capture with text tuples (binary 'false')")
    return col.from_binary


def _masked(col: ColumnPlan) -> bool:
    """Whether the column's values are masked (``column.mask.*``): never shown."""
    return ("masked", "true") in (col.mapping.schema.parameters or ())


def _error(table: TableSchema, col: ColumnPlan, raw: bytes | None, kind: int, reason: str
           ) -> ConversionError:
    if not _masked(col):
        return conversion_error(table.qualified, col.mapping, raw or b"", kind == KIND_BINARY,
                                reason)
    # A masked value is a secret: neither the value nor the reason (which may quote it) is
    # shown, only the reason's kind and the value's size; the error does not keep the bytes.
    mapping = col.mapping
    err = ConversionError(
        f"{table.qualified}.{mapping.name} ({mapping.pg_type.name}): cannot convert "
        f"{'binary ' if kind == KIND_BINARY else ''}value of a masked column (value not "
        f"shown, {len(raw or b'')} bytes): {reason.partition(':')[0]}")
    err.table, err.column, err.type_name = table.qualified, mapping.name, mapping.pg_type.name
    return err


def build_table_schema(relation: Relation, mapper: TypeMapper, config: EventConfig,
                       catalog_table: CatalogTable | None = None,
                       on_error: Callable[[ConversionError], None] | None = None
                       ) -> TableSchema:
    """Build the schemas and converters of one Relation version under ``config``.

    ``on_error`` receives each value that does not convert, which then becomes null;
    without it such a value raises :class:`ConversionError`.
    """
    ns, name = relation.namespace, relation.name
    adjust_schema = adjuster(config.schema_name_adjustment_mode)
    adjust_field = adjuster(config.field_name_adjustment_mode, field=True)
    qualified = f"{ns}.{name}"
    key_names = _key_columns(relation, config, catalog_table)
    plans: list[ColumnPlan] = []
    in_value: list[int] = []
    key_at: dict[str, int] = {}
    for position, column in enumerate(relation.columns):
        wanted = config.includes_column(ns, name, column.name)
        if not wanted and column.name not in key_names:
            continue
        ccol = catalog_table.column(column.name) if catalog_table is not None else None
        mapping = mapper.relation_column(column, table=qualified,
                                         replica_identity=relation.replica_identity,
                                         catalog_column=ccol)
        if mapping is None:
            continue
        from_text, from_binary, schema = mapping.from_text, mapping.from_binary, mapping.schema
        transform = column_transform(config, ns, name, column.name, schema, mapping.pg_type,
                                     column.type_modifier if ccol is None else ccol.type_modifier)
        null_value = null_fallback(mapping, mapping.pg_type, not mapping.not_null, schema.default)
        if not schema.optional and mapping.pg_type.root.name in _MAY_BE_UNREPRESENTABLE:
            from_text = _required(from_text, schema)
            from_binary = _required(from_binary, schema) if from_binary is not None else None
        if transform is not None:
            fn, schema = transform.fn, transform.schema
            from_text = _compose(fn, from_text)
            from_binary = _compose(fn, from_binary) if from_binary is not None else None
            if transform.applies_to_null:
                null_value = fn(None)
        if column.name in key_names:
            key_at[column.name] = len(plans)
        if wanted:
            in_value.append(len(plans))
        plans.append(ColumnPlan(position, adjust_field(column.name),
                                attrs.evolve(mapping, schema=schema), from_text, from_binary,
                                mapping.toast, null_value))
    # Schema names derive from the (sanitized) topic name, as Debezium's do.
    topic = topic_name(config.topic_prefix, ns, name, config.topic_delimiter)
    base = adjust_schema(topic)
    key_schema = None
    key_positions: tuple[int, ...] = ()
    if key_names and all(k in key_at for k in key_names):
        key_positions = tuple(key_at[k] for k in key_names)
        key_schema = struct_schema(f"{base}.Key",
                                   [(plans[i].name, without_source_parameters(
                                       plans[i].mapping.schema)) for i in key_positions])
    value_schema = Schema("struct", optional=True, name=f"{base}.Value",
                          fields=tuple(Field(plans[i].name, n, plans[i].mapping.schema)
                                       for n, i in enumerate(in_value)))
    envelope = envelope_schema(f"{base}.Envelope", value_schema)
    value_positions = None if len(in_value) == len(plans) else tuple(in_value)
    table = TableSchema(relation, topic, tuple(plans), key_positions, value_positions, key_schema,
                        value_schema, envelope)
    table.on_error = on_error
    return table


#: Types with values some schemas cannot carry (a NaN numeric in ``precise`` mode, a
#: timestamp beyond int64 microseconds): ``null`` in an optional field, an error in a
#: required one, where ``null`` would make the event invalid.
_MAY_BE_UNREPRESENTABLE: Final = frozenset({
    "numeric", "date", "time", "timetz", "timestamp", "timestamptz", "interval"})


def _required(convert: Callable[[bytes], Any], schema: Schema) -> Callable[[bytes], Any]:
    def converted(raw: bytes) -> Any:
        value = convert(raw)
        if value is None:
            raise ConversionError(f"the value has no {schema.name or schema.type} "
                                  "representation and the column is NOT NULL")
        return value

    # the generated paths call ``convert`` and check for None themselves (_compile_structs)
    converted.required_of = convert  # type: ignore[attr-defined]
    return converted


def _compose(outer: Callable[[Any], Any], inner: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def converted(raw: bytes) -> Any:
        return outer(inner(raw))

    return converted


def _key_columns(relation: Relation, config: EventConfig,
                 catalog_table: CatalogTable | None) -> tuple[str, ...]:
    """Key column names: ``message.key.columns``, else the primary key, else a unique index.

    Without a catalog snapshot the primary key is taken to be the replica-identity
    columns of a REPLICA IDENTITY DEFAULT table (they are its primary key); other
    tables then have no key.
    """
    override = config.key_columns_for(relation.namespace, relation.name)
    if override is not None:
        return override
    if catalog_table is not None:
        return catalog_table.event_key
    if relation.replica_identity == "d":
        return tuple(c.name for c in relation.columns if c.is_key)
    return ()
