"""The ``source`` block of Debezium 3.x PostgreSQL events."""

from __future__ import annotations

from typing import Any, Final

from pgcdc_events.types.schema import (
    STRUCT_BUILDER,
    Schema,
    Struct,
    make_struct,
    struct_schema,
)

__all__ = ["SHARED_FIELD_NAMES", "SNAPSHOT_VALUES", "SOURCE_SCHEMA", "from_shared", "narrowed",
           "sequence", "sequence_head", "shared_fields", "source_struct"]

SNAPSHOT_VALUES: Final = ("true", "first", "first_in_data_collection", "last_in_data_collection",
                          "last", "false", "incremental")

_OPT_INT64 = Schema("int64", optional=True)
_OPT_STRING = Schema("string", optional=True)

#: ``io.debezium.connector.postgresql.Source`` version 1, fields in the connector's order.
SOURCE_SCHEMA: Final = struct_schema(
    "io.debezium.connector.postgresql.Source",
    [
        ("version", Schema("string")),
        ("connector", Schema("string")),
        ("name", Schema("string")),
        ("ts_ms", Schema("int64")),
        ("snapshot", Schema("string", optional=True, name="io.debezium.data.Enum", version=1,
                            parameters=(("allowed", ",".join(SNAPSHOT_VALUES)),),
                            default="false")),
        ("db", Schema("string")),
        ("sequence", _OPT_STRING),
        ("ts_us", _OPT_INT64),
        ("ts_ns", _OPT_INT64),
        ("schema", Schema("string")),
        ("table", Schema("string")),
        ("txId", _OPT_INT64),
        ("lsn", _OPT_INT64),
        ("xmin", _OPT_INT64),
        ("origin", _OPT_STRING),
        ("origin_lsn", _OPT_INT64),
    ],
    version=1,
)


def sequence_head(last_commit_lsn: int | None) -> str:
    """What every ``sequence`` before the next commit starts with: ``sequence(last, lsn)``
    is ``sequence_head(last) + f'{lsn}"]'``."""
    return '[null,"' if last_commit_lsn is None else f'["{last_commit_lsn}","'


def sequence(last_commit_lsn: int | None, lsn: int | None) -> str:
    """The ``sequence`` field: a JSON array of two LSNs as strings (``null`` before any commit)."""
    if lsn is None:
        first = "null" if last_commit_lsn is None else f'"{last_commit_lsn}"'
        return f"[{first},null]"
    return f'{sequence_head(last_commit_lsn)}{lsn}"]'


#: The fields of :data:`SOURCE_SCHEMA` that the changes of one transaction to one table
#: share (:func:`shared_fields`, and ``snapshot``, the same for a whole stream), by name:
#: a JSON writer may render each run of adjacent ones once and reuse the text for as long
#: as their values are the same objects (``pgcdc_events.events.jsonconv``).
SHARED_FIELD_NAMES: Final = frozenset({
    "version", "connector", "name", "ts_ms", "snapshot", "db", "ts_us", "ts_ns", "schema",
    "table", "txId", "xmin", "origin", "origin_lsn"})


def shared_fields(*, version: str, name: str, ts_us: int, db: str, schema: str, table: str,
                  tx_id: int | None, origin: str | None = None, origin_lsn: int | None = None
                  ) -> tuple[Any, ...]:
    """The fields of a source block that the changes of one transaction to one table share
    (all but ``snapshot``, ``sequence``, ``lsn`` and ``xmin``), for :func:`from_shared`;
    ``ts_us`` is the commit time in µs since the Unix epoch."""
    return (version, "postgresql", name, ts_us // 1000, db, ts_us, ts_us * 1000, schema, table,
            tx_id, origin, origin_lsn)


def from_shared(shared: tuple[Any, ...], snapshot: str | None, sequence: str | None,
                lsn: int | None) -> Struct:
    """The source block of one change from its transaction's :func:`shared_fields`."""
    version, connector, name, ts_ms, db, ts_us, ts_ns, schema, table, tx_id, origin, \
        origin_lsn = shared
    # built as make_struct builds it, spelled out: this runs for every change event
    source = STRUCT_BUILDER()
    source.schema = SOURCE_SCHEMA
    source.values = (version, connector, name, ts_ms, snapshot, db, sequence, ts_us, ts_ns,
                     schema, table, tx_id, lsn, None, origin, origin_lsn)
    source.__class__ = Struct
    return source  # type: ignore[no-any-return]  # the builder made it a Struct


def source_struct(
    *,
    version: str,
    name: str,
    ts_us: int,
    snapshot: str | None,
    db: str,
    sequence: str | None,
    schema: str,
    table: str,
    tx_id: int | None,
    lsn: int | None,
    origin: str | None = None,
    origin_lsn: int | None = None,
) -> Struct:
    """A source block; ``ts_us`` is the commit time in µs since the Unix epoch."""
    return from_shared(shared_fields(version=version, name=name, ts_us=ts_us, db=db,
                                     schema=schema, table=table, tx_id=tx_id, origin=origin,
                                     origin_lsn=origin_lsn), snapshot, sequence, lsn)


def narrowed(source: Struct, schema: Schema) -> Struct:
    """``source`` with only the fields of ``schema``, a source schema made of some of
    :data:`SOURCE_SCHEMA`'s fields (the YugabyteDB connector's, which is Debezium 2.5's)."""
    return make_struct(schema, tuple(source[f.name] for f in schema.fields or ()))
