"""The stateful operator: Spark's `applyInPandasWithState` driving the shadow-redundancy model.

One group per primary server (see state/README.md). Per call, the group's whole state is
read once and written once (a `state.snapshot` of the `PrimaryState`, one blob), never per message: the
cost measured in shared/engine-facts.md is per group and per state call. The rows carry the
events' original bytes, decoded here with the contract's codec (cheaper than passing Spark's
wide decoded struct through Arrow).

Order of work in a call, which makes the results the same as the reference replay's:
1. fire every deadline strictly before the current watermark (each at its own time);
2. apply this batch's events, in event-time order (they are all later than the watermark:
   Spark drops older rows before they reach us);
3. store the state and set the group's timeout to its next deadline. Spark calls back when
   the watermark passes it (strictly), and step 1 fires it then.

The empty group key gathers what is not a primary's event: clock ticks (which only move the
watermark) and records that cannot be used, which leave as dead letters with their reason.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterator

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from schemas.events import Alert, DeadLetter, RedeliveryCommand
from state import snapshot
from state.model import Output, ShadowRedundancyModel
from state.parameters import ModelConfig

OUTPUT_SCHEMA = "topic STRING, key BINARY, value BINARY"
STATE_SCHEMA = "blob BINARY"
DEAD_LETTER_GROUP = ""


@dataclass(frozen=True)
class OutputTopics:
    alerts: str
    commands: str
    dead_letters: str


def kafka_rows(records: list[Alert | RedeliveryCommand | DeadLetter], topics: OutputTopics) -> pd.DataFrame:
    """Records as Kafka rows (topic, key, value), encoded with the contract's codec."""
    from schemas.codec import default_codec, kafka_key

    codec = default_codec()
    topic_of = {Alert: topics.alerts, RedeliveryCommand: topics.commands, DeadLetter: topics.dead_letters}
    return pd.DataFrame({
        "topic": [topic_of[type(r)] for r in records],
        "key": [kafka_key(r) for r in records],
        "value": [codec.encode(r, check=False) for r in records],
    })


def dead_letters(batches: Iterator[pd.DataFrame]) -> list[DeadLetter]:
    """The unusable rows of the empty group as dead letters (clock ticks have no reason and are skipped)."""
    now_ms = int(time.time() * 1000)
    letters = []
    for batch in batches:
        bad = batch[batch["reason"].notna()]
        for row in bad.itertuples(index=False):
            letters.append(DeadLetter(
                original=bytes(row.value) if row.value is not None else b"",
                key=bytes(row.key) if row.key is not None else None,
                topic=row.topic, partition=int(row.partition), offset=int(row.offset),
                reason=row.reason, at_ms=now_ms,
            ))
    return letters


def step_function(config: ModelConfig, topics: OutputTopics) -> Callable:
    """The function Spark calls per group: (key, batches of rows, GroupState) -> output rows."""
    model_holder: list[ShadowRedundancyModel] = []

    def step(key: tuple, batches: Iterator[pd.DataFrame], group: GroupState) -> Iterator[pd.DataFrame]:
        from schemas.codec import default_codec

        primary = str(key[0])
        if primary == DEAD_LETTER_GROUP:
            letters = [] if group.hasTimedOut else dead_letters(batches)
            if letters:
                yield kafka_rows(letters, topics)
            return
        if not model_holder:  # built once per Python worker, not per call
            model_holder.append(ShadowRedundancyModel(config))
        model = model_holder[0]
        state = snapshot.load(group.get[0]) if group.exists else model.new_state(primary)
        output = Output()
        watermark = group.getCurrentWatermarkMs()
        if watermark > 0:
            output.extend(model.on_time(state, watermark))
        if not group.hasTimedOut:
            decode = default_codec().decode_event
            events = [decode(value) for batch in batches for value in batch["value"]]
            events.sort(key=lambda e: e.event_time_ms)
            output.extend(model.on_events(state, events))
        group.update((snapshot.dump(state),))
        deadline = model.next_deadline(state)
        if deadline is not None:
            group.setTimeoutTimestamp(max(deadline, watermark, 1))
        if output.alerts or output.commands:
            yield kafka_rows([*output.alerts, *output.commands], topics)

    return step


def apply_model(rows: DataFrame, config: ModelConfig, topics: OutputTopics) -> DataFrame:
    """Kafka rows (topic, key, value) of alerts, commands and dead letters from a watermarked frame.

    `rows`: primary_server (empty for ticks and unusable records), event_time (with a
    watermark), value (the record's bytes), and for unusable records key, topic, partition,
    offset and reason.
    """
    return (
        rows.groupBy("primary_server")
        .applyInPandasWithState(step_function(config, topics), OUTPUT_SCHEMA, STATE_SCHEMA, "append",
                                GroupStateTimeout.EventTimeTimeout)
    )
