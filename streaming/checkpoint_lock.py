"""One twin per checkpoint: a second twin started on a checkpoint in use is refused in one line.

Two queries on one checkpoint fail each other's batches (Spark's CONCURRENT_STREAM_LOG_UPDATE,
with a stack trace, again at each of the twin's restarts). The twin holds an exclusive `flock` on
`<checkpoint>/twin.lock` (holding its pid, to name it) while it runs; the system lets go of it
when the process ends, however it ends.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from infra.config import ConfigError


def lock_checkpoint(checkpoint_dir: Path) -> IO[str]:
    """The open lock file of `checkpoint_dir` (close it to let go), or ConfigError naming the twin that holds it."""
    lock = open(checkpoint_dir / "twin.lock", "a+", encoding="utf-8")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.seek(0)
        holder = lock.read().strip() or "?"
        lock.close()
        raise ConfigError(f"checkpoint {checkpoint_dir}: in use by another twin (pid {holder}); two twins on one"
                          f" checkpoint fail each other's batches: stop that one, or give this one a checkpoint of its"
                          f" own (--checkpoint DIR)") from None
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock
