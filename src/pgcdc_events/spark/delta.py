"""A Delta Lake table kept in sync with a source table, written with ``deltalake`` (delta-rs).

:class:`DeltaTarget` is a ``foreachBatch`` function for a table's events DataFrame (as
:class:`~pgcdc_events.spark.apply.ParquetTarget` is), also usable without Spark through
:meth:`DeltaTarget.apply` on an Arrow table of events or flattened changes. Each batch is
planned by the AUTO CDC rules of :mod:`pgcdc_events.spark.autocdc` and written as **one
MERGE commit** that carries Delta's application transaction (a ``txn`` action: ``appId``
the streaming query's id, ``version`` the batch id): a batch whose id the table already
records is skipped, so a batch Spark replays after a failure is not applied twice. No JVM
jar is needed; Spark (with Delta), ``deltalake`` and DuckDB read the table.

Tombstones (deleted keys, kept for ``tombstone_retention_seconds``, and the last
truncate) live in a second Delta table, ``<path>/_pgcdc_tombstones`` (a directory name
starting with ``_``, which Delta's readers and ``VACUUM`` leave alone). It is written
first, with the same application transaction; if the process dies between the two
commits, the replayed batch reads the tombstones as they were before it and writes only
the main table.

Delta has no interval type: ``time`` and ``interval`` columns (Spark's day-time intervals,
Arrow durations) are stored as their microseconds (``bigint``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Final

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.compute as pc  # type: ignore[import-untyped]

from pgcdc_events.spark.autocdc import (
    DEFAULT_PLACEHOLDER,
    DEFAULT_RETENTION,
    DELETED_AT,
    END_AT,
    ROW_SEQUENCE,
    SEQUENCE,
    START_AT,
    AutoCdc,
    AutoCdcError,
    CdcPlan,
    CdcState,
    changes_from_events,
    plan_changes,
)

__all__ = ["TOMBSTONES", "DeltaTarget", "delta_type"]

TOMBSTONES: Final = "_pgcdc_tombstones"
_ACTION: Final = "__pgcdc_action"


def delta_type(t: Any) -> Any:
    """The Arrow type a column of type ``t`` is stored as in Delta (durations as int64
    microseconds; nested types element by element)."""
    if pa.types.is_duration(t):
        return pa.int64()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(t.field(i).name, delta_type(t.field(i).type),
                                   t.field(i).nullable) for i in range(t.num_fields)])
    if pa.types.is_large_list(t) or pa.types.is_list(t):
        return pa.list_(pa.field(t.value_field.name, delta_type(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(t.key_type, delta_type(t.item_type))
    return t


def _to_delta(table: Any) -> Any:
    schema = pa.schema([pa.field(f.name, delta_type(f.type)) for f in table.schema])
    if schema == table.schema:
        return table
    columns = []
    for f, column in zip(schema, table.columns, strict=True):
        columns.append(_cast(column, f.type))
    return pa.table(columns, schema=schema)


def _cast(column: Any, target: Any) -> Any:
    if column.type == target:
        return column
    if pa.types.is_duration(column.type):
        unit = column.type.unit
        factor = {"s": 1_000_000, "ms": 1000, "us": 1, "ns": 0}[unit]
        micros = column.cast(pa.int64())
        return pc.divide(micros, 1000) if factor == 0 else pc.multiply(micros, factor)
    return column.cast(target)


def _stats_columns(keys: Sequence[str], meta: Sequence[str]) -> dict[str, str | None]:
    """File statistics for the key and sequence columns only: what MERGE prunes files by,
    and delta-rs cannot compute statistics of dates and timestamps past its range (the
    ``infinity`` values PostgreSQL allows)."""
    return {"delta.dataSkippingStatsColumns": ",".join(_quote(c) for c in [*keys, *meta])}


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(value)
    raise AutoCdcError(f"a truncate needs a sequence of one string or number column, not "
                       f"{value!r}")


class DeltaTarget:
    """A ``foreachBatch`` function keeping the Delta table at ``path`` in sync (see the
    module docstring). The rules' parameters are :class:`~pgcdc_events.spark.autocdc.AutoCdc`'s
    (``keys`` default to the events' key columns); ``app_id`` names the application
    transaction when Spark does not (outside a streaming query; default
    ``pgcdc-events``); ``storage_options`` go to ``deltalake``; ``clock`` gives the wall
    time (seconds) that tombstones are recorded with."""

    def __init__(self, path: str, *, keys: Sequence[str] | str | None = None,
                 sequence_by: Sequence[str] | str = SEQUENCE, apply_as_deletes: Any = None,
                 apply_as_truncates: Any = None,
                 column_list: Sequence[str] | None = None,
                 except_column_list: Sequence[str] | None = None,
                 stored_as_scd_type: int = 1,
                 track_history_column_list: Sequence[str] | None = None,
                 track_history_except_column_list: Sequence[str] | None = None,
                 tombstone_retention_seconds: float = DEFAULT_RETENTION,
                 toast_placeholder: str = DEFAULT_PLACEHOLDER,
                 app_id: str | None = None, storage_options: dict[str, str] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = str(path).rstrip("/")
        self.tombstone_path = f"{self.path}/{TOMBSTONES}"
        self.options: dict[str, Any] = {
            "sequence_by": sequence_by, "apply_as_deletes": apply_as_deletes,
            "apply_as_truncates": apply_as_truncates, "column_list": column_list,
            "except_column_list": except_column_list, "stored_as_scd_type": stored_as_scd_type,
            "track_history_column_list": track_history_column_list,
            "track_history_except_column_list": track_history_except_column_list,
            "tombstone_retention_seconds": tombstone_retention_seconds,
            "toast_placeholder": toast_placeholder}
        self.keys = keys
        self.spec: AutoCdc | None = AutoCdc(keys=keys, **self.options) if keys else None
        self.app_id = app_id
        self.storage_options = storage_options
        self.clock = clock
        #: (batch id, changes applied, changes skipped as older) of the batches written.
        self.applied: list[tuple[int, int, int]] = []

    def __call__(self, df: Any, batch_id: int) -> None:
        from pgcdc_events.spark._session import to_arrow_table  # noqa: PLC0415

        app_id = self.app_id_of(df)
        if self._done(app_id, batch_id):
            return  # a replay: no need to collect the batch
        self.apply(to_arrow_table(df), batch_id, app_id=app_id)

    def apply_changes(self, changes: Any, batch_id: int, keys: Sequence[str]) -> None:
        """Apply a micro-batch DataFrame of the table's flattened changes (``keys``: the
        table's key columns, used unless the target was given ``keys=``); what
        :meth:`DecodedStream.apply <pgcdc_events.spark.stream.DecodedStream.apply>` gives
        a target that has this method."""
        from pgcdc_events.spark._session import to_arrow_table  # noqa: PLC0415

        app_id = self.app_id_of(changes)
        if self._done(app_id, batch_id):
            return  # a replay: no need to collect the batch
        self.apply(to_arrow_table(changes), batch_id, app_id=app_id, keys=keys)

    def app_id_of(self, df: Any) -> str | None:
        """The application transaction's id for a micro-batch DataFrame: ``app_id`` if
        given, else ``pgcdc-events:<query id>`` inside a streaming query (the id is kept in
        the query's checkpoint, so it survives restarts), else ``None`` (``pgcdc-events``)."""
        if self.app_id:
            return self.app_id
        query = df.sparkSession.sparkContext.getLocalProperty("sql.streaming.queryId")
        return f"pgcdc-events:{query}" if query else None

    def last_batch(self, app_id: str | None = None) -> int | None:
        """The last batch id the table records for ``app_id`` (``None``: none yet)."""
        table = self._table(self.path)
        if table is None:
            return None
        version = table.transaction_version(app_id or self.app_id or "pgcdc-events")
        return None if version is None else int(version)

    # -- the table ----------------------------------------------------------------

    def _table(self, path: str, version: int | None = None) -> Any:
        from deltalake import DeltaTable  # noqa: PLC0415

        if not DeltaTable.is_deltatable(path, storage_options=self.storage_options):
            return None
        return DeltaTable(path, version=version, storage_options=self.storage_options)

    def _done(self, app_id: str | None, batch_id: int) -> bool:
        table = self._table(self.path)
        if table is None:
            return False
        version = table.transaction_version(app_id or "pgcdc-events")
        return version is not None and batch_id <= version

    def read(self) -> Any:
        """The table's rows (an Arrow table; empty before the first batch)."""
        table = self._table(self.path)
        return pa.table({}) if table is None else table.to_pyarrow_table()

    def tombstones(self) -> Any:
        """The tombstone table's rows."""
        table = self._table(self.tombstone_path)
        return pa.table({}) if table is None else table.to_pyarrow_table()

    # -- one batch ----------------------------------------------------------------

    def apply(self, events: Any, batch_id: int, *, app_id: str | None = None,
              keys: Sequence[str] | None = None) -> CdcPlan | None:
        """Apply an Arrow table of a table's events (or of flattened changes, with ``__op``
        and the sequence) as batch ``batch_id``; ``None`` when the table already records it.
        ``keys``: the table's key columns, for changes (which have no ``key`` column) when
        the target was not given ``keys=``."""
        from deltalake import CommitProperties, Transaction, write_deltalake  # noqa: PLC0415

        app = app_id or self.app_id or "pgcdc-events"
        main = self._table(self.path)
        done = main.transaction_version(app) if main is not None else None
        if done is not None and batch_id <= done:
            return None
        changes = _to_delta(changes_from_events(events) if "after" in events.column_names
                            else events)
        spec = self._spec(events, keys)
        if not changes.num_rows:
            return None
        tombs = self._table(self.tombstone_path)
        tomb_done = tombs.transaction_version(app) if tombs is not None else None
        tombstones_written = tomb_done is not None and batch_id <= tomb_done
        if tombstones_written:  # died between the two commits: the tombstones from before
            assert tombs is not None
            previous = tombs.version() - 1
            tombs = self._table(self.tombstone_path, previous) if previous >= 0 else None
        state = CdcState(self._touched(main, changes, spec),
                         tombs.to_pyarrow_table() if tombs is not None else pa.table({}))
        plan = plan_changes(changes, state, spec, now_ms=int(self.clock() * 1000))
        commit = CommitProperties(app_transactions=[Transaction(app, batch_id)])
        if not tombstones_written:
            write_deltalake(self.tombstone_path, _to_delta(plan.tombstones), mode="overwrite",
                            schema_mode="overwrite", commit_properties=commit,
                            configuration=_stats_columns(spec.keys, [DELETED_AT])
                            if tombs is None else None,
                            storage_options=self.storage_options)
        self._merge(main, plan, spec, commit)
        self.applied.append((batch_id, plan.applied, plan.skipped))
        return plan

    def _spec(self, events: Any, keys: Sequence[str] | None = None) -> AutoCdc:
        """The rules: ``keys=`` as given, else the events' key columns (a ``key``
        column's fields) or, for flattened changes, ``keys``."""
        if self.spec is not None:
            return self.spec
        if "key" in events.column_names:
            key = events.schema.field("key").type
            keys = [key.field(i).name for i in range(key.num_fields)]
        if not keys:
            raise AutoCdcError("the table has no key: give keys=, or give the source table "
                               "one with message.key.columns")
        self.spec = AutoCdc(keys=keys, **self.options)
        return self.spec

    def _touched(self, main: Any, changes: Any, spec: AutoCdc) -> Any:
        if main is None:
            return pa.table({})
        first = spec.keys[0]
        values = pc.unique(changes.column(first).combine_chunks()).drop_null()
        dataset = main.to_pyarrow_dataset()
        if first not in dataset.schema.names:
            return pa.table({})
        import pyarrow.dataset as ds  # type: ignore[import-untyped]  # noqa: PLC0415

        value_type = dataset.schema.field(first).type
        try:
            rows = dataset.to_table(filter=ds.field(first).isin(values.cast(value_type)))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            rows = dataset.to_table()
        return rows

    def _merge(self, main: Any, plan: CdcPlan, spec: AutoCdc, commit: Any) -> None:
        from deltalake import write_deltalake  # noqa: PLC0415

        upserts = _to_delta(plan.upserts)
        if main is None:
            meta = [ROW_SEQUENCE] + ([START_AT, END_AT] if spec.stored_as_scd_type == 2 else [])
            write_deltalake(self.path, upserts, mode="append", commit_properties=commit,
                            configuration=_stats_columns(spec.keys, meta),
                            storage_options=self.storage_options)
            return
        removes = _to_delta(plan.removes)
        source = pa.concat_tables(
            [upserts.append_column(_ACTION, pa.array(["u"] * upserts.num_rows, pa.string())),
             removes.append_column(_ACTION, pa.array(["d"] * removes.num_rows, pa.string()))],
            promote_options="default")
        match = list(spec.keys) + ([START_AT] if spec.stored_as_scd_type == 2 else [])
        predicate = " AND ".join(f"t.{_quote(c)} = s.{_quote(c)}" for c in match)
        updates = {_quote(c): f"s.{_quote(c)}" for c in upserts.column_names}
        merger = (main.merge(source, predicate=predicate, source_alias="s", target_alias="t",
                             merge_schema=True, commit_properties=commit)
                  .when_matched_delete(predicate=f"s.{_quote(_ACTION)} = 'd'")
                  .when_matched_update(updates=updates, predicate=f"s.{_quote(_ACTION)} = 'u'")
                  .when_not_matched_insert(updates=updates,
                                           predicate=f"s.{_quote(_ACTION)} = 'u'"))
        if plan.truncate_before is not None:
            merger = merger.when_not_matched_by_source_delete(
                predicate=f"t.{_quote(ROW_SEQUENCE)} < {_literal(plan.truncate_before)}")
        merger.execute()
        after = self._table(self.path)
        app, version = commit.app_transactions[0].app_id, commit.app_transactions[0].version
        if after.transaction_version(app) != version:
            # delta-rs commits no MERGE that changes no row: record the batch all the same
            after.create_write_transaction([], mode="append", schema=after.schema(),
                                           commit_properties=commit)
