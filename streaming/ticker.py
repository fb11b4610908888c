"""The twin's clock: a `ClockTick` on every partition of the events topic, at a steady pace.

Spark's watermark moves only when data arrives. When every node is quiet (a dead topology,
or simply a quiet night), the ticks keep event time moving, so that deadlines (promotions,
expiries) still fire. A tick carries the twin's own wall-clock time as its event time.

Longest detection delay this allows, for a deadline D, with every node silent:
D + watermark_delay + tick_interval + trigger_interval (+ one batch's processing time).
A broker that does not answer costs the ticks it misses, never the ticker: it ticks again once
the broker is back. An events topic deleted under the running twin (`kafka-topics --delete`) is said
once, naming it: the twin then reads and decides nothing, unsaid by Spark, until it is made again.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Callable

from confluent_kafka import KafkaError, KafkaException

from schemas.codec import encode
from schemas.events import ClockTick
from infra.kafka import producer
from streaming.broker_watch import QUIET_LOG_LEVEL

TWIN_NODE = "shadowtwin"


class Ticker(threading.Thread):
    def __init__(self, bootstrap_servers: str, topic: str, interval_s: float, clock: Callable[[], float] = time.time,
                 say: Callable[[str], None] = print):
        super().__init__(name="shadowtwin-ticker", daemon=True)
        self._say = say
        self._topic_gone = False

        self._producer = producer(bootstrap_servers, log_level=QUIET_LOG_LEVEL)  # the twin says a broker away
        self._topic = topic
        self._interval_s = interval_s
        self._clock = clock
        self._stopping = threading.Event()
        self._run_id = uuid.uuid4().hex[:8]
        self.ticks = 0

    def tick_once(self) -> None:
        now_ms = int(self._clock() * 1000)
        found = self._producer.list_topics(self._topic, timeout=10).topics[self._topic]
        gone = found.error is not None and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        if gone != self._topic_gone:
            self._topic_gone = gone
            self._say(f"events topic {self._topic} does not exist (deleted while the twin runs?): no clock ticks, and"
                      f" the twin reads and decides nothing, until it is made again (shadowtwin topics create; the"
                      f" events it held are gone)" if gone else f"events topic {self._topic} exists again: clock ticks"
                      f" go on")
        for partition in found.partitions:
            tick = ClockTick(event_id=f"tick-{self._run_id}-{now_ms}-{partition}", event_time_ms=now_ms,
                             node=TWIN_NODE, primary_server="")
            self._producer.produce(self._topic, value=encode(tick), partition=partition)
        self._producer.poll(0)
        self.ticks += 1

    def run(self) -> None:
        while not self._stopping.is_set():
            try:
                self.tick_once()
            except KafkaException:
                pass  # no broker answers (a restart, an outage): the next tick asks again, for as long as it takes
            self._stopping.wait(self._interval_s)
        self._producer.flush(10)

    def stop(self) -> None:
        self._stopping.set()
        self.join(timeout=15)
