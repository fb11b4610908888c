"""Node liveness: a node that has been quiet for too long, in event time.

The first stateful logic of the twin, and the pattern the shadow-redundancy model follows:
explicit state per group, a pure transition for events, and an explicit deadline whose
expiry is a second pure transition. The engine (Spark, a replay, a test) only stores the
state, remembers the deadline, and calls back when event time passes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class Liveness:
    """What the twin knows of one node: when (event time, ms) it was last heard from."""

    last_seen_ms: int

    def deadline_ms(self, quiet_timeout_ms: int) -> int:
        return self.last_seen_ms + quiet_timeout_ms


@dataclass(frozen=True)
class QuietNodeAlert:
    node: str
    last_seen_ms: int
    decided_at_ms: int
    reason: str


def on_events(state: Liveness | None, event_times_ms: Iterable[int]) -> Liveness:
    """Fold a node's events (any order) into its liveness; event time never goes backwards."""
    latest = max(event_times_ms, default=None)
    if latest is None:
        if state is None:
            raise ValueError("on_events needs at least one event for a node without state")
        return state
    if state is not None and state.last_seen_ms >= latest:
        return state
    return Liveness(latest)


def on_deadline(node: str, state: Liveness, quiet_timeout_ms: int) -> QuietNodeAlert:
    """The node stayed quiet past its deadline: the alert to emit. The state is released."""
    deadline = state.deadline_ms(quiet_timeout_ms)
    return QuietNodeAlert(
        node=node,
        last_seen_ms=state.last_seen_ms,
        decided_at_ms=deadline,
        reason=f"no event from {node} for {quiet_timeout_ms / 1000:g}s of event time",
    )
