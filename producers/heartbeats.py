"""A small stand-in producer: simulated nodes that send a heartbeat event every interval.

One node can be told to fall silent after a while, so that the twin has something to notice.
Events are JSON `{"node": ..., "event_time_ms": ...}` stamped with the wall clock, keyed by node.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Callable

from confluent_kafka import Producer


def heartbeat(node: str, event_time_ms: int) -> bytes:
    return json.dumps({"node": node, "event_time_ms": event_time_ms}).encode()


class HeartbeatProducer(threading.Thread):
    """Send heartbeats for `nodes` until stopped; `silent_node` stops after `silence_after_s`."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        nodes: tuple[str, ...],
        interval_s: float,
        silent_node: str | None = None,
        silence_after_s: float = 0.0,
        clock: Callable[[], float] = time.time,
    ):
        super().__init__(name="heartbeat-producer", daemon=True)
        self._producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 5})
        self._topic = topic
        self._nodes = nodes
        self._interval_s = interval_s
        self._silent_node = silent_node
        self._silence_after_s = silence_after_s
        self._clock = clock
        self._stopping = threading.Event()
        self.sent = 0

    def run(self) -> None:
        started = self._clock()
        while not self._stopping.is_set():
            now = self._clock()
            for node in self._nodes:
                if node == self._silent_node and now - started >= self._silence_after_s:
                    continue
                self._producer.produce(self._topic, key=node.encode(), value=heartbeat(node, int(now * 1000)))
                self.sent += 1
            self._producer.poll(0)
            self._stopping.wait(self._interval_s)
        self._producer.flush(10)

    def stop(self) -> None:
        self._stopping.set()
        self.join(timeout=15)
