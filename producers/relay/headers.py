"""What a node writes into a message it receives from a client, as a mail server must and as Exchange does.

- Its trace line, at the top: RFC 5321 4.4, "When an SMTP server receives a message for delivery
  or further processing, it MUST insert trace ("time stamp" or "Received") information at the
  beginning of the message content". It names the client (its EHLO name and address), the node,
  the protocol (RFC 3848: ESMTP, ESMTPS over TLS, ESMTPSA over TLS and authenticated), the node's
  internal id and, for a single recipient, that recipient. A next hop counts these lines to find
  mail loops (postfix's hopcount_limit, RFC 5321 6.3).
- Wherever a node names itself (the line's `by`, a Message-ID it makes), it gives its fully qualified
  domain name (`LabTopology.fqdn`), as RFC 5321 2.3.5 permits only FQDNs for domain names in SMTP.
- A Message-ID at the end of the header section when the client sent none, as Exchange adds one
  (RFC 5321 6.4 lets the server a message is first posted to add it): the id the node's events
  name the message by, so that the shadow copy, the next hop and the mailbox's duplicate detection
  (Message-ID and submit time) see that id, not none, or one the next hop makes up.
"""

from __future__ import annotations

import datetime
import email.parser
import email.utils

# The nodes' own lines (the relay header, Received, Message-ID) make a message larger than its sender sent
# it: the room a peer (for a shadow copy) and the sink leave above the nodes' MaxMessageSize for them.
HEADER_ROOM = 64 * 1024


def address_literal(address: str) -> str:
    """An IP address as SMTP writes it (RFC 5321 4.1.3): [192.0.2.1], [IPv6:2001:db8::1]."""
    return f"[IPv6:{address}]" if ":" in address else f"[{address}]"


def received(helo: str, peer: str, node: str, via: str, internal_id: str, rcpts: tuple[str, ...],
             at_ms: int) -> bytes:
    """The node's Received: line (folded), for a client at `peer` ("address:port"); `node` is its FQDN."""
    literal = address_literal(peer.rpartition(":")[0] or peer)
    stamp = email.utils.format_datetime(datetime.datetime.fromtimestamp(at_ms / 1000, datetime.timezone.utc))
    recipient = f"\r\n\tfor <{rcpts[0]}>" if len(rcpts) == 1 else ""
    return (f"Received: from {helo or literal} ({literal})\r\n\tby {node} with {via} id {internal_id}"
            f"{recipient}; {stamp}\r\n").encode()


def hop_count(content: bytes) -> int:
    """How many Received lines the header section of `content` has (RFC 5321 6.3: a loop's measure)."""
    end = content.find(b"\r\n\r\n")
    section = content if end < 0 else content[:end + 2]
    return len(email.parser.BytesHeaderParser().parsebytes(section).get_all("Received") or ())


def message_id(internal_id: str, host: str) -> str:
    """The Message-ID a node gives a message of its own making, or one that came without (RFC 5322 3.6.4), on the
    node's FQDN `host`."""
    return f"<{internal_id}@{host}>"


def with_message_id(content: bytes, message_id: str) -> bytes:
    """`content` with a Message-ID line at the end of its header section."""
    if content.startswith(b"\r\n"):  # no header at all
        cut = 0
    else:
        end = content.find(b"\r\n\r\n")
        cut = len(content) if end < 0 else end + 2
    return content[:cut] + f"Message-ID: {message_id}\r\n".encode() + content[cut:]
