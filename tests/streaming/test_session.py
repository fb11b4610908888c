"""The SparkSession the twin runs in: what bounds its memory outside the Java heap, its collector."""

from streaming.session import MALLOC_ARENAS, _bounded_state_store


def test_the_state_stores_share_one_rocksdb_bound_unless_it_is_zero(spark, settings):
    conf = spark.conf
    assert conf.get("spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage") == "true"
    assert conf.get("spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB") == str(
        settings.spark.state_store_memory_mb)
    assert _bounded_state_store(0) == {}


def test_the_jvm_it_launched_runs_with_few_malloc_arenas(spark):
    assert spark.sparkContext._jvm.java.lang.System.getenv("MALLOC_ARENA_MAX") == MALLOC_ARENAS
    assert spark.sparkContext.getConf().get("spark.executorEnv.MALLOC_ARENA_MAX") == MALLOC_ARENAS


def test_the_jvm_it_launched_collects_with_the_parallel_collector(spark):
    beans = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    assert sorted(bean.getName() for bean in beans) == ["PS MarkSweep", "PS Scavenge"]
    assert "-XX:+UseParallelGC" in spark.sparkContext.getConf().get("spark.executor.extraJavaOptions")
