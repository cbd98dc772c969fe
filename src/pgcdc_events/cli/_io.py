"""File helpers shared by the subcommands: ``-`` means stdin/stdout."""

from __future__ import annotations

import os
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
def open_binary_input(path: str) -> Iterator[IO[bytes]]:
    """Open ``path`` for reading bytes (``-`` is standard input)."""
    if path == "-":
        yield sys.stdin.buffer
        return
    with open(path, "rb") as fh:
        yield fh


def _create(path: str) -> int:
    """A file descriptor writing ``path`` from its start, a new file created 0600."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)


@contextmanager
def open_output(path: str | None) -> Iterator[IO[str]]:
    """Open ``path`` for writing text (``None`` or ``-`` is standard output; a new file is
    created 0600)."""
    if path is None or path == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    with open(_create(path), "w", encoding="utf-8") as fh:
        yield fh


@contextmanager
def open_binary_output(path: str | None) -> Iterator[IO[bytes]]:
    """Open ``path`` for writing bytes (``None`` or ``-`` is standard output; a new file is
    created 0600)."""
    if path is None or path == "-":
        sys.stdout.flush()  # text written before goes first
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    with open(_create(path), "wb") as fh:
        yield fh


def count(n: int, word: str, plural: str | None = None) -> str:
    """``n`` and ``word``, plural unless ``n`` is 1: ``1 table``, ``1,234 changes``."""
    return f"{n:,} {word if n == 1 else plural or word + 's'}"
