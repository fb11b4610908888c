"""The one place that builds the SparkSession for the twin, its tests and its tools.

Local mode by default, any master by configuration; Spark's Kafka and Avro connectors at
exactly the pyspark version (from the jar cache); RocksDB state store with changelog
checkpointing and one memory bound for all its stores; few glibc malloc arenas for the JVM;
the parallel garbage collector; Avro's readers bounded by the largest record a topic takes; the
JVM's standard error without what Java and pyspark print at every start (streaming/spark_stderr.py).

On a cluster: the connector jars go to the executors with `spark.jars` (the driver serves
them: no Maven anywhere but once on the driver, `shadowtwin jars fetch`); the executors run
`spark.executor_python`; and every property the user gave Spark its own ways (spark-submit's
`--conf`, `--master`, `--driver-memory` ...; `PYSPARK_SUBMIT_ARGS`; `spark-defaults.conf` or
the `--properties-file`) wins over the project's settings, which only fill in what they did not
say. The project's JVM options are Spark's default ones (`spark.{driver,executor}.defaultJavaOptions`):
the user's `extraJavaOptions` (or `--driver-java-options`) come after them, and default options an
administrator set come after the project's, so either may override ours and neither loses them.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pyspark.sql import SparkSession

from infra import jars
from infra.config import ConfigError
from infra.settings import CONF_DIR, Settings
from infra.topics import OUTPUT_MAX_BYTES
from streaming import spark_stderr

KAFKA_SOURCE = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
LOG_CONFIG = CONF_DIR / "spark-log4j2.properties"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
# glibc gives threads that allocate natively (RocksDB, Arrow, Netty) their own malloc arenas, up
# to eight per core, and keeps what they once held: with 400,000 messages held, 33 arena heaps of
# 64 MB held 2.1 GB of the Spark JVM's 4.7 GB resident (docs/performance.md).
MALLOC_ARENAS = "2"
# The throughput collector, not the JDK's default G1: the twin's heap holds little for long (the
# state is in RocksDB, Arrow's buffers off the heap), and G1's concurrent work and write barriers
# cost the twin's JVM ~15 % more CPU per record (docs/performance.md, 2026-11-27 fourth session).
GARBAGE_COLLECTOR = "-XX:+UseParallelGC"
# Avro's reader allocates what a string's, bytes' or array's length says before reading it, up to 2 GB by
# default: a 20-byte event claiming a 1 GB string ran the JVM out of heap, which ended the SparkContext and
# the twin at every restart. No value can be longer than the largest record a topic of the twin takes; past
# that `from_avro` fails, and the record is a dead letter (corrupt body).
AVRO_LIMITS = " ".join(f"-Dorg.apache.avro.limits.{kind}.maxLength={OUTPUT_MAX_BYTES}"
                       for kind in ("string", "bytes", "collectionItems"))

# Spark puts these before a JVM's extraJavaOptions. Where the user gave them too, theirs are added
# after the twin's, not put in their place (the Avro limits above).
JAVA_OPTIONS = ("spark.driver.defaultJavaOptions", "spark.executor.defaultJavaOptions")
# What the user gives Spark that is added to the twin's, not put in its place: the connector jars too.
ADDED_TO_OURS = (*JAVA_OPTIONS, "spark.jars")
SUBMIT_ARGS = "PYSPARK_SUBMIT_ARGS"
# spark-submit's options (as pyspark reads PYSPARK_SUBMIT_ARGS) that say a property or where they are.
SUBMIT_OPTIONS = {"--conf": None, "-c": None, "--master": "spark.master", "--jars": "spark.jars",
                  "--properties-file": "--properties-file"}


def build_spark(settings: Settings, *, extra: dict[str, str] | None = None) -> SparkSession:
    """Return the (process-wide) SparkSession configured from `settings`."""
    spark_settings = settings.spark
    connector_jars = jars.ensure(jars.spark_connector_jars(), settings.jars.cache_dir)
    # The Python workers must run an interpreter that has this project installed.
    os.environ.setdefault("PYSPARK_PYTHON", spark_settings.executor_python or sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Read by glibc when a process starts: the JVM launched below (not this process, nor a JVM
    # that spark-submit started already) and, on a cluster, the executors.
    os.environ.setdefault("MALLOC_ARENA_MAX", MALLOC_ARENAS)
    submitted, submit_args = _given_by_the_user()
    master = submitted.get("spark.master", spark_settings.master)
    if master.startswith(("local", "spark://127.0.0.1")):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    jar_list = [str(p) for p in connector_jars] + [j for j in submitted.get("spark.jars", "").split(",") if j]
    ours = {
        "spark.master": spark_settings.master,
        "spark.app.name": spark_settings.app_name,
        "spark.driver.memory": spark_settings.driver_memory,
        "spark.sql.shuffle.partitions": str(spark_settings.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.executorEnv.MALLOC_ARENA_MAX": os.environ["MALLOC_ARENA_MAX"],
        "spark.ui.enabled": str(spark_settings.ui_enabled).lower(),
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        **_bounded_state_store(spark_settings.state_store_memory_mb),
        "spark.sql.streaming.checkpointLocation": str(spark_settings.checkpoint_dir),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.defaultJavaOptions": f"-Dlog4j2.configurationFile={LOG_CONFIG} {GARBAGE_COLLECTOR} {AVRO_LIMITS}",
        "spark.executor.defaultJavaOptions": f"{GARBAGE_COLLECTOR} {AVRO_LIMITS}",
        **(extra or {}),
    }
    options = {"spark.jars": ",".join(dict.fromkeys(jar_list))}
    if spark_settings.executor_python:
        ours["spark.pyspark.python"] = spark_settings.executor_python
    for key, value in ours.items():
        if key in JAVA_OPTIONS and key in submitted:  # the user's after ours: where they say otherwise, theirs win
            options[key] = f"{value} {submitted[key]}"
        elif key not in submitted:
            options[key] = value
    started_by_spark_submit = "PYSPARK_GATEWAY_PORT" in os.environ
    with _environment(SUBMIT_ARGS, submit_args):
        if not started_by_spark_submit:
            spark_stderr.start_jvm(options)
        spark = SparkSession.builder.config(map=options).getOrCreate()
    if started_by_spark_submit and not spark.sparkContext._jvm.org.apache.spark.util.Utils.classIsLoadable(KAFKA_SOURCE):
        # spark.jars reaches a running driver's executors, not the driver itself.
        raise ConfigError('spark-submit was not given the Kafka and Avro connectors: '
                          'add --jars "$(shadowtwin jars list)"')
    _limit_avro_in_the_driver(spark)
    spark.sparkContext.setLogLevel(spark_settings.log_level)
    return spark


def _bounded_state_store(memory_mb: int) -> dict[str, str]:
    """One memory bound for RocksDB across all the state stores of an executor. Without it each
    store has its own write buffers and cache: 1.2-1.3 GB reported by RocksDB in the twin
    benchmark, with 200,000-430,000 messages held (docs/performance.md)."""
    if memory_mb == 0:
        return {}
    return {"spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage": "true",
            "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB": str(memory_mb)}


def _given_by_the_user() -> tuple[dict[str, str], str | None]:
    """What the user told Spark its own ways, and `PYSPARK_SUBMIT_ARGS` without what is added to
    the twin's (`ADDED_TO_OURS`; None: as it is). Under spark-submit its driver JVM runs already and holds it
    all; else pyspark starts one with spark-submit, the builder's `--conf`s first, then the
    variable's words, later ones winning, and what neither said from the properties file."""
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()
        return dict(SparkConf().getAll()), None
    given, kept, properties_file, taken_out = {}, [], None, False
    try:
        words = shlex.split(os.environ.get(SUBMIT_ARGS, ""))
    except ValueError as exc:  # as pyspark would split it
        raise ConfigError(f"{SUBMIT_ARGS}: {exc}: {os.environ[SUBMIT_ARGS]!r}") from None
    while words:
        option, inline, value = words.pop(0).partition("=")
        if option not in SUBMIT_OPTIONS or not (inline or words):
            kept.append(option + inline + value)
            continue
        value = value if inline else words.pop(0)
        key, setting = value.partition("=")[::2] if option in ("--conf", "-c") else (SUBMIT_OPTIONS[option], value)
        if key == "--properties-file":
            properties_file = Path(value)
        else:
            given[key] = setting
        if key in ADDED_TO_OURS:
            taken_out = True
        else:
            kept += [option, value]
    defaults = _properties(_spark_conf_dir() / "spark-defaults.conf") \
        if properties_file is None or "--load-spark-defaults" in kept else {}
    if properties_file is not None:  # read instead of spark-defaults.conf, or winning over it
        defaults.update(_properties(properties_file))
    return {**defaults, **given}, (shlex.join(kept) if taken_out else None)


def _spark_conf_dir() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(os.environ.get("SPARK_CONF_DIR") or Path(_find_spark_home()) / "conf")


def _properties(path: Path) -> dict[str, str]:
    """A Java properties file as Spark reads one (`Properties.load`, values trimmed); none: nothing."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return {}
    found, logical = {}, ""
    for natural in lines:
        line = natural.lstrip(" \t\f")
        if not logical and (not line or line[0] in "#!"):
            continue
        logical += line
        if (len(line) - len(line.rstrip("\\"))) % 2:  # an odd backslash at the end: the line goes on
            logical = logical[:-1]
            continue
        key, value = re.match(r"((?:\\.|[^ \t\f=:\\])*)[ \t\f]*[=:]?(.*)", logical).groups()
        found[_unescaped(key)] = _unescaped(value).strip()
        logical = ""
    return found


def _unescaped(text: str) -> str:
    escapes = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", lambda m: chr(int(m[1][1:], 16)) if len(m[1]) == 5
                  else escapes.get(m[1], m[1]), text)


@contextmanager
def _environment(name: str, value: str | None) -> Iterator[None]:
    """`name` set to `value` meanwhile (None: left as it is)."""
    if value is None:
        yield
        return
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


def _limit_avro_in_the_driver(spark: SparkSession) -> None:
    """Under spark-submit the driver's JVM started before the twin could give it options, and in
    local mode it decodes the events itself: Avro's limits are set as its system properties, which
    Avro reads once, when it first checks a length (no record has been decoded yet). A limit the
    user set stays."""
    system = spark.sparkContext._jvm.java.lang.System
    for option in AVRO_LIMITS.split():
        key, _, value = option.removeprefix("-D").partition("=")
        if system.getProperty(key) is None:
            system.setProperty(key, value)
