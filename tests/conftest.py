"""Shared fixtures: one throwaway PostgreSQL cluster per session, a fresh database per test.

Tests that use ``pg_cluster`` (directly or through ``pg_conn``) get the ``postgres``
marker automatically; tests marked ``slow`` run only with ``-m slow``. Without server binaries those tests FAIL, so CI never skips
them silently; set ``PGCDC_SKIP_POSTGRES=1`` to skip them instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from pgcdc_events.testing.cluster import ClusterError, TempCluster, find_bindir

if TYPE_CHECKING:
    import pg8000.native

SKIP_ENV = "PGCDC_SKIP_POSTGRES"


def _skip_postgres() -> bool:
    """Whether the user asked to skip the server tests."""
    return os.environ.get(SKIP_ENV, "") == "1"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under pytest-xdist (``tools/bootstrap.sh test`` runs ``-n 2``): each test file is a
    unit of work (its module fixtures are built once), and every file of ``tests/spark``
    goes to one worker together, since the suite keeps one SparkSession (one JVM) per run.
    The largest unit is handed out first. Each worker starts its own cluster."""
    from xdist.scheduler import LoadScopeScheduling  # noqa: PLC0415 - only under xdist

    class _SparkTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "tests/spark/" if path.startswith("tests/spark/") else path

    return _SparkTogether(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that needs the cluster ``postgres`` (and skip it if asked to); skip
    the ``slow`` campaigns unless the marker expression names ``slow`` (``-m slow``)."""
    skip = pytest.mark.skip(reason=f"{SKIP_ENV}=1: PostgreSQL tests skipped")
    run_slow = "slow" in (config.getoption("markexpr") or "")
    skip_slow = pytest.mark.skip(reason="a long campaign: run with -m slow")
    for item in items:
        if "pg_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)
            if _skip_postgres():
                item.add_marker(skip)
        if not run_slow and item.get_closest_marker("slow"):
            item.add_marker(skip_slow)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[TempCluster]:
    """One running throwaway cluster (wal_level=logical) for the whole test session."""
    if _skip_postgres():
        pytest.skip(f"{SKIP_ENV}=1: PostgreSQL tests skipped")
    problem = None
    cluster = None
    try:
        find_bindir()
        cluster = TempCluster()
        cluster.start()
    except ClusterError as exc:
        problem = str(exc)
        if cluster is not None:
            cluster.stop()
    if problem is not None or cluster is None:
        pytest.fail(
            f"the throwaway PostgreSQL cluster is required but could not start: {problem}\n"
            f"Install the server binaries (or set PG_BINDIR), or set {SKIP_ENV}=1 to skip"
            " the server tests.",
            pytrace=False,
        )
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def pg_conn(pg_cluster: TempCluster) -> Iterator[pg8000.native.Connection]:
    """A pg8000 ``native.Connection`` to a fresh database; its slots and database dropped after."""
    from support.databases import fresh_database  # noqa: PLC0415

    with fresh_database(pg_cluster) as (conn, _):
        yield conn
