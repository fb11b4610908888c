"""`shadowtwin demo` (what `make run` runs): the whole product, live, in about a minute.

Starts the embedded broker (unless one is configured elsewhere), creates the topics, starts
Spark and the streaming twin with its clock ticks, and lets simulated servers of one DAG
send their SMTP-level events in real time. One server's next hop turns slow, then the server
crashes with mail in its queue; the twin promotes the shadows after the (shortened)
ShadowResubmitTimeSpan and sends redelivery commands; the server comes back with the same
queue database and the twin predicts the duplicates. Every alert and command is printed as
read back from Kafka; then everything the demo started is shut down.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from datetime import datetime, timezone
from typing import Callable

from confluent_kafka import OFFSET_END, TopicPartition

from infra.config import SparkInterval
from infra.kafka import Kafka, consumer as kafka_consumer
from infra.settings import Settings
from infra.signals import stop_on_signals
from producers.publisher import Publisher
from producers.synthetic import Crash, Workload, generate
from schemas.codec import default_codec
from schemas.events import Alert, AlertType
from streaming.app import TwinApplication


def demo_settings(settings: Settings) -> Settings:
    """The twin's settings for the demo: short spans, a short watermark, only new events."""
    demo = settings.demo
    model = settings.shadow_redundancy.with_overrides({
        "shadow_heartbeat_frequency": demo.shadow_heartbeat_frequency,
        "shadow_resubmit_time_span": demo.shadow_resubmit_time_span,
    })
    return dataclasses.replace(
        settings, shadow_redundancy=model,
        twin=dataclasses.replace(settings.twin, starting_offsets="latest", watermark_delay=demo.watermark_delay),
        spark=dataclasses.replace(settings.spark, trigger_interval=SparkInterval("1 second")),
    )


def run_demo(settings: Settings, seconds: float | None = None, say: Callable[[str], None] = print) -> int:
    """Run the demo; return how many alerts and commands came back from Kafka."""
    demo = settings.demo
    settings = demo_settings(settings)
    deadline = time.monotonic() + (seconds if seconds is not None else demo.run_seconds)
    checkpoint = tempfile.mkdtemp(prefix="demo-", dir=_mkdir(settings.spark.checkpoint_dir))
    say("starting the broker if needed, Spark (local mode) and the streaming twin ...")
    twin = TwinApplication(settings, say=say, checkpoint_dir=checkpoint, progress_every_seconds=15)
    publisher = consumer = None
    seen = 0
    with stop_on_signals() as stop:
        try:
            twin.start()
            consumer = _consumer_at_end(settings.kafka,
                                        [settings.topics.alerts, settings.topics.commands])
            while twin.progress.batches == 0 and time.monotonic() < deadline and not stop.is_set():
                time.sleep(0.2)
            now_ms = int(time.time() * 1000)
            crash_at = now_ms + demo.crash_after_seconds * 1000
            back_at = crash_at + demo.crash_for_seconds * 1000
            workload = Workload(
                servers=demo.servers, messages_per_second=demo.messages_per_second, start_ms=now_ms,
                duration_ms=(demo.crash_after_seconds + demo.crash_for_seconds + 20) * 1000,
                heartbeat_ms=settings.shadow_redundancy.timing(demo.crash_server).heartbeat_ms,
                crash=Crash(demo.crash_server, crash_at, demo.crash_for_seconds * 1000, demo.new_database,
                            backlog_ms=demo.backlog_seconds * 1000),
                seed=now_ms,
            )
            say(f"{demo.servers} servers of one DAG send their events live; {demo.crash_server}'s next hop turns slow"
                f" and it crashes after {demo.crash_after_seconds}s, back after {demo.crash_for_seconds}s with"
                f" {'a new' if demo.new_database else 'the same'} queue database; ShadowResubmitTimeSpan is"
                f" {demo.shadow_resubmit_time_span} for the demo")
            publisher = Publisher(settings.kafka, settings.topics.events, generate(workload), speed=1.0)
            publisher.start()
            codec, ends_at = default_codec(), deadline
            while time.monotonic() < min(deadline, ends_at) and not stop.is_set():
                message = consumer.poll(0.5)
                if message is None or message.error():
                    continue
                record = codec.decode(message.value())
                seen += 1
                say(describe(record))
                kind = getattr(record, "type", None)
                # the story ends with the duplicates predicted when the server is back (or a loss);
                # what the same batch decided besides (its commands) is still read for a moment
                if kind is AlertType.MESSAGE_LOST or (
                        kind is AlertType.DUPLICATE_DELIVERY_EXPECTED and record.decided_at_ms >= back_at):
                    ends_at = min(ends_at, time.monotonic() + 3)
            if seen == 0:
                say("no alert or command arrived before the demo's time ran out")
        finally:
            say("shutting down ...")
            if publisher is not None:
                publisher.stop()
            if consumer is not None:
                consumer.close()
            twin.stop()
    return seen


def describe(record) -> str:
    """One line for an alert or a redelivery command."""
    at = datetime.fromtimestamp(record.decided_at_ms / 1000, tz=timezone.utc).strftime("%H:%M:%S")
    if isinstance(record, Alert):
        return f"ALERT   {at} {record.severity.value:8} {record.type.value}: {record.reason}"
    target = record.next_hop or "any route"
    return (f"COMMAND {at} {record.holder}: resubmit {record.message.message_id} to {target}"
            f" ({record.reason.value}, id {record.command_id})")


def _consumer_at_end(kafka: Kafka, topics: list[str]):
    reader = kafka_consumer(kafka, "shadowtwin-demo")
    metadata = reader.list_topics(timeout=10).topics
    reader.assign([TopicPartition(t, p, OFFSET_END) for t in topics for p in metadata[t].partitions])
    return reader


def _mkdir(path):
    path.mkdir(parents=True, exist_ok=True)
    return path
