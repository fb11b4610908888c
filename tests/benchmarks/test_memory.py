"""The benchmarks' memory reading (benchmarks/memory.py) on real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from benchmarks.memory import spark_cpu_seconds, spark_rss_bytes

HOLDER = """
import os, sys, time
ballast = bytearray(200 * 2**20)
for at in range(0, len(ballast), 4096):
    ballast[at] = 1
if os.fork() == 0:
    time.sleep(30)  # a child that has not executed anything yet: the parent's pages, shared
    os._exit(0)
print("ready", flush=True)
time.sleep(30)
"""


def run_holder(executable: str) -> subprocess.Popen:
    holder = subprocess.Popen([executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert holder.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    return holder


def test_a_jvms_child_that_has_not_executed_anything_is_not_counted_again(tmp_path):
    java = tmp_path / "java"  # a process whose command line names java, as the JVM's does
    java.symlink_to(sys.executable)
    holder = run_holder(str(java))
    try:
        jvm, others = spark_rss_bytes(holder.pid)
    finally:
        os.killpg(holder.pid, signal.SIGKILL)  # the holder and its child
    assert 200 * 2**20 <= jvm < 2 * 200 * 2**20, jvm
    assert others == 0


def test_the_processes_under_the_jvm_are_counted_apart(tmp_path):
    holder = run_holder(sys.executable)  # not a JVM: a Python worker and its fork both count
    try:
        jvm, others = spark_rss_bytes(holder.pid)
    finally:
        os.killpg(holder.pid, signal.SIGKILL)  # the holder and its child
    assert jvm == 0
    assert others >= 2 * 200 * 2**20, others


BUSY = """
import os, time
if os.fork() == 0:
    end = time.process_time() + 1.0
    while time.process_time() < end:
        pass
    os._exit(0)
os.wait()  # the child's CPU time is now the parent's cutime
print("ready", flush=True)
time.sleep(30)
"""


def test_the_cpu_time_of_the_processes_under_the_jvm_counts_their_ended_children():
    holder = subprocess.Popen([sys.executable, "-c", BUSY], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        jvm, others = spark_cpu_seconds(holder.pid)
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
    assert jvm == 0
    # /proc counts in clock ticks, sampled: a second of the child's CPU may read a few ticks short
    assert 0.8 <= others < 5, others


def test_the_cpu_time_of_a_jvms_ended_child_counts_with_the_processes_under_it(tmp_path):
    java = tmp_path / "java"  # a JVM that reaps a Python worker: the worker's CPU is not the JVM's
    java.symlink_to(sys.executable)
    holder = subprocess.Popen([str(java), "-c", BUSY], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        jvm, others = spark_cpu_seconds(holder.pid)
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
    assert jvm < 0.5, jvm
    assert 0.8 <= others < 5, others
