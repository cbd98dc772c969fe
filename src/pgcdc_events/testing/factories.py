"""Factories for hand-written tests: one change event, or one transaction, in one call.

Each factory builds the pgoutput stream a server would send for the operation
and runs the real :class:`~pgcdc_events.events.EventDecoder` over it, so the
records are exactly what the library (and, within the documented differences,
Debezium) produces. Everything not given gets a sensible default: LSNs from
``0/1000038``, xid 1000, commit time 2024-01-01T00:00:00.001Z, connector
properties :data:`~pgcdc_events.testing.workload.DEFAULT_PROPERTIES`.

Values are given per column as a mapping (missing columns are NULL) or a
sequence. A value is ``None`` (NULL), a :class:`~pgcdc_events.testing.pgtext.PgValue`,
a ``str`` (PostgreSQL's text form of the value, e.g. ``"2024-02-29"`` for a date),
or a Python value of the natural kind: ``bool``, ``int``, ``float``, ``Decimal``,
``bytes``, ``date``, ``datetime`` (aware for timestamptz), ``time``, ``UUID``,
``dict``/``list`` for json, jsonb and hstore, ``list`` for arrays.
"""

from __future__ import annotations

import datetime
import json as json_module
import uuid
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from pgcdc_events.errors import ConfigurationError
from pgcdc_events.events.config import EventConfig
from pgcdc_events.events.jsonconv import JsonRecordWriter
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.testing import pgtext as pt
from pgcdc_events.testing.pgtext import PgValue
from pgcdc_events.testing.tables import ColumnType, TableDef
from pgcdc_events.testing.workload import (
    Change,
    LogicalMsg,
    Op,
    Row,
    Transaction,
    TruncateTables,
    event_config,
    render,
)

__all__ = [
    "delete",
    "insert",
    "message",
    "op_delete",
    "op_insert",
    "op_update",
    "pg_value",
    "row",
    "transaction",
    "truncate",
    "update",
]

Config = EventConfig | Mapping[str, str] | None
Values = Mapping[str, Any] | Sequence[Any]


# ---------------------------------------------------------------- values
def pg_value(column: ColumnType, value: Any) -> PgValue | None:
    """A Python value (or PostgreSQL text) as the value of a column of type ``column``."""
    if value is None or isinstance(value, PgValue):
        return value
    sql = column.sql
    if column.is_array:
        if isinstance(value, str):
            return PgValue(sql, value, None, value)
        element = ColumnType(column.name, sql.removesuffix("[]"), column.element_oid,
                             column.element_oid, column.type_modifier, column.args, False,
                             column.extension, column.enum_labels)
        items = [pg_value(element, v) for v in value]
        return pt.array_value(sql, column.element_oid, items)
    made = _scalar(column.name, value)
    return PgValue(sql, made.text, made.binary, made.model)


def _scalar(name: str, value: Any) -> PgValue:  # noqa: C901
    if isinstance(value, str):
        if name == "bytea" and not value.startswith("\\x"):
            return pt.bytea_value(value.encode("utf-8"))
        return PgValue(name, value, value.encode("utf-8") if name in _TEXTUAL else None, value)
    if isinstance(value, bool):
        if name != "bool":
            raise ConfigurationError(f"a bool is no {name} value")
        return pt.bool_value(value)
    if name in ("int2", "int4", "int8", "oid") and isinstance(value, int):
        return pt.int_value(name, value)
    if name in ("float4", "float8") and isinstance(value, (int, float)):
        return pt.float_value(name, float(value))
    if name == "numeric" and isinstance(value, (int, float, Decimal)):
        return pt.numeric_value(_decimal(value))
    if name == "money" and isinstance(value, (int, Decimal)):
        return pt.money_value(int(Decimal(value) * 100))
    if name == "date" and isinstance(value, datetime.date) and not isinstance(
            value, datetime.datetime):
        return pt.date_value(value.toordinal() - _EPOCH_ORDINAL)
    if name in ("timestamp", "timestamptz") and isinstance(value, datetime.datetime):
        return _timestamp(name, value)
    if name in ("time", "timetz") and isinstance(value, datetime.time):
        us = (value.hour * 3600 + value.minute * 60 + value.second) * 1_000_000 + value.microsecond
        if name == "time":
            return pt.time_value(us)
        offset = value.utcoffset()
        return pt.timetz_value(us, int(offset.total_seconds()) if offset else 0)
    if name == "interval" and isinstance(value, datetime.timedelta):
        return pt.interval_value(0, value.days, value.seconds * 1_000_000 + value.microseconds)
    if name == "bytea" and isinstance(value, (bytes, bytearray)):
        return pt.bytea_value(bytes(value))
    if name == "uuid" and isinstance(value, uuid.UUID):
        return pt.uuid_value(value.bytes)
    if name in ("json", "jsonb"):
        return pt.json_value(_json_doc(value), name)
    if name == "hstore" and isinstance(value, Mapping):
        return pt.hstore_value(dict(value))
    raise ConfigurationError(f"cannot use {value!r} ({type(value).__name__}) as a {name} "
                             "value; give PostgreSQL's text form as a str")


_TEXTUAL = frozenset({"text", "varchar", "bpchar", "name", "citext", "json", "xml", "char"})
_EPOCH_ORDINAL = datetime.date(2000, 1, 1).toordinal()
_EPOCH = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)


def _decimal(value: int | float | Decimal) -> tuple[int, int] | str:
    d = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if d.is_nan():
        return "NaN"
    if d.is_infinite():
        return "Infinity" if d > 0 else "-Infinity"
    sign, digits, exponent = d.as_tuple()
    assert isinstance(exponent, int)
    unscaled = int("".join(map(str, digits)) or "0")
    scale = max(0, -exponent)
    unscaled *= 10 ** max(0, exponent)
    return (-unscaled if sign else unscaled), scale


def _timestamp(name: str, value: datetime.datetime) -> PgValue:
    if name == "timestamp":
        naive = value.replace(tzinfo=datetime.timezone.utc)
        delta = naive - _EPOCH
        return pt.timestamp_value((delta.days * 86_400 + delta.seconds) * 1_000_000
                                  + delta.microseconds)
    if value.tzinfo is None:
        raise ConfigurationError("a timestamptz value needs an aware datetime")
    offset = value.utcoffset()
    delta = value - _EPOCH
    us = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return pt.timestamptz_value(us, int(offset.total_seconds()) if offset else 0)


def _json_doc(value: Any) -> Any:
    if isinstance(value, float):
        return _decimal(value)
    if isinstance(value, Decimal):
        return _decimal(value)
    if isinstance(value, Mapping):
        return {str(k): _json_doc(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_doc(v) for v in value]
    return value


def row(table: TableDef, values: Values) -> Row:
    """A full row of ``table`` from a mapping (missing columns NULL) or a sequence."""
    types = table.types()
    if isinstance(values, Mapping):
        unknown = set(values) - {c.name for c in table.columns}
        if unknown:
            raise ConfigurationError(f"{table.qualified} has no column(s) "
                                     f"{', '.join(sorted(unknown))}")
        raw = [values.get(c.name) for c in table.columns]
    else:
        raw = list(values)
        if len(raw) != len(table.columns):
            raise ConfigurationError(f"{table.qualified} has {len(table.columns)} columns, "
                                     f"got {len(raw)} values")
    return tuple(pg_value(t, v) for t, v in zip(types, raw, strict=True))


# ---------------------------------------------------------------- records
def _records(items: Sequence[Transaction | LogicalMsg], config: Config, lsn: int | None,
             xid: int | None, commit_time: datetime.datetime | None
             ) -> tuple[list[ChangeRecord], EventConfig]:
    tables: dict[int, TableDef] = {}
    for item in items:
        for op in item.ops if isinstance(item, Transaction) else ():
            if isinstance(op, Change):
                tables[op.table.relation_id] = op.table
            elif isinstance(op, TruncateTables):
                tables.update((t.relation_id, t) for t in op.tables)
    options: dict[str, Any] = {}
    if lsn is not None:
        options["start_lsn"] = lsn - 0x38
    if xid is not None:
        options["first_xid"] = xid
    if commit_time is not None:
        if commit_time.tzinfo is None:
            raise ConfigurationError("commit_time must be an aware datetime")
        options["start_time_us"] = int(commit_time.timestamp() * 1_000_000) - 1000
    workload = render(tables.values(), items, **options)
    cfg = event_config(config)
    return workload.records(cfg), cfg


def _as_json(records: list[ChangeRecord], cfg: EventConfig) -> list[dict[str, Any]]:
    writer = JsonRecordWriter(cfg.json)
    return [json_module.loads(writer.record_line(r)) for r in records]


def transaction(*ops: Op, config: Config = None, lsn: int | None = None,
                xid: int | None = None, commit_time: datetime.datetime | None = None,
                json: bool = False) -> list[Any]:
    """All records of one committed transaction of ``ops`` (made with :func:`op_insert`,
    :func:`op_update`, :func:`op_delete`, or the workload classes): changes, tombstones,
    the delete and create of key changes, transaction metadata when configured.

    ``lsn`` is the first change's LSN, ``commit_time`` the commit time (aware datetime).
    """
    records, cfg = _records([Transaction(tuple(ops))], config, lsn, xid, commit_time)
    return _as_json(records, cfg) if json else records


def op_insert(table: TableDef, values: Values) -> Change:
    """An INSERT operation for :func:`transaction`."""
    return Change(table, None, row(table, values))


def op_update(table: TableDef, before: Values, after: Values | None = None, **changes: Any
              ) -> Change:
    """An UPDATE operation: the row before and after (or ``before`` plus ``changes``)."""
    old = row(table, before)
    if after is None:
        merged = dict(zip((c.name for c in table.columns), old, strict=True))
        merged.update(changes)
        after = merged
    return Change(table, old, row(table, after))


def op_delete(table: TableDef, before: Values) -> Change:
    """A DELETE operation (``before``: the deleted row; only its identity is sent unless the
    table is REPLICA IDENTITY FULL)."""
    return Change(table, row(table, before), None)


def _one(item: Transaction | LogicalMsg, what: str, json: bool, config: Config = None,
         lsn: int | None = None, xid: int | None = None,
         commit_time: datetime.datetime | None = None) -> Any:
    records, cfg = _records([item], config, lsn, xid, commit_time)
    events = [r for r in records if r.kind in ("change", "truncate", "message")
              and r.value is not None]
    if len(events) != 1:
        raise ConfigurationError(
            f"the {what} produced {len(events)} events (a key change, a filter or "
            "skipped.operations?); use transaction() to get every record")
    return _as_json(events, cfg)[0] if json else events[0]


def insert(table: TableDef, values: Values, *, json: bool = False, **options: Any) -> Any:
    """The create event (``op: c``) of inserting ``values`` into ``table``.

    ``options``: ``config``, ``lsn``, ``xid``, ``commit_time`` as for :func:`transaction`;
    ``json=True`` returns the record as ``decode`` writes it.
    """
    return _one(Transaction((op_insert(table, values),)), "insert", json, **options)


def update(table: TableDef, before: Values, after: Values | None = None, *, json: bool = False,
           config: Config = None, lsn: int | None = None, xid: int | None = None,
           commit_time: datetime.datetime | None = None, **changes: Any) -> Any:
    """The update event (``op: u``) of a row going from ``before`` to ``after`` (or to
    ``before`` with ``changes`` applied). A key change makes several records: use
    :func:`transaction` for those."""
    return _one(Transaction((op_update(table, before, after, **changes),)), "update", json,
                config, lsn, xid, commit_time)


def delete(table: TableDef, before: Values, *, json: bool = False, **options: Any) -> Any:
    """The delete event (``op: d``) of deleting ``before`` (its tombstone left out)."""
    return _one(Transaction((op_delete(table, before),)), "delete", json, **options)


def truncate(table: TableDef, *, json: bool = False, **options: Any) -> Any:
    """The truncate event (``op: t``) of ``table``."""
    return _one(Transaction((TruncateTables((table,)),)), "truncate", json, **options)


def message(prefix: str, content: bytes | str, *, transactional: bool = True,
            json: bool = False, **options: Any) -> Any:
    """The logical decoding message event (``op: m``) of ``pg_logical_emit_message``."""
    data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
    msg = LogicalMsg(prefix, data, transactional)
    item: Transaction | LogicalMsg = Transaction((msg,)) if transactional else msg
    return _one(item, "message", json, **options)
