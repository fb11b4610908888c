"""The twin's clock ticks against real Kafka: an events topic deleted under them is said, naming it."""

from __future__ import annotations

import time

from infra.kafka import admin
from infra.topics import create_topics
from streaming.ticker import Ticker


def until(condition, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.1)


def test_an_events_topic_deleted_under_the_running_twin_is_said_once_and_its_return_too(kafka_bootstrap, topics):
    """`kafka-topics --delete` on the events topic beside a running twin: Spark's source read nothing more and
    said nothing, the ticks stopped unsaid, and the twin sat idle, deciding nothing, with no word of which topic.
    Now the ticker says once that the topic is gone, and once that it is back."""
    lines: list[str] = []
    ticker = Ticker(kafka_bootstrap, topics.events, interval_s=0.2, say=lines.append)
    ticker.start()
    try:
        until(lambda: ticker.ticks >= 2)
        client = admin(kafka_bootstrap)
        client.delete_topics([topics.events])[topics.events].result(30)
        until(lambda: lines)
        ticks = ticker.ticks
        time.sleep(1)  # five ticks' time: said once
        assert ticker.ticks > ticks, "the ticker goes on asking"
        create_topics(kafka_bootstrap, topics)
        until(lambda: len(lines) > 1)
    finally:
        ticker.stop()
    assert lines == [f"events topic {topics.events} does not exist (deleted while the twin runs?): no clock ticks, and"
                     f" the twin reads and decides nothing, until it is made again (shadowtwin topics create; the"
                     f" events it held are gone)", f"events topic {topics.events} exists again: clock ticks go on"]
