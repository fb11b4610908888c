"""Realistic sample records: one instance of every event kind and of every output.

For any test that needs contract records (codec, JSON Lines, Spark round trips, the model).
The samples set every optional field and use non-default values wherever a field has a
default, so a round trip that drops or defaults a field shows. One morning on a two-server
DAG: mbx01 is the primary, mbx02 keeps the shadow copies.
"""

from __future__ import annotations

from schemas.events import (
    EVENT_TYPES, AcknowledgedToSender, Alert, AlertMessage, AlertType, BoundaryCrossed, ClockTick, CommandReason,
    DeadLetter, DeliveredToMailbox, KafkaHeader, DeliveryDeferred, DiscardQueryAnswered, DiscardQueryFailed, DiscardQuerySent, DiscardStatusSet,
    Event, MessageExpired, MessageReceived, MessageRef, MessageSource, MovedToSafetyNet, NextHopAcknowledged,
    NodeMode, NodeStarted, NodeStopping, QueryFailureReason, Recipient, RedeliveryCommand, RejectedToSender,
    MessageLoaded, SentToNextHop, ServerProbed, Severity, ShadowCopyAcknowledged, ShadowCopyFailed, ShadowCopyRequested, ShadowCopyStored,
    ShadowDiscarded, ShadowFailureReason, ShadowPromoted, SideEffectGenerated, SideEffectKind, SiteLocality,
)

T0 = 1_795_312_800_000  # 2026-11-22T02:00:00.000Z
PRIMARY, SHADOW = "mbx01.contoso.com", "mbx02.contoso.com"
MESSAGE = MessageRef(message_id="<a1b2c3@contoso.com>", internal_id="21474836481", fork_id="2")
WHOLE = MessageRef(message_id="<a1b2c3@contoso.com>", internal_id="21474836481")
DSN = MessageRef(message_id="<dsn-a1b2c3@contoso.com>", internal_id="21474836502")
RECIPIENTS = ("ann@contoso.com", "bob@fabrikam.com")


def _on_primary(n: int) -> dict:
    return dict(event_id=f"{PRIMARY}/{n}", event_time_ms=T0 + n * 250, node=PRIMARY, primary_server=PRIMARY,
                message=MESSAGE)


def _on_shadow(n: int) -> dict:
    return dict(event_id=f"{SHADOW}/{n}", event_time_ms=T0 + n * 250, node=SHADOW, primary_server=PRIMARY,
                message=MESSAGE)


def sample_events() -> dict[str, Event]:
    """One event of every kind, by kind, in `EVENT_TYPES` order."""
    no_message = dict(message=None)
    events = [
        NodeStarted(**_on_primary(1) | no_message, dag="DAG01", ad_site="Paris", boundary="DAG01",
                    mode=NodeMode.EXCHANGE_2010, shadow_redundancy_enabled=False, xshadow_advertised=False,
                    queue_db_id="8c0f6e0a-3d8c-4d5e-9a51-3f1e2b7c9d10"),
        NodeStopping(**_on_primary(2) | no_message, reason="MSExchangeTransport stopping for maintenance"),
        MessageReceived(**_on_primary(3), sender="smtp.fabrikam.com", source=MessageSource.OUTSIDE_BOUNDARY,
                        recipients=(Recipient("ann@contoso.com", True), Recipient("bob@fabrikam.com", False)),
                        size_bytes=48_213, submitted_at_ms=T0 - 1_500, sender_supports_shadow=False),
        ShadowCopyRequested(**_on_primary(4), candidate=SHADOW, locality=SiteLocality.LOCAL, attempt=1),
        ShadowCopyAcknowledged(**_on_primary(5), shadow_server=SHADOW, locality=SiteLocality.REMOTE),
        ShadowCopyFailed(**_on_primary(6), candidate="mbx03.contoso.com", locality=SiteLocality.REMOTE, attempt=2,
                         reason=ShadowFailureReason.TIMEOUT),
        AcknowledgedToSender(**_on_primary(7), redundant=True),
        RejectedToSender(**_on_primary(8), smtp_response="451 4.4.0 Message failed to be made redundant (retry)"),
        SentToNextHop(**_on_primary(9), next_hop="fabrikam.com", recipients=RECIPIENTS, outside_boundary=True),
        NextHopAcknowledged(**_on_primary(10), next_hop="fabrikam.com"),
        DiscardStatusSet(**_on_primary(11), shadow_server=SHADOW),
        MovedToSafetyNet(**_on_primary(12)),
        MessageExpired(**_on_primary(13), reason="MessageExpirationTimeout of 2.00:00:00 exceeded"),
        DeliveredToMailbox(**_on_primary(14), mailbox_server="MDB-PARIS-01", recipients=RECIPIENTS[:1],
                           duplicate=True),
        SideEffectGenerated(**_on_primary(15) | dict(message=DSN), side_effect=SideEffectKind.NDR, parent=WHOLE),
        BoundaryCrossed(**_on_primary(16), next_hop="mx.fabrikam.com", next_boundary="fabrikam.com"),
        ShadowCopyStored(**_on_shadow(17), primary_queue_db_id="8c0f6e0a-3d8c-4d5e-9a51-3f1e2b7c9d10",
                         alternate_route=False),
        DiscardQuerySent(**_on_shadow(18) | no_message, shadow_queue_db_id="f3b1c2d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d"),
        DiscardQueryAnswered(**_on_shadow(19) | no_message, primary_queue_db_id="8c0f6e0a-3d8c-4d5e-9a51-3f1e2b7c9d10",
                             discarded=(MESSAGE, DSN)),
        DiscardQueryFailed(**_on_shadow(20) | no_message, reason=QueryFailureReason.CONNECTION_FAILED),
        ShadowDiscarded(**_on_shadow(21)),
        ShadowPromoted(**_on_shadow(22), reason="primary silent for ShadowResubmitTimeSpan (03:00:00)"),
        ClockTick(event_id="twin/clock/23", event_time_ms=T0 + 23 * 250, node="shadowtwin", primary_server=PRIMARY),
        DeliveryDeferred(**_on_primary(24), next_hop="fabrikam.com", smtp_response="451 4.7.1 Greylisted, try later",
                         recipients=RECIPIENTS[1:]),
        ServerProbed(**_on_primary(25) | no_message, server=PRIMARY, answered=True,
                     reply="250-mbx01.contoso.com Hello [10.0.0.9]"),
        MessageLoaded(**_on_primary(26)),
    ]
    by_kind = {type(e).kind: e for e in events}
    assert list(by_kind) == list(EVENT_TYPES), "samples.py needs one event of every kind, in EVENT_TYPES order"
    return by_kind


def sample_alert() -> Alert:
    return Alert(
        alert_id="alert/PRIMARY_FAILED/mbx01/1795313820000", type=AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED,
        severity=Severity.CRITICAL, servers=(PRIMARY, SHADOW),
        messages=(AlertMessage(MESSAGE, RECIPIENTS), AlertMessage(DSN)),
        reason="mbx01 silent for 00:17:00 (ShadowResubmitTimeSpan); mbx02 promotes 2 shadow copies",
        decided_at_ms=T0 + 1_020_000,
    )


def sample_command() -> RedeliveryCommand:
    return RedeliveryCommand(
        command_id="resubmit/mbx02/21474836481/2", holder=SHADOW, primary_server=PRIMARY, message=MESSAGE,
        next_hop="fabrikam.com", reason=CommandReason.PRIMARY_HEARTBEAT_TIMEOUT, decided_at_ms=T0 + 1_020_000,
        recipients=RECIPIENTS[1:],
    )


def sample_dead_letter() -> DeadLetter:
    return DeadLetter(
        original=b"\xc3\x02\x00\xffnot avro", key=PRIMARY.encode(), topic="shadowtwin.events", partition=3,
        offset=1_234_567, reason="bad magic: starts with c302, expected c301", at_ms=T0 + 60_000,
        headers=(KafkaHeader("traceparent", b"00-4bf92f3577b34da6-01"), KafkaHeader("retry", None)),
        timestamp_ms=T0 + 59_000,
    )


def sample_outputs() -> dict[str, object]:
    """One record of every output, by schema name."""
    return {"Alert": sample_alert(), "RedeliveryCommand": sample_command(), "DeadLetter": sample_dead_letter()}


def all_samples() -> dict[str, object]:
    """Every sample: the events by kind, then the outputs by name."""
    return sample_events() | sample_outputs()
