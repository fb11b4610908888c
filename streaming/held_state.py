"""A group's stored state as a base snapshot plus a log of the calls since it, and the copy a
Python worker holds between calls.

The model is deterministic in its inputs, so a group's state is its last base snapshot
(`state.snapshot`) with the calls since it applied again: each call stores one log entry (the
watermark of the call and the events it applied, as bytes), which costs in proportion to the
call's events, not to the messages held. When the events logged since the base outnumber
`COMPACT_FACTOR` times the messages held, or the log's slots are full, the state is written as
a new base: that costs in proportion to the messages held, so each event pays for it a bounded
share, amortised.

Each stored version carries a random token, and each log entry the token of the version it
follows and of the one it makes. A worker keeps the states it stored (`_held`). When the
stored version is the one it holds, nothing is read back. When another worker stored calls
since (Spark hands a partition's task to either Python worker: measured, 38 of 62 calls moved),
it reads only those calls' entries, checks they follow the version it holds, and applies them
again (outputs discarded). Otherwise (a new base since, or a batch run again from an older
checkpoint after a failure) it rebuilds the state from the base and the whole log. A held state
is taken out of `_held` before it changes, so a call that dies midway leaves nothing that could
pass for a stored version.

`GroupStore` is what the engine must offer per group (streaming/operator.py adapts Spark's
`transformWithStateInPandas` handle; tests/streaming/harness.py keeps it in memory). The log is
`LOG_SLOTS` list variables, one entry each, so that one entry can be read without the others.
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass
from typing import Callable, Protocol

from state import snapshot
from state.records import PrimaryState

# Values travel to Spark's state server in pieces, through lists (Arrow batches, read whole): pyspark
# 4.0.0's server read a plain state request with one `read()`, which lost a large value under load
# (SPARK-53870; 4.1.1 reads it whole). Checkpoints hold their bases in these pieces.
PIECE_BYTES = 1 << 20
LOG_SLOTS = 8
COMPACT_FACTOR = 8
MIN_LOG_EVENTS = 1_000  # a shorter log is never compacted: a base costs a state write whatever its size


@dataclass(frozen=True)
class Version:
    """What the stored token says: its random id, the base's, the calls logged since the base and
    their events, and the timer registered for the group (-1: none)."""
    token: bytes
    base_token: bytes
    log_entries: int
    log_events: int
    timer_ms: int


@dataclass(frozen=True)
class Entry:
    """One logged call: the version it follows and the one it makes, its watermark, its events."""
    parent: bytes
    token: bytes
    watermark: int
    blob: bytes


class GroupStore(Protocol):
    """One group's stored values: the version, the base snapshot, the log's entries, the timers."""

    def version(self) -> Version | None: ...

    def set_version(self, version: Version) -> None: ...

    def base(self) -> bytes | None: ...

    def put_base(self, blob: bytes) -> None: ...

    def entry(self, slot: int) -> Entry | None: ...

    def put_entry(self, slot: int, entry: Entry) -> None: ...

    def register_timer(self, at_ms: int) -> None: ...

    def delete_timer(self, at_ms: int) -> None: ...

    def clear(self) -> None:
        """Forget the version, the base and the log (not the timers)."""


class MemoryGroupStore:
    """`GroupStore` in memory: for the operator harness (tests/streaming/harness.py) and benchmarks."""

    def __init__(self):
        self.stored_version: Version | None = None
        self.stored_base: bytes | None = None
        self.entries: dict[int, Entry] = {}
        self.timers: set[int] = set()

    def version(self) -> Version | None:
        return self.stored_version

    def set_version(self, version: Version) -> None:
        self.stored_version = version

    def base(self) -> bytes | None:
        return self.stored_base

    def put_base(self, blob: bytes) -> None:
        self.stored_base = blob

    def entry(self, slot: int) -> Entry | None:
        return self.entries.get(slot)

    def put_entry(self, slot: int, entry: Entry) -> None:
        self.entries[slot] = entry

    def register_timer(self, at_ms: int) -> None:
        self.timers.add(at_ms)

    def delete_timer(self, at_ms: int) -> None:
        self.timers.discard(at_ms)

    def clear(self) -> None:
        self.stored_version, self.stored_base, self.entries = None, None, {}

    def copy(self) -> "MemoryGroupStore":
        """What a checkpoint holds of this group."""
        copied = MemoryGroupStore()
        copied.stored_version, copied.stored_base = self.stored_version, self.stored_base
        copied.entries, copied.timers = dict(self.entries), set(self.timers)
        return copied


# One call as logged: its watermark and its events, each (fact, event time, node, bytes).
Call = tuple[int, list[tuple[str | None, int, str | None, bytes | None]]]
Replay = Callable[[PrimaryState, Call], None]
Loaded = Callable[[PrimaryState], PrimaryState]


@dataclass
class Held:
    version: Version
    state: PrimaryState


_held: dict[str, Held] = {}


def restore(primary: str, store: GroupStore, new_state: Callable[[], PrimaryState],
            replay: Replay, loaded: Loaded) -> tuple[PrimaryState, Version | None]:
    """The group's stored state and its version: the one this worker holds, brought up to date
    with the entries other workers logged since if they follow it, else rebuilt."""
    version = store.version()
    held = _held.pop(primary, None)
    if version is None:
        return new_state(), None
    if held is not None and held.version.token == version.token:
        return held.state, version
    if held is not None and held.version.base_token == version.base_token \
            and held.version.log_entries < version.log_entries:
        entries = [store.entry(slot) for slot in range(held.version.log_entries, version.log_entries)]
        if entries[0] is not None and entries[0].parent == held.version.token:
            for entry in entries:
                replay(held.state, call_of(entry))
            return held.state, version
    return rebuild(store, new_state, replay, loaded), version


def hold(primary: str, state: PrimaryState, version: Version | None) -> None:
    """Hold `state` again as the one stored at `version`: the call that restored it stored nothing."""
    if version is not None:
        _held[primary] = Held(version, state)


def drop(primary: str, store: GroupStore, version: Version, expired: bool) -> None:
    """Forget the group: its stored values, its timer (Spark deletes an `expired` one itself) and what is held."""
    _held.pop(primary, None)
    store.clear()
    if version.timer_ms >= 0 and not expired:
        store.delete_timer(version.timer_ms)


def rebuild(store: GroupStore, new_state: Callable[[], PrimaryState], replay: Replay,
            loaded: Loaded) -> PrimaryState:
    """The stored state as the base (or a new state), as `loaded` (the model) mends it, with the logged
    calls applied again."""
    version = store.version()
    base = store.base()
    state = loaded(snapshot.load(base)) if base is not None else new_state()
    for slot in range(version.log_entries if version is not None else 0):
        replay(state, call_of(store.entry(slot)))
    return state


def call_of(entry: Entry) -> Call:
    return entry.watermark, pickle.loads(entry.blob)


def store_call(primary: str, store: GroupStore, state: PrimaryState, version: Version | None, call: Call,
               timer_ms: int) -> None:
    """Store the state after `call`: its log entry, or a new base when the log outgrew the state
    or its slots; move the group's timer to `timer_ms` (-1: none); hold the state as stored."""
    token = os.urandom(16)
    entries = version.log_entries if version is not None else LOG_SLOTS
    log_events = (version.log_events if version is not None else 0) + len(call[1]) + 1
    held = len(state.messages) + len(state.promoted)
    if entries >= LOG_SLOTS or log_events > max(MIN_LOG_EVENTS, COMPACT_FACTOR * held):
        store.put_base(snapshot.dump(state))
        new = Version(token, token, 0, 0, timer_ms)
    else:
        blob = pickle.dumps(call[1], protocol=pickle.HIGHEST_PROTOCOL)
        store.put_entry(entries, Entry(version.token, token, call[0], blob))
        new = Version(token, version.base_token, entries + 1, log_events, timer_ms)
    old_timer = version.timer_ms if version is not None else -1
    if timer_ms != old_timer:
        if old_timer >= 0:
            store.delete_timer(old_timer)
        if timer_ms >= 0:
            store.register_timer(timer_ms)
    store.set_version(new)
    _held[primary] = Held(new, state)


def pieces(blob: bytes) -> list[bytes]:
    """`blob` cut for the state server (`PIECE_BYTES`)."""
    return [blob[i:i + PIECE_BYTES] for i in range(0, len(blob), PIECE_BYTES)] or [b""]
