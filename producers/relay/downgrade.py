"""An 8-bit message made 7-bit for a next hop that does not offer 8BITMIME, as RFC 6152 3 has a relay do.

RFC 6152 3: a client that has 8-bit data for a server that does not offer 8BITMIME must not send it
as it is; it either converts the message to 7-bit MIME (RFC 2045) or returns it to the sender as not
deliverable. As sendmail (EightBitMode=m) and Exchange do, the body is converted: each part with 8-bit
octets gets quoted-printable (text) or base64 (anything else); a body with no MIME header is text of an
unknown charset (RFC 1428: `text/plain; charset=unknown-8bit`). A header section with 8-bit octets
cannot be converted without guessing its charset: such a message is returned (`554 5.6.3`).
"""

from __future__ import annotations

import email.parser
import quopri
from email import encoders
from email.message import Message
from email.policy import compat32

# What the relay answers for the recipients of a message it cannot send 7-bit (RFC 3463 X.6.3).
NOT_CONVERTIBLE = "554 5.6.3 Conversion required but not supported: 8-bit header to a next hop without 8BITMIME"
_POLICY = compat32.clone(linesep="\r\n", max_line_length=0)  # lines end in CRLF; headers stay as they came


def seven_bit(content: bytes) -> bytes | None:
    """`content` with every 8-bit part re-encoded in 7 bits; None when its header section has 8-bit octets."""
    end = content.find(b"\r\n\r\n")
    if not content[:len(content) if end < 0 else end].isascii():
        return None
    message = email.parser.BytesParser(policy=_POLICY).parsebytes(content)
    if "MIME-Version" not in message:
        message["MIME-Version"] = "1.0"
        message["Content-Type"] = "text/plain; charset=unknown-8bit"
        del message["Content-Transfer-Encoding"]
    for part in message.walk():
        if not part.is_multipart() and _eight_bit(part):
            _encode(part)
    return message.as_bytes(policy=_POLICY)


def _eight_bit(part: Message) -> bool:
    """Whether a part's body has 8-bit octets as it stands (a base64 or quoted-printable one has none)."""
    encoded = str(part.get("Content-Transfer-Encoding", "")).strip().lower() in ("base64", "quoted-printable")
    return not encoded and not part.get_payload(decode=True).isascii()


def _encode(part: Message) -> None:
    octets = part.get_payload(decode=True)
    del part["Content-Transfer-Encoding"]
    if part.get_content_maintype() == "text":  # its line ends stay line ends, not =0D
        part.set_payload(quopri.encodestring(octets.replace(b"\r\n", b"\n")).decode("ascii"))
        part["Content-Transfer-Encoding"] = "quoted-printable"
    else:
        part.set_payload(octets)
        encoders.encode_base64(part)
