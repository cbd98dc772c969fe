"""How a Relation message finds its catalog table (CatalogSnapshot.table_for).

The golden recording events_rename shows the renamed and the dropped-and-recreated
cases against the real connector; these cover the name fallback with hand-built
snapshots (a snapshot taken from another copy of the database has other OIDs).
"""

from __future__ import annotations

from pgcdc_events.types.catalog import CatalogColumn, CatalogSnapshot, CatalogTable

_T = CatalogTable(100, "public", "t", "d", (
    CatalogColumn("id", 1, 23, not_null=True, primary_key_position=1),
    CatalogColumn("v", 2, 25),
))
_CATALOG = CatalogSnapshot("db", "15.0", (_T,))


def test_by_oid_whatever_the_name() -> None:
    assert _CATALOG.table_for(100, "public", "old_name", [("id", 23), ("v", 25)]) is _T


def test_by_name_when_the_columns_match() -> None:
    assert _CATALOG.table_for(999, "public", "t", [("id", 23), ("v", 25)]) is _T


def test_not_by_name_when_the_columns_differ() -> None:
    assert _CATALOG.table_for(999, "public", "t", [("code", 25), ("n", 23)]) is None
    assert _CATALOG.table_for(999, "public", "t", [("id", 20), ("v", 25)]) is None
    assert _CATALOG.table_for(999, "public", "other", [("id", 23), ("v", 25)]) is None
