"""A node's outgoing SMTP sessions (smtplib, blocking: the node runs them in worker threads).

- `send_shadow`: the simultaneous session to a peer that stores a shadow copy (STARTTLS, with
  the peer's certificate verified against the lab CA and required to name that peer, the
  node's own certificate presented; EHLO must advertise XSHADOW; AUTH with the node's own
  credentials; XSHADOW; MAIL, RCPT, DATA);
- `relay`: hands a message to the next hop, over STARTTLS when it offers it, and says, recipient by
  recipient, what became of it:
  accepted (250 to DATA), refused for now (4xx to RCPT) or for good (5xx to MAIL, RCPT or DATA),
  as a real relay must: one recipient the next hop does not know does not hold back the others;
  recipients over the next hop's limit for a transaction (452 4.5.3) go in another transaction at once;
  a session that breaks after MAIL (421, a hang-up) keeps the refusals for good it had, and defers the rest;
  a message larger than the SIZE the next hop declares fails for good without MAIL (RFC 1870);
  an 8-bit message goes with BODY=8BITMIME, or, to a next hop that does not offer 8BITMIME, converted to
  7-bit MIME (`downgrade`; one with an 8-bit header fails for good, `554 5.6.3`), never as it is (RFC 6152 3);
  the content goes in one `BDAT <octets> LAST` chunk to a next hop (or peer) that offers CHUNKING, as Exchange
  sends it between servers (RFC 3030), else with DATA; a next hop that refuses EHLO (an old one) gets HELO, and
  the message with none of the extensions (so 7-bit MIME);
  the next hop's greeting and answers are awaited as long as RFC 5321 has it (5 minutes, 10 for the end of
  the data; connecting takes the node's SMTP timeout);
- `query_discards`: the XQDISCARD heartbeat (over the same kind of session), returning the
  primary's queue-db id and the discard notifications for the asking shadow.

Failures of the whole session (no connection, a timeout, 4xx to MAIL or DATA) are raised as
`SessionFailed` with the contract's reason for the event to publish.
A peer that hangs up at QUIT, or never answers it, after its 250 to DATA or its discard
answer has done the work: the session counts as done (else the node would send it twice).
No credential is ever put into an exception's text or a log line.
"""

from __future__ import annotations

import re
import smtplib
import socket
import ssl
from dataclasses import dataclass, field

from producers.relay import downgrade, protocol
from producers.relay.headers import address_literal
from producers.relay.tls import certified_name
from schemas.events import QueryFailureReason, ShadowFailureReason


# How long the next hop may take to answer the end of DATA (RFC 5321 4.5.3.2.6: 10 minutes). Given up
# sooner, a message the next hop then accepts is sent again at the retry: a duplicate per attempt.
DATA_ANSWER_TIMEOUT_S = 600.0
# How long the next hop may take to greet and to answer a command (RFC 5321 4.5.3.2.1-3: 5 minutes for the
# greeting, MAIL and RCPT): postfix verifying a recipient (reject_unverified_recipient) or exim calling out
# takes seconds to answer RCPT, which a short wait turned into a failed session at every attempt.
ANSWER_TIMEOUT_S = 300.0
_LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclass(frozen=True)
class Credentials:
    login: str
    password: str
    tls: ssl.SSLContext | None = field(default=None, compare=False)  # presents the node's certificate

    def __repr__(self) -> str:  # never show the password, even in a traceback's locals
        return f"Credentials(login={self.login!r}, password=<hidden>)"


class SessionFailed(Exception):
    def __init__(self, shadow_reason: ShadowFailureReason, query_reason: QueryFailureReason, text: str):
        super().__init__(text)
        self.shadow_reason = shadow_reason
        self.query_reason = query_reason


def _failure(exc: BaseException) -> SessionFailed:
    if isinstance(exc, SessionFailed):
        return exc
    # smtplib says a peer that never answered "Connection unexpectedly closed: The read operation timed out"
    # (SMTPServerDisconnected, raised while handling the timeout): it timed out, it did not refuse.
    if any(isinstance(e, (socket.timeout, TimeoutError)) for e in (exc, exc.__context__)):
        return SessionFailed(ShadowFailureReason.TIMEOUT, QueryFailureReason.TIMEOUT, f"timed out: {exc}")
    if isinstance(exc, smtplib.SMTPResponseException):
        text = f"{exc.smtp_code} {exc.smtp_error.decode(errors='replace') if isinstance(exc.smtp_error, bytes) else exc.smtp_error}"
        return SessionFailed(ShadowFailureReason.REFUSED, QueryFailureReason.REFUSED, text)
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return SessionFailed(ShadowFailureReason.REFUSED, QueryFailureReason.REFUSED, "recipients refused")
    if isinstance(exc, (ConnectionError, OSError, smtplib.SMTPServerDisconnected)):
        return SessionFailed(ShadowFailureReason.REFUSED, QueryFailureReason.CONNECTION_FAILED,
                             f"connection failed: {type(exc).__name__}: {exc}")
    return SessionFailed(ShadowFailureReason.UNKNOWN, QueryFailureReason.UNKNOWN, f"{type(exc).__name__}: {exc}")


class _Session(smtplib.SMTP):
    """smtplib's session, connected within its `timeout`, then waiting `answer_timeout` for each answer."""

    answer_timeout: float | None = None

    def _get_socket(self, host, port, timeout):
        sock = super()._get_socket(host, port, timeout)
        sock.settimeout(max(timeout, self.answer_timeout or 0))
        return sock


def _open(host: str, port: int, me: str | None, timeout: float, answer_timeout: float | None = None) -> smtplib.SMTP:
    """A session after EHLO `me` (HELO to a server that refuses EHLO); None: the address this end of the connection
    has, as an address literal."""
    session = _Session(local_hostname=me or "localhost", timeout=timeout)
    session.answer_timeout = answer_timeout
    session._host = host  # what smtplib's constructor would note for STARTTLS (the TLS server name)
    code, text = session.connect(host, port)
    if code != 220:
        session.close()
        raise smtplib.SMTPConnectError(code, text)
    session.local_hostname = me or address_literal(session.sock.getsockname()[0])
    code, _ = session.ehlo()
    if 500 <= code < 600:  # no extensions here (RFC 5321 4.1.4): HELO, as postfix and smtplib.sendmail fall back to it
        code, _ = session.helo()
    if code != 250:
        session.close()
        raise SessionFailed(ShadowFailureReason.REFUSED, QueryFailureReason.REFUSED, f"EHLO refused: {code}")
    return session


def _authenticated(host: str, port: int, me: str, credentials: Credentials, timeout: float, verb: str,
                   peer: str) -> smtplib.SMTP:
    session = _open(host, port, me, timeout)
    try:
        session.starttls(context=credentials.tls)
        session.ehlo()
        if certified_name(session.sock.getpeercert()) != peer:
            raise SessionFailed(ShadowFailureReason.REFUSED, QueryFailureReason.REFUSED,
                                f"the certificate at {host}:{port} does not name {peer}")
        if not protocol.advertises(session.ehlo_resp.decode(errors="replace"), verb):
            raise SessionFailed(ShadowFailureReason.NOT_SUPPORTED, QueryFailureReason.REFUSED, f"{verb} not advertised")
        try:
            session.login(credentials.login, credentials.password)
        except smtplib.SMTPAuthenticationError as exc:
            raise SessionFailed(ShadowFailureReason.REFUSED, QueryFailureReason.REFUSED,
                                f"authentication refused ({exc.smtp_code})") from None
        return session
    except BaseException:
        session.close()
        raise


def _mail_options(session: smtplib.SMTP, content: bytes) -> list[str]:
    """BODY=8BITMIME for 8-bit content, as RFC 6152 has a relay pass it on (the node stores no MAIL
    parameter, the content says it), when the next hop takes 8BITMIME; SIZE=<octets> when it offers SIZE
    (RFC 1870 6)."""
    options = ["BODY=8BITMIME"] if not content.isascii() and session.has_extn("8bitmime") else []
    return options + ([f"SIZE={len(content)}"] if session.has_extn("size") else [])


def _too_large(session: smtplib.SMTP, content: bytes) -> str | None:
    """The answer for a message larger than the fixed limit the next hop declares (EHLO `SIZE <n>`, 0 or
    none: no limit): RFC 1870 6 has the client not send it, and as a permanent failure ("552 5.3.4")."""
    declared = (session.esmtp_features.get("size") or "").strip()
    limit = int(declared) if declared.isdigit() else 0
    if limit and len(content) > limit:
        return f"552 5.3.4 Message size ({len(content)} bytes) exceeds the next hop's fixed limit of {limit} bytes"
    return None


def _content(session: smtplib.SMTP, content: bytes) -> tuple[int, bytes]:
    """The message handed over, and the server's answer: one `BDAT <octets> LAST` chunk (RFC 3030) when it offers
    CHUNKING, as Exchange sends it (counted octets: no dot-stuffing, no end-of-data line), else DATA (smtplib raises
    SMTPDataError for no 354). Either way its lines end in CRLF, as smtplib's DATA makes them."""
    if not session.has_extn("chunking"):
        return session.data(content)
    content = _LINE_END.sub(b"\r\n", content)
    content += b"" if content.endswith(b"\r\n") else b"\r\n"
    session.send(b"BDAT %d LAST\r\n" % len(content) + content)
    return session.getreply()


def _data(session: smtplib.SMTP, mail_from: str, rcpts: tuple[str, ...], content: bytes) -> str:
    code, text = session.mail(mail_from, _mail_options(session, content))
    if code != 250:
        raise smtplib.SMTPSenderRefused(code, text, mail_from)
    for rcpt in rcpts:
        code, text = session.rcpt(rcpt)
        if code not in (250, 251):
            raise smtplib.SMTPRecipientsRefused({rcpt: (code, text)})
    code, text = _content(session, content)
    if code != 250:
        raise smtplib.SMTPDataError(code, text)
    return text.decode(errors="replace")


def quit_quietly(session: smtplib.SMTP) -> None:
    """QUIT after the work is done: a peer that hangs up or never answers it changes nothing, since
    its 250 to DATA (or its discard answer) was the hand-off; failing here would send it twice."""
    try:
        session.quit()
    except (OSError, smtplib.SMTPException):
        pass


def send_shadow(host: str, port: int, me: str, credentials: Credentials, request: protocol.ShadowRequest,
                mail_from: str, rcpts: tuple[str, ...], content: bytes, timeout: float, peer: str) -> None:
    try:
        session = _authenticated(host, port, me, credentials, timeout, protocol.XSHADOW, peer)
        try:
            code, text = session.docmd(protocol.XSHADOW, request.argument())
            if code != 250:
                raise SessionFailed(ShadowFailureReason.REFUSED, QueryFailureReason.REFUSED,
                                    f"XSHADOW refused: {code} {text.decode(errors='replace')}")
            _data(session, mail_from, rcpts, content)
            quit_quietly(session)
        finally:
            session.close()
    except Exception as exc:  # noqa: BLE001 - every failure becomes a reason
        raise _failure(exc) from None


@dataclass(frozen=True)
class RelayOutcome:
    """What the next hop did with a message: the recipients it accepted (with its answer to DATA),
    and those it refused, for now (4xx) or for good (5xx), each with its answer."""

    accepted: tuple[str, ...]
    reply: str = ""
    deferred: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


def _answer(code: int, text: bytes | str) -> str:
    return f"{code} {text.decode(errors='replace') if isinstance(text, bytes) else text}"


def _relay_transaction(session: smtplib.SMTP, mail_from: str, rcpts: tuple[str, ...], content: bytes) -> RelayOutcome:
    if not content.isascii() and not session.has_extn("8bitmime"):
        if (content := downgrade.seven_bit(content)) is None:
            return RelayOutcome((), failed={r: downgrade.NOT_CONVERTIBLE for r in rcpts})
    if (too_large := _too_large(session, content)) is not None:
        return RelayOutcome((), failed={r: too_large for r in rcpts})
    code, text = session.mail(mail_from, _mail_options(session, content))
    if code >= 500:
        return RelayOutcome((), failed={r: _answer(code, text) for r in rcpts})
    if code != 250:
        raise smtplib.SMTPSenderRefused(code, text, mail_from)
    failed: dict[str, str] = {}
    try:
        return _recipients_and_content(session, mail_from, rcpts, content, failed)
    except Exception as exc:  # noqa: BLE001 - the session broke: every reason defers
        why = str(_failure(exc))
        return RelayOutcome((), deferred={r: why for r in rcpts if r not in failed}, failed=failed)


def _recipients_and_content(session: smtplib.SMTP, mail_from: str, rcpts: tuple[str, ...], content: bytes,
                            failed: dict[str, str]) -> RelayOutcome:
    """RCPT for each recipient, then the content; `failed` notes each recipient refused for good as it is answered,
    so that a session that breaks later (postfix answers `421 4.7.0 Error: too many errors` once a client has had
    smtpd_hard_error_limit refusals, 20, and hangs up) keeps those answers, as postfix's own client keeps them: had
    every recipient been deferred, each attempt would have met the same refusals and the same 421, and the message
    reached no one until it expired."""
    accepted, deferred, left = [], {}, ()
    for i, rcpt in enumerate(rcpts):
        code, text = session.rcpt(rcpt)
        if code == 421:  # the next hop is closing the session (RFC 5321 3.8)
            raise smtplib.SMTPResponseException(code, text)
        if code in (250, 251):
            accepted.append(rcpt)
        elif _too_many(code, text) and accepted:
            left = rcpts[i:]
            break
        else:
            (failed if code >= 500 and not _too_many(code, text) else deferred)[rcpt] = _answer(code, text)
    if not accepted:
        try:
            session.rset()
        except (OSError, smtplib.SMTPException):
            pass
        return RelayOutcome((), deferred=deferred, failed=failed)
    session.sock.settimeout(max(session.timeout, DATA_ANSWER_TIMEOUT_S))
    try:
        code, text = _content(session, content)
    except smtplib.SMTPDataError as exc:  # the answer to DATA itself (354 expected)
        code, text = exc.smtp_code, exc.smtp_error
    if code >= 500:  # the content is refused: so it would be for the recipients left
        return RelayOutcome((), deferred=deferred,
                            failed={**failed, **{r: _answer(code, text) for r in accepted + list(left)}})
    if code != 250:
        raise smtplib.SMTPDataError(code, text)
    outcome = RelayOutcome(tuple(accepted), text.decode(errors="replace"), deferred, failed)
    return _with(outcome, _rest(session, mail_from, left, content)) if left else outcome


def _too_many(code: int, text: bytes) -> bool:
    """The next hop's limit of recipients in a transaction (Exchange's MaxRecipientsPerMessage, postfix's
    smtpd_recipient_limit): RFC 5321 4.5.3.1.10 has the server answer 452 (552 as RFC 821 had it, which the
    client SHOULD take as temporary), and the client send the recipients left in another transaction, as
    Exchange does at once; a recipient left for the next attempt would wait TransientFailureRetryInterval."""
    words = text.decode(errors="replace").lower()
    return code in (452, 552) and ("too many recipients" in words or words.startswith(("4.5.3", "5.5.3")))


def _rest(session: smtplib.SMTP, mail_from: str, left: tuple[str, ...], content: bytes) -> RelayOutcome:
    """The recipients left over, in another transaction of the same session: a failed session defers them
    only, since the next hop has the message for the others already."""
    try:
        return _relay_transaction(session, mail_from, left, content)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a reason
        return RelayOutcome((), deferred={r: str(_failure(exc)) for r in left})


def _with(first: RelayOutcome, rest: RelayOutcome) -> RelayOutcome:
    return RelayOutcome(first.accepted + rest.accepted, "; ".join(r for r in (first.reply, rest.reply) if r),
                        {**first.deferred, **rest.deferred}, {**first.failed, **rest.failed})


def _opportunistic_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


_OPPORTUNISTIC = _opportunistic_context()


def _opportunistic_tls(session: smtplib.SMTP) -> None:
    """STARTTLS when the next hop offers it, as Exchange's Send connectors and postfix
    (smtp_tls_security_level = may) do: a next hop that requires it (postfix's
    smtpd_tls_security_level = encrypt) answers MAIL in plaintext `530 5.7.0 Must issue a STARTTLS
    command first` (RFC 3207 4), which would fail the message for good. Its certificate is not
    checked; a next hop that answers STARTTLS with no 220 (`454 4.7.0 TLS not available`) gets
    the message in plaintext, a failed handshake fails the session (the message is tried again)."""
    if not session.has_extn("starttls"):
        return
    try:
        session.starttls(context=_OPPORTUNISTIC)
    except smtplib.SMTPResponseException:
        return
    session.ehlo()


def relay(host: str, port: int, me: str, mail_from: str, rcpts: tuple[str, ...], content: bytes,
          timeout: float) -> RelayOutcome:
    """Hand a message to the next hop; what it accepted and refused (a failed session raises)."""
    try:
        # RFC 5321 4.1.1.1: EHLO names the client's fully-qualified domain name, else its address as
        # a literal (a next hop such as postfix with reject_non_fqdn_helo_hostname refuses "ex01").
        session = _open(host, port, me if "." in me else None, timeout, ANSWER_TIMEOUT_S)
        try:
            _opportunistic_tls(session)
            outcome = _relay_transaction(session, mail_from, rcpts, content)
            quit_quietly(session)
            return outcome
        finally:
            session.close()
    except Exception as exc:  # noqa: BLE001
        raise _failure(exc) from None


def query_discards(host: str, port: int, me: str, credentials: Credentials, query: protocol.DiscardQuery,
                   timeout: float, peer: str) -> protocol.DiscardAnswer:
    try:
        session = _authenticated(host, port, me, credentials, timeout, protocol.XQDISCARD, peer)
        try:
            code, text = session.docmd(protocol.XQDISCARD, query.argument())
            answer = protocol.parse_discard_reply(code, text.decode(errors="replace"))
            quit_quietly(session)
            return answer
        finally:
            session.close()
    except protocol.ProtocolError as exc:
        raise SessionFailed(ShadowFailureReason.REFUSED, QueryFailureReason.REFUSED, str(exc)) from None
    except Exception as exc:  # noqa: BLE001
        raise _failure(exc) from None
