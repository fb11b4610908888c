"""A node's SMTP server (aiosmtpd): ordinary mail, plus XSHADOW and XQDISCARD for authenticated peers.

- EHLO advertises SIZE with the Receive connector's MaxMessageSize (RFC 1870; a larger SIZE= at MAIL, or more
  data, gets `552 5.3.4 Message size exceeds fixed maximum message size` as Exchange answers it (aiosmtpd said
  `552 Error: ...`, no status code: a sending postfix reports that 5.0.0); a shadow copy, which carries the
  primary's own lines, may be `HEADER_ROOM` larger, as Exchange measures an internal hop by the size the
  message had when it entered the organisation), PIPELINING (RFC 2920; aiosmtpd answers a batch of
  commands in order, and Exchange advertises it, so postfix and swaks --pipeline batch MAIL, RCPT and DATA),
  CHUNKING (RFC 3030, as Exchange offers it and sends BDAT to a server that does: a chunk's octets are read
  whatever the answer, the chunks pass the same size limit as DATA (`552 5.3.4`), DATA in a transaction begun
  with BDAT gets 503; BINARYMIME is not offered, so the chunks hold a message of lines as DATA does), `XSHADOW`
  and `XQDISCARD`, STARTTLS with the node's lab certificate
  (`producers.relay.tls`; a client whose EHLO named a peer is asked for its certificate, anyone
  else is not; STARTTLS before EHLO gets `503 5.5.1`, on an encrypted session `554 5.5.1`; a handshake that fails
  closes the session with a warning line naming the client and why, no traceback), and AUTH LOGIN/PLAIN once the session
  is encrypted (before that, AUTH gets `538 5.7.11`; LOGIN prompts `334 VXNlcm5hbWU6`, "Username:"), and
  ENHANCEDSTATUSCODES (RFC 2034; `producers.relay.replies`, as the sink answers), as every reply but the greeting,
  EHLO's and HELO's, and 3xx carries one (`250 2.1.0 Sender OK`, `250 2.1.5 Recipient OK`, as Exchange answers),
  XQDISCARD's lines aside (its syntax, `protocol`, has none); the banner names the node, not the
  implementation; a session idle for ConnectionInactivityTimeout gets `421 4.4.2 <node> Connection timed out`
  and is closed;
- AUTH checks the login against the nodes' credentials and against the client certificate
  the TLS layer verified, which must name that node (`NodeAuthenticator`); a failed AUTH is
  logged with the peer's address (never a credential) and answered late: 0.5 s, doubling with
  each further failure from that address, at most 8 s;
- `XSHADOW`/`XQDISCARD` on a session that has not authenticated get
  `530 5.7.0 Authentication required for <verb>` and a warning in the log naming the peer's
  address and the verb, never a credential; a peer may only shadow as itself (PRIMARY=) and
  ask for its own discards (SHADOW=);
- a transaction takes at most the Receive connector's MaxRecipientsPerMessage recipients: each one more
  is answered `452 4.5.3 Too many recipients`, as Exchange answers it (RFC 5321 4.5.3.1.10: 452, and the
  client sends the rest in another transaction; 4.5.3.1.8: at least 100 must be taken); a recipient given again
  in the transaction is one recipient, its RCPT answered 250 as the first, as Exchange collapses duplicates;
- SMTPUTF8 (RFC 6531) is not offered (nor by the lab's sink, nor by many a next hop): a path
  with non-ASCII characters is refused as RFC 6531 3.5 says, `550 5.6.7` at MAIL and `553 5.6.7` at RCPT
  ("Non-ASCII addresses not permitted for that sender/recipient"), so that the client knows why (aiosmtpd
  said `500 Error: strict ASCII mode`); `SMTPUTF8` at MAIL gets `555`, a non-ASCII EHLO or HELO name `501`;
- a line of the data longer than 998 octets (and its CRLF; RFC 5321 4.5.3.1.6), in the header section or
  the body, gets `500 5.5.2 Line too long` at the end of the data, as a strict MTA answers it (aiosmtpd
  refuses lines longer than 1001 octets only, to allow a transparency dot, took a 999-octet line, and
  answered a longer one `500 Line too long`, without the status code);
- a bare CR or LF in DATA (in the header section or the body) gets `550 5.6.11` at the end of the data, as
  RFC 5321 2.3.8 and 4.1.1.4 have it (a server MUST NOT take a bare LF as a line end) and as postfix
  (smtpd_forbid_bare_newline) and Exchange refuse it since the SMTP smuggling advisories (CVE-2023-51764/5/6):
  the data ends at CRLF.CRLF only, so "<LF>.<LF>MAIL FROM:..." is content, refused with the rest, never a
  command. In BDAT chunks, counted octets with no end marker to smuggle, a bare CR or LF ends a line in
  CRLF (as postfix's `normalize`), so that what the node stores and sends on has CRLF line ends only;
- a message (not a shadow copy) that already has more Received lines than the Receive connector's
  MaxHopCount is refused at the end of DATA with `554 5.4.14 Hop count exceeded - possible mail loop`,
  as Exchange refuses it, before the node sees it;
- the work itself (accepting a message, storing a shadow copy, answering a discard query) is
  the node's (`RelayBackend`), run in worker threads so the event loop never blocks: a peer's work
  (its shadow copy, its discard query) in threads of its own, since accepting a message waits for a
  peer's worker to store its copy: with one pool, nodes that each had every worker accepting waited
  on each other until the shadow session timed out, and acknowledged the messages not redundant.

aiosmtpd logs every command line at INFO on `mail.log`, AUTH PLAIN's base64 credentials
included; `quiet_library_logs()` keeps that logger at WARNING, and nodes call it at start.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hmac
import logging
import re
import ssl
from typing import Protocol

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, Envelope, Session, TLSSetupException, syntax

from producers.relay import protocol
from producers.relay.headers import HEADER_ROOM, hop_count
from producers.relay.replies import LINE_TOO_LONG, RECIPIENT_OK, SENDER_OK, TOO_LARGE, EnhancedStatusSMTP
from producers.relay.tls import certified_name
from producers.relay.topology import ReceiveConnector

BANNER = "ESMTP"  # after the node's name: "220 ex01.contoso.com ESMTP"
LOOP_REPLY = "554 5.4.14 Hop count exceeded - possible mail loop"
TOO_MANY_RECIPIENTS = "452 4.5.3 Too many recipients"
NON_ASCII_SENDER = "550 5.6.7 Non-ASCII addresses not permitted for that sender"
NON_ASCII_RECIPIENT = "553 5.6.7 Non-ASCII addresses not permitted for that recipient"
NON_ASCII_NAME = "501 5.5.4 Invalid domain name"
BARE_LINE_END = "550 5.6.11 Bare CR or LF not allowed in DATA: lines end in CRLF (RFC 5321 2.3.8)"
MAX_LINE_OCTETS = 998  # a text line without its CRLF (RFC 5321 4.5.3.1.6), after the transparency dot is removed
FIRST_DELAY_S, MAX_DELAY_S = 0.5, 8.0
_BARE_LINE_END = re.compile(rb"\r(?!\n)|(?<!\r)\n")
_BDAT_ARGUMENT = re.compile(r"^(?P<size>[0-9]{1,18})(?: +(?P<last>LAST))? *$", re.IGNORECASE)
TLS_ALREADY_ACTIVE = "554 5.5.1 Error: TLS already active"
# RFC 4954 5: MAIL's AUTH=<mailbox> or AUTH=<>, an xtext without spaces
_AUTH_PARAMETER = re.compile(r"\s+AUTH=\S*", re.IGNORECASE)
DATA_AFTER_BDAT = "503 5.5.1 DATA not allowed after BDAT in one transaction"
LOCAL_ERROR = "451 4.3.0 Error: local error in processing"
TIMED_OUT = "421 4.4.2 {host} Connection timed out"

log = logging.getLogger("shadowtwin.relay.server")


class _NoDeprecationNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "deprecated" not in str(record.msg)


def quiet_library_logs() -> None:
    library = logging.getLogger("mail.log")
    library.setLevel(logging.WARNING)
    if not any(isinstance(f, _NoDeprecationNoise) for f in library.filters):
        library.addFilter(_NoDeprecationNoise())


class RelayBackend(Protocol):
    def accept(self, peer: str, helo: str, envelope: Envelope, via: str) -> str: ...
    def store_shadow(self, login: str, request: protocol.ShadowRequest, envelope: Envelope) -> str: ...
    def answer_discards(self, query: protocol.DiscardQuery) -> protocol.DiscardAnswer: ...


class NodeAuthenticator:
    """AUTH LOGIN/PLAIN against the nodes' passwords and certificates; the session's auth data is the
    node's name. Counts failures per address, for the delay of the next answer."""

    def __init__(self, passwords: dict[str, str], allowed: set[str]):
        self._passwords = {name: passwords[name].encode() for name in allowed if name in passwords}
        self.failures: dict[str, int] = {}

    def __call__(self, server, session: Session, envelope, mechanism: str, auth_data) -> AuthResult:
        login = bytes(getattr(auth_data, "login", b"") or b"").decode(errors="replace")
        password = bytes(getattr(auth_data, "password", b"") or b"")
        expected = self._passwords.get(login)
        certified = certified_name((session.ssl or {}).get("peercert"))
        address = _address(session)
        if expected is not None and hmac.compare_digest(expected, password) and certified == login:
            log.debug("AUTH %s: %s authenticated from %s", mechanism, login, _peer(session))
            self.failures.pop(address, None)
            return AuthResult(success=True, auth_data=login)
        who = login if login in self._passwords else "an unknown login"
        why = "" if expected is None or certified == login else \
            f" (its certificate names {certified})" if certified else " (no client certificate)"
        log.warning("AUTH %s refused for %s from %s%s", mechanism, who, _peer(session), why)
        self.failures[address] = self.failures.get(address, 0) + 1
        session.auth_failed = True
        return AuthResult(success=False, handled=False)

    def delay_s(self, session: Session) -> float:
        failures = self.failures.get(_address(session), 0)
        return min(FIRST_DELAY_S * 2 ** (failures - 1), MAX_DELAY_S) if failures else 0.0


def _address(session: Session) -> str:
    peer = session.peer
    return str(peer[0]) if isinstance(peer, tuple) and peer else str(peer)


def _peer(session: Session) -> str:
    peer = session.peer
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)


class RelaySMTP(EnhancedStatusSMTP):
    """aiosmtpd's SMTP with the two shadow-redundancy verbs (syntax: producers/relay/protocol.py)."""

    # AUTH LOGIN's prompts, base64 in the 334 challenges, as every server sends them and clients expect
    # (draft-murchison-sasl-login); aiosmtpd's "User Name\0" and "Password\0" carry a NUL
    AuthLoginUsernameChallenge = "Username:"
    AuthLoginPasswordChallenge = "Password:"

    def __init__(self, handler, *, peer_hosts: frozenset[str] = frozenset(),
                 sender_tls_context: ssl.SSLContext | None = None, **kwargs):
        super().__init__(handler, **kwargs)
        self._peer_hosts = peer_hosts
        self._peer_tls_context = self.tls_context
        self._sender_tls_context = sender_tls_context or self.tls_context

    @property
    def data_size_limit(self) -> int:
        """aiosmtpd's limit for SIZE= at MAIL and for the data: MaxMessageSize, with room for the primary's
        own lines in a shadow copy (after XSHADOW, until its DATA)."""
        shadow = getattr(self.session, "shadow_request", None) is not None
        return self._max_message_size + (HEADER_ROOM if shadow else 0)

    @data_size_limit.setter
    def data_size_limit(self, value: int) -> None:
        self._max_message_size = value

    def _set_post_data_state(self) -> None:
        """The end of a transaction (its DATA, RSET, EHLO or HELO: RFC 5321 4.1.1.5) ends its XSHADOW too."""
        super()._set_post_data_state()
        if getattr(self, "session", None) is not None:
            self.session.shadow_request = None

    def _timeout_cb(self) -> None:
        """A session idle for ConnectionInactivityTimeout (RFC 5321 4.5.3.2.7's server timeout) is told `421 4.4.2`
        before it is closed, 421 being the reply of a server that closes the channel (RFC 5321 3.8, 4.2.3);
        aiosmtpd closed it without a word, and a client took it for a broken connection."""
        if self.transport is not None and not self.transport.is_closing():
            self._writer.write(TIMED_OUT.format(host=self.hostname).encode() + b"\r\n")
        super()._timeout_cb()

    @syntax("MAIL FROM: <address>", extended=" [SP <mail-parameters>]")
    async def smtp_MAIL(self, arg: str | None) -> None:
        """aiosmtpd's MAIL, taking RFC 4954's AUTH= parameter where AUTH is offered (an encrypted session): an MTA
        relaying an authenticated sender's mail sends it. Its value is not trusted, nor passed on (RFC 4954 5
        lets a server do so); aiosmtpd answered it 555, refusing the message."""
        if arg and self._tls_protocol is not None:
            arg = _AUTH_PARAMETER.sub("", arg)
        await super().smtp_MAIL(arg)

    def data_received(self, data: bytes) -> None:
        """aiosmtpd restarts its inactivity timer at each command only: a message still arriving after
        `timeout` seconds of DATA was cut off. Any bytes from the client are activity."""
        if self.transport is not None:
            self._reset_timeout()
        super().data_received(data)

    @syntax("DATA")
    async def smtp_DATA(self, arg: str) -> None:
        if getattr(self.envelope, "chunks", None) is not None:
            await self.push(DATA_AFTER_BDAT)
            return
        await super().smtp_DATA(arg)

    @syntax("BDAT <size> [LAST]")
    async def smtp_BDAT(self, arg: str) -> None:
        """A chunk of the message (RFC 3030): its octets are read whatever the answer, so that they are never
        taken for commands; the chunk with LAST ends the message, which goes to the DATA hook as it came."""
        if await self.check_helo_needed("EHLO"):
            return
        match = _BDAT_ARGUMENT.match(arg or "")
        if match is None:
            await self.push("501 5.5.4 Syntax: BDAT <size> [LAST]")
            return
        size, last = int(match["size"]), match["last"] is not None
        envelope = self.envelope
        chunks = getattr(envelope, "chunks", None) or []
        fits = bool(envelope.rcpt_tos) and sum(map(len, chunks)) + size <= self.data_size_limit
        chunk = await self._read_octets(size, keep=fits)
        if chunk is None:
            return
        if not envelope.rcpt_tos:
            await self.push("503 5.5.1 Error: need RCPT command")
            return
        if not fits:
            self._set_post_data_state()  # the transaction is over: chunks after this one get 503
            await self.push(TOO_LARGE)
            return
        chunks.append(chunk)
        envelope.chunks = chunks
        if not last:
            await self.push(f"250 2.0.0 {size} octets received")
            return
        envelope.content = envelope.original_content = b"".join(chunks)
        status = await self._call_handler_hook("DATA")
        self._set_post_data_state()
        await self.push(status)

    async def _read_octets(self, size: int, keep: bool) -> bytes | None:
        """The next `size` octets from the client (b"" unless `keep`: never held in memory); None when it hung up."""
        pieces, left = [], size
        while left:
            piece = await self._reader.read(min(left, 64 * 1024))
            if not piece:
                self.transport.close()
                return None
            left -= len(piece)
            if keep:
                pieces.append(piece)
        return b"".join(pieces)

    @syntax("STARTTLS", when="tls_context")
    async def smtp_STARTTLS(self, arg: str) -> None:
        """A peer is asked for its lab certificate; a sender is not (its own would fail the lab CA's check). Once
        the session is encrypted, STARTTLS is refused as postfix refuses it (RFC 3207 4.2 offers it no more); before
        EHLO it is refused too: the extension is offered in EHLO's answer, and the certificate asked for depends on
        the name the client gave there."""
        if self._tls_protocol is not None:  # aiosmtpd began a second handshake inside the first, and failed it
            await self.push(TLS_ALREADY_ACTIVE)
            return
        if await self.check_helo_needed("EHLO"):
            return
        named = (self.session.host_name or "").lower() if self.session is not None else ""
        self.tls_context = self._peer_tls_context if named in self._peer_hosts else self._sender_tls_context
        await super().smtp_STARTTLS(arg)

    async def handle_exception(self, error: Exception) -> str:
        """A client whose TLS handshake fails after `220 Ready to start TLS` (no common protocol, an untrusted
        certificate, plain text where TLS was due) is one line in the log, as postfix logs an SSL_accept error;
        aiosmtpd then closes the session. aiosmtpd logged a traceback of 20 lines for it, as for a bug.
        Any other failure of the node's own is `451 4.3.0` (RFC 5321 4.2.3, local error in processing), for the
        client to try again, and ends the transaction; aiosmtpd answered `500 Error: (<exception>) <text>`, a
        syntax error for good in Python's words, so a client returned a message it could have sent later."""
        if isinstance(error, TLSSetupException):
            cause = error.__cause__ or error
            log.warning("TLS handshake after STARTTLS failed with %s (EHLO %s): %s; session closed",
                        _peer(self.session), self.session.host_name, str(cause) or type(cause).__name__)
            return "421 4.7.0 TLS handshake failed"
        log.error("%s failed the command of %s (EHLO %s); the transaction is aborted", type(error).__name__,
                  _peer(self.session), self.session.host_name, exc_info=error)
        self._set_post_data_state()
        return LOCAL_ERROR

    @syntax("HELP [command]")
    async def smtp_HELP(self, arg: str) -> None:
        """aiosmtpd's HELP, answered 214 as RFC 5321 4.3.2 has it (aiosmtpd says 250; an unknown verb stays 501)."""
        push = self.push

        async def as_help(status: str) -> None:
            await push("214" + status[3:] if status.startswith("250") else status)

        self.push = as_help
        try:
            await super().smtp_HELP(arg)
        finally:
            del self.push

    def _authenticated_as(self) -> str | None:
        return self.session.auth_data if self.session.authenticated and self._tls_protocol else None

    async def smtp_AUTH(self, arg: str) -> None:
        """aiosmtpd's AUTH, with a failure's answer held back (`NodeAuthenticator.delay_s`)."""
        self.session.auth_failed = False
        push = self.push

        async def slowed(status: str) -> None:
            if self.session.auth_failed and status.startswith("535"):
                await asyncio.sleep(self._authenticator.delay_s(self.session))
            await push(status)

        self.push = slowed
        try:
            await super().smtp_AUTH(arg)
        finally:
            del self.push

    async def _refuse_unauthenticated(self, verb: str) -> bool:
        if self._authenticated_as() is not None:
            return False
        log.warning("refused %s from %s: session not authenticated", verb, _peer(self.session))
        await self.push(protocol.NOT_AUTHENTICATED.format(verb=verb))
        return True

    @syntax("XSHADOW PRIMARY=<name> QDB=<queue-db id> ID=<internal id>")
    async def smtp_XSHADOW(self, arg: str | None) -> None:
        if await self.check_helo_needed("EHLO") or await self._refuse_unauthenticated(protocol.XSHADOW):
            return
        if self.envelope.mail_from is not None:
            await self.push("503 5.5.1 XSHADOW must come before MAIL FROM")
            return
        try:
            request = protocol.parse_xshadow(arg)
        except protocol.ProtocolError as exc:
            await self.push(f"501 5.5.4 {exc}")
            return
        if request.primary != self._authenticated_as():
            log.warning("refused XSHADOW from %s: authenticated as %s but claims PRIMARY=%s", _peer(self.session),
                        self._authenticated_as(), request.primary)
            await self.push("550 5.7.1 a peer may only shadow its own messages")
            return
        self.session.shadow_request = request
        await self.push(protocol.ACCEPTED)

    @syntax("XQDISCARD SHADOW=<name> QDB=<queue-db id>")
    async def smtp_XQDISCARD(self, arg: str | None) -> None:
        if await self.check_helo_needed("EHLO") or await self._refuse_unauthenticated(protocol.XQDISCARD):
            return
        try:
            query = protocol.parse_xqdiscard(arg)
        except protocol.ProtocolError as exc:
            await self.push(f"501 5.5.4 {exc}")
            return
        if query.shadow != self._authenticated_as():
            log.warning("refused XQDISCARD from %s: authenticated as %s but asks for SHADOW=%s", _peer(self.session),
                        self._authenticated_as(), query.shadow)
            await self.push("550 5.7.1 a peer may only ask for its own discard notifications")
            return
        handler = self.event_handler
        answer = await self.loop.run_in_executor(handler.peer_work, handler.backend.answer_discards, query)
        async with self._as_they_are():  # the discard answer's syntax (`protocol`) has no status codes
            for line in answer.reply_lines():
                await self.push(line)


def is_mailbox(address: str) -> bool:
    """RFC 5321's Mailbox (4.1.2): a local part, "@", and a domain or an address literal."""
    local, at, domain = address.rpartition("@")
    return bool(at and local and domain)


def same_recipient(address: str, recipients: list[str]) -> bool:
    """Whether `address` is among `recipients` already: its local part as written (RFC 5321 2.4: it may be case
    sensitive), its domain in any case."""
    return _recipient_key(address) in map(_recipient_key, recipients)


def _recipient_key(address: str) -> str:
    local, at, domain = address.rpartition("@")
    return local + at + domain.lower()


class RelayHandler:
    """aiosmtpd hooks: EHLO advertising, the envelope's addresses, and DATA for mail and for shadow copies.

    aiosmtpd takes any token as an address (`RCPT TO:bad`, `RCPT TO:<not an address>`); a path
    that is no Mailbox gets 501, as Exchange answers it (the null sender and `<Postmaster>` aside)."""

    def __init__(self, backend: RelayBackend, receive: ReceiveConnector, peer_work: concurrent.futures.Executor):
        self.backend = backend
        self.peer_work = peer_work
        self.max_hop_count = receive.max_hop_count
        self.max_recipients = receive.max_recipients_per_message

    async def handle_MAIL(self, server, session, envelope, address: str, mail_options: list[str]) -> str:
        if "SMTPUTF8" in mail_options:
            return "555 5.5.4 SMTPUTF8 is not offered"
        if not address.isascii():
            return NON_ASCII_SENDER
        if address != "<>" and not is_mailbox(address):
            return "501 5.1.7 Invalid address"
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return SENDER_OK

    async def handle_RCPT(self, server, session, envelope, address: str, rcpt_options: list[str]) -> str:
        if not address.isascii():
            return NON_ASCII_RECIPIENT
        if not is_mailbox(address) and address.lower() != "postmaster":
            return "501 5.1.3 Invalid address"
        if same_recipient(address, envelope.rcpt_tos):
            return RECIPIENT_OK
        if len(envelope.rcpt_tos) >= self.max_recipients:
            return TOO_MANY_RECIPIENTS
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(rcpt_options)
        return RECIPIENT_OK

    async def handle_HELO(self, server, session, envelope, hostname) -> str:
        if not hostname.isascii():
            return NON_ASCII_NAME
        session.host_name = hostname
        return f"250 {server.hostname}"

    async def handle_EHLO(self, server, session, envelope, hostname, responses):
        if not hostname.isascii():
            return [NON_ASCII_NAME]
        session.host_name = hostname
        extensions = ["250-PIPELINING", "250-CHUNKING", f"250-{protocol.XSHADOW}", f"250-{protocol.XQDISCARD}"]
        offered = [line for line in responses[:-1] if line != "250-SMTPUTF8"]
        return offered + extensions + responses[-1:]

    async def handle_DATA(self, server: RelaySMTP, session: Session, envelope: Envelope) -> str:
        if getattr(envelope, "chunks", None) is None and _BARE_LINE_END.search(envelope.original_content):
            log.warning("refused a message from %s with a bare CR or LF in its data", _peer(session))
            return BARE_LINE_END
        envelope.original_content = _BARE_LINE_END.sub(b"\r\n", envelope.original_content)  # BDAT's chunks
        if any(len(line) > MAX_LINE_OCTETS for line in envelope.original_content.split(b"\r\n")):
            return LINE_TOO_LONG
        request = getattr(session, "shadow_request", None)
        loop = asyncio.get_running_loop()
        if request is not None:
            return await loop.run_in_executor(self.peer_work, self.backend.store_shadow, session.auth_data, request,
                                              envelope)
        if (hops := hop_count(envelope.original_content)) > self.max_hop_count:
            log.warning("refused a message from %s with %d Received lines (MaxHopCount %d): a mail loop?",
                        _peer(session), hops, self.max_hop_count)
            return LOOP_REPLY
        return await loop.run_in_executor(None, self.backend.accept, _peer(session), session.host_name or "", envelope,
                                          _protocol(server, session))


def _protocol(server: RelaySMTP, session: Session) -> str:
    """The session's protocol as a Received line names it (RFC 3848)."""
    if not session.extended_smtp:
        return "SMTP"
    return "ESMTP" + ("S" if server._tls_protocol else "") + ("A" if session.authenticated else "")


class RelayController(Controller):
    """Runs a RelaySMTP on host:port in its own thread, with a worker pool for the node's work and one for its
    peers', as its Receive connector says (a session idle for its ConnectionInactivityTimeout is closed). `name`
    is the host name it announces (the node's FQDN); `peers` maps each peer's node name (its login, its
    certificate's name) to the host name its EHLO gives."""

    def __init__(self, backend: RelayBackend, host: str, port: int, name: str, passwords: dict[str, str],
                 peers: dict[str, str], tls_context: ssl.SSLContext, sender_tls_context: ssl.SSLContext,
                 receive: ReceiveConnector, workers: int = 16):
        loop = asyncio.new_event_loop()
        loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="smtp-work"))
        peer_work = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="peer-work")
        super().__init__(RelayHandler(backend, receive, peer_work), hostname=host, port=port, loop=loop,
                         server_hostname=name,
                         authenticator=NodeAuthenticator(passwords, set(peers)), auth_require_tls=True,
                         tls_context=tls_context, ident=BANNER,
                         # aiosmtpd reads a command's argument as UTF-8 only with SMTPUTF8 on (else it answers
                         # 500 before any hook): on, for the hooks to answer 5.6.7; EHLO does not offer it.
                         enable_SMTPUTF8=True,
                         timeout=receive.connection_inactivity_timeout.total_seconds(),
                         data_size_limit=receive.max_message_size)
        self._peer_hosts = frozenset(host.lower() for host in peers.values())
        self._sender_tls_context = sender_tls_context

    def factory(self):
        return RelaySMTP(self.handler, peer_hosts=self._peer_hosts, sender_tls_context=self._sender_tls_context,
                         **self.SMTP_kwargs)
