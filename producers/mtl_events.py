"""Exchange message-tracking records -> the contract's events (the mapping in EXCHANGE_LOGS.md).

    mapper = MtlMapper(internal_domains={"contoso.com"})
    result = mapper.map(row, line_id)    # a list of events, or a Skip; raises Unmappable

Which server logged a line, and which is the primary, is read from the host fields the way
Exchange fills them: on lines about something the local server received or did
(RECEIVE, HARECEIVE, DELIVER, TRANSFER, DSN, HADISCARD, RESUBMIT, LOAD) `server-hostname`
is the local server; on lines about something it sent (SEND) `client-hostname` is the local
server and `server-hostname` the other end. HAREDIRECT, HAREDIRECTFAIL, DEFER and FAIL name the
local server in `client-hostname` (the shadow, or the far end that refused, in `server-hostname`),
or in `server-hostname` when `client-hostname` is empty; HAREDIRECT written so names each shadow's
answer in `source-context` (`EX02=250 2.6.0 ...`). On the shadow's
lines (HARECEIVE, HADISCARD, RESUBMIT) and on DELIVER the primary is `client-hostname`.
Server names are compared by their first DNS label, lower-cased (`EX01.contoso.com` is `ex01`).

`internal_id` must be the primary's internal-message-id. A line logged by the primary gives
it; a line logged elsewhere (the shadow, the mailbox server) is joined through
`network-message-id` (else `message-id`) to an earlier line of the primary; failing that it
is named `nmid:<network-message-id>` (`msgid:<message-id>`) and counted in `unjoined`. The
mapper remembers what it has seen, so lines are best given to it in time order.

One message, one receipt: the Mailbox Transport Submission (MSGTRKMS) and moderation (MSGTRKMA)
logs make no event, the Mailbox Transport Delivery log (MSGTRKMD) only its DELIVER lines, and a
second RECEIVE of a message (same network-message-id) on the same server, from a file whose
service is unknown (Export-Csv), is skipped and its internal id taken as the first receipt's.
A FAIL concerns the recipients it lists: only a queue expiry (source QUEUE, `4.4.7`/`QUEUE.Expired`)
expires the message (or its fork); other failed recipients become a fork of their own that
failed for good (DeliveryDeferred then MessageExpired of that fork), so the message is processed
once its other recipients are. `recipient-status` is paired with `recipient-address` in order.

Servers' clocks differ, so a shadow's HARECEIVE (or a DELIVER) can come before, in the merged
time order, the primary's line that names the message. Such a line is held (`Held`) until a
line of the primary names the message, or until the lines read have gone `join_window_ms`
past it; it is then mapped (joined, or unjoined as above) and handed back by `released()`
with the token it was given. `flush()` maps every line still held. A shadow's HADISCARD logged after its
HARECEIVE of the copy but stamped before it (its clock set back in between) takes the HARECEIVE's time.
"""

from __future__ import annotations

import dataclasses
import re
from collections import deque
from dataclasses import dataclass
from typing import Any

from producers.mtl_log import Row, split_statuses
from schemas import events as ev
from schemas.events import MessageRef, Recipient
from schemas.validate import LONG_MAX

INTRA_ORG_CONNECTOR = "intra-organization"


@dataclass(frozen=True)
class Skip:
    """A readable line that makes no event, and why (counted, not a dead letter)."""

    reason: str


class Unmappable(ValueError):
    """A readable line that lacks what its event needs: a dead letter."""


@dataclass(frozen=True)
class Held:
    """The line names a message no line of its primary has named yet: mapped later (`released`)."""


class _Unjoined(Exception):
    def __init__(self, keys: list[tuple[str, str]]):
        super().__init__()
        self.keys = keys


@dataclass
class _Waiting:
    row: Row
    line_id: str
    token: Any
    done: bool = False


def server(name: str) -> str:
    """`EX01.contoso.com` -> `ex01`; an IP address stays as it is."""
    name = name.strip().lower()
    if not name or name.replace(".", "").isdigit() or ":" in name:
        return name
    return name.split(".", 1)[0]


class MtlMapper:
    def __init__(self, internal_domains: frozenset[str] | set[str] = frozenset(), join_window_ms: int = 300_000):
        self.internal_domains = {d.lower().lstrip("@") for d in internal_domains}
        self.join_window_ms = join_window_ms
        self._held: dict[tuple[str, str], list[_Waiting]] = {}  # (primary, n:/m: key) -> lines waiting for it
        self._held_order: deque[tuple[int, _Waiting]] = deque()  # (time of the line, it), in reading order
        self._joinable: list[tuple[str, str]] = []  # keys of held lines the primary has just named
        self._ready: list[tuple[Any, list[ev.Event] | Skip | Unmappable]] = []
        self._holding = True
        self._latest_ms = 0
        self.unjoined = 0  # lines whose primary internal id could not be learned
        self._ids: dict[tuple[str, str], str] = {}  # (primary, n:<nmid> | m:<message-id>) -> its internal id
        self._forks: dict[tuple[str, str], tuple[str, str]] = {}  # (primary, fork's own id) -> (parent id, fork id)
        self._primary_of: dict[tuple[str, str], str] = {}  # (shadow, n:/m: key) -> primary, from HARECEIVE
        self._discarded: set[tuple[str, str]] = set()  # (shadow, primary's internal id) its HADISCARD named
        self._stored_ms: dict[tuple[str, str], int] = {}  # (shadow, primary's internal id) -> its HARECEIVE's time
        self._attempts: dict[tuple[str, str], int] = {}  # (primary, internal id) -> shadow attempts so far
        self._aliases: dict[tuple[str, str], str] = {}  # (server, a second receipt's id) -> the first's
        self._line_id = ""  # the id of the line being mapped
        self._servers: set[str] = set()  # the servers that logged a line read so far
        self._handoffs: dict[str, int] = {}  # server -> the minute of its latest hand-off evidence
        self.mailbox_domains_outside: list[str] = []  # domains a DELIVER put in mailboxes, no internal domain

    def map(self, row: Row, line_id: str, token: Any = None) -> list[ev.Event] | Skip | Held:
        """The line's events, or why it makes none; `Held` when it waits for its primary's line
        (then `released()` hands it back with `token`)."""
        self._latest_ms = max(self._latest_ms, row.time_ms)
        try:
            result = self._map(row, line_id)
        except _Unjoined as unjoined:
            waiting = _Waiting(row, line_id, token)
            for key in unjoined.keys:
                self._held.setdefault(key, []).append(waiting)
            self._held_order.append((row.time_ms, waiting))
            result = Held()
        self._release()
        return result

    def released(self) -> list[tuple[Any, list[ev.Event] | Skip | Unmappable]]:
        """Held lines mapped since the last call: (token, events, or why none, or why it is a dead letter)."""
        ready, self._ready = self._ready, []
        return ready

    def flush(self) -> list[tuple[Any, list[ev.Event] | Skip | Unmappable]]:
        """Map every line still held (unjoined if it must be), and hand them back."""
        while self._held_order:
            self._map_held(self._held_order.popleft()[1])
        self._held.clear()
        return self.released()

    def _release(self) -> None:
        while self._joinable:
            for waiting in self._held.pop(self._joinable.pop(), ()):
                self._map_held(waiting)
        horizon = self._latest_ms - self.join_window_ms
        while self._held_order and (self._held_order[0][1].done or self._held_order[0][0] < horizon):
            self._map_held(self._held_order.popleft()[1])

    def _map_held(self, waiting: _Waiting) -> None:
        if waiting.done:
            return
        waiting.done = True
        self._holding = False
        try:
            self._ready.append((waiting.token, self._map(waiting.row, waiting.line_id)))
        except Unmappable as exc:
            self._ready.append((waiting.token, exc))
        finally:
            self._holding = True

    def _map(self, row: Row, line_id: str) -> list[ev.Event] | Skip:
        kind = row.get("event-id").upper()
        if row.service in SERVICE_SKIPS and kind not in SERVICE_SKIPS[row.service][0]:
            return Skip(f"{kind} in {row.service}: {SERVICE_SKIPS[row.service][1]}")
        if kind != "RECEIVE" and health_probe(row):
            return Skip(f"{kind} of a Managed Availability health probe: its RECEIVE is the server's sign of life,"
                        " the message is not tracked")
        if kind in IGNORED:
            return Skip(f"event-id {kind}: {IGNORED[kind]}")
        handler = getattr(self, f"_{kind.lower()}", None) if kind in HANDLED else None
        if handler is None:
            return Skip(f"event-id {kind or '(empty)'} is not one the twin uses")
        self._line_id = line_id
        self._servers.add(server(row.get("client-hostname") if kind in CLIENT_LOGGED
                                 else row.get("client-hostname") or row.get("server-hostname") if kind in SELF_NAMED
                                 else row.get("server-hostname")))
        result = handler(row)
        if isinstance(result, Skip):
            return result
        return [dataclasses.replace(e, event_id=f"{line_id}-{n}") for n, e in enumerate(result)]

    # ---- helpers ----------------------------------------------------------------------

    @staticmethod
    def _host(row: Row, field: str | tuple[str, str], what: str) -> str:
        """The server a field names; for LOCAL_FIELDS, client-hostname, or server-hostname when it is empty."""
        fields = field if isinstance(field, tuple) else (field,)
        name = next((server(row.get(f)) for f in fields if row.get(f)), "")
        if not name:
            raise Unmappable(f"{row.get('event-id')}: {' and '.join(fields)} {'are' if len(fields) > 1 else 'is'}"
                             f" empty, and {'they name' if len(fields) > 1 else 'it names'} the {what}")
        return name

    @staticmethod
    def _keys(row: Row) -> list[str]:
        return [key for key in (f"n:{row.get('network-message-id')}", f"m:{row.get('message-id')}") if key[2:]]

    def _ref(self, row: Row, primary: str, local: str, own_id: bool = True) -> MessageRef:
        """The message as the primary names it (see the module's docstring); `own_id=False`: the
        line's internal id is another service's, even when logged on the primary (DELIVER)."""
        message_id, own = row.get("message-id"), row.get("internal-message-id")
        own = self._aliases.get((primary, own), own)
        if local == primary and own and own_id:
            if (primary, own) in self._forks:
                parent, fork = self._forks[(primary, own)]
                return MessageRef(message_id, parent, fork)
            for key in self._keys(row):
                self._ids[(primary, key)] = own
                if (primary, key) in self._held:
                    self._joinable.append((primary, key))
            return MessageRef(message_id, own)
        for key in self._keys(row):
            if (primary, key) in self._ids:
                return MessageRef(message_id, self._ids[(primary, key)])
        keys = self._keys(row)
        if not keys:
            raise Unmappable(f"{row.get('event-id')}: no internal-message-id of the primary {primary},"
                             " and no network-message-id or message-id to join one")
        if self._holding:
            raise _Unjoined([(primary, key) for key in keys])
        self.unjoined += 1
        return MessageRef(message_id, ("nmid:" if keys[0].startswith("n:") else "msgid:") + keys[0][2:])

    def _header(self, row: Row, node: str, primary: str, ref: MessageRef | None) -> dict:
        return dict(event_id="", event_time_ms=row.time_ms, node=node, primary_server=primary, message=ref)

    def _on_primary(self, row: Row, field: str | tuple[str, str]) -> tuple[str, MessageRef, dict]:
        primary = self._host(row, field, "server that logged it")
        ref = self._ref(row, primary, primary)
        return primary, ref, self._header(row, primary, primary, ref)

    def _on_shadow(self, row: Row) -> tuple[str, str, MessageRef, dict]:
        shadow = self._host(row, "server-hostname", "shadow server that logged it")
        primary = server(row.get("client-hostname")) or next(
            (self._primary_of[(shadow, k)] for k in self._keys(row) if (shadow, k) in self._primary_of), "")
        if not primary:
            raise Unmappable(f"{row.get('event-id')}: client-hostname is empty and no HARECEIVE on {shadow}"
                             " named this message's primary")
        if row.get("event-id").upper() == "HARECEIVE":  # learned even while the line waits for its primary's
            for key in self._keys(row):
                self._primary_of[(shadow, key)] = primary
        ref = self._ref(row, primary, shadow)
        event_id = row.get("event-id").upper()
        header = self._header(row, shadow, primary, ref)
        if event_id == "HADISCARD":
            self._discarded.add((shadow, ref.internal_id))
            # Logged after the copy's HARECEIVE but stamped before it: the shadow's clock was set back in between.
            # The copy was discarded once stored, so no earlier than that stamp.
            header["event_time_ms"] = max(row.time_ms, self._stored_ms.pop((shadow, ref.internal_id), 0))
        elif event_id == "HARECEIVE":
            if (shadow, ref.internal_id) in self._discarded and self._holding:
                # The shadow discarded its copy of that one: this copy is of the message received on the primary
                # again (promoted back to it), whose RECEIVE a shadow's clock behind the primary's puts later
                raise _Unjoined([(primary, key) for key in self._keys(row)])
            self._stored_ms[(shadow, ref.internal_id)] = row.time_ms
        return shadow, primary, ref, header

    def _size(self, row: Row) -> int:
        text = row.get("total-bytes") or "0"
        # ASCII digits only (str.isdigit also takes '²', which int() refuses), and a size the
        # contract's long can carry (else the event could not be published, and the ingester stopped)
        if not (text.isascii() and text.isdigit()) or int(text) > LONG_MAX:
            raise Unmappable(f"total-bytes {text!r} is not a whole number from 0 to 2^63 - 1")
        return int(text)

    def _recipient(self, address: str) -> Recipient:
        return Recipient(address, address.rpartition("@")[2].lower() in self.internal_domains)

    # ---- one method per event-id ------------------------------------------------------

    def _receive(self, row: Row) -> list[ev.Event] | Skip:
        local, own = self._host(row, "server-hostname", "server that logged it"), row.get("internal-message-id")
        if health_probe(row):
            return [ev.ServerProbed(**self._header(row, local, local, None), server=local, answered=True,
                                    via="healthprobe", reply=f"{row.get('message-subject') or 'health probe'}"
                                                             f" from {row.get('sender-address')} received")]
        # Only a file that names no service (Export-Csv) merges the services' receipts; in MSGTRK a second
        # RECEIVE with another id is the message received again (a shadow's resubmission, a message back).
        first = None if row.service else next(
            (self._ids[(local, k)] for k in self._keys(row) if (local, k) in self._ids), None)
        if first is not None and own and own != first and (local, own) not in self._aliases:
            self._aliases[(local, own)] = first
            return Skip("a second RECEIVE of the message on the same server (another transport service's"
                        " log): one message, one receipt")
        _, _, header = self._on_primary(row, "server-hostname")
        direction, source = row.get("directionality").lower(), row.get("source").upper()
        origin = (ev.MessageSource.MAILBOX_SUBMISSION if source == "STOREDRIVER"
                  else ev.MessageSource.OUTSIDE_BOUNDARY if direction == "incoming"
                  else ev.MessageSource.INSIDE_BOUNDARY if direction == "originating"
                  else ev.MessageSource.UNKNOWN)
        return [ev.MessageReceived(
            **header, sender=row.get("client-hostname") or row.get("client-ip") or row.get("sender-address"),
            source=origin, recipients=tuple(map(self._recipient, row.values("recipient-address"))),
            size_bytes=self._size(row))]

    def _attempt(self, primary: str, ref: MessageRef) -> int:
        key = (primary, ref.internal_id)
        self._attempts[key] = self._attempts.get(key, 0) + 1
        return self._attempts[key]

    def _haredirect(self, row: Row) -> list[ev.Event]:
        primary, ref, header = self._on_primary(row, LOCAL_FIELDS)
        if row.get("client-hostname"):  # the primary in client-hostname, the shadow in server-hostname
            shadows = [self._host(row, "server-hostname", "shadow server")]
        else:  # as Exchange writes it: each shadow's answer in source-context
            shadows = [host for host, reply in _shadow_answers(row) if reply.startswith("2")]
            if not shadows:
                raise Unmappable("HAREDIRECT: client-hostname is empty and source-context names no shadow server"
                                 " that accepted the copy (<shadow>=250 ...)")
        return [event for shadow in shadows for event in (
            ev.ShadowCopyRequested(**header, candidate=shadow, locality=ev.SiteLocality.UNKNOWN,
                                   attempt=self._attempt(primary, ref)),
            ev.ShadowCopyAcknowledged(**header, shadow_server=shadow))]

    def _haredirectfail(self, row: Row) -> list[ev.Event]:
        primary, ref, header = self._on_primary(row, LOCAL_FIELDS)
        answers = _shadow_answers(row)
        candidate = (server(row.get("server-hostname")) if row.get("client-hostname")
                     else answers[0][0] if answers else "")
        status = (row.get("recipient-status") + " " + row.get("source-context")).lower()
        reason = (ev.ShadowFailureReason.NO_PEER if not candidate
                  else ev.ShadowFailureReason.TIMEOUT if "time" in status and "out" in status
                  else ev.ShadowFailureReason.UNKNOWN)
        return [ev.ShadowCopyFailed(**header, candidate=candidate, attempt=self._attempt(primary, ref),
                                    reason=reason)]

    def _hareceive(self, row: Row) -> list[ev.Event]:
        header = self._on_shadow(row)[3]
        # The logs carry no queue-database id: "" stands for "unknown" and never changes.
        return [ev.ShadowCopyStored(**header, primary_queue_db_id="")]

    def _hadiscard(self, row: Row) -> list[ev.Event]:
        shadow, primary, _, header = self._on_shadow(row)
        # the primary answered the shadow's discard query with this notification: its sign of life too
        return [ev.ShadowDiscarded(**header), *self._answered(row, shadow, primary, "discard query (HADISCARD)")]

    def _resubmit(self, row: Row) -> list[ev.Event] | Skip:
        if row.get("source").upper() != "REDUNDANCY":
            return Skip(f"RESUBMIT from {row.get('source') or 'an unnamed source'} (Safety Net): not a promotion")
        return [ev.ShadowPromoted(**self._on_shadow(row)[3],
                                  reason=row.get("source-context") or "RESUBMIT (REDUNDANCY) in message tracking")]

    def _send(self, row: Row) -> list[ev.Event]:
        _, _, header = self._on_primary(row, "client-hostname")
        next_hop = (row.get("server-hostname") or row.get("server-ip")).lower()
        if not next_hop:
            raise Unmappable("SEND: server-hostname and server-ip are empty, and they name the next hop")
        connector = row.get("connector-id").lower()
        return [ev.SentToNextHop(**header, next_hop=next_hop, recipients=row.values("recipient-address"),
                                 outside_boundary=bool(connector) and INTRA_ORG_CONNECTOR not in connector),
                ev.NextHopAcknowledged(**header, next_hop=next_hop),
                *self._answered(row, header["node"], server(next_hop), "SEND")]

    def _deliver(self, row: Row, duplicate: bool = False) -> list[ev.Event]:
        mailbox = self._host(row, "server-hostname", "mailbox server")
        primary = server(row.get("client-hostname")) or mailbox
        ref = self._ref(row, primary, mailbox, own_id=False)
        header = self._header(row, primary, primary, ref)
        pairs = self._recipient_statuses(row)
        failed = [(r, s) for r, s in pairs if _failure(s)]
        events: list[ev.Event] = []
        delivered = tuple(r for r, s in pairs if not _failure(s))
        for domain in {r.rpartition("@")[2].lower() for r in delivered} - self.internal_domains:
            if domain and domain not in self.mailbox_domains_outside:
                self.mailbox_domains_outside.append(domain)
        if delivered or not failed:
            events.append(ev.DeliveredToMailbox(**header, mailbox_server=mailbox, recipients=delivered,
                                                duplicate=duplicate))
        return [*events, *self._failed_fork(header, failed, f"{row.get('event-id')} to {mailbox}"),
                *self._answered(row, primary, mailbox, row.get("event-id").upper())]

    def _answered(self, row: Row, sender: str, peer: str, what: str) -> list[ev.Event]:
        """A peer's hand-off to a transport server, or its discard query, that the server answered over SMTP (its
        250 came before the line): that server's sign of life (`ServerProbed`, via handoff), at most one per
        server and minute."""
        if peer == sender or peer not in self._servers:
            return []
        minute = row.time_ms // HANDOFF_GRAIN_MS
        if self._handoffs.get(peer) == minute:
            return []
        self._handoffs[peer] = minute
        return [ev.ServerProbed(event_id="", event_time_ms=row.time_ms, node=peer, primary_server=peer, message=None,
                                server=peer, answered=True, via="handoff",
                                reply=f"250 to {sender}'s {what} of {row.get('message-id')} (message tracking)")]

    def _duplicatedeliver(self, row: Row) -> list[ev.Event]:
        return self._deliver(row, duplicate=True)

    def _transfer(self, row: Row) -> list[ev.Event]:
        primary, parent, header = self._on_primary(row, "server-hostname")
        child = row.values("reference")[0] if row.values("reference") else ""
        fork = f"fork-{child}" if child else f"fork-{self._line_id}"
        if child:
            self._forks[(primary, child)] = (parent.internal_id, fork)
        header["message"] = dataclasses.replace(parent, fork_id=fork)
        return [ev.SentToNextHop(**header, next_hop=primary,
                                 recipients=row.values("related-recipient-address") or row.values("recipient-address"))]

    def _dsn(self, row: Row) -> list[ev.Event]:
        primary, report, header = self._on_primary(row, "server-hostname")
        original = row.values("reference")[0] if row.values("reference") else ""
        if not original:
            raise Unmappable("DSN: reference is empty, and it names the message the notification is about")
        parent_id = self._ids.get((primary, f"m:{original}"))
        if parent_id is None:
            self.unjoined += 1
            parent_id = f"msgid:{original}"
        ndr = any(status.startswith("5") for status in row.statuses())
        return [ev.SideEffectGenerated(**header, side_effect=ev.SideEffectKind.NDR if ndr else ev.SideEffectKind.DSN,
                                       parent=MessageRef(original, parent_id))]

    def _fail(self, row: Row) -> list[ev.Event]:
        _, ref, header = self._on_primary(row, LOCAL_FIELDS)
        status = row.get("recipient-status")
        if row.get("source").upper() == "QUEUE" or "4.4.7" in status or "queue.expired" in status.lower():
            return [ev.MessageExpired(**header, reason=status or "FAIL (queue expiry) in message tracking")]
        return self._failed_fork(header, self._recipient_statuses(row), "FAIL")

    def _defer(self, row: Row) -> list[ev.Event]:
        # The next hop that refused is not always in the line (server-hostname, when client-hostname names the
        # local server): "".
        _, _, header = self._on_primary(row, LOCAL_FIELDS)
        pairs = self._recipient_statuses(row)
        statuses = {s for _, s in pairs}
        response = (next(iter(statuses)) if len(statuses) == 1
                    else "; ".join(f"{r}: {s}" for r, s in pairs if s))
        return [ev.DeliveryDeferred(**header, next_hop="", recipients=tuple(r for r, _ in pairs),
                                    smtp_response=response or "DEFER in message tracking")]

    def _recipient_statuses(self, row: Row) -> list[tuple[str, str]]:
        """Each listed recipient with its status, paired in order (one status for all when only one is given)."""
        recipients, statuses = row.values("recipient-address"), row.statuses()
        if len(statuses) == len(recipients):
            return list(zip(recipients, statuses))
        if len(statuses) <= 1:
            return [(r, statuses[0] if statuses else "") for r in recipients]
        raise Unmappable(f"{row.get('event-id')}: {len(statuses)} recipient-status values for"
                         f" {len(recipients)} recipients")

    def _failed_fork(self, header: dict, failed: list[tuple[str, str]], what: str) -> list[ev.Event]:
        """Recipients that failed for good: a fork of their own, deferred then expired."""
        if not failed:
            return []
        ref = header["message"]
        fork = f"failed-{self._line_id.removeprefix('mtl-')[:12]}"
        header = dict(header, message=dataclasses.replace(ref, fork_id=fork))
        recipients = tuple(r for r, _ in failed)
        text = "; ".join(f"{r}: {s}" if s else r for r, s in failed)
        return [ev.DeliveryDeferred(**header, next_hop="", recipients=recipients, smtp_response=text),
                ev.MessageExpired(**header, reason=f"delivery failed for good ({what}) for {text}")]

    def _load(self, row: Row) -> list[ev.Event]:
        """A message loaded at boot: the server restarted. Its own message, or a shadow copy it holds
        for the primary its HARECEIVE named."""
        local = self._host(row, "server-hostname", "server that restarted")
        primary = next((self._primary_of[(local, k)] for k in self._keys(row) if (local, k) in self._primary_of), local)
        ref = self._ref(row, primary, local)
        return [ev.MessageLoaded(**self._header(row, local, primary, ref))]

    def _sendexternal(self, row: Row) -> list[ev.Event]:
        events = self._send(row)
        return [dataclasses.replace(e, outside_boundary=True) if isinstance(e, ev.SentToNextHop) else e
                for e in events]

def health_probe(row: Row) -> bool:
    """A message Managed Availability sends to check mail flow: the inbound proxy probe (to
    inboundproxy@contoso.com, subject "Inbound proxy probe") or a HealthMailbox's."""
    recipients = row.get("recipient-address").lower()
    return (row.get("message-subject") == "Inbound proxy probe" or "inboundproxy@" in recipients
            or row.get("sender-address").lower().startswith("healthmailbox")
            or recipients.startswith("healthmailbox"))


def _shadow_answers(row: Row) -> list[tuple[str, str]]:
    """(shadow, its reply code) for each `<shadow>=<SMTP response>` in source-context, separated by `;`."""
    answers = (_SHADOW_ANSWER.match(piece) for piece in row.get("source-context").split(";"))
    return [(server(match.group(1)), match.group(2)) for match in answers if match]


def _failure(status: str) -> bool:
    return status[:1] in ("4", "5")


HANDLED = frozenset({"RECEIVE", "HAREDIRECT", "HAREDIRECTFAIL", "HARECEIVE", "HADISCARD", "RESUBMIT", "SEND",
                     "SENDEXTERNAL", "DELIVER", "DUPLICATEDELIVER", "TRANSFER", "DSN", "FAIL", "DEFER",
                     "LOAD"})

CLIENT_LOGGED = frozenset({"SEND", "SENDEXTERNAL"})  # client-hostname logged them, server-hostname is the far end
# Logged by client-hostname, or by server-hostname when client-hostname is empty (how Exchange writes HAREDIRECT:
# the primary in server-hostname, the shadows' answers in source-context; a DEFER or FAIL of an SMTP hand-off:
# the far end, or nothing, in server-hostname).
SELF_NAMED = frozenset({"HAREDIRECT", "HAREDIRECTFAIL", "DEFER", "FAIL"})
LOCAL_FIELDS = ("client-hostname", "server-hostname")
_SHADOW_ANSWER = re.compile(r"^\s*([^=;\s]+)=\s*([245]\d\d)\b")
HANDOFF_GRAIN_MS = 60_000  # hand-off evidence per server: the liveness facts' grain

# Documented event ids that make no event, and why (the table in EXCHANGE_LOGS.md).
IGNORED = {
    "AGENTINFO": "an agent's note about the message, not a hand-off",
    "BADMAIL": "a Pickup/Replay file that was never queued: no copy to track",
    "CLIENTSUBMISSION": "a client's submission before the Transport service's RECEIVE",
    "DROP": "dropped without an NDR before the twin saw it queued (no RECEIVE follows)",
    "DUPLICATEEXPAND": "a recipient duplicated by group expansion: recipients, not copies",
    "DUPLICATEREDIRECT": "a recipient duplicated by a redirect: recipients, not copies",
    "EXPAND": "a group expanded: recipients, not copies",
    "INITMESSAGECREATED": "moderation: a message copy created for approval",
    "MODERATIONEXPIRE": "moderation decision, not transport",
    "MODERATORAPPROVE": "moderation decision, not transport",
    "MODERATORREJECT": "moderation decision, not transport",
    "MODERATORSALLNDR": "moderation decision, not transport",
    "NOTIFYMAPI": "the store noticed a message in an Outbox: before submission",
    "NOTIFYSHADOW": "a shadow copy is needed for an Outbox message: the copy itself is logged as HAREDIRECT",
    "POISONMESSAGE": "poison queue bookkeeping; the message stays in the database",
    "PROCESS": "processed by an agent; no hand-off",
    "PROCESSMEETINGMESSAGE": "meeting message processing; no hand-off",
    "REDIRECT": "a recipient redirected: recipients, not copies",
    "RESOLVE": "a recipient address resolved: recipients, not copies",
    "RESUBMITDEFER": "a Safety Net resubmission deferred: Safety Net redelivery is not modelled",
    "RESUBMITFAIL": "a Safety Net resubmission failed: Safety Net redelivery is not modelled",
    "SUBMIT": "the Mailbox Transport Submission service handed the message on: the Transport service's"
              " RECEIVE is the receipt",
    "SUBMITDEFER": "a submission deferred before the Transport service received the message",
    "SUBMITFAIL": "a submission failed before the Transport service received the message",
    "SUPPRESSED": "a duplicate suppressed before delivery",
    "THROTTLE": "throttled; the message stays where it is",
}

# Logs of services other than the Transport service: the event ids they map, and why the rest do not.
SERVICE_SKIPS = {
    "MSGTRKMS": (frozenset(), "the Mailbox Transport Submission service's log; the message's receipt is the"
                              " Transport service's RECEIVE in MSGTRK, with that service's internal id"),
    "MSGTRKMD": (frozenset({"DELIVER", "DUPLICATEDELIVER"}),
                 "the Mailbox Transport Delivery service's log: only its deliveries are used (its RECEIVE is the"
                 " other side of the Transport service's SEND)"),
    "MSGTRKMA": (frozenset(), "the moderated-transport approval log: moderation, not transport"),
}
