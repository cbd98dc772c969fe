"""The testing layer's slow campaigns run only when asked for (``-m slow``)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip this directory's ``slow`` tests unless the marker expression names ``slow``."""
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow campaign: run with -m slow")
    for item in items:
        if item.get_closest_marker("slow") and HERE in Path(str(item.path)).parents:
            item.add_marker(skip)
