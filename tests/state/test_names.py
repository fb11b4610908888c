"""Server names in any case (state/names.py): MBX01 declared, mbx01 in the primary's events and Mbx01 in its
shadows' are one server to the reference replay, spelled as declared in what it decides, else in lower case."""

from __future__ import annotations

from schemas.events import ClockTick
from state.names import ServerNames, server_key
from state.parameters import ModelConfig
from state.replay import replay
from tests.state.world import Crash, Mail, SERVERS, simulate, spelled_apart

# m1 and m2 primaries crash (same database after 5 h, new database), the shadow mbx03 loses its copies.
WORLD = ([Mail(0, 1, 5, 3, True), Mail(0, 2, 20, 200, True), Mail(1, 1, 30, 5, True), Mail(1, 2, 40, 300, True),
          Mail(2, 1, 50, 2, False), Mail(2, 2, 60, 400, True), Mail(1, 1, 75, 500, True)],
         (Crash(100, 300, False), Crash(110, 30, True), Crash(105, 400, True)))
DECLARED = ModelConfig(servers=tuple(s.upper() for s in SERVERS))


def decisions(events, config):
    result = replay([e for e in events if not isinstance(e, ClockTick)], config)
    return {a.alert_id: a for a in result.alerts}, {c.command_id: c for c in result.commands}


def test_the_rule():
    names = ServerNames(["MBX01", "Hub01"])
    assert [names.spelling(n) for n in ("mbx01", "Mbx01", "MBX01", "HUB01", "EX02", "ex02")] == \
        ["MBX01", "MBX01", "MBX01", "Hub01", "ex02", "ex02"]
    assert server_key("MBX01.Contoso.COM") == "mbx01.contoso.com"
    assert server_key("ÉX01") == "Éx01", "DNS reads only ASCII letters in any case (RFC 4343)"


def test_names_made_up_by_bad_input_do_not_pile_up():
    names = ServerNames(["MBX01"])
    for n in range(100_000):
        assert names.spelling(f"Junk{n}") == f"junk{n}"
    assert len(names._spelled) <= 4096 and len(names._as_spelled) <= 4096
    assert names.spelling("mbx01") == "MBX01" and names.spelling("junk7") == "junk7"


def test_servers_declared_in_capitals_and_spelled_otherwise_by_the_events_decide_as_one_spelling():
    events, _, _ = simulate(*WORLD)
    alerts, commands = decisions(events, DECLARED)
    assert len(alerts) >= 6 and commands, "the world promotes, and loses copies"
    assert decisions(spelled_apart(events), DECLARED) == (alerts, commands)
    named = {s for a in alerts.values() for s in a.servers} | {c.holder for c in commands.values()} \
        | {c.primary_server for c in commands.values()}
    assert named == {"MBX01", "MBX02", "MBX03"}, "as declared, not as the events spell them"


def test_undeclared_servers_spelled_otherwise_are_one_server_each_in_lower_case():
    events, _, _ = simulate(*WORLD)
    assert decisions(spelled_apart(events), ModelConfig()) == decisions(events, ModelConfig())
