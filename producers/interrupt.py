"""SIGINT (Ctrl-C) and SIGTERM as a request to finish cleanly, for the long-running commands.

    stop = stop_on_signals()        # SIGINT and SIGTERM now set `stop` instead of ending the process
    ... loop until stop.is_set() (or stop.wait(seconds)) ..., then close files and flush producers as usual
    return stop.exit_status()       # 130 after SIGINT, 143 after SIGTERM, 0 when nothing asked it to stop

A recording then ends with a complete last block, and ingestion flushes what it has produced.
The exit status follows the shell's convention for a process ended by a signal: 128 + its number.
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


def stop_on_signals() -> Stop:
    """Install the handlers (main thread only) and return the event they set."""
    stop = Stop()
    for signum in HANDLED:
        signal.signal(signum, stop.request)
    return stop
