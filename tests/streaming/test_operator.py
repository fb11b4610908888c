"""The operator's code path in memory (tests/streaming/harness.py): the contract's decoder has the final
word, and no single record stops a group."""

from __future__ import annotations

import dataclasses
import random

from producers.synthetic import Workload, generate
from schemas import catalogue
from schemas.codec import default_codec, encode
from schemas.wire import CORRUPT_BODY, DecodeError
from state.facts import NodeSeen
from state.model import ShadowRedundancyModel, _Transition
from state.parameters import ModelConfig, model_config_from
from state.replay import replay
from streaming.operator import (FACT_SEEN, FACT_STARTED, OutputTopics, dead_letter, decode_rows, input_rows,
                                late_reason)
from tests.schemas.samples import sample_alert
from tests.state.scenario import Org
from tests.streaming.harness import OperatorHarness, event_row, row_frame, run_operator

FAST = model_config_from({"shadow_heartbeat_frequency": "1m", "shadow_resubmit_time_span": "10m"})
SERVERS = ("mbx01", "mbx02")  # the groups the facts every group shares are addressed to


def stranded(org: Org):
    """mbx01 takes m1 and m2, shadowed on mbx02, then falls silent: both are promoted after 10 minutes."""
    return [*org.received("mbx01", "m1", 0), *org.shadowed("mbx01", "mbx02", "m1", 0),
            *org.received("mbx01", "m2", 1), *org.shadowed("mbx01", "mbx02", "m2", 1),
            *org.query_ok("mbx02", "mbx01", 2), *org.query_failed("mbx02", "mbx01", 20)]


def ids(result):
    return {a.alert_id for a in result.alerts}, {c.command_id for c in result.commands}


def test_the_operator_decides_what_the_reference_decides():
    events = stranded(Org())
    assert ids(run_operator(events, FAST)) == ids(replay(events, FAST))
    assert len(replay(events, FAST).commands) == 2


def test_a_record_spark_accepts_but_the_contracts_decoder_refuses_is_a_dead_letter_and_the_rest_goes_on():
    events = stranded(Org())
    victim = dataclasses.replace(events[3], event_id="with-trailing-bytes")
    harness = OperatorHarness(FAST, servers=SERVERS)
    rows = [event_row(e, i) for i, e in enumerate(events)]
    rows.insert(4, event_row(victim, 99, value=encode(victim) + b"\x00\x01"))  # Spark read the body, ignored the rest
    harness.batch(rows)
    harness.advance(events[-1].event_time_ms)
    assert [(d.offset, d.reason) for d in harness.dead_letters] == [
        (99, f"corrupt body: not a valid Event v{catalogue.default().current('Event').version} record"
             " (2 bytes after the record)")]
    assert harness.dead_letters[0].original == encode(victim) + b"\x00\x01"
    expected = replay(events, FAST, until_ms=events[-1].event_time_ms)
    assert {c.command_id for c in harness.commands} == {c.command_id for c in expected.commands}


def test_a_body_read_otherwise_than_spark_read_it_never_reaches_another_group():
    org = Org()
    events = stranded(org)
    elsewhere = dataclasses.replace(events[0], event_id="other-primary", primary_server="mbx09")
    row = event_row(events[0], 50, value=encode(elsewhere))  # Spark grouped it under mbx01
    harness = OperatorHarness(FAST, servers=SERVERS)
    harness.batch([row, *(event_row(e, i) for i, e in enumerate(events))])
    assert len(harness.dead_letters) == 1
    assert "reads primary 'mbx09'" in harness.dead_letters[0].reason and harness.dead_letters[0].offset == 50


def test_an_event_the_model_cannot_apply_is_a_dead_letter_and_the_group_goes_on(monkeypatch):
    events = stranded(Org())
    refused = events[2]
    handler = ShadowRedundancyModel()._handlers[type(refused)].__name__
    original = getattr(_Transition, handler)

    def half_applies(run, event):
        if event.event_id == refused.event_id:
            run.out.alerts.append(sample_alert())  # a decision the event's failure takes back
            raise KeyError("impossible")
        return original(run, event)

    monkeypatch.setattr(_Transition, handler, half_applies)
    harness = OperatorHarness(FAST, servers=SERVERS)
    harness.events(events)  # one batch: the model runs over them at once
    harness.advance(events[-1].event_time_ms)
    assert [d.reason for d in harness.dead_letters] == ["model refused the event: KeyError: 'impossible'"]
    assert sample_alert().alert_id not in {a.alert_id for a in harness.alerts}
    assert harness.commands, "the group went on: m1 is still promoted"


def test_a_model_that_raises_before_any_event_refuses_every_event_and_the_call_ends(monkeypatch):
    def broken(self, model, state, output=None):
        raise RuntimeError("broken")

    monkeypatch.setattr(_Transition, "__init__", broken)
    events = stranded(Org())
    harness = OperatorHarness(FAST, servers=SERVERS)
    harness.events(events)
    assert {d.offset for d in harness.dead_letters} == set(range(len(events)))
    assert {d.reason for d in harness.dead_letters} == {"model refused the event: RuntimeError: broken"}


def test_garbage_under_the_empty_key_is_a_dead_letter_and_ticks_are_not():
    harness = OperatorHarness(FAST, servers=SERVERS)
    tick = Org().tick(0)[0]
    garbage = {**event_row(tick, 7, value=b"junk"), "primary_server": "", "reason": "bad magic: 6a75"}
    harness.batch([event_row(tick, 6), garbage])
    assert [(d.offset, d.reason) for d in harness.dead_letters] == [(7, "bad magic: 6a75")]


def test_rows_behind_the_previous_batchs_watermark_are_dropped_before_the_operator_as_spark_does():
    org = Org()
    events = stranded(org)
    harness = OperatorHarness(FAST, watermark_delay_ms=60_000, servers=SERVERS)
    harness.events(events)
    harness.events([])  # a batch whose watermark trails these events by the delay
    late = org.query_ok("mbx02", "mbx01", 1)  # 19 minutes behind the latest event
    harness.events(late)
    assert harness.late_rows == len(late) and not harness.dead_letters
    harness.advance(events[-1].event_time_ms)
    assert ids(harness) == ids(replay(events, FAST, until_ms=events[-1].event_time_ms)), "as if they never came"


def test_rows_behind_the_calls_watermark_that_spark_lets_through_are_dead_letters_not_applied():
    """Spark 4.0 drops rows behind the PREVIOUS batch's watermark; the operator sets aside the rest
    of those behind the watermark its call is given, where later deadlines may have fired."""
    org = Org()
    events = stranded(org)
    harness = OperatorHarness(FAST, watermark_delay_ms=60_000, servers=SERVERS)
    harness.events(events)  # the next batch's watermark: 19 minutes, where the promotions at 12 have fired
    late = org.query_ok("mbx02", "mbx01", 15)  # it would have been heard before the failed query at 20
    harness.events(late)
    assert harness.late_rows == 0, "Spark let them through: the previous batch had no watermark yet"
    assert [d.offset for d in harness.dead_letters] == [len(events) + n for n in range(len(late))]
    assert all(d.reason.startswith("late event: event time ") and "is at or behind the watermark" in d.reason
               for d in harness.dead_letters), [d.reason for d in harness.dead_letters]
    harness.advance(events[-1].event_time_ms)
    assert ids(harness) == ids(replay(events, FAST, until_ms=events[-1].event_time_ms)), "as if they never came"
    assert not harness.state_of("mbx01").seen_ids.keys() & {e.event_id for e in late}


def test_a_task_forgets_the_jar_on_its_path_and_its_zip_importers_and_still_imports(tmp_path, monkeypatch):
    import sys
    import zipfile
    import zipimport

    from streaming.operator import TwinProcessor

    class Handle:  # what TwinProcessor.init asks of Spark's handle; the store is not used here
        def getValueState(self, *_):
            return None

        getListState = getValueState

    archive = tmp_path / "lib.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("zipped_module_for_the_test.py", "ANSWER = 42\n")
    jar = str(tmp_path / "spark-core.jar")
    monkeypatch.setattr(sys, "path", [*sys.path, str(archive), jar])
    monkeypatch.setattr(sys, "path_importer_cache", dict(sys.path_importer_cache))
    monkeypatch.delitem(sys.modules, "zipped_module_for_the_test", raising=False)
    sys.path_importer_cache[str(archive)] = zipimport.zipimporter(str(archive))
    TwinProcessor(ModelConfig(), OutputTopics("a", "c", "d"), 0).init(Handle())
    assert jar not in sys.path and str(archive) in sys.path
    assert not any(isinstance(f, zipimport.zipimporter) for f in sys.path_importer_cache.values())
    import zipped_module_for_the_test
    assert zipped_module_for_the_test.ANSWER == 42


def test_a_calls_cyclic_garbage_is_collected_and_what_it_keeps_is_frozen_out_of_full_collections(monkeypatch):
    """Spark's worker runs a full collection after every task: the held states must not be walked
    by it, a call's garbage cycles must still go, and now and then the frozen objects are unfrozen
    so that a cycle among them that became garbage is found too."""
    import gc
    import weakref

    import streaming.operator as operator

    class Thing:
        pass

    gc.collect()
    monkeypatch.setattr(operator, "_calls_since_unfrozen", 0)
    collecting = gc.isenabled()
    gc.disable()  # as during a call
    try:
        garbage, kept = Thing(), Thing()
        garbage.itself = garbage
        gone = weakref.ref(garbage)
        del garbage
        operator.freeze_what_the_call_kept()
        assert gone() is None, "the call's cycle was collected, not frozen"
        assert gc.get_freeze_count() > 0 and not any(o is kept for o in gc.get_objects())
        for _ in range(operator.UNFREEZE_EVERY - 1):
            operator.freeze_what_the_call_kept()
        assert gc.get_freeze_count() == 0 and any(o is kept for o in gc.get_objects())
    finally:
        gc.unfreeze()
        if collecting:
            gc.enable()


def decode_rows_row_by_row(batches, primary, bucket_ms, watermark=0, applied=()):
    """`decode_rows` as it was before it judged the rows by column (ddfcfba and after): every row in turn."""
    decode = default_codec().decode_event
    decoded, letters, first_seen, position = [], [], {}, 0
    for batch in batches:
        spark_times_ms = (batch["event_time"].astype("int64") // 1_000_000).tolist()
        for row, spark_time_ms in zip(input_rows(batch), spark_times_ms):
            position += 1
            late = 0 < watermark and spark_time_ms <= watermark
            if row.fact == FACT_SEEN:
                if not late:
                    seen_id = f"seen:{row.node}:{spark_time_ms // bucket_ms}"
                    first = first_seen.get(seen_id)
                    if first is None or spark_time_ms < first[0]:
                        first_seen[seen_id] = (spark_time_ms, position, row)
                continue
            try:
                event = decode(row.value)
            except Exception as exc:  # noqa: BLE001
                if row.fact is None:
                    letters.append(dead_letter(row, str(exc) if isinstance(exc, DecodeError)
                                               else f"{CORRUPT_BODY}: {type(exc).__name__}: {exc}"))
                continue
            fact = row.fact is not None
            if (not fact and event.primary_server != primary) or event.event_time_ms != spark_time_ms:
                if not fact:
                    letters.append(dead_letter(row, (
                        f"{CORRUPT_BODY}: the contract's decoder reads primary {event.primary_server!r} at"
                        f" {event.event_time_ms} ms, Spark's reads {primary!r} at {spark_time_ms} ms")))
                continue
            if late:
                if not fact:
                    letters.append(dead_letter(row, late_reason(spark_time_ms, watermark)))
                continue
            decoded.append((spark_time_ms, int(fact), position, event, row))
    decoded += [(time_ms, 1, at, NodeSeen(seen_id, time_ms, row.node), row)
                for seen_id, (time_ms, at, row) in first_seen.items() if seen_id not in applied]
    decoded.sort()
    return [(event, row) for _, _, _, event, row in decoded], letters


def test_the_nodeseen_rows_sifted_by_column_give_what_a_row_by_row_reading_gives():
    """The earliest NodeSeen row of each server and liveness bucket, ties to the first in the call,
    none at or behind the watermark or already applied; the other rows as before, in the same order."""
    rng = random.Random(18)
    events = list(generate(Workload(servers=3, messages_per_second=20, duration_ms=60_000, heartbeat_ms=5_000)))
    bucket_ms = 10_000
    primary = "mbx01"
    for round_ in range(30):
        rows = [event_row(e, offset) for offset, e in enumerate(events) if e.primary_server == primary]
        for offset, e in enumerate(events):
            for copy in range(rng.choice((1, 1, 2))):  # twice: a tie at one time, the first in the call wins
                rows.append({**event_row(e, offset + copy * 100_000), "primary_server": primary, "value": None,
                             "fact": FACT_SEEN})
            if e.node != primary and rng.random() < 0.05:
                rows.append({**event_row(e, offset), "primary_server": primary, "fact": FACT_STARTED})
        rng.shuffle(rows)
        cuts = sorted(rng.sample(range(1, len(rows)), rng.randrange(0, 4)))
        frames = [row_frame(rows[a:b]) for a, b in zip([0, *cuts], [*cuts, len(rows)])]
        times = sorted(e.event_time_ms for e in events)
        watermark = rng.choice((0, times[len(times) // 3], times[len(times) // 2]))
        applied = {f"seen:mbx0{rng.randrange(1, 4)}:{t // bucket_ms}" for t in rng.sample(times, 5)}
        got = decode_rows(iter(frames), primary, bucket_ms, watermark, applied)
        want = decode_rows_row_by_row(iter(frames), primary, bucket_ms, watermark, applied)
        assert [(e, r.offset, r.fact) for e, r in got[0]] == [(e, r.offset, r.fact) for e, r in want[0]], round_
        assert [(d.offset, d.reason) for d in got[1]] == [(d.offset, d.reason) for d in want[1]], round_
        assert sum(isinstance(e, NodeSeen) for e, _ in got[0]) > 0, "the rounds must have NodeSeen facts"


def test_rows_the_codec_refuses_or_reads_otherwise_get_the_reasons_a_row_by_row_reading_gives():
    """Cut, trailing, foreign, empty and missing values, another primary or event time than Spark
    read, in the group's own rows and in fact rows, behind the watermark or not: the same events
    in the same order and the same dead letters, with the same reasons, as row by row."""
    rng = random.Random(1818)
    events = list(generate(Workload(servers=3, messages_per_second=20, duration_ms=60_000, heartbeat_ms=5_000)))
    primary = "mbx01"
    own = [e for e in events if e.primary_server == primary]
    spoilers = [
        lambda e, v: {"value": v[:-3]},  # cut short
        lambda e, v: {"value": v + b"\x00"},  # trailing bytes
        lambda e, v: {"value": b""},
        lambda e, v: {"value": None},
        lambda e, v: {"value": encode(sample_alert())},  # another schema
        lambda e, v: {"value": v[:2] + bytes(8) + v[10:]},  # unknown fingerprint
        lambda e, v: {"event_time": e.event_time_ms + 1},  # Spark read another time
        lambda e, v: {"primary_server": primary, "value": encode(dataclasses.replace(e, primary_server="mbx02"))},
    ]
    for round_ in range(20):
        rows = []
        for offset, e in enumerate(own):
            row = event_row(e, offset)
            if rng.random() < 0.1:
                row.update(rng.choice(spoilers)(e, row["value"]))
            rows.append(row)
        for offset, e in enumerate(events):
            if e.node != primary and rng.random() < 0.05:
                fact = {**event_row(e, 10_000 + offset), "primary_server": primary, "fact": FACT_STARTED}
                if rng.random() < 0.3:
                    fact.update(rng.choice(spoilers)(e, fact["value"]))
                rows.append(fact)
        rng.shuffle(rows)
        cuts = sorted(rng.sample(range(1, len(rows)), rng.randrange(0, 4)))
        frames = [row_frame(rows[a:b]) for a, b in zip([0, *cuts], [*cuts, len(rows)])]
        times = sorted(e.event_time_ms for e in own)
        watermark = rng.choice((0, times[len(times) // 3], times[len(times) // 2]))
        got = decode_rows(iter(frames), primary, 10_000, watermark)
        want = decode_rows_row_by_row(iter(frames), primary, 10_000, watermark)
        assert [(e, r.offset, r.fact) for e, r in got[0]] == [(e, r.offset, r.fact) for e, r in want[0]], round_
        assert [(d.offset, d.reason) for d in got[1]] == [(d.offset, d.reason) for d in want[1]], round_
        reasons = " ".join(d.reason for d in got[1])
        assert "the contract's decoder reads primary" in reasons and "late event" in reasons or watermark == 0, round_
        assert len(got[1]) > 0 and len(got[0]) > 0, round_
