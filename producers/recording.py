"""Recorded event streams on disk: JSON Lines (`.jsonl`, `.ndjson`) or Avro container files (`.avro`).

    events = read_events(Path("day.avro"))         # lazily, in file order
    write_events(Path("day.jsonl"), events)        # returns how many

JSON Lines is the form people read and write by hand; Avro is compact and carries its
writer schema, so an older recording is read into the current schema.

Avro files are written and read with the codecs compiled per class (`schemas.binary`),
several times faster than fastavro's record by record: `write_events` writes the container
format itself (header, then deflate-compressed blocks of encoded events, each followed by
the file's sync marker); `read_events` takes the decompressed blocks from fastavro and
reads their records with the compiled reader when the file's writer schema is the current
Event schema. A file of an older version, and any block the compiled reader refuses, is
read by fastavro as before (the first resolves the writer schema, the second says what is
wrong or reads what fastavro tolerates).
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path
from typing import IO, Iterable, Iterator

import fastavro

from schemas import binary, catalogue, jsonl
from schemas.codec import default_codec
from schemas.convert import AVRO_SUFFIXES, JSONL_SUFFIXES
from schemas.datum import from_datum
from schemas.events import Event

CONTAINER_MAGIC = b"Obj\x01"
SYNC_SIZE = 16
BLOCK_BYTES = 64 * 1024  # encoded bytes per block before compression, about Avro Java's default sync interval


def read_events(path: Path) -> Iterator[Event]:
    if path.suffix in JSONL_SUFFIXES:
        with open(path, encoding="utf-8") as lines:
            yield from jsonl.read(lines, str(path))
    elif path.suffix in AVRO_SUFFIXES:
        with open(path, "rb") as data:
            yield from _read_avro(data)
    else:
        raise ValueError(f"{path}: a recording ends in {', '.join(JSONL_SUFFIXES + AVRO_SUFFIXES)}")


def write_events(path: Path, events: Iterable[Event], sync: bytes | None = None) -> int:
    """Write `events` to `path`; an Avro file's sync marker is random unless `sync` (16 bytes) is
    given, which makes the file the same byte for byte for the same events."""
    if path.suffix in JSONL_SUFFIXES:
        with open(path, "w", encoding="utf-8") as out:
            return jsonl.write(events, out)
    if path.suffix in AVRO_SUFFIXES:
        with open(path, "wb") as out:
            return _write_avro(out, events, sync)
    raise ValueError(f"{path}: a recording ends in {', '.join(JSONL_SUFFIXES + AVRO_SUFFIXES)}")


# ---- Avro container files -------------------------------------------------------------

def _read_avro(data: IO[bytes]) -> Iterator[Event]:
    current = catalogue.default().current("Event")
    options = dict(return_record_name=True, return_record_name_override=True)
    blocks = fastavro.block_reader(data, current.schema, **options)
    if catalogue.fingerprint(json.loads(blocks.metadata["avro.schema"])) != current.fingerprint:
        data.seek(0)  # an older writer version: fastavro resolves it to the current one
        for datum in fastavro.reader(data, current.schema, **options):
            yield from_datum("Event", datum)
        return
    read = binary.top_level_reader("Event")
    for block in blocks:
        events = _read_block(read, block.bytes_.getvalue(), block.num_records)
        if events is None:
            events = [from_datum("Event", datum) for datum in block]
        yield from events


def _read_block(read: binary.Read, body: bytes, count: int) -> list[Event] | None:
    """The `count` events that make up `body`; None when it is not exactly that."""
    events, pos = [], 0
    try:
        for _ in range(count):
            event, pos = read(body, pos)
            events.append(event)
    except Exception:  # noqa: BLE001 - not valid records: fastavro reads the block again, and says why
        return None
    return events if pos == len(body) else None


def _write_avro(out: IO[bytes], events: Iterable[Event], sync: bytes | None = None) -> int:
    """Write an Avro container file of the current Event schema, deflate-compressed; returns how many events."""
    codec, sync = default_codec(), sync or os.urandom(SYNC_SIZE)
    if len(sync) != SYNC_SIZE:
        raise ValueError(f"an Avro sync marker is {SYNC_SIZE} bytes, not {len(sync)}")
    schema = catalogue.default().current("Event").json.encode()
    out.write(CONTAINER_MAGIC + _metadata({"avro.schema": schema, "avro.codec": b"deflate"}) + sync)
    block, in_block, count = bytearray(), 0, 0
    for count, event in enumerate(events, start=1):
        if not isinstance(event, Event):
            raise TypeError(f"record {count} is {type(event).__name__}, not an event")
        codec.write_body(event, block)
        in_block += 1
        if len(block) >= BLOCK_BYTES:
            _write_block(out, block, in_block, sync)
            block, in_block = bytearray(), 0
    if in_block:
        _write_block(out, block, in_block, sync)
    return count


def _metadata(entries: dict[str, bytes]) -> bytes:
    """The header's metadata: an Avro map of bytes, in one block."""
    out = bytearray(binary.varint(len(entries)))
    for key, value in entries.items():
        binary.write_string(key, out)
        binary.write_bytes(value, out)
    out.append(0)
    return bytes(out)


def _write_block(out: IO[bytes], block: bytearray, count: int, sync: bytes) -> None:
    deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)  # raw deflate, as Avro specifies
    compressed = deflate.compress(block) + deflate.flush()
    out.write(binary.varint(count) + binary.varint(len(compressed)) + compressed + sync)
