"""The relay's outgoing SMTP sessions (producers/relay/client.py) against real sockets: servers that do
what real ones do, and not what smtplib hopes."""

from __future__ import annotations

import asyncio
import email
import re
from datetime import timedelta

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP

from infra.settings import TopicSettings
from producers.relay import client, downgrade, protocol, tls
from producers.relay.lab import Lab
from producers.relay.server import RelayController
from producers.relay.topology import ReceiveConnector, load_topology
from schemas.events import QueryFailureReason, ShadowFailureReason
from tests.conftest import free_port
from tests.producers.relay.conftest import topology_text


class _HangsUpAtQuit(SMTP):
    """Answers DATA with 250, then hangs up at QUIT without a 221, as some servers do."""

    async def smtp_QUIT(self, arg: str) -> None:
        self.transport.close()


class _ClosingAtQuit(SMTP):
    """Answers DATA with 250, then QUIT with 421, as a server shutting down answers any command."""

    async def smtp_QUIT(self, arg: str) -> None:
        await self.push("421 4.3.2 Service shutting down")
        self.transport.close()


class _Recorder:
    def __init__(self):
        self.messages: list[bytes] = []
        self.mail_options: list[list[str]] = []

        self.encrypted: list[bool] = []

    async def handle_DATA(self, server, session, envelope) -> str:
        self.messages.append(envelope.original_content)
        self.mail_options.append(list(envelope.mail_options))
        self.encrypted.append(session.ssl is not None)
        return "250 2.0.0 queued as Q1"


def serving(session: type[SMTP], **smtp):
    class Server(Controller):
        def factory(self):
            return session(self.handler, **self.SMTP_kwargs)

    server = Server(_Recorder(), hostname="127.0.0.1", port=free_port(), **smtp)
    server.start()
    return server


@pytest.fixture
def hangs_up_at_quit():
    server = serving(_HangsUpAtQuit)
    yield server
    server.stop()


@pytest.fixture
def closing_at_quit():
    server = serving(_ClosingAtQuit)
    yield server
    server.stop()


def test_a_message_the_next_hop_accepted_is_relayed_even_if_it_hangs_up_at_quit(hangs_up_at_quit):
    """The 250 to DATA is the hand-off; a lost QUIT after it must not make the node send it again."""
    outcome = client.relay("127.0.0.1", hangs_up_at_quit.port, "ex01", "a@contoso.com", ("b@fabrikam.com",),
                           b"Subject: x\r\n\r\nhi\r\n", timeout=3)
    assert outcome == client.RelayOutcome(("b@fabrikam.com",), "2.0.0 queued as Q1")
    assert len(hangs_up_at_quit.handler.messages) == 1


def test_lab_send_counts_a_message_accepted_at_data_even_if_quit_is_answered_421(closing_at_quit, tmp_path):
    """`lab send`'s client: the 250 to DATA is the acceptance; a 421 to QUIT (smtplib raises it on leaving
    its `with`) must not turn it into a temporary failure the sender would send again."""
    text = topology_text(tmp_path / "lab", {"ex01": "dag1", "ex02": "dag1"})
    text = re.sub(r'(name = "ex01"\nport = )\d+', rf"\g<1>{closing_at_quit.port}", text)
    (tmp_path / "lab.toml").write_text(text)
    lab = Lab(load_topology(tmp_path / "lab.toml"), tmp_path / "lab.toml", "127.0.0.1:1", TopicSettings())
    result = lab.send(1, nodes=["ex01", "ex02"], timeout_s=1)
    assert [node for _, node in result.accepted] == ["ex01"]
    assert result.temporary == [] and result.unreached == {} and len(closing_at_quit.handler.messages) == 1


def test_8bit_content_is_relayed_with_body_8bitmime_and_7bit_without(hangs_up_at_quit):
    """RFC 6152: a relay passes BODY=8BITMIME on with an 8-bit body (postfix, receiving it undeclared,
    would not convert it for a next hop without 8BITMIME); before, the node never sent it."""
    eight = "Subject: x\r\n\r\nh\u00e9llo w\u00f6rld\r\n".encode()
    for content in (eight, b"Subject: x\r\n\r\nhello\r\n"):
        client.relay("127.0.0.1", hangs_up_at_quit.port, "ex01", "a@contoso.com", ("b@fabrikam.com",), content,
                     timeout=3)
    assert hangs_up_at_quit.handler.messages[0] == eight
    assert hangs_up_at_quit.handler.mail_options == [["BODY=8BITMIME", f"SIZE={len(eight)}"], ["SIZE=21"]]


@pytest.fixture
def seven_bit_hop():
    server = serving(SMTP, decode_data=True)  # no 8BITMIME in EHLO (it takes 8-bit data all the same, unsaid)
    yield server
    server.stop()


def test_8bit_content_reaches_a_next_hop_without_8bitmime_converted_to_7bit_mime(seven_bit_hop):
    """RFC 6152 3: 8-bit data is never sent to a server that does not offer 8BITMIME; the node sent it as it
    was, which such a hop refuses (or, worse, passes on with its eighth bits cut). Now the body is converted:
    quoted-printable for text (charset unknown-8bit when the message had no MIME header, RFC 1428), base64
    for anything else; a message whose header section is 8-bit fails for good, with the reason."""
    plain = "Subject: x\r\n\r\nh\u00e9llo w\u00f6rld\r\n".encode()
    mixed = ("Subject: y\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n"
             "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\nGr\u00fc\u00dfe\r\n"
             "--b\r\nContent-Type: application/octet-stream\r\n\r\n").encode() + bytes(range(128, 140)) + b"\r\n--b--\r\n"
    for content in (plain, mixed):
        outcome = client.relay("127.0.0.1", seven_bit_hop.port, "ex01", "a@contoso.com", ("b@fabrikam.com",), content,
                               timeout=3)
        assert outcome.accepted == ("b@fabrikam.com",), outcome
    first, second = (email.message_from_bytes(m) for m in seven_bit_hop.handler.messages)
    assert all(m.isascii() for m in seven_bit_hop.handler.messages)
    assert first["Content-Type"] == "text/plain; charset=unknown-8bit" and first["Subject"] == "x"
    assert first.get_payload(decode=True) == "h\u00e9llo w\u00f6rld\r\n".encode()
    parts = [p for p in second.walk() if not p.is_multipart()]
    assert [p["Content-Transfer-Encoding"] for p in parts] == ["quoted-printable", "base64"]
    assert [p.get_payload(decode=True) for p in parts] == ["Gr\u00fc\u00dfe".encode(), bytes(range(128, 140))]
    outcome = client.relay("127.0.0.1", seven_bit_hop.port, "ex01", "a@contoso.com", ("b@fabrikam.com",),
                           "Subject: caf\u00e9\r\n\r\nx\r\n".encode(), timeout=3)
    assert outcome.failed == {"b@fabrikam.com": downgrade.NOT_CONVERTIBLE} and not outcome.accepted
    assert len(seven_bit_hop.handler.messages) == 2


class _ChunksNoted:
    """A node's backend that notes each message, and whether it came in BDAT chunks (RFC 3030) or with DATA."""

    def __init__(self):
        self.messages: list[tuple[bytes, bool, list[str]]] = []

    def accept(self, peer, helo, envelope, via) -> str:
        self.messages.append((envelope.original_content, getattr(envelope, "chunks", None) is not None,
                              list(envelope.mail_options)))
        return "250 2.0.0 OK queued"


def test_the_content_goes_in_bdat_to_a_next_hop_offering_chunking_and_with_data_to_one_that_does_not(
        tmp_path, hangs_up_at_quit):
    """Exchange sends BDAT to a server that offers CHUNKING (RFC 3030), as a node now offers it; the node's client
    sent DATA always. To a node as next hop, the message now goes in one `BDAT <octets> LAST` chunk, 8-bit with
    BODY=8BITMIME, its lone-dot and dot-first lines as they are (no stuffing); to a next hop without CHUNKING
    it goes with DATA, the same octets arriving."""
    tls.ensure_certificates(tmp_path, {"mx": "mx.contoso.com"}, "127.0.0.1")
    backend = _ChunksNoted()
    node = RelayController(backend, "127.0.0.1", free_port(), "mx", {}, {}, tls.server_context(tmp_path, "mx"),
                           tls.sender_context(tmp_path, "mx"), ReceiveConnector(timedelta(seconds=5)))
    node.start()
    content = "Subject: x\r\n\r\n.\r\n..two\r\nh\u00e9llo\r\n".encode()
    try:
        for port in (node.port, hangs_up_at_quit.port):
            outcome = client.relay("127.0.0.1", port, "ex01", "a@contoso.com", ("b@fabrikam.com",), content,
                                   timeout=3)
            assert outcome.accepted == ("b@fabrikam.com",), outcome
    finally:
        node.stop()
    assert backend.messages == [(content, True, ["BODY=8BITMIME", f"SIZE={len(content)}"])]
    assert hangs_up_at_quit.handler.messages == [content]


class _NoEhlo(SMTP):
    """An old server with no service extensions: EHLO answered `502`, as RFC 5321 4.1.4 has such a server answer it."""

    async def smtp_EHLO(self, hostname: str) -> None:
        await self.push("502 5.5.1 Command not implemented")


def test_a_next_hop_that_refuses_ehlo_gets_helo_and_the_message_in_7_bits():
    """RFC 5321 4.1.4: a server without service extensions answers EHLO 500, 501, 502 or 550, and stays as it was;
    postfix (and smtplib.sendmail) then say HELO. The node gave the session up as failed, at every attempt, until the
    message expired. Now it says HELO and sends the message with no extension: 8-bit content converted to
    7-bit MIME (RFC 6152 3), with DATA."""
    server = serving(_NoEhlo, decode_data=True)
    content = "Subject: x\r\n\r\nh\u00e9llo\r\n".encode()
    try:
        outcome = client.relay("127.0.0.1", server.port, "ex01.contoso.com", "a@contoso.com", ("b@fabrikam.com",),
                               content, timeout=3)
    finally:
        server.stop()
    assert outcome == client.RelayOutcome(("b@fabrikam.com",), "2.0.0 queued as Q1")
    (received,) = server.handler.messages
    assert received.isascii()
    assert email.message_from_bytes(received).get_payload(decode=True) == "h\u00e9llo\r\n".encode()
    assert server.handler.mail_options == [[]]


class _TLSUnavailable(SMTP):
    """Offers STARTTLS but answers it 454, as postfix does when its certificate cannot be read."""

    async def smtp_STARTTLS(self, arg: str) -> None:
        await self.push("454 4.7.0 TLS not available due to local problem")


@pytest.fixture
def certificate(tmp_path):
    tls.ensure_certificates(tmp_path, {"mx": "mx.contoso.com"}, "127.0.0.1")
    return tls.sender_context(tmp_path, "mx")


def test_a_next_hop_that_requires_starttls_gets_the_message_encrypted(certificate):
    """postfix with smtpd_tls_security_level = encrypt (or a Receive connector requiring TLS) answers
    MAIL in plaintext `530 5.7.0 Must issue a STARTTLS command first` (RFC 3207 4): the node never
    used the STARTTLS the next hop offered, and the message failed for good. It now uses it, as
    Exchange's Send connectors and postfix's smtp_tls_security_level = may do."""
    server = serving(SMTP, tls_context=certificate, require_starttls=True)
    try:
        outcome = client.relay("127.0.0.1", server.port, "ex01", "a@contoso.com", ("b@fabrikam.com",),
                               b"Subject: x\r\n\r\nhi\r\n", timeout=3)
    finally:
        server.stop()
    assert outcome == client.RelayOutcome(("b@fabrikam.com",), "2.0.0 queued as Q1")
    assert server.handler.encrypted == [True]


def test_a_next_hop_that_offers_starttls_but_cannot_start_it_gets_the_message_in_plaintext(certificate):
    server = serving(_TLSUnavailable, tls_context=certificate)
    try:
        outcome = client.relay("127.0.0.1", server.port, "ex01", "a@contoso.com", ("b@fabrikam.com",),
                               b"Subject: x\r\n\r\nhi\r\n", timeout=3)
    finally:
        server.stop()
    assert outcome.accepted == ("b@fabrikam.com",) and server.handler.encrypted == [False]


class _RequiresFQDN(_Recorder):
    """A next hop with postfix's reject_non_fqdn_helo_hostname: an EHLO name that is neither a
    fully-qualified domain name nor an address literal is refused (at RCPT, as postfix delays it)."""

    def __init__(self):
        super().__init__()
        self.hello: list[str] = []

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options) -> str:
        self.hello.append(session.host_name)
        if "." not in session.host_name and not session.host_name.startswith("["):
            return f"504 5.5.2 <{session.host_name}>: Helo command rejected: need fully-qualified hostname"
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 Ok"


def test_a_node_without_a_domain_name_says_ehlo_with_its_address_to_the_next_hop():
    """RFC 5321 4.1.1.1: EHLO names the client's fully-qualified domain name or, without one, its address
    as a literal. A node said `EHLO ex01`, and a postfix next hop with reject_non_fqdn_helo_hostname
    answered `504 5.5.2` for every recipient: the message failed for good. A node whose name is a
    domain name still says it."""
    next_hop = Controller(_RequiresFQDN(), hostname="127.0.0.1", port=free_port())
    next_hop.start()
    try:
        outcomes = [client.relay("127.0.0.1", next_hop.port, me, "a@contoso.com", ("b@fabrikam.com",),
                                 b"Subject: x\r\n\r\nhi\r\n", timeout=3) for me in ("ex01", "ex01.contoso.com")]
    finally:
        next_hop.stop()
    assert [o.accepted for o in outcomes] == [("b@fabrikam.com",)] * 2, outcomes
    assert next_hop.handler.hello == ["[127.0.0.1]", "ex01.contoso.com"]


class _VerifiesRecipients(SMTP):
    """Greets and answers RCPT after 4 s each, as postfix does with postscreen's greet wait or with
    reject_unverified_recipient (address_verify_poll_count x address_verify_poll_delay: up to 6 s), or exim
    with a recipient callout."""

    async def _handle_client(self) -> None:
        await asyncio.sleep(4)
        await super()._handle_client()

    async def smtp_RCPT(self, arg: str) -> None:
        await asyncio.sleep(4)
        await super().smtp_RCPT(arg)


def test_a_next_hop_slow_to_greet_and_to_answer_rcpt_gets_the_message(request):
    """The node waited for every answer as long as it takes to connect (the lab's 3 s), where RFC 5321
    4.5.3.2 has a client wait 5 minutes for the greeting, MAIL and RCPT: a next hop verifying its
    recipients was given up at every attempt (deferred, tried again, the same) until the message expired."""
    verifies_recipients = serving(_VerifiesRecipients)
    request.addfinalizer(verifies_recipients.stop)
    outcome = client.relay("127.0.0.1", verifies_recipients.port, "ex01", "a@contoso.com", ("b@fabrikam.com",),
                           b"Subject: x\r\n\r\nhi\r\n", timeout=3)
    assert outcome.accepted == ("b@fabrikam.com",) and len(verifies_recipients.handler.messages) == 1
    with pytest.raises(client.SessionFailed, match="connection failed"):  # connecting still takes `timeout`
        client.relay("127.0.0.1", free_port(), "ex01", "a@contoso.com", ("b@fabrikam.com",), b"\r\nhi\r\n",
                     timeout=3)


class _SilentAfterGreeting(SMTP):
    """Greets, then never answers: a server hung, stopped or overloaded."""

    async def smtp_EHLO(self, arg: str) -> None:
        await asyncio.sleep(5)


def test_a_peer_that_never_answers_is_a_timeout_not_a_refusal(request):
    """smtplib turns a read that timed out into SMTPServerDisconnected, which the node took for a refused
    or failed connection: its ShadowCopyFailed and DiscardQueryFailed said REFUSED and CONNECTION_FAILED of a
    peer that had only stopped answering (as nodes busy waiting on each other did)."""
    silent = serving(_SilentAfterGreeting)
    request.addfinalizer(silent.stop)
    with pytest.raises(client.SessionFailed) as failed:
        client.query_discards("127.0.0.1", silent.port, "ex02", client.Credentials("ex02", "secret"),
                              protocol.DiscardQuery("ex02", "qdb"), timeout=1, peer="ex01")
    assert (failed.value.shadow_reason, failed.value.query_reason) == (ShadowFailureReason.TIMEOUT,
                                                                       QueryFailureReason.TIMEOUT)


class _HardErrorLimit(SMTP):
    """A next hop with postfix's smtpd_hard_error_limit (20 by default; 3 here) that knows no `gone*@`: each is
    refused `550 5.1.1`, and once the client has had the limit of refusals, its next command is answered
    `421 4.7.0 mx.fabrikam.com Error: too many errors` and the session closed, as postfix's smtpd does."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.errors = 0

    async def smtp_RCPT(self, arg: str) -> None:
        if self.errors >= 3:
            await self.push("421 4.7.0 mx.fabrikam.com Error: too many errors")
            self.transport.close()
        elif "<gone" in arg:
            self.errors += 1
            await self.push("550 5.1.1 <gone@fabrikam.com>: Recipient address rejected: User unknown")
        else:
            await super().smtp_RCPT(arg)


def test_recipients_refused_before_the_next_hop_hangs_up_stay_refused_and_the_rest_get_through_next_time(
        request):
    """A postfix next hop hangs up on a client that has had smtpd_hard_error_limit refusals (`too many errors
    after RCPT` in its log). The node deferred every recipient of a session that broke, those refused for good
    too, so each attempt met the same refusals and the same 421: the one known recipient never got the message
    and the sender heard of the unknown ones only when it expired. Now the refusals stand (the sender gets its
    report at once), the rest are deferred, and the next attempt, with those only, gets through."""
    next_hop = serving(_HardErrorLimit)
    request.addfinalizer(next_hop.stop)
    gone = tuple(f"gone{i}@fabrikam.com" for i in range(4))
    first = client.relay("127.0.0.1", next_hop.port, "ex01.contoso.com", "a@contoso.com",
                         gone + ("b@fabrikam.com",), b"Subject: x\r\n\r\nhi\r\n", timeout=3)
    assert sorted(first.failed) == list(gone[:3]) and all(v.startswith("550 5.1.1") for v in first.failed.values())
    assert list(first.deferred) == [gone[3], "b@fabrikam.com"] and first.accepted == ()
    assert first.deferred[gone[3]] == "421 4.7.0 mx.fabrikam.com Error: too many errors"
    second = client.relay("127.0.0.1", next_hop.port, "ex01.contoso.com", "a@contoso.com",
                          tuple(first.deferred), b"Subject: x\r\n\r\nhi\r\n", timeout=3)
    assert second.accepted == ("b@fabrikam.com",) and list(second.failed) == [gone[3]]
    assert len(next_hop.handler.messages) == 1
