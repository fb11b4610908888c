"""The reference engine: runs the model over recorded events in event-time order.

Each group (primary server) is independent of the others, so the engine feeds each its own
events, in event-time order (ties keep the recording's order), and then lets event time run
to the end of the recording: every deadline strictly before the last event time fires, at
its own time. The streaming twin must produce the same alerts and commands (by id).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable

from schemas.events import Alert, ClockTick, Event, RedeliveryCommand
from state.model import Outcome, ShadowRedundancyModel
from state.parameters import ModelConfig
from state.records import PrimaryState


@dataclass
class ReplayResult:
    alerts: list[Alert] = field(default_factory=list)
    commands: list[RedeliveryCommand] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    states: dict[str, PrimaryState] = field(default_factory=dict)
    events: int = 0
    start_ms: int | None = None
    end_ms: int | None = None
    model: ShadowRedundancyModel | None = None

    def settles(self, primary: str) -> bool:
        """Whether the group holds nothing (no message, memory or deadline) once event time has
        passed the clock-skew allowance, deciding nothing more on the way."""
        state = self.states[primary]
        later = self.model.on_time(state, state.clock_ms + self.model.config.clock_skew_allowance_ms + 1)
        return not (later.alerts or later.commands) and state.holds_nothing()


def replay(events: Iterable[Event], config: ModelConfig | None = None, until_ms: int | None = None) -> ReplayResult:
    """Run the model over `events`; event time ends at `until_ms` (default: the last event's time)."""
    model = ShadowRedundancyModel(config)
    groups: dict[str, list[Event]] = defaultdict(list)
    result = ReplayResult(model=model)
    for event in events:
        result.events += 1
        t = event.event_time_ms
        result.start_ms = t if result.start_ms is None else min(result.start_ms, t)
        result.end_ms = t if result.end_ms is None else max(result.end_ms, t)
        if not isinstance(event, ClockTick):
            groups[event.primary_server].append(event)
    if until_ms is not None:
        result.end_ms = until_ms
    for primary in sorted(groups):
        group_events = sorted(groups[primary], key=lambda e: e.event_time_ms)
        state = model.new_state(primary)
        output = model.on_events(state, group_events)
        if result.end_ms is not None:
            output.extend(model.on_time(state, result.end_ms))
        result.alerts.extend(output.alerts)
        result.commands.extend(output.commands)
        result.outcomes.extend(output.outcomes)
        result.states[primary] = state
    result.alerts.sort(key=lambda a: (a.decided_at_ms, a.alert_id))
    result.commands.sort(key=lambda c: (c.decided_at_ms, c.command_id))
    return result
