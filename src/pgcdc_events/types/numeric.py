"""Booleans, bit strings, integers, floating point, numeric and money.

``numeric`` follows ``decimal.handling.mode``: *precise* gives Connect's
``Decimal`` (columns with a modifier) or Debezium's ``VariableScaleDecimal``
struct (without), *double* a ``float64``, *string* the plain decimal text.
``NaN`` and the infinities cannot be represented by a decimal: in *precise* mode
such a value becomes ``null``, as Debezium does (use *string* or *double* to
keep them). ``money`` is read from its text output (``$1,234.56``, the C or an
English ``lc_monetary``) or, unambiguously, from its binary form.
"""

from __future__ import annotations

import decimal
import math
import re
import struct
from decimal import Decimal
from typing import Any, Final

import attrs

from pgcdc_events.errors import ConversionError
from pgcdc_events.types.config import TypeConfig
from pgcdc_events.types.jsonvalue import DECIMAL_LOGICAL, decimal_to_bytes, unscaled_value
from pgcdc_events.types.mapping import Builder, Converter, ValueMapping, VectorForm
from pgcdc_events.types.registry import PgType
from pgcdc_events.types.schema import Schema, Struct, struct_schema

__all__ = [
    "BUILDERS",
    "DECIMAL_MAX",
    "VARIABLE_SCALE_DECIMAL",
    "BooleanText",
    "DecimalText",
    "IntegerText",
    "decimal_from_binary",
    "decimal_parameters",
    "numeric_modifier",
    "variable_scale_struct",
]

#: Debezium's struct for numerics without a fixed scale.
VARIABLE_SCALE_DECIMAL: Final = struct_schema(
    "io.debezium.data.VariableScaleDecimal",
    [("scale", Schema("int32")), ("value", Schema("bytes"))],
    version=1,
    doc="Variable scaled decimal",
)

#: Enough precision for any PostgreSQL numeric (131072 digits before, 16383 after the point).
_CONTEXT: Final = decimal.Context(prec=200_000, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
_HALF_UP: Final = decimal.Context(prec=200_000, rounding=decimal.ROUND_HALF_UP,
                                  Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
_SPECIAL_STRINGS: Final = {"NaN": "NAN", "Infinity": "POSITIVE_INFINITY",
                           "-Infinity": "NEGATIVE_INFINITY"}

#: The most digits of a decimal held exactly by fixed-width decimal types downstream
#: (Arrow's decimal128, Spark's DecimalType).
DECIMAL_MAX: Final = 38


def decimal_parameters(schema: Schema, limit: int = DECIMAL_MAX) -> tuple[int, int] | None:
    """``(precision, scale)`` of a Connect ``Decimal`` schema as :func:`_numeric` writes
    them (no precision parameter: ``limit``), or ``None`` when they are not numbers or do
    not fit ``limit`` digits. The one reading of those parameters (Spark's schemas and its
    column-wise decoding take it from here)."""
    params = schema.params
    try:
        scale = int(params.get("scale", "0"))
        precision = int(params.get("connect.decimal.precision", str(limit)))
    except ValueError:
        return None
    return (precision, scale) if 0 <= scale <= precision <= limit else None


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")
_NUMERIC_HEAD = struct.Struct(">hhHh")


def numeric_modifier(typmod: int) -> tuple[int, int]:
    """``(precision, scale)`` of a numeric modifier as pgjdbc decodes it.

    A negative scale (PostgreSQL 15+) comes out as ``scale & 0xFFFF`` (e.g. 2046
    for -2), which is what Debezium puts in the schema; the value is still exact.
    """
    return ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF


# -- vector forms (the kernels: pgcdc_events.spark.vectorized) --------------------


@attrs.frozen
class IntegerText(VectorForm):
    """Values are decimal integers (``-?[0-9]+``), the value ``int(raw)``, a Connect
    ``int{bits}``."""

    bits: int


@attrs.frozen
class BooleanText(VectorForm):
    """Values are ``true`` or ``false`` exactly (anything else is refused)."""

    true: bytes
    false: bytes


@attrs.frozen
class DecimalText(VectorForm):
    """Values printed at the column's scale (``-?[0-9]+`` and, for a positive scale, ``.``
    and exactly ``scale`` digits) are that ``Decimal`` as they are; others (``NaN``) are
    the scalar converter's."""

    precision: int
    scale: int


# -- booleans and bit strings -----------------------------------------------------

_BOOLEAN_TEXT: Final = BooleanText(b"t", b"f")


def _bool_text(raw: bytes) -> bool:
    if raw == _BOOLEAN_TEXT.true:
        return True
    if raw == _BOOLEAN_TEXT.false:
        return False
    raise ConversionError(f"not a boolean: {raw!r}")


def _bool_binary(raw: bytes) -> bool:
    if len(raw) != 1:
        raise ConversionError(f"boolean binary value of {len(raw)} bytes")
    return raw != b"\x00"


def _bits_to_bytes(bits: str) -> bytes:
    """Debezium's ``Bits`` value: the bit string as a little-endian number, no leading zeros.

    The rightmost character is bit 0 (Java ``BitSet.toByteArray``); an all-zero
    string gives empty bytes.
    """
    number = int(bits, 2) if bits else 0
    return number.to_bytes((number.bit_length() + 7) // 8, "little")


def _bits_binary_text(raw: bytes) -> str:
    if len(raw) < 4:
        raise ConversionError("bit string binary value shorter than its length field")
    (nbits,) = _I32.unpack_from(raw)
    if nbits < 0 or (nbits + 7) // 8 != len(raw) - 4:
        raise ConversionError(f"bit string of {nbits} bits in {len(raw) - 4} bytes")
    return format(int.from_bytes(raw[4:], "big"), f"0{(len(raw) - 4) * 8}b")[:nbits]


def _bit_single_text(raw: bytes) -> bool:
    return int(raw, 2) != 0 if raw else False


def _bits(t: PgType, typmod: int, config: TypeConfig) -> ValueMapping:
    length = typmod
    if length == 1:
        return ValueMapping(Schema("boolean"), _bit_single_text,
                            lambda raw: _bit_single_text(_bits_binary_text(raw).encode()))
    if length < 0:
        length = 2147483647  # pgjdbc's unknown length, for unbounded bit varying
    schema = Schema("bytes", name="io.debezium.data.Bits", version=1,
                    parameters=(("length", str(length)),))
    return ValueMapping(schema, lambda raw: _bits_to_bytes(raw.decode("ascii")),
                        lambda raw: _bits_to_bytes(_bits_binary_text(raw)),
                        config.unavailable_value_placeholder)


# -- integers and floating point ---------------------------------------------------


def _fixed(schema_type: str, binary: struct.Struct) -> Builder:
    schema = Schema(schema_type)
    unpack = binary.unpack
    form = IntegerText(int(schema_type[3:]))

    def from_binary(raw: bytes) -> int:
        return int(unpack(raw)[0])

    def build(t: PgType, typmod: int, config: TypeConfig) -> ValueMapping:
        return ValueMapping(schema, int, from_binary, vector=form)

    return build


def _float32_binary(raw: bytes) -> float:
    """A float4 as the shortest decimal that rounds to it, which is what PostgreSQL prints."""
    (value,) = _F32.unpack(raw)
    if not math.isfinite(value):
        return float(value)
    for digits in range(1, 10):
        candidate = float(f"{value:.{digits}g}")
        try:
            if _F32.pack(candidate) == raw:
                return candidate
        except OverflowError:  # rounded past the largest float4 (3.4028235e38)
            continue
    return float(value)


def _float64_binary(raw: bytes) -> float:
    return float(_F64.unpack(raw)[0])


def _float(schema_type: str, from_binary: Converter) -> Builder:
    schema = Schema(schema_type)

    def build(t: PgType, typmod: int, config: TypeConfig) -> ValueMapping:
        return ValueMapping(schema, float, from_binary)

    return build


# -- numeric ------------------------------------------------------------------------


def decimal_from_binary(raw: bytes) -> Decimal:
    """PostgreSQL's binary numeric (base-10000 digits) as a ``Decimal`` (NaN/±Infinity too)."""
    if len(raw) < 8:
        raise ConversionError("numeric binary value shorter than its header")
    ndigits, weight, sign, dscale = _NUMERIC_HEAD.unpack_from(raw)
    if sign == 0xC000:
        return Decimal("NaN")
    if sign == 0xD000:
        return Decimal("Infinity")
    if sign == 0xF000:
        return Decimal("-Infinity")
    if ndigits < 0 or len(raw) != 8 + 2 * ndigits or sign not in (0, 0x4000):
        raise ConversionError(f"malformed numeric binary value ({ndigits} digits, sign {sign:#x})")
    digits: list[int] = []
    for (group,) in struct.iter_unpack(">h", raw[8:]):
        if not 0 <= group < 10000:
            raise ConversionError(f"numeric binary digit {group} out of range")
        digits += (group // 1000, group // 100 % 10, group // 10 % 10, group % 10)
    exponent = 4 * (weight - ndigits + 1)
    value = Decimal((1 if sign else 0, tuple(digits) or (0,), exponent))
    return value.quantize(Decimal((0, (1,), -dscale)), context=_CONTEXT)


#: numeric_out's text: no exponent (a few bytes of ``1e999999999`` would stand for a billion
#: digits), at most 131072 digits before the point and 16383 after.
_NUMERIC_TEXT: Final = re.compile(rb"-?[0-9]{1,131072}(?:\.[0-9]{1,16383})?|NaN|-?Infinity")


_DIGITS: Final = b"0123456789"
#: Digits before the point _NUMERIC_TEXT takes (a numeric(p, s) has at most 1000 digits).
_MAX_PLAIN: Final = 131072


def _parse_decimal(raw: bytes) -> Decimal:
    if _NUMERIC_TEXT.fullmatch(raw) is None:
        raise ConversionError(f"not numeric text output: {raw[:80]!r}")
    try:
        return Decimal(raw.decode("ascii"))
    except (decimal.InvalidOperation, UnicodeDecodeError):
        raise ConversionError(f"not a numeric: {raw[:80]!r}") from None


def variable_scale_struct(value: Decimal) -> Struct:
    """``VariableScaleDecimal`` of ``value``: trailing zeros stripped, never a negative scale."""
    if value.is_zero():
        return Struct(VARIABLE_SCALE_DECIMAL, (0, b"\x00"))
    normalized = value.normalize(_CONTEXT)
    exponent = normalized.as_tuple().exponent
    assert isinstance(exponent, int)
    # BigDecimal.stripTrailingZeros may leave a negative scale; Debezium resets it to 0.
    scale = max(-exponent, 0)
    return Struct(VARIABLE_SCALE_DECIMAL, (scale, decimal_to_bytes(unscaled_value(normalized,
                                                                                   scale))))


def _variable_scale_text(raw: bytes) -> Struct | None:
    """``VariableScaleDecimal`` straight from plain numeric text (``None``: take the slow path).

    Same result as :func:`variable_scale_struct`: trailing fraction zeros stripped,
    scale never negative.
    """
    if len(raw) > 1000 or not raw or raw[-1:] == b"N" or raw[-1:] == b"y":  # NaN, Infinity
        return None
    whole, _, frac = raw.partition(b".")
    frac = frac.rstrip(b"0")
    try:
        unscaled = int(whole + frac)
    except ValueError:
        return None
    if unscaled == 0:
        return Struct(VARIABLE_SCALE_DECIMAL, (0, b"\x00"))
    return Struct(VARIABLE_SCALE_DECIMAL, (len(frac), decimal_to_bytes(unscaled)))


def _numeric(t: PgType, typmod: int, config: TypeConfig) -> ValueMapping:  # noqa: C901
    mode = config.decimal_handling_mode
    fixed = typmod != -1
    precision, scale = numeric_modifier(typmod) if fixed else (0, 0)
    quantum = Decimal((0, (1,), -scale))

    def scaled(value: Decimal) -> Decimal:
        # PostgreSQL prints numeric(p,s) with exactly s decimals: quantize only when needed.
        if not fixed or value.as_tuple().exponent == -scale:
            return value
        return value.quantize(quantum, context=_CONTEXT)

    if mode == "double":
        def to_double(value: Decimal) -> Any:
            return float(value)
        convert = to_double
        schema = Schema("float64")
    elif mode == "string":
        def to_string(value: Decimal) -> Any:
            if not value.is_finite():
                return _SPECIAL_STRINGS[str(value)]
            return format(scaled(value), "f")
        convert = to_string
        schema = Schema("string")
    elif fixed:
        def to_decimal(value: Decimal) -> Any:
            return scaled(value) if value.is_finite() else None
        convert = to_decimal
        schema = Schema("bytes", name=DECIMAL_LOGICAL, version=1, parameters=(
            ("scale", str(scale)), ("connect.decimal.precision", str(precision))))
    else:
        def to_struct(value: Decimal) -> Any:
            return variable_scale_struct(value) if value.is_finite() else None
        convert = to_struct
        schema = VARIABLE_SCALE_DECIMAL

    def from_text(raw: bytes) -> Any:
        return convert(_parse_decimal(raw))

    if mode == "precise" and not fixed:
        def from_text(raw: bytes) -> Any:
            return _variable_scale_text(raw) or convert(_parse_decimal(raw))
    elif mode == "precise":
        point, minus_point = (b".", b"-.") if scale else (b"", b"-")

        def general(raw: bytes) -> Any:
            dot = raw.find(b".")
            if len(raw) - dot - 1 == scale if dot >= 0 else scale == 0:
                # already at the column's scale: [-]digits[.digits], what _NUMERIC_TEXT
                # takes, is the value as it is (the check costs less than the pattern)
                rest = raw.translate(None, _DIGITS)
                sign = 0 if rest == point else 1 if rest == minus_point and \
                    raw[:1] == b"-" else -1
                if sign >= 0 and (dot if scale else len(raw)) > sign and \
                        len(raw) <= _MAX_PLAIN:
                    return Decimal(raw.decode("ascii"))
                if raw[-1:] not in (b"N", b"y"):  # not NaN/Infinity
                    return _parse_decimal(raw)
            return convert(_parse_decimal(raw))

        # the common form first: unsigned digits, the point ``scale`` places from the end
        # (digits alone at scale 0), at most _MAX_PLAIN bytes: the value ``general`` gives
        # it, in about two thirds fewer instructions around ``Decimal`` (its one check, a
        # ``replace`` and an ``isdigit``, where ``general`` finds, translates, compares)
        at = -scale - 1
        if scale > 0:
            def from_text(raw: bytes) -> Any:
                if len(raw) > -at and raw[at] == 46 and raw.replace(b".", b"", 1).isdigit() \
                        and len(raw) <= _MAX_PLAIN:
                    return Decimal(raw.decode("ascii"))
                return general(raw)
        elif scale == 0:
            def from_text(raw: bytes) -> Any:
                if raw.isdigit() and len(raw) <= _MAX_PLAIN:
                    return Decimal(raw.decode("ascii"))
                return general(raw)
        else:
            from_text = general

    def from_binary(raw: bytes) -> Any:
        return convert(decimal_from_binary(raw))

    # precise with a modifier: text at the scale is the value as it is (from_text above)
    form = DecimalText(precision, scale) if mode == "precise" and fixed else None
    return ValueMapping(schema, from_text, from_binary, _toast(schema, config), form)


# -- money ----------------------------------------------------------------------------


def parse_money(raw: bytes) -> Decimal:
    """Money text output (``$1,234.56``, ``-$1.00``, ``($1.00)``) as a ``Decimal``.

    Currency symbols and group separators are dropped; ``.`` is the decimal point.
    """
    text = raw.decode("utf-8").strip()
    negative = text.startswith("-") or (text.startswith("(") and text.endswith(")"))
    digits = "".join(ch for ch in text if ch.isdigit() or ch == ".")
    if not digits or digits.count(".") > 1 or digits == "." or len(digits) > 20:
        # money is an int64 of minor units: 19 digits at most
        raise ConversionError(f"not a money value: {text[:80]!r}")
    value = Decimal(digits)
    return -value if negative else value


def _money(t: PgType, typmod: int, config: TypeConfig) -> ValueMapping:
    mode = config.decimal_handling_mode
    digits = config.money_fraction_digits
    quantum = Decimal((0, (1,), -digits))

    def from_binary_decimal(raw: bytes) -> Decimal:
        # int64 in minor units; PostgreSQL's C/English lc_monetary has two fraction digits.
        return Decimal(_I64.unpack(raw)[0]).scaleb(-2)

    if mode == "double":
        schema = Schema("float64")

        def convert(value: Decimal) -> Any:
            return float(value)
    elif mode == "string":
        schema = Schema("string")

        def convert(value: Decimal) -> Any:
            return format(value, "f")
    else:
        schema = Schema("bytes", name=DECIMAL_LOGICAL, version=1,
                        parameters=(("scale", str(digits)),))

        def convert(value: Decimal) -> Any:
            return value.quantize(quantum, context=_HALF_UP)

    return ValueMapping(schema, lambda raw: convert(parse_money(raw)),
                        lambda raw: convert(from_binary_decimal(raw)), _toast(schema, config))


def _toast(schema: Schema, config: TypeConfig) -> Any:
    """The unchanged-TOAST stand-in for a numeric schema: the placeholder where it fits."""
    if schema.type == "string":
        return config.placeholder_text
    if schema.type == "bytes" and schema.name is None:
        return config.unavailable_value_placeholder
    return None


BUILDERS: Final[dict[str, Builder]] = {
    "bool": lambda t, typmod, config: ValueMapping(Schema("boolean"), _bool_text, _bool_binary,
                                                   vector=_BOOLEAN_TEXT),
    "bit": _bits,
    "varbit": _bits,
    "int2": _fixed("int16", _I16),
    "int4": _fixed("int32", _I32),
    "int8": _fixed("int64", _I64),
    "oid": _fixed("int64", _U32),
    "float4": _float("float32", _float32_binary),
    "float8": _float("float64", _float64_binary),
    "numeric": _numeric,
    "money": _money,
}
