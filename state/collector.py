"""Python's cyclic garbage collector, paused while a stretch of work makes objects by the million.

The model's objects form no cycles worth collecting, but every allocation counts towards the
next collection, and a full one walks every object alive: a replay with 100,000 messages held
spent a quarter of its time there (docs/performance.md, "Model speed"). The reference replay,
the operator's call and a recording's loading run with it paused; what they leave is freed by
reference counting, or by the next collection once it runs again.

`paused(aged=True)` hands what the block made and kept to the oldest generation as it resumes
(frozen and unfrozen: two list moves). Left young, the first allocation after starts a
collection that walks all of it, once (0.5 us per event of a simulated hour written to a file,
docs/performance.md, "Simulator"); aged, a cycle the block left as garbage waits for a full
collection instead, which is why only a one-off run (the simulator's file) asks for it, not the
operator's call, batch after batch in a long-lived worker.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def paused(*, aged: bool = False) -> Iterator[None]:
    """The collector paused for the block, and running again after it if it was before; `aged`:
    with what the block kept in the oldest generation."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            if aged:
                gc.freeze()
                gc.unfreeze()  # the frozen objects go to the oldest generation, not scanned
            gc.enable()
