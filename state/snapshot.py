"""Snapshots of a group's state as bytes, for an engine to store between calls.

Pickling the state objects directly costs about 60 us per message in flight (slotted
dataclasses are pickled attribute by attribute through Python code); 100,000 messages made
every micro-batch spend seconds there. A snapshot first flattens the state into tuples of
plain values, which pickle handles in C, and rebuilds the objects on load: about ten times
faster. `FORMAT` changes whenever the layout below does; a snapshot of another format is
refused rather than misread (formats 3 to 19 are still read, a checkpoint may hold them: 19 has no fork's
`served_late`, then none (a recipient a fork served after its first acknowledgement is dated by that, as before); 18
has no
`handled_early`, then empty (a primary's event stamped before its message's receipt, taken in before, was ignored, as
before; each such event is pickled as it is: they are few); 17 has no
`db_reported_ms`, then unknown (a shadow's report naming the queue database another shadow's report showed replaced
is taken for another restart, as before); 16 has no fork's
`done_ms`, then unknown (a duplicate forecast dates its recipients' first copy as before: when the whole message
was processed, or, for a processed fork of one still in the queue, the shadow's last answer); 15 has no pair's
`first_copy_ms`, then unknown (with no answered query yet, ShadowMessageAutoDiscardInterval counts from the pair's
last copy or query, whichever came first, as before); 14 has no server's
`replaced_db_id` in `nodes`, then unknown (a shadow's query naming the queue database its NodeStarted replaced is taken
for another restart, as before); 13 has no `replaced_db_id`,
then unknown (an answer naming the database the primary's NodeStarted replaced, after a failed query, is taken for a
restart, as before); 12 has no `queried_by`,
then empty (a shadow whose pair emptied before stores its next copy in a pair without heartbeats until its next
query, as before); 11 has no
`discarded_early`, then empty (a discard stamped before its copy, taken in before, closed the message); 10 has no fork's
`waiting`: a fork named by its id, acknowledged while recipients no pending fork holds still wait, then waits for
them (`_served_in_part`), nor a message's `stored_ms`, then unknown (0: an answer applied after the copy's report
counts whatever its time, as before); 9 has no
message's `expired_ms`, which is then unknown (a shadow promoting a copy of a message that expired in its
primary's queue is taken to deliver it twice, as before), nor a pair's `last_answered_ms`, then unknown until
the shadow's next answered query (the primary's copies on it count as its queries meanwhile, as before); 8 has no
fork's `notified`, which is then false until the shadow's next answered query (a promotion before it
forecasts the duplicate of a processed fork whose notification came already); 7 has no
pair's `last_heartbeat_ms`, which is then unknown until the shadow's next query; 6 has no
`primary_started_ms`, which is then unknown; 5 is 6 without `unreachable_ms`, and a pair's values
hold after its `shadow_db_id` a count the model no longer keeps (2010's failed queries); 4 is 5
without a message's `primary_db`, which then falls back to its pair's; 3 is 4 without a token).

Each snapshot carries a random token near its start (`token_of` finds it without unpickling
anything), so an engine that keeps the loaded state in memory between calls can tell whether
the stored snapshot is the one it wrote last, and skip loading it (streaming/operator.py).
"""

from __future__ import annotations

import os
import pickle
from operator import attrgetter

from schemas.events import MessageRef, NodeMode, Recipient, SiteLocality
from state.records import (
    NO_FORKS, NO_SIDE_EFFECTS, Deadlines, DeadlineKind, Fork, Message, NodeFact, Pair, PrimaryState, Promoted, Redundancy,
    shared, shared_recipients,
)

FORMAT = 20
# 19: without a fork's `served_late`; 18: without `handled_early`; 17: without `db_reported_ms`; 16: without a fork's `done_ms`; 15: without a pair's `first_copy_ms`; 14: without a node's `replaced_db_id`; 13: without `replaced_db_id`; 12: without `queried_by`; 11: without `discarded_early`; 10: without a fork's `waiting` and a message's `stored_ms`; 9: without a message's `expired_ms` and a pair's `last_answered_ms`; 8: without a fork's `notified`; 7: without a pair's `last_heartbeat_ms`; 6: without `primary_started_ms`; ...
PREVIOUS_FORMATS = (19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3)
TOKEN_MARK = b"shadowtwin.snapshot:"
_TOKEN_SEARCH = 64  # the token follows the format number, first thing in the pickle

# Plain-valued fields, copied as they are; the nested ones are converted one by one below.
# The tests check that flat + nested is every field, so a new field cannot be forgotten.
MESSAGE_FLAT = ("received_ms", "sender_supports_shadow", "shadow_server", "remote_failures", "local_failures",
                "decided", "parent", "primary_done_ms", "shadow_alternate_route", "at_risk", "primary_db", "expired_ms",
                "stored_ms")
MESSAGE_NESTED = ("ref", "recipients", "redundancy", "forks", "side_effects", "shadow_locality")
PAIR_FLAT = ("shadow", "last_contact_ms", "last_query_ms", "primary_db_seen", "shadow_db_id",
             "primary_failed_ms", "silent_alerted", "awaiting_shadow", "db_change_pending", "heartbeats", "contact_via",
             "last_heartbeat_ms", "last_answered_ms", "first_copy_ms")
PAIR_NESTED = ("held", "pending_discards")
_MESSAGE, _PAIR = attrgetter(*MESSAGE_FLAT), attrgetter(*PAIR_FLAT)
_COUNT_BEFORE_6 = PAIR_FLAT.index("shadow_db_id") + 1  # where formats 3 to 5 hold a pair's count


def dump(state: PrimaryState, token: bytes | None = None) -> bytes:
    """The snapshot of `state`, with `token` (default: a new random one; see `token_of`)."""
    messages = [
        (_ref(m.ref), tuple((r.address, r.internal) for r in m.recipients), m.redundancy.value,
         tuple((key, f.next_hop, f.recipients, f.done, f.notified, f.waiting, f.done_ms, f.served_late)
               for key, f in m.forks.items()),
         tuple(m.side_effects),
         _MESSAGE(m), m.shadow_locality.value)
        for m in state.messages.values()
    ]
    pairs = [(_PAIR(p), tuple(p.held), tuple(p.pending_discards)) for p in state.pairs.values()]
    promoted = [(_ref(r.ref), r.holder, tuple((x.address, x.internal) for x in r.recipients), r.primary_db_id,
                 r.promoted_ms, r.reported) for r in state.promoted.values()]
    deadlines = tuple((int(kind), key, at_ms) for kind, key, at_ms in state.deadlines.items())
    header = (FORMAT, TOKEN_MARK + (token if token is not None else os.urandom(16)), state.primary, state.mode.value if state.mode else None, state.queue_db_id,
              state.shadow_redundancy_enabled, state.clock_ms, state.primary_seen_ms, state.feed_stopped_ms,
              state.unreachable_ms, state.primary_started_ms, state.replaced_db_id, state.db_reported_ms)
    closed = tuple(state.closed.items())
    facts = (tuple((n, f.mode.value, f.ad_site, f.dag, f.queue_db_id, f.replaced_db_id)
                   for n, f in state.nodes.items()),
             tuple(state.last_seen.items()),
             tuple((shadow, tuple(_ref(r) for r in refs)) for shadow, refs in state.same_site.items()),
             tuple((bucket, tuple(ids)) for bucket, ids in state.seen_buckets.items()))
    discarded_early = tuple((key, shadow, t) for key, (shadow, t) in state.discarded_early.items())
    queried_by = tuple(state.queried_by.items())
    handled_early = tuple((key, tuple(events)) for key, events in state.handled_early.items())
    return pickle.dumps((header, messages, pairs, promoted, closed, deadlines, facts, discarded_early, queried_by,
                         handled_early), protocol=pickle.HIGHEST_PROTOCOL)


def load(data: bytes) -> PrimaryState:
    loaded = pickle.loads(data)
    header = loaded[0]
    if header[0] not in (FORMAT, *PREVIOUS_FORMATS):
        raise ValueError(f"state snapshot format {header[0]}, this code reads {FORMAT} and"
                         f" {' and '.join(map(str, PREVIOUS_FORMATS))}")
    # `discarded_early` since format 12, `queried_by` since 13, `handled_early` since 19
    _, messages, pairs, promoted, closed, deadlines, facts, *later = loaded
    version = header[0]
    if version != 3:
        header = (version, *header[2:])  # the token is not state
    if version < 6:
        header = (*header, None)  # no `unreachable_ms` before 6
    if version < 7:
        header = (*header, None)  # no `primary_started_ms` before 7: unknown
    if version < 14:
        header = (*header, None)  # no `replaced_db_id` before 14: unknown
    if version < 18:
        header = (*header, None)  # no `db_reported_ms` before 18: unknown
    (_, primary, mode, queue_db_id, enabled, clock_ms, primary_seen_ms, feed_stopped_ms, unreachable_ms,
     primary_started_ms, replaced_db_id, db_reported_ms) = header
    state = PrimaryState(primary=primary, mode=NodeMode(mode) if mode else None, queue_db_id=queue_db_id,
                         shadow_redundancy_enabled=enabled, clock_ms=clock_ms, primary_seen_ms=primary_seen_ms,
                         feed_stopped_ms=feed_stopped_ms, unreachable_ms=unreachable_ms,
                         primary_started_ms=primary_started_ms, replaced_db_id=replaced_db_id,
                         db_reported_ms=db_reported_ms)
    redundancy = {r.value: r for r in Redundancy}
    locality = {x.value: x for x in SiteLocality}
    for ref, recipients, level, forks, side_effects, flat, where in messages:
        message = Message(
            **dict(zip(MESSAGE_FLAT, flat)), ref=MessageRef(*ref),
            recipients=shared_recipients(tuple(Recipient(*r) for r in recipients)),
            redundancy=redundancy[level], side_effects=set(side_effects) if side_effects else NO_SIDE_EFFECTS,
            forks={shared(key): Fork(shared(hop), shared(fork_recipients), *flags)
                   for key, hop, fork_recipients, *flags in forks} if forks
            else NO_FORKS,
            shadow_locality=locality[where],
        )
        if version < 11 and message.forks and message.primary_done_ms is None:
            _served_in_part(message)
        state.messages[message.ref.internal_id] = message
    for flat, held, pending in pairs:
        if version < 6:
            flat = flat[:_COUNT_BEFORE_6] + flat[_COUNT_BEFORE_6 + 1:]
        pair = Pair(**dict(zip(PAIR_FLAT, flat)), held=set(held), pending_discards=set(pending))
        state.pairs[pair.shadow] = pair
    for ref, holder, recipients, db_id, promoted_ms, *reported in promoted:  # `reported` since 17
        record = Promoted(MessageRef(*ref), holder, shared_recipients(tuple(Recipient(*r) for r in recipients)), db_id,
                          promoted_ms, reported=bool(reported and reported[0]))
        state.promoted[record.ref.internal_id] = record
    state.closed = dict(closed)
    discarded_early, queried_by, handled_early = (*later, (), (), ())[:3]
    state.discarded_early = {key: (shadow, t) for key, shadow, t in discarded_early}
    state.queried_by = dict(queried_by)
    state.handled_early = {key: list(events) for key, events in handled_early}
    nodes, last_seen, same_site, seen_buckets = facts
    state.nodes = {n: NodeFact(NodeMode(m), *rest) for n, m, *rest in nodes}  # before 15: no `replaced_db_id`
    state.dag_spans_sites = state.nodes_span_sites()
    state.last_seen = dict(last_seen)
    state.same_site = {shadow: [MessageRef(*r) for r in refs] for shadow, refs in same_site}
    state.seen_buckets = {bucket: list(ids) for bucket, ids in seen_buckets}
    state.seen_ids = {event_id: bucket for bucket, ids in seen_buckets for event_id in ids}
    state.deadlines = Deadlines()
    state.deadlines.load(deadlines)
    return state


def _served_in_part(m: Message) -> None:
    """A snapshot before format 11 kept no fork's `waiting`: a fork named by its id, acknowledged while recipients of
    the message that no pending fork holds still wait, may have been served in part, with them deferred at its next
    hop. The twin cannot tell, so it takes them to wait in it: it brings no discard notification until they are
    served, and a promotion meanwhile forecasts its recipients' duplicate (the forecast errs towards naming one)."""
    covered = {r for f in m.forks.values() if f.done or f.next_hop for r in f.recipients}
    loose = tuple(r.address for r in m.recipients if r.address not in covered)
    if loose:
        for key, fork in m.forks.items():
            if fork.done and fork.next_hop and key != fork.next_hop:
                fork.waiting, fork.notified = loose, False


def token_of(data: bytes) -> bytes | None:
    """The token of a snapshot (with its mark), read without loading it; None for format 3."""
    start = data.find(TOKEN_MARK, 0, _TOKEN_SEARCH)
    return None if start < 0 else data[start:start + len(TOKEN_MARK) + 16]


def _ref(ref: MessageRef) -> tuple:
    return ref.message_id, ref.internal_id, ref.fork_id
