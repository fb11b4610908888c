"""Whether Kafka answers the twin, said in the twin's words: once when it stops, once when it answers again.

A broker that goes away (restarted, crashed, out of reach) showed as librdkafka's lines of the twin's own
clients, `%3|...|FAIL|rdkafka#producer-3| ...: Connect to ipv4#127.0.0.1:19092 failed: Connection refused`,
one or two a second for as long as it was away, and as Spark's WARN with a stack trace; the twin said
nothing of it, nor when it answered again. Its clients' log lines are now kept off stderr (`QUIET_LOG_LEVEL`);
the alerts producer's error callback hears that every broker is down, and the query's next trigger (each
asks the brokers for the events topic's offsets) that they answer again. A client may find every broker
down for a moment while it reconnects to one that answers the query already, so the first line waits
`GRACE_SECONDS` for a trigger (Spark reports an idle one every 10 s at most) before it is said:

    Kafka at 127.0.0.1:19092 does not answer (all brokers down): the twin waits for it and reads on from
    its checkpoint once it answers
    Kafka at 127.0.0.1:19092 answers again (after 62 s); the twin reads on from its checkpoint
"""

from __future__ import annotations

import time
from typing import Callable

from confluent_kafka import KafkaError
from pyspark.sql.streaming.listener import StreamingQueryListener

from infra.kafka import Kafka, bootstrap_of

QUIET_LOG_LEVEL = 2  # librdkafka's critical lines only: a broker away is said once, here
GRACE_SECONDS = 15.0


class BrokerWatch(StreamingQueryListener):
    """Says when Kafka stops answering the twin (`on_error`, a librdkafka error callback, then `check`, called
    regularly) and when it answers again (the query's next trigger)."""

    def __init__(self, kafka: Kafka, say: Callable[[str], None] = print, grace_s: float = GRACE_SECONDS):
        self._bootstrap = bootstrap_of(kafka)
        self._say = say
        self._grace_s = grace_s
        self._down_at: float | None = None  # when a client last found every broker down, since the last trigger
        self._said = False

    def on_error(self, error: KafkaError) -> None:
        if error.code() == KafkaError._ALL_BROKERS_DOWN and self._down_at is None:
            self._down_at = time.monotonic()

    def check(self) -> None:
        if self._down_at is not None and not self._said and time.monotonic() - self._down_at >= self._grace_s:
            self._said = True
            self._say(f"Kafka at {self._bootstrap} does not answer (all brokers down): the twin waits for it and"
                      f" reads on from its checkpoint once it answers")

    def _answered(self) -> None:
        if self._said:
            self._say(f"Kafka at {self._bootstrap} answers again (after {time.monotonic() - self._down_at:.0f} s);"
                      f" the twin reads on from its checkpoint")
        self._down_at, self._said = None, False

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        self._answered()

    def onQueryIdle(self, event) -> None:
        self._answered()

    def onQueryTerminated(self, event) -> None:
        pass
