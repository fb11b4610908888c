"""`shadowtwin ingest exchange-mtl`: message-tracking log files -> events and dead letters in Kafka.

    counts = ingest(["MSGTRK20261122-1.LOG"], KafkaSink(bootstrap, events_topic, dead_letters_topic))
    print(counts.describe())

Lines are read with `producers.log_tail` (merged by time across files; `follow=True` keeps
tailing them and follows roll-over), parsed with `producers.mtl_log` and mapped with
`producers.mtl_events`. Every line that cannot be read or mapped becomes a contract
DeadLetter (the line's bytes, topic = the file path, partition -1, offset = the line number,
the reason) and ingestion goes on; lines that are readable but make no event (an event-id
the twin does not use, DEFER, a Safety Net RESUBMIT) are counted by reason and skipped.
Event ids are `mtl-<sha256 of the line, 24 hex>-<n>`: ingesting the same lines again gives
the same ids, whatever the file is called. A dead letter keeps at most `ORIGINAL_KEPT` bytes of its
line (a garbled line of megabytes, say), and its reason says how long the line was.

With `positions` (`producers.ingest_positions`), a line whose records the broker acknowledged
in an earlier run is read (the mapper learns from it) but not sent again, and the position of
each file advances on delivery reports; it is saved every poll. An event larger than the producer
sends (a delivery to 60,000 recipients, say) becomes a dead letter of its line, with its size, and the
run goes on; so does one the broker refuses as larger than the events topic takes (its `max.message.bytes`),
once it is refused sent alone (the broker refuses a batch of records as one, the valid ones with it). Either
is counted (`IngestCounts.refused`) and not acknowledged. With `follow`, a record the broker refuses otherwise
ends the run (the caller flushes, saves, and exits non-zero; a restart sends
again from the saved position); so does a save that fails, with or without `follow`.
`max_age_s` leaves out files last written longer ago. Without `follow`, a file's last line with no line end
(one the server is still writing) is not read, and said through `say`: a later run reads it whole. Setting
`stop` ends the reading after the line at hand (a backlog too); the counts then say how many bytes of how many
files were left unread. A file named at the start that is no message-tracking log (`mtl_log.not_a_tracking_log`)
ends it before anything is read:
`NotATrackingLog` (`open_logs` opens and judges them before a sink is made); one that comes while following is judged at its first record, and skipped (said
through `say`, counted) while the others are followed on; one that comes and cannot be read (no permission) is said
once and read when it can be, the others followed on meanwhile.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from confluent_kafka import KafkaException

from producers.ingest_positions import Positions
from producers.log_tail import CHUNK, Line, LogTail, TailedFile, head_lines
from producers.mtl_events import Held, MtlMapper, Skip, Unmappable
from producers.mtl_log import REQUIRED_FIELDS, BadLine, MtlReader, not_a_tracking_log
from schemas.events import DeadLetter, Event
from producers.publisher import (DEFAULT_DELIVERY_TIMEOUT_S, ORIGINAL_KEPT, Deliveries, Oversized, SetAside, counted,
                                 produce, reporting_producer)


class NotATrackingLog(ValueError):
    """A file to ingest is something else: its lines would all be dead letters."""


class Sink(Protocol):
    def event(self, event: Event, on_delivery: Callable | None = None, set_aside: SetAside | None = None) -> None: ...

    def dead(self, letter: DeadLetter, on_delivery: Callable | None = None) -> None: ...

    def poll(self) -> None: ...


@dataclass
class IngestCounts:
    lines: int = 0  # record lines read (headers and blank lines not counted)
    events: Counter = field(default_factory=Counter)  # by kind
    dead_letters: int = 0
    first_dead_letter: str | None = None  # where and why: "FILE line N: reason"
    skipped: Counter = field(default_factory=Counter)  # by reason
    unjoined: int = 0  # events whose primary internal id could not be learned (see mtl_events)
    published_before: int = 0  # lines an earlier run had acknowledged: read, not sent again
    not_logs: int = 0  # files that came while following and are no message-tracking log: skipped
    unreadable: int = 0  # files that came while following and could still not be read at the end
    unread: dict[str, int] | None = None  # stopped before the end: the bytes left unread, per file
    refused: int = 0  # events too large to send (for the producer or the events topic): dead letters instead
    mailbox_domains_outside: list[str] = field(default_factory=list)  # delivered to mailboxes, no --internal-domain
    # (with `follow`, said as soon as seen: only those not said yet)

    def set_aside(self, kinds: Counter) -> None:
        """Events too large to send (`KafkaSink.set_aside`): dead letters, not events."""
        self.events -= kinds
        self.dead_letters += sum(kinds.values())
        self.refused += sum(kinds.values())

    def describe(self) -> str:
        parts = [f"{self.lines} lines: {sum(self.events.values())} events, {self.dead_letters} dead letters,"
                 f" {sum(self.skipped.values())} skipped"]
        if self.first_dead_letter is not None:
            parts.append(f"  first dead letter: {self.first_dead_letter} (all: shadowtwin dead-letters tail)")
        parts += [f"  {kind}: {n}" for kind, n in sorted(self.events.items())]
        parts += [f"  skipped {n}: {reason}" for reason, n in self.skipped.most_common()]
        if self.not_logs:
            parts.append(f"  {self.not_logs} files were no message-tracking log and were skipped")
        if self.unreadable:
            parts.append(f"  {self.unreadable} files could not be read (no permission) and were left out")
        if self.refused:
            parts.append(f"  {self.refused} events were larger than Kafka or the events topic takes (the producer's"
                         " message.max.bytes, the topic's max.message.bytes): not sent, their lines are dead letters")
        if self.published_before:
            parts.append(f"  {self.published_before} lines were published by an earlier run and not sent again")
        if self.unjoined:
            parts.append(f"  {self.unjoined} lines named a message whose primary's internal id was not seen"
                         " (see producers/EXCHANGE_LOGS.md)")
        parts += [f"  {mailbox_domain_outside(domain)}" for domain in self.mailbox_domains_outside]
        if self.unread is not None:
            left = {path: n for path, n in self.unread.items() if n}
            parts.append(f"interrupted: {sum(left.values()):,} bytes in {len(left)} of the {len(self.unread)} files"
                         " were not read")
        return "\n".join(parts)


def mailbox_domain_outside(domain: str) -> str:
    """What is said of a domain the logs deliver to mailboxes that no --internal-domain names."""
    return (f"{domain}: its recipients were delivered to mailboxes (DELIVER), but no --internal-domain names it: the"
            " twin takes them for recipients outside the organisation, whose duplicates no duplicate detection hides"
            f" (add --internal-domain {domain})")


def line_id(raw: bytes) -> str:
    return "mtl-" + hashlib.sha256(raw).hexdigest()[:24]


def open_logs(paths: list[str], *, follow: bool = False, max_age_s: float | None = None,
              wall_clock: Callable[[], float] = time.time, say: Callable[[str], None] = print) -> LogTail:
    """The files to ingest, opened: a FileNotFoundError for one that is not there (without `follow`) or a
    pattern that matches none, NotATrackingLog for one that is something else. Without `follow`, a file with
    nothing in it (no header, no record: not even a quiet server's log, which has its header) is said through `say`,
    and when every file is such, NotATrackingLog: there is nothing to publish."""
    tail = LogTail(paths, follow=follow, new_reader=MtlReader, max_age_s=max_age_s, clock=wall_clock)
    empty = []
    for path in tail.open_paths():
        why = not_a_tracking_log(head_lines(path, unfinished=not follow))  # a file with no line end at all, too
        if why is not None:
            tail.close()
            raise NotATrackingLog(_not_a_log(path, "nothing published", why))
        if not follow and _nothing_but(path) is not None:
            empty.append(path)
    if empty and len(empty) == len(tail.open_paths()):
        tail.close()
        others = f" (and {len(empty) - 1} other file{'s' if len(empty) > 2 else ''})" if len(empty) > 1 else ""
        raise NotATrackingLog(f"{_nothing(empty[0])}{others}, nothing published")
    for path in empty:
        say(f"{_nothing(path)}, nothing in it to publish; the other files are read")
    return tail


def _nothing_but(path: Path) -> str | None:
    """What a file with no header and no record holds: "" (no byte), ", NUL padding only" (a crash's, log_tail) or
    ", blank lines only"; None for a file that holds more."""
    size, nuls_only = 0, True
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            if chunk.replace(b"\0", b"").strip():
                return None
            size, nuls_only = size + len(chunk), nuls_only and not chunk.strip(b"\0")
    return "" if not size else ", NUL padding only" if nuls_only else ", blank lines only"


def _nothing(path: Path) -> str:
    return f"{path}: empty ({path.stat().st_size} bytes{_nothing_but(path)}: no #Fields: line, no record)"


def ingest(paths: list[str] | LogTail, sink: Sink, *, follow: bool = False, stop: threading.Event | None = None,
           poll_seconds: float = 0.5, internal_domains: frozenset[str] = frozenset(),
           wall_clock: Callable[[], float] = time.time, positions: Positions | None = None,
           max_age_s: float | None = None, say: Callable[[str], None] = print) -> IngestCounts:
    """Read the files (to their end, or with `follow` until `stop` is set) into `sink`; `say` gets a line
    for each file skipped and, with `follow`, for each domain delivered to mailboxes that no internal domain
    names, once, as soon as it is seen (a service's summary comes only when it stops). `paths` may be what
    `open_logs` opened, with the same `follow` and `max_age_s`."""
    stop = stop or threading.Event()
    tail = paths if isinstance(paths, LogTail) else open_logs(paths, follow=follow, max_age_s=max_age_s,
                                                               wall_clock=wall_clock)
    mapper, counts = MtlMapper(internal_domains), IngestCounts()
    judged: set[TailedFile] = set()  # files whose first record showed they are message-tracking logs
    holds: dict[int, Callable] = {}  # id(line) -> the delivery callback that keeps a held line in flight
    read_to: dict[Path, int] = {}  # the byte after the last line read, per file
    said_unreadable: set[Path] = set()
    said_domains = 0  # of mapper.mailbox_domains_outside
    try:
        while True:
            idle = True
            for line in tail.poll():
                idle = False
                if line.item is not None and line.file not in judged:  # a file that came while following, too
                    why = not_a_tracking_log(head_lines(line.path))
                    if why is not None:
                        tail.skip(line.file)
                        counts.not_logs += 1
                        say(_not_a_log(line.path, "skipped", why))
                        continue
                    judged.add(line.file)
                _one(line, mapper, sink, counts, wall_clock, positions, holds)
                read_to[line.path] = line.end
                if stop.is_set():  # Ctrl-C: what is left is said, not read
                    counts.unread = {str(path): max(0, f.size() - read_to.get(path, 0))
                                     for path, f in tail.files.items()}
                    break
            for path in sorted(tail.unreadable.keys() - said_unreadable):
                say(f"{path}: cannot be read ({tail.unreadable[path]}); it is read when it can be")
            said_unreadable = set(tail.unreadable)
            if idle or not follow:  # nothing more to join them with for now
                for (line, again), result in mapper.flush():
                    _emit(line, again, result, sink, counts, wall_clock, positions, holds)
            if follow:
                for domain in mapper.mailbox_domains_outside[said_domains:]:
                    say(mailbox_domain_outside(domain))
                said_domains = len(mapper.mailbox_domains_outside)
            if positions is not None:
                sink.poll()
                if not positions.save() or follow and positions.refused:
                    break
            if not follow or stop.wait(poll_seconds):
                break
    finally:
        tail.close()
    for path, (number, why) in sorted(tail.unfinished.items()):
        say(f"{path} line {number}: not read: {why} (the server is still writing it); a later run"
            " reads it once it is finished (with --state it sends only what it did not send), as --follow does")
    counts.unjoined, counts.unreadable = mapper.unjoined, len(tail.unreadable)
    counts.mailbox_domains_outside = mapper.mailbox_domains_outside[said_domains:]
    return counts


def _not_a_log(path: Path, what: str, why: str) -> str:
    return (f"{path}: not an Exchange message-tracking log, {what}: {why}; expected a #Fields: line naming"
            f" {','.join(REQUIRED_FIELDS)} (or an Export-Csv of Get-MessageTrackingLog)")


def _one(line: Line, mapper: MtlMapper, sink: Sink, counts: IngestCounts, wall_clock: Callable[[], float],
         positions: Positions | None, holds: dict[int, Callable]) -> None:
    if line.item is None:  # a header or a blank line
        return
    counts.lines += 1
    again = positions is not None and positions.published(line)
    if isinstance(line.item, BadLine):
        result: list[Event] | Skip | Held | Unmappable = Unmappable(line.item.reason)
    else:
        try:  # also for a line sent before: the mapper learns
            result = mapper.map(line.item, line_id(line.raw), (line, again))
        except Unmappable as exc:
            result = exc
    if isinstance(result, Held):
        if positions is not None and not again:  # in flight until it is mapped
            holds[id(line)] = positions.sending(line)
            positions.sent(line)
    else:
        _emit(line, again, result, sink, counts, wall_clock, positions, holds)
    for (held, held_again), later in mapper.released():
        _emit(held, held_again, later, sink, counts, wall_clock, positions, holds)


def _emit(line: Line, again: bool, result: list[Event] | Skip | Unmappable, sink: Sink, counts: IngestCounts,
          wall_clock: Callable[[], float], positions: Positions | None, holds: dict[int, Callable]) -> None:
    records: list[Event | DeadLetter] = []
    if isinstance(result, Skip):
        counts.skipped[result.reason] += 1
    elif isinstance(result, Unmappable):
        records = [_dead_letter(line, str(result), wall_clock)]
    else:
        records = list(result)
    if again:
        counts.published_before += 1
        return
    for record in records:
        extra = {} if positions is None else {"on_delivery": positions.sending(line)}
        if isinstance(record, Event):
            sink.event(record, **extra, set_aside=lambda reason, *_: _dead_letter(line, reason, wall_clock))
            counts.events[record.kind] += 1
            continue
        counts.dead_letters += 1
        if counts.first_dead_letter is None:
            counts.first_dead_letter = f"{record.topic} line {record.offset}: {record.reason}"
        sink.dead(record, **extra)
    if positions is not None:
        if id(line) in holds:  # sent() was called when it was held
            holds.pop(id(line))(None)
        else:
            positions.sent(line)


def _dead_letter(line: Line, reason: str, wall_clock: Callable[[], float]) -> DeadLetter:
    cut = f" (a line of {len(line.raw):,} bytes: its first {ORIGINAL_KEPT:,} are kept)" \
        if len(line.raw) > ORIGINAL_KEPT else ""
    return DeadLetter(original=line.raw[:ORIGINAL_KEPT], topic=str(line.path), partition=-1,
                      offset=line.number, reason=reason + cut, at_ms=int(wall_clock() * 1000))


class KafkaSink:
    """Events to the events topic (keyed by primary server), dead letters to the dead-letter topic;
    `deliveries` counts the broker's acknowledgements of both, and a record the client refuses as not
    acknowledged, with its reason. An event too large to send (larger than the producer sends, or than the
    events topic takes: `producers.publisher.Oversized`) is not acknowledged either; one of the ingester's
    (given `set_aside`) is counted by kind in `set_aside` and the dead letter its `set_aside` makes is sent in
    its place. Safe to share with a thread that publishes beside the ingester (the SMTP probe of
    `ingest --follow --probe`)."""

    def __init__(self, bootstrap: str, events_topic: str, dead_letters_topic: str,
                 delivery_timeout_s: float = DEFAULT_DELIVERY_TIMEOUT_S):
        self.deliveries = Deliveries(bootstrap, delivery_timeout_s)
        self.topics = (events_topic, dead_letters_topic)
        self.producer = reporting_producer(bootstrap, self.deliveries, self.topics)
        self.oversized = Oversized(self.deliveries, dead_letters_topic, self.producer)
        self.set_aside = self.oversized.not_sent
        self._lock = threading.Lock()

    def event(self, event: Event, on_delivery: Callable | None = None, set_aside: SetAside | None = None) -> None:
        with self._lock:
            try:
                produce(self.producer, self.topics[0], event,
                        self.oversized.report(self.topics[0], set_aside, on_delivery))
            except KafkaException as exc:  # this record only (too large, say): counted, and on to the next
                self.oversized.refused(event, exc.args[0], set_aside, on_delivery)
            self.deliveries.produced += 1

    def dead(self, letter: DeadLetter, on_delivery: Callable | None = None) -> None:
        with self._lock:
            try:
                produce(self.producer, self.topics[1], letter, counted(self.deliveries, on_delivery))
            except KafkaException as exc:  # this record only: counted, and on to the next
                self.deliveries.refuse(exc.args[0])
                if on_delivery is not None:
                    on_delivery(exc.args[0], None)
            self.deliveries.produced += 1

    def poll(self) -> None:
        """Serve the delivery reports that have arrived."""
        with self._lock:
            self.producer.poll(0)
            self.oversized.poll()

    def close(self) -> int:
        """Flush; returns how many records were not acknowledged (failed or still queued)."""
        return self.oversized.flush()
