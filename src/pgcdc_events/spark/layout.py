"""A table's events as Spark rows: the shape over all its schema versions, and the conversion.

The records come from :class:`~pgcdc_events.events.EventDecoder` (through
:mod:`pgcdc_events.events.chunks`); this module only gives them Spark types.
:class:`TableLayout` is the output shape of one table across its schema versions
(one struct type for ``before``/``after`` covering every version's columns: a column a
version did not have is null; one for the key), and :meth:`TableLayout.batch` turns
records, as :func:`record_payload` packs them, into an Arrow batch of that shape with
the :class:`~pgcdc_events.spark.values.ValueConverter` of each column.
"""

from __future__ import annotations

import decimal
import io
import pickle
from collections.abc import Iterable, Sequence
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

from pgcdc_events.events.config import EventConfig
from pgcdc_events.events.envelope import ENVELOPE_FIELDS, envelope_schema
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.events.snapshot import relation_from_catalog
from pgcdc_events.events.tables import TableSchema, build_table_schema
from pgcdc_events.spark._session import arrow_schema, arrow_type
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.schema import SparkSchemaOptions, spark_type
from pgcdc_events.spark.values import ValueConverter
from pgcdc_events.types.catalog import CatalogSnapshot
from pgcdc_events.types.mapper import TypeMapper
from pgcdc_events.types.registry import TypeRegistry
from pgcdc_events.types.schema import Schema

__all__ = [
    "BLOCK_TYPE", "POSITION_TYPE", "RUN_KIND", "SOURCE_TYPE", "TableLayout",
    "catalog_table_schemas", "last_source", "load_payload", "record_parts", "record_payload",
    "run_payload", "table_key",
]

#: The envelope's fields, in :data:`~pgcdc_events.events.envelope.ENVELOPE_FIELDS`' order,
#: as Spark types (literal flavour): the row images' are the table's (:class:`TableLayout`).
_ENVELOPE_TYPES: Final = {
    f.name: spark_type(f.schema, SparkSchemaOptions("literal", respect_optional=False))
    for f in envelope_schema(None, Schema("struct", fields=())).fields or ()}
#: The envelope's row images (``before``, ``after``): the table's value struct.
_ROW_IMAGES: Final = ENVELOPE_FIELDS[:2]
#: The ``source`` block, the ``transaction`` block and the ordering key of the events.
SOURCE_TYPE: Final = _ENVELOPE_TYPES["source"]
BLOCK_TYPE: Final = _ENVELOPE_TYPES["transaction"]
#: ``_position``: the position of the message whose decoding produced the record (for a
#: streamed or prepared transaction, its Stream Commit or Commit Prepared) and the record's
#: rank among that message's records. Sorting by it is the decoder's order.
POSITION_TYPE: Final = StructType([
    StructField("message", LongType(), False), StructField("index", IntegerType(), False),
])
_WIDER_INTEGRAL: Final = (ByteType(), ShortType(), IntegerType(), LongType())
_RELATED: Final = ("__debezium.newkey", "__debezium.oldkey")


#: The kind of a records row holding a run of a table's records decoded column-wise
#: (:mod:`pgcdc_events.spark.columnar`): its payload is the run's Arrow batch (IPC stream).
RUN_KIND: Final = "changes"
#: The record kinds that belong to a table (its events DataFrame).
TABLE_KINDS: Final = ("change", "truncate", "tombstone", RUN_KIND)


def record_table(record: ChangeRecord, previous: str | None) -> str | None:
    """The table (``schema.table``) ``record`` belongs to, ``None`` for records of no table
    (messages, transactions, heartbeats); ``previous`` is the table of the record before
    it, which a tombstone (no value) belongs to: it follows its delete. A table is named by
    its source block, not its topic: two tables may share a topic (names that topic name
    adjustment maps alike, ``"::".":::"`` and ``"日付"."ÄÖÜ"``)."""
    if record.kind not in TABLE_KINDS:
        return None
    if record.value is None:
        return previous
    source = record.value["source"]
    return table_key(source["schema"], source["table"])


def table_key(schema: str, table: str) -> str:
    """The name a table's events go by (``schema.table``, as
    :attr:`~pgcdc_events.events.TableSchema.qualified`), from its schema and table apart:
    a dot in either is part of the name, never a separator (``public."x.y"`` is
    ``public.x.y``). Two tables whose names join alike (``"public.x".y``) are refused by
    :func:`catalog_table_schemas`."""
    return f"{schema}.{table}"


def record_parts(record: ChangeRecord) -> tuple[Any, Any, Any]:
    """A table record's key, value and related key (the ``__debezium.newkey``/``oldkey``
    header), as plain Python data: what :meth:`TableLayout.batch` reads (as it is, when
    decoding and projecting in one task, or pickled by :func:`record_payload`)."""
    related = None
    for header in record.headers:
        if header.name in _RELATED:
            related = header.value.as_dict() if header.value is not None else None
    return (record.key.as_dict() if record.key is not None else None,
            record.value.as_dict() if record.value is not None else None, related)


def record_payload(record: ChangeRecord) -> bytes:
    """:func:`record_parts`, pickled: the payload of a records row."""
    return pickle.dumps(record_parts(record), protocol=pickle.HIGHEST_PROTOCOL)


class _PayloadUnpickler(pickle.Unpickler):
    """Reads :func:`record_payload`'s bytes and nothing else: plain containers and scalars
    need no global, and the one global a payload holds is ``decimal.Decimal`` (the
    "Restricting Globals" recipe of the pickle documentation). Any other global, which is
    how a pickle runs code, is refused."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("decimal", "Decimal"):
            return decimal.Decimal
        raise pickle.UnpicklingError(f"a record payload holds no {module}.{name}")


def _load_payload(payload: bytes) -> Any:
    return _PayloadUnpickler(io.BytesIO(payload)).load()


#: Runs are compressed (zstd): their constant and repeated columns shrink about eight
#: times, which the persisted records and the projection's transfer pay for.
_RUN_IPC: Final = pa.ipc.IpcWriteOptions(compression="zstd")


def run_payload(batch: Any) -> bytes:
    """A :class:`~pgcdc_events.spark.columnar.ColumnarRun`'s batch as the payload of its
    records row (a compressed Arrow IPC stream: data, never code)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema, options=_RUN_IPC) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


def _load_run(payload: bytes) -> Any:
    return pa.ipc.open_stream(payload).read_next_batch()


def load_payload(kind: str, payload: Any) -> Any:
    """A records row's payload, read by its ``kind``: a :data:`RUN_KIND` row's run (an Arrow
    batch, from :func:`run_payload`), any other table record's key, value and related key
    (:func:`record_parts`, from :func:`record_payload`). Already-loaded payloads (a batch,
    a tuple) pass through. The one reader of both payload kinds."""
    if not isinstance(payload, (bytes, bytearray, memoryview)):
        return payload
    if kind == RUN_KIND:
        return _load_run(bytes(payload))
    return _load_payload(bytes(payload))


def last_source(kind: str, payload: Any) -> dict[str, Any] | None:
    """The ``source`` block of the last record a records row holds (a run's last change),
    ``None`` for a row without one (a tombstone)."""
    loaded = load_payload(kind, payload)
    if kind == RUN_KIND:
        if not loaded.num_rows:
            return None
        source: dict[str, Any] | None = loaded.column("source")[loaded.num_rows - 1].as_py()
        return source
    value = loaded[1]
    return None if value is None else value.get("source")


@attrs.frozen
class _Field:
    name: str
    schema: Schema  # the latest version's Connect schema
    spark: DataType  # the union over the versions


class TableLayout:
    """The output shape of one table (``schema.table``) over its schema versions (the
    :class:`~pgcdc_events.events.TableSchema` objects the decoder built, in order).

    Picklable: it keeps the Connect schemas, not the table schemas.
    """

    def __init__(self, table: str, versions: Sequence[TableSchema],
                 options: SparkSchemaOptions) -> None:
        if not versions:
            raise SparkDecodeError(f"no schema for table {table!r}")
        self.table = table
        self.options = SparkSchemaOptions(options.flavour, options.variable_scale_decimal_scale,
                                          respect_optional=False)
        latest_first = list(reversed(versions))
        self.versions = len(versions)
        self.value_fields = self._union([s.value_schema for s in latest_first])
        keys = [s.key_schema for s in latest_first if s.key_schema is not None]
        self.key_fields = self._union(keys) if keys else None
        self.value_type = StructType([StructField(f.name, f.spark, True)
                                      for f in self.value_fields])
        self.key_type = (None if self.key_fields is None else
                         StructType([StructField(f.name, f.spark, True) for f in self.key_fields]))
        latest = latest_first[0]
        self.schema_name = latest.schema_name
        self.table_name = latest.table_name
        self.topic = latest.topic
        self._converters: dict[str, ValueConverter] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_converters": None}

    def _union(self, structs: Sequence[Schema]) -> list[_Field]:
        out: dict[str, _Field] = {}
        for schema in structs:
            for f in schema.fields or ():
                dt = spark_type(f.schema, self.options)
                known = out.get(f.name)
                if known is None:
                    out[f.name] = _Field(f.name, f.schema, dt)
                elif known.spark != dt:
                    out[f.name] = _Field(f.name, known.schema,
                                         _widen(known.spark, dt, self.table, f.name))
        return list(out.values())

    def output_type(self) -> StructType:
        """The Spark schema of the table's events."""
        fields: list[StructField] = []
        if self.key_type is not None:
            fields.append(StructField("key", self.key_type, True))
        fields += [StructField(name, self.value_type if name in _ROW_IMAGES
                               else _ENVELOPE_TYPES[name], True) for name in ENVELOPE_FIELDS]
        fields += [
            StructField("_kind", StringType(), False),
            StructField("_position", POSITION_TYPE, False),
            StructField("_lsn", LongType(), True),
        ]
        if self.key_type is not None:
            fields.append(StructField("_related_key", self.key_type, True))
        return StructType(fields)

    # -- conversion ------------------------------------------------------------------------
    def _converter(self, field: _Field) -> ValueConverter:
        if self._converters is None:
            self._converters = {}
        converter = self._converters.get(field.name)
        if converter is None:
            converter = self._converters[field.name] = ValueConverter(field.schema, self.options)
        return converter

    def _struct(self, fields: list[_Field], rows: list[dict[str, Any] | None], dtype: Any
                ) -> Any:
        children = []
        for i, field in enumerate(fields):
            values = [None if r is None else r.get(field.name) for r in rows]
            array = self._converter(field).array(values)
            target = dtype.field(i).type
            children.append(array if array.type == target else array.cast(target))
        mask = pa.array([r is None for r in rows], pa.bool_())
        if not children:
            return pa.nulls(len(rows), dtype) if rows else pa.array([], dtype)
        return pa.StructArray.from_arrays(children, fields=list(dtype), mask=mask)

    def batch(self, rows: Iterable[tuple[int, int, str, int, Any]], *,
              tombstones: bool = True, strict: bool = False) -> Any:
        """An Arrow batch of :meth:`output_type` from records ``(position, index, kind, lsn,
        payload)`` (:func:`record_payload` or its :func:`record_parts`; for a
        :data:`RUN_KIND` row :func:`run_payload` or the run's batch); ``tombstones=False``
        drops the tombstones of runs. ``strict`` refuses a record with a column the layout
        does not have (a layout not built from the records' own schemas)."""
        parts = self.batches(rows, tombstones=tombstones, strict=strict)
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return self._records([])
        table = pa.Table.from_batches(parts).combine_chunks()
        return table.to_batches()[0]

    def batches(self, rows: Iterable[tuple[int, int, str, int, Any]], *,
                tombstones: bool = True, strict: bool = False) -> list[Any]:
        """:meth:`batch`, as several Arrow batches (runs are not copied into one)."""
        parts: list[Any] = []
        pending: list[tuple[int, int, str, int, Any]] = []
        for row in rows:
            if row[2] != RUN_KIND:
                pending.append(row)
                continue
            if pending:
                parts.append(self._records(pending, strict))
                pending = []
            run = self._run(load_payload(RUN_KIND, row[4]), tombstones, strict)
            if run.num_rows:
                parts.append(run)
        if pending:
            parts.append(self._records(pending, strict))
        return parts

    def _unknown(self, columns: Iterable[str]) -> None:
        """Refuse a change with a column the layout does not have (``strict``)."""
        known = {f.name for f in self.value_fields}
        unknown = [c for c in columns if c not in known]
        if unknown:
            raise SparkDecodeError(
                "a change has a column the table's schema does not (an ALTER TABLE after the"
                " catalog was taken?): restart the query with a catalog that has it",
                table=self.table, column=unknown[0])

    def _run(self, run: Any, tombstones: bool, strict: bool = False) -> Any:
        """A column-wise run's batch (Connect values in Arrow) as events."""
        if strict:
            for part in ("before", "after"):
                if run.column(part).null_count < run.num_rows:
                    self._unknown(f.name for f in run.column(part).type)
        if not tombstones:
            run = run.filter(pc.not_equal(run.column("kind"), "tombstone"))
        schema = arrow_schema(self.output_type())
        count = run.num_rows
        value_arrow = arrow_type(self.value_type)
        source_type = schema.field("source").type
        source = run.column("source")
        columns: dict[str, Any] = {}
        for name in ENVELOPE_FIELDS:  # a run has no transaction block: null
            columns[name] = (
                self._run_struct(self.value_fields, run.column(name), value_arrow)
                if name in _ROW_IMAGES else
                run.column(name) if name in run.schema.names else
                pa.nulls(count, schema.field(name).type))
        columns.update({
            "source": pa.StructArray.from_arrays(
                [source.field(f.name).cast(f.type) for f in source_type],
                fields=list(source_type), mask=source.is_null()),
            "_kind": run.column("kind"),
            "_position": pa.StructArray.from_arrays(
                [run.column("position"), run.column("index")],
                fields=list(schema.field("_position").type)),
            "_lsn": run.column("lsn"),
        })
        if self.key_fields is not None and self.key_type is not None:
            key_arrow = arrow_type(self.key_type)
            columns["key"] = self._run_struct(self.key_fields, run.column("key"), key_arrow)
            columns["_related_key"] = pa.nulls(count, key_arrow)
        return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)

    def run_image(self, array: Any, *, strict: bool = False) -> Any:
        """A column-wise run's row image (its ``before`` or ``after``: Connect values in
        Arrow) as the table's value struct (:attr:`value_type`), by the columns'
        converters: what :meth:`batch` gives for it (the flattened changes' columns).
        ``strict``: as :meth:`batch`'s."""
        if strict and array.null_count < len(array):
            self._unknown(f.name for f in array.type)
        return self._run_struct(self.value_fields, array, arrow_type(self.value_type))

    def _run_struct(self, fields: list[_Field], array: Any, dtype: Any) -> Any:
        names = {f.name for f in array.type}
        children = []
        for i, field in enumerate(fields):
            target = dtype.field(i).type
            if field.name not in names:
                children.append(pa.nulls(len(array), target))
                continue
            converter = self._converter(field)
            child = array.field(field.name)
            if child.type != converter.literal_type:
                child = child.cast(converter.literal_type)
            child = converter.from_literal(child)
            children.append(child if child.type == target else child.cast(target))
        if not children:
            return pa.nulls(len(array), dtype)
        return pa.StructArray.from_arrays(children, fields=list(dtype),
                                          mask=array.is_null() if array.null_count else None)

    def _records(self, rows: Iterable[tuple[int, int, str, int, Any]], strict: bool = False
                 ) -> Any:
        positions: list[int] = []
        indexes: list[int] = []
        kinds: list[str] = []
        lsns: list[int] = []
        keys: list[Any] = []
        values: list[Any] = []
        related: list[Any] = []
        for position, index, kind, lsn, payload in rows:
            key, value, rel = load_payload(kind, payload)
            if strict and value is not None:
                for row in (value.get("before"), value.get("after")):
                    if row is not None:
                        self._unknown(row)
            positions.append(position)
            indexes.append(index)
            kinds.append(kind)
            lsns.append(lsn)
            keys.append(key)
            values.append(value)
            related.append(rel)
        schema = arrow_schema(self.output_type())
        value_arrow = arrow_type(self.value_type)

        def part(name: str) -> list[Any]:
            return [None if v is None else v[name] for v in values]

        columns: dict[str, Any] = {
            name: self._struct(self.value_fields, part(name), value_arrow)
            if name in _ROW_IMAGES else pa.array(part(name), schema.field(name).type)
            for name in ENVELOPE_FIELDS}
        columns.update({
            "_kind": pa.array(kinds, pa.string()),
            "_position": pa.StructArray.from_arrays(
                [pa.array(positions, pa.int64()), pa.array(indexes, pa.int32())],
                fields=list(schema.field("_position").type)),
            "_lsn": pa.array(lsns, pa.int64()),
        })
        if self.key_fields is not None and self.key_type is not None:
            key_arrow = arrow_type(self.key_type)
            columns["key"] = self._struct(self.key_fields, keys, key_arrow)
            columns["_related_key"] = self._struct(self.key_fields, related, key_arrow)
        return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)


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


def catalog_table_schemas(catalog: CatalogSnapshot, config: EventConfig,
                          tables: Sequence[str | tuple[str, str]] | None = None
                          ) -> dict[str, TableSchema]:
    """Table schemas of a catalog snapshot's tables (:func:`table_key` keys), without a
    capture.

    What the decoder builds from each table's Relation message (the event layer's
    :func:`~pgcdc_events.events.snapshot.relation_from_catalog`): used for the schemas of
    Debezium JSON records read from Kafka. ``tables`` limits the result: each a
    ``(schema, table)`` pair, or its :func:`table_key`. Two captured tables whose names join
    alike (``public."x.y"`` and ``"public.x".y``) would share a key and one would hide the
    other: they raise :class:`~pgcdc_events.spark.errors.SparkDecodeError` naming both.
    """
    mapper = TypeMapper(config.types, TypeRegistry(catalog))
    wanted = None if tables is None else {
        name if isinstance(name, str) else table_key(*name) for name in tables}
    out: dict[str, TableSchema] = {}
    for table in catalog.tables:
        qualified = table_key(table.namespace, table.name)
        if wanted is not None and qualified not in wanted:
            continue
        if not config.includes_table(table.namespace, table.name):
            continue
        known = out.get(qualified)
        if known is not None:
            raise SparkDecodeError(
                f"tables {_quoted(known.schema_name, known.table_name)} and "
                f"{_quoted(table.namespace, table.name)} share this name: exclude one "
                "schema (schema.exclude.list) or rename one table", table=qualified)
        out[qualified] = build_table_schema(relation_from_catalog(table), mapper, config, table)
    return out


def _quoted(schema: str, table: str) -> str:
    return ".".join('"' + part.replace('"', '""') + '"' for part in (schema, table))
