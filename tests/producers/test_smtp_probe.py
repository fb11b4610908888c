"""The SMTP probe (producers/smtp_probe.py, `shadowtwin probe`) against real SMTP sockets (aiosmtpd),
stopped mid-test; its events on a real broker."""

import json
import signal
import socket
import threading
import uuid

import pytest
from aiosmtpd.controller import Controller

from infra import kafka as kafka_clients
from producers.smtp_probe import Prober, Target, load_targets, parse_target
from schemas.codec import decode
from schemas.events import ServerProbed
from shadowtwin.cli import main
from tests.conftest import free_port
from tests.producers.test_mtl import wait_for


class _Nothing:
    """aiosmtpd handler: the probe only needs EHLO and QUIT."""


@pytest.fixture
def smtp_server():
    controller = Controller(_Nothing(), hostname="127.0.0.1", port=free_port(), server_hostname="mbx01.contoso.com")
    controller.start()
    yield controller
    if controller._thread is not None:  # the test may have stopped it
        controller.stop()


def test_an_answered_probe_is_the_servers_activity_and_a_failed_one_is_not(smtp_server):
    events = []
    prober = Prober([Target("mbx01", "127.0.0.1", smtp_server.port)], events.append, every_s=0.1, timeout_s=2,
                    prober="probe@ops01", clock=lambda: 1_767_225_600.0)
    prober.round()
    smtp_server.stop()
    prober.round()
    answered, failed = events
    assert (answered.node, answered.primary_server, answered.server, answered.answered) == (
        "mbx01", "mbx01", "mbx01", True)
    assert answered.reply.startswith("250 mbx01.contoso.com") and answered.event_time_ms == 1_767_225_600_000
    assert (failed.node, failed.primary_server, failed.server, failed.answered) == (
        "probe@ops01", "mbx01", "mbx01", False)
    assert "ConnectionRefusedError" in failed.reply
    assert prober.counts.describe() == "2 rounds: 2 probes, 1 answered, 1 failed"


def test_a_server_that_accepts_but_never_greets_fails_within_the_timeout():
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen()
        events = []
        Prober([Target("mbx02", "127.0.0.1", mute.getsockname()[1])], events.append, every_s=1,
               timeout_s=0.3).round()
    assert [(e.answered, e.node.startswith("probe@")) for e in events] == [(False, True)]
    assert "timed out" in events[0].reply


def test_rounds_are_paced_by_every_and_stop_when_asked():
    stop, events = threading.Event(), []
    prober = Prober([Target("mbx03", "127.0.0.1", free_port())], events.append, every_s=60, timeout_s=0.5)
    threading.Timer(0.5, stop.set).start()
    counts = prober.run(stop)
    assert counts.rounds == 1 and len(events) == 1  # the second round was 60 s away when stop came


@pytest.mark.parametrize("text, target", [
    ("mbx01=10.0.0.11:2525", Target("mbx01", "10.0.0.11", 2525)),
    ("mbx01=mbx01.contoso.com", Target("mbx01", "mbx01.contoso.com", 25)),
])
def test_a_server_argument_is_name_host_and_port(text, target):
    assert parse_target(text) == target


@pytest.mark.parametrize("text, problem", [("mbx01", "expected NAME=HOST:PORT"), ("=h:25", "expected NAME=HOST:PORT"),
                                           ("mbx01=h:99999", "not a number from 1 to 65535")])
def test_a_bad_server_argument_is_named(text, problem):
    with pytest.raises(ValueError, match=problem):
        parse_target(text)


def test_servers_come_from_a_toml_list_and_a_bad_entry_is_named(tmp_path):
    good = tmp_path / "servers.toml"
    good.write_text('[[server]]\nname = "mbx01"\nhost = "10.0.0.11"\n\n[[server]]\nname = "mbx02"\nhost = "h"\nport = 2525\n')
    assert load_targets(good) == [Target("mbx01", "10.0.0.11", 25), Target("mbx02", "h", 2525)]
    bad = tmp_path / "bad.toml"
    bad.write_text('[[server]]\nname = "mbx01"\n')
    with pytest.raises(ValueError, match=r"bad.toml: server 1: needs a name and a host"):
        load_targets(bad)


@pytest.mark.parametrize("argv, message", [
    ([], "name at least one server"),
    (["--server", "mbx01"], "--server 'mbx01': expected NAME=HOST:PORT"),
    (["--server", "a=h:25", "--server", "a=g:25"], "a server is named twice (a)"),
    (["--server", "a=h:25", "--every", "soon"], "--every"),
])
def test_a_persons_mistake_is_one_line_and_status_2(argv, message, capsys):
    assert main(["probe", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_probe_publishes_answered_then_failed_events_on_the_broker(smtp_server, kafka_bootstrap, topics, capsys):
    command = ["probe", "--server", f"mbx01=127.0.0.1:{smtp_server.port}", "--rounds", "1", "--every", "1s",
               "--timeout", "2s", "--name", "probe@ops01", "--bootstrap", kafka_bootstrap, "--to", topics.events]
    assert main(command) == 0
    smtp_server.stop()
    assert main(command) == 0
    assert capsys.readouterr().out.splitlines() == ["1 rounds: 1 probes, 1 answered, 0 failed",
                                                    "1 rounds: 1 probes, 0 answered, 1 failed"]
    client = kafka_clients.consumer(kafka_bootstrap, f"test-{uuid.uuid4().hex}", [topics.events])
    found = []
    try:
        wait_for(lambda: found.extend(m for m in client.consume(10, 0.2) if m.error() is None) or len(found) >= 2,
                 seconds=30)
    finally:
        client.close()
    events = sorted((decode(m.value(), "Event") for m in found), key=lambda e: e.event_time_ms)
    assert [type(e) for e in events] == [ServerProbed, ServerProbed]
    assert [(e.node, e.answered) for e in events] == [("mbx01", True), ("probe@ops01", False)]
    assert {m.key() for m in found} == {b"mbx01"}


def test_ingest_follow_probes_beside_its_files_until_stopped(smtp_server, kafka_bootstrap, topics, tmp_path):
    """One agent beside a server: it tails the log, keeps its position, and probes the server; the
    server's SMTP stops mid-test, and the probes that follow fail."""
    from tests.producers.relay.conftest import read_topic, wait_until
    from tests.producers.test_mtl import EX01
    from tests.producers.test_signals import start, stopped

    log, state, conf = tmp_path / "MSGTRK20261122-1.LOG", tmp_path / "positions.json", tmp_path / "topics.toml"
    log.write_bytes(EX01.read_bytes())
    conf.write_text(f'[topics]\nevents = "{topics.events}"\ndead_letters = "{topics.dead_letters}"\n')
    agent = start(kafka_bootstrap, "--conf", conf, "ingest", "exchange-mtl", log, "--follow", "--state", state,
                  "--probe", f"mbx01=127.0.0.1:{smtp_server.port}", "--probe-every", "1s", "--probe-timeout", "1s",
                  "--probe-name", "probe@ops01")

    def probes(answered):
        return [e for e in read_topic(kafka_bootstrap, topics.events, seconds=0.5, max_s=5)
                if isinstance(e, ServerProbed) and e.server == "mbx01" and e.answered is answered]

    assert wait_until(lambda: probes(True), 60), "no answered probe"
    smtp_server.stop()
    assert wait_until(lambda: probes(False), 30), "no failed probe after the server stopped"
    code, out, _ = stopped(agent, signal.SIGTERM)
    assert code == 143
    assert "probes: " in out and " answered, " in out
    published = read_topic(kafka_bootstrap, topics.events, seconds=1, max_s=10)
    assert any(e.kind == "MessageReceived" for e in published), "the log's events, beside the probes"
    failed = probes(False)
    assert {(e.node, e.primary_server, e.via) for e in failed} == {("probe@ops01", "mbx01", "probe")}
    assert json.loads(state.read_text()), "the position is kept"
