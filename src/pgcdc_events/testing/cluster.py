"""A throwaway PostgreSQL cluster for tests: ``initdb`` from scratch, logical WAL, torn down after.

The server refuses to run as root, so when the current user is root every server
command runs as the ``postgres`` OS user (the owner Debian's packages create).
Nothing here imports a database driver; :meth:`TempCluster.dsn` gives the
connection parameters.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pgcdc_events.errors import PgCdcError

__all__ = ["ClusterError", "TempCluster", "find_bindir"]

#: Settings every throwaway cluster gets: logical decoding, prepared
#: transactions for two-phase tests, and no fsync (tests need no durability).
DEFAULT_SETTINGS: Mapping[str, str] = {
    "wal_level": "logical",
    "max_replication_slots": "20",
    "max_wal_senders": "20",
    "max_prepared_transactions": "10",
    "fsync": "off",
    "full_page_writes": "off",
    "timezone": "UTC",
    "log_min_messages": "warning",
}


class ClusterError(PgCdcError, RuntimeError):
    """The throwaway cluster could not be created, started or stopped."""


def find_bindir() -> Path:
    """Directory of the newest installed server binaries (``$PG_BINDIR`` wins)."""
    env = os.environ.get("PG_BINDIR")
    if env:
        return Path(env)
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    if not found:
        raise ClusterError(
            "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin; "
            "install them (apt-get install postgresql) or set PG_BINDIR"
        )
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TempCluster:
    """A PostgreSQL cluster in a temporary directory, listening on 127.0.0.1.

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        settings: Mapping[str, str] | None = None,
        *,
        bindir: Path | None = None,
        port: int | None = None,
    ) -> None:
        self.bindir = bindir or find_bindir()
        self.settings = {**DEFAULT_SETTINGS, **(settings or {})}
        self.port = port or _free_port()
        self.host = "127.0.0.1"
        self.user = "postgres"
        self.database = "postgres"
        self._root = Path(tempfile.mkdtemp(prefix="pgcdc-cluster-"))
        self.datadir = self._root / "data"
        self.logfile = self._root / "server.log"
        self._as_postgres = os.geteuid() == 0
        self._running = False

    # -- process helpers -------------------------------------------------
    def _run(self, args: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, Any] = {}
        if self._as_postgres:
            kwargs.update(user="postgres", group="postgres", extra_groups=[])
        try:
            proc = subprocess.run(
                list(args), capture_output=True, text=True, check=False, cwd=self._root, **kwargs
            )
        except OSError as exc:
            raise ClusterError(f"cannot run {args[0]}: {exc}") from exc
        if check and proc.returncode != 0:
            log = self.logfile.read_text(errors="replace")[-2000:] if self.logfile.exists() else ""
            raise ClusterError(
                f"{Path(args[0]).name} failed with status {proc.returncode}: "
                f"{proc.stderr.strip() or proc.stdout.strip()}\n{log}"
            )
        return proc

    def _chown(self, path: Path) -> None:
        if self._as_postgres:
            shutil.chown(path, "postgres", "postgres")

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> TempCluster:
        """Create the cluster with ``initdb`` and start it; waits until it accepts connections."""
        self._chown(self._root)
        self._run(
            [
                str(self.bindir / "initdb"),
                "-D",
                str(self.datadir),
                "-U",
                self.user,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ]
        )
        conf = "".join(f"{key} = '{value}'\n" for key, value in self.settings.items())
        conf += f"port = {self.port}\nlisten_addresses = '{self.host}'\n"
        conf += f"unix_socket_directories = '{self._root}'\n"
        with open(self.datadir / "postgresql.auto.conf", "a", encoding="utf-8") as fh:
            fh.write(conf)
        self._run(
            [
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.datadir),
                "-l",
                str(self.logfile),
                "-w",
                "-t",
                "60",
                "start",
            ]
        )
        self._running = True
        return self

    def restart(self) -> None:
        """Restart the server (fast shutdown), keeping its data."""
        self._run(
            [
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.datadir),
                "-m",
                "fast",
                "-w",
                "-l",
                str(self.logfile),
                "restart",
            ]
        )

    def stop(self) -> None:
        """Stop the server (immediate shutdown) and delete the cluster's files."""
        if self._running:
            self._run(
                [
                    str(self.bindir / "pg_ctl"),
                    "-D",
                    str(self.datadir),
                    "-m",
                    "immediate",
                    "-w",
                    "stop",
                ],
                check=False,
            )
            self._running = False
        shutil.rmtree(self._root, ignore_errors=True)

    @property
    def server_version(self) -> str:
        """The ``PG_VERSION`` of the data directory, e.g. ``"15"``."""
        return (self.datadir / "PG_VERSION").read_text().strip()

    def dsn(self) -> dict[str, Any]:
        """Keyword arguments for ``pg8000.connect`` (and most drivers)."""
        return {"host": self.host, "port": self.port, "user": self.user, "database": self.database}

    def url(self) -> str:
        """A ``postgresql://`` URL for the cluster."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{self.database}"

    def __enter__(self) -> TempCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
