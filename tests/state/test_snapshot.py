"""Snapshots: a group's state survives dump and load exactly, and no field is left out."""

import dataclasses

import pytest
from hypothesis import given, settings

from state import snapshot
from state.model import ShadowRedundancyModel
from state.records import Message, Pair
from state.replay import replay
from tests.state import timelines
from tests.state.scenario import Org
from tests.state.world import simulate, worlds


def states_after(events):
    model, states = ShadowRedundancyModel(), {}
    for event in events:
        if event.primary_server:
            state = states.setdefault(event.primary_server, model.new_state(event.primary_server))
            model.on_events(state, [event])
    return states


@settings(max_examples=60, deadline=None)
@given(worlds)
def test_dump_then_load_gives_the_same_state_midway_through_any_world(world):
    events, _, _ = simulate(*world)
    for state in states_after(events[: len(events) // 2]).values():
        assert snapshot.load(snapshot.dump(state)) == state


def test_a_loaded_state_goes_on_exactly_like_the_original():
    org = Org()
    first = [*org.started("mbx01", "db1", 0), *org.received("mbx01", "m1", 1, external=["x@fabrikam.com"]),
             *org.shadowed("mbx01", "mbx02", "m1", 1), *org.sent("mbx01", "m1", "mbx03", 2, fork="f1")]
    rest = org.heartbeats_failing("mbx02", "mbx01", 3, 4 * 60)
    model = ShadowRedundancyModel()
    original = model.new_state("mbx01")
    model.on_events(original, first)
    copy = snapshot.load(snapshot.dump(original))
    assert model.on_events(original, rest) == model.on_events(copy, rest)
    assert copy == original


@pytest.mark.parametrize("record, flat, nested", [
    (Message, snapshot.MESSAGE_FLAT, snapshot.MESSAGE_NESTED),
    (Pair, snapshot.PAIR_FLAT, snapshot.PAIR_NESTED),
])
def test_every_field_is_in_the_snapshot(record, flat, nested):
    assert sorted(flat + nested) == sorted(f.name for f in dataclasses.fields(record))


def test_another_format_is_refused():
    import pickle
    data = pickle.loads(snapshot.dump(ShadowRedundancyModel().new_state("mbx01")))
    stale = pickle.dumps(((99, *data[0][1:]), *data[1:]))
    with pytest.raises(ValueError, match="format 99"):
        snapshot.load(stale)


@pytest.mark.parametrize("make", [timelines.same_site_copies_after_remote_retries, timelines.silent_feed,
                                  timelines.double_failure_with_new_databases], ids=lambda f: f.__name__)
def test_facts_same_site_reports_and_applied_ids_survive_a_snapshot(make):
    """Midway through a timeline fed with the shared facts, as the reference replay feeds them."""
    timeline = make()
    events = sorted(timeline.events, key=lambda e: e.event_time_ms)
    half = [e for e in events if e.event_time_ms <= events[len(events) // 2].event_time_ms]
    primary = half[-1].primary_server or events[0].node
    state = replay(half, timeline.config).states[primary]
    copy = snapshot.load(snapshot.dump(state))
    assert copy == state
    assert state.nodes and state.last_seen and state.seen_ids
