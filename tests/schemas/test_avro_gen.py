"""The generated Avro schemas: their shape, and the committed .avsc files kept in sync."""

import json
import shutil

import pytest

from schemas import avro_gen, catalogue, evolution
from schemas.events import EVENT_TYPES
from schemas.shape import NAMESPACE, OUTPUT_TYPES, TOP_LEVEL_NAMES, body_fields, header_fields


def field(record, name):
    return next(f for f in record["fields"] if f["name"] == name)


def test_the_committed_avsc_files_are_what_the_dataclasses_generate():
    stale = avro_gen.plan()
    assert stale == {}, "run `python -m schemas.avro_gen` and commit: " + ", ".join(map(str, stale))


def test_check_mode_reports_an_out_of_date_file_and_writes_nothing(tmp_path, capsys):
    shutil.copytree(catalogue.AVRO_DIR, tmp_path / "avro")
    (tmp_path / "avro" / "Alert.avsc").write_text("{}\n")
    assert avro_gen.main(["--check", "--dir", str(tmp_path / "avro")]) == 1
    assert "Alert.avsc" in capsys.readouterr().out
    assert (tmp_path / "avro" / "Alert.avsc").read_text() == "{}\n"
    assert avro_gen.main(["--dir", str(tmp_path / "avro")]) == 0
    assert avro_gen.main(["--check", "--dir", str(tmp_path / "avro")]) == 0


def test_event_is_one_envelope_with_a_body_union_of_one_record_per_kind():
    schema = avro_gen.event_schema()
    assert (schema["name"], schema["namespace"]) == ("Event", NAMESPACE)
    assert [f["name"] for f in schema["fields"]] == [f.name for f in header_fields()] + ["body"]
    members = field(schema, "body")["type"]
    assert [m["name"] for m in members] == list(EVENT_TYPES)
    received = members[list(EVENT_TYPES).index("MessageReceived")]
    assert [f["name"] for f in received["fields"]] == [f.name for f in body_fields(EVENT_TYPES["MessageReceived"])]
    assert field(schema, "event_id") not in received["fields"], "a kind's record holds only its own fields"


def test_outputs_are_top_level_records_of_their_own():
    schemas = avro_gen.generate()
    assert tuple(schemas) == TOP_LEVEL_NAMES
    for name, cls in OUTPUT_TYPES.items():
        assert schemas[name]["name"] == name and schemas[name]["namespace"] == NAMESPACE
        assert schemas[name]["doc"] == cls.__doc__.strip()


def test_every_field_has_its_doc_and_the_avro_type_of_its_python_type():
    schema = avro_gen.event_schema()
    received = field(schema, "body")["type"][list(EVENT_TYPES).index("MessageReceived")]
    assert field(schema, "event_time_ms") == {
        "name": "event_time_ms", "type": {"type": "long", "logicalType": "timestamp-millis"},
        "doc": "when it happened, by the emitting node's clock"}
    assert field(received, "submitted_at_ms")["type"] == ["null", {"type": "long", "logicalType": "timestamp-millis"}]
    assert field(received, "submitted_at_ms")["default"] is None
    assert field(received, "recipients")["type"]["type"] == "array"
    assert field(received, "size_bytes")["type"] == "long"
    assert field(avro_gen.generate()["DeadLetter"], "original")["type"] == "bytes"
    assert field(avro_gen.generate()["DeadLetter"], "key")["type"] == ["null", "bytes"]

    def all_fields(node):
        if isinstance(node, dict):
            yield from node.get("fields", ())
            for value in node.values():
                yield from all_fields(value)
        elif isinstance(node, list):
            for item in node:
                yield from all_fields(item)

    for schema in avro_gen.generate().values():
        assert all(f.get("doc") for f in all_fields(schema))


def test_enums_default_to_their_first_symbol_and_fields_keep_python_defaults():
    node_started = field(avro_gen.event_schema(), "body")["type"][0]
    mode = field(node_started, "mode")
    assert mode["default"] == "EXCHANGE_2013"
    assert mode["type"]["symbols"][0] == mode["type"]["default"] == "UNKNOWN"
    assert field(node_started, "shadow_redundancy_enabled")["default"] is True
    assert "default" not in field(node_started, "queue_db_id")


def test_named_types_are_defined_once_then_referenced_by_name():
    text = json.dumps(avro_gen.event_schema())
    assert text.count('"name": "MessageRef"') == 1
    assert text.count('"name": "SiteLocality"') == 1
    members = {m["name"]: m for m in field(avro_gen.event_schema(), "body")["type"]}
    assert field(members["SideEffectGenerated"], "parent")["type"] == "MessageRef"
    assert field(members["ShadowCopyAcknowledged"], "locality")["type"] == "SiteLocality"


def test_a_compatible_change_becomes_the_next_history_version(tmp_path):
    from tests.schemas.versions import previous_event

    avro = tmp_path / "avro"
    shutil.copytree(catalogue.AVRO_DIR, avro)
    latest = catalogue.default().current("Event").version
    (avro / "history" / f"Event.v{latest}.avsc").write_text(avro_gen.render(previous_event().schema))
    changes = avro_gen.plan(avro)
    assert list(changes) == [avro / "history" / f"Event.v{latest + 1}.avsc"]
    assert changes[avro / "history" / f"Event.v{latest + 1}.avsc"] == (avro / "Event.avsc").read_text()


def test_a_change_that_breaks_the_policy_is_refused(tmp_path):
    avro = tmp_path / "avro"
    shutil.copytree(catalogue.AVRO_DIR, avro)
    latest = catalogue.default().current("Alert").version
    released = json.loads((avro / "history" / f"Alert.v{latest}.avsc").read_text())
    released["fields"].append({"name": "ticket", "type": "string", "doc": "a field the dataclass no longer has"})
    (avro / "history" / f"Alert.v{latest}.avsc").write_text(avro_gen.render(released))
    with pytest.raises(evolution.PolicyError, match=r"Alert\.ticket: removed"):
        avro_gen.plan(avro)
    assert avro_gen.main(["--dir", str(avro)]) == 1
    assert not (avro / "history" / f"Alert.v{latest + 1}.avsc").exists()
