"""Evolution: the policy's checks, and records of other versions read by the current code."""

import copy
import dataclasses

import pytest

from schemas import catalogue, evolution, wire
from schemas.codec import Codec, DecodeError
from schemas.datum import to_datum
from schemas.events import SiteLocality
from schemas.shape import TOP_LEVEL_NAMES
from tests.schemas.samples import sample_events
from tests.schemas.versions import NEW_KIND, current_event, encode_with, new_kind_datum, next_event, previous_event

RECEIVED = sample_events()["MessageReceived"]
REQUESTED = sample_events()["ShadowCopyRequested"]


# ---- the policy ------------------------------------------------------------------------

def test_every_released_version_may_be_followed_by_the_current_one():
    for name in TOP_LEVEL_NAMES:
        for released in catalogue.default().versions(name):
            assert evolution.problems(released.schema, catalogue.default().current(name).schema) == []


def test_the_synthesized_versions_follow_the_policy():
    assert evolution.problems(previous_event().schema, current_event().schema) == []
    assert evolution.problems(current_event().schema, next_event().schema) == []


def changed(change):
    schema = copy.deepcopy(current_event().schema)
    change(schema, {m["name"]: m for m in schema["fields"][-1]["type"]})
    return evolution.problems(current_event().schema, schema)


def fields(record, name):
    return next(f for f in record["fields"] if f["name"] == name)


@pytest.mark.parametrize("change, expected", [
    (lambda s, kinds: kinds["MessageReceived"]["fields"].pop(0),
     "Event.body<MessageReceived>.sender: removed (or renamed)"),
    (lambda s, kinds: fields(kinds["MessageReceived"], "sender").update(name="sender_host"),
     "Event.body<MessageReceived>.sender: removed (or renamed)"),
    (lambda s, kinds: kinds["NodeStopping"]["fields"].append({"name": "code", "type": "long"}),
     "Event.body<NodeStopping>.code: added without a default"),
    (lambda s, kinds: fields(kinds["MessageReceived"], "size_bytes").update(type="string"),
     "Event.body<MessageReceived>.size_bytes: type changed from long to string"),
    (lambda s, kinds: fields(s, "event_time_ms").update(type="long"),
     "Event.event_time_ms: logical type changed from timestamp-millis to none"),
    (lambda s, kinds: fields(kinds["ShadowCopyRequested"], "locality")["type"]["symbols"].insert(1, "CLOUD"),
     "Event.body<ShadowCopyRequested>.locality: symbols"),
    (lambda s, kinds: s["fields"][-1]["type"].insert(0, {"type": "record", "name": "First", "fields": []}),
     "Event.body<NodeStarted>: renamed from NodeStarted to First"),
    (lambda s, kinds: s["fields"][-1]["type"].pop(),
     "Event.body: union lost members"),
])
def test_changes_the_policy_refuses(change, expected):
    found = changed(change)
    assert any(expected in problem for problem in found), found


def test_require_compatible_lists_every_problem():
    schema = copy.deepcopy(current_event().schema)
    schema["fields"] = schema["fields"][1:]
    with pytest.raises(evolution.PolicyError, match=r"Event.event_id: removed"):
        evolution.require_compatible(current_event().schema, schema, "Event")


# ---- reading other versions in Python ----------------------------------------------------

def test_a_record_of_the_previous_version_reads_with_the_current_code():
    codec = Codec(catalogue.default().with_versions(previous_event()))
    data = encode_with(previous_event(), to_datum(RECEIVED))
    assert data[2:10] != current_event().fingerprint
    assert codec.decode(data, "Event") == dataclasses.replace(RECEIVED, sender_supports_shadow=True)


def test_a_record_of_a_newer_version_reads_when_the_catalogue_knows_it():
    codec = Codec(catalogue.default().with_versions(next_event()))
    received = {**to_datum(RECEIVED)}
    received["body"] = (received["body"][0], {**received["body"][1], "priority": 5})
    assert repr(codec.decode(encode_with(next_event(), received))) == repr(RECEIVED), "the new field is ignored"
    requested = to_datum(REQUESTED)
    requested["body"][1]["locality"] = "CLOUD"
    decoded = codec.decode(encode_with(next_event(), requested))
    assert decoded.locality is SiteLocality.UNKNOWN, "an unknown symbol reads as the enum's default"


def test_a_newer_event_kind_is_an_unknown_event_kind():
    codec = Codec(catalogue.default().with_versions(next_event()))
    header = {k: v for k, v in to_datum(REQUESTED).items() if k != "body"}
    with pytest.raises(DecodeError) as caught:
        codec.decode(encode_with(next_event(), new_kind_datum(header)))
    assert caught.value.reason == wire.UNKNOWN_EVENT_KIND
    assert str(caught.value) == (f"unknown event kind: {NEW_KIND} (written with Event v{next_event().version}) "
                                 "is not known to this reader")


def test_without_the_newer_version_its_records_have_an_unknown_fingerprint():
    data = encode_with(next_event(), to_datum(RECEIVED))
    with pytest.raises(DecodeError, match="^unknown fingerprint: "):
        Codec().decode(data)
