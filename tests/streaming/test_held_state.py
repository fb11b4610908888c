"""The state a Python worker holds between calls (streaming.operator._held): used only while the
stored snapshot is the one it wrote; a batch run again from an older snapshot loads that one."""

from __future__ import annotations

from state import snapshot
from tests.state.scenario import Org
from tests.streaming.harness import OperatorHarness
from tests.streaming.test_operator import FAST, SERVERS, stranded


def test_a_batch_run_again_from_the_stored_snapshot_decides_again_what_it_decided():
    events = stranded(Org())
    first, second = events[:4], events[4:]
    harness = OperatorHarness(FAST, servers=SERVERS)
    harness.events(first)
    checkpoint = {"states": dict(harness.states), "timeouts": dict(harness.timeouts),
                  "watermark_ms": harness.watermark_ms, "max_event_ms": harness.max_event_ms,
                  "_seen_buckets": set(harness._seen_buckets)}  # Spark's checkpoint before the second batch
    harness.events(second)
    harness.advance(events[-1].event_time_ms + 11 * 60_000)
    decided = [c.command_id for c in harness.commands]
    assert len(decided) == 2
    # Spark runs the second batch again (its output was never committed): the worker still
    # holds the state it wrote after it, which already applied those events.
    vars(harness).update(checkpoint, commands=[])
    harness.events(second)
    harness.advance(events[-1].event_time_ms + 11 * 60_000)
    assert [c.command_id for c in harness.commands] == decided


def test_the_held_state_spares_loading_the_snapshot_this_worker_wrote(monkeypatch):
    events = stranded(Org())
    harness = OperatorHarness(FAST, servers=SERVERS)
    harness.events(events[:4])
    loads = []
    real_load = snapshot.load
    monkeypatch.setattr(snapshot, "load", lambda data: loads.append(data) or real_load(data))
    harness.events(events[4:])
    assert loads == []


def test_a_snapshot_of_the_previous_format_is_still_loaded():
    import pickle

    events = stranded(Org())
    harness = OperatorHarness(FAST, servers=SERVERS)
    harness.events(events)
    state = snapshot.load(harness.states["mbx01"][0])
    header, *rest = pickle.loads(snapshot.dump(state))
    previous = pickle.dumps(((snapshot.PREVIOUS_FORMAT, *header[2:]), *rest))  # format 3: no token
    assert snapshot.token_of(previous) is None
    assert snapshot.load(previous) == state
