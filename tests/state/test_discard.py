"""Discard status, XQDISCARD answers, release into Safety Net: nothing is left behind."""

import pytest

from schemas.events import AlertType
from state.replay import replay
from tests.state.scenario import DAY, Org, at


def test_happy_path_releases_every_copy_and_leaves_no_state_or_deadline():
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0),
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.delivered("mbx01", "m1", "mbx03", 2),
        *org.query_ok("mbx02", "mbx01", 3, discarded=["m1"]),
    ]
    result = replay(events)
    assert result.alerts == [] and result.commands == []
    assert result.settles("mbx01")
    assert [(o.result, o.redundant) for o in result.outcomes] == [("delivered", True)]


def test_copy_is_kept_until_the_shadow_collects_the_discard_notification():
    org = Org()
    events = [
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.delivered("mbx01", "m1", "mbx03", 2),
        *org.query_ok("mbx02", "mbx01", 3, discarded=[]),  # answered, but not yet for m1
    ]
    state = replay(events).states["mbx01"]
    assert "m1" in state.messages and state.pairs["mbx02"].pending_discards == {"m1"}
    assert replay([*events, *org.query_ok("mbx02", "mbx01", 5, discarded=["m1"])]).settles("mbx01")


def test_shadow_discarded_event_alone_releases_the_copy():
    org = Org()
    events = [
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.delivered("mbx01", "m1", "mbx03", 2),
    ]
    from schemas import events as ev
    from tests.state.scenario import ref
    discarded = ev.ShadowDiscarded(event_id="x", event_time_ms=at(3), node="mbx02", primary_server="mbx01",
                                   message=ref("m1"))
    assert replay([*events, discarded]).settles("mbx01")


def test_message_without_shadow_is_released_when_delivered():
    org = Org()
    events = [*org.received("mbx01", "m1", 1), *org.delivered("mbx01", "m1", "mbx03", 2)]
    result = replay(events)
    assert result.settles("mbx01")
    assert [o.result for o in result.outcomes] == ["delivered"]


def test_no_alert_while_heartbeats_succeed_for_a_long_time():
    org = Org()
    events = [*org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0)]
    for minute in range(2, 600, 2):
        events += org.query_ok("mbx02", "mbx01", minute)
    result = replay(events)
    assert [a.type for a in result.alerts] == []
    assert result.commands == []
    assert AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED not in {a.type for a in result.alerts}


def test_an_answer_given_before_the_copy_was_stored_brings_no_notification_though_applied_after_it():
    """The timeline `a_copy_a_fast_shadow_stored_after_its_answer_had_no_discard_notification` (hunt seed 1617:
    mbx02's clock ahead; its answer at 1.2 by that clock came before it stored m1's copy at 1.25, so it brought no
    discard notification of m1, delivered at 1.1), with the answer in a later micro-batch than the copy's report, as
    the streaming twin may read them (a watermark delay of a minute lets it in): m1 is resubmitted at
    ShadowResubmitTimeSpan and arrives twice, as the reference decides from the events in time order. Before, the
    report undid only the notifications applied before it, and the answer applied after it still counted."""
    from tests.state import timelines
    from tests.streaming.harness import OperatorHarness
    timeline = timelines.a_copy_a_fast_shadow_stored_after_its_answer_had_no_discard_notification()
    events = sorted(timeline.events, key=lambda e: e.event_time_ms)
    answer = [e for e in events if e.event_time_ms == at(1.2)]
    first = [e for e in events if e.event_time_ms <= at(1.25) and e not in answer]
    rest = [e for e in events if e.event_time_ms > at(1.25)]
    expected = replay(events)
    assert [a.type for a in expected.alerts] == [AlertType.DUPLICATE_DELIVERY_EXPECTED]
    harness = OperatorHarness(watermark_delay_ms=60_000, servers=("mbx01", "mbx02", "mbx09"))
    for batch in (first, answer, rest):
        harness.events(batch)
    harness.advance(events[-1].event_time_ms)
    assert harness.late_rows == 0
    assert [a.alert_id for a in harness.alerts] == [a.alert_id for a in expected.alerts]


def _a_shadow_set_back_discards_before_the_copy(discard_at: float, copy_at: float = 1, by_answer: bool = False,
                                               by: str = "mbx02"):
    """Hunt seed 1589: mbx02's clock is set back between its report of storing m1's copy and its discard of m1,
    so the discard is stamped first; m1 was delivered at 1.2, and mbx01 comes back with a new queue database at 3
    (which promotes at once whatever mbx02 still holds). `by`: the shadow that discards m1."""
    from schemas import events as ev
    from tests.state.scenario import ref
    org = Org()
    if by_answer:
        discard = org.query_ok(by, "mbx01", discard_at, discarded=["m1"])
    else:
        discard = [ev.ShadowDiscarded(event_id="d1", event_time_ms=at(discard_at), node=by,
                                      primary_server="mbx01", message=ref("m1"))]
    events = [
        *org.started("mbx01", "dbP1", 0), *org.query_ok("mbx02", "mbx01", 0.5),
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", copy_at),
        *org.delivered("mbx01", "m1", "mbx03", 1.2), *discard,
        *org.started("mbx01", "dbP2", 3), *org.query_ok("mbx02", "mbx01", 4, db="dbP2"),
    ]
    return sorted(events, key=lambda e: e.event_time_ms)


@pytest.mark.parametrize("by_answer", [False, True], ids=["ShadowDiscarded", "answer"])
def test_a_discard_stamped_before_the_twin_knew_the_message_releases_its_copy_when_it_comes(by_answer):
    """Before, the discard at 0.9 found nothing to release, the copy stored at 1 was held, and mbx01's new
    database at 3 forecast DUPLICATE_DELIVERY_EXPECTED for m1, delivered once."""
    result = replay(_a_shadow_set_back_discards_before_the_copy(0.9, by_answer=by_answer))
    assert result.alerts == [] and result.commands == []
    assert result.settles("mbx01")


def test_a_discard_stamped_after_the_message_came_but_before_its_copy_closes_it_delivered_with_a_shadow():
    result = replay(_a_shadow_set_back_discards_before_the_copy(1.05, copy_at=1.1))
    assert result.alerts == [] and result.commands == []
    assert [(o.result, o.redundant) for o in result.outcomes] == [("delivered", True)]
    assert result.settles("mbx01")


def test_a_discard_of_one_fork_stamped_before_the_copy_keeps_the_message():
    """A discard naming a fork empties that next hop's shadow queue only: the message's other forks may wait."""
    from schemas import events as ev
    from tests.state.scenario import ref
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0), *org.query_ok("mbx02", "mbx01", 0.5),
        ev.ShadowDiscarded(event_id="d1", event_time_ms=at(0.9), node="mbx02", primary_server="mbx01",
                           message=ref("m1", "f1")),
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
    ]
    assert "m1" in replay(events).states["mbx01"].messages


def _in_micro_batches(events, discard_batch: int):
    """The operator's code path fed the events up to m1's delivery (1.2) in the second micro-batch and the rest in
    the third, with the discard (stamped 0.9) in `discard_batch`: the first (before the copy) or the third."""
    from tests.streaming.harness import OperatorHarness
    discard = [e for e in events if e.event_time_ms == at(0.9)]
    rest = [e for e in events if e not in discard]
    batches = [[], [e for e in rest if e.event_time_ms <= at(1.2)], [e for e in rest if e.event_time_ms > at(1.2)]]
    batches[discard_batch] = discard + batches[discard_batch]
    harness = OperatorHarness(watermark_delay_ms=60_000, servers=("mbx01", "mbx02", "mbx03"))
    for batch in batches:
        harness.events(batch)
    harness.advance(events[-1].event_time_ms + DAY)
    assert harness.late_rows == 0
    return harness


@pytest.mark.parametrize("discard_batch", [0, 2], ids=["a batch before the copy", "a batch after it"])
def test_a_discard_stamped_before_the_copy_releases_it_whichever_micro_batch_brings_it(discard_batch):
    harness = _in_micro_batches(_a_shadow_set_back_discards_before_the_copy(0.9), discard_batch)
    assert harness.alerts == [] and harness.commands == []
    assert "m1" not in harness.state_of("mbx01").messages


@pytest.mark.parametrize("discard_at", [0.9, 1.05], ids=["before the message came", "after it came"])
@pytest.mark.parametrize("by_answer", [False, True], ids=["ShadowDiscarded", "answer"])
def test_another_shadows_discard_stamped_before_the_copy_releases_not_that_copy(by_answer, discard_at):
    """mbx03 discards m1, stamped before mbx02 stores m1's copy: the primary answers a shadow with "the discard
    notifications for messages that apply to the querying shadow server" (003), so mbx03's says nothing of mbx02's
    copy. mbx02 holds it, unnotified, until mbx01 comes back with a new queue database at 3 and mbx02 resubmits it:
    m1, delivered at 1.2, arrives twice, as without mbx03's discard. Before, mbx03's discard closed m1 and the copy
    stored after it opened nothing: no alert."""
    events = _a_shadow_set_back_discards_before_the_copy(discard_at, copy_at=1.1, by_answer=by_answer, by="mbx03")
    without = replay([e for e in events if e.event_time_ms != at(discard_at)])
    result = replay(events)
    assert [(a.type, a.servers, [m.message.internal_id for m in a.messages]) for a in result.alerts] == [
        (AlertType.DUPLICATE_DELIVERY_EXPECTED, ("mbx01", "mbx02"), ["m1"])]
    assert [a.alert_id for a in result.alerts] == [a.alert_id for a in without.alerts]
    assert result.commands == []
    assert result.settles("mbx01")


@pytest.mark.parametrize("discard_batch", [0, 2], ids=["a batch before the copy", "a batch after it"])
def test_another_shadows_discard_stamped_before_the_copy_releases_not_that_copy_whichever_micro_batch(discard_batch):
    events = _a_shadow_set_back_discards_before_the_copy(0.9, by="mbx03")
    harness = _in_micro_batches(events, discard_batch)
    assert [a.alert_id for a in harness.alerts] == [
        a.alert_id for a in replay([e for e in events if e.event_time_ms != at(0.9)]).alerts]
    assert [a.type for a in harness.alerts] == [AlertType.DUPLICATE_DELIVERY_EXPECTED]


def test_a_what_if_without_shadow_redundancy_takes_no_discard_for_a_copy():
    """What if ShadowRedundancyEnabled were $false (the recording made with it $true): "$false: Shadow redundancy is
    disabled on all Mailbox servers in the organization" (003), so no copy is made and the recorded discard of m1
    stands for none: m1 is delivered at 1.2 by its primary alone, not redundant, and mbx01's new database at 3
    loses nothing."""
    from state.parameters import ModelConfig, parameters_from
    off = ModelConfig(defaults=parameters_from({"shadow_redundancy_enabled": False}))
    result = replay(_a_shadow_set_back_discards_before_the_copy(0.9), off)
    assert result.alerts == [] and result.commands == []
    assert [(o.result, o.redundant) for o in result.outcomes] == [("delivered", False)]
    assert result.settles("mbx01")


@pytest.mark.parametrize("by, twice", [("mbx02", []), ("mbx03", ["m1"])],
                         ids=["by the shadow that stores it", "by another shadow"])
def test_a_primary_failed_for_good_after_a_discard_stamped_before_the_copy(by, twice):
    """mbx01 delivers m1 at 1.2 and stops answering; mbx02, which holds m1's and m2's copies, fails to reach it from 2
    on and promotes itself ShadowResubmitTimeSpan after its last contact (1.1, m2's copy): it resubmits m2. m1's
    copy is in Safety Net already when mbx02 itself discarded it (by its clock set back, at 0.9): no duplicate; a
    discard by mbx03 leaves mbx02's copy of m1 in its shadow queue, and m1 is resubmitted and arrives twice."""
    from schemas import events as ev
    from schemas.events import CommandReason
    from tests.state.scenario import HOUR, ref
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0), *org.query_ok("mbx02", "mbx01", 0.5),
        ev.ShadowDiscarded(event_id="d1", event_time_ms=at(0.9), node=by, primary_server="mbx01", message=ref("m1")),
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.received("mbx01", "m2", 1.1), *org.shadowed("mbx01", "mbx02", "m2", 1.1),
        *org.delivered("mbx01", "m1", "mbx03", 1.2),
        *org.heartbeats_failing("mbx02", "mbx01", 2, 4 * 60),
    ]
    result = replay(events)
    promoted_at = at(1.1) + 3 * HOUR
    assert [(c.holder, c.message.internal_id, c.reason, c.decided_at_ms) for c in result.commands] == [
        ("mbx02", "m2", CommandReason.PRIMARY_HEARTBEAT_TIMEOUT, promoted_at)]
    duplicates = [[m.message.internal_id for m in a.messages] for a in result.alerts
                  if a.type is AlertType.DUPLICATE_DELIVERY_EXPECTED]
    assert duplicates == ([twice] if twice else [])
    assert [(a.type, [m.message.internal_id for m in a.messages], a.decided_at_ms) for a in result.alerts
            if a.type is AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED] == [
        (AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, ["m2"], promoted_at)]


def test_a_discard_of_a_message_never_copied_is_forgotten_after_the_clock_skew_allowance():
    """A discard stamped before any word of its message is kept for the clock-skew allowance, no longer: when no
    copy of it comes, nothing is left."""
    from schemas import events as ev
    from tests.state.scenario import ref
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.query_ok("mbx02", "mbx01", 0.5),
              ev.ShadowDiscarded(event_id="d1", event_time_ms=at(0.9), node="mbx02", primary_server="mbx01",
                                 message=ref("m1"))]
    result = replay(events)
    assert result.alerts == [] and result.outcomes == []
    assert result.settles("mbx01")
