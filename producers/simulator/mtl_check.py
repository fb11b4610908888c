"""The log path held against the ground truth: simulate, write Exchange logs, ingest them, run the twin.

    check = check_logs(topology, seed=7, folder=Path("logs"))
    print(check.describe())    # promotions found / expected, false alerts, longest delay

The same simulation is replayed through the model twice (`state.replay`, the reference twin):
from its native events, and from what `producers.mtl_ingest` makes of the logs that
`mtl_writer` wrote for it. A promotion of the truth (a shadow took over a message) is found
when the log-fed twin decides it: an alert of a promotion naming the message, or the
message's promotion seen (`ShadowPromoted`, from RESUBMIT), or, of a message its primary had
processed, the duplicate forecast naming it (the promotion delivers it again); its delay is the
decision's event time minus the promotion's true time. A false alert is one the log-fed twin raises that the
native twin does not: one of its messages (by Message-ID), or of its servers when it names no
message, is not in a native alert of the same type (a promotion alert: nor seen promoted by the native twin).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from producers.mtl_ingest import ingest
from producers.simulator.engine import Simulation
from producers.simulator.mtl_writer import writer_for
from producers.simulator.topology import Topology
from producers.simulator.truth import MessageTruth
from schemas.events import Alert, AlertType, DeadLetter, Event
from state.replay import ReplayResult, replay

PROMOTION_ALERTS = (AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED)
# What only a log-fed twin says (it does not know the queue database a server restarted with):
# not false alerts, but counted apart.
RESTART_ALERTS = (AlertType.RESTARTED_QUEUE_DATABASE_UNKNOWN, AlertType.RESTART_QUEUE_DATABASE_SETTLED)


class WorldTooLarge(Exception):
    """The simulation made more events than the check was allowed (`check_logs(max_events=...)`)."""


class _Collect:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.dead_letters: list[DeadLetter] = []

    def event(self, event: Event, set_aside: object = None) -> None:
        self.events.append(event)

    def dead(self, letter: DeadLetter) -> None:
        self.dead_letters.append(letter)


@dataclass
class LogCheck:
    expected: dict[str, int]  # Message-ID -> true time of its (first) promotion
    found: dict[str, int]  # of those, the log-fed twin's decision time
    native_found: dict[str, int]  # the native-event twin's
    false_alerts: list[Alert]
    dead_letters: int
    log_lines: int
    native: ReplayResult = field(repr=False)
    logs: ReplayResult = field(repr=False)
    truth: dict[str, MessageTruth] = field(default_factory=dict, repr=False)  # the simulation's, by Message-ID

    @property
    def missed(self) -> set[str]:
        return set(self.expected) - set(self.found)

    def delay_ms(self, found: dict[str, int]) -> int | None:
        delays = [found[k] - self.expected[k] for k in found if k in self.expected]
        return max(delays) if delays else None

    def describe(self) -> str:
        def minutes(ms: int | None) -> str:
            return "-" if ms is None else f"{ms / 60_000:.1f} min"

        by_type: dict[str, int] = {}
        for alert in self.false_alerts:
            by_type[alert.type.value] = by_type.get(alert.type.value, 0) + 1
        return "\n".join([
            f"log lines: {self.log_lines:,}; dead letters: {self.dead_letters}",
            f"promotions found from the logs: {len(self.found)} / {len(self.expected)} expected"
            f" (native events: {len(self.native_found)})",
            f"longest delay after the true promotion: logs {minutes(self.delay_ms(self.found))},"
            f" native {minutes(self.delay_ms(self.native_found))}",
            f"false alerts (raised from the logs, not from the native events): {len(self.false_alerts)}"
            + "".join(f"\n  {kind}: {n}" for kind, n in sorted(by_type.items())),
            "restarts whose queue database the logs do not name: " + "; ".join(
                f"{a.servers[0]} at {a.decided_at_ms}: {a.type.value}" + (
                    " (same)" if "the same queue database" in a.reason else " (new)"
                    if "a new, empty queue database" in a.reason else "")
                for a in self.logs.alerts if a.type in RESTART_ALERTS) or "none",
        ])


def _decided(result: ReplayResult) -> dict[str, int]:
    """Message-ID -> the earliest event time at which the twin decided a shadow took the message over."""
    out: dict[str, int] = {}

    def note(message_id: str, at_ms: int) -> None:
        out[message_id] = min(out.get(message_id, at_ms), at_ms)

    for alert in result.alerts:
        if alert.type in PROMOTION_ALERTS or alert.type is AlertType.DUPLICATE_DELIVERY_EXPECTED:
            for m in alert.messages:
                note(m.message.message_id, alert.decided_at_ms)
    for outcome in result.outcomes:
        if outcome.result == "promoted":
            note(outcome.ref.message_id, outcome.processed_ms)
    return out


def _signatures(alert: Alert) -> set[tuple]:
    """What an alert says, message by message (by Message-ID), or server by server when it names no message."""
    if alert.messages:
        return {(alert.type, m.message.message_id) for m in alert.messages}
    return {(alert.type, server) for server in alert.servers}


def check_logs(topology: Topology, seed: int, folder: Path, probes: bool = True,
               max_events: int | None = None) -> LogCheck:
    """`probes`: whether the servers log Managed Availability's health probe (mtl_writer); past `max_events`
    simulated events the check stops (WorldTooLarge): every event is kept, and replayed twice."""
    simulation = Simulation(topology, seed)
    native_events: list[Event] = []
    writer = writer_for(simulation, folder, probes=probes)

    def kept(events):
        for e in events:
            native_events.append(e)
            if max_events is not None and len(native_events) > max_events:
                raise WorldTooLarge(f"more than {max_events:,} events"
                                    f" by {(e.event_time_ms - simulation.start_ms) / 3_600_000:.1f} h")
            yield e

    try:
        writer.write(kept(simulation.events()))
    finally:
        writer.close()
    sink = _Collect()
    ingest(sorted(str(p) for p in folder.iterdir() if p.is_dir()), sink,
           internal_domains=frozenset({topology.domain}))
    config = topology.model_config()
    native, logs = replay(native_events, config), replay(sink.events, config)
    expected = {t.message_id: min(p["at_ms"] for p in t.promotions)
                for t in simulation.truth.messages.values() if t.promotions}
    native_alerts = set().union(*map(_signatures, native.alerts))
    # A promotion the native twin saw happen (the shadow's ShadowPromoted, before its own deadline fired) it
    # records without an alert: the log-fed twin's forecast of it is no false alert.
    native_alerts |= {(kind, o.ref.message_id) for o in native.outcomes if o.result == "promoted"
                      for kind in PROMOTION_ALERTS}
    false_alerts = [a for a in logs.alerts if a.type not in RESTART_ALERTS and not _signatures(a) <= native_alerts]
    found, native_found = _decided(logs), _decided(native)
    return LogCheck(expected, {k: v for k, v in found.items() if k in expected},
                    {k: v for k, v in native_found.items() if k in expected}, false_alerts,
                    len(sink.dead_letters), writer.lines, native, logs, simulation.truth.messages)
