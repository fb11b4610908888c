"""Alert placement (pure): a condition and every alert that clears it, by the router's own table, go to
one partition of the alerts topic, whatever its partition count; the place is the same in every process."""

from __future__ import annotations

import dataclasses

from producers.alert_router import CONDITIONS, clears
from schemas.events import Alert, AlertType, Severity
from schemas.placement import alert_partition, primary_of
from state.replay import replay
from tests.producers.test_alert_router import crash_and_return
from tests.state.scenario import Org
from tests.state.test_restart import back_after_an_hour
from tests.streaming.test_twin import DELAY_MS, final_tick, world_events


def cleared_pairs(alerts: list[Alert]) -> list[tuple[Alert, Alert]]:
    """(condition, the later alert that clears it), as `alerts route` pairs them, in decision order."""
    pairs, opened = [], []
    for later in sorted(alerts, key=lambda a: (a.decided_at_ms, a.alert_id)):
        pairs += [(condition, later) for condition in opened if clears(later, condition, opened)]
        if later.type in CONDITIONS:
            opened.append(later)
    return pairs


def decided_alerts() -> list[Alert]:
    """Promotions, a return with the same and with a new queue database, messages at risk then lost,
    shadows unreachable, and a restart whose queue database is settled later."""
    events = world_events()
    world = replay(events, until_ms=final_tick(events).event_time_ms - DELAY_MS).alerts
    org = Org()
    restart = back_after_an_hour(org, *org.delivered("mailbox01", "m1", "smtp.fabrikam.com", 61)).alerts
    return [*world, *crash_and_return("mbx05"), *restart]


def test_a_condition_and_every_alert_that_clears_it_share_a_partition_whatever_the_count():
    pairs = cleared_pairs(decided_alerts())
    assert {(c.type, later.type) for c, later in pairs} >= {
        (AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, AlertType.DUPLICATE_DELIVERY_EXPECTED),
        (AlertType.MESSAGE_AT_RISK, AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED),
        (AlertType.MESSAGE_AT_RISK, AlertType.MESSAGE_LOST),
        (AlertType.SHADOW_SERVER_UNREACHABLE, AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED),
        (AlertType.RESTARTED_QUEUE_DATABASE_UNKNOWN, AlertType.RESTART_QUEUE_DATABASE_SETTLED),
    }, "every kind of clearing in the router's table is exercised"
    for partitions in range(1, 17):
        assert [(c.alert_id, later.alert_id) for c, later in pairs
                if alert_partition(c, partitions) != alert_partition(later, partitions)] == []
        assert all(0 <= alert_partition(a, partitions) < partitions for a in decided_alerts())


def test_an_unreachable_shadow_is_placed_by_its_primary_and_the_place_is_the_same_in_every_process():
    about = Alert(alert_id="a1", type=AlertType.MESSAGE_AT_RISK, severity=Severity.CRITICAL,
                  servers=("mbx02", "mbx03"), reason="", decided_at_ms=0)
    unreachable = dataclasses.replace(about, alert_id="a2", type=AlertType.SHADOW_SERVER_UNREACHABLE,
                                      servers=("mbx03", "mbx02"))
    assert primary_of(unreachable) == primary_of(about) == "mbx02"
    assert alert_partition(unreachable, 12) == alert_partition(about, 12)
    # a CRC-32 of the name, not Python's hash(), which differs from one process to the next
    assert [alert_partition(about, n) for n in (2, 3, 5, 7)] == [0, 1, 2, 1]
    nowhere = dataclasses.replace(about, type=AlertType.LATE_EVENTS, servers=())
    assert alert_partition(nowhere, 5) == 0, "an alert about no server: partition 0"
