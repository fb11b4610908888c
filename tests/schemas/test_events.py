"""The contract's record classes: frozen dataclasses whose constructor stores through the slots, with
the signature, defaults and refusals a dataclass's own would have."""

import dataclasses
import inspect

import pytest

from schemas import events as ev
from schemas.shape import OUTPUT_TYPES

RECORDS = [ev.MessageRef, ev.Recipient, ev.AlertMessage, *ev.EVENT_TYPES.values(), *OUTPUT_TYPES.values()]


@pytest.mark.parametrize("cls", RECORDS, ids=lambda cls: cls.__name__)
def test_the_constructor_takes_each_field_as_the_dataclass_declares_it(cls):
    parameters = list(inspect.signature(cls).parameters.values())
    fields = dataclasses.fields(cls)
    assert [p.name for p in parameters] == [f.name for f in fields]
    for p, f in zip(parameters, fields):
        assert p.kind is (inspect.Parameter.KEYWORD_ONLY if f.kw_only else inspect.Parameter.POSITIONAL_OR_KEYWORD)
        assert p.default is (inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default)
    # stored through the slots, not by name through object.__setattr__ as a frozen dataclass's own __init__ does
    assert "__setattr__" not in cls.__init__.__code__.co_names


def test_a_record_is_built_frozen_and_compared_by_its_fields():
    ref = ev.MessageRef("<a@contoso.com>", "ex01.1")
    assert (ref.message_id, ref.internal_id, ref.fork_id) == ("<a@contoso.com>", "ex01.1", None)
    event = ev.SentToNextHop(event_id="e1", event_time_ms=5, node="ex01", primary_server="ex01", message=ref,
                             next_hop="mbx01", recipients=("a@contoso.com",))
    assert event.outside_boundary is False and event == dataclasses.replace(event)
    assert hash(event) == hash(dataclasses.replace(event))
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.next_hop = "mbx02"  # type: ignore[misc]


def test_a_missing_or_unknown_field_is_refused_as_by_a_dataclass():
    with pytest.raises(TypeError, match="missing 2 required positional arguments: 'message_id' and 'internal_id'"):
        ev.MessageRef()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'next_hop'"):
        ev.NextHopAcknowledged(event_id="e1", event_time_ms=5, node="ex01", primary_server="ex01")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'hop'"):
        ev.NextHopAcknowledged(event_id="e1", event_time_ms=5, node="ex01", primary_server="ex01", next_hop="x",
                               hop="y")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="takes 1 positional argument"):
        ev.NextHopAcknowledged("e1")  # type: ignore[misc]

