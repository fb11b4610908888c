"""`shadowtwin record`: the contract's records from a Kafka topic into a recording (.jsonl or .avro).

    outcome = record(bootstrap, "shadowtwin.events", Path("day.avro"), from_beginning=True)
    print(outcome.describe())

Any topic of the contract: events, alerts, redelivery commands or dead letters. `schema` names
the topic's top-level schema (the command line takes it from the topic's name in the settings);
without it, the first record that decodes decides, and records of any other schema are
counted as `wrong schema`. Records are read by `producers.topic_reader` and written as they
arrive, through `producers.recording.write_events` (nothing is held in memory), each with its
Kafka timestamp (what a replay's clock-skew guard compares its event time against); a record
that does not decode is counted by reason and left out. A file that cannot be written (its
folder missing, say) is refused before anything is read. Recording stops at `count` records,
after `seconds`, when `stop` is set (Ctrl-C), and, with `from_beginning`, when every
partition has been read up to where it ended when recording began. Without it, recording
starts at the end of each partition: only what is published from then on.

Order: Kafka keeps order within a partition, i.e. per primary server (the key); records of
different partitions come out in the order the consumer interleaves them. A one-partition
topic round-trips in exactly its order.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from pathlib import Path

from infra.kafka import Kafka
from producers.recording import check_writable, write_events
from producers.topic_reader import ReadOutcome, read_topic


@dataclass
class RecordOutcome:
    path: Path
    written: int = 0
    read: ReadOutcome = field(default_factory=ReadOutcome)

    @property
    def undecodable(self):
        return self.read.undecodable

    @property
    def reached_end(self) -> bool:
        return self.read.reached_end

    def summary(self) -> str:
        what = "events" if self.read.schema in (None, "Event") else f"{self.read.schema} records"
        return f"recorded {self.written} {what} to {self.path}" + (
            " (the end of the topic as it was at start)" if self.reached_end else "")

    def describe(self) -> str:
        return "\n".join([self.summary(), *self.read.describe_undecodable()])


def record(bootstrap: Kafka, topic: str, path: Path, *, from_beginning: bool = False, seconds: float | None = None,
           count: int | None = None, stop: threading.Event | None = None, schema: str | None = "Event") -> RecordOutcome:
    outcome = RecordOutcome(check_writable(path))  # before the wait for a first record, which may be long
    items = read_topic(bootstrap, topic, outcome.read, expected=schema, from_beginning=from_beginning,
                       until_end=from_beginning, seconds=seconds, count=count, stop=stop, group="shadowtwin-record")
    first = list(itertools.islice(items, 1))  # decides the file's schema when none was named
    outcome.written = write_events(path, itertools.chain(first, items), timestamps=True,
                                   schema=outcome.read.schema or "Event")
    return outcome
