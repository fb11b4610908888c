"""The one place that builds the SparkSession for the twin, its tests and its tools.

Local mode by default, any master by configuration; Spark's Kafka and Avro connectors at
exactly the pyspark version (from the jar cache); RocksDB state store with changelog
checkpointing.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from infra import jars
from infra.settings import PROJECT_ROOT, Settings

LOG_CONFIG = PROJECT_ROOT / "conf" / "spark-log4j2.properties"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def build_spark(settings: Settings, *, extra: dict[str, str] | None = None) -> SparkSession:
    """Return the (process-wide) SparkSession configured from `settings`."""
    spark_settings = settings.spark
    connector_jars = jars.ensure(jars.spark_connector_jars(), settings.jars.cache_dir)
    # The Python workers must run the interpreter that has this project installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = spark_settings.master
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(master)
        .appName(spark_settings.app_name)
        .config("spark.jars", ",".join(str(p) for p in connector_jars))
        .config("spark.driver.memory", spark_settings.driver_memory)
        .config("spark.sql.shuffle.partitions", str(spark_settings.shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", str(spark_settings.ui_enabled).lower())
        .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        .config("spark.sql.streaming.checkpointLocation", str(spark_settings.checkpoint_dir))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={LOG_CONFIG}")
    )
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(spark_settings.log_level)
    return spark
