"""The compiled reader: the records fastavro reads, from the same bytes; the rest refused, and decoded as before."""

import copy
import dataclasses
import marshal
import pickle
import re
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import binary, catalogue, codec, wire
from schemas.codec import Codec, DecodeError
from schemas.events import EVENT_TYPES, AcknowledgedToSender, Event, NodeStopping, ShadowFailureReason, doc
from schemas.validate import ValidationError
from schemas.shape import TOP_LEVEL_NAMES
from tests.schemas.samples import all_samples, sample_events
from tests.schemas.strategies import any_record

SAMPLES = all_samples()
FASTAVRO = Codec(compiled=False)
REFUSED = (IndexError, ValueError)  # what the compiled reader raises for bytes that are no valid record


def read_compiled(data: bytes):
    """The record the compiled reader of `data`'s schema reads after the header, and where it stops."""
    writer = catalogue.default().lookup(data[2:wire.HEADER_SIZE])
    return binary.top_level_reader(writer.name)(data, wire.HEADER_SIZE)


def outcome(decoder: Codec, data: bytes):
    """What decoding gives: the record, or the DecodeError's reason and detail (any other exception fails)."""
    try:
        record = decoder.decode(data)
    except DecodeError as error:
        # fastavro's EOFError names its stream, <_io.BytesIO object at 0x...>: a new one each time
        return "error", error.reason, re.sub(r" at 0x[0-9a-f]+>", " at 0x...>", error.detail)
    return "record", type(record), repr(record)


def assert_reads_as_fastavro(record):
    data = codec.encode(record)
    compiled, end = read_compiled(data)
    expected = FASTAVRO.decode(data)
    assert end == len(data)
    assert type(compiled) is type(expected) and compiled == expected
    assert repr(compiled) == repr(expected) == repr(record), "same values, same types (enums, tuples, ints)"


@pytest.mark.parametrize("kind", list(SAMPLES))
def test_every_sample_reads_as_fastavro_reads_it(kind):
    assert_reads_as_fastavro(SAMPLES[kind])


@settings(max_examples=300, deadline=None)
@given(any_record())
def test_any_valid_record_reads_as_fastavro_reads_it(record):
    assert_reads_as_fastavro(record)


def test_a_reader_starts_where_it_is_told_and_says_where_the_record_ends():
    events = list(sample_events().values())
    bodies = [codec.encode(e)[wire.HEADER_SIZE:] for e in events]
    data, pos, read = b"".join(bodies), 0, binary.top_level_reader("Event")
    for event, body in zip(events, bodies):
        decoded, end = read(data, pos)
        assert decoded == event and end == pos + len(body)
        pos = end
    assert pos == len(data)


def test_decoded_records_are_frozen_and_hash_pickle_and_copy_like_the_originals():
    for record in SAMPLES.values():
        decoded = codec.decode(codec.encode(record))
        assert hash(decoded) == hash(record)
        assert pickle.loads(pickle.dumps(decoded, pickle.HIGHEST_PROTOCOL)) == record, "the twin pickles its state"
        assert copy.deepcopy(decoded) == record and dataclasses.replace(decoded) == record
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(decoded, dataclasses.fields(decoded)[0].name, "changed")


def test_the_codec_reads_bytes_from_a_bytearray_or_a_memoryview():
    data = codec.encode(sample_events()["MessageReceived"])
    assert codec.decode(bytearray(data)) == codec.decode(memoryview(data)) == sample_events()["MessageReceived"]


# ---- bytes that are no valid record ---------------------------------------------------------

@pytest.mark.parametrize("kind", list(SAMPLES))
def test_every_truncated_body_is_refused_and_decodes_to_a_corrupt_body(kind):
    data = codec.encode(SAMPLES[kind])
    for cut in range(wire.HEADER_SIZE, len(data)):
        with pytest.raises(REFUSED):
            read_compiled(data[:cut])
        found = outcome(codec.default_codec(), data[:cut])
        assert found[:2] == ("error", wire.CORRUPT_BODY), cut
        assert found == outcome(FASTAVRO, data[:cut]), "the detail is fastavro's, as it was"


def test_trailing_bytes_are_a_corrupt_body():
    data = codec.encode(sample_events()["ClockTick"]) + b"\x00\x00"
    assert outcome(codec.default_codec(), data) == (
        "error", wire.CORRUPT_BODY, f"{wire.corrupt_body_detail(str(catalogue.default().current('Event')))} (2 bytes after the record)")


ACKNOWLEDGED = codec.encode(sample_events()["AcknowledgedToSender"])  # ends with the boolean `redundant`
SENT = sample_events()["SentToNextHop"]
HEADER = ACKNOWLEDGED[:wire.HEADER_SIZE]
FAILED = codec.encode(sample_events()["ShadowCopyFailed"])  # ends with the enum `reason`


def event_header() -> bytes:
    """The Event header fields of a ClockTick: its body is the header, then the kind index."""
    data = codec.encode(sample_events()["ClockTick"])
    return data[wire.HEADER_SIZE:-1]


@pytest.mark.parametrize("body, why", [
    (b"\x01", "a string of negative length"),
    (b"\x7e", "a string longer than the body"),
    (b"\xff" * 11, "a varint of more than 10 bytes"),
    (b"\xff" * 9 + b"\x02", "a varint over 64 bits"),
    (b"\x06\xff\xfe\xfd" + event_header()[4:], "bad UTF-8"),
    (event_header() + b"\x2e", "an event kind index beyond the last kind"),
    (event_header()[:-20] + b"\x04", "a union index that is neither null nor the value"),
])
def test_invalid_encodings_are_refused_and_decode_as_fastavro_decodes_them(body, why):
    with pytest.raises(REFUSED):
        binary.top_level_reader("Event")(HEADER + body, wire.HEADER_SIZE)
    found = outcome(codec.default_codec(), HEADER + body)
    assert found == outcome(FASTAVRO, HEADER + body), why
    assert found[0] == "error" and found[1] == wire.CORRUPT_BODY, why


def test_an_enum_index_beyond_the_symbols_is_refused():
    assert FAILED[-1] == 2, "the last field is `reason`, TIMEOUT, index 1"
    corrupt = FAILED[:-1] + b"\x14"  # index 10: ShadowFailureReason has 5 symbols
    with pytest.raises(REFUSED):
        read_compiled(corrupt)
    assert outcome(codec.default_codec(), corrupt) == outcome(FASTAVRO, corrupt)
    assert outcome(FASTAVRO, corrupt)[:2] == ("error", wire.CORRUPT_BODY)


@pytest.mark.parametrize("data, check", [
    # A boolean is 0 or 1; fastavro reads any other byte as true.
    (ACKNOWLEDGED[:-1] + b"\x02", lambda e: isinstance(e, AcknowledgedToSender) and e.redundant is True),
    # Indexes are not negative; fastavro counts a negative one from the end, as Python does.
    # ClockTick (no fields) counted from the end: zigzag(-k) is the byte 2k - 1.
    (HEADER + event_header() + bytes([2 * (len(EVENT_TYPES) - list(EVENT_TYPES).index("ClockTick")) - 1]),
     lambda e: type(e).kind == "ClockTick"),
    (FAILED[:-1] + b"\x01", lambda e: e.reason is ShadowFailureReason.NOT_SUPPORTED),
])
def test_what_fastavro_tolerates_decodes_as_it_did(data, check):
    with pytest.raises(REFUSED):
        read_compiled(data)
    assert check(codec.decode(data))
    assert outcome(codec.default_codec(), data) == outcome(FASTAVRO, data)


mutations = st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255), st.sampled_from("rid"))


@settings(max_examples=400, deadline=None)
@given(any_record(), st.lists(mutations, min_size=1, max_size=3))
def test_a_damaged_record_decodes_exactly_as_with_fastavro_alone(record, changes):
    data = bytearray(codec.encode(record))
    for where, byte, how in changes:
        at = wire.HEADER_SIZE + where % max(1, len(data) - wire.HEADER_SIZE)
        if how == "r":
            data[at:at + 1] = bytes([byte])
        elif how == "i":
            data.insert(at, byte)
        else:
            del data[at:at + 1]
    assert outcome(codec.default_codec(), bytes(data)) == outcome(FASTAVRO, bytes(data))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(TOP_LEVEL_NAMES), st.binary(max_size=80))
def test_any_body_decodes_exactly_as_with_fastavro_alone(name, body):
    data = wire.header(catalogue.default().current(name).fingerprint) + body
    assert outcome(codec.default_codec(), data) == outcome(FASTAVRO, data)


# ---- details of the encoding ----------------------------------------------------------------

@pytest.mark.parametrize("value", [0, 1, -1, 63, -64, 64, -65, 8191, 1_795_312_800_000, 2**42, -(2**63), 2**63 - 1])
def test_read_long_reads_what_write_long_writes(value):
    data = b"\x05" + binary.varint(value) + b"\x07"
    assert binary.read_long(data, 1) == (value, len(data) - 1)


@pytest.mark.parametrize("data", [b"\xff" * 10 + b"\x01", b"\xff" * 9 + b"\x02", b"\x80" * 11, b"\x80\x80"])
def test_read_long_refuses_what_is_no_64_bit_long(data):
    with pytest.raises(REFUSED):
        binary.read_long(data, 0)


def test_arrays_in_blocks_that_give_their_size_in_bytes_are_read():
    """Avro lets a writer split an array into blocks, a negative count followed by the block's size."""
    plain = codec.encode(SENT)
    recipients = bytearray()
    binary.write_long(len(SENT.recipients), recipients)
    for address in SENT.recipients:
        binary.write_string(address, recipients)
    recipients.append(0)
    assert recipients in plain
    first, second = bytearray(), bytearray()
    binary.write_string(SENT.recipients[0], first)
    binary.write_string(SENT.recipients[1], second)
    blocked = binary.varint(-1) + binary.varint(len(first)) + first + binary.varint(1) + second + b"\x00"
    data = plain.replace(bytes(recipients), blocked)
    assert read_compiled(data) == (SENT, len(data))
    assert FASTAVRO.decode(data) == SENT


@dataclass(frozen=True, slots=True)
class Normalised:
    """A record whose __post_init__ changes what it is given."""

    host: str = doc("a host name, lower-cased")

    def __post_init__(self):
        object.__setattr__(self, "host", self.host.lower())


def test_a_class_whose_init_does_more_than_store_its_fields_is_built_through_it():
    out = bytearray()
    binary.write_string("MBX01.Contoso.com", out)
    assert binary.record_reader(Normalised)(bytes(out), 0) == (Normalised("mbx01.contoso.com"), len(out))


def test_the_reader_source_is_inspectable_and_named_in_tracebacks():
    read = binary.top_level_reader("Event")
    assert read.__code__.co_filename == "<schemas.binary: Event reader read_Event>"
    assert "def read_Event(data, p):" in read.source


def arguments_of(record) -> dict:
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}


def body_of(record) -> bytes:
    out = bytearray()
    codec.default_codec().write_body(record, out)
    return bytes(out)


@pytest.mark.parametrize("kind", list(sample_events()))
def test_the_arguments_encoder_writes_the_body_of_the_event_they_make(kind):
    event = sample_events()[kind]
    assert binary.arguments_encoder(type(event))(**arguments_of(event)) == body_of(event)


@settings(max_examples=200, deadline=None)
@given(any_record())
def test_any_valid_event_encodes_from_its_arguments_as_it_encodes(record):
    if isinstance(record, Event):
        assert binary.arguments_encoder(type(record))(**arguments_of(record)) == body_of(record)


def test_the_arguments_encoder_takes_the_defaults_and_refuses_as_the_codec_does():
    encode = binary.arguments_encoder(NodeStopping)
    header = dict(event_id="e", event_time_ms=1, node="n", primary_server="p")
    assert encode(**header) == body_of(NodeStopping(**header))  # message None, reason "": the defaults
    with pytest.raises(ValidationError, match=r"^NodeStopping\.reason: expected str, got int 1$"):
        encode(**header, reason=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'typo'"):
        encode(**header, typo=1)
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'node'"):
        encode(event_id="e", event_time_ms=1, primary_server="p")


def written_flat(record) -> bytes:
    """The record made flat, carried through marshal (as to another process), and written."""
    flat = marshal.loads(marshal.dumps(binary.arguments_flattener(type(record))(**arguments_of(record))))
    out = bytearray()
    binary.flat_writer(type(record))(flat, out)
    return bytes(out)


@pytest.mark.parametrize("kind", list(sample_events()))
def test_an_event_made_flat_is_written_as_its_body(kind):
    event = sample_events()[kind]
    assert written_flat(event) == body_of(event)


@settings(max_examples=200, deadline=None)
@given(any_record())
def test_any_valid_event_made_flat_is_written_as_its_body(record):
    if isinstance(record, Event):
        assert written_flat(record) == body_of(record)


def test_the_flattener_takes_the_defaults_and_refuses_as_the_codec_does():
    flatten = binary.arguments_flattener(NodeStopping)
    header = dict(event_id="e", event_time_ms=1, node="n", primary_server="p")
    assert written_flat(NodeStopping(**header)) == body_of(NodeStopping(**header))
    assert flatten(**header) == (list(EVENT_TYPES.values()).index(NodeStopping), "e", 1, "n", "p", None, "")
    with pytest.raises(ValidationError, match=r"^NodeStopping\.reason: expected str, got int 1$"):
        flatten(**header, reason=1)
    assert flatten("e", 1, "n", "p", None, reason="r") == flatten(**header, reason="r")  # the envelope by position
    with pytest.raises(TypeError, match="takes from 4 to 5 positional arguments but 6"):
        flatten("e", 1, "n", "p", None, "r")  # the kind's own fields by keyword only
    with pytest.raises(ValidationError, match=r"^AcknowledgedToSender\.message: expected MessageRef"):
        binary.arguments_flattener(AcknowledgedToSender)(**header, message=("m", "i", None), redundant=True)


def test_a_record_with_a_field_named_as_the_generated_source_names_its_own_is_refused():
    @dataclass(frozen=True)
    class Clash:
        out: str = doc("a field the generated encoder could not take")

    with pytest.raises(TypeError, match="cannot take a field named out"):
        binary.arguments_encoder(Clash)
