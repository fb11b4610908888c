"""The catalogue of writer schemas: fingerprints, released versions, consistency of the files."""

import json
import shutil

import pytest

from schemas import catalogue
from schemas.catalogue import CatalogueError
from schemas.shape import TOP_LEVEL_NAMES


def test_fingerprint_is_crc64_avro_of_the_canonical_form_little_endian():
    # The Avro specification's test vector: the fingerprint of "null" is 7195948357588979594.
    assert catalogue.fingerprint("null") == (7195948357588979594).to_bytes(8, "little")


def test_fingerprints_ignore_docs_and_logical_types_but_not_structure():
    schema = {"type": "record", "name": "R", "fields": [{"name": "t", "type": "long"}]}
    annotated = {"type": "record", "name": "R", "doc": "d",
                 "fields": [{"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}, "doc": "x"}]}
    renamed = {"type": "record", "name": "R", "fields": [{"name": "u", "type": "long"}]}
    assert catalogue.fingerprint(schema) == catalogue.fingerprint(annotated)
    assert catalogue.fingerprint(schema) != catalogue.fingerprint(renamed)


def test_every_current_schema_is_a_released_version():
    shipped = catalogue.default()
    for name in TOP_LEVEL_NAMES:
        current = shipped.current(name)
        assert shipped.lookup(current.fingerprint).name == name
        assert shipped.versions(name)[-1].fingerprint == current.fingerprint, "the current version is the latest"
    assert len({v.fingerprint for v in shipped.all_versions()}) == len(shipped.all_versions())


def test_a_current_file_missing_from_history_is_refused(tmp_path):
    avro = tmp_path / "avro"
    shutil.copytree(catalogue.AVRO_DIR, avro)
    schema = json.loads((avro / "Alert.avsc").read_text())
    schema["fields"].append({"name": "extra", "type": "string", "default": ""})
    (avro / "Alert.avsc").write_text(json.dumps(schema))
    with pytest.raises(CatalogueError, match="Alert.avsc is not in"):
        catalogue.load(avro)


def test_a_gap_in_the_versions_is_refused(tmp_path):
    avro = tmp_path / "avro"
    shutil.copytree(catalogue.AVRO_DIR, avro)
    (avro / "history" / "Alert.v1.avsc").rename(avro / "history" / "Alert.v2.avsc")
    with pytest.raises(CatalogueError, match=r"Alert versions \[2, 3, 4\] do not run 1..3"):
        catalogue.load(avro)


def test_with_versions_adds_writers_and_keeps_the_current_reader():
    from tests.schemas.versions import next_event

    extended = catalogue.default().with_versions(next_event())
    assert extended.lookup(next_event().fingerprint) == next_event()
    assert extended.current("Event") == catalogue.default().current("Event")
    assert catalogue.default().lookup(next_event().fingerprint) is None
