"""Ctrl-C as a request to finish cleanly, for the long-running producer commands.

    stop = stop_on_interrupt()      # SIGINT now sets `stop` instead of raising KeyboardInterrupt
    ... loop until stop.is_set() ..., then close files and flush producers as usual

A recording then ends with a complete last block, and ingestion flushes what it has produced.
"""

from __future__ import annotations

import signal
import threading


def stop_on_interrupt() -> threading.Event:
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda signum, frame: stop.set())
    return stop
