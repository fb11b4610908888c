"""The Spark JVM's standard error as the twin passes it on: all of it but what Java and pyspark print
at every start for their own developers.

log4j's lines are quieted in conf/spark-log4j2.properties. These do not go through log4j: Java's
"WARNING: Using incubator modules: jdk.incubator.vector" when the JVM starts, and the five
`print`s (each followed by an empty line) of pyspark's transformWithState driver worker, which
the JVM copies from that Python process's output at each start of the query:
"Starting Streaming TransformWithStateInPandas Python worker.", "... Received UDF from JVM:
<bound method ... at 0x7f29...>", "... State server port/path: 38147, key schema: ..." and so on.

So the twin starts the JVM itself (as pyspark would, `launch_gateway`, which takes what Popen is
given for this) with its standard error into a pipe, which a thread reads and writes to this
process's standard error (file descriptor 2, wherever it points), leaving those lines out.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import re
import termios
import threading
import time

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway

LEFT_OUT = re.compile(rb"WARNING: Using incubator modules: |(Starting )?Streaming TransformWithStateInPandas Python worker")
# How long this process, as it ends, waits for what the JVM wrote to be passed on.
DRAIN_SECONDS = 2.0


def start_jvm(options: dict[str, str]) -> None:
    """Start the JVM that the SparkContext made next will use, with `options` given to
    spark-submit, as SparkSession's builder would have; unless it runs already."""
    if SparkContext._gateway is not None:
        return
    read_end, write_end = os.pipe()
    passing_on = PassingOn(read_end, 2)
    thread = threading.Thread(target=passing_on.run, name="spark-stderr", daemon=True)
    thread.start()
    try:
        gateway = launch_gateway(SparkConf(loadDefaults=False).setAll(options.items()),
                                 popen_kwargs={"stderr": write_end})
    except BaseException:
        os.close(write_end)
        thread.join(10)  # what the JVM said before it ended says why, before the error does
        raise
    os.close(write_end)  # the JVM holds its own copy: the thread reads until the JVM's ends
    atexit.register(passing_on.drain, DRAIN_SECONDS)
    SparkContext._ensure_initialized(gateway=gateway)


class PassingOn:
    """Reads a pipe to its end, writing each line to `out` but those `LEFT_OUT` and an empty line
    right after one (pyspark's worker prints a text that ends in a line break)."""

    def __init__(self, pipe: int, out: int):
        self.pipe: int | None = pipe
        self.out: int | None = out
        self.busy = threading.Lock()  # held from a read until all of it that ends a line is written

    def run(self) -> None:
        partial, after_left_out = b"", False
        while chunk := os.read(self.pipe, 65536):
            with self.busy:
                *lines, partial = (partial + chunk).split(b"\n")
                for line in lines:
                    matched = LEFT_OUT.match(line) is not None
                    if not matched and not (after_left_out and not line.strip()):
                        self._write(line + b"\n")
                    after_left_out = matched
        with self.busy:
            self._write(partial)
            os.close(self.pipe)
            self.pipe = None

    def drain(self, seconds: float) -> None:
        """Wait until what was written to the pipe so far is passed on, `seconds` at most: until
        it is found empty twice, the second time after the thread has taken what it last read."""
        unread, empty = bytearray(4), 0
        deadline = time.monotonic() + seconds
        while empty < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
            with self.busy:
                if self.pipe is None:
                    return
                fcntl.ioctl(self.pipe, termios.FIONREAD, unread)
                empty = empty + 1 if not int.from_bytes(unread, "little") else 0

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view and self.out is not None:
                view = view[os.write(self.out, view):]
        except OSError:  # closed, or a pipe no one reads: read on all the same, or the JVM would block
            self.out = None
