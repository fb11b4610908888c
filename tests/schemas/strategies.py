"""Hypothesis strategies for any record of the contract, built from the same shapes as the code.

`records(cls)` draws instances of one class with any values its types allow (any text, any
64-bit long, every enum member, null or not, empty or not); `events()` any event kind.
"""

from __future__ import annotations

from hypothesis import strategies as st

from schemas.events import EVENT_TYPES
from schemas.shape import OUTPUT_TYPES, Array, EnumType, Nullable, RecordType, Scalar, Shape, Timestamp, fields_of

LONGS = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def values(shape: Shape) -> st.SearchStrategy:
    match shape:
        case Nullable(inner=inner):
            return st.none() | values(inner)
        case Array(item=item):
            return st.lists(values(item), max_size=3).map(tuple)
        case RecordType(cls=cls):
            return records(cls)
        case EnumType(cls=cls):
            return st.sampled_from(list(cls))
        case Timestamp():
            return LONGS
        case Scalar(python=python):
            return {str: st.text(max_size=30), int: LONGS, bool: st.booleans(), bytes: st.binary(max_size=30)}[python]
    raise TypeError(shape)


def records(cls: type) -> st.SearchStrategy:
    return st.builds(cls, **{f.name: values(f.shape) for f in fields_of(cls)})


def events() -> st.SearchStrategy:
    return st.sampled_from(list(EVENT_TYPES.values())).flatmap(records)


def any_record() -> st.SearchStrategy:
    return events() | st.sampled_from(list(OUTPUT_TYPES.values())).flatmap(records)
