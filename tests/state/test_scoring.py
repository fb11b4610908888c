"""Scoring the twin's alerts against the simulator's truth: found, missed, false, per outcome."""

from __future__ import annotations

from schemas.events import Alert, AlertMessage, AlertType, MessageRef, Severity
from state.scoring import score


def alert(kind: AlertType, *message_ids: str, outside: bool = False) -> Alert:
    return Alert(alert_id=f"{kind.value}-{'-'.join(message_ids)}", type=kind, severity=Severity.WARNING,
                 servers=("mbx01", "mbx02"), reason="", decided_at_ms=0,
                 messages=tuple(AlertMessage(MessageRef(m, m), ("bob@fabrikam.com",) if outside else ())
                                for m in message_ids))


def truth(message_id: str, *results: str, promoted: bool = False) -> dict:
    return {"message_id": message_id, "promotions": [{"holder": "mbx02"}] if promoted else [],
            "recipients": {f"r{i}@contoso.com": {"result": r} for i, r in enumerate(results)}}


def test_found_missed_and_false_per_outcome():
    alerts = [alert(AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, "a", "b"),
              alert(AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED, "x"),  # x was never promoted
              alert(AlertType.DUPLICATE_DELIVERY_EXPECTED, "a", outside=True),
              alert(AlertType.MESSAGE_LOST, "y")]
    world = [truth("a", "delivered", "duplicate", promoted=True), truth("b", "delivered", promoted=True),
             truth("c", "duplicate_hidden", promoted=True), truth("x", "delivered"), truth("y", "delivered")]
    s = score(alerts, world)
    assert (s.promotions.predicted, s.promotions.real, s.promotions.found, s.promotions.missed,
            s.promotions.false) == (3, 3, 2, 1, 1)
    assert (s.duplicates.found, s.duplicates.missed, s.duplicates.false) == (1, 1, 0)
    assert s.duplicates_visible_real == 1 and s.duplicates_seen_predicted == 1
    assert (s.losses.predicted, s.losses.real, s.losses.false) == (1, 0, 1)
    assert s.false_alerts == {"QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED": 1, "MESSAGE_LOST": 1}
    assert "false alerts: MESSAGE_LOST 1, QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED 1" in s.render()
