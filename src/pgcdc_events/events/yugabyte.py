"""The YugabyteDB connector's records: ``plugin.name=yboutput``.

YugabyteDB speaks PostgreSQL's logical replication protocol through its own output
plug-in, ``yboutput``, and ships a Debezium connector (yugabyte/debezium, Debezium 2.5
based) whose records differ from upstream Debezium's. :class:`YugabyteEventDecoder`
produces them; everything it does not change (transactions, streaming, filters,
masking, type conversion, topics) is :class:`~pgcdc_events.events.decoder.EventDecoder`'s.

What changes, each rule with its source in yugabyte/debezium on the branch YugabyteDB
ships, ``ybdb-debezium-2.5.2``, at commit 52515b4ac54322b14c0d39c56a74e8aef530c61e
(``debezium-connector-postgres/src/main/java/io/debezium/connector/postgresql/``):

* **Every column is wrapped** in a struct ``{"value": v, "set": true}`` named after the
  column, optional when the column is (``PGTableSchemaBuilder.cellSchema``), in the key
  and in ``before``/``after`` (``addField`` builds both), whatever the replica identity
  (``connectorConfig.plugin().isYBOutput()``). A column that was not sent (kind ``u``:
  omitted under CHANGE, or an unchanged TOAST value) is a ``null`` cell, so a consumer
  tells "not sent" (``null``) from "set to NULL" (``{"value": null, "set": true}``)
  (``PostgresChangeRecordEmitter.columnValues``: no cell for an unchanged-toasted value;
  ``createValueGenerator``: ``result.put(fields[i], null)``). A NULL that the column's
  schema cannot hold (a NOT NULL column's ``n`` in a DELETE's key tuple) is a ``null``
  cell too: ``cell.put("value", null)`` throws ``DataException`` there, caught and
  logged, leaving the field unset.
* **UPDATE under CHANGE or DEFAULT has no ``before``** (``getOldColumnValues``: "For
  replica identity CHANGE or DEFAULT, there is no old column value available"); under
  FULL it is the old row, which also fills unchanged TOAST values of the new one
  (``cachedOldToastedValues``).
* **A primary-key UPDATE stays one ``u`` record** under the new key (``emitUpdateRecord``:
  ``YugabyteDBServer.isEnabled() || oldKey == null || ...``), never the delete + create
  pair of upstream Debezium.
* **The source block** is Debezium 2.5's (the common fields, then ``schema``, ``table``,
  ``txId``, ``lsn``, ``xmin``; no ``ts_us``, ``ts_ns``, no replication origin:
  ``PostgresSourceInfoStructMaker`` on ``ybdb-debezium-2.5.2``); ``sequence`` is the JSON
  array ``["<last commit LSN>","<LSN>"]`` (``SourceInfo.sequence()``), as upstream's. The
  envelope is Debezium 2.5's (``before``, ``after``, ``source``, ``op``, ``ts_ms``,
  ``transaction``).
* **Tables without a primary key are refused** (the connector's documentation: "CDC is
  not supported for tables without primary keys"), with an error naming the table.
* **TRUNCATE is not supported** under yboutput
  (``PostgresConnectorConfig.LogicalDecoder.YBOUTPUT.supportsTruncate() == false``;
  YugabyteDB does not send it): ``skipped.operations`` may leave ``t`` out, as the
  connector's own tests do (``PostgresConnectorIT.shouldEmitNoEventsForSkippedCreateOperations``
  runs with ``skipped.operations=u``), but a Truncate message that reaches the decoder
  unskipped is refused with an error naming its LSN and tables.

The replica identities are the Relation message's byte (``ReplicaIdentityInfo.parseFromDB``):
``c`` CHANGE, ``d`` DEFAULT, ``f`` FULL, ``n`` NOTHING and ``i`` INDEX. The older names
``ALL`` and ``MODIFIED_COLUMNS_OLD_AND_NEW_IMAGES`` are before-image modes of the gRPC
connector (yugabyte/debezium-connector-yugabytedb ``HelperBeforeImageModes``), set on the
stream, not on the table: they never reach a Relation message and are not accepted here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import attrs

from pgcdc_events.errors import ConfigurationError, ConversionError
from pgcdc_events.events.config import EventConfig
from pgcdc_events.events.decoder import EventDecoder
from pgcdc_events.events.envelope import (
    ENVELOPE_FIELDS_2_5,
    change_record,
    envelope_schema,
    envelope_value,
    tombstone,
    transaction_block,
)
from pgcdc_events.events.records import ChangeRecord, Header
from pgcdc_events.events.source import SOURCE_SCHEMA, narrowed, sequence, source_struct
from pgcdc_events.events.tables import TableSchema
from pgcdc_events.protocol.lsn import Lsn
from pgcdc_events.protocol.messages import (
    KIND_BINARY,
    KIND_TEXT,
    KIND_UNCHANGED_TOAST,
    REPLICA_IDENTITY_CHANGE,
    Delete,
    Insert,
    Message,
    Relation,
    TupleData,
    Update,
)
from pgcdc_events.protocol.reader import PgOutputReader, Streaming
from pgcdc_events.types.catalog import CatalogSnapshot
from pgcdc_events.types.schema import Field, Schema, Struct, struct_schema

__all__ = [
    "YB_SOURCE_SCHEMA",
    "YugabyteEventDecoder",
    "YugabyteTable",
    "cell_schema",
    "make_decoder",
    "yb_envelope_schema",
    "yb_sequence",
    "yugabyte_table",
]

_BOOLEAN: Final = Schema("boolean")

#: The source block of the YugabyteDB connector: Debezium 2.5's common fields (version,
#: connector, name, ts_ms, snapshot, db, sequence: ``commonSchemaBuilder()``), then schema,
#: table, txId, lsn, xmin (yugabyte/debezium ybdb-debezium-2.5.2 at 52515b4ac,
#: .../postgresql/PostgresSourceInfoStructMaker.java). No ts_us / ts_ns (Debezium 2.6+) and
#: no replication origin (``origin``, ``origin_lsn``: not in the shipping struct maker). The
#: fields are this library's PostgreSQL ones (one home), less those four.
YB_SOURCE_SCHEMA: Final = attrs.evolve(SOURCE_SCHEMA, fields=tuple(
    Field(f.name, i, f.schema) for i, f in enumerate(
        f for f in SOURCE_SCHEMA.fields or ()
        if f.name not in ("ts_us", "ts_ns", "origin", "origin_lsn"))))


def yb_sequence(last_commit_lsn: int | None, lsn: int) -> str:
    """``source.sequence`` as the YugabyteDB connector writes it: the JSON array of the last
    commit LSN and the event's LSN, as strings, ``null`` for an unknown one (yugabyte/debezium
    at ``ybdb-debezium-2.5.2`` 52515b4ac, .../postgresql/SourceInfo.java, ``sequence()``:
    ``MAPPER.writeValueAsString(sequence)``), the same form as the PostgreSQL connector's."""
    return sequence(last_commit_lsn, lsn)


def cell_schema(name: str, value: Schema) -> Schema:
    """The wrapper of one column under yboutput: ``{"value": <column>, "set": boolean}``.

    ``PGTableSchemaBuilder.cellSchema(name, valueSchema, isOptional)``: a struct named
    after the field, optional when the column is.
    """
    return struct_schema(name, [("value", value), ("set", _BOOLEAN)], optional=value.optional)


@attrs.frozen
class YugabyteTable:
    """The yboutput schemas of one version of one table, over its :class:`TableSchema`."""

    base: TableSchema
    replica_identity: str
    cells: tuple[Schema, ...]
    key_schema: Schema
    value_schema: Schema
    envelope_schema: Schema

    @property
    def topic(self) -> str:
        """The table's topic (its :class:`TableSchema`'s)."""
        return self.base.topic


def yugabyte_table(base: TableSchema, replica_identity: str) -> YugabyteTable:
    """Wrap ``base``'s key and value schemas column by column (see the module docstring)."""
    cells = tuple(cell_schema(col.name, col.mapping.schema) for col in base.columns)
    assert base.key_schema is not None
    key_schema = attrs.evolve(base.key_schema, fields=tuple(
        Field(f.name, f.index, cells[pos])
        for f, pos in zip(base.key_schema.fields or (), base.key_positions, strict=True)))
    positions = base.value_positions or range(len(base.columns))
    value_schema = attrs.evolve(base.value_schema, fields=tuple(
        Field(f.name, f.index, cells[pos])
        for f, pos in zip(base.value_schema.fields or (), positions, strict=True)))
    envelope = yb_envelope_schema(base.envelope_schema.name, value_schema, YB_SOURCE_SCHEMA,
                                  version=base.envelope_schema.version)
    return YugabyteTable(base, replica_identity, cells, key_schema, value_schema, envelope)


def yb_envelope_schema(name: str | None, value_schema: Schema, source_schema: Schema, *,
                       version: int | None = None) -> Schema:
    """The envelope of the Debezium 2.5 the YugabyteDB connector is built on
    (``Envelope.defineSchema()``): :data:`~pgcdc_events.events.envelope.ENVELOPE_FIELDS_2_5`."""
    return envelope_schema(name, value_schema, source_schema, version=version,
                           fields=ENVELOPE_FIELDS_2_5)


def _quoted(namespace: str, name: str) -> str:
    return ".".join('"' + part.replace('"', '""') + '"' for part in (namespace, name))


class YugabyteEventDecoder(EventDecoder):
    """:class:`EventDecoder` for a ``yboutput`` stream, producing the YugabyteDB connector's
    records (``plugin.name=yboutput``; see the module docstring for every difference)."""

    PLUGIN = "yboutput"

    def __init__(self, config: EventConfig, *, catalog: CatalogSnapshot | None = None,
                 proto_version: int | None = None, streaming: Streaming | None = None,
                 **kwargs: Any) -> None:
        super().__init__(config, catalog=catalog, proto_version=proto_version,
                         streaming=streaming, **kwargs)
        self.reader = PgOutputReader(proto_version=proto_version, streaming=streaming,
                                     yboutput=True)
        self._yb: dict[TableSchema, YugabyteTable] = {}

    def handle(self, message: Message, lsn: int, *, snapshot: bool = False
               ) -> list[ChangeRecord]:
        """:meth:`EventDecoder.handle`; a Relation also gets its yboutput schemas."""
        if type(message) is Relation:
            return self._yb_relation(message, int(lsn))
        return super().handle(message, lsn, snapshot=snapshot)

    def yugabyte_table(self, relation_id: int) -> YugabyteTable | None:
        """The yboutput schemas in force for a relation OID (``None`` when filtered out or
        refused)."""
        table = self.table(relation_id)
        return None if table is None else self._yb.get(table)

    def _yb_relation(self, message: Relation, lsn: int) -> list[ChangeRecord]:
        identity = message.replica_identity
        # CHANGE marks the primary key in the column flags as DEFAULT does (proto.c), so
        # the table is built as a DEFAULT one and keeps its identity alongside. The
        # connector reads the key from the database for every identity
        # (PgOutputMessageDecoder.handleRelationMessage, readPrimaryKeyNames): the same key
        # while the table exists; under FULL and NOTHING it comes from the catalog here.
        built = attrs.evolve(message, replica_identity="d") if identity == \
            REPLICA_IDENTITY_CHANGE else message
        out = super().handle(built, lsn)
        self.metrics.last_lsn = lsn
        table = self._tables.get(message.relation_id)
        if table is None:
            return out
        ctable = self.catalog.table(message.namespace, message.name) if self.catalog else None
        if table.key_schema is None or (ctable is not None and not ctable.primary_key):
            # Keyed by a unique index is not enough: the table has no primary key (the
            # PostgreSQL connector's unique-index fallback is not the YugabyteDB rule).
            # Refused now, and each change to the table is refused again (the table stays
            # known, without yboutput schemas) until a Relation gives it a primary key.
            raise _no_primary_key(message)
        self._yb[table] = yugabyte_table(table, identity)
        return out

    def _truncate(self, pending: Any, lsn: int) -> list[ChangeRecord]:
        """A Truncate under yboutput: filtered as for pgoutput when ``t`` is skipped (or its
        tables are not captured); otherwise refused, YugabyteDB's connector having no
        truncate record for yboutput."""
        tables = [t for t in pending.tables if t is not None]
        if tables and "t" not in self.config.skipped_operations:
            raise ConfigurationError(
                f"TRUNCATE of {', '.join(_quoted(t.schema_name, t.table_name) for t in tables)} "
                f"at LSN {Lsn(lsn)}: plugin.name=yboutput has no truncate records "
                "(LogicalDecoder.YBOUTPUT.supportsTruncate() is false); add t to "
                "skipped.operations to skip it")
        return super()._truncate(pending, lsn)

    def snapshot(self, *args: Any, **kwargs: Any) -> Any:
        """Not implemented under yboutput (the connector wraps snapshot rows too:
        ``YBSnapshotChangeRecordEmitter``); raises :class:`ConfigurationError`."""
        raise ConfigurationError("snapshot (read) records are not implemented for "
                                 "plugin.name=yboutput")

    # -- row changes --------------------------------------------------------------------
    def _emit_row(self, table: TableSchema, message: Insert | Update | Delete, lsn: int
                  ) -> list[ChangeRecord]:
        yb = self._yb.get(table)
        if yb is None:
            raise _no_primary_key(table.relation)
        try:
            if type(message) is Insert:
                return self._yb_insert(yb, message, lsn)
            if type(message) is Update:
                return self._yb_update(yb, message, lsn)
            return self._yb_delete(yb, message, lsn)  # type: ignore[arg-type]
        except ConversionError as error:
            return self.event_failed(error, table, lsn)

    def _yb_insert(self, yb: YugabyteTable, message: Insert, lsn: int) -> list[ChangeRecord]:
        if "c" in self.config.skipped_operations:
            self.metrics.events_filtered += 1
            return []
        cells = _cells(yb, message.new, None)
        return [self._yb_record(yb, "c", None, _value(yb, cells), _key(yb, cells), lsn)]

    def _yb_update(self, yb: YugabyteTable, message: Update, lsn: int) -> list[ChangeRecord]:
        if "u" in self.config.skipped_operations:
            self.metrics.events_filtered += 1
            return []
        old = message.old
        if yb.replica_identity in (REPLICA_IDENTITY_CHANGE, "d") or old is None:
            before, cached = None, None
        else:
            before, cached = _value(yb, _cells(yb, old, None)), old
        cells = _cells(yb, message.new, cached)
        after = _value(yb, cells)
        if self.config.skip_messages_without_change and before is not None and before == after:
            self.metrics.events_filtered += 1
            return []
        return [self._yb_record(yb, "u", before, after, _key(yb, cells), lsn)]

    def _yb_delete(self, yb: YugabyteTable, message: Delete, lsn: int) -> list[ChangeRecord]:
        if "d" in self.config.skipped_operations:
            self.metrics.events_filtered += 1
            return []
        cells = _cells(yb, message.old, None)
        key = _key(yb, cells)
        out = [self._yb_record(yb, "d", _value(yb, cells), None, key, lsn)]
        if self.config.tombstones_on_delete:
            out.append(tombstone(yb, key, self._headers, lsn))
        return out

    def _yb_record(self, yb: YugabyteTable, op: str, before: Struct | None,
                   after: Struct | None, key: Struct, lsn: int,
                   extra: tuple[Header, ...] = ()) -> ChangeRecord:
        txn = self._txn
        config = self.config
        block = None
        if txn is not None:
            commit_us, xid = txn.commit_us, txn.xid
            if config.provide_transaction_metadata:
                total, per = txn.next_order(yb.base.qualified)
                block = transaction_block(f"{xid}:{lsn}", total, per)
        else:
            commit_us, xid = self.clock() // 1000, None
        source = narrowed(source_struct(
            version=config.version, name=config.topic_prefix, ts_us=commit_us, snapshot=None,
            db=config.database, sequence=yb_sequence(self._last_commit_lsn, lsn),
            schema=yb.base.schema_name, table=yb.base.table_name, tx_id=xid, lsn=lsn),
            YB_SOURCE_SCHEMA)
        value = envelope_value(yb.envelope_schema, before, after, source, block, op,
                               self.clock(), fields=ENVELOPE_FIELDS_2_5)
        self.metrics.events_seen += 1
        self.metrics.last_event_commit_us = commit_us
        return change_record(yb, key, value, self._headers, lsn, extra=extra)


def _no_primary_key(relation: Relation) -> ConfigurationError:
    identity = relation.replica_identity
    hint = ("" if identity in ("d", REPLICA_IDENTITY_CHANGE) else
            f"; under REPLICA IDENTITY {_IDENTITY_NAMES.get(identity, identity)} the primary "
            "key is not in the Relation message: give a catalog snapshot (or "
            "message.key.columns)")
    return ConfigurationError(
        f"table {_quoted(relation.namespace, relation.name)} has no primary key: the "
        "YugabyteDB connector does not capture tables without one (\"CDC is not supported "
        "for tables without primary keys\")" + hint)


_IDENTITY_NAMES: Final = {"d": "DEFAULT", "n": "NOTHING", "f": "FULL", "i": "INDEX",
                          "c": "CHANGE"}


def _cells(yb: YugabyteTable, tup: TupleData, cached: TupleData | None) -> tuple[Any, ...]:
    """One cell per planned column: ``{value, set: true}``, or ``None`` when not sent.

    ``cached``: the old tuple whose values fill unchanged TOAST ones (Debezium's
    ``cachedOldToastedValues``, filled only when the old tuple was read).
    """
    base = yb.base
    row = base.row(tup, cached)
    kinds = tup.kinds
    out: list[Any] = []
    for col, cell, value in zip(base.columns, yb.cells, row, strict=True):
        pos = col.position
        if kinds[pos] == KIND_UNCHANGED_TOAST and not (
                cached is not None and cached.kinds[pos] in (KIND_TEXT, KIND_BINARY)):
            out.append(None)  # not sent: omitted under CHANGE, or unchanged TOAST
        elif value is None and not cell.fields[0].schema.optional:  # type: ignore[index]
            out.append(None)  # DataException on cell.put("value", null), caught: unset
        else:
            out.append(Struct(cell, (value, True)))
    return tuple(out)


def _key(yb: YugabyteTable, cells: tuple[Any, ...]) -> Struct:
    return Struct(yb.key_schema, tuple(cells[i] for i in yb.base.key_positions))


def _value(yb: YugabyteTable, cells: tuple[Any, ...]) -> Struct:
    positions = yb.base.value_positions
    if positions is not None:
        cells = tuple(cells[i] for i in positions)
    return Struct(yb.value_schema, cells)


def make_decoder(config: EventConfig, **kwargs: Any) -> EventDecoder:
    """The decoder ``config`` calls for: :class:`YugabyteEventDecoder` under
    ``plugin.name=yboutput``, :class:`EventDecoder` otherwise (same keyword arguments)."""
    factory: Callable[..., EventDecoder] = (
        YugabyteEventDecoder if config.plugin_name == "yboutput" else EventDecoder)
    return factory(config, **kwargs)
