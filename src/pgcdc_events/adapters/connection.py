"""Connection parameters, passwords and TLS as libpq does them, over pg8000.

:func:`parse_conninfo` reads a ``postgresql://`` URL or a ``key=value`` string
(libpq's quoting: single quotes, backslash escapes), fills the gaps from the
``PG*`` environment variables and refuses any parameter it cannot honour (rather
than dropping it). The password comes, as in libpq, from the connection string,
then ``PGPASSWORD``, then the password file (``passfile=``, ``PGPASSFILE`` or
``~/.pgpass``; ignored when group- or world-readable). No message ever shows it.

:meth:`ConnectionSettings.connect` opens the socket itself, negotiates TLS with
libpq's ``sslmode`` meanings (``disable`` never sends an SSLRequest; ``verify-ca``
checks the chain against ``sslrootcert``; ``verify-full`` the host name too;
``sslcert``/``sslkey`` give a client certificate) and hands the ready socket to
pg8000 through its public ``sock`` argument: pg8000 does the startup and the
authentication (SCRAM with channel binding over TLS), and the caller keeps the
socket (the streaming reader reads the replication protocol from it).
"""

from __future__ import annotations

import os
import re
import socket
import ssl
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import attrs

from pgcdc_events.adapters.errors import (
    RETRY_HINT,
    AuthenticationError,
    ConnectionLostError,
    ConnectionSecurityError,
)
from pgcdc_events.errors import ConfigurationError

__all__ = ["ConnectionSettings", "ServerUnreachableError", "parse_conninfo", "parse_dsn"]

SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
#: Seconds to wait for a connection when the DSN does not say (libpq waits for ever).
DEFAULT_CONNECT_TIMEOUT = 10.0
_ENV = {
    "host": "PGHOST", "port": "PGPORT", "dbname": "PGDATABASE", "user": "PGUSER",
    "password": "PGPASSWORD", "passfile": "PGPASSFILE", "connect_timeout": "PGCONNECT_TIMEOUT",
    "application_name": "PGAPPNAME", "sslmode": "PGSSLMODE", "sslrootcert": "PGSSLROOTCERT",
    "sslcert": "PGSSLCERT", "sslkey": "PGSSLKEY", "sslsni": "PGSSLSNI", "options": "PGOPTIONS",
    "client_encoding": "PGCLIENTENCODING", "target_session_attrs": "PGTARGETSESSIONATTRS",
    "gssencmode": "PGGSSENCMODE", "channel_binding": "PGCHANNELBINDING",
}
_OTHER_KEYS = {"fallback_application_name", "keepalives"}
#: libpq environment variables whose meaning this library cannot honour.
_UNSUPPORTED_ENV = ("PGHOSTADDR", "PGSERVICE", "PGSERVICEFILE", "PGSSLCRL", "PGSSLCRLDIR",
                    "PGSSLPASSWORD", "PGSSLMINPROTOCOLVERSION", "PGSSLMAXPROTOCOLVERSION",
                    "PGKRBSRVNAME", "PGGSSLIB", "PGREQUIREPEER", "PGREQUIREAUTH",
                    "PGSSLCERTMODE", "PGLOADBALANCEHOSTS", "PGSSLNEGOTIATION")
#: For each parameter with a closed set of values, the ones this library honours.
_ALLOWED = {
    "sslmode": SSLMODES, "sslsni": ("0", "1"), "keepalives": ("0", "1"),
    "target_session_attrs": ("any",), "gssencmode": ("disable", "prefer"),
    "channel_binding": ("prefer",),
}
_DEFAULT_SOCKET_DIRS = ("/tmp", "/var/run/postgresql", "/run/postgresql")
#: Every libpq connection keyword: only these are ever named in an error. Any other word is
#: not shown (an unquoted value with spaces splits into words: they may be a password's).
_LIBPQ_KEYWORDS = frozenset({
    "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "require_auth",
    "channel_binding", "connect_timeout", "client_encoding", "options", "application_name",
    "fallback_application_name", "keepalives", "keepalives_idle", "keepalives_interval",
    "keepalives_count", "tcp_user_timeout", "replication", "gssencmode", "sslmode",
    "sslnegotiation", "sslcompression", "sslcert", "sslkey", "sslpassword", "sslcertmode",
    "sslrootcert", "sslcrl", "sslcrldir", "sslsni", "requirepeer", "ssl_min_protocol_version",
    "ssl_max_protocol_version", "krbsrvname", "gsslib", "gssdelegation", "service",
    "target_session_attrs", "load_balance_hosts", "max_protocol_version",
    "min_protocol_version", "scram_client_key", "scram_server_key"})
#: The values libpq accepts for the parameters with a closed set (the only values shown).
_LIBPQ_VALUES = {
    "sslmode": SSLMODES, "sslsni": ("0", "1"), "keepalives": ("0", "1"),
    "target_session_attrs": ("any", "read-write", "read-only", "primary", "standby",
                             "prefer-standby"),
    "gssencmode": ("disable", "prefer", "require"),
    "channel_binding": ("disable", "prefer", "require"),
}
_ENCODING_NAME = re.compile(r"(?i)SQL_ASCII|UTF-?8|UNICODE|LATIN\d{1,2}|WIN\d{3,4}|EUC_[A-Z]{2,6}"
                            r"|KOI8-?[RU]|ISO_?8859_?\d{1,2}|SJIS|BIG5|GBK|UHC|GB18030|JOHAB"
                            r"|MULE_INTERNAL")


class ServerUnreachableError(ConnectionLostError):
    """The server's socket could not be opened (refused, unknown host, no route, timeout).

    ``address`` is ``host:port`` (or the Unix socket's path), ``reason`` the system's
    words in lower case ("connection refused").
    """

    def __init__(self, message: str, *, address: str, reason: str,
                 hint: str | None = None) -> None:
        self.address = address
        self.reason = reason
        super().__init__(message, hint=hint)


# ---------------------------------------------------------------- parsing


def _parse_keywords(text: str) -> dict[str, str]:
    """libpq's ``key = value`` syntax; errors never quote a value (it may be a password)."""
    params: dict[str, str] = {}
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i == n:
            return params
        start = i
        while i < n and text[i] != "=" and not text[i].isspace():
            i += 1
        key = text[start:i]
        while i < n and text[i].isspace():
            i += 1
        if i == n or text[i] != "=":
            after = f" after {list(params)[-1]}=" if params else ""
            shown = f" {key!r}" if key in _LIBPQ_KEYWORDS else " a word (not shown)"
            raise ConfigurationError(
                f"--dsn: expected key=value, got{shown} without '='{after}: a value with "
                "spaces must be quoted, as in password='two words'")
        i += 1
        while i < n and text[i].isspace():
            i += 1
        value: list[str] = []
        if i < n and text[i] == "'":
            i += 1
            while True:
                if i == n:
                    raise ConfigurationError(
                        f"--dsn: the quoted value of {key!r} is not terminated")
                if text[i] == "\\" and i + 1 < n:
                    value.append(text[i + 1])
                    i += 2
                elif text[i] == "'":
                    i += 1
                    break
                else:
                    value.append(text[i])
                    i += 1
        else:
            while i < n and not text[i].isspace():
                if text[i] == "\\" and i + 1 < n:
                    value.append(text[i + 1])
                    i += 2
                else:
                    value.append(text[i])
                    i += 1
        params[key] = "".join(value)


def _parse_url(text: str) -> dict[str, str]:
    try:
        parts = urlsplit(text)
        hostname = parts.hostname
    except ValueError:  # "Invalid IPv6 URL": a bracket not closed, or misplaced
        raise ConfigurationError(
            "--dsn: the URL's host is malformed (an IPv6 address goes in brackets, as in "
            "postgresql://cdc@[2001:db8::1]:5432/app)") from None
    params: dict[str, str] = {}
    netloc = parts.netloc.rpartition("@")[2]
    if "," in netloc:
        raise ConfigurationError("--dsn: several hosts in one URL are not supported")
    try:
        port = parts.port
    except ValueError:
        raise ConfigurationError("--dsn: the port in the URL is not a number from 1 to 65535"
                                 ) from None
    if hostname:
        params["host"] = unquote(hostname)
    if port:
        params["port"] = str(port)
    if parts.username:
        params["user"] = unquote(parts.username)
    if parts.password is not None:
        params["password"] = unquote(parts.password)
    if parts.path.strip("/"):
        params["dbname"] = unquote(parts.path.lstrip("/"))
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        params[key] = value
    return params


@attrs.frozen
class ConnectionSettings:
    """Everything needed to open one connection; ``password`` is never shown (``repr``)."""

    host: str
    port: int
    user: str
    dbname: str | None
    password: str | None = attrs.field(default=None, repr=False)
    #: Where the password came from ("the DSN", "PGPASSWORD", "/home/u/.pgpass"), or why
    #: there is none, for error messages.
    password_source: str = ""
    application_name: str = "pgcdc-events"
    connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT
    #: Whether the DSN set connect_timeout (pg8000 keeps its timeout for every read).
    connect_timeout_given: bool = False
    sslmode: str = "prefer"
    sslrootcert: str | None = None
    sslcert: str | None = None
    sslkey: str | None = None
    sslsni: bool = True
    options: str | None = None
    keepalives: bool = True
    #: A ready TLS context (from pg8000-style arguments), used as is.
    ssl_context: ssl.SSLContext | None = attrs.field(default=None, repr=False)

    @property
    def unix_socket(self) -> str | None:
        """The socket file when ``host`` is a directory (libpq's convention)."""
        return f"{self.host}/.s.PGSQL.{self.port}" if self.host.startswith("/") else None

    def address(self) -> str:
        """``host:port`` (``[host]:port`` for an IPv6 address), or the Unix socket's path."""
        if self.unix_socket:
            return self.unix_socket
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def describe(self) -> str:
        """``host:port/dbname`` for messages (never the password)."""
        return f"{self.host}:{self.port}/{self.dbname or self.user}"

    # -- pg8000 --------------------------------------------------------------------------
    def pg8000_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``pg8000.native.Connection`` (pg8000 doing the TLS:
        ``disable`` is ``ssl_context=False``; other modes get a context)."""
        kwargs: dict[str, Any] = {"user": self.user, "database": self.dbname,
                                  "application_name": self.application_name,
                                  "timeout": self.connect_timeout if self.connect_timeout_given
                                  else None}
        if self.password is not None:
            kwargs["password"] = self.password
        if self.unix_socket:
            kwargs["unix_sock"] = self.unix_socket
        else:
            kwargs["host"], kwargs["port"] = self.host, self.port
        if self.unix_socket or self.sslmode in ("disable", "allow"):
            kwargs["ssl_context"] = False
        elif self.sslmode != "prefer" or self.ssl_context is not None:
            kwargs["ssl_context"] = self.tls_context()
        if self.options:
            kwargs["startup_params"] = {"options": self.options}
        return {k: v for k, v in kwargs.items() if v is not None}

    def connect(self, *, replication: str | None = None, slot: str | None = None
                ) -> tuple[Any, socket.socket]:
        """A pg8000 native connection over a socket opened here, and that socket.

        TLS follows ``sslmode``; errors are :class:`ConnectionLostError` (retry may
        help), :class:`ConnectionSecurityError`, :class:`AuthenticationError` or the
        server's refusal by SQLSTATE (``slot`` is named in them).
        """
        try:
            import pg8000.native  # noqa: PLC0415 - the optional 'pg' extra
        except ImportError:
            raise ConfigurationError("reading a slot needs pg8000: pip install "
                                     "'pgcdc-events[pg]'") from None
        attempts = [False, True] if self.sslmode == "allow" else [None]
        for n, tls in enumerate(attempts):
            sock = self.open_socket(tls=tls)
            try:
                conn = pg8000.native.Connection(
                    self.user, database=self.dbname, password=self.password, sock=sock,
                    ssl_context=False, application_name=self.application_name,
                    replication=replication,
                    startup_params={"options": self.options} if self.options else None)
            except pg8000.native.DatabaseError as exc:
                sock.close()
                fields = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
                if n + 1 < len(attempts) and str(fields.get("C", "")).startswith("28"):
                    continue  # allow: the server refused the plain connection; try TLS
                from pgcdc_events.adapters.pg8000 import translate_error  # noqa: PLC0415

                raise translate_error(exc, slot=slot, action=f"connect to {self.describe()}",
                                      password_source=self.password_source) from None
            except (AttributeError, pg8000.native.InterfaceError) as exc:
                sock.close()
                if self.password is None and ("password" in str(exc) or
                                              isinstance(exc, AttributeError)):
                    raise AuthenticationError(
                        f"connect to {self.describe()}: the server asks for a password for "
                        f"user {self.user!r} and none was found ({self.password_source})",
                        hint="put it in ~/.pgpass (mode 0600), PGPASSFILE, passfile=, "
                        "PGPASSWORD or a --dsn-file") from None
                if isinstance(exc, AttributeError):
                    raise
                raise ConnectionLostError(f"connect to {self.describe()}: {exc}",
                                          hint=RETRY_HINT) from None
            except OSError as exc:
                sock.close()
                raise ConnectionLostError(f"connect to {self.describe()}: {exc}",
                                          hint=RETRY_HINT) from None
            sock.settimeout(None)
            return conn, sock
        raise AssertionError("unreachable")  # pragma: no cover

    # -- sockets and TLS -------------------------------------------------------------------
    def open_socket(self, *, tls: bool | None = None) -> socket.socket:
        """A connected socket, TLS negotiated as ``sslmode`` says (``tls`` forces it on or
        off, for ``allow``'s second attempt)."""
        where = self.describe()
        try:
            if self.unix_socket:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(self.connect_timeout)
                try:
                    sock.connect(self.unix_socket)
                except BaseException:
                    sock.close()
                    raise
                return sock  # libpq never uses TLS on a Unix socket
            sock = socket.create_connection((self.host, self.port), self.connect_timeout)
        except OSError as exc:
            reason = str(exc.strerror or exc)
            raise ServerUnreachableError(
                f"connect to {where}: {reason}", address=self.address(),
                reason=reason[:1].lower() + reason[1:],
                hint=f"is the server running and accepting TCP connections? "
                f"({RETRY_HINT})") from None
        if self.keepalives:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        want = tls if tls is not None else self.sslmode not in ("disable", "allow")
        if not want:
            return sock
        try:
            sock.sendall((8).to_bytes(4, "big") + (80877103).to_bytes(4, "big"))
            answer = sock.recv(1)
        except OSError as exc:
            sock.close()
            raise ConnectionLostError(f"connect to {where}: {exc.strerror or exc}") from None
        if answer != b"S":
            if answer == b"N" and self.sslmode in ("allow", "prefer"):
                return sock
            sock.close()
            if answer == b"N":
                raise ConnectionSecurityError(
                    f"connect to {where}: sslmode={self.sslmode} but the server does not "
                    "accept TLS connections", hint="enable ssl on the server, or lower sslmode")
            raise ConnectionLostError(f"connect to {where}: unexpected answer {answer!r} to "
                                      "the SSL request")
        context = self.tls_context()
        server_name = self.host if self.sslsni or context.check_hostname else None
        try:
            return context.wrap_socket(sock, server_hostname=server_name)
        except ssl.SSLCertVerificationError as exc:
            sock.close()
            raise ConnectionSecurityError(
                f"connect to {where}: the server's certificate could not be verified "
                f"(sslmode={self.sslmode}): {exc.verify_message or exc}",
                hint="check sslrootcert (the CA that signed the server's certificate) and, "
                "for verify-full, that the host name is in the certificate") from None
        except ssl.SSLError as exc:
            sock.close()
            raise ConnectionSecurityError(f"connect to {where}: TLS failed: {exc}") from None
        except OSError as exc:
            sock.close()
            raise ConnectionLostError(f"connect to {where}: {exc.strerror or exc}") from None

    def tls_context(self) -> ssl.SSLContext:
        """The TLS context for ``sslmode``, ``sslrootcert``, ``sslcert`` and ``sslkey``."""
        if self.ssl_context is not None:
            return self.ssl_context
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        root = self.sslrootcert
        if root is None:
            default = Path.home() / ".postgresql" / "root.crt"
            root = str(default) if default.exists() else None
        verify = self.sslmode in ("verify-ca", "verify-full") or (
            self.sslmode == "require" and root is not None)  # libpq: a root file means verify
        if verify:
            if root is None:
                raise ConfigurationError(
                    f"sslmode={self.sslmode}: no root certificate to verify the server with: "
                    "give sslrootcert= (or put it in ~/.postgresql/root.crt)")
            if root == "system":
                context.load_default_certs()
            elif not os.path.exists(root):
                raise ConfigurationError(f"sslrootcert {root!r} does not exist")
            else:
                context.load_verify_locations(cafile=root)
            context.check_hostname = self.sslmode == "verify-full"
            context.verify_mode = ssl.CERT_REQUIRED
        else:  # libpq: allow and prefer never verify, even with a root certificate
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        cert, key = self.sslcert, self.sslkey
        if cert is None:
            default_cert = Path.home() / ".postgresql" / "postgresql.crt"
            if default_cert.exists():
                cert = str(default_cert)
        if cert is not None:
            if not os.path.exists(cert):
                raise ConfigurationError(f"sslcert {cert!r} does not exist")
            if key is None:
                key = str(Path.home() / ".postgresql" / "postgresql.key")
            _check_key(key)
            try:
                context.load_cert_chain(cert, key)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigurationError(f"sslcert {cert!r} / sslkey {key!r}: cannot load: "
                                         f"{exc}") from None
        elif key is not None:
            raise ConfigurationError("sslkey is given without sslcert")
        return context


def _check_key(path: str) -> None:
    """libpq's rule: a private key readable by group or others is refused."""
    try:
        info = os.stat(path)
    except OSError:
        raise ConfigurationError(f"sslkey {path!r} does not exist") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigurationError(f"sslkey {path!r} is not a regular file")
    limit = 0o640 if info.st_uid == 0 else 0o600
    if info.st_mode & 0o777 & ~limit:
        raise ConfigurationError(f"sslkey {path!r} has group or world access; permissions "
                                 "should be u=rw (0600) or less")


# ---------------------------------------------------------------- the password file


def _pgpass_fields(line: str) -> list[str]:
    fields: list[str] = []
    current: list[str] = []
    escaped = False
    for ch in line:
        if escaped:
            current.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ":" and len(fields) < 4:
            fields.append("".join(current))
            current = []
        else:
            current.append(ch)
    fields.append("".join(current))
    return fields


def password_from_file(path: Path, *, host: str, port: int, dbname: str, user: str
                       ) -> tuple[str | None, str]:
    """The password the file gives for this connection, and a note of what happened."""
    try:
        info = path.stat()
    except OSError:
        return None, f"no password file at {path}"
    if not stat.S_ISREG(info.st_mode):
        return None, f"password file {path} is not a regular file: ignored"
    if info.st_mode & 0o077:
        return None, (f"password file {path} has group or world access (it should be 0600): "
                      "ignored, as libpq does")
    if host.startswith("/"):
        match_host = "localhost" if host in _DEFAULT_SOCKET_DIRS else host
    else:
        match_host = host
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"password file {path} cannot be read: {exc.__class__.__name__}"
    wanted = (match_host, str(port), dbname, user)
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = _pgpass_fields(line)
        if len(fields) != 5:
            continue
        if all(f in ("*", w) for f, w in zip(fields[:4], wanted, strict=True)):
            return fields[4], f"the password from {path}"
    return None, f"no line of {path} matches {match_host}:{port}:{dbname}:{user}"


# ---------------------------------------------------------------- the entry point


def _params_from_kwargs(kwargs: Mapping[str, Any]) -> tuple[dict[str, str], Any]:
    """pg8000-style keyword arguments as libpq parameters (the tests' cluster.dsn())."""
    known = {"host", "port", "user", "database", "password", "application_name", "timeout",
             "unix_sock", "ssl_context"}
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise ConfigurationError(f"connection arguments not supported: {', '.join(unknown)}")
    params = {"host": str(kwargs.get("host", "localhost")), "port": str(kwargs.get("port", 5432)),
              "user": str(kwargs.get("user", "postgres")), "sslmode": "disable"}
    if kwargs.get("database") is not None:
        params["dbname"] = str(kwargs["database"])
    if kwargs.get("password") is not None:
        params["password"] = str(kwargs["password"])
    if kwargs.get("application_name") is not None:
        params["application_name"] = str(kwargs["application_name"])
    if kwargs.get("timeout") is not None:
        params["connect_timeout"] = str(kwargs["timeout"])
    unix = kwargs.get("unix_sock")
    if unix:
        directory, _, name = str(unix).rpartition("/")
        params["host"] = directory
        params["port"] = name.rpartition(".")[2]
    context = kwargs.get("ssl_context")
    if isinstance(context, ssl.SSLContext):
        params["sslmode"] = "verify-full" if context.check_hostname else "require"
        return params, context
    if context is None:
        params["sslmode"] = "prefer"  # pg8000's default: TLS when the server offers it
    return params, None


#: A URL's start (``scheme:/``, ``scheme//`` or ``user@host/``): no key=value string has these.
_URL_LIKE = re.compile(r"\s*[A-Za-z][A-Za-z0-9+.-]*(:/|//|:\\)|\s*[^\s=]+@[^\s=]+/")


def parse_conninfo(dsn: str | Mapping[str, Any], *, env: Mapping[str, str] | None = None
                   ) -> ConnectionSettings:
    """Settings from a URL, a ``key=value`` string or pg8000 keyword arguments.

    Unset parameters come from the ``PG*`` environment variables (``env``, default
    ``os.environ``). Unsupported parameters are refused with a
    :class:`ConfigurationError` naming them (never their values, nor any word that is not
    a libpq keyword: it may be part of a password).
    """
    env = os.environ if env is None else env
    context = None
    if isinstance(dsn, str):
        params = _params_from_string(dsn)
        from_dsn = "password" in params
        _fill_from_env(params, env)
    else:
        params, context = _params_from_kwargs(dsn)
        from_dsn = "password" in params
        if not from_dsn and env.get("PGPASSWORD"):
            params["password"] = env["PGPASSWORD"]
    _check_values(params)
    host = params.get("host") or "localhost"
    if "," in host:
        raise ConfigurationError("--dsn: several hosts are not supported")
    port = _port(params)
    user = params.get("user") or "postgres"
    dbname = params.get("dbname")
    password, source = _password(params, from_dsn, host=host, port=port,
                                 dbname=dbname or user, user=user)
    return ConnectionSettings(
        host=host, port=port, user=user, dbname=dbname, password=password,
        password_source=source,
        application_name=params.get("application_name") or params.get(
            "fallback_application_name") or "pgcdc-events",
        connect_timeout=_timeout(params),
        connect_timeout_given=bool(params.get("connect_timeout")),
        sslmode=params.get("sslmode") or "prefer",
        sslrootcert=params.get("sslrootcert") or None, sslcert=params.get("sslcert") or None,
        sslkey=params.get("sslkey") or None, sslsni=params.get("sslsni", "1") == "1",
        options=params.get("options") or None, keepalives=params.get("keepalives", "1") == "1",
        ssl_context=context)


def _params_from_string(dsn: str) -> dict[str, str]:
    """The parameters a URL or a ``key=value`` string gives; unknown keys refused."""
    if dsn.startswith(("postgresql://", "postgres://")):
        params = _parse_url(dsn)
    elif _URL_LIKE.match(dsn):  # echo only the scheme part: the rest may hold a password
        start = re.match(r"\s*([^:/@\s]*)", dsn).group(1)  # type: ignore[union-attr]
        raise ConfigurationError(
            f"--dsn looks like a URL but does not start with postgresql:// or postgres:// "
            f"(it starts {start[:20]!r}); give a URL such as postgresql://cdc@db:5432/app, "
            "or libpq key=value pairs such as 'host=db dbname=app user=cdc'")
    else:
        params = _parse_keywords(dsn)
    unknown = sorted(k for k in params if k not in _ENV and k not in _OTHER_KEYS)
    if unknown:
        named = [k for k in unknown if k in _LIBPQ_KEYWORDS]
        others = len(unknown) - len(named)
        what = ", ".join(named)
        if others:
            what += (" and " if named else "") + (
                f"{others} word(s) that are no libpq parameter (not shown: an unquoted "
                "value with spaces, such as a password, splits into words; quote it as in "
                "password='two words')")
        raise ConfigurationError(
            f"--dsn: parameter(s) {what} not supported by pgcdc-events (pg8000): remove "
            "them (they are refused rather than ignored)")
    return params


def _fill_from_env(params: dict[str, str], env: Mapping[str, str]) -> None:
    """The ``PG*`` variables for the parameters the DSN leaves unset; refuse those that
    cannot be honoured."""
    for key, value in _ENV.items():
        if key not in params and env.get(value):
            params[key] = env[value]
    bad_env = [name for name in _UNSUPPORTED_ENV if env.get(name)]
    if bad_env:
        raise ConfigurationError(
            f"environment variable(s) {', '.join(bad_env)} not supported by pgcdc-events "
            "(pg8000): unset them (they are refused rather than ignored)")


def _check_values(params: Mapping[str, str]) -> None:
    """Refuse values this library cannot honour; a value is shown only when libpq knows it
    (anything else may be a word of a password that was not quoted)."""
    for key, allowed in _ALLOWED.items():
        value = params.get(key)
        if value is not None and value not in allowed:
            shown = f"={value!r}" if value in _LIBPQ_VALUES.get(key, ()) else " (value not shown)"
            raise ConfigurationError(f"--dsn: {key}{shown} is not supported (only "
                                     f"{', '.join(allowed)})")
    encoding = params.get("client_encoding")
    if encoding and encoding.upper().replace("-", "") not in ("UTF8", "UNICODE"):
        shown = f"={encoding!r}" if _ENCODING_NAME.fullmatch(encoding) else " (value not shown)"
        raise ConfigurationError(f"--dsn: client_encoding{shown}: only UTF8 is supported")


def _port(params: Mapping[str, str]) -> int:
    text = params.get("port") or "5432"
    if not text.isdigit() or not 0 < int(text) < 65536:
        shown = f", got {text!r}" if text.isdigit() and len(text) <= 8 else ""
        raise ConfigurationError(f"--dsn: port must be a number from 1 to 65535{shown}")
    return int(text)


def _timeout(params: Mapping[str, str]) -> float | None:
    text = params.get("connect_timeout")
    if not text:
        return DEFAULT_CONNECT_TIMEOUT
    try:
        return float(text) or None
    except ValueError:
        raise ConfigurationError("--dsn: connect_timeout must be a number of seconds (the "
                                 "value given is not one)") from None


def _password(params: Mapping[str, str], from_dsn: bool, *, host: str, port: int,
              dbname: str, user: str) -> tuple[str | None, str]:
    """The password and where it came from (or why there is none), as libpq looks."""
    password = params.get("password")
    if password is not None:
        return password, ("the password from the DSN" if from_dsn
                          else "the password from PGPASSWORD")
    passfile = params.get("passfile")
    path = Path(passfile).expanduser() if passfile else Path.home() / ".pgpass"
    password, source = password_from_file(path, host=host, port=port, dbname=dbname, user=user)
    if password is None:
        source = f"no password in the DSN, PGPASSWORD unset, {source}"
    return password, source


def parse_dsn(dsn: str | Mapping[str, Any]) -> dict[str, Any]:
    """pg8000 keyword arguments for a DSN (see :func:`parse_conninfo`): ``sslmode=disable``
    is ``ssl_context=False`` (no SSLRequest at all), stricter modes get a context."""
    return parse_conninfo(dsn).pg8000_kwargs()
