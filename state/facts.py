"""Facts about every server that every group is fed alike: what a group cannot learn from its own events.

A group sees its primary's events and its shadows' events about that primary. Two things it
must know come from elsewhere (state/README.md, "Facts every group shares"):

- each server's `NodeStarted` (mode, site, DAG, queue database), wherever it is published:
  a 2010 shadow is judged as 2010, a shadow back with a new database has lost its copies;
- that a server is still publishing at all: one `NodeSeen` per server and per liveness
  bucket of event time, stamped with the server's first event in that bucket.

The facts are events of their own, in event time: an engine merges them into every group's
events in event-time order, so every engine (the reference replay, Spark) decides the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

from schemas import events as ev


@dataclass(frozen=True, slots=True)
class NodeSeen:
    """`node` published an event at `event_time_ms`, its first in this liveness bucket."""

    event_id: str
    event_time_ms: int
    node: str
    primary_server: str = ""
    message: None = None


def shared_facts(events: Iterable[ev.Event], bucket_ms: int) -> Iterator[ev.NodeStarted | NodeSeen]:
    """The facts every group is fed, from a stream of events in event-time order."""
    last: dict[str, int] = {}  # node -> the bucket of its latest NodeSeen
    tick, started = ev.ClockTick, ev.NodeStarted
    for event in events:
        kind = type(event)
        if kind is tick:
            continue
        if kind is started:
            yield event
        bucket = event.event_time_ms // bucket_ms
        node = event.node
        if last.get(node) != bucket:
            last[node] = bucket
            yield NodeSeen(f"seen:{node}:{bucket}", event.event_time_ms, node)
