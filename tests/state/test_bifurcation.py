"""Bifurcation and side-effect messages: the copy goes only when every fork is processed."""

from state.replay import replay
from tests.state.scenario import Org


def forked(org):
    return [
        *org.received("mbx01", "m1", 0, recipients=["a@contoso.com", "b@contoso.com"]),
        *org.shadowed("mbx01", "mbx02", "m1", 0),
        *org.sent("mbx01", "m1", "mbx03", 1, fork="f1", recipients=["a@contoso.com"]),
        *org.sent("mbx01", "m1", "mbx04", 1, fork="f2", recipients=["b@contoso.com"]),
        *org.acked("mbx01", "m1", "mbx03", 2, fork="f1"),
    ]


def test_one_fork_done_keeps_the_shadow():
    org = Org()
    state = replay([*forked(org), *org.query_ok("mbx02", "mbx01", 3)]).states["mbx01"]
    assert state.messages["m1"].primary_done_ms is None
    assert state.pairs["mbx02"].pending_discards == set()


def test_every_fork_done_releases():
    org = Org()
    events = [*forked(org), *org.acked("mbx01", "m1", "mbx04", 3, fork="f2"),
              *org.query_ok("mbx02", "mbx01", 4, discarded=["m1"])]
    assert replay(events).settles("mbx01")


def test_promotion_resubmits_only_the_unfinished_fork():
    org = Org()
    events = [*forked(org), *org.heartbeats_failing("mbx02", "mbx01", 4, 4 * 60)]
    commands = replay(events).commands
    assert [(c.message.fork_id, c.next_hop) for c in commands] == [("f2", "mbx04")]


def test_dsn_holds_its_parent_until_it_is_processed_too():
    org = Org()
    events = [
        *org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0),
        *org.dsn("mbx01", "d1", parent="m1", at=1),
        *org.delivered("mbx01", "m1", "mbx03", 2),
    ]
    state = replay(events).states["mbx01"]
    assert state.messages["m1"].primary_done_ms is None, "the DSN is still pending"
    events += [*org.delivered("mbx01", "d1", "smtp.fabrikam.com", 3)]
    state = replay(events).states["mbx01"]
    assert state.messages["m1"].primary_done_ms is not None
    events += [*org.query_ok("mbx02", "mbx01", 4, discarded=["m1"])]
    assert replay(events).settles("mbx01")


def test_boundary_crossing_ends_tracking_of_that_fork():
    org = Org()
    events = [
        *org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0),
        *org.sent("mbx01", "m1", "smtp.fabrikam.com", 1, outside=True),
        *org.crossed("mbx01", "m1", "smtp.fabrikam.com", 2),
        *org.query_ok("mbx02", "mbx01", 3, discarded=["m1"]),
    ]
    result = replay(events)
    assert result.settles("mbx01")
    assert result.alerts == []
