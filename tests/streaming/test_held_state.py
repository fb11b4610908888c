"""A group's stored state as a base snapshot plus a log of calls (streaming.held_state): the state a
worker holds is used only while it is the stored version; any other worker, or a batch run again
from an older checkpoint, rebuilds it from the base and the log and decides the same."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from schemas.events import AlertType
from state import snapshot
from state.records import DeadlineKind
from streaming import held_state
from tests.state.scenario import DAY, HOUR, Org, at
from tests.state.test_snapshot import as_format_5
from tests.state.timelines import at_risk_then_the_primary_returns_with_the_same_database_and_cannot_deliver
from tests.streaming.harness import OperatorHarness
from tests.streaming.test_operator import FAST, SERVERS, stranded


def busy_then_stranded(org: Org, messages: int = 30):
    """mbx01 takes `messages`, all shadowed on mbx02, most delivered; then falls silent with the rest."""
    events = []
    for i in range(messages):
        mid = f"b{i}"
        events += [*org.received("mbx01", mid, i * 0.1), *org.shadowed("mbx01", "mbx02", mid, i * 0.1)]
        if i % 3:
            events += org.delivered("mbx01", mid, "mailbox", i * 0.1 + 0.05)
    return [*events, *stranded(org)]


def run(events, per_batch: int, forget_between_batches: bool = False) -> OperatorHarness:
    harness = OperatorHarness(FAST, servers=SERVERS)
    ordered = sorted(events, key=lambda e: e.event_time_ms)
    batches = [ordered[start:start + per_batch] for start in range(0, len(ordered), per_batch)]
    for batch in [*batches, None]:
        if batch is None:
            harness.advance(ordered[-1].event_time_ms + 11 * 60_000)
        else:
            harness.events(batch)
        if forget_between_batches:  # every call meets a worker that holds nothing
            for key in harness.stores:
                held = held_state._held.get(key)
                assert held is None or harness.state_of(key) == held.state, f"{key}: the log rebuilds another state"
            held_state._held.clear()
    return harness


def decisions(harness: OperatorHarness):
    return [a.alert_id for a in harness.alerts], [c.command_id for c in harness.commands]


def checkpoint(harness: OperatorHarness) -> dict:
    """What Spark's checkpoint holds before a batch: the stores, the watermark, the harness's facts."""
    return {"stores": {k: s.copy() for k, s in harness.stores.items()}, "watermark_ms": harness.watermark_ms,
            "max_event_ms": harness.max_event_ms, "late_before_ms": harness.late_before_ms}


def test_a_batch_run_again_from_the_checkpoint_decides_again_what_it_decided():
    events = stranded(Org())
    first, second = events[:4], events[4:]
    harness = OperatorHarness(FAST, servers=SERVERS)
    harness.events(first)
    before = checkpoint(harness)
    harness.events(second)
    harness.advance(events[-1].event_time_ms + 11 * 60_000)
    decided = decisions(harness)
    assert len(decided[1]) == 2
    # Spark runs the second batch again (its output was never committed): the worker still
    # holds the state it wrote after it, which already applied those events.
    vars(harness).update(before, alerts=[], commands=[])
    harness.events(second)
    harness.advance(events[-1].event_time_ms + 11 * 60_000)
    assert decisions(harness) == decided


def test_a_warm_call_reads_nothing_back(monkeypatch):
    events = stranded(Org())
    harness = OperatorHarness(FAST, servers=SERVERS)
    harness.events(events[:4])
    rebuilt = []
    monkeypatch.setattr(held_state, "rebuild", lambda *args: rebuilt.append(args))
    harness.events(events[4:])
    assert rebuilt == []
    assert harness.stores["mbx01"].version().log_entries == 1  # the first call wrote a base, this one an entry


@pytest.mark.parametrize("min_log_events", [0, 1_000])
def test_a_cold_start_from_base_and_log_decides_what_a_warm_worker_decides(monkeypatch, min_log_events):
    monkeypatch.setattr(held_state, "MIN_LOG_EVENTS", min_log_events)  # 0: compaction as soon as due
    events = busy_then_stranded(Org())
    warm = run(events, per_batch=7)
    cold = run(events, per_batch=7, forget_between_batches=True)
    assert decisions(cold) == decisions(warm)
    assert len(decisions(warm)[1]) >= 2
    assert cold.state_of("mbx01") == warm.state_of("mbx01")


def test_the_log_is_compacted_into_a_base_once_it_outgrows_the_state(monkeypatch):
    monkeypatch.setattr(held_state, "MIN_LOG_EVENTS", 0)
    writes = []
    real_dump = snapshot.dump
    monkeypatch.setattr(snapshot, "dump", lambda state, token=None: writes.append(len(state.messages))
                        or real_dump(state, token))
    events = busy_then_stranded(Org(), messages=60)
    harness = run(events, per_batch=5)
    writes = writes[:-len(harness.stores)]  # `harness.states` dumps each group once more, at the end
    version = harness.stores["mbx01"].version()
    held = len(harness.state_of("mbx01").messages)
    assert version.log_events <= held_state.COMPACT_FACTOR * held  # the log never outgrows the state
    # A base is written when the logged events outnumber the messages held: rarely, not per call.
    calls = len(range(0, len(events), 5)) * len(harness.stores)
    assert len(harness.stores) < len(writes) < calls / 2


def test_a_worker_catches_up_with_the_calls_another_worker_logged(monkeypatch):
    events = busy_then_stranded(Org())
    expected = decisions(run(events, per_batch=7))
    monkeypatch.setattr(held_state, "LOG_SLOTS", 10_000)  # no new base: each worker's held state stays useful
    workers = [{}, {}]
    rebuilt = []
    real_rebuild = held_state.rebuild
    monkeypatch.setattr(held_state, "rebuild", lambda store, *args: rebuilt.append(
        (id(held_state._held), id(store))) or real_rebuild(store, *args))
    harness = OperatorHarness(FAST, servers=SERVERS)
    ordered = sorted(events, key=lambda e: e.event_time_ms)
    for n, start in enumerate(range(0, len(ordered), 7)):
        monkeypatch.setattr(held_state, "_held", workers[n % 2])  # Spark alternates the Python workers
        harness.events(ordered[start:start + 7])
    harness.advance(ordered[-1].event_time_ms + 11 * 60_000)
    assert decisions(harness) == expected
    # Each worker rebuilds a group once, when it first meets it; then it catches up.
    assert len(rebuilt) == len(set(rebuilt)) <= 2 * len(harness.stores)


def test_a_worker_that_dies_in_the_middle_of_a_compaction_changes_no_decision(monkeypatch):
    monkeypatch.setattr(held_state, "MIN_LOG_EVENTS", 0)
    events = sorted(busy_then_stranded(Org()), key=lambda e: e.event_time_ms)
    expected = decisions(run(events, per_batch=7))
    harness = OperatorHarness(FAST, servers=SERVERS)
    died = 0
    for start in range(0, len(events), 7):
        batch = events[start:start + 7]
        before = {**checkpoint(harness), "alerts": list(harness.alerts), "commands": list(harness.commands)}
        store = harness.stores.get("mbx01")
        if store is not None and died == 0 and store.version().log_entries > 2:
            real_put = store.put_base

            def dies(blob):  # the new base is written, the version not yet: the batch fails
                real_put(blob)
                raise RuntimeError("worker killed")
            monkeypatch.setattr(store, "put_base", dies)
            monkeypatch.setattr(held_state, "LOG_SLOTS", store.version().log_entries)  # compact now
            with pytest.raises(RuntimeError):
                harness.events(batch)
            monkeypatch.undo()
            monkeypatch.setattr(held_state, "MIN_LOG_EVENTS", 0)
            died += 1
            vars(harness).update(before)  # Spark runs the batch again from its checkpoint
        harness.events(batch)
    harness.advance(events[-1].event_time_ms + 11 * 60_000)
    assert died == 1
    assert decisions(harness) == expected


def test_a_snapshot_of_the_previous_format_is_still_loaded():
    events = stranded(Org())
    harness = OperatorHarness(FAST, servers=SERVERS)
    harness.events(events)
    state = snapshot.load(harness.states["mbx01"][0])
    header, *rest = as_format_5(state)
    previous = pickle.dumps(((3, *header[2:]), *rest))  # format 3: format 5 without a token
    assert snapshot.token_of(previous) is None
    assert snapshot.load(previous) == dataclasses.replace(state, unreachable_ms=None, primary_started_ms=None,
                                                          replaced_db_id=None)


def test_a_message_an_earlier_twin_left_with_no_deadline_expires_with_its_copy_once_its_group_is_loaded():
    """A checkpoint of a twin before a0ca9e6 holds m1 stuck: mbx01 expired it (MESSAGE_EXPIRED) while mbx02, silent,
    kept its copy, and its expiry deadline was spent on that with none after (nor a Spark timer). Loaded by this twin,
    it expires with its copy at receipt + SafetyNetHoldTime + MessageExpirationTimeout (SHADOW_EXPIRED), as this twin
    decides from the start, and nothing of it is held after."""
    timeline = at_risk_then_the_primary_returns_with_the_same_database_and_cannot_deliver()
    events = sorted(timeline.events, key=lambda e: e.event_time_ms)
    copy_expires = at(1) + 4 * DAY
    harness = OperatorHarness(servers=("mbx01", "mbx02", "mbx03"))
    harness.events([e for e in events if e.event_time_ms < copy_expires - HOUR])
    harness.advance(copy_expires - HOUR)
    assert {a.type for a in harness.alerts} >= {AlertType.MESSAGE_EXPIRED, AlertType.DISCARD_EVENTS_DROPPED}
    store = harness.stores["mbx01"]
    state = harness.state_of("mbx01")
    m1 = next(key for key, m in state.messages.items() if m.ref.message_id.startswith("<m1"))
    assert state.deadlines.get(DeadlineKind.EXPIRE, m1) == copy_expires
    state.deadlines.clear(DeadlineKind.EXPIRE, m1)  # as the earlier twin stored it: no deadline, no timer
    store.put_base(snapshot.dump(state))
    for at_ms in list(store.timers):
        store.delete_timer(at_ms)
    store.set_version(held_state.Version(b"old", b"old", 0, 0, -1))
    held_state._held.clear()  # a twin started again holds nothing
    harness.events(Org().busy("mbx03", 4 * 24 * 60 - 50, 4 * 24 * 60 - 40))  # mbx01's group is called again
    harness.advance(copy_expires + DAY)
    assert [a.type for a in harness.alerts if a.decided_at_ms >= copy_expires - HOUR] == [AlertType.SHADOW_EXPIRED]
    assert harness.state_of("mbx01").messages == {}
