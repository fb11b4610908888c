"""Recorded event streams on disk: JSON Lines (`.jsonl`, `.ndjson`) or Avro container files (`.avro`).

    events = read_events(Path("day.avro"))         # lazily, in file order
    write_events(Path("day.jsonl"), events)        # returns how many

JSON Lines is the form people read and write by hand; Avro is compact and carries its
writer schema, so an older recording is read into the current schema. Avro files are written
and read by `schemas.container`: a recording cut short (a recorder killed mid-write) reads to
its last complete block, then raises a ContainerError naming the file and the offset.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator

from schemas import container, jsonl
from schemas.convert import AVRO_SUFFIXES, JSONL_SUFFIXES
from schemas.events import Event

SUFFIXES = JSONL_SUFFIXES + AVRO_SUFFIXES


class RecordingNameError(ValueError):
    """A file name whose suffix says no recording format."""

    def __init__(self, path: Path):
        super().__init__(f"{path}: a recording ends in {', '.join(SUFFIXES)}")


def read_events(path: Path) -> Iterator[Event]:
    if path.suffix in JSONL_SUFFIXES:
        with open(path, encoding="utf-8") as lines:
            yield from jsonl.read(lines, str(path))
    elif path.suffix in AVRO_SUFFIXES:
        yield from container.read(path, "Event")
    else:
        raise RecordingNameError(path)


def check_name(path: Path) -> Path:
    """`path` when its suffix names a recording format; else RecordingNameError (before anything is written)."""
    if path.suffix not in SUFFIXES:
        raise RecordingNameError(path)
    return path


def write_events(path: Path, events: Iterable[Event], sync: bytes | None = None) -> int:
    """Write `events` to `path`; an Avro file's sync marker is random unless `sync` (16 bytes) is
    given, which makes the file the same byte for byte for the same events."""
    check_name(path)
    if path.suffix in JSONL_SUFFIXES:
        with open(path, "w", encoding="utf-8") as out:
            return jsonl.write(events, out)
    with open(path, "wb") as out:
        return container.write(out, "Event", events, sync=sync)
