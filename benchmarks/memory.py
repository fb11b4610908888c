"""The resident memory of the Spark JVM and the processes under it (its Python workers), as the
benchmarks measure it: read from /proc, the JVM's and the workers' apart."""

from __future__ import annotations

import os
from pathlib import Path


def spark_rss_bytes(jvm_pid: int) -> tuple[int, int]:
    """Resident bytes of the JVM `jvm_pid` and of every process under it: (JVMs, the others)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    jvm = workers = 0
    todo = [(jvm_pid, b"")]
    while todo:
        pid, parent_cmdline = todo.pop()
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            is_jvm = cmdline.split(b"\0", 1)[0].endswith(b"java")
            # A JVM's child that has not yet replaced itself (the JVM forks to run a command, such
            # as Hadoop's `readlink`) shows the JVM's own pages as its resident set.
            if is_jvm and cmdline == parent_cmdline:
                continue
            size = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
        if is_jvm:
            jvm += size
        else:
            workers += size
        todo += [(child, cmdline) for child in children.get(pid, [])]
    return jvm, workers


def jvm_pid(spark) -> int:
    """The process of the JVM that pyspark launched for `spark`."""
    return spark.sparkContext._gateway.proc.pid
