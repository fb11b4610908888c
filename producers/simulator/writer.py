"""A simulation's Avro file written by a second process, while the first runs the simulation.

    count = write_forked(path, Simulation(topology, seed, flat=True).events(), sync=..., stop=...)

The simulation's process makes each event a flat tuple of builtins (`schemas.binary.arguments_flattener`,
checked as the encoder checks), and sends them in batches of `BATCH`, marshalled, through a pipe
to a forked child, which encodes them (`schemas.container.write_flat`: the same blocks, the same
bytes as `write_encoded`), deflates and writes the file: on two cores the encoding costs the
simulation nothing. `stop` is asked after each batch; the child ends the file when the pipe
closes, whatever closed it (the end, a stop, an error in the simulation), so the file is valid.
The child ignores SIGINT and SIGTERM: the simulation's process answers them and closes the pipe.
What the child could not write raises in the caller: its exception, pickled back. `forked` is the
split itself, which `producers.simulator.sender` uses to publish a simulation.
"""

from __future__ import annotations

import fcntl
import functools
import itertools
import marshal
import os
import pickle
import signal
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Iterator

from schemas import container

BATCH = 100  # events per message through the pipe: few enough that what they are made of stays in the caches
PIPE_BYTES = 1 << 20  # the pipe's buffer: several batches, so neither side waits on the other's every one


def available() -> bool:
    """Whether a second process can write the file: fork exists, and a second core to run it."""
    return hasattr(os, "fork") and len(os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity")
                                       else range(os.cpu_count() or 1)) > 1


def write_forked(path: Path, events: Iterable[tuple], *, sync: bytes,
                 stop: Callable[[], bool] | None = None) -> int:
    """Write the flat `events` as an Avro container file at `path` in a forked child; returns how many."""
    container.flat_writers()  # compiled here, once, not in every child
    return forked(functools.partial(_write, path, sync), events, lambda batch: stop is not None and stop())


def _write(path: Path, sync: bytes, events: Iterator[tuple]) -> int:
    with open(path, "wb") as out:
        return container.write_flat(out, events, sync=sync)


def forked(work: Callable[[Iterator[tuple]], Any], events: Iterable[tuple], after: Callable[[list], bool]) -> Any:
    """`work(the events)` run in a forked child, the events sent to it in batches; `after(batch)`, asked
    after each one is sent, says whether to stop. Returns what `work` returned (pickled back); what it
    raised is raised here. The child gets the events sent before the pipe closed (the end, a stop,
    an error here), whatever closed it; `work` may also stop reading (the rest is not sent)."""
    reading, sending = os.pipe()
    answer, answering = os.pipe()
    if hasattr(fcntl, "F_SETPIPE_SZ"):
        try:
            fcntl.fcntl(sending, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except OSError:  # above the system's limit: the default buffer does, a little slower
            pass
    pid = os.fork()
    if pid == 0:
        os.close(sending)
        os.close(answer)
        _work_and_exit(work, reading, answering)
    os.close(reading)
    os.close(answering)
    try:
        with os.fdopen(sending, "wb", buffering=PIPE_BYTES) as pipe:
            events = iter(events)
            while batch := list(itertools.islice(events, BATCH)):
                _send(pipe, batch)
                if after(batch):
                    break
    except BrokenPipeError:  # the child stopped reading: its answer says why
        pass
    finally:
        with os.fdopen(answer, "rb") as answered:
            report = answered.read()  # until the child exits
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if status != 0:
        raise _exception(report, status)
    return pickle.loads(report)


def _send(pipe: BinaryIO, batch: list[tuple]) -> None:
    data = marshal.dumps(batch)
    pipe.write(len(data).to_bytes(8, "little"))
    pipe.write(data)


def _received(pipe: BinaryIO) -> Iterator[tuple]:
    while size := pipe.read(8):
        yield from marshal.loads(pipe.read(int.from_bytes(size, "little")))


def _work_and_exit(work: Callable[[Iterator[tuple]], Any], reading: int, answering: int) -> None:
    """The child: does `work` with what comes through the pipe, answers, then exits (0 when done)."""
    status = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with os.fdopen(reading, "rb", buffering=PIPE_BYTES) as pipe:
            report = pickle.dumps(work(_received(pipe)))
        status = 0
    except BaseException as exc:  # noqa: BLE001 - raised again in the parent
        try:
            report = pickle.dumps(exc)
        except Exception:  # noqa: BLE001 - an exception that does not pickle: its words
            report = pickle.dumps(RuntimeError(repr(exc)))
    finally:
        try:
            with os.fdopen(answering, "wb") as answered:
                answered.write(report)
        finally:
            os._exit(status)


def _exception(report: bytes, status: int) -> BaseException:
    try:
        return pickle.loads(report)
    except Exception:  # noqa: BLE001 - nothing readable came back (the child was killed)
        return RuntimeError(f"the simulation's second process ended with status {status}")
