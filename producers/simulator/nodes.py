"""One simulated transport server: its queue database and what it emits.

A `Node` holds what a server keeps on disk (its queue database: primary queue, shadow
queues per primary, discard notifications per shadow, all under one queue-database ID) and
what it keeps in memory (when it last reached each primary). A crash keeps the disk; a
restart with a new database empties it and gets a new ID. The engine decides what the
node does; the node stamps each event with its own clock, which a fault may skew.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

from producers.simulator.topology import Server
from schemas import events as ev
from schemas.events import MessageRef, NodeMode, Recipient
from state.parameters import ShadowRedundancyParameters, Timing


@dataclass(slots=True)
class Mail:
    """A primary copy of a message on one server (or, before it is taken, the message itself)."""

    message_id: str
    submitted_ms: int
    recipients: tuple[Recipient, ...]
    size: int
    internal_id: str = ""
    received_ms: int = 0
    shadow: str | None = None
    forks: list = field(default_factory=list)
    ack_pending: bool = False
    slow_since: dict[str, int] = field(default_factory=dict)
    whole: MessageRef | None = None  # the reference of this copy, made when its server takes it (`Node.new_mail`)

    def ref(self) -> MessageRef:
        return self.whole or MessageRef(self.message_id, self.internal_id)


@dataclass(slots=True)
class Copy:
    """A shadow copy: the primary's message, the primary's queue database when it was made, and the forks
    (one shadow queue per next hop) whose discard notifications came before the whole message's."""

    mail: Mail
    primary: str
    primary_db: str
    alternate_route: bool = True
    discarded_forks: tuple[str, ...] = ()


@dataclass(slots=True)
class Destroyed:
    primary: list[Mail]
    shadows: list[Copy]


class Node:
    def __init__(self, server: Server, params: ShadowRedundancyParameters, timing: Timing,
                 out: list[tuple[int, int, Any]], sequence: Iterator[int],
                 make: Mapping[type[ev.Event], Callable[..., Any]] | None = None):
        """What the node emits goes onto the heap `out` as (true time, next of `sequence`, what). `make`
        gives, per event kind, what makes it from the event's arguments: the class itself (the
        default), or the encoder of its Avro body."""
        self.server = server
        self.name = server.name
        self.params = params
        self.timing = timing
        self.mode = server.mode
        self.heartbeat_ms = timing.heartbeat_timeout_ms if self.mode is NodeMode.EXCHANGE_2010 else timing.heartbeat_ms
        self._out, self._sequence = out, sequence
        self._make = make or {kind: kind for kind in ev.EVENT_TYPES.values()}
        self._event_ids = itertools.count(1)
        self._internal_ids = itertools.count(1)
        self._databases = itertools.count(1)
        self.db = f"{self.name}-qdb{next(self._databases)}"
        self.up = False
        self.epoch = 0  # changes on every crash and start: actions of an earlier life are void
        self.offset_ms = 0  # how far this server's clock is ahead (negative: behind)
        self.refuses_shadows = False
        self.queue: dict[str, Mail] = {}
        self.shadows: dict[str, dict[str, Copy]] = {}  # primary -> internal id -> copy
        self.discard: dict[str, list[MessageRef]] = {}  # shadow -> discard notifications waiting for it
        self.fork_discards: dict[str, list[MessageRef]] = {}  # shadow -> those of single forks (fork_id set)
        self.queried_by: dict[str, int] = {}  # shadow -> its last query that reached this primary (or its first copy)
        self.last_contact: dict[str, int] = {}  # primary -> last answered query (or copy stored)
        self.failures: dict[str, int] = {}  # primary -> consecutive failed queries

    def event(self, kind: type[ev.Event], true_ms: int, primary: str, ref: MessageRef | None, **fields) -> None:
        heapq.heappush(self._out, (true_ms, next(self._sequence), self._make[kind](
            event_id=f"{self.name}-{next(self._event_ids)}", event_time_ms=true_ms + self.offset_ms, node=self.name,
            primary_server=primary, message=ref, **fields)))

    def skew(self, delta_ms: int) -> None:
        self.offset_ms += delta_ms

    def new_mail(self, mail: Mail, t: int) -> Mail:
        mail.internal_id = f"{self.name}.{next(self._internal_ids)}"
        mail.received_ms = t
        mail.whole = MessageRef(mail.message_id, mail.internal_id)
        self.queue[mail.internal_id] = mail
        return mail

    def forget(self, internal_id: str) -> None:
        self.queue.pop(internal_id, None)

    def crash(self) -> None:
        self.up = False
        self.epoch += 1

    def start(self, t: int, new_database: bool) -> Destroyed:
        """Start (or restart); a new database loses everything queued. Returns what was lost."""
        destroyed = Destroyed([], [])
        if new_database:
            destroyed = Destroyed(list(self.queue.values()),
                                  [c for copies in self.shadows.values() for c in copies.values()])
            self.db = f"{self.name}-qdb{next(self._databases)}"
            self.queue, self.shadows, self.discard, self.fork_discards, self.queried_by = {}, {}, {}, {}, {}
            self.last_contact, self.failures = {}, {}
        self.up = True
        self.epoch += 1
        s = self.server
        self.event(ev.NodeStarted, t, self.name, None, dag=s.dag, ad_site=s.site, boundary=s.boundary, mode=s.mode,
                   shadow_redundancy_enabled=self.params.shadow_redundancy_enabled,
                   xshadow_advertised=self.params.shadow_redundancy_enabled, queue_db_id=self.db)
        return destroyed


class FlatNode(Node):
    """A node whose events are made flat (`schemas.binary.arguments_flattener`), which takes the
    envelope's fields by position: no keywords to match for them."""

    def event(self, kind: type[ev.Event], true_ms: int, primary: str, ref: MessageRef | None, **fields) -> None:
        heapq.heappush(self._out, (true_ms, next(self._sequence), self._make[kind](
            f"{self.name}-{next(self._event_ids)}", true_ms + self.offset_ms, self.name, primary, ref, **fields)))
