"""Apply a table's change events to a target, micro-batch by micro-batch: the target follows
the source table.

:class:`ParquetTarget` and :class:`PostgresTarget` are ``foreachBatch`` functions for a
table's events DataFrame (:meth:`DecodedStream.table
<pgcdc_events.spark.stream.DecodedStream.table>`, or a batch one), and take a table's
flattened changes and its key columns through ``apply_changes`` (what
:meth:`DecodedStream.apply <pgcdc_events.spark.stream.DecodedStream.apply>` gives them).
Each batch is reduced to its net effect in the decoder's order, or the changes'
``__sequence`` order (:func:`net_changes`): the latest row per key,
deletes, and a truncate (which empties the table before what follows it); the target
then takes that effect, which is idempotent, and records the batch id, so a batch Spark
replays after a failure is skipped (or, if the failure came before the id was recorded,
applied again to the same result).

- :class:`ParquetTarget`: a directory of ``bucket-NNNNN.parquet`` files, the rows hashed
  by key into ``buckets`` files; a batch rewrites only the files of the keys it touches
  (every file on a truncate), each written hidden, ``fsync``\\ ed and renamed into place.
  Read it with ``spark.read.option("mergeSchema", "true").parquet(path)``.
- :class:`PostgresTarget`: a PostgreSQL table, through pg8000 (the ``pg`` extra): upserts
  by key (``INSERT ... ON CONFLICT``), deletes, ``TRUNCATE``, and the batch id in a
  bookkeeping table, all in one transaction.

Debezium's default ``skipped.operations=t`` drops truncates: use
``skipped.operations=none`` for a target that follows truncates.
"""

from __future__ import annotations

import contextlib
import json
import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from pyspark.sql import DataFrame

from pgcdc_events.spark._session import to_arrow_table
from pgcdc_events.spark.autocdc import OP, SEQUENCE
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.spark.pgtext import PgColumn, column_text
from pgcdc_events.spark.stream import write_atomic

__all__ = ["NetChanges", "ParquetTarget", "PostgresTarget", "net_changes"]

_BUCKET: Final = re.compile(r"bucket-(\d{5})\.parquet")


class NetChanges:
    """The net effect of a run of events: ``truncated`` (the table was emptied first),
    ``rows`` (key -> the row after, or ``None`` for deleted), the key columns and the
    Arrow type of a row."""

    def __init__(self, key_columns: tuple[str, ...], row_type: Any) -> None:
        self.key_columns = key_columns
        self.row_type = row_type
        self.truncated = False
        self.rows: dict[tuple[Any, ...], dict[str, Any] | None] = {}
        self.events = 0

    def key_of(self, row: Mapping[str, Any]) -> tuple[Any, ...]:
        """A row's key (its key columns' values)."""
        return tuple(_hashable(row.get(c)) for c in self.key_columns)


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


def net_changes(events: Any, keys: Sequence[str] | None = None) -> NetChanges:
    """The net effect of a table's events (an Arrow table with the columns of a table's
    events DataFrame), applied in ``_position`` order; or of its flattened changes (the
    columns of :meth:`DecodedCapture.changes <pgcdc_events.spark.decode.DecodedCapture.changes>`:
    the table's columns, ``__op``, ``__sequence``) identified by the columns ``keys``,
    applied in ``__sequence`` order (the change's position in the stream)."""
    if OP in events.column_names:
        return _net_of_changes(events, tuple(keys or ()))
    if "key" not in events.column_names:
        raise SparkDecodeError("the table has no key, so its changes cannot be applied per row; "
                               "give it one with message.key.columns")
    key_type = events.schema.field("key").type
    row_type = events.schema.field("after").type
    net = NetChanges(tuple(key_type.field(i).name for i in range(key_type.num_fields)),
                     row_type)
    positions = events.column("_position").to_pylist()
    order = sorted(range(events.num_rows),
                   key=lambda i: (positions[i]["message"], positions[i]["index"]))
    ops = events.column("op").to_pylist()
    kinds = events.column("_kind").to_pylist()
    key_rows = events.column("key").to_pylist()
    afters = events.column("after").to_pylist()
    return _fold(net, ((None if kinds[i] == "tombstone" else ops[i], key_rows[i], afters[i])
                       for i in order))


def _net_of_changes(changes: Any, keys: tuple[str, ...]) -> NetChanges:
    if not keys:
        raise SparkDecodeError("the table has no key, so its changes cannot be applied per row; "
                               "give it one with message.key.columns")
    names = [n for n in changes.column_names if n not in (OP, SEQUENCE)]
    for key in keys:
        if key not in names:
            raise SparkDecodeError(f"the changes have no key column {key!r}")
    net = NetChanges(keys, pa.struct([changes.schema.field(n) for n in names]))
    sequences = changes.column(SEQUENCE).to_pylist()
    if None in sequences:
        raise SparkDecodeError(f"change {sequences.index(None)} has no {SEQUENCE}: the "
                               "changes cannot be put in order")
    order = sorted(range(changes.num_rows), key=sequences.__getitem__)  # stable
    ops = changes.column(OP).to_pylist()
    rows = changes.select(names).to_pylist()
    return _fold(net, ((ops[i], rows[i], rows[i]) for i in order))


def _fold(net: NetChanges, changes: Iterable[tuple[str | None, Any, Any]]) -> NetChanges:
    """``net`` after ``changes`` in order, each ``(op, whence its key, row)``: a truncate
    empties it, a delete leaves ``None`` for its key, a create, update or read its row;
    ``op`` ``None`` (a tombstone) changes nothing."""
    for op, key, row in changes:
        if op is None:
            continue
        net.events += 1
        if op == "t":
            net.truncated = True
            net.rows.clear()
        elif op == "d":
            net.rows[net.key_of(key)] = None
        elif op in ("c", "u", "r"):
            net.rows[net.key_of(key)] = row
    return net


def _bucket(key: tuple[Any, ...], buckets: int) -> int:
    text = json.dumps(key, default=str, separators=(",", ":"))
    return zlib.crc32(text.encode("utf-8")) % buckets


def _widen_rows(rows: Iterable[dict[str, Any]], names: Iterable[str]) -> list[dict[str, Any]]:
    fields = list(names)
    return [{name: row.get(name) for name in fields} for row in rows]


def _parquet_writer(table: Any) -> Any:
    return lambda path: pq.write_table(table, path)


class ParquetTarget:
    """A ``foreachBatch`` function keeping a Parquet directory equal to the source table
    (see the module docstring). ``buckets`` is the number of files the rows are spread
    over (fixed for the life of the directory)."""

    def __init__(self, path: str, *, buckets: int = 16) -> None:
        if buckets < 1:
            raise SparkDecodeError(f"buckets must be positive, got {buckets}")
        self.path = Path(path)
        self.buckets = buckets
        self.marker = self.path / "_applied.json"
        #: (batch id, events, files rewritten) of the batches applied by this object.
        self.applied: list[tuple[int, int, int]] = []

    def last_batch(self) -> int | None:
        """The last batch id applied (``None`` before the first)."""
        try:
            return int(json.loads(self.marker.read_text(encoding="utf-8"))["batch"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SparkDecodeError(f"{self.marker}: unreadable ({exc})") from None

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        last = self.last_batch()
        if last is not None and batch_id <= last:
            return  # applied before: a replay
        self.apply(to_arrow_table(df), batch_id)

    def apply_changes(self, changes: DataFrame, batch_id: int, keys: Sequence[str]) -> None:
        """Apply a micro-batch of the table's flattened changes, rows identified by the
        columns ``keys`` (what :meth:`DecodedStream.apply
        <pgcdc_events.spark.stream.DecodedStream.apply>` gives a target that has this
        method)."""
        last = self.last_batch()
        if last is not None and batch_id <= last:
            return  # applied before: a replay
        self.apply(to_arrow_table(changes), batch_id, keys=keys)

    def apply(self, events: Any, batch_id: int, *, keys: Sequence[str] | None = None) -> None:
        """Apply an Arrow table of events (or of flattened changes identified by the
        columns ``keys``: :func:`net_changes`) as batch ``batch_id``."""
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        rewritten = 0
        if events.num_rows:
            net = net_changes(events, keys)
            by_bucket: dict[int, dict[tuple[Any, ...], dict[str, Any] | None]] = {}
            for key, row in net.rows.items():
                by_bucket.setdefault(_bucket(key, self.buckets), {})[key] = row
            touched = set(range(self.buckets)) if net.truncated else set(by_bucket)
            names = [net.row_type.field(i).name for i in range(net.row_type.num_fields)]
            schema = pa.schema([net.row_type.field(i) for i in range(net.row_type.num_fields)])
            for bucket in sorted(touched):
                file = self.path / f"bucket-{bucket:05d}.parquet"
                current: dict[tuple[Any, ...], dict[str, Any]] = {}
                if file.exists() and not net.truncated:
                    for row in pq.read_table(file).to_pylist():
                        current[net.key_of(row)] = row
                for key, row in by_bucket.get(bucket, {}).items():
                    if row is None:
                        current.pop(key, None)
                    else:
                        current[key] = row
                table = pa.Table.from_pylist(_widen_rows(current.values(), names), schema=schema)
                write_atomic(file, _parquet_writer(table))
                rewritten += 1
            self.applied.append((batch_id, net.events, rewritten))
        write_atomic(self.marker, lambda p: Path(p).write_text(
            json.dumps({"batch": batch_id}), encoding="utf-8"))


class PostgresTarget:
    """A ``foreachBatch`` function keeping a PostgreSQL table equal to the source table,
    through pg8000: ``connect`` returns a ``pg8000.native.Connection``; ``schema`` and
    ``table`` name the target (two names, never parsed out of a qualified one; created
    beforehand with the source's columns and a primary key on the key columns); ``name``
    identifies this stream in the bookkeeping table ``pgcdc_applied`` (created if
    missing; default: the quoted qualified name).

    Each value is written as the text input of its target column's type (read from the
    server's catalog at each batch; see :mod:`pgcdc_events.spark.pgtext`), so every type
    family the type mapper maps arrives as it left, when the events have the semantic
    flavour (the default; the literal flavour's integers do not say their temporal unit)
    and ``binary.handling.mode=bytes`` (the default; text for a ``bytea`` is refused).
    Two values Debezium itself does not carry whole arrive as Debezium gives them: a
    ``bit varying`` without its leading zeros, and an ``interval`` under
    ``interval.handling.mode=numeric`` (months of 30.4375 days; use ``string`` for exact
    intervals).
    """

    def __init__(self, connect: Any, schema: str, table: str, *, name: str | None = None
                 ) -> None:
        if not schema or not table:
            raise SparkDecodeError("PostgresTarget needs the schema and the table apart")
        self.connect = connect
        self.schema = schema
        self.table = table
        self.qualified = f"{_quote(schema)}.{_quote(table)}"
        self.name = name or self.qualified
        self.applied: list[tuple[int, int]] = []

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.apply(to_arrow_table(df), batch_id)

    def apply_changes(self, changes: DataFrame, batch_id: int, keys: Sequence[str]) -> None:
        """Apply a micro-batch of the table's flattened changes, rows identified by the
        columns ``keys`` (what :meth:`DecodedStream.apply
        <pgcdc_events.spark.stream.DecodedStream.apply>` gives a target that has this
        method)."""
        self.apply(to_arrow_table(changes), batch_id, keys=keys)

    def apply(self, events: Any, batch_id: int, *, keys: Sequence[str] | None = None) -> None:
        """Apply an Arrow table of events (or of flattened changes identified by the
        columns ``keys``: :func:`net_changes`) as batch ``batch_id``, in one transaction."""
        conn = self.connect()
        try:
            # CREATE TABLE IF NOT EXISTS is not safe against itself: two targets creating
            # the table at once failed with a unique violation (pg_type_typname_nsp_index);
            # a transaction-scoped advisory lock makes the second wait and find the table
            conn.run("BEGIN")
            conn.run("SELECT pg_advisory_xact_lock(hashtext('pgcdc_applied'))")
            conn.run("CREATE TABLE IF NOT EXISTS pgcdc_applied (name text PRIMARY KEY, "
                     "batch bigint NOT NULL)")
            conn.run("COMMIT")
            conn.run("BEGIN")
            rows = conn.run("SELECT batch FROM pgcdc_applied WHERE name = :n FOR UPDATE",
                            n=self.name)
            if rows and batch_id <= rows[0][0]:
                conn.run("ROLLBACK")
                return
            events_applied = 0
            if events.num_rows:
                columns = self.columns(conn)
                net = net_changes(self._as_text(events, columns), keys)
                events_applied = net.events
                self._apply(conn, net, columns)
            conn.run("INSERT INTO pgcdc_applied VALUES (:n, :b) ON CONFLICT (name) DO UPDATE "
                     "SET batch = EXCLUDED.batch", n=self.name, b=batch_id)
            conn.run("COMMIT")
            self.applied.append((batch_id, events_applied))
        except BaseException:
            with contextlib.suppress(Exception):  # the connection may be gone
                conn.run("ROLLBACK")
            raise
        finally:
            conn.close()

    def columns(self, conn: Any) -> dict[str, PgColumn]:
        """The target table's columns, from the server's catalog."""
        rows = conn.run(_COLUMNS_SQL, s=self.schema, t=self.table)
        if not rows:
            raise SparkDecodeError(f"the target table {self.qualified} does not exist (or has "
                                   "no columns): create it with the source's columns")
        return {name: PgColumn(name, sql_type, element or base, element is not None, typmod)
                for name, sql_type, base, element, typmod in rows}

    def _text(self, array: Any, name: str, columns: dict[str, PgColumn]) -> Any:
        """A column's values as the text input of the target column's type."""
        column = columns.get(name)
        if column is None:
            raise SparkDecodeError(
                f"the target table {self.qualified} has no column for it (an ALTER "
                "TABLE on the source?): add the column to the target",
                table=f"{self.schema}.{self.table}", column=name)
        text = column_text(array, column, table=f"{self.schema}.{self.table}")
        return pa.array(text, pa.string())

    def _as_text(self, events: Any, columns: dict[str, PgColumn]) -> Any:
        """The events with ``key`` and ``after`` as structs of text input values (flattened
        changes: their columns as text)."""
        if OP in events.column_names:
            return pa.table({name: events.column(name) if name in (OP, SEQUENCE)
                             else self._text(events.column(name).combine_chunks(), name,
                                             columns)
                             for name in events.column_names})
        if "key" not in events.column_names:
            return events  # net_changes says why it cannot apply it
        parts: dict[str, Any] = {}
        for part in ("key", "after"):
            array = events.column(part).combine_chunks()
            if isinstance(array, pa.ChunkedArray):  # an empty table
                array = pa.array([], array.type)
            children, fields = [], []
            for i in range(array.type.num_fields):
                name = array.type.field(i).name
                children.append(self._text(array.field(i), name, columns))
                fields.append(pa.field(name, pa.string()))
            parts[part] = pa.StructArray.from_arrays(
                children, fields=fields, mask=array.is_null()) if fields else array
        return pa.table({"key": parts["key"], "after": parts["after"],
                         "op": events.column("op"), "_kind": events.column("_kind"),
                         "_position": events.column("_position")})

    def _apply(self, conn: Any, net: NetChanges, columns: dict[str, PgColumn]) -> None:
        target = self.qualified
        if net.truncated:
            conn.run(f"TRUNCATE {target}")
        names = [net.row_type.field(i).name for i in range(net.row_type.num_fields)]
        keys = list(net.key_columns)

        def cast(param: str, column: str) -> str:
            return f"CAST(:{param} AS {columns[column].sql_type})"

        where = " AND ".join(f"{_quote(k)} = {cast(f'k{i}', k)}" for i, k in enumerate(keys))
        quoted = ", ".join(_quote(n) for n in names)
        values = ", ".join(cast(f"v{i}", n) for i, n in enumerate(names))
        update = ", ".join(f"{_quote(n)} = EXCLUDED.{_quote(n)}" for n in names
                           if n not in keys) or f"{_quote(keys[0])} = EXCLUDED.{_quote(keys[0])}"
        upsert = (f"INSERT INTO {target} ({quoted}) VALUES ({values}) ON CONFLICT "
                  f"({', '.join(_quote(k) for k in keys)}) DO UPDATE SET {update}")
        delete = f"DELETE FROM {target} WHERE {where}"
        for key, row in net.rows.items():
            if row is None:
                conn.run(delete, **{f"k{i}": v for i, v in enumerate(key)})
            else:
                conn.run(upsert, **{f"v{i}": row.get(n) for i, n in enumerate(names)})


#: A table's columns: name, type (for a cast), base type (domains resolved), an array's
#: element type, type modifier. The table is named by two parameters, never by SQL text.
_COLUMNS_SQL: Final = """
WITH cols AS (
  SELECT a.attnum, a.attname, format_type(a.atttypid, a.atttypmod) AS sql_type,
         CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE a.atttypid END AS base_oid,
         CASE WHEN t.typtype = 'd' THEN t.typtypmod ELSE a.atttypmod END AS typmod
  FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
  WHERE a.attrelid = (SELECT c.oid FROM pg_class c JOIN pg_namespace n
                      ON n.oid = c.relnamespace WHERE n.nspname = :s AND c.relname = :t)
    AND a.attnum > 0 AND NOT a.attisdropped)
SELECT cols.attname, cols.sql_type, b.typname, e.typname, cols.typmod
FROM cols JOIN pg_type b ON b.oid = cols.base_oid
LEFT JOIN pg_type e ON e.oid = b.typelem AND b.typcategory = 'A'
ORDER BY cols.attnum
"""


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
