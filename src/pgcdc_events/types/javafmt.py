"""Numbers printed the way Java prints them, where Debezium's output depends on it.

``Double.toString`` writes ``1.0`` for one, ``1.0E20`` and ``1.0E-5`` outside
[10^-3, 10^7), and at least one digit after the point. Digits are the shortest
that read back as the same double (Python's ``repr`` digits), which is what
Java 19+ prints and what Java 17 prints for all but rare values.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from json.encoder import encode_basestring

__all__ = ["jackson_string", "java_double"]


def java_double(value: float) -> str:
    """``Double.toString(value)``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    # Shortest round-trip digits (repr) and the position of the decimal point among them.
    _, digit_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    assert isinstance(exponent, int)
    significant = "".join(map(str, digit_tuple))
    point = len(significant) + exponent
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{significant}"
        whole = significant[:point].ljust(point, "0")
        return f"{sign}{whole}.{significant[point:] or '0'}"
    return f"{sign}{significant[0]}.{significant[1:] or '0'}E{point - 1}"


# In encode_basestring's output every backslash starts an escape: ``\\\\`` (an escaped
# backslash), ``\\"``, ``\\n``, ... or ``\\uxxxx``. Matching the escaped backslash as a
# unit keeps the ``u`` of a user's ``\\users`` from being read as the start of an escape.
_ESCAPES = re.compile(r"\\\\|\\u[0-9a-f]{4}")


def _upper(match: re.Match[str]) -> str:
    escape = match.group()
    return escape if len(escape) == 2 else "\\u" + escape[2:].upper()


def upper_escape(text: str) -> str:
    """``\\uxxxx`` escapes of ``encode_basestring``'s output in Jackson's upper-case hex.

    Only real escapes change: the text ``C:\\users`` (escaped as ``C:\\\\users``) is
    left as it is.
    """
    return _ESCAPES.sub(_upper, text)


def jackson_string(text: str) -> str:
    """A JSON string literal as Jackson writes it: ``"``, ``\\`` and control characters
    escaped, ``\\uXXXX`` in upper-case hex, everything else as is (C-speed)."""
    encoded: str = encode_basestring(text)
    if "\\u" in encoded:
        encoded = upper_escape(encoded)
    return encoded
