"""PostgreSQL types as Kafka Connect schemas and values, as the Debezium connector maps them.

:class:`TypeMapper` maps a column (type OID and modifier, resolved through a
:class:`TypeRegistry` fed by pgoutput Type messages or a :class:`CatalogSnapshot`)
to a :class:`ColumnMapping`: its Connect :class:`Schema` and converters for the
text and binary tuple formats, chosen once per column. :class:`TypeConfig` holds
the handling modes, named as Debezium names them.
"""

from __future__ import annotations

from pgcdc_events.types.catalog import (
    CATALOG_QUERY,
    CatalogColumn,
    CatalogError,
    CatalogSnapshot,
    CatalogTable,
    CatalogType,
    fetch_catalog,
    load_catalog,
)
from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.jsonvalue import value_from_json, value_to_json
from pgcdc_events.types.mapper import ColumnMapping, TypeMapper
from pgcdc_events.types.mapping import ValueMapping
from pgcdc_events.types.registry import PgType, TypeRegistry
from pgcdc_events.types.schema import NO_DEFAULT, Field, Schema, Struct

__all__ = [
    "CATALOG_QUERY",
    "NO_DEFAULT",
    "CatalogColumn",
    "CatalogError",
    "CatalogSnapshot",
    "CatalogTable",
    "CatalogType",
    "ColumnMapping",
    "Field",
    "PgType",
    "Schema",
    "Struct",
    "TypeConfig",
    "TypeMapper",
    "TypeRegistry",
    "ValueMapping",
    "fetch_catalog",
    "load_catalog",
    "value_from_json",
    "value_to_json",
]
