"""Liveness without heartbeats: what a log-fed twin can tell of a primary and its shadow.

Message-tracking logs carry no discard queries (state/README.md, "The rule for a silent feed"
needs heartbeats), so a pair (a shadow holding copies for this primary) that has never shown
a heartbeat event (`DiscardQuerySent`, `DiscardQueryAnswered`, `DiscardQueryFailed`) is judged
from what a log-fed deployment sees of each server, in event time:

- the primary's life counts as the shadow's contact with it: the promotion deadline is its
  last sign of life + ShadowResubmitTimeSpan, as if every heartbeat since had succeeded.
  Its signs: its own events (lines it logged, health probes included), through the shared
  `NodeSeen` facts and, at the deadline, its own latest event in this group
  (`primary_seen_ms`, exact to the millisecond); and a `ServerProbed` of it that answered,
  which reaches its group as its own event: an EHLO of `shadowtwin probe` (`via` probe) or a
  peer's SMTP session it answered read from the peer's log (`via` handoff: a SEND or DELIVER to
  it, or a shadow's HADISCARD of its message, its answer to the shadow's discard query);
- the shadow's own `NodeSeen` counts as a query sent: a shadow that still logs is alive,
  one that stops is silent (SHADOW_SERVER_UNREACHABLE, MESSAGE_AT_RISK as before). Its first
  line after a silence past the silence span is its return from an outage, in which the
  primary's life was no contact with it: its first query decides, up to a heartbeat on. Without
  any fact (an engine fed none: the Spark twin without `[shadow_redundancy] servers`) the
  shadow's life cannot be judged, and it is taken to be alive.

So a primary that stops showing life while its shadow goes on is promoted at the same
deadline a run of failed heartbeats gives, with the same commands and duplicate forecast. A
decision drawn this way says so, and from which evidence, in its alert's reason (`INFERRED`).
The first heartbeat event of a pair (`Pair.heartbeats`), or its shadow's queries remembered from
its previous pair (`PrimaryState.queried_by`), switches this off for that pair:
heartbeats are the better evidence (a primary can be alive and logging, yet unreachable from
its shadow).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from schemas.events import ServerProbed
from state.facts import NodeSeen

if TYPE_CHECKING:
    from state.model import _Transition
    from state.records import Pair

INFERRED = " [inferred without heartbeats: "
EVIDENCE = {"": "its own event", "probe": "an answered SMTP probe (shadowtwin probe)",
            "handoff": "a peer's SMTP session it answered (a hand-off to it, or a shadow's discard query answered"
                       " with a discard notification: the peer's message-tracking log)",
            "healthprobe": "a Managed Availability health probe it logged"}


def node_seen(run: "_Transition", e: NodeSeen) -> None:
    """A server showed life: contact with the primary, or a query of the shadow, for pairs without heartbeats."""
    s, t = run.s, e.event_time_ms
    for pair in list(s.pairs.values()):
        if pair.heartbeats or pair.primary_failed_ms is not None:
            continue
        if e.node == s.primary and t > pair.last_contact_ms:
            pair.last_contact_ms, pair.contact_via = t, ""
        elif e.node == pair.shadow and t > pair.last_query_ms:
            # as a discard query: back after the span ran out, its first query decides, up to a heartbeat on
            run.shadow_alive(pair, t, query=False)
            continue
        else:
            continue
        run.schedule_pair(pair)


def server_answered(run: "_Transition", e: ServerProbed) -> None:
    """The primary answered SMTP (a probe, or a peer's hand-off): contact, for pairs without heartbeats."""
    s, t = run.s, e.event_time_ms
    if not e.answered or e.node != s.primary:
        return
    for pair in list(s.pairs.values()):
        if _inferred(pair) and t > pair.last_contact_ms:
            pair.last_contact_ms, pair.contact_via = t, e.via if e.via in EVIDENCE else ""
            run.schedule_pair(pair)


def label(run: "_Transition", pair: "Pair | None", since: int) -> None:
    """The alerts decided since index `since` of this step's output say they were inferred, and from what."""
    if pair is None or pair.heartbeats:
        return
    s = run.s
    text = (f"{INFERRED}the last sign of life of {s.primary} was {EVIDENCE.get(pair.contact_via, EVIDENCE[''])} at"
            f" {_iso(pair.last_contact_ms)}, of {pair.shadow} its own event at {_iso(pair.last_query_ms)}, in event"
            f" time; no discard query of {pair.shadow} was seen]")
    alerts = run.out.alerts
    for i in range(since, len(alerts)):
        if INFERRED not in alerts[i].reason:
            alerts[i] = dataclasses.replace(alerts[i], reason=alerts[i].reason + text)


def labelled(fire):
    """A deadline's handler (keyed by shadow) whose alerts say when they were inferred."""
    def fire_and_label(run: "_Transition", shadow: str, at_ms: int) -> None:
        pair, since = run.s.pairs.get(shadow), len(run.out.alerts)
        fire(run, shadow, at_ms)
        label(run, pair, since)
    return fire_and_label


def promote_when_silent(fire):
    """The promotion deadline's handler: a primary that showed life in its own group since the
    pair's last contact (a line the facts' minute grain did not carry yet, or no facts at all)
    gets its deadline moved, not its shadows promoted."""
    labelled_fire = labelled(fire)

    def fire_unless_alive(run: "_Transition", shadow: str, at_ms: int) -> None:
        s = run.s
        pair = s.pairs.get(shadow)
        if pair is not None and _inferred(pair):
            if not s.last_seen:  # no facts: the shadow's life cannot be judged, it is taken to be alive
                pair.last_query_ms = max(pair.last_query_ms, at_ms)
            seen = s.primary_seen_ms
            if seen is not None and seen > pair.last_contact_ms:
                pair.last_contact_ms, pair.contact_via = seen, ""
                run.schedule_pair(pair)
                return
        labelled_fire(run, shadow, at_ms)
    return fire_unless_alive


def silent_when_judged(fire):
    """The shadow-silence deadline's handler: without any fact, a pair without heartbeats cannot
    tell a silent shadow from one whose lines this group never sees, so it reports nothing."""
    labelled_fire = labelled(fire)

    def fire_if_judged(run: "_Transition", shadow: str, at_ms: int) -> None:
        pair = run.s.pairs.get(shadow)
        if pair is not None and not silence_judged(run, pair):
            pair.silent_alerted = True
            run.schedule_pair(pair)
            return
        labelled_fire(run, shadow, at_ms)
    return fire_if_judged


def silence_judged(run: "_Transition", pair: "Pair") -> bool:
    """Whether the twin can tell that the pair's shadow is silent: not without heartbeats and without
    any fact (its lines do not reach this primary's group)."""
    return not _inferred(pair) or bool(run.s.last_seen)


def _inferred(pair: "Pair") -> bool:
    return not pair.heartbeats and pair.primary_failed_ms is None


def _iso(ms_: int) -> str:
    from state.model import _iso

    return _iso(ms_)
