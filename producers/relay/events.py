"""A node's SMTP-level events: built as contract records and published to the events topic.

    out = NodeEvents("n1", bootstrap, topic)
    out.emit(ev.MessageReceived, primary="n1", message=ref, sender=..., ...)
    out.flush()     # before answering 250: a kill -9 right after loses no event

Event ids are unique per node across restarts (`<node>-<boot id>-<n>`); event times come
from the node's own clock and never go backwards within one process (ties are broken by a
millisecond), so the model sees each node's events in the order they happened. Each event is
keyed by its primary server (`producers.publisher.produce`); `deliveries` counts the broker's
acknowledgements, and the node says at its stop how many events were not acknowledged.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import uuid

from schemas import events as ev
from schemas.events import MessageRef
from producers.publisher import DEFAULT_DELIVERY_TIMEOUT_S, Deliveries, produce, reporting_producer

log = logging.getLogger("shadowtwin.relay.events")


class NodeEvents:
    def __init__(self, node: str, bootstrap: str, topic: str, delivery_timeout_s: float = DEFAULT_DELIVERY_TIMEOUT_S):
        self.node = node
        self.topic = topic
        self.deliveries = Deliveries(bootstrap, delivery_timeout_s)
        self._producer = reporting_producer(bootstrap, self.deliveries, **{"linger.ms": 2})
        self._boot = uuid.uuid4().hex[:8]
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._last_ms = 0

    def now_ms(self) -> int:
        """The node's clock, strictly increasing across the events it stamps."""
        with self._lock:
            self._last_ms = max(int(time.time() * 1000), self._last_ms + 1)
            return self._last_ms

    def emit(self, kind: type[ev.Event], primary: str, message: MessageRef | None = None, at_ms: int | None = None,
             **fields) -> ev.Event:
        event = kind(event_id=f"{self.node}-{self._boot}-{next(self._numbers)}",
                     event_time_ms=at_ms if at_ms is not None else self.now_ms(),
                     node=self.node, primary_server=primary, message=message, **fields)
        produce(self._producer, self.topic, event, on_delivery=self._delivered)
        with self._lock:
            self.deliveries.produced += 1
        log.debug("event %s %s", kind.kind, message.internal_id if message else "")
        return event

    def _delivered(self, error, _message) -> None:
        self.deliveries.delivered(error)
        if error is not None:
            log.warning("an event was not delivered to Kafka: %s", error)

    def flush(self, timeout_s: float = 10.0) -> bool:
        left = self._producer.flush(timeout_s)
        if left:
            log.warning("%d events still unsent to Kafka after %.0f s", left, timeout_s)
        return left == 0
