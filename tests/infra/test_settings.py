"""Settings: defaults, the shipped file, and refusals that name the key at fault."""

import dataclasses

import pytest

from infra.settings import PROJECT_ROOT, ConfigError, Settings, load_settings


def write(tmp_path, text):
    path = tmp_path / "conf.toml"
    path.write_text(text)
    return path


def test_shipped_file_states_the_defaults():
    assert load_settings(env={}) == Settings()


def test_an_empty_file_gives_the_defaults(tmp_path):
    assert load_settings(write(tmp_path, ""), env={}) == Settings()


def test_settings_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Settings().kafka.bootstrap_servers = "elsewhere:9092"  # type: ignore[misc]


def test_overrides_and_relative_paths(tmp_path):
    settings = load_settings(write(tmp_path, '[kafka.embedded]\nport = 29092\ndata_dir = "var/k"\n'), env={})
    assert settings.kafka.embedded.port == 29092
    assert settings.kafka.embedded.data_dir == PROJECT_ROOT / "var/k"


def test_environment_names_the_bootstrap_servers(tmp_path):
    settings = load_settings(write(tmp_path, ""), env={"KAFKA_BOOTSTRAP_SERVERS": "k1:9092,k2:9092"})
    assert settings.kafka.bootstrap_servers == "k1:9092,k2:9092"


def test_environment_names_the_file(tmp_path):
    path = write(tmp_path, '[spark]\nmaster = "spark://h:7077"\n')
    assert load_settings(env={"SHADOWTWIN_CONF": str(path)}).spark.master == "spark://h:7077"


def test_unknown_key_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"kafka:embedded.*unknown key\(s\) prot"):
        load_settings(write(tmp_path, "[kafka.embedded]\nprot = 1\n"), env={})


def test_wrong_type_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"topics:events_partitions: expected int, got 'four'"):
        load_settings(write(tmp_path, '[topics]\nevents_partitions = "four"\n'), env={})


def test_whole_numbers_pass_for_floats_but_booleans_are_not_numbers(tmp_path):
    assert load_settings(write(tmp_path, "[demo]\nmessages_per_second = 5\n"), env={}).demo.messages_per_second == 5.0
    with pytest.raises(ConfigError, match=r"demo:servers: expected int, got True"):
        load_settings(write(tmp_path, "[demo]\nservers = true\n"), env={})


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "absent.toml", env={})
