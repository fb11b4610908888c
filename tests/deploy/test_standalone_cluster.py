"""The twin submitted with spark-submit to a Spark standalone cluster (a master and two workers
started from the installed pyspark's own classes, on loopback): the connector jars shipped with
--jars from the local cache, spark-submit's --conf winning over the project's settings; one
worker killed (kill -9, with its executor) in the middle of the stream, and the query carries
on: every alert and command of the reference replay, no other."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyspark
import pytest

from infra import jars
from shadowtwin.testing.containers import free_port
from tests.streaming.test_twin import (
    collect, expected_ids, final_tick, publish, twin_env, world_events, world_servers,
)

pytestmark = pytest.mark.integration

SPARK_HOME = Path(pyspark.__file__).parent
ENTRY = Path(__file__).resolve().parents[2] / "shadowtwin" / "__main__.py"


def spark_daemon(name: str, *args: str, log: Path) -> subprocess.Popen:
    env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", SPARK_DAEMON_MEMORY="256m",
               PYSPARK_PYTHON=sys.executable)
    return subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), f"org.apache.spark.deploy.{name}", *args],
                            stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env, start_new_session=True)


def wait_for(text: str, log: Path, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        time.sleep(0.3)
    raise AssertionError(f"{text!r} not in {log} within {timeout_s}s:\n{log.read_text()[-3000:]}")


@pytest.fixture
def cluster(tmp_path):
    """spark://127.0.0.1:port with two workers of one core and 1 GiB each; yields the url and the workers."""
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    processes = [spark_daemon("master.Master", "--host", "127.0.0.1", "--port", str(port),
                              "--webui-port", str(free_port()), log=tmp_path / "master.log")]
    try:
        wait_for("I have been elected leader", tmp_path / "master.log")
        for n in (1, 2):
            processes.append(spark_daemon("worker.Worker", url, "--host", "127.0.0.1", "--cores", "1",
                                          "--memory", "1g", "--webui-port", str(free_port()),
                                          "--work-dir", str(tmp_path / f"work{n}"), log=tmp_path / f"worker{n}.log"))
            wait_for("Successfully registered with master", tmp_path / f"worker{n}.log")
        yield url, processes[1:]
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)


def test_the_twin_on_a_standalone_cluster_survives_a_worker_killed_mid_stream(settings, kafka_bootstrap, topics,
                                                                              cluster, tmp_path):
    url, workers = cluster
    events = world_events()
    alerts, commands = expected_ids(events)
    middle = events[len(events) // 2].event_time_ms
    connector_jars = ",".join(str(p) for p in jars.ensure(jars.spark_connector_jars(), settings.jars.cache_dir))
    env = twin_env(kafka_bootstrap, topics, tmp_path / "checkpoints", servers=world_servers())
    env.update(SPARK_HOME=str(SPARK_HOME), SHADOWTWIN_SPARK_SHUFFLE_PARTITIONS="4")
    checkpoint = tmp_path / "checkpoint"
    command = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", url, "--jars", connector_jars,
               "--driver-memory", "1g", "--executor-memory", "512m", "--total-executor-cores", "2",
               "--conf", "spark.sql.shuffle.partitions=2",  # against the 1 the settings say: spark-submit wins
               "--conf", f"spark.pyspark.python={sys.executable}",
               str(ENTRY), "twin", "run", "--no-ticks", "--checkpoint", str(checkpoint)]
    log = tmp_path / "twin.log"
    publish(kafka_bootstrap, topics.events, [e for e in events if e.event_time_ms < middle])
    twin = subprocess.Popen(command, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    try:
        wait_for("batch 0:", log, timeout_s=300)
        executors = [w for w in (tmp_path / "work1", tmp_path / "work2") if any(w.rglob("stderr"))]
        assert len(executors) == 2, "both workers run an executor of the twin"
        os.killpg(workers[0].pid, signal.SIGKILL)  # the worker, its executor and its Python workers
        workers[0].wait(30)
        publish(kafka_bootstrap, topics.events, [*(e for e in events if e.event_time_ms >= middle),
                                                 final_tick(events)])
        got = collect(kafka_bootstrap, [topics.alerts, topics.commands],
                      lambda g: {a.alert_id for a in g[topics.alerts]} >= alerts
                      and {c.command_id for c in g[topics.commands]} >= commands, timeout_s=300)
        assert twin.poll() is None, log.read_text()[-3000:]
    finally:
        if twin.poll() is None:
            os.killpg(twin.pid, signal.SIGTERM)
            twin.wait(120)
    assert {a.alert_id for a in got[topics.alerts]} == alerts, log.read_text()[-3000:]
    assert {c.command_id for c in got[topics.commands]} == commands
    assert twin.returncode == 143, log.read_text()[-3000:]
    assert "Lost executor" in log.read_text(), "the driver saw the executor of the killed worker go"
    offsets = sorted((checkpoint / "offsets").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    conf = json.loads(offsets[-1].read_text().splitlines()[1])["conf"]
    assert conf["spark.sql.shuffle.partitions"] == "2", "spark-submit's --conf won over the settings"


PROBE = """
from infra.settings import load_settings
from streaming.session import build_spark
spark = build_spark(load_settings())
row = spark.range(1).selectExpr(*(f"reflect('java.lang.System', 'getProperty', '{p}')" for p in (
    "shadowtwin.test.user", "org.apache.avro.limits.string.maxLength"))).first()
print("executor:", *row)
spark.stop()
"""


def test_the_jvm_options_given_to_spark_submit_are_added_to_the_twins(tmp_path, settings):
    """spark-submit --conf spark.executor.extraJavaOptions=...: the user's options took the place of the twin's, and
    the executors ran without the Avro limits that make a record claiming a gigabyte-long string a dead letter (the
    JVM ran out of heap). Now the executor (its own JVM, local-cluster) runs with both, the user's after ours."""
    from infra.topics import OUTPUT_MAX_BYTES

    (tmp_path / "probe.py").write_text(PROBE)
    env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=str(ENTRY.parents[1]))
    connector_jars = ",".join(map(str, jars.ensure(jars.spark_connector_jars(), settings.jars.cache_dir)))
    done = subprocess.run([str(SPARK_HOME / "bin" / "spark-submit"), "--master", "local-cluster[1,1,1024]",
                           "--jars", connector_jars,
                           "--conf", "spark.executor.extraJavaOptions=-Dshadowtwin.test.user=yes",
                           str(tmp_path / "probe.py")], env=env, capture_output=True, text=True, timeout=300)
    assert f"executor: yes {OUTPUT_MAX_BYTES}\n" in done.stdout, done.stderr[-3000:]
