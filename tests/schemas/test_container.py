"""Avro container files: the one writer and reader; a file cut short or damaged reads to its last
complete block, then names the file and the offset."""

import io

import pytest

from producers.synthetic import Workload, generate
from schemas import container
from schemas.codec import default_codec
from schemas.container import ContainerError
from tests.schemas.samples import sample_alert

EVENTS = list(generate(Workload(servers=4, duration_ms=10 * 60_000)))


def blocks_of(data: bytes) -> list[int]:
    """The offsets where each block ends (after its sync marker)."""
    sync, ends, at = data[-container.SYNC_SIZE:], [], 0
    while (found := data.find(sync, at)) >= 0:
        ends.append(found + container.SYNC_SIZE)
        at = found + 1
    return ends[1:]  # the first is the header's


@pytest.fixture
def recording(tmp_path):
    path = tmp_path / "day.avro"
    with open(path, "wb") as out:
        assert container.write(out, "Event", EVENTS) == len(EVENTS)
    return path


def test_a_file_of_several_blocks_reads_back_whole(recording):
    assert len(blocks_of(recording.read_bytes())) > 2
    assert list(container.read(recording, "Event")) == EVENTS


class FullDisk(io.BytesIO):
    """A file that takes its first `room` bytes, then fails as a full disk does."""

    def __init__(self, room: int):
        super().__init__()
        self.room = room

    def write(self, data) -> int:
        if self.tell() + len(data) > self.room:
            raise OSError(28, "No space left on device")
        return super().write(data)


def test_a_block_that_cannot_be_written_stops_the_writer_with_the_error_and_leaves_the_blocks_before_it():
    whole = io.BytesIO()
    container.write(whole, "Event", EVENTS, sync=b"s" * 16)
    second_block_ends = blocks_of(whole.getvalue())[1]
    out = FullDisk(second_block_ends + 10)
    with pytest.raises(OSError, match="No space left on device"):
        container.write(out, "Event", EVENTS, sync=b"s" * 16)
    assert out.getvalue() == whole.getvalue()[:second_block_ends]


def test_a_record_that_does_not_fit_stops_the_writer_after_the_blocks_before_it(tmp_path):
    path = tmp_path / "day.avro"
    records = [*EVENTS, sample_alert(), *EVENTS]
    with open(path, "wb") as out, pytest.raises(TypeError, match=f"record {len(EVENTS) + 1} is Alert"):
        container.write(out, "Event", records)
    back = list(container.read(path, "Event"))  # complete blocks only: no ContainerError
    assert 0 < len(back) < len(EVENTS) and back == EVENTS[:len(back)]


@pytest.mark.parametrize("cut", [1, 100, 5000, -container.SYNC_SIZE - 3, -1])
def test_a_file_cut_short_reads_to_its_last_complete_block_then_names_the_file_and_offset(recording, cut):
    data = recording.read_bytes()
    ends = blocks_of(data)
    cut_at = ends[1] + cut if cut > 0 else len(data) + cut
    recording.write_bytes(data[:cut_at])
    complete = max(end for end in [0, *ends] if end <= cut_at)
    got = []
    with pytest.raises(ContainerError) as raised:
        for event in container.read(recording, "Event"):
            got.append(event)
    assert got == EVENTS[:len(got)] and len(got) > 0
    assert str(raised.value).startswith(f"{recording}: cut short")
    assert raised.value.offset == complete, "the offset is where the last complete block ends"
    assert f"(at byte {complete})" in str(raised.value) and "\n" not in str(raised.value)


def test_a_damaged_block_is_named_and_what_came_before_it_was_read(recording):
    data = bytearray(recording.read_bytes())
    ends = blocks_of(bytes(data))
    data[ends[0] + 40] ^= 0xFF  # inside the second block's compressed bytes
    recording.write_bytes(bytes(data))
    got = []
    with pytest.raises(ContainerError, match=r"day.avro: damaged: .* \(at byte %d\)" % ends[0]):
        got.extend(container.read(recording, "Event"))
    assert 0 < len(got) == len(list(_first_block(bytes(data), ends[0])))


def _first_block(data: bytes, end: int):
    return container.records(io.BytesIO(data[:end]), "first block")


def test_a_wrong_sync_marker_is_damage(recording):
    data = bytearray(recording.read_bytes())
    ends = blocks_of(bytes(data))
    data[ends[1] - 1] ^= 0x01
    recording.write_bytes(bytes(data))
    with pytest.raises(ContainerError, match="does not end with the file's sync marker"):
        list(container.read(recording, "Event"))


def test_not_a_container_and_the_wrong_records_are_named(tmp_path):
    (tmp_path / "x.avro").write_bytes(b"{\"kind\": \"ClockTick\"}\n")
    with pytest.raises(ContainerError, match=r"x.avro: not an Avro container file .* \(at byte 0\)"):
        list(container.read(tmp_path / "x.avro"))
    with open(tmp_path / "alerts.avro", "wb") as out:
        container.write(out, "Alert", [sample_alert()])
    assert list(container.read(tmp_path / "alerts.avro")) == [sample_alert()]
    with pytest.raises(ContainerError, match="alerts.avro: holds Alert records, not Event"):
        list(container.read(tmp_path / "alerts.avro", "Event"))


@pytest.mark.parametrize("was, now", [(b'"long"', b'"lxng"'), (b'"name":"event_id"', b'"nbme":"event_id"'),
                                      (b'"type"', b'"typf"'), (b'"symbols"', b'"symbolt"')])
def test_a_writer_schema_damaged_in_the_header_is_named(recording, was, now):
    """One byte changed in the header's schema, still JSON and still named Event: fastavro refused it
    with its own errors (UnknownType, SchemaParseException, KeyError), which escaped as tracebacks."""
    data = recording.read_bytes()
    recording.write_bytes(data.replace(was, now, 1))
    with pytest.raises(ContainerError, match=r"day.avro: damaged header: the writer schema is no valid Avro schema"):
        list(container.read(recording, "Event"))


def test_a_huge_block_size_is_damage_not_an_allocation(tmp_path):
    data = io.BytesIO()
    container.write(data, "Event", EVENTS[:3], codec="null")
    header_end = data.getvalue().find(data.getvalue()[-container.SYNC_SIZE:]) + container.SYNC_SIZE
    path = tmp_path / "huge.avro"
    path.write_bytes(data.getvalue()[:header_end] + b"\x06" + b"\xfe\xff\xff\xff\xff\xff\xff\xff\x7f" + b"xx")
    with pytest.raises(ContainerError, match="cut short"):
        list(container.read(path, "Event"))


def test_a_file_written_from_the_bodies_is_the_file_written_from_the_records():
    bodies = []
    for event in EVENTS:
        body = bytearray()
        default_codec().write_body(event, body)
        bodies.append(bytes(body))
    sync = bytes(range(16))
    from_records, from_bodies = io.BytesIO(), io.BytesIO()
    assert container.write(from_records, "Event", EVENTS, sync=sync) == len(EVENTS)
    assert container.write_encoded(from_bodies, "Event", iter(bodies), sync=sync) == len(EVENTS)
    assert len(blocks_of(from_bodies.getvalue())) > 2
    assert from_bodies.getvalue() == from_records.getvalue()
    assert container.write_encoded(io.BytesIO(), "Event", []) == 0


def test_a_file_written_from_the_bodies_stops_between_blocks_when_asked(tmp_path):
    bodies = []
    for event in EVENTS:
        body = bytearray()
        default_codec().write_body(event, body)
        bodies.append(bytes(body))
    asked = []
    stop = lambda: asked.append(len(asked)) or len(asked) == 2  # noqa: E731 - yes at its second question
    path = tmp_path / "stopped.avro"
    with open(path, "wb") as out:
        count = container.write_encoded(out, "Event", iter(bodies), stop=stop)
    assert len(asked) == 2 and len(blocks_of(path.read_bytes())) == 2  # asked after each full block
    assert list(container.read(path, "Event")) == EVENTS[:count] and 0 < count < len(EVENTS)
