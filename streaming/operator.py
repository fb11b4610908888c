"""The stateful operator: Spark's `applyInPandasWithState` driving the shadow-redundancy model.

One group per primary server (see state/README.md). Per call, the group's whole state is
read once and written once (a `state.snapshot` of the `PrimaryState`, one blob), never per
message: the cost measured in docs/engine-facts.md is per group and per state call. The rows
carry the events' original bytes, decoded here with the contract's codec (cheaper than passing
Spark's wide decoded struct through Arrow).

The contract's decoder has the final word. Spark's `from_avro` only sorts records into usable
or not, and reads the event time and primary server that drive the watermark and the grouping;
a record it accepts but the codec refuses (trailing bytes after the body, say), or that the
codec reads with another primary server or event time than Spark did, leaves here as a dead
letter with its reason, bytes, topic, partition and offset. So does an event the model itself
cannot apply: no single record can stop the query.

Order of work in a call, which makes the results the same as the reference engine's:
1. fire every deadline strictly before the current watermark (each at its own time);
2. apply this batch's events, in event-time order (they are all later than the watermark:
   Spark drops older rows before they reach us);
3. store the state and set the group's timeout to its next deadline. Spark calls back when
   the watermark passes it (strictly), and step 1 fires it then;
4. when the call changed something an operator reads, the group's rows for the compacted
   state topic (streaming/state_rows.py: the server summary, the messages touched).

Two things keep the per-call cost of a large state down (docs/performance.md): Python's
cyclic garbage collector is paused during a call (loading a snapshot makes millions of
objects, and each generation-2 pass walks all of them: it doubled the cost), and each Python
worker keeps the states it last wrote (`_held`, by group): when the stored snapshot carries
the token of the one this worker wrote, it is not loaded again. Spark may give a group to
another worker, or run a batch again after a failure: the token then differs, and the stored
snapshot is loaded as before. A held state is taken out of `_held` before it is changed, so a
call that fails midway leaves nothing behind that could pass for a stored snapshot.

The empty group key gathers what is not a primary's event: clock ticks (which only move the
watermark) and records that cannot be used, which leave as dead letters with their reason.
`step_function` is what Spark calls per group; tests drive it directly with an in-memory
`GroupState` (tests/streaming/harness.py).
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Callable, Iterator

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from schemas.codec import default_codec, kafka_key
from schemas.events import Alert, DeadLetter, Event, RedeliveryCommand
from schemas.wire import CORRUPT_BODY, DecodeError
from state import snapshot
from state.facts import NodeSeen
from state.model import Output, ShadowRedundancyModel
from state.parameters import ModelConfig
from state.records import PrimaryState
from streaming.state_rows import StateWatch

OUTPUT_SCHEMA = "topic STRING, key BINARY, value BINARY"
# A row's `fact`: null for the group's own record; else a fact every group is fed (state/facts.py).
FACT_STARTED, FACT_SEEN = "started", "seen"
STATE_SCHEMA = "blob BINARY"
DEAD_LETTER_GROUP = ""
# This Python worker's states as it last stored them: group -> (snapshot token, state).
_held: dict[str, tuple[bytes, PrimaryState]] = {}


@dataclass(frozen=True)
class OutputTopics:
    alerts: str
    commands: str
    dead_letters: str
    state: str = ""  # the compacted state topic (streaming/state_rows.py); empty: no state rows


def kafka_rows(records: list[Alert | RedeliveryCommand | DeadLetter], topics: OutputTopics) -> pd.DataFrame:
    """Records as Kafka rows (topic, key, value), encoded with the contract's codec."""
    codec = default_codec()
    topic_of = {Alert: topics.alerts, RedeliveryCommand: topics.commands, DeadLetter: topics.dead_letters}
    return pd.DataFrame({
        "topic": [topic_of[type(r)] for r in records],
        "key": [kafka_key(r) for r in records],
        "value": [codec.encode(r, check=False) for r in records],
    })


def dead_letter(row, reason: str) -> DeadLetter:
    """A dead letter for one input row (its value, key, topic, partition, offset), with `reason`."""
    return DeadLetter(
        original=bytes(row.value) if row.value is not None else b"",
        key=bytes(row.key) if row.key is not None else None,
        topic=row.topic, partition=int(row.partition), offset=int(row.offset),
        reason=reason, at_ms=int(time.time() * 1000),
    )


def unusable_rows(batches: Iterator[pd.DataFrame]) -> list[DeadLetter]:
    """The empty group's rows with a reason, as dead letters (clock ticks have none and are skipped)."""
    return [dead_letter(row, row.reason) for batch in batches
            for row in batch[batch["reason"].notna()].itertuples(index=False)]


def decode_rows(batches: Iterator[pd.DataFrame], primary: str,
                bucket_ms: int) -> tuple[list[tuple[Event, object]], list[DeadLetter]]:
    """A group's rows as (event, row) in event-time order, its own events before the facts at equal
    times, by the contract's codec; what it refuses, or reads otherwise than Spark did (another
    group, another event time), as dead letters. Fact rows become the facts of `state.facts`."""
    decode = default_codec().decode_event
    decoded: list[tuple[int, int, Event, object]] = []
    letters: list[DeadLetter] = []
    for batch in batches:
        spark_times_ms = (batch["event_time"].astype("int64") // 1_000_000).tolist()
        for row, spark_time_ms in zip(batch.itertuples(index=False), spark_times_ms):
            if row.fact == FACT_SEEN:
                decoded.append((spark_time_ms, 1, NodeSeen(f"seen:{row.node}:{spark_time_ms // bucket_ms}",
                                                           spark_time_ms, row.node), row))
                continue
            try:
                event = decode(row.value)
            except Exception as exc:  # noqa: BLE001 - whatever the decoder says, the record is set aside
                if row.fact is None:  # a fact's record is set aside in its own group already
                    letters.append(dead_letter(row, str(exc) if isinstance(exc, DecodeError)
                                               else f"{CORRUPT_BODY}: {type(exc).__name__}: {exc}"))
                continue
            fact = row.fact is not None
            if (not fact and event.primary_server != primary) or event.event_time_ms != spark_time_ms:
                if not fact:
                    letters.append(dead_letter(row, (
                        f"{CORRUPT_BODY}: the contract's decoder reads primary {event.primary_server!r} at"
                        f" {event.event_time_ms} ms, Spark's reads {primary!r} at {spark_time_ms} ms")))
                continue
            decoded.append((spark_time_ms, int(fact), event, row))
    decoded.sort(key=lambda item: (item[0], item[1]))
    return [(event, row) for _, _, event, row in decoded], letters


def step_function(config: ModelConfig, topics: OutputTopics) -> Callable:
    """The function Spark calls per group: (key, batches of rows, GroupState) -> output rows."""
    model_holder: list[ShadowRedundancyModel] = []

    def step(key: tuple, batches: Iterator[pd.DataFrame], group: GroupState) -> Iterator[pd.DataFrame]:
        primary = str(key[0])
        if primary == DEAD_LETTER_GROUP:
            letters = [] if group.hasTimedOut else unusable_rows(batches)
            if letters:
                yield kafka_rows(letters, topics)
            return
        if not model_holder:  # built once per Python worker, not per call
            model_holder.append(ShadowRedundancyModel(config))
        collecting = gc.isenabled()
        gc.disable()
        try:
            records, state_rows = advance_group(model_holder[0], primary, batches, group, topics.state)
        finally:
            if collecting:
                gc.enable()
        if records:
            yield kafka_rows(records, topics)
        if state_rows is not None:
            yield state_rows

    return step


def advance_group(model: ShadowRedundancyModel, primary: str, batches: Iterator[pd.DataFrame], group: GroupState,
                  state_topic: str) -> tuple[list[Alert | RedeliveryCommand | DeadLetter], pd.DataFrame | None]:
    """One call's work on a primary's group (steps 1-3 above): the records it emits, and its rows for
    the state topic (streaming/state_rows.py; None without a state topic or when nothing changed)."""
    state = held_state(primary, group) if group.exists else model.new_state(primary)
    output, letters, decoded = Output(), [], []
    watermark = group.getCurrentWatermarkMs()
    watch = StateWatch(state, model.next_deadline(state), watermark) if state_topic else None
    if watermark > 0:
        output.extend(model.on_time(state, watermark))
    if not group.hasTimedOut:
        decoded, letters = decode_rows(batches, primary, model.liveness_bucket_ms)
        for event, row in decoded:
            try:
                output.extend(model.on_events(state, (event,)))
            except Exception as exc:  # noqa: BLE001 - one impossible event must not stop the twin
                letters.append(dead_letter(row, f"model refused the event: {type(exc).__name__}: {exc}"))
    blob = snapshot.dump(state)
    group.update((blob,))
    _held[primary] = (snapshot.token_of(blob), state)
    deadline = model.next_deadline(state)
    if deadline is not None:
        group.setTimeoutTimestamp(max(deadline, watermark, 1))
    own_events = [e for e, row in decoded if row.fact is None]
    state_rows = watch.rows(state, own_events, output, state_topic) if watch is not None else None
    return [*output.alerts, *output.commands, *letters], state_rows


def held_state(primary: str, group: GroupState) -> PrimaryState:
    """The group's stored state: the one this worker holds if it is the one stored, else loaded."""
    blob = group.get[0]
    held = _held.pop(primary, None)
    if held is not None and held[0] is not None and held[0] == snapshot.token_of(blob):
        return held[1]
    return snapshot.load(blob)


def apply_model(rows: DataFrame, config: ModelConfig, topics: OutputTopics) -> DataFrame:
    """Kafka rows (topic, key, value) of alerts, commands and dead letters from a watermarked frame.

    `rows`: primary_server (empty for ticks and unusable records), event_time (with a
    watermark), the Kafka record's value, key, topic, partition and offset, a reason for the
    unusable ones, and for the facts every group is fed, `fact` and the `node` they concern.
    """
    return (
        rows.groupBy("primary_server")
        .applyInPandasWithState(step_function(config, topics), OUTPUT_SCHEMA, STATE_SCHEMA, "append",
                                GroupStateTimeout.EventTimeTimeout)
    )
