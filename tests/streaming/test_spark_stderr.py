"""The Spark JVM's standard error as the twin passes it on: through real pipes, without Spark."""

import os
import threading

from streaming.spark_stderr import PassingOn

# What every twin run printed at its start (pyspark 4.1.1, Java 17): the JVM's notice, then pyspark's
# transformWithState driver worker's five prints, each a text ending in a line break.
WORKER = "Streaming TransformWithStateInPandas Python worker"
AT_EVERY_START = (
    "WARNING: Using incubator modules: jdk.incubator.vector\n"
    f"Starting {WORKER}.\n\n"
    f"{WORKER} finish init stage of Python runner. Received UDF from JVM: <bound method "
    "TransformWithStateInPandasUdfUtils.transformWithStateUDF of <... object at 0x7f29e8>>, received return type\n\n"
    f"{WORKER} received parameters for UDF. State server port/path: 38147, key schema: StructType([...]).\n\n"
    f"{WORKER} Starting execution of UDF: <bound method ...>.\n\n"
    f"{WORKER} Completed execution of UDF: <bound method ...>.\n\n"
)


def passed_on(*writes: bytes) -> bytes:
    """What PassingOn writes out of the pipe it reads, fed `writes` one after another."""
    pipe_in, pipe_out = os.pipe()
    out_read, out_write = os.pipe()
    thread = threading.Thread(target=PassingOn(pipe_in, out_write).run)
    thread.start()
    for data in writes:
        os.write(pipe_out, data)
    os.close(pipe_out)
    thread.join(10)
    os.close(out_write)
    with os.fdopen(out_read, "rb") as out:
        return out.read()


def test_the_lines_java_and_pyspark_print_at_every_start_are_left_out_and_spark_own_lines_kept():
    spark = ("26/11/28 16:00:01 WARN KafkaDataConsumer: KafkaDataConsumer is not running in UninterruptibleThread.\n"
             "\n"
             "java.lang.OutOfMemoryError: Java heap space\n")
    assert passed_on(AT_EVERY_START.encode(), spark.encode()) == spark.encode()


def test_only_the_empty_line_right_after_a_left_out_line_goes_with_it():
    assert passed_on(f"{WORKER} x.\n\n\nnext\n".encode()) == b"\nnext\n"


def test_lines_split_across_reads_and_a_last_line_without_a_break_are_passed_on_whole():
    worker = f"Starting {WORKER}.\n\n".encode()
    assert passed_on(b"Exception in thr", b"ead \"main\"\n" + worker[:20], worker[20:] + b"the end") \
        == b"Exception in thread \"main\"\nthe end"


def test_drain_waits_until_what_was_written_is_passed_on():
    """As the twin's process ends, the JVM still runs (it ends when its standard input closes): what it wrote
    last, an error as the twin stops, was lost with the thread that passes it on."""
    pipe_in, pipe_out = os.pipe()
    out_read, out_write = os.pipe()
    passing_on = PassingOn(pipe_in, out_write)
    os.write(pipe_out, b"ERROR the last line\n" * 1000)
    threading.Timer(0.2, passing_on.run).start()
    passing_on.drain(10)
    os.set_blocking(out_read, False)
    got = b""
    while len(got) < 20_000:
        got += os.read(out_read, 65536)
    assert got == b"ERROR the last line\n" * 1000
    os.close(pipe_out)
    passing_on.drain(10)  # read to its end: nothing to wait for


def test_with_no_one_reading_what_it_writes_it_reads_on_to_the_end():
    """`shadowtwin twin run 2>&1 | head`: once head ended, the thread died writing, and the JVM would block when the
    pipe was full (64 KB of its log). Now the thread reads on, to the end of the JVM's output."""
    pipe_in, pipe_out = os.pipe()
    out_read, out_write = os.pipe()
    os.close(out_read)
    threading.Thread(target=PassingOn(pipe_in, out_write).run, daemon=True).start()

    def jvm() -> None:
        for _ in range(100):
            os.write(pipe_out, b"WARN a line of the JVM's log\n" * 1000)
        os.close(pipe_out)

    writing = threading.Thread(target=jvm, daemon=True)
    writing.start()
    writing.join(10)
    assert not writing.is_alive(), "the JVM's writes blocked"
