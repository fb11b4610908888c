"""Liveness without heartbeats: what a log-fed twin can tell of a primary and its shadow.

Message-tracking logs carry no discard queries (state/README.md, "The rule for a silent feed"
needs heartbeats), so a pair (a shadow holding copies for this primary) that has never shown
a heartbeat event (`DiscardQuerySent`, `DiscardQueryAnswered`, `DiscardQueryFailed`) is judged
from the facts every group is fed instead, in event time:

- the primary's own `NodeSeen` (a line it logged, health probes included, or an answered
  `ServerProbed` of `shadowtwin probe`, whose `node` is then the server) counts as the
  shadow's contact with it: the promotion deadline is the primary's last sign of life +
  ShadowResubmitTimeSpan, as if every heartbeat since had succeeded;
- the shadow's own `NodeSeen` counts as a query sent: a shadow that still logs is alive,
  one that stops is silent (SHADOW_SERVER_UNREACHABLE, MESSAGE_AT_RISK as before).

So a primary that stops logging while its shadow goes on is promoted at the same deadline a
run of failed heartbeats gives, with the same commands and duplicate forecast. A decision
drawn this way says so in its alert's reason (`INFERRED`). The first heartbeat event of a
pair (`Pair.heartbeats`) switches this off for that pair: heartbeats are the better evidence
(a primary can be alive and logging, yet unreachable from its shadow).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from state.facts import NodeSeen

if TYPE_CHECKING:
    from state.model import _Transition
    from state.records import Pair

INFERRED = (" [inferred without heartbeats: from the servers' own events (message-tracking log activity)"
            " in event time; no discard query of this shadow was seen]")


def node_seen(run: "_Transition", e: NodeSeen) -> None:
    """A server showed life: contact with the primary, or a query of the shadow, for pairs without heartbeats."""
    s, t = run.s, e.event_time_ms
    for pair in list(s.pairs.values()):
        if pair.heartbeats or pair.primary_failed_ms is not None:
            continue
        if e.node == s.primary and t > pair.last_contact_ms:
            pair.last_contact_ms = t
        elif e.node == pair.shadow and t > pair.last_query_ms:
            pair.last_query_ms = t
            pair.silent_alerted = pair.awaiting_shadow = False
        else:
            continue
        run.schedule_pair(pair)


def label(run: "_Transition", pair: "Pair | None", since: int) -> None:
    """The alerts decided since index `since` of this step's output say they were inferred, if they were."""
    if pair is None or pair.heartbeats:
        return
    alerts = run.out.alerts
    for i in range(since, len(alerts)):
        if not alerts[i].reason.endswith(INFERRED):
            alerts[i] = dataclasses.replace(alerts[i], reason=alerts[i].reason + INFERRED)


def labelled(fire):
    """A deadline's handler (keyed by shadow) whose alerts say when they were inferred."""
    def fire_and_label(run: "_Transition", shadow: str, at_ms: int) -> None:
        pair, since = run.s.pairs.get(shadow), len(run.out.alerts)
        fire(run, shadow, at_ms)
        label(run, pair, since)
    return fire_and_label
