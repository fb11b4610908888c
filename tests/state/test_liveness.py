"""Liveness without heartbeats (state/liveness.py): a log-fed twin promotes a primary that stops
logging while its shadow goes on, at the deadline failed heartbeats would give, and says so."""

from schemas import events as ev
from schemas.events import AlertType, CommandReason
from state.liveness import EVIDENCE, INFERRED
from state.replay import replay
from tests.state.scenario import HOUR, MINUTE, Org, at, ref
from tests.streaming.harness import OperatorHarness


def logged_only(org, primary_until, shadow_until, end=5 * 60):
    """mbx01 takes m1 and m2 with shadows on mbx02 (no discard query is ever seen, as in logs);
    each server logs its own traffic every 2 minutes until it stops."""
    return [
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.received("mbx01", "m2", 2), *org.shadowed("mbx01", "mbx02", "m2", 2),
        *org.busy("mbx01", 3, primary_until), *org.busy("mbx02", 3, shadow_until), *org.busy("mbx03", 3, end),
        *org.tick(end),
    ]


def test_a_primary_that_stops_logging_while_its_shadow_goes_on_is_promoted_and_the_alert_says_inferred():
    result = replay(logged_only(Org(), primary_until=31, shadow_until=5 * 60))
    deadline = at(29) + 3 * HOUR  # its last own event (minute 29) + ShadowResubmitTimeSpan
    assert {(c.holder, c.message.internal_id, c.reason, c.decided_at_ms) for c in result.commands} == {
        ("mbx02", "m1", CommandReason.PRIMARY_HEARTBEAT_TIMEOUT, deadline),
        ("mbx02", "m2", CommandReason.PRIMARY_HEARTBEAT_TIMEOUT, deadline)}
    promotions = [a for a in result.alerts if a.type is AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED]
    assert len(promotions) == 1 and promotions[0].reason.count(INFERRED) == 1
    assert not [a for a in result.alerts if a.type is AlertType.SHADOW_SERVER_UNREACHABLE]


def test_a_primary_that_goes_on_logging_is_not_promoted_and_a_shadow_that_logs_is_not_reported_silent():
    result = replay(logged_only(Org(), primary_until=5 * 60, shadow_until=5 * 60))
    assert result.commands == [] and not [a for a in result.alerts if a.type in (
        AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, AlertType.SHADOW_SERVER_UNREACHABLE)]


def test_a_shadow_that_stops_logging_is_reported_unreachable_from_its_last_event_and_says_inferred():
    result = replay(logged_only(Org(), primary_until=5 * 60, shadow_until=41))
    silent = [a for a in result.alerts if a.type is AlertType.SHADOW_SERVER_UNREACHABLE]
    assert len(silent) == 1 and silent[0].reason.count(INFERRED) == 1
    assert at(39) < silent[0].decided_at_ms <= at(39) + 10 * MINUTE and result.commands == []


def test_with_heartbeats_the_primarys_own_activity_is_not_contact():
    org = Org()
    events = [*logged_only(org, primary_until=5 * 60, shadow_until=5 * 60),
              *org.query_ok("mbx02", "mbx01", 4), *org.heartbeats_failing("mbx02", "mbx01", 6, 4 * 60)]
    result = replay(events)
    assert {c.decided_at_ms for c in result.commands} == {at(4) + 3 * HOUR}  # a partition: the shadow promotes
    promotions = [a for a in result.alerts if a.type is AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED]
    assert promotions and INFERRED not in promotions[0].reason


def test_a_primary_whose_log_goes_silent_but_whose_smtp_probe_answers_is_not_promoted():
    org = Org()
    events = [*logged_only(org, primary_until=31, shadow_until=5 * 60),
              *org.probed("mbx01", 3, 5 * 60)]
    result = replay(events)
    assert result.commands == [] and not [a for a in result.alerts if a.type is AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED]


def test_a_primary_whose_log_and_probe_both_fail_is_promoted_from_its_last_answered_probe():
    org = Org()
    events = [*logged_only(org, primary_until=31, shadow_until=5 * 60),
              *org.probed("mbx01", 3, 60), *org.probed("mbx01", 60, 5 * 60, answered=False)]
    result = replay(events)
    deadline = at(58) + 3 * HOUR  # its last answered probe (minute 58) + ShadowResubmitTimeSpan
    assert {(c.message.internal_id, c.decided_at_ms) for c in result.commands} == {("m1", deadline), ("m2", deadline)}
    promotions = [a for a in result.alerts if a.type is AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED]
    assert len(promotions) == 1 and promotions[0].reason.count(INFERRED) == 1


def test_the_inferred_text_names_the_evidence_of_the_primarys_last_sign_of_life():
    logged = [a for a in replay(logged_only(Org(), primary_until=31, shadow_until=5 * 60)).alerts
              if a.type is AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED]
    assert f"was {EVIDENCE['']} at 2026-01-01T00:29:00Z" in logged[0].reason
    org = Org()
    probed = [a for a in replay([*logged_only(org, primary_until=31, shadow_until=5 * 60),
                                 *org.probed("mbx01", 3, 60)]).alerts
              if a.type is AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED]
    assert f"was {EVIDENCE['probe']} at 2026-01-01T00:58:00Z" in probed[0].reason


def test_peers_hand_offs_to_a_primary_whose_log_goes_silent_are_its_sign_of_life_until_they_stop():
    org = Org()
    events = [*logged_only(org, primary_until=31, shadow_until=5 * 60),
              *org.probed("mbx01", 3, 100, every=3, via="handoff")]
    result = replay(events)
    deadline = at(99) + 3 * HOUR  # the last peer's hand-off to it (minute 99) + ShadowResubmitTimeSpan
    assert {(c.message.internal_id, c.decided_at_ms) for c in result.commands} == {("m1", deadline), ("m2", deadline)}
    promotions = [a for a in result.alerts if a.type is AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED]
    assert f"was {EVIDENCE['handoff']} at 2026-01-01T01:39:00Z" in promotions[0].reason


def without_facts(events):
    """The Spark operator fed no fact (the twin without `[shadow_redundancy] servers`)."""
    harness = OperatorHarness(servers=())
    ordered = sorted(events, key=lambda e: e.event_time_ms)
    for i in range(0, len(ordered), 25):
        harness.events(ordered[i:i + 25])
    harness.advance(ordered[-1].event_time_ms)
    return harness


def test_without_facts_a_primary_that_stops_logging_is_promoted_from_its_own_last_event_and_no_shadow_is_called_silent():
    harness = without_facts(logged_only(Org(), primary_until=31, shadow_until=5 * 60))
    deadline = at(29) + 3 * HOUR
    assert {(c.message.internal_id, c.decided_at_ms) for c in harness.commands} == {("m1", deadline), ("m2", deadline)}
    assert {a.type for a in harness.alerts} == {AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED}


def test_without_facts_a_primary_that_goes_on_logging_is_never_promoted():
    harness = without_facts(logged_only(Org(), primary_until=5 * 60, shadow_until=5 * 60))
    assert harness.commands == [] and harness.alerts == []



def shadow_back_after_the_span(org, discards, answered=False):
    """mbx01 takes m1, m2 (processed at minute 3) and m3 (never processed) with shadows on mbx02 and
    logs until minute 31; mbx02 stops logging at 41 and is back at 240, past mbx01's last event (29) +
    ShadowResubmitTimeSpan, and logs every 30 s; it logs the discards of `discards` at 241 (`answered`: its first discard
    query, sent at 241, answered 60 ms later with them)."""
    if answered:
        back = [ev.DiscardQuerySent(**org._header("mbx02", "mbx01", 241), shadow_queue_db_id="dbS1"),
                ev.DiscardQueryAnswered(**org._header("mbx02", "mbx01", 241.001), primary_queue_db_id="dbP1",
                                        discarded=tuple(ref(m) for m in discards))]
    else:
        back = [ev.ShadowDiscarded(**org._header("mbx02", "mbx01", 241, mid)) for mid in discards]
    return [
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.received("mbx01", "m2", 2), *org.shadowed("mbx01", "mbx02", "m2", 2),
        *org.received("mbx01", "m3", 2), *org.shadowed("mbx01", "mbx02", "m3", 2),
        *org.delivered("mbx01", "m1", "smtp.fabrikam.com", 3), *org.delivered("mbx01", "m2", "smtp.fabrikam.com", 3),
        *org.busy("mbx01", 4, 31), *org.busy("mbx02", 4, 41), *org.busy("mbx02", 240, 300, every=0.5),
        *org.busy("mbx03", 4, 300),
        *back, *org.tick(300)]


def test_a_shadow_back_in_the_log_after_the_span_ran_out_promotes_at_its_first_query_a_heartbeat_on():
    """Back, mbx02 promotes only when its first query fails, at most a heartbeat on (as after a silence
    with heartbeats): its discards of m1 and m2 at 241 say mbx01 had answered, so no duplicates are
    forecast for them at 240; before, its first line at 240 promoted at once."""
    for answered in (False, True):  # a query sent once the span ran out waits for its answer too
        result = replay(shadow_back_after_the_span(Org(), discards=("m1", "m2"), answered=answered))
        assert not [a for a in result.alerts if a.type is AlertType.DUPLICATE_DELIVERY_EXPECTED], answered
        assert all(c.message.internal_id == "m3" and c.decided_at_ms > at(240) for c in result.commands)
    silent = replay(shadow_back_after_the_span(Org(), discards=()))
    assert {(c.message.internal_id, c.decided_at_ms) for c in silent.commands} == {("m3", at(242))}
    duplicates = [a for a in silent.alerts if a.type is AlertType.DUPLICATE_DELIVERY_EXPECTED]
    assert [(a.decided_at_ms, sorted(m.message.internal_id for m in a.messages)) for a in duplicates] == [
        (at(242), ["m1", "m2"])]


def test_a_shadows_queries_are_remembered_after_its_pair_emptied_for_a_silence_span_only():
    """mbx02's answer at 7 releases the last copy it held for mbx01 (hunt seed 2203): the group remembers that mbx02
    queries, for a silence span (3 heartbeats of 2 minutes) after that query, then holds nothing; a copy after that
    starts a pair with no heartbeat seen, as the first one did."""
    from state.model import ShadowRedundancyModel
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 1),
              *org.shadowed("mbx01", "mbx02", "m1", 1), *org.query_ok("mbx02", "mbx01", 2),
              *org.delivered("mbx01", "m1", "mbx03", 3), *org.query_ok("mbx02", "mbx01", 7, discarded=["m1"])]
    model = ShadowRedundancyModel()
    state = model.new_state("mbx01")
    model.on_events(state, events)
    assert state.queried_by == {"mbx02": at(7)} and state.pairs == {}
    model.on_time(state, at(13))
    assert state.queried_by == {"mbx02": at(7)}
    model.on_time(state, at(13) + 1)
    model.on_time(state, at(30))
    assert state.holds_nothing()
    model.on_events(state, [*org.received("mbx01", "m2", 31), *org.shadowed("mbx01", "mbx02", "m2", 31)])
    assert not state.pairs["mbx02"].heartbeats
