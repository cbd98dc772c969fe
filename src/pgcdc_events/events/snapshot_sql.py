"""The SQL of an incremental snapshot's chunks, as the Debezium PostgreSQL connector writes it.

An incremental snapshot reads a table in key order, one chunk of at most
``incremental.snapshot.chunk.size`` rows at a time (Debezium 3.6's
``AbstractChunkQueryBuilder`` with ``RowValueConstructorChunkQueryBuilder``, which
``PostgresConnection.chunkQueryBuilder`` picks, and ``JdbcConnection.buildSelectWithRowLimits``):

1. the table's largest key is read first (:meth:`ChunkQueryBuilder.max_key_query`:
   ``SELECT * FROM "s"."t" ORDER BY "k1" DESC, "k2" DESC LIMIT 1``); an empty table
   ends there;
2. the first chunk has no key bounds: ``SELECT * FROM "s"."t" ORDER BY "k1", "k2" LIMIT n``;
3. each following chunk starts after the last key read and ends at the largest key:
   ``WHERE ROW("k1", "k2") > ROW(?, ?) AND ROW("k1", "k2") <= ROW(?, ?)`` (a single
   column without ``ROW``); when a key column is nullable the row-value comparison is
   wrong for NULLs, and the connector falls back to its portable form, an ``OR`` of
   column-by-column comparisons with ``IS NULL`` tests (PostgreSQL sorts NULL last):
   ``(("k1" > ? OR "k1" IS NULL)) OR ("k1" = ? AND "k2" > ?) ...`` and ``AND NOT (...)``
   of the same for the upper bound, with no placeholder where a bound value is NULL.

The key is the table's key (``message.key.columns`` when it names the table, in its
order), or the signal's ``surrogate-key``; identifiers are double-quoted. A signal's
additional condition is appended in parentheses: ``... AND "id" <= ? AND (color='blue')``
(``DataCollection.getAdditionalCondition`` wraps it). When ``column.include.list`` or
``column.exclude.list`` is set, the projection lists the included columns instead of ``*``.

:class:`ChunkQuery` carries the SQL with ``?`` placeholders and the values to bind, in
order. Nothing here runs a query.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import attrs

from pgcdc_events.errors import ConfigurationError
from pgcdc_events.events.config import EventConfig
from pgcdc_events.types.catalog import CatalogTable

__all__ = ["DEFAULT_CHUNK_SIZE", "ChunkColumn", "ChunkQuery", "ChunkQueryBuilder", "ChunkTable",
           "SnapshotSqlError", "parenthesized", "quote_ident"]

#: ``incremental.snapshot.chunk.size``'s default.
DEFAULT_CHUNK_SIZE: Final = 1024


class SnapshotSqlError(ConfigurationError):
    """A chunk query that cannot be built (an unknown surrogate key, no key, NULL order)."""


def quote_ident(name: str) -> str:
    """``name`` as a PostgreSQL quoted identifier."""
    return '"' + name.replace('"', '""') + '"'


def parenthesized(condition: str | None) -> str | None:
    """An additional condition as the connector appends it: in parentheses, so that its
    own ``OR`` cannot escape the key bounds (``None`` or empty: no condition)."""
    return f"({condition})" if condition else None


@attrs.frozen
class ChunkColumn:
    """A column of a snapshotted table: its name and whether it may be NULL."""

    name: str
    optional: bool = False


@attrs.frozen
class ChunkTable:
    """What the chunk SQL needs to know of a table.

    ``key``: the names of the columns that key its events, in key order (the primary
    key, or ``message.key.columns``); ``projection``: the included columns when columns
    are filtered (``None``: ``*``).
    """

    schema: str
    name: str
    columns: tuple[ChunkColumn, ...]
    key: tuple[str, ...]
    projection: tuple[str, ...] | None = None

    @property
    def qualified(self) -> str:
        """``schema.table``, unquoted (for messages)."""
        return f"{self.schema}.{self.name}"

    def column(self, name: str) -> ChunkColumn | None:
        """The column called ``name``, if any."""
        for column in self.columns:
            if column.name == name:
                return column
        return None

    @classmethod
    def from_catalog(cls, table: CatalogTable, config: EventConfig | None = None) -> ChunkTable:
        """The chunk view of a catalog table under a connector configuration: its event
        key (``message.key.columns`` first), nullability, and the included columns when
        ``column.include.list``/``column.exclude.list`` filter them. Generated columns
        are left out, as pgoutput leaves them out of its rows (so a table with one
        lists its other columns rather than ``SELECT *``)."""
        stored = [c for c in table.columns if not c.generated]
        columns = tuple(ChunkColumn(c.name, not c.not_null) for c in stored)
        key: tuple[str, ...] | None = None
        projection = None
        if len(stored) != len(table.columns):
            projection = tuple(c.name for c in stored)
        if config is not None:
            key = config.key_columns_for(table.namespace, table.name)
            if config.column_include is not None or config.column_exclude is not None:
                projection = tuple(c.name for c in stored
                                   if config.includes_column(table.namespace, table.name, c.name))
        return cls(table.namespace, table.name, columns,
                   key if key is not None else table.event_key, projection)


@attrs.frozen
class ChunkQuery:
    """A query with ``?`` placeholders and the values to bind to them, in order."""

    sql: str
    params: tuple[Any, ...] = ()


@attrs.frozen
class ChunkQueryBuilder:
    """Builds the chunk and maximum-key queries of an incremental snapshot.

    The defaults are the PostgreSQL connector's: row-value comparisons (``row_values``)
    and NULL sorting last (``nulls_sort_last``). ``row_values=False`` gives the portable
    builder (``DefaultChunkQueryBuilder``) the connector uses for other databases;
    ``nulls_sort_last=False`` the NULLs-first form; ``None`` an unknown NULL order, which
    refuses nullable keys, as the connector does.
    """

    chunk_size: int = DEFAULT_CHUNK_SIZE
    row_values: bool = True
    nulls_sort_last: bool | None = True

    def key_columns(self, table: ChunkTable, surrogate_key: str | None = None
                    ) -> tuple[ChunkColumn, ...]:
        """The columns a chunk is ordered and bounded by: the surrogate key, else the key."""
        if surrogate_key:
            column = table.column(surrogate_key)
            if column is None:
                raise SnapshotSqlError(f'Surrogate key "{surrogate_key}" doesn\'t exist in '
                                       f'table "{table.qualified}"')
            return (column,)
        out = []
        for name in table.key:
            column = table.column(name)
            if column is None:
                raise SnapshotSqlError(f"key column {name!r} is not a column of table "
                                       f"{table.qualified!r}")
            out.append(column)
        if not out:
            raise SnapshotSqlError(f"table {table.qualified!r} has no primary key and no "
                                   "message.key.columns: it cannot be snapshotted in chunks")
        return tuple(out)

    def max_key_query(self, table: ChunkTable, *, additional_condition: str | None = None,
                      surrogate_key: str | None = None) -> ChunkQuery:
        """The query for the table's largest key (``buildMaxPrimaryKeyQuery``); its one
        row, if any, gives the key values that bound every chunk after the first.

        ``additional_condition`` is appended as given (see :func:`parenthesized`)."""
        keys = self.key_columns(table, surrogate_key)
        order = ", ".join(f"{quote_ident(c.name)} DESC" for c in keys)
        return ChunkQuery(self._select(table, None, additional_condition, order, 1))

    def chunk_query(self, table: ChunkTable, *, chunk_end: Sequence[Any] | None = None,
                    maximum_key: Sequence[Any] | None = None,
                    additional_condition: str | None = None, surrogate_key: str | None = None,
                    limit: int | None = None) -> ChunkQuery:
        """The query of the next chunk (``buildChunkQuery`` and ``readTableChunkStatement``).

        ``chunk_end`` is the key of the last row of the previous chunk (``None`` for the
        first chunk, which has no bounds), ``maximum_key`` the table's largest key from
        :meth:`max_key_query`; both in :meth:`key_columns` order. ``additional_condition``
        is appended as given (see :func:`parenthesized`).
        """
        keys = self.key_columns(table, surrogate_key)
        if self.nulls_sort_last is None and any(c.optional for c in keys):
            raise SnapshotSqlError("The sort order of NULL values in the incremental snapshot "
                                   "key is unknown.")
        condition = None
        params: tuple[Any, ...] = ()
        if chunk_end is not None:
            if maximum_key is None:
                raise SnapshotSqlError(f"a chunk of {table.qualified!r} after the first needs "
                                       "the table's maximum key")
            for what, values in (("chunk end", chunk_end), ("maximum key", maximum_key)):
                if len(values) != len(keys):
                    raise SnapshotSqlError(
                        f"the {what} of {table.qualified!r} has {len(values)} values for "
                        f"{len(keys)} key columns")
            lower, lower_params = self._bound(keys, chunk_end, ">")
            upper, upper_params = self._bound(keys, maximum_key, "<=")
            condition = f"{lower} AND {upper}"
            params = lower_params + upper_params
        order = ", ".join(quote_ident(c.name) for c in keys)
        sql = self._select(table, condition, additional_condition, order,
                           self.chunk_size if limit is None else limit)
        return ChunkQuery(sql, params)

    # -- pieces --------------------------------------------------------------------

    def _select(self, table: ChunkTable, condition: str | None, additional: str | None,
                order: str, limit: int) -> str:
        projection = "*" if table.projection is None else \
            ", ".join(quote_ident(c) for c in table.projection)
        sql = f"SELECT {projection} FROM {quote_ident(table.schema)}.{quote_ident(table.name)}"
        where = [c for c in (condition, additional) if c]
        if where:
            sql += " WHERE " + " AND ".join(where)
        return f"{sql} ORDER BY {order} LIMIT {limit}"

    def _bound(self, keys: tuple[ChunkColumn, ...], values: Sequence[Any], operator: str
               ) -> tuple[str, tuple[Any, ...]]:
        if self.row_values and not any(c.optional for c in keys):
            names = ", ".join(quote_ident(c.name) for c in keys)
            marks = ", ".join("?" for _ in keys)
            if len(keys) > 1:
                names, marks = f"ROW({names})", f"ROW({marks})"
            return f"{names} {operator} {marks}", tuple(values)
        lower = self._cascade(keys, values)
        return (lower if operator == ">" else f"NOT {lower}"), _triangle(values)

    def _cascade(self, keys: tuple[ChunkColumn, ...], values: Sequence[Any]) -> str:
        """``AbstractChunkQueryBuilder.addLowerBound``: ``(k1 > ?) OR (k1 = ? AND k2 > ?)
        ...``, each comparison rewritten for nullable columns and NULL bound values."""
        last_ = self.nulls_sort_last
        terms = []
        for i in range(len(keys)):
            parts = []
            for j in range(i + 1):
                name = quote_ident(keys[j].name)
                greater = i == j
                if not keys[j].optional:
                    parts.append(f"{name} > ?" if greater else f"{name} = ?")
                elif values[j] is not None:
                    if not greater:
                        parts.append(f"{name} = ?")
                    elif last_:  # NULL is bigger than everything, and not seen yet
                        parts.append(f"({name} > ? OR {name} IS NULL)")
                    else:  # NULL is smaller than everything: already seen
                        parts.append(f"({name} > ? AND {name} IS NOT NULL)")
                elif greater:  # nothing is greater than NULL (last), everything is (first)
                    parts.append("1 = 0" if last_ else f"{name} IS NOT NULL")
                else:
                    parts.append(f"{name} IS NULL")
            terms.append("(" + " AND ".join(parts) + ")")
        body = " OR ".join(terms)
        return f"({body})" if len(keys) > 1 else body


def _triangle(values: Sequence[Any]) -> tuple[Any, ...]:
    """``CascadingOrBoundaryConditions.bindTriangularParamsSkipNulls``: v1, v1 v2, v1 v2 v3
    ..., NULLs left out (their comparisons are ``IS NULL`` tests without a placeholder)."""
    return tuple(values[j] for i in range(len(values)) for j in range(i + 1)
                 if values[j] is not None)
