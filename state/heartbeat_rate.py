"""How often a recording's shadows queried their primaries, and a replay's silence judged at that rate.

A replay cannot make the discard queries a recording lacks. Asked "what if ShadowHeartbeatFrequency were
30 seconds" over a day whose shadows queried every 2 minutes, the model would find every shadow silent
between two recorded queries (`shadow_silence_heartbeats` heartbeats of 30 seconds) and put its copies at
risk, though nothing was wrong. So a run whose heartbeat is shorter than a shadow's recorded rate judges
silence over as many of its own heartbeats as make the recorded span (`judged_at_the_recorded_rate`);
everything else the heartbeat decides (when a shadow promotes, resubmits) is the run's own.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

from schemas.events import DiscardQuerySent, NodeMode, NodeStarted
from state.parameters import ModelConfig


@dataclass(frozen=True)
class RecordedRate:
    """A shadow's median interval between two of its queries to one primary, as recorded."""

    shadow: str
    every_ms: int


def recorded_rates(events: Iterable) -> tuple[dict[str, RecordedRate], dict[str, NodeMode]]:
    """Each querying shadow's recorded rate, and the mode each server's NodeStarted gave (UNKNOWN left out)."""
    times: dict[tuple[str, str], list[int]] = defaultdict(list)
    modes: dict[str, NodeMode] = {}
    for event in events:
        if isinstance(event, DiscardQuerySent):
            times[(event.node, event.primary_server)].append(event.event_time_ms)
        elif isinstance(event, NodeStarted) and event.mode is not NodeMode.UNKNOWN:
            modes[event.node] = event.mode
    gaps: dict[str, list[int]] = defaultdict(list)
    for (shadow, _), sent in times.items():
        sent.sort()
        gaps[shadow] += [b - a for a, b in zip(sent, sent[1:]) if b > a]
    return {shadow: RecordedRate(shadow, statistics.median_low(g)) for shadow, g in gaps.items() if g}, modes


def heartbeat_ms(config: ModelConfig, shadow: str, modes: dict[str, NodeMode]) -> int:
    """How often the run takes `shadow` to query: ShadowHeartbeatFrequency, in 2010 mode
    ShadowHeartbeatTimeoutInterval (as `state.model` reads it)."""
    timing = config.timing(shadow)
    mode = modes.get(shadow) or config.for_node(shadow).mode
    return timing.heartbeat_timeout_ms if mode is NodeMode.EXCHANGE_2010 else timing.heartbeat_ms


def judged_at_the_recorded_rate(config: ModelConfig, rates: dict[str, RecordedRate],
                                modes: dict[str, NodeMode]) -> tuple[ModelConfig, RecordedRate | None]:
    """`config`, its silence span at least the recorded one for every shadow that queried more slowly than the
    run's heartbeat says (a tenth of slack: a recorded rate is not exact); the slowest such shadow, or None
    when there is none and `config` is returned as it is."""
    count = config.shadow_silence_heartbeats
    if count <= 0:
        return config, None
    needed, slowest = count, None
    for rate in rates.values():
        ours = heartbeat_ms(config, rate.shadow, modes)
        if ours > 0 and rate.every_ms > ours * 1.1:
            wanted = math.ceil(count * rate.every_ms / ours)
            if wanted > needed:
                needed, slowest = wanted, rate
    if slowest is None:
        return config, None
    return dataclasses.replace(config, shadow_silence_heartbeats=needed), slowest
