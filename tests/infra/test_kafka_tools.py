"""`shadowtwin kafka tool`: Apache Kafka's own command-line tools, run from Maven jars against the
configured brokers, as an operator of the embedded broker (who has no Kafka distribution) uses them."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from infra.config import Secret
from infra.kafka_tools import _connection, avro_topic_note, twin_group_warning
from infra.settings import KafkaSecuritySettings

pytestmark = pytest.mark.integration


def tool(*args: str, bootstrap: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = dict(os.environ, SHADOWTWIN_KAFKA_BOOTSTRAP_SERVERS=bootstrap)
    return subprocess.run([sys.executable, "-m", "shadowtwin", "kafka", "tool", *args], capture_output=True,
                          text=True, env=env, timeout=timeout)


def test_kafka_topics_describes_a_topic_of_the_configured_broker(kafka_bootstrap):
    topic = f"tool.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    result = tool("topics", "--describe", "--topic", topic, bootstrap=kafka_bootstrap)  # no --bootstrap-server
    assert result.returncode == 0, result.stderr
    assert f"Topic: {topic}" in result.stdout and "PartitionCount: 3" in result.stdout


def test_the_kafka_options_of_every_command_come_before_the_tool_s_name(kafka_bootstrap):
    """`--bootstrap` (and the security options) as `topics create`, `twin run` ... take them: it was refused,
    'unrecognized arguments: --bootstrap', exit 2, and only the tool's own --bootstrap-server was taken."""
    topic = f"tool.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    result = tool("--bootstrap", kafka_bootstrap, "topics", "--describe", "--topic", topic,
                  bootstrap="127.0.0.1:1")  # the option wins over the configuration, as for every command
    assert result.returncode == 0, result.stderr
    assert f"Topic: {topic}" in result.stdout and "PartitionCount: 2" in result.stdout


def test_a_kafka_option_after_the_tool_s_name_is_said_to_go_before_it(kafka_bootstrap):
    """`kafka tool topics --list --bootstrap HOST`, as `topics create --bootstrap HOST` is written: the tool got
    --bootstrap as its own argument and printed 'bootstrap is not a recognized option' and a Java stack trace."""
    result = tool("topics", "--list", "--bootstrap", kafka_bootstrap, bootstrap=kafka_bootstrap)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "shadowtwin kafka: --bootstrap after the tool's name is the tool's own argument, which no Kafka tool takes:"
        " put it before the name (shadowtwin kafka tool --bootstrap ... topics ...), as every command takes it"]


def test_kafka_consumer_groups_shows_a_group_s_lag(kafka_bootstrap):
    topic, group = f"tool.{uuid.uuid4().hex[:8]}", f"g.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(5):
        producer.produce(topic, value=b"%d" % i)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
    consumer.close()
    result = tool("kafka-consumer-groups.sh", "--describe", "--group", group, bootstrap=kafka_bootstrap)
    assert result.returncode == 0, result.stderr
    [row] = [line.split() for line in result.stdout.splitlines() if topic in line]
    assert row[:6] == [group, topic, "0", "2", "5", "3"], result.stdout  # current offset, log end, lag


def test_an_unknown_tool_is_named_in_one_line(kafka_bootstrap):
    result = tool("kafka-topcs", "--list", bootstrap=kafka_bootstrap)
    assert (result.returncode, result.stderr) == (
        2, "shadowtwin kafka: no Kafka tool 'kafka-topcs'; did you mean 'kafka-topics'?\n")


def test_a_misspelt_topic_of_the_console_consumer_is_named_in_one_line(kafka_bootstrap):
    """`kafka tool console-consumer --topic shadowtwin.alert`: the tool waited for the topic, saying nothing, until
    Ctrl-C (with --timeout-ms, 'TimeoutException: null' and exit 0). Now the topic is named, with the one meant,
    exit 1, as by `record` and `alerts tail`; the tool does not run."""
    topic = f"tool.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    result = tool("console-consumer", "--topic", topic[:-1], bootstrap=kafka_bootstrap, timeout=60)
    assert (result.returncode, result.stderr) == (1, f"shadowtwin kafka: {topic[:-1]}: no such topic at"
                                                     f" {kafka_bootstrap}; did you mean {topic!r}?\n")


def test_brokers_that_do_not_answer_are_named_in_one_line_before_the_tool_runs():
    """A broker that is down: `kafka tool console-consumer` (and `topics --list`) waited, saying nothing, until
    Ctrl-C. Now one line names the brokers, exit 1, as `alerts tail` says it."""
    for args in (["console-consumer", "--topic", "shadowtwin.alerts"], ["topics", "--list"]):
        result = tool(*args, bootstrap="127.0.0.1:1", timeout=60)
        assert result.returncode == 1, result.stderr
        assert result.stderr.splitlines() == [
            "shadowtwin kafka: Kafka at 127.0.0.1:1: Failed to get metadata: Local: Broker transport failure"]


def test_a_tool_gets_the_configured_security_in_a_file_only_it_can_read(settings, tmp_path):
    security = KafkaSecuritySettings(protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256", sasl_username="twin",
                                     sasl_password=Secret("pw-\"quoted\"\\"), ssl_ca_file=tmp_path / "ca.pem")
    secured = dataclasses.replace(settings, kafka=dataclasses.replace(settings.kafka, security=security,
                                                                      bootstrap_servers="b1:9093"))
    added = _connection(secured, ["--list"], tmp_path)
    assert added[:2] == ["--bootstrap-server", "b1:9093"] and added[2] == "--command-config"
    config = tmp_path / "client.properties"
    assert added[3] == str(config) and config.stat().st_mode & 0o777 == 0o600
    lines = config.read_text().splitlines()
    assert "security.protocol=SASL_SSL" in lines and f"ssl.truststore.location={tmp_path / 'ca.pem'}" in lines
    assert ('sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="twin"'
            ' password="pw-\\\\"quoted\\\\"\\\\\\\\";') in lines
    assert _connection(secured, ["--bootstrap-server=b2:9093", "--command-config", "mine.properties"], tmp_path) == []


def test_a_reset_of_the_twin_s_consumer_group_is_preceded_by_what_it_does_not_do(settings, kafka_bootstrap):
    """`kafka-consumer-groups --reset-offsets --group shadowtwin-twin`, to have the twin read again: Kafka's tool
    plans or executes it (the group has no members, even beside a running twin), and nothing said that the twin
    never reads from the group. Now a warning on stderr says so first; the tool runs as given."""
    topic = f"tool.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    group = settings.twin.consumer_group
    result = tool("consumer-groups", "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
                  "--dry-run", bootstrap=kafka_bootstrap)
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith(f"warning: consumer group {group} is where the twin shows Kafka's tools what it"
                                    f" has read, not where it reads from: it reads from its checkpoint, a running twin"
                                    f" overwrites this reset at its next batch"), result.stderr
    assert f"{topic} " in result.stdout, "the tool's own plan"
    assert twin_group_warning(group, "kafka-consumer-groups", ["--reset-offsets", f"--group={group}", "--execute"])
    assert twin_group_warning(group, "kafka-consumer-groups", ["--reset-offsets", "--all-groups", "--execute"])
    assert not twin_group_warning(group, "kafka-consumer-groups", ["--reset-offsets", "--group", "other", "--execute"])
    assert not twin_group_warning(group, "kafka-consumer-groups", ["--describe", "--group", group])
    assert not twin_group_warning("", "kafka-consumer-groups", ["--reset-offsets", "--group", group])


def test_the_console_consumer_on_the_alerts_topic_is_told_how_to_read_its_avro_records(settings, kafka_bootstrap,
                                                                                       topics):
    """`kafka tool console-consumer --topic shadowtwin.alerts`, as the README's list of tools invites: it printed
    the contract's Avro bytes, binary, and nothing said how to read them. Now a note on stderr names the command
    that prints them as JSON (and the .json copies); the tool runs as given, and the command named works."""
    import json

    from schemas import jsonl
    from schemas.codec import encode, kafka_key
    from tests.producers.test_alert_router import crash_and_return

    alert = crash_and_return()[0]
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topics.alerts, key=kafka_key(alert), value=encode(alert))
    assert producer.flush(30) == 0
    env = dict(os.environ, SHADOWTWIN_TOPICS_ALERTS=topics.alerts)
    result = subprocess.run([sys.executable, "-m", "shadowtwin", "kafka", "tool", "--bootstrap", kafka_bootstrap,
                             "console-consumer", "--topic", topics.alerts, "--from-beginning", "--max-messages", "1"],
                            capture_output=True, env=env, timeout=180)
    assert result.returncode == 0, result.stderr
    note = result.stderr.decode().splitlines()[0]
    assert note == (f"note: {topics.alerts} holds the contract's Avro records (schemas/README.md), which this tool"
                    f" prints as binary; read them as JSON lines with 'shadowtwin alerts tail --json', or the JSON"
                    f" copies on {topics.alerts}.json with [twin] json_topics = true"), note
    assert result.stdout.startswith(b"\xc3\x01"), "the tool's own output: the record's bytes"
    told = subprocess.run([sys.executable, "-m", "shadowtwin", "alerts", "tail", "--json", "--from-beginning"],
                          capture_output=True, text=True, env=dict(env, KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap),
                          timeout=180)
    assert told.returncode == 0, told.stderr
    assert [json.loads(line) for line in told.stdout.splitlines()] == [jsonl.to_json(alert)]
    assert avro_topic_note(settings, "kafka-console-consumer", [f"--topic={settings.topics.events}"])
    assert not avro_topic_note(settings, "kafka-console-consumer", ["--topic", settings.topics.state]), "JSON"
    assert not avro_topic_note(settings, "kafka-topics", ["--describe", "--topic", settings.topics.alerts])


def test_the_console_producer_on_the_events_topic_is_told_it_cannot_write_an_event(settings, kafka_bootstrap,
                                                                                   topics):
    """`kafka tool console-producer --topic shadowtwin.events` with an event's own bytes piped in: the tool reads
    its input as UTF-8 lines and sent c3, the first byte of every event, as U+FFFD, so the record was a dead letter
    'bad magic: starts with efbf', and nothing said that no event can go through this tool, nor what does. Now a
    note on stderr says so and names `replay`, and the dead letter's reason says what the tool did to the bytes."""
    from schemas import codec, wire
    from tests.schemas.samples import sample_events

    event = codec.encode(sample_events()["NodeStarted"])
    env = dict(os.environ, SHADOWTWIN_TOPICS_EVENTS=topics.events)
    result = subprocess.run([sys.executable, "-m", "shadowtwin", "kafka", "tool", "--bootstrap", kafka_bootstrap,
                             "console-producer", "--topic", topics.events], input=event + b"\n",
                            capture_output=True, env=env, timeout=180)
    assert result.returncode == 0, result.stderr
    assert result.stderr.decode().splitlines()[0] == (
        f"note: {topics.events} takes the contract's Avro records (schemas/README.md), which this tool cannot write:"
        f" it sends each line as UTF-8 text, and the twin sets each aside as a dead letter ('shadowtwin dead-letters"
        f" tail' says why); publish events written as JSON lines with 'shadowtwin replay FILE.jsonl'")
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "enable.partition.eof": False})
    consumer.assign([TopicPartition(topics.events, p, 0) for p in range(topics.events_partitions)])
    record = consumer.poll(30)
    consumer.close()
    assert record is not None and record.error() is None
    assert record.value().startswith("\ufffd".encode()), "what the tool sent for c3 01"
    with pytest.raises(wire.DecodeError) as caught:
        codec.decode_event(record.value())
    assert str(caught.value).startswith("bad magic: starts with efbf") and str(caught.value).endswith(
        wire.TYPED_TEXT), str(caught.value)
    assert not avro_topic_note(settings, "kafka-console-producer", ["--topic", settings.topics.alerts])
