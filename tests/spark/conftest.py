"""One local SparkSession for the whole run, and helpers comparing Spark with the event layer.

The session is ``local[2]`` with two shuffle partitions and UTC as its time zone;
Python workers run on this interpreter. Every test using it is marked ``spark``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pytest

from pgcdc_events.events import ChangeRecord, EventConfig, EventDecoder
from pgcdc_events.protocol import CaptureRow
from pgcdc_events.types.catalog import CatalogSnapshot

pyspark = pytest.importorskip("pyspark")

from pyspark.sql import SparkSession  # noqa: E402

from pgcdc_events.spark import DecodedCapture, SparkSchemaOptions, decode_capture  # noqa: E402
from pgcdc_events.spark._session import local_session  # noqa: E402
from pgcdc_events.spark.batch import TableLayout  # noqa: E402
from pgcdc_events.spark.capture import capture_dataframe  # noqa: E402
from pgcdc_events.spark.local import decode_to_arrow, stream_context  # noqa: E402
from pgcdc_events.spark.registry import RelationRegistry  # noqa: E402
from pgcdc_events.spark.values import ValueConverter  # noqa: E402

#: The processing time both decoders stamp in these tests.
CLOCK_NS = 1_700_000_000_000_000_000


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests that use the session ``spark``."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The run's SparkSession (``local[2]``)."""
    session = local_session("local[2]", "pgcdc-events-tests", conf={
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.adaptive.enabled": "true",
        "spark.driver.memory": "2g",
        "spark.ui.showConsoleProgress": "false",
    })
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


# -- canonical values: Arrow to comparable Python, whatever the Spark type --------------------


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
    rows.sort(key=lambda r: (r["_position"]["commit"], r["_position"]["message"],
                             r["_position"]["index"]))
    return rows


class Expected:
    """The rows Spark should give, computed from the event layer's records."""

    def __init__(self, registry: RelationRegistry, options: SparkSchemaOptions) -> None:
        self.options = SparkSchemaOptions(options.flavour, options.variable_scale_decimal_scale,
                                          respect_optional=False)
        self._converters: dict[Any, ValueConverter] = {}
        self.layouts = {t: TableLayout(registry, t, options) for t in registry.tables}
        self.by_topic = {layout.topic: t for t, layout in self.layouts.items()}

    def _struct(self, value: Any, arrow: Any) -> Any:
        if value is None:
            return None
        out = {}
        for i in range(arrow.num_fields):
            field = arrow.field(i)
            try:
                schema = value.schema.field(field.name).schema
            except KeyError:
                out[field.name] = None
                continue
            converter = self._converters.get(schema)
            if converter is None:
                converter = self._converters[schema] = ValueConverter(schema, self.options)
            array = converter.array([value[field.name]])
            if array.type != field.type:
                array = array.cast(field.type)
            out[field.name] = canonical(array)[0]
        return out

    def rows(self, records: Iterable[ChangeRecord]) -> dict[str, list[dict[str, Any]]]:
        """Expected canonical rows per table, in the decoder's order."""
        out: dict[str, list[dict[str, Any]]] = {t: [] for t in self.layouts}
        for rec in records:
            if rec.kind not in ("change", "tombstone", "truncate"):
                continue
            table = self.by_topic[rec.topic]
            layout = self.layouts[table]
            v = rec.value
            row: dict[str, Any] = {}
            if layout.key_arrow is not None:
                row["key"] = self._struct(rec.key, layout.key_arrow)
            row["before"] = self._struct(v["before"] if v else None, layout.value_arrow)
            row["after"] = self._struct(v["after"] if v else None, layout.value_arrow)
            row["source"] = v["source"].as_dict() if v else None
            row["transaction"] = v["transaction"].as_dict() if v and v["transaction"] else None
            for name in ("op", "ts_ms", "ts_us", "ts_ns"):
                row[name] = v[name] if v else None
            row["_kind"] = rec.kind
            row["_lsn"] = rec.lsn
            if layout.key_arrow is not None:
                related = None
                for header in rec.headers:
                    if header.name in ("__debezium.newkey", "__debezium.oldkey"):
                        related = self._struct(header.value, layout.key_arrow)
                row["_related_key"] = related
            out[table].append(row)
        return out


def compare(registry: RelationRegistry, options: SparkSchemaOptions, actual: dict[str, Any],
            records: Sequence[ChangeRecord]) -> list[str]:
    """Every difference between decoded Arrow tables and the event layer's records."""
    expected = Expected(registry, options).rows(records)
    problems: list[str] = []
    for table, want in expected.items():
        got = table_rows(actual[table])
        for row in got:
            row.pop("_position")
            row.pop("_version")
        if len(got) != len(want):
            problems.append(f"{table}: {len(got)} rows in Spark, {len(want)} expected")
        for i, (g, w) in enumerate(zip(got, want, strict=False)):
            for name in w:
                if g.get(name) != w[name]:
                    problems.append(f"{table}[{i}].{name}: spark {g.get(name)!r:.300} "
                                    f"expected {w[name]!r:.300}")
    return problems


@pytest.fixture
def spark_matches_decoder(spark: SparkSession) -> Callable[..., DecodedCapture]:
    """Decode a capture with Spark and with the event layer; assert the tables are equal."""

    def check(rows: Sequence[CaptureRow], config: EventConfig,
              catalog: CatalogSnapshot | None = None, *, flavour: str = "literal",
              **kwargs: Any) -> DecodedCapture:
        decoder = EventDecoder(config, catalog=catalog, clock=lambda: CLOCK_NS)
        records = decoder.feed_rows(rows)
        decoded = decode_capture(capture_dataframe(spark, rows), config, catalog=catalog,
                                 flavour=flavour, tombstones=True,  # type: ignore[arg-type]
                                 clock=lambda: CLOCK_NS, **kwargs)
        problems = compare(decoded.registry, decoded.options, decoded.to_arrow(), records)
        decoded.unpersist()
        assert not problems, "\n".join(problems[:40]) + f"\n({len(problems)} differences)"
        return decoded

    return check


@pytest.fixture(scope="session")
def arrow_matches_decoder() -> Callable[..., dict[str, Any]]:
    """Run the Spark layer's batch decoder in-process; assert it equals the event layer."""

    def check(rows: Sequence[CaptureRow], config: EventConfig,
              catalog: CatalogSnapshot | None = None, *, flavour: str = "literal",
              batch_size: int = 10_000) -> dict[str, Any]:
        records = EventDecoder(config, catalog=catalog, clock=lambda: CLOCK_NS).feed_rows(rows)
        options = SparkSchemaOptions(flavour)  # type: ignore[arg-type]
        tables = decode_to_arrow(rows, config, catalog, options=options, tombstones=True,
                                 clock=lambda: CLOCK_NS, batch_size=batch_size)
        registry = stream_context(rows, config, catalog).registry
        problems = compare(registry, options, tables, records)
        assert not problems, "\n".join(problems[:40]) + f"\n({len(problems)} differences)"
        return tables

    return check


@pytest.fixture(scope="session")
def events_equal() -> Callable[..., None]:
    """Assert that decoded tables (Arrow) equal the event layer's records."""

    def check(registry: RelationRegistry, options: SparkSchemaOptions, tables: dict[str, Any],
              records: Sequence[ChangeRecord]) -> None:
        problems = compare(registry, options, tables, records)
        assert not problems, "\n".join(problems[:40]) + f"\n({len(problems)} differences)"

    return check


@pytest.fixture(scope="session")
def canonical_values() -> Callable[[Any], list[Any]]:
    """:func:`canonical`: Arrow values as comparable Python (temporal as integers)."""
    return canonical
