"""How fast the codec encodes and decodes events on one core: prints events per second.

    .venv/bin/python -m benchmarks.codec [--seconds 2]

The mix is the sample of every event kind (tests/schemas/samples.py), so the figure is an
average over kinds; encoding (which checks every value's type as it writes), the contract's
field-by-field validation alone (what a record read from JSON goes through), decoding with the
compiled reader (what `codec.decode` uses for a current writer version) and with fastavro
alone (what it uses for an older one).
"""

from __future__ import annotations

import argparse
import time
from typing import Callable

from schemas import codec
from schemas.codec import Codec
from schemas.validate import validate
from tests.schemas.samples import sample_events


def rate(operation: Callable[[object], object], items: list, seconds: float) -> float:
    """Items per second that `operation` processes, repeating `items` for about `seconds`."""
    done, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        for item in items:
            operation(item)
        done += len(items)
    return done / elapsed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement (default %(default)s)")
    args = parser.parse_args(argv)
    events = list(sample_events().values()) * 20
    encoded = [codec.encode(e) for e in events]
    size = sum(map(len, encoded)) / len(encoded)
    print(f"{len(sample_events())} event kinds, {size:.0f} bytes per event on average")
    for label, operation, items in (
        ("encode", codec.encode, events),
        ("validate", validate, events),
        ("decode (compiled)", codec.decode_event, encoded),
        ("decode (fastavro)", Codec(compiled=False).decode_event, encoded),
    ):
        print(f"{label:20} {rate(operation, items, args.seconds):>10,.0f} events/s")


if __name__ == "__main__":
    main()
