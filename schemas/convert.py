"""Convert records between JSON Lines (`.jsonl`, `.ndjson`) and Avro object container files (`.avro`).

    python -m schemas.convert day.jsonl day.avro     # JSON Lines -> Avro, with the current schema
    python -m schemas.convert day.avro day.jsonl     # Avro (any compatible writer version) -> JSON Lines

The direction comes from the suffixes. A file holds records of one top-level schema: events
(the `Event` envelope) or one kind of output. An Avro file carries its writer schema, so an
older file is read into the current schema (by `schemas.container`, the one reader and writer
of Avro container files). The output is written to a temporary file and renamed at the end, so
a failed conversion leaves no half-written file.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from schemas import container, jsonl
from schemas.shape import top_level_name

JSONL_SUFFIXES = (".jsonl", ".ndjson")
AVRO_SUFFIXES = (".avro",)


def is_jsonl(path: Path) -> bool:
    """Whether the file's suffix says JSON Lines, in any case (DAY.JSONL as day.jsonl)."""
    return path.suffix.lower() in JSONL_SUFFIXES


def is_avro(path: Path) -> bool:
    """Whether the file's suffix says an Avro container file, in any case."""
    return path.suffix.lower() in AVRO_SUFFIXES


class ConversionError(ValueError):
    """Input that cannot be converted; the message says where."""


def jsonl_to_avro(source: Path, target: Path, *, codec: str = "deflate") -> int:
    """Write the records of a JSON Lines file to an Avro container file; returns how many."""
    with open(source, "rb") as lines:  # decoded line by line: bad bytes are named by their line
        records = jsonl.read(lines, str(source))
        first = next(records, None)
        if first is None:
            raise ConversionError(f"{source}: no records (an Avro file needs their schema)")
        name = top_level_name(type(first))

        def same_schema() -> Iterator[Any]:
            for count, record in enumerate(itertools.chain([first], records), start=1):
                if top_level_name(type(record)) != name:
                    raise ConversionError(f"{source}: record {count} is {type(record).__name__}, not {name} like "
                                          "the first (one file, one schema)")
                yield record

        with _replacing(target, "wb") as out:
            return container.write(out, name, same_schema(), codec=codec)


def avro_to_jsonl(source: Path, target: Path) -> int:
    """Write the records of an Avro container file as JSON Lines; returns how many."""
    with _replacing(target, "w") as out:
        return jsonl.write(container.read(source), out)


def convert(source: Path, target: Path) -> int:
    """Convert in the direction the suffixes give; returns how many records."""
    if is_jsonl(source) and is_avro(target):
        return jsonl_to_avro(source, target)
    if is_avro(source) and is_jsonl(target):
        return avro_to_jsonl(source, target)
    raise ConversionError(
        f"cannot tell the direction from {source.name} -> {target.name}: one file must end in "
        f"{' or '.join(JSONL_SUFFIXES)}, the other in {' or '.join(AVRO_SUFFIXES)}"
    )


@contextmanager
def _replacing(target: Path, mode: str) -> Iterator[Any]:
    """A temporary file beside `target` that replaces it only if the block completes."""
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as out:
            yield out
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m schemas.convert", description=__doc__.split("\n")[0])
    parser.add_argument("source", type=Path, help="the file to read (.jsonl, .ndjson or .avro)")
    parser.add_argument("target", type=Path, help="the file to write (the other format)")
    args = parser.parse_args(argv)
    try:
        count = convert(args.source, args.target)
    except (ConversionError, container.ContainerError, jsonl.JsonlError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{count} records: {args.source} -> {args.target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
