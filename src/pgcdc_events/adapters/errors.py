"""Errors of the slot reader and the capture loop; every one is a :class:`PgCdcError`.

Driver exceptions never escape the adapter: each is translated into one of these,
naming the slot, the publication or the server setting at fault and, when the
server sent one, its SQLSTATE.
"""

from __future__ import annotations

from pgcdc_events.errors import PgCdcError

__all__ = [
    "AuthenticationError",
    "CheckpointAheadError",
    "CheckpointError",
    "ConnectionLostError",
    "ConnectionSecurityError",
    "DeliveryGapError",
    "OutputLockedError",
    "PrivilegeError",
    "PublicationNotFoundError",
    "ServerConfigError",
    "SlotBusyError",
    "SlotError",
    "SlotLostError",
    "SlotMovedError",
    "SlotNotFoundError",
    "SnapshotError",
]

#: The hint of a lost or refused connection, in every command: ``capture`` and ``tail``
#: retry by themselves; ``catalog``, ``validate`` and the library's one-off calls do not.
RETRY_HINT = ("capture and tail reconnect by themselves (with --follow for ever, otherwise "
              "for --retry-for seconds); other commands: run them again")


class SlotError(PgCdcError):
    """Reading or moving a replication slot failed.

    ``slot`` names the slot, ``sqlstate`` is the server's error code (``None`` when
    the error did not come from the server) and ``hint`` says what to do about it.
    """

    def __init__(self, message: str, *, slot: str | None = None, sqlstate: str | None = None,
                 hint: str | None = None) -> None:
        self.slot = slot
        self.sqlstate = sqlstate
        self.hint = hint
        text = message
        if sqlstate:
            text += f" [SQLSTATE {sqlstate}]"
        if hint:
            text += f"; {hint}"
        super().__init__(text)


class ServerConfigError(SlotError):
    """The server is not configured for logical decoding (``wal_level``, version, options)."""


class SlotNotFoundError(SlotError):
    """The replication slot does not exist (and creating it was not asked for)."""


class SlotLostError(SlotError):
    """The slot exists but was invalidated: the WAL it needed has been removed."""


class SlotBusyError(SlotError):
    """Another session is reading the slot right now; retrying later may succeed."""


class PublicationNotFoundError(SlotError):
    """A publication named for decoding does not exist (and creating it was not asked for)."""


class PrivilegeError(SlotError):
    """The role may not read replication slots (it needs REPLICATION or superuser)."""


class ConnectionLostError(SlotError):
    """The connection to the server failed or was closed (server restart, network); transient."""


class SnapshotError(SlotError):
    """An initial snapshot cannot be taken consistently (the slot exists already, the
    server or the reader cannot export a snapshot), or one that did not finish blocks
    the mode asked for."""


class CheckpointError(PgCdcError):
    """The output and its checkpoint disagree, or the checkpoint cannot be read or written.

    ``path`` is the checkpoint or output file concerned.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class DeliveryGapError(CheckpointError):
    """The slot is past the checkpoint: changes in between were never captured.

    Happens when the slot was dropped and re-created, or advanced or consumed by
    another client. ``checkpoint_lsn`` and ``slot_lsn`` give the gap's bounds.
    """

    def __init__(self, message: str, *, path: str | None = None, checkpoint_lsn: int,
                 slot_lsn: int) -> None:
        self.checkpoint_lsn = checkpoint_lsn
        self.slot_lsn = slot_lsn
        super().__init__(message, path=path)


class SlotMovedError(DeliveryGapError):
    """The slot is not where this reader left it: another client read or advanced it.

    Raised before anything read since is committed or acknowledged.
    """


class OutputLockedError(CheckpointError):
    """Another process holds the output's lock: two writers would lose and repeat changes.

    ``holder`` is the PID the lock file names (``"?"`` when unknown).
    """

    def __init__(self, message: str, *, path: str | None = None, holder: str = "?") -> None:
        self.holder = holder
        super().__init__(message, path=path)


class CheckpointAheadError(CheckpointError):
    """The output was captured from another server, or from this one before it was restored:
    its checkpoint is past what this server's WAL holds. Continuing would skip changes."""


class AuthenticationError(SlotError):
    """The server refused the credentials (wrong or missing password, no ``pg_hba.conf``
    line, unknown role). Not retried: trying again cannot help."""


class ConnectionSecurityError(SlotError):
    """TLS could not be set up as ``sslmode`` demands (the server offers no TLS, or its
    certificate does not verify). Not retried."""
