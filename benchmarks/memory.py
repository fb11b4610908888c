"""The resident memory and the CPU time of the Spark JVM and the processes under it (its Python
workers), as the benchmarks measure them: read from /proc, the JVM's and the workers' apart."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

_TICKS = os.sysconf("SC_CLK_TCK")


def spark_rss_bytes(jvm_pid: int) -> tuple[int, int]:
    """Resident bytes of the JVM `jvm_pid` and of every process under it: (JVMs, the others)."""
    jvm = workers = 0
    for pid, is_jvm in _tree(jvm_pid):
        try:
            size = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
        if is_jvm:
            jvm += size
        else:
            workers += size
    return jvm, workers


def spark_cpu_seconds(jvm_pid: int) -> tuple[float, float]:
    """CPU seconds (user and system) the JVM `jvm_pid` and every process under it have used so far,
    those of their children that ended included: (JVMs, the others). A JVM's ended children are
    Python workers it launched and reaped, so their time counts with the others."""
    jvm = workers = 0.0
    for pid, is_jvm in _tree(jvm_pid):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            own = (int(fields[11]) + int(fields[12])) / _TICKS  # utime stime
            ended = (int(fields[13]) + int(fields[14])) / _TICKS  # cutime cstime
        except (OSError, IndexError, ValueError):
            continue
        if is_jvm:
            jvm += own
            workers += ended
        else:
            workers += own + ended
    return jvm, workers


def _tree(jvm_pid: int) -> Iterator[tuple[int, bool]]:
    """(pid, whether it is a JVM) of `jvm_pid` and every process under it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    todo = [(jvm_pid, b"")]
    while todo:
        pid, parent_cmdline = todo.pop()
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        is_jvm = cmdline.split(b"\0", 1)[0].endswith(b"java")
        # A JVM's child that has not yet replaced itself (the JVM forks to run a command, such
        # as Hadoop's `readlink`) shows the JVM's own pages as its resident set.
        if is_jvm and cmdline == parent_cmdline:
            continue
        yield pid, is_jvm
        todo += [(child, cmdline) for child in children.get(pid, [])]


def jvm_pid(spark) -> int:
    """The process of the JVM that pyspark launched for `spark`."""
    return spark.sparkContext._gateway.proc.pid
