"""A synthetic, deterministic event stream: a day (or any span) of one DAG's transport.

Servers receive messages at a steady rate, make a shadow copy on a random peer, hand the
message to its next hop after a short delay, and the shadow collects the discard at its
next heartbeat (every ShadowHeartbeatFrequency). One server can crash and come back with
the same or a new queue database. Events come out in event-time order, generated lazily,
so a day of a large organisation never sits in memory at once.

It is the realistic mix for benchmarks and what-if runs; the topology simulator with its
fault schedule and ground truth builds on the same idea.
"""

from __future__ import annotations

import heapq
import itertools
import random
from dataclasses import dataclass
from typing import Iterator

from schemas import events as ev
from schemas.events import MessageRef, Recipient


@dataclass(frozen=True)
class Crash:
    """A server that stops dead at `at_ms` for `down_ms`. Its next hop was slow for `backlog_ms`
    before that, so the messages it received then were still queued when it died."""

    server: str
    at_ms: int
    down_ms: int
    new_database: bool
    backlog_ms: int = 600_000


@dataclass(frozen=True)
class Workload:
    servers: int = 16
    messages_per_second: float = 2.0
    duration_ms: int = 24 * 3600 * 1000
    start_ms: int = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    external_share: float = 0.2
    fork_share: float = 0.1
    crash: Crash | None = None
    heartbeat_ms: int = 120_000  # ShadowHeartbeatFrequency: how often shadows query their primaries
    delivery_ms: int = 2_000  # mean time a message waits on its primary (messages in flight = rate x this)
    seed: int = 7

    def server_names(self) -> list[str]:
        return [f"mbx{i:02d}" for i in range(1, self.servers + 1)]


def generate(workload: Workload) -> Iterator[ev.Event]:
    """Every event of the workload, in event-time order."""
    return _Generator(workload).run()


class _Generator:
    def __init__(self, w: Workload):
        self.w = w
        self.rng = random.Random(w.seed)
        self.servers = w.server_names()
        self.pending: list[tuple[int, int, ev.Event]] = []  # (time, sequence, event)
        self.sequence = itertools.count()
        self.ids = itertools.count(1)
        self.db = {s: f"{s}-db1" for s in self.servers}
        # (shadow, primary) -> internal ids whose discard the primary has set, not yet collected
        self.discardable: dict[tuple[str, str], list[str]] = {}
        self.holds: dict[tuple[str, str], int] = {}  # (shadow, primary) -> copies held

    def run(self) -> Iterator[ev.Event]:
        w = self.w
        for server in self.servers:
            self.push(self.node_started(server, w.start_ms))
        interval_ms = 1000 / w.messages_per_second
        arrival, end = float(w.start_ms), w.start_ms + w.duration_ms
        next_beat = w.start_ms + w.heartbeat_ms
        crash = w.crash
        if crash is not None:
            self.push(self.node_started(crash.server, crash.at_ms + crash.down_ms, new_db=crash.new_database))
        message_number = 0
        while arrival < end:
            t = int(arrival)
            while next_beat <= t:
                self.heartbeats(next_beat)
                next_beat += self.w.heartbeat_ms
            yield from self.flush(t)
            message_number += 1
            self.message(f"m{message_number}", t)
            arrival += self.rng.expovariate(1 / interval_ms)
        # Let the last messages finish and their shadows collect the discards.
        while self.pending or any(self.discardable.values()):
            self.heartbeats(next_beat)
            next_beat += self.w.heartbeat_ms
            yield from self.flush(next_beat)
        yield self.tick(next_beat)

    def flush(self, before_ms: int) -> Iterator[ev.Event]:
        pending = self.pending
        while pending and pending[0][0] < before_ms:
            yield heapq.heappop(pending)[2]

    def push(self, event: ev.Event) -> None:
        heapq.heappush(self.pending, (event.event_time_ms, next(self.sequence), event))

    def down(self, server: str, t: int) -> bool:
        c = self.w.crash
        return c is not None and c.server == server and c.at_ms <= t < c.at_ms + c.down_ms

    def header(self, node: str, primary: str, t: int, ref: MessageRef | None = None) -> dict:
        return dict(event_id=f"{node}-{next(self.ids)}", event_time_ms=t, node=node, primary_server=primary,
                    message=ref)

    def node_started(self, server: str, t: int, new_db: bool = False) -> ev.NodeStarted:
        if new_db:
            self.db[server] = f"{server}-db{t}"
        return ev.NodeStarted(**self.header(server, server, t), ad_site="site1", boundary="dag1", dag="dag1",
                              queue_db_id=self.db[server])

    def message(self, internal_id: str, t: int) -> None:
        rng, push = self.rng, self.push
        primary = rng.choice([s for s in self.servers if not self.down(s, t)])
        shadow = rng.choice([s for s in self.servers if s != primary and not self.down(s, t)])
        ref = MessageRef(f"<{internal_id}@contoso.com>", internal_id)
        recipients = (Recipient(f"user{rng.randrange(5000)}@contoso.com", True),)
        if rng.random() < self.w.external_share:
            recipients += (Recipient(f"someone{rng.randrange(5000)}@fabrikam.com", False),)
        h = self.header
        push(ev.MessageReceived(**h(primary, primary, t, ref), sender="smtp.fabrikam.com",
                                source=ev.MessageSource.OUTSIDE_BOUNDARY, recipients=recipients,
                                size_bytes=rng.randrange(2_000, 200_000)))
        push(ev.ShadowCopyRequested(**h(primary, primary, t + 5, ref), candidate=shadow,
                                    locality=ev.SiteLocality.LOCAL, attempt=1))
        push(ev.ShadowCopyStored(**h(shadow, primary, t + 20, ref), primary_queue_db_id=self.db[primary]))
        push(ev.ShadowCopyAcknowledged(**h(primary, primary, t + 25, ref), shadow_server=shadow))
        push(ev.AcknowledgedToSender(**h(primary, primary, t + 30, ref), redundant=True))
        self.holds[(shadow, primary)] = self.holds.get((shadow, primary), 0) + 1
        done = t + 200 + int(rng.expovariate(1 / self.w.delivery_ms))
        crash = self.w.crash
        if crash is not None and crash.server == primary and crash.at_ms - crash.backlog_ms <= t < crash.at_ms:
            done = crash.at_ms  # its next hop is too slow: the message is still queued when it dies
        if self.down(primary, done):  # crashed with the message in its queue
            if crash.new_database:
                return
            done = crash.at_ms + crash.down_ms + 1_000
        forks = [(None, "mbx-db-" + str(rng.randrange(40)), recipients)]
        if len(recipients) > 1 and rng.random() < self.w.fork_share * 5:
            forks = [("f1", forks[0][1], recipients[:1]), ("f2", "smtp.fabrikam.com", recipients[1:])]
        for fork, hop, fork_recipients in forks:
            fork_ref = MessageRef(ref.message_id, internal_id, fork)
            push(ev.SentToNextHop(**h(primary, primary, done - 100, fork_ref), next_hop=hop,
                                  recipients=tuple(r.address for r in fork_recipients),
                                  outside_boundary=hop.startswith("smtp.")))
            push(ev.NextHopAcknowledged(**h(primary, primary, done, fork_ref), next_hop=hop))
        push(ev.DiscardStatusSet(**h(primary, primary, done + 1, ref), shadow_server=shadow))
        push(ev.MovedToSafetyNet(**h(primary, primary, done + 2, ref)))
        self.discardable.setdefault((shadow, primary), []).append((done + 1, internal_id))

    def heartbeats(self, t: int) -> None:
        """Each shadow that holds copies for a primary queries it (XQDISCARD) at this beat."""
        for (shadow, primary), held in list(self.holds.items()):
            if held <= 0 or self.down(shadow, t):
                continue
            sent = ev.DiscardQuerySent(**self.header(shadow, primary, t), shadow_queue_db_id=self.db[shadow])
            self.push(sent)
            if self.down(primary, t):
                self.push(ev.DiscardQueryFailed(**self.header(shadow, primary, t + 50),
                                                reason=ev.QueryFailureReason.TIMEOUT))
                continue
            ready = [i for done, i in self.discardable.get((shadow, primary), ()) if done < t]
            if ready:
                self.discardable[(shadow, primary)] = [(d, i) for d, i in self.discardable[(shadow, primary)]
                                                       if d >= t]
                self.holds[(shadow, primary)] -= len(ready)
            refs = tuple(MessageRef(f"<{i}@contoso.com>", i) for i in ready)
            self.push(ev.DiscardQueryAnswered(**self.header(shadow, primary, t + 50),
                                              primary_queue_db_id=self.db[primary], discarded=refs))
            for ref in refs:
                self.push(ev.ShadowDiscarded(**self.header(shadow, primary, t + 60, ref)))

    def tick(self, t: int) -> ev.ClockTick:
        return ev.ClockTick(**self.header("shadowtwin", "", t))
