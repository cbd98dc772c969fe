"""File helpers shared by the subcommands: ``-`` means stdin/stdout."""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, cast

from pgcdc_events.errors import ConfigurationError


def add_dsn_arguments(group: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--dsn`` or ``--dsn-file`` (one required), read by ``capture_cmd.read_dsn``: the
    connection options every connected subcommand takes."""
    where = group.add_mutually_exclusive_group(required=True)
    where.add_argument("--dsn",
                       help="postgresql://user@host[:port]/database, or libpq key=value pairs "
                       "(PG* environment variables fill the gaps; the password comes from "
                       "~/.pgpass, PGPASSFILE, passfile= or PGPASSWORD, as with libpq)")
    where.add_argument("--dsn-file", metavar="PATH",
                       help="read the DSN from this file (so that no secret is on the command "
                       "line)")


def _refuse_directory(path: str) -> None:
    """A directory given as an input file: say so, and how to read rotating capture files."""
    if not os.path.isdir(path):
        return
    names = os.listdir(path)
    if "_capture.checkpoint.json" in names or any(
            n.startswith("capture-") and n.endswith(".jsonl") for n in names):
        raise ConfigurationError(
            f"{path} is a directory of rotating capture files, not a capture file: read its "
            f"files in order, as one capture: cat {path.rstrip('/')}/capture-*.jsonl | "
            "pgcdc-events decode --capture - (or follow it with pgcdc-events spark stream)")
    raise ConfigurationError(f"{path} is a directory, not a file: give a file's path")


@contextmanager
def open_input(path: str) -> Iterator[IO[str]]:
    """Open ``path`` for reading text (``-`` is standard input)."""
    if path == "-":
        yield sys.stdin
        return
    _refuse_directory(path)
    with open(path, encoding="utf-8") as fh:
        yield fh


@contextmanager
def open_binary_input(path: str) -> Iterator[IO[bytes]]:
    """Open ``path`` for reading bytes (``-`` is standard input)."""
    if path == "-":
        yield sys.stdin.buffer
        return
    _refuse_directory(path)
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
        binary: IO[bytes] | None = getattr(sys.stdout, "buffer", None)
        if binary is None:  # a text-only stream (contextlib.redirect_stdout to a StringIO)
            binary = cast("IO[bytes]", _TextBytes(sys.stdout))
        yield binary
        binary.flush()
        return
    with open(_create(path), "wb") as fh:
        yield fh


class _TextBytes(io.RawIOBase):
    """UTF-8 bytes written to a text stream."""

    def __init__(self, text: IO[str]) -> None:
        super().__init__()
        self.text = text

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.text.write(bytes(data).decode("utf-8"))
        return len(data)

    def flush(self) -> None:
        self.text.flush()


def count(n: int, word: str, plural: str | None = None) -> str:
    """``n`` and ``word``, plural unless ``n`` is 1: ``1 table``, ``1,234 changes``."""
    return f"{n:,} {word if n == 1 else plural or word + 's'}"
