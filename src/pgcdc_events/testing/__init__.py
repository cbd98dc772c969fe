"""Test support: strategies, factories and a validator for code that consumes change events.

Install with the ``testing`` extra (``pip install 'pgcdc-events[testing]'``) for the
hypothesis strategies. Everything else here works without hypothesis:

* tables: :func:`table` (a declarative table), :func:`tables_from_catalog`,
  :class:`TableDef`, :func:`catalog_for`;
* values: :class:`PgValue` and the renderers of :mod:`pgcdc_events.testing.pgtext`;
* workloads: :class:`Workload` (bytes, messages, Debezium records, final state),
  :func:`render`, :func:`connect_rows` (a reference consumer);
* factories: :func:`insert`, :func:`update`, :func:`delete`, :func:`truncate`,
  :func:`message`, :func:`transaction` (see :mod:`pgcdc_events.testing.factories`);
* the validator: :func:`validate_record`, :func:`validate_file`.

The strategies (:func:`values`, :func:`tables`, :func:`table_sets`, :func:`rows`,
:func:`workloads`, :func:`column_types`) are loaded on first use, so importing
this package does not need hypothesis. :mod:`pgcdc_events.testing.cluster` runs a
throwaway PostgreSQL; :mod:`pgcdc_events.testing.protocol` has structural message
strategies.
"""

from __future__ import annotations

import importlib
from typing import Any

from pgcdc_events.testing.factories import (
    delete,
    insert,
    message,
    op_delete,
    op_insert,
    op_update,
    pg_value,
    row,
    transaction,
    truncate,
    update,
)
from pgcdc_events.testing.pgtext import PgValue
from pgcdc_events.testing.tables import (
    ColumnDef,
    TableDef,
    catalog_for,
    column_type,
    table,
    tables_from_catalog,
)
from pgcdc_events.testing.validate import Problem, Report, validate_file, validate_record
from pgcdc_events.testing.workload import (
    DEFAULT_PROPERTIES,
    UNCHANGED_TOAST,
    Change,
    ExpectedEvent,
    LogicalMsg,
    Schedule,
    Transaction,
    TruncateTables,
    Workload,
    connect_rows,
    event_config,
    render,
)

_LAZY = {
    "values": "pgcdc_events.testing.values",
    "column_types": "pgcdc_events.testing.strategies",
    "rows": "pgcdc_events.testing.strategies",
    "table_sets": "pgcdc_events.testing.strategies",
    "tables": "pgcdc_events.testing.strategies",
    "workloads": "pgcdc_events.testing.strategies",
}

__all__ = [
    "DEFAULT_PROPERTIES",
    "UNCHANGED_TOAST",
    "Change",
    "ColumnDef",
    "ExpectedEvent",
    "LogicalMsg",
    "PgValue",
    "Problem",
    "Report",
    "Schedule",
    "TableDef",
    "Transaction",
    "TruncateTables",
    "Workload",
    "catalog_for",
    "column_type",
    "column_types",
    "connect_rows",
    "delete",
    "event_config",
    "insert",
    "message",
    "op_delete",
    "op_insert",
    "op_update",
    "pg_value",
    "render",
    "row",
    "rows",
    "table",
    "table_sets",
    "tables",
    "tables_from_catalog",
    "transaction",
    "truncate",
    "update",
    "validate_file",
    "validate_record",
    "values",
    "workloads",
]


def __getattr__(name: str) -> Any:
    """Load the hypothesis strategies on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pgcdc_events.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
