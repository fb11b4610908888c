"""The lab's mailbox sink over a real socket: what it counts as a duplicate, as a mailbox's duplicate
detection (Message-ID and client submit time, in each recipient's mailbox) does."""

from __future__ import annotations

import smtplib
import socket

from producers.relay.replies import RECIPIENT_OK, SENDER_OK, TOO_LARGE
from producers.relay.sink import MailboxSink, read_deliveries
from tests.conftest import free_port

_MESSAGE = (b"Message-ID: <split@fabrikam.example>\r\nDate: Sun, 29 Nov 2026 13:01:09 +0000\r\n"
            b"Subject: to many\r\n\r\nhello\r\n")


def test_a_message_split_into_transactions_for_other_recipients_is_no_duplicate(tmp_path):
    """postfix sends a message 50 recipients a transaction (smtp_destination_recipient_limit), and the rest
    after a server's `452 4.5.3 Too many recipients` in another: a postfix sending 250 recipients to a node
    (200 a transaction) reached the sink in two deliveries, and the second was answered
    `250 2.0.0 delivered (duplicate)`, flagged so in DeliveredToMailbox and counted by `lab status`, though no
    recipient had it twice. The mailbox's DeliveredTo table is checked per user: a duplicate is a delivery one
    of whose recipients already had the message."""
    port = free_port()
    sink = MailboxSink("mailbox01", "127.0.0.1", port, tmp_path / "mailbox.sqlite", 1024 * 1024)
    sink.start()
    try:
        replies = []
        for rcpts in (["a@contoso.com", "b@contoso.com"], ["c@contoso.com"], ["B@contoso.com", "d@contoso.com"]):
            with smtplib.SMTP("127.0.0.1", port, timeout=10) as smtp:
                smtp.ehlo("ex01.contoso.com")
                smtp.mail("s@fabrikam.example")
                for rcpt in rcpts:
                    smtp.rcpt(rcpt)
                replies.append(smtp.data(_MESSAGE)[1].decode())
    finally:
        sink.stop()
    assert replies == ["2.0.0 delivered", "2.0.0 delivered", "2.0.0 delivered (duplicate)"]
    assert [d.duplicate for d in read_deliveries(tmp_path / "mailbox.sqlite")] == [False, False, True]


def test_the_sink_advertises_enhancedstatuscodes_and_every_reply_after_ehlo_carries_one(tmp_path):
    """The nodes advertise ENHANCEDSTATUSCODES (RFC 2034) and answer with RFC 3463 codes; their next hop, the
    sink, advertised none and answered with aiosmtpd's plain replies (`250 OK` to MAIL and RCPT, `221 Bye`,
    `552 Error: message size exceeds ...`, no code), so that a node's DeliveryDeferred or NDR for a refusal
    of the sink's carried no status for the report's `Status:` field. It now answers as the nodes do."""
    port = free_port()
    sink = MailboxSink("mailbox01", "127.0.0.1", port, tmp_path / "mailbox.sqlite", 65536)
    sink.start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            replies = sock.makefile("rb")
            line = lambda: replies.readline().decode().strip()  # noqa: E731
            greeting = line()
            sock.sendall(b"EHLO ex01.contoso.com\r\n")
            ehlo = [line()]
            while ehlo[-1][3:4] == "-":
                ehlo.append(line())
            sock.sendall(b"MAIL FROM:<a@fabrikam.example>\r\nRCPT TO:<b@contoso.com>\r\nDATA\r\n" + _MESSAGE
                         + b".\r\nMAIL FROM:<a@fabrikam.example> SIZE=200000\r\nNOOP\r\nBOGUS\r\nQUIT\r\n")
            answers = [line() for _ in range(8)]
    finally:
        sink.stop()
    assert greeting.startswith("220 mailbox01 ") and "250-ENHANCEDSTATUSCODES" in ehlo, ehlo
    assert answers == [SENDER_OK, RECIPIENT_OK, "354 End data with <CR><LF>.<CR><LF>", "250 2.0.0 delivered",
                       TOO_LARGE, "250 2.0.0 OK", '500 5.5.2 Error: command "BOGUS" not recognized', "221 2.0.0 Bye"]
