"""Honest producers: every publishing command counts the broker's acknowledgements; a dead broker
ends the command within the delivery timeout, non-zero, saying how many records were not acknowledged;
a topic the broker does not have ends it at once, naming the topic and the broker."""

import dataclasses
import os
import re
import itertools
import subprocess
import sys
import threading
import time

import pytest

from producers.mtl_ingest import KafkaSink, ingest
from producers.recording import write_events
from producers.publisher import Deliveries
from producers.replayer import ProgressLines, publish, replay
from producers.synthetic import Workload, generate
from schemas.codec import encode
from schemas.events import MessageReceived
from tests.conftest import free_port
from tests.producers.relay.conftest import read_topic
from tests.producers.test_mtl import EX01
from tests.producers.test_signals import start

CLI = [sys.executable, "-m", "shadowtwin.cli"]
TIMEOUT_S = 3


def closed_port_conf(tmp_path):
    """Settings whose broker address nobody listens on, with a short delivery timeout."""
    conf = tmp_path / "dead.toml"
    conf.write_text(f'[kafka]\nbootstrap_servers = "127.0.0.1:{free_port()}"\ndelivery_timeout_seconds = {TIMEOUT_S}\n')
    return conf


def run_against_dead_broker(tmp_path, *args):
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    started = time.monotonic()
    result = subprocess.run([*CLI, "--conf", str(closed_port_conf(tmp_path)), *map(str, args)], env=env,
                            capture_output=True, text=True, timeout=120)
    return result, time.monotonic() - started


def assert_none_acknowledged(result, seconds, count=None):
    assert result.returncode == 1, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert " records were not acknowledged by Kafka at 127.0.0.1:" in line and "Message timed out" in line
    if count is not None:
        assert line.startswith(f"{count} of {count} records")
    assert seconds < TIMEOUT_S + 15, "bounded by the delivery timeout"


def test_replay_to_a_dead_broker_fails_within_the_timeout_naming_the_count(tmp_path):
    events = list(generate(Workload(servers=4, duration_ms=5 * 60_000)))
    write_events(tmp_path / "day.avro", events)
    result, seconds = run_against_dead_broker(tmp_path, "replay", tmp_path / "day.avro")
    assert_none_acknowledged(result, seconds)


@pytest.mark.parametrize("command", [["replay", "day.avro"], ["simulate", "--to-kafka", "--duration", "01:00:00"]],
                         ids=["replay", "simulate"])
def test_a_dead_broker_is_named_early_and_progress_counts_no_acknowledgement(tmp_path, command):
    """Their progress lines used to say `sent N events` until the delivery timeout, then that none was
    acknowledged; now each says how many were acknowledged, and the first names the broker and why (for
    `simulate`, from the second process that publishes, while the first waits to hand it more)."""
    write_events(tmp_path / "day.avro", list(generate(Workload(servers=4, duration_ms=5 * 60_000))))
    port = free_port()
    conf = tmp_path / "dead.toml"
    conf.write_text(f'[kafka]\nbootstrap_servers = "127.0.0.1:{port}"\ndelivery_timeout_seconds = 9\n')
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    result = subprocess.run([*CLI, "--conf", str(conf), *command], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr[-2000:]
    progress = [line for line in result.stdout.splitlines() if re.match(r"sent [\d,]+ events, ", line)]
    assert len(progress) >= 2 and all(", 0 acknowledged, " in line for line in progress), result.stdout
    assert f"; Kafka at 127.0.0.1:{port} acknowledged none since the last line (the client says: " in progress[0]
    assert "Connection refused" in progress[0] and "the client says" not in progress[1], "said once"


def test_simulate_to_kafka_on_a_dead_broker_fails_the_same_way(tmp_path):
    result, seconds = run_against_dead_broker(tmp_path, "simulate", "--to-kafka", "--duration", "00:10:00")
    assert_none_acknowledged(result, seconds)


def test_ingest_to_a_dead_broker_fails_the_same_way(tmp_path):
    result, seconds = run_against_dead_broker(tmp_path, "ingest", "exchange-mtl", EX01)
    assert_none_acknowledged(result, seconds)


PUBLISHING = [
    ["replay", "day.avro", "--to", "nosuch.topic"],
    ["simulate", "--to-kafka", "--topic", "nosuch.topic", "--duration", "00:05:00"],
    ["ingest", "exchange-mtl", str(EX01), "--to", "nosuch.topic"],
    ["probe", "--server", "ex01=127.0.0.1:1", "--rounds", "1", "--to", "nosuch.topic"],
]


@pytest.fixture(scope="module")
def auto_creating_broker(settings, tmp_path_factory):
    """A broker with auto.create.topics.enable=true (Kafka's default; the embedded one turns it off)."""
    from infra.broker import EmbeddedKafka

    class AutoCreating(EmbeddedKafka):
        def _write_config(self):
            properties = super()._write_config()
            properties.write_text(properties.read_text().replace("auto.create.topics.enable=false",
                                                                 "auto.create.topics.enable=true"))
            return properties

    broker = AutoCreating(dataclasses.replace(settings.kafka.embedded, port=free_port(), controller_port=free_port(),
                                              data_dir=tmp_path_factory.mktemp("auto-creating")),
                          settings.jars.cache_dir)
    broker.start()
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop()


@pytest.mark.parametrize("command", PUBLISHING, ids=lambda command: command[0])
def test_a_topic_the_broker_does_not_have_is_refused_before_anything_is_sent(command, kafka_bootstrap, tmp_path):
    """Each record used to wait out the delivery timeout (30 s), then fail; the broker here creates
    no topic on first use, as the embedded one and most clusters."""
    assert_no_such_topic(command, kafka_bootstrap, tmp_path)


@pytest.mark.parametrize("command", PUBLISHING, ids=lambda command: command[0])
def test_a_broker_that_creates_topics_on_first_use_is_not_asked_to(command, auto_creating_broker, tmp_path):
    """With auto.create.topics.enable on the broker, the publisher's question whether the topic exists made the
    broker create it, with the broker's defaults (one partition, CreateTime), while the command said 'no such topic';
    `topics create` and `twin run` then refused that topic, to be deleted by hand. Now nothing is made."""
    assert_no_such_topic(command, auto_creating_broker, tmp_path)
    from confluent_kafka.admin import AdminClient

    assert "nosuch.topic" not in AdminClient({"bootstrap.servers": auto_creating_broker}).list_topics(timeout=10).topics


def assert_no_such_topic(command, kafka_bootstrap, tmp_path):
    write_events(tmp_path / "day.avro", list(generate(Workload(servers=4, duration_ms=60_000))))
    started = time.monotonic()
    result = subprocess.run([*CLI, *command, "--bootstrap", kafka_bootstrap], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-2000:]
    assert result.stderr.splitlines() == [f"shadowtwin {command[0]}: nosuch.topic: no such topic at {kafka_bootstrap}"
                                          " (Broker: Unknown topic or partition)"]
    assert time.monotonic() - started < 15, "not the delivery timeout"


def test_every_record_published_to_a_live_broker_is_acknowledged(kafka_bootstrap, topics, tmp_path):
    events = list(generate(Workload(servers=4, duration_ms=60_000)))
    write_events(tmp_path / "day.jsonl", events)
    outcome = replay(kafka_bootstrap, topics.events, tmp_path / "day.jsonl")
    assert outcome.deliveries.acknowledged == outcome.deliveries.produced == len(events)
    assert outcome.unacknowledged == 0 and outcome.failure() is None
    sink = KafkaSink(kafka_bootstrap, topics.events, topics.dead_letters)
    counts = ingest([str(EX01)], sink)
    assert sink.close() == 0
    assert sink.deliveries.acknowledged == sum(counts.events.values()) + counts.dead_letters > 0



def test_a_run_as_fast_as_possible_stops_when_asked_and_everything_it_counted_was_acknowledged(kafka_bootstrap,
                                                                                              topics):
    """Flat out, the publisher looks at the stop between chunks of records: it ends soon after, with
    no record it counted left unacknowledged."""
    day = list(generate(Workload(servers=4, duration_ms=10 * 60_000)))
    endless = itertools.islice(  # as good as endless; a publisher that ignored the stop would fail, not hang
        (dataclasses.replace(e, event_id=f"{e.event_id}-{n}") for n in itertools.count() for e in day), 3_000_000)
    stop = threading.Event()
    threading.Timer(2.0, stop.set).start()
    outcome = publish(kafka_bootstrap, topics.events, endless, stop=stop, every=0.2)
    assert outcome.interrupted and outcome.seconds < 10
    assert outcome.sent > len(day) and outcome.deliveries.acknowledged == outcome.sent
    published = read_topic(kafka_bootstrap, topics.events, until=lambda records: len(records) >= outcome.sent)
    assert len(published) == outcome.sent

def test_a_record_too_large_for_the_broker_is_counted_and_the_rest_are_published(kafka_bootstrap, topics, tmp_path):
    events = list(generate(Workload(servers=4, duration_ms=60_000)))
    huge = next(i for i, e in enumerate(events) if isinstance(e, MessageReceived))
    events[huge] = dataclasses.replace(events[huge], sender="x" * 2_000_000)  # over Kafka's 1 MB default
    write_events(tmp_path / "day.jsonl", events)
    outcome = replay(kafka_bootstrap, topics.events, tmp_path / "day.jsonl", dead_letters=topics.dead_letters)
    assert outcome.sent == len(events) and outcome.deliveries.produced == len(events) + 1, "and its dead letter"
    assert outcome.deliveries.acknowledged == len(events) and outcome.deliveries.refused == 1
    assert outcome.too_large == 1 and "1 events were larger than Kafka or the topic takes" in outcome.describe()
    (letter,) = read_topic(kafka_bootstrap, topics.dead_letters, until=lambda records: len(records) >= 1)
    assert letter.topic == str(tmp_path / "day.jsonl") and letter.original == encode(events[huge])[:524_288]
    assert letter.reason.startswith("its MessageReceived event of ") and "is larger than Kafka takes (" in letter.reason
    assert letter.reason.endswith("(its first 524,288 bytes are kept)") and len(letter.original) == 524_288
    failure = outcome.failure()
    assert failure.startswith(f"1 of {len(events) + 1} records were not acknowledged by Kafka at ")
    assert failure.endswith("(Unable to produce message: Broker: Message size too large)")
    published = read_topic(kafka_bootstrap, topics.events, until=lambda records: len(records) >= len(events) - 1)
    assert sorted(e.event_id for e in published) == sorted(e.event_id for i, e in enumerate(events) if i != huge)


def test_record_from_a_dead_broker_says_so_in_one_line(tmp_path):
    result, seconds = run_against_dead_broker(tmp_path, "record", "shadowtwin.events", tmp_path / "out.avro")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert re.fullmatch(r"shadowtwin record: Kafka at 127\.0\.0\.1:\d+: Failed to get metadata: Local: Broker"
                        r" transport failure", line), line
    assert seconds < 30


def test_replay_of_a_cut_recording_publishes_its_complete_blocks_then_names_the_cut(kafka_bootstrap, topics,
                                                                                    tmp_path):
    events = list(generate(Workload(servers=4, duration_ms=20 * 60_000)))
    write_events(tmp_path / "day.avro", events)
    data = (tmp_path / "day.avro").read_bytes()
    (tmp_path / "day.avro").write_bytes(data[:len(data) - 50])
    process = start(kafka_bootstrap, "replay", tmp_path / "day.avro", "--to", topics.events)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 2 and len(err.strip().splitlines()) == 1 and "cut short" in err
    sent = int(out.split("sent ")[-1].split()[0])
    assert 0 < sent < len(events), out
    assert len(read_topic(kafka_bootstrap, topics.events)) == sent


def test_the_clients_error_said_again_only_timed_otherwise_is_said_once():
    """librdkafka's message for one refused connection differs from time to time only in how long it took
    ("after 1ms", "after 0ms"): the progress lines said it again, as news."""
    lines: list[str] = []
    progress, deliveries = ProgressLines(lines.append), Deliveries("127.0.0.1:9")
    deliveries.produced = 10
    for took in (1, 0, 3):
        deliveries.broker_error = (f"127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: Connection refused"
                                   f" (after {took}ms in state CONNECT)")
        progress.say(10, 0, None, deliveries)
    assert ["the client says" in line for line in lines] == [True, False, False], lines
    deliveries.broker_error = "127.0.0.1:9/bootstrap: Disconnected (after 5ms in state UP)"
    progress.say(10, 0, None, deliveries)
    assert "the client says: 127.0.0.1:9/bootstrap: Disconnected" in lines[-1], "a new error is said"
