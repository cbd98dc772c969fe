"""Spark plumbing shared by the layer: Arrow map operations without pandas, sessions, Arrow I/O.

PySpark's ``DataFrame.mapInArrow`` insists on pandas being installed although an
Arrow map never touches it; :func:`map_in_arrow` uses the public method when
pandas is there and otherwise builds the same plan node itself.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema, to_arrow_type
from pyspark.sql.types import DataType, StructType

__all__ = [
    "arrow_schema", "arrow_type", "local_session", "map_in_arrow", "nullable_type",
    "to_arrow_table",
]

ArrowMap = Callable[[Iterator[Any]], Iterator[Any]]

_HAVE_PANDAS = importlib.util.find_spec("pandas") is not None


def map_in_arrow(df: DataFrame, func: ArrowMap, schema: StructType) -> DataFrame:
    """``df.mapInArrow(func, schema)``, also where pandas is not installed."""
    if _HAVE_PANDAS:
        return df.mapInArrow(func, schema)
    # Not in pyspark's type stubs; the function mapInArrow itself calls (pyspark 4.x).
    from pyspark.sql.pandas.functions import (  # type: ignore[attr-defined]  # noqa: PLC0415
        vectorized_udf,
    )
    from pyspark.util import PythonEvalType  # noqa: PLC0415

    # The same UDF mapInArrow builds, minus its pandas version check (pyspark 4.x).
    udf = vectorized_udf(func, schema, PythonEvalType.SQL_MAP_ARROW_ITER_UDF, "pandas")
    column = udf(*[df[name] for name in df.columns])
    jdf = df._jdf.mapInArrow(column._jc, False, None)
    return DataFrame(jdf, df.sparkSession)


def arrow_type(dt: DataType) -> pa.DataType:
    """The Arrow type Spark exchanges for ``dt`` (timestamps with a time zone in UTC)."""
    return to_arrow_type(dt, timezone="UTC")


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark exchanges for ``schema``."""
    return to_arrow_schema(schema, timezone="UTC")


def to_arrow_table(df: DataFrame) -> pa.Table:
    """The rows of ``df`` as an Arrow table (no pandas, no Python ``datetime`` range limits).

    ``toArrow()`` casts to the DataFrame's schema, which fails on a null struct whose
    fields are declared non-nullable (Spark sends nulls for them); the batches are
    collected the same way and cast to the schema with every type nullable instead.
    """
    target = arrow_schema(nullable_type(df.schema))  # type: ignore[arg-type]
    # What toArrow() calls; pyspark's stubs type the attribute as a column accessor.
    collect: Any = df._collect_as_arrow
    batches = collect(empty_list_if_zero_records=False)
    return pa.Table.from_batches(batches).cast(target)


def nullable_type(dt: DataType) -> DataType:
    """``dt`` with every struct field, array element and map value nullable."""
    from pyspark.sql.types import ArrayType, MapType, StructField  # noqa: PLC0415

    if isinstance(dt, StructType):
        return StructType([StructField(f.name, nullable_type(f.dataType), True, f.metadata)
                           for f in dt.fields])
    if isinstance(dt, ArrayType):
        return ArrayType(nullable_type(dt.elementType), True)
    if isinstance(dt, MapType):
        return MapType(dt.keyType, nullable_type(dt.valueType), True)
    return dt


def local_session(master: str = "local[2]", app: str = "pgcdc-events",
                  conf: dict[str, str] | None = None) -> SparkSession:
    """A SparkSession for local work: UTC session time zone, workers on this interpreter."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "8"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
