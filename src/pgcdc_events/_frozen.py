"""Building instances of the library's frozen ``attrs`` classes on hot paths.

A frozen, slotted ``attrs`` class sets each field in its ``__init__`` through
``object.__setattr__`` (looked up by name), and its ``__setattr__`` refuses any other
assignment, so a field can be set from Python only through a call of a C wrapper (about
650 instructions under CPython 3.11, counted by callgrind). The decoder builds several
such objects per change event (tuple data, messages, structs, records). :func:`builder`
gives, for such a class, a subclass that adds no field and no behaviour but plain
attribute assignment: an instance of it takes its fields by ``obj.field = value`` (the
interpreter's cheapest store), then ``obj.__class__ = cls`` makes it the very object
``cls(*values)`` builds (same class, same layout, equal and hashing alike, frozen): a
struct of two fields costs about 1.4k instructions built so, 2.4k through the wrappers
and 4k through ``__init__``; a record of eight, 1.8k, 6.9k and 9.1k. :func:`factory`
gives a function that builds it so. Both apply only where ``__init__`` does nothing
else: a class with validators, converters, ``__attrs_post_init__`` or fields outside
``__init__`` gets its own constructor back, unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs

__all__ = ["builder", "builder_of", "factory", "slot_setters"]

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


def builder_of(cls: type[Any]) -> Callable[[], Any] | None:
    """The builder of ``cls`` (see the module's description): a subclass with no slot of
    its own whose ``__setattr__``, ``__delattr__`` and ``__init__`` are ``object``'s, so
    that ``o = builder(); o.field = value...; o.__class__ = cls`` builds what
    ``cls(*values)`` builds. ``None`` where that would not be the same object (see
    :func:`slot_setters`)."""
    setters = slot_setters(cls)
    if setters is None or cls.__bases__ != (object,):
        return None
    built: type[Any] = type(f"{cls.__name__}Builder", (cls,), {
        "__slots__": (), "__module__": cls.__module__,
        "__qualname__": f"{cls.__qualname__}Builder", "__setattr__": object.__setattr__,
        "__delattr__": object.__delattr__, "__init__": object.__init__})
    # proved once, here: the object so built is the one the constructor builds
    values = tuple(object() for _ in setters)
    probe = built()
    for field, value in zip(attrs.fields(cls), values, strict=True):
        object.__setattr__(probe, field.name, value)
    probe.__class__ = cls
    if type(probe) is not cls or probe != cls(*values):
        return None
    return built


def builder(cls: type[Any], count: int) -> Callable[[], Any]:
    """:func:`builder_of` a class known to have ``count`` fields that allow it;
    ``TypeError`` at import time when it does not (a class changed under its fast path)."""
    built = builder_of(cls)
    if built is None or len(attrs.fields(cls)) != count:
        raise TypeError(f"{cls.__qualname__} is no longer a slotted attrs class of {count} "
                        "fields set as given: its fast construction needs revisiting")
    return built


def factory(cls: type[_T]) -> Callable[..., _T]:
    """A function ``make(*values)`` that builds ``cls(*values)`` (every field, positionally,
    in field order) by its :func:`builder`; ``cls`` itself when that would not build the
    same object (see :func:`slot_setters`)."""
    plain: Callable[..., _T] = cls
    built = builder_of(cls)
    if built is None:
        return plain
    assert attrs.has(cls)
    names = tuple(field.name for field in attrs.fields(cls))
    # One function per arity, spelled out: a loop would cost more than the __init__ it
    # replaces. The source holds only argument numbers; the fields' names are put in the
    # function's code as the names its stores use (f0, f1... replaced), never parsed.
    args = ", ".join(f"a{i}" for i in range(len(names)))
    body = "".join(f"    o.f{i} = a{i}\n" for i in range(len(names)))
    namespace: dict[str, Any] = {"builder": built, "cls": cls}
    source = f"def make({args}):\n    o = builder()\n{body}    o.__class__ = cls\n    return o\n"
    exec(compile(source, f"<pgcdc factory {cls.__qualname__}>", "exec"), namespace)
    make: Callable[..., _T] = namespace["make"]
    code = make.__code__
    make.__code__ = code.replace(co_names=tuple(
        names[int(n[1:])] if n[:1] == "f" and n[1:].isdigit() else n for n in code.co_names))
    return make
