"""An event the twin has already applied (same event id) changes nothing when it comes again,
within the clock-skew allowance (or, in an engine that guarantees it, for as long as a repeat
can still come); the memory of applied ids is bounded by deadlines."""

import dataclasses

from state.facts import NodeSeen
from state.model import SEEN_BUCKET_MS, ShadowRedundancyModel
from state import replay as reference
from state.parameters import ModelConfig
from state.records import DeadlineKind
from state.replay import replay
from tests.state import timelines
from tests.state.scenario import MINUTE, Org, at


def test_a_stream_sent_twice_decides_what_one_pass_decides():
    twice = timelines.stream_sent_twice()
    once = timelines.exchange_2010_shadow_from_its_node_started()
    first, second = replay(once.events, once.config), replay(twice.events, twice.config)
    assert [a.alert_id for a in second.alerts] == [a.alert_id for a in first.alerts]
    assert [c.command_id for c in second.commands] == [c.command_id for c in first.commands]
    assert len(second.commands) == 1


def test_a_batch_sent_again_after_the_clock_moved_on_changes_nothing():
    """Failed attempts at a shadow copy are counted (the retry budgets): a repeat must not count again."""
    org = Org()
    events = [*org.received("mbx01", "m1", 0), *org.shadow_failed("mbx01", "m1", 0.1),
              *org.shadow_failed("mbx01", "m1", 0.2, attempt=2)]
    model = ShadowRedundancyModel()
    state = model.new_state("mbx01")
    model.on_events(state, events)
    model.on_events(state, org.shadow_failed("mbx01", "m1", 4.5, attempt=3))
    again = model.on_events(state, events)  # the shipper resends the first batch
    assert not (again.alerts or again.commands)
    assert state.messages["m1"].remote_failures == 3
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


def test_behind_a_lateness_bound_ids_are_kept_only_that_long():
    """An engine that guarantees no event comes more than a bound behind the latest (the replay:
    0) lets the model remember applied ids only that long after their bucket, not for the whole
    clock-skew allowance; within it a repeat still changes nothing."""
    org = Org()
    config = dataclasses.replace(timelines.exchange_2010_shadow_from_its_node_started().config,
                                 lateness_bound_ms=30_000)
    assert (config.applied_ids_kept_ms, config.applied_ids_bucket_ms) == (30_000, 30_000)
    model = ShadowRedundancyModel(config)
    state = model.new_state("mbx01")
    events = org.received("mbx01", "m1", 0)
    failed = org.shadow_failed("mbx01", "m1", 0.2)
    model.on_events(state, [*events, *failed])
    assert len(state.seen_ids) == len(events) + len(failed)
    assert state.messages["m1"].remote_failures == 1
    model.on_events(state, failed)  # within the bound: the repeat is not counted again
    assert state.messages["m1"].remote_failures == 1
    model.on_time(state, state.clock_ms + 30_000 + 30_000 + 1)  # its 30 s bucket, then the bound
    assert state.seen_ids == {} and state.seen_buckets == {}
    assert list(state.messages) == ["m1"]  # what the events made stays


def test_a_node_seen_id_is_kept_until_its_liveness_bucket_has_ended_and_the_bound_passed():
    """The facts' NodeSeen rows of one server and liveness bucket share one id (the streaming twin
    feeds one per row: streaming.twin.shared_facts); the model applies the first, and must know
    its id for as long as another row of that bucket can come: to the bucket's end, plus the bound."""
    model = ShadowRedundancyModel(ModelConfig(lateness_bound_ms=30_000))
    bucket = model.liveness_bucket_ms
    start = 1_000 * bucket

    def seen(at_ms: int) -> NodeSeen:
        return NodeSeen(f"seen:mbx02:{at_ms // bucket}", at_ms, "mbx02")

    state = model.new_state("mbx01")
    model.on_events(state, [seen(start + 5_000), seen(start + bucket + 15_000)])  # the first bucket's, the next's
    assert seen(start).event_id in state.seen_ids, "a row of the first bucket up to 30 s late can still come"
    model.on_time(state, start + bucket + 30_000)
    assert seen(start).event_id in state.seen_ids
    model.on_time(state, start + bucket + 30_001)
    assert seen(start).event_id not in state.seen_ids and seen(start + bucket).event_id in state.seen_ids


def test_how_long_ids_are_kept():
    allowance = ModelConfig().clock_skew_allowance_ms
    assert ModelConfig().applied_ids_kept_ms == allowance
    assert ModelConfig().applied_ids_bucket_ms == SEEN_BUCKET_MS
    assert ModelConfig(lateness_bound_ms=10 * MINUTE).applied_ids_kept_ms == allowance
    assert ModelConfig(lateness_bound_ms=0).applied_ids_kept_ms == 0
    assert ModelConfig(lateness_bound_ms=0).applied_ids_bucket_ms == 10_000
    assert ModelConfig(clock_skew_allowance_ms=0, lateness_bound_ms=30_000).applied_ids_kept_ms is None


def test_the_replay_keeps_ids_only_for_the_bucket_it_is_in():
    """The replay applies each group's events in time order, so a repeat comes at its original's
    time: what it remembers is the ids of the last 10 s bucket, not five minutes' worth."""
    once = timelines.exchange_2010_shadow_from_its_node_started()
    result = reference.replay(once.events, once.config)  # the reference engine itself, in both runs
    assert any(state.seen_buckets for state in result.states.values())
    for state in result.states.values():
        assert all(bucket * 10_000 > state.clock_ms - 20_000 for bucket in state.seen_buckets)


def test_a_closed_message_is_not_opened_again_by_a_slower_clock_within_the_allowance():
    """A message the twin stopped tracking is remembered for the clock-skew allowance, so that an
    event about it stamped by a slower clock does not open it again; after that it is forgotten."""
    org = Org()
    model = ShadowRedundancyModel()
    allowance = model.config.clock_skew_allowance_ms
    state = model.new_state("mbx01")
    model.on_events(state, [*org.received("mbx01", "m1", 0), *org.delivered("mbx01", "m1", "x", 1)])
    assert not state.messages and "m1" in state.closed
    model.on_events(state, org.sent("mbx01", "m1", "y", 0.5))  # a slower clock's word, after the close
    assert not state.messages
    model.on_time(state, at(1) + allowance)
    assert "m1" in state.closed, "kept for the whole allowance"
    model.on_time(state, at(1) + allowance + SEEN_BUCKET_MS + 1)
    assert not state.closed and state.holds_nothing()


def test_messages_closed_in_the_same_minute_share_one_deadline():
    """The memory of closed messages costs one deadline per minute of closing times, not one per
    message; a message closed out of order (by a slower clock's event, in a later call) is
    forgotten all the same."""
    org = Org()
    model = ShadowRedundancyModel()
    state = model.new_state("mbx01")
    for i in range(50):
        model.on_events(state, [*org.received("mbx01", f"m{i}", i / 100), *org.delivered("mbx01", f"m{i}", "x", i / 100)])
    assert len(state.closed) == 50
    assert len(state.deadlines.by_kind[DeadlineKind.FORGET_CLOSED]) == 1
    model.on_events(state, [*org.received("mbx01", "late", 3), *org.delivered("mbx01", "late", "x", 3)])
    model.on_events(state, [*org.received("mbx01", "slow", 1.5), *org.delivered("mbx01", "slow", "x", 1.5)])
    assert list(state.closed)[-2:] == ["late", "slow"]
    model.on_time(state, state.clock_ms + model.config.clock_skew_allowance_ms + 2 * SEEN_BUCKET_MS + 1)
    assert not state.closed and state.holds_nothing()


def test_a_node_seen_id_kept_to_its_bucket_end_does_not_hold_back_the_ids_applied_after_it():
    """Behind a lateness bound of 0 (the replay) ids are kept for their 10 s bucket; a NodeSeen's id
    is kept to the end of its liveness bucket, a minute. The ids applied after it go with their own
    buckets all the same (at 2,000 messages/s, held back for a minute they were 4 times as many)."""
    org = Org()
    model = ShadowRedundancyModel(ModelConfig(lateness_bound_ms=0))
    start = at(0) - at(0) % model.liveness_bucket_ms
    state = model.new_state("mbx01")
    received = [e for second in range(50) for e in org.received("mbx01", f"m{second}", (start - at(0) + second * 1_000) / MINUTE)]
    model.on_events(state, [NodeSeen("seen:mbx02:1", start, "mbx02"), *received])
    model.on_time(state, start + 45_000)
    assert "seen:mbx02:1" in state.seen_ids
    assert {e.event_id for e in received} & state.seen_ids.keys() == {e.event_id for e in received[40:]}  # the 40-50 s bucket
