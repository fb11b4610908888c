"""What one group's state says to an operator: a server summary and per-message "where" records.

Plain Python over a `PrimaryState` (state/records.py), used alike by the streaming twin (which
publishes them to the compacted state topic), by `whatif` and by the tests:

    server_summary(state)            # what the primary holds, who holds copies for it, its pairs, deadlines
    message_where(state, id)         # where one message of the primary is (None: the twin holds nothing of it)
    touched_messages(events, output) # the internal ids a call's events and decisions concern
    TopologyView                     # the records folded back into answers: where is X, what does server Y hold

Records are plain JSON-ready dicts keyed `server/<name>` and `message/<primary>/<internal id>`,
the primary's `%` and `/` written `%25` and `%2F`, so that the first `/` after it ends it (server
`a/b` holding `c` and server `a` holding `b/c` are two keys; Windows allows a `%` in a computer
name, never a `/`); a message the twin no longer holds gets `None` (a Kafka tombstone, so
compaction forgets it: the topic holds no more than the state does).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Iterable

import orjson

from schemas.events import Alert, DiscardQueryAnswered, Event, RedeliveryCommand, SideEffectGenerated, SiteLocality
from state.records import DeadlineKind, Fork, Message, PrimaryState, Redundancy

VERSION = 1
SERVER_PREFIX, MESSAGE_PREFIX = "server/", "message/"
# Accepted without a shadow copy, or its copy is gone: a crash of the primary loses it.
_NOT_REDUNDANT = (Redundancy.NOT_REDUNDANT, Redundancy.LOST, Redundancy.DISABLED)
_MESSAGE_DEADLINES = (DeadlineKind.ACK_DELAY, DeadlineKind.NO_SHADOW, DeadlineKind.EXPIRE)
_MESSAGE_KINDS = frozenset((*_MESSAGE_DEADLINES, DeadlineKind.FORGET_PROMOTED))
_PAIR_DEADLINES = (DeadlineKind.PROMOTE, DeadlineKind.SHADOW_SILENT, DeadlineKind.AUTO_DISCARD)
_MESSAGE_DEADLINE_NAMES = tuple((kind, kind.name.lower()) for kind in _MESSAGE_DEADLINES)
# An enum member's `.value` is a property lookup: read once here, per member.
_VALUE = {member: member.value for enum in (Redundancy, SiteLocality) for member in enum}


def server_key(server: str) -> str:
    return SERVER_PREFIX + server


def message_key(primary: str, internal_id: str) -> str:
    return f"{MESSAGE_PREFIX}{primary.replace('%', '%25').replace('/', '%2F')}/{internal_id}"


def server_summary(state: PrimaryState) -> dict:
    """The primary's summary: its queue, the copies held for it per holder, messages not
    redundant, at risk or promoted, expected duplicates, heartbeat pairs and pending deadlines."""
    s = state
    fact = s.nodes.get(s.primary)
    # One pass over the messages and one over the deadlines: a group may hold 100,000 of each.
    queue = not_redundant = at_risk = 0
    held_by: Counter = Counter()
    for m in s.messages.values():
        if m.primary_done_ms is None:
            queue += 1
            if m.redundancy in _NOT_REDUNDANT:
                not_redundant += 1
        if m.at_risk:
            at_risk += 1
        if m.shadow_server is not None and m.redundancy is Redundancy.REDUNDANT:
            held_by[m.shadow_server] += 1
    counts: Counter = Counter()
    earliest: dict[int, int] = {}
    for kind, _, at_ms in s.deadlines.items():
        counts[kind] += 1
        if at_ms < earliest.get(kind, at_ms + 1):
            earliest[kind] = at_ms
    pending = {DeadlineKind(k).name.lower(): {"count": n, "next_ms": earliest[k]} for k, n in counts.items()}
    return {
        "kind": "server", "version": VERSION, "server": s.primary, "event_time_ms": s.clock_ms,
        "dag": fact.dag if fact else None, "ad_site": fact.ad_site if fact else None,
        "mode": (s.mode or (fact.mode if fact else None)).value if (s.mode or fact) else None,
        "queue_db_id": s.queue_db_id, "last_event_ms": s.primary_seen_ms,
        "messages_in_flight": len(s.messages), "queue": queue,
        "shadow_copies_by_holder": dict(sorted(held_by.items())),
        "not_redundant": not_redundant, "at_risk": at_risk,
        "promoted": len(s.promoted),
        "promoted_by_holder": dict(sorted(Counter(r.holder for r in s.promoted.values()).items())),
        # promoted copies the primary still has in the database it had then: it delivers them
        # again if it comes back with that database
        "expected_duplicates": sum(1 for r in s.promoted.values()
                                   if r.primary_db_id is not None and r.primary_db_id == s.queue_db_id),
        "pairs": [{"shadow": p.shadow, "held": len(p.held), "pending_discards": len(p.pending_discards),
                   "last_contact_ms": p.last_contact_ms, "last_query_ms": p.last_query_ms,
                   "primary_failed_ms": p.primary_failed_ms, "silent": p.silent_alerted or p.awaiting_shadow,
                   "deadlines": {k.name.lower(): s.deadlines.get(k, p.shadow) for k in _PAIR_DEADLINES
                                 if s.deadlines.get(k, p.shadow) is not None}}
                  for p in sorted(s.pairs.values(), key=lambda p: p.shadow)],
        "pending_deadlines": dict(sorted(pending.items())),
    }


def _fork_status(fork: Fork) -> str:
    """A fork's processing: 'failed' when it failed for good (the primary expired it, its recipients had a non-delivery
    report: its next hop has nothing), else 'acknowledged' by its next hop, or 'pending'."""
    if not fork.done:
        return "pending"
    return "failed" if fork.next_hop == "" else "acknowledged"


def message_where(state: PrimaryState, internal_id: str) -> dict | None:
    """Where one message of this primary is: its copies, forks, status and pending deadlines;
    None when the twin holds nothing of it (delivered and released, or never seen)."""
    s = state
    m, promoted = s.messages.get(internal_id), s.promoted.get(internal_id)
    if m is None and promoted is None:
        return None
    ref = m.ref if m is not None else promoted.ref
    by_kind = s.deadlines.by_kind
    deadlines = [{"kind": name, "at_ms": at_ms} for kind, name in _MESSAGE_DEADLINE_NAMES
                 if (at_ms := by_kind[kind].get(internal_id)) is not None]
    record = {"kind": "message", "version": VERSION, "primary": s.primary, "message_id": ref.message_id,
              "internal_id": internal_id, "event_time_ms": s.clock_ms}
    if m is not None:
        shadow_held = m.shadow_server is not None and m.redundancy is Redundancy.REDUNDANT
        record["status"] = ("at_risk" if m.at_risk else "in_queue" if m.primary_done_ms is None
                            else "processed" if not shadow_held
                            else "processed, shadow copy awaiting discard" if _discard_kept(s, m)
                            else "processed, shadow copy resubmitted when its shadow sees the new queue database"
                            if _awaiting_new_database(s, m)
                            else "processed, shadow copy unacknowledged until it expires")
        record["received_ms"] = m.received_ms
        record["redundancy"] = _VALUE[m.redundancy]
        record["processed_ms"] = m.primary_done_ms
        record["recipients"] = [r.address for r in m.recipients]
        record["shadow"] = None if m.shadow_server is None else {
            "server": m.shadow_server, "held": shadow_held, "locality": _VALUE[m.shadow_locality]}
        record["forks"] = [{"fork": key, "next_hop": f.next_hop, "recipients": list(f.recipients),
                            "status": _fork_status(f)} for key, f in sorted(m.forks.items())]
        record["side_effects_pending"] = sorted(m.side_effects)
        # The pair's deadlines (promotion, silence) are in the server summary's `pairs`, which every
        # heartbeat rewrites; `TopologyView.where` joins them, so a heartbeat rewrites no message record.
    else:
        record["status"] = "promoted"
    if promoted is not None:
        record["promoted"] = {"holder": promoted.holder, "at_ms": promoted.promoted_ms,
                              "primary_db_id": promoted.primary_db_id}
        if (at_ms := by_kind[DeadlineKind.FORGET_PROMOTED].get(internal_id)) is not None:
            deadlines.append({"kind": "forget_promoted", "at_ms": at_ms})
    if len(deadlines) > 1:
        deadlines.sort(key=itemgetter("at_ms"))
    record["deadlines"] = deadlines
    return record


def _discard_kept(state: PrimaryState, m: Message) -> bool:
    """Whether the primary keeps the discard notification of `m`'s copy (else it dropped it after
    ShadowMessageAutoDiscardInterval: the copy waits for Safety Net's expiry)."""
    pair = state.pairs.get(m.shadow_server)
    return pair is not None and m.ref.internal_id in pair.pending_discards


def _awaiting_new_database(state: PrimaryState, m: Message) -> bool:
    """Whether `m`'s copy is on a shadow, silent, that the primary came back to with a new queue database: its
    discard notification went with the old one, and the shadow resubmits the copy when it sees the new ID."""
    pair = state.pairs.get(m.shadow_server)
    return pair is not None and pair.db_change_pending


def due_message_deadlines(state: PrimaryState, before_ms: int) -> set[str]:
    """The messages whose own deadlines (expiry, acknowledgement delay, promoted record) fire before
    `before_ms`: walked down the heap only where it is earlier, so it costs what fires, not what waits
    (an entry may be earlier than its deadline, or left by a cleared one: the deadline itself decides)."""
    deadlines = state.deadlines
    heap, ids, todo = deadlines.heap, set(), [0]
    while todo:
        i = todo.pop()
        if i < len(heap) and heap[i][0] < before_ms:
            _, kind, key = heap[i]
            if kind in _MESSAGE_KINDS and (at_ms := deadlines.get(kind, key)) is not None and at_ms < before_ms:
                ids.add(key)
            todo += (2 * i + 1, 2 * i + 2)
    return ids


# The event kinds that name messages besides their own `message` (touched_messages reads them).
NAMING_OTHERS = frozenset((DiscardQueryAnswered, SideEffectGenerated))


def touched_messages(events: Iterable[Event], alerts: Iterable[Alert] = (),
                     commands: Iterable[RedeliveryCommand] = (), closed: Iterable[str] = ()) -> set[str]:
    """The internal ids that a call's events and decisions (alerts, commands, closed messages) concern."""
    ids: set[str] = set(closed)
    for e in events:
        if e.message is not None:
            ids.add(e.message.internal_id)
        if isinstance(e, DiscardQueryAnswered):
            ids.update(r.internal_id for r in e.discarded)
        elif isinstance(e, SideEffectGenerated):
            ids.add(e.parent.internal_id)
    for alert in alerts:
        ids.update(m.message.internal_id for m in alert.messages)
    ids.update(c.message.internal_id for c in commands)
    return ids


def summary_records(state: PrimaryState, touched: Iterable[str]) -> list[tuple[str, dict | None]]:
    """(key, record) pairs for the group's server summary and each touched message (None: forget it)."""
    prefix = message_key(state.primary, "")
    return [(server_key(state.primary), server_summary(state)),
            *((prefix + i, message_where(state, i)) for i in sorted(touched))]


def state_records(state: PrimaryState) -> list[tuple[str, dict]]:
    """(key, record) pairs for everything the group holds: its summary and every message (whatif's end state)."""
    return summary_records(state, set(state.messages) | set(state.promoted))


def to_json(record: dict | None) -> bytes | None:
    """The record as compact JSON with sorted keys, UTF-8 (None stays None: a tombstone)."""
    return None if record is None else orjson.dumps(record, option=orjson.OPT_SORT_KEYS)


@dataclass
class TopologyView:
    """The state records folded back, latest per key: the answers `where`, `server` and the page give."""

    servers: dict[str, dict] = field(default_factory=dict)
    messages: dict[str, dict] = field(default_factory=dict)

    def apply(self, key: str, record: dict | None) -> None:
        """One record of the state topic (None: a tombstone)."""
        table = self.servers if key.startswith(SERVER_PREFIX) else self.messages if key.startswith(MESSAGE_PREFIX) \
            else None
        if table is None:
            return
        name = key.split("/", 1)[1]
        if record is None:
            table.pop(name, None)
        else:
            table[name] = record

    def where(self, message: str) -> list[dict]:
        """Every record of the message, by its Message-ID (with or without its angle brackets: `1.7@contoso.com`
        found nothing of `<1.7@contoso.com>`) or internal id, in order of primary; with the deadlines of its
        shadow's heartbeat pair, from its primary's summary."""
        bare = message.strip().removeprefix("<").removesuffix(">")
        found = sorted((r for r in self.messages.values()
                        if message == r["internal_id"] or bare == r["message_id"].removeprefix("<").removesuffix(">")),
                       key=lambda r: (r["primary"], r["internal_id"]))
        return [self._with_pair_deadlines(r) for r in found]

    def _with_pair_deadlines(self, record: dict) -> dict:
        shadow = (record.get("shadow") or {}).get("server")
        summary = self.servers.get(record["primary"])
        pair = next((p for p in summary["pairs"] if p["shadow"] == shadow), None) if summary and shadow else None
        if pair is None:
            return record
        joined = [*record["deadlines"], *({"kind": k, "at_ms": at, "shadow": shadow} for k, at in pair["deadlines"].items())]
        return {**record, "deadlines": sorted(joined, key=lambda d: d["at_ms"])}

    def server_names(self) -> set[str]:
        """Every server the records name: as primary, as holder of copies, as shadow of a pair."""
        return {*self.servers, *(holder for s in self.servers.values() for holder in s["shadow_copies_by_holder"]),
                *(p["shadow"] for s in self.servers.values() for p in s["pairs"])}

    def server(self, name: str) -> dict | None:
        """What `name` holds as primary, what others hold for it, and what it holds for others."""
        summary = self.servers.get(name)
        holds_for = {s["server"]: n for s in self.servers.values()
                     if (n := s["shadow_copies_by_holder"].get(name))}
        if summary is None and not holds_for:
            return None
        return {"server": name, "summary": summary, "holds_shadow_copies_for": dict(sorted(holds_for.items())),
                "shadow_pairs_towards": sorted(
                    ({"primary": s["server"], **p} for s in self.servers.values()
                     for p in s["pairs"] if p["shadow"] == name), key=lambda p: p["primary"])}
