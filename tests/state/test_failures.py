"""Shadow servers that fail, and two servers failing together: never a silent drop."""

import dataclasses

from schemas.events import AlertType, CommandReason, Severity
from state.parameters import ModelConfig, parameters_from
from state.replay import replay
from tests.state.scenario import HOUR, MINUTE, Org, at


def shadowed_message(org):
    return [*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 0),
            *org.shadowed("mbx01", "mbx02", "m1", 0), *org.query_ok("mbx02", "mbx01", 1)]


def test_silent_shadow_server_is_reported():
    org = Org()
    events = [*shadowed_message(org), *org.busy("mbx03", 0, 30), *org.tick(30)]
    alerts = [a for a in replay(events).alerts if a.type is AlertType.SHADOW_SERVER_UNREACHABLE]
    assert len(alerts) == 1 and alerts[0].decided_at_ms == at(1) + 3 * 2 * MINUTE


def test_a_silent_shadow_is_said_to_have_not_queried_since_its_last_query_not_since_a_copy():
    """mbx02 queries mbx01 at 1, mbx01 makes m2's copy on it at 3.5, then mbx02 falls silent. Before, the alert said
    'mbx02 has not queried mbx01 since 00:03:30', the copy's time: mbx01's session to mbx02, not a query."""
    org = Org()
    events = [*shadowed_message(org), *org.query_ok("mbx02", "mbx01", 1), *org.received("mbx01", "m2", 3.5),
              *org.shadowed("mbx01", "mbx02", "m2", 3.5), *org.busy("mbx01", 4, 30), *org.tick(30)]
    [alert] = [a for a in replay(events).alerts if a.type is AlertType.SHADOW_SERVER_UNREACHABLE]
    assert alert.reason.startswith("mbx02 has not queried mbx01 since 2026-01-01T00:01:00Z (its last sign of life"
                                   " towards it, a copy or a line, at 2026-01-01T00:03:30Z)"), alert.reason


def test_both_servers_down_is_a_message_at_risk_then_lost():
    org = Org()
    # mbx01 and mbx02 fall silent together; mbx03 goes on: the feed is alive, the two are down
    events = [*shadowed_message(org), *org.busy("mbx03", 0, 4 * 60), *org.tick(4 * 60)]
    result = replay(events)
    assert result.commands == []
    at_risk = [a for a in result.alerts if a.type is AlertType.MESSAGE_AT_RISK]
    assert len(at_risk) == 1 and at_risk[0].severity is Severity.CRITICAL
    assert [m.message.internal_id for m in at_risk[0].messages] == ["m1"]
    lost = replay([*events, *org.tick(5 * 24 * 60)])
    assert [a.type for a in lost.alerts if a.type is AlertType.MESSAGE_LOST] == [AlertType.MESSAGE_LOST]
    assert lost.settles("mbx01")


def test_shadow_back_after_the_span_promotes_at_once():
    org = Org()
    events = [*shadowed_message(org), *org.busy("mbx03", 0, 5 * 60), *org.query_failed("mbx02", "mbx01", 5 * 60)]
    result = replay(events)
    assert [c.decided_at_ms for c in result.commands if c.primary_server == "mbx01"] == [at(5 * 60)]


def test_shadow_restarted_with_a_new_database_lost_its_copies():
    org = Org()
    events = [*shadowed_message(org), *org.query_ok("mbx02", "mbx01", 3, shadow_db="dbS2")]
    result = replay(events)
    assert [a.type for a in result.alerts] == [AlertType.SHADOW_SERVER_UNREACHABLE]
    assert result.states["mbx01"].messages["m1"].shadow_held is False


def test_primary_back_with_new_database_and_no_shadow_loses_the_message_loudly():
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 0),
              *org.shadow_failed("mbx01", "m1", 0.1, reason=__import__("schemas.events").events.ShadowFailureReason.NO_PEER),
              *org.started("mbx01", "dbP2", 30)]
    result = replay(events)
    assert [a.type for a in result.alerts] == [AlertType.NOT_REDUNDANT, AlertType.MESSAGE_LOST]
    assert result.settles("mbx01")


def test_primary_back_with_a_new_database_while_its_shadow_is_down_puts_the_copy_at_risk():
    """000: shadow redundancy cannot protect a message "During the simultaneous failure of two or more
    Mailbox servers involved in the shadow redundancy of a message". mbx01 and mbx02 fail together after
    minute 1; mbx01 is back at 30 with a new, empty queue database: m1 is not in its queue any more (no
    MESSAGE_EXPIRED there), and its only copy is on mbx02, which is down: at risk at 30, lost when that
    copy would expire (SafetyNetHoldTime + MessageExpirationTimeout, shortened to 2 h + 4 h). Should mbx02
    come back with its copies, it promotes m1 at once."""
    org = Org()
    config = ModelConfig(defaults=parameters_from({"message_expiration_timeout": "4h", "safety_net_hold_time": "2h"}))
    events = [*org.started("mbx02", "dbS1", 0), *shadowed_message(org), *org.busy("mbx03", 0, 7 * 60, every=5),
              *org.started("mbx01", "dbP2", 30), *org.busy("mbx01", 31, 7 * 60, every=5)]
    result = replay(events, config)
    assert [(a.type, a.decided_at_ms) for a in result.alerts if "m1" in {m.message.internal_id for m in a.messages}] \
        == [(AlertType.SHADOW_SERVER_UNREACHABLE, at(7)), (AlertType.MESSAGE_AT_RISK, at(30)),
            (AlertType.MESSAGE_LOST, at(0) + 6 * HOUR)]
    assert result.commands == [] and result.settles("mbx01")
    back = replay([*events, *org.query_ok("mbx02", "mbx01", 60, db="dbP2")], config)
    assert [(c.message.internal_id, c.reason, c.decided_at_ms) for c in back.commands] == [
        ("m1", CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED, at(60))]
    assert AlertType.MESSAGE_LOST not in {a.type for a in back.alerts}


def test_shadow_down_while_primary_works_is_not_a_risk():
    org = Org()
    events = [*shadowed_message(org)]
    for minute in range(5, 5 * 60, 2):  # mbx01 keeps working (busy: an event each 2 min); mbx02 is gone
        events += [*org.received("mbx01", f"other{minute}", minute), *org.delivered("mbx01", f"other{minute}", "x", minute)]
    result = replay(events)
    assert AlertType.MESSAGE_AT_RISK not in {a.type for a in result.alerts}
    assert AlertType.SHADOW_SERVER_UNREACHABLE in {a.type for a in result.alerts}
    assert result.commands == []


def test_shadow_back_from_its_own_outage_does_not_promote_a_healthy_primary():
    org = Org()
    events = [*shadowed_message(org), *org.delivered("mbx01", "m1", "x", 2)]  # discard waits for mbx02
    for minute in range(3, 5 * 60, 2):  # mbx01 works all along; mbx02 is down for five hours
        events += [*org.received("mbx01", f"o{minute}", minute), *org.delivered("mbx01", f"o{minute}", "x", minute)]
    events += [*org.received("mbx01", "m2", 5 * 60), *org.shadowed("mbx01", "mbx02", "m2", 5 * 60),
               *org.query_ok("mbx02", "mbx01", 5 * 60 + 1, discarded=["m1"])]
    result = replay(events)
    assert result.commands == []
    assert AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED not in {a.type for a in result.alerts}


def test_shadow_back_from_its_own_outage_is_judged_by_the_answer_to_its_query():
    """The answer comes a moment after the query: the twin waits for it before deciding anything."""
    org = Org()
    events = [*shadowed_message(org), *org.delivered("mbx01", "m1", "x", 2)]
    for minute in range(3, 5 * 60, 2):
        events += [*org.received("mbx01", f"o{minute}", minute), *org.delivered("mbx01", f"o{minute}", "x", minute)]
    sent, answered = org.query_ok("mbx02", "mbx01", 5 * 60, discarded=["m1"])
    answered = dataclasses.replace(answered, event_time_ms=answered.event_time_ms + 20)
    events += [sent, *org.received("mbx01", "m9", 5 * 60 + 0.0001), answered]
    result = replay(events)
    assert result.commands == []
    assert not {AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, AlertType.DUPLICATE_DELIVERY_EXPECTED} & {
        a.type for a in result.alerts}
    failed = replay([*events[:-3], sent, *org.query_failed("mbx02", "mbx01", 5 * 60 + 0.001)[1:]])
    assert [c.decided_at_ms for c in failed.commands] == [] and [
        a.type for a in failed.alerts if a.type is AlertType.DUPLICATE_DELIVERY_EXPECTED] == [
        AlertType.DUPLICATE_DELIVERY_EXPECTED], "processed before: no command, but mbx02 resubmits it on its own"


def test_double_failure_shadow_back_first_then_primary_with_new_databases_is_message_lost():
    """The other order: mbx02 is back (new database) before mbx01 (new database): m1 is lost when
    mbx01's new database is seen, and no command names a copy that no longer exists."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.query_ok("mbx02", "mbx01", 2), *org.busy("mbx03", 0, 60),
              *org.started("mbx02", "dbS2", 20), *org.query_failed("mbx02", "mbx01", 21, shadow_db="dbS2"),
              *org.started("mbx01", "dbP2", 30)]
    result = replay(events)
    assert [(a.type, a.decided_at_ms) for a in result.alerts if "m1" in {m.message.internal_id for m in a.messages}] \
        == [(AlertType.SHADOW_SERVER_UNREACHABLE, at(8)), (AlertType.SHADOW_SERVER_UNREACHABLE, at(20)),
            (AlertType.MESSAGE_LOST, at(30))]
    assert [c for c in result.commands if c.primary_server == "mbx01"] == []
    assert result.settles("mbx01")
