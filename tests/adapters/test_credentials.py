"""Credentials and TLS as libpq does them, against a server with TLS, SCRAM passwords and
client certificates: the password file, PGPASSFILE, passfile=, PGPASSWORD and --dsn-file;
sslmode with libpq's meanings; errors by SQLSTATE; no password in any message."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pg8000.native
import pytest

from pgcdc_events.adapters import (
    AuthenticationError,
    ConnectionSecurityError,
    PrivilegeError,
    SlotReader,
    parse_dsn,
)
from pgcdc_events.adapters.connection import parse_conninfo
from pgcdc_events.cli import main
from pgcdc_events.errors import ConfigurationError
from pgcdc_events.testing.cluster import TempCluster

SECRET = "pw-S3cret!xyz"
HBA = """\
local all all trust
hostssl all certuser 127.0.0.1/32 cert
hostssl all tlsonly 127.0.0.1/32 trust
host all pwuser 127.0.0.1/32 scram-sha-256
host all norepl 127.0.0.1/32 scram-sha-256
host all postgres 127.0.0.1/32 trust
"""


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _make_certs(d: Path) -> None:
    """A CA, a server certificate for db.example and 127.0.0.1, a client certificate for
    certuser, and an unrelated CA."""
    for ca in ("ca", "other-ca"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key",
                 "-out", f"{ca}.crt", "-days", "2", "-subj", f"/CN={ca}", cwd=d)
    (d / "san.ext").write_text("subjectAltName=DNS:db.example,IP:127.0.0.1\n")
    for name, cn, ext in (("server", "db.example", ["-extfile", "san.ext"]),
                          ("client", "certuser", [])):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
                 f"{name}.csr", "-subj", f"/CN={cn}", cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", *ext, cwd=d)
    for key in d.glob("*.key"):
        key.chmod(0o600)


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TempCluster, Path]]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make test certificates")
    certs = tmp_path_factory.mktemp("certs")
    _make_certs(certs)
    with TempCluster() as cluster:
        for name in ("server.crt", "server.key", "ca.crt"):
            target = cluster.datadir / name
            shutil.copy(certs / name, target)
            if os.geteuid() == 0:
                shutil.chown(target, "postgres", "postgres")
            target.chmod(0o600)
        (cluster.datadir / "pg_hba.conf").write_text(HBA)
        conn = pg8000.native.Connection(**{**cluster.dsn(), "ssl_context": False})
        try:
            conn.run("ALTER SYSTEM SET ssl = on")
            conn.run("ALTER SYSTEM SET ssl_ca_file = 'ca.crt'")
            conn.run("SELECT pg_reload_conf()")
            conn.run("SET password_encryption = 'scram-sha-256'")
            for role, extra in (("pwuser", "REPLICATION"), ("norepl", ""),
                                ("certuser", "REPLICATION"), ("tlsonly", "REPLICATION")):
                conn.run(f"CREATE ROLE {role} LOGIN {extra} PASSWORD '{SECRET}'")
            conn.run("CREATE TABLE t (id int PRIMARY KEY)")
            conn.run("GRANT SELECT ON t TO pwuser")
            conn.run("CREATE PUBLICATION p FOR ALL TABLES")
            conn.run("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
            conn.run("CREATE DATABASE locked")
            conn.run("REVOKE CONNECT ON DATABASE locked FROM PUBLIC")
        finally:
            conn.close()
        time.sleep(0.5)  # the reload
        yield cluster, certs


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty home (no ~/.pgpass, no ~/.postgresql) and no PG* variables."""
    for name in list(os.environ):
        if name.startswith("PG"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def _ssl_in_use(dsn: str) -> bool:
    conn, _ = parse_conninfo(dsn).connect()
    try:
        return bool(conn.run("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")[0][0])
    finally:
        conn.close()


def _capture(dsn: str, out: Path, *extra: str) -> int:
    return main(["capture", "--dsn", dsn, "--slot", "s", "--publication", "p", "--output",
                 f"{out}/", "-q", "--snapshot-mode", "no_data", *extra])


# ---------------------------------------------------------------- TLS


def test_sslmode_disable_never_negotiates_tls(secure: tuple[TempCluster, Path],
                                              home: Path) -> None:
    cluster, _ = secure
    dsn = f"host=127.0.0.1 port={cluster.port} user=postgres dbname=postgres sslmode=disable"
    conn = pg8000.native.Connection(**parse_dsn(dsn))  # the pg8000 arguments too
    try:
        assert conn.run("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()") == [[False]]
    finally:
        conn.close()
    assert _ssl_in_use(dsn) is False
    assert _ssl_in_use(dsn.replace("disable", "prefer")) is True
    assert _ssl_in_use(dsn.replace("disable", "require")) is True  # encrypts, verifies nothing
    # a role only allowed over TLS: disable is refused by pg_hba, allow retries with TLS
    tls_only = dsn.replace("user=postgres", "user=tlsonly")
    with pytest.raises(AuthenticationError, match=r"pg_hba\.conf") as info:
        parse_conninfo(tls_only).connect()
    assert info.value.sqlstate == "28000"
    assert _ssl_in_use(tls_only.replace("disable", "allow")) is True


def test_verify_ca_and_verify_full(secure: tuple[TempCluster, Path], home: Path) -> None:
    cluster, certs = secure
    base = f"port={cluster.port} user=postgres dbname=postgres"
    ca, other = certs / "ca.crt", certs / "other-ca.crt"
    assert _ssl_in_use(f"host=127.0.0.1 {base} sslmode=verify-ca sslrootcert={ca}")
    assert _ssl_in_use(f"host=127.0.0.1 {base} sslmode=verify-full sslrootcert={ca}")
    # the certificate names db.example and 127.0.0.1, not localhost
    assert _ssl_in_use(f"host=localhost {base} sslmode=verify-ca sslrootcert={ca}")
    with pytest.raises(ConnectionSecurityError, match="could not be verified"):
        parse_conninfo(f"host=localhost {base} sslmode=verify-full sslrootcert={ca}").connect()
    for mode in ("verify-ca", "verify-full", "require"):  # require + a root file verifies
        with pytest.raises(ConnectionSecurityError, match="could not be verified"):
            parse_conninfo(f"host=127.0.0.1 {base} sslmode={mode} sslrootcert={other}"
                           ).connect()
    # no root certificate at all: refused, not silently unverified
    with pytest.raises(ConfigurationError, match="no root certificate"):
        parse_conninfo(f"host=127.0.0.1 {base} sslmode=verify-full").connect()
    # ~/.postgresql/root.crt is the default, as with libpq
    (home / ".postgresql").mkdir()
    shutil.copy(ca, home / ".postgresql" / "root.crt")
    assert _ssl_in_use(f"host=127.0.0.1 {base} sslmode=verify-full")


def test_client_certificates(secure: tuple[TempCluster, Path], home: Path) -> None:
    cluster, certs = secure
    dsn = (f"host=127.0.0.1 port={cluster.port} user=certuser dbname=postgres "
           f"sslmode=verify-full sslrootcert={certs / 'ca.crt'}")
    assert _ssl_in_use(f"{dsn} sslcert={certs / 'client.crt'} sslkey={certs / 'client.key'}")
    with pytest.raises(AuthenticationError, match="certificate"):
        parse_conninfo(dsn).connect()
    with pytest.raises(ConfigurationError, match="does not exist"):
        parse_conninfo(f"{dsn} sslcert={certs / 'nope.crt'}").connect()
    loose = home / "loose.key"
    shutil.copy(certs / "client.key", loose)
    loose.chmod(0o644)
    with pytest.raises(ConfigurationError, match="group or world access"):
        parse_conninfo(f"{dsn} sslcert={certs / 'client.crt'} sslkey={loose}").connect()


def test_parameters_that_cannot_be_honoured_are_refused(home: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    for dsn, name in (("host=h sslcrl=/x", "sslcrl"), ("postgresql://h/db?sslpassword=x",
                                                       "sslpassword"),
                      ("host=h target_session_attrs=read-write", "target_session_attrs"),
                      ("host=a,b", "several hosts"), ("host=h channel_binding=require",
                                                      "channel_binding")):
        with pytest.raises(ConfigurationError, match=name):
            parse_conninfo(dsn)
    monkeypatch.setenv("PGSSLCRL", "/x")
    with pytest.raises(ConfigurationError, match="PGSSLCRL"):
        parse_conninfo("host=h")


# ---------------------------------------------------------------- passwords


def test_passwords_come_from_where_libpq_takes_them(secure: tuple[TempCluster, Path],
                                                    home: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    cluster, _ = secure
    dsn = f"host=127.0.0.1 port={cluster.port} user=pwuser dbname=postgres sslmode=disable"
    line = f"127.0.0.1:{cluster.port}:postgres:pwuser:{SECRET.replace(':', chr(92) + ':')}\n"
    pgpass = home / ".pgpass"
    pgpass.write_text("# a comment\n*:*:other:*:wrong\n" + line)
    pgpass.chmod(0o600)
    assert _capture(dsn, tmp_path / "o1") == 0
    # group-readable: ignored, as libpq does, and the error says so
    pgpass.chmod(0o644)
    with pytest.raises(AuthenticationError, match="group or world access"):
        parse_conninfo(dsn).connect()
    pgpass.chmod(0o600)
    other = tmp_path / "elsewhere.pgpass"
    other.write_text(line)
    other.chmod(0o600)
    pgpass.unlink()
    assert _ssl_in_use(f"{dsn} passfile={other}") is False  # connected
    monkeypatch.setenv("PGPASSFILE", str(other))
    assert _ssl_in_use(dsn) is False
    monkeypatch.delenv("PGPASSFILE")
    monkeypatch.setenv("PGPASSWORD", SECRET)
    assert _ssl_in_use(dsn) is False
    monkeypatch.delenv("PGPASSWORD")
    dsn_file = tmp_path / "dsn"
    dsn_file.write_text(f"{dsn} password='{SECRET}'\n")
    assert main(["capture", "--dsn-file", str(dsn_file), "--slot", "s", "--publication", "p",
                 "--output", f"{tmp_path / 'o2'}/", "-q", "--snapshot-mode", "no_data"]) == 0


def test_a_missing_password_is_an_authentication_error_not_retried(
        secure: tuple[TempCluster, Path], home: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    cluster, _ = secure
    dsn = f"host=127.0.0.1 port={cluster.port} user=pwuser dbname=postgres sslmode=disable"
    started = time.monotonic()
    assert _capture(dsn, tmp_path / "o", "--follow") == 1  # even when following
    assert time.monotonic() - started < 5
    err = capsys.readouterr().err
    assert "asks for a password" in err and "none was found" in err and ".pgpass" in err
    assert "NoneType" not in err and "retrying" not in err


def test_errors_and_hints_by_sqlstate(secure: tuple[TempCluster, Path], home: Path,
                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    cluster, _ = secure
    base = f"host=127.0.0.1 port={cluster.port} sslmode=disable"
    with pytest.raises(AuthenticationError) as bad:
        SlotReader(f"{base} user=pwuser dbname=postgres password=wrong", slot="s",
                   publications=["p"]).connect()
    assert bad.value.sqlstate == "28P01" and "check the password" in str(bad.value)
    assert "REPLICATION" not in str(bad.value)
    with pytest.raises(PrivilegeError) as norepl:
        reader = SlotReader(f"{base} user=norepl dbname=postgres password={SECRET}", slot="s",
                            publications=["p"])
        reader.connect()
        reader.prepare()
    assert "REPLICATION" in str(norepl.value)
    with pytest.raises(PrivilegeError) as noconnect:
        SlotReader(f"{base} user=pwuser dbname=locked password={SECRET}", slot="s",
                   publications=["p"]).connect()
    assert noconnect.value.sqlstate == "42501" and "GRANT CONNECT" in str(noconnect.value)
    assert "REPLICATION" not in str(noconnect.value)
    # and through the command line, none of it is retried
    started = time.monotonic()
    assert _capture(f"{base} user=pwuser dbname=postgres password=wrong", tmp_path / "o") == 1
    assert time.monotonic() - started < 5
    assert "28P01" in capsys.readouterr().err


def test_no_message_shows_the_password(home: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    for dsn in (f"postgresql://u:{SECRET}@h:notaport/db",
                f"postgresql://u:{SECRET}@h:99999/db",
                f"host=h password='{SECRET}",
                f"host=h password={SECRET} sslcrl=x",
                f"host=h password={SECRET} port=abc",
                f"password={SECRET} oops",
                f"postgresql://u:{SECRET}@127.0.0.1:1/db?sslmode=verify-full"):
        assert _capture(dsn, tmp_path / "o", "--retry-for", "0") == 1
        err = capsys.readouterr().err
        assert "error" in err and SECRET not in err, err
    assert SECRET not in repr(parse_conninfo(f"host=h password={SECRET}"))


def test_without_follow_a_dead_server_fails_within_seconds_and_says_it_retries(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    assert main(["capture", "--dsn", "postgresql://u@127.0.0.1:1/db", "--slot", "s",
                 "--publication", "p", "--output", f"{tmp_path}/"]) == 1
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err
    assert 8 < elapsed < 13, elapsed
    assert "retrying for up to 10 s" in err and "connection refused" in err.lower()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["capture.jsonl.lock"]


def test_a_url_with_options(home: Path) -> None:
    settings = parse_conninfo("postgresql://u%40x@[::1]:6000/d%20b?sslmode=verify-ca&"
                              "sslrootcert=/r.crt&application_name=a&connect_timeout=3")
    assert (settings.user, settings.host, settings.port, settings.dbname) == (
        "u@x", "::1", 6000, "d b")
    assert (settings.sslmode, settings.sslrootcert, settings.application_name,
            settings.connect_timeout) == ("verify-ca", "/r.crt", "a", 3.0)
    quoted = parse_conninfo(r"host = h dbname='my \'db\'' user=x\ y")
    assert (quoted.dbname, quoted.user) == ("my 'db'", "x y")
    assert quoted.password_source.startswith("no password in the DSN")
    assert quoted.sslmode == "prefer" and quoted.connect_timeout == 10.0


# ---------------------------------------------------------------- catalog


def test_catalog_takes_its_password_as_capture_does(secure: tuple[TempCluster, Path],
                                                    home: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """It took a password only on the command line (``ps`` shows it), and crashed with
    "'NoneType' object has no attribute 'decode'" without one."""
    cluster, _ = secure
    dsn = f"host=127.0.0.1 port={cluster.port} user=pwuser dbname=postgres sslmode=disable"
    out = tmp_path / "catalog.json"
    assert main(["catalog", "--dsn", dsn, "-o", str(out)]) == 1
    home_pgpass = home / ".pgpass"
    assert capsys.readouterr().err == (
        f"pgcdc-events catalog: error: cannot connect: connect to 127.0.0.1:{cluster.port}/"
        "postgres: the server asks for a password for user 'pwuser' and none was found (no "
        f"password in the DSN, PGPASSWORD unset, no password file at {home_pgpass}); put it "
        "in ~/.pgpass (mode 0600), PGPASSFILE, passfile=, PGPASSWORD or a --dsn-file\n")
    home_pgpass.write_text(f"127.0.0.1:{cluster.port}:*:pwuser:{SECRET}\n")
    home_pgpass.chmod(0o600)
    assert main(["catalog", "--dsn", dsn, "-o", str(out)]) == 0
    assert out.stat().st_size > 0
    home_pgpass.unlink()
    dsn_file = tmp_path / "dsn"
    dsn_file.write_text(f"{dsn} password={SECRET}\n")
    dsn_file.chmod(0o600)
    out.unlink()
    assert main(["catalog", "--dsn-file", str(dsn_file), "-o", str(out)]) == 0
    assert out.stat().st_size > 0
    assert SECRET not in capsys.readouterr().err
