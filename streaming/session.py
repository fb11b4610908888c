"""The one place that builds the SparkSession for the twin, its tests and its tools.

Local mode by default, any master by configuration; Spark's Kafka and Avro connectors at
exactly the pyspark version (from the jar cache); RocksDB state store with changelog
checkpointing and one memory bound for all its stores; few glibc malloc arenas for the JVM;
the parallel garbage collector; Avro's readers bounded by the largest record a topic takes.

On a cluster: the connector jars go to the executors with `spark.jars` (the driver serves
them: no Maven anywhere but once on the driver, `shadowtwin jars fetch`); the executors run
`spark.executor_python`; and under `spark-submit` every property it was given (`--conf`,
`--master`, `--driver-memory` ...) wins over the project's settings, which only fill in what
it did not say; but the JVM options it was given (`spark.driver.extraJavaOptions`,
`spark.executor.extraJavaOptions`) come after the project's own, which they may override.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from infra import jars
from infra.settings import CONF_DIR, Settings
from infra.topics import OUTPUT_MAX_BYTES

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

# A JVM's options given to spark-submit (--conf) are added to the twin's, not put in their place (the Avro limits above).
JAVA_OPTIONS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


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
    submitted = _submitted_conf()
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
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG_CONFIG} {GARBAGE_COLLECTOR} {AVRO_LIMITS}",
        "spark.executor.extraJavaOptions": f"{GARBAGE_COLLECTOR} {AVRO_LIMITS}",
        **(extra or {}),
    }
    builder = SparkSession.builder.config("spark.jars", ",".join(dict.fromkeys(jar_list)))
    if spark_settings.executor_python:
        ours["spark.pyspark.python"] = spark_settings.executor_python
    for key, value in ours.items():
        if key in JAVA_OPTIONS and key in submitted:  # the user's after ours: where they say otherwise, theirs win
            builder = builder.config(key, f"{value} {submitted[key]}")
        elif key not in submitted:
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
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


def _submitted_conf() -> dict[str, str]:
    """What `spark-submit` was told (its driver JVM runs already and holds it), or nothing when
    this process was not started by spark-submit."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return {}
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    return dict(SparkConf().getAll())
