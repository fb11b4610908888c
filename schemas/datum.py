"""Records <-> Avro datums: the dicts fastavro writes and reads, converted by functions compiled once per class.

An event becomes the `Event` envelope: its header fields, and `body` as fastavro's tuple
notation `(record full name, {the kind's own fields})`. Outputs become plain dicts. Enums
are str subclasses and are written as they are; tuples are written as arrays. Reading
turns lists back into tuples, symbols into enum members and union members into classes.
"""

from __future__ import annotations

import datetime
import functools
from typing import Any, Callable

from schemas.events import EVENT_TYPES, Event
from schemas.shape import (
    NAMESPACE, Array, EnumType, FieldShape, Nullable, RecordType, Shape, Timestamp, body_fields, fields_of,
    header_fields, record_types, values_getter,
)

Convert = Callable[[Any], Any]
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MILLISECOND = datetime.timedelta(milliseconds=1)


def to_datum(record: Any) -> dict[str, Any]:
    """The datum of a top-level record (an event, or an output)."""
    return datum_writer(type(record))(record)


def from_datum(name: str, datum: dict[str, Any]) -> Any:
    """The record a datum read with the current schema `name` holds."""
    return _datum_reader(name)(datum)


def millis(value: int | datetime.datetime) -> int:
    """Milliseconds since the epoch; fastavro hands back datetimes where a schema keeps its logical types."""
    if isinstance(value, datetime.datetime):
        return (value - _EPOCH) // _MILLISECOND
    return value


# ---- writing --------------------------------------------------------------------------

@functools.cache
def datum_writer(record_type: type) -> Convert:
    """The function that turns a record of this class into its datum."""
    if not issubclass(record_type, Event):
        return _record_writer(fields_of(record_type))
    header, body = _record_writer(header_fields()), _record_writer(body_fields(record_type))
    member = f"{NAMESPACE}.{record_type.kind}"

    def write_event(event: Event) -> dict[str, Any]:
        datum = header(event)
        datum["body"] = (member, body(event))
        return datum

    return write_event


def _record_writer(fields: tuple[FieldShape, ...]) -> Convert:
    names = tuple(f.name for f in fields)
    values = values_getter(names)
    conversions = [(f.name, convert) for f in fields if (convert := _writer(f.shape)) is not None]

    def write_record(record: Any) -> dict[str, Any]:
        datum = dict(zip(names, values(record)))
        for name, convert in conversions:
            datum[name] = convert(datum[name])
        return datum

    return write_record


def _writer(shape: Shape) -> Convert | None:
    """How to write one value of `shape`; None when fastavro takes the Python value as it is."""
    match shape:
        case RecordType(cls=cls):
            return _record_writer(fields_of(cls))
        case Nullable(inner=RecordType(cls=cls)):
            # Tuple notation names the union member, so fastavro need not try each member in turn.
            member, convert = f"{NAMESPACE}.{cls.__name__}", _record_writer(fields_of(cls))
            return lambda value: None if value is None else (member, convert(value))
        case Array(item=item):
            convert = _writer(item)
            return None if convert is None else (lambda values: [convert(v) for v in values])
    return None


# ---- reading --------------------------------------------------------------------------

@functools.cache
def _datum_reader(name: str) -> Convert:
    if name != "Event":
        (record_type,) = record_types(name).values()
        return _record_reader(record_type, fields_of(record_type))
    header = _conversions(header_fields())
    bodies = {f"{NAMESPACE}.{kind}": (cls, _conversions(body_fields(cls))) for kind, cls in EVENT_TYPES.items()}

    def read_event(datum: dict[str, Any]) -> Event:
        member, fields = datum.pop("body")
        cls, conversions = bodies[member]
        _convert_in_place(datum, header)
        _convert_in_place(fields, conversions)
        return cls(**datum, **fields)

    return read_event


def _record_reader(cls: type, fields: tuple[FieldShape, ...]) -> Convert:
    conversions = _conversions(fields)

    def read_record(datum: dict[str, Any]) -> Any:
        return cls(**_convert_in_place(datum, conversions))

    return read_record


def _conversions(fields: tuple[FieldShape, ...]) -> list[tuple[str, Convert]]:
    return [(f.name, convert) for f in fields if (convert := _reader(f.shape)) is not None]


def _convert_in_place(datum: dict[str, Any], conversions: list[tuple[str, Convert]]) -> dict[str, Any]:
    for name, convert in conversions:
        datum[name] = convert(datum[name])
    return datum


def _reader(shape: Shape) -> Convert | None:
    """How to turn one read value of `shape` into its Python value; None when it already is one."""
    match shape:
        case Timestamp():
            return millis
        case EnumType(cls=cls):
            return cls
        case RecordType(cls=cls):
            return _record_reader(cls, fields_of(cls))
        case Nullable(inner=inner):
            convert = _reader(inner)
            return None if convert is None else (lambda value: None if value is None else convert(value))
        case Array(item=item):
            convert = _reader(item)
            return tuple if convert is None else (lambda values: tuple(convert(v) for v in values))
    return None
