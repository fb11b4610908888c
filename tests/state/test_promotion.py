"""Heartbeats and promotion: after ShadowResubmitTimeSpan, or at once on a new queue database."""

from schemas.events import AlertType, CommandReason, ShadowFailureReason
from state.model import ShadowRedundancyModel
from state.parameters import ModelConfig, parameters_from
from state.replay import replay
from tests.state.scenario import HOUR, MINUTE, Org, at


def two_messages_then_primary_dies(org):
    """mbx01 takes m1 and m2 with shadows on mbx02, last answers mbx02 at minute 4, then dies."""
    return [
        *org.started("mbx01", "dbP1", 0),
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.received("mbx01", "m2", 2), *org.shadowed("mbx01", "mbx02", "m2", 2),
        *org.query_ok("mbx02", "mbx01", 4),
        *org.heartbeats_failing("mbx02", "mbx01", 6, 4 * 60),
    ]


def test_promotion_exactly_at_last_contact_plus_resubmit_span():
    org = Org()
    result = replay(two_messages_then_primary_dies(org))
    deadline = at(4) + 3 * HOUR
    assert {c.message.internal_id for c in result.commands} == {"m1", "m2"}
    assert {(c.holder, c.primary_server, c.reason, c.decided_at_ms) for c in result.commands} == {
        ("mbx02", "mbx01", CommandReason.PRIMARY_HEARTBEAT_TIMEOUT, deadline)}
    promotions = [a for a in result.alerts if a.type is AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED]
    assert len(promotions) == 1 and promotions[0].decided_at_ms == deadline
    assert set(promotions[0].servers) == {"mbx01", "mbx02"}


def test_no_promotion_one_minute_before_the_span():
    cutoff = at(4) + 3 * HOUR - MINUTE
    events = [e for e in two_messages_then_primary_dies(Org()) if e.event_time_ms <= cutoff]
    assert replay(events, until_ms=cutoff).commands == []
    assert len(replay(events, until_ms=cutoff + 2 * MINUTE).commands) == 2


def test_what_if_resubmit_span_were_one_hour():
    org = Org()
    one_hour = ModelConfig(defaults=parameters_from({"ShadowResubmitTimeSpan": "01:00:00"}))
    result = replay(two_messages_then_primary_dies(org), one_hour)
    assert {c.decided_at_ms for c in result.commands} == {at(4) + HOUR}


def test_without_the_silence_rule_a_shadow_whose_queries_stop_is_not_promoted_before_the_span():
    """shadow_silence_heartbeats 0 turns the twin's silence rule off: a shadow whose queries stop is then not
    judged silent, and "If the shadow server can't open an SMTP session with the primary server after [...]
    ShadowResubmitTimeSpan [...] the shadow server promotes itself" (003): mbx02's last answered query is at 4,
    its last query (failed) at 6, then none: its promotion is forecast at 4 + 3 hours (before: at 6, the
    decision stamped in the past when the deadline at 4 + 3 hours found the query due since never came)."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.received("mbx01", "m2", 2), *org.shadowed("mbx01", "mbx02", "m2", 2),
              *org.query_ok("mbx02", "mbx01", 4), *org.query_failed("mbx02", "mbx01", 6), *org.tick(5 * 60)]
    result = replay(events, ModelConfig(shadow_silence_heartbeats=0))
    assert {(c.message.internal_id, c.decided_at_ms) for c in result.commands} == {
        ("m1", at(4) + 3 * HOUR), ("m2", at(4) + 3 * HOUR)}


def test_commands_ids_are_stable_across_runs():
    first = replay(two_messages_then_primary_dies(Org()))
    second = replay(two_messages_then_primary_dies(Org()))
    assert [c.command_id for c in first.commands] == [c.command_id for c in second.commands]
    assert len({c.command_id for c in first.commands}) == 2


def test_new_queue_database_promotes_at_once():
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0),
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.query_ok("mbx02", "mbx01", 2),
        *org.heartbeats_failing("mbx02", "mbx01", 4, 20),
        *org.query_ok("mbx02", "mbx01", 20, db="dbP2"),  # back, with a new, empty database
    ]
    result = replay(events)
    assert [(c.message.internal_id, c.reason, c.decided_at_ms) for c in result.commands] == [
        ("m1", CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED, at(20))]
    assert [a.type for a in result.alerts] == [AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED]
    assert result.settles("mbx01")


def test_a_copy_made_by_the_new_database_stays_held_and_is_promoted_only_if_the_primary_fails_again():
    """The shadow keeps the primary's original database ID per message: back with dbP2 (no NodeStarted),
    mbx01 shadows m5 on mbx02, which stores it with dbP2 and promotes m1, the copy of dbP1, not m5, which
    mbx01 still has in its queue."""
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0),
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1, db="dbP1"),
        *org.query_ok("mbx02", "mbx01", 2, db="dbP1"),
        *org.heartbeats_failing("mbx02", "mbx01", 4, 60),
        *org.received("mbx01", "m5", 60.2), *org.shadowed("mbx01", "mbx02", "m5", 60.2, db="dbP2"),
        *org.query_ok("mbx02", "mbx01", 61, db="dbP2"),
    ]
    result = replay(events, until_ms=at(62))
    assert [(c.message.internal_id, c.reason, c.decided_at_ms) for c in result.commands] == [
        ("m1", CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED, at(60.2))]
    assert set(result.states["mbx01"].pairs["mbx02"].held) == {"m5"}
    # mbx01 dies again: m5 is promoted a ShadowResubmitTimeSpan after mbx02's last answer
    again = replay([*events, *org.heartbeats_failing("mbx02", "mbx01", 63, 5 * 60)])
    assert [(c.message.internal_id, c.reason, c.decided_at_ms) for c in again.commands] == [
        ("m1", CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED, at(60.2)),
        ("m5", CommandReason.PRIMARY_HEARTBEAT_TIMEOUT, at(61) + 3 * HOUR)]
    # should mbx01 come back with dbP2, it delivers m5 again: the promoted record names m5's database
    assert again.states["mbx01"].promoted["m5"].primary_db_id == "dbP2"


def test_what_the_primary_took_after_restarting_with_a_new_database_is_not_lost_with_the_old_one():
    """000 (outage table): a new queue database loses what the old one held, and only that. mbx01 takes m4
    alone (no peer) at 1.5 and dies after 2; back with dbP2, seen only through mbx02's answer at 61, it
    takes m5 at 60.2 (no peer either) after mbx02 last failed to reach it (58), or at 60.95 with its shadow
    copy made after that answer (the handshake undecided when it comes, failures in the feed or not): m5
    is the new database's, never MESSAGE_LOST; m4 is lost."""
    def restarted(org, failures, m5):
        return [*org.started("mbx01", "dbP1", 0),
                *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1, db="dbP1"),
                *org.received("mbx01", "m4", 1.5),
                *org.shadow_failed("mbx01", "m4", 1.6, reason=ShadowFailureReason.NO_PEER, candidate=""),
                *org.query_ok("mbx02", "mbx01", 2, db="dbP1"),
                *(org.heartbeats_failing("mbx02", "mbx01", 4, 60) if failures else []),
                *m5, *org.query_ok("mbx02", "mbx01", 61, db="dbP2"),
                *org.delivered("mbx01", "m5", "mbx09", 62)]
    def alone(org):
        return [*org.received("mbx01", "m5", 60.2),
                *org.shadow_failed("mbx01", "m5", 60.3, reason=ShadowFailureReason.NO_PEER, candidate="")]

    def copy_in_flight(org):
        return [*org.received("mbx01", "m5", 60.95), *org.shadowed("mbx01", "mbx03", "m5", 61.05, db="dbP2"),
                *org.query_ok("mbx03", "mbx01", 63, db="dbP2", discarded=["m5"])]

    for failures, m5 in ((True, alone), (True, copy_in_flight), (False, copy_in_flight)):
        org = Org()
        result = replay(restarted(org, failures, m5(org)))
        assert [(c.message.internal_id, c.reason, c.decided_at_ms) for c in result.commands] == [
            ("m1", CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED, at(61))]
        assert [(a.decided_at_ms, [m.message.internal_id for m in a.messages]) for a in result.alerts
                if a.type is AlertType.MESSAGE_LOST] == [(at(61), ["m4"])]
        assert result.settles("mbx01")


def test_node_started_with_a_new_database_promotes_before_any_heartbeat():
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0),
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.heartbeats_failing("mbx02", "mbx01", 3, 10),  # mbx01 is down; mbx02 keeps asking
        *org.started("mbx01", "dbP2", 10),
    ]
    assert [c.decided_at_ms for c in replay(events).commands] == [at(10)]


def restarted_with_dbP2_at_10(org):
    """mbx01 restarts with dbP2 at 10 (its NodeStarted; m1, dbP1's copy on mbx02, promoted then), shadows m5
    on mbx02 with dbP2 at 10.2 and takes m6 alone at 10.3; mbx02's heartbeats go on."""
    return [*org.started("mbx01", "dbP1", 0),
            *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1, db="dbP1"),
            *org.query_ok("mbx02", "mbx01", 2), *org.query_ok("mbx02", "mbx01", 6), *org.query_ok("mbx02", "mbx01", 8),
            *org.started("mbx01", "dbP2", 10),
            *org.received("mbx01", "m5", 10.2), *org.shadowed("mbx01", "mbx02", "m5", 10.2, db="dbP2"),
            *org.received("mbx01", "m6", 10.3),
            *org.shadow_failed("mbx01", "m6", 10.3, reason=ShadowFailureReason.NO_PEER, candidate="")]


def test_an_answer_naming_another_database_than_the_primarys_node_started_within_the_allowance_is_stale():
    """The primary's own NodeStarted says its database. mbx02's clock is ahead: its answer naming another
    database, stamped up to the clock-skew allowance after mbx01's NodeStarted, was given before it. Its
    database is ignored: m5 (dbP2's copy) is not promoted, m6 (taken after the restart) is not MESSAGE_LOST;
    its contact still counts. A change seen at the allowance or later is a restart of its own (below)."""
    allowance = ModelConfig().clock_skew_allowance_ms
    for db in ("dbP1", "dbP3"):
        org = Org()
        answered_ms = at(10) + allowance - 1
        late = org.query_ok("mbx02", "mbx01", (answered_ms - at(0)) / MINUTE, db=db)
        result = replay([*restarted_with_dbP2_at_10(org), *late])
        assert [(c.message.internal_id, c.decided_at_ms) for c in result.commands] == [("m1", at(10))], db
        assert AlertType.MESSAGE_LOST not in {a.type for a in result.alerts}
        state = result.states["mbx01"]
        assert state.queue_db_id == "dbP2" and state.pairs["mbx02"].last_contact_ms == late[-1].event_time_ms


def test_an_answer_naming_a_new_database_the_allowance_after_the_primarys_node_started_still_promotes():
    """mbx01 restarted again, with dbP3, and the feed shows no NodeStarted for it: mbx02's answer naming dbP3
    a clock-skew allowance after the NodeStarted of dbP2, or later, promotes the copies of dbP2 (m5) and m6,
    which dbP2 held alone, is lost."""
    for config in (ModelConfig(), ModelConfig(clock_skew_allowance_ms=MINUTE)):
        org = Org()
        answered_ms = at(10) + config.clock_skew_allowance_ms
        later = org.query_ok("mbx02", "mbx01", (answered_ms - at(0)) / MINUTE, db="dbP3")
        result = replay([*restarted_with_dbP2_at_10(org), *later], config)
        assert [(c.message.internal_id, c.reason, c.decided_at_ms) for c in result.commands] == [
            ("m1", CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED, at(10)),
            ("m5", CommandReason.PRIMARY_QUEUE_DATABASE_CHANGED, answered_ms)]
        assert [(a.decided_at_ms, [m.message.internal_id for m in a.messages]) for a in result.alerts
                if a.type is AlertType.MESSAGE_LOST] == [(answered_ms, ["m6"])]
        assert result.states["mbx01"].queue_db_id == "dbP3"


def test_an_answer_stamped_before_the_primarys_node_started_and_applied_after_it_is_stale():
    """The symmetric case: mbx02's answer naming dbP1, stamped 9.9, reaches the model after mbx01's NodeStarted
    of 10 (a late event, as the streaming twin may apply one): it was given before the restart, however far
    before, and changes no database; its contact counts."""
    org = Org()
    events = restarted_with_dbP2_at_10(org)
    model = ShadowRedundancyModel()
    state = model.new_state("mbx01")
    model.on_events(state, events)
    for stamped in (9.9, 9.9 - 2 * ModelConfig().clock_skew_allowance_ms / MINUTE):
        late = org.query_ok("mbx02", "mbx01", stamped, db="dbP1")
        out = model.on_events(state, late)
        assert out.commands == [] and out.alerts == [], stamped
        assert state.queue_db_id == "dbP2" and set(state.pairs["mbx02"].held) == {"m5"} and "m6" in state.messages


def test_messages_the_primary_already_processed_are_not_resubmitted():
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0),
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.received("mbx01", "m2", 1), *org.shadowed("mbx01", "mbx02", "m2", 1),
        *org.delivered("mbx01", "m1", "mbx03", 2),  # delivered, discard not collected yet
        *org.heartbeats_failing("mbx02", "mbx01", 4, 4 * 60),
    ]
    result = replay(events)
    assert [c.message.internal_id for c in result.commands] == ["m2"]
    state = result.states["mbx01"]
    assert state.messages == {} and state.pairs == {}
    assert set(state.promoted) == {"m2"}, "kept only to predict duplicates should mbx01 return"


def test_same_database_after_promotion_predicts_duplicates_for_outside_recipients():
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0),
        *org.received("mbx01", "m1", 1, recipients=["alice@contoso.com"], external=["bob@fabrikam.com"]),
        *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.received("mbx01", "m2", 1, recipients=["carol@contoso.com"]),
        *org.shadowed("mbx01", "mbx02", "m2", 1),
        *org.heartbeats_failing("mbx02", "mbx01", 2, 3 * 60 + 30),
        # same database, after the span (mbx02 promoted at 3:01), within the mailboxes' duplicate detection (1 hour)
        *org.started("mbx01", "dbP1", 3 * 60 + 30),
    ]
    result = replay(events)
    duplicates = [a for a in result.alerts if a.type is AlertType.DUPLICATE_DELIVERY_EXPECTED]
    assert len(duplicates) == 1 and duplicates[0].decided_at_ms == at(3 * 60 + 30)
    by_message = {m.message.internal_id: m.recipients for m in duplicates[0].messages}
    assert by_message == {"m1": ("bob@fabrikam.com",), "m2": ()}
    assert duplicates[0].reason.endswith("the listed recipients outside the organisation (1 message(s)) may receive"
                                         " them twice"), "a whole sentence, not one that reads cut off"
    assert result.settles("mbx01")


def test_same_database_back_after_the_duplicate_detection_window_mailbox_users_see_the_duplicates_too():
    """"The default duration for tracking duplicates is 1 hour ... Whenever an entry in the deliveredTo table is deleted
    due to expiration of the storage time property, even if the messages are the same and the user will get
    duplicates" (004): mbx02 resubmits m1 and m2 at 3:01, mbx01 delivers its queue at 5:00."""
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0),
        *org.received("mbx01", "m1", 1, recipients=["alice@contoso.com"], external=["bob@fabrikam.com"]),
        *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.received("mbx01", "m2", 1, recipients=["carol@contoso.com"]),
        *org.shadowed("mbx01", "mbx02", "m2", 1),
        *org.heartbeats_failing("mbx02", "mbx01", 2, 5 * 60),
        *org.started("mbx01", "dbP1", 5 * 60),
    ]
    duplicates = [a for a in replay(events).alerts if a.type is AlertType.DUPLICATE_DELIVERY_EXPECTED]
    by_message = {m.message.internal_id: set(m.recipients) for m in duplicates[0].messages}
    assert by_message == {"m1": {"alice@contoso.com", "bob@fabrikam.com"}, "m2": {"carol@contoso.com"}}
    assert duplicates[0].reason.endswith(
        "the listed recipients (2 message(s)) may receive them twice: those outside the organisation, and the mailbox"
        " users of the 2 message(s) delivered again more than 01:00:00 after the first copy, when their duplicate"
        " detection (Track Duplicates) no longer knows it")
    # Their stores keeping deliveries for 3 hours hide them again
    longer = ModelConfig(duplicate_tracking_ms=3 * HOUR)
    duplicates = [a for a in replay(events, longer).alerts if a.type is AlertType.DUPLICATE_DELIVERY_EXPECTED]
    assert {m.message.internal_id: m.recipients for m in duplicates[0].messages} == {"m1": ("bob@fabrikam.com",),
                                                                                     "m2": ()}


def test_new_database_after_promotion_means_no_duplicates():
    org = Org()
    events = [
        *org.started("mbx01", "dbP1", 0),
        *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
        *org.heartbeats_failing("mbx02", "mbx01", 2, 5 * 60),
        *org.started("mbx01", "dbP9", 5 * 60),
    ]
    result = replay(events)
    assert AlertType.DUPLICATE_DELIVERY_EXPECTED not in {a.type for a in result.alerts}
    assert result.settles("mbx01")


def test_on_time_fires_each_deadline_at_its_own_time_whatever_the_call_granularity():
    org = Org()
    events = two_messages_then_primary_dies(org)[:12]  # up to the last answer, no failures
    model = ShadowRedundancyModel()
    coarse = model.new_state("mbx01")
    model.on_events(coarse, [e for e in events if e.primary_server == "mbx01"])
    one_call = model.on_time(coarse, at(24 * 60))
    fine = model.new_state("mbx01")
    model.on_events(fine, [e for e in events if e.primary_server == "mbx01"])
    many_calls = [c for minute in range(0, 24 * 60, 7) for c in model.on_time(fine, at(minute)).commands]
    assert [c.command_id for c in one_call.commands] == [c.command_id for c in many_calls]


def test_a_copy_the_primary_makes_on_its_shadow_is_contact_that_holds_its_promotion_off():
    """"The SMTP communication between the shadow server and the primary server is used as the heartbeat that
    determines the availability of the servers" (003); ShadowResubmitTimeSpan is how long a server waits "before
    deciding that a primary server has failed" (003). mbx02's discard queries of mbx01 fail from 6 on (its own
    sessions to mbx01 do not get through), but mbx01 opens sessions to mbx02 and makes a copy there every 30 minutes
    (m2, m3, ...): mbx01 has not failed, and mbx02 does not take m1 over at 4 + 3 hours. Once the copies stop (the
    last at 181), it does, ShadowResubmitTimeSpan later."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.query_ok("mbx02", "mbx01", 4), *org.heartbeats_failing("mbx02", "mbx01", 6, 8 * 60)]
    for n, minute in enumerate(range(31, 182, 30), start=2):
        events += [*org.received("mbx01", f"m{n}", minute), *org.shadowed("mbx01", "mbx02", f"m{n}", minute)]
    result = replay(sorted(events, key=lambda e: e.event_time_ms))
    promotions = [a for a in result.alerts if a.type is AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED]
    assert [a.decided_at_ms for a in promotions] == [at(181) + 3 * HOUR]
