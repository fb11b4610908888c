"""`shadowtwin lab ...` as a person uses it: separate commands, each a new process, against the test broker."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from producers.relay.lab import Lab, LabError
from producers.relay.topology import load_topology
from infra.settings import DEFAULT_CONF, load_settings
from tests.producers.relay.conftest import topology_text, wait_until

pytestmark = pytest.mark.integration


def lab_command(tmp_path, kafka_bootstrap, topics, nodes: list[str], **lab) -> tuple[Path, Callable[..., str]]:
    """A lab topology of `nodes` and `shadowtwin lab ...` run as a person runs it, a new process each, with a
    settings file naming the test's broker and topics; -> the topology's path and the runner (its stdout)."""
    topology = tmp_path / "lab.toml"
    topology.write_text(topology_text(tmp_path / "lab", dict.fromkeys(nodes, "dag1"), **lab))
    conf = tmp_path / "shadowtwin.toml"
    conf.write_text(f'[kafka]\nbootstrap_servers = "{kafka_bootstrap}"\n[topics]\nevents = "{topics.events}"\n'
                    f'alerts = "{topics.alerts}"\ncommands = "{topics.commands}"\nstate = "{topics.state}"\n'
                    f'dead_letters = "{topics.dead_letters}"\nevents_partitions = 2\ncommands_partitions = 2\n'
                    f'[views]\nhttp_port = 0\n')  # the lab's twin takes this file too: a metrics port of its own
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}

    def run(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "shadowtwin.cli", "--conf", str(conf), "lab", "--topology",
                               str(topology), *args], capture_output=True, text=True, timeout=240, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    return topology, run


def test_up_send_kill_restart_status_down(tmp_path, kafka_bootstrap, topics):
    topology, lab = lab_command(tmp_path, kafka_bootstrap, topics, ["ex01", "ex02", "ex03"],
                                next_hop_delay_seconds=30.0)
    inspect = Lab(load_topology(topology), topology, kafka_bootstrap, topics)
    try:
        out = lab("up")
        assert "started mailbox01, ex01, ex02, ex03" in out
        assert len(re.findall(r"^ex0\d +up +pid \d+", out, re.M)) == 3
        assert "everything was running already" in lab("up"), "up is idempotent"
        out = lab("send", "--count", "6")
        assert "sent 6: 6 accepted (250), 0 deferred (4xx)" in out
        status = lab("status")
        assert re.search(r"^ex02 +up .* queued +2 +shadows +2", status, re.M), status
        old_db = inspect.node_status("ex02").queue_db_id
        assert "ex02 killed (SIGKILL); its queue database is wiped" in lab("kill", "ex02", "--wipe-queue-db")
        assert re.search(r"^ex02 +down .*\(no database\)", lab("status"), re.M)
        out = lab("restart", "ex02")
        new_db = inspect.node_status("ex02").queue_db_id
        assert new_db != old_db and f"queue database {new_db}" in out
        # ex02's shadows see the new queue database at their next heartbeat and resubmit at once.
        assert wait_until(lambda: inspect.sink_status().received >= 2, 20)
        assert re.search(r"^mailbox01 +up .*received 2 +distinct 2 +duplicates 0", lab("status"), re.M)
        for secret in inspect.topology.secrets_path().read_text().split('"')[3::4]:
            assert secret not in out + status
        out = lab("down")
        assert "stopped ex01, ex02, ex03, sink" in out
    finally:
        inspect.down()
    time.sleep(0.2)
    assert inspect.leftover_pids() == [], "lab down leaves no process behind"
    assert "nothing was running" in lab("down")


def test_a_sink_whose_port_is_taken_is_said_in_one_line_naming_the_cause(tmp_path, kafka_bootstrap, topics):
    """`lab up` with the sink's port in use printed the sink's whole traceback, flattened into one line, its cause
    ('address already in use') at the very end (helper-119's walk). Now the failure's own line and where the log is."""
    import socket

    run_dir = tmp_path / "lab"
    topology = tmp_path / "lab.toml"
    topology.write_text(topology_text(run_dir, {"ex01": "dag1"}))
    lab = Lab(load_topology(topology), topology, kafka_bootstrap, topics)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", lab.topology.sink.port))
        taken.listen()
        with pytest.raises(LabError) as refused:
            lab.start_sink()
    said = str(refused.value)
    assert "\n" not in said and "Traceback" not in said, said
    assert re.fullmatch(r"\S+ did not start \(exit 1\): .*[Aa]ddress already in use.* \(its log: .+\)", said), said


def test_the_lab_twin_on_a_new_checkpoint_reads_the_events_from_where_the_lab_first_started(
        make_lab, kafka_bootstrap, topics):
    """`make run` left the demo's events on the events topic, and a later `lab up --twin` (a new checkpoint, read
    from the topic's start) decided about the demo's servers too: some 11 alerts about servers the lab has not
    (helper-116's walk). Now the lab records where the topic ended before its nodes first published, and its twin
    starts there; a second `up` keeps the first place, where the lab's own earlier events are."""
    from confluent_kafka import Producer

    from producers.topic_reader import topic_watermarks

    before = Producer({"bootstrap.servers": kafka_bootstrap})
    for partition in (0, 0, 1):
        before.produce(topics.events, b"someone else's event", partition=partition)
    assert before.flush(10) == 0
    lab = make_lab({"ex01": "dag1", "ex02": "dag1"})
    assert "SHADOWTWIN_TWIN_STARTING_OFFSETS" not in lab.twin_environment(), "a lab never started records nothing"
    lab.up()
    assert wait_until(lambda: sum(high for _, high in topic_watermarks(kafka_bootstrap, topics.events).values()) > 3,
                      20), "the nodes published"
    starting = {topics.events: {"0": 2, "1": 1}}
    assert json.loads(lab.twin_environment()["SHADOWTWIN_TWIN_STARTING_OFFSETS"]) == starting
    lab.down()
    lab.up()
    assert json.loads(lab.twin_environment()["SHADOWTWIN_TWIN_STARTING_OFFSETS"]) == starting
    assert load_settings(env={**lab.twin_environment(), "SHADOWTWIN_CONF": str(DEFAULT_CONF)}).twin \
        .starting_offsets == json.dumps(starting)


def test_the_lab_s_twin_is_shown_and_stopped_with_the_lab(tmp_path, kafka_bootstrap, topics):
    """`lab up --twin` started a twin that `lab status` did not show and `lab down` did not stop: a process counted
    as the lab's only with its run folder on its command line, which the twin's had not. It ran on, and a lab
    started again in the same run folder, emptied, met it writing to the same checkpoint
    (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY, ten restarts). And it took conf/shadowtwin.toml, not the file
    `lab` was given."""
    topology, lab = lab_command(tmp_path, kafka_bootstrap, topics, ["ex01", "ex02"])
    inspect = Lab(load_topology(topology), topology, kafka_bootstrap, topics)
    try:
        assert "twin running" in lab("up", "--twin")
        twin = inspect.pid("twin")
        assert twin is not None and json.loads(lab("status", "--json"))["twin"] == {"running": True, "pid": twin}
        served = re.findall(r"live page at http://127\.0\.0\.1:(\d+)/", inspect.log_path("twin").read_text())
        assert served and served != ["9464"], "the twin's metrics port is the given file's (any free port)"
        assert "stopped twin, ex01, ex02, sink" in lab("down")
    finally:
        inspect.down()
    assert inspect.leftover_pids() == [], "lab down leaves no process behind, the twin's included"
    stat = Path(f"/proc/{twin}/stat")
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z", "the twin is gone (or a zombie)"
