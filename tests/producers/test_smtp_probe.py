"""The SMTP probe (producers/smtp_probe.py, `shadowtwin probe`) against real SMTP sockets (aiosmtpd),
stopped mid-test; its events on a real broker."""

import json
import signal
import socket
import threading
import time
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


class ScriptedServer:
    """A real SMTP-ish server on a loopback socket that plays `script(connection, lines)` for each client:
    `lines` yields the client's command lines; it records them in `heard`."""

    def __init__(self, script, family=socket.AF_INET, host="127.0.0.1"):
        self.script, self.heard = script, []
        self.sock = socket.socket(family)
        self.sock.bind((host, 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                connection, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._play, args=(connection,), daemon=True).start()

    def _play(self, connection):
        def lines():
            for line in connection.makefile("rb"):
                self.heard.append(line.decode().strip())
                yield self.heard[-1].upper()  # verbs are case-insensitive
        try:
            self.script(connection, lines())
        except OSError:
            pass
        finally:
            connection.close()

    def close(self):
        self.sock.close()


@pytest.fixture
def scripted():
    servers = []

    def start(script, **kwargs):
        servers.append(ScriptedServer(script, **kwargs))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _probe(port, timeout_s, host="127.0.0.1", prober="probe@ops01"):
    """One probe; (its event, how long it took)."""
    events, started = [], time.monotonic()
    Prober([Target("mbx01", host, port)], events.append, every_s=60, timeout_s=timeout_s, prober=prober).round()
    return events[0], time.monotonic() - started


def test_a_probe_takes_at_most_its_timeout_even_if_the_server_is_slow_and_never_answers_quit(scripted):
    def late_ehlo_and_mute_quit(connection, lines):
        connection.sendall(b"220 mbx01 ESMTP\r\n")
        for line in lines:
            if line.startswith("EHLO"):
                time.sleep(0.6)
                connection.sendall(b"250-mbx01\r\n250 PIPELINING\r\n")
            elif line == "QUIT":
                time.sleep(5)  # never answers
                return
    server = scripted(late_ehlo_and_mute_quit)
    event, took = _probe(server.port, timeout_s=1.0)
    assert event.answered and event.reply == "250 mbx01"
    assert took < 1.3, f"the probe took {took:.1f} s with a 1 s timeout"


def test_a_server_that_drips_its_greeting_fails_within_the_timeout(scripted):
    def drip(connection, lines):
        for _ in range(50):  # a 220- line every 0.2 s, never the last one
            connection.sendall(b"220-mbx01 still greeting\r\n")
            time.sleep(0.2)
    server = scripted(drip)
    done = []
    worker = threading.Thread(target=lambda: done.append(_probe(server.port, timeout_s=1.0)), daemon=True)
    worker.start()
    worker.join(3)
    assert done, "the probe was still waiting 3 s into a 1 s timeout"
    event, took = done[0]
    assert not event.answered and "timed out" in event.reply and took < 1.3


def test_a_multi_line_greeting_is_read_whole_before_ehlo(scripted):
    """Postfix's postscreen greets `220-` then `220 ` and takes a client that speaks in between for a bot."""
    def postscreen(connection, lines):
        connection.sendall(b"220-mbx01 ESMTP\r\n")
        time.sleep(0.3)
        connection.sendall(b"220 mbx01 ESMTP\r\n")
        for line in lines:
            connection.sendall(b"250 mbx01\r\n" if line.startswith("EHLO") else b"221 bye\r\n")
    server = scripted(postscreen)
    event, _ = _probe(server.port, timeout_s=2)
    assert event.answered and [line.upper() for line in server.heard] == ["EHLO OPS01", "QUIT"]


@pytest.mark.parametrize("greeting", [b"421 4.3.2 mbx01 busy, try later\r\n", b"554 5.7.1 no SMTP service here\r\n"])
def test_a_busy_or_refusing_greeting_is_a_failed_probe_with_its_reply(scripted, greeting):
    server = scripted(lambda connection, lines: connection.sendall(greeting))
    event, _ = _probe(server.port, timeout_s=2)
    assert not event.answered and event.node == "probe@ops01"
    assert event.reply == greeting.decode().strip()


def _helo_only(ehlo_reply):
    def script(connection, lines):
        connection.sendall(b"220 mbx01 ESMTP\r\n")
        for line in lines:
            if line.startswith("EHLO"):
                connection.sendall(ehlo_reply)
            elif line.startswith("HELO"):
                connection.sendall(b"250 mbx01\r\n")
            elif line == "QUIT":
                connection.sendall(b"221 bye\r\n")
                return
    return script


def test_a_server_that_refuses_ehlo_but_answers_helo_is_alive(scripted):
    """A server without ESMTP answers EHLO 500/502; a client then says HELO (RFC 5321 3.2), and a 250
    to it shows the SMTP service up just as well."""
    server = scripted(_helo_only(b"502 5.5.1 EHLO not implemented\r\n"))
    event, _ = _probe(server.port, timeout_s=2)
    assert event.answered and event.node == "mbx01"
    assert event.reply == "250 mbx01 (HELO, after EHLO got 502)"


def test_a_server_that_closes_at_ehlo_with_421_is_not_asked_helo(scripted):
    server = scripted(_helo_only(b"421 4.7.0 mbx01 closing connection\r\n"))
    event, _ = _probe(server.port, timeout_s=2)
    assert not event.answered and event.reply == "421 4.7.0 mbx01 closing connection"
    assert not any(line.upper().startswith("HELO") for line in server.heard)


def _answers_any_ehlo(connection, lines):
    connection.sendall(b"220 mbx01 ESMTP\r\n")
    for line in lines:
        connection.sendall(b"221 bye\r\n" if line == "QUIT" else b"250 mbx01\r\n")


@pytest.mark.parametrize("prober, said", [
    ("probe@ops01.contoso.com", "EHLO ops01.contoso.com"),
    ("probe@büro01", "EHLO xn--bro01-kva"),  # a host name in IDNA, as DNS has it
    ("probe@ops_01", "EHLO [127.0.0.1]"),  # not a host name (Exim refuses it): the address literal
    ("ops probe", "EHLO [127.0.0.1]"),  # no host part: the address literal, no reverse lookup
])
def test_ehlo_names_the_prober_as_a_host_name_or_its_address(scripted, prober, said):
    server = scripted(_answers_any_ehlo)
    event, _ = _probe(server.port, timeout_s=2, prober=prober)
    assert event.answered and server.heard[0] == said


def test_ehlo_over_ipv6_names_an_ipv6_address_literal(scripted):
    server = scripted(_answers_any_ehlo, family=socket.AF_INET6, host="::1")
    event, _ = _probe(server.port, timeout_s=2, host="::1", prober="probe@ops_01")
    assert event.answered and server.heard[0] == "EHLO [IPv6:::1]"


def test_an_ipv6_server_is_probed(scripted):
    server = scripted(_answers_any_ehlo, family=socket.AF_INET6, host="::1")
    events = []
    Prober([parse_target(f"mbx01=[::1]:{server.port}")], events.append, every_s=60, timeout_s=2).round()
    assert events[0].answered and events[0].node == "mbx01"


def test_rounds_are_paced_by_every_and_stop_when_asked():
    stop, events = threading.Event(), []
    prober = Prober([Target("mbx03", "127.0.0.1", free_port())], events.append, every_s=60, timeout_s=0.5)
    threading.Timer(0.5, stop.set).start()
    counts = prober.run(stop)
    assert counts.rounds == 1 and len(events) == 1  # the second round was 60 s away when stop came


@pytest.mark.parametrize("text, target", [
    ("mbx01=10.0.0.11:2525", Target("mbx01", "10.0.0.11", 2525)),
    ("mbx01=mbx01.contoso.com", Target("mbx01", "mbx01.contoso.com", 25)),
    ("mbx01=[2001:db8::11]:2525", Target("mbx01", "2001:db8::11", 2525)),  # IPv6 in brackets, as Postfix writes it
    ("mbx01=[::1]", Target("mbx01", "::1", 25)),
])
def test_a_server_argument_is_name_host_and_port(text, target):
    assert parse_target(text) == target


@pytest.mark.parametrize("text, problem", [("mbx01", "expected NAME=HOST:PORT"), ("=h:25", "expected NAME=HOST:PORT"),
                                           ("mbx01=h:99999", "not a number from 1 to 65535"),
                                           ("mbx01=2001:db8::11:25", r"an IPv6 address goes in brackets"),
                                           ("mbx01=[2001:db8::11", "expected NAME=HOST:PORT"),
                                           ("mbx01=[::1]x", "expected NAME=HOST:PORT")])
def test_a_bad_server_argument_is_named(text, problem):
    with pytest.raises(ValueError, match=problem):
        parse_target(text)


def test_servers_come_from_a_toml_list_and_a_bad_entry_is_named(tmp_path):
    good = tmp_path / "servers.toml"
    good.write_text('[[server]]\nname = "mbx01"\nhost = "10.0.0.11"\n\n[[server]]\nname = "mbx02"\nhost = "h"\nport = 2525\n')
    good.write_text(good.read_text() + '\n[[server]]\nname = "mbx03"\nhost = "[2001:db8::13]"\n')
    assert load_targets(good) == [Target("mbx01", "10.0.0.11", 25), Target("mbx02", "h", 2525),
                                  Target("mbx03", "2001:db8::13", 25)]
    bad = tmp_path / "bad.toml"
    bad.write_text('[[server]]\nname = "mbx01"\n')
    with pytest.raises(ValueError, match=r"bad.toml: server 1: needs a name and a host"):
        load_targets(bad)


@pytest.mark.parametrize("argv, message", [
    ([], "name at least one server"),
    (["--server", "mbx01"], "--server 'mbx01': expected NAME=HOST:PORT"),
    (["--server", "a=h:25", "--server", "a=g:25"], "a server is named twice (a)"),
    # was: two probes of one server, the twin's mbx01, one of which could answer while the other failed
    (["--server", "mbx01=h:25", "--server", "MBX01=g:25"], "a server is named twice (MBX01, mbx01: server names are"
                                                         " read in any case)"),
    (["--server", "a=h:25", "--every", "soon"], "--every"),
    (["--servers", "nosuch.toml"], "--servers nosuch.toml: No such file or directory\n"),  # was: 'cannot be read as TOML'
])
def test_a_persons_mistake_is_one_line_and_status_2(argv, message, capsys):
    assert main(["probe", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_a_host_that_does_not_resolve_is_one_line_and_status_2(tmp_path, capsys):
    """A typo in a host name is said at start, not published as a failed probe every round."""
    servers = tmp_path / "servers.toml"
    servers.write_text('[[server]]\nname = "mbx02"\nhost = "mbx02.no-such-domain.invalid"\n')
    for argv, option in ((["--server", "mbx01=mbx01.no-such-domain.invalid:25"], "--server mbx01"),
                         (["--servers", str(servers)], f"--servers {servers}: server mbx02")):
        assert main(["probe", *argv, "--rounds", "1", "--bootstrap", "127.0.0.1:9"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert f"{option}: the host 'mbx0" in err and "does not resolve" in err, err


def test_probe_publishes_answered_then_failed_events_on_the_broker(smtp_server, kafka_bootstrap, topics, capsys):
    command = ["probe", "--server", f"mbx01=127.0.0.1:{smtp_server.port}", "--rounds", "1", "--every", "1s",
               "--timeout", "2s", "--name", "probe@ops01", "--bootstrap", kafka_bootstrap, "--to", topics.events]
    assert main(command) == 0
    smtp_server.stop()
    assert main(command) == 0
    assert capsys.readouterr().out.splitlines() == ["1 round: 1 probe, 1 answered, 0 failed",
                                                    "1 round: 1 probe, 0 answered, 1 failed"]
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
