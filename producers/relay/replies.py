"""Replies with enhanced status codes (RFC 2034, RFC 3463), as every SMTP server of the lab answers: the nodes
and the mailbox sink.

`EnhancedStatusSMTP` is aiosmtpd's SMTP whose EHLO advertises ENHANCEDSTATUSCODES and whose every reply
carries a code, as Exchange and postfix answer: aiosmtpd's own replies, such as `250 OK` to NOOP, `221 Bye`,
`500 Error: bad syntax`, get RFC 3463's code for their reply code, and its refusals of a message too large or of
a line too long get Exchange's and postfix's (`552 5.3.4`, `500 5.5.2`: a sending postfix reports a 552
without a code as 5.0.0, saying nothing of the size). RFC 2034 3 excepts the greeting and the answers to EHLO and
HELO; an intermediate reply (`354`, AUTH's `334` challenges, whose text is base64) goes as Exchange and postfix
send it, without one.
"""

from __future__ import annotations

import contextlib
import re

from aiosmtpd.smtp import SMTP, syntax

ENHANCED_STATUS_CODES = "ENHANCEDSTATUSCODES"
SENDER_OK = "250 2.1.0 Sender OK"
RECIPIENT_OK = "250 2.1.5 Recipient OK"
TOO_LARGE = "552 5.3.4 Message size exceeds fixed maximum message size"
LINE_TOO_LONG = "500 5.5.2 Line too long (see RFC5321 4.5.3.1.6)"
SEND_HELLO_FIRST = "503 5.5.1 Error: send {verb} first"
# aiosmtpd's own answers, without enhanced status codes, as the servers answer the same conditions themselves
_LIBRARY_REPLIES = {
    "552 Error: message size exceeds fixed maximum message size": TOO_LARGE,
    "552 Error: Too much mail data": TOO_LARGE,
    "500 Line too long (see RFC5321 4.5.3.1.6)": LINE_TOO_LONG,
}
_STATUS_CODE = re.compile(r"^[245][0-9]{2}[ -][245]\.[0-9]{1,3}\.[0-9]{1,3}(?: |$)")
# RFC 3463's detail for aiosmtpd's replies that carry none, by reply code (else X.0.0, "other or undefined")
_DETAIL_BY_CODE = {"500": "5.5.2", "501": "5.5.4", "502": "5.5.1", "503": "5.5.1", "504": "5.5.4", "530": "5.7.0",
                   "555": "5.5.4", "454": "4.7.0"}


def with_status_code(status: str) -> str:
    """A final reply with an enhanced status code (RFC 2034 3, RFC 3463): as it was when it has one."""
    if _STATUS_CODE.match(status):
        return status
    code, mark, text = status[:3], status[3:4] or " ", status[4:]
    detail = _DETAIL_BY_CODE.get(code, f"{code[0]}.0.0")
    return f"{code}{mark}{detail} {text}".rstrip()


class EnhancedStatusSMTP(SMTP):
    """aiosmtpd's SMTP that advertises ENHANCEDSTATUSCODES and answers with them (see the module)."""

    def __init__(self, handler, **kwargs):
        super().__init__(handler, **kwargs)
        self._replies_as_they_are = False

    async def push(self, status: str | bytes) -> None:
        status = _LIBRARY_REPLIES.get(status, status)
        greeting = f"220 {self.hostname} {self.__ident__}"
        if isinstance(status, str) and status[:1] in "245" and status != greeting and not self._replies_as_they_are:
            status = with_status_code(status)
        await super().push(status)

    @contextlib.asynccontextmanager
    async def _as_they_are(self):
        """Replies pushed meanwhile go as written (a verb's own reply syntax, EHLO's and HELO's answers)."""
        self._replies_as_they_are = True
        try:
            yield
        finally:
            self._replies_as_they_are = False

    @syntax("EHLO hostname")
    async def smtp_EHLO(self, hostname: str) -> None:
        """aiosmtpd's EHLO (and the handler's), with ENHANCEDSTATUSCODES before its last line when it succeeds."""
        push, lines = self.push, []

        async def collect(status: str) -> None:
            lines.append(status)

        self.push = collect
        try:
            await super().smtp_EHLO(hostname)
        finally:
            del self.push
        if len(lines) > 1 and lines[-1].startswith("250 "):
            lines.insert(-1, f"250-{ENHANCED_STATUS_CODES}")
        async with self._as_they_are():
            for line in lines:
                await push(line)

    @syntax("HELO hostname")
    async def smtp_HELO(self, hostname: str) -> None:
        async with self._as_they_are():
            await super().smtp_HELO(hostname)

    async def check_helo_needed(self, helo: str = "HELO") -> bool:
        """aiosmtpd's check, answered with an enhanced status code (RFC 2034) as postfix answers it."""
        if self.session.host_name:
            return False
        await self.push(SEND_HELLO_FIRST.format(verb=helo))
        return True
