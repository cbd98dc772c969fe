"""The type mapper: a column's PostgreSQL type to its Connect schema and converters.

Converters are chosen once per column (:meth:`TypeMapper.column`), never per
value. A column whose type Debezium does not map gets ``None``: Debezium drops
such columns from its events, and so do we unless
``TypeConfig.map_unsupported_types`` (or ``include.unknown.datatypes`` for
types Debezium knows nothing about) says otherwise.
"""

from __future__ import annotations

import struct
from typing import Any

import attrs

from pgcdc_events.errors import ConversionError
from pgcdc_events.protocol.messages import RelationColumn
from pgcdc_events.types import array, geometric, hstore, numeric, temporal, text
from pgcdc_events.types.catalog import CatalogColumn
from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.defaults import parse_default
from pgcdc_events.types.mapping import Builder, Converter, ValueMapping, VectorForm
from pgcdc_events.types.registry import PgType, TypeRegistry
from pgcdc_events.types.schema import NO_DEFAULT, Schema
from pgcdc_events.types.source_type import SOURCE_PARAMETER_PREFIX, source_length_scale

__all__ = ["BUILDERS", "ColumnMapping", "TypeMapper"]

#: Builders by root type name, merged from the type families.
BUILDERS: dict[str, Builder] = {
    **numeric.BUILDERS,
    **temporal.BUILDERS,
    **text.BUILDERS,
    **geometric.BUILDERS,
    **hstore.BUILDERS,
}


@attrs.frozen
class ColumnMapping:
    """One column, ready to convert: its final field schema and converters."""

    name: str
    pg_type: PgType
    type_modifier: int
    schema: Schema
    from_text: Converter
    from_binary: Converter | None
    toast: Any
    #: The column is NOT NULL (a value PostgreSQL did not send then gets a fill, even where
    #: the schema is optional: a NOT NULL PostGIS geometry).
    not_null: bool = False
    #: The vector form of ``from_text``'s input (:class:`~pgcdc_events.types.mapping.VectorForm`).
    vector: VectorForm | None = None

    def convert(self, raw: bytes, *, binary: bool = False, table: str = "?") -> Any:
        """Convert one value, wrapping failures in :class:`ConversionError` with context."""
        fn = self.from_binary if binary else self.from_text
        if fn is None:
            raise ConversionError(
                f"{table}.{self.name}: no binary format converter for type {self.pg_type.name}"
            )
        try:
            return fn(raw)
        except ConversionError as exc:
            raise conversion_error(table, self, raw, binary, str(exc)) from None
        except (ValueError, ArithmeticError, IndexError, KeyError, TypeError, struct.error) as exc:
            reason = f"{type(exc).__name__}: {exc}"
            raise conversion_error(table, self, raw, binary, reason) from None


def conversion_error(table: str, column: ColumnMapping, raw: bytes, binary: bool,
                     reason: str) -> ConversionError:
    """A ConversionError naming the table, column, type and the offending value (truncated)."""
    shown = raw[:80].hex() if binary else raw[:80].decode("utf-8", "backslashreplace")
    more = "..." if len(raw) > 80 else ""
    err = ConversionError(
        f"{table}.{column.name} ({column.pg_type.name}): cannot convert "
        f"{'binary ' if binary else ''}value {shown!r}{more}: {reason}"
    )
    err.table, err.column, err.type_name, err.value = table, column.name, column.pg_type.name, raw
    return err


class TypeMapper:
    """Maps columns under one configuration, resolving types through one registry."""

    def __init__(self, config: TypeConfig | None = None, registry: TypeRegistry | None = None
                 ) -> None:
        self.config = config or TypeConfig()
        self.registry = registry or TypeRegistry()

    def value_mapping(self, pg_type: PgType, type_modifier: int) -> ValueMapping | None:
        """The family mapping for a type (domains resolved to their root), or ``None``."""
        typmod = type_modifier
        t = pg_type
        while t.kind == "domain" and t.base is not None:
            if typmod == -1:
                typmod = t.base_type_modifier
            t = t.base
        config = self.config
        if t.kind == "array":
            if t.element is None:
                return None
            if (t.element.kind == "domain" and config.include_unknown_datatypes
                    and not config.map_unsupported_types):
                # Debezium knows no array of a domain: an unknown type, whose elements are
                # bytes of their text (golden events_domain_array/events-unknown)
                return array.build(t, typmod, config, text.unknown_mapping(t.element, config),
                                   unknown=True)
            element = self.value_mapping(t.element, typmod)
            return array.build(t, typmod, config, element)
        if t.kind == "enum":
            return text.enum_mapping(t, config)
        builder = BUILDERS.get(t.name)
        if builder is not None and t.kind in ("base", "range"):
            return builder(t, typmod, config)
        if config.include_unknown_datatypes:
            return text.unknown_mapping(t, config)
        return None

    def column(
        self,
        name: str,
        type_oid: int,
        type_modifier: int = -1,
        *,
        table: str = "",
        optional: bool = True,
        default: str | None = None,
    ) -> ColumnMapping | None:
        """Map one column; ``table`` is ``schema.table`` (for source-type selectors and errors).

        ``optional`` is ``not NOT NULL``; ``default`` is the column's default
        expression (``pg_get_expr``), which becomes the schema default when it is a
        literal the type can read.
        """
        pg_type = self.registry.resolve(type_oid)
        mapping = self.value_mapping(pg_type, type_modifier)
        if mapping is None:
            return None
        # Debezium declares every PostGIS geometry optional, NOT NULL or not (golden
        # events_geometry); a geography keeps its NOT NULL.
        schema = mapping.schema.with_(optional=optional or pg_type.root.name == "geometry")
        if default is not None:
            value = parse_default(default, mapping, pg_type, type_modifier)
            if value is not NO_DEFAULT:
                schema = schema.with_(default=value)
        params = self._source_parameters(name, table, pg_type, type_modifier)
        if params:
            schema = schema.with_(parameters=(*(schema.parameters or ()), *params))
        return ColumnMapping(name, pg_type, type_modifier, schema, mapping.from_text,
                             mapping.from_binary, mapping.toast, not optional, mapping.vector)

    def relation_column(self, column: RelationColumn, *, table: str, replica_identity: str,
                        catalog_column: CatalogColumn | None = None) -> ColumnMapping | None:
        """Map a Relation message's column, using the catalog's column when known.

        Without a catalog column, a column is assumed NOT NULL only when it is
        part of a DEFAULT or USING INDEX replica identity (primary-key and
        replica-identity-index columns are NOT NULL); every other column is
        optional and has no default.
        """
        if catalog_column is not None:
            optional = not catalog_column.not_null
            default = catalog_column.default
        else:
            optional = not (column.is_key and replica_identity in ("d", "i"))
            default = None
        return self.column(column.name, column.type_oid, column.type_modifier, table=table,
                           optional=optional, default=default)

    def _source_parameters(self, name: str, table: str, pg_type: PgType, typmod: int
                           ) -> tuple[tuple[str, str], ...]:
        config = self.config
        if not (config.column_propagate_source_type or config.datatype_propagate_source_type):
            return ()
        # Debezium matches columns as schema.table.column and types as schema.table.typename.
        type_name = pg_type.name
        wanted = any(
            p.fullmatch(f"{table}.{name}") for p in config.column_propagate_source_type
        ) or any(p.fullmatch(f"{table}.{type_name}") for p in config.datatype_propagate_source_type)
        if not wanted:
            return ()
        length, scale = source_length_scale(pg_type, typmod)
        return (
            (f"{SOURCE_PARAMETER_PREFIX}type", type_name.upper()),
            (f"{SOURCE_PARAMETER_PREFIX}length", str(length)),
            (f"{SOURCE_PARAMETER_PREFIX}scale", str(scale)),
            (f"{SOURCE_PARAMETER_PREFIX}name", name),
        )


