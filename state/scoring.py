"""The twin's alerts held against the simulator's ground truth (`shadowtwin whatif --truth FILE`).

The truth (`producers/simulator/truth.py`, one record per message, as parsed JSON) says what
really happened; the alerts say what the twin decided. Messages are matched by Message-ID:

- promotions: messages a promotion alert names, against messages a shadow really promoted;
- duplicates: messages a DUPLICATE_DELIVERY_EXPECTED alert names, against messages delivered
  twice to a recipient (`duplicate`, people see it; `duplicate_hidden`, duplicate detection
  caught it); "seen" counts the predicted ones with recipients named (seen by people);
- losses: messages a MESSAGE_LOST alert names, against messages lost;
- false alerts: alerts of those kinds none of whose messages really had that outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from schemas.events import Alert, AlertType

PROMOTIONS = (AlertType.PRIMARY_FAILED_SHADOWS_PROMOTED, AlertType.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED)


@dataclass(frozen=True)
class Match:
    predicted: int
    real: int
    found: int
    missed: int
    false: int

    @classmethod
    def of(cls, predicted: set[str], real: set[str]) -> "Match":
        return cls(len(predicted), len(real), len(predicted & real), len(real - predicted), len(predicted - real))


@dataclass(frozen=True)
class Score:
    promotions: Match
    duplicates: Match
    duplicates_visible_real: int  # delivered twice where people see it
    duplicates_seen_predicted: int
    losses: Match
    false_alerts: dict[str, int]  # alert type -> alerts none of whose messages had the outcome

    def render(self) -> str:
        rows = [("promotions (messages)", self.promotions), ("duplicate deliveries (messages)", self.duplicates),
                ("messages lost", self.losses)]
        lines = [f"{'scored against the truth':32} {'predicted':>9} {'real':>6} {'found':>6} {'missed':>6}"
                 f" {'false':>6}"]
        lines += [f"{name:32} {m.predicted:9,} {m.real:6,} {m.found:6,} {m.missed:6,} {m.false:6,}" for name, m in rows]
        lines.append(f"duplicates people see: {self.duplicates_visible_real:,} real,"
                     f" {self.duplicates_seen_predicted:,} predicted")
        false = ", ".join(f"{t} {n}" for t, n in sorted(self.false_alerts.items())) or "none"
        lines.append(f"false alerts: {false}")
        return "\n".join(lines)


def score(alerts: Iterable[Alert], truth: Iterable[dict]) -> Score:
    alerts = list(alerts)
    truth = list(truth)

    def named(*types: AlertType) -> set[str]:
        return {m.message.message_id for a in alerts if a.type in types for m in a.messages}

    real_promoted = {t["message_id"] for t in truth if t.get("promotions")}
    results = {t["message_id"]: {r["result"] for r in t.get("recipients", {}).values()} for t in truth}
    real_duplicates = {m for m, rs in results.items() if rs & {"duplicate", "duplicate_hidden"}}
    real_lost = {m for m, rs in results.items() if "lost" in rs}
    real_of = {**{t: real_promoted for t in PROMOTIONS}, AlertType.DUPLICATE_DELIVERY_EXPECTED: real_duplicates,
               AlertType.MESSAGE_LOST: real_lost}
    false_alerts: dict[str, int] = {}
    for alert in alerts:
        real = real_of.get(alert.type)
        if real is not None and alert.messages and not any(m.message.message_id in real for m in alert.messages):
            false_alerts[alert.type.value] = false_alerts.get(alert.type.value, 0) + 1
    return Score(
        promotions=Match.of(named(*PROMOTIONS), real_promoted),
        duplicates=Match.of(named(AlertType.DUPLICATE_DELIVERY_EXPECTED), real_duplicates),
        duplicates_visible_real=sum(1 for rs in results.values() if "duplicate" in rs),
        duplicates_seen_predicted=len({m.message.message_id for a in alerts
                                       if a.type is AlertType.DUPLICATE_DELIVERY_EXPECTED
                                       for m in a.messages if m.recipients}),
        losses=Match.of(named(AlertType.MESSAGE_LOST), real_lost),
        false_alerts=false_alerts,
    )
