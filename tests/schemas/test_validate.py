"""Validation names the field and the problem, and passes every valid record."""

import dataclasses

import pytest
from hypothesis import given, settings

from schemas.events import AlertMessage, DiscardQueryAnswered, Recipient, SiteLocality
from schemas.validate import ValidationError, acceptor, validate
from tests.schemas.samples import all_samples, sample_alert, sample_events
from tests.schemas.strategies import any_record

RECEIVED = sample_events()["MessageReceived"]


def problem(record):
    with pytest.raises(ValidationError) as caught:
        validate(record)
    return str(caught.value)


def test_every_sample_is_valid():
    for record in all_samples().values():
        validate(record)
        assert acceptor(type(record))(record), "the fast check agrees"


def test_a_wrong_type_deep_inside_names_the_path():
    record = dataclasses.replace(RECEIVED, recipients=(RECEIVED.recipients[0], Recipient(address=7, internal=True)))
    assert problem(record) == "MessageReceived.recipients[1].address: expected str, got int 7"


@pytest.mark.parametrize("changes, expected", [
    (dict(size_bytes=True), "MessageReceived.size_bytes: expected int, got bool True"),
    (dict(size_bytes=2**63), f"MessageReceived.size_bytes: {2**63} does not fit a 64-bit long"),
    (dict(sender_supports_shadow=1), "MessageReceived.sender_supports_shadow: expected bool, got int 1"),
    (dict(source="OUTSIDE_BOUNDARY"), "MessageReceived.source: expected MessageSource, got str 'OUTSIDE_BOUNDARY'"),
    (dict(recipients=[]), "MessageReceived.recipients: expected tuple, got list []"),
    (dict(event_time_ms=1.5), "MessageReceived.event_time_ms: expected int (milliseconds since the epoch), "
                              "got float 1.5"),
    (dict(submitted_at_ms="2026-11-22"), "MessageReceived.submitted_at_ms: expected int (milliseconds since the "
                                         "epoch), got str '2026-11-22'"),
    (dict(node=None), "MessageReceived.node: expected str, got NoneType None"),
    (dict(message="<a1b2c3@contoso.com>"), "MessageReceived.message: expected MessageRef, got str "
                                           "'<a1b2c3@contoso.com>'"),
])
def test_each_kind_of_mistake_is_named(changes, expected):
    assert problem(dataclasses.replace(RECEIVED, **changes)) == expected


def test_nested_records_in_arrays_and_outputs():
    answered = dataclasses.replace(sample_events()["DiscardQueryAnswered"], discarded=(SiteLocality.LOCAL,))
    assert problem(answered) == "DiscardQueryAnswered.discarded[0]: expected MessageRef, got SiteLocality " \
                                "<SiteLocality.LOCAL: 'LOCAL'>"
    alert = dataclasses.replace(sample_alert(), messages=(AlertMessage(message=None),))
    assert problem(alert) == "Alert.messages[0].message: expected MessageRef, got NoneType None"


def test_long_values_are_shortened_in_the_message():
    text = problem(dataclasses.replace(RECEIVED, sender=12345678901234567890123456789012345678901234567890))
    assert text.endswith("got int 1234567890123456789012345678901234567...")


@settings(max_examples=200, deadline=None)
@given(any_record())
def test_the_fast_check_accepts_exactly_what_the_walk_accepts(record):
    validate(record)  # any drawn record is valid
    assert acceptor(type(record))(record)
    broken = dataclasses.replace(record, **{dataclasses.fields(record)[0].name: object()})
    assert not acceptor(type(record))(broken)
    with pytest.raises(ValidationError):
        validate(broken)


@pytest.mark.parametrize("thing", [DiscardQueryAnswered, {"kind": "MessageReceived"}])
def test_what_is_not_a_record_of_the_contract_is_refused(thing):
    with pytest.raises(ValidationError, match="not a record of the contract"):
        validate(thing)
