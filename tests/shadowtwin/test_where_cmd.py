"""`where` and `server` against a real broker: the state they answer from is as of the events the twin has
read, so they say how many it has not read yet, by the offsets it committed to its consumer group."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from datetime import datetime

from confluent_kafka import TopicPartition

from infra.kafka import admin, consumer, producer
from producers.topic_reader import Unread, unread_events
from schemas.codec import encode, kafka_key
from schemas.events import ClockTick
from state.summary import state_records, to_json
from tests.state.test_summary import Org, at, primary_dies, run


def shadowtwin(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shadowtwin.cli", *args], capture_output=True, text=True,
                          env=dict(os.environ, **env), timeout=120)


def test_where_and_server_say_the_events_a_stopped_twin_has_not_read(kafka_bootstrap, topics):
    """The twin read mbx01's events up to minute 4 and stopped; mbx02's failed heartbeats came after. Before,
    `where` and `server` answered from the state alone, as if nothing had come since (and `where` called a
    message waiting on the events topic `never seen`); the offsets the twin committed say what it has not read."""
    events = primary_dies(Org())
    read = [e for e in events if e.event_time_ms <= at(4)]
    state, _ = run(read)
    publisher = producer(kafka_bootstrap)
    for key, record in state_records(state):
        publisher.produce(topics.state, key=key.encode(), value=to_json(record))
    for event in read:
        publisher.produce(topics.events, key=kafka_key(event), value=encode(event), partition=0)
    assert publisher.flush(30) == 0
    group = f"test-twin-{uuid.uuid4().hex}"
    committer = consumer(kafka_bootstrap, group)
    committer.commit(offsets=[TopicPartition(topics.events, 0, len(read)), TopicPartition(topics.events, 1, 0)],
                     asynchronous=False)  # as the twin commits what its batch read up to
    waiting = events[len(read):len(read) + 4]
    for partition in (0, 1):  # the twin's clock ticks are no events it missed
        tick = ClockTick(event_id=f"tick-{partition}", event_time_ms=at(5), node="shadowtwin", primary_server="")
        publisher.produce(topics.events, value=encode(tick), partition=partition)
    published_ms = time.time() * 1000
    for event in waiting:
        publisher.produce(topics.events, key=kafka_key(event), value=encode(event), partition=0)
    assert publisher.flush(30) == 0
    env = {"SHADOWTWIN_TOPICS_STATE": topics.state, "SHADOWTWIN_TOPICS_EVENTS": topics.events,
           "SHADOWTWIN_TWIN_CONSUMER_GROUP": group, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    note = re.compile(rf"note: the twin has not read 4 records of {re.escape(topics.events)} yet \(partition 0: 4,"
                      rf" the first appended (\S+), [\d.]+s ago; past the offsets it last committed to consumer group"
                      rf" {group}, its clock ticks not counted\): what follows does not include them")
    for command in (["where", "<m1@contoso.com>"], ["server", "mbx01"]):
        answer = shadowtwin(env, *command)
        [line] = answer.stderr.splitlines() or [""]
        said = note.fullmatch(line)
        assert answer.returncode == 0 and said, answer.stderr[-2000:]
        appended = datetime.fromisoformat(said.group(1)).timestamp() * 1000
        assert published_ms - 1000 <= appended <= time.time() * 1000, "when Kafka took in the first of them"
    # past its first `read_at_most` unread records, a partition's records count as they are, ticks or not
    assert unread_events(kafka_bootstrap, topics.events, group, read_at_most=1) == {0: Unread(4, None)}
    assert unread_events(kafka_bootstrap, topics.events, group, read_at_most=3)[0].records == 4
    # records past the commit that retention deleted (here the tick and the first event) are no one's to read
    client = admin(kafka_bootstrap)  # held while its futures run
    for deleted in client.delete_records([TopicPartition(topics.events, 0, len(read) + 2)]).values():
        deleted.result(30)
    assert [unread_events(kafka_bootstrap, topics.events, group, read_at_most=n)[0].records for n in (1, 10)] == [3, 3]
    committer.commit(offsets=[TopicPartition(topics.events, 0, len(read) + 1 + len(waiting))], asynchronous=False)
    committer.close()
    caught_up = shadowtwin(env, "where", "<m1@contoso.com>")
    assert caught_up.returncode == 0 and caught_up.stderr == "", caught_up.stderr[-2000:]
