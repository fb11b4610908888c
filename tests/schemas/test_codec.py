"""The codec: every record round-trips through the single-object encoding; bad bytes say why."""

import dataclasses
import io

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import catalogue, codec, wire
from schemas.codec import DecodeError
from schemas.datum import to_datum
from schemas.events import MessageReceived, MessageRef, NodeStopping, Recipient
from schemas.shape import top_level_name
from schemas.validate import ValidationError, validate
from tests.schemas.samples import all_samples, sample_alert, sample_events
from tests.schemas.strategies import any_record

SAMPLES = all_samples()
EVENT_VERSION = catalogue.default().current("Event").version


@pytest.mark.parametrize("kind", list(SAMPLES))
def test_every_record_round_trips(kind):
    record = SAMPLES[kind]
    decoded = codec.decode(codec.encode(record), top_level_name(type(record)))
    assert repr(decoded) == repr(record), "same values, same types (enums, tuples, ints)"


@pytest.mark.parametrize("kind", list(SAMPLES))
def test_the_wire_format_is_magic_fingerprint_then_the_avro_body(kind):
    record = SAMPLES[kind]
    version = catalogue.default().current(top_level_name(type(record)))
    data = codec.encode(record)
    assert data[:2] == b"\xc3\x01"
    assert data[2:10] == version.fingerprint
    reference = io.BytesIO()
    fastavro.schemaless_writer(reference, fastavro.parse_schema(version.schema), to_datum(record))
    assert data[10:] == reference.getvalue(), "the compiled writer writes what fastavro writes"


@settings(max_examples=300, deadline=None)
@given(any_record())
def test_any_valid_record_encodes_like_fastavro_and_round_trips(record):
    data = codec.encode(record)
    version = catalogue.default().current(top_level_name(type(record)))
    reference = io.BytesIO()
    fastavro.schemaless_writer(reference, fastavro.parse_schema(version.schema), to_datum(record))
    assert data[10:] == reference.getvalue()
    assert repr(codec.decode(data)) == repr(record)


def test_the_kafka_key_of_an_event_is_its_primary_server():
    event = sample_events()["ShadowCopyStored"]
    assert event.node != event.primary_server
    assert codec.kafka_key(event) == b"mbx01.contoso.com"
    assert codec.kafka_key(sample_alert()) == sample_alert().alert_id.encode()


def test_encoding_validates_first():
    event = NodeStopping(event_id="e", event_time_ms=1, node="n", primary_server=b"p")
    with pytest.raises(ValidationError, match=r"^NodeStopping\.primary_server: expected str, got bytes b'p'$"):
        codec.encode(event)


def test_a_long_that_does_not_fit_is_refused_by_name():
    event = NodeStopping(event_id="e", event_time_ms=2**63, node="n", primary_server="p")
    with pytest.raises(ValidationError, match=r"^NodeStopping\.event_time_ms: 9223372036854775808 does not fit"):
        codec.encode(event)


class Text(str):
    """A str subclass: not the contract's exact type."""


RECEIVED = sample_events()["MessageReceived"]


@pytest.mark.parametrize("changes", [
    dict(size_bytes=True), dict(size_bytes=2**63), dict(size_bytes=-(2**63) - 1), dict(sender_supports_shadow=1),
    dict(source="OUTSIDE_BOUNDARY"), dict(recipients=[]), dict(recipients=(Recipient(address=7, internal=True),)),
    dict(recipients=(RECEIVED.recipients[0], "x@contoso.com")), dict(event_time_ms=1.5), dict(node=None),
    dict(node=Text("n")), dict(message="<a@contoso.com>"),
    dict(message=MessageRef(message_id=b"<a>", internal_id="1")),
])
def test_the_writer_refuses_what_validation_refuses_in_the_same_words(changes):
    record = dataclasses.replace(RECEIVED, **changes)
    with pytest.raises(ValidationError) as walked:
        validate(record)
    with pytest.raises(ValidationError) as written:
        codec.encode(record)
    assert str(written.value) == str(walked.value)
    out = bytearray(b"before")
    with pytest.raises(ValidationError):
        codec.default_codec().write_body(record, out)
    assert out == b"before", "nothing of the refused record is left behind"


def test_a_string_that_is_not_unicode_text_is_refused_by_name():
    record = dataclasses.replace(RECEIVED, node="mbx\ud800")  # what a JSON escape can make
    validate(record)  # its type is right
    with pytest.raises(ValidationError, match=r"^MessageReceived\.node: not Unicode text: surrogates not allowed"):
        codec.encode(record)


WRONG_VALUES = [object(), True, 0, 2**64, 1.5, "text", Text("text"), b"bytes", None, (), [], ("a",)]


@settings(max_examples=200, deadline=None)
@given(any_record(), st.data())
def test_the_writer_accepts_exactly_what_validation_accepts(record, data):
    name = data.draw(st.sampled_from([f.name for f in dataclasses.fields(record)]))
    changed = dataclasses.replace(record, **{name: data.draw(st.sampled_from(WRONG_VALUES))})
    try:
        validate(changed)
    except ValidationError as walked:
        with pytest.raises(ValidationError) as written:
            codec.encode(changed)
        assert str(written.value) == str(walked)
    else:
        assert codec.decode(codec.encode(changed)) == changed


GOOD = codec.encode(sample_events()["MessageReceived"])


@pytest.mark.parametrize("data, reason, detail", [
    (b"", wire.BAD_MAGIC, "starts with nothing, expected c301 (an event is Avro single-object encoded:"
     " schemas/README.md); an empty value (0 bytes, not a tombstone), as kafka-console-producer sends an empty line"),
    (b"{\"json\": 1}", wire.BAD_MAGIC,
     "starts with 7b22, expected c301 (an event is Avro single-object encoded: schemas/README.md)"),
    (None, wire.BAD_MAGIC, "starts with nothing, expected c301 (an event is Avro single-object encoded:"
     " schemas/README.md); a tombstone (no value at all), which deletes a key from a compacted topic"),
    (b"\x00\x00\x00\x00\x07" + GOOD[10:], wire.BAD_MAGIC, "starts with 0000, expected c301 (an event is Avro"
     " single-object encoded: schemas/README.md); perhaps Confluent's framing (byte 0, then schema id 7 of a schema"
     " registry), which the twin does not read"),
    ("\ufffd\x01".encode() + GOOD[2:9], wire.BAD_MAGIC, "starts with efbf, expected c301 (an event is Avro"
     " single-object encoded: schemas/README.md); perhaps an event that a text tool such as kafka-console-producer"
     " wrote: it reads lines as UTF-8, where c3, the first byte of every event, is no character, and sent efbfbd"
     " (U+FFFD) in its place; `shadowtwin replay FILE.jsonl` publishes JSON Lines as events"),
    (b"\xc3\x01\x00\x01", wire.TRUNCATED_HEADER, "4 bytes, the single-object header alone has 10"),
    (b"\xc3\x01" + bytes(range(8)) + GOOD[10:], wire.UNKNOWN_FINGERPRINT,
     "0001020304050607 is no catalogued writer schema"),
    (GOOD[:40], wire.CORRUPT_BODY, f"not a valid Event v{EVENT_VERSION} record"),
    (GOOD + b"\x00", wire.CORRUPT_BODY, "(1 bytes after the record)"),
    (GOOD[:10] + b"\x02" * 3, wire.CORRUPT_BODY, f"not a valid Event v{EVENT_VERSION} record"),
])
def test_undecodable_bytes_raise_decode_error_with_the_reason(data, reason, detail):
    with pytest.raises(DecodeError) as caught:
        codec.decode(data)
    assert caught.value.reason == reason
    assert str(caught.value).startswith(f"{reason}: ")
    assert detail in str(caught.value)


def test_many_values_decode_as_each_one_alone():
    """`decode_events`: in each place what `decode_event` gives for that value, or the exception it
    raises (its type and words), and the places of the exceptions."""
    values = [*(codec.encode(e) for e in sample_events().values()), b"", GOOD[:40], GOOD + b"\x00", None,
              codec.encode(sample_alert()), bytearray(GOOD), memoryview(GOOD), GOOD[:10] + b"\x02" * 3]
    got, failed = codec.default_codec().decode_events(values)
    for value, result in zip(values, got, strict=True):
        try:
            want = codec.decode_event(value)
        except Exception as exc:  # noqa: BLE001
            assert (type(result), str(result)) == (type(exc), str(exc)), value
        else:
            assert result == want and not isinstance(result, Exception), value
    assert failed == [i for i, result in enumerate(got) if isinstance(result, Exception)]
    assert len(failed) == 6 and len(got) - len(failed) == len(sample_events()) + 2


def test_a_record_of_another_schema_is_the_wrong_schema_for_the_topic():
    with pytest.raises(DecodeError, match=rf"^wrong schema: written with Alert v{catalogue.default().current('Alert').version}, expected Event$"):
        codec.decode_event(codec.encode(sample_alert()))
    assert codec.decode(codec.encode(sample_alert())) == sample_alert(), "without an expectation any schema reads"


def test_decoded_events_have_python_types_not_avro_ones():
    event = codec.decode_event(GOOD)
    assert isinstance(event, MessageReceived)
    assert type(event.source).__name__ == "MessageSource"
    assert type(event.recipients) is tuple and type(event.recipients[0]) is Recipient
    assert type(event.message) is MessageRef
    assert type(event.event_time_ms) is int and type(event.submitted_at_ms) is int
