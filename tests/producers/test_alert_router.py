"""Alert routing: which alert clears which (pure), and a real router against a real broker and a
real HTTP receiver on loopback that is down for a while: nothing lost, resolves arrive."""

from __future__ import annotations

import base64
import dataclasses
import json
import socket
import ssl
import threading
import time
import uuid
from datetime import timedelta
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from infra.kafka import consumer, producer
from infra.settings import AlertRoutingSettings, KafkaSettings, load_settings
from producers.alert_router import (WRONG_TOPIC_AFTER, AlertRouter, OpenConditions, alertmanager, clears, labels,
                                     webhook)
from producers.topic_reader import ReadOutcome, read_topic
from schemas.codec import decode, encode, kafka_key
from schemas.events import Alert, AlertMessage, AlertType, MessageRef, Severity
from schemas.jsonl import iso_time, to_json
from schemas.placement import alert_partition
from schemas.wire import DecodeError
from shadowtwin.cli import main
from shadowtwin.testing.containers import free_port
from state.replay import replay
from tests.infra.certificates import make_certificates
from tests.state.scenario import Org

FAST = AlertRoutingSettings(retry_initial_seconds=0.1, retry_max_seconds=0.4)


def crash_and_return(primary: str = "mbx01") -> list:
    """`primary` fails, its shadow mbx02 promotes m1 and m2, `primary` comes back with the same database."""
    org = Org()
    events = [*org.started(primary, "dbP1", 0),
              *org.received(primary, "m1", 1, external=["bob@fabrikam.com"]), *org.shadowed(primary, "mbx02", "m1", 1),
              *org.received(primary, "m2", 1), *org.shadowed(primary, "mbx02", "m2", 1),
              *org.received("mbx03", "m3", 2), *org.heartbeats_failing("mbx02", primary, 2, 5 * 60),
              *org.started(primary, "dbP1", 5 * 60)]
    return replay(events).alerts


def test_the_primary_label_names_the_primary_whatever_the_servers_names_sort_as():
    alerts = crash_and_return(primary="mbx05")  # its shadow mbx02 sorts before it
    assert {a.type: labels(a)["primary"] for a in alerts} == {
        AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED: "mbx05", AlertType.DUPLICATE_DELIVERY_EXPECTED: "mbx05"}
    unreachable = dataclasses.replace(alerts[0], type=AlertType.SHADOW_SERVER_UNREACHABLE, servers=("mbx02", "mbx05"))
    assert labels(unreachable)["primary"] == "mbx05", "it names the unreachable shadow first, then its primary"


def test_a_primary_that_comes_back_resolves_its_promotion_alert():
    alerts = crash_and_return()
    types = [a.type for a in alerts]
    assert AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED in types and AlertType.DUPLICATE_DELIVERY_EXPECTED in types
    conditions = OpenConditions(AlertRoutingSettings())
    notes = [n for a in alerts for n in conditions.observe(a)]
    resolved = [n for n in notes if n.status == "resolved"]
    duplicate = next(a for a in alerts if a.type is AlertType.DUPLICATE_DELIVERY_EXPECTED)
    assert [(n.alert.type, n.resolved_by, n.ends_ms) for n in resolved] == [
        (AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, duplicate.alert_id, duplicate.decided_at_ms)]
    assert not conditions.open, "nothing left firing"
    firing = {n.alert.type: n for n in notes if n.status == "firing"}
    promoted = firing[AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED]
    assert promoted.ends_ms - promoted.starts_ms == 24 * 3600 * 1000, "a condition holds until cleared"
    assert duplicate.decided_at_ms + 3600 * 1000 == firing[AlertType.DUPLICATE_DELIVERY_EXPECTED].ends_ms


def test_an_event_alert_clears_nothing_and_another_primary_clears_nothing():
    alerts = crash_and_return()
    failed = next(a for a in alerts if a.type is AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED)
    other = dataclasses.replace(failed, alert_id="other", servers=("mbx09", "mbx02"))
    conditions = OpenConditions(AlertRoutingSettings())
    conditions.observe(other)
    back = next(a for a in alerts if a.type is AlertType.DUPLICATE_DELIVERY_EXPECTED)
    assert [n.status for n in conditions.observe(back)] == ["firing"]
    assert set(conditions.open) == {"other"}


def test_a_message_of_another_server_with_the_same_internal_id_clears_no_condition():
    """Internal ids are each server's own (schemas/README.md: "the primary server's internal id of
    the message"): mbx02's loss of its message 1234 is no news of mbx01's message 1234, nor is a
    new message mbx01 numbered 1234 again (a new queue database counts afresh); only the message
    at risk, as the alert names it, lost on its primary clears the risk. Likewise duplicates
    expected of mbx02's messages, naming mbx01 as a shadow, do not say mbx01 is back."""
    at_risk_ref = MessageRef("<a@contoso.com>", "1234")
    at_risk = Alert(alert_id="risk", type=AlertType.MESSAGE_AT_RISK, severity=Severity.CRITICAL,
                    servers=("mbx01", "mbx02"), messages=(AlertMessage(at_risk_ref),), reason="", decided_at_ms=1)

    def later(alert_type: AlertType, servers: tuple[str, ...], ref: MessageRef) -> Alert:
        return dataclasses.replace(at_risk, alert_id="later", type=alert_type, servers=servers,
                                   messages=(AlertMessage(ref),), decided_at_ms=2)

    others = MessageRef("<b@contoso.com>", "1234")
    assert not clears(later(AlertType.MESSAGE_LOST, ("mbx02", "mbx03"), others), at_risk, [at_risk])
    assert not clears(later(AlertType.MESSAGE_LOST, ("mbx01", "mbx02"), others), at_risk, [at_risk])
    assert not clears(later(AlertType.DUPLICATE_DELIVERY_EXPECTED, ("mbx02", "mbx01"), others), at_risk,
                      [at_risk])
    assert clears(later(AlertType.MESSAGE_LOST, ("mbx01", "mbx02"), at_risk_ref), at_risk, [at_risk])
    assert clears(later(AlertType.DUPLICATE_DELIVERY_EXPECTED, ("mbx01", "mbx02"), at_risk_ref), at_risk,
                  [at_risk])


def test_a_restart_whose_queue_database_is_unknown_is_resolved_when_it_is_settled():
    from tests.state.test_restart import back_after_an_hour

    org = Org()
    alerts = back_after_an_hour(org, *org.delivered("mailbox01", "m1", "smtp.fabrikam.com", 61)).alerts
    settled = next(a for a in alerts if a.type is AlertType.RESTART_QUEUE_DATABASE_SETTLED)
    conditions = OpenConditions(AlertRoutingSettings())
    resolved = [n for a in alerts for n in conditions.observe(a) if n.status == "resolved"]
    assert [(n.alert.type, n.resolved_by) for n in resolved] == [
        (AlertType.RESTARTED_QUEUE_DATABASE_UNKNOWN, settled.alert_id)]


def carried_ids(body: bytes) -> set[str]:
    """The alerts a POST carries, by id (Alertmanager's labels, a webhook's alert), not the ones that resolve them."""
    data = json.loads(body)
    return {(item["labels"] if "labels" in item else item["alert"])["alert_id"]
            for item in (data if isinstance(data, list) else [data])}


class Receiver:
    """A real HTTP receiver on loopback, started late: until then, connections are refused. A POST
    to a path of `answers` gets its answer (status, headers, body) and is not kept, one naming an
    alert of `refused_ids` a 400; any GET 200 with
    an empty list, as Alertmanager's GET /api/v2/alerts. Given `tls` (its key and certificate chain,
    a PEM file), it speaks https."""

    def __init__(self, tls: Path | None = None) -> None:
        self.tls = tls
        self.port = free_port()
        self.got: list[tuple[str, object]] = []
        self.server: ThreadingHTTPServer | None = None
        self.answers: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.refused_ids: set[str] = set()  # an alert_id a POST names is answered 400, as Alertmanager an invalid alert
        # the Authorization header a POST must have, else it is answered 401, as Alertmanager's basic_auth_users
        self.authorization: str | None = None

    def start(self) -> None:
        got, answers, refused_ids, receiver = self.got, self.answers, self.refused_ids, self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if receiver.authorization is not None and self.headers["Authorization"] != receiver.authorization:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="alertmanager"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.path in answers or refused_ids & carried_ids(body):
                    status, headers, said = answers.get(self.path, (400, {}, b'{"code":400,"message":"invalid"}'))
                    self.send_response(status)
                    for name, value in {**headers, "Content-Length": str(len(said))}.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(said)
                    return
                got.append((self.path, json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"[]")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        if self.tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(self.tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def at(self, path: str) -> list:
        return [body for p, body in self.got if p == path]


def run_router(router: AlertRouter, until, seconds: float = 60.0) -> None:
    stop = threading.Event()
    thread = threading.Thread(target=router.run, args=(stop,))
    thread.start()
    deadline = time.monotonic() + seconds
    while not until() and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    thread.join(30)
    assert not thread.is_alive()


def committed(bootstrap: str, topic: str, group: str) -> int:
    return committed_each(bootstrap, topic, group, 1)[0]


def committed_each(bootstrap: str, topic: str, group: str, partitions: int) -> list[int]:
    """The group's committed offset of each of the topic's first `partitions`."""
    client = consumer(bootstrap, group)
    try:
        return [tp.offset for tp in client.committed([TopicPartition(topic, p) for p in range(partitions)],
                                                     timeout=10)]
    finally:
        client.close()


def publish(bootstrap: str, topic: str, alerts: list, *raw: bytes) -> None:
    out = producer(bootstrap)
    for alert in alerts:
        out.produce(topic, key=kafka_key(alert), value=encode(alert))
    for value in raw:
        out.produce(topic, value=value)
    assert out.flush(30) == 0


def letters(topic: str) -> str:
    """The dead-letter topic of a router reading `topic` here."""
    return f"{topic}.dead-letters"


def alerts_topic(bootstrap: str, alerts: list, *raw: bytes) -> tuple[str, str]:
    """A new topic holding `alerts`, then the `raw` records, and its dead-letter topic; and a new
    router group to read it."""
    topic, group = f"test.route.{uuid.uuid4().hex[:8]}", f"test-router-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the topics are made
    for made in admin.create_topics([NewTopic(topic, 1, 1), NewTopic(letters(topic), 1, 1)]).values():
        made.result(30)
    publish(bootstrap, topic, alerts, *raw)
    return topic, group


def test_nothing_is_lost_while_the_receiver_is_down_and_resolves_arrive(kafka_bootstrap):
    alerts = crash_and_return()
    back = next(i for i, a in enumerate(alerts) if a.type is AlertType.DUPLICATE_DELIVERY_EXPECTED)
    topic, group = alerts_topic(kafka_bootstrap, alerts[:back], b"not an alert")
    receiver = Receiver()
    routing = dataclasses.replace(FAST, group_id=group)

    def router() -> AlertRouter:
        base = f"http://127.0.0.1:{receiver.port}"
        return AlertRouter(kafka_bootstrap, topic, [alertmanager(base), webhook(base + "/hook")], routing,
                           letters(topic))

    # the receiver is down: the router retries, delivers nothing, commits nothing
    first = router()
    run_router(first, lambda: first.counts.retries >= 3)
    assert first.counts.routed == 0 and first.counts.pending
    assert committed(kafka_bootstrap, topic, group) < 0, "no offset committed for an alert not acknowledged"
    try:
        receiver.start()
        second = router()
        run_router(second, lambda: second.counts.routed == back and second.counts.undecodable == 1)
        assert second.counts.routed == back
        assert committed(kafka_bootstrap, topic, group) == back + 1
        fired = [a for body in receiver.at("/api/v2/alerts") for a in body]
        assert sorted(a["labels"]["alert_id"] for a in fired) == sorted(a.alert_id for a in alerts[:back])
        assert [b["alert"]["alert_id"] for b in receiver.at("/hook")] == [a.alert_id for a in alerts[:back]]
        failed = next(a for a in alerts if a.type is AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED)
        assert next(a for a in fired if a["labels"]["alert_id"] == failed.alert_id) == {
            "labels": labels(failed), "annotations": {
                "summary": failed.reason, "decided_at": iso_time(failed.decided_at_ms),
                "messages": ", ".join(m.message.message_id for m in failed.messages)},
            "startsAt": iso_time(failed.decided_at_ms),
            "endsAt": iso_time(failed.decided_at_ms + int(timedelta(days=1).total_seconds() * 1000))}

        # the primary comes back; a third router (it knows the open condition from the topic) resolves it
        publish(kafka_bootstrap, topic, alerts[back:back + 1])
        receiver.got.clear()
        third = router()
        run_router(third, lambda: third.counts.routed == 1)
        posted = [a for body in receiver.at("/api/v2/alerts") for a in body]
        assert [(a["labels"], a["endsAt"]) for a in posted] == [
            (labels(alerts[back]), iso_time(alerts[back].decided_at_ms + 3600 * 1000)),
            (labels(failed), iso_time(alerts[back].decided_at_ms))], "only the new alert, then the resolve"
        hooked = receiver.at("/hook")
        assert [(h["status"], h["alert"]["alert_id"]) for h in hooked] == [
            ("firing", alerts[back].alert_id), ("resolved", failed.alert_id)]
        assert hooked[1]["resolved_by"] == alerts[back].alert_id
        assert third.counts.resolves == 1
    finally:
        receiver.stop()


def test_a_receiver_down_longer_than_the_consumers_poll_interval_loses_nothing(kafka_bootstrap):
    """Before: a router that retried longer than librdkafka's max.poll.interval.ms (5 min by default,
    7 s here) was put out of its group, and once the receiver answered, its commit failed
    ("Broker: Unknown member") and the router ended with the alerts behind undelivered."""
    alerts = crash_and_return()
    topic, group = alerts_topic(kafka_bootstrap, alerts)
    kafka = KafkaSettings(bootstrap_servers=kafka_bootstrap,
                          client_properties={"session.timeout.ms": "6000", "max.poll.interval.ms": "7000"})
    receiver = Receiver()
    router = AlertRouter(kafka, topic, [webhook(f"http://127.0.0.1:{receiver.port}/hook")],
                         dataclasses.replace(FAST, group_id=group, retry_max_seconds=1.0), letters(topic))
    stop = threading.Event()
    thread = threading.Thread(target=router.run, args=(stop,))
    thread.start()
    try:
        time.sleep(12)  # the receiver is down for longer than max.poll.interval.ms
        receiver.start()
        deadline = time.monotonic() + 30
        while router.counts.routed < len(alerts) and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert thread.is_alive(), "the router is still running"
        assert router.counts.routed == len(alerts)
        assert committed(kafka_bootstrap, topic, group) == len(alerts)
        assert [(h["status"], h["alert"]["alert_id"]) for h in receiver.at("/hook")] == [
            ("firing", alerts[0].alert_id), ("firing", alerts[1].alert_id), ("resolved", alerts[0].alert_id)]
    finally:
        stop.set()
        thread.join(30)
        receiver.stop()


def test_a_receiver_that_moved_is_retried_not_taken_for_an_acknowledgement(kafka_bootstrap):
    """Before: urllib followed a 301 to a POST as a GET without the alert; Alertmanager behind a proxy
    that sends http:// to https:// answers that GET (its list of alerts) 200, and the router counted
    the alert routed and committed it, never delivered."""
    topic, group = alerts_topic(kafka_bootstrap, crash_and_return()[:1])
    receiver = Receiver()
    moved_to = f"http://127.0.0.1:{receiver.port}/new/api/v2/alerts"
    receiver.answers["/api/v2/alerts"] = (301, {"Location": moved_to}, b"")
    receiver.start()
    lines: list[str] = []
    router = AlertRouter(kafka_bootstrap, topic, [alertmanager(f"http://127.0.0.1:{receiver.port}")],
                         dataclasses.replace(FAST, group_id=group), letters(topic), say=lines.append)
    try:
        run_router(router, lambda: router.counts.retries >= 2 or router.counts.routed, seconds=30)
        assert (router.counts.routed, receiver.got) == (0, [])
        assert committed(kafka_bootstrap, topic, group) < 0
        assert lines[0] == (f"alertmanager http://127.0.0.1:{receiver.port}/api/v2/alerts: HTTP 301 Moved Permanently,"
                            f" to {moved_to}: give the receiver's new address; again in 0.1 s")
    finally:
        receiver.stop()


def test_a_receiver_address_where_no_http_server_answers_is_retried_saying_so(kafka_bootstrap):
    """Before: a webhook address at a port where an SMTP server answers (a mistyped port) ended the
    router in http.client's traceback (BadStatusLine), exit 1."""
    topic, group = alerts_topic(kafka_bootstrap, crash_and_return()[:1])
    greeting = b"220 mbx01.contoso.com Microsoft ESMTP MAIL Service ready"
    smtp = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                connection, _ = smtp.accept()
            except OSError:  # closed: the test is over
                return
            with connection:
                connection.sendall(greeting + b"\r\n")
                connection.recv(65536)  # the request, which SMTP does not understand

    threading.Thread(target=serve, daemon=True).start()
    url = f"http://127.0.0.1:{smtp.getsockname()[1]}/hook"
    lines: list[str] = []
    router = AlertRouter(kafka_bootstrap, topic, [webhook(url)], dataclasses.replace(FAST, group_id=group),
                         letters(topic), say=lines.append)
    try:
        run_router(router, lambda: router.counts.retries >= 2, seconds=20)
        assert router.counts.retries >= 2 and router.counts.pending
        assert committed(kafka_bootstrap, topic, group) < 0
        assert lines[0] == f"webhook {url}: not an HTTP answer (BadStatusLine: {greeting.decode()}); again in 0.1 s"
    finally:
        smtp.close()


@pytest.mark.parametrize("status", [503, 408, 429])
def test_a_receiver_that_may_take_the_alert_later_is_retried_saying_what_it_answered(kafka_bootstrap, status):
    """A 5xx, 408 (Request Timeout) or 429 (Too Many Requests) says nothing against the alert: it is
    retried, and the line shows what the receiver answered."""
    topic, group = alerts_topic(kafka_bootstrap, crash_and_return()[:1])
    receiver = Receiver()
    receiver.answers["/hook"] = (status, {"Content-Type": "application/json"},
                                 b'{"error": "busy,\n try again"}')
    receiver.start()
    lines: list[str] = []
    url = f"http://127.0.0.1:{receiver.port}/hook"
    router = AlertRouter(kafka_bootstrap, topic, [webhook(url)], dataclasses.replace(FAST, group_id=group),
                         letters(topic), say=lines.append)
    try:
        run_router(router, lambda: router.counts.retries >= 2, seconds=30)
        assert committed(kafka_bootstrap, topic, group) < 0 and not router.counts.refused
        reason = HTTPStatus(status).phrase
        assert lines[0] == f'webhook {url}: HTTP {status} {reason}: {{"error": "busy, try again"}}; again in 0.1 s'
    finally:
        receiver.stop()


@pytest.mark.parametrize("status", [401, 403, 407])
def test_a_receiver_that_does_not_let_the_router_in_loses_no_alert(kafka_bootstrap, monkeypatch, capsys, status):
    """401 Unauthorized, 403 Forbidden and 407 Proxy Authentication Required say nothing of the alert:
    a token rotated, a proxy changed. Before: each alert went to the dead letters as refused, committed
    and left out of the resends, and once the credentials were put right none of them was posted. Now
    the receiver is retried as one that is down, nothing is committed past the alerts it did not take,
    a timed run ends exit 1 saying how many, and the next run delivers them."""
    alerts = crash_and_return()
    topic, group = alerts_topic(kafka_bootstrap, alerts)
    receiver = Receiver()
    receiver.answers["/api/v2/alerts"] = (status, {"WWW-Authenticate": 'Basic realm="alertmanager"'},
                                          b"access denied")
    receiver.start()
    monkeypatch.setenv("SHADOWTWIN_ALERT_ROUTING_GROUP_ID", group)
    monkeypatch.setenv("SHADOWTWIN_TOPICS_DEAD_LETTERS", letters(topic))
    base = f"http://127.0.0.1:{receiver.port}"
    route = ["alerts", "route", "--alertmanager", base, "--topic", topic, "--bootstrap", kafka_bootstrap, "--seconds"]
    try:
        assert main([*route, "8"]) == 1
        out, err = capsys.readouterr()
        sent_none = ("check its credentials: the router sent none: give a user and password in its address"
                     " (http://user:password@host:9093) or a token as [alert_routing] bearer_token")
        put_right = {401: sent_none, 403: sent_none, 407: "check the proxy"}[status]
        said = (f"alertmanager {base}/api/v2/alerts: HTTP {status} {HTTPStatus(status).phrase}: access denied:"
                f" {put_right}")
        assert err.splitlines()[0].startswith(said) and err.splitlines()[0].endswith("; again in 1 s")
        assert len(err.splitlines()) >= 2 and all(line.startswith(said) for line in err.splitlines())
        assert out == (f"routed 0 alerts (0 resolves), {len(err.splitlines())} retries; stopped before an alert was"
                       f" acknowledged: {len(alerts)} not delivered, it and those after it in its partition: the next"
                       " run delivers them\n")
        assert committed(kafka_bootstrap, topic, group) < 0 and receiver.got == []
        assert dead_letters(kafka_bootstrap, letters(topic)) == []

        receiver.answers.clear()  # the credentials put right
        assert main([*route, "8"]) == 0
        assert committed(kafka_bootstrap, topic, group) == len(alerts)
        assert sorted(a["labels"]["alert_id"] for body in receiver.at("/api/v2/alerts") for a in body) == sorted(
            [alerts[0].alert_id, alerts[1].alert_id, alerts[0].alert_id])  # the resolve names the condition
    finally:
        receiver.stop()


def test_a_user_and_password_in_a_receivers_address_are_sent_as_basic_auth_and_never_shown(
        kafka_bootstrap, monkeypatch, capsys):
    """Alertmanager's web config (basic_auth_users) takes HTTP Basic auth, given as Prometheus and curl
    users write it, in the address. Before: `http://alice:...@host` was taken for a host named
    `alice:...@host`, retried for ever as a name not known, its password in every line. Now the user
    and password (percent-encoded, as curl takes them) go in the Authorization header, and the lines,
    the dead letters and the last line show `alice:***@`; a 401 says what was sent."""
    alerts = crash_and_return()
    topic, group = alerts_topic(kafka_bootstrap, alerts)
    receiver = Receiver()
    receiver.authorization = "Basic " + base64.b64encode(b"alice:s3cr/et").decode()
    receiver.answers["/hook"] = (422, {}, b"no such hook")
    receiver.start()
    monkeypatch.setenv("SHADOWTWIN_ALERT_ROUTING_GROUP_ID", group)
    monkeypatch.setenv("SHADOWTWIN_TOPICS_DEAD_LETTERS", letters(topic))
    shown = f"http://alice:***@127.0.0.1:{receiver.port}"
    try:
        assert main(["alerts", "route", "--alertmanager", f"http://alice:wr0ng@127.0.0.1:{receiver.port}",
                     "--topic", topic, "--bootstrap", kafka_bootstrap, "--seconds", "5"]) == 1
        out, err = capsys.readouterr()
        assert err.splitlines()[0] == (f"alertmanager {shown}/api/v2/alerts: HTTP 401 Unauthorized: check its"
                                       " credentials: the router sent HTTP Basic auth as user alice; again in 1 s")
        assert "wr0ng" not in out + err and committed(kafka_bootstrap, topic, group) < 0

        assert main(["alerts", "route", "--alertmanager", f"http://alice:s3cr%2Fet@127.0.0.1:{receiver.port}",
                     "--webhook", f"http://alice:s3cr%2Fet@127.0.0.1:{receiver.port}/hook", "--topic", topic,
                     "--bootstrap", kafka_bootstrap, "--seconds", "8"]) == 1
        out, err = capsys.readouterr()
    finally:
        receiver.stop()
    assert [a["labels"]["alert_id"] for body in receiver.at("/api/v2/alerts") for a in body] == [
        alerts[0].alert_id, alerts[1].alert_id, alerts[0].alert_id]
    assert committed(kafka_bootstrap, topic, group) == len(alerts)
    reasons = [d.reason for d in dead_letters(kafka_bootstrap, letters(topic))]
    assert reasons == [f"receiver refused: webhook {shown}/hook answered HTTP 422 Unprocessable Entity: no such hook"
                       ] * len(alerts)
    assert err.splitlines()[0].startswith(f"webhook {shown}/hook: HTTP 422")
    assert not [text for text in (out, err, *reasons) if "s3cr" in text]


def test_a_bearer_token_setting_is_sent_to_receivers_whose_address_gives_no_user(kafka_bootstrap):
    """A receiver behind a proxy that takes a token: `[alert_routing] bearer_token` (a secret, as
    Kafka's passwords) is sent as `Authorization: Bearer <token>`; before, no setting gave one."""
    topic, group = alerts_topic(kafka_bootstrap, crash_and_return()[:1])
    receiver = Receiver()
    receiver.authorization = "Bearer t0ken"
    receiver.start()
    url = f"http://127.0.0.1:{receiver.port}/hook"
    token = load_settings(env={"SHADOWTWIN_ALERT_ROUTING_BEARER_TOKEN": "t0ken"}).alert_routing.bearer_token
    assert str(token) == "<secret>"
    lines: list[str] = []
    router = AlertRouter(kafka_bootstrap, topic, [webhook(url)], dataclasses.replace(
        FAST, group_id=group, bearer_token=token), letters(topic), say=lines.append)
    try:
        run_router(router, lambda: receiver.at("/hook"), seconds=30)
    finally:
        receiver.stop()
    assert (len(receiver.at("/hook")), lines) == (1, [])


def test_a_password_in_an_address_the_router_refuses_is_not_shown(capsys):
    for address, said in [("http://alice:s3cret@host:99999", "--webhook http://alice:***@host:99999: Port out of"
                                                              " range 0-65535"),
                          ("http://alice:s3/cret@host", "--webhook: an address with an '@' after its host")]:
        assert main(["alerts", "route", "--webhook", address]) == 2
        assert capsys.readouterr().err.startswith(f"shadowtwin alerts: {said}")


def dead_letters(bootstrap: str, topic: str) -> list:
    return [d for d, _ in read_topic(bootstrap, topic, ReadOutcome(), expected="DeadLetter", from_beginning=True,
                                     until_end=True, seconds=30)]


def test_an_alert_a_receiver_refuses_is_set_aside_as_a_dead_letter_and_the_next_ones_are_routed(
        kafka_bootstrap, monkeypatch, capsys):
    """Before: a 4xx (Alertmanager's 400 for an alert it cannot take) was retried for ever, a minute
    apart, and every alert behind it waited, for the webhook too. Now the refusal is one line, the
    alert's record goes to the dead-letter topic with the answer, and routing goes on."""
    alerts = crash_and_return()
    topic, group = alerts_topic(kafka_bootstrap, alerts)
    receiver = Receiver()
    said = b'{"code":400,"message":"1 error occurred:\n\t* start time must be before end time"}'
    receiver.answers["/api/v2/alerts"] = (400, {"Content-Type": "application/json"}, said)
    receiver.start()
    monkeypatch.setenv("SHADOWTWIN_ALERT_ROUTING_GROUP_ID", group)
    monkeypatch.setenv("SHADOWTWIN_TOPICS_DEAD_LETTERS", letters(topic))
    base = f"http://127.0.0.1:{receiver.port}"
    try:
        status = main(["alerts", "route", "--alertmanager", base, "--webhook", base + "/hook", "--topic", topic,
                       "--bootstrap", kafka_bootstrap, "--seconds", "10"])
    finally:
        receiver.stop()
    out, err = capsys.readouterr()
    assert [(h["status"], h["alert"]["alert_id"]) for h in receiver.at("/hook")] == [
        ("firing", alerts[0].alert_id), ("firing", alerts[1].alert_id), ("resolved", alerts[0].alert_id)]
    assert committed(kafka_bootstrap, topic, group) == len(alerts)
    answer = 'HTTP 400 Bad Request: {"code":400,"message":"1 error occurred: * start time must be before end time"}'
    assert err.splitlines() == [
        f"alertmanager {base}/api/v2/alerts: {answer}; refused, not retried: set aside on {letters(topic)}"
        f" ({topic} partition 0 offset {offset})" for offset in range(len(alerts))]
    assert [(d.original, d.key, d.topic, d.partition, d.offset, d.reason) for d in dead_letters(
        kafka_bootstrap, letters(topic))] == [
        (encode(a), kafka_key(a), topic, 0, offset, f"receiver refused: alertmanager {base}/api/v2/alerts answered"
         f" {answer}") for offset, a in enumerate(alerts)]
    assert out == ("routed 0 alerts (0 resolves), 0 retries; 2 not delivered, refused by a receiver (HTTP 4xx):"
                   " set aside as dead letters (shadowtwin dead-letters tail)\n")
    assert status == 1


def test_a_record_that_is_no_alert_is_set_aside_as_a_dead_letter_saying_where_and_why(kafka_bootstrap):
    """Before: a router given the alerts' JSON copy (`--topic shadowtwin.alerts.json`) skipped every
    record without a word while it ran; only its last line, once stopped, counted them. Then it said
    each, and committed it past: the record was in no dead letter, lost to anyone looking for it."""
    failed = crash_and_return()[0]
    copy = json.dumps(to_json(failed)).encode()
    topic, group = alerts_topic(kafka_bootstrap, [], copy)
    publish(kafka_bootstrap, topic, [failed])
    receiver = Receiver()
    receiver.start()
    lines: list[str] = []
    router = AlertRouter(kafka_bootstrap, topic, [webhook(f"http://127.0.0.1:{receiver.port}/hook")],
                         dataclasses.replace(FAST, group_id=group), letters(topic), say=lines.append)
    try:
        run_router(router, lambda: router.counts.routed == 1, seconds=30)
        assert lines == [f"{topic} partition 0 offset 0: not an alert (bad magic): set aside on {letters(topic)}"]
        assert (router.counts.undecodable, len(receiver.at("/hook"))) == (1, 1)
        assert committed(kafka_bootstrap, topic, group) == 2
        (letter,) = dead_letters(kafka_bootstrap, letters(topic))
        assert (letter.original, letter.topic, letter.partition, letter.offset) == (copy, topic, 0, 0)
        assert letter.reason.startswith("bad magic: starts with 7b22, expected c301")
        assert router.counts.describe() == ("routed 1 alerts (0 resolves), 0 retries; 1 records that are not"
                                            " alerts set aside as dead letters")
    finally:
        receiver.stop()


def test_the_conditions_still_firing_are_posted_again_to_an_alertmanager_that_forgot_them(kafka_bootstrap):
    """Alertmanager keeps its alerts in memory: restarted (its --storage.path keeps silences only),
    it has none. Before: the router posted a condition once, and a primary down stayed out of
    Alertmanager until it was cleared, up to `condition_hold` (24 h) later."""
    failed = dataclasses.replace(crash_and_return()[0], decided_at_ms=int(time.time() * 1000))
    topic, group = alerts_topic(kafka_bootstrap, [failed])
    receiver = Receiver()
    receiver.start()
    base = f"http://127.0.0.1:{receiver.port}"
    router = AlertRouter(kafka_bootstrap, topic, [alertmanager(base), webhook(base + "/hook")],
                         dataclasses.replace(FAST, group_id=group, resend_seconds=0.5), letters(topic))
    stop = threading.Event()
    thread = threading.Thread(target=router.run, args=(stop,))
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while router.counts.routed < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        first = receiver.at("/api/v2/alerts")
        receiver.got.clear()  # Alertmanager restarted: it has forgotten every alert
        time.sleep(1.5)
        again = receiver.at("/api/v2/alerts")
        assert again and all(body == first[0] for body in again), "the same alert, labels, startsAt and endsAt"
        assert not receiver.at("/hook"), "a webhook gets each notification once"
    finally:
        stop.set()
        thread.join(30)
        receiver.stop()


def test_a_dead_letter_topic_the_brokers_do_not_have_is_said_before_anything_is_routed(kafka_bootstrap, monkeypatch,
                                                                                       capsys):
    """An alert refused with nowhere to set it aside would wait there for ever: the topic is asked for at start."""
    topic, group = alerts_topic(kafka_bootstrap, crash_and_return()[:1])
    monkeypatch.setenv("SHADOWTWIN_ALERT_ROUTING_GROUP_ID", group)
    monkeypatch.setenv("SHADOWTWIN_TOPICS_DEAD_LETTERS", "nosuch.dead-letters")
    assert main(["alerts", "route", "--webhook", "http://127.0.0.1:2/", "--topic", topic,
                 "--bootstrap", kafka_bootstrap]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"shadowtwin alerts: nosuch.dead-letters: no such topic at {kafka_bootstrap}"
                           " (Broker: Unknown topic or partition)")


def test_every_member_of_an_alertmanager_cluster_gets_every_alert(kafka_bootstrap, monkeypatch, capsys):
    """An Alertmanager cluster shares silences and notifications among its members, not alerts:
    Prometheus sends each alert to every member. Before: of `--alertmanager A --alertmanager B`
    the last one alone got the alerts, without a word."""
    alerts = crash_and_return()
    topic, group = alerts_topic(kafka_bootstrap, alerts)
    members = [Receiver(), Receiver()]
    for member in members:
        member.start()
    monkeypatch.setenv("SHADOWTWIN_ALERT_ROUTING_GROUP_ID", group)
    monkeypatch.setenv("SHADOWTWIN_TOPICS_DEAD_LETTERS", letters(topic))
    try:
        addresses = [a for m in members for a in ("--alertmanager", f"http://127.0.0.1:{m.port}")]
        status = main(["alerts", "route", *addresses, "--topic", topic, "--bootstrap", kafka_bootstrap,
                       "--seconds", "8"])
    finally:
        for member in members:
            member.stop()
    assert (status, capsys.readouterr().out) == (0, "routed 2 alerts (1 resolves), 0 retries\n")
    for member in members:
        fired = [(a["labels"]["alert_id"], a["endsAt"]) for body in member.at("/api/v2/alerts") for a in body]
        assert fired == [(alerts[0].alert_id, iso_time(alerts[0].decided_at_ms + 24 * 3600 * 1000)),
                         (alerts[1].alert_id, iso_time(alerts[1].decided_at_ms + 3600 * 1000)),
                         (alerts[0].alert_id, iso_time(alerts[1].decided_at_ms))]


def test_the_same_receiver_given_twice_is_refused_in_one_line(capsys):
    url = "http://127.0.0.1:9093"
    for again in (url, f"{url}/api/v2/alerts"):  # its base address, or the full one
        assert main(["alerts", "route", "--alertmanager", url, "--webhook", url, "--alertmanager", again]) == 2
        assert capsys.readouterr().err == f"shadowtwin alerts: --alertmanager {url}/api/v2/alerts is given twice\n"


def test_a_router_that_takes_over_the_partitions_knows_the_conditions_the_other_routed(kafka_bootstrap):
    """Two routers in one group: the one that gets the partition routes a primary's failure, then
    stops; the other takes the partition over. Before: the other knew only the conditions routed
    before its own start, so it never posted the failure again to an Alertmanager that forgot it,
    and the primary's return resolved nothing."""
    failed, back = (dataclasses.replace(a, decided_at_ms=int(time.time() * 1000)) for a in crash_and_return())
    topic, group = alerts_topic(kafka_bootstrap, [])
    receiver = Receiver()
    receiver.start()
    base = f"http://127.0.0.1:{receiver.port}"
    routing = dataclasses.replace(FAST, group_id=group, resend_seconds=0.5)
    routers = [AlertRouter(kafka_bootstrap, topic, [alertmanager(base), webhook(base + "/hook")], routing,
                           letters(topic)) for _ in range(2)]
    stops = [threading.Event(), threading.Event()]
    threads = [threading.Thread(target=r.run, args=(s,)) for r, s in zip(routers, stops)]
    try:
        for thread in threads:
            thread.start()
            time.sleep(1)
        time.sleep(8)  # both in the group, one of them given the partition
        publish(kafka_bootstrap, topic, [failed])
        deadline = time.monotonic() + 30
        while not any(r.counts.routed for r in routers) and time.monotonic() < deadline:
            time.sleep(0.1)
        first = next(i for i, r in enumerate(routers) if r.counts.routed)
        stops[first].set()
        threads[first].join(30)
        receiver.got.clear()  # and Alertmanager restarted: it has forgotten the failure
        other = routers[1 - first]
        time.sleep(6)  # the group gives the partition to the other
        assert [a["labels"]["alert_id"] for body in receiver.at("/api/v2/alerts") for a in body][-1:] == [
            failed.alert_id], "the other posts the failure again"
        publish(kafka_bootstrap, topic, [back])
        deadline = time.monotonic() + 30
        while not other.counts.routed and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [(h["status"], h["alert"]["alert_id"]) for h in receiver.at("/hook")] == [
            ("firing", back.alert_id), ("resolved", failed.alert_id)]
        assert other.counts.resolves == 1
    finally:
        for stop, thread in zip(stops, threads):
            stop.set()
            thread.join(30)
        receiver.stop()


def test_an_https_receiver_signed_by_a_private_authority_is_trusted_with_the_ca_file_setting(
        kafka_bootstrap, tmp_path, monkeypatch):
    """Before: an https:// receiver whose certificate a company authority signed was refused
    (CERTIFICATE_VERIFY_FAILED) and retried for ever, unless SSL_CERT_FILE named that authority
    for the whole process; `[alert_routing] ca_file` had no place in the configuration."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    certificates = make_certificates(tmp_path / "tls")
    topic, group = alerts_topic(kafka_bootstrap, crash_and_return()[:1])
    receiver = Receiver(tls=certificates.server_pem)
    receiver.start()
    url = f"https://127.0.0.1:{receiver.port}/hook"
    (tmp_path / "shadowtwin.toml").write_text(f'[alert_routing]\ngroup_id = "{group}"\nretry_initial_seconds = 0.1\n'
                                              f'ca_file = "{certificates.ca_file}"\n')
    routing = load_settings(tmp_path / "shadowtwin.toml", env={}).alert_routing
    assert routing.ca_file == certificates.ca_file
    try:
        lines: list[str] = []
        untrusting = AlertRouter(kafka_bootstrap, topic, [webhook(url)], dataclasses.replace(routing, ca_file=None),
                                 letters(topic), say=lines.append)
        run_router(untrusting, lambda: untrusting.counts.retries >= 1, seconds=30)
        assert "CERTIFICATE_VERIFY_FAILED" in lines[0] and not receiver.at("/hook")
        trusting = AlertRouter(kafka_bootstrap, topic, [webhook(url)], routing, letters(topic))
        run_router(trusting, lambda: trusting.counts.routed == 1, seconds=30)
        assert [h["alert"]["alert_id"] for h in receiver.at("/hook")] == [crash_and_return()[0].alert_id]
    finally:
        receiver.stop()


def one_condition_refused(bootstrap: str) -> tuple:
    """Two primaries failed now, a topic holding both, and an Alertmanager that refuses the first:
    (refused, taken, the topic, its router group, the receiver started)."""
    now_ms = int(time.time() * 1000)
    refused, taken = (dataclasses.replace(crash_and_return(p)[0], decided_at_ms=now_ms) for p in ("mbx01", "mbx05"))
    topic, group = alerts_topic(bootstrap, [refused, taken])
    receiver = Receiver()
    receiver.refused_ids.add(refused.alert_id)
    receiver.start()
    return refused, taken, topic, group, receiver


def test_an_alert_alertmanager_refused_is_left_out_of_the_resends_of_the_conditions_firing(kafka_bootstrap):
    """Alertmanager takes a list of alerts whole or not at all. Before: a condition it refused was
    posted again with every resend, and had it refuse the conditions firing with it, each time."""
    refused, taken, topic, group, receiver = one_condition_refused(kafka_bootstrap)
    lines: list[str] = []
    router = AlertRouter(kafka_bootstrap, topic, [alertmanager(f"http://127.0.0.1:{receiver.port}")],
                         dataclasses.replace(FAST, group_id=group, resend_seconds=0.5), letters(topic),
                         say=lines.append)
    try:
        run_router(router, lambda: router.counts.routed == 1 and len(receiver.got) >= 3, seconds=30)
        assert {a["labels"]["alert_id"] for body in receiver.at("/api/v2/alerts") for a in body} == {taken.alert_id}
        assert len(receiver.got) >= 3, "resent"
        assert len(lines) == 1 and "refused, not retried" in lines[0], "said once, not at every resend"
    finally:
        receiver.stop()


def test_the_resolves_an_alert_alertmanager_refuses_carries_reach_it_posted_alone(kafka_bootstrap):
    """The primary comes back: the duplicate alert fires and resolves the promotion, in one list. Before, when
    Alertmanager refused the list for the new alert, the resolve went with it to the dead letters: the promotion,
    no longer open, was in no resend either, and stayed firing until its endsAt, 24 h later."""
    now_ms = int(time.time() * 1000)
    failed, back = (dataclasses.replace(a, decided_at_ms=now_ms) for a in crash_and_return())
    topic, group = alerts_topic(kafka_bootstrap, [failed, back])
    receiver = Receiver()
    receiver.refused_ids.add(back.alert_id)
    receiver.start()
    router = AlertRouter(kafka_bootstrap, topic, [alertmanager(f"http://127.0.0.1:{receiver.port}")],
                         dataclasses.replace(FAST, group_id=group), letters(topic), say=lambda line: None)
    try:
        run_router(router, lambda: router.counts.routed + router.counts.refused == 2)
        posted = [(a["labels"]["alert_id"], a["annotations"].get("resolved_by")) for body in
                  receiver.at("/api/v2/alerts") for a in body]
        assert posted == [(failed.alert_id, None), (failed.alert_id, back.alert_id)]
        assert (router.counts.routed, router.counts.refused) == (1, 1)
    finally:
        receiver.stop()


def test_a_router_started_again_finds_which_condition_alertmanager_refuses_and_resends_the_others(kafka_bootstrap):
    """A router started again knows the conditions firing, not which of them Alertmanager refused.
    Before: its resends held the refused one, and Alertmanager refused the others with it, every
    `resend_seconds`, until the condition ended (24 h)."""
    refused, taken, topic, group, receiver = one_condition_refused(kafka_bootstrap)
    url = f"http://127.0.0.1:{receiver.port}"
    routing = dataclasses.replace(FAST, group_id=group, resend_seconds=0.5)
    try:
        first = AlertRouter(kafka_bootstrap, topic, [alertmanager(url)], routing, letters(topic))
        run_router(first, lambda: first.counts.routed == 1)
        receiver.got.clear()
        lines: list[str] = []
        again = AlertRouter(kafka_bootstrap, topic, [alertmanager(url)], routing, letters(topic), say=lines.append)
        run_router(again, lambda: len(receiver.got) >= 3, seconds=30)
        assert [[a["labels"]["alert_id"] for a in body] for body in receiver.at("/api/v2/alerts")][:3] == [
            [taken.alert_id]] * 3
        assert lines == [f'alertmanager {url}/api/v2/alerts: HTTP 400 Bad Request: {{"code":400,"message":"invalid"}};'
                         f" refused {refused.alert_id}, left out of the resends"]
    finally:
        receiver.stop()


def partitioned_alerts_topic(bootstrap: str) -> tuple[str, str]:
    """A new topic of two partitions, empty, its dead-letter topic, and a new router group to read it."""
    topic, group = f"test.route.{uuid.uuid4().hex[:8]}", f"test-router-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for made in admin.create_topics([NewTopic(topic, 2, 1), NewTopic(letters(topic), 1, 1)]).values():
        made.result(30)
    return topic, group


def publish_to(bootstrap: str, topic: str, partition: int, alert) -> None:
    out = producer(bootstrap)
    out.produce(topic, key=kafka_key(alert), value=encode(alert), partition=partition)
    assert out.flush(30) == 0


def test_a_router_whose_partition_is_taken_while_it_waits_to_retry_leaves_the_alert_to_the_next_router(
        kafka_bootstrap):
    """Two routers in one group, the receiver answering 503. The first, alone, waits to retry an alert
    of partition 0; the second joins and the group gives it partition 0 (the range assignor gives it
    to the member whose id sorts first: `client.id` decides). Before: the first went on retrying the
    alert it no longer owned, posted it again and committed its offset for the partition of the other
    (whose commits it could set back); had it committed while the group was still rebalancing, the
    commit raised REBALANCE_IN_PROGRESS and ended the router with a traceback."""
    failed, other = crash_and_return()
    topic, group = partitioned_alerts_topic(kafka_bootstrap)
    publish_to(kafka_bootstrap, topic, 0, failed)
    receiver = Receiver()
    receiver.answers["/hook"] = (503, {}, b"busy")
    receiver.start()
    routing = dataclasses.replace(FAST, group_id=group, retry_initial_seconds=5.0, retry_max_seconds=5.0)
    said: dict[str, list[str]] = {"z-first": [], "a-second": []}
    routers = {name: AlertRouter(KafkaSettings(bootstrap_servers=kafka_bootstrap, client_properties={
        "client.id": name}), topic, [webhook(f"http://127.0.0.1:{receiver.port}/hook")], routing,
        letters(topic), say=lines.append) for name, lines in said.items()}
    stops = {name: threading.Event() for name in routers}
    threads = {name: threading.Thread(target=routers[name].run, args=(stops[name],)) for name in routers}
    first, second = routers["z-first"], routers["a-second"]
    try:
        threads["z-first"].start()
        deadline = time.monotonic() + 30
        while not said["z-first"] and time.monotonic() < deadline:
            time.sleep(0.1)
        threads["a-second"].start()
        while not said["a-second"] and time.monotonic() < deadline:  # the second has partition 0
            time.sleep(0.1)
        del receiver.answers["/hook"]
        publish_to(kafka_bootstrap, topic, 1, other)
        deadline = time.monotonic() + 30
        while first.counts.routed + second.counts.routed < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(6)  # the first's pause is over: it would have posted the alert again by now
        assert threads["z-first"].is_alive(), "the first router goes on"
        assert sorted(h["alert"]["alert_id"] for h in receiver.at("/hook")) == sorted(
            [failed.alert_id, other.alert_id]), "each alert posted once"
        assert (first.counts.routed, second.counts.routed) == (1, 1), "the first routes its partition 1"
        assert said["z-first"][-1] == (
            f"{topic} partition 0 offset 0: the group took the partition from this router while the alert"
            " waited for a retry: not committed, the partition's next router delivers it")
        assert committed_each(kafka_bootstrap, topic, group, 2) == [1, 1]
    finally:
        for name in routers:
            stops[name].set()
            threads[name].join(30)
        receiver.stop()


@pytest.mark.parametrize("strategy", ["range,roundrobin", "cooperative-sticky"])
def test_a_router_given_a_partition_while_it_waits_to_retry_delivers_its_alerts(kafka_bootstrap, strategy):
    """Two routers in one group each wait to retry an alert of its partition (the receiver answers
    503); one stops, and the group gives its partition to the other during its pause. Before: the
    other's pause polled the records of the partition it was given (it had not paused it) and threw
    them away; they were not delivered, and lost once a later alert of that partition was committed."""
    failed = crash_and_return()[0]
    alerts = [failed, dataclasses.replace(failed, alert_id="other", servers=("mbx09", "mbx02"))]
    topic, group = partitioned_alerts_topic(kafka_bootstrap)
    for partition, alert in enumerate(alerts):
        publish_to(kafka_bootstrap, topic, partition, alert)
    receiver = Receiver()
    receiver.answers["/hook"] = (503, {}, b"busy")
    receiver.start()
    routing = dataclasses.replace(FAST, group_id=group, retry_initial_seconds=5.0, retry_max_seconds=5.0)
    kafka = KafkaSettings(bootstrap_servers=kafka_bootstrap,
                          client_properties={"partition.assignment.strategy": strategy})
    said: list[list[str]] = [[], []]
    routers = [AlertRouter(kafka, topic, [webhook(f"http://127.0.0.1:{receiver.port}/hook")], routing,
                           letters(topic), say=lines.append) for lines in said]
    stops = [threading.Event(), threading.Event()]
    threads = [threading.Thread(target=r.run, args=(s,)) for r, s in zip(routers, stops)]
    try:
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30
        while not all(said) and time.monotonic() < deadline:  # each waits on the alert of its partition
            time.sleep(0.1)
        stops[0].set()
        threads[0].join(30)
        time.sleep(2)  # the group gives partition and alert of the first to the other, pausing
        del receiver.answers["/hook"]
        deadline = time.monotonic() + 30
        while routers[1].counts.routed < len(alerts) and time.monotonic() < deadline:
            time.sleep(0.1)
        posted = sorted(h["alert"]["alert_id"] for h in receiver.at("/hook"))
        assert posted == sorted(a.alert_id for a in alerts), said
        while committed_each(kafka_bootstrap, topic, group, 2) != [1, 1] and time.monotonic() < deadline:
            time.sleep(0.2)  # a commit is answered after the router's next poll
        assert committed_each(kafka_bootstrap, topic, group, 2) == [1, 1]
    finally:
        for stop, thread in zip(stops, threads):
            stop.set()
            thread.join(30)
        receiver.stop()


def test_routers_joining_and_leaving_a_cooperative_group_while_one_commits_lose_nothing(kafka_bootstrap):
    """Under the cooperative-sticky assignor a router keeps its other partitions while another joins
    or leaves, and goes on delivering and committing through the rebalance. Before: its commit,
    made while the group rebalanced, was refused (REBALANCE_IN_PROGRESS, or ILLEGAL_GENERATION once
    the group's generation moved on) and ended the router with a traceback, its partitions left to
    no one until the other router's next start."""
    failed = crash_and_return()[0]
    topic, group = f"test.route.{uuid.uuid4().hex[:8]}", f"test-router-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for made in admin.create_topics([NewTopic(topic, 4, 1), NewTopic(letters(topic), 1, 1)]).values():
        made.result(30)
    receiver = Receiver()
    receiver.start()
    kafka = KafkaSettings(bootstrap_servers=kafka_bootstrap, client_properties={
        "partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": "6000"})

    def router() -> tuple[AlertRouter, threading.Event, threading.Thread]:
        routing = dataclasses.replace(FAST, group_id=group)
        started = AlertRouter(kafka, topic, [webhook(f"http://127.0.0.1:{receiver.port}/hook")], routing,
                              letters(topic))
        stop = threading.Event()
        thread = threading.Thread(target=started.run, args=(stop,))
        thread.start()
        return started, stop, thread

    published: list[str] = []
    out = producer(kafka_bootstrap)

    def publish_for(seconds: float) -> None:  # some 400 alerts a second, over the four partitions
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            alert = dataclasses.replace(failed, alert_id=f"a{len(published)}")
            out.produce(topic, key=kafka_key(alert), value=encode(alert))
            published.append(alert.alert_id)
            out.poll(0.002)
        assert out.flush(30) == 0

    first, first_stop, first_thread = router()
    try:
        publish_for(3)
        for _ in range(3):  # another joins (the group gives it some of the first's partitions), then leaves
            _, stop, thread = router()
            publish_for(3)
            stop.set()
            thread.join(30)
            publish_for(2)
        deadline = time.monotonic() + 60
        while {h["alert"]["alert_id"] for h in receiver.at("/hook")} != set(published) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert first_thread.is_alive(), "the first router goes on"
        assert {h["alert"]["alert_id"] for h in receiver.at("/hook")} == set(published), "each delivered"
        time.sleep(2)  # the last commit answered
        assert sum(committed_each(kafka_bootstrap, topic, group, 4)) == len(published)
    finally:
        first_stop.set()
        first_thread.join(30)
        receiver.stop()


def test_a_router_keeping_its_partitions_while_another_joins_reads_none_of_them_again(kafka_bootstrap):
    """Under the cooperative-sticky assignor a router keeps two of its four partitions when another
    joins, and their open conditions with them: it reads none of them again, resends only theirs
    and resolves them, and the other resends and resolves those of the two it was given. Before:
    at every revoke and every assign the router read all the partitions it had again from their
    beginning up to the committed offsets (the two it kept, twice: 4 records here; 4,000 in 1.1 and
    2.5 s for 1,000 alerts on each partition), and forgot the conditions it had delivered and whose
    commit was not yet answered."""
    topic, group = f"test.route.{uuid.uuid4().hex[:8]}", f"test-router-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for made in admin.create_topics([NewTopic(topic, 4, 1), NewTopic(letters(topic), 1, 1)]).values():
        made.result(30)
    now_ms = int(time.time() * 1000)
    crashes = {alert_partition(alerts[0], 4): alerts for alerts in (
        [dataclasses.replace(a, decided_at_ms=now_ms) for a in crash_and_return(primary)]
        for primary in ("mbx03", "mbx05", "mbx09", "mbx04"))}
    assert sorted(crashes) == [0, 1, 2, 3], "one primary's failure and return on each partition"
    for partition, (failed, _) in crashes.items():
        publish_to(kafka_bootstrap, topic, partition, failed)
    receivers = [Receiver(), Receiver()]
    kafka = KafkaSettings(bootstrap_servers=kafka_bootstrap, client_properties={
        "partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": "6000"})
    routing = dataclasses.replace(FAST, group_id=group, resend_seconds=0.5)
    routers = []
    for receiver in receivers:
        receiver.start()
        base = f"http://127.0.0.1:{receiver.port}"
        routers.append(AlertRouter(kafka, topic, [alertmanager(base), webhook(base + "/hook")], routing,
                                   letters(topic)))
    first, second = routers
    stops = [threading.Event(), threading.Event()]
    threads = [threading.Thread(target=r.run, args=(s,)) for r, s in zip(routers, stops)]

    def resent(receiver: Receiver) -> set[str]:
        receiver.got.clear()
        time.sleep(1.5)
        return {a["labels"]["alert_id"] for body in receiver.at("/api/v2/alerts") for a in body}

    def until(done) -> None:
        deadline = time.monotonic() + 30
        while not done() and time.monotonic() < deadline:
            time.sleep(0.1)

    try:
        threads[0].start()
        until(lambda: first.counts.routed == 4)
        until(lambda: committed_each(kafka_bootstrap, topic, group, 4) == [1] * 4)  # a commit answered at a poll
        assert (first.counts.routed, first.counts.recalled) == (4, 0), "nothing was committed at its start"
        threads[1].start()
        until(lambda: second.counts.recalled == 2)  # the second was given two partitions, and read them
        time.sleep(2)
        assert (first.counts.recalled, second.counts.recalled) == (0, 2), "the first kept two, read again by no one"
        kept, given = resent(receivers[0]), resent(receivers[1])
        assert len(kept) == len(given) == 2 and kept | given == {f.alert_id for f, _ in crashes.values()}
        for partition, (_, back) in crashes.items():
            publish_to(kafka_bootstrap, topic, partition, back)
        until(lambda: first.counts.routed + second.counts.routed == 4 + 2)
        assert (first.counts.resolves, second.counts.resolves) == (2, 2)
        assert {h["alert"]["alert_id"] for h in receivers[0].at("/hook") if h["status"] == "resolved"} == kept
        assert resent(receivers[0]) == resent(receivers[1]) == set(), "nothing firing is left to resend"
        assert first.counts.recalled == 0
    finally:
        for stop, thread in zip(stops, threads):
            stop.set()
            if thread.is_alive():
                thread.join(30)
        for receiver in receivers:
            receiver.stop()


def test_records_that_are_not_alerts_make_a_timed_run_exit_1_saying_how_many(kafka_bootstrap, monkeypatch, capsys):
    """A run that set records aside did not route them. Before: `--seconds` ended a run that set a
    record that is no alert aside with exit 0, as if every record had been routed; a refused alert
    already made it exit 1."""
    failed = crash_and_return()[0]
    topic, group = alerts_topic(kafka_bootstrap, [failed], json.dumps(to_json(failed)).encode())
    receiver = Receiver()
    receiver.start()
    monkeypatch.setenv("SHADOWTWIN_ALERT_ROUTING_GROUP_ID", group)
    monkeypatch.setenv("SHADOWTWIN_TOPICS_DEAD_LETTERS", letters(topic))
    try:
        status = main(["alerts", "route", "--webhook", f"http://127.0.0.1:{receiver.port}/hook", "--topic", topic,
                       "--bootstrap", kafka_bootstrap, "--seconds", "6"])
    finally:
        receiver.stop()
    assert capsys.readouterr().out == ("routed 1 alerts (0 resolves), 0 retries; 1 records that are not alerts"
                                       " set aside as dead letters\n")
    assert status == 1


def test_a_topic_of_records_none_an_alert_is_said_in_one_line_and_ends_the_router(kafka_bootstrap, monkeypatch,
                                                                                    capsys):
    """The events topic given as `--topic` by mistake. Before: the router set every event aside, one
    dead letter and one line each, for as long as it ran: the dead-letter topic got a copy of the
    whole events topic. Now the first WRONG_TOPIC_AFTER are set aside (each a record that is no
    alert), then one line names the topic and the router ends, exit 1; a router started again on
    it reads them again and ends before setting more aside."""
    event = Org().started("mbx01", "dbP1", 0)[0]
    topic, group = alerts_topic(kafka_bootstrap, [], *[encode(event)] * (WRONG_TOPIC_AFTER + 10))
    monkeypatch.setenv("SHADOWTWIN_ALERT_ROUTING_GROUP_ID", group)
    monkeypatch.setenv("SHADOWTWIN_TOPICS_DEAD_LETTERS", letters(topic))
    command = ["alerts", "route", "--webhook", "http://127.0.0.1:2/hook", "--topic", topic,
               "--bootstrap", kafka_bootstrap]
    assert main([*command, "--seconds", "30"]) == 1
    out, err = capsys.readouterr()
    with pytest.raises(DecodeError, match="^wrong schema: written with Event") as why:
        decode(encode(event), "Alert")
    wrong = (f"{topic}: {WRONG_TOPIC_AFTER} records of another topic read, not one an alert (the last:"
             f" {why.value}): is it the alerts topic? stopped")
    assert err.splitlines()[-1] == wrong
    assert len(err.splitlines()) == WRONG_TOPIC_AFTER + 1, "a line for each record set aside, then why it stopped"
    assert out == (f"routed 0 alerts (0 resolves), 0 retries; {WRONG_TOPIC_AFTER} records that are not alerts set"
                   " aside as dead letters\n")
    assert len(dead_letters(kafka_bootstrap, letters(topic))) == WRONG_TOPIC_AFTER
    assert main([*command, "--seconds", "30"]) == 1
    assert capsys.readouterr().err.splitlines() == [wrong]
    assert len(dead_letters(kafka_bootstrap, letters(topic))) == WRONG_TOPIC_AFTER, "no more set aside"


def test_a_condition_alertmanager_refuses_when_posted_again_is_counted_and_a_timed_run_exits_1(
        kafka_bootstrap, monkeypatch, capsys):
    """A router started again posts the conditions firing to Alertmanager again; one it refuses now is
    no longer in Alertmanager. Before: only a line on stderr said so; the run's last line counted
    nothing and `--seconds` ended it with exit 0, as for a run that left every condition firing
    there. It is not set aside again: its record went to the dead letters when it was first refused."""
    refused, taken, topic, group, receiver = one_condition_refused(kafka_bootstrap)
    url = f"http://127.0.0.1:{receiver.port}"
    monkeypatch.setenv("SHADOWTWIN_ALERT_ROUTING_GROUP_ID", group)
    monkeypatch.setenv("SHADOWTWIN_TOPICS_DEAD_LETTERS", letters(topic))
    monkeypatch.setenv("SHADOWTWIN_ALERT_ROUTING_RESEND_SECONDS", "0.5")
    command = ["alerts", "route", "--alertmanager", url, "--topic", topic, "--bootstrap", kafka_bootstrap,
               "--seconds", "6"]
    try:
        assert main(command) == 1
        capsys.readouterr()
        assert main(command) == 1
    finally:
        receiver.stop()
    out, err = capsys.readouterr()
    assert err.splitlines() == [f'alertmanager {url}/api/v2/alerts: HTTP 400 Bad Request: {{"code":400,'
                                f'"message":"invalid"}}; refused {refused.alert_id}, left out of the resends']
    assert out == ("routed 0 alerts (0 resolves), 0 retries; 1 conditions firing refused by a receiver (HTTP 4xx)"
                   " when posted again: not there, left out of its resends\n")
    assert len(dead_letters(kafka_bootstrap, letters(topic))) == 1, "set aside once, when first refused"


@pytest.mark.parametrize("before", [1, 0], ids=["after an alert", "of no known shape before any alert"])
def test_records_that_are_not_alerts_are_set_aside_and_routing_goes_on(kafka_bootstrap, before):
    """A topic that held an alert is an alerts topic: however many records that are no alert follow,
    each is set aside and the router goes on to the alerts after them. Garbage before any alert (a
    fuzzer, a stray producer) is no other topic's record either: the alert after it is routed too."""
    failed, other = crash_and_return()
    topic, group = alerts_topic(kafka_bootstrap, [failed][:before], *[b"not an alert"] * (WRONG_TOPIC_AFTER + 5))
    publish(kafka_bootstrap, topic, [other])
    receiver = Receiver()
    receiver.start()
    router = AlertRouter(kafka_bootstrap, topic, [webhook(f"http://127.0.0.1:{receiver.port}/hook")],
                         dataclasses.replace(FAST, group_id=group), letters(topic))
    try:
        run_router(router, lambda: router.counts.routed == before + 1, seconds=30)
        assert (router.counts.routed, router.counts.undecodable) == (before + 1, WRONG_TOPIC_AFTER + 5)
        assert not router.counts.no_alerts_topic
    finally:
        receiver.stop()
