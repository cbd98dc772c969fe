"""What a Delta target should hold, computed from a table's events by plain Python (no AUTO
CDC code): its rows (SCD type 1) and the sequence of states the source went through (SCD
type 2), in comparable forms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pgcdc_events.spark.autocdc import END_AT, ROW_SEQUENCE, START_AT
from support.spark_records import canonical

META = (ROW_SEQUENCE, START_AT, END_AT)


def table_rows(table: Any, drop: tuple[str, ...] = META) -> list[str]:
    """An Arrow table's rows as sorted JSON texts, without ``drop``."""
    names = sorted(n for n in table.column_names if n not in drop)
    columns = [canonical(table.column(n)) for n in names]
    return sorted(json.dumps(dict(zip(names, values, strict=True)), sort_keys=True, default=str)
                  for values in zip(*columns, strict=True))


def decoder_order(events: Any) -> list[int]:
    """The events' indexes in the decoder's order (``_position``)."""
    positions = events.column("_position").to_pylist()
    return sorted(range(events.num_rows),
                  key=lambda i: (positions[i]["message"], positions[i]["index"]))


def states(events: Any) -> list[tuple[tuple[int, int], str, dict[str, Any] | None]]:
    """(sequence, key, the row after; ``None`` when deleted) of each change, in the
    decoder's order."""
    ordered = events.take(decoder_order(events))
    out = []
    for op, kind, key, after, source in zip(
            ordered.column("op").to_pylist(), ordered.column("_kind").to_pylist(),
            canonical(ordered.column("key")), canonical(ordered.column("after")),
            ordered.column("source").to_pylist(), strict=True):
        if kind != "change":
            continue
        head, lsn = json.loads(source["sequence"])
        out.append(((int(head or 0), int(lsn)), json.dumps(key, sort_keys=True, default=str),
                    None if op == "d" else after))
    return out


def expected_history(events: Any, keep: tuple[str, ...] | None = None) -> list[str]:
    """The versions an SCD type 2 table of ``events`` holds: a new one at each change of
    the row (of the ``keep`` columns, when given), ended by the next change or delete."""
    versions = []
    current: dict[str, tuple[tuple[int, int], dict[str, Any]]] = {}
    for seq, key, row in states(events):
        if row is not None and keep is not None:
            row = {k: v for k, v in row.items() if k in keep}
        if key in current and current[key][1] != row:
            versions.append((current[key][1], current[key][0], seq))
            del current[key]
        if row is not None and key not in current:
            current[key] = (seq, row)
    versions += [(row, start, None) for start, row in current.values()]
    return sorted(json.dumps({**row, "start": list(start), "end": end and list(end)},
                             sort_keys=True, default=str) for row, start, end in versions)


def history(table: Any, keep: tuple[str, ...] | None = None) -> list[str]:
    """An SCD type 2 table's versions, comparable with :func:`expected_history`."""
    def seq(value: str | None) -> list[int] | None:
        return None if value is None else [int(p, 16) for p in value.split("/")]

    names = sorted(n for n in table.column_names if n not in META
                   and (keep is None or n in keep))
    columns = [canonical(table.column(n)) for n in names]
    starts, ends = table.column(START_AT).to_pylist(), table.column(END_AT).to_pylist()
    return sorted(json.dumps({**dict(zip(names, values, strict=True)), "start": seq(s),
                              "end": seq(e)}, sort_keys=True, default=str)
                  for s, e, *values in zip(starts, ends, *columns, strict=True))


def duckdb_with_delta() -> Any:
    """DuckDB with its ``delta`` extension, or a skip: the module may be missing; the
    extension comes from the ``duckdb-ext-delta`` package (PyPI, the build for its pinned
    DuckDB version) when installed, else it is downloaded on first use (no network: skip)."""
    import pytest  # noqa: PLC0415

    duckdb = pytest.importorskip("duckdb")
    try:
        import duckdb_ext  # type: ignore[import-not-found]  # noqa: PLC0415

        for root in duckdb_ext.__path__:  # a namespace package: extensions/v*/platform/
            if (Path(root) / "extensions").is_dir():
                duckdb.sql(f"SET extension_directory = '{Path(root) / 'extensions'}'")
                duckdb.sql("SET autoinstall_known_extensions = false")
    except ImportError:
        pass
    try:
        duckdb.sql("LOAD delta")
    except duckdb.Error as exc:
        try:
            duckdb.sql("INSTALL delta")
            duckdb.sql("LOAD delta")
        except duckdb.Error:
            pytest.skip(f"DuckDB's delta extension is not available: {str(exc).splitlines()[0]}")
    return duckdb
