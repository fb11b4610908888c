"""Validation of records against the contract, naming the field and the problem.

    validate(MessageReceived(..., recipients=(Recipient(address=7, ...),)))
    ValidationError: MessageReceived.recipients[0].address: expected str, got int 7

Frozen dataclasses do not check their annotations, so this runs on every record read from
JSON; and a value of the wrong type must never reach the wire: the compiled writers of
`schemas.binary` check each value's type as they write it, and `explain` then says which field
it was. A check compiled once per class first tells whether the
record is certainly valid; only when it says no does the field-by-field walk look for the culprit.
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import itertools
from typing import Any, Callable

from schemas.shape import (
    Array, EnumType, Nullable, RecordType, Scalar, Shape, Timestamp, fields_of, kind_of, values_getter,
)

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class ValidationError(ValueError):
    """A value that does not fit the contract; `path` names the field, `problem` says what is wrong."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def validate(record: Any) -> None:
    """Raise ValidationError for the first field of `record` that does not fit its type."""
    if isinstance(record, type) or not dataclasses.is_dataclass(record):
        raise ValidationError(type(record).__name__, f"not a record of the contract: {describe(record)}")
    accept = acceptor(type(record))
    if accept is None or not accept(record):
        check_record(type(record), record, kind_of(type(record)))


def explain(record: Any) -> None:
    """`validate` without the fast check: the walk, which also finds what only writing the record
    would (a string that is not Unicode text: a lone surrogate, say, from a JSON escape)."""
    check_record(type(record), record, kind_of(type(record)))


def check_record(cls: type, value: Any, path: str) -> None:
    if not isinstance(value, cls):
        raise ValidationError(path, f"expected {cls.__name__}, got {describe(value)}")
    for f in fields_of(cls):
        check(f.shape, getattr(value, f.name), f"{path}.{f.name}")


def check(shape: Shape, value: Any, path: str) -> None:
    """Raise ValidationError unless `value` fits `shape`."""
    match shape:
        case Nullable(inner=inner):
            if value is not None:
                check(inner, value, path)
        case Array(item=item):
            if not isinstance(value, tuple):
                raise ValidationError(path, f"expected tuple, got {describe(value)}")
            for i, element in enumerate(value):
                check(item, element, f"{path}[{i}]")
        case RecordType(cls=cls):
            check_record(cls, value, path)
        case EnumType(cls=cls):
            if not isinstance(value, cls):
                raise ValidationError(path, f"expected {cls.__name__}, got {describe(value)}")
        case Timestamp():
            check_long(value, path, "int (milliseconds since the epoch)")
        case Scalar(python=python) if python is int:
            check_long(value, path, "int")
        case Scalar(python=python):
            if type(value) is not python:
                raise ValidationError(path, f"expected {python.__name__}, got {describe(value)}")
            if python is str and not value.isascii():
                try:
                    value.encode()
                except UnicodeEncodeError as error:
                    raise ValidationError(path, f"not Unicode text: {error.reason} at {error.start}") from None


def check_long(value: Any, path: str, expected: str) -> None:
    if type(value) is not int:  # bool is an int subclass, and never a long here
        raise ValidationError(path, f"expected {expected}, got {describe(value)}")
    if not LONG_MIN <= value <= LONG_MAX:
        raise ValidationError(path, f"{value} does not fit a 64-bit long")


def describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


# ---- the fast path: compiled per class, True when the record is certainly valid -------

Accept = Callable[[Any], bool]


@functools.cache
def acceptor(cls: type) -> Accept | None:
    """A check of a whole record, True when it is certainly valid (False: let `validate` say why).

    It compares the row of the field types with every allowed row first, then checks what
    types alone do not settle (nested records, array items, the range of longs).
    """
    try:
        shapes = [f.shape for f in fields_of(cls)]
    except TypeError:  # not a contract dataclass: let the walk say so
        return None
    getter = values_getter(tuple(f.name for f in fields_of(cls)))
    type_rows = frozenset(itertools.product(*(_types(shape) for shape in shapes)))
    deep = [(i, accept) for i, shape in enumerate(shapes) if (accept := _deep(shape)) is not None]

    def accept_record(record: Any) -> bool:
        if type(record) is not cls:
            return False
        values = getter(record)
        if tuple(map(type, values)) not in type_rows:
            return False
        for i, accept in deep:
            if not accept(values[i]):
                return False
        return True

    return accept_record


def _types(shape: Shape) -> tuple[type, ...]:
    """The exact Python types a value of `shape` may have."""
    match shape:
        case Nullable(inner=inner):
            return (type(None), *_types(inner))
        case Array():
            return (tuple,)
        case RecordType(cls=cls) | EnumType(cls=cls):
            return (cls,)
        case Timestamp():
            return (int,)
        case Scalar(python=python):
            return (python,)
    raise TypeError(shape)


def _deep(shape: Shape) -> Accept | None:
    """What a value of `shape` needs checked beyond its type; None when its type settles it."""
    match shape:
        case Nullable(inner=inner):
            accept = _deep(inner)
            return None if accept is None else (lambda value: value is None or accept(value))
        case Array(item=item):
            item_types, accept = frozenset(_types(item)), _deep(item)
            if accept is None:
                return lambda values: all(type(v) in item_types for v in values)
            return lambda values: all(type(v) in item_types and accept(v) for v in values)
        case RecordType(cls=cls):
            return acceptor(cls)
        case Timestamp() | Scalar(python=builtins.int):
            return lambda value: LONG_MIN <= value <= LONG_MAX
    return None
