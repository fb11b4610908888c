"""SIGINT (Ctrl-C) and SIGTERM as a request to finish cleanly, for every long-running command.

    stop = stop_on_signals()        # SIGINT and SIGTERM now set `stop` instead of ending the process
    ... loop until stop.is_set() (or stop.wait(seconds)) ..., then close files and flush producers as usual
    return stop.exit_status()       # 130 after SIGINT, 143 after SIGTERM, 0 when nothing asked it to stop

A recording then ends with a complete last block, and ingestion flushes what it has produced.
The exit status follows the shell's convention for a process ended by a signal: 128 + its
number. Used as a context manager, the previous handlers come back at the end (Spark's own
SIGINT handler, which raises inside py4j calls, must not be the one that answers Ctrl-C).
"""

from __future__ import annotations

import signal
import threading

HANDLED = (signal.SIGINT, signal.SIGTERM)


class Stop(threading.Event):
    """An event set by the first SIGINT or SIGTERM, remembering which one."""

    def __init__(self) -> None:
        super().__init__()
        self.signum: int | None = None
        self._previous: dict[int, object] = {}

    def request(self, signum: int, _frame=None) -> None:
        if self.signum is None:
            self.signum = signum
        self.set()

    def exit_status(self, finished: int = 0) -> int:
        """128 + the signal's number when a signal stopped the run, else `finished`."""
        return 128 + self.signum if self.signum is not None else finished

    @property
    def reason(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else "finished"

    def restore(self) -> None:
        """Put back the handlers that were there before."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        self._previous.clear()

    def __enter__(self) -> "Stop":
        return self

    def __exit__(self, *_exc) -> None:
        self.restore()


def stop_on_signals() -> Stop:
    """Install the handlers and return the event they set (in a thread other than the main one,
    where Python allows no handler, the event is returned uninstalled: only `set()` stops it)."""
    stop = Stop()
    if threading.current_thread() is threading.main_thread():
        for signum in HANDLED:
            stop._previous[signum] = signal.signal(signum, stop.request)
    return stop
