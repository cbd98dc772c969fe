"""The YugabyteDB connector's two transforms, as functions over records.

Both turn the ``{"value": v, "set": true}`` cells of ``plugin.name=yboutput`` records
(:mod:`pgcdc_events.events.yugabyte`) back into plain column values, so that a consumer
written for PostgreSQL records can read them:

* :func:`pg_compatible` is ``io.debezium.connector.postgresql.transforms.yugabytedb
  .PGCompatible`` (yugabyte/debezium, branch ybdb-debezium-2.5.2 at commit 52515b4ac,
  ``debezium-connector-postgres/src/main/java/io/debezium/connector/postgresql/transforms/
  yugabytedb/PGCompatible.java``): the envelope is kept, every cell becomes its
  value, and a cell that was not sent becomes ``null``, as in a PostgreSQL record.
* :func:`yb_extract_new_record_state` is ``YBExtractNewRecordState`` (same repository,
  ``.../transforms/yugabytedb/YBExtractNewRecordState.java``): Debezium's
  ``ExtractNewRecordState`` (:func:`extract_new_record_state`), then every cell becomes its
  value and a cell that was not sent is left out of the record, schema included, so a
  CHANGE update carries only the key and the changed columns.
"""

from __future__ import annotations

from typing import Final, Literal

import attrs

from pgcdc_events.errors import ConfigurationError
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.types.schema import Field, Schema, Struct

__all__ = [
    "DeleteHandlingMode",
    "extract_new_record_state",
    "is_cell",
    "pg_compatible",
    "pg_compatible_struct",
    "yb_extract_new_record_state",
    "yb_unwrap_struct",
]

DeleteHandlingMode = Literal["drop", "none", "rewrite"]
_DELETED: Final = "__deleted"
_OPT_STRING: Final = Schema("string", optional=True)


def is_cell(schema: Schema) -> bool:
    """Whether a field's schema is a yboutput cell: a struct of exactly ``value`` and ``set``
    (``YBExtractNewRecordState.isSimplifiableField``, ``PGCompatible.isValueSetStruct``)."""
    fields = schema.fields
    return (schema.type == "struct" and fields is not None and len(fields) == 2
            and fields[0].name == "value" and fields[1].name == "set")


# -- PGCompatible ---------------------------------------------------------------------------


def _pg_schema(schema: Schema) -> Schema:
    """``PGCompatible.makeUpdatedSchema``: name, version, doc, parameters and optionality
    kept; cells replaced by their value schema; other structs recursively."""
    fields = []
    for f in schema.fields or ():
        inner = f.schema
        if inner.type == "struct":
            inner = inner.fields[0].schema if is_cell(inner) else _pg_schema(inner)  # type: ignore[index]
        fields.append(Field(f.name, f.index, inner))
    return attrs.evolve(schema, fields=tuple(fields))


def _pg_value(schema: Schema, value: Struct) -> Struct:
    """``PGCompatible.makeUpdatedValue``: a set cell becomes its value; a null one, null."""
    out = []
    for f, v in zip(value.schema.fields or (), value.values, strict=True):
        if f.schema.type == "struct" and v is not None:
            inner = schema.fields[f.index].schema  # type: ignore[index]
            v = v.values[0] if is_cell(f.schema) else _pg_value(inner, v)
        out.append(v)
    return Struct(schema, tuple(out))


def pg_compatible_struct(schema: Schema, value: Struct) -> tuple[Schema, Struct]:
    """``PGCompatible.getUpdatedValueAndSchema(schema, value)``: the struct with its cells
    (at any depth) replaced by their values."""
    updated = _pg_schema(schema)
    return updated, _pg_value(updated, value)


def pg_compatible(record: ChangeRecord) -> ChangeRecord:
    """``PGCompatible.apply``: key and value unwrapped; a tombstone keeps its null value
    (and gets a null value schema, as ``newRecord(..., null, null, ...)`` gives it)."""
    key_schema, key = record.key_schema, record.key
    if key_schema is not None and key is not None:
        key_schema, key = pg_compatible_struct(key_schema, key)
    value_schema: Schema | None = None
    value = None
    if record.value is not None:
        assert record.value_schema is not None
        value_schema, value = pg_compatible_struct(record.value_schema, record.value)
    return attrs.evolve(record, key_schema=key_schema, key=key, value_schema=value_schema,
                        value=value)


# -- ExtractNewRecordState and YBExtractNewRecordState --------------------------------------


def extract_new_record_state(record: ChangeRecord, *,
                             delete_handling_mode: DeleteHandlingMode = "drop",
                             drop_tombstones: bool = True) -> ChangeRecord | None:
    """Debezium's ``ExtractNewRecordState`` for one record (``None``: dropped).

    The value becomes the envelope's ``after`` (``before`` for a rewritten delete), under
    the defaults of the Debezium 2.5 the YugabyteDB connector bundles: ``drop.tombstones``
    true and ``delete.handling.mode`` ``drop``; ``none`` keeps a delete with a null value,
    ``rewrite`` keeps it as its ``before`` and adds ``__deleted`` (``"true"`` or
    ``"false"``, an optional string) to every record. A tombstone, when kept, is passed on
    as is; so is a record that is not a data change (no ``op``).
    """
    if delete_handling_mode not in ("drop", "none", "rewrite"):
        raise ConfigurationError(f"delete.handling.mode must be drop, none or rewrite, not "
                                 f"{delete_handling_mode!r}")
    value = record.value
    if value is None:
        return None if drop_tombstones else record
    op = value.get("op")
    if op is None or value.schema.fields is None or "after" not in value:
        return record
    if op == "d":
        if delete_handling_mode == "drop":
            return None
        if delete_handling_mode == "none":
            return attrs.evolve(record, value_schema=None, value=None)
        row, deleted = value["before"], "true"
    else:
        row, deleted = value["after"], "false"
    row_schema = value.schema.fields[value.schema.field_index("after")].schema
    if delete_handling_mode == "rewrite":
        fields = (*(row_schema.fields or ()), Field(_DELETED, len(row_schema.fields or ()),
                                                   _OPT_STRING))
        row_schema = attrs.evolve(row_schema, fields=fields)
        row = Struct(row_schema, (*row.values, deleted))
    return attrs.evolve(record, value_schema=row_schema, value=row)


def yb_unwrap_struct(value: Struct) -> tuple[Schema, Struct]:
    """``YBExtractNewRecordState.getUpdatedValueAndSchema``: each set cell becomes its value,
    each null cell is left out (field and value); other fields are kept as they are.

    The schema is rebuilt from ``copySchemaBasics`` (name, version, doc, parameters), which
    does not copy optionality: the result is a required struct.
    """
    fields: list[Field] = []
    values: list[object] = []
    for f, v in zip(value.schema.fields or (), value.values, strict=True):
        if is_cell(f.schema):
            if v is None:
                continue
            fields.append(Field(f.name, len(fields), f.schema.fields[0].schema))  # type: ignore[index]
            values.append(v.values[0])
        else:
            fields.append(Field(f.name, len(fields), f.schema))
            values.append(v)
    schema = attrs.evolve(value.schema, optional=False, default=None, fields=tuple(fields))
    return schema, Struct(schema, tuple(values))


def yb_extract_new_record_state(record: ChangeRecord, *,
                                delete_handling_mode: DeleteHandlingMode = "drop",
                                drop_tombstones: bool = True) -> ChangeRecord | None:
    """``YBExtractNewRecordState.apply``: :func:`extract_new_record_state`, then the key and
    the value unwrapped by :func:`yb_unwrap_struct` (``None``: dropped)."""
    out = extract_new_record_state(record, delete_handling_mode=delete_handling_mode,
                                   drop_tombstones=drop_tombstones)
    if out is None:
        return None
    key_schema, key = out.key_schema, out.key
    if key is not None:
        key_schema, key = yb_unwrap_struct(key)
    value_schema: Schema | None = None
    value = None
    if out.value is not None:
        value_schema, value = yb_unwrap_struct(out.value)
    return attrs.evolve(out, key_schema=key_schema, key=key, value_schema=value_schema,
                        value=value)
