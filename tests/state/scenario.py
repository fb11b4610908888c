"""A small vocabulary for writing shadow-redundancy scenarios as event lists.

    org = Org()
    events = [*org.received("mbx01", "m1", at=0), *org.shadowed("mbx01", "mbx02", "m1", at=0), ...]

Times are minutes after T0 unless given with `ms=`. Each helper returns a list of events.
"""

from __future__ import annotations

import itertools

from schemas import events as ev
from schemas.events import MessageRef, Recipient

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR


def at(minutes: float) -> int:
    return T0 + int(minutes * MINUTE)


def ref(mid: str, fork: str | None = None) -> MessageRef:
    return MessageRef(f"<{mid}@contoso.com>", mid, fork)


class Org:
    def __init__(self) -> None:
        self._ids = itertools.count(1)

    def _header(self, node: str, primary: str, minutes: float, mid: str | None = None, fork: str | None = None):
        return dict(event_id=f"e{next(self._ids)}", event_time_ms=at(minutes), node=node, primary_server=primary,
                    message=ref(mid, fork) if mid else None)

    def started(self, node, db, at, mode=ev.NodeMode.EXCHANGE_2013, site="site1", dag="dag1"):
        return [ev.NodeStarted(**self._header(node, node, at), ad_site=site, boundary=dag or site, dag=dag,
                               mode=mode, queue_db_id=db)]

    def received(self, primary, mid, at, recipients=("alice@contoso.com",), external=(), sender_supports_shadow=True):
        rcpts = tuple(Recipient(r, True) for r in recipients) + tuple(Recipient(r, False) for r in external)
        return [ev.MessageReceived(**self._header(primary, primary, at, mid), sender="smtp.fabrikam.com",
                                   source=ev.MessageSource.OUTSIDE_BOUNDARY, recipients=rcpts, size_bytes=2048,
                                   sender_supports_shadow=sender_supports_shadow)]

    def shadowed(self, primary, shadow, mid, at, db="dbP1", alternate_route=True, locality=ev.SiteLocality.UNKNOWN):
        return [
            ev.ShadowCopyRequested(**self._header(primary, primary, at, mid), candidate=shadow,
                                   locality=ev.SiteLocality.LOCAL, attempt=1),
            ev.ShadowCopyStored(**self._header(shadow, primary, at, mid), primary_queue_db_id=db,
                                alternate_route=alternate_route),
            ev.ShadowCopyAcknowledged(**self._header(primary, primary, at, mid), shadow_server=shadow,
                                      locality=locality),
            ev.AcknowledgedToSender(**self._header(primary, primary, at, mid), redundant=True),
        ]

    def shadow_failed(self, primary, mid, at, locality=ev.SiteLocality.REMOTE, attempt=1,
                      reason=ev.ShadowFailureReason.TIMEOUT, candidate="peer"):
        return [ev.ShadowCopyFailed(**self._header(primary, primary, at, mid), candidate=candidate, locality=locality,
                                    attempt=attempt, reason=reason)]

    def sent(self, primary, mid, hop, at, fork=None, recipients=("alice@contoso.com",), outside=False):
        return [ev.SentToNextHop(**self._header(primary, primary, at, mid, fork), next_hop=hop,
                                 recipients=tuple(recipients), outside_boundary=outside)]

    def acked(self, primary, mid, hop, at, fork=None):
        return [ev.NextHopAcknowledged(**self._header(primary, primary, at, mid, fork), next_hop=hop)]

    def delivered(self, primary, mid, hop, at, fork=None):
        """Sent to a next hop and acknowledged at once."""
        return [*self.sent(primary, mid, hop, at, fork), *self.acked(primary, mid, hop, at, fork)]

    def delivered_to_mailbox(self, primary, mid, mailbox, at, recipients=("alice@contoso.com",), fork=None):
        """Delivered to the mailboxes of `recipients` on `mailbox` (one DELIVER line per mailbox database)."""
        return [ev.DeliveredToMailbox(**self._header(primary, primary, at, mid, fork), mailbox_server=mailbox,
                                      recipients=tuple(recipients))]

    def deferred(self, primary, mid, hop, at, fork=None, recipients=("alice@contoso.com",)):
        return [ev.DeliveryDeferred(**self._header(primary, primary, at, mid, fork), next_hop=hop,
                                    smtp_response="451 4.7.0 Temporary server error", recipients=tuple(recipients))]

    def expired(self, primary, mid, at, fork=None):
        return [ev.MessageExpired(**self._header(primary, primary, at, mid, fork), reason="MessageExpirationTimeout")]

    def promoted(self, shadow, primary, mid, at):
        return [ev.ShadowPromoted(**self._header(shadow, primary, at, mid), reason="no contact")]

    def crossed(self, primary, mid, hop, at, fork=None):
        return [ev.BoundaryCrossed(**self._header(primary, primary, at, mid, fork), next_hop=hop)]

    def dsn(self, primary, child, parent, at):
        return [ev.SideEffectGenerated(**self._header(primary, primary, at, child), side_effect=ev.SideEffectKind.DSN,
                                       parent=ref(parent))]

    def query_ok(self, shadow, primary, at, db="dbP1", discarded=(), shadow_db="dbS1"):
        return [
            ev.DiscardQuerySent(**self._header(shadow, primary, at), shadow_queue_db_id=shadow_db),
            ev.DiscardQueryAnswered(**self._header(shadow, primary, at), primary_queue_db_id=db,
                                    discarded=tuple(ref(m) for m in discarded)),
        ]

    def query_failed(self, shadow, primary, at, shadow_db="dbS1"):
        return [
            ev.DiscardQuerySent(**self._header(shadow, primary, at), shadow_queue_db_id=shadow_db),
            ev.DiscardQueryFailed(**self._header(shadow, primary, at), reason=ev.QueryFailureReason.TIMEOUT),
        ]

    def heartbeats_failing(self, shadow, primary, start, stop, every=2, shadow_db="dbS1"):
        """Failed discard queries every `every` minutes from `start` up to (not including) `stop`."""
        out = []
        minute = start
        while minute < stop:
            out += self.query_failed(shadow, primary, minute, shadow_db=shadow_db)
            minute += every
        return out

    def probed(self, server, start, stop, answered=True, every=5, prober="probe@ops01", via="probe"):
        """`shadowtwin probe` EHLOs `server` every `every` minutes from `start` to `stop`: answered
        (the event is the server's, `node` = server) or failed (the prober's); `via="handoff"`: a
        peer's logged SEND to it, acknowledged."""
        return [ev.ServerProbed(**self._header(server if answered else prober, server, minute), server=server,
                                answered=answered, reply="250 OK" if answered else "connection refused", via=via)
                for minute in range(start, stop, every)]

    def discarded(self, shadow, primary, mids, at):
        """`shadow` logged HADISCARD of `mids` at `at`: the primary answered its discard query with their
        discard notifications, and the log adapter says so (a `ServerProbed` of the primary, via handoff)."""
        return [*(ev.ShadowDiscarded(**self._header(shadow, primary, at, mid)) for mid in mids),
                ev.ServerProbed(**self._header(primary, primary, at), server=primary, answered=True, via="handoff",
                                reply=f"250 to {shadow}'s discard query (HADISCARD)")]

    def loaded(self, node, primary, mid, at):
        """`node` restarted and logged LOAD of `mid` (its queue database is not named)."""
        return [ev.MessageLoaded(**self._header(node, primary, at, mid))]

    def busy(self, node, start, stop, every=2):
        """`node` goes on working (a message received and delivered every `every` minutes): the
        event feed is alive, whatever else falls silent."""
        out = []
        minute = start
        while minute < stop:
            mid = f"{node}-{minute}"
            out += [*self.received(node, mid, minute), *self.delivered(node, mid, "smtp.fabrikam.com", minute)]
            minute += every
        return out

    def tick(self, at):
        return [ev.ClockTick(**self._header("shadowtwin", "", at))]
