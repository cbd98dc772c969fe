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
    "arrow_schema", "arrow_type", "local_session", "map_in_arrow", "nullable_type", "session",
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


_QUIET_LOG4J = """\
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = {level}
"""


def session(master: str | None = "local[*]", app: str = "pgcdc-events", *,
            conf: dict[str, str] | None = None, quiet: bool = False,
            python: str | None = None, log_level: str = "error") -> SparkSession:
    """A SparkSession whose Python workers find pgcdc-events.

    The workers run ``python`` (default: this interpreter, ``sys.executable``), set as
    ``spark.pyspark.python`` (and ``PYSPARK_PYTHON`` unless already set): on a cluster,
    name an interpreter that has pgcdc-events installed on every worker. ``master``
    ``None`` keeps the one ``spark-submit`` gives. The session time zone is UTC (what the
    decoded ``TimestampType`` values mean). ``quiet`` sets the JVM's log level to ERROR
    before it starts (no INFO/WARN lines) and turns the stage progress bars off.
    ``conf`` is applied last. An active session is returned as it is.
    """
    python = python or sys.executable
    os.environ.setdefault("PYSPARK_PYTHON", python)
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = (SparkSession.builder.appName(app)
               .config("spark.pyspark.python", python)
               .config("spark.sql.session.timeZone", "UTC"))
    if master is not None:
        builder = builder.master(master)
    if quiet:
        import tempfile  # noqa: PLC0415

        fd, path = tempfile.mkstemp(prefix="pgcdc-events-log4j2-", suffix=".properties")
        with os.fdopen(fd, "w") as fh:
            fh.write(_QUIET_LOG4J.replace("{level}", log_level))
        builder = (builder.config("spark.driver.extraJavaOptions",
                                  f"-Dlog4j2.configurationFile=file:{path}")
                   .config("spark.ui.showConsoleProgress", "false"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    saved = None
    if quiet:
        # The JVM prints a few lines before any logging (its incubator-module warning):
        # it inherits a standard error that goes nowhere. This process keeps its own.
        saved = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
    try:
        spark = builder.getOrCreate()
    finally:
        if saved is not None:
            os.dup2(saved, 2)
            os.close(saved)
        if quiet:
            os.unlink(path)  # read when the JVM started
    if quiet:
        spark.sparkContext.setLogLevel(log_level.upper())
    return spark


def local_session(master: str = "local[2]", app: str = "pgcdc-events",
                  conf: dict[str, str] | None = None) -> SparkSession:
    """A SparkSession for local work (:func:`session` with the UI off, eight shuffle
    partitions)."""
    return session(master, app, conf={"spark.ui.enabled": "false",
                                      "spark.sql.shuffle.partitions": "8", **(conf or {})})
