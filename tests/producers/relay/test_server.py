"""A node's SMTP server (producers/relay/server.py) on a real socket, with a backend that accepts
every message: how it treats a client's timing."""

from __future__ import annotations

import base64
import contextlib
import logging
import re
import smtplib
import socket
import ssl
import time
from datetime import timedelta

import pytest

from producers.relay import tls
from producers.relay.server import RECIPIENT_OK, SENDER_OK, RelayController
from producers.relay.topology import ReceiveConnector
from tests.conftest import free_port

TIMEOUT_S = 1.0


class _Accepting:
    def __init__(self):
        self.contents: list[bytes] = []
        self.recipients: list[list[str]] = []

    def accept(self, peer, helo, envelope, via) -> str:
        self.contents.append(envelope.original_content)
        self.recipients.append(list(envelope.rcpt_tos))
        return "250 2.0.0 OK queued"


@pytest.fixture
def server(tmp_path):
    tls.ensure_certificates(tmp_path, {"ex01": "ex01.contoso.com"}, "127.0.0.1")
    backend = _Accepting()
    controller = RelayController(backend, "127.0.0.1", free_port(), "ex01", {}, {},
                                 tls.server_context(tmp_path, "ex01"), tls.sender_context(tmp_path, "ex01"),
                                 ReceiveConnector(timedelta(seconds=TIMEOUT_S), max_message_size=1024 * 1024))
    controller.start()
    yield controller, backend
    controller.stop()


def test_a_message_still_arriving_is_not_cut_off_by_the_inactivity_timeout(server):
    """aiosmtpd restarted its inactivity timer at each command only: a client on a slow link still
    sending a message of several MB when the timeout ran out (60 s on a node) lost the connection
    mid-DATA, though bytes had kept coming."""
    controller, backend = server
    with socket.create_connection(("127.0.0.1", controller.port), timeout=10) as sock:
        replies = sock.makefile("rb")

        def say(line: bytes) -> str:
            sock.sendall(line)
            while (answer := replies.readline().decode())[3:4] == "-":
                pass
            return answer

        replies.readline()
        assert say(b"EHLO slow.example\r\n").startswith("250 ")
        assert say(b"MAIL FROM:<a@fabrikam.example>\r\n").startswith("250")
        assert say(b"RCPT TO:<b@contoso.com>\r\n").startswith("250")
        assert say(b"DATA\r\n").startswith("354")
        sock.sendall(b"Message-ID: <slow-link@x>\r\n\r\n")
        started = time.monotonic()
        while time.monotonic() - started < 3 * TIMEOUT_S:
            sock.sendall(b"x" * 76 + b"\r\n")
            time.sleep(TIMEOUT_S / 10)
        assert say(b".\r\n").startswith("250 2.0.0")
    assert len(backend.contents) == 1


def test_help_is_answered_214_as_rfc_5321_has_it(server):
    """RFC 5321 4.3.2: HELP is answered 211 or 214 (502, 504 on error); aiosmtpd answered
    `250 Supported commands: ...`, a reply no client expects to HELP (Exchange answers 214)."""
    controller, _ = server
    with socket.create_connection(("127.0.0.1", controller.port), timeout=10) as sock:
        replies = sock.makefile("rb")
        replies.readline()
        sock.sendall(b"EHLO client.example\r\nHELP\r\nHELP MAIL\r\nHELP BOGUS\r\nNOOP\r\nQUIT\r\n")
        while replies.readline()[3:4] == b"-":
            pass
        answers = [replies.readline().decode().strip() for _ in range(5)]
    assert answers[0].startswith("214 ") and {"HELP", "MAIL", "STARTTLS"} <= set(answers[0].split()), answers
    assert answers[1].startswith("214 ") and "MAIL FROM" in answers[1], answers
    assert answers[2][:3] in ("501", "504"), answers
    assert answers[3:] == ["250 2.0.0 OK", "221 2.0.0 Bye"]


def test_a_recipient_over_max_recipients_per_message_is_answered_452_and_the_rest_are_taken(server):
    """Exchange's MaxRecipientsPerMessage (200): the 201st RCPT of a transaction gets `452 4.5.3 Too many
    recipients` (RFC 5321 4.5.3.1.10), which smtplib, postfix and Exchange send again in another transaction;
    the node took any number before, which RFC 5321 lets a server refuse and Exchange does."""
    controller, backend = server
    recipients = [f"user{i}@contoso.com" for i in range(201)]
    with smtplib.SMTP("127.0.0.1", controller.port, timeout=10) as smtp:
        refused = smtp.sendmail("a@fabrikam.example", recipients, b"Subject: many\r\n\r\nhello\r\n")
        assert refused == {recipients[200]: (452, b"4.5.3 Too many recipients")}
        assert smtp.sendmail("a@fabrikam.example", recipients[200:], b"Subject: many\r\n\r\nhello\r\n") == {}
    assert backend.recipients == [recipients[:200], recipients[200:]]


def test_a_non_ascii_path_is_refused_5_6_7_as_rfc_6531_has_it(server):
    """The node does not offer SMTPUTF8; aiosmtpd answered a path with non-ASCII characters `500 Error:
    strict ASCII mode`, a syntax error that tells a client nothing. RFC 6531 3.5: 553 at RCPT, 550 at MAIL,
    with 5.6.7, "Non-ASCII addresses not permitted for that sender/recipient"; the session goes on, and the
    message reaches the recipients the node took."""
    controller, backend = server
    with socket.create_connection(("127.0.0.1", controller.port), timeout=10) as sock:
        replies = sock.makefile("rb")
        replies.readline()
        sock.sendall("EHLO client.example\r\nMAIL FROM:<jöran@fabrikam.example>\r\n"
                     "MAIL FROM:<a@fabrikam.example> SMTPUTF8\r\nMAIL FROM:<a@fabrikam.example>\r\n"
                     "RCPT TO:<björn@contoso.com>\r\nRCPT TO:<b@contoso.com>\r\nDATA\r\n".encode())
        ehlo = [replies.readline().decode()]
        while ehlo[-1][3:4] == "-":
            ehlo.append(replies.readline().decode())
        answers = [replies.readline().decode().strip() for _ in range(6)]
        sock.sendall(b"Subject: s\r\n\r\nhello\r\n.\r\nQUIT\r\n")
        answers += [replies.readline().decode().strip() for _ in range(2)]
    assert not any("SMTPUTF8" in line for line in ehlo), ehlo
    assert answers[:2] == ["550 5.6.7 Non-ASCII addresses not permitted for that sender",
                           "555 5.5.4 SMTPUTF8 is not offered"]
    assert answers[2:5] == [SENDER_OK, "553 5.6.7 Non-ASCII addresses not permitted for that recipient", RECIPIENT_OK]
    assert answers[5].startswith("354") and answers[6].startswith("250 2.0.0") and answers[7].startswith("221")
    assert backend.recipients == [["b@contoso.com"]]


def _send_data(port: int, data: bytes) -> str:
    """One message over a raw socket (no client's line handling): the answer to the end of its data."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        replies = sock.makefile("rb")
        replies.readline()
        sock.sendall(b"EHLO client.example\r\nMAIL FROM:<a@fabrikam.example>\r\nRCPT TO:<b@contoso.com>\r\nDATA\r\n")
        while replies.readline()[3:4] == b"-":
            pass
        assert [replies.readline()[:3] for _ in range(3)] == [b"250", b"250", b"354"]
        sock.sendall(data + b"\r\n.\r\n")
        return replies.readline().decode().strip()


def test_a_line_longer_than_998_octets_is_refused_500_in_the_header_section_and_the_body(server):
    """RFC 5321 4.5.3.1.6: a text line is at most 1000 octets with its CRLF, the transparency dot not counted;
    aiosmtpd counted the dot always and took a line of 999 octets, which the node passed on to a next hop
    that may refuse it or cut it, and answered a line longer than 1001 octets (swaks --body of a long line)
    without the status code. A dot-stuffed line of 998 octets is taken."""
    controller, backend = server
    for data in (b"Subject: s\r\n\r\n" + b"a" * 999, b"X-Long: " + b"b" * 991 + b"\r\n\r\nhello",
                 b"Subject: s\r\n\r\n" + b"c" * 1200):
        assert _send_data(controller.port, data) == "500 5.5.2 Line too long (see RFC5321 4.5.3.1.6)"
    assert _send_data(controller.port, b"Subject: s\r\n\r\n" + b"a" * 998).startswith("250 ")
    assert _send_data(controller.port, b"Subject: s\r\n\r\n.." + b"a" * 997).startswith("250 ")
    assert backend.contents == [b"Subject: s\r\n\r\n" + b"a" * 998 + b"\r\n", b"Subject: s\r\n\r\n." + b"a" * 997 + b"\r\n"]


class _Session:
    """A raw SMTP session: commands and chunks go as written, pipelined; answers are read one by one."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.replies = self.sock.makefile("rb")
        self.replies.readline()
        self.sock.sendall(b"EHLO client.example\r\n")
        self.ehlo = [self.replies.readline().decode().strip()]
        while self.ehlo[-1][3:4] == "-":
            self.ehlo.append(self.replies.readline().decode().strip())

    def send(self, data: bytes, answers: int) -> list[str]:
        self.sock.sendall(data)
        return [self.replies.readline().decode().strip() for _ in range(answers)]

    def close(self) -> None:
        self.sock.close()


ENVELOPE = b"MAIL FROM:<a@fabrikam.example>\r\nRCPT TO:<b@contoso.com>\r\n"


def test_chunking_is_offered_and_a_message_in_bdat_chunks_is_taken_as_it_came(server):
    """Exchange offers CHUNKING (RFC 3030) and sends BDAT to a server that offers it; the node offered no
    CHUNKING, and aiosmtpd answered BDAT `500 Command not recognized`. A chunk is octets, not lines: a line
    with a lone dot in it is content, not the end of the message, and nothing is unstuffed."""
    controller, backend = server
    first, last = b"Subject: s\r\n\r\n.\r\n..two dots\r\n", b"line\nthree\r\n"
    session = _Session(controller.port)
    try:
        assert "250-CHUNKING" in session.ehlo
        answers = session.send(ENVELOPE + b"BDAT %d\r\n" % len(first) + first + b"BDAT %d LAST\r\n" % len(last) + last
                               + b"NOOP\r\n", 5)
    finally:
        session.close()
    assert answers[:3] == [SENDER_OK, RECIPIENT_OK, f"250 2.0.0 {len(first)} octets received"]
    assert answers[3].startswith("250 2.0.0 OK queued") and answers[4] == "250 2.0.0 OK", answers
    assert backend.contents == [first + b"line\r\nthree\r\n"]


def test_bdat_and_data_do_not_mix_and_a_refused_chunk_is_read_not_taken_for_commands(server):
    """RFC 3030 2: DATA in a transaction begun with BDAT gets 503; a BDAT with no transaction gets 503 once its
    octets are read (here octets that look like commands, which must not run); a message whose chunks pass
    the Receive connector's MaxMessageSize gets 552 5.3.4 and ends the transaction (the next chunk: 503)."""
    controller, backend = server
    session = _Session(controller.port)
    try:
        assert session.send(ENVELOPE + b"BDAT 12\r\nSubject: s\r\nDATA\r\n", 4) == [
            SENDER_OK, RECIPIENT_OK, "250 2.0.0 12 octets received", "503 5.5.1 DATA not allowed after BDAT in one transaction"]
        assert session.send(b"RSET\r\nBDAT 6\r\nQUIT\r\nNOOP\r\n", 3) == [
            "250 2.0.0 OK", "503 5.5.1 Error: need RCPT command", "250 2.0.0 OK"]
        big = 1024 * 1024 + 1
        answers = session.send(ENVELOPE + b"BDAT %d\r\n" % big + b"x" * big + b"BDAT 2 LAST\r\nx\n", 4)
        assert answers == [SENDER_OK, RECIPIENT_OK, "552 5.3.4 Message size exceeds fixed maximum message size",
                           "503 5.5.1 Error: need RCPT command"]
        assert session.send(ENVELOPE + b"DATA\r\nSubject: s\r\n\r\nhi\r\n.\r\n", 4)[2:3] == ["354 End data with <CR><LF>.<CR><LF>"]
    finally:
        session.close()
    assert backend.contents == [b"Subject: s\r\n\r\nhi\r\n"]


@pytest.mark.parametrize("bare", [b"\n", b"\r"], ids=["LF", "CR"])
def test_a_bare_lf_or_cr_in_data_is_refused_and_a_smuggled_transaction_is_content_not_commands(server, bare):
    """SMTP smuggling (CVE-2023-51764/5/6): a sender writes "<LF>.<LF>" (or "<CR>.<CR>") and a second transaction
    behind it, for a server that ends the data there to run. RFC 5321 4.1.1.4: a server MUST NOT take a bare LF
    as a line end, nor "<LF>.<LF>" as the end of the data; 2.3.8: no bare CR or LF at all. The node took such a
    message, its bare line ends made CRLF. Now the data still ends at CRLF.CRLF only, the whole is refused
    `550 5.6.11` (as postfix's smtpd_forbid_bare_newline and Exchange refuse it), the smuggled MAIL, RCPT and
    DATA are never answered, and the session goes on; the same in the header section."""
    controller, backend = server
    smuggled = b"MAIL FROM:<evil@fabrikam.example>\r\nRCPT TO:<b@contoso.com>\r\nDATA\r\nSubject: smuggled\r\n\r\nx"
    session = _Session(controller.port)
    try:
        answers = session.send(ENVELOPE + b"DATA\r\nSubject: s\r\n\r\nline1" + bare + b"." + bare + smuggled
                               + b"\r\n.\r\nNOOP\r\n", 5)
        header = session.send(ENVELOPE + b"DATA\r\nSubject: s" + bare + b"X-Other: y\r\n\r\nhi\r\n.\r\n", 4)
        assert session.send(ENVELOPE + b"DATA\r\nSubject: s\r\n\r\nfine\r\n.\r\n", 4)[3].startswith("250 2.0.0")
    finally:
        session.close()
    refused = "550 5.6.11 Bare CR or LF not allowed in DATA: lines end in CRLF (RFC 5321 2.3.8)"
    assert answers == [SENDER_OK, RECIPIENT_OK, "354 End data with <CR><LF>.<CR><LF>", refused, "250 2.0.0 OK"]
    assert header[3] == refused
    assert backend.contents == [b"Subject: s\r\n\r\nfine\r\n"]


@contextlib.contextmanager
def encrypted_session(port: int):
    """An SMTP client session after STARTTLS (the node's certificate not checked) and EHLO client.example."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with smtplib.SMTP("127.0.0.1", port, timeout=10) as smtp:
        smtp.starttls(context=context)
        smtp.ehlo("client.example")
        yield smtp


def test_starttls_on_an_encrypted_session_is_refused_and_the_session_goes_on(server):
    """RFC 3207 4.2: once TLS is on, STARTTLS is no longer offered; a client that sends it again is refused, as
    postfix answers it (`554 5.5.1 Error: TLS already active`). The node answered `220 Ready to start TLS` and
    began a second handshake inside the first: the client's next command, read as a TLS record, failed it, the
    session ended, and the node logged a traceback."""
    controller, backend = server
    with encrypted_session(controller.port) as smtp:
        assert not smtp.has_extn("starttls")
        assert smtp.docmd("STARTTLS") == (554, b"5.5.1 Error: TLS already active")
        assert smtp.sendmail("a@fabrikam.example", ["b@contoso.com"], b"Subject: s\r\n\r\nhi\r\n") == {}
    assert backend.contents == [b"Subject: s\r\n\r\nhi\r\n"]


def test_the_auth_parameter_of_mail_is_taken_where_auth_is_offered(server):
    """RFC 4954 5: a server that offers AUTH takes `MAIL FROM:<...> AUTH=<>` (or `AUTH=<mailbox>`, an MTA relaying an
    authenticated sender's mail), though it need not trust it. Once the session was encrypted the node offered AUTH,
    and answered such a MAIL `555 MAIL FROM parameters not recognized or not implemented`: every message of a
    sender that sends the parameter was refused (helper-119's walk with Postfix)."""
    controller, backend = server
    with encrypted_session(controller.port) as smtp:
        assert smtp.has_extn("auth")
        for value in ("<>", "alice+2Bsales@fabrikam.example"):
            assert smtp.mail("a@fabrikam.example", [f"AUTH={value}"])[0] == 250, value
            assert smtp.rcpt("b@contoso.com")[0] == 250
            assert smtp.data(b"Subject: s\r\n\r\nhi\r\n")[0] == 250
    assert backend.contents == [b"Subject: s\r\n\r\nhi\r\n"] * 2


def test_a_failed_tls_handshake_closes_the_session_with_one_warning_line_and_no_traceback(server, caplog):
    """A client that sends plain text after `220 Ready to start TLS` (or offers no protocol or cipher the node
    takes): the node logged aiosmtpd's 'SMTP session exception' at ERROR with a traceback of 20 lines, as for a
    bug. Now one warning names the client, its EHLO name and the TLS error, as postfix logs an SSL_accept error;
    the session is closed, and the node goes on taking mail."""
    controller, backend = server
    with caplog.at_level(logging.DEBUG), socket.create_connection(("127.0.0.1", controller.port), timeout=10) as sock:
        replies = sock.makefile("rb")
        replies.readline()
        sock.sendall(b"EHLO client.example\r\n")
        while replies.readline()[3:4] == b"-":
            pass
        sock.sendall(b"STARTTLS\r\n")
        assert replies.readline().startswith(b"220 ")
        sock.sendall(b"MAIL FROM:<a@fabrikam.example>\r\n")
        assert replies.read() == b"", "the session is closed"
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not any("TLS handshake" in r.getMessage() for r in caplog.records):
            time.sleep(0.05)
    failed = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.levelname for r in failed] == ["WARNING"] and failed[0].exc_info is None, \
        [(r.levelname, r.getMessage()) for r in failed]
    assert re.fullmatch(r"TLS handshake after STARTTLS failed with 127\.0\.0\.1:\d+ \(EHLO client\.example\): "
                        r"\[SSL: .+\] .+; session closed", failed[0].getMessage()), failed[0].getMessage()
    with smtplib.SMTP("127.0.0.1", controller.port, timeout=10) as smtp:
        assert smtp.sendmail("a@fabrikam.example", ["b@contoso.com"], b"Subject: s\r\n\r\nhi\r\n") == {}
    assert backend.contents == [b"Subject: s\r\n\r\nhi\r\n"]


def test_starttls_before_ehlo_is_refused_503_5_5_1_and_the_session_goes_on(server):
    """RFC 3207 offers STARTTLS in EHLO's answer, and the node asks a peer for its certificate by the name its EHLO
    gave: STARTTLS before EHLO is refused `503 5.5.1` as postfix refuses a command that needs EHLO first. The
    node answered `220 Ready to start TLS` and began a handshake with a client that had said nothing of itself."""
    controller, backend = server
    with socket.create_connection(("127.0.0.1", controller.port), timeout=10) as sock:
        replies = sock.makefile("rb")
        replies.readline()
        sock.sendall(b"STARTTLS\r\nMAIL FROM:<a@fabrikam.example>\r\nEHLO client.example\r\n")
        answers = [replies.readline().decode().strip() for _ in range(2)]
        while replies.readline()[3:4] == b"-":
            pass
        sock.sendall(b"STARTTLS\r\n")
        answers.append(replies.readline().decode().strip())
    assert answers == ["503 5.5.1 Error: send EHLO first", "503 5.5.1 Error: send HELO first",
                       "220 2.0.0 Ready to start TLS"]


def test_a_message_over_max_message_size_is_refused_552_5_3_4_at_mail_and_at_the_end_of_its_data(server):
    """RFC 1870: a SIZE= over the declared limit at MAIL, or more data than it, gets 552; Exchange answers
    `552 5.3.4 Message size exceeds fixed maximum message size` (RFC 3463 X.3.4, message too big), as the node
    answers BDAT. aiosmtpd answered `552 Error: ...` with no status code, which a sending postfix reports as
    5.0.0, saying nothing of the size. The session goes on."""
    controller, backend = server
    too_large = "552 5.3.4 Message size exceeds fixed maximum message size"
    big = 1024 * 1024 + 1
    session = _Session(controller.port)
    try:
        assert session.send(b"MAIL FROM:<a@fabrikam.example> SIZE=%d\r\n" % big, 1) == [too_large]
        data = (b"x" * 998 + b"\r\n") * (big // 1000 + 1)
        answers = session.send(ENVELOPE + b"DATA\r\n" + data + b".\r\nNOOP\r\n", 5)
    finally:
        session.close()
    assert answers == [SENDER_OK, RECIPIENT_OK, "354 End data with <CR><LF>.<CR><LF>", too_large, "250 2.0.0 OK"]
    assert backend.contents == []


def test_ehlo_advertises_enhancedstatuscodes_and_every_reply_after_it_carries_one(server):
    """RFC 2034: a server uses enhanced status codes (RFC 3463) once EHLO advertised ENHANCEDSTATUSCODES, and
    then on every reply but the greeting and EHLO's. The node answered `250 2.0.0` at the end of DATA yet did not
    advertise them, and aiosmtpd's own replies had none (`250 OK` to MAIL, RCPT, NOOP and RSET, `221 Bye`,
    `500 Error: bad syntax`). Exchange advertises them and answers `250 2.1.0 Sender OK`, `250 2.1.5 Recipient OK`."""
    controller, _ = server
    session = _Session(controller.port)
    try:
        answers = session.send(b"MAIL FROM:<a@fabrikam.example>\r\nRCPT TO:<b@contoso.com>\r\nNOOP\r\nRSET\r\n"
                               b"DATA\r\nMAIL\r\nBOGUS\r\nQUIT\r\n", 8)
    finally:
        session.close()
    assert "250-ENHANCEDSTATUSCODES" in session.ehlo and session.ehlo[0] == "250-ex01", session.ehlo
    assert answers == [SENDER_OK, RECIPIENT_OK, "250 2.0.0 OK", "250 2.0.0 OK", "503 5.5.1 Error: need RCPT command",
                       "501 5.5.4 Syntax: MAIL FROM: <address> [SP <mail-parameters>]",
                       '500 5.5.2 Error: command "BOGUS" not recognized',
                       "221 2.0.0 Bye"]


def test_auth_login_prompts_for_username_and_password_in_base64(server):
    """AUTH LOGIN's challenges are base64 "Username:" and "Password:" (`334 VXNlcm5hbWU6`, `334 UGFzc3dvcmQ6`),
    as Exchange and postfix send them; the node sent `334 VXNlciBOYW1lAA==`, "User Name" and a NUL."""
    controller, _ = server
    with encrypted_session(controller.port) as smtp:
        assert smtp.docmd("AUTH", "LOGIN") == (334, b"VXNlcm5hbWU6")
        assert smtp.docmd(base64.b64encode(b"ex02").decode()) == (334, b"UGFzc3dvcmQ6")
        assert smtp.docmd("*")[0] == 501


def test_a_recipient_given_twice_in_a_transaction_is_one_recipient(server):
    """The same RCPT twice (its domain in another case too) is answered 250 each time and is one recipient, as
    Exchange collapses duplicates: the node took it twice, delivered the message to it twice and counted each."""
    controller, backend = server
    with smtplib.SMTP("127.0.0.1", controller.port, timeout=10) as smtp:
        rcpts = ["b@contoso.com", "c@contoso.com", "b@contoso.com", "b@CONTOSO.COM"]
        assert smtp.sendmail("a@fabrikam.example", rcpts, b"Subject: s\r\n\r\nhi\r\n") == {}
    assert backend.recipients == [["b@contoso.com", "c@contoso.com"]]


def test_an_idle_session_is_told_421_4_4_2_before_it_is_closed(server):
    """At its ConnectionInactivityTimeout the node closed an idle session without a word; a server that closes
    the channel says 421 first (RFC 5321 3.8, 4.2.3), as postfix (`421 4.4.2 ... timeout exceeded`) does."""
    controller, _ = server
    session = _Session(controller.port)
    try:
        started = time.monotonic()
        assert session.replies.readline() == b"421 4.4.2 ex01 Connection timed out\r\n"
        assert session.replies.readline() == b"", "closed"
        assert time.monotonic() - started < 3 * TIMEOUT_S
    finally:
        session.close()
