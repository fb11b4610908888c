"""Benchmark: the streaming twin on the real broker, in one run.

    .venv/bin/python -m benchmarks.twin [--events 2000000] [--servers 8] [--in-flight 100000 [1000000 ...]]
                                        [--declare-servers]

1. Throughput: a synthetic DAG (servers x (servers-1) shadow/primary pairs, about
   `--in-flight` messages in flight) is published to a fresh events topic; the twin then
   reads it in micro-batches of `--batch` records. Sustained rate = records / batch time over
   the batches after the first two (warm-up). With several `--in-flight` values, each gets its
   own topic and run, side by side, and the ratio of their rates is printed; the peak resident
   memory of the Spark JVM and its Python workers is sampled during each run (not this driver,
   which also generated the events, nor the broker), and the state store reports its own. The
   CPU time the JVM and the workers used per record is printed for each run (from /proc): on a
   machine that other work shares it moves less than the rates do. The
   messages held grow from none at the start: each run prints how many an event met on average
   and at most (received, not yet discarded by their shadow; shadows collect discards at their
   next heartbeat, so more than `--in-flight`). The twin runs with the configured watermark
   delay unless `--watermark-delay` says otherwise; the rows dropped behind the watermark are
   counted and printed. `--declare-servers` declares the synthetic servers for these runs
   (`[shadow_redundancy] servers`), as a deployment that wants cross-server reasoning does:
   every event then also reaches every server's group as a shared fact (streaming/twin.py
   `shared_facts`).
2. Ceiling: a stateless query over the same topic (the same decoding, a no-op sink).
3. Detection delay, live: primaries stop answering their shadows at staggered times, the
   twin's clock ticks, and for each redelivery command the delay is its Kafka timestamp
   minus the moment the twin could first know the deadline passed: the shadow's first failed
   query after it, or the watermark passing it (deadline + watermark delay); the live events
   carry wall-clock event times, so event time and wall time coincide.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import threading
import time
import uuid
from typing import Iterable, Iterator

from pyspark.sql import DataFrame, functions as F

from benchmarks.memory import jvm_pid, spark_cpu_seconds, spark_rss_bytes
from infra.broker import start_if_needed
from infra.config import SparkInterval
from infra.settings import Settings, TopicSettings, load_settings
from infra.topics import create_topics
from producers.publisher import Publisher
from producers.synthetic import Workload, generate
from schemas.codec import default_codec
from schemas.events import Event, MessageReceived, ShadowDiscarded
from state.parameters import model_config_from
from streaming.app import TwinApplication
from streaming.decode import classify_events
from streaming.session import build_spark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--servers", type=int, default=8)
    parser.add_argument("--in-flight", type=int, nargs="+", default=[100_000])
    parser.add_argument("--batch", type=int, default=250_000, help="records per micro-batch (maxOffsetsPerTrigger)")
    parser.add_argument("--trigger", default="1 second")
    parser.add_argument("--live-seconds", type=int, default=60)
    parser.add_argument("--shuffle-partitions", type=int, help="default: spark.shuffle_partitions from conf/")
    parser.add_argument("--watermark-delay", type=SparkInterval,
                        help="for the throughput runs; default: twin.watermark_delay from conf/ (what the twin"
                             " runs with)")
    parser.add_argument("--declare-servers", action="store_true",
                        help="declare the synthetic servers, so every event is a shared fact of every group")
    args = parser.parse_args()
    settings = load_settings()
    if args.declare_servers:
        settings = dataclasses.replace(settings, shadow_redundancy=dataclasses.replace(
            settings.shadow_redundancy, servers=tuple(Workload(servers=args.servers).server_names())))
    if args.shuffle_partitions:
        settings = dataclasses.replace(settings, spark=dataclasses.replace(
            settings.spark, shuffle_partitions=args.shuffle_partitions))
    broker = start_if_needed(settings, print)
    bootstrap = settings.kafka.bootstrap_servers
    spark = build_spark(settings)
    try:
        rate = 2_000.0  # messages per second of event time
        rates = []
        for in_flight in args.in_flight:
            topics = fresh_topics(bootstrap)
            workload = Workload(servers=args.servers, messages_per_second=rate,
                                duration_ms=int(args.events / 11 / rate * 1000),
                                delivery_ms=int(in_flight / rate * 1000))
            started = time.perf_counter()
            held = HeldCount()
            publisher = Publisher(bootstrap, topics.events, held.count(generate(workload)))
            publisher.run()
            declared = f", all {args.servers} declared" if args.declare_servers else ""
            print(f"published {publisher.sent:,} events ({args.servers} servers{declared},"
                  f" {args.servers * (args.servers - 1)} shadow/primary pairs, ~{in_flight:,} messages in flight)"
                  f" in {time.perf_counter() - started:.0f}s;"
                  f" messages held when an event arrives: {held.mean():,.0f} on average, {held.peak:,} at most")
            with PeakMemory(spark) as memory:
                twin_rate = throughput(spark, bench_settings(settings, topics, args), args, twin=True)
            rates.append(twin_rate)
            print(f"  twin at ~{in_flight:,} in flight: {twin_rate:,.0f} events/s; peak resident memory of the twin"
                  f" {memory.describe()}")
            if len(rates) == 1:
                ceiling = throughput(spark, bench_settings(settings, topics, args), args, twin=False)
                print(f"sustained: twin {twin_rate:,.0f} events/s; pass-through ceiling {ceiling:,.0f} events/s"
                      f" ({twin_rate / ceiling:.0%} of it)")
        for in_flight, twin_rate in zip(args.in_flight[1:], rates[1:]):
            print(f"twin at ~{in_flight:,} in flight: {twin_rate / rates[0]:.0%} of its rate at"
                  f" ~{args.in_flight[0]:,}")
        delays = detection_delays(spark, settings, args)
        if delays:
            p50, p99 = percentile(delays, 50), percentile(delays, 99)
            trigger_s = float(args.trigger.split()[0])
            print(f"detection delay over {len(delays)} commands: p50 {p50:.2f}s, p99 {p99:.2f}s, max {max(delays):.2f}s"
                  f" (trigger interval {trigger_s:g}s: p99 = {p99 / trigger_s:.1f} trigger intervals)")
        else:
            print("detection delay: no command arrived")
    finally:
        spark.stop()
        if broker is not None:
            broker.stop()


class HeldCount:
    """How many messages the twin holds as each event arrives: received, and not yet discarded by
    their shadow (the state a batch meets, averaged over its events)."""

    def __init__(self):
        self.held = self.peak = self.events = self.total = 0

    def count(self, events: Iterable[Event]) -> Iterator[Event]:
        for event in events:
            if isinstance(event, MessageReceived):
                self.held += 1
                self.peak = max(self.peak, self.held)
            elif isinstance(event, ShadowDiscarded):
                self.held -= 1
            self.events += 1
            self.total += self.held
            yield event

    def mean(self) -> float:
        return self.total / self.events if self.events else 0.0


class PeakMemory:
    """The peak resident memory of the Spark JVM and its Python workers (not this process, which
    generated and published the events, nor the broker), sampled every half second, in all and
    of each kind."""

    def __init__(self, spark):
        self.peak_bytes = self.peak_jvm_bytes = self.peak_python_bytes = 0
        self._jvm_pid = jvm_pid(spark)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> "PeakMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def describe(self) -> str:
        return (f"{self.peak_bytes / 2**30:.2f} GiB (the Spark JVM at most {self.peak_jvm_bytes / 2**30:.2f},"
                f" its Python workers together at most {self.peak_python_bytes / 2**30:.2f})")

    def _sample(self) -> None:
        while not self._stop.wait(0.5):
            jvm, python = spark_rss_bytes(self._jvm_pid)
            self.peak_bytes = max(self.peak_bytes, jvm + python)
            self.peak_jvm_bytes = max(self.peak_jvm_bytes, jvm)
            self.peak_python_bytes = max(self.peak_python_bytes, python)


def state_memory(settings: Settings, batches: dict) -> str:
    """What the state store says it used; a bounded RocksDB reports nothing per store."""
    if settings.spark.state_store_memory_mb:
        return f"; the state store's memory (RocksDB) bounded to {settings.spark.state_store_memory_mb:,} MB"
    reported = max((sum(op.get("memoryUsedBytes", 0) for op in progress.get("stateOperators") or [])
                    for progress in batches.values()), default=0)
    return f"; the state store's own memory (RocksDB) at most {reported / 2**30:.2f} GiB"


def fresh_topics(bootstrap: str) -> TopicSettings:
    suffix = uuid.uuid4().hex[:8]
    topics = TopicSettings(events=f"bench.events.{suffix}", alerts=f"bench.alerts.{suffix}",
                           commands=f"bench.commands.{suffix}", dead_letters=f"bench.dead.{suffix}",
                           state=f"bench.state.{suffix}")
    create_topics(bootstrap, topics)
    return topics


def bench_settings(settings: Settings, topics: TopicSettings, args, **twin) -> Settings:
    return dataclasses.replace(
        settings, topics=topics, spark=dataclasses.replace(settings.spark, trigger_interval=SparkInterval(args.trigger)),
        twin=dataclasses.replace(settings.twin, **{
            "watermark_delay": args.watermark_delay or settings.twin.watermark_delay,
            "max_offsets_per_trigger": args.batch, **twin}))


def pass_through(raw: DataFrame, settings: Settings) -> DataFrame:
    """The same scan and decoding as the twin, no state, nothing written: the ceiling."""
    rows = classify_events(raw)
    return rows.where(F.col("primary_server") == F.lit("\0never")).select(
        F.lit(settings.topics.dead_letters).alias("topic"), "key", "value")


def throughput(spark, settings: Settings, args, twin: bool) -> float:
    checkpoint = tempfile.mkdtemp(prefix="bench-")
    batches: dict[int, dict] = {}
    # Each batch's progress as the twin's own listener gets it: polling `query.recentProgress`
    # made the Spark JVM spend a quarter of its time in py4j (measured with JFR).

    def keep_progress(_line: str) -> None:
        progress = app.progress.last_progress if app.progress is not None else None
        if progress is not None:
            batches.setdefault(progress["batchId"], progress)

    app = TwinApplication(settings, spark=spark, checkpoint_dir=checkpoint, ticks=False, say=keep_progress,
                          transform=None if twin else pass_through)
    cpu_before = spark_cpu_seconds(jvm_pid(spark))
    app.start()
    rows, seconds, late = 0, 0.0, 0
    try:
        while app.query.isActive:
            time.sleep(0.5)
            last = batches[max(list(batches))] if batches else None
            # Caught up: a stateless query runs no batch without data, so do not wait for an empty one.
            if last and last["sources"][0].get("latestOffset") == last["sources"][0].get("endOffset"):
                break
    finally:
        app.stop()
    jvm_cpu, python_cpu = (after - before for after, before in zip(spark_cpu_seconds(jvm_pid(spark)), cpu_before))
    every = sum(progress["numInputRows"] for progress in batches.values())
    for progress in batches.values():
        late += sum(op.get("numRowsDroppedByWatermark", 0) for op in progress.get("stateOperators") or [])
        if progress["batchId"] >= 2 and progress["numInputRows"]:
            rows += progress["numInputRows"]
            seconds += progress["durationMs"]["triggerExecution"] / 1000
    name = "twin" if twin else "pass-through"
    print(f"  {name}: {rows:,} records in {seconds:.1f}s of batches after warm-up"
          + (state_memory(settings, batches) + f"; rows behind the watermark ({settings.twin.watermark_delay}):"
             f" {late:,} dropped by Spark; dead letters {records_in(settings, settings.topics.dead_letters):,} (the rows"
             " the operator set aside behind its watermark, and any record it could not use)" if twin else ""))
    if every:
        print(f"  {name}: CPU per record over all {every:,} of the run, warm-up included: the Spark JVM"
              f" {jvm_cpu / every * 1e6:.1f} us, its Python workers {python_cpu / every * 1e6:.1f} us")
    return rows / seconds if seconds else 0.0


def records_in(settings: Settings, topic: str) -> int:
    """How many records `topic` holds (the sum of its partitions' offset ranges)."""
    from confluent_kafka import Consumer

    from producers.topic_reader import watermarks

    client = Consumer({"bootstrap.servers": settings.kafka.bootstrap_servers, "group.id": uuid.uuid4().hex})
    try:
        partitions = client.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(high - low for low, high in (watermarks(client, topic, p) for p in partitions))
    finally:
        client.close()


def detection_delays(spark, settings: Settings, args) -> list[float]:
    """Live: shadows lose their primaries one after another; how late does each command come?"""
    from confluent_kafka import Consumer

    topics = fresh_topics(settings.kafka.bootstrap_servers)
    bootstrap = settings.kafka.bootstrap_servers
    span_ms, delay_ms = 5_000, 2_000
    settings = dataclasses.replace(
        bench_settings(settings, topics, args, watermark_delay=SparkInterval(f"{delay_ms // 1000} seconds"),
                       starting_offsets="latest", max_offsets_per_trigger=0, tick_interval_seconds=0.25),
        shadow_redundancy=model_config_from({"shadow_heartbeat_frequency": "1s", "shadow_resubmit_time_span": "5s"}))
    app = TwinApplication(settings, spark=spark, checkpoint_dir=tempfile.mkdtemp(prefix="bench-live-"),
                          ticks=True, say=lambda line: None).start()
    while app.progress.batches == 0:
        time.sleep(0.2)
    events, knowable = live_outages(int(time.time() * 1000), args.live_seconds, span_ms, delay_ms)
    publisher = Publisher(bootstrap, topics.events, events, speed=1.0)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex, "auto.offset.reset": "earliest"})
    consumer.subscribe([topics.commands])
    codec, delays = default_codec(), []
    publisher.start()
    try:
        end = time.monotonic() + args.live_seconds + 30
        while time.monotonic() < end and len(delays) < len(knowable):
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            command = codec.decode(message.value())
            delays.append((message.timestamp()[1] - knowable[command.message.internal_id]) / 1000)
    finally:
        publisher.stop()
        consumer.close()
        app.stop()
    return delays


def live_outages(start_ms: int, seconds: int, span_ms: int, delay_ms: int) -> tuple[list, dict[str, int]]:
    """Every half second a new primary takes a message (shadowed on its peer), answers its
    shadow once, and falls silent; the shadow keeps querying, failing, once a second.
    Returns the events in time order and, per message, the event time at which the twin can
    first know that its deadline passed: the first failed query at or after the deadline, or
    the first tick past deadline + watermark delay, whichever comes first."""
    from schemas import events as ev
    from schemas.events import MessageRef, Recipient

    events, deadlines, ids = [], {}, iter(range(10**9))

    def header(node, primary, t, ref=None):
        return dict(event_id=f"live-{next(ids)}", event_time_ms=t, node=node, primary_server=primary, message=ref)

    for k in range(seconds * 2):
        t, primary, shadow = start_ms + k * 500, f"p{k:03d}", f"s{k:03d}"
        ref = MessageRef(f"<live{k}@contoso.com>", f"live{k}")
        events += [
            ev.MessageReceived(**header(primary, primary, t, ref), sender="x", source=ev.MessageSource.OUTSIDE_BOUNDARY,
                               recipients=(Recipient("a@contoso.com", True),), size_bytes=1000),
            ev.ShadowCopyStored(**header(shadow, primary, t + 10, ref), primary_queue_db_id=f"{primary}-db"),
            ev.DiscardQuerySent(**header(shadow, primary, t + 20), shadow_queue_db_id=f"{shadow}-db"),
            ev.DiscardQueryAnswered(**header(shadow, primary, t + 30), primary_queue_db_id=f"{primary}-db"),
        ]
        deadline = t + 30 + span_ms
        failures = range(t + 1_005, deadline + 3_000, 1_000)
        for failed in failures:
            events += [ev.DiscardQuerySent(**header(shadow, primary, failed - 5), shadow_queue_db_id=f"{shadow}-db"),
                       ev.DiscardQueryFailed(**header(shadow, primary, failed), reason=ev.QueryFailureReason.TIMEOUT)]
        deadlines[ref.internal_id] = min(next(f for f in failures if f >= deadline), deadline + delay_ms)
    events.sort(key=lambda e: e.event_time_ms)
    return events, deadlines


def percentile(values: list[float], p: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


if __name__ == "__main__":
    main()
