"""The stateful operator: Spark's `transformWithStateInPandas` driving the shadow-redundancy model.

One group per primary server (see state/README.md). The rows carry the events' original bytes,
decoded here with the contract's codec (cheaper than passing Spark's wide decoded struct
through Arrow).

The contract's decoder has the final word. Spark's `from_avro` only sorts records into usable
or not, and reads the event time and primary server that drive the watermark and the grouping;
a record it accepts but the codec refuses (trailing bytes after the body, say), or that the
codec reads with another primary server or event time than Spark did, leaves here as a dead
letter with its reason, bytes, topic, partition and offset. So does an event the model itself
cannot apply: no single record can stop the query.

Order of work in a call, which makes the results the same as the reference engine's when each
group's events come in event-time order across batches (the case that differs is below):
1. fire every deadline strictly before the current watermark (each at its own time);
2. apply this batch's events, in event-time order. A row at or behind the call's watermark is
   not applied: a deadline after it may have fired already. Spark 4.0 drops the rows behind the
   PREVIOUS batch's watermark before they reach us; the rest of them leave here as dead letters
   with the reason `late event`. Both are counted in the batch's progress line and LATE_EVENTS
   alert (`LATE_LETTERS`, streaming/progress.py). So no event reaches the
   model more than the watermark delay behind the latest event time, and the model keeps the
   ids of the events it applied only that long (`ModelConfig.lateness_bound_ms`; or for the
   clock-skew allowance, when that is shorter);
3. store the call (streaming/held_state.py: one log entry of its events, or now and then a new
   base snapshot) and move the group's one timer to just after its next deadline. Spark calls
   `handleExpiredTimer` once the watermark reaches it, after the batch's rows, and step 1
   fires the deadline then;
4. when the call changed something an operator reads, the group's rows for the compacted
   state topic (streaming/state_rows.py: the server summary, the messages touched).

The one case that differs from the reference: applying an event fires the deadlines before its
time, so an event of a later batch that is earlier than one already applied (another server's
slower clock), yet ahead of the watermark, comes after a deadline that lies between the two (a
hub's acknowledgement at 1:29 of a message received at 1:00, in the batch after a peer's event
at 1:31: NOT_REDUNDANT at 1:30 for the 30 s delayed acknowledgement, where the reference,
which sorts everything first, says nothing). Holding each event until the watermark passes it
would remove that, at the cost of every decision waiting for the watermark; not done.

What a call costs follows its events, not the messages held (docs/performance.md): the worker
that stored a group's state holds it between calls and only appends the call's log entry;
another worker rebuilds it from the base snapshot and the log (streaming/held_state.py).
Python's cyclic garbage collector is paused during a call (a rebuilt state is millions of
objects, and each generation-2 pass walks all of them), and what a call keeps is frozen out of
the full collection Spark's worker runs after every task (`freeze_what_the_call_kept`).

The empty group key gathers what is not a primary's event: clock ticks (which only move the
watermark) and records that cannot be used, which leave as dead letters with their reason; it
keeps no state. Tests drive `TwinProcessor` with an in-memory store (tests/streaming/harness.py).
A worker reads its input by column slices (streaming/group_frames.py), not row by row as
pyspark 4.1.1 does.
"""

from __future__ import annotations

import base64
import functools
import gc
import json
import sys
import time
import zipimport
from dataclasses import dataclass, replace
from typing import Container, Iterator, NamedTuple

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, functions as F
from pyspark.sql.streaming import StatefulProcessor
from pyspark.sql.types import BinaryType, DataType, LongType, StructField, StructType

from schemas.codec import default_codec, kafka_key
from schemas.events import Alert, DeadLetter, Event, KafkaHeader, RedeliveryCommand
from schemas.jsonl import iso_time
from schemas.placement import alert_partition
from schemas.wire import CORRUPT_BODY, DecodeError
from state import collector
from state.facts import NodeSeen
from state.model import Output, ShadowRedundancyModel
from state.names import ServerNames
from state.parameters import ModelConfig
from state.records import PrimaryState
from streaming import group_frames
from streaming.held_state import LOG_SLOTS, Call, Entry, GroupStore, Version, drop, hold, pieces, restore, store_call
from streaming.state_rows import StateWatch, tombstones

group_frames.install()  # this module is imported in a Python worker before its first task reads

# `partition`: an alert's (schemas/placement.py); null for the other records, which Kafka's partitioner places by key
# `late`: the row is a dead letter of an event at or behind the watermark; counted (`LATE_LETTERS`), never written
OUTPUT_SCHEMA = "topic STRING, key BINARY, value BINARY, partition INT, late BOOLEAN"
# A row's `fact`: null for the group's own record; else a fact every group is fed (state/facts.py).
FACT_STARTED, FACT_SEEN = "started", "seen"


def columns(*named: tuple[str, DataType]) -> StructType:
    """A state variable's schema as an object: pyspark 4.1.1 asks the JVM to parse one given as a string, twice
    per variable, and registers the variables for each task (docs/performance.md, "Schemas as objects")."""
    return StructType([StructField(name, kind) for name, kind in named])


# Each as the DDL the checkpoints were written with parses it: "token BINARY, base_token BINARY, ...".
VERSION_SCHEMA = columns(("token", BinaryType()), ("base_token", BinaryType()), ("log_entries", LongType()),
                         ("log_events", LongType()), ("timer_ms", LongType()))
BASE_SCHEMA = columns(("piece", BinaryType()))
LOG_SCHEMA = columns(("parent", BinaryType()), ("token", BinaryType()), ("watermark", LongType()),
                     ("piece", BinaryType()))
DEAD_LETTER_GROUP = ""
LATE_EVENT = "late event"  # the reason's kind, for a row at or behind its call's watermark
# The observation (Spark's `observe`) counting them in each batch's progress, as {"late_letters": N}
LATE_LETTERS = "set_aside_late"


@dataclass(frozen=True)
class OutputTopics:
    alerts: str
    commands: str
    dead_letters: str
    state: str = ""  # the compacted state topic (streaming/state_rows.py); empty: no state rows
    alert_partitions: int = 1  # how many of the alerts topic's partitions the alerts are placed on


def kafka_rows(records: list[Alert | RedeliveryCommand | DeadLetter], topics: OutputTopics) -> pd.DataFrame:
    """Records as Kafka rows (topic, key, value, partition), encoded with the contract's codec; an alert on
    the partition of its primary server (schemas/placement.py)."""
    codec = default_codec()
    topic_of = {Alert: topics.alerts, RedeliveryCommand: topics.commands, DeadLetter: topics.dead_letters}
    return pd.DataFrame({
        "topic": [topic_of[type(r)] for r in records],
        "key": [kafka_key(r) for r in records],
        "value": [codec.encode(r) for r in records],
        "partition": pd.array([alert_partition(r, topics.alert_partitions) if type(r) is Alert else None
                               for r in records], dtype="Int32"),
        "late": [type(r) is DeadLetter and r.reason.startswith(LATE_EVENT) for r in records],
    })


def dead_letter(row, reason: str) -> DeadLetter:
    """A dead letter for one input row (its value, key, topic, partition, offset, headers, Kafka timestamp),
    with `reason`."""
    return DeadLetter(
        original=bytes(row.value) if row.value is not None else b"",
        key=bytes(row.key) if row.key is not None else None,
        topic=row.topic, partition=int(row.partition), offset=int(row.offset),
        reason=reason, at_ms=int(time.time() * 1000), headers=kafka_headers(row.headers),
        timestamp_ms=None if row.timestamp_ms is None or pd.isna(row.timestamp_ms) else int(row.timestamp_ms),
    )


def kafka_headers(headers: str | None) -> tuple[KafkaHeader, ...]:
    """A row's Kafka headers, from Spark's JSON of them (`[{"key": "k", "value": "base64"}, ...]`, a null value
    left out; streaming.twin), or none."""
    if not isinstance(headers, str):
        return ()
    return tuple(KafkaHeader(h["key"], base64.b64decode(h["value"]) if "value" in h else None)
                 for h in json.loads(headers))


def unusable_rows(batches: Iterator[pd.DataFrame]) -> list[DeadLetter]:
    """The empty group's rows with a reason, as dead letters (clock ticks have none and are skipped)."""
    return [dead_letter(row, row.reason) for batch in batches for row in input_rows(batch) if pd.notna(row.reason)]


class InputRow(NamedTuple):
    """What the operator reads of an input row besides its event time."""
    value: bytes | None
    key: bytes | None
    topic: str | None
    partition: int | None
    offset: int | None
    fact: str | None
    node: str | None
    reason: str | None
    headers: str | None  # the record's Kafka headers as JSON (streaming.twin), None when it has none
    timestamp_ms: float | None  # its Kafka timestamp


def input_rows(batch: pd.DataFrame) -> Iterator[InputRow]:
    """The rows of a batch, column by column (`itertuples` builds a Timestamp per row: over a quarter
    of the decoding time, measured)."""
    size = len(batch)
    columns = [batch[name].tolist() if name in batch else [None] * size for name in InputRow._fields]
    return map(_input_row, zip(*columns))


_input_row = functools.partial(tuple.__new__, InputRow)  # InputRow._make without a Python call per row


def late_reason(event_time_ms: int, watermark: int) -> str:
    return (f"{LATE_EVENT}: event time {iso_time(event_time_ms)} is at or behind the watermark"
            f" {iso_time(watermark)} (the latest event time less the watermark delay), where deadlines"
            " may have fired already: not applied")


def decode_rows(batches: Iterator[pd.DataFrame], primary: str, bucket_ms: int, watermark: int = 0,
                applied: Container[str] = (), names: ServerNames | None = None,
                ) -> tuple[list[tuple[Event, object]], list[DeadLetter]]:
    """A group's rows as (event, row) in event-time order, its own events before the facts at equal
    times, by the contract's codec, their servers spelled as `names` spells them; what it refuses, or reads otherwise than Spark did (another
    group, another event time), or what is at or behind `watermark` (when positive), as dead
    letters. Fact rows become the facts of `state.facts`; a fact row that cannot be used is
    dropped (its own row is a dead letter in its own group). Of the NodeSeen rows (one per row of
    every server: streaming.twin.shared_facts) only the earliest of each id comes out, unless the
    model `applied` it already: the one the model applies when it remembers applied ids. Rows of
    equal time keep their order. The rows are judged by column, not one at a time (a loop per row
    around the codec cost some 40 % on top of decoding: docs/performance.md)."""
    decode = default_codec().decode_events
    times: list[np.ndarray] = []  # of the rows kept, batch by batch: event time, fact (0 or 1), place
    facts: list[np.ndarray] = []
    places: list[np.ndarray] = []
    events: list[Event] = []
    rows: list = []
    letters: list[DeadLetter] = []
    first_seen: dict[str, tuple[int, int, object]] = {}
    position = 0  # a row's place among all the call's rows, from 1
    for batch in batches:
        spark_times_ms = batch["event_time"].astype("int64").to_numpy() // 1_000_000
        positions = np.arange(position + 1, position + 1 + len(batch))
        position += len(batch)
        others = _earliest_seen(batch, spark_times_ms, positions, bucket_ms, watermark, first_seen)
        if others is not None:
            batch, spark_times_ms, positions = batch[others], spark_times_ms[others], positions[others]
        if not len(batch):
            continue
        batch_events, failed = decode(batch["value"].tolist())
        if names is not None:
            respelled = names.respelled
            batch_events = [e if isinstance(e, Exception) else respelled(e) for e in batch_events]
        readable = batch_events if not failed else [_UNREADABLE if isinstance(e, Exception) else e for e in batch_events]
        fact = batch["fact"].to_numpy(dtype=object) != None if "fact" in batch else np.zeros(len(batch), bool)  # noqa: E711
        unread = np.zeros(len(batch), bool)
        unread[failed] = True
        other = ~unread & (np.array([e.event_time_ms for e in readable], dtype=np.int64) != spark_times_ms)
        other |= ~unread & ~fact & (np.array([e.primary_server for e in readable], dtype=object) != primary)
        late = ~(unread | other) & (spark_times_ms <= watermark) if watermark > 0 else np.zeros(len(batch), bool)
        keep = ~(unread | other | late)
        batch_rows = list(input_rows(batch))
        for at in (~keep & ~fact).nonzero()[0].tolist():  # a fact's record is set aside in its own group already
            row, event = batch_rows[at], batch_events[at]
            letters.append(dead_letter(row, (
                (str(event) if isinstance(event, DecodeError) else f"{CORRUPT_BODY}: {type(event).__name__}: {event}")
                if unread[at] else
                (f"{CORRUPT_BODY}: the contract's decoder reads primary {event.primary_server!r} at"
                 f" {event.event_time_ms} ms, Spark's reads {primary!r} at {int(spark_times_ms[at])} ms")
                if other[at] else late_reason(int(spark_times_ms[at]), watermark))))
        if keep.all():
            events += batch_events
            rows += batch_rows
        else:
            kept = keep.nonzero()[0].tolist()
            events += [batch_events[at] for at in kept]
            rows += [batch_rows[at] for at in kept]
        times.append(spark_times_ms[keep])
        facts.append(fact[keep])
        places.append(positions[keep])
    seen = [(NodeSeen(seen_id, time_ms, row.node), time_ms, at, row)
            for seen_id, (time_ms, at, row) in first_seen.items() if seen_id not in applied]
    if seen:
        events += [node_seen for node_seen, _, _, _ in seen]
        rows += [row for _, _, _, row in seen]
        times.append(np.array([time_ms for _, time_ms, _, _ in seen], dtype=np.int64))
        facts.append(np.ones(len(seen), bool))
        places.append(np.array([at for _, _, at, _ in seen], dtype=np.int64))
    if not events:
        return [], letters
    # by event time, the group's own events first, the rows' order: places are unique
    order = np.lexsort((np.concatenate(places), np.concatenate(facts), np.concatenate(times))).tolist()
    return [(events[at], rows[at]) for at in order], letters


class _Unreadable(NamedTuple):
    """In the place of a record the codec refused, while the rows are compared by column."""
    event_time_ms: int = -1
    primary_server: None = None


_UNREADABLE = _Unreadable()


def _earliest_seen(batch: pd.DataFrame, times_ms: np.ndarray, positions: np.ndarray, bucket_ms: int,
                   watermark: int, first_seen: dict[str, tuple[int, int, object]]) -> np.ndarray | None:
    """Keeps in `first_seen` the earliest NodeSeen row of each id in `batch` (by time, then place)
    that is not at or behind `watermark`, as (time, position, row), unless an earlier one is there;
    returns which rows are not NodeSeen rows (a boolean array), or None when none is one.
    With P declared servers P of every P + 1 rows are NodeSeen rows, and few of them count: they
    are sifted by column, not row by row (row by row, with 8 declared servers, they took about a
    fifth of the worker: docs/performance.md, "Declared servers")."""
    if "fact" not in batch:
        return None
    seen = (batch["fact"] == FACT_SEEN).to_numpy()
    if not seen.any():
        return None
    at = seen.nonzero()[0]
    if watermark > 0:
        at = at[times_ms[at] > watermark]
    if len(at):
        candidates = pd.DataFrame({"time": times_ms[at], "bucket": times_ms[at] // bucket_ms, "at": at,
                                   "node": batch["node"].to_numpy()[at]})
        earliest = candidates.sort_values("time", kind="stable").drop_duplicates(["node", "bucket"])
        rows = input_rows(batch.iloc[earliest["at"].to_numpy()])
        for row, time_ms, bucket, at_row in zip(rows, earliest["time"].tolist(), earliest["bucket"].tolist(),
                                                earliest["at"].tolist()):
            seen_id = f"seen:{row.node}:{bucket}"
            first = first_seen.get(seen_id)
            if first is None or time_ms < first[0]:
                first_seen[seen_id] = (time_ms, int(positions[at_row]), row)
    return ~seen


def replay_call(model: ShadowRedundancyModel, state: PrimaryState, call: Call) -> None:
    """A logged call applied again to `state`, its outputs discarded (streaming.held_state)."""
    apply_call(model, state, call[0], [(event, None) for event in logged_events(call, model.liveness_bucket_ms,
                                                                                 model.config.names)])


def apply_call(model: ShadowRedundancyModel, state: PrimaryState, watermark: int,
               decoded: list[tuple[Event, object]]) -> tuple[Output, list[tuple[object, Exception]]]:
    """Steps 1-2 above: deadlines before `watermark`, then the events; the rows the model refused.
    The events go to the model in one run; should it raise on one, that event's decisions (and
    those of the deadlines it fired) are dropped, its row is refused, and the run goes on after it."""
    output, refused = Output(), []
    if watermark > 0:
        output.extend(model.on_time(state, watermark))
    events = [event for event, _ in decoded]
    at: list = [-1, None]  # the event last handed to the model, and where the output stood before it
    start = 0
    while start < len(events):
        at[0] = -1
        try:
            model.on_events(state, _fed(events, start, output, at), output)
            break
        except Exception as exc:  # noqa: BLE001 - one impossible event must not stop the twin
            if at[0] < 0:  # it raised before taking an event: the next one is refused
                at[0] = start
            else:
                output.cut(at[1])
            refused.append((decoded[at[0]][1], exc))
            start = at[0] + 1
    return output, refused


def _fed(events: list[Event], start: int, output: Output, at: list) -> Iterator[Event]:
    """`events` from `start`, keeping in `at` the index of the one last taken and where `output` stood before it."""
    alerts, commands, outcomes = output.alerts, output.commands, output.outcomes
    for i in range(start, len(events)):
        at[0], at[1] = i, (len(alerts), len(commands), len(outcomes))
        yield events[i]


def logged_events(call: Call, bucket_ms: int, names: ServerNames) -> list[Event]:
    """The events of a logged call, rebuilt from their bytes as `decode_rows` built them."""
    decode, respelled = default_codec().decode_event, names.respelled
    return [NodeSeen(f"seen:{node}:{time_ms // bucket_ms}", time_ms, node) if fact == FACT_SEEN
            else respelled(decode(value)) for fact, time_ms, node, value in call[1]]


def advance_group(model: ShadowRedundancyModel, primary: str, batches: Iterator[pd.DataFrame], watermark: int,
                  store: GroupStore, state_topic: str, expired: bool = False,
                  ) -> tuple[list[Alert | RedeliveryCommand | DeadLetter], pd.DataFrame | None]:
    """One call's work on a primary's group (steps 1-3 above): the records it emits, and its rows for
    the state topic (streaming/state_rows.py; None without a state topic or when nothing changed).
    `expired`: called for the group's timer, which Spark deletes itself. A call with no event to
    apply and no deadline due stores nothing (with declared servers every group is called in
    every batch, for the NodeSeen rows of the others' events)."""
    state, version = restore(primary, store, lambda: model.new_state(primary),
                             lambda s, call: replay_call(model, s, call), model.loaded)
    if expired and version is not None:
        version = replace(version, timer_ms=-1)
    due = model.next_deadline(state)
    decoded, letters = ([], []) if expired else decode_rows(batches, primary, model.liveness_bucket_ms, watermark,
                                                                    state.seen_ids, model.config.names)
    if not (decoded or expired) and (due is None or due >= watermark):
        hold(primary, state, version)  # nothing to apply and nothing due (facts the group knows): as stored
        return letters, None
    own_events = [e for e, row in decoded if row.fact is None]
    watch = StateWatch(state, due, watermark, own_events) if state_topic else None
    output, refused = apply_call(model, state, watermark, decoded)
    letters += [dead_letter(row, f"model refused the event: {type(exc).__name__}: {exc}") for row, exc in refused]
    call = (watermark, [(row.fact, event.event_time_ms, row.node, None if row.fact == FACT_SEEN else bytes(row.value))
                        for event, row in decoded])
    deadline = model.next_deadline(state)
    # Spark fires a timer once the watermark reaches it; the model's deadlines fire strictly before it.
    store_call(primary, store, state, version, call, -1 if deadline is None else max(deadline, watermark, 1) + 1)
    state_rows = watch.rows(state, own_events, output, state_topic) if watch is not None else None
    return [*output.alerts, *output.commands, *letters], state_rows


def forget_zip_importers() -> None:
    """Spark's Python worker calls `importlib.invalidate_caches()` before every task, and on Python
    3.11 each cached zip importer then re-reads its archive's whole directory: spark-core's jar
    (which Spark puts on the workers' path, though no module of ours comes from it) and pyspark.zip
    once per package imported from it, about 180 ms per task (docs/performance.md). The jar leaves
    the path and the zip importers leave the cache; an import that needs one makes it again."""
    for entry in [entry for entry in sys.path if entry.endswith(".jar")]:
        sys.path.remove(entry)
    for entry, finder in list(sys.path_importer_cache.items()):
        if isinstance(finder, zipimport.zipimporter):
            del sys.path_importer_cache[entry]


UNFREEZE_EVERY = 200  # calls: how often a full collection may look at the frozen objects again
_calls_since_unfrozen = 0


def freeze_what_the_call_kept() -> None:
    """Spark's worker runs a full collection after every task (pyspark/daemon.py), which walks every
    object the worker holds: the held states, millions of objects at a million messages (11 % of a
    worker's time at ~120,000 held, measured). After a call, the call's own cyclic garbage is
    collected (the young generation: the collector is paused during a call, so that is everything
    the call allocated), and what survived is frozen out of later collections. A frozen object that
    later becomes garbage is freed by its reference count; so that a cycle among them is not kept
    for ever, every UNFREEZE_EVERY calls they are unfrozen, for the next full collection to walk."""
    global _calls_since_unfrozen
    gc.collect(0)
    _calls_since_unfrozen += 1
    if _calls_since_unfrozen >= UNFREEZE_EVERY:
        _calls_since_unfrozen = 0
        gc.unfreeze()
    else:
        gc.freeze()


class TwinProcessor(StatefulProcessor):
    """What `transformWithStateInPandas` runs per group: the model over the group's stored state.
    No event reaches the model more than `watermark_delay_ms` behind the latest event time (step 2
    above), which bounds how long it keeps the ids of the events it applied (a new delay on an old
    checkpoint: docs/performance.md, "Applied ids")."""

    def __init__(self, config: ModelConfig, topics: OutputTopics, watermark_delay_ms: int):
        self.config, self.topics = replace(config, lateness_bound_ms=watermark_delay_ms), topics
        self.model: ShadowRedundancyModel | None = None
        self.store: GroupStore | None = None

    def init(self, handle) -> None:
        forget_zip_importers()
        self.store = SparkGroupStore(handle)
        if self.model is None:
            self.model = ShadowRedundancyModel(self.config)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        return self.call(str(key[0]), rows, timerValues.getCurrentWatermarkInMs(), expired=False)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[pd.DataFrame]:
        return self.call(str(key[0]), iter(()), timerValues.getCurrentWatermarkInMs(), expired=True)

    def call(self, primary: str, rows: Iterator[pd.DataFrame], watermark: int,
             expired: bool) -> Iterator[pd.DataFrame]:
        if primary == DEAD_LETTER_GROUP:
            letters = [] if expired else unusable_rows(rows)
            if letters:
                yield kafka_rows(letters, self.topics)
            return
        spelled = self.config.names.spelling(primary)
        with collector.paused():
            try:
                if spelled != primary:
                    records, state_rows = [], retire_group(self.model, primary, spelled, self.store,
                                                           self.topics.state, expired)
                else:
                    records, state_rows = advance_group(self.model, primary, rows, max(watermark, 0), self.store,
                                                        self.topics.state, expired)
            finally:
                freeze_what_the_call_kept()
        if records:
            yield kafka_rows(records, self.topics)
        if state_rows is not None:
            yield state_rows

    def close(self) -> None:
        pass


def retire_group(model: ShadowRedundancyModel, group: str, spelled: str, store: GroupStore, state_topic: str,
                 expired: bool) -> pd.DataFrame | None:
    """A group no row reaches any more: a twin before server names were read in any case (state/names.py)
    grouped its server as its events spelled it, and the group's timer has come. Its server's events now
    reach the group `spelled`, which does not know what this one held, and this one would decide alone on
    what that one hears of: it is forgotten (no state, no timer left), with a tombstone on the state topic
    for each of its records, and one line on stderr that says what was dropped."""
    state, version = restore(group, store, lambda: model.new_state(group),
                             lambda s, call: replay_call(model, s, call), model.loaded)
    if version is None:
        return None
    drop(group, store, version, expired)
    print(f"shadowtwin: the checkpoint's group {group!r} was written by an earlier twin, which grouped servers"
          f" as their events spelled them; {group!r} is now {spelled!r}, whose group started afresh: {group!r}"
          f" is forgotten, and the {len(state.messages)} messages in flight and {len(state.promoted)} promoted"
          f" it held are not decided on (README.md, 'Versions')", file=sys.stderr, flush=True)
    return tombstones(state, state_topic) if state_topic else None


class SparkGroupStore:
    """`streaming.held_state.GroupStore` on Spark's processor handle (for the current group)."""

    def __init__(self, handle):
        self.handle = handle
        self.token = handle.getValueState("version", VERSION_SCHEMA)
        self.base_pieces = handle.getListState("base", BASE_SCHEMA)
        self.slots = [handle.getListState(f"log_{slot}", LOG_SCHEMA) for slot in range(LOG_SLOTS)]

    def version(self) -> Version | None:
        value = self.token.get()
        return None if value is None else Version(bytes(value[0]), bytes(value[1]), *(int(v) for v in value[2:]))

    def set_version(self, version: Version) -> None:
        self.token.update((version.token, version.base_token, version.log_entries, version.log_events,
                           version.timer_ms))

    def base(self) -> bytes | None:
        found = [bytes(row[0]) for row in self.base_pieces.get()]
        return b"".join(found) if found else None

    def put_base(self, blob: bytes) -> None:
        self.base_pieces.put([(piece,) for piece in pieces(blob)])

    def entry(self, slot: int) -> Entry | None:
        rows = list(self.slots[slot].get())
        if not rows:
            return None
        parent, token, watermark, _ = rows[0]
        return Entry(bytes(parent), bytes(token), int(watermark), b"".join(bytes(row[3]) for row in rows))

    def put_entry(self, slot: int, entry: Entry) -> None:
        self.slots[slot].put([(entry.parent, entry.token, entry.watermark, piece) for piece in pieces(entry.blob)])

    def register_timer(self, at_ms: int) -> None:
        self.handle.registerTimer(at_ms)

    def delete_timer(self, at_ms: int) -> None:
        self.handle.deleteTimer(at_ms)

    def clear(self) -> None:
        for stored in (self.token, self.base_pieces, *self.slots):
            stored.clear()


def apply_model(rows: DataFrame, config: ModelConfig, topics: OutputTopics, watermark_delay_ms: int) -> DataFrame:
    """Kafka rows (topic, key, value, partition) of alerts, commands and dead letters from a watermarked frame;
    each batch's progress counts the late events set aside among them (observed as `LATE_LETTERS`).

    `rows`: primary_server (empty for ticks and unusable records), event_time (with a
    watermark), the Kafka record's value, key, topic, partition and offset, a reason for the
    unusable ones, and for the facts every group is fed, `fact` and the `node` they concern.
    `watermark_delay_ms`: the delay of that watermark.
    """
    out = rows.groupBy("primary_server").transformWithStateInPandas(
        TwinProcessor(config, topics, watermark_delay_ms), OUTPUT_SCHEMA, "Append", "EventTime")
    return out.observe(LATE_LETTERS, F.count_if("late").alias("late_letters")).drop("late")
