"""The non-delivery report a node sends the sender of a message it could not deliver.

RFC 5321 6.1: a server that has accepted a message and then fails to deliver it "MUST formulate
and mail a notification message" to the reverse-path, unless that is null (a report is never
reported on: its own reverse-path is null). Exchange does so for recipients its next hop refuses
for good and for a message that expires (MessageExpirationTimeout, 4.4.7). The report is an
RFC 3464 `multipart/report`: a few lines for a person, the `message/delivery-status` part (one
block per failed recipient, with the next hop's answer), and the original's header section.
"""

from __future__ import annotations

import email.parser
import email.utils
from email.message import Message
from email.mime.base import MIMEBase
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from email.policy import SMTP


def report(node: str, message_id: str, sender: str, original: bytes, failed: dict[str, str], at_ms: int) -> bytes:
    """The report from `node` (its fully qualified domain name: RFC 3464 2.2.2) to `sender` on `original`:
    `failed` maps each recipient to the answer (or reason) that failed it; `message_id` is the report's own
    Message-ID."""
    end = original.find(b"\r\n\r\n")
    original_headers = original if end < 0 else original[:end + 2]
    human = "Delivery has failed to these recipients:\r\n\r\n" + "".join(
        f"{rcpt}\r\n    {answer}\r\n" for rcpt, answer in failed.items())
    status = MIMEBase("message", "delivery-status")
    status.attach(_fields(("Reporting-MTA", f"dns; {node}")))
    for rcpt, answer in failed.items():
        status.attach(_fields(("Final-Recipient", f"rfc822;{rcpt}"), ("Action", "failed"), ("Status", _status(answer)),
                              ("Diagnostic-Code", f"smtp;{answer}")))
    headers = MIMEText(original_headers.decode("ascii", errors="replace"), "rfc822-headers")
    ndr = MIMEMultipart("report", report_type="delivery-status")
    ndr["From"] = f"Microsoft Outlook <postmaster@{node}>"
    ndr["To"] = sender
    ndr["Subject"] = "Undeliverable: " + _subject(original_headers)
    ndr["Date"] = _date(at_ms)
    ndr["Message-ID"] = message_id
    ndr["Auto-Submitted"] = "auto-replied"
    for part in (MIMEText(human), status, headers):
        ndr.attach(part)
    return ndr.as_bytes(policy=SMTP)


def _fields(*fields: tuple[str, str]) -> Message:
    """One block of the delivery-status part (RFC 3464 2.1): header fields, no body."""
    block = Message()
    for name, value in fields:
        block[name] = value
    return block


def _date(at_ms: int) -> str:
    return email.utils.formatdate(at_ms / 1000, usegmt=True)


def _status(answer: str) -> str:
    """The enhanced status code of an answer ("550 5.1.1 ..." -> "5.1.1"), else 5.0.0."""
    words = answer.split()
    return words[1] if len(words) > 1 and words[1][:2] in ("5.", "4.") else "5.0.0"


def _subject(header_section: bytes) -> str:
    return str(email.parser.BytesHeaderParser().parsebytes(header_section).get("Subject") or "")
