"""Relay nodes as real processes on loopback, with the real broker: SMTP sessions, auth, 451, commands.

No mocks: every message goes through real SMTP sockets, every event through Kafka, and the
events are checked against the shadow-redundancy model itself.
"""

from __future__ import annotations

import base64
import signal
import smtplib
import socket
import ssl
import threading
import time
from email.message import EmailMessage

import pytest

from producers.relay import tls
from producers.relay.sink import read_deliveries
from producers.relay.server import RECIPIENT_OK, SENDER_OK
from producers.relay.topology import read_secrets
from schemas import events as ev
from schemas.codec import encode
from schemas.events import AlertType, CommandReason, RedeliveryCommand
from infra.kafka import producer
from tests.producers.relay.conftest import raw_topic_bytes, read_topic, settled, wait_until

pytestmark = pytest.mark.integration


def idle(lab) -> bool:
    return all(s.queued == 0 and s.shadows == 0 for s in (lab.node_status(n.name) for n in lab.topology.nodes))


def test_a_node_closes_a_session_idle_for_its_connection_inactivity_timeout_only(make_lab):
    """The nodes closed a session idle for 60 s, where RFC 5321 4.5.3.2.7 has a server wait at least
    5 minutes for the next command; the wait is now the Receive connector's ConnectionInactivityTimeout
    (5 minutes; 3 s here), and is told so: `421 4.4.2 <node's FQDN> Connection timed out`."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"}, receive_connector={"connection_inactivity_timeout": "3s"})
    lab.up()
    with smtplib.SMTP(lab.topology.host, lab.topology.node("ex01").port, timeout=10) as smtp:
        smtp.ehlo("client.example")
        time.sleep(2)
        assert smtp.noop()[0] == 250
        time.sleep(2)
        assert smtp.noop()[0] == 250, "each command starts the wait again"
        time.sleep(4.5)
        assert smtp.noop() == (421, b"4.4.2 ex01.contoso.com Connection timed out"), "the reply waiting when closed"
        with pytest.raises(smtplib.SMTPServerDisconnected):
            smtp.noop()


def test_a_message_is_shadowed_delivered_and_released_and_the_model_agrees(make_lab, kafka_bootstrap, topics):
    lab = make_lab({"ex01": "dag1", "ex02": "dag1", "ex03": "dag1"})
    lab.up()
    sent = lab.send(6)
    assert len(sent.accepted) == 6, sent.describe()
    assert wait_until(lambda: len(read_deliveries(lab.mailbox_path())) == 6 and idle(lab), 30)
    deliveries = read_deliveries(lab.mailbox_path())
    assert {d.message_id for d in deliveries} == {m for m, _ in sent.accepted}
    assert not any(d.duplicate or d.resubmitted for d in deliveries)
    assert {d.relay for d in deliveries} == {"ex01", "ex02", "ex03"}, "round robin: each node was a primary"

    events = read_topic(kafka_bootstrap, topics.events)
    assert len({e.event_id for e in events}) == len(events), "event ids are unique"
    kinds = [e.kind for e in events]
    for kind in ("MessageReceived", "ShadowCopyRequested", "ShadowCopyStored", "ShadowCopyAcknowledged",
                 "AcknowledgedToSender", "SentToNextHop", "NextHopAcknowledged", "DeliveredToMailbox",
                 "DiscardStatusSet", "MovedToSafetyNet", "ShadowDiscarded"):
        assert kinds.count(kind) == 6, kind
    assert kinds.count("NodeStarted") == 3
    stored = [e for e in events if isinstance(e, ev.ShadowCopyStored)]
    assert all(e.node != e.primary_server for e in stored), "the copy is on a peer"
    answered = [e for e in events if isinstance(e, ev.DiscardQueryAnswered)]
    assert sum(len(e.discarded) for e in answered) == 6
    result = settled(events, lab.topology.shadow_redundancy)
    assert result.alerts == [] and result.commands == []
    assert all(state.holds_nothing() for state in result.states.values()), "the model keeps nothing once all is done"


def test_only_authenticated_peers_over_tls_may_shadow_or_query_and_no_secret_leaks(make_lab, kafka_bootstrap,
                                                                                      topics):
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"})
    lab.up()
    host, port = lab.topology.host, lab.topology.node("ex01").port
    passwords = read_secrets(lab.topology.secrets_path())
    folder = lab.topology.tls_dir()
    with smtplib.SMTP(host, port, local_hostname="intruder.example") as smtp:
        banner = smtp.ehlo()[1].decode() + smtp.docmd("NOOP")[1].decode()
        assert "Python" not in banner and "aiosmtpd" not in banner and "SMTP 1." not in banner
        advertised = smtp.ehlo_resp.decode()
        assert "XSHADOW" in advertised and "XQDISCARD" in advertised and "STARTTLS" in advertised
        assert smtp.docmd("XSHADOW", "PRIMARY=ex02 QDB=x ID=ex02.x.1")[0] == 530
        assert smtp.docmd("XQDISCARD", "SHADOW=ex02 QDB=x")[0] == 530
        plain = base64.b64encode(f"\0ex02\0{passwords['ex02']}".encode()).decode()
        assert smtp.docmd("AUTH", f"PLAIN {plain}")[0] == 538, "no AUTH on a plaintext session"
        assert smtp.docmd("XQDISCARD", "SHADOW=ex02 QDB=x")[0] == 530
    with smtplib.SMTP(host, port, local_hostname="intruder.example") as smtp:
        smtp.starttls(context=_unverified())  # TLS, but no lab certificate of its own
        smtp.ehlo()
        with pytest.raises(smtplib.SMTPAuthenticationError):
            smtp.login("ex02", passwords["ex02"])  # the right password, without ex02's certificate
        started = time.monotonic()
        with pytest.raises(smtplib.SMTPAuthenticationError):
            smtp.login("ex02", passwords["ex02"] + "-wrong")
        assert time.monotonic() - started >= 0.9, "a second failure from the address is answered later"
        assert smtp.docmd("XQDISCARD", "SHADOW=ex02 QDB=x")[0] == 530, "a failed AUTH authenticates nothing"
    with smtplib.SMTP(host, port, local_hostname="ex02.contoso.com") as smtp:  # as ex02 names itself
        smtp.starttls(context=tls.client_context(folder, "ex02"))
        assert tls.certified_name(smtp.sock.getpeercert()) == "ex01", "the node's certificate, from the lab CA"
        smtp.ehlo()
        smtp.login("ex02", passwords["ex02"])
        code, text = smtp.docmd("XQDISCARD", "SHADOW=ex02 QDB=x")
        assert code == 250 and text.decode().startswith(f"QDB={lab.node_status('ex01').queue_db_id}")
        assert smtp.docmd("XQDISCARD", "SHADOW=ex01 QDB=x")[0] == 550, "only its own discard notifications"
        assert smtp.docmd("XSHADOW", "PRIMARY=ex01 QDB=x ID=ex01.x.1")[0] == 550, "only its own messages"
        assert smtp.docmd("XSHADOW", "PRIMARY=ex02")[0] == 501
    sent = lab.send(4)
    assert len(sent.accepted) == 4
    assert wait_until(lambda: len(read_deliveries(lab.mailbox_path())) == 4 and idle(lab), 30)
    events = read_topic(kafka_bootstrap, topics.events)
    assert any(isinstance(e, ev.ShadowCopyStored) for e in events), "the peers shadow over TLS"

    log = lab.log_path("ex01").read_text()
    assert "refused XSHADOW from 127.0.0.1:" in log and "refused XQDISCARD from 127.0.0.1:" in log
    assert "refused for ex02 from 127.0.0.1:" in log and "(no client certificate)" in log
    secrets = [(folder / f"{name}.key").read_text().splitlines()[1] for name in ("ca", "ex01", "ex02")]
    for name, password in passwords.items():
        secrets += [password, base64.b64encode(password.encode()).decode(),
                    base64.b64encode(f"\0{name}\0{password}".encode()).decode()]
    logs = "".join(p.read_text() for p in (lab.run_dir / "logs").iterdir())
    published = raw_topic_bytes(kafka_bootstrap, topics.events)
    assert len(published) > 1000
    for secret in secrets:
        assert secret not in logs and secret.encode() not in published


def test_a_mail_server_presenting_its_own_certificate_may_send_over_starttls(make_lab, tmp_path):
    """Postfix with smtp_tls_cert_file (or Exchange with its self-signed certificate) presents a
    certificate of its own when asked; the lab CA cannot verify it, and asking for it failed the
    handshake (postfix: 'lost connection ... while performing the EHLO handshake', deferred)."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"})
    lab.up()
    elsewhere = tmp_path / "another-ca"
    tls.ensure_certificates(elsewhere, {"mta": "mta.fabrikam.example"}, "127.0.0.1")
    context = _unverified()
    context.load_cert_chain(elsewhere / "mta.pem", elsewhere / "mta.key")
    with smtplib.SMTP(lab.topology.host, lab.topology.node("ex01").port, local_hostname="mta.fabrikam.example",
                      timeout=20) as smtp:
        smtp.starttls(context=context)
        smtp.ehlo()
        assert smtp.sendmail("a@fabrikam.example", ["b@contoso.com"],
                             b"Message-ID: <tls-sender@x>\r\nSubject: t\r\n\r\nhi\r\n") == {}
    assert wait_until(lambda: [d.message_id for d in read_deliveries(lab.mailbox_path())] == ["<tls-sender@x>"], 20)


def test_a_client_verifying_the_certificate_against_the_node_s_fqdn_or_name_completes_starttls(make_lab):
    """A node greets and EHLOs as `ex01.contoso.com`, and a client that checks the certificate against the
    host it was told (swaks --tls-verify, postfix's smtp_tls_security_level = verify, Python's default
    context) is told that name; the lab's certificate named `ex01` only, and the handshake failed
    ("Hostname mismatch, certificate is not valid for 'ex01.contoso.com'"). It now names the node's name
    and FQDN, as Exchange's self-signed certificate does (CN=ex01; ex01, ex01.contoso.com), and a
    certificate made before (naming `ex01` only) is made again at `lab up`."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"})
    folder = lab.topology.tls_dir()
    tls.ensure_certificates(folder, {"ex01": "ex01"}, lab.topology.host)  # as the lab made it before
    lab.up()
    context = ssl.create_default_context(cafile=folder / "ca.pem")
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    port = lab.topology.node("ex01").port
    for told in ("ex01.contoso.com", "ex01", lab.topology.host):
        greeting, certificate = _starttls(lab.topology.host, port, told, context)
        assert greeting == b"220 ex01.contoso.com ESMTP", told
        assert tls.certified_name(certificate) == "ex01", told
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        _starttls(lab.topology.host, port, "ex02.contoso.com", context)


def _starttls(host: str, port: int, told: str, context: ssl.SSLContext) -> tuple[bytes, dict]:
    """The greeting of the server at host:port and the certificate it presents after STARTTLS, verified
    against `told`, the host name the client was given (TLS's server name)."""
    with socket.create_connection((host, port), timeout=10) as raw, raw.makefile("rb") as replies:
        greeting = replies.readline().rstrip()
        raw.sendall(b"EHLO client.fabrikam.example\r\n")
        while replies.readline()[3:4] == b"-":
            pass
        raw.sendall(b"STARTTLS\r\n")
        assert replies.readline().startswith(b"220 ")
        with context.wrap_socket(raw, server_hostname=told) as encrypted:
            return greeting, encrypted.getpeercert()


def test_a_path_that_is_no_mailbox_gets_501_and_the_event_names_only_accepted_recipients(make_lab,
                                                                                        kafka_bootstrap, topics):
    """RFC 5321 (4.1.2): a path is a Mailbox, local part "@" domain; aiosmtpd took `RCPT TO:bad` and
    `RCPT TO:<not an address>` with 250, and MessageReceived named them as recipients."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"})
    lab.up()
    with socket.create_connection((lab.topology.host, lab.topology.node("ex01").port), timeout=20) as sock:
        replies = sock.makefile("rb")

        def say(line: bytes) -> str:
            sock.sendall(line + b"\r\n")
            while (answer := replies.readline().decode())[3:4] == "-":
                pass
            return answer.strip()

        replies.readline()
        assert say(b"EHLO client.example").startswith("250 ")
        assert say(b"MAIL FROM:<nodomain>").startswith("501 5.1.7")
        assert say(b"MAIL FROM:<>") == SENDER_OK
        refused = [say(b"RCPT TO:" + path) for path in (b"bad", b"<not an address>", b"<user>")]
        assert all(answer.startswith("501 5.1.3") for answer in refused), refused
        accepted = [say(b"RCPT TO:" + path) for path in (b"<ok@contoso.com>", b'<"a b"@contoso.com>',
                                                          b"<u@[127.0.0.1]>", b"<Postmaster>")]
        assert accepted == [RECIPIENT_OK] * 4
        assert say(b"DATA").startswith("354")
        assert say(b"Message-ID: <paths@x>\r\n\r\nhi\r\n.").startswith("250 2.0.0")
        assert say(b"QUIT").startswith("221")
    events = read_topic(kafka_bootstrap, topics.events, until=lambda records: any(
        isinstance(e, ev.MovedToSafetyNet) for e in records))
    received = [e for e in events if isinstance(e, ev.MessageReceived)]
    assert [r.address for r in received[0].recipients] == ["ok@contoso.com", '"a b"@contoso.com',
                                                           "u@[127.0.0.1]", "Postmaster"]


def test_pipelining_is_advertised_and_a_batch_is_answered_in_order(make_lab, kafka_bootstrap, topics):
    """RFC 2920, as Exchange offers it: postfix sends MAIL, the RCPTs and DATA in one write when EHLO
    says PIPELINING (before, it did not, nor did swaks --pipeline), and gets one answer per command."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"})
    lab.up()
    with socket.create_connection((lab.topology.host, lab.topology.node("ex01").port), timeout=20) as sock:
        replies = sock.makefile("rb")

        def answer() -> str:
            while (line := replies.readline().decode())[3:4] == "-":
                pass
            return line.strip()

        answer()
        sock.sendall(b"EHLO client.example\r\n")
        ehlo = []
        while (line := replies.readline().decode())[3:4] == "-":
            ehlo.append(line[4:].strip())
        assert "PIPELINING" in ehlo
        sock.sendall(b"MAIL FROM:<a@fabrikam.example>\r\nRCPT TO:<one@contoso.com>\r\nRCPT TO:<nobody>\r\n"
                     b"RCPT TO:<two@contoso.com>\r\nDATA\r\n")
        assert [answer()[:3] for _ in range(5)] == ["250", "250", "501", "250", "354"]
        sock.sendall(b"Message-ID: <batch@x>\r\n\r\nhi\r\n.\r\nQUIT\r\n")
        assert answer().startswith("250 2.0.0") and answer().startswith("221")
    events = read_topic(kafka_bootstrap, topics.events, until=lambda records: any(
        isinstance(e, ev.MovedToSafetyNet) for e in records))
    received = [e for e in events if isinstance(e, ev.MessageReceived)]
    assert [r.address for r in received[0].recipients] == ["one@contoso.com", "two@contoso.com"]


def _unverified() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    return context


def test_451_when_no_shadow_can_be_made_and_the_switch_is_on_else_250_not_redundant(make_lab, kafka_bootstrap,
                                                                                     topics):
    parameters = {"nodes": {"a1": {"reject_message_on_shadow_failure": True}}}
    lab = make_lab({"a1": "dagA", "a2": "dagA", "b1": "dagB", "b2": "dagB"}, parameters)
    lab.up(nodes=["a1", "b1"])  # their only peers, a2 and b2, never come up
    rejected = lab.send(1, nodes=["a1"])
    assert [reply[:9] for _, _, reply in rejected.temporary] == ["451 4.4.0"], rejected.describe()
    assert "failed to be made redundant" in rejected.temporary[0][2]
    accepted = lab.send(1, nodes=["b1"])
    assert len(accepted.accepted) == 1
    assert wait_until(lambda: len(read_deliveries(lab.mailbox_path())) == 1, 20)
    assert read_deliveries(lab.mailbox_path())[0].message_id == accepted.accepted[0][0]

    events = read_topic(kafka_bootstrap, topics.events)
    failed = [e for e in events if isinstance(e, ev.ShadowCopyFailed)]
    assert sorted((e.node, e.candidate, e.attempt, e.reason.value) for e in failed) == [
        ("a1", "a2", 1, "REFUSED"), ("a1", "a2", 2, "REFUSED"), ("b1", "b2", 1, "REFUSED"), ("b1", "b2", 2, "REFUSED")]
    assert [e.node for e in events if isinstance(e, ev.RejectedToSender)] == ["a1"]
    acks = [e for e in events if isinstance(e, ev.AcknowledgedToSender)]
    assert [(e.node, e.redundant) for e in acks] == [("b1", False)]
    result = settled(events, lab.topology.shadow_redundancy)
    assert sorted((a.type, a.servers) for a in result.alerts) == [
        (AlertType.NOT_REDUNDANT, ("b1",)), (AlertType.REJECTED_NO_SHADOW, ("a1",))]


def test_a_node_obeys_a_redelivery_command_once(make_lab, kafka_bootstrap, topics):
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"}, next_hop_delay_seconds=120.0)
    lab.up()
    sent = lab.send(1, nodes=["ex01"])
    assert len(sent.accepted) == 1
    stored = [e for e in read_topic(kafka_bootstrap, topics.events, until=lambda r: any(
        isinstance(e, ev.ShadowCopyStored) for e in r), max_s=10) if isinstance(e, ev.ShadowCopyStored)]
    assert [(e.node, e.primary_server) for e in stored] == [("ex02", "ex01")]
    # as a twin with [shadow_redundancy] servers = ["EX01", "EX02"] names them (state/names.py)
    command = RedeliveryCommand(command_id="cmd-1", holder="EX02", primary_server="Ex01", message=stored[0].message,
                                reason=CommandReason.PRIMARY_HEARTBEAT_TIMEOUT, decided_at_ms=int(time.time() * 1000))
    elsewhere = RedeliveryCommand(command_id="cmd-2", holder="ex01", primary_server="ex02",
                                  message=ev.MessageRef("<x@y>", "ex02.none.1"),
                                  reason=CommandReason.PRIMARY_HEARTBEAT_TIMEOUT, decided_at_ms=1)
    out = producer(kafka_bootstrap)
    for record in (command, command, elsewhere):
        out.produce(topics.commands, key=record.primary_server.encode(), value=encode(record))
    assert out.flush(10) == 0
    assert wait_until(lambda: len(read_deliveries(lab.mailbox_path())) >= 1, 30)
    time.sleep(2)  # a repeat would arrive by now
    deliveries = read_deliveries(lab.mailbox_path())
    assert [(d.message_id, d.relay, d.resubmitted) for d in deliveries] == [(sent.accepted[0][0], "ex02", True)]
    promoted = [e for e in read_topic(kafka_bootstrap, topics.events, max_s=8) if isinstance(e, ev.ShadowPromoted)]
    assert [(e.node, e.primary_server, e.message.internal_id) for e in promoted] == [
        ("ex02", "ex01", stored[0].message.internal_id)]
    assert "cmd-1" in promoted[0].reason
    assert lab.node_status("ex02").shadows == 0 and lab.node_status("ex01").queued == 1
    assert "command cmd-1 repeated: ignored" in lab.log_path("ex02").read_text()


def test_a_node_whose_events_were_not_acknowledged_says_how_many_and_exits_1(tmp_path, topics):
    from producers.relay.lab import Lab
    from producers.relay.topology import load_topology
    from tests.conftest import free_port
    from tests.producers.relay.conftest import topology_text

    path = tmp_path / "lab.toml"
    path.write_text(topology_text(tmp_path / "lab", {"ex01": "dag1"}))
    lab = Lab(load_topology(path), path, f"127.0.0.1:{free_port()}", topics)  # no broker answers there
    try:
        lab.up()
        pid = lab.pid("ex01")
        process = lab._children[pid]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=90) == 1
        log = lab.log_path("ex01").read_text()
        assert "ex01 stopped: 2 of 2 records were not acknowledged by Kafka at 127.0.0.1:" in log
    finally:
        lab.down()


def test_a_message_with_more_received_lines_than_max_hop_count_is_refused_as_a_loop(make_lab, kafka_bootstrap,
                                                                                    topics):
    """A node took a message whatever the number of its Received lines, so two servers relaying to each
    other passed it on for ever. As Exchange's Receive connector (MaxHopCount, 3 here), a node now refuses
    one with more, `554 5.4.14 Hop count exceeded - possible mail loop` (the words of Exchange 2013 and later;
    5.4.6 was Exchange 2010's and FOPE's), and takes one with as many (its
    shadow copy, with the node's own line on top, included)."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"}, receive_connector={"max_hop_count": 3})
    lab.up()

    def content(message_id: str, hops: int) -> bytes:
        trace = b"".join(b"Received: from mx%d.fabrikam.example by mx%d.fabrikam.example; Fri, 27 Nov 2026 10:00:0%d"
                         b" +0000\r\n" % (i, i + 1, i) for i in range(hops))
        return trace + b"Message-ID: " + message_id.encode() + b"\r\nSubject: hops\r\n\r\nhello\r\n"

    with smtplib.SMTP(lab.topology.host, lab.topology.node("ex01").port, timeout=20) as smtp:
        with pytest.raises(smtplib.SMTPDataError) as refused:
            smtp.sendmail("a@fabrikam.example", ["b@contoso.com"], content("<looping@x>", 4))
        assert refused.value.smtp_code == 554
        assert refused.value.smtp_error == b"5.4.14 Hop count exceeded - possible mail loop"
        assert smtp.sendmail("a@fabrikam.example", ["b@contoso.com"], content("<far@x>", 3)) == {}
    assert wait_until(lambda: [d.message_id for d in read_deliveries(lab.mailbox_path())] == ["<far@x>"], 20)
    events = read_topic(kafka_bootstrap, topics.events, until=lambda records: any(
        isinstance(e, ev.MovedToSafetyNet) for e in records))
    assert {e.message.message_id for e in events if isinstance(e, ev.MessageReceived)} == {"<far@x>"}
    assert [e.redundant for e in events if isinstance(e, ev.AcknowledgedToSender)] == [True]


def test_a_message_whose_identity_headers_have_8_bit_octets_or_no_moment_is_taken_under_one_id(make_lab,
                                                                                              kafka_bootstrap, topics):
    """Clients send 8-bit header octets without SMTPUTF8 (swaks with a Message-ID naming a host `café`, a
    Date in the sender's language, `4 Mär 2026`): the node answered the end of DATA `500 Error: (AttributeError)
    'Header' object has no attribute 'strip'`, refusing the message for good in Python's words, and one
    whose X-Submitted-At no timestamp holds `500 Error: (ValidationError) ... does not fit a 64-bit long`.
    Now each such octet reads as U+FFFD in the Message-ID that the events, the shadow copy and the mailbox
    name the message by, and a Date that does not parse or a submit time that is no moment is none."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"})
    lab.up()
    eight_bit = (b"Message-ID: <caf\xc3\xa9@fabrikam.example>\r\nDate: Mi, 4 M\xc3\xa4r 2026 10:00:00 +0100\r\n"
                 b"\r\nhi\r\n")
    far = b"Message-ID: <far-future@x>\r\nX-Submitted-At: 99999999999999999999999\r\n\r\nhi\r\n"
    with smtplib.SMTP(lab.topology.host, lab.topology.node("ex01").port, timeout=20) as smtp:
        for content in (eight_bit, far):
            assert smtp.sendmail("a@fabrikam.example", ["b@contoso.com"], content) == {}
    ids = {"<caf\ufffd\ufffd@fabrikam.example>", "<far-future@x>"}
    assert wait_until(lambda: {d.message_id for d in read_deliveries(lab.mailbox_path())} == ids, 20)
    events = read_topic(kafka_bootstrap, topics.events, until=lambda records: sum(
        isinstance(e, ev.MovedToSafetyNet) for e in records) == 2)
    for kind in (ev.MessageReceived, ev.ShadowCopyStored, ev.DeliveredToMailbox):
        assert {e.message.message_id for e in events if isinstance(e, kind)} == ids, kind.__name__
    assert [e.submitted_at_ms for e in events if isinstance(e, ev.MessageReceived)] == [None, None]
    assert [e.redundant for e in events if isinstance(e, ev.AcknowledgedToSender)] == [True, True]


def test_a_node_that_fails_to_take_a_message_answers_451_for_the_client_to_try_again(make_lab, kafka_bootstrap,
                                                                                   topics):
    """A node that failed to take a message (here the broker refuses its MessageReceived event: a Message-ID,
    folded over 1400 lines, larger than a Kafka record may be) answered `500 Error: (KafkaException)
    KafkaError{code=MSG_SIZE_TOO_LARGE,...}`: a syntax error for good, in Python's words, so the client
    returned the message to its sender. It now answers `451 4.3.0` (RFC 5321 4.2.3, local error in
    processing), the transaction ends, the session goes on, and nothing is published for that message."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"})
    lab.up()
    folded_id = b"Message-ID: <" + b"\r\n ".join([b"x" * 900] * 1400) + b"@x>\r\n"
    with smtplib.SMTP(lab.topology.host, lab.topology.node("ex01").port, timeout=20) as smtp:
        with pytest.raises(smtplib.SMTPDataError) as refused:
            smtp.sendmail("a@fabrikam.example", ["b@contoso.com"], folded_id + b"\r\nhi\r\n")
        assert (refused.value.smtp_code, refused.value.smtp_error) == (451, b"4.3.0 Error: local error in processing")
        assert smtp.sendmail("a@fabrikam.example", ["b@contoso.com"], b"Message-ID: <next@x>\r\n\r\nhi\r\n") == {}
    assert wait_until(lambda: [d.message_id for d in read_deliveries(lab.mailbox_path())] == ["<next@x>"], 20)
    events = read_topic(kafka_bootstrap, topics.events, until=lambda records: any(
        isinstance(e, ev.MovedToSafetyNet) for e in records))
    assert [e.message.message_id for e in events if isinstance(e, ev.MessageReceived)] == ["<next@x>"]


def test_a_shadow_whose_discard_answer_cannot_be_published_still_discards_the_copies(make_lab):
    """A shadow published DiscardQueryAnswered before it discarded the copies the answer released, and the primary
    forgets its notifications when it answers: when the broker refused the event (three Message-IDs of 450 KB
    make it larger than a record may be), the copies were held for good, and resubmitted at the primary's next
    failure, delivered twice (helper-124's walk). The copies now go whatever the events."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"})
    lab.up()
    with smtplib.SMTP(lab.topology.host, lab.topology.node("ex01").port, timeout=20) as smtp:
        for n in range(3):
            folded_id = b"Message-ID: <" + b"\r\n ".join([b"x" * 900] * 500) + b"%d@x>\r\n" % n
            assert smtp.sendmail("a@fabrikam.example", ["b@contoso.com"], folded_id + b"\r\nhi\r\n") == {}
    assert wait_until(lambda: len(read_deliveries(lab.mailbox_path())) == 3, 30)
    assert wait_until(lambda: lab.node_status("ex02").shadows == 0, 20), "the released copies are discarded"


def test_a_message_of_the_largest_size_a_node_takes_still_gets_its_shadow_copy(make_lab, kafka_bootstrap, topics):
    """A node took a message of exactly its MaxMessageSize, then its peer refused the shadow copy (the
    node's Received line and Message-ID on top made it larger than that limit: `552` to SIZE= at MAIL),
    so the message was acknowledged not redundant (or refused 451 with RejectMessageOnShadowFailure).
    As Exchange checks an internal hop against the size the message had when the organisation received
    it, a peer now takes a shadow copy with the room the nodes' own lines need; a client still may not
    send a byte more than MaxMessageSize."""
    limit = 65536
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"}, receive_connector={"max_message_size": limit})
    lab.up()
    head = b"From: a@fabrikam.example\r\nTo: b@contoso.com\r\nSubject: as large as allowed\r\n\r\n"
    body = b"y" * 98 + b"\r\n"
    largest = head + body * ((limit - len(head)) // len(body))
    largest += b"z" * (limit - len(largest) - 2) + b"\r\n"
    assert len(largest) == limit
    with smtplib.SMTP(lab.topology.host, lab.topology.node("ex01").port, timeout=20) as smtp:
        with pytest.raises(smtplib.SMTPSenderRefused) as refused:
            smtp.sendmail("a@fabrikam.example", ["b@contoso.com"], largest + b"x")
        assert refused.value.smtp_code == 552
        assert smtp.sendmail("a@fabrikam.example", ["b@contoso.com"], largest) == {}  # with SIZE=65536
    events = read_topic(kafka_bootstrap, topics.events, until=lambda records: any(
        isinstance(e, ev.MovedToSafetyNet) for e in records))
    assert [e.size_bytes for e in events if isinstance(e, ev.MessageReceived)] == [limit]
    assert [e.reason for e in events if isinstance(e, ev.ShadowCopyFailed)] == []
    assert [(e.node, e.primary_server) for e in events if isinstance(e, ev.ShadowCopyStored)] == [("ex02", "ex01")]
    assert [e.redundant for e in events if isinstance(e, ev.AcknowledgedToSender)] == [True]
    assert wait_until(lambda: len(read_deliveries(lab.mailbox_path())) == 1, 20)


def test_rset_and_ehlo_end_an_xshadow_as_they_end_a_transaction(make_lab):
    """RFC 5321 4.1.1.5: RSET discards the transaction's state (and EHLO resets as RSET does), but an
    XSHADOW, which opens a shadow transaction, outlived both: the next message of that session was stored
    as a shadow copy, with a shadow copy's larger size limit, where it was the peer's own message."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"}, receive_connector={"max_message_size": 65536})
    lab.up()
    passwords = read_secrets(lab.topology.secrets_path())
    with smtplib.SMTP(lab.topology.host, lab.topology.node("ex01").port, local_hostname="ex02.contoso.com") as smtp:
        smtp.starttls(context=tls.client_context(lab.topology.tls_dir(), "ex02"))
        smtp.ehlo()
        smtp.login("ex02", passwords["ex02"])
        for reset in ("RSET", "EHLO ex02.contoso.com"):
            assert smtp.docmd("XSHADOW", "PRIMARY=ex02 QDB=q ID=ex02.q.1")[0] == 250
            assert smtp.docmd(reset)[0] == 250
            assert smtp.mail("a@fabrikam.example", ["SIZE=65537"])[0] == 552, reset
            assert smtp.docmd("RSET")[0] == 250
        smtp.mail("a@fabrikam.example")
        smtp.rcpt("b@contoso.com")
        code, text = smtp.data(b"Message-ID: <own@x>\r\nSubject: the peer's own\r\n\r\nhi\r\n")
    assert code == 250 and text.decode().startswith("2.0.0 OK queued as ex01."), text
    assert wait_until(lambda: [d.message_id for d in read_deliveries(lab.mailbox_path())] == ["<own@x>"], 20)


def test_nodes_busy_with_many_clients_at_once_still_shadow_every_message(make_lab, kafka_bootstrap, topics):
    """Two nodes, each with more clients at once than it has workers (16): a node's worker accepting a
    message waits for a peer's worker to store its shadow copy. With one pool for both, every worker of each
    node waited on the other's until the shadow session timed out: about half the messages were acknowledged
    not redundant (32 of 60). The peers' work has workers of its own now."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"})
    lab.up()
    replies: dict[str, object] = {}

    def client(i: int) -> None:
        message = EmailMessage()
        message["From"], message["To"], message["Subject"] = "a@fabrikam.example", "b@contoso.com", "busy"
        message["Message-ID"] = message_id = f"<busy-{i}@x>"
        message.set_content("hello\n")
        try:
            with smtplib.SMTP(lab.topology.host, lab.topology.node(f"ex0{i % 2 + 1}").port, timeout=60) as smtp:
                replies[message_id] = smtp.send_message(message)
        except (OSError, smtplib.SMTPException) as exc:
            replies[message_id] = exc

    clients = [threading.Thread(target=client, args=(i,)) for i in range(48)]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join(120)
    assert list(replies.values()) == [{}] * 48, replies
    events = read_topic(kafka_bootstrap, topics.events, until=lambda records: sum(
        isinstance(e, ev.AcknowledgedToSender) for e in records) == 48)
    acknowledged = [e for e in events if isinstance(e, ev.AcknowledgedToSender)]
    assert len(acknowledged) == 48
    assert [e.message.message_id for e in acknowledged if not e.redundant] == []


def test_a_shadow_back_from_an_outage_longer_than_the_span_asks_its_primary_before_it_promotes(make_lab,
                                                                                              kafka_bootstrap, topics):
    """ex02 holds <away@x>'s copy and is down 7 s, ShadowResubmitTimeSpan 4 s, while ex01 delivers the message.
    "If the shadow server can't open an SMTP session with the primary server after" the span (003), it
    promotes: back, ex02 opens one, collects the discard and resubmits nothing. Before, it promoted every copy
    at its first heartbeat, unasked, and the mailbox got the message twice."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"}, {"shadow_resubmit_time_span": "4s"})
    lab.up()
    message = EmailMessage()
    message["From"], message["To"], message["Message-ID"] = "a@fabrikam.example", "b@contoso.com", "<away@x>"
    message.set_content("hello\n")
    with smtplib.SMTP(lab.topology.host, lab.topology.node("ex01").port, timeout=20) as smtp:
        smtp.send_message(message)
    lab.kill("ex02")
    assert wait_until(lambda: lab.node_status("ex01").queued == 0, 15), "ex01 delivers while ex02 is down"
    time.sleep(7)
    lab.restart("ex02")
    assert wait_until(lambda: idle(lab), 20), "ex02 collects the discard"
    deliveries = [d for d in read_deliveries(lab.mailbox_path()) if d.message_id == "<away@x>"]
    assert [(d.relay, d.resubmitted) for d in deliveries] == [("ex01", False)]
    events = read_topic(kafka_bootstrap, topics.events, until=lambda records: any(
        isinstance(e, ev.ShadowDiscarded) for e in records))
    assert not any(isinstance(e, ev.ShadowPromoted) for e in events)
    result = settled(events, lab.topology.shadow_redundancy)
    assert result.commands == [] and not any("PROMOTED" in a.type.value for a in result.alerts), result.alerts
