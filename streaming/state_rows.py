"""The twin's state as Kafka rows for the compacted state topic (what `where`, `server`, the
metrics and the live page read): per operator call, the group's server summary and a record
per message the call touched, a tombstone for one it no longer holds (state/summary.py). A
message that came and went within one call gets no record at all: its key never had a value.

Why a topic written by the operator, not Spark's state data source (`format("statestore")`):
the operator already holds the group's state, decoded, when it has just changed, so a summary
costs one pass over that group's messages in a call that happens anyway; the rows are keyed,
so compaction keeps one per server and per message in flight, and tombstones drop the released
ones. The state data source reads a checkpoint with a batch job of its own (a Spark session
per query, seconds to start) and would hand back our opaque pickled blob, to be decoded by the
reader; it also reads only committed batch versions, while a topic is read by any Kafka client
(`where` without a JVM, Grafana's exporter, kcat: the records are JSON).
"""

from __future__ import annotations

import pandas as pd

from schemas.events import Event
from state.model import Output
from state.records import DeadlineKind, PrimaryState
from state.summary import (NAMING_OTHERS, due_message_deadlines, state_records, summary_records, to_json,
                           touched_messages)


class StateWatch:
    """One operator call's view of its group, taken before the call changes the state: the promoted
    messages it held and when each is forgotten (a promoted record may be forgotten, or its forgetting
    moved, without a decision, in a call only facts reach: its record must go or follow), whether a
    deadline is due and which messages' own deadlines are (a deadline may change the state without a
    decision: an expiry moved on to Safety Net's hold, say), which messages the call's events name
    that the group does not hold yet, and which shadows are to see the primary's new queue database (when
    another one is, the copies it holds are to be resubmitted, their discard notifications gone, with no decision:
    rare, at a restart, so their records are all written again)."""

    __slots__ = ("promoted", "fires", "due", "named", "new", "awaiting_new_database")

    def __init__(self, state: PrimaryState, next_deadline: int | None, watermark_ms: int,
                 own_events: list[Event] = ()):
        self.promoted = dict(state.deadlines.by_kind[DeadlineKind.FORGET_PROMOTED])  # every record has one
        self.fires = next_deadline is not None and next_deadline < watermark_ms
        self.due = due_message_deadlines(state, watermark_ms) if self.fires else set()
        # the events are walked once for the messages they name (`rows` takes them from here)
        self.named = {m.internal_id for e in own_events if (m := e.message) is not None}
        self.new = self.named.difference(state.messages, self.promoted)
        self.awaiting_new_database = {shadow for shadow, pair in state.pairs.items() if pair.db_change_pending}

    def rows(self, state: PrimaryState, own_events: list[Event], output: Output, topic: str) -> pd.DataFrame | None:
        """The state rows of the call, or None when it changed nothing an operator reads (only facts came)."""
        forgotten = state.deadlines.by_kind[DeadlineKind.FORGET_PROMOTED]
        awaiting = [pair.held for shadow, pair in state.pairs.items()
                    if pair.db_change_pending and shadow not in self.awaiting_new_database]
        if not (own_events or self.fires or output.alerts or output.commands or output.outcomes
                or forgotten != self.promoted or awaiting):
            return None
        gone = [i for i, at_ms in self.promoted.items() if forgotten.get(i) != at_ms]  # or forgotten at another time
        touched = touched_messages([e for e in own_events if e.__class__ in NAMING_OTHERS], output.alerts,
                                   output.commands, [*(o.ref.internal_id for o in output.outcomes), *gone, *self.due])
        touched |= self.named
        for held in awaiting:
            touched |= held
        touched -= {i for i in self.new if i not in state.messages and i not in state.promoted}  # came and went
        records = summary_records(state, touched)
        return keyed_rows(topic, [key.encode() for key, _ in records], [to_json(record) for _, record in records])


def tombstones(state: PrimaryState, topic: str) -> pd.DataFrame:
    """Tombstones for every record of the group: its server summary and each message it holds."""
    keys = [key.encode() for key, _ in state_records(state)]
    return keyed_rows(topic, keys, [None] * len(keys))


def keyed_rows(topic: str, keys: list[bytes], values: list[bytes | None]) -> pd.DataFrame:
    """The operator's output rows (streaming/operator.py) for `topic`, placed by their keys (no partition)."""
    return pd.DataFrame({"topic": [topic] * len(keys), "key": keys, "value": values,
                         "partition": pd.array([None] * len(keys), dtype="Int32"), "late": [False] * len(keys)})
