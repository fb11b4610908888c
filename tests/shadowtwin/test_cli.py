"""The `shadowtwin` command as a person runs it: help everywhere, the demo end to end."""

import re
import subprocess
import sys

import pytest

COMMANDS = [[], ["kafka"], ["topics"], ["jars"], ["twin"], ["whatif"], ["demo"], ["probe"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "top")
def test_every_subcommand_has_help(command):
    result = subprocess.run([sys.executable, "-m", "shadowtwin.cli", *command, "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    assert "usage: shadowtwin" in result.stdout


def test_every_command_at_every_level_says_what_it_does_under_its_usage():
    """`kafka status --help` printed its usage and options only, `kafka tool --help` the description of `kafka`
    ('Start, stop or inspect the embedded broker; or run ...'), and `lab kill --help` nothing of a crash."""
    import argparse

    from shadowtwin.cli import parser

    def commands(command: argparse.ArgumentParser, path: tuple[str, ...] = ()):
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield path + (name,), sub
                    yield from commands(sub, path + (name,))

    found = dict(commands(parser()))
    assert [" ".join(path) for path, command in found.items() if not command.description] == []
    assert found[("kafka", "status")].description == "Is the embedded broker running (exit 3 if not)."
    assert found[("kafka", "tool")].description.startswith("Run one of Apache Kafka's command-line tools")


def test_whatif_help_names_every_file_out_writes(tmp_path):
    """--help used to say 'write the alerts and commands'; the folder holds four files and a folder."""
    from tests.shadowtwin.test_whatif import outage_recording

    outage_recording(tmp_path / "day.jsonl")
    run = subprocess.run([sys.executable, "-m", "shadowtwin.cli", "whatif", str(tmp_path / "day.jsonl"), "--out",
                          str(tmp_path / "out"), "--compare", "ShadowResubmitTimeSpan=01:00:00"], capture_output=True)
    assert run.returncode == 0, run.stderr
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    helped = " ".join(subprocess.run([sys.executable, "-m", "shadowtwin.cli", "whatif", "--help"], capture_output=True,
                                     text=True).stdout.split())
    assert written == ["alerts.jsonl", "commands.jsonl", "compare", "dead_letters.jsonl", "state.jsonl"]
    assert all(name in helped for name in written), helped


def test_a_bad_configuration_is_reported_not_raised(tmp_path):
    conf = tmp_path / "bad.toml"
    conf.write_text("[kafka]\nbootstrap = 'x'\n")
    result = subprocess.run([sys.executable, "-m", "shadowtwin.cli", "--conf", str(conf), "kafka", "status"],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert "kafka.bootstrap: unknown key" in result.stderr


def test_demo_tells_the_outage_story_from_what_it_reads_back_from_kafka(kafka_bootstrap, tmp_path):
    conf = tmp_path / "demo.toml"
    conf.write_text(
        f'[kafka]\nbootstrap_servers = "{kafka_bootstrap}"\n'
        f'[spark]\ncheckpoint_dir = "{tmp_path / "checkpoints"}"\n'
        '[topics]\nevents = "demo.events"\nalerts = "demo.alerts"\ncommands = "demo.commands"\n'
        'dead_letters = "demo.dead-letters"\n'
        '[demo]\nservers = 3\ncrash_after_seconds = 6\ncrash_for_seconds = 20\nbacklog_seconds = 4\n'
        'shadow_resubmit_time_span = "00:00:08"\nrun_seconds = 330\n'
    )
    result = subprocess.run([sys.executable, "-m", "shadowtwin.cli", "--conf", str(conf), "demo"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    out = result.stdout
    assert "PRIMARY_FAILED_SHADOWS_PROMOTED: " in out and "has had no answer from mbx02" in out
    assert "COMMAND " in out and "resubmit <" in out
    assert "DUPLICATE_DELIVERY_EXPECTED: mbx02 came back with the same queue database" in out
    assert out.index("shutting down ...") > out.index("DUPLICATE_DELIVERY_EXPECTED"), "the story ends, then the demo"


def test_record_help_shows_the_topic_and_the_recording_it_requires():
    """`record --help` showed `topic [file]`, the recording optional, where the README and its errors say
    `record TOPIC FILE`: FILE is optional to argparse only so that the command can say which is missing (c43d4da).
    The usage is written out, so every option of record's own (not Kafka's) must be in it."""
    result = subprocess.run([sys.executable, "-m", "shadowtwin.cli", "record", "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    usage = " ".join(result.stdout.split("\n\n")[0].split())
    assert usage == ("usage: shadowtwin record [KAFKA OPTIONS] TOPIC FILE [--from-beginning] [--seconds SECONDS]"
                     " [--count COUNT] [--force]")
    assert [line.split()[0] for line in result.stdout.split("positional arguments:\n")[1].split("\n\n")[0].splitlines()
            ] == ["TOPIC", "FILE"]
    own = re.findall(r"^  (--[\w-]+)", result.stdout.split("\noptions:\n")[1].split("\n\n")[0], re.MULTILINE)
    assert own and all(f"[{o}" in usage for o in own), own  # (-h, --help aside)
