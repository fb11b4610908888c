"""The shape of the contract: how each dataclass field of `schemas.events` maps to an Avro type.

This is the one reading of the dataclasses' annotations and field metadata; the Avro
generator, the validator, the dataclass <-> datum conversion and the JSON Lines form all
walk the `FieldShape`s it returns, so they cannot disagree about a field.

Python -> Avro: `str` string, `int` long (or `timestamp-millis` long when the field's
metadata says so), `bool` boolean, `bytes` bytes, an `AvroEnum` enum, a dataclass record,
`X | None` the union ["null", X], `tuple[X, ...]` an array of X.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import types
import typing
from dataclasses import dataclass

from schemas.events import EVENT_TYPES, Alert, AvroEnum, DeadLetter, Event, RedeliveryCommand

NAMESPACE = "shadowtwin.v1"
TIMESTAMP_MILLIS = "timestamp-millis"

# The top-level schemas: one per topic. Events share one envelope; outputs are records.
OUTPUT_TYPES: dict[str, type] = {"Alert": Alert, "RedeliveryCommand": RedeliveryCommand, "DeadLetter": DeadLetter}
TOP_LEVEL_NAMES: tuple[str, ...] = ("Event", *OUTPUT_TYPES)

# What the field carries in its "default" when it has none.
NO_DEFAULT: typing.Any = dataclasses.MISSING


@dataclass(frozen=True)
class Scalar:
    """A primitive: the Python type and the Avro primitive it is written as."""

    python: type
    avro: str


@dataclass(frozen=True)
class Timestamp:
    """Milliseconds since the epoch (an int in Python), `timestamp-millis` on the wire."""


@dataclass(frozen=True)
class EnumType:
    cls: type[AvroEnum]

    @property
    def symbols(self) -> tuple[str, ...]:
        return tuple(member.value for member in self.cls)


@dataclass(frozen=True)
class RecordType:
    cls: type


@dataclass(frozen=True)
class Nullable:
    inner: "Shape"


@dataclass(frozen=True)
class Array:
    item: "Shape"


Shape = Scalar | Timestamp | EnumType | RecordType | Nullable | Array

SCALARS: dict[type, Scalar] = {
    str: Scalar(str, "string"),
    int: Scalar(int, "long"),
    bool: Scalar(bool, "boolean"),
    bytes: Scalar(bytes, "bytes"),
}


@dataclass(frozen=True)
class FieldShape:
    """One dataclass field as the contract sees it."""

    name: str
    shape: Shape
    doc: str
    default: typing.Any = NO_DEFAULT

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


@functools.cache
def fields_of(cls: type) -> tuple[FieldShape, ...]:
    """Every field of the dataclass `cls`, in declaration order (inherited ones first)."""
    hints = typing.get_type_hints(cls)
    shapes = []
    for f in dataclasses.fields(cls):
        where = f"{cls.__name__}.{f.name}"
        if "doc" not in f.metadata:
            raise TypeError(f"{where}: every contract field needs a doc (use schemas.events.doc)")
        shape = shape_of(hints[f.name], timestamp=f.metadata.get("logicalType") == TIMESTAMP_MILLIS, where=where)
        default = f.default if f.default is not dataclasses.MISSING else NO_DEFAULT
        if f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        shapes.append(FieldShape(f.name, shape, f.metadata["doc"], default))
    return tuple(shapes)


def header_fields() -> tuple[FieldShape, ...]:
    """The fields every event carries: the envelope's header."""
    return fields_of(Event)


def body_fields(event_type: type[Event]) -> tuple[FieldShape, ...]:
    """The fields of one event kind beyond the header: its record in the envelope's body union."""
    return fields_of(event_type)[len(header_fields()):]


def event_kinds() -> tuple[str, ...]:
    """The event kinds in body-union order (the order of `EVENT_TYPES`, i.e. of declaration)."""
    return tuple(EVENT_TYPES)


def shape_of(hint: typing.Any, *, timestamp: bool = False, where: str = "") -> Shape:
    """The Shape of one annotation; `timestamp` marks an int (or int | None) as timestamp-millis."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(options) != 1 or len(typing.get_args(hint)) != 2:
            raise TypeError(f"{where}: only `X | None` unions are supported, got {hint}")
        return Nullable(shape_of(options[0], timestamp=timestamp, where=where))
    if origin is tuple:
        item, ellipsis = typing.get_args(hint)
        if ellipsis is not Ellipsis:
            raise TypeError(f"{where}: only tuple[X, ...] is supported, got {hint}")
        return Array(shape_of(item, where=f"{where}[]"))
    if timestamp:
        if hint is not int:
            raise TypeError(f"{where}: a timestamp-millis field must be an int, got {hint}")
        return Timestamp()
    if isinstance(hint, type) and issubclass(hint, AvroEnum):
        return EnumType(hint)
    if dataclasses.is_dataclass(hint):
        return RecordType(hint)  # type: ignore[arg-type]
    if hint in SCALARS:
        return SCALARS[hint]
    raise TypeError(f"{where}: no Avro mapping for {hint}")


def top_level_name(record_type: type) -> str:
    """Which top-level schema a record of this class is written with."""
    if issubclass(record_type, Event):
        return "Event"
    for name, output_type in OUTPUT_TYPES.items():
        if record_type is output_type:
            return name
    raise TypeError(f"{record_type.__name__} is not a top-level record of the contract")


def record_types(name: str) -> dict[str, type]:
    """The classes a top-level schema carries, by kind name (the event kinds for `Event`)."""
    if name == "Event":
        return dict(EVENT_TYPES)
    return {name: OUTPUT_TYPES[name]}


def kind_of(record_type: type) -> str:
    """The name a record's kind goes by: the event kind, else the output's class name."""
    return record_type.kind if issubclass(record_type, Event) else record_type.__name__


def values_getter(names: tuple[str, ...]) -> typing.Callable[[typing.Any], tuple[typing.Any, ...]]:
    """A function returning the named attributes of an object as a tuple, whatever their number."""
    if not names:
        return lambda record: ()
    if len(names) == 1:
        get = operator.attrgetter(names[0])
        return lambda record: (get(record),)
    return operator.attrgetter(*names)
