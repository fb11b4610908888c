"""`shadowtwin twin run`: the product's main job, from the events topic to alerts and commands.

On the embedded default it starts the local broker (when nothing listens at the configured
address), creates the topics, starts Spark (local mode unless `--master` says otherwise),
the streaming twin, its clock ticks and the console progress, and runs until Ctrl-C or
`--seconds`. The same entry point runs under spark-submit (shadowtwin/__main__.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from infra.broker import start_if_needed
from infra.settings import Settings
from infra.topics import create_topics


@dataclass(frozen=True)
class RunOptions:
    master: str | None = None
    seconds: float | None = None
    ticks: bool | None = None
    checkpoint_dir: Path | None = None


def twin_config(settings: Settings, checkpoint_dir: Path | None = None):
    from streaming.twin import TwinConfig

    twin, topics = settings.twin, settings.topics
    return TwinConfig(
        bootstrap_servers=settings.kafka.bootstrap_servers,
        events_topic=topics.events, alerts_topic=topics.alerts, commands_topic=topics.commands,
        dead_letters_topic=topics.dead_letters,
        checkpoint_dir=str(checkpoint_dir or settings.spark.checkpoint_dir / "twin"),
        model=settings.shadow_redundancy,
        watermark_delay=twin.watermark_delay,
        max_clock_skew_ms=twin.max_clock_skew_seconds * 1000,
        trigger_interval=settings.spark.trigger_interval,
        starting_offsets=twin.starting_offsets,
        max_offsets_per_trigger=twin.max_offsets_per_trigger or None,
    )


def run_twin(settings: Settings, options: RunOptions = RunOptions(), say: Callable[[str], None] = print) -> int:
    from schemas.codec import encode, kafka_key
    from infra.kafka import producer
    from streaming.progress import ProgressReporter
    from streaming.session import build_spark
    from streaming.ticker import Ticker
    from streaming.twin import start_twin, stop_between_batches

    broker = start_if_needed(settings, say)
    spark = query = ticker = None
    try:
        for outcome in create_topics(settings.kafka.bootstrap_servers, settings.topics):
            say(f"topic {outcome.describe()}")
        spark = build_spark(settings, master=options.master)
        alerts_out = producer(settings.kafka.bootstrap_servers)

        def publish(alert) -> None:
            alerts_out.produce(settings.topics.alerts, key=kafka_key(alert), value=encode(alert))
            alerts_out.flush(10)

        spark.streams.addListener(ProgressReporter(say, publish, settings.twin.late_alert_threshold))
        config = twin_config(settings, options.checkpoint_dir)
        query = start_twin(spark, config)
        say(f"twin running: {config.events_topic} -> {config.alerts_topic}, {config.commands_topic},"
            f" {config.dead_letters_topic}; checkpoint {config.checkpoint_dir}; Ctrl-C stops it")
        if settings.twin.ticks if options.ticks is None else options.ticks:
            ticker = Ticker(settings.kafka.bootstrap_servers, config.events_topic, settings.twin.tick_interval_seconds)
            ticker.start()
        deadline = None if options.seconds is None else time.monotonic() + options.seconds
        while query.isActive and (deadline is None or time.monotonic() < deadline):
            query.awaitTermination(0.5)
        if query.exception() is not None:
            say(f"the twin's query failed: {query.exception()}")
            return 1
        return 0
    except KeyboardInterrupt:
        say("interrupted")
        return 0
    finally:
        if ticker is not None:
            ticker.stop()
        if query is not None and query.isActive:
            stop_between_batches(query)
        if spark is not None:
            spark.stop()
        if broker is not None:
            broker.stop()
