"""Shadow creation: preference and retries, and RejectMessageOnShadowFailure's two outcomes."""

import pytest

from schemas.events import AlertType, Severity, ShadowFailureReason, SiteLocality
from state.parameters import ModelConfig, ShadowMessagePreference, parameters_from
from state.replay import replay
from tests.state import timelines
from tests.state.scenario import Org, at

REMOTE, LOCAL = SiteLocality.REMOTE, SiteLocality.LOCAL


def failures(org, localities):
    events = list(org.received("mbx01", "m1", 0))
    for attempt, locality in enumerate(localities, start=1):
        events += org.shadow_failed("mbx01", "m1", attempt / 10, locality=locality, attempt=attempt)
    return events


def config(**values):
    return ModelConfig(defaults=parameters_from(values))


def test_prefer_remote_tries_four_remote_then_two_local_before_giving_up():
    org = Org()
    five = failures(org, [REMOTE] * 4 + [LOCAL])
    assert replay(five).alerts == [], "one local attempt is still left"
    six = failures(Org(), [REMOTE] * 4 + [LOCAL] * 2)
    alerts = replay(six).alerts
    assert [a.type for a in alerts] == [AlertType.NOT_REDUNDANT]
    assert alerts[0].messages[0].message.internal_id == "m1"


def test_no_remote_site_means_local_attempts_only():
    assert [a.type for a in replay(failures(Org(), [LOCAL, LOCAL])).alerts] == [AlertType.NOT_REDUNDANT]


@pytest.mark.parametrize("preference, attempts, gives_up", [
    (ShadowMessagePreference.REMOTE_ONLY, [REMOTE] * 3, False),
    (ShadowMessagePreference.REMOTE_ONLY, [REMOTE] * 4, True),
    (ShadowMessagePreference.LOCAL_ONLY, [LOCAL], False),
    (ShadowMessagePreference.LOCAL_ONLY, [LOCAL] * 2, True),
])
def test_remote_only_and_local_only_budgets(preference, attempts, gives_up):
    result = replay(failures(Org(), attempts), config(shadow_message_preference_setting=preference.value))
    assert bool(result.alerts) is gives_up


@pytest.mark.parametrize("preference", list(ShadowMessagePreference))
def test_with_no_remote_site_every_preference_gives_up_after_the_local_retries(preference):
    """Outside a DAG, or in a DAG in one site, the primary tries MaxRetriesForLocalSiteShadow times in
    its own site, whatever ShadowMessagePreferenceSetting says (the preference is ignored)."""
    chosen = config(shadow_message_preference_setting=preference.value)
    assert replay(failures(Org(), [LOCAL]), chosen).alerts == [], "one local attempt is still left"
    alerts = replay(failures(Org(), [LOCAL, LOCAL]), chosen).alerts
    assert [a.type for a in alerts] == [AlertType.NOT_REDUNDANT]


def test_no_peer_gives_up_at_once():
    org = Org()
    events = [*org.received("mbx01", "m1", 0),
              *org.shadow_failed("mbx01", "m1", 0.1, reason=ShadowFailureReason.NO_PEER, candidate="")]
    assert [a.type for a in replay(events).alerts] == [AlertType.NOT_REDUNDANT]


def test_accepted_without_shadow_is_tracked_until_delivered():
    org = Org()
    events = [*failures(org, [LOCAL, LOCAL]), *org.delivered("mbx01", "m1", "mbx03", 1)]
    result = replay(events)
    assert result.settles("mbx01")
    assert [(o.result, o.redundant) for o in result.outcomes] == [("delivered", False)]


def test_reject_on_shadow_failure_answers_451_and_keeps_nothing():
    """With no word of mbx01's own (its 250 or 451) within a minute of its last attempt, the twin's
    RejectMessageOnShadowFailure decides."""
    org = Org()
    result = replay([*failures(org, [LOCAL, LOCAL]), *org.tick(2)], config(RejectMessageOnShadowFailure="$true"))
    assert [(a.type, a.decided_at_ms) for a in result.alerts] == [(AlertType.REJECTED_NO_SHADOW, at(0.2) + 60_000)]
    assert "451 4.4.0" in result.alerts[0].reason
    assert result.settles("mbx01")
    assert [o.result for o in result.outcomes] == ["rejected"]


def test_node_that_reports_an_unredundant_250_is_believed():
    from schemas import events as ev
    from tests.state.scenario import at, ref
    org = Org()
    events = [*org.received("mbx01", "m1", 0),
              ev.AcknowledgedToSender(event_id="a", event_time_ms=at(0.5), node="mbx01", primary_server="mbx01",
                                      message=ref("m1"), redundant=False)]
    assert [a.type for a in replay(events).alerts] == [AlertType.NOT_REDUNDANT]

def test_an_unredundant_250_is_believed_whatever_reject_on_shadow_failure_says():
    """The twin's configuration says RejectMessageOnShadowFailure $true, but mbx01 answered 250 without a
    shadow copy: "No message is accepted or acknowledged by any Mailbox server in the organization until a
    shadow copy of the message is successfully created" does not hold there, so "the primary message is
    accepted anyway, but isn't redundantly persisted" (003), as a 451 it answers is believed whatever the
    configuration says. m1 is NOT_REDUNDANT, not REJECTED_NO_SHADOW, and lost when mbx01 comes back at 3
    with a new, empty queue database."""
    from schemas import events as ev
    from tests.state.scenario import ref
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 0),
              ev.AcknowledgedToSender(event_id="a", event_time_ms=at(0.5), node="mbx01", primary_server="mbx01",
                                      message=ref("m1"), redundant=False),
              *org.started("mbx01", "dbP2", 3)]
    result = replay(events, config(RejectMessageOnShadowFailure="$true"))
    assert [(a.type, a.decided_at_ms) for a in result.alerts] == [
        (AlertType.NOT_REDUNDANT, at(0.5)), (AlertType.MESSAGE_LOST, at(3))]
    assert [o.result for o in result.outcomes] == ["lost"]


def test_an_unredundant_250_after_the_twins_budget_ran_out_is_believed():
    """The twin's configuration says RejectMessageOnShadowFailure $true; mbx01's two local attempts fail (its
    budget, as the twin counts), and 45 ms later mbx01 answers its sender 250 without a shadow copy (its
    retries or its parameter differ): m1 is NOT_REDUNDANT, and lost when mbx01 comes back at 3 with a new,
    empty queue database. Before, the twin said REJECTED_NO_SHADOW ('answered 451 4.4.0 ... the sender may
    retry') at the second failure and closed m1, so the 250 was ignored and the loss went unsaid."""
    from schemas import events as ev
    from tests.state.scenario import ref
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *failures(org, [LOCAL, LOCAL]),
              ev.AcknowledgedToSender(event_id="a", event_time_ms=at(0.2) + 45, node="mbx01", primary_server="mbx01",
                                      message=ref("m1"), redundant=False),
              *org.started("mbx01", "dbP2", 3)]
    result = replay(events, config(RejectMessageOnShadowFailure="$true"))
    assert [(a.type, a.decided_at_ms) for a in result.alerts] == [
        (AlertType.NOT_REDUNDANT, at(0.2) + 45), (AlertType.MESSAGE_LOST, at(3))]
    assert [o.result for o in result.outcomes] == ["lost"]


def test_shadow_redundancy_disabled_raises_no_alert_and_releases_on_delivery():
    org = Org()
    events = [*org.received("mbx01", "m1", 0), *org.delivered("mbx01", "m1", "x", 1)]
    result = replay(events, config(shadow_redundancy_enabled=False))
    assert result.alerts == [] and result.settles("mbx01")


def test_a_copy_in_the_primarys_own_site_is_reported_once_for_the_group_and_its_locality_kept():
    timeline = timelines.same_site_copies_after_remote_retries()
    before_delivery = [e for e in timeline.events if e.event_time_ms < at(4)]
    state = replay(before_delivery).states["mbx01"]
    assert {m: state.messages[m].shadow_locality for m in ("m1", "m2", "m3", "m4")} == {
        "m1": SiteLocality.LOCAL, "m2": SiteLocality.LOCAL, "m3": SiteLocality.LOCAL, "m4": SiteLocality.REMOTE}
    result = replay(timeline.events)
    [alert] = [a for a in result.alerts if a.type is AlertType.SHADOW_IN_SAME_SITE]
    assert alert.servers == ("mbx01", "mbx02") and alert.severity is Severity.INFO and "site1" in alert.reason
    assert result.settles("mbx01")


def test_a_dag_in_one_site_has_every_copy_local_and_no_alert():
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.query_ok("mbx02", "mbx01", 2), *org.tick(4)]
    assert replay(events).alerts == []


def test_copies_in_the_primarys_site_made_at_the_same_time_are_reported_alike_in_either_order():
    """LocalOnly: m1 and m2 copied to mbx02 (the primary's site) at the same millisecond; the
    events of one time may come in any order, the grouped alert is the same (its id too)."""
    config = ModelConfig(defaults=parameters_from({"shadow_message_preference_setting": "LocalOnly"}))

    def alerts(order):
        org = Org()
        events = [*org.started("mbx01", "dbP1", 0, site="site1"), *org.started("mbx02", "dbS1", 0, site="site1"),
                  *org.started("mbx03", "dbX1", 0, site="site2")]
        events += [e for mid in order for e in org.received("mbx01", mid, 1)]
        events += [e for mid in order for e in org.shadowed("mbx01", "mbx02", mid, 1)]
        return [(a.alert_id, [m.message.internal_id for m in a.messages])
                for a in replay([*events, *org.tick(4)], config).alerts if a.type is AlertType.SHADOW_IN_SAME_SITE]

    assert alerts(("m1", "m2")) == alerts(("m2", "m1")) != []
