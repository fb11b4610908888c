"""`shadowtwin alerts tail --follow` against a real broker: new alerts print as they come, a
foreign record is counted on stderr, SIGTERM ends it with 143; a count that cannot be meant is refused;
`record` counts what it left out as the tails do."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from infra.kafka import producer
from schemas import jsonl
from schemas.events import DeadLetter, KafkaHeader
from schemas.codec import encode, kafka_key
from shadowtwin.cli import main
from tests.producers.test_alert_router import crash_and_return


@pytest.mark.parametrize("command", [["alerts", "tail", "-n", "-3"], ["commands", "tail", "--lines=-1"]], ids=" ".join)
def test_a_negative_count_is_refused_in_one_line(command, capsys):
    """It used to be taken as 0 (only what comes next)."""
    with pytest.raises(SystemExit) as exit:
        main([*command, "--bootstrap", "127.0.0.1:1"])
    (line,) = capsys.readouterr().err.splitlines()
    assert exit.value.code == 2 and f"shadowtwin {' '.join(command[:2])}: argument --lines/-n: expected a whole" \
        f" number >= 0, got '{command[-1].removeprefix('--lines=')}'" in line, line


def test_follow_prints_new_alerts_as_they_come(kafka_bootstrap, topics):
    alerts = crash_and_return()
    env = dict(os.environ, KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap)
    tail = subprocess.Popen([sys.executable, "-m", "shadowtwin.cli", "alerts", "tail", "--follow", "--json",
                             "--from-beginning", "--topic", topics.alerts], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        time.sleep(2)  # the topic is empty: whenever it starts reading, it prints what comes
        out = producer(kafka_bootstrap)
        # first the foreign record: the alerts topic has one partition, so once the last alert is
        # printed, the foreign record has been read (and SIGTERM cannot come before it)
        out.produce(topics.alerts, value=b"not an alert")
        for alert in alerts:
            out.produce(topics.alerts, key=kafka_key(alert), value=encode(alert))
        assert out.flush(30) == 0
        lines = [json.loads(tail.stdout.readline()) for _ in alerts]
        assert lines == [jsonl.to_json(a) for a in alerts]
    finally:
        tail.send_signal(signal.SIGTERM)
        _, err = tail.communicate(timeout=30)
    assert tail.returncode == 1, "a record that is not an alert was read: said, and the status says so"
    assert "1 record did not decode" in err and "bad magic" in err


@pytest.mark.parametrize("command", ["alerts tail", "record"])
def test_a_topic_written_through_transactions_is_read_to_its_end_and_the_command_ends(command, kafka_bootstrap,
                                                                                          topics, tmp_path):
    """A transactional producer (a Connect worker or Flink job with exactly-once, or kafka-producer-perf-test
    --transactional-id) ends every transaction with a commit or abort marker: the topic's last offset is a
    marker, after aborted records perhaps, which no consumer is given. `alerts tail` and `record` without
    --follow used to wait for a record at that offset, for ever."""
    committed, aborted = crash_and_return()[:2]
    out = producer(kafka_bootstrap, **{"transactional.id": f"tail-{uuid.uuid4().hex[:8]}"})
    out.init_transactions(30)
    out.begin_transaction()
    out.produce(topics.alerts, key=kafka_key(committed), value=encode(committed))
    out.commit_transaction(30)
    out.begin_transaction()
    out.produce(topics.alerts, key=kafka_key(aborted), value=encode(aborted))
    out.abort_transaction(30)
    recording = tmp_path / "alerts.jsonl"
    argv = {"alerts tail": ["alerts", "tail", "--json", "--topic", topics.alerts],
            "record": ["record", topics.alerts, str(recording)]}[command]
    done = subprocess.run([sys.executable, "-m", "shadowtwin.cli", *argv, "--from-beginning"], capture_output=True,
                          text=True, env=dict(os.environ, KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap), timeout=60)
    assert done.returncode == 0, done.stderr
    lines = (done.stdout if command == "alerts tail" else recording.read_text()).splitlines()
    assert [json.loads(line)["alert_id"] for line in lines] == [committed.alert_id]


def test_record_says_what_it_left_out_on_stderr_and_exits_1(kafka_bootstrap, topics, tmp_path):
    """As the tails do: a record of the topic that does not decode is not in the recording, so the
    command did not wholly do its job (it used to say so on stdout and exit 0)."""
    alerts = crash_and_return()
    out = producer(kafka_bootstrap)
    topic = topics.alerts
    for alert in alerts:  # first: a topic not named in the settings is recorded with its first record's schema
        out.produce(topic, key=kafka_key(alert), value=encode(alert))
    out.produce(topic, value=b"not an alert")
    assert out.flush(30) == 0
    recording = tmp_path / "alerts.jsonl"
    done = subprocess.run([sys.executable, "-m", "shadowtwin.cli", "record", topic, str(recording), "--from-beginning"],
                          capture_output=True, text=True, env=dict(os.environ, KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap),
                          timeout=60)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert f"recorded {len(alerts)} Alert records to {recording}" in done.stdout
    assert "1 record did not decode" in done.stderr and "bad magic" in done.stderr
    assert len(recording.read_text().splitlines()) == len(alerts)


def test_the_last_n_alerts_are_n_alerts_on_a_topic_written_through_transactions(kafka_bootstrap, topics):
    """Each transaction's commit marker takes an offset no consumer is given: `-n 3` used to start 3 offsets
    before the end, and showed one alert of four published one per transaction."""
    alert = crash_and_return()[0]
    alerts = [dataclasses.replace(alert, alert_id=f"{alert.alert_id}-{i}") for i in range(4)]
    out = producer(kafka_bootstrap, **{"transactional.id": f"tail-{uuid.uuid4().hex[:8]}"})
    out.init_transactions(30)
    for one in alerts:
        out.begin_transaction()
        out.produce(topics.alerts, key=kafka_key(one), value=encode(one))
        out.commit_transaction(30)
    done = subprocess.run([sys.executable, "-m", "shadowtwin.cli", "alerts", "tail", "-n", "3", "--json",
                           "--topic", topics.alerts], capture_output=True, text=True,
                          env=dict(os.environ, KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap), timeout=60)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["alert_id"] for line in done.stdout.splitlines()] == [a.alert_id for a in alerts[1:]]


def test_dead_letters_tail_says_where_each_record_was_read_and_why(kafka_bootstrap, topics):
    """The dead-letter topic is Avro like the others: kafka-console-consumer shows bytes, and `record` wrote a
    file; a person asking why records were set aside reads them here, from the twin (a topic's partition and
    offset, and the record's key and headers, which tell whose it was) and from ingest (a log file's line)."""
    from_kafka = DeadLetter(original=b"hello world", key=b"ex01", topic="shadowtwin.events", partition=1, offset=41,
                            reason="bad magic: starts with 6865", at_ms=1_790_000_000_000,
                            headers=(KafkaHeader("source", b"console"), KafkaHeader("retry", None)))
    from_a_log = DeadLetter(original=b"2026-11-22T02:03:00.000Z,,", key=None, topic="/logs/MSGTRK20261122-1.LOG",
                            partition=-1, offset=17, reason="2 fields where the header names 27",
                            at_ms=1_790_000_001_000)
    out = producer(kafka_bootstrap)
    for letter in (from_kafka, from_a_log):
        out.produce(topics.dead_letters, value=encode(letter))
    assert out.flush(30) == 0
    env = dict(os.environ, KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap)
    readable, as_json = (subprocess.run([sys.executable, "-m", "shadowtwin.cli", "dead-letters", "tail",
                                         "--from-beginning", "--topic", topics.dead_letters, *json_flag],
                                        capture_output=True, text=True, env=env, timeout=60)
                         for json_flag in ([], ["--json"]))
    assert readable.returncode == 0 and as_json.returncode == 0, (readable.stderr, as_json.stderr)
    assert readable.stdout.splitlines() == [
        '2026-09-21T14:13:20.000Z dead letter from shadowtwin.events[1]@41 key "ex01" headers source="console",'
        ' retry=null: bad magic: starts with 6865',
        "2026-09-21T14:13:21.000Z dead letter from /logs/MSGTRK20261122-1.LOG line 17: 2 fields where the header"
        " names 27"]
    assert [jsonl.from_json(json.loads(line)) for line in as_json.stdout.splitlines()] == [from_kafka, from_a_log]


def test_tailing_the_json_copies_is_said_to_read_them_with_a_kafka_consumer(kafka_bootstrap, capsys):
    """`alerts tail --topic shadowtwin.alerts.json`, the topic `[twin] json_topics` fills: every record was left out,
    '2 records did not decode and were left out: 2: bad magic', exit 1. Now one line says what the topic holds
    and how to read it."""
    copies = "shadowtwin.alerts.json"
    out = producer(kafka_bootstrap)
    out.produce(copies, key=b"a1", value=b'{"kind": "Alert", "alert_id": "a1"}')
    assert out.flush(30) == 0
    status = main(["alerts", "tail", "--topic", copies, "--bootstrap", kafka_bootstrap])
    (line,) = capsys.readouterr().err.splitlines()
    assert status == 2 and line == (
        f"shadowtwin alerts: {copies} holds the twin's JSON copies of the alerts ([twin] json_topics), which any Kafka"
        f" consumer prints as they are (shadowtwin kafka tool console-consumer --topic {copies}); this command reads"
        f" shadowtwin.alerts, and prints the same objects with --json")
