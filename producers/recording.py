"""Recorded event streams on disk: JSON Lines (`.jsonl`, `.ndjson`) or Avro container files (`.avro`).

    events = read_events(Path("day.avro"))         # lazily, in file order
    write_events(Path("day.jsonl"), events)        # returns how many
    for event, kafka_ms in read_recorded(path): ...                 # with each event's Kafka timestamp, or None
    write_events(path, ((event, kafka_ms), ...), timestamps=True)   # what `record` writes

JSON Lines is the form people read and write by hand; Avro is compact and carries its
writer schema, so an older recording is read into the current schema. Avro files are written
and read by `schemas.container`: a recording cut short (a recorder killed mid-write) reads to
its last complete block, then raises a ContainerError naming the file and the offset; a JSON
Lines one reads to its last complete line, then raises a JsonlError naming the file and the line.

A recording made from Kafka keeps each event's Kafka timestamp (an optional field of both
forms, see `schemas.container` and `schemas.jsonl`): what the clock-skew guard of a replay
compares event times against. A recording without it (written by hand, or older) still reads.
"""

from __future__ import annotations

import errno
import itertools
import os
from pathlib import Path
from typing import Callable, Iterable, Iterator

from schemas import container, jsonl
from schemas.convert import AVRO_SUFFIXES, JSONL_SUFFIXES, is_avro, is_jsonl
from schemas.events import Event

SUFFIXES = JSONL_SUFFIXES + AVRO_SUFFIXES


class RecordingNameError(ValueError):
    """A file name whose suffix says no recording format."""

    def __init__(self, path: Path):
        logs = " (a message-tracking log is read by shadowtwin ingest exchange-mtl, which publishes its events)"
        packed = f" (gunzip it first: {path.stem})" if path.suffix == ".gz" and Path(path.stem).suffix in SUFFIXES \
            else ""
        super().__init__(f"{path}: a recording ends in {', '.join(SUFFIXES)}"
                         f"{logs if path.name.upper().startswith('MSGTRK') else packed}")


def read_events(path: Path) -> Iterator[Event]:
    return (event for event, _ in read_recorded(path))


def read_recorded(path: Path, schema: str = "Event") -> Iterator[tuple[Event, int | None]]:
    """(event, its Kafka timestamp in ms or None), lazily, in file order; `schema` names another
    top-level schema (a recording of the alerts topic: "Alert")."""
    if is_jsonl(path):
        with open(path, "rb") as lines:  # decoded line by line: bad bytes are named by their line
            yield from jsonl.read(lines, str(path), timestamps=True, expected=schema)
    elif is_avro(path):
        yield from container.read(path, schema, timestamps=True)
    else:
        raise RecordingNameError(path)


def count_events(path: Path) -> int:
    """How many records the recording holds (a JSON Lines file: its lines that are not blank)."""
    if is_jsonl(check_name(path)):
        with open(path, "rb") as lines:
            return sum(1 for line in lines if line.strip())
    return container.count(path)


def is_recording(path: Path) -> bool:
    """Whether the file's suffix names a recording format (in any case)."""
    return is_jsonl(path) or is_avro(path)


def check_name(path: Path) -> Path:
    """`path` when its suffix names a recording format; else RecordingNameError (before anything is written)."""
    if not is_recording(path):
        raise RecordingNameError(path)
    return path


def check_writable(path: Path) -> Path:
    """`path` when its suffix names a recording format and a file can be written there; else the
    error writing it would raise (RecordingNameError, or an OSError naming the path), without
    creating anything: `record` says so before it waits for its first record, not after."""
    return writable_file(check_name(path))


def writable_file(path: Path, option: str | None = None) -> Path:
    """`path` when a file can be written there, in a folder that exists; else the OSError writing
    it would raise, naming the path (after the `option` that gave it, when given), without creating
    anything. A missing folder is refused, not made: a mistyped path makes no folders."""
    def refused(code: int) -> OSError:
        return OSError(code, os.strerror(code), f"{option} {path}" if option else str(path))
    if path.is_dir():
        raise refused(errno.EISDIR)
    folder = path.parent
    if not folder.exists():
        raise refused(errno.ENOENT)
    if not folder.is_dir():
        raise refused(errno.ENOTDIR)
    if not os.access(path if path.exists() else folder, os.W_OK):
        raise refused(errno.EACCES)
    return path


def write_events(path: Path, events: Iterable, sync: bytes | None = None, *, timestamps: bool = False,
                 schema: str = "Event", encoded: bool = False, stop: Callable[[], bool] | None = None) -> int:
    """Write `events` to `path`; an Avro file's sync marker is random unless `sync` (16 bytes) is
    given, which makes the file the same byte for byte for the same events. With `timestamps`,
    the items are (event, Kafka timestamp in ms or None) pairs. `schema` names the records'
    top-level schema (Alert, RedeliveryCommand, DeadLetter: a recording of an output topic).
    `encoded`: the items are the records' Avro bodies already (`schemas.binary.arguments_encoder`),
    for an Avro file only. `stop`, when given, is asked whether to take no more events: before each
    event, and between blocks of Avro bodies (the file then ends valid, with what was taken)."""
    check_name(path)
    if stop is not None and not encoded:
        events = itertools.takewhile(lambda _: not stop(), events)
    if is_jsonl(path):
        if encoded:
            raise ValueError(f"{path}: Avro bodies go to an Avro file, not JSON Lines")
        with open(path, "w", encoding="utf-8") as out:
            return jsonl.write(events, out, timestamps=timestamps)
    with open(path, "wb") as out:
        if encoded:
            return container.write_encoded(out, schema, events, sync=sync, stop=stop)
        return container.write(out, schema, events, sync=sync, timestamps=timestamps)
