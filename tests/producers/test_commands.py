"""The producer commands as a person meets them: help on each, bad arguments refused."""

import subprocess
import sys

import pytest

from producers.replayer import parse_speed


@pytest.mark.parametrize("command", [["record"], ["replay"], ["ingest"]], ids=" ".join)
def test_each_producer_command_has_help(command):
    result = subprocess.run([sys.executable, "-m", "shadowtwin.cli", *command, "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and f"usage: shadowtwin {command[0]}" in result.stdout


def test_speed_is_max_or_a_positive_number():
    assert parse_speed("max") is None and parse_speed("60") == 60.0
    with pytest.raises(ValueError):
        parse_speed("0")
    assert parse_speed("0.001") == 0.001
    with pytest.raises(ValueError, match="too slow"):
        parse_speed("1e-300")  # its waits would overflow the clock


def test_ingest_of_a_missing_file_says_so(tmp_path):
    result = subprocess.run([sys.executable, "-m", "shadowtwin.cli", "ingest", "exchange-mtl", str(tmp_path / "no.LOG")],
                            capture_output=True, text=True)
    assert result.returncode == 2 and "no such file" in result.stderr
