"""The simulator's ground truth: what really happened to every message, beside its events.

The simulated nodes report here as they act (a delivery, a copy destroyed, a promotion);
the twin never sees this. Tests hold the twin's alerts against it. Written as JSON Lines:
a summary line, then one line per message (by Message-ID) in order of submission.

Per recipient the result is one of:
  delivered          exactly once
  duplicate_hidden   delivered again to a mailbox within the duplicate-detection window
                     (mailbox users see one copy)
  duplicate          delivered twice where people see it (outside, or after the window)
  expired            queued past MessageExpirationTimeout; an NDR went to the sender
  lost               never delivered, and no copy of it remains anywhere
  pending            still in some queue when the simulation ended, or not finished when it was
                     stopped early (Ctrl-C, --live --seconds)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from schemas import jsonl

RESULTS = ("delivered", "duplicate_hidden", "duplicate", "expired", "lost", "pending")
_WORST_FIRST = ("lost", "duplicate", "expired", "pending", "duplicate_hidden", "delivered")


@dataclass(slots=True)
class MessageTruth:
    message_id: str
    submitted_ms: int
    sender: str
    recipients: tuple[str, ...]
    deliveries: dict[str, list[tuple[int, str, bool]]] = field(default_factory=dict)  # rcpt -> (ms, where, hidden)
    expired: dict[str, int] = field(default_factory=dict)
    copies: list[dict] = field(default_factory=list)  # every primary copy: server, internal_id, received, shadow
    promotions: list[dict] = field(default_factory=list)
    destroyed: list[dict] = field(default_factory=list)  # copies gone with a queue database, or expired
    rejections: int = 0
    pending: bool = False

    def result_of(self, recipient: str) -> str:
        got = self.deliveries.get(recipient, ())
        if len(got) > 1:
            return "duplicate" if any(not hidden for _, _, hidden in got[1:]) else "duplicate_hidden"
        if got:
            return "delivered"
        if recipient in self.expired:
            return "expired"
        return "pending" if self.pending else "lost"

    def result(self) -> str:
        return _worst({self.result_of(r) for r in self.recipients})

    def to_json(self) -> dict:
        recipients = {}
        for r in self.recipients:  # each recipient's result once, for it and for the message's
            got = self.deliveries.get(r, ())
            recipients[r] = {"result": self.result_of(r), "delivered_ms": [ms for ms, _, _ in got],
                             "where": [w for _, w, _ in got]}
        return {
            "message_id": self.message_id, "submitted_ms": self.submitted_ms, "sender": self.sender,
            "result": _worst({r["result"] for r in recipients.values()}),
            "recipients": recipients,
            "copies": self.copies, "promotions": self.promotions, "destroyed": self.destroyed,
            "rejections": self.rejections,
        }


def _worst(results: set[str]) -> str:
    return next(r for r in _WORST_FIRST if r in results)


_JSON = json.JSONEncoder(sort_keys=True)  # what json.dumps(sort_keys=True) makes anew for every line


class GroundTruth:
    def __init__(self) -> None:
        self.messages: dict[str, MessageTruth] = {}

    def submitted(self, message_id: str, submitted_ms: int, sender: str, recipients: tuple[str, ...]) -> None:
        self.messages[message_id] = MessageTruth(message_id, submitted_ms, sender, recipients)

    def copy(self, message_id: str, server: str, internal_id: str, at_ms: int, shadow: str | None,
             resubmitted_by: str | None = None) -> None:
        self.messages[message_id].copies.append({"server": server, "internal_id": internal_id, "received_ms": at_ms,
                                                 "shadow": shadow, "resubmission": resubmitted_by is not None})

    def delivered(self, message_id: str, recipient: str, at_ms: int, where: str, hidden: bool) -> None:
        self.messages[message_id].deliveries.setdefault(recipient, []).append((at_ms, where, hidden))

    def expired(self, message_id: str, recipients: tuple[str, ...], at_ms: int) -> None:
        truth = self.messages[message_id]
        for r in recipients:
            truth.expired.setdefault(r, at_ms)

    def promoted(self, message_id: str, holder: str, primary: str, internal_id: str, at_ms: int, why: str,
                 recipients: tuple[str, ...]) -> None:
        """`recipients`: those the holder resubmitted it to (not those of forks already discarded)."""
        self.messages[message_id].promotions.append({"holder": holder, "primary": primary,
                                                     "internal_id": internal_id, "at_ms": at_ms, "why": why,
                                                     "recipients": list(recipients)})

    def destroyed(self, message_id: str, server: str, internal_id: str, at_ms: int, what: str) -> None:
        self.messages[message_id].destroyed.append({"server": server, "internal_id": internal_id, "at_ms": at_ms,
                                                    "what": what})

    def rejected(self, message_id: str) -> None:
        self.messages[message_id].rejections += 1

    def still_queued(self, message_ids: set[str]) -> None:
        for message_id in message_ids:
            self.messages[message_id].pending = True

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(RESULTS, 0)
        for truth in self.messages.values():
            out[truth.result()] += 1
        return out

    def write(self, path: Path, seed: int, events: int) -> None:
        with open(path, "w", encoding="utf-8") as out:
            summary = {"kind": "summary", "seed": seed, "events": events, "messages": len(self.messages),
                       "results": self.counts()}
            out.write(_JSON.encode(summary) + "\n")
            for truth in self.messages.values():
                out.write(_JSON.encode({"kind": "message", **truth.to_json()}) + "\n")


def read_truth(path: Path) -> tuple[dict, list[dict]]:
    """(summary, message records) of a ground-truth file; a line that is not JSON (or was cut
    short) is a JsonlError naming it, as in a recording."""
    with open(path, "rb") as lines:  # decoded line by line: bad bytes are named by their line
        records = [record for _, record in jsonl.values(lines, str(path))]
    return records[0], records[1:]
