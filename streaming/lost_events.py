"""Events Kafka deleted before the twin read them, said in the twin's own words and as an alert.

Retention (`retention.ms`, `retention.bytes`) or `kafka-delete-records` can remove records of the
events topic the twin has not read yet: while it is stopped, or while it runs behind. Spark's
Kafka source then goes on from the oldest record Kafka still has (`failOnDataLoss` is off, so that
the twin keeps deciding), and says so only in a WARN of its executor with a stack trace. What those
events said is unknown to the twin, so it says which, as a line and as an EVENTS_LOST alert:

    events lost: shadowtwin.events partition 0, offsets 286 to 287 (2 records), deleted by Kafka
    (retention.ms, retention.bytes or kafka-delete-records) before the twin read them; it goes on from 288

- when it starts, before its query does: from where it reads next (its checkpoint's position) to
  each partition's oldest offset (`LostEvents.at_start`);
- while it runs, after a batch that read fewer records than its offsets span: from the batch's
  start to the partition's oldest offset, when Kafka deleted past the start (`onQueryProgress`).
  Records a batch read are counted in its progress, so a record Spark's executor had fetched before
  Kafka deleted it is not said lost. A topic written through transactions has offsets no consumer
  is given (its commit markers): a batch there reads fewer records than its offsets span anyway,
  and a range Kafka deleted just after the batch read it can be said lost.

The events topic deleted and made again (in a moment, while the twin runs or while it is stopped) keeps its
name: Spark's source, which knows a partition by name and offset only, has the partition's end offset below
where it read to when the new topic has fewer records, and goes on from that end, the records below it
unread (it says so only in a WARN, `failOnDataLoss` being off); the twin says which, as a line and an
EVENTS_LOST alert (`LostEvents.went_back`). A new topic that holds as many records as the twin had read or more
by its next batch cannot be told from the old one by its offsets: Spark reads it on from the old position,
the records below it unread, and nothing is said (Spark's offsets and the checkpoint keep no topic id).

Partitions added to the events topic while the twin runs (`kafka-topics --alter --partitions`) are
read by Spark's source from their start, nothing skipped (a range Kafka deleted there first is said
lost); the twin names them, as `topics create` names a partition count other than the configured one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec
from pyspark.sql.streaming.listener import StreamingQueryListener

from infra.kafka import Kafka, admin
from infra.wording import counted
from schemas.events import Alert, AlertType, Severity
from state.model import stable_id
from streaming.consumer_group import read_up_to

Positions = dict[tuple[str, int], int]  # (topic, partition) -> the next offset the twin reads


def checkpoint_positions(checkpoint_dir: Path) -> Positions:
    """Where a query started on `checkpoint_dir` reads next: the end offsets of its last committed
    batch (Spark runs a planned but uncommitted batch again from there). Empty for a new checkpoint."""
    lines = _last_committed_offsets(checkpoint_dir)
    positions: Positions = {}
    for line in lines[2:]:  # "v1", the batch's metadata, then one line of offsets per source
        try:
            data = json.loads(line)
        except ValueError:
            continue
        positions.update(_positions({"endOffset": data}))
    return positions


def checkpoint_watermark_ms(checkpoint_dir: Path) -> int:
    """The event-time watermark of the checkpoint's last committed batch (0 for a new checkpoint)."""
    lines = _last_committed_offsets(checkpoint_dir)
    try:
        return int(json.loads(lines[1]).get("batchWatermarkMs", 0))
    except (IndexError, ValueError, AttributeError):
        return 0


def _last_committed_offsets(checkpoint_dir: Path) -> list[str]:
    commits = [int(p.name) for p in (checkpoint_dir / "commits").glob("[0-9]*") if p.name.isdigit()]
    if not commits:
        return []
    try:
        return (checkpoint_dir / "offsets" / str(max(commits))).read_text().splitlines()
    except OSError:
        return []


def _positions(source: dict, which: str = "endOffset") -> Positions:
    return {(t.topic, t.partition): t.offset for t in read_up_to({"sources": [{"endOffset": source.get(which)}]})}


def say_lost_events(kafka: Kafka, positions: Positions, say: Callable[[str], None] = print,
                    timeout_s: float = 10.0) -> int:
    """Say, per partition, the records below its oldest offset that the twin has yet to read
    (reading from `positions`); how many. A broker that does not answer in time: nothing is said."""
    return LostEvents(kafka, say, timeout_s=timeout_s).check(positions)


class LostEvents(StreamingQueryListener):
    """Says the events Kafka deleted before the twin read them, once each, and raises EVENTS_LOST."""

    def __init__(self, kafka: Kafka, say: Callable[[str], None] = print,
                 publish_alert: Callable[[Alert], None] | None = None, timeout_s: float = 10.0):
        self._kafka = kafka
        self._say = say
        self._publish_alert = publish_alert
        self._timeout_s = timeout_s
        self._said: Positions = {}  # per partition, up to where its losses were said
        self.lost = 0

    def at_start(self, checkpoint_dir: Path) -> int:
        """The events deleted while the twin was stopped, before it read them, and those of a partition whose
        end went below where the twin had read to; how many."""
        positions, at_ms = checkpoint_positions(checkpoint_dir), checkpoint_watermark_ms(checkpoint_dir)
        if not positions:
            return 0
        return self.went_back(positions, self._offsets(positions, OffsetSpec.latest()), at_ms) + self.check(
            positions, at_ms=at_ms)

    def went_back(self, positions: Positions, ends: Positions, at_ms: int = 0) -> int:
        """Say each partition whose end offset in `ends` is below its position in `positions` (the topic deleted
        and made again, say): Spark's source then goes on from that end, the records below it unread, and says
        so only in a WARN ("Partition ...'s offset was changed from ... to ..."); how many records it skips."""
        back = {tp: end for tp, end in ends.items() if end < positions.get(tp, 0)}
        oldest = self._offsets(back, OffsetSpec.earliest()) if back else {}
        for (topic, partition), end in sorted(back.items()):
            first = min(oldest.get((topic, partition), 0), end)
            self._said[(topic, partition)] = end
            unread = f", offsets {first} to {end - 1} ({counted(end - first, 'record')}) of it as it is now" if end > first else ""
            line = (f"events lost: {topic} partition {partition}{unread}: its end offset went back from"
                    f" {positions[(topic, partition)]}, where the twin had read to, to {end} (the topic deleted and"
                    f" made again, say); it goes on from {end}, and what the partition held before is unknown to it")
            self._tell(line, topic, partition, first, end, at_ms)
        self.lost += (lost := sum(end - min(oldest.get(tp, 0), end) for tp, end in back.items()))
        return lost

    def check(self, positions: Positions, ends: Positions | None = None, at_ms: int = 0) -> int:
        """Say, per partition, the records from its position in `positions` up to its oldest offset
        (at most up to its end in `ends`) that were not said yet; how many."""
        if not positions:
            return 0
        oldest = self._offsets(positions, OffsetSpec.earliest())
        lost = 0
        for (topic, partition), first in sorted(positions.items()):
            first = max(first, self._said.get((topic, partition), first))
            upto = min(oldest.get((topic, partition), -1), (ends or {}).get((topic, partition), 2 ** 63))
            if upto > first:
                lost += upto - first
                self._said[(topic, partition)] = upto
                self._tell(f"events lost: {topic} partition {partition}, offsets {first} to {upto - 1}"
                           f" ({counted(upto - first, 'record')}), deleted by Kafka (retention.ms, retention.bytes or"
                           f" kafka-delete-records) before the twin read them; it goes on from {upto}",
                           topic, partition, first, upto, at_ms)
        self.lost += lost
        return lost

    def _offsets(self, positions: Positions, spec: OffsetSpec) -> Positions:
        client = admin(self._kafka)
        try:
            futures = client.list_offsets({TopicPartition(t, p): spec for t, p in positions},
                                          request_timeout=self._timeout_s)
            return {(tp.topic, tp.partition): f.result(self._timeout_s).offset for tp, f in futures.items()}
        except Exception:  # noqa: BLE001 - saying what was lost must not keep the twin from deciding
            return {}

    def _tell(self, line: str, topic: str, partition: int, first: int, upto: int, at_ms: int) -> None:
        self._say(line)
        if self._publish_alert is not None:
            self._publish_alert(Alert(
                alert_id=stable_id("alert", AlertType.EVENTS_LOST.value, topic, partition, first, upto),
                type=AlertType.EVENTS_LOST, severity=Severity.WARNING, servers=(),
                reason=line.removeprefix("events lost: ") + ": what they said is unknown to the twin, and its"
                       " decisions about the servers they concerned may be missing or wrong",
                decided_at_ms=at_ms))

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        progress = json.loads(event.progress.json)
        for source in progress.get("sources") or ():
            if source.get("startOffset") is None:
                continue  # the first batch of a new checkpoint: it starts at the oldest record, nothing skipped
            starts, ends = _positions(source, "startOffset"), _positions(source)
            added = sorted(ends.keys() - starts.keys())
            if added:
                self._say_added(added, len(ends))
            starts |= {tp: 0 for tp in added}  # read from their start
            watermark = _ms((progress.get("eventTime") or {}).get("watermark"))
            self.went_back(starts, ends, at_ms=watermark)
            spanned = sum(max(0, ends[tp] - starts[tp]) for tp in ends)
            if spanned > int(source.get("numInputRows", 0)):
                self.check(starts, ends, at_ms=watermark)

    def _say_added(self, added: list[tuple[str, int]], partitions: int) -> None:
        self._say(f"events topic {added[0][0]}: partitions {', '.join(str(p) for _, p in added)} added since the"
                  f" twin's last batch ({counted(partitions, 'partition')} now); it reads them from their start. A primary"
                  f" server's events may now go to another partition than its earlier ones: set [topics]"
                  f" events_partitions = {partitions}")

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass


def _ms(iso: str | None) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000) if iso else 0
