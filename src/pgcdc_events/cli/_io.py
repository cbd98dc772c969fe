"""File helpers shared by the subcommands: ``-`` means stdin/stdout."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO


@contextmanager
def open_input(path: str) -> Iterator[IO[str]]:
    """Open ``path`` for reading text (``-`` is standard input)."""
    if path == "-":
        yield sys.stdin
        return
    with open(path, encoding="utf-8") as fh:
        yield fh


@contextmanager
def open_output(path: str | None) -> Iterator[IO[str]]:
    """Open ``path`` for writing text (``None`` or ``-`` is standard output)."""
    if path is None or path == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    with open(path, "w", encoding="utf-8") as fh:
        yield fh


def count(n: int, word: str, plural: str | None = None) -> str:
    """``n`` and ``word``, plural unless ``n`` is 1: ``1 table``, ``1,234 changes``."""
    return f"{n:,} {word if n == 1 else plural or word + 's'}"
