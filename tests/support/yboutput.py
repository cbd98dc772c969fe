"""yboutput streams for the YugabyteDB tests (tests/yugabyte), built message by message.

No YugabyteDB server runs here: each stream is what yugabyte-db's proto.c writes for
the statements of the cited connector test (see tests/protocol/test_yboutput.py for the
byte layouts, traced to proto.c). Tuples are text, as the YugabyteDB connector reads
them (PgOutputMessageDecoder.resolveColumnsFromStreamTupleData reads 't', 'u', 'n').
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from pgcdc_events.events import EventConfig
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.events.yugabyte import YugabyteEventDecoder
from pgcdc_events.protocol import (
    KIND_UNCHANGED_TOAST,
    Begin,
    CaptureRow,
    Commit,
    Delete,
    Insert,
    Message,
    Relation,
    RelationColumn,
    TupleData,
    Update,
    encode_message,
    parse_message,
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


# -- real PostgreSQL bytes as yboutput --------------------------------------------------------

def as_yboutput(rows: list[CaptureRow], changed: Sequence[set[str]] = (), *,
                default_is_change: bool = True, catalog: CatalogSnapshot | None = None
                ) -> list[tuple[bytes, int]]:
    """PostgreSQL's pgoutput rows as YugabyteDB's yboutput sends them: a DEFAULT table is
    CHANGE there (the service's default), so its Relation's identity byte becomes ``c`` and
    the n-th UPDATE of a CHANGE table keeps the primary key and the columns in
    ``changed[n]`` (the statement's SET list), every other column kind ``u`` (yb_decode.c
    YBDecodeUpdate / proto.c logicalrep_write_tuple). FULL and NOTHING tables are as sent,
    and DEFAULT ones too with ``default_is_change=False`` (a YugabyteDB table altered to
    REPLICA IDENTITY DEFAULT). An UPDATE that changes the primary key becomes the old row's
    DELETE and the new row's INSERT, as YugabyteDB sends it (under FULL, where every column
    is flagged, the primary key is read from ``catalog``; without one a FULL table's UPDATE
    is left as sent)."""
    out: list[tuple[bytes, int]] = []
    relations: dict[int, Relation] = {}
    updates = iter(changed)
    for row in rows:
        message = parse_message(row.data)
        data = row.data
        if isinstance(message, Relation):
            identity = message.replica_identity
            if identity == "d" and default_is_change:
                identity = "c"
            relation = relations[message.relation_id] = attrs.evolve(
                message, replica_identity=identity)
            data = encode_message(relation, yboutput=True)
        elif (isinstance(message, Update) and message.old is not None
              and _key_changed(relations[message.relation_id], message, catalog)):
            # A key change: YugabyteDB sends the old row's DELETE and the new row's INSERT
            # (a new key is a new row; YugabyteDBBeforeImageTest.modifyPrimaryKey: "it will
            # simply give us two records, DELETE + INSERT").
            out.append((encode_message(Delete(message.relation_id, message.old_kind or "K",
                                              message.old), yboutput=True), row.lsn))
            data = encode_message(Insert(message.relation_id, message.new), yboutput=True)
        elif (isinstance(message, Update) and changed
              and relations[message.relation_id].replica_identity == "c"):
            relation = relations[message.relation_id]
            sent = next(updates)
            new = message.new
            kinds = bytes(k if c.is_key or c.name in sent else KIND_UNCHANGED_TOAST
                          for k, c in zip(new.kinds, relation.columns, strict=True))
            values = tuple(v if c.is_key or c.name in sent else None
                           for v, c in zip(new.values, relation.columns, strict=True))
            data = encode_message(attrs.evolve(message, new=TupleData(kinds, values)),
                                  yboutput=True)
        out.append((data, row.lsn))
    return out


def _key_changed(relation: Relation, update: Update, cat: CatalogSnapshot | None) -> bool:
    """Whether an UPDATE's old tuple ('K' key or 'O' old row) has another primary key than
    its new one."""
    old = update.old
    assert old is not None
    if relation.replica_identity == "f":
        table = cat.table(relation.namespace, relation.name) if cat is not None else None
        if table is None:
            return False
        key = set(table.primary_key)
    else:
        key = {c.name for c in relation.columns if c.is_key}
    return any(c.name in key and o != n for c, o, n in zip(
        relation.columns, old.values, update.new.values, strict=True))


def decode_yb(stream: list[tuple[bytes, int]], catalog: Any = None, **props: str
              ) -> list[ChangeRecord]:
    decoder = YugabyteEventDecoder(EventConfig.from_properties(
        {"topic.prefix": "test_server", "plugin.name": "yboutput", **props}), catalog=catalog)
    records: list[ChangeRecord] = []
    for data, lsn in stream:
        records += decoder.feed(data, lsn)
    return records



# -- docs/yugabytedb.md's examples ------------------------------------------------------------

DOC = Path(__file__).resolve().parents[2] / "docs" / "yugabytedb.md"


def blocks(language: str) -> list[str]:
    """The fenced blocks of the page in ``language``, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", DOC.read_text(encoding="utf-8"),
                      flags=re.M | re.S)


def run_python_blocks(*, spark: bool) -> dict[str, Any]:
    """Run the page's Python blocks in order in one namespace (the Spark one only if asked)."""
    namespace: dict[str, Any] = {}
    for block in blocks("python"):
        if "pyspark" in block and not spark:
            continue
        exec(compile(block, str(DOC), "exec"), namespace)
    return namespace



__all__ = [
    "Delete",
    "Insert",
    "Update",
    "as_yboutput",
    "blocks",
    "catalog",
    "decode",
    "decode_yb",
    "relation",
    "run_python_blocks",
    "text",
    "transaction",
]
