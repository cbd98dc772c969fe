"""pg8000's errors without a SQLSTATE: only a failing or closed socket is a lost connection
(retried when following); the driver's other InterfaceErrors (authentication it cannot do,
TLS refused, its own checks, ours on COPY) say what they are, without the reconnect hint.
The texts are pg8000's own."""

from __future__ import annotations

import pg8000.native
import pytest

from pgcdc_events.adapters.errors import (
    AuthenticationError,
    ConnectionLostError,
    SlotError,
)
from pgcdc_events.adapters.pg8000 import translate_error


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
