"""The lab's mailbox sink over a real socket: what it counts as a duplicate, as a mailbox's duplicate
detection (Message-ID and client submit time, in each recipient's mailbox) does."""

from __future__ import annotations

import smtplib

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
