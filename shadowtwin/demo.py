"""`shadowtwin demo`: the whole path through real parts, end to end, in about a minute.

Starts the embedded broker (unless one is configured elsewhere), creates the topics, starts
the streaming query, lets simulated nodes send heartbeats until one goes quiet, prints the
alerts read back from Kafka, then shuts down what it started.
"""

from __future__ import annotations

import tempfile
import time
from typing import Callable

from confluent_kafka import Consumer, TopicPartition, OFFSET_END

from shadowtwin.broker import start_if_needed
from shadowtwin.config import Settings
from shadowtwin.topics import create_topics


def run_demo(settings: Settings, seconds: float | None = None, say: Callable[[str], None] = print) -> int:
    """Run the demo; return how many alerts came back from Kafka."""
    from producers.heartbeats import HeartbeatProducer
    from streaming import liveness_query
    from streaming.session import build_spark

    demo = settings.demo
    deadline = time.monotonic() + (seconds if seconds is not None else demo.run_seconds)
    bootstrap = settings.kafka.bootstrap_servers
    started_broker = start_if_needed(settings, say)
    producer = query = spark = consumer = None
    alerts = 0
    try:
        for outcome in create_topics(bootstrap, settings.topics):
            say(f"topic {outcome.describe()}")
        consumer = _alerts_consumer(bootstrap, settings.topics.alerts)
        say("starting Spark (local mode) and the streaming query ...")
        spark = build_spark(settings)
        checkpoint = tempfile.mkdtemp(prefix="demo-", dir=_mkdir(settings.spark.checkpoint_dir))
        query = liveness_query.start(spark, liveness_query.LivenessQueryConfig(
            bootstrap_servers=bootstrap,
            events_topic=settings.topics.events,
            alerts_topic=settings.topics.alerts,
            checkpoint_dir=checkpoint,
            quiet_timeout_ms=demo.quiet_timeout_seconds * 1000,
            trigger_interval="1 second",
        ))
        while query.lastProgress is None and time.monotonic() < deadline:
            time.sleep(0.2)
        say(f"nodes {', '.join(demo.nodes)} send heartbeats every {demo.event_interval_seconds:g}s;"
            f" {demo.silent_node} falls silent after {demo.silence_after_seconds}s;"
            f" the twin alerts after {demo.quiet_timeout_seconds}s of event-time silence")
        producer = HeartbeatProducer(bootstrap, settings.topics.events, demo.nodes, demo.event_interval_seconds,
                                     demo.silent_node, demo.silence_after_seconds)
        producer.start()
        while time.monotonic() < deadline and alerts == 0:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            alerts += 1
            say(f"ALERT from Kafka: {message.value().decode()}")
        if alerts == 0:
            say("no alert arrived before the demo's time ran out")
    except KeyboardInterrupt:
        say("interrupted")
    finally:
        say("shutting down ...")
        if producer is not None:
            producer.stop()
        if query is not None:
            query.stop()
        if spark is not None:
            spark.stop()
        if consumer is not None:
            consumer.close()
        if started_broker is not None:
            started_broker.stop()
    return alerts


def _alerts_consumer(bootstrap: str, topic: str) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "shadowtwin-demo", "enable.auto.commit": False})
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in partitions])
    return consumer


def _mkdir(path):
    path.mkdir(parents=True, exist_ok=True)
    return path
