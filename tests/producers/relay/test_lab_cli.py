"""`shadowtwin lab ...` as a person uses it: separate commands, each a new process, against the test broker."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from producers.relay.lab import Lab, LabError
from producers.relay.topology import load_topology
from tests.producers.relay.conftest import topology_text, wait_until

pytestmark = pytest.mark.integration


def test_up_send_kill_restart_status_down(tmp_path, kafka_bootstrap, topics):
    run_dir = tmp_path / "lab"
    topology = tmp_path / "lab.toml"
    topology.write_text(topology_text(run_dir, {"ex01": "dag1", "ex02": "dag1", "ex03": "dag1"},
                                      next_hop_delay_seconds=30.0))
    conf = tmp_path / "shadowtwin.toml"
    conf.write_text(f'[kafka]\nbootstrap_servers = "{kafka_bootstrap}"\n[topics]\nevents = "{topics.events}"\n'
                    f'alerts = "{topics.alerts}"\ncommands = "{topics.commands}"\n'
                    f'dead_letters = "{topics.dead_letters}"\nevents_partitions = 2\ncommands_partitions = 2\n')
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}

    def lab(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "shadowtwin.cli", "--conf", str(conf), "lab", "--topology",
                               str(topology), *args], capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

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
