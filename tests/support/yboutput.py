"""yboutput streams for the YugabyteDB tests (tests/yugabyte), built message by message.

No YugabyteDB server runs here: each stream is what yugabyte-db's proto.c writes for
the statements of the cited connector test (see tests/protocol/test_yboutput.py for the
byte layouts, traced to proto.c). Tuples are text, as the YugabyteDB connector reads
them (PgOutputMessageDecoder.resolveColumnsFromStreamTupleData reads 't', 'u', 'n').
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pgcdc_events.events import EventConfig
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.events.yugabyte import YugabyteEventDecoder
from pgcdc_events.protocol import (
    Begin,
    Commit,
    Delete,
    Insert,
    Message,
    Relation,
    RelationColumn,
    TupleData,
    Update,
    encode_message,
)
from pgcdc_events.types.catalog import CatalogColumn, CatalogSnapshot, CatalogTable

INT4, VARCHAR = 23, 1043
#: A fixed clock: the envelope's processing time is not under test.
CLOCK_NS = 1_700_000_000_000_000_000


def relation(oid: int, namespace: str, name: str, identity: str,
             columns: Sequence[tuple[str, int, int, bool]]) -> Relation:
    """A Relation as logicalrep_write_attrs sends it: flag 1 on replica-identity columns
    (every column under FULL)."""
    return Relation(oid, namespace, name, identity, tuple(
        RelationColumn(1 if (key or identity == "f") else 0, col, type_oid, typmod)
        for col, type_oid, typmod, key in columns))


def catalog(oid: int, namespace: str, name: str, identity: str,
            columns: Sequence[tuple[str, int, int, bool]]) -> CatalogSnapshot:
    """The catalog facts pgoutput does not carry: the primary key (the YugabyteDB connector
    reads it from the database for FULL and NOTHING, PgOutputMessageDecoder
    .queryPrimaryKeysFromDatabase)."""
    table = CatalogTable(oid, namespace, name, identity, tuple(
        CatalogColumn(col, n + 1, type_oid, typmod, not_null=key,
                      primary_key_position=1 if key else None)
        for n, (col, type_oid, typmod, key) in enumerate(columns)))
    return CatalogSnapshot("yugabyte", "15.2-YB", (table,))


def text(*values: str | type[Ellipsis] | None) -> TupleData:
    """Text tuple data; ``None`` is NULL ('n'), ``...`` a column not sent ('u')."""
    kinds = bytes(ord("u") if v is Ellipsis else ord("n") if v is None else ord("t")
                  for v in values)
    return TupleData(kinds, tuple(v.encode() if isinstance(v, str) else None for v in values))


def transaction(xid: int, lsn: int, *changes: Message) -> list[tuple[Message, int]]:
    """Begin, the changes, Commit, with increasing LSNs from ``lsn``."""
    out: list[tuple[Message, int]] = [(Begin(lsn + 100, 0, xid), lsn)]
    for n, change in enumerate(changes, 1):
        out.append((change, lsn + n))
    end = lsn + len(changes) + 1
    out.append((Commit(0, end, end + 1, 0), end))
    return out


def decode(config: dict[str, str], messages: Iterable[tuple[Message, int]],
           cat: CatalogSnapshot | None = None) -> list[ChangeRecord]:
    """Feed the encoded messages (yboutput bytes) to a YugabyteEventDecoder."""
    decoder = YugabyteEventDecoder(
        EventConfig.from_properties({"topic.prefix": "test_server", "plugin.name": "yboutput",
                                     **config}),
        catalog=cat, clock=lambda: CLOCK_NS)
    out: list[ChangeRecord] = []
    for message, lsn in messages:
        out += decoder.feed(encode_message(message, yboutput=True), lsn)
    return out


__all__ = ["Delete", "Insert", "Update", "catalog", "decode", "relation", "text",
           "transaction"]
