"""SIGTERM is handled like Ctrl-C by the long-running producer commands: they stop at a safe point,
what they write stays valid, and they exit 130 after SIGINT, 143 after SIGTERM (0 when a bounded
run finishes). Real signals to real processes."""

import os
import signal
import subprocess
import sys
import time

import pytest

from producers.recording import read_events, write_events
from producers.replayer import replay
from producers.synthetic import Workload, generate
from schemas import events as ev
from tests.producers.relay.conftest import make_lab, read_topic, wait_until  # noqa: F401 - make_lab: a fixture
from tests.producers.test_mtl import EX01

CLI = [sys.executable, "-m", "shadowtwin.cli"]


def start(kafka_bootstrap, *args) -> subprocess.Popen:
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([*CLI, *map(str, args)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def first_line(process: subprocess.Popen, containing: str, timeout_s: float = 60) -> str:
    """Read stdout until a line containing `containing` (the process is working)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if containing in line:
            return line
        if not line and process.poll() is not None:
            break
    raise AssertionError(f"no line with {containing!r}; exit {process.poll()}: {process.stderr.read()[-2000:]}")


def stopped(process: subprocess.Popen, signum: int) -> tuple[int, str, str]:
    process.send_signal(signum)
    out, err = process.communicate(timeout=60)
    assert "Traceback" not in err, err[-3000:]
    return process.returncode, out, err


@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_record_stops_on_a_signal_with_a_valid_file_of_what_it_got(kafka_bootstrap, topics, tmp_path, signum, status):
    events = list(generate(Workload(servers=4, duration_ms=20 * 60_000)))
    write_events(tmp_path / "in.avro", events)
    out = tmp_path / "out.avro"
    # An unbounded recording (from the topic's end on), so the signal cannot come after it finished on
    # its own: events are published until it has written its first record.
    process = start(kafka_bootstrap, "record", topics.events, out)
    assert wait_until(lambda: replay(kafka_bootstrap, topics.events, tmp_path / "in.avro").sent > 0 and out.exists(), 60)
    time.sleep(0.5)  # mid-recording
    code, said, _ = stopped(process, signum)
    assert code == status
    back = list(read_events(out))  # a complete file: no ContainerError
    assert f"recorded {len(back)} events" in said
    assert len(back) > 0 and set(e.event_id for e in back) <= {e.event_id for e in events}


def test_replay_stops_on_sigterm_after_flushing_what_it_sent(kafka_bootstrap, topics, tmp_path):
    events = list(generate(Workload(servers=4, duration_ms=60 * 60_000)))
    write_events(tmp_path / "day.avro", events)
    process = start(kafka_bootstrap, "replay", tmp_path / "day.avro", "--speed", "60", "--to", topics.events)
    first_line(process, "events/s")
    code, said, _ = stopped(process, signal.SIGTERM)
    assert code == 143 and "interrupted after sending" in said
    sent = int(said.split("interrupted after sending ")[1].split()[0])
    assert 0 < sent < len(events)
    assert f"interrupted after sending {sent} events of {len(events):,} ({len(events) - sent:,} not sent)" in said
    assert len(read_topic(kafka_bootstrap, topics.events)) == sent, "every event it counted was acknowledged"


def test_a_bounded_replay_exits_0(kafka_bootstrap, topics, tmp_path):
    write_events(tmp_path / "day.jsonl", generate(Workload(servers=2, duration_ms=60_000)))
    process = start(kafka_bootstrap, "replay", tmp_path / "day.jsonl", "--to", topics.events)
    process.communicate(timeout=60)
    assert process.returncode == 0


def test_ingest_follow_stops_on_sigterm(kafka_bootstrap, topics, tmp_path):
    log = tmp_path / "MSGTRK20261122-1.LOG"
    log.write_bytes(EX01.read_bytes())
    conf = tmp_path / "topics.toml"
    conf.write_text(f'[topics]\nevents = "{topics.events}"\ndead_letters = "{topics.dead_letters}"\n')
    process = start(kafka_bootstrap, "--conf", conf, "ingest", "exchange-mtl", log, "--follow")
    assert wait_until(lambda: len(read_topic(kafka_bootstrap, topics.events, seconds=1, max_s=5)) > 0, 30)
    code, said, _ = stopped(process, signal.SIGTERM)
    assert code == 143 and " lines: " in said


def test_simulate_live_stops_on_sigint(kafka_bootstrap, topics, tmp_path):
    conf = tmp_path / "topics.toml"  # the nodes listen to the commands topic, which must exist
    conf.write_text(f'[topics]\nevents = "{topics.events}"\ncommands = "{topics.commands}"\n')
    process = start(kafka_bootstrap, "--conf", conf, "simulate", "--live", "--speed", "60", "--topic", topics.events,
                    "--truth", tmp_path / "truth.jsonl")
    first_line(process, "events/s")
    code, said, _ = stopped(process, signal.SIGINT)
    assert code == 130 and "interrupted after" in said


@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_lab_node_stops_cleanly_on_a_signal(make_lab, kafka_bootstrap, topics, signum, status):
    lab = make_lab({"ex01": "dag1"})
    lab.up()
    pid = lab.pid("ex01")
    process = lab._children[pid]
    os.kill(pid, signum)
    assert process.wait(timeout=30) == status
    stopping = [e for e in read_topic(kafka_bootstrap, topics.events) if isinstance(e, ev.NodeStopping)]
    assert [e.reason for e in stopping] == [signal.Signals(signum).name]
    lab.down()


@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_simulate_to_kafka_stops_on_a_signal_with_every_event_it_counted_acknowledged(kafka_bootstrap, topics,
                                                                                       tmp_path, signum, status):
    """As fast as possible, the events are published by a second process (on two cores): the signal
    stops the simulation after a batch, and what it sent is published whole before the count is said."""
    process = start(kafka_bootstrap, "simulate", "--to-kafka", "--duration", "1.00:00:00", "--topic", topics.events,
                    "--truth", tmp_path / "truth.jsonl")
    first_line(process, "events/s")
    code, said, _ = stopped(process, signum)
    assert code == status and "interrupted after" in said
    sent = int(said.split("interrupted after ")[1].split()[0].replace(",", ""))
    back = read_topic(kafka_bootstrap, topics.events, until=lambda found: len(found) >= sent, max_s=180)
    assert len(back) == sent > 0 and len({e.event_id for e in back}) == sent
