"""The twin application: one object that owns the streaming twin's whole lifecycle.

    with TwinApplication(settings) as twin:      # broker if none, topics, Spark, query, ticks, progress
        twin.wait(seconds=60)                    # until then, a stop signal, or the query's failure
    TwinApplication(settings).run()              # the same, as a command: SIGINT/SIGTERM stop it, exit status

Everything the twin needs is started here and stopped here, in reverse order, and only what
this object started is stopped: the embedded broker when no other broker answers at
`kafka.bootstrap_servers`; the topics; the SparkSession (unless one is handed in, as the tests
and the benchmark do); the query (`streaming.twin.start_query`); the clock ticks; the listener
that prints one progress line per batch and raises LATE_EVENTS alerts; the one that commits
what each batch read to `twin.consumer_group` for Kafka's tools; the HTTP server of the
metrics and the live page (`[views]`, streaming/http_views.py); the one that says which events
Kafka deleted before the twin read them, while it was stopped (before the query starts) or while it
runs (streaming/lost_events.py); the one that says when Kafka stops answering and answers again
(streaming/broker_watch.py).
`twin run`, `demo`, `lab up --twin`, the benchmarks and the tests all start the twin through this
class, with settings as typed objects (`infra.settings.Settings`).
"""

from __future__ import annotations

import enum
import time
from datetime import datetime
from pathlib import Path
from typing import IO, Callable

from confluent_kafka import KafkaException
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from infra.broker import EmbeddedKafka, start_if_needed
from infra.kafka import producer
from infra.settings import Settings
from infra.signals import Stop, stop_on_signals
from infra.topics import alert_partitions, create_topics, events_retention_needed_ms, json_topic, refuse_differing
from schemas.codec import encode, kafka_key
from schemas.events import Alert
from schemas.jsonl import json_copy
from schemas.placement import alert_partition
from streaming.broker_watch import QUIET_LOG_LEVEL, BrokerWatch
from streaming.checkpoint_lock import lock_checkpoint
from streaming.consumer_group import GroupCommitter
from streaming.lost_events import LostEvents, checkpoint_positions
from streaming.progress import ProgressReporter, first_line
from streaming.session import build_spark
from streaming.state_reset import clear_earlier_twin
from streaming.ticker import Ticker
from streaming.twin import made_checkpoint, start_query, stop_between_batches, twin_output


class Ending(enum.Enum):
    """Why `wait` returned."""

    TIME_UP = "time up"
    SIGNALLED = "signalled"
    QUERY_FAILED = "query failed"
    QUERY_STOPPED = "query stopped"


class TwinApplication:
    """The streaming twin with everything it needs, started and stopped as one."""

    def __init__(self, settings: Settings, *, say: Callable[[str], None] = print, spark: SparkSession | None = None,
                 checkpoint_dir: Path | str | None = None, ticks: bool | None = None,
                 progress_every_seconds: float = 0.0,
                 transform: Callable[[DataFrame, Settings], DataFrame] | None = None):
        self.settings = settings
        self.checkpoint_dir = Path(checkpoint_dir or settings.spark.checkpoint_dir / "twin")
        self._say = say
        self._spark_given = spark
        self._ticks = settings.twin.ticks if ticks is None else ticks
        self._progress_every_s = progress_every_seconds
        self._transform = transform or twin_output
        self.spark: SparkSession | None = spark
        self.query: StreamingQuery | None = None
        self.progress: ProgressReporter | None = None
        self.group: GroupCommitter | None = None
        self.lost_events: LostEvents | None = None
        self.broker_watch: BrokerWatch | None = None
        self._broker: EmbeddedKafka | None = None
        self._ticker: Ticker | None = None
        self._alerts_out = None
        self._alert_partitions = 1  # those the alerts are placed on (infra.topics.alert_partitions)
        self.views = None  # streaming.http_views.ViewServer, when it serves
        self._feed = None
        self.stop_signal: Stop = Stop()
        self.restarts = 0
        self._triggers_at_restart = 0
        self._lock: IO[str] | None = None  # the checkpoint's (streaming/checkpoint_lock.py)

    # ---- lifecycle ---------------------------------------------------------------------------

    def start(self) -> "TwinApplication":
        settings = self.settings
        made_checkpoint(self.checkpoint_dir)
        self._lock = lock_checkpoint(self.checkpoint_dir)
        try:
            self._broker = start_if_needed(settings, self._say)
            self._create_topics()
            if not checkpoint_positions(self.checkpoint_dir):
                self._clear_earlier_state()
            if self.spark is None:
                self.spark = build_spark(settings)
            self.broker_watch = BrokerWatch(settings.kafka, self._say)
            self.spark.streams.addListener(self.broker_watch)
            self._alerts_out = producer(settings.kafka, log_level=QUIET_LOG_LEVEL,
                                        error_cb=self.broker_watch.on_error)
            self.progress = ProgressReporter(self._say, self._publish_alert, settings.twin.late_alert_threshold,
                                             every_seconds=self._progress_every_s)
            self.spark.streams.addListener(self.progress)
            if settings.twin.consumer_group:
                self.group = GroupCommitter(settings.kafka, settings.twin.consumer_group, self._say)
                self.spark.streams.addListener(self.group)
            if self.group is not None:
                self.group.say_where_they_differ(settings.topics.events, checkpoint_positions(self.checkpoint_dir),
                                                 settings.twin.starting_offsets)
            self.lost_events = LostEvents(settings.kafka, self._say, self._publish_alert)
            self.lost_events.at_start(self.checkpoint_dir)
            self.spark.streams.addListener(self.lost_events)
            self.query = start_query(self.spark, settings, self.checkpoint_dir, self._transform)
            topics = settings.topics
            self._say(f"twin running: {topics.events} -> {topics.alerts}, {topics.commands}, {topics.dead_letters};"
                      f" checkpoint {self.checkpoint_dir}")
            if self._ticks:
                self._ticker = Ticker(settings.kafka, topics.events,
                                      settings.twin.tick_interval_seconds, say=self._say)
                self._ticker.start()
            if settings.views.http_enabled:
                self._start_views()
        except BaseException:
            self.stop()
            raise
        return self

    def wait(self, seconds: float | None = None) -> Ending:
        """Block until `seconds` pass, a stop signal arrives, or the query ends for good.

        A query that fails is started again from its checkpoint (`twin.restart_attempts` times
        in a row at most, with a doubling pause), its topics created again if one was deleted:
        nothing it had read is lost or decided twice."""
        assert self.query is not None, "start() first"
        deadline = None if seconds is None else time.monotonic() + seconds
        failures_in_a_row = 0
        while True:
            if self.stop_signal.is_set():
                return Ending.SIGNALLED
            try:
                if self.query.exception() is not None:
                    if failures_in_a_row >= self.settings.twin.restart_attempts:
                        return Ending.QUERY_FAILED
                    failures_in_a_row += 1
                    self._restart_query(failures_in_a_row)
                    continue
                if failures_in_a_row and self.progress is not None and \
                        self.progress.triggers > self._triggers_at_restart + 1:
                    failures_in_a_row = 0  # it works again, busy or idle
                if not self.query.isActive:
                    return Ending.QUERY_STOPPED
                if deadline is not None and time.monotonic() >= deadline:
                    return Ending.TIME_UP
                if self._alerts_out is not None:
                    self._alerts_out.poll(0)  # its error callback hears of a broker gone (BrokerWatch)
                    self.broker_watch.check()
                self.query.awaitTermination(0.5)
            except StreamingQueryException:
                continue  # the query failed while awaited (Spark raises its failure there): see above
            except Exception:  # noqa: BLE001 - the JVM went away: by the same signal, or by a failure
                if self.stop_signal.is_set():
                    return Ending.SIGNALLED
                raise

    def _restart_query(self, attempt: int) -> None:
        pause = min(60.0, self.settings.twin.restart_backoff_seconds * 2 ** (attempt - 1))
        reason = first_line(self.query.exception())
        self._say(f"the twin's query failed ({reason}); starting it again from its checkpoint in {pause:.0f} s"
                  f" (attempt {attempt} of {self.settings.twin.restart_attempts})")
        if self.stop_signal.wait(pause):
            return
        self.restarts += 1
        try:
            self._create_topics(again=True)  # one deleted under the running query, say
            self.query = start_query(self.spark, self.settings, self.checkpoint_dir, self._transform)
        except Exception as exc:  # noqa: BLE001 - counted as one more failure; the old query's error stays
            self._say(f"the twin's query could not start again: {first_line(exc)}")
        self._triggers_at_restart = self.progress.triggers if self.progress else 0

    def _create_topics(self, again: bool = False) -> None:
        """Create the missing topics; refuse existing ones on which the twin would lose or refuse records
        (a compacted output topic, too small a max.message.bytes, ...: infra/topics.py), rather than start
        and lose its output unsaid, or fail on the first large record, perhaps weeks later. `again` (the
        query starting again): a topic that exists as it did is not named again."""
        settings = self.settings
        outcomes = create_topics(settings.kafka, settings.topics, json_topics=settings.twin.json_topics,
                                 events_retention_ms=events_retention_needed_ms(settings))
        for outcome in outcomes:
            if not again or outcome.created or outcome.differences or outcome.note:
                self._say(f"topic {outcome.describe()}")
        refuse_differing(outcomes)
        self._alert_partitions = alert_partitions(settings.kafka, settings.topics, settings.twin.json_topics)

    def _clear_earlier_state(self) -> None:
        """A new checkpoint: the state topic's records of an earlier twin go (streaming/state_reset.py)."""
        topic = self.settings.topics.state
        try:
            cleared = clear_earlier_twin(self.settings.kafka, topic)
        except (TimeoutError, KafkaException) as exc:
            self._say(f"topic {topic}: an earlier twin's records could not all be cleared ({first_line(exc)});"
                      f" `where` and `server` may show what this twin does not hold")
            return
        if cleared:
            self._say(f"topic {topic}: {cleared} records of an earlier twin cleared (a new checkpoint)")

    def _start_views(self) -> None:
        """The metrics and the live page (streaming/http_views.py), from the output topics and the progress."""
        from streaming.http_views import ViewServer
        from streaming.views import ViewFeed

        views = self.settings.views
        self._feed = ViewFeed(self.settings.kafka, self.settings.topics, views.recent_alerts,
                              self._say, self.settings.shadow_redundancy.names).start()
        try:
            self.views = ViewServer(views, self._feed, self._progress_figures).start()
        except OSError as exc:  # a port in use: said, and the twin decides on without its views
            self._say(f"metrics and live page not served: {views.http_host}:{views.http_port}:"
                      f" {exc.strerror or exc}; the twin decides on without them")
            return
        self._say(f"live page at {self.views.url}, Prometheus metrics at {self.views.url}metrics")

    def _progress_figures(self) -> tuple[dict | None, int, int, int]:
        p = self.progress
        return (p.last_progress, p.batches, p.input_rows_total, p.late_total) if p else (None, 0, 0, 0)

    def stop(self) -> None:
        """Stop what this object started, newest first; safe to call twice. Every part is stopped
        even when another part fails to (the Spark JVM may be going down already: a Ctrl-C or
        a SIGTERM sent to the whole process group reaches it too; the checkpoint keeps the work)."""
        if self.views is not None:
            self._quietly("the views' HTTP server", self.views.stop)
            self.views = None
        if self._feed is not None:
            self._quietly("the views' reader", self._feed.stop)
            self._feed = None
        if self._ticker is not None:
            self._quietly("the clock ticks", self._ticker.stop)
            self._ticker = None
        if self.query is not None:
            self._quietly("the query", lambda: self.query.isActive and stop_between_batches(self.query))
        if self.progress is not None and self.spark is not None:
            self._quietly("the progress listener", lambda: self.spark.streams.removeListener(self.progress))
        if self.lost_events is not None and self.spark is not None:
            self._quietly("the lost events' listener", lambda: self.spark.streams.removeListener(self.lost_events))
        if self.broker_watch is not None and self.spark is not None:
            self._quietly("the broker's listener", lambda: self.spark.streams.removeListener(self.broker_watch))
        if self.group is not None:
            if self.spark is not None:
                self._quietly("the consumer group's listener", lambda: self.spark.streams.removeListener(self.group))
            self._quietly("the consumer group's commits",
                          lambda: self.group.close(checkpoint_positions(self.checkpoint_dir)))
            self.group = None
        if self._alerts_out is not None:
            self._quietly("the alerts producer", lambda: self._alerts_out.flush(10))
            self._alerts_out = None
        if self.spark is not None and self._spark_given is None:
            self._quietly("Spark", self.spark.stop)
            self.spark = None
        if self._broker is not None:
            self._quietly("the embedded broker", self._broker.stop)
            self._broker = None
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def _quietly(self, what: str, step: Callable[[], object]) -> None:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - one part that cannot stop must not keep the others running
            if not self.stop_signal.is_set():
                self._say(f"could not stop {what} cleanly: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")

    def __enter__(self) -> "TwinApplication":
        return self.start()

    def __exit__(self, *_exc) -> None:
        self.stop()

    def run(self, seconds: float | None = None) -> int:
        """Run as a command until `seconds`, SIGINT or SIGTERM; return the exit status (0, 130, 143, 1)."""
        self.start()
        # Installed after Spark: PySpark's own SIGINT handler raises inside py4j calls.
        with stop_on_signals() as self.stop_signal:
            ending = Ending.QUERY_FAILED
            try:
                ending = self.wait(seconds)
                if ending is Ending.QUERY_FAILED:
                    self._say(f"the twin's query failed: {first_line(self.query.exception())}")
                elif ending is Ending.SIGNALLED:
                    self._say(f"stopping ({self.stop_signal.reason}) ...")
            finally:
                self.stop()
        if ending is Ending.QUERY_FAILED:
            return 1
        return self.stop_signal.exit_status()

    @property
    def watermark_ms(self) -> int:
        """The query's event-time watermark after its latest batch (0 before the first)."""
        progress = (self.query.lastProgress if self.query else None) or {}
        mark = (progress.get("eventTime") or {}).get("watermark")
        return int(datetime.fromisoformat(mark.replace("Z", "+00:00")).timestamp() * 1000) if mark else 0

    def _publish_alert(self, alert: Alert) -> None:
        """The twin's own alerts (LATE_EVENTS, EVENTS_LOST), and their JSON copies, as the query writes its."""
        if self._alerts_out is not None:
            topic, partition = self.settings.topics.alerts, alert_partition(alert, self._alert_partitions)
            self._alerts_out.produce(topic, key=kafka_key(alert), value=encode(alert), partition=partition)
            if self.settings.twin.json_topics:
                self._alerts_out.produce(json_topic(topic), key=kafka_key(alert), value=json_copy(alert),
                                         partition=partition)
            self._alerts_out.poll(0)
