"""Whole-record comparison for the Spark tests: the event layer's JsonConverter lines."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from pgcdc_events.events import EventConfig, EventDecoder, JsonRecordWriter
from pgcdc_events.protocol import CaptureRow
from pgcdc_events.types.catalog import CatalogSnapshot

#: The processing time both decoders stamp in these tests.
CLOCK_NS = 1_700_000_000_000_000_000
#: The run id both decoders put in the ``__debezium.context.runId`` header.
RUN_ID = "spark-tests"


def decoder_lines(rows: Sequence[CaptureRow], config: EventConfig,
                  catalog: CatalogSnapshot | None = None) -> list[str]:
    """The JsonConverter lines of every record ``EventDecoder`` makes of ``rows``."""
    decoder = EventDecoder(config, catalog=catalog, clock=lambda: CLOCK_NS, run_id=RUN_ID)
    render = JsonRecordWriter.for_config(config).record_line
    return [render(record) for record in decoder.feed_rows(rows)]


def first_difference(got: Sequence[str], want: Sequence[str]) -> str:
    """Where two record lists part (empty when equal)."""
    if list(got) == list(want):
        return ""
    at = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
              min(len(got), len(want)))
    return (f"{len(got)} records, {len(want)} expected; first difference at {at}:\n"
            f"  got  {got[at] if at < len(got) else None!s:.600}\n"
            f"  want {want[at] if at < len(want) else None!s:.600}")


def canonical(array: Any) -> list[Any]:
    """An Arrow array as plain Python: temporal values as integers, NaN as ``"NaN"``."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    t = array.type
    valid = array.is_valid().to_pylist()
    if pa.types.is_struct(t):
        columns = [canonical(array.field(i)) for i in range(t.num_fields)]
        names = [t.field(i).name for i in range(t.num_fields)]
        return [dict(zip(names, values, strict=True)) if ok else None
                for ok, *values in zip(valid, *columns, strict=True)] if columns else \
            [{} if ok else None for ok in valid]
    if pa.types.is_map(t):
        keys = canonical(array.keys)
        items = canonical(array.items)
        offsets = array.offsets.to_pylist()
        return [list(zip(keys[offsets[i]:offsets[i + 1]], items[offsets[i]:offsets[i + 1]],
                         strict=True)) if ok else None for i, ok in enumerate(valid)]
    if pa.types.is_list(t):
        values = canonical(array.values)
        offsets = array.offsets.to_pylist()
        return [values[offsets[i]:offsets[i + 1]] if ok else None for i, ok in enumerate(valid)]
    if pa.types.is_date32(t):
        return array.cast(pa.int32()).to_pylist()
    if pa.types.is_timestamp(t) or pa.types.is_duration(t) or pa.types.is_time(t):
        return array.cast(pa.int64()).to_pylist()
    values = array.to_pylist()
    if pa.types.is_floating(t):
        return ["NaN" if v is not None and math.isnan(v) else v for v in values]
    return values


def table_rows(table: Any) -> list[dict[str, Any]]:
    """Rows of an Arrow table of events in canonical form, in ``_position`` order."""
    columns = {name: canonical(table.column(name)) for name in table.column_names}
    rows = [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(),
                                                                        strict=True)]
    rows.sort(key=lambda r: (r["_position"]["message"], r["_position"]["index"]))
    return rows


def last_rows_per_key(lines: Sequence[str], topic: str, columns: tuple[str, ...]
                      ) -> list[tuple[Any, ...]]:
    """What a table keyed by ``id`` holds after the record lines' events of ``topic`` (the
    last event per key, a deleted key gone), as sorted tuples of ``columns``."""
    last: dict[Any, tuple[Any, ...] | None] = {}
    for line in lines:
        record = json.loads(line)
        if record["topic"] != topic or record["value"] is None:
            continue
        after = record["value"]["payload"]["after"]
        last[record["key"]["payload"]["id"]] = (
            None if after is None else tuple(after[c] for c in columns))
    return sorted(row for row in last.values() if row is not None)

