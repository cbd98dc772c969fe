"""Kafka Connect schemas and struct values, small and immutable.

A :class:`Schema` is what Kafka Connect's ``Schema`` is: a type (``int32``,
``string``, ``struct``...), optionality, an optional semantic ``name`` and
``version``, ``doc``, ``parameters`` (ordered, as Connect keeps them), a
``default``, and the children of ``struct``/``array``/``map``. Values are plain
Python objects: ``int``, ``float``, ``bool``, ``str``, ``bytes``, ``Decimal``
for Connect's ``Decimal`` logical type, ``list``, ``dict`` (maps) and
:class:`Struct`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final

import attrs

from pgcdc_events._frozen import builder, factory

__all__ = [
    "NO_DEFAULT",
    "PRIMITIVE_TYPES",
    "STRUCT_BUILDER",
    "Field",
    "Schema",
    "Struct",
    "array_schema",
    "make_struct",
    "map_schema",
    "struct_schema",
]

#: Connect's primitive schema types.
PRIMITIVE_TYPES: Final = frozenset(
    {"int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string", "bytes"}
)
_TYPES: Final = PRIMITIVE_TYPES | {"array", "map", "struct"}
#: JsonConverter spells Connect's FLOAT32/FLOAT64 as "float"/"double".
_JSON_TYPE_NAMES: Final = {"float32": "float", "float64": "double"}
_TYPE_FROM_JSON: Final = {v: k for k, v in _JSON_TYPE_NAMES.items()}


class _NoDefault:
    """Sentinel: the schema has no default (distinct from a default of ``None``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __reduce__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Final = _NoDefault()


def _check_type(instance: Schema, attribute: attrs.Attribute[str], value: str) -> None:
    if value not in _TYPES:
        raise ValueError(f"unknown Connect schema type {value!r}")


def _params(value: Mapping[str, str] | Iterable[tuple[str, str]] | None) -> tuple[
    tuple[str, str], ...
] | None:
    if value is None:
        return None
    items = value.items() if isinstance(value, Mapping) else value
    return tuple((str(k), str(v)) for k, v in items)


@attrs.frozen(repr=False)
class Schema:
    """A Kafka Connect schema. ``parameters`` keeps insertion order, as Connect's builder does."""

    type: str = attrs.field(validator=_check_type)
    optional: bool = False
    name: str | None = None
    version: int | None = None
    doc: str | None = None
    parameters: tuple[tuple[str, str], ...] | None = attrs.field(default=None, converter=_params)
    default: Any = NO_DEFAULT
    fields: tuple[Field, ...] | None = None
    items: Schema | None = None
    keys: Schema | None = None
    values: Schema | None = None
    _index: dict[str, int] | None = attrs.field(
        default=None, init=False, eq=False, hash=False, alias="_index"
    )

    def __attrs_post_init__(self) -> None:
        if self.type == "struct":
            index = {f.name: i for i, f in enumerate(self.fields or ())}
            object.__setattr__(self, "_index", index)

    @property
    def params(self) -> dict[str, str]:
        """The parameters as a dict (empty when there are none)."""
        return dict(self.parameters or ())

    def field(self, name: str) -> Field:
        """The struct field called ``name``; ``KeyError`` when absent."""
        if self._index is None:
            raise TypeError(f"{self.type} schema has no fields")
        assert self.fields is not None
        return self.fields[self._index[name]]

    def field_index(self, name: str) -> int:
        """Position of field ``name`` in a struct schema."""
        if self._index is None:
            raise TypeError(f"{self.type} schema has no fields")
        return self._index[name]

    @property
    def has_default(self) -> bool:
        """Whether a default is set (``None`` counts as one only if set explicitly)."""
        return self.default is not NO_DEFAULT

    def with_(self, **changes: Any) -> Schema:
        """A copy with ``changes`` applied (``attrs.evolve``)."""
        return attrs.evolve(self, **changes)

    def to_json(self, *, decimal_format: str = "BASE64") -> dict[str, Any]:
        """The schema as Kafka's JsonConverter writes it (``schemas.enable=true``).

        Key order follows JsonConverter: ``type``, children, ``optional``, ``name``,
        ``version``, ``doc``, ``parameters``, ``default``; struct members add ``field``.
        """
        out: dict[str, Any] = {"type": _JSON_TYPE_NAMES.get(self.type, self.type)}
        if self.type == "struct":
            members = []
            for f in self.fields or ():
                member = f.schema.to_json(decimal_format=decimal_format)
                member["field"] = f.name
                members.append(member)
            out["fields"] = members
        elif self.type == "array":
            assert self.items is not None
            out["items"] = self.items.to_json(decimal_format=decimal_format)
        elif self.type == "map":
            assert self.keys is not None and self.values is not None
            out["keys"] = self.keys.to_json(decimal_format=decimal_format)
            out["values"] = self.values.to_json(decimal_format=decimal_format)
        out["optional"] = self.optional
        if self.name is not None:
            out["name"] = self.name
        if self.version is not None:
            out["version"] = self.version
        if self.doc is not None:
            out["doc"] = self.doc
        if self.parameters is not None:
            out["parameters"] = dict(self.parameters)
        if self.default is not NO_DEFAULT and self.default is not None:
            from pgcdc_events.types.jsonvalue import value_to_json  # noqa: PLC0415 - cycle

            out["default"] = value_to_json(self, self.default, decimal_format=decimal_format)
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Schema:
        """Read a schema in JsonConverter's form (the inverse of :meth:`to_json`)."""
        kind = _TYPE_FROM_JSON.get(obj["type"], obj["type"])
        fields = items = keys = values = None
        if kind == "struct":
            fields = tuple(
                Field(member["field"], i, cls.from_json(member))
                for i, member in enumerate(obj.get("fields", ()))
            )
        elif kind == "array":
            items = cls.from_json(obj["items"])
        elif kind == "map":
            keys, values = cls.from_json(obj["keys"]), cls.from_json(obj["values"])
        schema = cls(
            kind, bool(obj.get("optional", False)), obj.get("name"), obj.get("version"),
            obj.get("doc"), obj.get("parameters"), NO_DEFAULT, fields, items, keys, values,
        )
        if "default" in obj:
            from pgcdc_events.types.jsonvalue import value_from_json  # noqa: PLC0415 - cycle

            schema = schema.with_(default=value_from_json(schema, obj["default"]))
        return schema

    def __repr__(self) -> str:
        parts = [self.type]
        if self.name:
            parts.append(self.name)
        if self.optional:
            parts.append("optional")
        if self.parameters:
            parts.append(f"params={dict(self.parameters)}")
        if self.fields is not None:
            parts.append("{" + ", ".join(f"{f.name}: {f.schema!r}" for f in self.fields) + "}")
        if self.items is not None:
            parts.append(f"items={self.items!r}")
        if self.keys is not None:
            parts.append(f"map={self.keys!r}->{self.values!r}")
        if self.default is not NO_DEFAULT:
            parts.append(f"default={self.default!r}")
        return f"Schema({' '.join(parts)})"


@attrs.frozen
class Field:
    """A named member of a struct schema."""

    name: str
    index: int
    schema: Schema


@attrs.frozen(repr=False)
class Struct:
    """A struct value: its schema and one value per field, in field order."""

    schema: Schema
    values: tuple[Any, ...]

    def __getitem__(self, name: str) -> Any:
        return self.values[self.schema.field_index(name)]

    def get(self, name: str, default: Any = None) -> Any:
        """The value of field ``name``, or ``default`` when the schema has no such field."""
        try:
            return self[name]
        except KeyError:
            return default

    def get_or_default(self, name: str) -> Any:
        """Kafka Connect's ``Struct.get``: the value of field ``name``, or the field schema's
        default when the value is null. ``struct[name]`` is the value as held
        (``getWithoutDefault``). JsonConverter's ``replace.null.with.default=true`` (its
        default) writes this one: ``source.snapshot`` null is written ``"false"``, a NULL in
        a column with a default is written as the default."""
        value = self[name]
        if value is None:
            schema = self.schema.field(name).schema
            if schema.has_default and schema.default is not None:
                return schema.default
        return value

    def __iter__(self) -> Iterator[str]:
        return (f.name for f in self.schema.fields or ())

    def as_dict(self) -> dict[str, Any]:
        """``{field: value}``, nested structs converted too."""
        return {
            f.name: _plain(v) for f, v in zip(self.schema.fields or (), self.values, strict=True)
        }

    def __repr__(self) -> str:
        return f"Struct({self.as_dict()!r})"


#: ``make_struct(schema, values)`` is ``Struct(schema, values)``, built without going
#: through ``__init__`` (see :mod:`pgcdc_events._frozen`): for code that builds many.
make_struct: Final[Callable[[Schema, tuple[Any, ...]], Struct]] = factory(Struct)
#: The builder of :class:`Struct` (see :mod:`pgcdc_events._frozen`), for code that builds
#: structs inline, as :data:`make_struct` builds them: ``s = STRUCT_BUILDER();
#: s.schema = schema; s.values = values; s.__class__ = Struct``.
STRUCT_BUILDER: Final[Callable[[], Any]] = builder(Struct, 2)


def _plain(value: Any) -> Any:
    if isinstance(value, Struct):
        return value.as_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def struct_schema(
    name: str | None,
    members: Iterable[tuple[str, Schema]],
    *,
    optional: bool = False,
    version: int | None = None,
    doc: str | None = None,
) -> Schema:
    """A struct schema with fields in the given order."""
    fields = tuple(Field(n, i, s) for i, (n, s) in enumerate(members))
    return Schema("struct", optional, name, version, doc, fields=fields)


def array_schema(items: Schema, *, optional: bool = False, name: str | None = None) -> Schema:
    """An array schema of ``items``."""
    return Schema("array", optional, name, items=items)


def map_schema(keys: Schema, values: Schema, *, optional: bool = False) -> Schema:
    """A map schema from ``keys`` to ``values``."""
    return Schema("map", optional, keys=keys, values=values)
