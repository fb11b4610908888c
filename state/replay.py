"""The reference engine: runs the model over recorded events in event-time order.

Each group (primary server, in any case: `state.names` spells its events' servers) gets its own
events and the facts every group shares (`state.facts`: every server's NodeStarted, and one
NodeSeen per server and liveness bucket), merged in event-time order (ties: the recording's
order, the group's own events before facts), and then event time runs to the end of the
recording: every deadline strictly before the last event time fires, at its own time. The
streaming twin must produce the same alerts and commands (by id); an alert several groups make
alike (EVENTS_STOPPED) counts once.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from operator import attrgetter
from dataclasses import dataclass, field
from typing import Callable, Iterable

from schemas.events import Alert, ClockTick, Event, NodeStarted, RedeliveryCommand
from state import collector
from state.facts import shared_facts
from state.model import SEEN_BUCKET_MS, Outcome, ShadowRedundancyModel
from state.parameters import ModelConfig
from state.records import DeadlineKind, PrimaryState


_EVENT_TIME = attrgetter("event_time_ms")


@dataclass
class ReplayResult:
    alerts: list[Alert] = field(default_factory=list)
    commands: list[RedeliveryCommand] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    states: dict[str, PrimaryState] = field(default_factory=dict)
    messages: int = 0  # tracked, closed or held, counted per primary: internal ids are one server's (Exchange's logs)
    events: int = 0
    start_ms: int | None = None
    end_ms: int | None = None
    model: ShadowRedundancyModel | None = None

    def settles(self, primary: str) -> bool:
        """Whether the group holds nothing (no message, memory or deadline) once event time has
        passed the clock-skew allowance (and a liveness bucket and a bucket of applied event ids:
        a NodeSeen's id is kept from the end of its liveness bucket), and the deadline that forgets each shadow
        whose discard queries it remembers (`PrimaryState.queried_by`), deciding nothing more on the way."""
        state = self.states[primary]
        until = max([state.clock_ms + self.model.config.clock_skew_allowance_ms + 2 * SEEN_BUCKET_MS,
                     *state.deadlines.by_kind[DeadlineKind.FORGET_QUERIES].values()])
        later = self.model.on_time(state, until + 1)
        return not (later.alerts or later.commands) and state.holds_nothing()


def replay(events: Iterable[Event], config: ModelConfig | None = None, until_ms: int | None = None,
           progress: Callable[[int, int], None] | None = None) -> ReplayResult:
    """Run the model over `events`; event time ends at `until_ms` (default: the last event's time).
    `progress(done, total)` is called after each primary server's group."""
    with collector.paused():
        return _replay(events, config, until_ms, progress)


def _replay(events: Iterable[Event], config: ModelConfig | None, until_ms: int | None,
            progress: Callable[[int, int], None] | None) -> ReplayResult:
    # Each group's events are applied in time order: a repeat comes at its original's time.
    model = ShadowRedundancyModel(dataclasses.replace(config or ModelConfig(), lateness_bound_ms=0))
    groups: dict[str, list[Event]] = defaultdict(list)
    result = ReplayResult(model=model)
    events = sorted(map(model.config.names.respelled, events), key=_EVENT_TIME)
    facts = list(shared_facts(events, model.liveness_bucket_ms))
    result.events = len(events)
    if events:  # in time order
        result.start_ms, result.end_ms = events[0].event_time_ms, events[-1].event_time_ms
    for event in events:
        if not isinstance(event, ClockTick):
            groups[event.primary_server].append(event)
    if until_ms is not None:
        result.end_ms = until_ms
    alert_ids: set[str] = set()
    for done, primary in enumerate(sorted(groups), 1):
        shared = [f for f in facts if not (isinstance(f, NodeStarted) and f.node == primary)]
        group_events = sorted(groups[primary] + shared, key=_EVENT_TIME)  # two runs in time order: one merge
        state = model.new_state(primary)
        output = model.on_events(state, group_events)
        if result.end_ms is not None:
            output.extend(model.on_time(state, result.end_ms))
        for alert in output.alerts:
            if alert.alert_id not in alert_ids:
                alert_ids.add(alert.alert_id)
                result.alerts.append(alert)
        result.commands.extend(output.commands)
        result.outcomes.extend(output.outcomes)
        result.states[primary] = state
        result.messages += len({o.ref.internal_id for o in output.outcomes} | state.messages.keys())
        if progress is not None:
            progress(done, len(groups))
    result.alerts.sort(key=lambda a: (a.decided_at_ms, a.alert_id))
    result.commands.sort(key=lambda c: (c.decided_at_ms, c.command_id))
    return result

