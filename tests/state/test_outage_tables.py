"""The outage tables of docs/domain.md, server Mailbox01, as scenarios (2013+ and 2010)."""

from schemas.events import AlertType, CommandReason, NodeMode
from state.parameters import ModelConfig, parameters_from
from state.replay import replay
from tests.state.scenario import HOUR, MINUTE, Org, at

HEARTBEAT = 2 * MINUTE


def mailbox01_goes_down(org, down_at=10):
    """Shadows of Mailbox01's messages on mbx02 and mbx03; heartbeats every 2 min; Mailbox01 dies at down_at."""
    events = [*org.started("mailbox01", "db-A", 0)]
    for i, shadow in enumerate(["mbx02", "mbx03", "mbx02"]):
        events += [*org.received("mailbox01", f"m{i}", 1 + i, external=["bob@fabrikam.com"]),
                   *org.shadowed("mailbox01", shadow, f"m{i}", 1 + i, db="db-A")]
    for shadow in ("mbx02", "mbx03"):
        events += [e for minute in range(4, down_at, 2) for e in org.query_ok(shadow, "mailbox01", minute, db="db-A")]
    return events


def heartbeats(org, start, stop, up_from, db):
    """mbx02 and mbx03 query every 2 min; answers come once Mailbox01 is back at up_from."""
    events = []
    for minute in range(start, stop, 2):
        for shadow in ("mbx02", "mbx03"):
            if minute >= up_from:
                events += org.query_ok(shadow, "mailbox01", minute, db=db)
            else:
                events += org.query_failed(shadow, "mailbox01", minute)
    return events


def test_2013_new_database_before_resubmit_span_every_shadow_holder_resubmits_within_one_heartbeat():
    org = Org()
    back = 60
    # Mailbox01's restart is seen only through the heartbeats (no NodeStarted): the worst case.
    events = [*mailbox01_goes_down(org), *heartbeats(org, 11, back + 10, up_from=back, db="db-B")]
    result = replay(events)
    assert {c.holder for c in result.commands} == {"mbx02", "mbx03"}
    assert {c.message.internal_id for c in result.commands} == {"m0", "m1", "m2"}
    assert all(c.reason is CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED for c in result.commands)
    assert max(c.decided_at_ms for c in result.commands) - at(back) <= HEARTBEAT
    assert AlertType.DUPLICATE_DELIVERY_EXPECTED not in {a.type for a in result.alerts}


def test_2013_same_database_after_resubmit_span_duplicates_and_longest_delay_is_the_span():
    org = Org()
    back = 4 * 60
    events = [*mailbox01_goes_down(org), *heartbeats(org, 11, back + 6, up_from=back, db="db-A")]
    result = replay(events)
    last_contact = at(8)
    assert {c.decided_at_ms for c in result.commands} == {last_contact + 3 * HOUR}
    assert {c.message.internal_id for c in result.commands} == {"m0", "m1", "m2"}
    duplicates = [a for a in result.alerts if a.type is AlertType.DUPLICATE_DELIVERY_EXPECTED]
    assert len(duplicates) == 1 and at(back) <= duplicates[0].decided_at_ms <= at(back) + HEARTBEAT
    assert {m.message.internal_id for m in duplicates[0].messages} == {"m0", "m1", "m2"}
    assert all(m.recipients == ("bob@fabrikam.com",) for m in duplicates[0].messages)


MODE_2010 = ModelConfig(defaults=parameters_from({"mode": "EXCHANGE_2010"}))


def hub_2010(org, alternate_route):
    events = [*org.started("hub01", "db-A", 0, mode=NodeMode.EXCHANGE_2010),
              *org.received("hub01", "m1", 1), *org.shadowed("hub01", "hub02", "m1", 1, db="db-A",
                                                              alternate_route=alternate_route),
              *org.query_ok("hub02", "hub01", 2, db="db-A")]
    return events


def test_2010_with_an_alternate_route_delay_is_heartbeat_timeout_times_retry_count():
    org = Org()
    events = [*hub_2010(org, True), *org.heartbeats_failing("hub02", "hub01", 7, 120, every=5)]
    result = replay(events, MODE_2010)
    assert [c.decided_at_ms - at(2) for c in result.commands] == [3 * 300_000]


def test_2010_without_an_alternate_route_delay_is_the_outage():
    org = Org()
    outage_ends = 200
    events = [*hub_2010(org, False), *org.heartbeats_failing("hub02", "hub01", 7, outage_ends, every=5),
              *org.query_ok("hub02", "hub01", outage_ends, db="db-NEW")]
    result = replay(events, MODE_2010)
    assert [c.decided_at_ms for c in result.commands] == [at(outage_ends)]


def test_2010_same_database_back_after_resubmission_duplicates():
    org = Org()
    events = [*hub_2010(org, True), *org.heartbeats_failing("hub02", "hub01", 7, 60, every=5),
              *org.started("hub01", "db-A", 60, mode=NodeMode.EXCHANGE_2010)]
    result = replay(events, MODE_2010)
    assert len(result.commands) == 1
    assert [a.type for a in result.alerts][-1] is AlertType.DUPLICATE_DELIVERY_EXPECTED
