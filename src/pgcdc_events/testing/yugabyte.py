"""YugabyteDB-shaped workloads: yboutput streams, with the row state they leave.

No YugabyteDB server is needed: a :class:`YugabyteWorkload` is a table with a primary key,
a replica identity (CHANGE by default, the service's default) and transactions of inserts,
updates and deletes, rendered as the yboutput messages YugabyteDB sends for them
(yugabyte-db proto.c; see docs/yugabytedb.md):

* an UPDATE under CHANGE carries the key and the changed columns; every other column is
  kind ``u`` (not sent); under DEFAULT and FULL the whole new row (FULL: and the old one);
* a DELETE carries the old key (``K``: the key, NULL elsewhere), or the old row under FULL;
* a primary-key change is a DELETE and an INSERT (a new key is a new row in YugabyteDB);
* under NOTHING the server refuses UPDATE and DELETE, so such workloads only insert.

:attr:`YugabyteWorkload.state` is the table's rows after the workload, computed from the
operations (not from the stream), for a consumer's test to compare with.
:func:`yugabyte_workloads` (needs hypothesis) draws workloads.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final, Literal

import attrs

from pgcdc_events.events.config import EventConfig
from pgcdc_events.events.records import ChangeRecord
from pgcdc_events.events.yugabyte import YugabyteEventDecoder
from pgcdc_events.protocol.capture import CaptureRow
from pgcdc_events.protocol.encoder import encode_message
from pgcdc_events.protocol.lsn import Lsn
from pgcdc_events.protocol.messages import (
    Begin,
    Commit,
    Delete,
    Insert,
    Message,
    Relation,
    RelationColumn,
    TupleData,
    Update,
)
from pgcdc_events.types.catalog import CatalogColumn, CatalogSnapshot, CatalogTable

__all__ = ["COLUMN_TYPES", "YbColumn", "YbOp", "YugabyteWorkload", "yugabyte_workloads"]

#: Column types of generated tables: name -> (type OID, typmod).
COLUMN_TYPES: Final[dict[str, tuple[int, int]]] = {
    "integer": (23, -1), "bigint": (20, -1), "text": (25, -1), "boolean": (16, -1),
    "varchar(20)": (1043, 24),
}
_FIRST_LSN: Final = 0x1000038
_COMMIT_TIME: Final = 757_382_400_001_000  # 2024-01-01T00:00:00.001Z in µs since 2000


@attrs.frozen
class YbColumn:
    """A column: its name, type (a :data:`COLUMN_TYPES` key) and primary-key membership."""

    name: str
    type: str
    key: bool = False


@attrs.frozen
class YbOp:
    """One operation: ``insert`` a row, ``update`` the row of ``key`` with ``changes``
    (column -> value, ``None`` for NULL), or ``delete`` the row of ``key``."""

    kind: Literal["insert", "update", "delete"]
    key: tuple[Any, ...]
    values: Mapping[str, Any] = attrs.field(factory=dict)


def _text(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return b"t" if value else b"f"
    return str(value).encode()


@attrs.frozen
class YugabyteWorkload:
    """A table, its replica identity and its transactions (each a sequence of :class:`YbOp`)."""

    namespace: str
    name: str
    columns: tuple[YbColumn, ...]
    transactions: tuple[tuple[YbOp, ...], ...]
    replica_identity: Literal["c", "d", "f", "n"] = "c"
    relation_id: int = 16500

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The primary-key column names, in column order."""
        return tuple(c.name for c in self.columns if c.key)

    def relation(self) -> Relation:
        """The Relation message (key columns flagged; every column under FULL)."""
        full = self.replica_identity == "f"
        return Relation(self.relation_id, self.namespace, self.name, self.replica_identity,
                        tuple(RelationColumn(1 if (c.key or full) else 0, c.name,
                                             *COLUMN_TYPES[c.type]) for c in self.columns))

    def catalog(self) -> CatalogSnapshot:
        """The catalog facts pgoutput does not carry (the primary key, needed under FULL and
        NOTHING): ``pgcdc-events decode --catalog``, ``YugabyteEventDecoder(catalog=...)``."""
        table = CatalogTable(self.relation_id, self.namespace, self.name, self.replica_identity,
                             tuple(CatalogColumn(c.name, n, *COLUMN_TYPES[c.type], not_null=c.key,
                                                 primary_key_position=(
                                                     self.key_columns.index(c.name) + 1
                                                     if c.key else None))
                                   for n, c in enumerate(self.columns, 1)))
        return CatalogSnapshot("yugabyte", "15.2-YB", (table,))

    def _tuple(self, row: Mapping[str, Any], sent: set[str] | None = None) -> TupleData:
        kinds = bytearray()
        values: list[bytes | None] = []
        for c in self.columns:
            if sent is not None and c.name not in sent:
                kinds.append(ord("u"))
                values.append(None)
                continue
            raw = _text(row.get(c.name))
            kinds.append(ord("n") if raw is None else ord("t"))
            values.append(raw)
        return TupleData(bytes(kinds), tuple(values))

    def _key_row(self, row: Mapping[str, Any]) -> dict[str, Any]:
        return {k: row[k] for k in self.key_columns}

    def _changes(self) -> Iterator[tuple[Message | None, dict[tuple[Any, ...], dict[str, Any]]]]:
        """Each transaction's changes (``None`` between transactions) and the state so far."""
        state: dict[tuple[Any, ...], dict[str, Any]] = {}
        rid = self.relation_id
        for ops in self.transactions:
            for op in ops:
                if op.kind == "insert":
                    row = {c.name: op.values.get(c.name) for c in self.columns}
                    state[tuple(row[k] for k in self.key_columns)] = row
                    yield Insert(rid, self._tuple(row)), state
                    continue
                old = state[op.key]
                if op.kind == "delete":
                    del state[op.key]
                    if self.replica_identity == "f":
                        yield Delete(rid, "O", self._tuple(old)), state
                    else:
                        yield Delete(rid, "K", self._tuple(self._key_row(old))), state
                    continue
                new = {**old, **op.values}
                new_key = tuple(new[k] for k in self.key_columns)
                if new_key != op.key:  # a new key is a new row: DELETE + INSERT
                    del state[op.key]
                    state[new_key] = new
                    yield Delete(rid, "K" if self.replica_identity != "f" else "O",
                                 self._tuple(self._key_row(old) if self.replica_identity != "f"
                                             else old)), state
                    yield Insert(rid, self._tuple(new)), state
                    continue
                state[new_key] = new
                if self.replica_identity == "c":
                    sent = set(self.key_columns) | set(op.values)
                    yield Update(rid, None, None, self._tuple(new, sent)), state
                elif self.replica_identity == "f":
                    yield Update(rid, "O", self._tuple(old), self._tuple(new)), state
                else:
                    yield Update(rid, None, None, self._tuple(new)), state
            yield None, state

    def _blocks(self) -> list[tuple[int, list[tuple[Message, int]]]]:
        """(xid, messages with LSNs) per transaction; the Relation comes after the first
        Begin, before the first change, as the server sends it."""
        out: list[tuple[int, list[tuple[Message, int]]]] = []
        lsn, xid = _FIRST_LSN, 1000
        block: list[Message] = [self.relation()]
        for change, _ in self._changes():
            if change is not None:
                block.append(change)
                continue
            lsn += 1
            begin_lsn = lsn
            body = []
            for message in block:
                lsn += 1
                body.append((message, lsn))
            lsn += 1
            out.append((xid, [(Begin(lsn, _COMMIT_TIME, xid), begin_lsn), *body,
                              (Commit(0, lsn, lsn + 1, _COMMIT_TIME), lsn)]))
            xid += 1
            block = []
        return out

    def messages(self) -> list[tuple[Message, int]]:
        """The yboutput messages with their LSNs: Begin..Commit blocks."""
        return [item for _, block in self._blocks() for item in block]

    def capture_rows(self) -> list[CaptureRow]:
        """The stream as capture rows (``pgcdc-events decode --capture``)."""
        return [CaptureRow(Lsn(lsn), xid, encode_message(m, yboutput=True))
                for xid, block in self._blocks() for m, lsn in block]

    @property
    def state(self) -> dict[tuple[Any, ...], dict[str, Any]]:
        """The rows after the workload, by primary key, from the operations themselves."""
        final: dict[tuple[Any, ...], dict[str, Any]] = {}
        for _, final in self._changes():  # noqa: B007 - the state after the last change
            continue
        return final

    def records(self, properties: Mapping[str, str] | None = None) -> list[ChangeRecord]:
        """The YugabyteDB connector's records (``plugin.name=yboutput``) for the stream."""
        props = {"topic.prefix": "yb", "plugin.name": "yboutput", **(properties or {})}
        decoder = YugabyteEventDecoder(EventConfig.from_properties(props),
                                       catalog=self.catalog())
        out: list[ChangeRecord] = []
        for message, lsn in self.messages():
            out += decoder.feed(encode_message(message, yboutput=True), lsn)
        return out


def yugabyte_workloads(*, identities: Sequence[str] = ("c", "d", "f", "n"),
                       max_transactions: int = 6) -> Any:
    """A hypothesis strategy of :class:`YugabyteWorkload` (needs the ``testing`` extra)."""
    from pgcdc_events.testing._yugabyte_strategies import workloads  # noqa: PLC0415

    return workloads(identities=tuple(identities), max_transactions=max_transactions)
