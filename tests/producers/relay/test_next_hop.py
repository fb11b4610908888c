"""What a relay node hands its next hop, over real sockets, with the node a real lab process and its
events through Kafka: a next hop refusing some recipients for good (550) and some for now (450), as
real servers do; the content as the sender sent it."""

from __future__ import annotations

import asyncio
import contextlib
import email
import email.utils
import re
import smtplib
import socket
import ssl
import threading
import time
from email.message import EmailMessage

import pytest
from aiosmtpd.controller import Controller

from producers.relay.lab import SINK
from producers.relay.sink import Mailbox, read_deliveries
from schemas import events as ev
from schemas.events import AlertType
from state.replay import replay
from tests.producers.relay.conftest import read_topic, settled, wait_until

pytestmark = pytest.mark.integration
SLOW_S = 5.0
# What a node puts before the sender's content: its relay header, then its Received line (folded).
_NODE_LINES = re.compile(rb"X-Shadowtwin-Relay: [^\r]*\r\nReceived: [^\r]*\r\n(?:\t[^\r]*\r\n)*")


class _Mailboxes:
    """A next hop that knows no `gone@`, and is busy for `busy@` at the first two attempts (postfix
    answers so with check_recipient_access: `550 5.1.1 ...`, `450 4.2.1 ...`); the node's non-delivery
    reports are noted apart."""

    def __init__(self):
        self.busy_left = 2
        self.received: list[tuple[tuple[str, ...], bytes]] = []
        self.reports: list[tuple[tuple[str, ...], bytes]] = []

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.startswith("gone@"):
            return "550 5.1.1 <gone@contoso.com>: Recipient address rejected: no such user"
        if address.startswith("busy@") and self.busy_left:
            self.busy_left -= 1
            return "450 4.2.1 <busy@contoso.com>: Recipient address rejected: mailbox busy"
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 Ok"

    async def handle_DATA(self, server, session, envelope):
        to = self.reports if envelope.mail_from == "<>" else self.received
        to.append((tuple(envelope.rcpt_tos), envelope.original_content))
        return "250 2.0.0 Ok: queued"


def _message(message_id: str, to: list[str]) -> EmailMessage:
    message = EmailMessage()
    message["From"], message["To"], message["Message-ID"] = "a@fabrikam.example", ", ".join(to), message_id
    message["Subject"] = "next hop test"
    message.set_content("hello\n")
    return message


@contextlib.contextmanager
def _next_hop(lab, handler):
    """The lab up, with an aiosmtpd server running `handler` as its nodes' next hop (on the sink's port)."""
    lab.up()
    lab.stop(SINK)
    next_hop = Controller(handler, hostname=lab.topology.host, port=lab.topology.sink.port)
    next_hop.start()
    try:
        yield
    finally:
        next_hop.stop()


def _send(lab, *messages: EmailMessage, node: str = "ex01") -> None:
    with smtplib.SMTP(lab.topology.host, lab.topology.node(node).port, timeout=20) as smtp:
        for message in messages:
            smtp.send_message(message)


def test_recipients_the_next_hop_refuses_do_not_hold_back_the_others(make_lab, kafka_bootstrap, topics):
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"})
    mailboxes = _Mailboxes()
    with _next_hop(lab, mailboxes):
        _send(lab, _message("<mixed@x>", ["ok@contoso.com", "gone@contoso.com", "busy@contoso.com"]),
              _message("<nobody@x>", ["gone@contoso.com"]))
        queue_empty = lambda: lab.node_status("ex01").queued == 0  # noqa: E731
        assert wait_until(lambda: len(mailboxes.received) == 2 and queue_empty(), 30), (
            f"delivered {mailboxes.received}, ex01 still holds {lab.node_status('ex01').queued}")
    assert [rcpts for rcpts, _ in mailboxes.received] == [("ok@contoso.com",), ("busy@contoso.com",)]

    events = read_topic(kafka_bootstrap, topics.events)
    mixed = [e for e in events if e.message is not None and e.message.message_id == "<mixed@x>" and e.node == "ex01"]
    delivered = [e.recipients for e in mixed if isinstance(e, ev.DeliveredToMailbox)]
    assert delivered == [("ok@contoso.com",), ("busy@contoso.com",)]
    deferred = [e for e in mixed if isinstance(e, ev.DeliveryDeferred)]
    assert [(e.message.fork_id is None, e.recipients) for e in deferred] == [
        (False, ("gone@contoso.com",)), (True, ("busy@contoso.com",)), (True, ("busy@contoso.com",))]
    assert "550 5.1.1" in deferred[0].smtp_response and "450 4.2.1" in deferred[1].smtp_response
    expired = [e for e in mixed if isinstance(e, ev.MessageExpired)]
    assert [e.message.fork_id for e in expired] == [deferred[0].message.fork_id], "only the refused fork fails"
    assert sum(isinstance(e, ev.MovedToSafetyNet) for e in mixed) == 1

    nobody = [e for e in events if e.message is not None and e.message.message_id == "<nobody@x>"
              and e.node == "ex01"]
    assert not any(isinstance(e, ev.DeliveredToMailbox) for e in nobody)
    assert [type(e).__name__ for e in nobody if e.message.fork_id is not None] == ["DeliveryDeferred",
                                                                                    "MessageExpired"]
    # Processed, its copy released; not in Safety Net, which holds what a next hop acknowledged: the node said
    # MovedToSafetyNet for a message its next hop had refused for every recipient.
    processed = [type(e).__name__ for e in nobody if isinstance(e, (ev.DiscardStatusSet, ev.MovedToSafetyNet))]
    assert processed == ["DiscardStatusSet"]

    result = settled(events, lab.topology.shadow_redundancy)
    assert result.alerts == [] and result.commands == []
    # Before: the first attempt's events said NextHopAcknowledged, and the twin took busy@ as served too (had
    # ex01 failed before its retry, busy@ would have been left to ex02's own resubmission, with no command).
    first_deferral = deferred[1].event_time_ms
    early = replay([e for e in events if e.event_time_ms <= first_deferral], lab.topology.shadow_redundancy)
    [held] = [m for m in early.states["ex01"].messages.values() if m.ref.message_id == "<mixed@x>"]
    assert held.primary_done_ms is None, "busy@ still to deliver"


def test_recipients_refused_for_good_are_reported_to_the_sender_and_the_shadow_waits_for_the_report(
        make_lab, kafka_bootstrap, topics):
    """RFC 5321 6.1: a server that accepted a message and cannot deliver it MUST send the reverse-path a
    notification (unless it is null). A node told nobody: a recipient its next hop refused for good was a
    failed fork in its events and nothing more. It now sends the sender an RFC 3464 report from <> (with
    the next hop's answer), as Exchange sends an NDR, and its events say so (SideEffectGenerated, NDR); the
    message's shadow copy is released only once the report is processed too, as Exchange holds it for
    every fork and side effect; a message from the null reverse-path gets no report."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"})
    mailboxes = _Mailboxes()
    with _next_hop(lab, mailboxes):
        _send(lab, _message("<partly@x>", ["ok@contoso.com", "gone@contoso.com"]))
        with smtplib.SMTP(lab.topology.host, lab.topology.node("ex01").port, timeout=20) as smtp:
            smtp.sendmail("<>", ["gone@contoso.com"], b"Message-ID: <bounce@x>\r\nSubject: a report\r\n\r\nhi\r\n")
        idle = lambda: all(lab.node_status(n).queued == lab.node_status(n).shadows == 0  # noqa: E731
                           for n in ("ex01", "ex02"))
        assert wait_until(lambda: mailboxes.received and mailboxes.reports and idle(), 30), mailboxes.reports
    assert [rcpts for rcpts, _ in mailboxes.received] == [("ok@contoso.com",)]
    [(to, report)] = mailboxes.reports
    assert to == ("a@fabrikam.example",)
    parsed = email.message_from_bytes(report)
    assert parsed.get_content_type() == "multipart/report" and parsed["Subject"] == "Undeliverable: next hop test"
    assert b"Reporting-MTA: dns; ex01.contoso.com\r\n" in report, "RFC 3464 2.2.2: a fully qualified name"
    status = re.sub(rb"\r\n[ \t]+", b" ", report[report.index(b"Final-Recipient"):])  # unfolded
    assert b"Final-Recipient: rfc822;gone@contoso.com" in status and b"Status: 5.1.1" in status
    assert b"Diagnostic-Code: smtp;550 5.1.1 <gone@contoso.com>: Recipient address rejected" in status
    assert b"Message-ID: <partly@x>" in report, "the original's header section"

    events = read_topic(kafka_bootstrap, topics.events)
    [generated] = [e for e in events if isinstance(e, ev.SideEffectGenerated)]
    assert (generated.node, generated.side_effect, generated.parent.message_id) == (
        "ex01", ev.SideEffectKind.NDR, "<partly@x>")
    assert parsed["Message-ID"] == generated.message.message_id
    mine = [e for e in events if e.message is not None and e.message.internal_id in (
        generated.parent.internal_id, generated.message.internal_id) and e.node == "ex01"]
    kinds = [(type(e).__name__, e.message.message_id == "<partly@x>") for e in mine]
    assert kinds.index(("DiscardStatusSet", True)) > kinds.index(("DeliveredToMailbox", False)), \
        "the copy is released once the report is delivered"
    result = settled(events, lab.topology.shadow_redundancy)
    assert result.alerts == [] and result.commands == []
    assert all(state.holds_nothing() for state in result.states.values())


class _TwoAtATime:
    """A next hop that takes two recipients a transaction, as Exchange takes MaxRecipientsPerMessage."""

    def __init__(self):
        self.transactions: list[tuple[str, ...]] = []

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if len(envelope.rcpt_tos) == 2:
            return "452 4.5.3 Too many recipients"
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 Ok"

    async def handle_DATA(self, server, session, envelope):
        self.transactions.append(tuple(envelope.rcpt_tos))
        return "250 2.0.0 Ok: queued"


def test_recipients_over_the_next_hop_s_limit_go_at_once_in_another_transaction(make_lab, kafka_bootstrap, topics):
    """RFC 5321 4.5.3.1.10: a server out of room for recipients in a transaction answers 452 and the client
    sends the rest in another; Exchange does so at once. A node took `452 4.5.3 Too many recipients` as a
    recipient busy for now: it deferred the rest (DeliveryDeferred) and sent them TransientFailureRetryInterval
    later (5 minutes by Exchange's default), two more a time."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"}, transport_service={"transient_failure_retry_interval": "60s"})
    recipients = [f"user{i}@contoso.com" for i in range(5)]
    next_hop = _TwoAtATime()
    with _next_hop(lab, next_hop):
        _send(lab, _message("<many@x>", recipients))
        assert wait_until(lambda: len(next_hop.transactions) == 3, 20), next_hop.transactions
    assert next_hop.transactions == [tuple(recipients[:2]), tuple(recipients[2:4]), tuple(recipients[4:])]
    events = read_topic(kafka_bootstrap, topics.events, until=lambda records: any(
        isinstance(e, ev.MovedToSafetyNet) for e in records))
    assert not any(isinstance(e, ev.DeliveryDeferred) for e in events)
    assert [e.recipients for e in events if isinstance(e, ev.DeliveredToMailbox)] == [tuple(recipients)]


class _Capture:
    def __init__(self):
        self.contents: list[bytes] = []

    async def handle_DATA(self, server, session, envelope):
        self.contents.append(envelope.original_content)
        return "250 2.0.0 Ok: queued"


def test_a_node_puts_its_received_line_on_top_of_what_it_relays(make_lab, kafka_bootstrap, topics):
    """A node relayed the sender's bytes with no trace of its own hop: RFC 5321 4.4 says a server
    receiving a message for further processing MUST insert a Received line at the beginning of the
    content, and postfix, as a next hop, counts them to stop a mail loop (hopcount_limit). A sender as
    postfix is one (EHLO with its name, STARTTLS, a Received line of its own) now sees, at the next
    hop, the node's line above its own: from its EHLO name and address, by the node, ESMTPS
    (RFC 3848), the node's internal id, the one recipient, the time received."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"})
    capture = _Capture()
    sent = (b"Received: by mx.fabrikam.example (Postfix, from userid 0)\r\n\tid 62648BA342;"
            b" Fri, 27 Nov 2026 07:56:50 +0000 (UTC)\r\nFrom: a@fabrikam.example\r\nTo: b@contoso.com\r\n"
            b"Message-ID: <traced@x>\r\nSubject: traced\r\n\r\nhello\r\n")
    with _next_hop(lab, capture):
        with smtplib.SMTP(lab.topology.host, lab.topology.node("ex01").port, timeout=20) as smtp:
            smtp.ehlo("mx.fabrikam.example")
            smtp.starttls(context=ssl._create_unverified_context())
            smtp.ehlo("mx.fabrikam.example")
            assert smtp.sendmail("a@fabrikam.example", ["b@contoso.com"], sent) == {}
        assert wait_until(lambda: capture.contents, 20)
    events = read_topic(kafka_bootstrap, topics.events, until=lambda records: any(
        isinstance(e, ev.MovedToSafetyNet) for e in records))
    received = next(e for e in events if isinstance(e, ev.MessageReceived))
    relay_header, trace = capture.contents[0].split(b"\r\n", 1)
    assert relay_header.startswith(b"X-Shadowtwin-Relay: ex01 ")
    head = (b"Received: from mx.fabrikam.example ([127.0.0.1])\r\n\tby ex01.contoso.com with ESMTPS id "
            + received.message.internal_id.encode() + b"\r\n\tfor <b@contoso.com>; ")
    assert trace.startswith(head), trace[:200]
    stamp, after = trace[len(head):].split(b"\r\n", 1)
    assert email.utils.parsedate_to_datetime(stamp.decode()).timestamp() == received.event_time_ms // 1000
    assert after == sent
    assert received.size_bytes == len(sent)


def test_a_message_without_message_id_gets_the_one_its_events_name_it_by(make_lab, kafka_bootstrap, topics,
                                                                        tmp_path):
    """A client that sends no Message-ID (a script's `Subject: ...` and a body): the node's events named
    the message <internal id@node>, but the message itself went on without one, so the mailbox's
    duplicate detection (Message-ID and submit time) never knew it, and postfix, as the next hop, gave
    it a Message-ID of its own (<...@its name>), not the one the twin tracks. Exchange adds one; now the
    node adds the one its events name the message by, at the end of the header section, on the
    shadow copy too."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"})
    capture = _Capture()
    with _next_hop(lab, capture):
        with smtplib.SMTP(lab.topology.host, lab.topology.node("ex01").port, timeout=20) as smtp:
            assert smtp.sendmail("a@fabrikam.example", ["b@contoso.com"],
                                 b"Subject: no message id\r\n\r\nhi\r\n.dot\r\n") == {}
        assert wait_until(lambda: capture.contents, 20)
    events = read_topic(kafka_bootstrap, topics.events, until=lambda records: any(
        isinstance(e, ev.MovedToSafetyNet) for e in records))
    received = next(e for e in events if isinstance(e, ev.MessageReceived))
    message_id = received.message.message_id
    assert message_id == f"<{received.message.internal_id}@ex01.contoso.com>"
    assert {e.message.message_id for e in events if e.message is not None} == {message_id}
    relayed = _NODE_LINES.sub(b"", capture.contents[0], count=1)
    assert relayed == b"Subject: no message id\r\nMessage-ID: " + message_id.encode() + b"\r\n\r\nhi\r\n.dot\r\n"
    mailbox = Mailbox(tmp_path / "mailbox.sqlite")
    assert [mailbox.record(capture.contents[0], ["b@contoso.com"]) for _ in range(2)] == [False, True]
    mailbox.close()
    assert [d.message_id for d in read_deliveries(mailbox.path)] == [message_id, message_id]


class _CaptureHello(_Capture):
    """Notes the name each client's EHLO gave."""

    def __init__(self):
        super().__init__()
        self.hellos: list[str] = []

    async def handle_DATA(self, server, session, envelope):
        self.hellos.append(session.host_name)
        return await super().handle_DATA(server, session, envelope)


def test_a_node_announces_its_fully_qualified_name_and_its_events_still_name_it_by_its_server_name(
        make_lab, kafka_bootstrap, topics):
    """RFC 5321 2.3.5: "Only resolvable, fully-qualified domain names (FQDNs) are permitted when domain names are
    used in SMTP"; 4.1.1.1: EHLO gives the client's FQDN. A node's reports named it ex01.contoso.com
    (`LabTopology.fqdn`), but its greeting, its answers to EHLO and HELO, its Received lines and the Message-IDs
    it made said `ex01`, the sink's greeting `mailbox01`, and it gave its next hop an address literal in EHLO.
    Now every name a node or the sink announces is the FQDN, and the nodes still find each other as peers by it
    (the shadow copy is made over the peer's authenticated session), while the events name the servers as
    before: ex01, ex02, mailbox01."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"})
    lab.up()
    with socket.create_connection((lab.topology.host, lab.topology.sink.port), timeout=10) as sock:
        assert sock.makefile("rb").readline().startswith(b"220 mailbox01.contoso.com ")
    lab.stop(SINK)
    next_hop = _CaptureHello()
    controller = Controller(next_hop, hostname=lab.topology.host, port=lab.topology.sink.port)
    controller.start()
    try:
        with socket.create_connection((lab.topology.host, lab.topology.node("ex01").port), timeout=10) as sock:
            replies = sock.makefile("rb")
            greeting = replies.readline()
            sock.sendall(b"EHLO client.example\r\nHELO client.example\r\nQUIT\r\n")
            answers = [replies.readline()]
            while answers[-1][3:4] == b"-":
                answers.append(replies.readline())
            helo = replies.readline()
        with smtplib.SMTP(lab.topology.host, lab.topology.node("ex01").port, timeout=20) as smtp:
            assert smtp.sendmail("a@fabrikam.example", ["b@contoso.com"], b"Subject: no message id\r\n\r\nhi\r\n") == {}
        assert wait_until(lambda: next_hop.contents, 20)
    finally:
        controller.stop()
    assert greeting == b"220 ex01.contoso.com ESMTP\r\n"
    assert answers[0] == b"250-ex01.contoso.com\r\n" and helo == b"250 ex01.contoso.com\r\n", (answers, helo)
    assert next_hop.hellos == ["ex01.contoso.com"]
    assert b"\r\n\tby ex01.contoso.com with ESMTP id " in next_hop.contents[0]

    events = read_topic(kafka_bootstrap, topics.events, until=lambda records: any(
        isinstance(e, ev.MovedToSafetyNet) for e in records))
    received = next(e for e in events if isinstance(e, ev.MessageReceived))
    assert received.message.message_id == f"<{received.message.internal_id}@ex01.contoso.com>"
    assert {e.node for e in events} == {"ex01", "ex02"}
    [copy] = [e for e in events if isinstance(e, ev.ShadowCopyAcknowledged)]
    [delivered] = [e for e in events if isinstance(e, ev.DeliveredToMailbox)]
    assert (copy.node, copy.shadow_server, delivered.mailbox_server) == ("ex01", "ex02", "mailbox01")
    result = settled(events, lab.topology.shadow_redundancy)
    assert result.alerts == [] and result.commands == []


class _SlowToAnswerData(_Capture):
    """Takes longer than the node's SMTP timeout to answer the end of DATA (postfix with a content
    filter, or `smtpd_end_of_data_restrictions = sleep 5`), then accepts."""

    async def handle_DATA(self, server, session, envelope):
        await asyncio.sleep(SLOW_S)
        return await super().handle_DATA(server, session, envelope)


def test_a_next_hop_slow_to_answer_data_gets_the_message_once(make_lab, kafka_bootstrap, topics):
    """With the node's 3-second SMTP timeout for every answer, postfix taking 5 s to answer the end of
    DATA got the message again at each retry (5 copies in 25 s), and the node never saw a 250."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"})
    assert lab.topology.smtp_timeout_seconds < SLOW_S
    slow = _SlowToAnswerData()
    with _next_hop(lab, slow):
        _send(lab, _message("<slow@x>", ["b@contoso.com"]))
        assert wait_until(lambda: lab.node_status("ex01").queued == 0, 30), f"{len(slow.contents)} copies so far"
    assert len(slow.contents) == 1
    events = read_topic(kafka_bootstrap, topics.events, until=lambda records: any(
        isinstance(e, ev.MovedToSafetyNet) for e in records))
    assert not any(isinstance(e, ev.DeliveryDeferred) for e in events)


def test_a_message_of_the_size_a_node_takes_is_taken_by_the_sink_with_the_node_s_header(make_lab):
    """The node and the sink both took up to aiosmtpd's 32 MiB: a message a few bytes under it was
    accepted by the node, and the line the node adds (X-Shadowtwin-Relay) took it over the sink's
    limit: '552 Error: Too much mail data' at every attempt, never delivered. Both now follow the
    Receive connector's MaxMessageSize (1 MiB here), the sink with room for the node's lines."""
    limit = 1024 * 1024
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"}, receive_connector={"max_message_size": limit})
    lab.up()
    head = b"Message-ID: <largest@x>\r\nSubject: as large as a node takes\r\n\r\n"
    line = b"x" * 98 + b"\r\n"
    body = line * ((limit - len(head)) // len(line))
    content = head + body + b"y" * (limit - len(head) - len(body) - 2) + b"\r\n"
    assert len(content) == limit
    with smtplib.SMTP(lab.topology.host, lab.topology.node("ex01").port, timeout=60) as smtp:
        assert smtp.sendmail("a@fabrikam.example", ["b@contoso.com"], content) == {}
    assert wait_until(lambda: [d.message_id for d in read_deliveries(lab.mailbox_path())] == ["<largest@x>"], 60)


class _OutOfStorage:
    """Answers every RCPT for contoso.com `452 4.3.1` (postfix with a full queue disk), noting when it was
    asked; it takes the report to the sender at fabrikam.example (another next hop in an organisation)."""

    def __init__(self):
        self.asked_at: list[float] = []

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if not address.endswith("@contoso.com"):
            envelope.rcpt_tos.append(address)
            return "250 2.1.5 Ok"
        self.asked_at.append(time.monotonic())
        return "452 4.3.1 Insufficient system storage"


def test_a_next_hop_that_keeps_deferring_is_tried_less_often_until_the_message_expires(make_lab, kafka_bootstrap,
                                                                                      topics):
    """A next hop answering 4xx for good and all was tried every second, a DeliveryDeferred each time,
    and the message never left the queue. Exchange tries again TransientFailureRetryCount times every
    TransientFailureRetryInterval, then every OutboundConnectionFailureRetryInterval, and expires the
    message after MessageExpirationTimeout (here 2 times 1 s, then 4 s, expiry after 10 s: attempts
    1, 2, 3 and 7 s after receipt)."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"}, {"message_expiration_timeout": "10s"},
                   transport_service={"transient_failure_retry_count": 2, "transient_failure_retry_interval": "1s",
                                      "outbound_connection_failure_retry_interval": "4s"})
    full = _OutOfStorage()
    with _next_hop(lab, full):
        _send(lab, _message("<later@x>", ["b@contoso.com"]))
        assert wait_until(lambda: lab.node_status("ex01").queued == 0, 20), f"{len(full.asked_at)} attempts so far"
    gaps = [b - a for a, b in zip(full.asked_at, full.asked_at[1:])]
    assert len(gaps) == 3 and all(0.9 < g < 2.5 for g in gaps[:2]) and 3.9 < gaps[2] < 5.5, gaps
    assert wait_until(lambda: lab.node_status("ex02").shadows == 0, 10), "the shadow copy was not released"

    events = read_topic(kafka_bootstrap, topics.events, until=lambda records: any(
        isinstance(e, ev.ShadowDiscarded) for e in records))
    later = [e for e in events if e.message is not None and e.message.message_id == "<later@x>"]
    assert sum(isinstance(e, ev.DeliveryDeferred) for e in later) == 4
    received = next(e for e in later if isinstance(e, ev.MessageReceived))
    expired = [e for e in later if isinstance(e, ev.MessageExpired)]
    assert [e.message.fork_id for e in expired] == [None]
    assert expired[0].event_time_ms - received.event_time_ms >= 10_000
    assert not any(isinstance(e, (ev.DeliveredToMailbox, ev.MovedToSafetyNet, ev.ShadowPromoted)) for e in later)
    result = settled(events, lab.topology.shadow_redundancy)
    assert [(a.type, [m.message.message_id for m in a.messages]) for a in result.alerts] == [
        (AlertType.MESSAGE_EXPIRED, ["<later@x>"])]
    assert result.commands == []


def test_a_message_partly_delivered_that_expires_is_in_safety_net(make_lab, kafka_bootstrap, topics):
    """Messages "delivered to a mailbox recipient by the Transport service on a Mailbox server are moved into
    Safety Net" (000, 003). A message whose next hop took one recipient and kept deferring the other expired
    after MessageExpirationTimeout, and the node put it in no Safety Net (as if nothing had been delivered),
    though a message refused for good for some recipients and taken for the others went there. It now goes there
    once expired, as the delivered part of it was delivered; one with no recipient delivered still does not. The
    twin's MESSAGE_EXPIRED names busy@ alone: the node's next attempts at busy@ do not take ok@'s delivery back."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"}, {"message_expiration_timeout": "6s"})
    mailboxes = _Mailboxes()
    mailboxes.busy_left = 1_000  # busy@ is deferred until the message expires
    with _next_hop(lab, mailboxes):
        _send(lab, _message("<half@x>", ["ok@contoso.com", "busy@contoso.com"]))
        assert wait_until(lambda: mailboxes.reports and lab.node_status("ex01").queued == 0, 30), mailboxes.received
    assert [rcpts for rcpts, _ in mailboxes.received] == [("ok@contoso.com",)]

    events = read_topic(kafka_bootstrap, topics.events, until=lambda records: any(
        isinstance(e, ev.MovedToSafetyNet) and e.message.message_id == "<half@x>" for e in records))
    half = [e for e in events if e.message is not None and e.message.message_id == "<half@x>" and e.node == "ex01"]
    kinds = [type(e).__name__ for e in half if isinstance(e, (ev.MessageExpired, ev.DiscardStatusSet,
                                                              ev.MovedToSafetyNet))]
    assert kinds == ["MessageExpired", "DiscardStatusSet", "MovedToSafetyNet"]
    result = settled(events, lab.topology.shadow_redundancy)
    assert [(a.type, [(m.message.message_id, m.recipients) for m in a.messages]) for a in result.alerts] == [
        (AlertType.MESSAGE_EXPIRED, [("<half@x>", ("busy@contoso.com",))])]
    assert result.commands == []


class _NeverAnswersStuck(_Capture):
    """Holds the end of DATA unanswered for a message to `stuck@` until `released` (a next hop hung
    on one message: a content filter that never returns), and answers the others at once."""

    def __init__(self):
        super().__init__()
        self.released = threading.Event()
        self.delivered_at: dict[str, float] = {}

    async def handle_DATA(self, server, session, envelope):
        if any(r.startswith("stuck@") for r in envelope.rcpt_tos):
            while not self.released.is_set():
                await asyncio.sleep(0.1)
        self.delivered_at[envelope.rcpt_tos[0]] = time.monotonic()
        return await super().handle_DATA(server, session, envelope)


def test_a_next_hop_that_never_answers_one_message_holds_back_no_other(make_lab):
    """One delivery at a time: a message whose end of DATA the next hop never answered held every
    later message of the node behind it for the 10 minutes the node waits for that answer."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"})
    hung = _NeverAnswersStuck()
    with _next_hop(lab, hung):
        _send(lab, _message("<stuck@x>", ["stuck@contoso.com"]))
        sent_at = time.monotonic()
        _send(lab, _message("<other@x>", ["other@contoso.com"]))
        assert wait_until(lambda: "other@contoso.com" in hung.delivered_at, 15), "held behind the hung session"
        assert hung.delivered_at["other@contoso.com"] - sent_at < 10
        hung.released.set()
        assert wait_until(lambda: lab.node_status("ex01").queued == 0, 15)
    assert sorted(hung.delivered_at) == ["other@contoso.com", "stuck@contoso.com"] and len(hung.contents) == 2


def test_a_promoted_copy_expires_message_expiration_timeout_after_its_promotion(make_lab, kafka_bootstrap, topics):
    """The shadow "promotes the shadow messages as primary messages" (003): a receipt of its own, which
    MessageExpirationTimeout ("how long a message can remain in a queue before it expires", 003) counts
    from, as the simulator has it. A message the primary took at t, promoted at t + 5 s, expired at
    t + the timeout (the primary's Received line); it now expires at t + 5 s + the timeout. The shadow logs that
    receipt (MessageReceived, from inside the boundary), as the simulator does, so that the model tracks the
    promoted message too and says when it expires: before, it saw none of ex02's events about it."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"},
                   {"message_expiration_timeout": "8s", "shadow_resubmit_time_span": "4s"})
    with _next_hop(lab, _OutOfStorage()):
        _send(lab, _message("<stranded@x>", ["b@contoso.com"]))
        lab.kill("ex01")
        assert wait_until(lambda: lab.node_status("ex02").shadows == 0 and lab.node_status("ex02").queued == 0, 25)
    events = read_topic(kafka_bootstrap, topics.events, until=lambda records: any(
        isinstance(e, ev.MessageExpired) for e in records))
    ours = [e for e in events if e.message is not None and e.message.message_id == "<stranded@x>"]
    received = next(e for e in ours if isinstance(e, ev.MessageReceived))
    promoted = next(e for e in ours if isinstance(e, ev.ShadowPromoted))
    expired = [e for e in ours if isinstance(e, ev.MessageExpired)]
    assert promoted.event_time_ms - received.event_time_ms >= 4_000
    assert [(e.node, e.message.fork_id) for e in expired] == [("ex02", None)]
    again = next(e for e in ours if isinstance(e, ev.MessageReceived) and e.node == "ex02")
    assert again.event_time_ms == promoted.event_time_ms and again.source is ev.MessageSource.INSIDE_BOUNDARY
    expires_ms = promoted.event_time_ms + 8_000
    assert expires_ms <= expired[0].event_time_ms < expires_ms + 1_500, \
        f"expired {expired[0].event_time_ms - received.event_time_ms} ms after its primary received it"
    result = settled(events, lab.topology.shadow_redundancy)
    ours_closed = [o for o in result.outcomes if o.ref.message_id == "<stranded@x>"]
    assert [(o.result, o.received_ms) for o in ours_closed] == [
        ("promoted", received.event_time_ms), ("expired", promoted.event_time_ms)]
    assert ours_closed[1].processed_ms == expires_ms, "the model expires ex02's copy at its promotion + the timeout"
    assert [(a.type, a.servers[0]) for a in result.alerts] == [
        (AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, "ex01"), (AlertType.MESSAGE_EXPIRED, "ex02")]


class _SizeLimited(_Capture):
    """A next hop that declares a fixed SIZE (postfix's message_size_limit), noting each MAIL's parameters."""

    def __init__(self):
        super().__init__()
        self.mail_options: list[list[str]] = []

    async def handle_MAIL(self, server, session, envelope, address, mail_options):
        self.mail_options.append(list(mail_options))
        envelope.mail_from = address
        return "250 2.1.0 Ok"


def test_a_node_declares_size_and_fails_for_good_what_exceeds_the_next_hop_s_limit_untried(make_lab, kafka_bootstrap,
                                                                                          topics):
    """A node offered aiosmtpd's 32 MiB as SIZE whatever it was configured with, gave its next hop no SIZE= at
    MAIL, and sent a message over the next hop's declared SIZE in full, to get 552 at the end of DATA. It now
    offers the Receive connector's MaxMessageSize (Exchange: 36 MB), declares SIZE=<octets> (RFC 1870), and
    fails a message over the next hop's limit for good (552 5.3.4) without MAIL."""
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"}, receive_connector={"max_message_size": 1024 * 1024})
    limited = _SizeLimited()
    lab.up()
    with smtplib.SMTP(lab.topology.host, lab.topology.node("ex01").port, timeout=10) as smtp:
        smtp.ehlo("client.example")
        assert smtp.esmtp_features.get("size") == str(1024 * 1024)
        assert smtp.mail("a@fabrikam.example", ["SIZE=2000000"])[0] == 552
    lab.stop(SINK)
    next_hop = Controller(limited, hostname=lab.topology.host, port=lab.topology.sink.port, data_size_limit=200_000)
    next_hop.start()
    try:
        big = _message("<big@x>", ["b@contoso.com"])
        big.set_content(("y" * 98 + "\n") * 3000)
        _send(lab, _message("<small@x>", ["b@contoso.com"]), big)
        assert wait_until(lambda: lab.node_status("ex01").queued == 0, 30)
    finally:
        next_hop.stop()
    small, report = limited.contents  # the sender is told of the big one
    assert b"<small@x>" in small and b"multipart/report" in report and b"<big@x>" in report
    assert limited.mail_options[0] == [f"SIZE={len(small)}"], "one MAIL for the small message, none for the big"

    events = read_topic(kafka_bootstrap, topics.events)
    ours = [e for e in events if e.message is not None and e.message.message_id == "<big@x>" and e.node == "ex01"]
    refused = [e for e in ours if isinstance(e, ev.DeliveryDeferred)]
    assert len(refused) == 1 and refused[0].message.fork_id is not None
    assert refused[0].smtp_response.startswith("552 5.3.4") and "200000" in refused[0].smtp_response
    assert [e.message.fork_id for e in ours if isinstance(e, ev.MessageExpired)] == [refused[0].message.fork_id]
    assert not any(isinstance(e, ev.DeliveredToMailbox) for e in ours)
    result = settled(events, lab.topology.shadow_redundancy)
    assert result.alerts == [] and result.commands == []
