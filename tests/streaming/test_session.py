"""The SparkSession the twin runs in: what bounds its memory outside the Java heap, its collector, and
the twin's JVM options and connectors kept whatever way the user gives Spark their own."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from infra import jars
from infra.topics import OUTPUT_MAX_BYTES
from infra.config import ConfigError
from streaming.session import LOG_CONFIG, MALLOC_ARENAS, _bounded_state_store, _given_by_the_user, _properties

PROJECT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).parent

# Run in a Python (or spark-submit) of its own: a JVM's options are fixed when it starts.
PROBE = """
import json
from infra.settings import load_settings
from streaming.session import build_spark
spark = build_spark(load_settings())
jvm = spark.sparkContext._jvm
loader = jvm.Thread.currentThread().getContextClassLoader()
def loads(name):
    try:
        return jvm.java.lang.Class.forName(name, False, loader) is not None
    except Exception:
        return False
print("probe:", json.dumps({
    "properties": {p: jvm.java.lang.System.getProperty(p) for p in (
        "shadowtwin.test.user", "shadowtwin.test.admin", "log4j2.configurationFile",
        "org.apache.avro.limits.string.maxLength")},
    "collectors": sorted(b.getName() for b in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()),
    "partitions": spark.conf.get("spark.sql.shuffle.partitions"),
    "kafka": loads("org.apache.spark.sql.kafka010.KafkaSourceProvider"),
}))
jvm.java.lang.System.err.println("the JVM's last line")
"""


def connector_jars(settings) -> list[Path]:
    return jars.ensure(jars.spark_connector_jars(), settings.jars.cache_dir)


def probe(tmp_path: Path, *command: str, **env: str) -> dict:
    (tmp_path / "probe.py").write_text(PROBE)
    environment = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR")}
    environment.update(PYTHONPATH=str(PROJECT), PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", **env)
    done = subprocess.run([*(command or [sys.executable]), str(tmp_path / "probe.py")], env=environment,
                          cwd=PROJECT, capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("probe: ")]
    assert lines, done.stderr[-3000:]
    return {**json.loads(lines[0].removeprefix("probe: ")), "stderr": done.stderr}


def test_the_state_stores_share_one_rocksdb_bound_unless_it_is_zero(spark, settings):
    conf = spark.conf
    assert conf.get("spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage") == "true"
    assert conf.get("spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB") == str(
        settings.spark.state_store_memory_mb)
    assert _bounded_state_store(0) == {}


def test_every_logger_the_log_configuration_names_is_a_class_of_the_twins_spark(spark):
    """conf/spark-log4j2.properties quiets Spark's loggers by class name. pyspark 4.1.1 moved three (the streaming
    runtime to `...streaming.runtime`, the state server to `TransformWithStateInPySparkStateServer`), so the twin
    printed 'Value state version doesn't contain a value' for every new group, 'Current batch is falling behind'
    and AQE's notices at every start: named classes that no longer existed quieted nothing."""
    names = [value for key, value in _properties(LOG_CONFIG).items()
             if key.startswith("logger.") and key.endswith(".name")]
    jvm = spark.sparkContext._jvm
    loader = jvm.Thread.currentThread().getContextClassLoader()

    def exists(name: str) -> bool:
        try:
            return jvm.java.lang.Class.forName(name, False, loader) is not None
        except Exception:
            return False

    assert len(names) >= 8 and [name for name in names if not exists(name)] == []


def test_the_jvm_it_launched_runs_with_few_malloc_arenas(spark):
    assert spark.sparkContext._jvm.java.lang.System.getenv("MALLOC_ARENA_MAX") == MALLOC_ARENAS
    assert spark.sparkContext.getConf().get("spark.executorEnv.MALLOC_ARENA_MAX") == MALLOC_ARENAS


def test_the_jvm_it_launched_collects_with_the_parallel_collector(spark):
    beans = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    assert sorted(bean.getName() for bean in beans) == ["PS MarkSweep", "PS Scavenge"]
    assert "-XX:+UseParallelGC" in spark.sparkContext.getConf().get("spark.executor.defaultJavaOptions")


USERS_OPTIONS = {
    "--driver-java-options": {"PYSPARK_SUBMIT_ARGS": "--driver-java-options -Dshadowtwin.test.user=yes pyspark-shell"},
    "--conf extraJavaOptions": {
        "PYSPARK_SUBMIT_ARGS": "--conf spark.driver.extraJavaOptions=-Dshadowtwin.test.user=yes pyspark-shell"},
    "--conf defaultJavaOptions": {
        "PYSPARK_SUBMIT_ARGS": "--conf 'spark.driver.defaultJavaOptions=-Dshadowtwin.test.admin=yes' pyspark-shell"},
    "spark-defaults.conf": {"SPARK_CONF_DIR": "{conf}"},
}


@pytest.mark.integration
@pytest.mark.parametrize("given", USERS_OPTIONS.values(), ids=USERS_OPTIONS.keys())
def test_the_jvm_options_a_user_gives_pyspark_are_added_to_the_twins(tmp_path, given):
    """The user's JVM options given in PYSPARK_SUBMIT_ARGS took the place of the twin's: the JVM ran with G1, Spark's
    own logging and no Avro limits (a record claiming a gigabyte-long string ran it out of heap); those in
    spark-defaults.conf were dropped. Now the JVM runs with both."""
    (tmp_path / "spark-defaults.conf").write_text(
        "# an administrator's and a user's\n"
        "spark.driver.defaultJavaOptions   -Dshadowtwin.test.admin=yes\n"
        "spark.driver.extraJavaOptions = -Dshadowtwin.test.user=yes\n")
    got = probe(tmp_path, **{k: v.format(conf=tmp_path) for k, v in given.items()})
    properties = got["properties"]
    assert "yes" in (properties["shadowtwin.test.user"], properties["shadowtwin.test.admin"])
    assert properties["log4j2.configurationFile"] == str(LOG_CONFIG)
    assert got["collectors"] == ["PS MarkSweep", "PS Scavenge"]
    assert properties["org.apache.avro.limits.string.maxLength"] == str(OUTPUT_MAX_BYTES)
    assert got["stderr"].splitlines()[-1] == "the JVM's last line", "what the JVM writes is passed on to the end"
    assert "WARNING: Using incubator modules" not in got["stderr"]
    if "SPARK_CONF_DIR" in given:
        assert properties["shadowtwin.test.user"] == properties["shadowtwin.test.admin"] == "yes"


@pytest.mark.integration
def test_what_spark_defaults_conf_says_wins_over_the_settings_and_jars_given_pyspark_join_the_connectors(tmp_path):
    """--jars in PYSPARK_SUBMIT_ARGS took the place of the connector jars (no Kafka source: the twin could not
    start), and spark-defaults.conf's properties gave way to the twin's settings, as they do not under spark-submit."""
    (tmp_path / "spark-defaults.conf").write_text("spark.sql.shuffle.partitions : 3\n")
    (tmp_path / "users.jar").write_bytes((SPARK_HOME / "jars").glob("commons-lang3-*.jar").__next__().read_bytes())
    got = probe(tmp_path, SPARK_CONF_DIR=str(tmp_path),
                PYSPARK_SUBMIT_ARGS=f"--jars {tmp_path / 'users.jar'} pyspark-shell")
    assert got["kafka"] is True
    assert got["partitions"] == "3"


@pytest.mark.integration
def test_the_driver_spark_submit_started_limits_what_avro_reads(tmp_path, settings):
    """Under spark-submit the driver's JVM is running before the twin can give it options; in local mode it decodes
    the events itself, without Avro's limits. Now they are its system properties, the user's own JVM options kept."""
    spark_submit = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", "local[1]"]
    got = probe(tmp_path, *spark_submit, "--jars", ",".join(map(str, connector_jars(settings))),
                "--conf", "spark.driver.extraJavaOptions=-Dshadowtwin.test.user=yes", SPARK_HOME=str(SPARK_HOME))
    assert got["properties"]["org.apache.avro.limits.string.maxLength"] == str(OUTPUT_MAX_BYTES)
    assert got["properties"]["shadowtwin.test.user"] == "yes"


@pytest.mark.integration
def test_spark_submit_without_the_connectors_is_told_in_one_line_to_give_them(tmp_path):
    """The README's `spark-submit shadowtwin/__main__.py twin run` ended in a traceback: 'Failed to find data source:
    kafka' (spark.jars reaches a running driver's executors, not the driver). Now one line says what to add."""
    done = subprocess.run([str(SPARK_HOME / "bin" / "spark-submit"), "--master", "local[1]",
                           str(PROJECT / "shadowtwin" / "__main__.py"), "twin", "run", "--checkpoint", str(tmp_path)],
                          env=dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1",
                                   PYSPARK_PYTHON=sys.executable, PYTHONPATH=str(PROJECT)),
                          capture_output=True, text=True, timeout=300)
    said = done.stdout + done.stderr  # spark-submit passes on the Python's stderr in its stdout
    assert done.returncode == 2, said[-3000:]
    assert ('shadowtwin twin: spark-submit was not given the Kafka and Avro connectors: '
            'add --jars "$(shadowtwin jars list)"\n') in said
    assert "Traceback" not in said


def test_a_properties_file_is_read_as_java_reads_it(tmp_path):
    path = tmp_path / "spark-defaults.conf"
    path.write_text("# a comment \\\n"
                    "! another\n"
                    "   spark.a   one two  \n"
                    "spark.b=x=y\n"
                    "spark.c:\\u0041\\tB\n"
                    "spark.d = first \\\n"
                    "     second\n"
                    "spark\\ e  even\\\\\n"
                    "spark.f\n")
    assert _properties(path) == {"spark.a": "one two", "spark.b": "x=y", "spark.c": "A\tB", "spark.d": "first second",
                                 "spark e": "even\\", "spark.f": ""}
    assert _properties(tmp_path / "none.conf") == {}


def test_pyspark_submit_args_are_read_as_spark_submit_reads_them_and_what_joins_ours_taken_out(monkeypatch, tmp_path):
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    (tmp_path / "mine.conf").write_text("spark.driver.memory 3g\nspark.master local[3]\n")
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f"--conf 'spark.driver.defaultJavaOptions=-Da=1 -Db=2' --jars=a.jar "
                       f"--master local[1] -c spark.x=y --properties-file {tmp_path / 'mine.conf'} --name n pyspark-shell")
    given, kept = _given_by_the_user()
    assert given == {"spark.driver.defaultJavaOptions": "-Da=1 -Db=2", "spark.jars": "a.jar", "spark.master": "local[1]",
                     "spark.x": "y", "spark.driver.memory": "3g"}
    assert kept == f"--master 'local[1]' -c spark.x=y --properties-file {tmp_path / 'mine.conf'} --name n pyspark-shell"


def test_pyspark_submit_args_that_do_not_split_are_named_in_one_line(monkeypatch):
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", '--conf "a=b pyspark-shell')
    with pytest.raises(ConfigError, match="^PYSPARK_SUBMIT_ARGS: No closing quotation: '--conf \"a=b pyspark-shell'$"):
        _given_by_the_user()


def test_a_properties_file_given_pyspark_is_read_instead_of_spark_defaults_conf_unless_it_is_told_to_load_both(
        monkeypatch, tmp_path):
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    (tmp_path / "spark-defaults.conf").write_text("spark.a defaults\nspark.b defaults\n")
    (tmp_path / "mine.conf").write_text("spark.b mine\n")
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f"--properties-file {tmp_path / 'mine.conf'} pyspark-shell")
    assert _given_by_the_user()[0] == {"spark.b": "mine"}
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f"--properties-file {tmp_path / 'mine.conf'} --load-spark-defaults x")
    assert _given_by_the_user()[0] == {"spark.a": "defaults", "spark.b": "mine"}
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "pyspark-shell")
    assert _given_by_the_user()[0] == {"spark.a": "defaults", "spark.b": "defaults"}
