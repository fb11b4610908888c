"""An event the twin has already applied (same event id) changes nothing when it comes again,
within at least the clock-skew allowance; the memory of applied ids is bounded by deadlines."""

from state.model import SEEN_BUCKET_MS, ShadowRedundancyModel
from state.replay import replay
from tests.state import timelines
from tests.state.scenario import MINUTE, Org


def test_a_stream_sent_twice_decides_what_one_pass_decides():
    twice = timelines.stream_sent_twice()
    once = timelines.exchange_2010_shadow_from_its_node_started()
    first, second = replay(once.events, once.config), replay(twice.events, twice.config)
    assert [a.alert_id for a in second.alerts] == [a.alert_id for a in first.alerts]
    assert [c.command_id for c in second.commands] == [c.command_id for c in first.commands]
    assert len(second.commands) == 1


def test_a_batch_sent_again_after_the_clock_moved_on_changes_nothing():
    org = Org()
    events = [*org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0),
              *org.heartbeats_failing("mbx02", "mbx01", 2, 4)]
    model = ShadowRedundancyModel(timelines.exchange_2010_shadow_from_its_node_started().config)
    state = model.new_state("mbx01")
    model.on_events(state, events)
    failures = state.pairs["mbx02"].consecutive_failures
    model.on_events(state, org.query_failed("mbx02", "mbx01", 4.5))
    again = model.on_events(state, events)  # the shipper resends the first batch
    assert not (again.alerts or again.commands)
    assert state.pairs["mbx02"].consecutive_failures == failures + 1
    assert state.messages.keys() == {"m1"}


def test_applied_ids_are_forgotten_after_the_allowance():
    org = Org()
    model = ShadowRedundancyModel()
    state = model.new_state("mbx01")
    model.on_events(state, [*org.received("mbx01", "m1", 0), *org.delivered("mbx01", "m1", "x", 1)])
    assert len(state.seen_ids) == 3
    model.on_time(state, state.clock_ms + model.config.clock_skew_allowance_ms + SEEN_BUCKET_MS + 1)
    assert state.seen_ids == {} and state.seen_buckets == {} and state.holds_nothing()
    assert model.config.clock_skew_allowance_ms >= 5 * MINUTE
