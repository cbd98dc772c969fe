"""SQL names as PostgreSQL reads them: quoting, identifier lists, slot names.

* :func:`quote_ident` always quotes (``"`` doubled), so whatever a name holds it is
  one identifier in the SQL the adapter sends.
* :func:`split_identifiers` reads a comma-separated list of identifiers the way the
  server's ``SplitIdentifierString`` does (it is how pgoutput reads
  ``publication_names``): an unquoted name is folded to lower case, a quoted one is
  taken as written (``""`` is a quote), so ``UpperPub`` means ``upperpub`` and
  ``"a,b"`` is one name holding a comma.
* :func:`check_slot_name` applies the server's rule for replication slot names
  (lower-case letters, digits and underscores, at most 63 bytes) before any SQL is sent.

Table names given on the command line are not parsed here: the server resolves
them (``to_regclass``, with the name bound as a parameter), so they mean exactly
what they mean in SQL, search path included.
"""

from __future__ import annotations

import re

from pgcdc_events.errors import ConfigurationError

__all__ = ["NAMEDATALEN", "check_slot_name", "quote_ident", "quote_literal", "split_identifiers"]

#: PostgreSQL's identifier limit is NAMEDATALEN - 1 bytes.
NAMEDATALEN = 64
_SLOT_NAME = re.compile(r"[a-z0-9_]+\Z")
_SPACE = " \t\n\r\f\v"


def quote_ident(name: str) -> str:
    """``name`` as an always-quoted SQL identifier."""
    if "\x00" in name:
        raise ConfigurationError(f"an identifier cannot contain a NUL character: {name!r}")
    return '"' + name.replace('"', '""') + '"'


def quote_literal(value: str | None) -> str:
    """``value`` as an SQL constant: an escape string (``E'...'``, its backslashes and
    quotes doubled, so that it reads alike whatever ``standard_conforming_strings`` says),
    untyped (the server types it from where it stands), or ``NULL``. (The replication
    commands' grammar has no escape strings: :mod:`pgcdc_events.adapters.stream` quotes
    their options itself.)"""
    if value is None:
        return "NULL"
    return "E'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def _fold(name: str) -> str:
    """PostgreSQL's ``downcase_identifier`` in a UTF-8 database: ASCII letters only."""
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in name)


def _truncate(name: str) -> str:
    """Cut to NAMEDATALEN - 1 bytes at a character boundary, as the server does."""
    data = name.encode("utf-8")
    if len(data) < NAMEDATALEN:
        return name
    return data[:NAMEDATALEN - 1].decode("utf-8", errors="ignore")


def split_identifiers(text: str, *, what: str = "name") -> tuple[str, ...]:
    """The identifiers of a comma-separated list, as ``SplitIdentifierString`` reads it.

    ``what`` names the list in the error (for instance ``"--publication"``).
    """
    names: list[str] = []
    i, n = 0, len(text)
    while i < n and text[i] in _SPACE:
        i += 1
    if i == n:
        raise ConfigurationError(f"{what}: an empty name list")
    while True:
        if i < n and text[i] == '"':
            j, parts = i + 1, []
            while True:
                end = text.find('"', j)
                if end < 0:
                    raise ConfigurationError(f"{what}: unterminated quoted name in {text!r}")
                parts.append(text[j:end])
                if text.startswith('""', end):
                    parts.append('"')
                    j = end + 2
                    continue
                i = end + 1
                break
            name = "".join(parts)
            if not name:
                raise ConfigurationError(f"{what}: a zero-length quoted name in {text!r}")
        else:
            start = i
            while i < n and text[i] != "," and text[i] not in _SPACE:
                i += 1
            if i == start:
                raise ConfigurationError(f"{what}: an empty name in {text!r}")
            name = _fold(text[start:i])
        names.append(_truncate(name))
        while i < n and text[i] in _SPACE:
            i += 1
        if i == n:
            return tuple(names)
        if text[i] != ",":
            raise ConfigurationError(f"{what}: expected a comma after {names[-1]!r} in {text!r}")
        i += 1
        while i < n and text[i] in _SPACE:
            i += 1


def check_slot_name(name: str) -> str:
    """``name`` if the server accepts it as a replication slot name; otherwise a clear error."""
    if not name:
        raise ConfigurationError("--slot: a replication slot name is required")
    if not _SLOT_NAME.match(name) or len(name) >= NAMEDATALEN:
        raise ConfigurationError(
            f"--slot {name!r}: a replication slot name holds only lower-case letters, digits "
            f"and underscores, at most {NAMEDATALEN - 1} of them")
    return name
