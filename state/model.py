"""The shadow-redundancy model: what a Shadow Redundancy Manager knows and decides.

`ShadowRedundancyModel` is a transition function over explicit state, with explicit
deadlines, for one group (one primary server, see `state.records`):

    output = model.on_events(state, events)   # events of this group, in event-time order
    output = model.on_time(state, now_ms)     # event time has reached now_ms
    model.next_deadline(state)                # when on_time must be called next, or None

A deadline fires before any later event is applied, and on_time fires every deadline
strictly before `now_ms`, each at its own time: decisions carry the deadline as their
event time, never the moment the code ran, so any engine that calls these functions
(Spark, the reference replay, a test) gets the same outputs for the same events. The model
owns `state` while it runs (it updates it in place, for speed) and does no I/O and reads
no clock.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Callable, Iterable

from infra.config import exchange_span
from schemas import events as ev
from schemas.events import (
    Alert, AlertMessage, AlertType, CommandReason, MessageRef, NodeMode, Recipient, RedeliveryCommand, Severity,
    stored_through_slots,
)
from state import liveness, restart
from state.facts import NodeSeen
from state.parameters import ModelConfig, ShadowMessagePreference
from state.records import (
    DeadlineKind, Fork, Message, NodeFact, Pair, PrimaryState, Promoted, Redundancy, forget_front, shared,
    shared_recipients,
)

# Applied event ids are remembered in buckets of at most this much event time, one deadline per
# bucket (`ModelConfig.applied_ids_bucket_ms`).
SEEN_BUCKET_MS = 60_000
# A failed shadow attempt is followed at once by the next one, whose line comes when that session
# ends: this long without one, the primary went on without a copy.
NEXT_ATTEMPT_WAIT_MS = 60_000

# The enum members the model reads per event, as module globals: in Python 3.11 reading
# `SomeEnum.MEMBER` goes through the enum metaclass's `__getattr__` hook, ~180 ns a read against
# ~15 for a global, and a message went through some twenty (docs/performance.md, "Model speed").
# The deadline kinds as plain ints: they index the deadlines' list of maps, and a list indexed by an
# int subclass (an IntEnum member) takes the interpreter's generic path.
_PROMOTE, _SHADOW_SILENT, _AUTO_DISCARD = _PAIR_KINDS = (
    int(DeadlineKind.PROMOTE), int(DeadlineKind.SHADOW_SILENT), int(DeadlineKind.AUTO_DISCARD))
_SETTLE_RESTART, _EXPIRE, _ACK_DELAY = (
    int(DeadlineKind.SETTLE_RESTART), int(DeadlineKind.EXPIRE), int(DeadlineKind.ACK_DELAY))
_NO_SHADOW = int(DeadlineKind.NO_SHADOW)
_PENDING, _REDUNDANT, _LOST = Redundancy.PENDING, Redundancy.REDUNDANT, Redundancy.LOST
_MODE_UNKNOWN, _EXCHANGE_2010 = NodeMode.UNKNOWN, NodeMode.EXCHANGE_2010
_SITE_UNKNOWN, _LOCAL, _REMOTE = ev.SiteLocality.UNKNOWN, ev.SiteLocality.LOCAL, ev.SiteLocality.REMOTE
_REMOTE_ONLY = ShadowMessagePreference.REMOTE_ONLY


@stored_through_slots
@dataclass(frozen=True, slots=True)
class Outcome:
    """How the twin stopped tracking one message (for statistics, not sent to Kafka)."""

    ref: MessageRef
    received_ms: int
    processed_ms: int  # when it left this hop: processed by the primary, or promoted, or given up
    closed_ms: int
    result: str  # delivered | promoted | rejected | lost | expired
    redundant: bool


@dataclass(slots=True)
class Output:
    alerts: list[Alert] = field(default_factory=list)
    commands: list[RedeliveryCommand] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)

    def extend(self, other: "Output") -> None:
        self.alerts.extend(other.alerts)
        self.commands.extend(other.commands)
        self.outcomes.extend(other.outcomes)

    def cut(self, mark: tuple[int, int, int]) -> None:
        """Take back every decision added since the alerts, commands and outcomes numbered `mark`."""
        alerts, commands, outcomes = mark
        del self.alerts[alerts:], self.commands[commands:], self.outcomes[outcomes:]


def stable_id(*parts: object) -> str:
    """A short id that is the same whenever the same decision is made."""
    return hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=12).hexdigest()


# Events on the primary that show it processed (a fork of) the message: after a promotion,
# they mean the message will be delivered twice.
_DELIVERY_EVENTS = (ev.NextHopAcknowledged, ev.DeliveredToMailbox, ev.BoundaryCrossed, ev.DiscardStatusSet,
                    ev.MovedToSafetyNet)
_SHADOW_ATTEMPTS = (ev.ShadowCopyFailed, ev.ShadowCopyAcknowledged)
_ANSWERS_TO_SENDER = (ev.AcknowledgedToSender, ev.RejectedToSender)  # the node's 250 or 451: its own word


class ShadowRedundancyModel:
    """The transition functions; holds only the (immutable) configuration."""

    def __init__(self, config: ModelConfig | None = None):
        self.config = config or ModelConfig()
        self._handlers: dict[type, Callable[[_Transition, ev.Event], None]] = {
            ev.NodeStarted: _Transition.node_started,
            ev.MessageReceived: _Transition.message_received,
            ev.ShadowCopyFailed: _Transition.shadow_copy_failed,
            ev.ShadowCopyAcknowledged: _Transition.shadow_copy_acknowledged,
            ev.ShadowCopyStored: _Transition.shadow_copy_stored,
            ev.AcknowledgedToSender: _Transition.acknowledged_to_sender,
            ev.RejectedToSender: _Transition.rejected_to_sender,
            ev.SentToNextHop: _Transition.sent_to_next_hop,
            ev.NextHopAcknowledged: _Transition.fork_processed,
            ev.BoundaryCrossed: _Transition.fork_processed,
            ev.DeliveredToMailbox: _Transition.fork_processed,
            ev.DiscardStatusSet: _Transition.primary_processed,
            ev.MovedToSafetyNet: _Transition.primary_processed,
            ev.MessageExpired: _Transition.message_expired,
            ev.DeliveryDeferred: _Transition.delivery_deferred,
            NodeSeen: _Transition.node_seen,
            ev.ServerProbed: liveness.server_answered,
            ev.SideEffectGenerated: _Transition.side_effect_generated,
            ev.DiscardQuerySent: _Transition.discard_query_sent,
            ev.DiscardQueryAnswered: _Transition.discard_query_answered,
            ev.DiscardQueryFailed: _Transition.discard_query_failed,
            ev.ShadowDiscarded: _Transition.shadow_discarded,
            ev.ShadowPromoted: _Transition.shadow_promoted,
            ev.MessageLoaded: restart.message_loaded,
        }

    def new_state(self, primary: str) -> PrimaryState:
        return PrimaryState(primary=primary)

    def loaded(self, state: PrimaryState) -> PrimaryState:
        """`state` as a snapshot written by an earlier twin held it, with what that twin failed to keep: a
        message it holds with no expiry deadline (before a0ca9e6, one its primary expired while a silent shadow
        kept its copy), which nothing would ever call again, expires with its copy's Safety Net hold."""
        deadlines = state.deadlines
        run = None
        for key, m in state.messages.items():
            if deadlines.get(_EXPIRE, key) is None:
                run = run or _Transition(self, state)
                deadlines.set(_EXPIRE, key, run.copy_expires_ms(m))
        return state

    @property
    def liveness_bucket_ms(self) -> int:
        """The grain of `NodeSeen` facts (state.facts): a minute, or a heartbeat if that is shorter."""
        return max(1, min(60_000, self.config.timing("").heartbeat_ms))

    def on_events(self, state: PrimaryState, events: Iterable[ev.Event], output: Output | None = None) -> Output:
        """Apply events (of this group, and the facts every group shares, in event-time order),
        firing deadlines due before each. An event id already applied changes nothing. The
        decisions go to `output` when given (and it is returned), else to a new Output."""
        run = _Transition(self, state, output)
        handlers = self._handlers
        primary = state.primary
        seen, buckets = state.seen_ids, state.seen_buckets
        kept = self.config.applied_ids_kept_ms
        remember = kept is not None
        grain = self.config.applied_ids_bucket_ms
        liveness = self.liveness_bucket_ms
        bucket, bucket_start, bucket_end, ids = 0, 0, 0, []
        heap = state.deadlines.heap  # its first entry is never later than the earliest deadline
        for event in events:
            event_id = event.event_id
            if event_id in seen:
                continue
            t = event.event_time_ms
            if heap and heap[0][0] < t:
                run.advance(t)
            elif t > state.clock_ms:
                state.clock_ms = t
            kind = type(event)
            if remember:  # remembered, in buckets of event time with a deadline each
                # A NodeSeen's id stands for its whole liveness bucket (state/facts.py): kept from its end.
                at = t if kind is not NodeSeen else t - t % liveness + liveness - 1
                if not bucket_start <= at < bucket_end:
                    bucket = at // grain
                    bucket_start, bucket_end = bucket * grain, (bucket + 1) * grain
                    ids = buckets.get(bucket)
                    if ids is None:
                        ids = buckets[bucket] = []
                        state.deadlines.set(DeadlineKind.FORGET_SEEN, str(bucket), bucket_end + kept)
                ids.append(event_id)
                seen[event_id] = bucket
            if event.node == primary:
                state.primary_seen_ms = t
            handler = handlers.get(kind)
            if handler is not None:
                handler(run, event)
        return run.out

    def on_time(self, state: PrimaryState, now_ms: int) -> Output:
        """Event time reached `now_ms`: fire every deadline strictly before it."""
        run = _Transition(self, state)
        run.advance(now_ms)
        return run.out

    def next_deadline(self, state: PrimaryState) -> int | None:
        return state.deadlines.next()


class _Transition:
    """One call's worth of work on one group's state."""

    __slots__ = ("model", "config", "primary_params", "primary_timing", "s", "out", "spans", "closed_bucket_end",
                 "redundancy_on")

    def __init__(self, model: ShadowRedundancyModel, state: PrimaryState, output: Output | None = None):
        self.model = model
        self.config = model.config
        # The primary's parameters, read for every message (a look-up each in the configuration).
        self.primary_params = model.config.for_node(state.primary)
        self.primary_timing = model.config.timing(state.primary)
        self.s = state
        self.redundancy_on = self.redundancy_enabled()  # read for every copy; only the primary's NodeStarted changes it
        self.out = Output() if output is None else output
        # shadow -> (promotion span, silence span, auto-discard interval, heartbeat interval): they depend on the
        # servers' modes, which only a NodeStarted changes (it empties this).
        self.spans: dict[str, tuple[int, int, int, int]] = {}
        self.closed_bucket_end = 0  # the end of the bucket of closing times whose deadline is set

    # ---- time -------------------------------------------------------------------------

    def advance(self, now_ms: int) -> None:
        deadlines = self.s.deadlines
        while (due := deadlines.pop_before(now_ms)) is not None:
            at_ms, kind, key = due
            self.s.clock_ms = max(self.s.clock_ms, at_ms)
            _FIRE[kind](self, key, at_ms)
        self.s.clock_ms = max(self.s.clock_ms, now_ms)

    # ---- node lifecycle ---------------------------------------------------------------

    def node_started(self, e: ev.NodeStarted) -> None:
        s = self.s
        self.spans.clear()
        fact = s.nodes.get(e.node)
        if fact is None:
            fact = s.nodes[e.node] = NodeFact()
        previous_db = fact.queue_db_id
        fact.mode, fact.ad_site, fact.dag, fact.queue_db_id = e.mode, e.ad_site, e.dag, e.queue_db_id
        s.dag_spans_sites = s.nodes_span_sites()
        if e.node != s.primary:
            pair = s.pairs.get(e.node)
            known = pair.shadow_db_id if pair is not None and pair.shadow_db_id is not None else previous_db
            if known is not None and known != e.queue_db_id:
                fact.replaced_db_id = known  # it does not come back to that one: a query naming it is stale
            if pair is not None and pair.held:
                if known is not None and known != e.queue_db_id:
                    self.shadow_copies_lost(pair, e.event_time_ms)
                    if (pair := s.pairs.get(e.node)) is not None:
                        pair.shadow_db_id = e.queue_db_id
                elif known is not None and pair.db_change_pending:
                    # back with its copies, it sees the primary's new database at its first query: it promotes
                    pair.db_change_pending = False
                    self.promote_if_primary_db_changed(pair, e.event_time_ms)
            return
        if e.mode is not _MODE_UNKNOWN:
            s.mode = e.mode
        s.shadow_redundancy_enabled = e.shadow_redundancy_enabled
        self.redundancy_on = self.redundancy_enabled()
        s.primary_started_ms = e.event_time_ms
        previous, s.queue_db_id = s.queue_db_id, e.queue_db_id
        if previous is not None and previous != e.queue_db_id:
            s.replaced_db_id = previous
        t = e.event_time_ms
        self.unacknowledged_at_restart(t, t, new_database=previous is not None and previous != e.queue_db_id)
        self.primary_seen_with_db(e.queue_db_id, t, previous_db=previous)
        for pair in s.pairs.values():
            if pair.heartbeats and pair.held and pair.primary_failed_ms is None and not self.shadow_silent(pair, t):
                s.deadlines.set(_PROMOTE, pair.shadow, self.promotion_due(pair))

    def unacknowledged_at_restart(self, since: int, t: int, new_database: bool) -> None:
        """The primary restarted (it was down at `since`) before it answered 250 to the senders of what it had
        received by then (Exchange 2010's delayed acknowledgement still pending, or no shadow copy made or
        given up yet): no 250 follows, and "el servidor de correo que realiza el envío dará por hecho que el
        mensaje nunca llegó a Exchange y tratará de entregarlo de nuevo" (002). Back with a new, empty
        database, the message is its sender's alone."""
        s = self.s
        pending_ack = s.deadlines.by_kind[_ACK_DELAY]
        for m in list(s.messages.values()):
            if m.received_ms >= since or m.primary_done_ms is not None:
                continue
            if m.ref.internal_id in pending_ack:
                s.deadlines.clear(_ACK_DELAY, m.ref.internal_id)
            elif m.decided:
                continue
            if new_database:
                self.close(m, t, "rejected")

    def primary_seen_with_db(self, db_id: str, t: int, previous_db: str | None = None,
                             back_after: int | None = None, seen_by: str | None = None) -> None:
        """The primary is up with queue database `db_id` (if it restarted, it came back after
        `back_after`, when known; `seen_by`: the shadow that learnt it, by a copy or an answer): promote or
        predict duplicates."""
        s = self.s
        self.predict_duplicates([r for r in s.promoted.values() if r.primary_db_id == db_id], t,
                                "came back with the same queue database and will deliver its queue")
        for record in [r for r in s.promoted.values() if r.primary_db_id != db_id]:
            self.promoted_from_a_gone_queue(record.ref.internal_id, t)
        for pair in list(s.pairs.values()):
            for i in pair.held:  # back with the database they were in: they are in its queue again
                if (m := s.messages.get(i)) is not None and m.at_risk and self.copy_db(m, pair) in (None, db_id):
                    self.in_queue_again(m, t)
            # A silent shadow, or one whose query due by now never came, cannot see the new id: it
            # promotes when it queries again, if its own copies survived (discard_query_sent), and they
            # are lost if they did not.
            silent = self.shadow_silent(pair, t)
            if not silent and (pair.shadow == seen_by or not self.query_overdue(pair, t)):
                if seen_by in (None, pair.shadow) or not pair.heartbeats:
                    self.promote_if_primary_db_changed(pair, t)
                # else another shadow's report, by a clock maybe behind: this one learns of the new database from
                # the answer to its own query (discard_query_answered), or the primary's NodeStarted
            elif pair.held:
                pair.db_change_pending = True
                self.discard_status_gone(pair, db_id)
                if silent and liveness.silence_judged(self, pair):
                    # the copies of another database are the only ones left, on a server that is down:
                    # two servers of these messages' redundancy failed together
                    self.put_at_risk(pair, t, "came back with a new, empty queue database", current_db=db_id)
        if previous_db is not None and previous_db != db_id:
            if back_after is not None:  # down then: what it had not acknowledged by then never was
                self.unacknowledged_at_restart(back_after, t, new_database=True)
            # What it took after it came back, or whose shadow copy is still being made, may be the new
            # database's: not lost.
            lost = [m for m in s.messages.values() if not m.shadow_held and m.primary_done_ms is None and m.decided
                    and (back_after is None or m.received_ms < back_after)]
            self.lost_with_the_database(lost, t, "came back")

    def discard_status_gone(self, pair: Pair, db_id: str) -> None:
        """The primary is up with queue database `db_id`: the discard notifications it queued for `pair`'s shadow of
        copies made with another one went with that database (a new one has none of them: the shadow resubmits the
        copies when it sees the new ID, 003), so the primary deletes none of them after ShadowMessageAutoDiscardInterval."""
        gone = {i for i in pair.pending_discards
                if (m := self.s.messages.get(i)) is not None and self.copy_db(m, pair) not in (None, db_id)}
        if gone:
            pair.pending_discards -= gone
            self.schedule_pair(pair)

    def in_queue_again(self, m: Message, t: int) -> None:
        """The primary is up with the queue database the unprocessed message is in: it is no longer at risk, and
        "How long a message can remain in a queue before it expires" (MessageExpirationTimeout, 003) holds again
        (before: the later end of its copy's hold, while no server could deliver it): it expires at receipt +
        MessageExpirationTimeout, at once if that has passed."""
        m.at_risk = False
        deadlines, key = self.s.deadlines, m.ref.internal_id
        end = max(m.received_ms + self.primary_timing.expiration_ms, t)
        due = deadlines.get(_EXPIRE, key)
        if due is not None and end < due:
            deadlines.set(_EXPIRE, key, end)

    def back_with_the_copies(self, pair: Pair, t: int) -> None:
        """A primary declared failed is back with the database of the copies `pair` still holds."""
        for i in pair.held:
            if (m := self.s.messages.get(i)) is not None and m.primary_done_ms is None:
                self.in_queue_again(m, t)

    def lost_with_the_database(self, lost: list[Message], t: int, how: str) -> None:
        """The primary `how` (came back, restarted) with a new, empty database: what it held alone is lost
        (a side effect is held with its parent's shadow copy, and goes where it goes)."""
        lost = [m for m in lost if m.ref.internal_id in self.s.messages and not self.parent_shadowed(m)]
        if lost:
            self.alert(AlertType.MESSAGE_LOST, Severity.CRITICAL, [self.s.primary], lost, t,
                       f"{self.s.primary} {how} with a new, empty queue database; {len(lost)} message(s)"
                       " it held had no shadow copy anywhere and are lost")
            for m in lost:
                self.close(m, t, "lost")

    def parent_shadowed(self, m: Message) -> bool:
        """A side effect whose parent's shadow copy still protects it."""
        return m.parent is not None and (parent := self.s.messages.get(m.parent)) is not None and parent.shadow_held

    def promote_if_primary_db_changed(self, pair: Pair, t: int) -> None:
        """Promote the copies made with another queue database of the primary than its current one.
        Each copy is judged by its own (the shadow keeps the primary's original database ID per
        message): a copy the primary made after it came back with the new database stays held."""
        s, current = self.s, self.s.queue_db_id
        if not pair.held or current is None:
            return
        older = {i for i in pair.held if (m := s.messages.get(i)) is not None
                 and self.copy_db(m, pair) not in (None, current)}
        if not older:
            return
        reason = (CommandReason.PRIMARY_RETURNED_AS_NEW_ROUTE if pair.primary_failed_ms is not None
                  else CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED)
        newer = any(i not in older and i in s.messages for i in pair.held)
        self.promote(pair, t, reason, include_unrouted=True, only=older)
        if newer and pair.held and pair.shadow in s.pairs:
            # what stays is the current database's, whose primary is up: the pair goes on with it
            pair.primary_failed_ms, pair.primary_db_seen = None, current
            self.schedule_pair(pair)

    @staticmethod
    def copy_db(m: Message, pair: Pair) -> str | None:
        """The primary's queue database when `m`'s copy was made: as its copy said, else as the pair's first did."""
        return m.primary_db if m.primary_db is not None else pair.primary_db_seen

    def shadow_silent(self, pair: Pair, t: int) -> bool:
        silence = self.silence_span(pair.shadow)
        return silence > 0 and (pair.awaiting_shadow or t - self.silent_from(pair) >= silence)

    def silent_from(self, pair: Pair) -> int:
        """Since when the shadow's silence counts: its last query. Without heartbeats its life is read from the
        liveness facts, each stamped with a server's first line in its bucket: it may have logged until the bucket's
        end, so the silence counts from there (hunt seed 7323: lines 5:54 apart, counted 6:18, silence span 6)."""
        if pair.heartbeats:
            return pair.last_query_ms
        bucket = self.model.liveness_bucket_ms
        return (pair.last_query_ms // bucket + 1) * bucket

    def query_overdue(self, pair: Pair, t: int) -> bool:
        """Whether the shadow's discard query due by `t` never came (more than a heartbeat interval since its
        last): only with heartbeats, and the silence span on."""
        return (self.silence_span(pair.shadow) > 0 and pair.last_heartbeat_ms is not None
                and t - pair.last_heartbeat_ms > self.heartbeat_of(pair.shadow))

    def none_failed_since_contact(self, pair: Pair) -> bool:
        """Whether no discard query of the shadow's has gone unanswered since its last contact with the primary: "If
        the shadow server can't open an SMTP session with the primary server after ... ShadowResubmitTimeSpan" (003),
        it promotes; one whose sessions all reached the primary has not found it unreachable. Only with heartbeats
        (else a query is the shadow's line) and the silence span on, as `query_overdue`."""
        return self.silence_span(pair.shadow) > 0 and pair.heartbeats and pair.last_query_ms <= pair.last_contact_ms

    def node_seen(self, e: NodeSeen) -> None:
        last = self.s.last_seen
        if e.event_time_ms > last.get(e.node, -1):
            last[e.node] = e.event_time_ms
        if self.s.pairs:
            liveness.node_seen(self, e)

    # ---- message flow on the primary --------------------------------------------------

    def message_received(self, e: ev.MessageReceived) -> None:
        s = self.s
        if e.message is None or e.node != s.primary:
            return
        m = self.message(e.message, e.event_time_ms)
        if m is None:
            return
        if e.event_time_ms < m.received_ms:
            m.received_ms = e.event_time_ms
            s.deadlines.set(_EXPIRE, m.ref.internal_id,
                            m.received_ms + self.primary_timing.expiration_ms)
            if m.shadow_held:
                self.expire_copy_by(m)
        m.recipients = shared_recipients(e.recipients)
        m.sender_supports_shadow = e.sender_supports_shadow
        if not self.redundancy_on and m.redundancy is _PENDING:
            m.redundancy, m.decided = Redundancy.DISABLED, True
        if self.mode_of(s.primary) is _EXCHANGE_2010 and not e.sender_supports_shadow:
            timing = self.primary_timing
            s.deadlines.set(_ACK_DELAY, m.ref.internal_id, e.event_time_ms + timing.max_ack_delay_ms)
        for early in s.handled_early.pop(m.ref.internal_id, ()):
            if early.message.message_id == e.message.message_id:  # not the same id's message of an earlier queue
                self.model._handlers[type(early)](self, early)

    def redundancy_enabled(self) -> bool:
        """ShadowRedundancyEnabled for this primary: its NodeStarted's word and its configuration's, both."""
        s = self.s
        enabled = self.primary_params.shadow_redundancy_enabled
        return enabled if s.shadow_redundancy_enabled is None else (enabled and s.shadow_redundancy_enabled)

    def shadow_copy_failed(self, e: ev.ShadowCopyFailed) -> None:
        m = self.known(e)
        if m is None:
            return
        locality = e.locality
        if locality is _SITE_UNKNOWN and e.candidate:  # the line does not say: the servers' sites do
            locality = self.locality_of(e.candidate)
        if locality is _SITE_UNKNOWN and (mine := self.s.nodes.get(self.s.primary)) is not None and mine.dag is None:
            # A primary in no DAG "connects to a different Mailbox server in the same Active Directory site
            # (regardless of the value of the ShadowMessagePreferenceSetting parameter)" (003): every attempt is local.
            locality = _LOCAL
        if locality is _REMOTE:
            m.remote_failures += 1
        else:
            m.local_failures += 1
        if m.decided or not (e.reason is ev.ShadowFailureReason.NO_PEER or self.retries_exhausted(m)):
            return
        if e.reason is not ev.ShadowFailureReason.NO_PEER and locality is ev.SiteLocality.UNKNOWN \
                and not self.every_attempt_failed(m) or self.rejects_on_shadow_failure():
            # Counted against the local budget, these may have been PreferRemote's remote attempts: the
            # next attempt's line, or none, says whether the primary tries on. A 451 is the twin's guess from its
            # RejectMessageOnShadowFailure: the node's answer to the sender, or its going on with it, says.
            self.s.deadlines.set(_NO_SHADOW, m.ref.internal_id, e.event_time_ms + NEXT_ATTEMPT_WAIT_MS)
            return
        self.no_shadow(m, e.event_time_ms)

    def retries_exhausted(self, m: Message) -> bool:
        p = self.primary_params
        preference = p.shadow_message_preference_setting
        if preference is not ShadowMessagePreference.LOCAL_ONLY and m.local_failures > 0:
            # A local attempt under a remote preference: PreferRemote's remote phase is over, or
            # there is no remote site (no DAG, or a DAG in one site) and the preference is ignored,
            # RemoteOnly's too. Either way the local site's budget decides.
            return m.local_failures >= p.max_retries_for_local_site_shadow
        remote_budget = 0 if preference is ShadowMessagePreference.LOCAL_ONLY else p.max_retries_for_remote_site_shadow
        local_budget = 0 if preference is _REMOTE_ONLY else p.max_retries_for_local_site_shadow
        return m.remote_failures >= remote_budget and m.local_failures >= local_budget

    def every_attempt_failed(self, m: Message) -> bool:
        """Whether the failures spend every budget the preference can give, whatever the candidates' sites."""
        p = self.primary_params
        remote, local = p.max_retries_for_remote_site_shadow, p.max_retries_for_local_site_shadow
        budget = {ShadowMessagePreference.LOCAL_ONLY: local, ShadowMessagePreference.REMOTE_ONLY: max(remote, local)}
        return m.remote_failures + m.local_failures >= budget.get(p.shadow_message_preference_setting, remote + local)

    def fire_no_shadow(self, internal_id: str, at_ms: int, accepted: bool = False) -> None:
        m = self.s.messages.get(internal_id)
        self.s.deadlines.clear(_NO_SHADOW, internal_id)
        if m is not None and not m.decided:
            self.no_shadow(m, at_ms, accepted)

    def rejects_on_shadow_failure(self) -> bool:
        """A Mailbox server's rule (2013 and later): a 2010 hub answers 250 anyway, best effort."""
        return self.primary_params.reject_message_on_shadow_failure and self.mode_of(self.s.primary) is not _EXCHANGE_2010

    def no_shadow(self, m: Message, t: int, accepted: bool = False) -> None:
        """No shadow copy could be made: RejectMessageOnShadowFailure decides what follows, unless the
        node is known to have `accepted` it."""
        m.decided = True
        primary = self.s.primary
        if not accepted and self.rejects_on_shadow_failure():
            self.rejected_no_shadow(m, t)
            return
        m.redundancy = Redundancy.NOT_REDUNDANT
        self.alert(AlertType.NOT_REDUNDANT, Severity.WARNING, [primary], [m], t,
                   f"{primary} accepted the message without a shadow copy: it is not redundantly persisted")

    def rejected_no_shadow(self, m: Message, t: int) -> None:
        primary = self.s.primary
        self.alert(AlertType.REJECTED_NO_SHADOW, Severity.INFO, [primary], [m], t,
                   f"{primary} could not make a shadow copy and answered 451 4.4.0 Message failed to be"
                   " made redundant; the sender may retry")
        self.close(m, t, "rejected")

    def shadow_copy_acknowledged(self, e: ev.ShadowCopyAcknowledged) -> None:
        m = self.known(e)
        if m is None or not self.redundancy_on:  # disabled (a what-if): no copy is made
            return
        if self.s.discarded_early and self.copy_discarded_already(m, e.shadow_server, e.event_time_ms):
            return
        if m.redundancy is _LOST and m.shadow_server == e.shadow_server and m.stored_ms:
            # The copy its shadow reported storing, and lost since (back with a new queue database): the primary's
            # acknowledgement, stamped later by a clock ahead, is of that copy, not of a new one.
            return
        self.attach_shadow(m, e.shadow_server, e.event_time_ms, self.s.queue_db_id, alternate_route=None,
                           db_reported=False)
        locality = e.locality
        if locality is _SITE_UNKNOWN:
            locality = self.locality_of(e.shadow_server)
        m.shadow_locality = locality
        if locality is _LOCAL and self.dag_spans_sites(m):
            self.report_same_site(m, e.shadow_server, e.event_time_ms)

    def locality_of(self, shadow: str) -> ev.SiteLocality:
        """LOCAL or REMOTE from the servers' sites, when the facts know both."""
        nodes = self.s.nodes
        mine, theirs = nodes.get(self.s.primary), nodes.get(shadow)
        if mine is None or theirs is None or mine.ad_site is None or theirs.ad_site is None:
            return _SITE_UNKNOWN
        return _LOCAL if mine.ad_site == theirs.ad_site else _REMOTE

    def dag_spans_sites(self, m: Message) -> bool:
        """Whether the primary's boundary is a DAG with members in another site (a remote attempt
        failed, or the facts show such a member); outside a DAG the preference is ignored."""
        s = self.s
        preference = self.primary_params.shadow_message_preference_setting
        if preference is _REMOTE_ONLY:
            return False
        return m.remote_failures > 0 or s.dag_spans_sites

    def report_same_site(self, m: Message, shadow: str, t: int) -> None:
        """Same-site copies are reported together, per shadow, a heartbeat after the first."""
        s = self.s
        waiting = s.same_site.get(shadow)
        if waiting is None:
            waiting = s.same_site[shadow] = []
            s.deadlines.set(DeadlineKind.SAME_SITE_REPORT, shadow, t + self.primary_timing.heartbeat_ms)
        waiting.append(m.ref)

    def shadow_copy_stored(self, e: ev.ShadowCopyStored) -> None:
        s = self.s
        if e.message is None:
            return
        if not self.redundancy_on:  # disabled (a what-if): no copy is made
            return
        m = self.message(e.message, e.event_time_ms)
        if m is None or s.discarded_early and self.copy_discarded_already(m, e.node, e.event_time_ms):
            return
        db, t = e.primary_queue_db_id, e.event_time_ms
        # The shadow stores the copy with its primary's queue database id (a log line names none): one the twin never
        # saw the primary with is a restart the feed did not show, as an answer naming it is (discard_query_answered).
        new_db = bool(db) and s.queue_db_id is not None and db != s.queue_db_id \
            and not self.named_before_the_restart(t, db) \
            and not self.an_older_database(db)
        if m.forks:
            # Stored now by the shadow's own clock: a notification of the message it seemed to have before (its
            # answer stamped earlier, by the same clock, while that clock is ahead of the primary's) came before
            # the copy did, and emptied none of its next hops' shadow queues.
            for fork in m.forks.values():
                fork.notified = False
        m.stored_ms = t
        self.attach_shadow(m, e.node, t, db, e.alternate_route, db_reported=True)
        if new_db:
            self.restart_reported(db, t, e.node)
            s.unreachable_ms = None

    def an_older_database(self, db: str) -> bool:
        """Whether a copy held, or promoted, names `db`: a database the primary had before (a copy made before
        its restart, reported late)."""
        s = self.s
        return any(p.primary_db_seen == db for p in s.pairs.values()) \
            or any(m.primary_db == db for m in s.messages.values()) \
            or any(r.primary_db_id == db for r in s.promoted.values())

    def attach_shadow(self, m: Message, shadow: str, t: int, primary_db: str | None,
                      alternate_route: bool | None, db_reported: bool) -> None:
        s = self.s
        if alternate_route is not None:
            m.shadow_alternate_route = alternate_route
        pair = s.pairs.get(shadow)
        if pair is None:
            pair = s.pairs[shadow] = Pair(shadow=shadow, last_contact_ms=t, last_query_ms=t, first_copy_ms=t)
            if s.queried_by:
                self.querying_again(pair)
        else:  # the primary just reached the shadow with a copy: both are up and talking
            if t > pair.last_contact_ms:  # (not max(): a builtin's call costs more, twice per copy)
                pair.last_contact_ms = t
            if t > pair.last_query_ms:
                pair.last_query_ms = t
            pair.silent_alerted = False
            if pair.primary_failed_ms is not None and primary_db in (None, s.queue_db_id) \
                    and self.mode_of(shadow) is _EXCHANGE_2010:
                # a 2010 shadow is the previous hop: the hand-off was a session of its own to the primary,
                # back with its database
                pair.primary_failed_ms = None
                self.back_with_the_copies(pair, t)
        if pair.primary_db_seen is None:
            pair.primary_db_seen = primary_db
        if primary_db is not None and (db_reported or m.primary_db is None):
            # the shadow's report of the copy names the database; the primary's side, the twin's latest
            m.primary_db = pair.primary_db_seen if primary_db == pair.primary_db_seen else shared(primary_db)
        if m.shadow_server != shadow or m.redundancy is not _REDUNDANT:
            if m.shadow_server is not None and m.shadow_server != shadow and m.shadow_server in s.pairs:
                self.unhold(s.pairs[m.shadow_server], m.ref.internal_id)
            m.shadow_server, m.redundancy, m.decided = shadow, _REDUNDANT, True
            pair.held.add(m.ref.internal_id)
            self.expire_copy_by(m)
            if m.primary_done_ms is not None:
                pair.pending_discards.add(m.ref.internal_id)
        self.schedule_pair(pair)

    def copy_expires_ms(self, m: Message) -> int:
        """When its shadow copy, unacknowledged, expires from Safety Net: "after the sum of the SafetyNetHoldTime
        and MessageExpirationTimeout parameter values" (003) of the server that keeps it, from the receipt."""
        return m.received_ms + self.config.timing(m.shadow_server or self.s.primary).retention_ms

    def expire_copy_by(self, m: Message) -> None:
        """The message's one expiry deadline comes no later than its copy's (a holder with a shorter hold)."""
        deadlines, key = self.s.deadlines, m.ref.internal_id
        end, due = self.copy_expires_ms(m), deadlines.get(_EXPIRE, key)
        if due is not None and end < due:
            deadlines.set(_EXPIRE, key, end)

    def acknowledged_to_sender(self, e: ev.AcknowledgedToSender) -> None:
        """An unredundant 250: the node accepted the message without a copy, whatever the twin's
        RejectMessageOnShadowFailure says (as its 451 is believed)."""
        m = self.known(e)
        if m is not None and not e.redundant and not m.decided:
            self.no_shadow(m, e.event_time_ms, accepted=True)

    def rejected_to_sender(self, e: ev.RejectedToSender) -> None:
        """The node answered 451 4.4.0: its RejectMessageOnShadowFailure is $true, whatever the twin's
        configuration says (as its unredundant 250 is believed)."""
        m = self.known(e)
        if m is None:
            return
        if m.redundancy is _REDUNDANT:
            self.close(m, e.event_time_ms, "rejected")
        else:
            self.rejected_no_shadow(m, e.event_time_ms)

    def sent_to_next_hop(self, e: ev.SentToNextHop | ev.DeliveryDeferred) -> None:
        m = self.known(e)
        if m is not None:
            key = e.message.fork_id or e.next_hop
            fork = m.forks.get(key)
            if fork is None:
                hop = shared(e.next_hop)
                m.forks_of()[e.message.fork_id or hop] = Fork(hop, shared(e.recipients))
            elif fork.next_hop is None:
                self.notified_fork_named(m, fork, e.next_hop, e.recipients, e.event_time_ms)
            elif fork.done:
                if (type(e) is ev.DeliveryDeferred or e.message.fork_id is None) \
                        and (others := tuple(r for r in e.recipients if r not in fork.recipients)):
                    # Served in part, its other recipients deferred, or handed over again (a log's SEND, the relay's
                    # next attempt): those served stay served, the others wait for the next hop's acknowledgement.
                    # That next hop's fork is not fully processed, and no discard notification of it comes until
                    # they are served ("after all expected discard notifications are received", 003).
                    fork.waiting = shared(tuple(dict.fromkeys((*fork.waiting, *others))))
                    fork.notified = False
            elif type(e) is ev.SentToNextHop and e.message.fork_id is None and e.recipients and fork.recipients \
                    and fork.recipients != e.recipients:
                # Another hand-off of part of a pending fork's recipients: the acknowledgement to come serves those,
                # and the others wait.
                fork.recipients = shared(e.recipients)

    def delivery_deferred(self, e: ev.DeliveryDeferred) -> None:
        """The next hop refused or timed out: that fork is still pending (it is retried, or it
        expires with the message)."""
        self.sent_to_next_hop(e)

    def fork_processed(self, e: ev.NextHopAcknowledged | ev.BoundaryCrossed | ev.DeliveredToMailbox) -> None:
        m = self.known(e)
        if m is None:
            return
        hop = e.mailbox_server if isinstance(e, ev.DeliveredToMailbox) else e.next_hop
        key = e.message.fork_id or hop
        fork = m.forks.get(key)
        served = getattr(e, "recipients", ())
        if fork is None:
            hop = shared(hop)
            fork = m.forks_of()[e.message.fork_id or hop] = Fork(hop, shared(served))
        elif fork.next_hop is None:
            self.notified_fork_named(m, fork, hop, served, e.event_time_ms)
            return
        elif served and fork.recipients and fork.recipients != served:
            # Another delivery to the same hop (a mailbox server's other database): it serves its own
            # recipients, and those of the fork's earlier delivery stay served; a pending fork's others wait.
            if fork.done:
                fork.served_later(served, e.event_time_ms)
                merged = shared(tuple(dict.fromkeys((*fork.recipients, *served))))
            else:
                merged, fork.waiting = shared(served), shared(tuple(r for r in fork.recipients if r not in served))
            if fork.notified and merged != fork.recipients:
                fork.notified = False  # the notification the shadow had did not cover the recipients served now
            fork.recipients = merged
        if not served and fork.waiting:  # the fork's whole acknowledgement: of the recipients still waiting there too
            fork.served_later(fork.waiting, e.event_time_ms)
            fork.recipients, fork.waiting = shared(tuple(dict.fromkeys((*fork.recipients, *fork.waiting)))), ()
        # whichever fork served them (a deferred recipient may go another way: a hub's acknowledgement names no
        # recipient, its fork's hand-off did), they wait no more
        served = served or fork.recipients
        for other in m.forks.values():
            if other.waiting:
                other.waiting = shared(tuple(r for r in other.waiting if r not in served))
        fork.processed(e.event_time_ms)
        self.maybe_primary_done(m, e.event_time_ms)

    def primary_processed(self, e: ev.DiscardStatusSet | ev.MovedToSafetyNet) -> None:
        m = self.known(e)
        if m is not None and m.primary_done_ms is None:
            self.primary_done(m, e.event_time_ms)

    def message_expired(self, e: ev.MessageExpired) -> None:
        """The primary's own expiry: of one fork (that fork failed for good), of a message still
        queued (the twin says so and lets it go), or of a processed one from Safety Net."""
        m = self.known(e)
        if m is None:
            return
        t = e.event_time_ms
        fork_id = e.message.fork_id
        if fork_id is not None and m.primary_done_ms is None:
            fork = m.forks.get(fork_id)
            if fork is None:
                fork = m.forks_of()[fork_id] = Fork("", ())
            elif not fork.done:
                fork.next_hop = ""  # its recipients had a non-delivery report: no next hop has it
            fork.processed(t)
            fork.waiting = ()
            self.maybe_primary_done(m, t)
        elif m.primary_done_ms is None:
            self.expired_in_queue(m, t)
        elif not (m.shadow_held and m.ref.internal_id in getattr(self.s.pairs.get(m.shadow_server), "held", ())):
            self.close(m, t, "expired")
        # else processed already (the twin's deadline said this expiry first, the primary down by then):
        # its shadow holds the copy until it collects the discard status, as after `expired_in_queue`

    def expired_in_queue(self, m: Message, t: int) -> None:
        s = self.s
        pending = tuple(r.address for r in self.pending_recipients(m)) if m.recipients \
            else self.waiting_recipients(m)
        pair = s.pairs.get(m.shadow_server) if m.shadow_held else None
        kept = pair is not None and t < self.last_reached_ms(pair) + self.auto_discard_span(pair.shadow)
        if kept:
            copy = f"its shadow copy is released once {m.shadow_server} collects the discard status"
        elif pair is not None:
            copy = (f"{m.shadow_server}, which holds its shadow copy, has not queried {s.primary} for"
                    " ShadowMessageAutoDiscardInterval: the discard status will not reach it")
        elif m.shadow_server is not None and m.redundancy is Redundancy.LOST:
            copy = f"{m.shadow_server}'s shadow copy of it is gone already"
        else:
            copy = "it has no shadow copy"
        self.out.alerts.append(Alert(
            alert_id=stable_id("alert", AlertType.MESSAGE_EXPIRED.value, s.primary, t, m.ref.internal_id),
            type=AlertType.MESSAGE_EXPIRED, severity=Severity.WARNING,
            servers=tuple(dict.fromkeys(x for x in (s.primary, m.shadow_server) if x)),
            messages=(AlertMessage(m.ref, pending),),
            reason=f"the message stayed in {s.primary}'s queue past MessageExpirationTimeout (received"
                   f" {_iso(m.received_ms)}): Exchange expires it and returns a non-delivery report to the sender;"
                   f" {copy}",
            decided_at_ms=t,
        ))
        if kept:
            # Expired is processed: the shadow holds its copy until it collects the discard status, and
            # resubmits it if it promotes before that (it was down, then its primary failed).
            m.expired_ms = t
            self.primary_done(m, t)
            if s.deadlines.get(_EXPIRE, m.ref.internal_id) is None:  # its expiry fired: its copy's hold comes next
                s.deadlines.set(_EXPIRE, m.ref.internal_id, self.copy_expires_ms(m))
        else:
            self.close(m, t, "expired")

    def served_before_expiry(self, m: Message) -> tuple[Recipient, ...] | None:
        """Whom the primary had handed a processed message on to, who get it twice should its shadow resubmit
        it: every recipient (() if not known); of a message it expired, only those an acknowledged fork served
        before (None: nobody), the others had a non-delivery report and get the resubmitted copy once. Nor those of a
        fork whose discard notification reached the shadow: that next hop's shadow queue is empty (003). Only a fork a
        notification can name (a fork id, as `resubmitted_unnotified`): of a hop's, the twin cannot tell. Nor those of
        a fork that failed for good (its next hop's refusal, a non-delivery report): the resubmitted copy is their first."""
        once = {r.lower() for key, f in m.forks.items()
                if (f.notified and key != f.next_hop) or (f.done and f.next_hop == "") for r in f.recipients}
        if m.expired_ms is None and not (once and m.recipients):
            return m.recipients
        if not m.recipients:
            return () if any(f.done and f.next_hop and not f.recipients for f in m.forks.values()) else None
        pending = self.pending_recipients(m) if m.expired_ms is not None else ()
        return tuple(r for r in m.recipients if r not in pending and r.address.lower() not in once) or None

    def side_effect_generated(self, e: ev.SideEffectGenerated) -> None:
        if e.message is None or e.node != self.s.primary:
            return
        child = self.message(e.message, e.event_time_ms)
        if child is None:
            return
        child.decided = True
        if child.redundancy is _PENDING:
            child.redundancy = Redundancy.DISABLED  # protected through its parent's copy
        parent = self.s.messages.get(e.parent.internal_id)
        if parent is None:
            return
        if parent.primary_done_ms is not None:
            # Processed, but its shadow copy is still there: it is released only once this side
            # effect is processed too.
            pair = self.s.pairs.get(parent.shadow_server) if parent.shadow_server is not None else None
            if pair is None or parent.ref.internal_id not in pair.pending_discards:
                return
            pair.pending_discards.discard(parent.ref.internal_id)
            parent.primary_done_ms = None
            self.schedule_pair(pair)
        child.parent = parent.ref.internal_id
        parent.add_side_effect(child.ref.internal_id)

    def maybe_primary_done(self, m: Message, t: int) -> None:
        """Fully processed: every recipient handed to a next hop that acknowledged (or failed for
        good), whatever forks are still to come; without the recipients, every fork seen."""
        if m.primary_done_ms is not None or m.side_effects or not m.forks:
            return
        if not m.recipients:  # (recipients still waiting at a fork's next hop: not processed)
            if all(f.done and not f.waiting for f in m.forks.values()):
                self.primary_done(m, t)
            return
        served: set[str] = set()
        for fork in m.forks.values():
            if fork.done and fork.next_hop is not None:
                if not fork.recipients:  # a fork for the whole message
                    self.primary_done(m, t)
                    return
                served.update(fork.recipients)
        for r in m.recipients:  # the common case: every address served as written, no case folding
            if r.address not in served and r.address.lower() not in {x.lower() for x in served}:
                return
        self.primary_done(m, t)

    def pending_recipients(self, m: Message) -> tuple[Recipient, ...]:
        """The recipients no acknowledged fork has served yet."""
        served: set[str] = set()
        for fork in m.forks.values():
            if fork.done and fork.next_hop is not None:
                if not fork.recipients:
                    return ()
                served.update(r.lower() for r in fork.recipients)
        return tuple(r for r in m.recipients if r.address.lower() not in served)

    @staticmethod
    def waiting_recipients(m: Message) -> tuple[str, ...]:
        """Without the receipt's recipients: those waiting at a fork's next hop (`Fork.waiting`), the twin's only word
        of whom the message has still to reach."""
        return tuple(dict.fromkeys(r for f in m.forks.values() for r in f.waiting))

    def pending_routes(self, m: Message) -> list[tuple[MessageRef, str | None, tuple[str, ...]]]:
        """What the new owner must send: each fork not yet processed (to its next hop), the
        recipients no fork has been sent to yet, and the side-effect messages still pending;
        the whole message when nothing more precise is known."""
        routes: list[tuple[MessageRef, str | None, tuple[str, ...]]] = []
        covered: set[str] = set()
        covers_all = False
        served = {r.lower() for f in m.forks.values() if f.done for r in f.recipients}
        for key, fork in sorted(m.forks.items()):
            if fork.next_hop is None:  # known from its discard notification alone: whom it served is not known
                continue
            if not fork.recipients:
                covers_all = True
            covered.update(r.lower() for r in fork.recipients)
            if not fork.done:
                pending = tuple(r for r in fork.recipients if r.lower() not in served)  # not served by another fork
                if pending or not fork.recipients:
                    routes.append((MessageRef(m.ref.message_id, m.ref.internal_id, key), fork.next_hop or None,
                                   pending))
        if not m.forks:
            routes.append((m.ref, None, ()))
        elif not covers_all:
            addresses = [r.address for r in m.recipients] or self.waiting_recipients(m)
            rest = tuple(dict.fromkeys(r for r in addresses if r.lower() not in covered))
            if rest:
                routes.append((m.ref, None, rest))
        for child_id in sorted(m.side_effects):
            if (child := self.s.messages.get(child_id)) is not None:
                routes.extend(self.pending_routes(child))
        return routes or [(m.ref, None, ())]

    def primary_done(self, m: Message, t: int) -> None:
        """Every fork and side effect of the message is processed: its shadow may be discarded."""
        s = self.s
        m.primary_done_ms, m.at_risk = t, False  # its primary had it after all
        if m.ref.internal_id in s.deadlines.by_kind[_ACK_DELAY]:
            s.deadlines.clear(_ACK_DELAY, m.ref.internal_id)
        if m.parent is not None and (parent := s.messages.get(m.parent)) is not None:
            if parent.side_effects:
                parent.side_effects.discard(m.ref.internal_id)
            self.maybe_primary_done(parent, t)
        if m.shadow_held and (pair := s.pairs.get(m.shadow_server)) is not None:
            first = not pair.pending_discards
            pair.pending_discards.add(m.ref.internal_id)
            if first:  # else its auto-discard deadline is set, and nothing else its deadlines depend on changed
                self.schedule_pair(pair)
        elif m.ref.internal_id in s.messages:
            self.close(m, t, "delivered")

    # ---- on a shadow ------------------------------------------------------------------

    def discard_query_sent(self, e: ev.DiscardQuerySent) -> None:
        pair = self.s.pairs.get(e.node)
        if pair is None:  # it holds nothing for the primary, and queries it: its heartbeat for its next copy
            self.remember_query(e.node, e.event_time_ms)
            return
        t, db = e.event_time_ms, e.shadow_queue_db_id
        if pair.shadow_db_id != db:
            if (fact := self.s.nodes.get(e.node)) is not None and fact.replaced_db_id == db:
                # the database the shadow's NodeStarted replaced: sent before that restart (002: "una nueva base de
                # datos de transporte" when "la base de datos de transporte no se puede recuperar"), its contact counts
                db = pair.shadow_db_id
            elif pair.shadow_db_id is not None:
                self.shadow_copies_lost(pair, t)
                pair = self.s.pairs.get(e.node)
                if pair is None:
                    return
        pair.shadow_db_id, pair.heartbeats = db, True
        pair.last_heartbeat_ms = max(pair.last_heartbeat_ms or t, t)
        self.shadow_alive(pair, t)
        if pair.db_change_pending and pair.shadow in self.s.pairs:
            # Back with its copies, it sees the primary's new database now and promotes.
            pair.db_change_pending = False
            self.promote_if_primary_db_changed(pair, t)

    def discard_query_failed(self, e: ev.DiscardQueryFailed) -> None:
        """A failed query: the span since the last contact decides (in 2010 mode too: RetryCount
        timeouts of TimeoutInterval each, however many sessions failed in between); and a shadow that
        comes back after the span (its promotion deadline passed while it was silent too) now promotes
        at once."""
        s, t = self.s, e.event_time_ms
        if s.unreachable_ms is None or t > s.unreachable_ms:
            s.unreachable_ms = t
        pair = s.pairs.get(e.node)
        if pair is None:
            return
        pair.heartbeats = True
        pair.last_query_ms = max(pair.last_query_ms, t)
        pair.silent_alerted = pair.awaiting_shadow = False
        if pair.primary_failed_ms is None and pair.held and t >= pair.last_contact_ms + self.promotion_span(pair):
            self.promote(pair, t, CommandReason.PRIMARY_HEARTBEAT_TIMEOUT)
        elif pair.shadow in s.pairs:
            self.schedule_pair(pair)

    def shadow_alive(self, pair: Pair, t: int, query: bool = True) -> None:
        """The shadow showed life: it sent a discard query (`query`), or logged a line."""
        # silent past the span, or querying once the span has run out; or, its life read from its lines, silent past
        # the silence span: it was down, and the primary's lines meanwhile were no contact with it (hunt seed 8861)
        returning = pair.awaiting_shadow or (query and pair.primary_failed_ms is None
                                             and t >= pair.last_contact_ms + self.promotion_span(pair)) \
            or (not query and self.shadow_silent(pair, t))
        waiting = self.s.deadlines.get(_PROMOTE, pair.shadow)
        pair.last_query_ms = max(pair.last_query_ms, t)
        pair.silent_alerted = pair.awaiting_shadow = False
        self.schedule_pair(pair)
        if pair.held and pair.primary_failed_ms is None and pair.shadow in self.s.pairs:
            # Silent past the span, it speaks again: the answer to this very query decides (a
            # failure promotes at once, an answer is contact), so wait for it up to a heartbeat;
            # its next line or query meanwhile does not cut the wait short.
            if returning:
                due = max(pair.last_contact_ms + self.promotion_span(pair), t + self.heartbeat_of(pair.shadow))
            else:
                due = self.s.deadlines.by_kind[_PROMOTE][pair.shadow]  # as schedule_pair set it
            if waiting is not None and waiting > t:
                due = max(due, waiting)
            self.s.deadlines.set(_PROMOTE, pair.shadow, due)

    def discard_query_answered(self, e: ev.DiscardQueryAnswered) -> None:
        s, t = self.s, e.event_time_ms
        pair = s.pairs.get(e.node)
        if pair is not None:
            pair.heartbeats = True
            pair.last_contact_ms = pair.last_query_ms = max(pair.last_contact_ms, t)
            pair.last_answered_ms = max(pair.last_answered_ms or t, t)
            pair.silent_alerted = pair.awaiting_shadow = False
            messages = s.messages
            # A 2010 previous hop keeps one copy per message it handed the primary, released by "la lista de
            # mensajes entregados" (002) once every next hop has it: no discard notification of a fork comes to it.
            per_fork = _EXCHANGE_2010 not in (self.mode_of(pair.shadow), self.mode_of(s.primary))
            for i in pair.held:
                if (m := messages.get(i)) is None:
                    continue
                if m.at_risk:
                    self.in_queue_again(m, t)
                if per_fork and m.forks and self.copy_db(m, pair) in (None, e.primary_queue_db_id) \
                        and t >= m.stored_ms and (m.primary_done_ms is None or i in pair.pending_discards):
                    # the answer brings the notification of each fork processed by now (not from a new, empty
                    # queue database: it has no discard status of the copy's; nor one the shadow gave before it
                    # stored the copy, by its own clock, applied after that report, a later micro-batch's; nor
                    # those of a processed message the primary deleted: ShadowMessageAutoDiscardInterval)
                    for fork in m.forks.values():
                        if fork.done and not fork.waiting:  # (a fork served in part has none yet)
                            fork.notified = True
            for ref in e.discarded:
                self.discard(ref, pair, t)
            if pair.shadow in s.pairs:  # once for all the copies released
                self.schedule_pair(pair)
        else:
            for ref in e.discarded:
                self.discarded_before_the_copy(ref, e.node, t)
        if s.queue_db_id is None and s.unreachable_ms is None:
            # The first database the twin learns of the primary, which no query failed to reach since its
            # copies were made: copies of no known database (the primary's word alone) were made in it.
            for held in s.pairs.values():
                if held.primary_db_seen is None and held.held:
                    held.primary_db_seen = shared(e.primary_queue_db_id)
        if e.primary_queue_db_id != s.queue_db_id:
            if not self.named_before_the_restart(e.event_time_ms, e.primary_queue_db_id):
                self.restart_reported(e.primary_queue_db_id, t, e.node)
        else:
            if s.promoted:
                self.primary_seen_with_db(e.primary_queue_db_id, t, seen_by=e.node)
            if pair is not None and s.pairs.get(pair.shadow) is pair:
                # the answer to its own query shows it the primary's new database: it promotes the copies of the old
                self.promote_if_primary_db_changed(pair, t)
        s.unreachable_ms = None
        if pair is not None and pair.primary_failed_ms is not None and s.pairs.get(pair.shadow) is pair:
            # back with the database of the copies it still holds (those of an older one were promoted just
            # now): a later outage is judged afresh
            pair.primary_failed_ms = None
            self.back_with_the_copies(pair, t)
            self.schedule_pair(pair)

    def restart_reported(self, db: str, t: int, shadow: str) -> None:
        """A shadow's answer or stored copy names `db`, another queue database than the twin knows the primary by: a
        restart the feed did not show."""
        s = self.s
        previous, s.queue_db_id = s.queue_db_id, db
        if previous is not None:
            s.replaced_db_id, s.db_reported_ms = previous, t
        self.primary_seen_with_db(db, t, previous_db=previous, back_after=s.unreachable_ms, seen_by=shadow)

    def named_before_the_restart(self, t: int, db: str) -> bool:
        """Whether an answer (or a stored copy) at `t` naming queue database `db`, another than the primary's latest
        NodeStarted, was given
        before that restart: stamped before it (a late event) or less than the clock-skew allowance after it
        (a shadow's clock ahead of the primary's). The primary's own NodeStarted says its database, so the
        answer's is stale (the rest of it counts); a change seen later, or after a query that failed to reach
        it since that NodeStarted, is a restart the feed did not show, unless to the database that NodeStarted
        replaced: a primary does not come back to it (another shadow's query may fail while its service starts)."""
        s = self.s
        if db == s.replaced_db_id and s.db_reported_ms is not None \
                and t - s.db_reported_ms < self.config.clock_skew_allowance_ms:
            return True  # the database a shadow's report showed replaced, named by a clock that far behind
        started, fact = s.primary_started_ms, s.nodes.get(s.primary)
        return started is not None and fact is not None and fact.queue_db_id != db \
            and t - started < self.config.clock_skew_allowance_ms \
            and (s.unreachable_ms is None or s.unreachable_ms <= started or db == s.replaced_db_id)

    def shadow_discarded(self, e: ev.ShadowDiscarded) -> None:
        pair = self.s.pairs.get(e.node)
        if e.message is None:
            return
        if pair is None:
            self.discarded_before_the_copy(e.message, e.node, e.event_time_ms)
        elif self.discard(e.message, pair, e.event_time_ms):
            self.schedule_pair(pair)

    def discarded_before_the_copy(self, ref: MessageRef, shadow: str, t: int) -> None:
        """The shadow discarded a whole message before (by its own clock) the twin saw it hold a copy: that
        clock was set back between its report of storing the copy, still to come, and the discard (hunt seed
        1589). Remembered for the clock-skew allowance (`discarded_early`), in whichever micro-batch it comes: the
        discard proves the primary's processing complete, and that shadow's copy released (`copy_discarded_already`)."""
        if not self.redundancy_on or ref.fork_id is not None or self.config.clock_skew_allowance_ms <= 0:
            return
        s, key = self.s, ref.internal_id
        m = s.messages.get(key)
        if key not in s.discarded_early and (key not in s.closed if m is None
                                             else m.shadow_server is None and not m.decided):
            s.discarded_early[key] = (shadow, t)
            self.forget_closed_by(t)

    def copy_discarded_already(self, m: Message, shadow: str, t: int) -> bool:
        """A copy reported of a message a shadow discarded before (`discarded_before_the_copy`): its primary's
        processing is complete. That shadow's copy is in Safety Net already: the message closes, delivered with its
        shadow (True: nothing is held). Another shadow's copy is not released by it: the primary answers a shadow
        with "the discard notifications for messages that apply to the querying shadow server" (003), so it is held
        until its own notification, and a promotion meanwhile resubmits a message processed (False)."""
        s = self.s
        early = s.discarded_early.get(m.ref.internal_id)
        if early is None:
            return False
        discarder, discarded_ms = early
        if m.primary_done_ms is None:
            m.primary_done_ms = max(discarded_ms, m.received_ms)
        if discarder != shadow:
            return False
        if m.shadow_server is None:
            del s.discarded_early[m.ref.internal_id]
            m.shadow_server, m.redundancy, m.decided = shadow, _REDUNDANT, True
            self.close(m, max(t, m.received_ms), "delivered")
        return True

    def discard(self, ref: MessageRef, pair: Pair, t: int) -> bool:
        """A discard notification reached the shadow. One naming a fork empties that next hop's shadow queue
        only: the copy is released once every fork is processed (a fork the twin does not know keeps it held
        until the primary names it, and a promotion meanwhile resends its recipients). Whether the pair held the copy, as `release_shadow`."""
        key = ref.internal_id
        m = self.s.messages.get(key)
        if m is None or m.shadow_server is None:
            self.discarded_before_the_copy(ref, pair.shadow, t)
            # (a message closed already, whose copy the pair no longer holds, is the common case: nothing to release)
            return m is None and (key in pair.held or key in pair.pending_discards) \
                and self.release_shadow(key, pair, t)
        if ref.fork_id is None or m.shadow_server != pair.shadow or m.primary_done_ms is not None:
            return self.release_shadow(ref.internal_id, pair, t)
        fork = m.forks.get(ref.fork_id)
        if fork is None:
            # A fork the primary's events have not named yet (the shadow's clock is behind the primary's): it was
            # processed; the copy waits for the primary's word on it (`notified_fork_named`).
            m.forks_of()[ref.fork_id] = Fork(None, (), True, True, done_ms=t)
        elif not fork.done:
            fork.processed(t)
            fork.notified = True
            self.maybe_primary_done(m, t)
            if m.primary_done_ms is not None:
                return self.release_shadow(ref.internal_id, pair, t)
        else:
            fork.notified = True
        return False

    def resubmitted_unnotified(self, m: Message, pair: Pair | None) -> tuple[Recipient, ...]:
        """The recipients of `m`'s processed forks whose discard notification never reached its shadow: their
        next hops' shadow queues still hold the copy, which the shadow resubmits on its own when it promotes
        ("each next hop for the primary message requires separate shadow queues", 003), so they get it twice.
        A notification comes with the shadow's first answered query after the fork's acknowledgement (or names the
        fork). Only with the shadow's discard queries in the feed: otherwise the twin cannot tell whether one came.
        A fork known by its hop alone (no fork id) may be the part of that next hop's fork that was served, its
        others still waiting (a DEFER line names no hop): no notification came then, and the twin cannot tell, so it
        counts as unnotified, as in `served_before_expiry`."""
        if pair is None or not pair.heartbeats:
            return ()
        unnotified: set[str] = set()
        notified: set[str] = set()
        for key, fork in m.forks.items():
            if fork.notified and key != fork.next_hop:
                notified.update(r.lower() for r in fork.recipients)
            elif fork.done and fork.next_hop:
                unnotified.update(r.lower() for r in fork.recipients)
        unnotified -= notified
        return tuple(r for r in m.recipients if r.address.lower() in unnotified) if unnotified else ()

    @staticmethod
    def refused_forks_resubmitted(m: Message) -> bool:
        """Whether `m` has a fork that failed for good (the primary's MessageExpired of it: a non-delivery report)
        whose discard notification never reached the shadow: that next hop's shadow queue still holds the copy."""
        return any(f.done and f.next_hop == "" and not f.notified for f in m.forks.values())

    def resubmitted_result(self, m: Message) -> str:
        """How a processed message its shadow resubmits ends: 'promoted' when the resubmitted copy is the first some
        of its recipients get, after their non-delivery report (the primary expired it, or a fork of it failed for
        good: `refused_forks_resubmitted`); else 'delivered', by the primary (the copy arrives twice)."""
        return "promoted" if m.expired_ms is not None or self.refused_forks_resubmitted(m) else "delivered"

    @staticmethod
    def forks_delivered_by(m: Message, pair: Pair) -> int:
        """When the forks whose notifications never reached the shadow (`resubmitted_unnotified`) were delivered, at
        the earliest, for a fork whose own time is not known (`first_copies`): a fork processed before the shadow's
        last answered query had its notification with that answer."""
        return max(m.received_ms, pair.last_answered_ms or pair.last_contact_ms)

    @staticmethod
    def first_copies(m: Message, recipients: tuple[Recipient, ...], otherwise_ms: int) -> tuple[int, ...]:
        """When each of `recipients` had its first copy from the primary: the earliest acknowledgement of a fork
        that served it (each fork has its own; a recipient it served later, its own), else `otherwise_ms` (a message
        processed without a fork, or a fork of a snapshot before format 17). Duplicate detection forgets each copy on
        its own (004)."""
        first: dict[str, int] = {}
        for fork in m.forks.values():
            if fork.done and fork.next_hop and fork.done_ms is not None:
                late = dict(fork.served_late) if fork.served_late else {}
                for address in fork.recipients or (r.address for r in m.recipients):
                    key, done_ms = address.lower(), late.get(address, fork.done_ms)
                    first[key] = min(first.get(key, done_ms), done_ms)
        return tuple(first.get(r.address.lower(), otherwise_ms) for r in recipients)

    def notified_fork_named(self, m: Message, fork: Fork, hop: str, recipients: tuple[str, ...], t: int) -> None:
        """The primary names a fork whose discard notification reached the shadow first (by event time: the
        clocks differ): the fork is processed, and if the message now is, the shadow has its notification and
        releases the copy."""
        fork.next_hop, fork.recipients = shared(hop), shared(recipients)
        self.maybe_primary_done(m, t)
        if m.primary_done_ms is not None and (pair := self.s.pairs.get(m.shadow_server or "")) is not None \
                and self.release_shadow(m.ref.internal_id, pair, t):
            self.schedule_pair(pair)

    def shadow_promoted(self, e: ev.ShadowPromoted) -> None:
        """The node promoted its copy on its own: record it, command nothing."""
        s = self.s
        if e.message is None:
            return
        if s.deadlines.by_kind[_SETTLE_RESTART]:
            restart.promoted_by_shadow(self, e)
        m = s.messages.get(e.message.internal_id)
        if m is None or m.shadow_server != e.node:
            return
        t = e.event_time_ms
        pair = s.pairs.get(e.node)
        if pair is not None and m.ref.internal_id in pair.held and self.promoting_before_the_twin(pair, t):
            self.promote(pair, t, CommandReason.PRIMARY_HEARTBEAT_TIMEOUT, reported=True)
            return
        if m.primary_done_ms is not None:
            # The primary had processed it; the shadow never got the discard notification (it
            # was down, or out of touch past the span) and resubmits it: it arrives twice (once, after
            # the non-delivery report, where the primary expired it).
            if (had := self.served_before_expiry(m)) is not None:
                self.predict_duplicates([Promoted(m.ref.whole(), e.node, had, s.queue_db_id, t,
                                                  self.first_copies(m, had, m.primary_done_ms))], t,
                                        f"had processed a message whose shadow on {e.node} promoted it on its own")
            self.close(m, t, self.resubmitted_result(m))
            return
        if again := self.resubmitted_unnotified(m, pair):
            self.predict_duplicates([Promoted(m.ref.whole(), e.node, again, s.queue_db_id, t,
                                              self.first_copies(m, again, self.forks_delivered_by(m, pair)))], t,
                                    f"had handed forks of a message on, whose discard notifications never reached"
                                    f" {e.node}, which promoted it on its own")
        # Back with its queue, the primary delivers only what it had not handed on: the recipients still pending
        # (as after the twin's own promotion, `promote`).
        pending = self.pending_recipients(m)
        if pending or not m.recipients:
            self.remember_promoted(m, e.node, t, self.copy_db(m, pair) if pair else m.primary_db, pending or None,
                                   reported=True)
        self.close(m, t, "promoted")

    def promoting_before_the_twin(self, pair: Pair, t: int) -> bool:
        """Whether a shadow promoting a copy at `t` on its own found its primary unreachable less than a heartbeat
        before the twin's promotion deadline (its last contact counted from when its query went out, the answer's
        stamp a moment later): it promotes every copy it holds, and the twin says so, not nothing. Not a shadow that
        stored a copy of the primary's less than the span before, by its own clock: that copy came in a session with
        the primary, so its promotion was not for want of one but for the primary's new queue database (003), whose
        copies, that one among them, it keeps (hunt seed 7572)."""
        if pair.primary_failed_ms is not None or not t < self.promotion_due(pair) <= t + self.heartbeat_of(pair.shadow):
            return False
        since = t - (self.spans.get(pair.shadow) or self.spans_of(pair.shadow))[0]
        messages = self.s.messages
        return pair.last_contact_ms <= since or not any(
            (m := messages.get(i)) is not None and m.stored_ms is not None and m.stored_ms > since for i in pair.held)

    def release_shadow(self, internal_id: str, pair: Pair, t: int) -> bool:
        """The shadow's copy went into Safety Net: the primary's processing is proven complete.
        Whether the pair held the copy: if so, the caller schedules the pair (once for many copies)."""
        held = internal_id in pair.held or internal_id in pair.pending_discards
        self.unhold(pair, internal_id)
        m = self.s.messages.get(internal_id)
        if m is not None and m.shadow_server == pair.shadow:
            if m.primary_done_ms is None:
                m.primary_done_ms = t
            self.close(m, t, "delivered", schedule_pair=False)
        return held

    def shadow_copies_lost(self, pair: Pair, t: int) -> None:
        s = self.s
        lost = [s.messages[i] for i in sorted(pair.held) if i in s.messages]
        for m in lost:
            m.redundancy = Redundancy.LOST
        if pair.primary_db_seen is not None and s.queue_db_id is not None and pair.primary_db_seen != s.queue_db_id:
            # The primary's queue went too (it came back with a new database): no copy is left.
            gone = [m for m in lost if m.primary_done_ms is None]
            if gone:
                self.alert(AlertType.MESSAGE_LOST, Severity.CRITICAL, [s.primary, pair.shadow], gone, t,
                           f"{pair.shadow} came back with a new queue database after {s.primary} did: both copies"
                           f" of {len(gone)} message(s) are gone; they are lost")
                for m in gone:
                    self.close(m, t, "lost")
                lost = [m for m in lost if m.ref.internal_id in s.messages]
        # A copy of what the primary processed only awaited its discard notification: nothing is lost with it.
        unprotected = [m for m in lost if m.primary_done_ms is None]
        if unprotected:
            self.alert(AlertType.SHADOW_SERVER_UNREACHABLE, Severity.WARNING, [pair.shadow, s.primary], unprotected,
                       t, f"{pair.shadow} came back with a new queue database: its shadow copies of {len(unprotected)}"
                       f" message(s) of {s.primary} are gone; they are no longer redundantly persisted")
        for m in lost:
            if m.primary_done_ms is not None:
                self.close(m, t, "delivered")
        pair.held.clear()
        pair.pending_discards.clear()
        self.schedule_pair(pair)

    # ---- promotion and duplicates -----------------------------------------------------

    def promotion_span(self, pair: Pair) -> int:
        return (self.spans.get(pair.shadow) or self.spans_of(pair.shadow))[0]

    def silence_span(self, shadow: str) -> int:
        return (self.spans.get(shadow) or self.spans_of(shadow))[1]

    def auto_discard_span(self, shadow: str) -> int:
        return (self.spans.get(shadow) or self.spans_of(shadow))[2]

    def spans_of(self, shadow: str) -> tuple[int, int, int, int]:
        timing = self.config.timing(shadow)
        if self.mode_of(shadow) is _EXCHANGE_2010:
            promotion = timing.heartbeat_timeout_ms * self.config.for_node(shadow).shadow_heartbeat_retry_count
        else:
            promotion = timing.resubmit_ms
        heartbeat = self.heartbeat_of(shadow)
        spans = self.spans[shadow] = (promotion, heartbeat * self.config.shadow_silence_heartbeats,
                                      self.primary_timing.auto_discard_ms, heartbeat)
        return spans

    def heartbeat_of(self, shadow: str) -> int:
        """How often the shadow queries its primary: ShadowHeartbeatFrequency, or in 2010 mode
        ShadowHeartbeatTimeoutInterval."""
        timing = self.config.timing(shadow)
        return timing.heartbeat_timeout_ms if self.mode_of(shadow) is _EXCHANGE_2010 else timing.heartbeat_ms

    def promote(self, pair: Pair, t: int, reason: CommandReason, include_unrouted: bool = False,
                forecast: bool = False, only: set[str] | None = None, reported: bool = False) -> None:
        """The shadow takes ownership (of the copies in `only`, else of all): a redelivery command
        per unfinished fork, and one alert. A forecast (the feed stopped) leaves the messages the
        twin saw processed alone. `reported`: the shadow's ShadowPromoted said it did, at `t`."""
        s = self.s
        pair.primary_failed_ms = t
        held = [s.messages[i] for i in sorted(pair.held) if i in s.messages and (only is None or i in only)]
        # The twin saw the primary process these before it failed: resubmitting them would
        # only deliver them twice, so no command. But the shadow cannot know: it resubmits them
        # on its own (2010: those with an alternate route), so they arrive twice.
        processed = [m for m in held if m.primary_done_ms is not None]
        for m in processed:
            held.remove(m)
        if forecast:
            processed = []
        will_resubmit = [m for m in processed if include_unrouted or m.shadow_alternate_route
                         or self.mode_of(pair.shadow) is not _EXCHANGE_2010]
        # Only a 2010 shadow (the previous hop) can be without an alternate route: 2013 and later
        # transmit promoted messages to the next hop.
        routed = [m for m in held if include_unrouted or m.shadow_alternate_route
                  or self.mode_of(pair.shadow) is not _EXCHANGE_2010]
        twice = [Promoted(m.ref.whole(), pair.shadow, had, self.copy_db(m, pair) or s.queue_db_id, t,
                          self.first_copies(m, had, m.primary_done_ms))
                 for m in will_resubmit if (had := self.served_before_expiry(m)) is not None]
        expired = [m for m in will_resubmit if m.expired_ms is not None]
        # A fork that failed for good (its recipients had a non-delivery report) whose discard notification never
        # reached the shadow keeps its copy in that next hop's shadow queue ("each next hop for the primary message
        # requires separate shadow queues", 003): resubmitted, it reaches them now, once, as an expired message does.
        refused = [m for m in will_resubmit if m.expired_ms is None and self.refused_forks_resubmitted(m)]
        if not forecast:  # and of the others, the forks processed whose notifications it never had
            twice += [Promoted(m.ref.whole(), pair.shadow, again, self.copy_db(m, pair) or s.queue_db_id, t,
                               self.first_copies(m, again, self.forks_delivered_by(m, pair)))
                      for m in routed if (again := self.resubmitted_unnotified(m, pair))]
        if twice:
            self.predict_duplicates(
                twice, t, f"processed messages (or forks of them) whose discard notifications never reached"
                          f" {pair.shadow}, which takes ownership of its copies ({reason.value}) and resubmits them"
                          " on its own")
        # The others (2010, no alternate route) stay in the shadow queue with the unprocessed ones: released
        # by their discard notification, resubmitted with the rest when the primary returns as a new route.
        for m in will_resubmit:
            self.close(m, t, self.resubmitted_result(m))
        unrouted = [m for m in held if m not in routed]
        # A 2010 shadow is the previous hop: it resubmits over an alternate route ("Los mensajes reenviados llegan
        # a otro servidor Transporte perimetral", 002), not to the failed primary's own next hop.
        previous_hop = _EXCHANGE_2010 in (self.mode_of(pair.shadow), self.mode_of(s.primary))
        # Else the primary's queue is gone already, but what it delivered before it failed may come yet: known by
        # its database id, the record is kept for that (`promoted_from_a_gone_queue`).
        remember = reason is CommandReason.PRIMARY_HEARTBEAT_TIMEOUT or s.queue_db_id is not None
        for m in routed:
            routes = self.pending_routes(m)
            for ref, next_hop, recipients in routes:
                self.out.commands.append(RedeliveryCommand(
                    command_id=stable_id("command", pair.shadow, s.primary, ref.internal_id, ref.fork_id, reason.value, t),
                    holder=pair.shadow, primary_server=s.primary, message=ref, next_hop=None if previous_hop else next_hop,
                    reason=reason, decided_at_ms=t, recipients=recipients,
                ))
            if remember:
                # Should the primary return with its queue, it delivers what was pending: those
                # recipients get it twice, and only those.
                everyone = any(not rc for ref, _, rc in routes if ref.internal_id == m.ref.internal_id)
                again = {a.lower() for ref, _, rc in routes if ref.internal_id == m.ref.internal_id for a in rc}
                recipients = m.recipients if everyone else tuple(r for r in m.recipients if r.address.lower() in again)
                if everyone or recipients:
                    self.remember_promoted(m, pair.shadow, t, self.copy_db(m, pair), recipients, reported)
            for ref, _, _ in routes:  # pending side-effect messages are the new owner's now too
                if ref.internal_id != m.ref.internal_id and (child := s.messages.get(ref.internal_id)) is not None:
                    if remember:
                        self.remember_promoted(child, pair.shadow, t, self.copy_db(m, pair), reported=reported)
                    self.close(child, t, "promoted")
            self.close(m, t, "promoted")
        if routed or expired or refused:
            alert_type = (AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED if reason is CommandReason.PRIMARY_HEARTBEAT_TIMEOUT
                          else AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED)
            why = {
                CommandReason.PRIMARY_HEARTBEAT_TIMEOUT: f"{pair.shadow} has had no answer from {s.primary} since"
                                                         f" {_iso(pair.last_contact_ms)}",
                CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED: f"{s.primary} came back with a new queue database",
                CommandReason.PRIMARY_RETURNED_AS_NEW_ROUTE: f"{s.primary} came back with a new queue database"
                                                             " (a new route)",
            }[reason]
            late = (f"; {len(expired)} of them had expired in {s.primary}'s queue, whose senders had a non-delivery"
                    " report: their recipients get them now" if expired else "")
            if refused:
                late += (f"; {len(refused)} of them had forks that failed for good, whose senders had a non-delivery"
                         " report for those recipients: they get them now")
            promoted = routed + expired + refused
            self.alert(alert_type, Severity.WARNING, [s.primary, pair.shadow], promoted, t,
                       f"{why}: {pair.shadow} promotes {len(promoted)} shadow message(s) and resubmits"
                       f" them{late}")
        if unrouted:
            self.alert(AlertType.HELD_NO_ALTERNATE_ROUTE, Severity.WARNING, [s.primary, pair.shadow], unrouted, t,
                       f"{s.primary} is declared failed, but {pair.shadow} has no alternate route for"
                       f" {len(unrouted)} message(s): they stay in its shadow queue until {s.primary} returns")
        if pair.shadow in s.pairs:
            self.schedule_pair(pair)

    def remember_promoted(self, m: Message, holder: str, t: int, primary_db_id: str | None,
                          recipients: tuple[Recipient, ...] | None = None, reported: bool = False) -> None:
        """Kept until the message would expire from the primary's queue (receipt + MessageExpirationTimeout):
        back with that queue later, the primary expires it instead of delivering it. `reported`: the shadow's own
        ShadowPromoted said when it resubmitted."""
        s = self.s
        expires = m.received_ms + self.primary_timing.expiration_ms
        if expires <= t:
            return
        record = Promoted(m.ref.whole(), holder, m.recipients if recipients is None else recipients,
                          primary_db_id or s.queue_db_id, t, reported=reported)
        s.promoted[m.ref.internal_id] = record
        s.deadlines.set(DeadlineKind.FORGET_PROMOTED, m.ref.internal_id, expires)
        if s.queue_db_id is not None and record.primary_db_id != s.queue_db_id:
            self.promoted_from_a_gone_queue(m.ref.internal_id, t)

    def promoted_from_a_gone_queue(self, internal_id: str, t: int) -> None:
        """The primary is up with another queue database than the promoted message's: that queue is gone and
        nothing of it is delivered from now on. But its deliveries from it before it failed may still come,
        stamped by a clock up to the clock-skew allowance ahead of the one that showed the new database (hunt
        seed 1440): those arrive twice. The record is kept that long, no longer."""
        until = t + self.config.clock_skew_allowance_ms
        due = self.s.deadlines.get(DeadlineKind.FORGET_PROMOTED, internal_id)
        if until <= t:
            self.forget_promoted(internal_id)
        elif due is None or until < due:
            self.s.deadlines.set(DeadlineKind.FORGET_PROMOTED, internal_id, until)

    def predict_duplicates(self, records: list[Promoted], t: int, why: str) -> None:
        if not records:
            return
        s = self.s
        tracked = self.config.duplicate_tracking_ms
        messages, late = [], 0
        for r in sorted(records, key=lambda r: r.ref.internal_id):
            # Mailbox users see the second copy only when their store's duplicate detection forgot the first (004).
            # A shadow resubmits at its first query after the span, up to a heartbeat after the twin's deadline: the
            # gap counts from that latest time, so that only mailbox users who will see it are named (from the time
            # the shadow said it resubmitted, when it did).
            resubmitted = r.promoted_ms + (0 if r.reported else self.heartbeat_of(r.holder))
            firsts = r.first_delivered_ms or (resubmitted,) * len(r.recipients)
            forgot = [t - first > tracked for first in firsts]
            seen = tuple(x.address for x, gone in zip(r.recipients, forgot) if gone or not x.internal)
            late += any(gone and x.internal for x, gone in zip(r.recipients, forgot))
            messages.append(AlertMessage(r.ref, seen))
        listed = sum(1 for m in messages if m.recipients)
        if late:
            who = (f"the listed recipients ({listed} message(s)) may receive them twice: those outside the"
                   f" organisation, and the mailbox users of the {late} message(s) delivered again more than"
                   f" {exchange_span(timedelta(milliseconds=tracked))} after the first copy, when their duplicate"
                   f" detection (Track Duplicates) no longer knows it")
        elif listed:
            who = (f"mailbox users see none (duplicate detection), but the listed recipients outside the organisation"
                   f" ({listed} message(s)) may receive them twice")
        else:
            who = "mailbox users see none (duplicate detection) and no recipient is outside the organisation"
        self.out.alerts.append(Alert(
            alert_id=stable_id("alert", AlertType.DUPLICATE_DELIVERY_EXPECTED.value, s.primary, t,
                               *(m.message.internal_id for m in messages)),
            type=AlertType.DUPLICATE_DELIVERY_EXPECTED, severity=Severity.WARNING,
            servers=(s.primary, *sorted({r.holder for r in records} - {s.primary})), messages=tuple(messages),
            reason=f"{s.primary} {why}: {len(messages)} message(s) resubmitted by their shadows will be"
                   f" delivered twice; {who}",
            decided_at_ms=t,
        ))
        for r in records:
            self.forget_promoted(r.ref.internal_id)

    def forget_promoted(self, internal_id: str) -> None:
        self.s.promoted.pop(internal_id, None)
        self.s.deadlines.clear(DeadlineKind.FORGET_PROMOTED, internal_id)

    # ---- deadlines --------------------------------------------------------------------

    def schedule_pair(self, pair: Pair) -> None:
        s, key = self.s, pair.shadow
        deadlines = s.deadlines
        by_kind = deadlines.by_kind
        if not pair.held and not pair.pending_discards:
            s.pairs.pop(key, None)
            for kind in _PAIR_KINDS:
                deadlines.clear(kind, key)
            if pair.last_heartbeat_ms is not None:
                self.remember_query(key, pair.last_heartbeat_ms)
            return
        promotion, silence, auto_discard, heartbeat = self.spans.get(key) or self.spans_of(key)
        # Called for every copy made and released: a deadline not there is not cleared again, and the two set for
        # every copy are set here, not by Deadlines.set (the same steps, without two calls: the deadline moves later
        # with each copy, and a later time needs no heap entry).
        if pair.held and pair.primary_failed_ms is None and not pair.awaiting_shadow:
            due = pair.last_contact_ms + promotion
            started = s.primary_started_ms
            if started is not None and started + heartbeat > due:
                due = self.promotion_due(pair)
            # Never in the past: a span that ran out while nobody could act is decided now.
            if due < s.clock_ms:
                due = s.clock_ms
            promote = by_kind[_PROMOTE]
            old = promote.get(key)
            if old is None or due < old:
                deadlines.set(_PROMOTE, key, due)
            else:
                promote[key] = due
        elif key in by_kind[_PROMOTE]:
            deadlines.clear(_PROMOTE, key)
        if pair.held and not pair.silent_alerted and self.config.shadow_silence_heartbeats > 0:
            since = pair.last_query_ms if pair.heartbeats else self.silent_from(pair)  # no call on the hot path
            due, silent = since + silence, by_kind[_SHADOW_SILENT]
            old = silent.get(key)
            if old is None or due < old:
                deadlines.set(_SHADOW_SILENT, key, due)
            else:
                silent[key] = due
        elif key in by_kind[_SHADOW_SILENT]:
            deadlines.clear(_SHADOW_SILENT, key)
        if pair.pending_discards:
            # A notification queued after the interval ran out is deleted at once, not at a time before it was queued.
            due = self.last_reached_ms(pair) + auto_discard
            deadlines.set(_AUTO_DISCARD, key, due if due > s.clock_ms else s.clock_ms)
        elif key in by_kind[_AUTO_DISCARD]:
            deadlines.clear(_AUTO_DISCARD, key)

    def promotion_due(self, pair: Pair) -> int:
        """When the shadow promotes: ShadowResubmitTimeSpan after its last contact, and not before a heartbeat after
        the primary's latest NodeStarted: back before the span ran out, it is reached by the shadow's next heartbeat,
        at most one away. Whatever call schedules the pair again (a delivery of the primary's since: hunt seed 3726)."""
        promotion, _, _, heartbeat = self.spans.get(pair.shadow) or self.spans_of(pair.shadow)
        due = pair.last_contact_ms + promotion
        started = self.s.primary_started_ms
        if started is not None and started + heartbeat > due and pair.heartbeats and not self.shadow_silent(pair, started):
            return started + heartbeat
        return due

    def remember_query(self, shadow: str, t: int) -> None:
        """A discard query of `shadow` at `t` while it holds nothing for the primary (its pair emptied then, or
        before): the group remembers its last one (`queried_by`), so that a copy it stores next starts a pair with
        heartbeats, not one whose shadow's life is inferred from its lines (hunt seed 2203), nor one whose query looks
        overdue. Forgotten a silence span after that query, as a pair that held copies would take the shadow to be
        down then: a copy after it starts afresh."""
        s = self.s
        if t <= s.queried_by.get(shadow, t - 1):
            return  # a later one is remembered already
        until = t + self.silence_span(shadow)
        if until > s.clock_ms:
            s.queried_by[shadow] = t
            s.deadlines.set(DeadlineKind.FORGET_QUERIES, shadow, until)

    def querying_again(self, pair: Pair) -> None:
        """A new pair of a shadow remembered sending discard queries (`remember_query`): it has heartbeats, and
        its query due a heartbeat after the last one counts (`query_overdue`): a shadow that stores a copy and dies
        before it queries again promotes nothing."""
        last = self.s.queried_by.pop(pair.shadow, None)
        if last is not None:
            self.s.deadlines.clear(DeadlineKind.FORGET_QUERIES, pair.shadow)
            pair.heartbeats, pair.last_heartbeat_ms = True, last

    def fire_forget_queries(self, shadow: str, at_ms: int) -> None:
        self.s.queried_by.pop(shadow, None)

    @staticmethod
    def last_reached_ms(pair: Pair) -> int:
        """The shadow's last query that reached the primary: a failed one did not, nor a copy the primary made on
        it (without heartbeats, its life); none answered yet, its first copy."""
        if not pair.heartbeats:
            return pair.last_query_ms
        if pair.last_answered_ms is not None:
            return pair.last_answered_ms
        if pair.first_copy_ms is not None:
            return pair.first_copy_ms
        return min(pair.last_contact_ms, pair.last_query_ms)  # a snapshot before format 16: as it was read then

    def fire_promote(self, shadow: str, at_ms: int) -> None:
        s = self.s
        pair = s.pairs.get(shadow)
        if pair is None or not pair.held:
            return
        silence = self.silence_span(shadow)
        silent = silence > 0 and at_ms - self.silent_from(pair) >= silence
        heard_until = at_ms  # the end of what the feed shows of the servers
        if silent and any(i in s.messages and s.messages[i].primary_done_ms is None for i in pair.held) \
                and self.feed_stopped(at_ms):
            heard_until = max(s.last_seen.values())
            if heard_until < pair.last_query_ms + silence or not pair.heartbeats:
                # Every server fell silent at once: the feed stopped, not the servers. Exchange goes
                # on without the twin: the shadow promotes what it holds unprocessed at the deadline,
                # as forecast here (what the twin saw processed waits for its discard notification).
                self.promote(pair, at_ms, CommandReason.PRIMARY_HEARTBEAT_TIMEOUT, forecast=True)
                return
            # Its queries stopped a silence span before the feed did (taken to be down then, hunt seed
            # 3348): the feed's stop since changes nothing of that. A shadow whose life is inferred from
            # its lines (no queries) may have been idle, not down (hunt seed 3669): it promotes.
        if silent:
            # The shadow itself is silent: it cannot promote anything. Only if the primary is
            # silent too (no event of its own within the same silence span, while the feed shows the
            # servers) are its unprocessed messages at risk; otherwise the primary still has them.
            s.deadlines.clear(_PROMOTE, shadow)
            pair.awaiting_shadow = True
            alive = self.primary_last_alive()
            if alive is None or heard_until - alive >= silence:
                self.put_at_risk(pair, at_ms, "has been unreachable for the resubmit span")
            return
        if self.query_overdue(pair, at_ms) or self.none_failed_since_contact(pair):
            # Its query due by now never came: a shadow that stopped querying resubmits nothing (a
            # span shorter than the silence span runs out first). Nor does one none of whose queries since their
            # last contact failed (a span shorter than its heartbeat): it has not found the primary unreachable.
            # Its next query decides (a failure promotes at once, an answer is contact), or the silence span.
            s.deadlines.set(_PROMOTE, shadow, pair.last_query_ms + silence)
            return
        self.promote(pair, at_ms, CommandReason.PRIMARY_HEARTBEAT_TIMEOUT)

    def primary_last_alive(self) -> int | None:
        """The primary's latest sign of life: its own latest event, or a discard query of any of its shadows that it
        answered ("The SMTP communication between the shadow server and the primary server is used as the heartbeat
        that determines the availability of the servers", 003): a primary that answers another shadow is up, with
        its queue, however quiet its own lines."""
        alive = self.s.primary_seen_ms
        for pair in self.s.pairs.values():
            if pair.last_answered_ms is not None and (alive is None or pair.last_answered_ms > alive):
                alive = pair.last_answered_ms
        return alive

    def put_at_risk(self, pair: Pair, t: int, primary_state: str, current_db: str | None = None) -> None:
        """The primary cannot deliver the unprocessed messages whose copies `pair`'s silent shadow holds
        (those made with another database than `current_db`, when given): no server can."""
        s = self.s
        at_risk = [m for i in sorted(pair.held) if (m := s.messages.get(i)) is not None and not m.at_risk
                   and m.primary_done_ms is None
                   and (current_db is None or self.copy_db(m, pair) not in (None, current_db))]
        for m in at_risk:
            m.at_risk = True
        if at_risk:
            self.alert(AlertType.MESSAGE_AT_RISK, Severity.CRITICAL, [s.primary, pair.shadow], at_risk, t,
                       f"{s.primary} {primary_state} and {pair.shadow}, which holds the shadow copies, has been"
                       f" silent since {_iso(pair.last_query_ms)}: {len(at_risk)} message(s) have no server able"
                       " to deliver them")

    def fire_shadow_silent(self, shadow: str, at_ms: int) -> None:
        s = self.s
        pair = s.pairs.get(shadow)
        if pair is None or not pair.held:
            return
        due = self.feed_verdict_due(pair, at_ms)
        if due is not None:
            s.deadlines.set(_SHADOW_SILENT, shadow, due)
            return
        pair.silent_alerted = True
        # A copy of what the primary processed only awaits its discard notification: nothing is unprotected.
        held = [s.messages[i] for i in sorted(pair.held) if i in s.messages and s.messages[i].primary_done_ms is None]
        if held and not self.feed_stopped(at_ms):
            queried = pair.last_heartbeat_ms
            since = _iso(pair.last_query_ms) if queried is None or queried >= pair.last_query_ms else \
                f"{_iso(queried)} (its last sign of life towards it, a copy or a line, at {_iso(pair.last_query_ms)})"
            self.alert(AlertType.SHADOW_SERVER_UNREACHABLE, Severity.WARNING, [shadow, s.primary], held, at_ms,
                       f"{shadow} has not queried {s.primary} since {since}: its shadow copies"
                       f" of {len(held)} message(s) may be gone; they are not redundantly protected")
        if pair.db_change_pending:  # the primary came back with a new database before its query was missed
            self.put_at_risk(pair, at_ms, "came back with a new, empty queue database", current_db=s.queue_db_id)
        self.schedule_pair(pair)

    def fire_auto_discard(self, shadow: str, at_ms: int) -> None:
        s = self.s
        pair = s.pairs.get(shadow)
        if pair is None or not pair.pending_discards:
            return
        dropped = [s.messages[i] for i in sorted(pair.pending_discards) if i in s.messages]
        self.alert(AlertType.DISCARD_EVENTS_DROPPED, Severity.INFO, [s.primary, shadow], dropped, at_ms,
                   f"{shadow} has not queried {s.primary} for ShadowMessageAutoDiscardInterval: {s.primary} deletes"
                   f" the discard notifications it kept for it; {len(dropped)} shadow copies stay on {shadow} until"
                   " they expire")
        pair.pending_discards.clear()  # the copies stay held, unacknowledged, until they expire (fire_expire)
        if shadow in s.pairs:
            self.schedule_pair(pair)

    def fire_expire(self, internal_id: str, at_ms: int) -> None:
        s = self.s
        m = s.messages.get(internal_id)
        if m is None:
            return
        pair = s.pairs.get(m.shadow_server) if m.shadow_server is not None else None
        if m.primary_done_ms is None and self.parent_shadowed(m):
            due = s.deadlines.get(_EXPIRE, m.parent)
            if due is not None and due >= at_ms:  # its parent's copy is kept longer: it shares its fate
                s.deadlines.set(_EXPIRE, internal_id, due + 1)
                return
        if m.primary_done_ms is None and not m.at_risk and (pair is None or pair.primary_failed_ms is None):
            queue_end = m.received_ms + self.primary_timing.expiration_ms
            if at_ms < queue_end:  # its copy's hold ended first: the primary's queue keeps it until its own expiry
                if pair is not None and m.shadow_held and at_ms >= self.copy_expires_ms(m):
                    self.copy_expired_first(m, pair, at_ms)
                s.deadlines.set(_EXPIRE, internal_id, queue_end)
                return
            alive = self.primary_last_alive() or 0  # (an answer to another shadow: the primary is up, 003)
            if pair is not None:
                unanswered = pair.last_query_ms - max(alive, pair.last_contact_ms)
                silence = self.silence_span(pair.shadow)
            else:  # no copy of it is held: a query of any shadow that failed to reach the primary since its last answer
                unanswered = (s.unreachable_ms or 0) - alive
                silence = self.silence_span(s.primary)
            if silence > 0 and unanswered > silence:
                # Its shadow's queries go unanswered (it shows life, the primary none): a server that is down
                # expires nothing. Its return, or its shadow's promotion, decides (looked at a silence span later).
                s.deadlines.set(_EXPIRE, internal_id, at_ms + silence)
                return
            # Still in a primary that is not known to have failed, past MessageExpirationTimeout.
            self.expired_in_queue(m, at_ms)
            return
        retention_end = self.copy_expires_ms(m)
        if at_ms < retention_end:  # processed (or in a failed primary): Safety Net's hold comes next
            s.deadlines.set(_EXPIRE, internal_id, retention_end)
            return
        if m.at_risk or (m.primary_done_ms is None and m.shadow_held and pair is not None
                         and pair.primary_failed_ms is not None):
            # at risk, or held for want of an alternate route (2010) while its primary is still declared failed
            why = "was at risk" if m.at_risk else f"was held by {m.shadow_server} for want of an alternate route"
            self.alert(AlertType.MESSAGE_LOST, Severity.CRITICAL, [self.s.primary, m.shadow_server or ""], [m], at_ms,
                       f"the message {why} and no server delivered it before SafetyNetHoldTime +"
                       " MessageExpirationTimeout: it is lost")
            self.close(m, at_ms, "lost")
            return
        if m.shadow_held:
            self.alert(AlertType.SHADOW_EXPIRED, Severity.INFO, [self.s.primary, m.shadow_server], [m], at_ms,
                       "no discard notification arrived within SafetyNetHoldTime + MessageExpirationTimeout:"
                       " the shadow copy expires unacknowledged")
        self.close(m, at_ms, "expired")

    def copy_expired_first(self, m: Message, pair: Pair, t: int) -> None:
        """The copy of an unprocessed message expired from its shadow (its SafetyNetHoldTime +
        MessageExpirationTimeout) before the message does in the primary's queue: the shadow holds nothing
        of it to promote, and the primary's queue has the only copy."""
        m.redundancy = Redundancy.LOST
        self.alert(AlertType.SHADOW_EXPIRED, Severity.WARNING, [self.s.primary, pair.shadow], [m], t,
                   f"{pair.shadow}'s shadow copy expired unacknowledged after its SafetyNetHoldTime +"
                   f" MessageExpirationTimeout, before the message expires in {self.s.primary}'s queue: it is no"
                   " longer redundantly persisted")
        self.unhold(pair, m.ref.internal_id)
        self.schedule_pair(pair)

    def fire_ack_delay(self, internal_id: str, at_ms: int) -> None:
        m = self.s.messages.get(internal_id)
        if m is None or m.primary_done_ms is not None or m.decided and m.redundancy is not _PENDING:
            return
        m.decided, m.redundancy = True, Redundancy.NOT_REDUNDANT
        self.alert(AlertType.NOT_REDUNDANT, Severity.WARNING, [self.s.primary], [m], at_ms,
                   f"the sender does not support shadow redundancy and the message had not reached all its next hops"
                   f" within MaxAcknowledgementDelay: {self.s.primary} answered 250 anyway (best effort, not redundant)")

    def fire_forget_promoted(self, internal_id: str, at_ms: int) -> None:
        self.s.promoted.pop(internal_id, None)

    def fire_forget_closed(self, bucket: str, at_ms: int) -> None:
        """Forget the messages closed a clock-skew allowance before `at_ms` or earlier. They are in
        the order they were closed, which is the order of their closing times but for a message a
        slower clock's event closed late: it waits for the ones closed before it (a bucket and the
        allowance after the event time the group had reached at most)."""
        self.closed_bucket_end = 0  # the deadline that closings were counting on has fired
        until = at_ms - self.config.clock_skew_allowance_ms
        forget_front(self.s.closed, until)
        early = self.s.discarded_early
        while early:  # in the order discarded, as `closed`
            first = next(iter(early))
            if early[first][1] > until:
                break
            del early[first]
        handled = self.s.handled_early
        while handled:  # in the order added, as `closed`
            first = next(iter(handled))
            if handled[first][0].event_time_ms > until:
                break
            del handled[first]

    def fire_forget_seen(self, bucket: str, at_ms: int) -> None:
        s = self.s
        for event_id in s.seen_buckets.pop(int(bucket), ()):
            s.seen_ids.pop(event_id, None)

    def fire_same_site_report(self, shadow: str, at_ms: int) -> None:
        s = self.s
        refs = sorted(s.same_site.pop(shadow, []), key=lambda r: r.internal_id)  # copies made at one time: any order
        if not refs:
            return
        fact = s.nodes.get(s.primary)
        site = fact.ad_site if fact is not None and fact.ad_site else "its own AD site"
        messages = tuple(AlertMessage(r) for r in refs)
        self.out.alerts.append(Alert(
            alert_id=stable_id("alert", AlertType.SHADOW_IN_SAME_SITE.value, s.primary, shadow, site, at_ms,
                               *(r.internal_id for r in refs)),
            type=AlertType.SHADOW_IN_SAME_SITE, severity=Severity.INFO, servers=(s.primary, shadow),
            messages=messages,
            reason=f"{s.primary}'s DAG spans sites, but the only shadow copy of {len(refs)} message(s) is on {shadow},"
                   f" in the same site as {s.primary} ({site}): a failure of that site loses both copies",
            decided_at_ms=at_ms,
        ))

    def feed_verdict_due(self, pair: Pair, at_ms: int) -> int | None:
        """When the shadow fell silent with every other server (none has a sign of life a liveness
        bucket, the facts' grain, after its silence began: `silent_from`), when the silent-feed rule can
        tell a stopped feed from a silent shadow, if that is still ahead of `at_ms`; else None."""
        last = self.s.last_seen
        span = self.config.shadow_silence_heartbeats * self.config.timing("").heartbeat_ms
        if not last or span <= 0:
            return None
        latest = max(last.values())
        due = latest + span
        return due if at_ms < due and latest < self.silent_from(pair) + self.model.liveness_bucket_ms else None

    def feed_stopped(self, at_ms: int) -> bool:
        """Whether every server known from the liveness facts has been silent for the silence span
        before `at_ms`: then the event feed stopped, not the servers. Reported once per silence."""
        s = self.s
        last = s.last_seen
        span = self.config.shadow_silence_heartbeats * self.config.timing("").heartbeat_ms
        if not last or span <= 0:
            return False
        latest = max(last.values())
        if at_ms - latest < span:
            return False
        if s.feed_stopped_ms != latest:
            s.feed_stopped_ms = latest
            servers = sorted(last)
            self.out.alerts.append(Alert(
                alert_id=stable_id("alert", AlertType.EVENTS_STOPPED.value, latest, *(f"{n}={last[n]}" for n in servers)),
                type=AlertType.EVENTS_STOPPED, severity=Severity.CRITICAL, servers=tuple(servers),
                reason="no event from any server of the topology since " + _iso(latest) + ": the event feed stopped."
                       " Decisions go on as Exchange would take them. Last event per server: "
                       + ", ".join(f"{n} {_iso(last[n])}" for n in servers),
                decided_at_ms=latest + span,
            ))
        return True

    # ---- helpers ----------------------------------------------------------------------

    def mode_of(self, node: str) -> NodeMode:
        """The server's own word (its NodeStarted, wherever published), else its configuration."""
        if node == self.s.primary and self.s.mode is not None:
            return self.s.mode
        fact = self.s.nodes.get(node)
        if fact is not None and fact.mode is not _MODE_UNKNOWN:
            return fact.mode
        return self.config.for_node(node).mode

    def message(self, ref: MessageRef, t: int) -> Message | None:
        """The message's state, created (with its expiry deadline) on first sight; None for a
        message the twin closed lately (a slower clock's late word about it)."""
        s = self.s
        m = s.messages.get(ref.internal_id)
        if m is None:
            if ref.internal_id in s.closed:
                return None
            m = s.messages[ref.internal_id] = Message(ref.whole(), t)
            # First the queue's MessageExpirationTimeout; then (fire_expire) Safety Net's hold.
            s.deadlines.set(_EXPIRE, ref.internal_id, t + self.primary_timing.expiration_ms)
        return m

    def known(self, e: ev.Event) -> Message | None:
        """The message an event on the primary is about, if the twin tracks it."""
        ref = e.message
        if ref is None:
            return None
        s = self.s
        if s.deadlines.by_kind[_SETTLE_RESTART]:
            restart.mentioned(self, e)
        if s.unreachable_ms is not None and e.event_time_ms > s.unreachable_ms and e.node == s.primary \
                and restart.held_before(self, ref.internal_id, s.unreachable_ms):
            # It handles a message of the queue it had when that query failed: it came back with that
            # database, and a new one learned later came with a later restart.
            s.unreachable_ms = None
        m = s.messages.get(ref.internal_id)
        if m is not None and not m.decided and e.node == s.primary and not isinstance(e, _SHADOW_ATTEMPTS) \
                and not isinstance(e, _ANSWERS_TO_SENDER) and s.deadlines.get(_NO_SHADOW, ref.internal_id) is not None:
            # the primary went on with the message: no other attempt came, and it had accepted it (a 451 ends it)
            self.fire_no_shadow(ref.internal_id, e.event_time_ms, accepted=True)
            m = s.messages.get(ref.internal_id)
        if m is not None and m.at_risk and e.node == s.primary:
            pair = s.pairs.get(m.shadow_server)
            if (self.copy_db(m, pair) if pair is not None else m.primary_db) in (None, s.queue_db_id):
                # It handles the message (sends or defers it): the message is in its queue, the database of its copy,
                # and expires there (a new database learnt since has none of it)
                self.in_queue_again(m, e.event_time_ms)
        if m is None and isinstance(e, _DELIVERY_EVENTS) and ref.internal_id in s.promoted:
            record = s.promoted[ref.internal_id]
            self.predict_duplicates([record], e.event_time_ms, "delivered a message its shadow had already resubmitted")
        elif m is None and e.node == s.primary:
            self.handled_before_the_receipt(e)
        return m

    def handled_before_the_receipt(self, e: ev.Event) -> None:
        """The primary's event about a message it has not received yet by its own clock: that clock was set back
        between the receipt, still to come, and this event (hunt seed 8566: ex02 set back 60 s, a delivery stamped 57 s
        before its receipt). Remembered for the clock-skew allowance (`handled_early`), the message's MessageReceived
        applies it (`message_received`). Not a message closed lately (a slower clock's late word about it)."""
        s, key = self.s, e.message.internal_id
        if self.config.clock_skew_allowance_ms > 0 and key not in s.closed:
            s.handled_early.setdefault(key, []).append(e)
            self.forget_closed_by(e.event_time_ms)

    def unhold(self, pair: Pair, internal_id: str) -> None:
        pair.held.discard(internal_id)
        pair.pending_discards.discard(internal_id)

    def close(self, m: Message, t: int, result: str, schedule_pair: bool = True) -> None:
        """Stop tracking a message: its state and deadlines go, and its links are undone (its shadow's
        pair is scheduled anew unless `schedule_pair` is false: the caller does it)."""
        s = self.s
        internal_id = m.ref.internal_id
        if s.messages.pop(internal_id, None) is None:
            return
        s.deadlines.clear(_EXPIRE, internal_id)
        if internal_id in s.deadlines.by_kind[_ACK_DELAY]:  # only a 2010 primary's for some senders
            s.deadlines.clear(_ACK_DELAY, internal_id)
        if internal_id in s.deadlines.by_kind[_NO_SHADOW]:  # only after failed attempts whose site nothing says
            s.deadlines.clear(_NO_SHADOW, internal_id)
        if m.shadow_server is not None and (pair := s.pairs.get(m.shadow_server)) is not None:
            self.unhold(pair, internal_id)
            if schedule_pair:
                self.schedule_pair(pair)
        if m.parent is not None and (parent := s.messages.get(m.parent)) is not None:
            if parent.side_effects:
                parent.side_effects.discard(internal_id)
            self.maybe_primary_done(parent, t)
        for child_id in list(m.side_effects) if m.side_effects else ():  # most have none: no list made
            if (child := s.messages.get(child_id)) is not None:
                child.parent = None
                if result == "lost" and child.primary_done_ms is None:  # it had no other copy
                    self.close(child, t, "lost")
        self.remember_closed(internal_id, t)
        processed = m.primary_done_ms if m.primary_done_ms is not None else t
        if m.expired_ms is not None and result == "delivered":  # processed by its expiry (an NDR), copy released since
            result = "expired"
        self.out.outcomes.append(Outcome(m.ref, m.received_ms, processed, t, result,
                                         m.redundancy is _REDUNDANT))

    def remember_closed(self, internal_id: str, t: int) -> None:
        """Keep a closed message's id for the clock-skew allowance: a slower clock's word about it opens nothing."""
        if self.config.clock_skew_allowance_ms > 0:
            self.s.closed[internal_id] = t
            self.forget_closed_by(t)

    def forget_closed_by(self, t: int) -> None:
        """What is remembered at `t` for the clock-skew allowance is forgotten after it: one deadline per bucket of
        closing times (fire_forget_closed)."""
        if t >= self.closed_bucket_end:
            bucket = t // SEEN_BUCKET_MS
            self.closed_bucket_end = (bucket + 1) * SEEN_BUCKET_MS
            self.s.deadlines.set(DeadlineKind.FORGET_CLOSED, str(bucket),
                                 self.closed_bucket_end + self.config.clock_skew_allowance_ms)

    def alert(self, alert_type: AlertType, severity: Severity, servers: list[str], messages: list[Message],
              t: int, reason: str) -> None:
        refs = tuple(AlertMessage(m.ref) for m in messages)
        self.out.alerts.append(Alert(
            alert_id=stable_id("alert", alert_type.value, self.s.primary, t, *servers,
                               *(m.ref.internal_id for m in messages)),
            type=alert_type, severity=severity, servers=tuple(dict.fromkeys(x for x in servers if x)),
            messages=refs, reason=reason, decided_at_ms=t,
        ))


def _iso(ms_: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms_ / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


_FIRE_BY_KIND: dict[DeadlineKind, Callable[[_Transition, str, int], None]] = {
    DeadlineKind.ACK_DELAY: _Transition.fire_ack_delay,
    DeadlineKind.PROMOTE: liveness.promote_when_silent(_Transition.fire_promote),
    DeadlineKind.SHADOW_SILENT: liveness.silent_when_judged(_Transition.fire_shadow_silent),
    DeadlineKind.AUTO_DISCARD: _Transition.fire_auto_discard,
    DeadlineKind.EXPIRE: _Transition.fire_expire,
    DeadlineKind.FORGET_PROMOTED: _Transition.fire_forget_promoted,
    DeadlineKind.FORGET_CLOSED: _Transition.fire_forget_closed,
    DeadlineKind.SAME_SITE_REPORT: _Transition.fire_same_site_report,
    DeadlineKind.FORGET_SEEN: _Transition.fire_forget_seen,
    DeadlineKind.SETTLE_RESTART: restart.fire_settle,
    DeadlineKind.NO_SHADOW: _Transition.fire_no_shadow,
    DeadlineKind.FORGET_QUERIES: _Transition.fire_forget_queries,
}
_FIRE = [_FIRE_BY_KIND.get(kind) for kind in range(max(DeadlineKind) + 1)]  # indexed by the kind
