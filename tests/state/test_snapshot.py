"""Snapshots: a group's state survives dump and load exactly, and no field is left out."""

import dataclasses
import pickle

import pytest
from hypothesis import given, settings

from schemas import events as ev
from schemas.events import AlertType, Recipient
from state import snapshot
from state.model import ShadowRedundancyModel, _Transition
from state.records import Message, Pair
from state.replay import replay
from tests.state import timelines
from tests.state.scenario import Org, at
from tests.state.world import simulate, worlds


def states_after(events):
    model, states = ShadowRedundancyModel(), {}
    for event in events:
        if event.primary_server:
            state = states.setdefault(event.primary_server, model.new_state(event.primary_server))
            model.on_events(state, [event])
    return states


@settings(max_examples=60, deadline=None)
@given(worlds)
def test_dump_then_load_gives_the_same_state_midway_through_any_world(world):
    events, _, _ = simulate(*world)
    for state in states_after(events[: len(events) // 2]).values():
        assert snapshot.load(snapshot.dump(state)) == state


def test_a_loaded_state_goes_on_exactly_like_the_original():
    org = Org()
    first = [*org.started("mbx01", "db1", 0), *org.received("mbx01", "m1", 1, external=["x@fabrikam.com"]),
             *org.shadowed("mbx01", "mbx02", "m1", 1), *org.sent("mbx01", "m1", "mbx03", 2, fork="f1")]
    rest = org.heartbeats_failing("mbx02", "mbx01", 3, 4 * 60)
    model = ShadowRedundancyModel()
    original = model.new_state("mbx01")
    model.on_events(original, first)
    copy = snapshot.load(snapshot.dump(original))
    assert model.on_events(original, rest) == model.on_events(copy, rest)
    assert copy == original


@pytest.mark.parametrize("record, flat, nested", [
    (Message, snapshot.MESSAGE_FLAT, snapshot.MESSAGE_NESTED),
    (Pair, snapshot.PAIR_FLAT, snapshot.PAIR_NESTED),
])
def test_every_field_is_in_the_snapshot(record, flat, nested):
    assert sorted(flat + nested) == sorted(f.name for f in dataclasses.fields(record))


def test_another_format_is_refused():
    data = pickle.loads(snapshot.dump(ShadowRedundancyModel().new_state("mbx01")))
    stale = pickle.dumps(((99, *data[0][1:]), *data[1:]))
    with pytest.raises(ValueError, match="format 99"):
        snapshot.load(stale)


def test_a_format_8_snapshot_loads_its_forks_as_not_notified():
    """Format 8 had no fork's `notified` (its discard notification reached the shadow): false, and the fork
    round-trips in format 9."""
    org = Org()
    state = replay([*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 0, recipients=("a@x", "b@x")),
                    *org.shadowed("mbx01", "mbx02", "m1", 0),
                    *org.sent("mbx01", "m1", "mbx03", 1, fork="f1", recipients=("a@x",)),
                    *org.acked("mbx01", "m1", "mbx03", 1, fork="f1"),
                    *timelines._forks_discarded(org, 2, timelines.ref("m1", "f1"))]).states["mbx01"]
    assert state.messages["m1"].forks["f1"].notified
    assert snapshot.load(snapshot.dump(state)) == state
    header, messages, *rest = as_format_17(state)
    older = [(*m[:3], tuple(f[:4] for f in m[3]), *m[4:]) for m in messages]
    loaded = snapshot.load(pickle.dumps(((8, *header[1:-1]), older, *rest)))
    assert not loaded.messages["m1"].forks["f1"].notified
    assert loaded.messages["m1"].forks["f1"].waiting == ("b@x",)  # before format 11: b@x may wait in f1
    assert dataclasses.replace(loaded.messages["m1"].forks["f1"], notified=True, waiting=(), done_ms=at(1)) \
        == state.messages["m1"].forks["f1"]


def test_a_format_9_snapshot_loads_its_messages_as_not_expired_and_its_pairs_answers_unknown():
    """Format 9 had no message's `expired_ms` (it expired in its primary's queue, its copy still held) nor a
    pair's `last_answered_ms`: unknown, and both round-trip in format 10."""
    org = Org()
    state = replay([*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 0),
                    *org.shadowed("mbx01", "mbx02", "m1", 0), *org.query_ok("mbx02", "mbx01", 1),
                    *org.expired("mbx01", "m1", 2)]).states["mbx01"]
    assert (state.messages["m1"].expired_ms, state.pairs["mbx02"].last_answered_ms) == (at(2), at(1))
    assert snapshot.load(snapshot.dump(state)) == state
    header, messages, pairs, *rest = as_format_17(state)
    assert snapshot.MESSAGE_FLAT[-2:] == ("expired_ms", "stored_ms")
    assert snapshot.PAIR_FLAT[-2:] == ("last_answered_ms", "first_copy_ms")
    older = [(*m[:5], m[5][:-2], *m[6:]) for m in messages]  # the flat fields without the last two (11's too)
    older_pairs = [(flat[:-2], *p) for flat, *p in pairs]  # without 16's `first_copy_ms` too
    loaded = snapshot.load(pickle.dumps(((9, *header[1:-1]), older, older_pairs, *rest)))
    assert (loaded.messages["m1"].expired_ms, loaded.pairs["mbx02"].last_answered_ms) == (None, None)
    assert loaded.messages["m1"].stored_ms == 0
    assert dataclasses.replace(loaded.messages["m1"], expired_ms=at(2), stored_ms=at(0)) == state.messages["m1"]
    assert dataclasses.replace(loaded.pairs["mbx02"], last_answered_ms=at(1), first_copy_ms=at(0)) == state.pairs["mbx02"]


def as_format_6(state) -> tuple:
    """`state`'s snapshot as format 6 wrote it: no `primary_started_ms`, the header's last value then."""
    header, *rest = as_format_13(state)
    assert header[-1] == state.primary_started_ms
    return ((6, *header[1:-1]), *rest)


def before_20(state):
    """`state` as a snapshot before format 20 keeps it: no fork's `served_late`."""
    return dataclasses.replace(state, messages={
        key: dataclasses.replace(m, forks={k: dataclasses.replace(f, served_late=()) for k, f in m.forks.items()})
        if m.forks else m for key, m in state.messages.items()})


def before_18(state):
    """`state` as a snapshot before format 18 keeps it: format 20's without `db_reported_ms`."""
    return dataclasses.replace(before_20(state), db_reported_ms=None)


def before_17(state):
    """`state` as a snapshot before format 17 keeps it: format 18's without a fork's `done_ms`."""
    state = before_18(state)
    return dataclasses.replace(state, messages={
        key: dataclasses.replace(m, forks={k: dataclasses.replace(f, done_ms=None) for k, f in m.forks.items()})
        if m.forks else m for key, m in state.messages.items()})


def before_16(state):
    """`state` as a snapshot before format 16 keeps it: format 17's without a pair's `first_copy_ms`."""
    state = before_17(state)
    return dataclasses.replace(state, pairs={shadow: dataclasses.replace(pair, first_copy_ms=None)
                                             for shadow, pair in state.pairs.items()})


def as_format_19(state) -> tuple:
    """`state`'s snapshot as format 19 wrote it: no fork's `served_late`, its values' last."""
    header, messages, *rest = pickle.loads(snapshot.dump(state))
    assert all(fork[-1] == state.messages[m[0][1]].forks[fork[0]].served_late for m in messages for fork in m[3])
    return ((19, *header[1:]), [(*m[:3], tuple(fork[:-1] for fork in m[3]), *m[4:]) for m in messages], *rest)


def as_format_18(state) -> tuple:
    """`state`'s snapshot as format 18 wrote it: format 19 without `handled_early`, its last part."""
    header, *rest = as_format_19(state)
    assert dict(rest[-1]) == {key: tuple(events) for key, events in state.handled_early.items()}
    return ((18, *header[1:]), *rest[:-1])


def as_format_17(state) -> tuple:
    """`state`'s snapshot as format 17 wrote it: no `db_reported_ms`, the header's last value."""
    header, *rest = as_format_18(state)
    assert header[-1] == state.db_reported_ms
    return ((17, *header[1:-1]), *rest)


def as_format_16(state) -> tuple:
    """`state`'s snapshot as format 16 wrote it: format 17 without a fork's `done_ms`, its values' last."""
    header, messages, *rest = as_format_17(state)
    assert all(fork[-1] == state.messages[m[0][1]].forks[fork[0]].done_ms for m in messages for fork in m[3])
    return ((16, *header[1:]), [(*m[:3], tuple(fork[:-1] for fork in m[3]), *m[4:]) for m in messages], *rest)


def as_format_15(state) -> tuple:
    """`state`'s snapshot as format 15 wrote it: format 16 without a pair's `first_copy_ms`, its flat values'
    last."""
    header, messages, pairs, *rest = as_format_16(state)
    assert all(flat[-1] == state.pairs[flat[0]].first_copy_ms for flat, *_ in pairs)
    return ((15, *header[1:]), messages, [(flat[:-1], *p) for flat, *p in pairs], *rest)


def as_format_14(state) -> tuple:
    """`state`'s snapshot as format 14 wrote it: format 15 without a server's `replaced_db_id` in `nodes`, its
    fact's last value."""
    header, messages, pairs, promoted, closed, deadlines, facts, *rest = as_format_15(state)
    nodes, *other_facts = facts
    assert all(node[-1] == state.nodes[node[0]].replaced_db_id for node in nodes)
    return ((14, *header[1:]), messages, pairs, promoted, closed, deadlines,
            (tuple(node[:-1] for node in nodes), *other_facts), *rest)


def as_format_13(state) -> tuple:
    """`state`'s snapshot as format 13 wrote it: format 14 without `replaced_db_id`, the header's last value."""
    header, *rest = as_format_14(state)
    assert header[-1] == state.replaced_db_id
    return ((13, *header[1:-1]), *rest)


def as_format_5(state) -> tuple:
    """`state`'s snapshot as format 5 wrote it: format 6 without `unreachable_ms`, and with a pair's count of
    failed queries after its `shadow_db_id`."""
    header, messages, pairs, *rest = as_format_6(state)
    assert snapshot.PAIR_FLAT[4] == "shadow_db_id"
    counted = [((*flat[:5], 3, *flat[5:]), held, pending) for flat, held, pending in pairs]
    return ((5, *header[1:-1]), messages, counted, *rest)


def restarted_with_a_new_database(org):
    """mbx01's NodeStarted with dbP2 at 10 (m1's copy on mbx02 promoted then), m2 shadowed on mbx02 since."""
    return [*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 1),
            *org.shadowed("mbx01", "mbx02", "m1", 1), *org.query_ok("mbx02", "mbx01", 2),
            *org.query_ok("mbx02", "mbx01", 8), *org.started("mbx01", "dbP2", 10), *org.received("mbx01", "m2", 10.2),
            *org.shadowed("mbx01", "mbx02", "m2", 10.2, db="dbP2")]


def test_a_format_6_snapshot_loads_with_the_primarys_start_unknown():
    """Format 6 had no `primary_started_ms`: unknown, a shadow's answer naming another database changes it
    whenever it comes, as the model did then."""
    org = Org()
    state = replay(restarted_with_a_new_database(org)).states["mbx01"]
    assert state.primary_started_ms == at(10)
    loaded = snapshot.load(pickle.dumps(as_format_6(state)))
    assert loaded == dataclasses.replace(before_16(state), primary_started_ms=None, replaced_db_id=None)
    stale = org.query_ok("mbx02", "mbx01", 10.5, db="dbP1")
    model = ShadowRedundancyModel()
    assert model.on_events(state, stale).commands == []
    assert [c.message.internal_id for c in model.on_events(loaded, stale).commands] == ["m2"]


def test_a_format_5_snapshot_loads_without_its_pairs_count_of_failed_queries():
    """Format 5 kept a count of failed queries per pair (2010 declared the primary failed by it; the
    time since the last contact decides now) and had no `unreachable_ms`."""
    org = Org()
    state = replay([*org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0),
                    *org.query_failed("mbx02", "mbx01", 1)]).states["mbx01"]
    assert state.pairs and state.unreachable_ms is not None
    loaded = snapshot.load(pickle.dumps(as_format_5(state)))
    assert loaded == dataclasses.replace(before_16(state), unreachable_ms=None)


def test_a_format_5_snapshot_loads_with_the_primarys_start_unknown():
    state = replay(restarted_with_a_new_database(Org())).states["mbx01"]
    loaded = snapshot.load(pickle.dumps(as_format_5(state)))
    assert loaded == dataclasses.replace(before_16(state), unreachable_ms=None, primary_started_ms=None,
                                         replaced_db_id=None)


def test_a_format_4_snapshot_loads_its_messages_without_their_copys_database():
    """Format 4 had no `primary_db` per message: such a message falls back to its pair's database."""
    org = Org()
    result = replay([*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 1),
                     *org.shadowed("mbx01", "mbx02", "m1", 1, db="dbP1")])
    state = result.states["mbx01"]
    assert state.messages["m1"].primary_db == "dbP1"
    header, messages, *rest = as_format_5(state)
    assert snapshot.MESSAGE_FLAT[-3:] == ("primary_db", "expired_ms", "stored_ms")
    older = [(*m[:5], m[5][:-3], m[6]) for m in messages]  # the flat fields without the last three (9's, 11's too)
    loaded = snapshot.load(pickle.dumps(((4, *header[1:]), older, *rest)))
    assert loaded.messages["m1"].primary_db is None
    assert _Transition.copy_db(loaded.messages["m1"], loaded.pairs["mbx02"]) == "dbP1"
    assert dataclasses.replace(loaded.messages["m1"], primary_db="dbP1", stored_ms=at(1)) == state.messages["m1"]


@pytest.mark.parametrize("make", [timelines.same_site_copies_after_remote_retries, timelines.silent_feed,
                                  timelines.double_failure_with_new_databases], ids=lambda f: f.__name__)
def test_facts_same_site_reports_and_applied_ids_survive_a_snapshot(make):
    """Midway through a timeline fed with the shared facts, as the reference replay feeds them."""
    timeline = make()
    events = sorted(timeline.events, key=lambda e: e.event_time_ms)
    half = [e for e in events if e.event_time_ms <= events[len(events) // 2].event_time_ms]
    primary = half[-1].primary_server or events[0].node
    state = replay(half, timeline.config).states[primary]
    copy = snapshot.load(snapshot.dump(state))
    assert copy == state
    assert state.nodes and state.last_seen and state.seen_ids


def test_messages_held_share_their_recipients_and_hops_whatever_event_brought_them():
    """Every decoded event brings its own copies of the recipients and hop names; the messages
    held share one of each, before and after a snapshot."""
    org = Org()
    model = ShadowRedundancyModel()
    state = model.new_state("mbx01")
    pair = ("alice@contoso.com", "bob@contoso.com")
    events = [e for mid in ("m1", "m2") for e in [*org.received("mbx01", mid, 0, recipients=pair),
                                                 *org.sent("mbx01", mid, "hub01", 1)]]
    events += [*org.received("mbx01", "m3", 0, recipients=pair[:1]), *org.received("mbx01", "m4", 0, recipients=pair[:1])]
    copies = [dataclasses.replace(e, **copied(e)) for e in events]  # as a decoder makes them: equal, not the same
    model.on_events(state, copies)
    for held in (state, snapshot.load(snapshot.dump(state))):
        m1, m2 = held.messages["m1"], held.messages["m2"]
        assert m1.recipients == tuple(Recipient(a, True) for a in pair)
        assert all(a is b for a, b in zip(m1.recipients, m2.recipients, strict=True))
        assert held.messages["m3"].recipients is held.messages["m4"].recipients
        assert held.messages["m3"].recipients[0] is m1.recipients[0]
        assert [f.next_hop for f in m1.forks.values()] == ["hub01"]
        assert [(f.next_hop, f.recipients) for f in m1.forks.values()] == [(f.next_hop, f.recipients) for f in m2.forks.values()]
        assert next(iter(m1.forks.values())).next_hop is next(iter(m2.forks.values())).next_hop


def test_the_shared_values_table_is_bounded_and_what_it_forgot_stays_correct(monkeypatch):
    from state import records

    monkeypatch.setattr(records, "SHARED_LIMIT", 3)
    monkeypatch.setattr(records, "_SHARED", {})
    monkeypatch.setattr(records, "_RECIPIENTS", {})
    values = [records.shared("".join(["hop", str(n)])) for n in range(10)]
    assert values == [f"hop{n}" for n in range(10)] and len(records._SHARED) <= 3
    assert records.shared("".join(["hop", "9"])) is values[9]
    lists = [records.shared_recipients((Recipient(f"u{n}@contoso.com", True), Recipient("x@fabrikam.com", n > 5)))
             for n in range(10)]
    assert lists == [(Recipient(f"u{n}@contoso.com", True), Recipient("x@fabrikam.com", n > 5)) for n in range(10)]
    assert len(records._RECIPIENTS) <= 3


def copied(event) -> dict:
    """New, equal objects for the strings and tuples an event carries."""
    fresh = {}
    for name in ("recipients", "next_hop"):
        value = getattr(event, name, None)
        if isinstance(value, str):
            fresh[name] = "".join(list(value))
        elif isinstance(value, tuple):
            fresh[name] = tuple(Recipient("".join(list(r.address)), r.internal) if isinstance(r, Recipient)
                                else "".join(list(r)) for r in value)
    return fresh


def test_a_format_10_snapshot_written_by_the_previous_code_loads_its_fork_served_in_part_as_waiting():
    """The bytes were written by the code before format 11 (d365d7d): mbx01 sent f1 of m1 to gw-fabrikam for a@ and
    b@fabrikam.com at 2, gw-fabrikam took a@ and deferred b@, and mbx02's answered query at 3 counted as f1's discard
    notification. Format 10 has no fork's `waiting`: f1 may be served in part, so it waits for b@ and is not
    notified, and when mbx01 is back with a new queue database at 6, the duplicate of a@ is forecast, as this code
    decides from the start."""
    from pathlib import Path
    from schemas.events import AlertType
    data = (Path(__file__).parent / "data" / "format_10_a_fork_served_in_part.snapshot").read_bytes()
    assert pickle.loads(data)[0][0] == 10
    loaded = ShadowRedundancyModel().loaded(snapshot.load(data))
    f1 = loaded.messages["m1"].forks["f1"]
    assert (f1.recipients, f1.done, f1.notified, f1.waiting) == (("a@fabrikam.com",), True, False, ("b@fabrikam.com",))
    assert loaded.messages["m1"].stored_ms == 0  # nor its copy's report time: unknown
    assert snapshot.load(snapshot.dump(loaded)) == loaded
    org = Org()
    later = [*org.query_ok("mbx02", "mbx01", 4), *org.query_failed("mbx02", "mbx01", 5),
             *org.started("mbx01", "dbP2", 6)]
    output = ShadowRedundancyModel().on_events(loaded, [dataclasses.replace(e, event_id=f"later-{i}")
                                                        for i, e in enumerate(later)])
    assert [[(m.message.internal_id, m.recipients) for m in a.messages] for a in output.alerts
            if a.type is AlertType.DUPLICATE_DELIVERY_EXPECTED] == [[("m1", ("a@fabrikam.com",))]]


def test_a_discard_stamped_before_the_copy_is_remembered_across_a_snapshot():
    """mbx02 (its clock set back) discards m1 before it reports storing m1's copy (hunt seed 1589): the state is
    written and read back between the two, as the streaming twin does between micro-batches; the copy stored after
    is released still, and mbx01's new database at 3 forecasts no duplicate of m1, delivered once."""
    from schemas import events as ev
    from tests.state.scenario import ref
    org = Org()
    first = [*org.started("mbx01", "dbP1", 0), *org.query_ok("mbx02", "mbx01", 0.5),
             ev.ShadowDiscarded(event_id="d1", event_time_ms=at(0.9), node="mbx02", primary_server="mbx01",
                                message=ref("m1"))]
    rest = [*org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
            *org.delivered("mbx01", "m1", "mbx03", 1.2),
            *org.started("mbx01", "dbP2", 3), *org.query_ok("mbx02", "mbx01", 4, db="dbP2")]
    model = ShadowRedundancyModel()
    original = model.new_state("mbx01")
    model.on_events(original, first)
    copy = snapshot.load(snapshot.dump(original))
    assert copy == original
    assert model.on_events(copy, rest).alerts == []


def _queried_then_released():
    """mbx02 queries mbx01 at 2 and 7, where the answer releases m1's copy, the last it held (hunt seed 2203);
    then m2's copy at 8, and mbx02 never queries again."""
    org = Org()
    first = [*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m1", 1),
             *org.shadowed("mbx01", "mbx02", "m1", 1), *org.query_ok("mbx02", "mbx01", 2),
             *org.delivered("mbx01", "m1", "mbx03", 3), *org.query_ok("mbx02", "mbx01", 7, discarded=["m1"])]
    rest = [*org.received("mbx01", "m2", 8), *org.shadowed("mbx01", "mbx02", "m2", 8)]
    return first, rest


def test_a_shadows_queries_remembered_after_its_pair_emptied_survive_a_snapshot():
    """The state is written and read back between the release of mbx02's last copy and its next copy, as the
    streaming twin does between micro-batches: the pair made again has heartbeats, measured from the query at 7."""
    first, rest = _queried_then_released()
    model = ShadowRedundancyModel()
    original = model.new_state("mbx01")
    model.on_events(original, first)
    assert original.queried_by == {"mbx02": at(7)}
    copy = snapshot.load(snapshot.dump(original))
    assert copy == original
    model.on_events(copy, rest)
    assert (copy.pairs["mbx02"].heartbeats, copy.pairs["mbx02"].last_heartbeat_ms) == (True, at(7))
    assert copy.queried_by == {}


def test_a_format_12_snapshot_loads_with_no_shadows_queries_remembered():
    """Format 12 kept no `queried_by`: the pair made again has no heartbeat seen until its shadow's next query."""
    first, rest = _queried_then_released()
    model = ShadowRedundancyModel()
    state = model.new_state("mbx01")
    model.on_events(state, first)
    header, *parts = as_format_13(state)
    loaded = snapshot.load(pickle.dumps(((12, *header[1:]), *parts[:-1])))
    assert loaded.queried_by == {}
    model.on_events(loaded, rest)
    assert not loaded.pairs["mbx02"].heartbeats


def test_a_format_13_snapshot_loads_with_the_replaced_database_unknown():
    """Format 13 kept no `replaced_db_id`: an answer naming the database mbx01's NodeStarted replaced, after another
    shadow's failed query, is taken for a restart, as the model did then; format 14 keeps it stale."""
    org = Org()
    state = replay([*org.started("mbx03", "dbS3", 0), *restarted_with_a_new_database(org),
                    *org.query_failed("mbx03", "mbx01", 10.3)]).states["mbx01"]
    assert state.replaced_db_id == "dbP1"
    assert snapshot.load(snapshot.dump(state)) == state
    loaded = snapshot.load(pickle.dumps(as_format_13(state)))
    assert loaded == dataclasses.replace(before_16(state), replaced_db_id=None)
    stale = org.query_ok("mbx02", "mbx01", 10.5, db="dbP1")
    model = ShadowRedundancyModel()
    assert model.on_events(state, stale).commands == []
    assert [c.message.internal_id for c in model.on_events(loaded, stale).commands] == ["m2"]


def test_a_format_14_snapshot_loads_with_the_database_a_shadows_nodestarted_replaced_unknown():
    """Format 14 kept no server's `replaced_db_id`: a query of mbx02 naming dbS1, the database its NodeStarted at 10
    replaced, sets it back, and its next query naming dbS2 is taken for another restart (m1's copy, made in dbS2 at
    10.5, gone), as the model did then; format 15 keeps the query stale."""
    org = Org()
    state = replay([*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
                    *org.started("mbx02", "dbS2", 10), *org.received("mbx01", "m1", 10.5),
                    *org.shadowed("mbx01", "mbx02", "m1", 10.5)]).states["mbx01"]
    assert state.nodes["mbx02"].replaced_db_id == "dbS1"
    assert snapshot.load(snapshot.dump(state)) == state
    loaded = snapshot.load(pickle.dumps(as_format_14(state)))
    assert loaded.nodes["mbx02"] == dataclasses.replace(state.nodes["mbx02"], replaced_db_id=None)
    queries = [ev.DiscardQuerySent(**org._header("mbx02", "mbx01", 10.6), shadow_queue_db_id="dbS1"),
               *org.query_ok("mbx02", "mbx01", 12, shadow_db="dbS2")]
    model = ShadowRedundancyModel()
    assert model.on_events(state, queries).alerts == []
    assert [a.type for a in model.on_events(loaded, queries).alerts] == [AlertType.SHADOW_SERVER_UNREACHABLE]


def test_a_format_15_snapshot_loads_with_the_pairs_first_copy_unknown():
    """Format 15 kept no pair's `first_copy_ms`: with no query of mbx02's answered yet, a copy restarts
    ShadowMessageAutoDiscardInterval (1 hour), as the model did then. Timeline
    a_copy_before_any_answered_query_does_not_restart_the_discard_interval up to 56, then m3's copy at 57: m1's and
    m2's notifications go at 61 (the pair's first copy at 1), and from the old snapshot not before 117."""
    timeline = timelines.a_copy_before_any_answered_query_does_not_restart_the_discard_interval()
    state = replay([e for e in timeline.events if e.event_time_ms <= at(56)], timeline.config).states["mbx01"]
    assert state.pairs["mbx02"].first_copy_ms == at(1)
    assert snapshot.load(snapshot.dump(state)) == state
    loaded = snapshot.load(pickle.dumps(as_format_15(state)))
    assert loaded == before_16(state)
    org, model = Org(), ShadowRedundancyModel(timeline.config)
    copy = [*org.received("mbx01", "m3", 57), *org.shadowed("mbx01", "mbx02", "m3", 57)]
    dropped = []
    for each in (state, loaded):
        model.on_events(each, copy)
        dropped.append([(a.type, a.decided_at_ms) for a in model.on_time(each, at(62)).alerts])
    assert dropped == [[(AlertType.DISCARD_EVENTS_DROPPED, at(61))], []]


def test_a_format_16_snapshot_loads_with_its_forks_processing_time_unknown():
    """Format 16 kept no fork's `done_ms`: its recipients' first copy is dated as before, by the message's processing
    as a whole. Timeline each_fork_of_a_message_delivered_twice_is_forgotten_by_duplicate_detection_on_its_own up to
    71, then mbx01's restart with a new queue database at 72: alice's first copy (f1, at 5) is 67 minutes old, and
    named; from the old snapshot it is taken to be m1's processing (at 70), and she is not."""
    timeline = timelines.each_fork_of_a_message_delivered_twice_is_forgotten_by_duplicate_detection_on_its_own()
    state = replay([e for e in timeline.events if e.event_time_ms <= at(71)], timeline.config).states["mbx01"]
    assert [f.done_ms for f in state.messages["m1"].forks.values()] == [at(5), at(70)]
    assert snapshot.load(snapshot.dump(state)) == state
    loaded = snapshot.load(pickle.dumps(as_format_16(state)))
    assert loaded == before_17(state)
    assert named_at_the_restart(timeline, state, loaded) == [[("alice@contoso.com", "bob@fabrikam.com")],
                                                             [("bob@fabrikam.com",)]]


def named_at_the_restart(timeline, *states) -> list:
    """The recipients each of `states` (at 71) names in its duplicate forecast at mbx01's restart, at 72."""
    restart = [e for e in timeline.events if e.event_time_ms > at(71)]
    model = ShadowRedundancyModel(timeline.config)
    return [[m.recipients for a in model.on_events(each, restart).alerts for m in a.messages] for each in states]


def test_a_format_17_snapshot_loads_with_the_time_a_shadow_reported_the_new_database_unknown():
    """Format 17 kept no `db_reported_ms`: mbx03's answer at 19.5 naming dbP1, the database mbx02's copy stamped
    18.1 showed replaced, is taken for mbx01 back with dbP1, as the model did then: m3, the copy of dbP2 on mbx02,
    promoted with a command. Format 18 keeps the answer stale. Timeline
    a_new_database_reported_by_a_clock_behind_waits_for_each_shadows_own_answer up to 19.4."""
    timeline = timelines.a_new_database_reported_by_a_clock_behind_waits_for_each_shadows_own_answer()
    state = replay([e for e in timeline.events if e.event_time_ms < at(19.5)], timeline.config).states["mbx01"]
    assert (state.replaced_db_id, state.db_reported_ms) == ("dbP1", at(18.1))
    assert snapshot.load(snapshot.dump(state)) == state
    loaded = snapshot.load(pickle.dumps(as_format_17(state)))
    assert loaded == before_18(state)
    answer = [e for e in timeline.events if e.event_time_ms == at(19.5)]
    model = ShadowRedundancyModel(timeline.config)
    commands = [[c.message.internal_id for c in model.on_events(each, answer).commands] for each in (state, loaded)]
    assert commands == [[], ["m3"]]


def test_a_format_18_snapshot_loads_with_no_primarys_word_before_a_receipt_remembered():
    """Format 18 kept no `handled_early`: mbx01's delivery of m1 stamped 9.1 by its clock set back, before the receipt
    at 10, is forgotten, and m1 expires in its queue at 10 + 2 days, as the model did then; format 19 keeps the delivery
    until the receipt. Timeline a_delivery_stamped_before_its_receipt_by_a_clock_set_back_is_a_delivery up to 9.5."""
    timeline = timelines.a_delivery_stamped_before_its_receipt_by_a_clock_set_back_is_a_delivery()
    state = replay([e for e in timeline.events if e.event_time_ms < at(9.5)], timeline.config).states["mbx01"]
    assert [type(e) for e in state.handled_early["m1"]] == [ev.SentToNextHop, ev.NextHopAcknowledged]
    assert snapshot.load(snapshot.dump(state)) == state
    loaded = snapshot.load(pickle.dumps(as_format_18(state)))
    assert loaded == dataclasses.replace(state, handled_early={})
    rest = [e for e in timeline.events if e.event_time_ms >= at(9.5)]
    model = ShadowRedundancyModel(timeline.config)
    alerts = [[a.type for a in model.on_events(each, rest).alerts] for each in (state, loaded)]
    assert alerts == [[], [AlertType.NOT_REDUNDANT, AlertType.MESSAGE_EXPIRED]]


def test_a_format_19_snapshot_loads_with_no_recipient_served_late():
    """Format 19 kept no fork's `served_late`: carol@, delivered at 40 by fork f1 after alice@ at 5, is dated by f1's
    first acknowledgement, as the model did then. Timeline
    a_recipient_delivered_late_is_forgotten_by_duplicate_detection_from_its_own_copy up to 71, then mbx01's restart
    with a new queue database at 72: carol's copy, 32 minutes old, hides the duplicate from her; from the old snapshot
    it is taken to be 67 minutes old, and she is named."""
    timeline = timelines.a_recipient_delivered_late_is_forgotten_by_duplicate_detection_from_its_own_copy()
    state = replay([e for e in timeline.events if e.event_time_ms <= at(71)], timeline.config).states["mbx01"]
    assert state.messages["m1"].forks["f1"].served_late == (("carol@contoso.com", at(40)),)
    assert snapshot.load(snapshot.dump(state)) == state
    loaded = snapshot.load(pickle.dumps(as_format_19(state)))
    assert loaded == before_20(state)
    assert named_at_the_restart(timeline, state, loaded) == [[("alice@contoso.com",)],
                                                             [("alice@contoso.com", "carol@contoso.com")]]
