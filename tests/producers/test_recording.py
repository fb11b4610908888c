"""Recordings on disk: what is written is read back, in order; Avro files are containers any Avro reader reads."""

import dataclasses
import itertools
from pathlib import Path
from typing import Iterator

import fastavro
import pytest

from schemas import container
from producers.recording import count_events, read_events, write_events
from producers.synthetic import Workload, generate
from schemas import binary, catalogue
from schemas.datum import from_datum, to_datum
from schemas.events import NodeStopping
from schemas.validate import ValidationError
from tests.schemas.samples import sample_alert, sample_events
from tests.schemas.versions import previous_event

SAMPLES = list(sample_events().values())
CURRENT = catalogue.default().current("Event")


def synthetic(minutes: float) -> list:
    return list(generate(Workload(servers=4, duration_ms=int(minutes * 60_000))))


def read_with_fastavro(path: Path) -> list:
    with open(path, "rb") as data:
        return [from_datum("Event", datum) for datum in fastavro.reader(
            data, CURRENT.schema, return_record_name=True, return_record_name_override=True)]


def write_with_fastavro(path: Path, schema: dict, events: list, codec: str = "deflate") -> Path:
    with open(path, "wb") as out:
        fastavro.writer(out, fastavro.parse_schema(schema), [to_datum(e) for e in events], codec=codec)
    return path


@pytest.mark.parametrize("suffix", [".avro", ".jsonl", ".ndjson"])
def test_a_recording_reads_back_as_written_every_kind_in_order(tmp_path, suffix):
    events = SAMPLES + synthetic(2) + SAMPLES
    path = tmp_path / f"day{suffix}"
    assert write_events(path, iter(events)) == len(events)
    back = list(read_events(path))
    assert back == events
    assert [repr(e) for e in back] == [repr(e) for e in events], "same values, same types"


def test_an_avro_recording_is_a_container_fastavro_reads_with_the_event_schema(tmp_path):
    path = tmp_path / "day.avro"
    write_events(path, SAMPLES)
    with open(path, "rb") as data:
        reader = fastavro.reader(data)
        assert reader.codec == "deflate"
        assert catalogue.fingerprint(reader.writer_schema) == CURRENT.fingerprint
    assert read_with_fastavro(path) == SAMPLES


def test_a_long_recording_is_written_in_several_blocks(tmp_path):
    events = synthetic(10)
    path = tmp_path / "day.avro"
    write_events(path, events)
    with open(path, "rb") as data:
        counts = [block.num_records for block in fastavro.block_reader(data)]
    assert len(counts) > 2 and sum(counts) == len(events)
    assert read_with_fastavro(path) == events
    assert list(read_events(path)) == events
    assert count_events(path) == len(events), "counted from the blocks' counts"
    write_events(tmp_path / "day.jsonl", events)
    assert count_events(tmp_path / "day.jsonl") == len(events)


@pytest.mark.parametrize("codec", ["deflate", "null"])
def test_a_file_written_by_fastavro_is_read(tmp_path, codec):
    events = SAMPLES + synthetic(1)
    path = write_with_fastavro(tmp_path / "day.avro", CURRENT.schema, events, codec)
    assert list(read_events(path)) == events


def test_a_file_of_an_older_version_is_read_into_the_current_schema(tmp_path):
    received = sample_events()["MessageReceived"]
    assert received.sender_supports_shadow is False
    path = write_with_fastavro(tmp_path / "old.avro", previous_event().schema, [received, SAMPLES[0]])
    (old_received, started) = read_events(path)
    assert old_received.sender_supports_shadow is True, "the field the old version lacked takes its default"
    assert old_received.size_bytes == received.size_bytes and started == SAMPLES[0]


def test_a_block_the_compiled_reader_refuses_is_read_as_fastavro_reads_it(tmp_path):
    event = dataclasses.replace(sample_events()["AcknowledgedToSender"], redundant=False)
    path = write_with_fastavro(tmp_path / "odd.avro", CURRENT.schema, [SAMPLES[0], event], "null")
    data = bytearray(path.read_bytes())
    assert data[-container.SYNC_SIZE - 1] == 0, "the file ends with the boolean `redundant`, then the sync marker"
    data[-container.SYNC_SIZE - 1] = 2  # no Avro boolean, but fastavro reads it as true
    path.write_bytes(data)
    with open(path, "rb") as file:
        (block,) = fastavro.block_reader(file)
        body, count = block.bytes_.getvalue(), block.num_records
    with pytest.raises((IndexError, ValueError)):
        read_all(body, count)
    back = list(read_events(path))
    assert back == read_with_fastavro(path)
    assert back == [SAMPLES[0], dataclasses.replace(event, redundant=True)]


def read_all(body: bytes, count: int) -> list:
    """The `count` events of a block, by the compiled reader."""
    read, pos, events = binary.top_level_reader("Event"), 0, []
    for _ in range(count):
        event, pos = read(body, pos)
        events.append(event)
    return events


def test_an_empty_recording_is_a_valid_file_of_no_events(tmp_path):
    assert write_events(tmp_path / "none.avro", []) == 0
    assert read_with_fastavro(tmp_path / "none.avro") == []
    assert list(read_events(tmp_path / "none.avro")) == []


def test_only_valid_events_are_written(tmp_path):
    with pytest.raises(TypeError, match="record 2 is Alert, not an event"):
        write_events(tmp_path / "mixed.avro", [SAMPLES[0], sample_alert()])
    invalid = NodeStopping(event_id="e", event_time_ms=1, node="n", primary_server=b"p")
    with pytest.raises(ValidationError, match=r"^NodeStopping\.primary_server: expected str, got bytes b'p'$"):
        write_events(tmp_path / "invalid.avro", [invalid])


def test_reading_is_lazy_and_in_file_order(tmp_path):
    never_opened = read_events(tmp_path / "missing.avro")
    assert isinstance(never_opened, Iterator), "nothing is read before the first event is asked for"
    with pytest.raises(FileNotFoundError):
        next(never_opened)
    path = tmp_path / "day.avro"
    write_events(path, SAMPLES)
    assert list(itertools.islice(read_events(path), 3)) == SAMPLES[:3]


@pytest.mark.parametrize("suffix", [".AVRO", ".JSONL", ".NDJson"])
def test_a_recording_suffix_in_capitals_names_its_format_too(tmp_path, suffix):
    """DAY.AVRO as Windows tools name files: before, 'a recording ends in .jsonl, .ndjson, .avro'."""
    path = tmp_path / f"DAY{suffix}"
    assert write_events(path, SAMPLES) == len(SAMPLES)
    assert list(read_events(path)) == SAMPLES and count_events(path) == len(SAMPLES)
    assert path.read_bytes().startswith(b"Obj\x01") == (suffix == ".AVRO")


@pytest.mark.parametrize("name", ["day.csv", "day"])
def test_a_recording_is_named_by_its_format(tmp_path, name):
    with pytest.raises(ValueError, match="a recording ends in .jsonl, .ndjson, .avro"):
        write_events(tmp_path / name, SAMPLES)
    with pytest.raises(ValueError, match="a recording ends in .jsonl, .ndjson, .avro"):
        next(read_events(tmp_path / name))


def test_events_encoded_already_are_written_as_the_same_avro_file_and_refused_for_json_lines(tmp_path):
    events = list(sample_events().values())
    write_events(tmp_path / "made.avro", events, sync=bytes(16))
    bodies = [binary.arguments_encoder(type(e))(**{f.name: getattr(e, f.name) for f in dataclasses.fields(e)})
              for e in events]
    write_events(tmp_path / "encoded.avro", bodies, sync=bytes(16), encoded=True)
    assert (tmp_path / "encoded.avro").read_bytes() == (tmp_path / "made.avro").read_bytes()
    with pytest.raises(ValueError, match="Avro bodies go to an Avro file"):
        write_events(tmp_path / "encoded.jsonl", bodies, encoded=True)
