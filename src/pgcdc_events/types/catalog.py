"""The catalog snapshot: what pgoutput does not say about the captured tables.

pgoutput's Relation message names each column's type OID and modifier, nothing
more. Debezium also reads the catalog: NOT NULL (optional fields), primary keys
(event keys), column defaults (schema defaults), enum labels, domain base types
and array element types. A :class:`CatalogSnapshot` carries exactly that, so a
decoder that never talks to the database (a Spark job, a test) can reproduce
Debezium's schemas. Produce it by running :data:`CATALOG_QUERY` with any driver
and loading the one row it returns with :func:`load_catalog`, or with
:func:`fetch_catalog` over a pg8000 connection; store and broadcast it as JSON.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from pgcdc_events.errors import PgCdcError

if TYPE_CHECKING:
    from pgcdc_events.protocol.messages import Relation

__all__ = [
    "CATALOG_QUERY",
    "CatalogColumn",
    "CatalogError",
    "CatalogMismatchWarning",
    "CatalogSnapshot",
    "CatalogTable",
    "CatalogType",
    "catalog_table_for",
    "describes",
    "fetch_catalog",
    "load_catalog",
]

FORMAT_VERSION = 1


class CatalogError(PgCdcError, ValueError):
    """A catalog snapshot that cannot be read."""


class CatalogMismatchWarning(UserWarning):
    """The catalog snapshot may not be the stream's: a table missing from it, or the
    same name under another OID (another database, or the table was recreated)."""


#: One row, one column: the whole snapshot as a JSON document. Covers ordinary and
#: partitioned tables outside the system schemas, and every non-built-in type
#: (OID >= 10000) their columns use, with the element and base types they need.
CATALOG_QUERY = """
WITH RECURSIVE cols AS (
    SELECT c.oid AS relid, a.attnum, a.attname, a.atttypid, a.atttypmod, a.attnotnull,
           a.attgenerated, pg_get_expr(d.adbin, d.adrelid) AS default_expr
    FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace
    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
    WHERE c.relkind IN ('r', 'p')
      AND n.nspname NOT IN ('pg_catalog', 'information_schema')
      AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'
), used(oid) AS (
    SELECT DISTINCT atttypid FROM cols
    UNION
    SELECT x.oid FROM used u JOIN pg_type t ON t.oid = u.oid,
           LATERAL (VALUES (t.typelem), (t.typbasetype)) AS x(oid)
    WHERE x.oid <> 0
), keys AS (
    SELECT i.indrelid AS relid, k.attnum, k.ord, i.indisprimary, i.indisreplident
    FROM pg_index i, unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
    WHERE i.indisprimary OR i.indisreplident
), uniq AS (
    -- the unique index Debezium keys a table without a primary key by: the first by name
    -- (clustered first, as pgjdbc's getIndexInfo orders them) with no expression column
    SELECT DISTINCT ON (i.indrelid) i.indrelid AS relid, i.indkey
    FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
    WHERE i.indisunique AND NOT i.indisprimary AND i.indexprs IS NULL
    ORDER BY i.indrelid, i.indisclustered DESC, ic.relname::text COLLATE "C"
)
SELECT json_build_object(
    'format', 1,
    'database', current_database(),
    'server_version', current_setting('server_version'),
    'tables', COALESCE((
        SELECT json_agg(json_build_object(
            'oid', c.oid::bigint, 'namespace', n.nspname, 'name', c.relname,
            'replica_identity', c.relreplident::text,
            'columns', COALESCE((
                SELECT json_agg(json_build_object(
                    'name', col.attname, 'position', col.attnum, 'type_oid', col.atttypid::bigint,
                    'type_modifier', col.atttypmod, 'not_null', col.attnotnull,
                    'default', col.default_expr, 'generated', col.attgenerated::text,
                    'primary_key_position', (SELECT k.ord FROM keys k WHERE k.relid = col.relid
                        AND k.attnum = col.attnum AND k.indisprimary),
                    'replica_identity_position', (SELECT k.ord FROM keys k WHERE k.relid = col.relid
                        AND k.attnum = col.attnum AND k.indisreplident),
                    'unique_index_position', (SELECT k.ord FROM uniq u,
                        unnest(u.indkey) WITH ORDINALITY AS k(attnum, ord)
                        WHERE u.relid = col.relid AND k.attnum = col.attnum)
                ) ORDER BY col.attnum)
                FROM cols col WHERE col.relid = c.oid), '[]'::json)
        ) ORDER BY n.nspname, c.relname)
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind IN ('r', 'p')  -- as in cols, and tables of no column too
          AND n.nspname NOT IN ('pg_catalog', 'information_schema')
          AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'),
        '[]'::json),
    'types', COALESCE((
        SELECT json_agg(json_build_object(
            'oid', t.oid::bigint, 'namespace', tn.nspname, 'name', t.typname,
            'type', t.typtype::text, 'category', t.typcategory::text,
            'delimiter', t.typdelim::text, 'element_oid', t.typelem::bigint,
            'base_oid', t.typbasetype::bigint, 'base_type_modifier', t.typtypmod,
            'not_null', t.typnotnull,
            'enum_labels', (SELECT json_agg(e.enumlabel ORDER BY e.enumsortorder)
                            FROM pg_enum e WHERE e.enumtypid = t.oid)
        ) ORDER BY t.oid)
        FROM pg_type t JOIN pg_namespace tn ON tn.oid = t.typnamespace
        WHERE t.oid IN (SELECT oid FROM used) AND t.oid >= 10000), '[]'::json)
)::text AS catalog
"""


@attrs.frozen
class CatalogType:
    """A non-built-in type: an extension type, enum, domain, composite, range or array of one."""

    oid: int
    namespace: str
    name: str
    type: str  # pg_type.typtype: b base, c composite, d domain, e enum, r range, m multirange
    category: str  # pg_type.typcategory: A array, E enum, U user-defined, ...
    delimiter: str = ","
    element_oid: int = 0
    base_oid: int = 0
    base_type_modifier: int = -1
    not_null: bool = False
    enum_labels: tuple[str, ...] | None = None


@attrs.frozen
class CatalogColumn:
    """A table column as the catalog describes it."""

    name: str
    position: int
    type_oid: int
    type_modifier: int = -1
    not_null: bool = False
    default: str | None = None
    generated: str = ""
    primary_key_position: int | None = None
    replica_identity_position: int | None = None
    #: Position in the unique index that keys the table when it has no primary key.
    unique_index_position: int | None = None


@attrs.frozen
class CatalogTable:
    """A table: its identity and columns in ``attnum`` order."""

    oid: int
    namespace: str
    name: str
    replica_identity: str
    columns: tuple[CatalogColumn, ...]

    @property
    def primary_key(self) -> tuple[str, ...]:
        """Primary-key column names in key order (empty when the table has none)."""
        keyed = [c for c in self.columns if c.primary_key_position is not None]
        return tuple(c.name for c in sorted(keyed, key=lambda c: c.primary_key_position or 0))

    @property
    def event_key(self) -> tuple[str, ...]:
        """The columns Debezium keys the table's events by, in key order.

        The primary key; without one, the columns of the table's first unique index
        by name that has no expression column (``unique_index_position``), as the
        connector falls back to unique indexes; in a snapshot that predates that
        field, the replica-identity index of a REPLICA IDENTITY USING INDEX table.
        """
        for position in ("primary_key_position", "unique_index_position"):
            keyed = [(getattr(c, position), c.name) for c in self.columns
                     if getattr(c, position) is not None]
            if keyed:
                return tuple(name for _, name in sorted(keyed))
        if self.replica_identity == "i":
            keyed = [(c.replica_identity_position, c.name) for c in self.columns
                     if c.replica_identity_position is not None]
            return tuple(name for _, name in sorted(keyed))
        return ()

    def column(self, name: str) -> CatalogColumn | None:
        """The column called ``name``, if any."""
        for col in self.columns:
            if col.name == name:
                return col
        return None


@attrs.frozen
class CatalogSnapshot:
    """Tables and non-built-in types of one database at one moment."""

    database: str
    server_version: str
    tables: tuple[CatalogTable, ...] = ()
    types: tuple[CatalogType, ...] = ()
    _by_name: dict[tuple[str, str], CatalogTable] = attrs.field(
        init=False, eq=False, repr=False, alias="_by_name"
    )
    _by_oid: dict[int, CatalogTable] = attrs.field(
        init=False, eq=False, repr=False, alias="_by_oid"
    )
    _types: dict[int, CatalogType] = attrs.field(init=False, eq=False, repr=False, alias="_types")

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {(t.namespace, t.name): t for t in self.tables})
        object.__setattr__(self, "_by_oid", {t.oid: t for t in self.tables})
        object.__setattr__(self, "_types", {t.oid: t for t in self.types})

    def table(self, namespace: str, name: str) -> CatalogTable | None:
        """The table ``namespace.name``, if captured."""
        return self._by_name.get((namespace, name))

    def table_by_oid(self, oid: int) -> CatalogTable | None:
        """The table with relation OID ``oid``, if captured."""
        return self._by_oid.get(oid)

    def table_for(self, oid: int, namespace: str, name: str,
                  columns: Iterable[tuple[str, int]]) -> CatalogTable | None:
        """The catalog's description of the relation a Relation message describes.

        By relation OID first: a table renamed since the change is still the same table.
        Else by name, but only when the table found has the very columns (names and type
        OIDs) the message lists: a table dropped and recreated under the same name since
        the change is another table, and describing the change by it would give the
        change another key (the connector, which looks tables up by name, does that;
        golden events_rename). ``columns`` are the message's ``(name, type OID)`` pairs.
        """
        table = self._by_oid.get(oid)
        if table is not None:
            return table
        table = self._by_name.get((namespace, name))
        if table is None:
            return None
        mine = [(c.name, c.type_oid) for c in table.columns if not c.generated]
        return table if mine == list(columns) else None

    def type(self, oid: int) -> CatalogType | None:
        """The non-built-in type with OID ``oid``, if known."""
        return self._types.get(oid)

    def filtered(self, schemas: Iterable[str]) -> CatalogSnapshot:
        """Only the tables of the given schemas (types are kept)."""
        wanted = set(schemas)
        return attrs.evolve(self, tables=tuple(t for t in self.tables if t.namespace in wanted))

    # -- JSON -----------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The snapshot as a JSON-ready dict (the same shape :data:`CATALOG_QUERY` returns)."""
        return {
            "format": FORMAT_VERSION,
            "database": self.database,
            "server_version": self.server_version,
            "tables": [
                {**_plain(t, exclude=("columns",)), "columns": [_plain(c) for c in t.columns]}
                for t in self.tables
            ],
            "types": [_plain(t) for t in self.types],
        }

    def dumps(self) -> str:
        """The snapshot as a JSON string."""
        return json.dumps(self.to_json(), ensure_ascii=False, indent=1)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | str | bytes) -> CatalogSnapshot:
        """Read a snapshot from its JSON form (a dict or the JSON text)."""
        if isinstance(obj, (str, bytes)):
            try:
                obj = json.loads(obj)
            except ValueError as exc:
                hint = (" (one JSON document is expected: is this a capture or records file?)"
                        if "Extra data" in str(exc) else "")
                raise CatalogError(f"catalog snapshot is not valid JSON: {exc}{hint}") from None
            except RecursionError:
                raise CatalogError(
                    "catalog snapshot is not valid JSON: nested too deeply") from None
        if not isinstance(obj, Mapping):
            raise CatalogError("catalog snapshot must be a JSON object")
        if "format" not in obj or "tables" not in obj:
            raise CatalogError(
                "not a catalog snapshot (no \"format\" and \"tables\"): a catalog snapshot is"
                " the JSON document `pgcdc-events catalog --dsn DSN --output catalog.json` writes"
                " (the captured database's tables, columns, keys, defaults and types; see"
                " examples/demo-catalog.json)")
        if obj.get("format") != FORMAT_VERSION:
            raise CatalogError(f"unsupported catalog snapshot format {obj.get('format')!r}; "
                               f"this version reads format {FORMAT_VERSION}")
        try:
            tables = tuple(
                CatalogTable(
                    int(t["oid"]), t["namespace"], t["name"], t["replica_identity"],
                    tuple(_column(c) for c in t.get("columns") or ()),
                )
                for t in obj.get("tables") or ()
            )
            types = tuple(_type(t) for t in obj.get("types") or ())
            return cls(str(obj["database"]), str(obj["server_version"]), tables, types)
        except (KeyError, TypeError, ValueError) as exc:
            raise CatalogError(f"malformed catalog snapshot: {exc!r}") from None

    @classmethod
    def load(cls, path: str) -> CatalogSnapshot:
        """Read a snapshot from a JSON file."""
        with open(path, encoding="utf-8") as fh:
            return cls.from_json(fh.read())

    def save(self, path: str) -> None:
        """Write the snapshot to a JSON file."""
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(self.dumps())
            fh.write("\n")


def _plain(obj: Any, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    out = {}
    for field in attrs.fields(type(obj)):
        if field.init and field.name not in exclude:
            value = getattr(obj, field.name)
            out[field.name] = list(value) if isinstance(value, tuple) else value
    return out


def _column(c: Mapping[str, Any]) -> CatalogColumn:
    return CatalogColumn(
        c["name"], int(c["position"]), int(c["type_oid"]), int(c.get("type_modifier", -1)),
        bool(c.get("not_null", False)), c.get("default"), c.get("generated") or "",
        c.get("primary_key_position"), c.get("replica_identity_position"),
        c.get("unique_index_position"),
    )


def _type(t: Mapping[str, Any]) -> CatalogType:
    labels = t.get("enum_labels")
    return CatalogType(
        int(t["oid"]), t["namespace"], t["name"], t["type"], t["category"],
        t.get("delimiter") or ",", int(t.get("element_oid") or 0), int(t.get("base_oid") or 0),
        int(t.get("base_type_modifier", -1)), bool(t.get("not_null", False)),
        tuple(labels) if labels is not None else None,
    )


def load_catalog(rows: Iterable[Any]) -> CatalogSnapshot:
    """Build a snapshot from the rows :data:`CATALOG_QUERY` returned, with any driver.

    Accepts the single row as a sequence or mapping whose value is the JSON text
    (or an already decoded dict, as some drivers return).
    """
    for row in rows:
        value = next(iter(row.values())) if isinstance(row, Mapping) else row[0]
        return CatalogSnapshot.from_json(value)
    raise CatalogError("the catalog query returned no rows")


def fetch_catalog(connection: Any) -> CatalogSnapshot:
    """Run :data:`CATALOG_QUERY` over a pg8000 connection (native or DB-API) and load it."""
    if hasattr(connection, "run"):
        return load_catalog(connection.run(CATALOG_QUERY))
    cursor = connection.cursor()
    try:
        cursor.execute(CATALOG_QUERY)
        return load_catalog(cursor.fetchall())
    finally:
        cursor.close()



def describes(catalog: CatalogSnapshot, relation: Relation) -> bool:
    """Whether ``catalog`` describes the table of ``relation`` as the stream sends it: the
    table by its OID, and every column the message lists with its type OID and modifier
    (:func:`catalog_table_for` then has nothing to warn about)."""
    table = catalog.table_for(relation.relation_id, relation.namespace, relation.name,
                              [(c.name, c.type_oid) for c in relation.columns])
    if table is None or table.oid != relation.relation_id:
        return False
    for column in relation.columns:
        known = table.column(column.name)
        if known is None or (known.type_oid, known.type_modifier) != (column.type_oid,
                                                                       column.type_modifier):
            return False
    return True


def catalog_table_for(catalog: CatalogSnapshot | None, relation: Relation
                      ) -> CatalogTable | None:
    """The catalog's table for a Relation message, checked against it (``None`` without a
    catalog).

    A :class:`CatalogMismatchWarning` names the table, and the columns, when the
    snapshot does not describe what the stream sends: the table is missing, or only a
    table of that name with other columns under another OID is there (the change is then
    decoded without catalog information, under the type layer's documented assumptions);
    the table has another OID (a snapshot of another database, or the table was
    recreated); or a column the Relation sends is missing or has another type OID or
    modifier (renamed or altered since; its value is still read by the Relation's type,
    but NOT NULL and the default come from the snapshot's column of that name, or are
    assumed). The warning is there because a snapshot from the wrong moment or database
    changes optionality and defaults without any other sign. The snapshot may have more
    columns than the Relation: generated columns and those outside a publication's
    column list are not sent.
    """
    if catalog is None:
        return None
    qualified = f'"{relation.namespace}"."{relation.name}"'
    where = f"the catalog snapshot of database {catalog.database!r}"
    table = catalog.table_for(relation.relation_id, relation.namespace, relation.name,
                              [(c.name, c.type_oid) for c in relation.columns])
    named = table or catalog.table(relation.namespace, relation.name)
    if named is None:
        _mismatch(f"table {qualified} is not in {where}: decoded without its NOT NULL, "
                  "defaults and primary key (every field optional, the replica identity as key)")
        return None
    problems = []
    if named.oid != relation.relation_id:
        problems.append(f"OID {relation.relation_id} in the stream, {named.oid} in the snapshot "
                        "(a snapshot of another database, or the table was recreated)")
    for column in relation.columns:
        known = named.column(column.name)
        if known is None:
            problems.append(f"column {column.name!r} is not in the snapshot (renamed or added"
                            " since?)")
        elif (known.type_oid, known.type_modifier) != (column.type_oid, column.type_modifier):
            problems.append(f"column {column.name!r} has type OID {column.type_oid} modifier "
                            f"{column.type_modifier} in the stream, {known.type_oid} modifier "
                            f"{known.type_modifier} in the snapshot")
    if table is None:
        _mismatch(f"table {qualified} of the stream is not the one in {where}: "
                  + "; ".join(problems) + "; decoded without its NOT NULL, defaults and "
                  "primary key (every field optional, the replica identity as key)")
    elif problems:
        _mismatch(f"table {qualified} does not match {where}: " + "; ".join(problems)
                  + " (NOT NULL and defaults of those columns are assumed)")
    return table


def _mismatch(text: str) -> None:
    warnings.warn(text + " (take the snapshot from the captured database when the capture is "
                  "made: pgcdc-events catalog)", CatalogMismatchWarning, stacklevel=4)
