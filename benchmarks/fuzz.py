"""Fuzzer: bad and impossible records through the REAL twin, beside a live valid stream whose outcome is known.

    .venv/bin/python -m benchmarks.fuzz [--records 100000] [--seconds 60] [--seed 7]

From valid encodings of every record type (every event kind, alert, command, dead letter) it
derives `--records` bad records: bit flips, truncations, extensions, wrong magic and
fingerprints, huge lengths, negative union indexes, empty and null values and keys; it keeps
those the contract's decoder refuses, so each one must come out as a dead letter. It also sends
well-formed but impossible events: acknowledgements for messages never seen, discard answers
from servers that hold nothing, empty server names, event times in year 1 and year 9999, ten
thousand recipients, the same event id twice with different contents. All of it goes to the
events topic of a running twin, interleaved with a live valid stream (servers that crash and
come back) whose alerts and commands the reference engine knows. The fuzzed records name other
servers than the valid stream's, so they cannot change its outcome unless the twin misbehaves.

It prints: records tried, twin restarts needed (goal 0), bad records found among the dead
letters with a reason, whether the valid stream's alerts and commands equal the reference's
by id, and the twin's memory (Spark JVM and its Python workers) at start, peak and end.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import random
import tempfile
import threading
import time
import uuid
from typing import Callable, Iterator

from benchmarks.memory import jvm_pid, spark_rss_bytes
from infra.config import SparkInterval
from infra.kafka import consumer as kafka_consumer, producer as kafka_producer
from infra.settings import Settings, TopicSettings, load_settings
from producers.publisher import Publisher
from producers.synthetic import Crash, Workload, generate
from schemas import events as ev
from schemas.binary import varint
from schemas.codec import DecodeError, default_codec, encode
from schemas.events import AlertType, Event, MessageRef, Recipient
from schemas.wire import HEADER_SIZE, MAGIC
from state.parameters import model_config_from
from state.replay import replay
from streaming.app import Ending, TwinApplication
from streaming.progress import first_line
from streaming.session import build_spark

FUZZ = "fuzz"  # every fuzzed record names servers fuzz01, fuzz02: never the valid stream's
MODEL = {"shadow_heartbeat_frequency": "1s", "shadow_resubmit_time_span": "6s"}
VALID_SERVERS = ("mbx01", "mbx02", "mbx03", "mbx04")  # the valid stream's (producers.synthetic names)


@dataclasses.dataclass
class FuzzReport:
    records_tried: int = 0
    bad_records: int = 0
    impossible_records: int = 0
    bad_found: int = 0
    dead_letters: int = 0
    dead_letters_without_reason: int = 0
    restarts: int = 0
    valid_expected: int = 0
    valid_equal: bool = False
    missing: list[str] = dataclasses.field(default_factory=list)
    unexpected: list[str] = dataclasses.field(default_factory=list)
    memory_mb: tuple[float, float, float] = (0.0, 0.0, 0.0)
    query_error: str = ""
    late: int = 0
    reasons: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    def lines(self) -> list[str]:
        start, peak, end = self.memory_mb
        top = ", ".join(f"{r} {n}" for r, n in self.reasons.most_common(8))
        return [
            f"records tried: {self.records_tried:,} ({self.bad_records:,} bad, {self.impossible_records:,} well-formed"
            " but impossible)",
            f"twin restarts needed: {self.restarts}" + (f" (the query died: {self.query_error})"
                                                         if self.query_error else ""),
            f"bad records found among the dead letters with a reason: {self.bad_found:,} of {self.bad_records:,}"
            f" ({self.dead_letters:,} dead letters, {self.dead_letters_without_reason} without a reason)",
            f"dead letters by reason: {top}",
            f"rows behind the watermark, dropped before any decoder and counted (LATE_EVENTS): {self.late:,}"
            " (bad records whose body Spark reads with an old event time end here)",
            f"valid stream's alerts and commands equal the reference's by id: {'yes' if self.valid_equal else 'NO'}"
            f" ({self.valid_expected} expected; missing {self.missing[:5]}, unexpected {self.unexpected[:5]})",
            f"twin memory (Spark JVM + Python workers, RSS): start {start:,.0f} MB, peak {peak:,.0f} MB,"
            f" end {end:,.0f} MB",
        ]


# ---- what is sent ------------------------------------------------------------------------------

def fuzz_samples(now_ms: int) -> list[bytes]:
    """Valid encodings of every record type, in the fuzz namespace and at the current time."""
    from tests.schemas.samples import sample_events, sample_outputs

    renamed = {"mbx01.contoso.com": f"{FUZZ}01", "mbx02.contoso.com": f"{FUZZ}02"}
    out = []
    for event in sample_events().values():
        out.append(encode(dataclasses.replace(
            event, event_time_ms=now_ms, node=renamed.get(event.node, event.node),
            primary_server=renamed.get(event.primary_server, event.primary_server))))
    out += [encode(record) for record in sample_outputs().values()]
    return out


HUGE_LENGTHS = (2**30, 2**31 - 9, 2**31 - 1, 2**40, 2**62)
MUTATIONS: dict[str, Callable[[bytes, random.Random], bytes | None]] = {
    "bit flips": lambda b, r: bytes(x ^ (1 << r.randrange(8)) if r.random() < 4 / len(b) else x for x in b),
    "truncation": lambda b, r: b[:r.randrange(len(b))],
    "extension": lambda b, r: b + r.randbytes(r.randint(1, 16)),
    "wrong magic": lambda b, r: r.randbytes(2) + b[2:],
    "wrong fingerprint": lambda b, r: b[:2] + r.randbytes(8) + b[HEADER_SIZE:],
    # Avro Java allocates a length up to its default limit (2^31 - 9) before reading; the longer ones it refuses
    "huge length": lambda b, r: (lambda at: b[:at] + varint(r.choice(HUGE_LENGTHS)) + b[at + 1:])(
        r.randrange(HEADER_SIZE, len(b))),
    "negative union index": lambda b, r: (lambda at: b[:at] + varint(-r.randint(1, 40)) + b[at + 1:])(
        r.randrange(HEADER_SIZE, len(b))),
    "empty value": lambda b, r: b"",
    "null value": lambda b, r: None,
    "header only": lambda b, r: b[:HEADER_SIZE],
    "magic only": lambda b, r: MAGIC,
}


def bad_records(samples: list[bytes], count: int, rng: random.Random) -> Iterator[tuple[bytes | None, bytes | None, str]]:
    """(key, value, how) for `count` records the contract's decoder refuses."""
    codec, made, kinds = default_codec(), 0, list(MUTATIONS)
    keys: list[Callable[[], bytes | None]] = [lambda: None, lambda: b"", lambda: f"{FUZZ}01".encode(),
                                              lambda: rng.randbytes(rng.randint(1, 64))]
    while made < count:
        how = kinds[made % len(kinds)]
        value = MUTATIONS[how](rng.choice(samples), rng)
        if value is not None:
            try:
                codec.decode(value)
                continue  # still a valid record: not a bad one
            except DecodeError:
                pass
            except Exception:  # noqa: BLE001 - any refusal counts
                pass
        made += 1
        yield rng.choice(keys)(), value, how


def impossible_events(now_ms: int, rng: random.Random) -> list[Event]:
    """Well-formed events that cannot have happened, in the fuzz namespace."""
    def h(n: int, node=f"{FUZZ}01", primary=f"{FUZZ}01", t=None, ref=None) -> dict:
        return dict(event_id=f"{FUZZ}-impossible-{n}-{uuid.uuid4().hex[:6]}", event_time_ms=now_ms if t is None else t,
                    node=node, primary_server=primary, message=ref)
    ghost = MessageRef("<never-seen@fabrikam.com>", "never-seen")
    crowd = tuple(Recipient(f"user{i}@contoso.com", True) for i in range(10_000))
    twice = h(7)
    return [
        ev.NextHopAcknowledged(**h(1, ref=ghost), next_hop="DB01"),
        ev.DiscardQueryAnswered(**h(2, node=f"{FUZZ}02"), primary_queue_db_id="db", discarded=(ghost,)),
        ev.ShadowDiscarded(**h(3, node=f"{FUZZ}02", ref=ghost)),
        ev.MessageReceived(**h(4, node="", primary="", ref=ghost), sender="x", source=ev.MessageSource.OUTSIDE_BOUNDARY,
                           recipients=(Recipient("a@contoso.com", True),), size_bytes=1),
        ev.DiscardQuerySent(**h(5, node="", primary=f"{FUZZ}01"), shadow_queue_db_id=""),
        ev.NodeStarted(**h(6, t=-62_135_596_800_000), ad_site="", boundary="", dag=None, mode=ev.NodeMode.EXCHANGE_2013,
                       queue_db_id="db"),  # year 1
        ev.NodeStarted(**h(8, t=253_402_300_799_000), ad_site="s", boundary="b", dag=None,
                       mode=ev.NodeMode.EXCHANGE_2010, queue_db_id="db"),  # year 9999
        ev.MessageReceived(**h(9, ref=MessageRef("<crowd@contoso.com>", "crowd")), sender="x",
                           source=ev.MessageSource.OUTSIDE_BOUNDARY, recipients=crowd, size_bytes=10**9),
        ev.MessageReceived(**twice, sender="x", source=ev.MessageSource.OUTSIDE_BOUNDARY,
                           recipients=(Recipient("a@contoso.com", True),), size_bytes=1),
        ev.ShadowCopyStored(**{**twice, "node": f"{FUZZ}02"}, primary_queue_db_id="other"),  # same id, other content
        ev.ShadowPromoted(**h(10, node=f"{FUZZ}02", ref=ghost), reason="a promotion of a message never stored"),
    ]


# ---- the run -----------------------------------------------------------------------------------

def fuzz(settings: Settings, spark, records: int, seconds: int, seed: int,
         say: Callable[[str], None] = print) -> FuzzReport:
    """Run the twin over a live valid stream with `records` bad records interleaved; return the figures."""
    rng = random.Random(seed)
    suffix = uuid.uuid4().hex[:8]
    topics = TopicSettings(events=f"fuzz.events.{suffix}", alerts=f"fuzz.alerts.{suffix}",
                           commands=f"fuzz.commands.{suffix}", dead_letters=f"fuzz.dead.{suffix}",
                           state=f"fuzz.state.{suffix}")
    settings = dataclasses.replace(
        settings, topics=topics, shadow_redundancy=dataclasses.replace(model_config_from(MODEL), servers=VALID_SERVERS),
        spark=dataclasses.replace(settings.spark, trigger_interval=SparkInterval("1 second")),
        twin=dataclasses.replace(settings.twin, watermark_delay=SparkInterval("10 seconds"), max_clock_skew_seconds=5,
                                 tick_interval_seconds=0.5, starting_offsets="earliest"))
    bootstrap = settings.kafka.bootstrap_servers
    report = FuzzReport()
    twin = TwinApplication(settings, spark=spark, ticks=True, checkpoint_dir=tempfile.mkdtemp(prefix="fuzz-"),
                           say=lambda line: None).start()
    memory = MemorySampler(spark)
    try:
        first_batch(twin)
        start_ms = int(time.time() * 1000)
        valid = [e for e in generate(Workload(
            servers=len(VALID_SERVERS), messages_per_second=10, start_ms=start_ms, duration_ms=seconds * 1000, heartbeat_ms=1_000,
            delivery_ms=1_500, crash=Crash("mbx02", start_ms + seconds * 300, seconds * 400, False, backlog_ms=2_000),
            seed=seed)) if not isinstance(e, ev.ClockTick)]
        say(f"valid stream: {len(valid):,} events over {seconds}s; sending {records:,} bad records beside it")
        publisher = Publisher(bootstrap, topics.events, iter(valid), speed=1.0)
        publisher.start()
        sent = send_interleaved(bootstrap, topics.events, rng, records, seconds, report)
        publisher.join()
        end_ms = valid[-1].event_time_ms
        expected = {i for i in reference_ids(valid, end_ms)}
        report.valid_expected = len(expected)
        # the valid stream's deadlines are decided once the twin's event time passes its end
        deadline = time.monotonic() + 240
        while twin.watermark_ms <= end_ms and time.monotonic() < deadline:
            time.sleep(0.5)
        got = read_outputs(bootstrap, topics, until=lambda: True)
        twin_ids = {i for i, decided, fuzzy in got["decisions"] if decided < end_ms and not fuzzy}
        report.missing, report.unexpected = sorted(expected - twin_ids), sorted(twin_ids - expected)
        report.valid_equal = not report.missing and not report.unexpected
        letters = got["dead_letters"]
        report.dead_letters = len(letters)
        report.dead_letters_without_reason = sum(1 for d in letters if not d.reason)
        report.reasons = collections.Counter(d.reason.split(":")[0] for d in letters)
        remaining = collections.Counter(sent)
        for letter in letters:
            if remaining[letter.original] > 0:
                remaining[letter.original] -= 1
        report.bad_found = report.bad_records - sum(remaining.values())
        report.restarts = twin.restarts
        report.late = twin.progress.late_total
        if twin.query.exception() is not None:  # a query that died needs a restart to go on
            report.restarts += 1
            report.query_error = str(twin.query.exception()).splitlines()[0][:300]
    finally:
        report.memory_mb = memory.stop()
        twin.stop()
    return report


def first_batch(twin: TwinApplication, limit_s: float = 600) -> None:
    """Wait for the twin's first batch; a query that fails first (a Python worker slow to start on a loaded
    machine) is started again, as the twin does. SystemExit, saying why, when no batch comes."""
    started = time.monotonic()
    while twin.progress.batches == 0:
        if twin.wait(1) in (Ending.QUERY_FAILED, Ending.QUERY_STOPPED) or time.monotonic() - started > limit_s:
            failure = twin.query.exception()
            raise SystemExit(f"the twin made no batch: {first_line(failure)}" if failure
                             else f"the twin made no batch in {limit_s:.0f} s")


def send_interleaved(bootstrap: str, topic: str, rng: random.Random, records: int, seconds: int,
                     report: FuzzReport) -> list[bytes]:
    """Send the bad and the impossible records spread over `seconds`; return the bad values sent (b"" for null)."""
    out = kafka_producer(bootstrap, **{"linger.ms": 20})
    impossible = impossible_events(int(time.time() * 1000), rng)
    started, sent = time.monotonic(), []
    chunks = max(1, seconds * 5)
    per_chunk = -(-records // chunks)
    for i in range(chunks):
        # derived from records stamped now, as a live node's would be
        count = min(per_chunk, records - len(sent))
        for key, value, _how in bad_records(fuzz_samples(int(time.time() * 1000)), count, rng):
            _produce(out, topic, key, value)
            sent.append(value or b"")
        if i == chunks // 2:
            for event in impossible:
                _produce(out, topic, event.primary_server.encode() or None,
                         encode(dataclasses.replace(event, event_time_ms=int(time.time() * 1000))
                                if 0 < event.event_time_ms < 10**13 else event))
        out.poll(0)
        time.sleep(max(0.0, started + (i + 1) * seconds / chunks - time.monotonic()))
    undelivered = out.flush(60)
    if undelivered:
        raise RuntimeError(f"{undelivered} fuzzed records were not acknowledged by Kafka")
    report.bad_records, report.impossible_records = len(sent), len(impossible)
    report.records_tried = len(sent) + len(impossible)
    return sent


def _produce(out, topic: str, key: bytes | None, value: bytes | None) -> None:
    while True:
        try:
            out.produce(topic, key=key, value=value)
            return
        except BufferError:
            out.poll(0.1)


def reference_ids(valid: list[Event], end_ms: int) -> set[str]:
    result = replay(valid, model_config_from(MODEL), until_ms=end_ms)
    return {a.alert_id for a in result.alerts if a.decided_at_ms < end_ms} | \
        {c.command_id for c in result.commands if c.decided_at_ms < end_ms}


def read_outputs(bootstrap: str, topics: TopicSettings, until: Callable[[], bool]) -> dict[str, list]:
    """Every alert, command and dead letter the twin wrote, read until `until()` and the topics are drained."""
    client = kafka_consumer(bootstrap, f"fuzz-{uuid.uuid4().hex}", [topics.alerts, topics.commands, topics.dead_letters])
    codec = default_codec()
    decisions, letters, quiet_since = [], [], time.monotonic()
    try:
        while not until() or time.monotonic() - quiet_since < 5:
            message = client.poll(0.5)
            if message is None or message.error():
                continue
            quiet_since = time.monotonic()
            record = codec.decode(message.value())
            if message.topic() == topics.dead_letters:
                letters.append(record)
            elif message.topic() == topics.alerts:
                if record.type is not AlertType.LATE_EVENTS:
                    decisions.append((record.alert_id, record.decided_at_ms,
                                      any(s.startswith(FUZZ) for s in record.servers)))
            else:
                decisions.append((record.command_id, record.decided_at_ms,
                                  record.holder.startswith(FUZZ) or record.primary_server.startswith(FUZZ)))
    finally:
        client.close()
    return {"decisions": decisions, "dead_letters": letters}


class MemorySampler(threading.Thread):
    """The resident memory of the Spark JVM and every process under it (the Python workers), every second."""

    def __init__(self, spark):
        super().__init__(daemon=True)
        self._root = jvm_pid(spark)
        self._stopping = threading.Event()
        self.samples: list[float] = []
        self.start()

    def run(self) -> None:
        while not self._stopping.wait(1.0):
            self.samples.append(sum(spark_rss_bytes(self._root)) / 2**20)

    def stop(self) -> tuple[float, float, float]:
        self._stopping.set()
        self.join(5)
        return (self.samples[0], max(self.samples), self.samples[-1]) if self.samples else (0.0, 0.0, 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="bad records to derive and send")
    parser.add_argument("--seconds", type=int, default=60, help="length of the live valid stream")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    from infra.broker import start_if_needed

    settings = load_settings()
    broker = start_if_needed(settings, print)
    spark = build_spark(settings)
    try:
        report = fuzz(settings, spark, args.records, args.seconds, args.seed)
        for line in report.lines():
            print(line)
    finally:
        spark.stop()
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
