"""The operator's code path without Spark: `streaming.operator.TwinProcessor` driven in memory.

    result = run_operator(events, config)            # a ReplayResult, like state.replay.replay
    harness = OperatorHarness(config); harness.batch(rows); harness.advance(watermark_ms)

`MemoryGroupStore` stands in for Spark's state of one group (the version token, the base
snapshot's pieces, the log, the event-time timers). `OperatorHarness` calls the processor the
way Spark's `transformWithStateInPandas` does in event-time mode: per micro-batch,
`handleInputRows` for every group that has rows, then `handleExpiredTimer` for every timer the
watermark has reached (deleting it after the call); the watermark of a batch is the latest
event time of the batches before it minus the watermark delay, and rows at or behind the
PREVIOUS batch's watermark are dropped before the operator sees them, as Spark 4.0 drops them
(the operator sets aside the rest of the rows behind its call's watermark itself). The rows
carry the events' bytes as the events topic would (compare Flink's
`KeyedOneInputStreamOperatorTestHarness`).
"""

from __future__ import annotations

import itertools
import json
import random
from typing import Iterable

import pandas as pd

from schemas.codec import default_codec, encode
from schemas.events import Alert, ClockTick, DeadLetter, Event, RedeliveryCommand
from state import snapshot
from state.model import ShadowRedundancyModel
from state.parameters import ModelConfig
from state.replay import ReplayResult
from state.summary import TopologyView, message_where, server_summary
from state.records import PrimaryState
from streaming.held_state import MemoryGroupStore, rebuild
from streaming.operator import (DEAD_LETTER_GROUP, FACT_SEEN, FACT_STARTED, OUTPUT_SCHEMA, OutputTopics, TwinProcessor,
                                replay_call)

TOPICS = OutputTopics("alerts", "commands", "dead-letters", "state")
OUTPUT_COLUMNS = [field.split()[0] for field in OUTPUT_SCHEMA.split(", ")]
EVENTS_TOPIC = "events"


COLUMNS = ["primary_server", "event_time", "value", "key", "topic", "partition", "offset", "reason", "fact", "node"]


def row_frame(rows: list[dict]) -> pd.DataFrame:
    """Rows as the operator receives them (streaming.twin.twin_output's columns)."""
    frame = pd.DataFrame([{c: r.get(c) for c in COLUMNS} for r in rows], columns=COLUMNS)
    frame["event_time"] = pd.to_datetime(frame["event_time"], unit="ms", utc=True)
    return frame


def event_row(event: Event, offset: int, value: bytes | None = None) -> dict:
    """The row Spark would hand the operator for `event` (or for `value`, bytes Spark read as `event`)."""
    reason = None
    if event.primary_server == "" and not isinstance(event, ClockTick):  # as streaming.twin rules
        reason = f"no primary server: a {type(event).__name__} event must name the primary server it concerns"
    return {"primary_server": event.primary_server, "event_time": event.event_time_ms,
            "value": encode(event) if value is None else value, "key": event.primary_server.encode() or None,
            "topic": EVENTS_TOPIC, "partition": 0, "offset": offset, "reason": reason, "fact": None,
            "node": event.node, "kind": type(event).__name__}


class OperatorHarness:
    def __init__(self, config: ModelConfig | None = None, watermark_delay_ms: int = 0,
                 servers: Iterable[str] | None = None):
        config = config or ModelConfig()
        self.processor = TwinProcessor(config, TOPICS, watermark_delay_ms)
        self.processor.model = self.model = ShadowRedundancyModel(self.processor.config)
        # The groups every fact is addressed to, as streaming.twin.shared_facts does.
        self.servers = tuple(servers if servers is not None else config.servers)
        self.delay_ms = watermark_delay_ms
        self.watermark_ms = 0
        self.late_before_ms = 0  # the previous batch's watermark, which Spark 4.0 filters late rows against
        self.max_event_ms: int | None = None
        self.stores: dict[str, MemoryGroupStore] = {}
        self.alerts: list[Alert] = []
        self.commands: list[RedeliveryCommand] = []
        self.dead_letters: list[DeadLetter] = []
        self.late_rows = 0
        self.view = TopologyView()
        self.state_rows: list[tuple[str, bytes | None]] = []  # every (key, value) written to the state topic
        self._offsets = itertools.count()

    def batch(self, rows: list[dict]) -> None:
        """One micro-batch of rows (see `event_row`); the watermark moves at its end, as Spark's does."""
        spelling = self.processor.config.names.spelling  # as streaming.twin spells the group and node
        rows = [{**r, "primary_server": spelling(r["primary_server"]), "node": spelling(r["node"])} for r in rows]
        usable = [r for r in rows if r["reason"] is not None or r["event_time"] > self.late_before_ms]
        self.late_rows += len(rows) - len(usable)
        usable += self._facts(usable)
        groups: dict[str, list[dict]] = {}
        for row in usable:
            key = DEAD_LETTER_GROUP if row["reason"] is not None else row["primary_server"]
            groups.setdefault(key, []).append(row)
        for key, group_rows in groups.items():
            self._call(key, [row_frame(group_rows)], timed_out=False)
        self._fire_timeouts()
        self.late_before_ms = self.watermark_ms
        times = [r["event_time"] for r in usable if r["reason"] is None]
        if times:
            self.max_event_ms = max(times + ([self.max_event_ms] if self.max_event_ms is not None else []))
            self.watermark_ms = max(self.watermark_ms, self.max_event_ms - self.delay_ms)

    def _facts(self, rows: list[dict]) -> list[dict]:
        """The facts of this batch's rows, addressed to every server, as streaming.twin.shared_facts
        addresses them: other servers' NodeStarted, and every row as a NodeSeen (the model keeps
        the first of each server and liveness bucket)."""
        facts = []
        for row in rows:
            if row["reason"] is not None or row["primary_server"] == DEAD_LETTER_GROUP:
                continue
            if row["kind"] == "NodeStarted":
                facts += [{**row, "primary_server": s, "fact": FACT_STARTED} for s in self.servers if s != row["node"]]
            facts += [{**row, "primary_server": s, "value": None, "fact": FACT_SEEN} for s in self.servers]
        return facts

    def events(self, events: Iterable[Event]) -> None:
        """One micro-batch of events."""
        self.batch([event_row(e, next(self._offsets)) for e in events])

    def advance(self, watermark_ms: int) -> None:
        """A batch without data after the watermark reached `watermark_ms`: timeouts fire."""
        self.watermark_ms = max(self.watermark_ms, watermark_ms)
        self._fire_timeouts()
        self.late_before_ms = self.watermark_ms

    def _fire_timeouts(self) -> None:
        expired = sorted((t, k) for k, store in self.stores.items() for t in store.timers if t <= self.watermark_ms)
        for at_ms, key in expired:
            self._call(key, [], timed_out=True)
            self.stores[key].delete_timer(at_ms)

    @property
    def states(self) -> dict[str, tuple]:
        """Each group's stored state as one snapshot (rebuilt from its base and log)."""
        return {key: (snapshot.dump(self.state_of(key)),) for key, store in self.stores.items()
                if store.version() is not None}

    def state_of(self, key: str) -> PrimaryState:
        """A group's stored state, rebuilt from its base and log as a worker that holds nothing would."""
        return rebuild(self.stores[key], lambda: self.model.new_state(key),
                       lambda state, call: replay_call(self.model, state, call), self.model.loaded)

    def _call(self, key: str, frames: list[pd.DataFrame], timed_out: bool) -> None:
        self.processor.store = self.stores.setdefault(key, MemoryGroupStore())
        outputs = list(self.processor.call(key, iter(frames), self.watermark_ms, expired=timed_out))
        codec = default_codec()
        for frame in outputs:
            assert list(frame.columns) == OUTPUT_COLUMNS, "the operator's output schema, which Spark reads it by"
            for topic, key, value in zip(frame["topic"], frame["key"], frame["value"]):
                if topic == TOPICS.state:  # as the compacted state topic holds it
                    self.state_rows.append((key.decode(), value))
                    self.view.apply(key.decode(), None if value is None else json.loads(value))
                    continue
                record = codec.decode(value)
                {TOPICS.alerts: self.alerts, TOPICS.commands: self.commands,
                 TOPICS.dead_letters: self.dead_letters}[topic].append(record)


def run_operator(events: Iterable[Event], config: ModelConfig | None = None, until_ms: int | None = None,
                 seed: int = 7) -> ReplayResult:
    """`state.replay.replay`, through the operator: micro-batches of 1 to 40 events (cut only
    where event time moves on, so nothing is late with no watermark delay), then the watermark
    at the end (default: the last event's time). The same alerts and commands are expected."""
    events = list(events)
    config = config or ModelConfig()
    servers = {config.names.spelling(name) for e in events for name in (e.node, e.primary_server) if name}
    harness = OperatorHarness(config, servers=sorted(servers | set(config.servers)))
    ordered = sorted(events, key=lambda e: e.event_time_ms)
    sizes = random.Random(seed)
    batch: list[Event] = []
    for _, same_time in itertools.groupby(ordered, key=lambda e: e.event_time_ms):
        batch.extend(same_time)
        if len(batch) >= sizes.randint(1, 40):
            harness.events(batch)
            batch = []
    if batch:
        harness.events(batch)
    end_ms = until_ms if until_ms is not None else (ordered[-1].event_time_ms if ordered else None)
    if end_ms is not None:
        harness.advance(end_ms)
    model = ShadowRedundancyModel(config)
    result = ReplayResult(model=model, events=len(events), end_ms=end_ms,
                          start_ms=ordered[0].event_time_ms if ordered else None)
    # A topology-wide alert (EVENTS_STOPPED) comes from every group that notices, with one id:
    # consumers keep one, as the reference engine lists one.
    unique = {a.alert_id: a for a in reversed(harness.alerts)}
    result.alerts = sorted(unique.values(), key=lambda a: (a.decided_at_ms, a.alert_id))
    result.commands = sorted(harness.commands, key=lambda c: (c.decided_at_ms, c.command_id))
    result.states = {key: harness.state_of(key) for key, store in harness.stores.items()
                     if key != DEAD_LETTER_GROUP and store.version() is not None}
    assert not harness.dead_letters, [d.reason for d in harness.dead_letters]
    check_state_view(harness.view, result.states)
    return result


# What the state rows must tell exactly. The event time and the pending deadlines move on in calls
# that change nothing an operator reads (the facts every group is fed), which write no rows.
SUMMARY_CONTENT = ("dag", "ad_site", "queue_db_id", "messages_in_flight", "queue", "shadow_copies_by_holder",
                   "not_redundant", "at_risk", "promoted", "promoted_by_holder", "expected_duplicates", "pairs")


def check_state_view(view: TopologyView, states: dict) -> None:
    """The state rows the operator wrote, folded as the compacted topic folds them, say what the
    groups' final states say: each server's summary, and exactly the messages they hold."""
    for primary, state in states.items():
        expected = {k: v for k, v in server_summary(state).items() if k in SUMMARY_CONTENT}
        published = view.servers.get(primary)
        if published is None:
            assert not (state.messages or state.pairs or state.promoted), f"{primary}: no summary published"
            continue
        told = {k: v for k, v in published.items() if k in SUMMARY_CONTENT}
        assert told == expected, (primary, {k: (told.get(k), v) for k, v in expected.items() if told.get(k) != v})
        held = set(state.messages) | set(state.promoted)
        listed = {r["internal_id"]: r for r in view.messages.values() if r["primary"] == primary}
        assert set(listed) == held, f"{primary}: published {sorted(listed)}, holds {sorted(held)}"
        for internal_id, record in listed.items():
            where = message_where(state, internal_id)
            told, expected = ({k: v for k, v in r.items() if k != "event_time_ms"} for r in (record, where))
            assert told == expected, (internal_id, {k: (told.get(k), v) for k, v in expected.items() if told.get(k) != v})
