"""The bug hunt's worlds (benchmarks/hunt.py): one world per seed, each a topology file that loads."""

from __future__ import annotations

import re

from benchmarks.hunt import hunt, main, toml, topology, world
from producers.simulator.topology import load_topology
from state.model import _Transition


def test_one_seed_makes_one_world():
    assert world(1700) == world(1700) and world(1700) != world(1701)


def test_the_worlds_load_as_topology_files_and_as_built(tmp_path):
    for seed in range(1700, 1740):
        path = tmp_path / f"{seed}.toml"
        path.write_text(toml(world(seed)), encoding="utf-8")
        assert load_topology(path) == topology(world(seed), seed)


def test_show_prints_the_world_as_toml(capsys):
    assert main(["--show", "1700"]) == 0
    assert capsys.readouterr().out == toml(world(1700))


def test_a_digest_is_the_same_for_the_same_decisions_and_differs_with_them(monkeypatch):
    line = hunt(3101, None, digest=True)
    assert re.fullmatch(r"seed 3101: alerts 25/25, digest [0-9a-f]{16}", line)
    assert hunt(3101, None, digest=True) == line
    alert = _Transition.alert
    monkeypatch.setattr(_Transition, "alert", lambda run, kind, severity, servers, messages, t, *rest, **named:
                        alert(run, kind, severity, servers, messages, t + 1, *rest, **named))  # decided 1 ms later
    assert hunt(3101, None, digest=True) != line


def test_a_world_past_the_events_allowed_is_said_huge_not_run_to_its_end():
    """Seed 8640: ex01 and ex03 die for good, ex02 answers 451 to every message and its senders retry
    each one every minute: millions of events. The hunt stops it at its bound; a usual world is under it."""
    assert re.fullmatch(r"seed 8640: huge, more than 60,000 events by 1\.\d h", hunt(8640, None, max_events=60_000))
    assert "huge" not in hunt(1700, None, max_events=60_000)
