"""The versioned relation registry: a capture's Relation and Type messages, replayed once.

A change names its table only by the OID of the last Relation message before
it. The Relation and Type messages of a capture are few, so they are collected
to the driver, replayed in order exactly as :class:`~pgcdc_events.events.EventDecoder`
replays them, and broadcast: every change can then be decoded on its own, given
its position. A *version* is one table schema in force for one relation OID
between two positions; consecutive Relation messages that describe the same
thing (pgoutput repeats them per session) stay one version.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from pgcdc_events.events.config import EventConfig
from pgcdc_events.events.tables import TableSchema, build_table_schema
from pgcdc_events.protocol.decoder import parse_message
from pgcdc_events.protocol.messages import Relation, RelationColumn, Type
from pgcdc_events.spark.errors import SparkDecodeError
from pgcdc_events.types.catalog import CatalogSnapshot, CatalogTable, catalog_table_for
from pgcdc_events.types.mapper import TypeMapper
from pgcdc_events.types.registry import TypeRegistry

__all__ = ["RelationRegistry", "Version", "catalog_relation", "catalog_table_schemas"]

#: The end of an open version (no later Relation message for its OID).
OPEN_END = 2**63 - 1


@attrs.frozen
class Version:
    """One table schema in force for relation ``relation_id`` on positions ``(start, end)``.

    ``table`` is the qualified name (``schema.table``) of the output it feeds,
    ``None`` when the configuration filters the table out.
    """

    index: int
    relation_id: int
    start: int
    end: int
    table: str | None


class RelationRegistry:
    """Versions of every captured table, from the capture's Relation and Type messages.

    ``messages`` are ``(position, in_stream, data)`` of the Relation and Type
    messages, in any order. Table schemas are rebuilt lazily wherever the registry
    is unpickled (each Spark worker replays the few messages once).
    """

    def __init__(self, messages: Iterable[tuple[int, bool, bytes]], config: EventConfig,
                 catalog: CatalogSnapshot | None = None) -> None:
        self.messages = tuple(sorted((int(p), bool(s), bytes(d)) for p, s, d in messages))
        self.config = config
        self.catalog = catalog
        self.versions: tuple[Version, ...] = ()
        #: Qualified names of the tables, in order of first appearance.
        self.tables: tuple[str, ...] = ()
        self._schemas: list[TableSchema | None] | None = None
        self._starts: dict[int, list[int]] = {}
        self._replay()

    def __getstate__(self) -> dict[str, Any]:
        return {"messages": self.messages, "config": self.config, "catalog": self.catalog,
                "versions": self.versions, "tables": self.tables}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.messages = state["messages"]
        self.config = state["config"]
        self.catalog = state["catalog"]
        self.versions = state["versions"]
        self.tables = state["tables"]
        self._schemas = None
        self._starts = {}
        for v in self.versions:
            self._starts.setdefault(v.relation_id, []).append(v.index)

    # -- replay --------------------------------------------------------------------------
    def _replay(self) -> None:
        """Replay the messages; sets the versions (driver) and the schemas (everywhere)."""
        types = TypeRegistry(self.catalog)
        mapper = TypeMapper(self.config.types, types)
        schemas: list[TableSchema | None] = []
        versions: list[Version] = []
        tables: dict[str, None] = {}
        current: dict[int, tuple[int, Any]] = {}  # relation OID -> (version index, signature)
        for position, in_stream, data in self.messages:
            try:
                message = parse_message(data, in_stream=in_stream)
            except Exception as exc:
                raise SparkDecodeError(f"unreadable schema message: {exc}",
                                       position=position) from None
            if isinstance(message, Type):
                types.observe(message)
                continue
            if not isinstance(message, Relation):
                raise SparkDecodeError(f"expected a Relation or Type message, got "
                                       f"{type(message).__name__}", position=position)
            relation = attrs.evolve(message, xid=None)
            signature = (relation, tuple(types.resolve(c.type_oid) for c in relation.columns))
            known = current.get(relation.relation_id)
            if known is not None and known[1] == signature:
                continue
            schema = self._build(relation, mapper)
            index = len(schemas)
            schemas.append(schema)
            if known is not None:
                old = versions[known[0]]
                versions[known[0]] = attrs.evolve(old, end=position)
            table = schema.qualified if schema is not None else None
            if table is not None:
                tables.setdefault(table)
            versions.append(Version(index, relation.relation_id, position, OPEN_END, table))
            current[relation.relation_id] = (index, signature)
        self._schemas = schemas
        if not self.versions:
            self.versions = tuple(versions)
            self.tables = tuple(tables)
            self._starts = {}
            for v in self.versions:
                self._starts.setdefault(v.relation_id, []).append(v.index)

    def _build(self, relation: Relation, mapper: TypeMapper) -> TableSchema | None:
        config = self.config
        if not config.includes_table(relation.namespace, relation.name):
            return None
        return build_table_schema(relation, mapper, config,
                                  catalog_table_for(self.catalog, relation))

    # -- lookups ------------------------------------------------------------------------------
    def schema(self, version: int) -> TableSchema | None:
        """The table schema of a version (``None`` for a filtered-out table)."""
        if self._schemas is None:
            self._replay()
        assert self._schemas is not None
        return self._schemas[version]

    def version_at(self, relation_id: int, position: int) -> Version | None:
        """The version in force for a change to ``relation_id`` at ``position``."""
        indexes = self._starts.get(relation_id)
        if not indexes:
            return None
        starts = [self.versions[i].start for i in indexes]
        at = bisect.bisect_left(starts, position) - 1
        return self.versions[indexes[at]] if at >= 0 else None

    def table_versions(self, table: str) -> list[Version]:
        """The versions feeding output ``table`` (``schema.table``), in order."""
        return [v for v in self.versions if v.table == table]

    def table_index(self, table: str) -> int:
        """The index of output ``table`` in :attr:`tables`."""
        try:
            return self.tables.index(table)
        except ValueError:
            raise SparkDecodeError(f"no table {table!r} in the capture; captured: "
                                   f"{', '.join(self.tables) or 'none'}") from None


def catalog_relation(table: CatalogTable) -> Relation:
    """The Relation message PostgreSQL would send for a catalog table (generated columns left
    out, replica-identity columns flagged as keys)."""
    ident = table.replica_identity
    columns = []
    for col in table.columns:
        if col.generated:
            continue
        if ident == "f":
            key = True
        elif ident == "d":
            key = col.primary_key_position is not None
        elif ident == "i":
            key = col.replica_identity_position is not None
        else:
            key = False
        columns.append(RelationColumn(1 if key else 0, col.name, col.type_oid, col.type_modifier))
    return Relation(table.oid, table.namespace, table.name, ident, tuple(columns))


def catalog_table_schemas(catalog: CatalogSnapshot, config: EventConfig,
                          tables: Sequence[str] | None = None) -> dict[str, TableSchema]:
    """Table schemas of a catalog snapshot's tables (``schema.table`` keys), without a capture.

    What the decoder would build from each table's Relation message: used for the
    schemas of Debezium JSON records read from Kafka. ``tables`` limits the result.
    """
    mapper = TypeMapper(config.types, TypeRegistry(catalog))
    out: dict[str, TableSchema] = {}
    for table in catalog.tables:
        qualified = f"{table.namespace}.{table.name}"
        if tables is not None and qualified not in tables:
            continue
        if not config.includes_table(table.namespace, table.name):
            continue
        out[qualified] = build_table_schema(catalog_relation(table), mapper, config, table)
    return out
