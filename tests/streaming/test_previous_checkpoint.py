"""A checkpoint of the twin's previous operator (applyInPandasWithState), or one in a file, is refused in one
line; one of the current operator whose groups hold snapshots of the previous format goes on."""

from __future__ import annotations

import dataclasses
import os
import pickle
import time

import pytest

from infra.config import ConfigError
from infra.settings import TopicSettings
from schemas.events import ClockTick
from state.model import ShadowRedundancyModel
from state.names import ServerNames
from state.parameters import ModelConfig
from state.summary import server_key, server_summary, to_json
from streaming import held_state
from streaming.app import TwinApplication
from streaming.held_state import Version
from streaming.metrics import TwinCollector
from streaming.operator import SparkGroupStore
from streaming.twin import refuse_checkpoint_in_a_file, refuse_previous_operator
from streaming.views import LiveView, read_state
from tests.state.scenario import Org
from tests.state.test_snapshot import as_format_6, before_16
from tests.streaming.harness import OperatorHarness
from tests.streaming.test_twin import publish, twin_settings

# As Spark 4.0.0 wrote it for the previous operator (state/0/_metadata/metadata).
PREVIOUS = ('v1\n{"operatorInfo":{"operatorId":0,"operatorName":"applyInPandasWithState"},'
            '"stateStoreInfo":[{"storeName":"default","numColsPrefixKey":0,"numPartitions":4}]}')


def test_a_checkpoint_of_the_previous_operator_is_refused_with_one_line(tmp_path):
    metadata = tmp_path / "state" / "0" / "_metadata" / "metadata"
    metadata.parent.mkdir(parents=True)
    metadata.write_text(PREVIOUS)
    with pytest.raises(ConfigError, match="applyInPandasWithState") as refused:
        refuse_previous_operator(tmp_path)
    assert "\n" not in str(refused.value) and str(tmp_path) in str(refused.value)


def test_a_new_or_current_checkpoint_is_accepted(tmp_path):
    refuse_previous_operator(tmp_path / "new")
    metadata = tmp_path / "state" / "0" / "_metadata" / "metadata"
    metadata.parent.mkdir(parents=True)
    metadata.write_text(PREVIOUS.replace("applyInPandasWithState", "transformWithStateInPandasExec"))
    refuse_previous_operator(tmp_path)


UNKNOWN = {"primary_started_ms": None, "replaced_db_id": None}  # what format 6 does not hold


def test_a_checkpoint_whose_groups_hold_the_previous_snapshot_format_goes_on(monkeypatch):
    """Bases written before `primary_started_ms` (format 6) load with it (and `replaced_db_id`, and a pair's
    `first_copy_ms`) unknown; the twin decides on from them as from its own, and knows both again at the primary's
    next NodeStarted."""
    org = Org()
    before = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.query_ok("mbx02", "mbx01", 2, shadow_db="dbS1"), *org.started("mbx01", "dbP2", 10),
              *org.received("mbx01", "m2", 10.2), *org.shadowed("mbx01", "mbx02", "m2", 10.2, db="dbP2")]
    after = [*org.delivered("mbx01", "m2", "mbx09", 11),
             *org.query_ok("mbx02", "mbx01", 12, db="dbP2", discarded=("m2",))]
    again = [*org.started("mbx01", "dbP3", 20), *org.received("mbx01", "m3", 21),
             *org.shadowed("mbx01", "mbx02", "m3", 21, db="dbP3")]
    servers = ("mbx01", "mbx02")
    current, previous = OperatorHarness(servers=servers), OperatorHarness(servers=servers)
    for harness in (current, previous):
        harness.events(before)
    for key, store in previous.stores.items():  # the checkpoint as the previous code wrote it
        state, token = previous.state_of(key), os.urandom(16)
        store.put_base(pickle.dumps(as_format_6(state)))
        store.set_version(Version(token, token, 0, 0, store.version().timer_ms))
    monkeypatch.setattr(held_state, "_held", {})  # a worker started on that checkpoint
    assert previous.state_of("mbx01") == dataclasses.replace(before_16(current.state_of("mbx01")), **UNKNOWN)
    for harness in (current, previous):
        harness.events(after)
    assert previous.state_of("mbx01") == dataclasses.replace(before_16(current.state_of("mbx01")), **UNKNOWN)
    for harness in (current, previous):
        harness.events(again)
        harness.advance(harness.max_event_ms + 3 * 60 * 60_000)
    assert previous.state_of("mbx01") == current.state_of("mbx01")
    assert previous.state_of("mbx01").primary_started_ms is not None
    assert previous.state_of("mbx01").replaced_db_id == "dbP2"
    assert [(a.alert_id, a.type) for a in previous.alerts] == [(a.alert_id, a.type) for a in current.alerts]
    assert [c.command_id for c in previous.commands] == [c.command_id for c in current.commands]
    assert current.commands, "m3 is promoted when mbx02 stops hearing from mbx01"


# The state variables as the checkpoints hold them: their schemas as the twin gave them up to 2026-11-28 (DDL).
WRITTEN = {"version": "token BINARY, base_token BINARY, log_entries LONG, log_events LONG, timer_ms LONG",
           "base": "piece BINARY",
           **{f"log_{slot}": "parent BINARY, token BINARY, watermark LONG, piece BINARY"
              for slot in range(held_state.LOG_SLOTS)}}


class Registrations:
    """A processor handle that keeps what each state variable is registered with."""

    def __init__(self):
        self.schemas = {}

    def getValueState(self, name, schema):
        self.schemas[name] = schema

    getListState = getValueState


def test_the_state_variables_are_registered_with_the_schemas_the_checkpoints_hold_as_objects(spark):
    """Given as objects, pyspark does not ask the JVM to parse them (twice per variable and task); they are what the
    JVM parses the DDL the existing checkpoints were written with to, so those checkpoints are read as before."""
    registered = Registrations()
    SparkGroupStore(registered)
    assert registered.schemas == {name: spark.createDataFrame([], ddl).schema for name, ddl in WRITTEN.items()}


def test_a_checkpoint_that_is_a_file_or_under_one_is_refused_and_a_new_folder_is_not(tmp_path):
    (tmp_path / "file").write_text("")
    for checkpoint in (tmp_path / "file", tmp_path / "file" / "twin"):
        with pytest.raises(ConfigError, match=f"{tmp_path / 'file'} is a file, not a folder"):
            refuse_checkpoint_in_a_file(checkpoint)
    refuse_checkpoint_in_a_file(tmp_path / "new" / "twin")
    refuse_checkpoint_in_a_file(tmp_path)


@pytest.mark.parametrize("then, now", [(("mbx01", "mbx02"), ("MBX01", "MBX02")), (("MBX01", "MBX02"), ())],
                         ids=["lower case now declared in capitals", "capitals now undeclared"])
def test_a_group_an_earlier_twin_keyed_by_another_spelling_is_forgotten_and_says_so(capsys, then, now):
    """An earlier twin grouped servers as their events spelled them: mbx01's group, holding a message whose shadow
    is silent, is not the group of mbx01 declared as MBX01 (state/names.py); nor is MBX01's, undeclared, that of
    mbx01. When its deadline comes it decides nothing (no promotion of what the new group may know otherwise): it
    leaves no state and no timer behind, tombstones its records on the state topic, so that its Prometheus series
    go, and the twin says so in one line with what was dropped (before, the group's state stayed for good, and
    its summary and message in the state topic, the metrics and the page)."""
    org = Org()
    primary, shadow = then
    events = [*org.started(primary, "dbP1", 0), *org.started(shadow, "dbS1", 0), *org.received(primary, "m1", 1),
              *org.shadowed(primary, shadow, "m1", 1), *org.query_ok(shadow, primary, 2, shadow_db="dbS1")]
    earlier = OperatorHarness(ModelConfig(servers=then), servers=then)
    earlier.events(events)
    assert earlier.stores[primary].timers, "a deadline is pending"
    view = LiveView(names=ServerNames(then))  # as the earlier twin's metrics show them; the tombstones drop them
    fold(view, earlier.state_rows)
    assert series(view) == {primary, shadow}
    later = OperatorHarness(ModelConfig(servers=now), servers=now)
    later.stores = earlier.stores
    later.advance(events[-1].event_time_ms + 10 * 24 * 3_600_000)
    assert later.alerts == [] and later.commands == []
    old = later.stores[primary]
    assert (old.version(), old.base(), old.entries, old.timers) == (None, None, {}, set())
    assert sorted(later.state_rows) == [(f"message/{primary}/m1", None), (f"server/{primary}", None),
                                        (f"server/{shadow}", None)]
    fold(view, later.state_rows)
    assert series(view) == set()
    said = [line for line in capsys.readouterr().err.splitlines() if "earlier twin" in line]
    assert len(said) == 2, said  # one line per group, the primary's and the shadow's
    assert said[0].startswith(f"shadowtwin: the checkpoint's group {primary!r} was written by an earlier twin")
    assert f"{primary!r} is now {primary.swapcase()!r}" in said[0]
    assert "the 1 messages in flight and 0 promoted it held are not decided on" in said[0]


def test_the_metrics_leave_out_a_server_spelled_otherwise_than_the_twin_spells_it():
    """A checkpoint's group of an earlier spelling with no deadline pending (it holds no message) is never called
    again, and its server summary stays on the state topic: MBX01's, undeclared, now mbx01; mbx02's, now declared
    MBX02. The metrics and the live page show the servers as the twin spells them now, not a second series of
    the old name for good."""
    model = ShadowRedundancyModel()
    rows = [(server_key(name), to_json(server_summary(model.new_state(name))))
            for name in ("MBX01", "mbx02", "mbx01", "MBX02")]
    view = LiveView(names=ServerNames(("MBX02",)))
    fold(view, rows)
    assert series(view) == {"mbx01", "MBX02"}


def fold(view: LiveView, rows: list[tuple[str, bytes | None]]) -> None:
    """The state topic's rows as the metrics and the live page read them."""
    topics = TopicSettings()
    for key, value in rows:
        view.apply(topics.state, key.encode(), value, topics)


def series(view: LiveView) -> set[str]:
    """The servers the Prometheus metrics name."""
    return {sample.labels["server"] for family in TwinCollector(view, lambda: (None, 0, 0, 0)).collect()
            for sample in family.samples if "server" in sample.labels}


def test_a_checkpoints_group_of_an_earlier_spelling_leaves_no_state_in_spark_and_no_record_on_the_state_topic(
        settings, spark, kafka_bootstrap, topics, tmp_path):
    """The same through Kafka and Spark: a twin that spelled mbx01 and mbx02 as its events did leaves their groups
    in its checkpoint, mbx01's holding m1 with a deadline pending; the twin started again on it with MBX01 and
    MBX02 declared forgets both groups when their deadlines come: nothing of theirs is left in Spark's state
    store, and their records on the state topic (which the metrics and the live page show) are tombstoned."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0), *org.received("mbx01", "m1", 1),
              *org.shadowed("mbx01", "mbx02", "m1", 1), *org.query_ok("mbx02", "mbx01", 2, shadow_db="dbS1")]
    checkpoint = tmp_path / "checkpoint"
    publish(kafka_bootstrap, topics.events, events)
    earlier = twin_settings(settings, kafka_bootstrap, topics, servers=("mbx01", "mbx02"))
    with TwinApplication(earlier, spark=spark, ticks=False, checkpoint_dir=checkpoint, say=lambda line: None):
        wait_for(lambda: read_state(kafka_bootstrap, topics.state).where(events[2].message.message_id))
    assert set(read_state(kafka_bootstrap, topics.state).servers) == {"mbx01", "mbx02"}
    assert groups_in(spark, checkpoint) == {"mbx01", "mbx02"}
    later = events[-1].event_time_ms + 10 * 24 * 3_600_000
    publish(kafka_bootstrap, topics.events, [ClockTick(event_id="later", event_time_ms=later, node="shadowtwin",
                                                       primary_server="")])
    now = twin_settings(settings, kafka_bootstrap, topics, model=ModelConfig(servers=("MBX01", "MBX02")),
                        servers=("MBX01", "MBX02"))
    with TwinApplication(now, spark=spark, ticks=False, checkpoint_dir=checkpoint, say=lambda line: None) as twin:
        wait_for(lambda: not read_state(kafka_bootstrap, topics.state).servers)
        assert twin.query.exception() is None
    view = read_state(kafka_bootstrap, topics.state)
    assert view.servers == {} and view.messages == {}
    assert groups_in(spark, checkpoint) == set()


def wait_for(condition, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "not within the time allowed"
        time.sleep(1)


def groups_in(spark, checkpoint) -> set[str]:
    """The groups that have a stored version in the checkpoint's state store (Spark's state data source)."""
    rows = spark.read.format("statestore").option("stateVarName", "version").load(str(checkpoint)).collect()
    return {row.key[0] for row in rows}
