"""pg8000's errors without a SQLSTATE: only a failing or closed socket is a lost connection
(retried by capture and tail; the hint says so, and that other commands are run again);
the driver's other InterfaceErrors (authentication it cannot do,
TLS refused, its own checks, ours on COPY) say what they are, without the reconnect hint.
The texts are pg8000's own."""

from __future__ import annotations

import time
from typing import Any

import pg8000.native
import pytest

from pgcdc_events.adapters.errors import (
    RETRY_HINT,
    AuthenticationError,
    ConnectionLostError,
    SlotError,
)
from pgcdc_events.adapters.pg8000 import copy_out, translate_error
from pgcdc_events.testing.cluster import TempCluster


def _wrapped(message: str, cause: BaseException) -> BaseException:
    try:
        raise pg8000.native.InterfaceError(message) from cause
    except pg8000.native.InterfaceError as exc:
        return exc


@pytest.mark.parametrize("exc", [
    pg8000.native.InterfaceError("network error"),
    pg8000.native.InterfaceError("connection is closed"),
    pg8000.native.InterfaceError("communication error"),
    _wrapped("network error", ConnectionResetError(104, "Connection reset by peer")),
    ConnectionRefusedError(111, "Connection refused"),
])
def test_a_failing_socket_is_a_lost_connection(exc: BaseException) -> None:
    error = translate_error(exc, slot="s", action="read")
    assert type(error) is ConnectionLostError
    assert str(error).startswith("read: connection to the server lost or refused: ")
    # true of every command, the one-off ones (catalog, validate) included
    assert error.hint == RETRY_HINT and "other commands: run them again" in str(error)


@pytest.mark.parametrize(("message", "kind"), [
    ("server requesting MD5 password authentication, but no password was provided",
     AuthenticationError),
    ("Authentication method 7 not supported by pg8000.", AuthenticationError),
    ("Server refuses SSL", SlotError),
    ("unexpected data after the COPY", SlotError),
])
def test_other_driver_errors_are_not_a_lost_connection(message: str, kind: type) -> None:
    error = translate_error(pg8000.native.InterfaceError(message), slot="s", action="connect",
                            password_source="PGPASSWORD")
    assert type(error) is kind
    assert message in str(error) and "reconnects" not in str(error)
    if kind is AuthenticationError:
        assert "PGPASSWORD" in str(error)
    else:
        assert str(error).startswith("connect: the driver stopped: ")
        assert "reconnecting would not help" in str(error)


def test_a_session_ended_right_after_a_copy_is_a_lost_connection(
        pg_conn: pg8000.native.Connection, pg_cluster: TempCluster) -> None:
    """The server ends the session (``pg_terminate_backend``) once it sent a COPY's end
    and before the reader took it: its FATAL comes after ReadyForQuery in the same read
    (capdec2's finding). That is a lost connection, with the server's words, where it was
    "the driver stopped: unexpected data after the COPY ... reconnecting would not help"."""
    database = pg_conn.run("SELECT current_database()")[0][0]
    conn = pg8000.native.Connection(**{**pg_cluster.dsn(), "database": database})
    pid = conn.run("SELECT pg_backend_pid()")[0][0]
    real = conn._sock

    class Late:
        """The socket, its first read after the server ended the session."""

        def __init__(self) -> None:
            self.ended: list[bool] = []

        def read1(self, size: int) -> bytes:
            if not self.ended:
                time.sleep(0.3)  # the COPY's end is on its way
                self.ended.extend(row[0] for row in pg_conn.run(
                    "SELECT pg_terminate_backend(:p, 5000)", p=pid))
                time.sleep(0.2)  # and the FATAL after it
            return bytes(real.read1(size))

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

    late = Late()
    conn._sock = late
    pieces: list[bytes] = []
    with pytest.raises(pg8000.native.DatabaseError) as caught:
        copy_out(conn, "COPY (SELECT g FROM generate_series(1, 3) g) TO STDOUT", pieces.append)
    assert late.ended == [True]
    assert b"".join(pieces) == b"1\n2\n3\n"  # the COPY was whole
    error = translate_error(caught.value, slot="s", action="read table public.t")
    assert type(error) is ConnectionLostError
    assert "terminating connection due to administrator command" in str(error)
    assert "reconnecting would not help" not in str(error)
