"""Vectorized converters: the Arrow/numpy kernel of each vector form the type families declare.

A type family declares, beside a column's scalar text converter, the *vector form* of the
column's text (:class:`~pgcdc_events.types.mapping.VectorForm`, e.g.
:class:`~pgcdc_events.types.numeric.DecimalText`), built from the same parameters as the
scalar converter. The core imports no numpy or pyarrow, so the kernels live here, one per
form class (:data:`KERNELS`, filled by :func:`kernel`), and Spark's column-wise runs
(:mod:`pgcdc_events.spark.columnar`) look them up by the column's form: which conversion
applies, and with which width or scale, is never decided here.

A kernel takes one column of a run (an Arrow binary array, null where the tuple had NULL)
and the Arrow type of the column's Connect schema, and gives the values as that type:
for every value exactly what the scalar converter gives. When it cannot vouch for every
value (one outside the form, a type it does not hold), it gives ``None`` and the caller
takes the scalar converter. ``tests/spark/test_vectorized.py`` holds every kernel to its
scalar converter on every value; :func:`mismatch` does the same at run time in the test
mode of :class:`~pgcdc_events.spark.columnar.RunDecoder`.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final, TypeVar

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.compute as pc  # type: ignore[import-untyped]

from pgcdc_events.types.mapping import VectorForm
from pgcdc_events.types.numeric import BooleanText, DecimalText, IntegerText
from pgcdc_events.types.temporal import UtcZonedText
from pgcdc_events.types.text import Utf8Text

__all__ = ["KERNELS", "Kernel", "convert", "kernel", "mismatch"]

#: ``kernel(form, raw, target)``: the values of ``raw`` as Arrow type ``target``, or ``None``.
Kernel = Callable[[Any, Any, Any], Any]
#: The kernel of each vector form class.
KERNELS: Final[dict[type[VectorForm], Kernel]] = {}

F = TypeVar("F", bound=VectorForm)


def kernel(form: type[F]) -> Callable[[Callable[[F, Any, Any], Any]],
                                      Callable[[F, Any, Any], Any]]:
    """Register the decorated function as the kernel of vector form ``form``."""
    def register(fn: Callable[[F, Any, Any], Any]) -> Callable[[F, Any, Any], Any]:
        KERNELS[form] = fn
        return fn
    return register


def convert(form: VectorForm, raw: Any, target: Any) -> Any:
    """The values of ``raw`` (an Arrow binary array) as Arrow type ``target`` by ``form``'s
    kernel, or ``None`` (no kernel for the form, or one that declines the values)."""
    fn = KERNELS.get(type(form))
    if fn is None:
        return None
    try:
        return fn(form, raw, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None  # a value Arrow refuses: the scalar converter decides


def _same(got: Any, want: Any) -> bool:
    """Whether a kernel's value is the scalar converter's: same type, equal, and for a
    ``Decimal`` the same exponent (``1.5`` is not ``1.50``)."""
    if type(got) is not type(want) or got != want:
        return False
    if isinstance(got, Decimal):
        return bool(got.as_tuple().exponent == want.as_tuple().exponent)
    return True


def mismatch(raw: Any, out: Any, scalar: Callable[[bytes], Any]
             ) -> tuple[int, bytes | None, str] | None:
    """The first value where a kernel's ``out`` is not what ``scalar`` gives for ``raw``
    (its index, its bytes and what went wrong), or ``None``: every value agrees."""
    got_values = out.to_pylist()
    for i, value in enumerate(raw.to_pylist()):
        got = got_values[i]
        if value is None:
            if got is not None:
                return i, None, f"null gave {got!r}"
            continue
        try:
            want = scalar(value)
        except Exception as exc:  # any refusal is a disagreement here
            return i, value, f"the scalar converter refuses it ({type(exc).__name__}), " \
                             f"the kernel gave {got!r}"
        if not _same(got, want):
            return i, value, f"the kernel gave {got!r}, the scalar converter {want!r}"
    return None


# ---------------------------------------------------------------- helpers


def _layout(raw: Any) -> tuple[Any, Any, Any, Any]:
    """A binary array's value offsets (``int32``, into the data buffer), the data buffer
    and the bytes of the array's values in it (``uint8``), and which values are present
    (booleans), all without copying (views of Arrow's buffers)."""
    count = len(raw)
    _, offsets, data = raw.buffers()[:3]
    offs = np.frombuffer(offsets, np.int32)[raw.offset:raw.offset + count + 1]
    buf = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    present = (np.ones(count, np.bool_) if raw.null_count == 0
               else np.asarray(raw.is_valid().to_numpy(zero_copy_only=False), np.bool_))
    return offs, buf, buf[offs[0]:offs[-1]], present


_MINUS, _DOT, _ZERO, _NINE = ord("-"), ord("."), ord("0"), ord("9")
_INTEGER_TYPES: Final = {16: pa.int16(), 32: pa.int32(), 64: pa.int64()}


def _signs(values: Any) -> tuple[int, int] | None:
    """How many ``-`` and ``.`` the bytes ``values`` hold, when every other byte is a
    digit (``None``: another byte)."""
    if len(values) == 0:
        return 0, 0
    if int(values.max()) > _NINE:
        return None
    if int(values.min()) >= _ZERO:
        return 0, 0  # digits only (the usual integer column: no sign)
    minus = int(np.count_nonzero(values == _MINUS))
    dots = int(np.count_nonzero(values == _DOT))
    return (minus, dots) if minus + dots == int(np.count_nonzero(values < _ZERO)) else None


# ---------------------------------------------------------------- the kernels


@kernel(IntegerText)
def _integers(form: IntegerText, raw: Any, target: Any) -> Any:
    """An Arrow cast, after checking that the text holds only digits and ``-`` (Arrow
    would read ``0x10`` as 16 where ``int`` refuses it; what it refuses, it raises)."""
    if target != _INTEGER_TYPES.get(form.bits):
        return None
    signs = _signs(_layout(raw)[2])
    if signs is None or signs[1]:
        return None
    return pc.cast(raw, target)


@kernel(BooleanText)
def _booleans(form: BooleanText, raw: Any, target: Any) -> Any:
    """Equal to the true text, when every value is the true or the false text."""
    if target != pa.bool_():
        return None
    true = pc.equal(raw, pa.scalar(form.true, pa.binary()))
    false = pc.equal(raw, pa.scalar(form.false, pa.binary()))
    if pc.all(pc.or_(true, false)).as_py() is False:
        return None
    return true


@kernel(Utf8Text)
def _utf8(form: Utf8Text, raw: Any, target: Any) -> Any:
    """An Arrow cast (which refuses invalid UTF-8, as ``bytes.decode`` does)."""
    if target != pa.string():
        return None
    return raw.cast(pa.string())


@kernel(DecimalText)
def _decimals(form: DecimalText, raw: Any, target: Any) -> Any:
    """An Arrow cast, after checking that every value is printed at the form's scale:
    ``-?[0-9]+`` and, for a positive scale, ``.`` and ``scale`` digits, with at most
    ``precision - scale`` digits (or a lone ``0``) before the point (Arrow would read
    ``.5``, ``+1.50`` or ``1e2``, which the scalar converter refuses, and wraps 39 digits
    around)."""
    scale = form.scale
    if not (pa.types.is_decimal128(target) and target.scale == scale
            and target.precision == form.precision):
        return None
    offs, buf, values, present = _layout(raw)
    signs = _signs(values)
    if signs is None:
        return None
    minus, dots = signs
    starts, ends = offs[:-1], offs[1:]
    if raw.null_count:
        starts, ends = starts[present], ends[present]
    if len(starts) == 0:
        return pc.cast(raw, target)
    lengths = ends - starts
    point = scale + 1 if scale else 0  # the point and the scale's digits
    if int(lengths.min()) < 1:
        return None
    negative: Any = 0
    if minus:
        negative = buf[starts] == _MINUS
        if minus != int(np.count_nonzero(negative)):
            return None  # a minus sign elsewhere than first
        whole = lengths - negative - point
        shortest, longest = int(whole.min()), int(whole.max())
    else:
        shortest, longest = int(lengths.min()) - point, int(lengths.max()) - point
    # a digit at least before the point; no more digits than the precision allows, but
    # for a lone 0 (Arrow wraps a value of 39 digits around silently)
    if shortest < 1:
        return None
    if longest > form.precision - scale:
        whole = lengths - negative - point
        over = whole > form.precision - scale
        if not (bool(np.all(whole[over] == 1))
                and bool(np.all(buf[(starts + negative)[over]] == _ZERO))):
            return None
    if scale:
        if dots != len(starts) or not bool(np.all(buf[ends - point] == _DOT)):
            return None
    elif dots:
        return None
    return pc.cast(raw, target)


@kernel(UtcZonedText)
def _zoned(form: UtcZonedText, raw: Any, target: Any) -> Any:
    """The text rewritten in place: in one numpy copy when the values are all of one
    length, with no null and the form's fraction width (or width 0), else by Arrow string
    functions."""
    if target != pa.string():
        return None
    out = _zoned_fixed(raw, form.width)
    return _zoned_sliced(raw, form.width) if out is None else out


def _zoned_fixed(raw: Any, width: int) -> Any:
    """``YYYY-MM-DD HH:MM:SS[.f]+00`` of one length: ``" "`` becomes ``"T"``, ``"+00"``
    becomes ``"Z"`` (``None``: not that case)."""
    count = len(raw)
    if count == 0 or raw.null_count:
        return None
    offs, _, values, _ = _layout(raw)
    size = int(offs[1] - offs[0])
    fraction = size - len("YYYY-MM-DD HH:MM:SS.+00")
    if (size < 22 or fraction == 0 or width not in (0, fraction)
            or len(values) != size * count):
        return None
    if not bool(np.all(np.diff(offs) == size)):
        return None
    rows = values.reshape(count, size)
    tail = rows[:, size - 3:]
    if not (bool(np.all(rows[:, 4] == ord("-"))) and bool(np.all(rows[:, 10] == ord(" ")))
            and bool(np.all(tail[:, 0] == ord("+"))) and bool(np.all(tail[:, 1:] == ord("0")))
            and (fraction < 0 or bool(np.all(rows[:, 19] == _DOT)))
            and int(values.max()) < 0x80):
        return None
    out = np.empty((count, size - 2), np.uint8)
    out[:, :size - 3] = rows[:, :size - 3]
    out[:, 10] = ord("T")
    out[:, size - 3] = ord("Z")
    starts = np.arange(count + 1, dtype=np.int32) * (size - 2)
    return pa.Array.from_buffers(pa.string(), count, [None, pa.py_buffer(starts),
                                                      pa.py_buffer(out)])


def _zoned_sliced(raw: Any, width: int) -> Any:
    """Any lengths, by Arrow string functions (``None``: a value not in UTC, shorter than
    ``YYYY-MM-DD HH:MM:SS+00``, or not ASCII)."""
    offs, _, values, present = _layout(raw)
    lengths = np.diff(offs)[present] if raw.null_count else np.diff(offs)
    if (len(lengths) and int(lengths.min()) < len("YYYY-MM-DD HH:MM:SS+00")) or (
            len(values) and int(values.max()) >= 0x80):
        return None
    text = raw.cast(pa.string())
    utc = pc.and_(pc.ends_with(text, "+00"), pc.equal(pc.utf8_slice_codeunits(text, 4, 5), "-"))
    if pc.all(utc).as_py() is False:
        return None
    fraction = pc.utf8_slice_codeunits(text, 20, -3)  # "YYYY-MM-DD HH:MM:SS." is 20 long
    if width:
        fraction = pc.utf8_slice_codeunits(pc.utf8_rpad(fraction, width, "0"), 0, width)
        dot = "."
    else:
        dot = pc.if_else(pc.equal(pc.utf8_length(fraction), 0), "", ".")
    return pc.binary_join_element_wise(pc.utf8_slice_codeunits(text, 0, 10), "T",
                                       pc.utf8_slice_codeunits(text, 11, 19), dot, fraction,
                                       "Z", "")
