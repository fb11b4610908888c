"""The `shadowtwin` command as a person runs it: help everywhere, the demo end to end."""

import subprocess
import sys

import pytest

COMMANDS = [[], ["kafka"], ["topics"], ["jars"], ["demo"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "top")
def test_every_subcommand_has_help(command):
    result = subprocess.run([sys.executable, "-m", "shadowtwin.cli", *command, "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    assert "usage: shadowtwin" in result.stdout


def test_a_bad_configuration_is_reported_not_raised(tmp_path):
    conf = tmp_path / "bad.toml"
    conf.write_text("[kafka]\nbootstrap = 'x'\n")
    result = subprocess.run([sys.executable, "-m", "shadowtwin.cli", "--conf", str(conf), "kafka", "status"],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert "unknown key(s) bootstrap" in result.stderr


def test_demo_prints_the_alert_it_reads_back_from_kafka(kafka_bootstrap, tmp_path):
    conf = tmp_path / "demo.toml"
    conf.write_text(
        f'[kafka]\nbootstrap_servers = "{kafka_bootstrap}"\n'
        f'[spark]\ncheckpoint_dir = "{tmp_path / "checkpoints"}"\n'
        f'[topics]\nevents = "demo.events"\nalerts = "demo.alerts"\ncommands = "demo.commands"\n'
        f'dead_letters = "demo.dead-letters"\n'
        '[demo]\nnodes = ["a1", "a2"]\nsilent_node = "a2"\nsilence_after_seconds = 3\n'
        'quiet_timeout_seconds = 3\nevent_interval_seconds = 0.5\nrun_seconds = 120\n'
    )
    result = subprocess.run([sys.executable, "-m", "shadowtwin.cli", "--conf", str(conf), "demo"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert 'ALERT from Kafka: {"node":"a2"' in result.stdout
    assert "shutting down" in result.stdout
