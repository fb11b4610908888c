"""The cyclic collector paused while the reference replay runs, and as it was after."""

import gc

import pytest

from state import collector
from state.replay import replay
from tests.state.scenario import Org


@pytest.mark.parametrize("running", [True, False])
def test_paused_leaves_the_collector_as_it_found_it_even_when_the_block_fails(running):
    (gc.enable if running else gc.disable)()
    try:
        with pytest.raises(RuntimeError), collector.paused():
            assert not gc.isenabled()
            raise RuntimeError("the block failed")
        assert gc.isenabled() is running
    finally:
        gc.enable()


def test_the_replay_runs_with_the_collector_paused_and_running_again_after():
    org = Org()
    seen = []
    replay([*org.started("mbx01", "db1", 0), *org.received("mbx01", "m1", 0.5)],
           progress=lambda done, total: seen.append(gc.isenabled()))
    assert seen == [False]
    assert gc.isenabled()


def test_what_an_aged_paused_block_kept_is_old_when_the_collector_runs_again():
    gc.enable()
    with collector.paused(aged=True):
        kept = [[] for _ in range(1000)]
    assert gc.get_count()[0] == 0  # no collection waiting to walk them
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert id(kept) in oldest and all(id(item) in oldest for item in kept)


def test_what_a_paused_block_kept_is_young_unless_aged():
    gc.enable()
    with collector.paused():
        kept = [[] for _ in range(1000)]
    assert id(kept) not in {id(o) for o in gc.get_objects(generation=2)}  # young (or gen 1 after a collection)
