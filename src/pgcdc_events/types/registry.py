"""Type resolution: from a column's type OID to what kind of type it is.

Built-in types are known statically (:mod:`pgcdc_events.types.oids`). Other
types are resolved through the catalog snapshot when one is given, and through
the pgoutput Type messages of the stream otherwise. A Type message names a
domain by its *base* type and says nothing about enums or composites, so without
a catalog snapshot a domain maps as its base type (losing the domain's
modifier), and a user-defined type that is not a known extension type
(hstore, ltree, citext, geometry, geography...) is an unknown type.
"""

from __future__ import annotations

from typing import Final

import attrs

from pgcdc_events.protocol.messages import Type
from pgcdc_events.types.catalog import CatalogSnapshot
from pgcdc_events.types.oids import BUILTIN_TYPES, OID_BY_NAME

__all__ = ["EXTENSION_TYPES", "PgType", "TypeRegistry"]

#: Extension types recognised by name, as Debezium recognises them.
#: (pgvector's vector types, which Debezium 3.x maps too, are not mapped here yet: with no
#: recording of the connector's output for them they stay unknown types.)
EXTENSION_TYPES: Final = frozenset({"hstore", "ltree", "citext", "geometry", "geography", "isbn"})


@attrs.frozen
class PgType:
    """A resolved PostgreSQL type.

    ``kind`` is ``base``, ``array``, ``enum``, ``domain``, ``composite``, ``range``,
    ``multirange``, ``pseudo`` or ``unknown``. Arrays carry their ``element``,
    domains their ``base`` and ``base_type_modifier``, enums their ``enum_labels``
    (``None`` when not known).
    """

    oid: int
    namespace: str
    name: str
    kind: str
    element: PgType | None = None
    base: PgType | None = None
    base_type_modifier: int = -1
    enum_labels: tuple[str, ...] | None = None
    delimiter: str = ","

    @property
    def root(self) -> PgType:
        """The type itself, or for a domain the first non-domain type beneath it."""
        t = self
        while t.kind == "domain" and t.base is not None:
            t = t.base
        return t

    @property
    def is_builtin(self) -> bool:
        """Whether the type is one of PostgreSQL's built-in types."""
        return self.oid in BUILTIN_TYPES


_KIND_BY_TYPTYPE: Final = {"d": "domain", "e": "enum", "c": "composite", "r": "range",
                           "m": "multirange", "p": "pseudo"}


class TypeRegistry:
    """Resolves type OIDs using built-ins, an optional catalog snapshot and Type messages."""

    def __init__(self, catalog: CatalogSnapshot | None = None) -> None:
        self.catalog = catalog
        self._messages: dict[int, Type] = {}
        self._cache: dict[int, PgType] = {}

    def use_catalog(self, catalog: CatalogSnapshot) -> None:
        """Resolve from now on by ``catalog`` (a newer snapshot of the same database)."""
        self.catalog = catalog
        self._cache.clear()

    def observe(self, message: Type) -> None:
        """Record a pgoutput Type message (later resolutions of its OID use it)."""
        if self._messages.get(message.type_oid) != message:
            self._messages[message.type_oid] = message
            self._cache.pop(message.type_oid, None)

    def resolve(self, oid: int) -> PgType:
        """The type with OID ``oid`` (``kind='unknown'`` when nothing describes it)."""
        cached = self._cache.get(oid)
        if cached is None:
            cached = self._resolve(oid, 0)
            self._cache[oid] = cached
        return cached

    def _resolve(self, oid: int, depth: int) -> PgType:
        if depth > 16:
            return PgType(oid, "", f"oid:{oid}", "unknown")
        builtin = BUILTIN_TYPES.get(oid)
        if builtin is not None:
            if builtin.category == "A" and builtin.element:
                element = self._resolve(builtin.element, depth + 1)
                return PgType(oid, "pg_catalog", builtin.name, "array", element=element,
                              delimiter=element.delimiter)
            kind = "range" if builtin.category == "R" else "base"
            if builtin.category == "P":
                kind = "pseudo"
            return PgType(oid, "pg_catalog", builtin.name, kind, delimiter=builtin.delimiter)
        if self.catalog is not None:
            ct = self.catalog.type(oid)
            if ct is not None:
                kind = _KIND_BY_TYPTYPE.get(ct.type, "base")
                if kind == "base" and ct.category == "A" and ct.element_oid:
                    element = self._resolve(ct.element_oid, depth + 1)
                    return PgType(oid, ct.namespace, ct.name, "array", element=element,
                                  delimiter=element.delimiter)
                base = self._resolve(ct.base_oid, depth + 1) if kind == "domain" else None
                return PgType(oid, ct.namespace, ct.name, kind, base=base,
                              base_type_modifier=ct.base_type_modifier,
                              enum_labels=ct.enum_labels, delimiter=ct.delimiter)
        message = self._messages.get(oid)
        if message is not None:
            return self._from_name(oid, message.namespace, message.name, depth)
        return PgType(oid, "", f"oid:{oid}", "unknown")

    def _from_name(self, oid: int, namespace: str, name: str, depth: int) -> PgType:
        """Resolve a type known only by (base) name, as a Type message gives it."""
        if namespace in ("", "pg_catalog") and name in OID_BY_NAME:
            # A domain over a built-in type: pgoutput sends the base type's name.
            base = self._resolve(OID_BY_NAME[name], depth + 1)
            return PgType(oid, namespace, name, "domain", base=base)
        if name in EXTENSION_TYPES:
            return PgType(oid, namespace, name, "base")
        if name.startswith("_"):
            element_name = name[1:]
            element = self._by_name(namespace, element_name, depth)
            return PgType(oid, namespace, name, "array", element=element)
        return PgType(oid, namespace, name, "unknown")

    def _by_name(self, namespace: str, name: str, depth: int) -> PgType:
        for oid, message in self._messages.items():
            if message.name == name and message.namespace == namespace:
                return self._resolve(oid, depth + 1)
        if name in OID_BY_NAME:
            return self._resolve(OID_BY_NAME[name], depth + 1)
        kind = "base" if name in EXTENSION_TYPES else "unknown"
        return PgType(0, namespace, name, kind)
