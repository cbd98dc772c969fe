"""Table definitions for generated and hand-written tests: columns, keys, replica identity.

A :class:`TableDef` is what a test needs to know about a table to produce the
messages a server would send for it: its Relation message, the Type messages
of its non-built-in column types, and the catalog snapshot entries (NOT NULL,
primary key, enum labels) the event decoder reads. Build one by hand with
:func:`table`, from a :class:`~pgcdc_events.types.catalog.CatalogSnapshot` with
:func:`tables_from_catalog`, or draw them with the hypothesis strategies of
:mod:`pgcdc_events.testing.strategies`.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import attrs

from pgcdc_events.errors import ConfigurationError
from pgcdc_events.protocol.messages import Relation, RelationColumn, Type
from pgcdc_events.types.catalog import CatalogColumn, CatalogSnapshot, CatalogTable, CatalogType
from pgcdc_events.types.oids import BUILTIN_TYPES, OID_BY_NAME

__all__ = [
    "EXTENSION_TYPES",
    "TOASTABLE",
    "ColumnDef",
    "ColumnType",
    "TableDef",
    "catalog_for",
    "column_type",
    "quote_ident",
    "table",
    "tables_from_catalog",
]

#: Extension types and the (fixed, made-up) OIDs generated tables give them and their arrays.
EXTENSION_TYPES: Final[dict[str, tuple[str, int, int]]] = {
    "citext": ("citext", 16_390, 16_391),
    "hstore": ("hstore", 16_392, 16_393),
    "ltree": ("ltree", 16_394, 16_395),
    "geometry": ("postgis", 16_396, 16_397),
    "geography": ("postgis", 16_398, 16_399),
}

#: Types whose long values generated tables keep out of line (``SET STORAGE EXTERNAL``).
TOASTABLE: Final = frozenset({"text", "varchar", "bytea", "json", "jsonb", "citext"})
_ALIASES: Final = {
    "integer": "int4", "int": "int4", "smallint": "int2", "bigint": "int8", "boolean": "bool",
    "real": "float4", "double precision": "float8", "float": "float8", "decimal": "numeric",
    "character varying": "varchar", "character": "bpchar", "char": "bpchar",
    "bit varying": "varbit", "timestamp without time zone": "timestamp",
    "timestamp with time zone": "timestamptz", "time without time zone": "time",
    "time with time zone": "timetz", '"char"': "char",
}
_TYPE: Final = re.compile(r"\s*(.+?)\s*(?:\(\s*(\d+)\s*(?:,\s*(-?\d+)\s*)?\))?\s*((?:\[\])*)\s*")


def quote_ident(name: str) -> str:
    """An always-quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


@attrs.frozen
class ColumnType:
    """A resolved column type: names, OIDs and modifier.

    ``name`` is the base type's ``pg_type`` name (``int4``, ``numeric``, an enum's
    name); ``sql`` how to write the column's type in DDL; ``oid`` the column's
    type OID (the array type's for arrays); ``args`` the modifier's arguments.
    """

    name: str
    sql: str
    oid: int
    element_oid: int
    type_modifier: int
    args: tuple[int, ...]
    is_array: bool
    extension: str | None = None
    enum_labels: tuple[str, ...] | None = None

    @property
    def builtin(self) -> bool:
        """Whether the column's type is one of PostgreSQL's built-in types."""
        return self.oid in BUILTIN_TYPES


def _typmod(name: str, args: tuple[int, ...]) -> int:
    if not args:
        return -1
    if name == "numeric":
        precision, scale = args[0], args[1] if len(args) > 1 else 0
        return ((precision << 16) | (scale & 0xFFFF)) + 4
    if name in ("varchar", "bpchar"):
        return args[0] + 4
    return args[0]


def _enum_oid(name: str) -> int:
    """A stable made-up OID for an enum type (and ``+1`` for its array type)."""
    return 20_000 + (zlib.crc32(name.encode("utf-8")) % 10_000) * 2


def column_type(sql: str, enums: Mapping[str, Sequence[str]] | None = None) -> ColumnType:
    """Resolve a type as written in DDL (``numeric(10,2)``, ``text[]``, ``integer``, an enum)."""
    match = _TYPE.fullmatch(sql)
    if match is None:
        raise ConfigurationError(f"cannot read column type {sql!r}")
    raw, a1, a2, brackets = match.groups()
    base = _ALIASES.get(raw.lower(), raw.lower() if raw.lower() in OID_BY_NAME
                        or raw.lower() in EXTENSION_TYPES else raw)
    args = tuple(int(a) for a in (a1, a2) if a is not None)
    if not args and (base, raw.lower()) in (("bpchar", "char"), ("bpchar", "character"),
                                            ("bit", "bit")):
        args = (1,)  # as PostgreSQL reads a bare char or bit
    is_array = bool(brackets)
    extension = None
    labels = None
    if enums is not None and base in enums:
        labels = tuple(enums[base])
        element = _enum_oid(base)
        array_oid = element + 1
    elif base in EXTENSION_TYPES:
        extension, element, array_oid = EXTENSION_TYPES[base]
    elif base in OID_BY_NAME:
        element = OID_BY_NAME[base]
        array_oid = BUILTIN_TYPES[element].array
    else:
        raise ConfigurationError(f"unknown column type {sql!r} (declare enums with enums=...)")
    typmod = _typmod(base, args)
    shown = ("char" if base == "char" else
             base if base in OID_BY_NAME or base in EXTENSION_TYPES else quote_ident(base))
    if base == "char":
        shown = '"char"'
    if args:
        shown += "(" + ",".join(map(str, args)) + ")"
    return ColumnType(base, shown + ("[]" if is_array else ""),
                      array_oid if is_array else element, element, typmod, args, is_array,
                      extension, labels)


@attrs.frozen
class ColumnDef:
    """A column: name, type (as written in DDL) and NOT NULL."""

    name: str
    type: str
    not_null: bool = False


@attrs.frozen
class TableDef:
    """A table as the tests see it.

    ``primary_key`` lists key columns in key order (empty: no primary key).
    ``replica_identity`` is ``d`` (default: the primary key), ``f`` (full), ``i``
    (an index on ``identity_columns``) or ``n`` (nothing). ``enums`` declares the
    labels of enum types the columns use. ``relation_id`` is the OID in messages.
    """

    schema: str
    name: str
    columns: tuple[ColumnDef, ...]
    primary_key: tuple[str, ...] = ()
    replica_identity: str = "d"
    identity_columns: tuple[str, ...] = ()
    relation_id: int = 16_384
    enums: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def __attrs_post_init__(self) -> None:
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"{self.qualified}: duplicate column names")
        for key in (*self.primary_key, *self.identity_columns):
            if key not in names:
                raise ConfigurationError(f"{self.qualified}: no column {key!r}")
        if self.replica_identity not in ("d", "f", "i", "n"):
            raise ConfigurationError("replica_identity is one of d, f, i, n")
        if self.replica_identity == "i" and not self.identity_columns:
            raise ConfigurationError("replica identity 'i' needs identity_columns")

    @property
    def qualified(self) -> str:
        """``schema.table`` as Debezium names it (unquoted)."""
        return f"{self.schema}.{self.name}"

    @property
    def sql_name(self) -> str:
        """The quoted, schema-qualified name for SQL."""
        return f"{quote_ident(self.schema)}.{quote_ident(self.name)}"

    def types(self) -> tuple[ColumnType, ...]:
        """The resolved type of each column."""
        enums = dict(self.enums)
        return tuple(column_type(c.type, enums) for c in self.columns)

    def column_index(self, name: str) -> int:
        """Position of column ``name``."""
        for i, c in enumerate(self.columns):
            if c.name == name:
                return i
        raise KeyError(name)

    @property
    def identity(self) -> tuple[str, ...]:
        """The replica-identity columns: what old-key tuples carry (all columns for FULL)."""
        if self.replica_identity == "d":
            return self.primary_key
        if self.replica_identity == "i":
            return self.identity_columns
        if self.replica_identity == "f":
            return tuple(c.name for c in self.columns)
        return ()

    @property
    def can_update(self) -> bool:
        """Whether UPDATE and DELETE are allowed on the published table (it has an identity)."""
        return bool(self.identity)

    def relation(self, xid: int | None = None) -> Relation:
        """The Relation message pgoutput sends for this table."""
        identity = set(self.identity)
        cols = tuple(RelationColumn(1 if c.name in identity else 0, c.name, t.oid,
                                    t.type_modifier)
                     for c, t in zip(self.columns, self.types(), strict=True))
        return Relation(self.relation_id, self.schema, self.name, self.replica_identity, cols,
                        xid)

    def type_messages(self, xid: int | None = None) -> list[Type]:
        """The Type messages pgoutput sends before the Relation (non-built-in column types)."""
        out: list[Type] = []
        seen: set[int] = set()
        for t in self.types():
            if t.builtin or t.oid in seen:
                continue
            seen.add(t.oid)
            base = t.name if not t.is_array else "_" + t.name
            namespace = "public"
            out.append(Type(t.oid, namespace, base, xid))
        return out

    def catalog_table(self) -> CatalogTable:
        """The table as a catalog snapshot describes it."""
        key_at = {name: i + 1 for i, name in enumerate(self.primary_key)}
        ident_at = {name: i + 1 for i, name in enumerate(self.identity_columns)}
        if self.replica_identity == "d":
            ident_at = dict(key_at)
        cols = tuple(
            CatalogColumn(c.name, i + 1, t.oid, t.type_modifier,
                          c.not_null or c.name in key_at, None, "", key_at.get(c.name),
                          ident_at.get(c.name) if self.replica_identity in "di" else None)
            for i, (c, t) in enumerate(zip(self.columns, self.types(), strict=True)))
        return CatalogTable(self.relation_id, self.schema, self.name, self.replica_identity, cols)

    def catalog_types(self) -> list[CatalogType]:
        """Catalog entries of the non-built-in types the columns use (and their arrays)."""
        out: list[CatalogType] = []
        for t in self.types():
            if t.builtin:
                continue
            if t.enum_labels is not None:
                out.append(CatalogType(t.element_oid, "public", t.name, "e", "E",
                                       enum_labels=t.enum_labels))
            else:
                out.append(CatalogType(t.element_oid, "public", t.name, "b", "U"))
            out.append(CatalogType(t.element_oid + 1, "public", "_" + t.name, "b", "A",
                                   element_oid=t.element_oid))
        return out

    def create_sql(self) -> list[str]:
        """DDL creating the table (and its schema, enums and replica identity) on a server."""
        out = [f"CREATE SCHEMA IF NOT EXISTS {quote_ident(self.schema)}"]
        for name, labels in self.enums:
            out.append(f"DO $$ BEGIN CREATE TYPE {quote_ident(name)} AS ENUM ("
                       + ", ".join("'" + label.replace("'", "''") + "'" for label in labels)
                       + "); EXCEPTION WHEN duplicate_object THEN NULL; END $$")
        cols = [f"{quote_ident(c.name)} {t.sql}{' NOT NULL' if c.not_null else ''}"
                for c, t in zip(self.columns, self.types(), strict=True)]
        if self.primary_key:
            cols.append("PRIMARY KEY (" + ", ".join(map(quote_ident, self.primary_key)) + ")")
        out.append(f"CREATE TABLE {self.sql_name} (" + ", ".join(cols) + ")")
        for c, t in zip(self.columns, self.types(), strict=True):
            if t.name in TOASTABLE and not t.is_array:
                # out of line and uncompressed: long values travel as unchanged-TOAST markers
                out.append(f"ALTER TABLE {self.sql_name} ALTER COLUMN {quote_ident(c.name)} "
                           "SET STORAGE EXTERNAL")
        if self.replica_identity == "i":
            index = quote_ident(f"{self.name[:40]}_ident")
            out.append(f"CREATE UNIQUE INDEX {index} ON {self.sql_name} ("
                       + ", ".join(map(quote_ident, self.identity_columns)) + ")")
            out.append(f"ALTER TABLE {self.sql_name} REPLICA IDENTITY USING INDEX {index}")
        elif self.replica_identity != "d":
            mode = {"f": "FULL", "n": "NOTHING"}[self.replica_identity]
            out.append(f"ALTER TABLE {self.sql_name} REPLICA IDENTITY {mode}")
        return out


def table(qualified: str, columns: Mapping[str, str] | Iterable[ColumnDef | tuple[str, str]],
          *, primary_key: str | Sequence[str] = (), replica_identity: str = "default",
          identity_columns: Sequence[str] = (), not_null: Sequence[str] = (),
          relation_id: int | None = None, enums: Mapping[str, Sequence[str]] | None = None
          ) -> TableDef:
    """A table from a small declarative description.

    ``table("shop.orders", {"id": "bigint", "total": "numeric(12,2)"}, primary_key="id")``.
    ``qualified`` is ``schema.table`` (``public`` when no schema is given); a name
    containing dots can be given as ``("schema", "ta.ble")``. ``replica_identity``
    is ``default``, ``full``, ``index`` (with ``identity_columns``) or ``nothing``.
    """
    schema, _, name = qualified.rpartition(".")
    schema = schema or "public"
    items = columns.items() if isinstance(columns, Mapping) else columns
    keys = (primary_key,) if isinstance(primary_key, str) else tuple(primary_key)
    nn = set(not_null) | set(keys) | set(identity_columns)  # key columns are NOT NULL
    cols = tuple(c if isinstance(c, ColumnDef) else ColumnDef(c[0], c[1], c[0] in nn)
                 for c in items)
    ident = {"default": "d", "full": "f", "index": "i", "nothing": "n"}.get(
        replica_identity, replica_identity)
    rid = relation_id if relation_id is not None else 16_384 + zlib.crc32(
        qualified.encode("utf-8")) % 100_000
    return TableDef(schema, name, cols, keys, ident, tuple(identity_columns), rid,
                    tuple((k, tuple(v)) for k, v in (enums or {}).items()))


def catalog_for(tables: Iterable[TableDef], database: str = "postgres") -> CatalogSnapshot:
    """The catalog snapshot describing ``tables`` (what ``pgcdc-events catalog`` would save)."""
    tables = list(tables)
    types: dict[int, CatalogType] = {}
    for t in tables:
        for ct in t.catalog_types():
            types.setdefault(ct.oid, ct)
    return CatalogSnapshot(database, "15.0", tuple(t.catalog_table() for t in tables),
                           tuple(sorted(types.values(), key=lambda ct: ct.oid)))


def _type_sql(oid: int, typmod: int, snapshot: CatalogSnapshot
              ) -> tuple[str, tuple[str, tuple[str, ...]] | None]:
    builtin = BUILTIN_TYPES.get(oid)
    suffix = ""
    enum = None
    if builtin is not None:
        if builtin.category == "A" and builtin.element:
            suffix, builtin = "[]", BUILTIN_TYPES[builtin.element]
        name = builtin.name
    else:
        ct = snapshot.type(oid)
        if ct is None:
            raise ConfigurationError(f"type OID {oid} is neither built in nor in the snapshot")
        if ct.category == "A" and ct.element_oid:
            suffix = "[]"
            ct = snapshot.type(ct.element_oid) or ct
        name = ct.name
        if ct.enum_labels is not None:
            enum = (name, ct.enum_labels)
    if name == "char":
        name = '"char"'  # the one-byte internal type, not char(n)
    if typmod >= 0:
        if name == "numeric":
            name += f"({(typmod - 4) >> 16},{(typmod - 4) & 0xFFFF})"
        elif name in ("varchar", "bpchar"):
            name += f"({typmod - 4})"
        elif name in ("bit", "varbit", "time", "timetz", "timestamp", "timestamptz"):
            name += f"({typmod})"
    return name + suffix, enum


def tables_from_catalog(snapshot: CatalogSnapshot, names: Iterable[str] | None = None
                        ) -> list[TableDef]:
    """Table definitions for the tables of a catalog snapshot (``names``: ``schema.table``)."""
    wanted = set(names) if names is not None else None
    out = []
    for ct in snapshot.tables:
        if wanted is not None and f"{ct.namespace}.{ct.name}" not in wanted:
            continue
        enums: dict[str, tuple[str, ...]] = {}
        cols = []
        for c in ct.columns:
            if c.generated:
                continue
            sql, enum = _type_sql(c.type_oid, c.type_modifier, snapshot)
            if enum is not None:
                enums[enum[0]] = enum[1]
            cols.append(ColumnDef(c.name, sql, c.not_null))
        ident = tuple(c.name for c in sorted(
            (c for c in ct.columns if c.replica_identity_position is not None),
            key=lambda c: c.replica_identity_position or 0))
        out.append(TableDef(ct.namespace, ct.name, tuple(cols), ct.primary_key,
                            ct.replica_identity, ident if ct.replica_identity == "i" else (),
                            ct.oid, tuple(enums.items())))
    return out
