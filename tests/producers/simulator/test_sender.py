"""A simulation published by a forked process: the records one process publishes, every one acknowledged."""

from __future__ import annotations

import uuid
from collections import defaultdict

import pytest

from infra import kafka as kafka_clients
from infra.kafka import NoSuchTopic
from producers.simulator import run, sender, writer
from producers.simulator.engine import Simulation
from schemas.codec import encode, kafka_key
from tests.producers.simulator.test_writer import TOPOLOGY

pytestmark = pytest.mark.skipif(not writer.available(), reason="needs fork and two cores")


def records(bootstrap: str, topic: str, count: int, seconds: float = 60) -> dict[bytes | None, list[bytes]]:
    """The topic's values by key, in the order of their partition (a key's records are in one)."""
    consumer = kafka_clients.consumer(bootstrap, f"test-{uuid.uuid4().hex}", [topic])
    found, by_key = 0, defaultdict(list)
    try:
        for _ in range(int(seconds * 2)):
            for m in consumer.consume(1000, 0.5):
                if m.error() is None:
                    by_key[m.key()].append(m.value())
                    found += 1
            if found >= count:
                break
    finally:
        consumer.close()
    return dict(by_key)


def expected(events) -> dict[bytes | None, list[bytes]]:
    by_key = defaultdict(list)
    for event in events:
        by_key[kafka_key(event) or None].append(encode(event))
    return dict(by_key)


@pytest.mark.parametrize("seed", [5, 9])
def test_a_second_process_publishes_the_records_one_process_does(kafka_bootstrap, topics, monkeypatch, seed):
    forked = run.to_kafka(TOPOLOGY, seed, kafka_bootstrap, topics.events, speed=None)
    monkeypatch.setattr(writer, "available", lambda: False)
    alone = run.to_kafka(TOPOLOGY, seed, kafka_bootstrap, topics.commands, speed=None)
    events = list(Simulation(TOPOLOGY, seed).events())
    assert forked.events == alone.events == len(events) > 2 * writer.BATCH and forked.failure is None
    assert forked.results == alone.results and not forked.interrupted
    assert records(kafka_bootstrap, topics.events, len(events)) == expected(events)
    assert records(kafka_bootstrap, topics.commands, len(events)) == expected(events)


def test_a_stop_publishes_the_batches_sent_every_one_acknowledged(kafka_bootstrap, topics):
    asked = []
    outcome = sender.publish_forked(kafka_bootstrap, topics.events, Simulation(TOPOLOGY, 5, flat=True).events(),
                                    stop=lambda: asked.append(1) or True, delivery_timeout_s=30)
    first = list(Simulation(TOPOLOGY, 5).events())[:writer.BATCH]
    assert outcome.sent == outcome.deliveries.acknowledged == writer.BATCH and outcome.interrupted
    assert outcome.last_event_ms == first[-1].event_time_ms and len(asked) >= 1
    assert records(kafka_bootstrap, topics.events, writer.BATCH) == expected(first)


def test_a_failing_simulation_publishes_the_batches_sent_and_raises(kafka_bootstrap, topics):
    def failing():
        yield from list(Simulation(TOPOLOGY, 5, flat=True).events())[:2 * writer.BATCH + 10]
        raise ZeroDivisionError("the simulation's own mistake")

    with pytest.raises(ZeroDivisionError, match="own mistake"):
        sender.publish_forked(kafka_bootstrap, topics.events, failing(), delivery_timeout_s=30)
    sent = list(Simulation(TOPOLOGY, 5).events())[:2 * writer.BATCH]
    assert records(kafka_bootstrap, topics.events, len(sent)) == expected(sent)


def test_what_the_publishing_process_cannot_do_is_raised_in_the_caller(kafka_bootstrap):
    missing = f"no.such.events.{uuid.uuid4().hex}"
    with pytest.raises(NoSuchTopic, match=rf"{missing}: no such topic at {kafka_bootstrap}"):
        run.to_kafka(TOPOLOGY, 5, kafka_bootstrap, missing, speed=None)


def test_an_event_the_events_topic_refuses_is_not_sent_and_the_rest_are_as_the_publisher_does(kafka_bootstrap, topics,
                                                                                             monkeypatch):
    """An events topic whose max.message.bytes (2,000) is below some events: the second process stopped at the first
    batch the broker refused, every valid event of it and after it unsent. Now, as the publisher does, each event of a
    refused batch is sent again alone, and only those too large alone are not sent, counted in the one line."""
    from confluent_kafka.admin import NewTopic

    from tests.producers.test_mtl import wait_for

    admin = kafka_clients.admin(kafka_bootstrap)
    small = [f"{topics.events}.small-{n}" for n in (1, 2)]
    for name, future in admin.create_topics([NewTopic(n, 1, 1, config={"max.message.bytes": "2000"})
                                             for n in small]).items():
        future.result(30)
        wait_for(lambda: admin.list_topics(name, timeout=5).topics[name].error is None, seconds=30)  # a leader
    forked = run.to_kafka(TOPOLOGY, 5, kafka_bootstrap, small[0], speed=None)
    monkeypatch.setattr(writer, "available", lambda: False)
    alone = run.to_kafka(TOPOLOGY, 5, kafka_bootstrap, small[1], speed=None)
    events = list(Simulation(TOPOLOGY, 5).events())
    assert forked.events == alone.events == len(events)
    not_sent = int(alone.failure.split(" of ")[0])
    assert 0 < not_sent < len(events) // 10 and "Message size too large" in alone.failure
    assert forked.failure == alone.failure
    assert records(kafka_bootstrap, small[0], len(events) - not_sent) == records(kafka_bootstrap, small[1],
                                                                                 len(events) - not_sent)
