"""The relay node: a shadow-redundant transport server, wired from its parts.

On start it opens its queue database, publishes NodeStarted (with the queue-db id), and
serves SMTP. Then, as Exchange 2013+ does (docs/domain.md):

- receiving a message: MessageReceived; before answering, a shadow copy on a peer of its
  boundary over a simultaneous SMTP session (ShadowCopyRequested, then ShadowCopyAcknowledged
  or ShadowCopyFailed per attempt); no copy and RejectMessageOnShadowFailure: 451 4.4.0
  (RejectedToSender); else the message is queued and 250 is answered (AcknowledgedToSender);
- storing a copy for a peer (XSHADOW): ShadowCopyStored, with the primary's queue-db id;
- delivering (after `next_hop_delay_seconds`), each message in a session of its own, up to
  `max_per_domain_outbound_connections` at once, so that a next hop that never answers one
  message holds back no other: SentToNextHop, NextHopAcknowledged,
  DeliveredToMailbox (the next hop is the mailbox sink), DiscardStatusSet, MovedToSafetyNet (once the
  next hop took some recipient: a message refused for good for every one is in no Safety Net);
  recipients the next hop refuses for now (4xx, or no session) stay queued (DeliveryDeferred) and are
  tried again as Exchange retries (`topology.TransportService`), those it refuses for good (5xx) fail
  as a fork of their own (DeliveryDeferred, MessageExpired);
- reporting: recipients refused for good, or a message that expires, get the sender a non-delivery
  report (`ndr`; none to the null reverse-path), a message of this node's (SideEffectGenerated, NDR)
  with no copy of its own: the message it is about is released to its shadow (DiscardStatusSet,
  MovedToSafetyNet) only once the report is processed too, as Exchange holds the copy for every side effect;
- expiring: a message still queued MessageExpirationTimeout after it was received expires
  (MessageExpired, then DiscardStatusSet for its shadow, and MovedToSafetyNet when the next hop took
  some of its recipients): the sender is told that it failed; a promoted copy counts from its
  promotion, a receipt of this node's;
- heartbeat, every ShadowHeartbeatFrequency, towards each primary it holds copies for:
  DiscardQuerySent, then DiscardQueryAnswered (and ShadowDiscarded per released copy) or
  DiscardQueryFailed; it promotes the copies at once when the primary's queue-db id changed,
  and when a query fails more than ShadowResubmitTimeSpan after its last contact with the primary
  (003: "If the shadow server can't open an SMTP session with the primary server after" the span;
  unless `promote_on_own_timeout` is off): back from its own outage, it asks first;
- redelivery commands from the twin (`commands.CommandFollower`): the copy is promoted.
A promotion publishes ShadowPromoted, then MessageReceived (from inside the boundary: the copy is a
message this node received, its MessageExpirationTimeout counted from then), and relays it itself.

Events are flushed to Kafka before any 250 that depends on them is sent.
"""

from __future__ import annotations

import email.parser
import email.utils
import logging
import threading
import time
from pathlib import Path

from producers.relay import client, headers, ndr, protocol, tls
from producers.relay.events import NodeEvents
from producers.relay.queue_db import Parent, QueueDB, StoredMessage
from producers.relay.server import RelayController, quiet_library_logs
from producers.relay.topology import LabTopology, NodeSpec
from schemas import events as ev
from schemas.events import MessageRef, Recipient, SiteLocality
from state.clock_guard import out_of_range
from state.parameters import ShadowMessagePreference, ms

log = logging.getLogger("shadowtwin.relay.node")
REJECT_REPLY = "451 4.4.0 Message failed to be made redundant"
EXPIRED_REPLY = "550 4.4.7 QUEUE.Expired; message expired"  # as Exchange's report names an expired message
RELAY_HEADER = "X-Shadowtwin-Relay"


def message_identity(content: bytes, fallback_id: str) -> tuple[str, int | None]:
    """(Message-ID, client submit time in ms) from a message's headers. A header with 8-bit octets (SMTPUTF8
    is not offered, yet clients send them) is read with each such octet as U+FFFD, as the report's Subject
    is (`ndr`); a submit time that is no usable moment (`state.clock_guard`) is none."""
    headers = email.parser.BytesHeaderParser().parsebytes(content)
    message_id = str(headers.get("Message-ID") or "").strip() or fallback_id
    submitted = None
    raw = str(headers.get("X-Submitted-At") or "").strip()
    if raw.isdigit():
        submitted = int(raw)
    elif headers.get("Date"):
        try:
            submitted = int(email.utils.parsedate_to_datetime(str(headers["Date"])).timestamp() * 1000)
        except (TypeError, ValueError):
            submitted = None
    return message_id, None if submitted is None or out_of_range(submitted) else submitted


def _answers(by_recipient: dict[str, str]) -> str:
    """The next hop's answers, once when they are all the same, else per recipient."""
    answers = set(by_recipient.values())
    return answers.pop() if len(answers) == 1 else "; ".join(f"{r}: {a}" for r, a in by_recipient.items())


class RelayNode:
    def __init__(self, topology: LabTopology, name: str, bootstrap: str, events_topic: str, commands_topic: str,
                 data_dir: Path, passwords: dict[str, str]):
        self.topology = topology
        self.spec: NodeSpec = topology.node(name)
        self.name = name
        self.host_name = topology.fqdn(name)  # what it announces (greeting, EHLO, Received, Message-IDs)
        self.params = topology.parameters(name)
        self.peers = topology.peers(name)
        self.bootstrap = bootstrap
        self.commands_topic = commands_topic
        self.db_path = Path(data_dir) / f"{name}.sqlite"
        self.credentials = client.Credentials(name, passwords[name], tls.client_context(topology.tls_dir(), name))
        self._passwords = passwords
        self.events = NodeEvents(name, bootstrap, events_topic)
        self.db: QueueDB | None = None
        self._controller: RelayController | None = None
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._peer_turn = 0
        self._turn_lock = threading.Lock()
        self._promote_lock = threading.Lock()
        self._in_flight: set[str] = set()  # internal ids of the messages being delivered
        self._in_flight_lock = threading.Lock()
        self._reports_lock = threading.Lock()  # a message and the reports about it are released once
        self.heartbeat_s = ms(self.params.shadow_heartbeat_frequency) / 1000
        self.resubmit_ms = ms(self.params.shadow_resubmit_time_span)

    # ---- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        from producers.relay.commands import CommandFollower

        quiet_library_logs()
        self.db = QueueDB(self.db_path, self.name)
        self.events.emit(ev.NodeStarted, self.name, dag=self.spec.dag, ad_site=self.spec.ad_site,
                         boundary=self.spec.boundary, mode=self.params.mode,
                         shadow_redundancy_enabled=self.params.shadow_redundancy_enabled, xshadow_advertised=True,
                         queue_db_id=self.db.queue_db_id)
        self.events.flush()
        self._controller = RelayController(self, self.topology.host, self.spec.port, self.host_name,
                                           self._passwords, {p.name: self.topology.fqdn(p.name) for p in self.peers},
                                           tls.server_context(self.topology.tls_dir(), self.name),
                                           tls.sender_context(self.topology.tls_dir(), self.name),
                                           self.topology.receive_connector)
        self._controller.start()
        follower = CommandFollower(self, self.bootstrap, self.commands_topic)
        for target, label in ((self._delivery_loop, "delivery"), (self._heartbeat_loop, "heartbeat"),
                              (lambda: follower.run(self._stopping), "commands")):
            thread = threading.Thread(target=target, name=f"{self.name}-{label}", daemon=True)
            thread.start()
            self._threads.append(thread)
        log.info("%s started: queue database %s, SMTP on %s:%d, peers %s", self.name, self.db.queue_db_id,
                 self.topology.host, self.spec.port, ", ".join(p.name for p in self.peers) or "none")

    def stop(self, reason: str = "stopped") -> None:
        """A clean shutdown (a kill -9 skips all of this, as a crash does)."""
        self._stopping.set()
        if self._controller is not None:
            self._controller.stop()
        for thread in self._threads:
            thread.join(timeout=15)
        deadline = time.monotonic() + self.topology.smtp_timeout_seconds
        while self._in_flight and time.monotonic() < deadline:  # a session about to end records its outcome
            time.sleep(0.1)
        self.events.emit(ev.NodeStopping, self.name, reason=reason)
        self.events.flush(self.events.deliveries.timeout_s + 5)
        if self.db is not None:
            self.db.close()
        if self.events.deliveries.unacknowledged:
            log.error("%s stopped: %s", self.name, self.events.deliveries.describe_failure())
        else:
            log.info("%s stopped", self.name)

    def wait(self) -> None:
        self._stopping.wait()

    # ---- receiving (RelayBackend) -------------------------------------------------------

    def accept(self, peer: str, helo: str, envelope, via: str) -> str:
        """A client's message: queued with the node's trace line on top, and a Message-ID if it had none
        (`headers`), once a shadow copy is made (or without one, unless RejectMessageOnShadowFailure)."""
        sent: bytes = envelope.original_content
        internal_id = self.db.new_internal_id()
        message_id, submitted = message_identity(sent, "")
        content = sent
        if not message_id:
            message_id = headers.message_id(internal_id, self.host_name)
            content = headers.with_message_id(sent, message_id)
        ref = MessageRef(message_id, internal_id)
        rcpts = tuple(envelope.rcpt_tos)
        received_ms = self.events.now_ms()
        content = headers.received(helo, peer, self.host_name, via, internal_id, rcpts, received_ms) + content
        self._received(ref, received_ms, helo or peer, ev.MessageSource.OUTSIDE_BOUNDARY, rcpts, len(sent), submitted)
        shadow = self._make_shadow(ref, envelope.mail_from, rcpts, content) if self.params.shadow_redundancy_enabled \
            else None
        if shadow is None and self.params.shadow_redundancy_enabled and self.params.reject_message_on_shadow_failure:
            self.events.emit(ev.RejectedToSender, self.name, ref, smtp_response=REJECT_REPLY)
            self.events.flush()
            log.info("rejected %s (%s): no shadow copy could be made", internal_id, message_id)
            return REJECT_REPLY
        stored = StoredMessage(internal_id, message_id, envelope.mail_from, rcpts, content, submitted, self.name,
                               shadow_server=shadow)
        self.db.enqueue(stored, received_ms, received_ms + int(self.topology.next_hop_delay_seconds * 1000))
        self.events.emit(ev.AcknowledgedToSender, self.name, ref, redundant=shadow is not None)
        self.events.flush()
        log.info("accepted %s (%s), shadow copy on %s", internal_id, message_id, shadow or "no server")
        return f"250 2.0.0 OK queued as {internal_id}"

    def _received(self, ref: MessageRef, at_ms: int, sender: str, source: ev.MessageSource, rcpts: tuple[str, ...],
                  size: int, submitted: int | None) -> None:
        domains = self.topology.internal_domains
        self.events.emit(ev.MessageReceived, self.name, ref, at_ms=at_ms, sender=sender, source=source,
                         recipients=tuple(Recipient(r, r.rpartition("@")[2].lower() in domains) for r in rcpts),
                         size_bytes=size, submitted_at_ms=submitted)

    def _candidates(self) -> list[tuple[NodeSpec, SiteLocality]]:
        """Peers to try in order, within the retry budgets of ShadowMessagePreferenceSetting."""
        with self._turn_lock:
            turn, self._peer_turn = self._peer_turn, self._peer_turn + 1
        p = self.params
        local = [n for n in self.peers if n.ad_site == self.spec.ad_site]
        remote = [n for n in self.peers if n.ad_site != self.spec.ad_site]
        if self.spec.dag is None:  # no DAG: the AD site is the boundary, the preference is ignored
            remote = []
        preference = p.shadow_message_preference_setting
        plan: list[tuple[NodeSpec, SiteLocality]] = []
        for group, locality, budget, allowed in (
                (remote, SiteLocality.REMOTE, p.max_retries_for_remote_site_shadow,
                 preference is not ShadowMessagePreference.LOCAL_ONLY),
                (local, SiteLocality.LOCAL, p.max_retries_for_local_site_shadow,
                 preference is not ShadowMessagePreference.REMOTE_ONLY)):
            if group and allowed:
                plan += [(group[(turn + i) % len(group)], locality) for i in range(budget)]
        return plan

    def _make_shadow(self, ref: MessageRef, mail_from: str, rcpts: tuple[str, ...], content: bytes) -> str | None:
        plan = self._candidates()
        if not plan:
            self.events.emit(ev.ShadowCopyFailed, self.name, ref, candidate="", locality=SiteLocality.UNKNOWN,
                             attempt=1, reason=ev.ShadowFailureReason.NO_PEER)
            return None
        request = protocol.ShadowRequest(self.name, self.db.queue_db_id, ref.internal_id)
        for attempt, (peer, locality) in enumerate(plan, start=1):
            self.events.emit(ev.ShadowCopyRequested, self.name, ref, candidate=peer.name, locality=locality,
                             attempt=attempt)
            try:
                client.send_shadow(self.topology.host, peer.port, self.host_name, self.credentials, request, mail_from,
                                   rcpts, content, self.topology.smtp_timeout_seconds, peer.name)
            except client.SessionFailed as failure:
                log.warning("shadow copy of %s on %s failed: %s", ref.internal_id, peer.name, failure)
                self.events.emit(ev.ShadowCopyFailed, self.name, ref, candidate=peer.name, locality=locality,
                                 attempt=attempt, reason=failure.shadow_reason)
                continue
            self.events.emit(ev.ShadowCopyAcknowledged, self.name, ref, shadow_server=peer.name, locality=locality)
            return peer.name
        return None

    def store_shadow(self, login: str, request: protocol.ShadowRequest, envelope) -> str:
        content: bytes = envelope.original_content
        message_id, submitted = message_identity(content, headers.message_id(request.internal_id,
                                                                             self.topology.fqdn(request.primary)))
        now = self.events.now_ms()
        self.db.store_shadow(StoredMessage(request.internal_id, message_id, envelope.mail_from,
                                           tuple(envelope.rcpt_tos), content, submitted, request.primary,
                                           primary_qdb=request.primary_qdb), now)
        self.events.emit(ev.ShadowCopyStored, request.primary, MessageRef(message_id, request.internal_id), at_ms=now,
                         primary_queue_db_id=request.primary_qdb)
        self.events.flush()
        log.info("stored a shadow copy of %s for %s", request.internal_id, request.primary)
        return "250 2.0.0 shadow copy stored"

    def answer_discards(self, query: protocol.DiscardQuery) -> protocol.DiscardAnswer:
        ids = self.db.take_discards(query.shadow, self.events.now_ms(),
                                    ms(self.params.shadow_message_auto_discard_interval))
        if ids:
            log.info("told %s to discard %d shadow copies", query.shadow, len(ids))
        return protocol.DiscardAnswer(self.db.queue_db_id, tuple(ids))

    # ---- delivering ---------------------------------------------------------------------

    def _delivery_loop(self) -> None:
        auto_discard_ms = ms(self.params.shadow_message_auto_discard_interval)
        expiration_ms = ms(self.params.message_expiration_timeout)
        hold_ms = ms(self.params.safety_net_hold_time)
        sessions = self.topology.transport_service.max_per_domain_outbound_connections
        while not self._stopping.is_set():
            try:
                now = int(time.time() * 1000)
                with self._in_flight_lock:
                    busy = set(self._in_flight)
                for message in self.db.received_before(now - expiration_ms):
                    if message.internal_id not in busy:
                        self._expire(message)
                due = [m for m in self.db.due(now, limit=sessions + len(busy)) if m.internal_id not in busy]
                for message in due[:sessions - len(busy)]:
                    self._start_delivery(message)
                self.db.expire_discards(now, auto_discard_ms)
                self.db.expire(now, hold_ms, expiration_ms)
            except Exception:  # noqa: BLE001 - keep the node alive, say what happened
                log.exception("delivery loop")
            self._stopping.wait(0.2)

    def _start_delivery(self, m: StoredMessage) -> None:
        with self._in_flight_lock:
            self._in_flight.add(m.internal_id)

        def deliver() -> None:
            try:
                self._deliver(m)
            except Exception:  # noqa: BLE001
                log.exception("delivery of %s", m.internal_id)
            finally:
                with self._in_flight_lock:
                    self._in_flight.discard(m.internal_id)

        threading.Thread(target=deliver, name=f"{self.name}-deliver-{m.internal_id}", daemon=True).start()

    def _deliver(self, m: StoredMessage) -> None:
        """One attempt: the recipients the next hop accepted are delivered, those it refused for good
        are a fork of their own that failed (DeliveryDeferred then MessageExpired), those it refused
        for now (or all, when the session failed) stay queued; the message is processed when none is left."""
        sink = self.topology.sink
        ref = MessageRef(m.message_id, m.internal_id)
        self.events.emit(ev.SentToNextHop, self.name, ref, next_hop=sink.name, recipients=m.rcpts,
                         outside_boundary=False)
        stamp = f"{RELAY_HEADER}: {self.name} {m.internal_id}" + (f" resubmitted-for={m.primary}" if m.resubmitted
                                                                    else "")
        try:
            outcome = client.relay(self.topology.host, sink.port, self.host_name, m.mail_from, m.rcpts,
                                   stamp.encode() + b"\r\n" + m.content, self.topology.smtp_timeout_seconds)
        except client.SessionFailed as failure:
            outcome = client.RelayOutcome((), deferred={r: str(failure) for r in m.rcpts})
        if outcome.accepted:
            if not outcome.deferred:  # the hand-off is over: a recipient still to try would be taken as served
                self.events.emit(ev.NextHopAcknowledged, self.name, ref, next_hop=sink.name)
            self.events.emit(ev.DeliveredToMailbox, self.name, ref, mailbox_server=sink.name,
                             recipients=outcome.accepted, duplicate="duplicate" in outcome.reply.lower())
        if outcome.failed:
            fork = MessageRef(m.message_id, m.internal_id, f"{sink.name}-failed-{self.events.now_ms()}")
            why = _answers(outcome.failed)
            log.warning("%s: %s refused for good: %s", m.internal_id, sink.name, why)
            self.events.emit(ev.DeliveryDeferred, self.name, fork, next_hop=sink.name, smtp_response=why,
                             recipients=tuple(outcome.failed))
            self.events.emit(ev.MessageExpired, self.name, fork, reason=f"the next hop refused for good: {why}")
            self._report(m, ref, outcome.failed)
        if outcome.deferred:
            why = _answers(outcome.deferred)
            log.warning("relay of %s to %s deferred: %s", m.internal_id, sink.name, why)
            self.events.emit(ev.DeliveryDeferred, self.name, ref, next_hop=sink.name, smtp_response=why,
                             recipients=tuple(outcome.deferred))
            delay_ms = self.topology.transport_service.retry_delay_ms(m.attempts + 1)
            self.db.still_for(m.internal_id, tuple(outcome.deferred), int(time.time() * 1000) + delay_ms,
                              served=bool(outcome.accepted))
            self.events.flush()
            log.info("%s: next attempt in %.0f s", m.internal_id, delay_ms / 1000)
            return
        # Safety Net holds what a next hop acknowledged (seeds: "acknowledges successful receipt of the message,
        # and the Mailbox server moves the message into Safety Net"): not a message every recipient of which failed
        self._processed(m, delivered=m.served or bool(outcome.accepted))
        log.info("processed %s at %s%s: %d recipient(s) delivered, %d refused for good", m.internal_id, sink.name,
                 " (resubmitted)" if m.resubmitted else "", len(outcome.accepted), len(outcome.failed))

    def _expire(self, m: StoredMessage) -> None:
        """Queued past MessageExpirationTimeout: Exchange deletes it and tells the sender it failed (an
        NDR); its shadow is released, so that the copy is never delivered after all. One the next hop took
        for some recipients is in Safety Net, as what was "delivered to a mailbox recipient" is (000, 003)."""
        ref = MessageRef(m.message_id, m.internal_id)
        why = (f"queued past MessageExpirationTimeout ({self.params.message_expiration_timeout}) after"
               f" {m.attempts} failed attempt(s); not delivered to {', '.join(m.rcpts)}")
        self.events.emit(ev.MessageExpired, self.name, ref, reason=why)
        self._report(m, ref, {r: EXPIRED_REPLY for r in m.rcpts})
        self._processed(m, delivered=m.served)
        log.warning("%s (%s) expired, sender %s: %s", m.internal_id, m.message_id, m.mail_from or "<>", why)

    def _report(self, m: StoredMessage, ref: MessageRef, failed: dict[str, str]) -> None:
        """A non-delivery report to the sender (`ndr`), queued as a message of this node's, with no shadow
        copy of its own: the message it is about keeps its copy until the report is processed too."""
        if m.mail_from in ("", "<>") or m.parent is not None:
            return  # no report to the null reverse-path (a report itself)
        internal_id = self.db.new_internal_id()
        report_ref = MessageRef(headers.message_id(internal_id, self.host_name), internal_id)
        now = self.events.now_ms()
        content = ndr.report(self.host_name, report_ref.message_id, m.mail_from, m.content, failed, now)
        parent = Parent(m.internal_id, m.message_id, None if m.resubmitted else m.shadow_server)
        self.db.enqueue(StoredMessage(internal_id, report_ref.message_id, "<>", (m.mail_from,), content, None,
                                      self.name, parent=parent), now, now)
        self.events.emit(ev.SideEffectGenerated, self.name, report_ref, side_effect=ev.SideEffectKind.NDR, parent=ref)
        log.info("%s: non-delivery report %s to %s", m.internal_id, internal_id, m.mail_from)

    def _processed(self, m: StoredMessage, delivered: bool) -> None:
        """Out of the queue (into Safety Net when `delivered`). A message is released to its shadow
        (DiscardStatusSet) and reported in Safety Net once no report about it is still queued; a report
        processed releases the message it was about, if that waited for it."""
        with self._reports_lock:
            now = self.events.now_ms()
            (self.db.delivered if delivered else self.db.expired)(m, now, release=False)
            done = [(m, delivered)]
            if m.parent is not None and not self.db.waits_for_reports(m.parent.internal_id):
                about = StoredMessage(m.parent.internal_id, m.parent.message_id, "", (), b"", None, self.name,
                                      shadow_server=m.parent.shadow_server)
                done.append((about, self.db.in_safety_net(about.internal_id)))
            for message, in_safety_net in done:
                if self.db.waits_for_reports(message.internal_id):
                    continue
                ref = MessageRef(message.message_id, message.internal_id)
                shadow = None if message.resubmitted else message.shadow_server
                self.db.release(Parent(message.internal_id, message.message_id, shadow), now)
                if shadow:
                    self.events.emit(ev.DiscardStatusSet, self.name, ref, shadow_server=shadow)
                if in_safety_net:
                    self.events.emit(ev.MovedToSafetyNet, self.name, ref)
            self.events.flush()

    # ---- heartbeat ----------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        while not self._stopping.wait(self.heartbeat_s):
            try:
                for primary, last_contact_ms in sorted(self.db.shadow_primaries().items()):
                    self._heartbeat(primary, last_contact_ms)
            except Exception:  # noqa: BLE001
                log.exception("heartbeat loop")

    def _heartbeat(self, primary: str, last_contact_ms: int) -> None:
        try:
            spec = self.topology.node(primary)
        except KeyError:
            log.warning("holding copies for %s, which is not in the topology", primary)
            return
        sent_at = self.events.now_ms()
        self.events.emit(ev.DiscardQuerySent, primary, at_ms=sent_at, shadow_queue_db_id=self.db.queue_db_id)
        try:
            answer = client.query_discards(self.topology.host, spec.port, self.host_name, self.credentials,
                                           protocol.DiscardQuery(self.name, self.db.queue_db_id),
                                           self.topology.smtp_timeout_seconds, primary)
        except client.SessionFailed as failure:
            failed_at = self.events.now_ms()
            self.events.emit(ev.DiscardQueryFailed, primary, at_ms=failed_at, reason=failure.query_reason)
            log.info("heartbeat to %s failed (%s), no answer for %.1f s", primary, failure,
                     (failed_at - last_contact_ms) / 1000)
            self.events.flush()
            if self.topology.promote_on_own_timeout and failed_at - last_contact_ms >= self.resubmit_ms:
                held = [m.internal_id for m in self.db.shadows(primary)]
                self.promote(primary, held, f"no contact with {primary} for ShadowResubmitTimeSpan")
            return
        answered_at = self.events.now_ms()
        held = {m.internal_id: m for m in self.db.shadows(primary)}
        refs = tuple(MessageRef(held[i].message_id, i) for i in answer.discarded if i in held)
        # The queue database before the events: the primary forgot the notifications when it answered, so a copy
        # kept because an event could not be published (one the broker refuses as too large) would be held for
        # good, and resubmitted, delivered twice, at the primary's next failure.
        self.db.contact(primary, answered_at)
        with self._promote_lock:  # a copy is either discarded or promoted, never both
            discarded = self.db.discard_shadows(primary, [r.internal_id for r in refs], answered_at)
        self.events.emit(ev.DiscardQueryAnswered, primary, at_ms=answered_at, primary_queue_db_id=answer.primary_qdb,
                         discarded=refs)
        for m in discarded:
            self.events.emit(ev.ShadowDiscarded, primary, MessageRef(m.message_id, m.internal_id))
        changed = [m.internal_id for m in self.db.shadows(primary) if m.primary_qdb != answer.primary_qdb]
        if changed:
            self.promote(primary, changed, f"{primary} came back with a new queue database ({answer.primary_qdb})")
        self.events.flush()

    # ---- promotion ----------------------------------------------------------------------

    def promote(self, primary: str, internal_ids: list[str], reason: str) -> list[StoredMessage]:
        """Shadow copies become this node's primary messages and are relayed at once."""
        with self._promote_lock:
            now = self.events.now_ms()
            moved = self.db.promote(primary, internal_ids, now)
            for m in moved:
                ref = MessageRef(m.message_id, m.internal_id)
                self.events.emit(ev.ShadowPromoted, primary, ref, at_ms=now, reason=reason)
                self._received(ref, now, self.name, ev.MessageSource.INSIDE_BOUNDARY, m.rcpts, len(m.content),
                               m.submitted_at_ms)
            self.events.flush()
        if moved:
            log.warning("promoted %d shadow message(s) of %s: %s", len(moved), primary, reason)
        return moved
