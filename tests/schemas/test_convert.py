"""JSON Lines <-> Avro container files, both ways, from functions and from the command line."""

import json

import fastavro
import pytest

from schemas import catalogue, convert, jsonl
from schemas.container import ContainerError
from schemas.convert import ConversionError
from schemas.datum import to_datum
from tests.schemas.samples import sample_alert, sample_events
from tests.schemas.versions import previous_event

EVENTS = list(sample_events().values())


def write_jsonl(path, records):
    with open(path, "w") as out:
        jsonl.write(records, out)
    return path


def test_jsonl_to_avro_to_jsonl_gives_the_same_text(tmp_path):
    source = write_jsonl(tmp_path / "day.jsonl", EVENTS)
    assert convert.convert(source, tmp_path / "day.avro") == len(EVENTS)
    assert convert.convert(tmp_path / "day.avro", tmp_path / "back.ndjson") == len(EVENTS)
    assert (tmp_path / "back.ndjson").read_text() == source.read_text()


def test_the_avro_file_carries_the_current_event_schema_and_its_records(tmp_path):
    convert.convert(write_jsonl(tmp_path / "day.jsonl", EVENTS), tmp_path / "day.avro")
    with open(tmp_path / "day.avro", "rb") as data:
        reader = fastavro.reader(data, return_record_name=True, return_record_name_override=True)
        assert catalogue.fingerprint(reader.writer_schema) == catalogue.default().current("Event").fingerprint
        records = list(reader)
    assert records[2]["body"][0] == "shadowtwin.v1.MessageReceived"
    assert records[2]["body"][1]["size_bytes"] == 48_213


def test_outputs_convert_with_their_own_schema(tmp_path):
    source = write_jsonl(tmp_path / "alerts.jsonl", [sample_alert(), sample_alert()])
    assert convert.convert(source, tmp_path / "alerts.avro") == 2
    with open(tmp_path / "alerts.avro", "rb") as data:
        assert fastavro.reader(data).writer_schema["name"] == "shadowtwin.v1.Alert"
    convert.convert(tmp_path / "alerts.avro", tmp_path / "back.jsonl")
    assert (tmp_path / "back.jsonl").read_text() == source.read_text()


def test_an_avro_file_of_an_older_version_reads_into_the_current_one(tmp_path):
    old = previous_event()
    received = sample_events()["MessageReceived"]
    with open(tmp_path / "old.avro", "wb") as out:
        fastavro.writer(out, fastavro.parse_schema(old.schema), [to_datum(received)])
    convert.convert(tmp_path / "old.avro", tmp_path / "old.jsonl")
    line = json.loads((tmp_path / "old.jsonl").read_text())
    assert received.sender_supports_shadow is False
    assert line["sender_supports_shadow"] is True, "the field the old version lacked takes its default"
    assert line["size_bytes"] == received.size_bytes


def test_one_file_holds_one_schema(tmp_path):
    source = write_jsonl(tmp_path / "mixed.jsonl", [EVENTS[0], sample_alert()])
    with pytest.raises(ConversionError, match="record 2 is Alert, not Event like the first"):
        convert.convert(source, tmp_path / "mixed.avro")
    assert not (tmp_path / "mixed.avro").exists()
    assert list(tmp_path.iterdir()) == [source], "no temporary file is left behind"


def test_a_bad_line_stops_the_conversion_and_leaves_the_target_alone(tmp_path):
    (tmp_path / "day.avro").write_bytes(b"previous content")
    source = tmp_path / "day.jsonl"
    source.write_text(jsonl.dumps(EVENTS[0]) + "\n" + '{"kind": "ClockTick"}\n')
    with pytest.raises(jsonl.JsonlError, match=r"day.jsonl:2: ClockTick.event_id: missing"):
        convert.convert(source, tmp_path / "day.avro")
    assert (tmp_path / "day.avro").read_bytes() == b"previous content"


def test_a_file_that_is_not_avro_is_named(tmp_path):
    (tmp_path / "x.avro").write_bytes(b"\x00" * 20)
    with pytest.raises(ContainerError, match="x.avro: not an Avro container file"):
        convert.convert(tmp_path / "x.avro", tmp_path / "x.jsonl")


def test_the_command_line_picks_the_direction_from_the_suffixes(tmp_path, capsys):
    source = write_jsonl(tmp_path / "day.jsonl", EVENTS)
    assert convert.main([str(source), str(tmp_path / "day.avro")]) == 0
    assert f"{len(EVENTS)} records" in capsys.readouterr().out
    assert convert.main([str(tmp_path / "day.avro"), str(tmp_path / "day.txt")]) == 1
    assert "cannot tell the direction" in capsys.readouterr().err
    assert convert.main([str(tmp_path / "missing.jsonl"), str(tmp_path / "m.avro")]) == 1
    assert "No such file" in capsys.readouterr().err
