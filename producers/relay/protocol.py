"""The two shadow-redundancy SMTP verbs between nodes of one boundary: syntax and reply parsing.

Our own, documented syntax (Exchange's wire format is not public):

    XSHADOW PRIMARY=<primary> QDB=<primary's queue-db id> ID=<internal id>
        issued on an authenticated session before MAIL FROM; the transaction that follows
        (MAIL, RCPT, DATA) is the shadow copy, which the peer stores in its shadow queue for
        <primary> before it answers 250 to DATA.  Reply: 250 2.0.0 XSHADOW accepted.

    XQDISCARD SHADOW=<asking shadow> QDB=<shadow's own queue-db id>
        the discard query (heartbeat).  Reply, multi-line:
            250-QDB=<primary's current queue-db id>
            250-DISCARD <internal id>          (one line per discard notification for SHADOW)
            250 DISCARDS=<count>

Both are refused with 530 5.7.0 on a session that has not authenticated, and with 501 on
bad syntax. Values are single tokens: letters, digits and `._-@<>:+=` (no spaces).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

XSHADOW = "XSHADOW"
XQDISCARD = "XQDISCARD"
NOT_AUTHENTICATED = "530 5.7.0 Authentication required for {verb}"
ACCEPTED = "250 2.0.0 XSHADOW accepted"

_TOKEN = re.compile(r"^[A-Za-z0-9._\-@<>:+=]+$")


class ProtocolError(ValueError):
    """A verb's argument or a reply that does not follow the syntax above."""


@dataclass(frozen=True)
class ShadowRequest:
    primary: str
    primary_qdb: str
    internal_id: str

    def argument(self) -> str:
        return f"PRIMARY={self.primary} QDB={self.primary_qdb} ID={self.internal_id}"


@dataclass(frozen=True)
class DiscardQuery:
    shadow: str
    shadow_qdb: str

    def argument(self) -> str:
        return f"SHADOW={self.shadow} QDB={self.shadow_qdb}"


@dataclass(frozen=True)
class DiscardAnswer:
    primary_qdb: str
    discarded: tuple[str, ...]

    def reply_lines(self) -> list[str]:
        """The reply as complete SMTP lines (code and continuation mark included)."""
        lines = [f"250-QDB={self.primary_qdb}"]
        lines += [f"250-DISCARD {internal_id}" for internal_id in self.discarded]
        lines.append(f"250 DISCARDS={len(self.discarded)}")
        return lines


def _pairs(arg: str | None, keys: tuple[str, ...], verb: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for part in (arg or "").split():
        key, sep, value = part.partition("=")
        key = key.upper()
        if not sep or key not in keys:
            raise ProtocolError(f"{verb}: unexpected {part!r}; syntax: {verb} " + " ".join(f"{k}=<value>" for k in keys))
        if key in values:
            raise ProtocolError(f"{verb}: {key} given twice")
        if not _TOKEN.match(value):
            raise ProtocolError(f"{verb}: bad value for {key}")
        values[key] = value
    missing = [k for k in keys if k not in values]
    if missing:
        raise ProtocolError(f"{verb}: missing {', '.join(missing)}")
    return values


def parse_xshadow(arg: str | None) -> ShadowRequest:
    v = _pairs(arg, ("PRIMARY", "QDB", "ID"), XSHADOW)
    return ShadowRequest(v["PRIMARY"], v["QDB"], v["ID"])


def parse_xqdiscard(arg: str | None) -> DiscardQuery:
    v = _pairs(arg, ("SHADOW", "QDB"), XQDISCARD)
    return DiscardQuery(v["SHADOW"], v["QDB"])


def parse_discard_reply(code: int, text: str) -> DiscardAnswer:
    """The answer from smtplib's `docmd` (its text joins the reply's lines with newlines)."""
    if code != 250:
        raise ProtocolError(f"XQDISCARD refused: {code} {text}")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) < 2 or not lines[0].startswith("QDB=") or not lines[-1].startswith("DISCARDS="):
        raise ProtocolError(f"XQDISCARD: malformed reply {text!r}")
    qdb = lines[0][4:]
    discarded = []
    for line in lines[1:-1]:
        word, _, internal_id = line.partition(" ")
        if word != "DISCARD" or not _TOKEN.match(internal_id):
            raise ProtocolError(f"XQDISCARD: malformed line {line!r}")
        discarded.append(internal_id)
    try:
        count = int(lines[-1][len("DISCARDS="):])
    except ValueError:
        raise ProtocolError(f"XQDISCARD: malformed count {lines[-1]!r}") from None
    if count != len(discarded) or not _TOKEN.match(qdb):
        raise ProtocolError(f"XQDISCARD: reply announces {count} discards, carries {len(discarded)}")
    return DiscardAnswer(qdb, tuple(discarded))


def advertises(ehlo_text: str, verb: str) -> bool:
    """Whether an EHLO reply (smtplib's `ehlo_resp`, decoded) lists `verb`."""
    return any(line.strip().split(" ")[0].upper() == verb for line in ehlo_text.splitlines()[1:])
