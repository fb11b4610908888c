"""Exchange 2010 mode: previous hop as shadow, timeout x retries, no alternate route, delayed ack."""

from schemas.events import AlertType, CommandReason, NodeMode
from state.parameters import ModelConfig, parameters_from
from state.replay import replay
from tests.state.scenario import MINUTE, Org, at

MODE_2010 = ModelConfig(defaults=parameters_from({"mode": "EXCHANGE_2010"}))


def hub_outage(org, alternate_route=True):
    """Chicago hands m1 to New York (primary) and keeps the shadow; New York dies at minute 2."""
    return [
        *org.started("newyork", "dbNY", 0, mode=NodeMode.EXCHANGE_2010),
        *org.received("newyork", "m1", 1), *org.shadowed("newyork", "chicago", "m1", 1, db="dbNY",
                                                          alternate_route=alternate_route),
        *org.query_ok("chicago", "newyork", 1, db="dbNY"),
        *org.heartbeats_failing("chicago", "newyork", 6, 40, every=5),
    ]


def test_primary_declared_failed_after_retry_count_consecutive_timeouts():
    result = replay(hub_outage(Org()), MODE_2010)
    # failures at minutes 6, 11, 16: the third is the declaration (3 x 300 s after contact at most)
    assert [(c.holder, c.reason, c.decided_at_ms) for c in result.commands] == [
        ("chicago", CommandReason.PRIMARY_HEARTBEAT_TIMEOUT, at(16))]


def test_failed_sessions_closer_together_than_the_timeout_interval_do_not_hasten_the_declaration():
    """002: the timer is reset and retried each time ShadowHeartbeatTimeoutInterval runs out ("se
    restablecerá el temporizador y se realizará otro intento"), and three such timeouts in a row declare
    the primary failed: "El retraso total ... es igual al producto del intervalo de tiempo de espera de
    latido y el número de reintentos". Chicago's sessions fail every minute from minute 2: New York is
    declared failed at its last answer (1) + 3 x 5 minutes, not at the third failure (4)."""
    org = Org()
    events = [*org.started("newyork", "dbNY", 0, mode=NodeMode.EXCHANGE_2010),
              *org.received("newyork", "m1", 1), *org.shadowed("newyork", "chicago", "m1", 1, db="dbNY"),
              *org.query_ok("chicago", "newyork", 1, db="dbNY"),
              *org.heartbeats_failing("chicago", "newyork", 2, 40, every=1)]
    result = replay(events, MODE_2010)
    assert [(c.reason, c.decided_at_ms) for c in result.commands] == [
        (CommandReason.PRIMARY_HEARTBEAT_TIMEOUT, at(1) + 3 * 5 * MINUTE)]


def test_deadline_is_timeout_interval_times_retry_count_without_failure_events():
    org = Org()
    events = hub_outage(org)[:-8]  # no failure events reach the twin, only time passes
    result = replay([*events, *org.tick(60)], MODE_2010)
    assert [c.decided_at_ms for c in result.commands] == [at(1) + 3 * 5 * MINUTE]


def test_no_alternate_route_holds_the_message_until_the_primary_returns_with_a_new_database():
    org = Org()
    events = hub_outage(org, alternate_route=False)
    held = replay(events, MODE_2010)
    assert held.commands == []
    assert [a.type for a in held.alerts] == [AlertType.HELD_NO_ALTERNATE_ROUTE]
    returned = replay([*events, *org.query_ok("chicago", "newyork", 90, db="dbNY-new")], MODE_2010)
    assert [(c.reason, c.decided_at_ms) for c in returned.commands] == [
        (CommandReason.PRIMARY_RETURNED_AS_NEW_ROUTE, at(90))]
    assert returned.settles("newyork")


def test_a_message_handed_to_the_primary_between_timeouts_ends_their_run():
    """ShadowHeartbeatRetryCount timeouts IN A ROW declare the primary failed: Chicago's hand-off of
    m2 to New York at minute 12 is a session to the primary, so the timeouts at 6 and 11 and the
    one at 17 are not three in a row, and no promotion is due before 12 + 3 x 5 minutes."""
    org = Org()
    events = [*org.started("newyork", "dbNY", 0, mode=NodeMode.EXCHANGE_2010),
              *org.received("newyork", "m1", 1), *org.shadowed("newyork", "chicago", "m1", 1, db="dbNY"),
              *org.query_ok("chicago", "newyork", 1, db="dbNY"),
              *org.query_failed("chicago", "newyork", 6), *org.query_failed("chicago", "newyork", 11),
              *org.received("newyork", "m2", 12), *org.shadowed("newyork", "chicago", "m2", 12, db="dbNY"),
              *org.query_failed("chicago", "newyork", 17)]
    assert replay([*events, *org.tick(26)], MODE_2010).commands == []
    later = replay([*events, *org.query_failed("chicago", "newyork", 22), *org.query_failed("chicago", "newyork", 27)],
                   MODE_2010)
    assert [(c.message.internal_id, c.reason, c.decided_at_ms) for c in later.commands] == [
        ("m1", CommandReason.PRIMARY_HEARTBEAT_TIMEOUT, at(27)), ("m2", CommandReason.PRIMARY_HEARTBEAT_TIMEOUT, at(27))]


def test_a_primary_back_with_the_same_database_is_judged_afresh_at_its_next_outage():
    """002: a copy without an alternate route stays in the shadow queue until Hub01 returns; back with the
    same database, "Hub 01 entregará los mensajes en sus colas": it is a primary like any other again. At
    its next outage the copy made since (m2, with an alternate route) is promoted 3 x 300 s after the last
    contact, and m1 is held again. The contact that ends the outage is an answer, or a hand-off to it."""
    org = Org()
    first_outage = [*org.started("hub01", "db-A", 0, mode=NodeMode.EXCHANGE_2010),
                    *org.received("hub01", "m1", 1),
                    *org.shadowed("hub01", "hub02", "m1", 1, db="db-A", alternate_route=False),
                    *org.query_ok("hub02", "hub01", 2, db="db-A"),
                    *org.heartbeats_failing("hub02", "hub01", 7, 30, every=5)]
    answered = replay([*first_outage, *org.query_ok("hub02", "hub01", 30, db="db-A"),
                       *org.received("hub01", "m2", 31), *org.shadowed("hub01", "hub02", "m2", 31, db="db-A"),
                       *org.query_ok("hub02", "hub01", 32, db="db-A"),
                       *org.heartbeats_failing("hub02", "hub01", 37, 120, every=5)], MODE_2010)
    assert [(c.message.internal_id, c.decided_at_ms) for c in answered.commands] == [("m2", at(32) + 15 * MINUTE)]
    assert [(a.type, a.decided_at_ms, [m.message.internal_id for m in a.messages]) for a in answered.alerts] == [
        (AlertType.HELD_NO_ALTERNATE_ROUTE, at(17), ["m1"]),
        (AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, at(47), ["m2"]),
        (AlertType.HELD_NO_ALTERNATE_ROUTE, at(47), ["m1"])]
    handed = replay([*first_outage, *org.received("hub01", "m2", 31),
                     *org.shadowed("hub01", "hub02", "m2", 31, db="db-A"),
                     *org.heartbeats_failing("hub02", "hub01", 36, 120, every=5)], MODE_2010)
    assert [(c.message.internal_id, c.decided_at_ms) for c in handed.commands] == [("m2", at(31) + 15 * MINUTE)]


def test_a_2013_shadow_promotes_a_copy_whatever_it_says_of_an_alternate_route():
    """Holding a copy for want of an alternate route is the 2010 previous hop's rule: a 2013 and
    later shadow promotes itself and transmits its copies to the next hop after the span."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1, alternate_route=False),
              *org.query_ok("mbx02", "mbx01", 2), *org.heartbeats_failing("mbx02", "mbx01", 4, 4 * 60)]
    result = replay(events)
    assert [(c.holder, c.reason, c.decided_at_ms) for c in result.commands] == [
        ("mbx02", CommandReason.PRIMARY_HEARTBEAT_TIMEOUT, at(2) + 3 * 60 * MINUTE)]
    assert [a.type for a in result.alerts] == [AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED]


def test_no_alternate_route_and_same_database_back_means_normal_delivery():
    org = Org()
    events = [*hub_outage(org, alternate_route=False),
              *org.query_ok("chicago", "newyork", 90, db="dbNY"),
              *org.delivered("newyork", "m1", "london", 91),
              *org.query_ok("chicago", "newyork", 92, db="dbNY", discarded=["m1"])]
    result = replay(events, MODE_2010)
    assert result.commands == []
    assert result.settles("newyork")


def test_sender_without_shadow_support_gets_a_delayed_acknowledgement():
    org = Org()
    slow = [*org.received("newyork", "m1", 0, sender_supports_shadow=False), *org.sent("newyork", "m1", "london", 0.1),
            *org.tick(5)]
    alerts = replay(slow, MODE_2010).alerts
    assert [(a.type, a.decided_at_ms) for a in alerts] == [(AlertType.NOT_REDUNDANT, at(0) + 30_000)]
    fast = [*org.received("newyork", "m2", 0, sender_supports_shadow=False),
            *org.delivered("newyork", "m2", "london", 0.2), *org.tick(5)]
    assert replay(fast, MODE_2010).alerts == []


def test_chicago_newyork_london_dublin():
    """Chicago keeps its copy until New York has handed the message to London; London's fate is not its concern."""
    org = Org()
    events = [
        *org.received("chicago", "c1", 0), *org.delivered("chicago", "c1", "newyork", 1),
        *org.received("newyork", "n1", 1), *org.shadowed("newyork", "chicago", "n1", 1, db="dbNY"),
        *org.received("london", "l1", 2), *org.shadowed("london", "newyork", "l1", 2, db="dbLON"),
        *org.delivered("newyork", "n1", "london", 2),
        *org.query_ok("chicago", "newyork", 3, db="dbNY", discarded=["n1"]),
        # London dies before Dublin acknowledges: New York, not Chicago, holds the copy that matters
        *org.heartbeats_failing("newyork", "london", 4, 40, every=5),
    ]
    result = replay(events, MODE_2010)
    assert result.settles("chicago")
    assert result.settles("newyork"), "Chicago's copy was released by New York's discard"
    assert [(c.holder, c.primary_server, c.message.internal_id) for c in result.commands] == [
        ("newyork", "london", "l1")]


def test_an_answered_query_between_timeouts_sets_the_timer_again():
    """002: the shadow that reaches the primary sets its timer again ("restablecer el temporizador"), and only
    ShadowHeartbeatRetryCount timeouts "tres veces consecutivas" declare it failed: chicago's queries of newyork
    time out at 6 and 11, one is answered at 14, and they time out again from 19: newyork is declared failed at
    14 + 3 x 300 s = 29, not at 16 (three timeouts, but not in a row)."""
    org = Org()
    events = [*org.started("newyork", "dbNY", 0, mode=NodeMode.EXCHANGE_2010),
              *org.received("newyork", "m1", 1), *org.shadowed("newyork", "chicago", "m1", 1, db="dbNY"),
              *org.query_ok("chicago", "newyork", 1, db="dbNY"),
              *org.query_failed("chicago", "newyork", 6), *org.query_failed("chicago", "newyork", 11),
              *org.query_ok("chicago", "newyork", 14, db="dbNY"),
              *org.heartbeats_failing("chicago", "newyork", 19, 60, every=5)]
    result = replay(events, MODE_2010)
    assert [(c.message.internal_id, c.reason, c.decided_at_ms) for c in result.commands] == [
        ("m1", CommandReason.PRIMARY_HEARTBEAT_TIMEOUT, at(29))]


def test_a_delayed_acknowledgement_waits_for_every_next_hop():
    """002: Exchange 2010 delays the 250 to a sender without shadow support "hasta que comprueba que el mensaje se
    ha entregado correctamente al resto de pasos siguientes", and sends it anyway after MaxAcknowledgementDelay:
    m1, for a@ (london, acknowledged at 6 s) and b@ (boston, never acknowledged), is NOT_REDUNDANT at 30 s; m2,
    whose two next hops both acknowledge within it, raises nothing."""
    org = Org()
    events = [*org.started("newyork", "dbNY", 0, mode=NodeMode.EXCHANGE_2010)]
    for mid, boston_acks in (("m1", False), ("m2", True)):
        events += [*org.received("newyork", mid, 0, recipients=("a@contoso.com", "b@contoso.com"),
                                 sender_supports_shadow=False),
                   *org.sent("newyork", mid, "london", 0.05, fork="f1", recipients=("a@contoso.com",)),
                   *org.sent("newyork", mid, "boston", 0.05, fork="f2", recipients=("b@contoso.com",)),
                   *org.acked("newyork", mid, "london", 0.1, fork="f1")]
        if boston_acks:
            events += org.acked("newyork", mid, "boston", 0.4, fork="f2")
    result = replay(sorted([*events, *org.tick(5)], key=lambda e: e.event_time_ms), MODE_2010)
    assert [(a.type, a.decided_at_ms, [m.message.internal_id for m in a.messages]) for a in result.alerts] == [
        (AlertType.NOT_REDUNDANT, at(0) + 30_000, ["m1"])]


def test_one_heartbeat_retry_declares_the_primary_failed_at_the_first_timeout():
    """ShadowHeartbeatRetryCount at its minimum, 1: "El número de veces que un servidor puede agotar el tiempo de
    espera antes de decidir que existe un error en un servidor principal se controla mediante el parámetro
    ShadowHeartbeatRetryCount" (002): chicago's query of newyork answered at 1, the next times out, and newyork is
    declared failed at 1 + 1 x 300 s = 6, not 16. A query answered exactly then (at 6) keeps it: failed at 11, after
    the next timeout."""
    config = ModelConfig(defaults=parameters_from({"mode": "EXCHANGE_2010", "shadow_heartbeat_retry_count": 1}))
    result = replay(hub_outage(Org()), config)
    assert [(c.message.internal_id, c.reason, c.decided_at_ms) for c in result.commands] == [
        ("m1", CommandReason.PRIMARY_HEARTBEAT_TIMEOUT, at(6))]
    org = Org()
    answered_at_6 = [*org.started("newyork", "dbNY", 0, mode=NodeMode.EXCHANGE_2010),
                     *org.received("newyork", "m1", 1), *org.shadowed("newyork", "chicago", "m1", 1, db="dbNY"),
                     *org.query_ok("chicago", "newyork", 1, db="dbNY"),
                     *org.query_ok("chicago", "newyork", 6, db="dbNY"),
                     *org.heartbeats_failing("chicago", "newyork", 11, 40, every=5)]
    commands = replay(answered_at_6, config).commands
    assert [(c.message.internal_id, c.decided_at_ms) for c in commands] == [("m1", at(11))]
