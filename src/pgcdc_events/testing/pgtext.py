"""PostgreSQL values as the server prints them (text output) and sends them (binary send format).

Each ``*_value`` function takes a plain model of one value (integers for dates and
times, an unscaled integer and a scale for numerics...) and returns a
:class:`PgValue` holding the exact bytes PostgreSQL 15 writes for it with its
default settings (``DateStyle=ISO``, ``IntervalStyle=postgres``,
``bytea_output=hex``, ``extra_float_digits=1``, ``lc_monetary=C``, the session
time zone UTC unless the value says otherwise). The hypothesis strategies draw
models; hand-written tests and the factories call these directly. Every form is
checked against a live server in tests/testing/test_values.py.
"""

from __future__ import annotations

import ipaddress
import math
import struct
import uuid
from collections.abc import Iterable, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any, Final

import attrs

from pgcdc_events.types.temporal import civil_from_days, days_from_civil

__all__ = [
    "PG_EPOCH_DAYS",
    "PgValue",
    "array_value",
    "bit_value",
    "bool_value",
    "bytea_value",
    "date_text",
    "date_value",
    "enum_value",
    "float_text",
    "float_value",
    "hstore_value",
    "inet_value",
    "int_value",
    "interval_text",
    "interval_value",
    "json_text",
    "json_value",
    "ltree_value",
    "macaddr_value",
    "money_value",
    "numeric_text",
    "numeric_value",
    "point_value",
    "postgis_point_value",
    "quote_literal",
    "range_value",
    "text_value",
    "time_text",
    "time_value",
    "timestamp_text",
    "timestamp_value",
    "timestamptz_value",
    "timetz_value",
    "tsvector_value",
    "uuid_value",
    "xml_value",
]

#: 2000-01-01 (PostgreSQL's epoch) in days since 1970-01-01.
PG_EPOCH_DAYS: Final = 10_957
_US_PER_DAY: Final = 86_400_000_000
DATE_NEG_INF: Final = -(2**31)
DATE_POS_INF: Final = 2**31 - 1
TS_NEG_INF: Final = -(2**63)
TS_POS_INF: Final = 2**63 - 1


@attrs.frozen(repr=False)
class PgValue:
    """One non-NULL value: its SQL type, its text output and its binary send format.

    ``binary`` is ``None`` for types this library reads only in text form.
    ``model`` is the plain value it was made from (for readable counterexamples and
    for consumers that want to compare against the intended value).
    """

    type: str
    text: str
    binary: bytes | None
    model: Any = attrs.field(default=None, eq=False)

    @property
    def text_bytes(self) -> bytes:
        """The text output as it travels: UTF-8."""
        return self.text.encode("utf-8")

    def sql(self) -> str:
        """An SQL literal that reads back as this value: ``'text'::type``."""
        return f"{quote_literal(self.text)}::{self.type}"

    def __repr__(self) -> str:
        shown = self.text if len(self.text) <= 60 else self.text[:40] + f"...({len(self.text)})"
        return f"<{self.type} {shown!r}>"


def quote_literal(text: str) -> str:
    """``text`` as an SQL string literal (standard_conforming_strings on)."""
    return "'" + text.replace("'", "''") + "'"


def _pack(fmt: str, *values: Any) -> bytes:
    return struct.pack(fmt, *values)


# ---------------------------------------------------------------- numbers
def bool_value(value: bool) -> PgValue:
    """``bool``: ``t``/``f``; one byte."""
    return PgValue("bool", "t" if value else "f", b"\x01" if value else b"\x00", value)


_INT_FORMATS: Final = {"int2": ">h", "int4": ">i", "int8": ">q", "oid": ">I"}


def int_value(type_name: str, value: int) -> PgValue:
    """``int2``, ``int4``, ``int8`` or ``oid``."""
    return PgValue(type_name, str(value), _pack(_INT_FORMATS[type_name], value), value)


def _neighbours(value: float, single: bool) -> tuple[Fraction, Fraction]:
    """The exact midpoints between ``value`` and the floats on either side of it."""
    if single:
        (bits,) = struct.unpack(">i", struct.pack(">f", value))
        up = struct.unpack(">f", struct.pack(">i", bits + (1 if value > 0 else -1)))[0]
        down = struct.unpack(">f", struct.pack(">i", bits - (1 if value > 0 else -1)))[0]
    else:
        up, down = math.nextafter(value, math.inf), math.nextafter(value, -math.inf)
    exact = Fraction(value)
    return (exact + (Fraction(up) - exact) / 2 if math.isfinite(up) else exact,
            exact + (Fraction(down) - exact) / 2 if math.isfinite(down) else exact)


def _shortest(value: float, single: bool) -> Decimal:
    """Ryu's shortest digits as PostgreSQL uses them: the closest decimal with the fewest
    digits that reads back as ``value``, never one exactly half-way to a neighbour."""
    midpoints = _neighbours(value, single)
    exact = Fraction(value)
    for precision in range(1, 18):
        rounded = Decimal(f"{value:.{precision - 1}e}")
        # the nearest decimal of this length, and its neighbours of the same length: next
        # to a power of two the nearest may read back as the float below while the next
        # one up reads back right (2**-24 is 5.960464477539063e-08, not ...062e-08)
        exponent = rounded.as_tuple().exponent
        assert isinstance(exponent, int)  # a finite value
        step = Decimal((0, (1,), exponent))
        fits = []
        for candidate in (rounded, rounded - step, rounded + step):
            try:
                back = float(candidate)
                if single:
                    back = struct.unpack(">f", struct.pack(">f", back))[0]
            except OverflowError:  # rounded past the largest float4
                continue
            if back == value and Fraction(candidate) not in midpoints:
                fits.append(candidate)
        if fits:
            return min(fits, key=lambda c: abs(Fraction(c) - exact))
    return Decimal(repr(value))


def float_text(value: float, *, single: bool = False) -> str:
    """``float4out``/``float8out``: the shortest exact digits, fixed unless the exponent is
    below -4 or at least 6 (float4) / 15 (float8), ``NaN``, ``Infinity``, ``-0``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    shortest = _shortest(value, single)
    sign, digits, exponent = shortest.normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    sci = exponent + len(text) - 1
    limit = 6 if single else 15
    if -4 <= sci < limit:
        if exponent >= 0:
            body = text + "0" * exponent
        elif -exponent >= len(text):
            body = "0." + "0" * (-exponent - len(text)) + text
        else:
            body = text[:exponent] + "." + text[exponent:]
    else:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        body = f"{mantissa}e{'-' if sci < 0 else '+'}{abs(sci):02d}"
    return ("-" if sign else "") + body


def float_value(type_name: str, value: float) -> PgValue:
    """``float4`` or ``float8`` (``value`` already rounded to single precision for float4)."""
    single = type_name == "float4"
    binary = _pack(">f" if single else ">d", value)
    return PgValue(type_name, float_text(value, single=single), binary, value)


def numeric_text(unscaled: int, scale: int) -> str:
    """``numeric_out`` of ``unscaled * 10**-scale`` with ``scale`` digits after the point."""
    digits = str(abs(unscaled)).rjust(scale + 1, "0")
    body = digits if scale == 0 else f"{digits[:-scale]}.{digits[-scale:]}"
    return ("-" if unscaled < 0 else "") + body


#: Sign word and display scale numeric_send writes for the special values (the infinities'
#: scale of 32 is what PostgreSQL 15 sends).
_NUMERIC_SPECIAL: Final = {"NaN": (0xC000, 0), "Infinity": (0xD000, 32),
                           "-Infinity": (0xF000, 32)}


def numeric_value(value: tuple[int, int] | str, type_name: str = "numeric") -> PgValue:
    """``numeric``: ``(unscaled, scale)`` or ``'NaN'``/``'Infinity'``/``'-Infinity'``.

    The binary form is ``numeric_send``'s: digit count, weight, sign, display scale and
    base-10000 digits with leading and trailing zero groups stripped.
    """
    if isinstance(value, str):
        return PgValue(type_name, value, _pack(">hhHh", 0, 0, *_NUMERIC_SPECIAL[value]), value)
    unscaled, scale = value
    magnitude = abs(unscaled)
    whole, frac = divmod(magnitude, 10**scale)
    frac_digits = str(frac).rjust(scale, "0") if scale else ""
    frac_digits += "0" * (-len(frac_digits) % 4)
    whole_digits = str(whole) if whole else ""
    whole_digits = "0" * (-len(whole_digits) % 4) + whole_digits
    groups = [int(whole_digits[i:i + 4]) for i in range(0, len(whole_digits), 4)]
    weight = len(groups) - 1
    groups += [int(frac_digits[i:i + 4]) for i in range(0, len(frac_digits), 4)]
    while groups and groups[0] == 0:
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight, sign = 0, 0
    else:
        sign = 0x4000 if unscaled < 0 else 0
    binary = _pack(f">hhHh{len(groups)}H", len(groups), weight, sign, scale, *groups)
    return PgValue(type_name, numeric_text(unscaled, scale), binary, value)


def money_value(cents: int) -> PgValue:
    """``money`` under ``lc_monetary=C``: ``$1,234.56``, ``-$0.01``; int64 cents."""
    whole, frac = divmod(abs(cents), 100)
    text = f"{'-' if cents < 0 else ''}${whole:,}.{frac:02d}"
    return PgValue("money", text, _pack(">q", cents), cents)


# ---------------------------------------------------------------- date and time
def date_text(days: int) -> str:
    """``date_out`` (ISO) of ``days`` since 2000-01-01: ``0044-03-15 BC``, ``infinity``."""
    if days == DATE_NEG_INF:
        return "-infinity"
    if days == DATE_POS_INF:
        return "infinity"
    year, month, day = civil_from_days(days + PG_EPOCH_DAYS)
    if year <= 0:
        return f"{1 - year:04d}-{month:02d}-{day:02d} BC"
    return f"{year:04d}-{month:02d}-{day:02d}"


def date_value(days: int) -> PgValue:
    """``date`` from days since 2000-01-01 (``DATE_NEG_INF``/``DATE_POS_INF`` are infinities)."""
    return PgValue("date", date_text(days), _pack(">i", days), days)


def _seconds_text(us: int) -> str:
    seconds, frac = divmod(us, 1_000_000)
    text = f"{seconds:02d}"
    if frac:
        text += "." + f"{frac:06d}".rstrip("0")
    return text


def time_text(us: int) -> str:
    """``time_out`` of microseconds since midnight (``24:00:00`` allowed)."""
    hours, rest = divmod(us, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    return f"{hours:02d}:{minutes:02d}:{_seconds_text(rest)}"


def time_value(us: int, type_name: str = "time") -> PgValue:
    """``time``: microseconds since midnight."""
    return PgValue(type_name, time_text(us), _pack(">q", us), us)


def _offset_text(offset: int) -> str:
    """``EncodeTimezone``: ``+05``, ``-03:30``, ``+00:19:32`` (offset in seconds east)."""
    sign = "+" if offset >= 0 else "-"
    hours, rest = divmod(abs(offset), 3600)
    minutes, seconds = divmod(rest, 60)
    if seconds:
        return f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}"
    if minutes:
        return f"{sign}{hours:02d}:{minutes:02d}"
    return f"{sign}{hours:02d}"


def timetz_value(us: int, offset: int, type_name: str = "timetz") -> PgValue:
    """``timetz``: microseconds since midnight and the offset in seconds east of UTC."""
    binary = _pack(">qi", us, -offset)
    return PgValue(type_name, time_text(us) + _offset_text(offset), binary, (us, offset))


def timestamp_text(us: int, offset: int | None = None) -> str:
    """``timestamp_out`` of microseconds since 2000-01-01 (local time ``us + offset`` when an
    offset in seconds east is given, for ``timestamptz``)."""
    if us == TS_NEG_INF:
        return "-infinity"
    if us == TS_POS_INF:
        return "infinity"
    local = us + (offset or 0) * 1_000_000
    days, rest = divmod(local, _US_PER_DAY)
    date = date_text(days)
    bc = date.endswith(" BC")
    text = date.removesuffix(" BC") + " " + time_text(rest)
    if offset is not None:
        text += _offset_text(offset)
    return text + (" BC" if bc else "")


def timestamp_value(us: int, type_name: str = "timestamp") -> PgValue:
    """``timestamp``: microseconds since 2000-01-01 (``TS_NEG_INF``/``TS_POS_INF`` infinite)."""
    return PgValue(type_name, timestamp_text(us), _pack(">q", us), us)


def timestamptz_value(us: int, offset: int = 0, type_name: str = "timestamptz") -> PgValue:
    """``timestamptz``: UTC microseconds since 2000-01-01, printed as a session whose time zone
    is ``offset`` seconds east of UTC prints it (``+00`` for UTC)."""
    return PgValue(type_name, timestamp_text(us, offset), _pack(">q", us), (us, offset))


def _interval_part(value: int, unit: str, state: list[bool]) -> str:
    """``AddPostgresIntPart``: state is [is_zero, is_before]."""
    if value == 0:
        return ""
    is_zero, is_before = state
    text = (("" if is_zero else " ") + ("+" if is_before and value > 0 else "")
            + f"{value} {unit}{'' if value == 1 else 's'}")
    state[0], state[1] = False, value < 0
    return text


def interval_text(months: int, days: int, us: int) -> str:
    """``interval_out`` with ``IntervalStyle=postgres``: ``1 year 2 mons -3 days +04:05:06.7``."""
    year = int(months / 12)
    mon = months - year * 12
    state = [True, False]
    out = _interval_part(year, "year", state)
    out += _interval_part(mon, "mon", state)
    out += _interval_part(days, "day", state)
    is_zero, is_before = state
    if is_zero or us != 0:
        negative = us < 0
        magnitude = abs(us)
        hours, rest = divmod(magnitude, 3_600_000_000)
        minutes, rest = divmod(rest, 60_000_000)
        sign = "-" if negative else ("+" if is_before else "")
        out += ("" if is_zero else " ") + f"{sign}{hours:02d}:{minutes:02d}:{_seconds_text(rest)}"
    return out


def interval_value(months: int, days: int, us: int) -> PgValue:
    """``interval``: months, days and microseconds, kept apart as PostgreSQL keeps them."""
    return PgValue("interval", interval_text(months, days, us), _pack(">qii", us, days, months),
                   (months, days, us))


# ---------------------------------------------------------------- text-like
def text_value(text: str, type_name: str = "text") -> PgValue:
    """``text``, ``varchar``, ``bpchar`` (pad it yourself), ``name``, ``citext``, ``char``."""
    return PgValue(type_name, text, text.encode("utf-8"), text)


def enum_value(label: str, type_name: str) -> PgValue:
    """A label of an enum type."""
    return PgValue(type_name, label, label.encode("utf-8"), label)


def bytea_value(data: bytes) -> PgValue:
    """``bytea`` in ``bytea_output=hex``: ``\\x00ff``; the raw bytes."""
    return PgValue("bytea", "\\x" + data.hex(), bytes(data), data)


def bit_value(bits: str, type_name: str) -> PgValue:
    """``bit(n)``/``varbit(n)``: ``0101``; int32 length and the bits, padded with zeros."""
    padded = bits + "0" * (-len(bits) % 8)
    data = bytes(int(padded[i:i + 8], 2) for i in range(0, len(padded), 8))
    return PgValue(type_name, bits, _pack(">i", len(bits)) + data, bits)


def uuid_value(data: bytes) -> PgValue:
    """``uuid`` from 16 bytes."""
    return PgValue("uuid", str(uuid.UUID(bytes=data)), bytes(data), data)


def _json_string(text: str) -> str:
    """``escape_json``: the named escapes, other control characters as ``\\u00xx``."""
    out = ['"']
    for ch in text:
        if ch in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[ch])
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_JSON_ESCAPES: Final = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                        '"': '\\"', "\\": "\\\\"}


def _jsonb_key(key: str) -> tuple[int, bytes]:
    raw = key.encode("utf-8")
    return len(raw), raw


def json_text(doc: Any, *, jsonb: bool) -> str:
    """A JSON document as ``jsonb_out`` prints it (keys by length then bytes, ``", "`` and
    ``": "``) or, for ``json``, compactly in the document's own key order (``json`` keeps its
    input text verbatim). Numbers are ``int`` or ``(unscaled, scale)`` numerics."""
    if doc is None:
        return "null"
    if doc is True:
        return "true"
    if doc is False:
        return "false"
    if isinstance(doc, int):
        return str(doc)
    if isinstance(doc, str):
        return _json_string(doc)
    if isinstance(doc, tuple):
        return numeric_text(*doc)
    comma, colon = (", ", ": ") if jsonb else (",", ":")
    if isinstance(doc, list):
        return "[" + comma.join(json_text(v, jsonb=jsonb) for v in doc) + "]"
    assert isinstance(doc, dict)
    keys = sorted(doc, key=_jsonb_key) if jsonb else list(doc)
    return "{" + comma.join(_json_string(k) + colon + json_text(doc[k], jsonb=jsonb)
                            for k in keys) + "}"


def json_value(doc: Any, type_name: str = "jsonb") -> PgValue:
    """``json`` or ``jsonb`` (binary: the text, after a version byte 1 for jsonb)."""
    text = json_text(doc, jsonb=type_name == "jsonb")
    raw = text.encode("utf-8")
    return PgValue(type_name, text, b"\x01" + raw if type_name == "jsonb" else raw, doc)


def xml_value(text: str) -> PgValue:
    """``xml`` content: an element around escaped character data, printed as given."""
    body = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    doc = f"<v>{body}</v>"
    return PgValue("xml", doc, doc.encode("utf-8"), text)


def tsvector_value(lexemes: Iterable[str]) -> PgValue:
    """``tsvector`` of position-less lexemes: sorted, unique, each quoted."""
    words = sorted(set(lexemes), key=lambda w: w.encode("utf-8"))
    text = " ".join("'" + w.replace("'", "''").replace("\\", "\\\\") + "'" for w in words)
    return PgValue("tsvector", text, None, tuple(words))


def ltree_value(labels: Sequence[str]) -> PgValue:
    """``ltree``: dot-separated labels; binary is a version byte 1 and the text."""
    text = ".".join(labels)
    return PgValue("ltree", text, b"\x01" + text.encode("ascii"), tuple(labels))


def _hstore_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def hstore_value(pairs: dict[str, str | None]) -> PgValue:
    """``hstore``: pairs sorted by key length then bytes; binary pair count and lengths."""
    keys = sorted(pairs, key=_jsonb_key)
    text = ", ".join(_hstore_quote(k) + "=>" + ("NULL" if pairs[k] is None else
                                                _hstore_quote(pairs[k] or ""))
                     for k in keys)
    binary = bytearray(_pack(">i", len(keys)))
    for k in keys:
        raw = k.encode("utf-8")
        binary += _pack(">i", len(raw)) + raw
        v = pairs[k]
        if v is None:
            binary += _pack(">i", -1)
        else:
            rawv = v.encode("utf-8")
            binary += _pack(">i", len(rawv)) + rawv
    return PgValue("hstore", text, bytes(binary), dict(pairs))


# ---------------------------------------------------------------- network
def _ipv6_text(address: ipaddress.IPv6Address) -> str:
    """``inet_net_ntop`` for IPv6: RFC 5952 compression, IPv4-mapped/compatible tails dotted."""
    words = [int.from_bytes(address.packed[i:i + 2], "big") for i in range(0, 16, 2)]
    best_base, best_len, cur_base, cur_len = -1, 0, -1, 0
    for i, w in enumerate(words):
        if w == 0:
            if cur_base == -1:
                cur_base, cur_len = i, 1
            else:
                cur_len += 1
        elif cur_base != -1:
            if best_base == -1 or cur_len > best_len:
                best_base, best_len = cur_base, cur_len
            cur_base = -1
    if cur_base != -1 and (best_base == -1 or cur_len > best_len):
        best_base, best_len = cur_base, cur_len
    if best_base != -1 and best_len < 2:
        best_base = -1
    out = []
    i = 0
    while i < 8:
        if best_base != -1 and best_base <= i < best_base + best_len:
            if i == best_base:
                out.append(":")
            i += 1
            continue
        if i != 0:
            out.append(":")
        if (i == 6 and best_base == 0
                and (best_len == 6 or (best_len == 5 and words[5] == 0xFFFF))):
            out.append(str(ipaddress.IPv4Address(address.packed[12:])))
            break
        out.append(f"{words[i]:x}")
        i += 1
    if best_base != -1 and best_base + best_len == 8:
        out.append(":")
    return "".join(out)


def inet_value(address: bytes, bits: int, type_name: str = "inet") -> PgValue:
    """``inet``/``cidr`` from 4 or 16 address bytes and a prefix length (cidr: host bits 0)."""
    v4 = len(address) == 4
    full = 32 if v4 else 128
    addr_text = (str(ipaddress.IPv4Address(address)) if v4
                 else _ipv6_text(ipaddress.IPv6Address(address)))
    cidr = type_name == "cidr"
    text = addr_text if (bits == full and not cidr) else f"{addr_text}/{bits}"
    binary = bytes([2 if v4 else 3, bits, 1 if cidr else 0, len(address)]) + bytes(address)
    return PgValue(type_name, text, binary, (address, bits))


def macaddr_value(data: bytes) -> PgValue:
    """``macaddr`` (6 bytes) or ``macaddr8`` (8 bytes)."""
    name = "macaddr" if len(data) == 6 else "macaddr8"
    return PgValue(name, ":".join(f"{b:02x}" for b in data), bytes(data), data)


# ---------------------------------------------------------------- geometric
def point_value(x: float, y: float) -> PgValue:
    """``point``: ``(x,y)`` in float8 output; two float8."""
    return PgValue("point", f"({float_text(x)},{float_text(y)})", _pack(">dd", x, y), (x, y))


def postgis_point_value(x: float, y: float, srid: int | None, type_name: str = "geometry"
                        ) -> PgValue:
    """A PostGIS point as little-endian EWKB (hex text, upper case; binary the EWKB)."""
    kind = 1 | (0x20000000 if srid is not None else 0)
    ewkb = _pack("<BI", 1, kind) + (_pack("<i", srid) if srid is not None else b"")
    ewkb += _pack("<dd", x, y)
    return PgValue(type_name, ewkb.hex().upper(), ewkb, (x, y, srid))


# ---------------------------------------------------------------- ranges
_RANGE_SPECIAL: Final = frozenset('"\\()[],')


def _range_bound(text: str) -> str:
    if text == "" or any(c in _RANGE_SPECIAL or c.isspace() for c in text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def range_value(type_name: str, lower: PgValue | None, upper: PgValue | None,
                lower_inc: bool, upper_inc: bool, *, empty: bool = False) -> PgValue:
    """A range from bound values already in canonical form (``None`` is unbounded)."""
    if empty:
        return PgValue(type_name, "empty", None, "empty")
    text = (("[" if lower_inc and lower is not None else "(")
            + ("" if lower is None else _range_bound(lower.text)) + ","
            + ("" if upper is None else _range_bound(upper.text))
            + ("]" if upper_inc and upper is not None else ")"))
    return PgValue(type_name, text, None, (lower, upper, lower_inc, upper_inc))


# ---------------------------------------------------------------- arrays
_ARRAY_SPECIAL: Final = frozenset('{}"\\')


def _array_element(text: str, delimiter: str) -> str:
    if (text == "" or text.upper() == "NULL" or delimiter in text
            or any(c in _ARRAY_SPECIAL or c in " \t\n\r\v\f" for c in text)):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def array_value(type_name: str, element_oid: int, items: Sequence[PgValue | None],
                delimiter: str = ",") -> PgValue:
    """A one-dimensional array (lower bound 1) of ``items`` (``None`` is a NULL element).

    ``type_name`` is the array's SQL type (``text[]``); binary is ``array_send``'s form, or
    ``None`` when an element type has no binary form here.
    """
    text = "{" + delimiter.join("NULL" if v is None else _array_element(v.text, delimiter)
                                for v in items) + "}"
    binary: bytes | None
    if any(v is not None and v.binary is None for v in items):
        binary = None
    elif not items:
        binary = _pack(">iiI", 0, 0, element_oid)
    else:
        out = bytearray(_pack(">iiIii", 1, int(any(v is None for v in items)), element_oid,
                              len(items), 1))
        for v in items:
            if v is None:
                out += _pack(">i", -1)
            else:
                assert v.binary is not None
                out += _pack(">i", len(v.binary)) + v.binary
        binary = bytes(out)
    return PgValue(type_name, text, binary, tuple(items))


# ---------------------------------------------------------------- bounds of the temporal types
#: 4714-11-24 BC, the first day PostgreSQL's date and timestamp accept (days since 2000-01-01).
DATE_MIN: Final = days_from_civil(-4713, 11, 24) - PG_EPOCH_DAYS
#: 5874897-12-31, the last day a date can hold.
DATE_MAX: Final = days_from_civil(5874897, 12, 31) - PG_EPOCH_DAYS
#: The first and last microsecond a timestamp can hold (4714-11-24 BC, 294276-12-31).
TIMESTAMP_MIN: Final = DATE_MIN * _US_PER_DAY
TIMESTAMP_MAX: Final = (days_from_civil(294276, 12, 31) - PG_EPOCH_DAYS + 1) * _US_PER_DAY - 1
