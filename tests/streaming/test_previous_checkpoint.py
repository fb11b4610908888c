"""A checkpoint of the twin's previous operator (applyInPandasWithState), or one in a file, is refused in one
line; one of the current operator whose groups hold snapshots of the previous format goes on."""

from __future__ import annotations

import dataclasses
import os
import pickle

import pytest

from infra.config import ConfigError
from state import snapshot
from state.parameters import ModelConfig
from streaming import held_state
from streaming.held_state import Version
from streaming.twin import refuse_checkpoint_in_a_file, refuse_previous_operator
from tests.state.scenario import Org
from tests.streaming.harness import OperatorHarness

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


def as_format_6(state) -> bytes:
    """`state`'s snapshot as format 6 wrote it: the header without `primary_started_ms`, its last value."""
    header, *rest = pickle.loads(snapshot.dump(state))
    return pickle.dumps(((6, *header[1:-1]), *rest))


def test_a_checkpoint_whose_groups_hold_the_previous_snapshot_format_goes_on(monkeypatch):
    """Bases written before `primary_started_ms` (format 6) load with it unknown; the twin decides on from them
    as from its own, and knows it again at the primary's next NodeStarted."""
    org = Org()
    before = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0),
              *org.received("mbx01", "m1", 1), *org.shadowed("mbx01", "mbx02", "m1", 1),
              *org.query_ok("mbx02", "mbx01", 2, shadow_db="dbS1"), *org.started("mbx01", "dbP2", 10),
              *org.received("mbx01", "m2", 10.2), *org.shadowed("mbx01", "mbx02", "m2", 10.2, db="dbP2")]
    after = [*org.delivered("mbx01", "m2", "mbx09", 11),
             *org.query_ok("mbx02", "mbx01", 12, db="dbP2", discarded=("m2",))]
    again = [*org.started("mbx01", "dbP2", 20), *org.received("mbx01", "m3", 21),
             *org.shadowed("mbx01", "mbx02", "m3", 21, db="dbP2")]
    servers = ("mbx01", "mbx02")
    current, previous = OperatorHarness(servers=servers), OperatorHarness(servers=servers)
    for harness in (current, previous):
        harness.events(before)
    for key, store in previous.stores.items():  # the checkpoint as the previous code wrote it
        state, token = previous.state_of(key), os.urandom(16)
        store.put_base(as_format_6(state))
        store.set_version(Version(token, token, 0, 0, store.version().timer_ms))
    monkeypatch.setattr(held_state, "_held", {})  # a worker started on that checkpoint
    assert previous.state_of("mbx01") == dataclasses.replace(current.state_of("mbx01"), primary_started_ms=None)
    for harness in (current, previous):
        harness.events(after)
    assert previous.state_of("mbx01") == dataclasses.replace(current.state_of("mbx01"), primary_started_ms=None)
    for harness in (current, previous):
        harness.events(again)
        harness.advance(harness.max_event_ms + 3 * 60 * 60_000)
    assert previous.state_of("mbx01") == current.state_of("mbx01")
    assert previous.state_of("mbx01").primary_started_ms is not None
    assert [(a.alert_id, a.type) for a in previous.alerts] == [(a.alert_id, a.type) for a in current.alerts]
    assert [c.command_id for c in previous.commands] == [c.command_id for c in current.commands]
    assert current.commands, "m3 is promoted when mbx02 stops hearing from mbx01"


def test_a_checkpoint_that_is_a_file_or_under_one_is_refused_and_a_new_folder_is_not(tmp_path):
    (tmp_path / "file").write_text("")
    for checkpoint in (tmp_path / "file", tmp_path / "file" / "twin"):
        with pytest.raises(ConfigError, match=f"{tmp_path / 'file'} is a file, not a folder"):
            refuse_checkpoint_in_a_file(checkpoint)
    refuse_checkpoint_in_a_file(tmp_path / "new" / "twin")
    refuse_checkpoint_in_a_file(tmp_path)


def test_a_group_an_earlier_twin_keyed_by_another_spelling_decides_nothing_and_says_so(capsys):
    """An earlier twin grouped servers as their events spelled them: mbx01's group, holding a message whose shadow
    is silent, is not the group of mbx01 declared as MBX01 (state/names.py). When its deadline comes it decides
    nothing (no promotion of what MBX01's group may know otherwise), and the twin says so in one line."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0), *org.received("mbx01", "m1", 1),
              *org.shadowed("mbx01", "mbx02", "m1", 1), *org.query_ok("mbx02", "mbx01", 2, shadow_db="dbS1")]
    earlier = OperatorHarness(servers=("mbx01", "mbx02"))
    earlier.events(events)
    assert earlier.stores["mbx01"].timers, "a deadline is pending"
    now = OperatorHarness(ModelConfig(servers=("MBX01", "MBX02")), servers=("MBX01", "MBX02"))
    now.stores = earlier.stores
    now.advance(events[-1].event_time_ms + 10 * 24 * 3_600_000)
    assert now.alerts == [] and now.commands == []
    said = [line for line in capsys.readouterr().err.splitlines() if "earlier twin" in line]
    assert said and said[0].startswith("shadowtwin: the checkpoint's group 'mbx01' was written by an earlier twin")
    assert "'mbx01' is now 'MBX01'" in said[0]
