"""Python's cyclic garbage collector, paused while a stretch of work makes objects by the million.

The model's objects form no cycles worth collecting, but every allocation counts towards the
next collection, and a full one walks every object alive: a replay with 100,000 messages held
spent a quarter of its time there (docs/performance.md, "Model speed"). The reference replay,
the operator's call and a recording's loading run with it paused; what they leave is freed by
reference counting, or by the next collection once it runs again.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def paused() -> Iterator[None]:
    """The collector paused for the block, and running again after it if it was before."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
