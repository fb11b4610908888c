"""JSON Lines: one object per record, both ways, and errors that name the line and the field."""

import io
import json

import pytest
from hypothesis import given, settings

from schemas import jsonl
from schemas.events import ClockTick, MessageSource
from schemas.jsonl import JsonlError
from tests.schemas.samples import all_samples, sample_dead_letter, sample_events
from tests.schemas.strategies import any_record

SAMPLES = list(all_samples().values())


def text_of(records):
    out = io.StringIO()
    assert jsonl.write(records, out) == len(records)
    return out.getvalue()


def read_text(text, source="day.jsonl"):
    return list(jsonl.read(text.splitlines(keepends=True), source))


def error_of(text):
    with pytest.raises(JsonlError) as caught:
        read_text(text)
    return str(caught.value)


def test_records_to_lines_to_records():
    text = text_of(SAMPLES)
    assert text.count("\n") == len(SAMPLES)
    assert [repr(r) for r in read_text(text)] == [repr(r) for r in SAMPLES]


def test_lines_to_records_to_lines():
    text = text_of(SAMPLES)
    assert text_of(read_text(text)) == text


@settings(max_examples=200, deadline=None)
@given(any_record())
def test_any_record_round_trips(record):
    assert repr(jsonl.loads(jsonl.dumps(record))) == repr(record)


def test_one_line_is_kind_then_fields_with_iso_times_symbols_and_nested_objects():
    line = json.loads(jsonl.dumps(sample_events()["MessageReceived"]))
    assert list(line)[:7] == ["kind", "event_id", "event_time", "node", "primary_server", "message", "sender"]
    assert line["kind"] == "MessageReceived"
    assert line["event_time"] == "2026-11-22T02:00:00.750Z"
    assert line["submitted_at"] == "2026-11-22T01:59:58.500Z"
    assert line["source"] == "OUTSIDE_BOUNDARY"
    assert line["recipients"] == [{"address": "ann@contoso.com", "internal": True},
                                  {"address": "bob@fabrikam.com", "internal": False}]
    assert line["message"] == {"message_id": "<a1b2c3@contoso.com>", "internal_id": "21474836481", "fork_id": "2"}


@pytest.mark.parametrize("ms, text", [
    (-30_610_224_000_001, "0999-12-31T23:59:59.999Z"),  # strftime's %Y writes 999 on Linux
    (-62_135_596_800_000, "0001-01-01T00:00:00.000Z"),
])
def test_times_before_the_year_1000_have_four_digit_years_and_read_back(ms, text):
    tick = ClockTick(event_id="t", event_time_ms=ms, node="shadowtwin", primary_server="mbx01")
    assert json.loads(jsonl.dumps(tick))["event_time"] == text
    assert jsonl.loads(jsonl.dumps(tick)) == tick


def test_bytes_are_base64_and_outputs_have_their_own_kind():
    line = json.loads(jsonl.dumps(sample_dead_letter()))
    assert line["kind"] == "DeadLetter"
    assert line["original"] == "wwIA/25vdCBhdnJv"
    assert line["key"] == "bWJ4MDEuY29udG9zby5jb20="
    assert line["at"] == "2026-11-22T02:01:00.000Z"


def test_times_may_be_int_milliseconds_or_any_offset_and_defaults_may_be_left_out():
    tick = ClockTick(event_id="t", event_time_ms=1_795_312_800_250, node="shadowtwin", primary_server="mbx01")
    for when in (1_795_312_800_250, "2026-11-22T02:00:00.250Z", "2026-11-22T03:00:00.250+01:00"):
        line = json.dumps({"kind": "ClockTick", "event_id": "t", "event_time": when, "node": "shadowtwin",
                           "primary_server": "mbx01"})
        assert read_text(line) == [tick]


def test_times_too_far_for_iso_stay_milliseconds():
    tick = ClockTick(event_id="t", event_time_ms=-(2**63), node="n", primary_server="p")
    assert json.loads(jsonl.dumps(tick))["event_time"] == -(2**63)
    assert jsonl.loads(jsonl.dumps(tick)) == tick


def test_blank_lines_are_skipped_but_counted():
    good = jsonl.dumps(sample_events()["ClockTick"])
    assert len(read_text(f"{good}\n\n{good}\n")) == 2
    assert error_of(f"{good}\n\n{{oops\n").startswith("day.jsonl:3: not JSON")


def test_bytes_that_are_not_utf8_are_named_by_their_line():
    good = jsonl.dumps(sample_events()["ClockTick"]).encode() + b"\n"
    with pytest.raises(JsonlError) as caught:
        list(jsonl.read([good, good, b'{"kind": "\xff\xfe"}\n'], "day.jsonl"))
    assert str(caught.value) == "day.jsonl:3: not UTF-8: byte 0xff at column 11; records read before it: 2"


@pytest.mark.parametrize("cut", [b'{"kind": "Clo', '{"kind": "Clé"}'.encode()[:-3]], ids=["mid-JSON", "mid-character"])
def test_a_last_line_cut_short_is_named_with_the_records_read_before_it(cut):
    good = jsonl.dumps(sample_events()["ClockTick"]).encode() + b"\n"
    with pytest.raises(JsonlError) as caught:
        list(jsonl.read([good, b"\n", good, cut], "day.jsonl"))
    message = str(caught.value)
    assert message.startswith("day.jsonl:4: cut short: the last line ends mid-record (not ")
    assert message.endswith("; records read before it: 2")


def test_a_bad_line_with_its_newline_is_not_called_cut_short():
    assert "cut short" not in error_of('{"kind": "Clo\n')


RECEIVED = json.loads(jsonl.dumps(sample_events()["MessageReceived"]))


def line_with(**changes):
    return json.dumps({**RECEIVED, **changes})


@pytest.mark.parametrize("line, expected", [
    (line_with(recipients=[{"address": 7, "internal": True}]),
     "MessageReceived.recipients[0].address: expected str, got int 7"),
    (line_with(source="SMTP"), "MessageReceived.source: 'SMTP' is no MessageSource symbol "
                               f"({', '.join(m.value for m in MessageSource)})"),
    (line_with(event_time="2026-11-22T02:00:00"), "MessageReceived.event_time: '2026-11-22T02:00:00' has no time "
                                                  "zone (write Z for UTC)"),
    (line_with(event_time="yesterday"), "MessageReceived.event_time: 'yesterday' is not an ISO-8601 time"),
    (line_with(event_time="2026-11-22T02:00:00.000001Z"), "is more precise than a millisecond"),
    (line_with(size_bytes=1.5), "MessageReceived.size_bytes: expected int, got float 1.5"),
    (line_with(recipients={"address": "a"}), "MessageReceived.recipients: expected an array, got dict"),
    (line_with(message="m1"), "MessageReceived.message: expected an object, got str"),
    (line_with(colour="red"), "MessageReceived.colour: no such field in MessageReceived"),
    (line_with(event_time_ms=1), "MessageReceived.event_time_ms: no such field in MessageReceived"),
    (line_with(kind="MessageReceivd"), "kind: 'MessageReceivd' is no record kind"),
    (json.dumps({k: v for k, v in RECEIVED.items() if k != "sender"}),
     "MessageReceived.sender: missing (the field has no default)"),
    (json.dumps({k: v for k, v in RECEIVED.items() if k != "kind"}), "kind: missing"),
    ("[1, 2]", "line: expected a JSON object, got list"),
    (line_with(node="mbx\ud800"), "MessageReceived.node: not Unicode text: surrogates not allowed at 3"),
])
def test_an_error_names_the_line_and_the_field(line, expected):
    good = jsonl.dumps(sample_events()["ClockTick"])
    message = error_of(f"{good}\n{line}\n{good}\n")
    assert message.startswith("day.jsonl:2: ")
    assert expected in message


def test_bad_base64_is_named():
    line = json.loads(jsonl.dumps(sample_dead_letter()))
    assert error_of(json.dumps({**line, "original": "not base64!"})).startswith(
        "day.jsonl:1: DeadLetter.original: not base64")


@pytest.mark.parametrize("text", ["é", "wwIA/25vdCBhdnJv€"])
def test_base64_with_a_letter_beyond_ascii_is_named_too(text):
    """base64 says so with a ValueError of its own, not binascii.Error: it escaped as a traceback."""
    line = json.loads(jsonl.dumps(sample_dead_letter()))
    assert error_of(json.dumps({**line, "original": text}, ensure_ascii=False)).startswith(
        "day.jsonl:1: DeadLetter.original: not base64")
