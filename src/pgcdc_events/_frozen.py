"""Building instances of the library's frozen ``attrs`` classes on hot paths.

A frozen, slotted ``attrs`` class sets each field in its ``__init__`` through
``object.__setattr__`` (looked up by name), which makes its construction about twice
as slow as that of a plain slotted class. The decoder builds several such objects per
change event (tuple data, messages, structs, records), so :func:`factory` gives a
function that builds the very same object (same class, same field values, equal and
hashing alike) by setting its slots directly. It applies only where ``__init__`` does
nothing else: a class with validators, converters, ``__attrs_post_init__`` or fields
outside ``__init__`` gets its own constructor back, unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs

__all__ = ["factory", "setters_of", "slot_setters"]

_T = TypeVar("_T")


def slot_setters(cls: type[Any]) -> tuple[Callable[[Any, Any], None], ...] | None:
    """The setters of ``cls``'s fields, in field order (``setter(obj, value)``): with
    ``object.__new__(cls)`` they build what ``cls(*values)`` builds. ``None`` when that
    would not be the same object (``cls`` is not a slotted ``attrs`` class whose
    ``__init__`` only sets every field as given)."""
    if not attrs.has(cls) or "__slots__" not in cls.__dict__ or \
            hasattr(cls, "__attrs_post_init__") or hasattr(cls, "__attrs_pre_init__"):
        return None
    setters: list[Callable[[Any, Any], None]] = []
    for field in attrs.fields(cls):
        slot = cls.__dict__.get(field.name)
        if not field.init or field.validator is not None or field.converter is not None \
                or field.alias != field.name or slot is None or not hasattr(slot, "__set__"):
            return None
        setters.append(slot.__set__)
    return tuple(setters)


def setters_of(cls: type[Any], count: int) -> tuple[Callable[[Any, Any], None], ...]:
    """:func:`slot_setters` of a class known to have ``count`` fields that allow them;
    ``TypeError`` at import time when it does not (a class changed under its fast path)."""
    setters = slot_setters(cls)
    if setters is None or len(setters) != count:
        raise TypeError(f"{cls.__qualname__} is no longer a slotted attrs class of {count} "
                        "fields set as given: its fast construction needs revisiting")
    return setters


def factory(cls: type[_T]) -> Callable[..., _T]:
    """A function ``make(*values)`` that builds ``cls(*values)`` (every field, positionally,
    in field order) without going through ``__init__``; ``cls`` itself when that would not
    build the same object (see :func:`slot_setters`)."""
    plain: Callable[..., _T] = cls
    setters = slot_setters(cls)
    if setters is None:
        return plain
    # One function per arity, spelled out: a loop over the setters would cost more than
    # the __init__ it replaces. The source holds only argument numbers.
    args = ", ".join(f"a{i}" for i in range(len(setters)))
    body = "".join(f"    s{i}(o, a{i})\n" for i in range(len(setters)))
    namespace: dict[str, Any] = {f"s{i}": s for i, s in enumerate(setters)}
    namespace.update(new=object.__new__, cls=cls)
    source = f"def make({args}):\n    o = new(cls)\n{body}    return o\n"
    exec(compile(source, f"<pgcdc factory {cls.__qualname__}>", "exec"), namespace)
    make: Callable[..., _T] = namespace["make"]
    return make
