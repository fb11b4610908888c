"""The Avro binary encoding of a record, by writers compiled once per class from its shape.

The contract uses few Avro types (string, long, boolean, bytes, enum, record, array, and
["null", X] unions), so a writer per field, composed per class, appends each value's
encoding to a bytearray without building the intermediate dicts a generic library needs:
about three times as fast as fastavro's writer here, and byte for byte the same (the tests
compare the two on every sample and on generated records). Reading stays with fastavro,
which also resolves older writer schemas.

An event is the `Event` envelope: the header fields, the body union's member index, then
the kind's own fields, exactly what a record-of-union encodes to.
"""

from __future__ import annotations

import functools
import operator
from typing import Any, Callable

from schemas.events import EVENT_TYPES, Event
from schemas.shape import (
    Array, EnumType, FieldShape, Nullable, RecordType, Scalar, Shape, Timestamp, body_fields, fields_of, header_fields,
)

Write = Callable[[Any, bytearray], None]
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


def varint(n: int) -> bytes:
    """The zig-zag varint of a long: how Avro writes longs, lengths, counts and indexes."""
    out = bytearray()
    write_long(n, out)
    return bytes(out)


def write_long(n: int, out: bytearray) -> None:
    if not LONG_MIN <= n <= LONG_MAX:
        raise OverflowError(f"{n} does not fit a 64-bit long")
    n = (n << 1) ^ (n >> 63)
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


_SHORT_LENGTHS = [varint(n) for n in range(64)]  # one byte each: most strings are shorter than 64 bytes


def write_string(value: str, out: bytearray) -> None:
    write_bytes(value.encode(), out)


def write_bytes(value: bytes, out: bytearray) -> None:
    if len(value) < 64:
        out += _SHORT_LENGTHS[len(value)]
    else:
        write_long(len(value), out)
    out += value


def write_boolean(value: bool, out: bytearray) -> None:
    out.append(1 if value else 0)


@functools.cache
def record_writer(record_type: type) -> Write:
    """The writer of a top-level record: an event's envelope, or an output record."""
    if not issubclass(record_type, Event):
        return _fields_writer(fields_of(record_type))
    header, body = _fields_writer(header_fields()), _fields_writer(body_fields(record_type))
    member = varint(list(EVENT_TYPES.values()).index(record_type))

    def write_event(event: Event, out: bytearray) -> None:
        header(event, out)
        out += member
        body(event, out)

    return write_event


def _fields_writer(fields: tuple[FieldShape, ...]) -> Write:
    steps = [(operator.attrgetter(f.name), _writer(f.shape)) for f in fields]

    def write_fields(record: Any, out: bytearray) -> None:
        for get, write in steps:
            write(get(record), out)

    return write_fields


def _writer(shape: Shape) -> Write:
    match shape:
        case Scalar(avro="string"):
            return write_string
        case Scalar(avro="long") | Timestamp():
            return write_long
        case Scalar(avro="boolean"):
            return write_boolean
        case Scalar(avro="bytes"):
            return write_bytes
        case EnumType(cls=cls):
            return _enum_writer(cls)
        case RecordType(cls=cls):
            return _fields_writer(fields_of(cls))
        case Nullable(inner=inner):
            return _nullable_writer(_writer(inner))
        case Array(item=item):
            return _array_writer(_writer(item))
    raise TypeError(f"no binary writer for {shape}")


def _enum_writer(cls: type) -> Write:
    indexes = {member: varint(i) for i, member in enumerate(cls)}

    def write_enum(value: Any, out: bytearray) -> None:
        out += indexes[value]

    return write_enum


def _nullable_writer(write_value: Write) -> Write:
    # ["null", X]: member 0 is null, member 1 (zig-zag 2) is the value.
    def write_nullable(value: Any, out: bytearray) -> None:
        if value is None:
            out.append(0)
        else:
            out.append(2)
            write_value(value, out)

    return write_nullable


def _array_writer(write_item: Write) -> Write:
    # One block holding every item, then the empty block that ends the array.
    def write_array(values: Any, out: bytearray) -> None:
        if values:
            write_long(len(values), out)
            for value in values:
                write_item(value, out)
        out.append(0)

    return write_array
