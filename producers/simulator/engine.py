"""The topology simulator's engine: servers that behave as Shadow Redundancy Managers do.

A discrete-event simulation in true time. Each server (`nodes.Node`) accepts mail, makes
its shadow copy in its boundary before answering 250 (2013 and later) or lets an
XSHADOW-capable previous hop keep it (2010), relays to next hops, keeps discard status,
queries its primaries every ShadowHeartbeatFrequency (ShadowHeartbeatTimeoutInterval in
2010 mode), and promotes its shadow copies on its own: after ShadowResubmitTimeSpan without
an answer (2010: after ShadowHeartbeatRetryCount timeouts, with an alternate route), or at
once when the primary answers with a new queue-database ID. Faults from the schedule crash
servers, cut links, slow or refuse next hops, skew clocks and refuse shadow copies.

Every SMTP-level event is stamped with the emitting server's own (possibly skewed) clock
and comes out in true-time order; `GroundTruth` records what really happened. One seed
gives one run, event for event. `command()` lets a live run obey the twin's redelivery
commands. An encoded run (`encoded=True`) yields each event's Avro body instead of the event,
encoded from the arguments it would have been made of; a flat run (`flat=True`, what `to_file`
hands to the process that writes its Avro file) yields each event as a flat tuple of builtins.
"""

from __future__ import annotations

import heapq
import itertools
import math
import queue
import random
from dataclasses import dataclass
from typing import Callable, Iterator

from producers.simulator.nodes import Copy, FlatNode, Mail, Node
from producers.simulator.topology import Fault, Topology
from producers.simulator.truth import GroundTruth
from schemas import binary
from schemas import events as ev
from schemas.events import MessageRef, NodeMode, Recipient, SiteLocality
from state.names import server_key
from state.parameters import ShadowMessagePreference, ms

RETRY_MS = 5 * 60_000  # a deferred next hop is tried again after this long
SENDER_RETRY_MS = 60_000  # an outside sender retries a 4xx or an unreachable server after this long


@dataclass(frozen=True, slots=True)
class Hop:
    """Where a fork goes next: a mailbox database, another boundary, or a domain outside."""

    kind: str  # mailbox | boundary | outside
    name: str


@dataclass(slots=True)
class Fork:
    hop: Hop
    recipients: tuple[Recipient, ...]
    fork_id: str | None
    done: bool = False
    discard_set: bool = False  # the primary queued this fork's own discard notification for the shadow


class Simulation:
    def __init__(self, topology: Topology, seed: int = 7, start_ms: int | None = None, *, encoded: bool = False,
                 flat: bool = False):
        """`encoded`: `events()` yields the Avro body of each event (`binary.arguments_encoder`), the
        same bytes as encoding the event, without making it; `flat`: each event as the flat tuple
        `binary.arguments_flattener` makes of its arguments."""
        self.topology = topology
        self.seed = seed
        self.rng = random.Random(seed)
        self.start_ms = topology.start_ms if start_ms is None else start_ms
        self.end_ms = self.start_ms + topology.duration_ms
        self.truth = GroundTruth()
        self.now = self.start_ms
        self.model = topology.model_config()
        make = binary.arguments_encoder if encoded else binary.arguments_flattener if flat else None
        self._make = {kind: make(kind) if make else kind for kind in ev.EVENT_TYPES.values()}
        self._actions: list[tuple[int, int, Callable, tuple]] = []
        self._out: list[tuple[int, int, ev.Event | bytes]] = []  # what the nodes emit, by true time
        self._sequence = itertools.count()
        node = FlatNode if flat else Node
        self.nodes = {s.name: node(s, self.model.for_node(s.name), self.model.timing(s.name), self._out,
                                   self._sequence, self._make)
                      for s in topology.servers}
        self.boundaries = {b: [self.nodes[s.name] for s in members] for b, members in topology.boundaries().items()}
        self.databases = {d.name: d.dag for d in topology.mailbox_databases}
        self._database_names = tuple(self.databases)
        # Derived once from the topology, which does not change during a run:
        weights = topology.workload.recipients_weights
        self._recipient_counts = range(1, len(weights) + 1)
        self._recipient_cum_weights = list(itertools.accumulate(weights))  # what `rng.choices(weights=)` makes of them
        self._queue_rate = 1 / max(1, topology.workload.queue_time_ms)
        self._database_by_address: dict[str, str] = {}
        self._hops: dict[tuple[str, str], Hop] = {}
        self._peers: dict[str, tuple[list[Node], list[Node], list[Node]]] = {}  # server -> peers, remote, local
        self._messages = itertools.count(1)
        self._partitions: list[frozenset[str]] = []
        self._slow: dict[str, int] = {}
        self._refusing: dict[str, int] = {}
        self._stalled: dict[str, int] = {}  # server -> its next hops are stalled until this true time
        self._mailboxes: dict[tuple[str, str, int], int] = {}  # (recipient, message id, submitted) -> delivered
        self._commands_seen: set[str] = set()
        self._at_senders: set[str] = set()  # Message-IDs refused so far, their senders to retry
        self.commands_obeyed = 0
        # Live mode: redelivery commands arrive here from another thread; `clock` is the wall
        # clock in the simulation's time (start = now, real time).
        self.inbox: queue.SimpleQueue | None = None
        self.clock: Callable[[], int] | None = None
        self.drained = False

    # ---- running --------------------------------------------------------------------

    def events(self, drain_ms: int | None = None) -> Iterator[ev.Event | bytes | tuple]:
        """Every event of the run in true-time order (or its body, `encoded`, or its flat tuple, `flat`). After
        the workload ends the servers keep working (up to `drain_ms`, by default the longest resubmit
        span plus an hour) until nothing is queued or held anywhere."""
        if drain_ms is None:
            drain_ms = max(n.timing.resubmit_ms for n in self.nodes.values()) + 3_600_000
        for node in self.nodes.values():
            self._at(self.start_ms, self._node_start, node, False)
        for fault in self.topology.faults:
            self._schedule_fault(fault)
        self._at(self.start_ms, self._arrival)
        horizon = self.end_ms + drain_ms
        actions, out, inbox = self._actions, self._out, self.inbox
        while actions:
            if inbox is not None and not inbox.empty():
                self._take_commands()
            t, _, action, args = heapq.heappop(actions)
            if t > horizon or (t >= self.end_ms and self._idle()):
                break
            self.now = t  # (what a run stopped in between says it reached)
            # What is due by now goes out before the action changes anything (a clock's step: a consumer
            # that reads the servers' offsets, as the log writer does, reads those the events were made with)
            while out and out[0][0] <= t:
                yield heapq.heappop(out)[2]
            action(*args)
            while out and out[0][0] <= t:
                yield heapq.heappop(out)[2]
        actions.clear()  # past the end, never run: they refer to the simulation, which is then freed by refcount
        self.drained = self._idle()
        while out:
            yield heapq.heappop(out)[2]
        self.truth.still_queued(self._queued_message_ids() | self._at_senders)
        last = max(self.now, self.end_ms)
        yield self._make[ev.ClockTick](event_id=f"simulator-end-{self.seed}", event_time_ms=last + 1,
                                       node="simulator", primary_server="")

    def stopped_early(self) -> None:
        """The run was stopped before its end (Ctrl-C, `--seconds`): what it had not finished is
        pending, not lost: queued or held copies, and messages between two servers. Only a message
        of which a copy was destroyed (a new queue database, an expired shadow copy) and none is
        left may be lost."""
        self.truth.still_queued(self._queued_message_ids()
                                | {m for m, truth in self.truth.messages.items() if not truth.destroyed})

    def _take_commands(self) -> None:
        """Live mode: the commands that came in since the last action, acted on at the current time."""
        t = max(self.now, self.clock()) if self.clock is not None else self.now
        while not self.inbox.empty():
            self._at(t, self.command, self.inbox.get())

    def server_named(self, name: str) -> str:
        """The topology's server that the twin names `name` (as `[shadow_redundancy] servers` spells it, else in
        lower case: state/names.py), or `name` when none is."""
        return name if name in self.nodes else next((n for n in self.nodes if server_key(n) == server_key(name)), name)

    def command(self, command: ev.RedeliveryCommand) -> bool:
        """A redelivery command from the twin (live mode): the holder resubmits its copy, if it
        still has it. Returns whether it did."""
        if command.command_id in self._commands_seen:
            return False
        self._commands_seen.add(command.command_id)
        holder = self.nodes.get(self.server_named(command.holder))
        if holder is None or not holder.up:
            return False
        primary = self.server_named(command.primary_server)
        copy = self._unexpired(holder, holder.shadows.get(primary, {})).get(command.message.internal_id)
        if copy is None:
            return False
        self._promote(holder, primary, [copy], f"redelivery command {command.command_id}")
        self.commands_obeyed += 1
        return True

    # ---- plumbing ---------------------------------------------------------------------

    def _at(self, t: int, action: Callable, *args) -> None:
        heapq.heappush(self._actions, (t, next(self._sequence), action, args))

    def _idle(self) -> bool:
        return not any(n.queue or any(n.shadows.values()) for n in self.nodes.values())

    def _queued_message_ids(self) -> set[str]:
        ids = set()
        for node in self.nodes.values():
            ids.update(m.message_id for m in node.queue.values())
            for copies in node.shadows.values():
                ids.update(c.mail.message_id for c in copies.values())
        return ids

    def _partitioned(self, a: str, b: str) -> bool:
        return bool(self._partitions) and frozenset((a, b)) in self._partitions

    def _reachable(self, source: Node, target: Node) -> bool:
        return target.up and not self._partitioned(source.name, target.name)

    # ---- faults -------------------------------------------------------------------------

    def _schedule_fault(self, f: Fault) -> None:
        start, end = self.start_ms + f.at_ms, self.start_ms + f.at_ms + f.duration_ms
        if f.kind == "crash":
            node = self.nodes[f.server]
            if f.backlog_ms:
                self._at(start - f.backlog_ms, self._stall, node.name, start)
            self._at(start, self._crash, node)
            if f.restart != "never":
                self._at(end, self._node_start, node, f.restart == "new_database")
        elif f.kind == "partition":
            pair = frozenset(f.servers)
            self._at(start, self._partitions.append, pair)
            self._at(end, self._partitions.remove, pair)
        elif f.kind in ("slow_next_hop", "refusing_next_hop"):
            table = self._slow if f.kind == "slow_next_hop" else self._refusing
            self._at(start, table.__setitem__, f.next_hop, f.delay_ms)
            self._at(end, table.pop, f.next_hop, None)
        elif f.kind == "clock_skew":
            node = self.nodes[f.server]
            self._at(start, node.skew, f.offset_ms)
            self._at(end, node.skew, -f.offset_ms)
        elif f.kind == "shadow_failure":
            node = self.nodes[f.server]
            self._at(start, setattr, node, "refuses_shadows", True)
            self._at(end, setattr, node, "refuses_shadows", False)

    def _stall(self, server: str, until_ms: int) -> None:
        self._stalled[server] = until_ms

    def _crash(self, node: Node) -> None:
        node.crash()

    def _node_start(self, node: Node, new_database: bool) -> None:
        t = self.now
        destroyed = node.start(t, new_database)
        for mail in destroyed.primary:
            self.truth.destroyed(mail.message_id, node.name, mail.internal_id, t, "primary copy")
        for copy in destroyed.shadows:
            self.truth.destroyed(copy.mail.message_id, node.name, copy.mail.internal_id, t, "shadow copy")
        self._stalled.pop(node.name, None)
        for mail in list(node.queue.values()):
            self._at(t + self._queue_time(), self._deliver, node, mail.internal_id, node.epoch)
        beat = node.heartbeat_ms
        self._at(t + int(self.rng.random() * beat) + 1, self._heartbeat, node, node.epoch)

    # ---- the workload ---------------------------------------------------------------------

    def _arrival(self) -> None:
        w = self.topology.workload
        peak = w.messages_per_second * max(w.daily_curve)
        if peak <= 0:
            return
        rng, t = self.rng, self.now
        while True:  # thinning: a Poisson process at the peak rate, kept in proportion to the curve
            t += int(rng.expovariate(peak / 1000)) + 1
            if t >= self.end_ms:
                return
            hour = (t // 3_600_000) % 24
            if rng.random() * max(w.daily_curve) < w.daily_curve[hour]:
                break
        self._at(t, self._new_message)
        self._at(t, self._arrival)

    def _new_message(self) -> None:
        w, rng, t, org = self.topology.workload, self.rng, self.now, self.topology
        n = next(self._messages)
        count = rng.choices(self._recipient_counts, cum_weights=self._recipient_cum_weights)[0]
        internal = rng.random() < w.internal_submission_share
        recipients = []
        for _ in range(count):
            if internal and rng.random() < w.external_recipient_share:
                recipients.append(Recipient(f"user{rng.randrange(5000)}@{rng.choice(org.internet.receivers)}", False))
            else:
                recipients.append(Recipient(f"user{rng.randrange(len(self.databases) * org.users_per_database)}"
                                            f"@{org.domain}", True))
        recipients = tuple(dict.fromkeys(recipients))  # a recipient once
        size = max(500, int(rng.lognormvariate(math.log(w.size_bytes_median), 1.0)))
        if internal:
            database = self._database_of(recipients[0]) if recipients[0].internal else rng.choice(self._database_names)
            sender, boundary = f"{database}", self.databases[database]
            message_id = f"<{n}.{self.seed}@{org.domain}>"
            source = ev.MessageSource.MAILBOX_SUBMISSION
        else:
            sender, boundary = rng.choice(org.internet.senders), org.internet.inbound_boundary
            message_id = f"<{n}.{self.seed}@{sender.split('.', 1)[-1]}>"
            source = ev.MessageSource.OUTSIDE_BOUNDARY
        self.truth.submitted(message_id, t, sender, tuple(r.address for r in recipients))
        mail = Mail(message_id=message_id, submitted_ms=t, recipients=recipients, size=size)
        self._submit(mail, sender, source, boundary)

    def _submit(self, mail: Mail, sender: str, source: ev.MessageSource, boundary: str) -> None:
        """A client or an outside server hands the message to some server of the boundary; it
        retries a minute later when none takes it."""
        candidates = [n for n in self.boundaries[boundary] if n.up]
        if candidates:
            node = self.rng.choice(candidates)
            if self._receive(node, mail, sender, source, sender_node=None):
                self._at_senders.discard(mail.message_id)
                return
        if self.now - mail.submitted_ms < ms(self.model.defaults.message_expiration_timeout):
            self._at_senders.add(mail.message_id)
            self._at(self.now + SENDER_RETRY_MS, self._submit, mail, sender, source, boundary)
        else:
            self._at_senders.discard(mail.message_id)
            self.truth.expired(mail.message_id, tuple(r.address for r in mail.recipients), self.now)

    def _database_of(self, recipient: Recipient) -> str:
        address = recipient.address
        database = self._database_by_address.get(address)
        if database is None:
            number = int(address[4:address.index("@")])
            names = self._database_names
            database = self._database_by_address[address] = names[min(number // self.topology.users_per_database,
                                                                          len(names) - 1)]
        return database

    def _queue_time(self) -> int:
        return 200 + int(self.rng.expovariate(self._queue_rate))

    # ---- receiving: the shadow copy before the 250 --------------------------------------------

    def _receive(self, node: Node, mail: Mail, sender: str, source: ev.MessageSource, sender_node: Node | None,
                 resubmission: bool = False) -> bool:
        """`node` takes `mail` (a new primary copy); False when it answered 451 (or was not there)."""
        t = self.now
        if not node.up or (sender_node is not None and self._partitioned(sender_node.name, node.name)):
            return False
        copy = node.new_mail(mail, t)
        ref = copy.ref()
        supports_xshadow = sender_node is not None and sender_node.params.shadow_redundancy_enabled
        node.event(ev.MessageReceived, t, node.name, ref, sender=sender, source=source,
                   recipients=mail.recipients, size_bytes=mail.size, submitted_at_ms=mail.submitted_ms,
                   sender_supports_shadow=supports_xshadow or node.mode is NodeMode.EXCHANGE_2013)
        shadow: Node | None = None
        shadow_done = t  # when the session for the shadow copy ended: the message is queued only then
        if node.params.shadow_redundancy_enabled:
            if node.mode is NodeMode.EXCHANGE_2010:
                if supports_xshadow:
                    shadow = sender_node
                    alternate = sum(1 for n in self.boundaries[node.server.boundary] if n is not node) > 0
                    self._store_shadow(shadow, node, copy, t + 2, alternate)
                    node.event(ev.ShadowCopyAcknowledged, t + 3, node.name, ref, shadow_server=shadow.name,
                               locality=_locality(node, shadow))
            else:
                shadow, shadow_done = self._make_shadow(node, copy, t)
                if shadow is None and node.params.reject_message_on_shadow_failure and not resubmission:
                    node.event(ev.RejectedToSender, t + 40, node.name, ref)
                    node.forget(copy.internal_id)
                    self.truth.rejected(mail.message_id)
                    return False
        copy.shadow = shadow.name if shadow else None
        self.truth.copy(mail.message_id, node.name, copy.internal_id, t, copy.shadow,
                        resubmitted_by=node.name if resubmission else None)
        if shadow is not None or node.mode is NodeMode.EXCHANGE_2013 or not node.params.shadow_redundancy_enabled:
            node.event(ev.AcknowledgedToSender, t + 45, node.name, ref, redundant=shadow is not None)
        else:  # 2010, sender without XSHADOW: delayed acknowledgement, at the latest MaxAcknowledgementDelay
            copy.ack_pending = True
            self._at(t + node.timing.max_ack_delay_ms, self._delayed_ack, node, copy.internal_id, node.epoch)
        copy.forks = self._route(node, mail.recipients)
        self._at(max(t + self._queue_time(), shadow_done), self._deliver, node, copy.internal_id, node.epoch)
        return True

    def _make_shadow(self, node: Node, copy: Mail, t: int) -> tuple[Node | None, int]:
        """2013 and later: a simultaneous session to a peer in the boundary, per the preference; the
        shadow (None when every attempt failed) and when the last attempt ended."""
        p = node.params
        peers, remote, local = self._peers_of(node)
        preference = p.shadow_message_preference_setting
        if node.server.dag is None or not remote:
            plan = [(local or peers, p.max_retries_for_local_site_shadow)]
        elif preference is ShadowMessagePreference.REMOTE_ONLY:
            plan = [(remote, p.max_retries_for_remote_site_shadow)]
        elif preference is ShadowMessagePreference.LOCAL_ONLY:
            plan = [(local, p.max_retries_for_local_site_shadow)]
        else:
            plan = [(remote, p.max_retries_for_remote_site_shadow), (local, p.max_retries_for_local_site_shadow)]
        if not any(candidates and tries for candidates, tries in plan):  # no peer, or none its preference tries
            node.event(ev.ShadowCopyFailed, t + 5, node.name, copy.ref(), candidate="", attempt=1,
                       reason=ev.ShadowFailureReason.NO_PEER)
            return None, t + 5
        attempt, at = 0, t + 5
        for candidates, tries in plan:
            if not candidates:
                continue
            order = self.rng.sample(candidates, len(candidates))
            for i in range(tries):
                candidate = order[i % len(order)]
                attempt += 1
                locality = _locality(node, candidate)
                node.event(ev.ShadowCopyRequested, at, node.name, copy.ref(), candidate=candidate.name,
                           locality=locality, attempt=attempt)
                if not self._reachable(node, candidate):
                    at += 1000  # the session times out
                    node.event(ev.ShadowCopyFailed, at, node.name, copy.ref(), candidate=candidate.name,
                               locality=locality, attempt=attempt, reason=ev.ShadowFailureReason.TIMEOUT)
                    continue
                if candidate.refuses_shadows:
                    at += 10
                    node.event(ev.ShadowCopyFailed, at, node.name, copy.ref(), candidate=candidate.name,
                               locality=locality, attempt=attempt, reason=ev.ShadowFailureReason.REFUSED)
                    continue
                self._store_shadow(candidate, node, copy, at + 10, alternate_route=True)
                node.event(ev.ShadowCopyAcknowledged, at + 15, node.name, copy.ref(), shadow_server=candidate.name,
                           locality=locality)
                return candidate, at + 15
        return None, at

    def _peers_of(self, node: Node) -> tuple[list[Node], list[Node], list[Node]]:
        """The other servers of the node's boundary: all, those in another site, those in its own."""
        found = self._peers.get(node.name)
        if found is None:
            peers = [n for n in self.boundaries[node.server.boundary] if n is not node]
            found = self._peers[node.name] = (peers, [n for n in peers if n.server.site != node.server.site],
                                              [n for n in peers if n.server.site == node.server.site])
        return found

    def _store_shadow(self, shadow: Node, primary: Node, mail: Mail, t: int, alternate_route: bool) -> None:
        if not shadow.shadows.get(primary.name):  # ShadowMessageAutoDiscardInterval counts from here until it queries
            primary.queried_by[shadow.name] = t
        shadow.shadows.setdefault(primary.name, {})[mail.internal_id] = Copy(mail, primary.name, primary.db,
                                                                             alternate_route)
        shadow.last_contact[primary.name] = max(shadow.last_contact.get(primary.name, t), t)
        if shadow.mode is NodeMode.EXCHANGE_2010:  # the previous hop's hand-off: a session to the primary
            shadow.failures[primary.name] = 0
        shadow.event(ev.ShadowCopyStored, t, primary.name, mail.ref(), primary_queue_db_id=primary.db,
                     alternate_route=alternate_route)

    def _delayed_ack(self, node: Node, internal_id: str, epoch: int) -> None:
        mail = node.queue.get(internal_id)
        if node.epoch == epoch and mail is not None and mail.ack_pending:
            mail.ack_pending = False
            node.event(ev.AcknowledgedToSender, self.now, node.name, mail.ref(), redundant=False)

    # ---- relaying to next hops ----------------------------------------------------------------

    def _route(self, node: Node, recipients: tuple[Recipient, ...]) -> list[Fork]:
        here, org = node.server.boundary, self.topology
        groups: dict[Hop, list[Recipient]] = {}
        for r in recipients:
            if r.internal:
                database = self._database_of(r)
                dag = self.databases[database]
                hop = self._hop("mailbox", database) if dag == here else self._hop("boundary", dag)
            elif here == org.internet.outbound_boundary:
                hop = self._hop("outside", r.address.split("@", 1)[1])
            else:
                hop = self._hop("boundary", org.internet.outbound_boundary)
            groups.setdefault(hop, []).append(r)
        many = len(groups) > 1
        return [Fork(hop, tuple(rs), f"f{i}" if many else None) for i, (hop, rs) in enumerate(groups.items(), 1)]

    def _hop(self, kind: str, name: str) -> Hop:
        hop = self._hops.get((kind, name))
        if hop is None:
            hop = self._hops[kind, name] = Hop(kind, name)
        return hop

    def _deliver(self, node: Node, internal_id: str, epoch: int) -> None:
        mail = node.queue.get(internal_id)
        if node.epoch != epoch or mail is None or not node.up:
            return
        t = self.now
        stalled = self._stalled.get(node.name)
        if stalled is not None and t < stalled:
            self._at(stalled, self._deliver, node, internal_id, epoch)  # it dies first, with the mail queued
            return
        if t - mail.received_ms >= node.timing.expiration_ms:  # queued for MessageExpirationTimeout
            self._expire(node, mail, t)
            return
        waiting = False
        for fork in mail.forks:
            if fork.done:
                continue
            delay = self._slow.get(fork.hop.name)
            if delay is not None and t - mail.slow_since.setdefault(fork.hop.name, t) < delay:
                waiting = True
                self._deferred(node, mail, fork, t, "timed out: the next hop did not answer in time")
                continue
            if fork.hop.name in self._refusing or not self._hand_over(node, mail, fork, t):
                waiting = True
                self._deferred(node, mail, fork, t, "451 4.3.2 the next hop refused the message; will retry")
        if not waiting:
            self._processed(node, mail, t + 100)  # after the last next hop's acknowledgement
        else:  # retried, and expired at MessageExpirationTimeout to the millisecond
            if mail.shadow is not None:
                self._forks_discarded(node, mail)
            retry = min(t + min(RETRY_MS, self._next_change(mail)), mail.received_ms + node.timing.expiration_ms)
            self._at(retry, self._deliver, node, internal_id, epoch)

    @staticmethod
    def _forks_discarded(node: Node, mail: Mail) -> None:
        """Some forks are through, others wait: a discard notification per fork through, for the shadow's
        queue of that next hop (the whole message's follows when the last fork is through)."""
        for fork in mail.forks:
            if fork.done and not fork.discard_set:
                fork.discard_set = True
                node.fork_discards.setdefault(mail.shadow, []).append(
                    MessageRef(mail.message_id, mail.internal_id, fork.fork_id))

    def _deferred(self, node: Node, mail: Mail, fork: Fork, t: int, why: str) -> None:
        """An attempt the next hop refused or let time out (Exchange's DEFER): retried later."""
        node.event(ev.DeliveryDeferred, t, node.name, MessageRef(mail.message_id, mail.internal_id, fork.fork_id),
                   next_hop=fork.hop.name, smtp_response=why, recipients=tuple(r.address for r in fork.recipients))

    def _next_change(self, mail: Mail) -> int:
        """How soon a slow hop lets the mail through: its delay, counted from when it first waited (one
        whose delay has run out already let it through: what holds the mail now is another cause)."""
        soonest = RETRY_MS
        for fork in mail.forks:
            since = mail.slow_since.get(fork.hop.name)
            delay = self._slow.get(fork.hop.name)
            if not fork.done and since is not None and delay is not None and since + delay > self.now:
                soonest = min(soonest, since + delay - self.now)
        return soonest

    def _hand_over(self, node: Node, mail: Mail, fork: Fork, t: int) -> bool:
        """One fork to its next hop; False when the hop did not take it (tried again later)."""
        ref = MessageRef(mail.message_id, mail.internal_id, fork.fork_id)
        addresses = tuple(r.address for r in fork.recipients)
        hop = fork.hop
        if hop.kind == "boundary":
            targets = [n for n in self.boundaries[hop.name] if self._reachable(node, n)
                       and n.name not in self._refusing]
            if not targets:
                return False
            target = self.rng.choice(targets)
            handed = Mail(message_id=mail.message_id, submitted_ms=mail.submitted_ms, recipients=fork.recipients,
                          size=mail.size)
            if not self._receive(target, handed, node.name, ev.MessageSource.OUTSIDE_BOUNDARY, sender_node=node):
                return False
            node.event(ev.SentToNextHop, t, node.name, ref, next_hop=target.name, recipients=addresses,
                       outside_boundary=True)
            node.event(ev.NextHopAcknowledged, t + 50, node.name, ref, next_hop=target.name)
            node.event(ev.BoundaryCrossed, t + 51, node.name, ref, next_hop=target.name, next_boundary=hop.name)
        elif hop.kind == "mailbox":
            node.event(ev.SentToNextHop, t, node.name, ref, next_hop=hop.name, recipients=addresses)
            node.event(ev.NextHopAcknowledged, t + 30, node.name, ref, next_hop=hop.name)
            hidden = False
            for r in fork.recipients:
                key = (r.address, mail.message_id, mail.submitted_ms)
                before = self._mailboxes.get(key)
                seen = before is not None and t - before < self.model.duplicate_tracking_ms
                hidden = hidden or seen
                self._mailboxes[key] = t
                self.truth.delivered(mail.message_id, r.address, t + 30, hop.name, hidden=seen)
            node.event(ev.DeliveredToMailbox, t + 31, node.name, ref, mailbox_server=hop.name, recipients=addresses,
                       duplicate=hidden)
        else:
            node.event(ev.SentToNextHop, t, node.name, ref, next_hop=hop.name, recipients=addresses,
                       outside_boundary=True)
            node.event(ev.NextHopAcknowledged, t + 80, node.name, ref, next_hop=hop.name)
            node.event(ev.BoundaryCrossed, t + 81, node.name, ref, next_hop=hop.name)
            for address in addresses:
                self.truth.delivered(mail.message_id, address, t + 80, hop.name, hidden=False)
        fork.done = True
        return True

    def _processed(self, node: Node, mail: Mail, t: int, delivered: bool = True) -> None:
        """Every fork is through: discard status for the shadow, the message into Safety Net when a next hop
        took some of its recipients (`delivered`)."""
        ref = mail.ref()
        if mail.ack_pending:
            mail.ack_pending = False
            node.event(ev.AcknowledgedToSender, t, node.name, ref, redundant=False)
        if mail.shadow is not None:
            node.event(ev.DiscardStatusSet, t, node.name, ref, shadow_server=mail.shadow)
            node.discard.setdefault(mail.shadow, []).append(ref)
        if delivered:
            node.event(ev.MovedToSafetyNet, t + 1, node.name, ref)
        node.forget(mail.internal_id)

    def _expire(self, node: Node, mail: Mail, t: int) -> None:
        """Safety Net holds what was "successfully processed or delivered to a mailbox recipient" (000, 003):
        an expired message only when a fork of it was delivered before."""
        pending = tuple(r.address for f in mail.forks if not f.done for r in f.recipients)
        node.event(ev.MessageExpired, t, node.name, mail.ref(), reason="MessageExpirationTimeout: next hop refused")
        self.truth.expired(mail.message_id, pending, t)
        delivered = any(fork.done for fork in mail.forks)
        for fork in mail.forks:
            fork.done = True
        self._processed(node, mail, t + 1, delivered)

    # ---- heartbeats, discards and promotion, on the shadow -------------------------------------

    def _heartbeat(self, node: Node, epoch: int) -> None:
        if node.epoch != epoch or not node.up:
            return
        for primary in [p for p, copies in node.shadows.items() if self._unexpired(node, copies)]:
            self._query(node, primary)
        self._at(self.now + node.heartbeat_ms, self._heartbeat, node, epoch)

    def _unexpired(self, holder: Node, copies: dict[str, Copy]) -> dict[str, Copy]:
        """The holder's copies of one primary, less those that expired: "Unacknowledged shadow messages eventually
        expire from Safety Net after the sum of the SafetyNetHoldTime and MessageExpirationTimeout" (000, 003) of
        the holder, counted from the primary's receipt (as the twin counts them). Never promoted after that."""
        end = self.now - holder.timing.retention_ms
        for c in [c for c in copies.values() if c.mail.received_ms <= end]:
            del copies[c.mail.internal_id]
            self.truth.destroyed(c.mail.message_id, holder.name, c.mail.internal_id, self.now, "shadow copy expired")
        return copies

    def _query(self, shadow: Node, primary_name: str) -> None:
        t, primary = self.now, self.nodes[primary_name]
        shadow.event(ev.DiscardQuerySent, t, primary_name, None, shadow_queue_db_id=shadow.db)
        copies = shadow.shadows[primary_name]
        if not self._reachable(shadow, primary):
            reason = ev.QueryFailureReason.TIMEOUT if not primary.up else ev.QueryFailureReason.CONNECTION_FAILED
            shadow.event(ev.DiscardQueryFailed, t + 30, primary_name, None, reason=reason)
            failures = shadow.failures[primary_name] = shadow.failures.get(primary_name, 0) + 1
            if shadow.mode is NodeMode.EXCHANGE_2010:
                if failures >= shadow.params.shadow_heartbeat_retry_count:
                    routed = [c for c in copies.values() if c.alternate_route]
                    if routed:
                        self._promote(shadow, primary_name, routed, "primary declared failed after"
                                      f" {failures} heartbeat timeouts")
            elif t - shadow.last_contact.get(primary_name, t) >= shadow.timing.resubmit_ms:
                self._promote(shadow, primary_name, list(copies.values()),
                              "no contact with the primary for ShadowResubmitTimeSpan")
            return
        notifications = primary.discard.pop(shadow.name, [])
        fork_notifications = primary.fork_discards.pop(shadow.name, [])
        reached, primary.queried_by[shadow.name] = primary.queried_by.get(shadow.name, t), t
        if t - reached >= primary.timing.auto_discard_ms:
            # "if the shadow server doesn't query the primary server for the duration specified in this parameter,
            # the primary server deletes the queued discard events" (003): its copies stay, unacknowledged
            notifications, fork_notifications = [], []
        shadow.event(ev.DiscardQueryAnswered, t + 20, primary_name, None, primary_queue_db_id=primary.db,
                     discarded=tuple(notifications))
        shadow.last_contact[primary_name], shadow.failures[primary_name] = t, 0
        for ref in notifications:
            if copies.pop(ref.internal_id, None) is not None:
                shadow.event(ev.ShadowDiscarded, t + 25, primary_name, ref)
        for ref in fork_notifications:  # a fork's next hop has it: not resubmitted
            copy = copies.get(ref.internal_id)
            if copy is not None:
                copy.discarded_forks = (*copy.discarded_forks, ref.fork_id)
        changed = [c for c in copies.values() if c.primary_db != primary.db]
        if changed:
            self._promote(shadow, primary_name, changed, "the primary's queue database ID changed")

    def _promote(self, holder: Node, primary: str, copies: list[Copy], why: str) -> None:
        """The holder takes ownership: its copies become primary messages it delivers itself, each to the
        recipients of the forks whose discard notifications it has not had."""
        t = self.now
        held = holder.shadows.get(primary, {})
        for c in copies:
            held.pop(c.mail.internal_id, None)
            recipients = c.mail.recipients
            if c.discarded_forks:
                served = {r for f in c.mail.forks if f.fork_id in c.discarded_forks for r in f.recipients}
                recipients = tuple(r for r in recipients if r not in served)
            holder.event(ev.ShadowPromoted, t, primary, c.mail.ref(), reason=why)
            self.truth.promoted(c.mail.message_id, holder.name, primary, c.mail.internal_id, t, why,
                                tuple(r.address for r in recipients))
            resubmitted = Mail(message_id=c.mail.message_id, submitted_ms=c.mail.submitted_ms,
                               recipients=recipients, size=c.mail.size)
            self._receive(holder, resubmitted, holder.name, ev.MessageSource.INSIDE_BOUNDARY, sender_node=None,
                          resubmission=True)


def _locality(a: Node, b: Node) -> SiteLocality:
    return SiteLocality.LOCAL if a.server.site == b.server.site else SiteLocality.REMOTE
