"""The clock-skew guard's rule: against the Kafka timestamp when there is one, else against the latest
event time accepted before; a skewed event is left out and never becomes a reference."""

from state.clock_guard import guard, is_skewed
from tests.state.scenario import Org

MAX = 300_000


def test_the_rule_is_strictly_more_than_the_limit_ahead_of_the_reference():
    assert not is_skewed(1_000 + MAX, 1_000, MAX)
    assert is_skewed(1_001 + MAX, 1_000, MAX)
    assert not is_skewed(10**12, None, MAX), "no reference: believed"
    assert not is_skewed(0, 10**12, MAX), "behind is not ahead"


def test_the_kafka_timestamp_is_the_reference_when_there_is_one():
    org = Org()
    a, b = org.tick(0)[0], org.tick(60)[0]  # one minute apart
    verdict = guard([(a, a.event_time_ms), (b, a.event_time_ms - MAX)], MAX)
    assert verdict.accepted == [a]
    ((position, event, reference, why),) = verdict.skewed
    assert (position, event, reference) == (1, b, a.event_time_ms - MAX)
    assert why.startswith("clock skew: event time ") and "ahead of its Kafka ingestion time" in why
    assert "(limit 300 s)" in why


def test_without_timestamps_the_latest_accepted_event_time_is_the_reference():
    org = Org()
    first, ahead, on_time, next_ = org.tick(0)[0], org.tick(24 * 60)[0], org.tick(4)[0], org.tick(9)[0]
    verdict = guard([(first, None), (ahead, None), (on_time, None), (next_, None)], MAX)
    assert verdict.accepted == [first, on_time, next_], "the day-ahead event moved no clock"
    assert [p for p, *_ in verdict.skewed] == [1]
    assert "ahead of the latest event time before it" in verdict.skewed[0][3]


def test_without_timestamps_a_quiet_spell_longer_than_the_limit_is_no_clock_ahead():
    """After ten quiet minutes every server's events are ten minutes on: the next event of another node says so.
    Before, the first event after the spell was taken for a clock ahead, and every event after it too."""
    org = Org()
    before = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0)]
    after = [*org.received("mbx01", "m1", 10), *org.shadowed("mbx01", "mbx02", "m1", 10)]
    verdict = guard([(e, None) for e in before + after], MAX)
    assert verdict.skewed == [] and verdict.accepted == before + after


def test_without_timestamps_a_clock_ahead_is_ahead_of_the_next_event_of_another_node():
    org = Org()
    first, ahead, on_time = (org.started("mbx01", "dbP1", 0)[0], org.started("mbx03", "dbP3", 24 * 60)[0],
                             org.started("mbx02", "dbS1", 1)[0])
    again = org.started("mbx03", "dbP3", 24 * 60 + 1)[0]  # a second event of the clock ahead
    verdict = guard([(first, None), (ahead, None), (again, None), (on_time, None)], MAX)
    assert verdict.accepted == [first, on_time]
    assert [position for position, *_ in verdict.skewed] == [1, 2]
    assert all("ahead of the next event time of another node" in why for *_, why in verdict.skewed)
