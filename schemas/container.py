"""Avro object container files (`.avro`): the one writer and the one reader of them in the project.

    count = write(out, "Event", events)                 # header, then deflate blocks, each ending in the sync marker
    for record in read(Path("day.avro"), "Event"): ...  # lazily, in file order, into the current schema

A file holds the records of one top-level schema (`Event`, `Alert`, ...) and carries its writer
schema, so an older file is read into the current schema. Records of the current schema version
are written and read with the codecs `schemas.binary` compiles per class; an older version, and
any block the compiled reader refuses, is read with fastavro, which resolves the writer schema
and reads what it tolerates.

The reader parses the container itself, block by block, so a file cut short (a recorder killed
mid-write, a copy interrupted) or damaged yields every record up to its last complete block and
then raises a ContainerError that names the file and the byte offset where the cut or damage is.
A writer writes each block whole when it is full and at the end: stopping it between blocks
leaves a valid file.
"""

from __future__ import annotations

import io
import json
import os
import zlib
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

import fastavro

from schemas import binary, catalogue
from schemas.codec import default_codec, without_logical_types
from schemas.datum import from_datum
from schemas.shape import TOP_LEVEL_NAMES, top_level_name

MAGIC = b"Obj\x01"
SYNC_SIZE = 16
BLOCK_BYTES = 64 * 1024  # encoded bytes per block before compression, about Avro Java's default sync interval
CODECS = ("deflate", "null")


class ContainerError(ValueError):
    """Not an Avro container of the contract's records, or one cut or damaged at `offset`."""

    def __init__(self, source: str, offset: int, problem: str):
        super().__init__(f"{source}: {problem} (at byte {offset})")
        self.source, self.offset, self.problem = source, offset, problem


# ---- writing ---------------------------------------------------------------------------

def write(out: IO[bytes], name: str, records: Iterable[Any], *, sync: bytes | None = None,
          codec: str = "deflate") -> int:
    """Write `records` (all of the top-level schema `name`) as a container file; returns how many.
    The sync marker is random unless `sync` (16 bytes) is given: then the same records give the same bytes."""
    if codec not in CODECS:
        raise ValueError(f"codec {codec!r}: one of {', '.join(CODECS)}")
    sync = sync or os.urandom(SYNC_SIZE)
    if len(sync) != SYNC_SIZE:
        raise ValueError(f"an Avro sync marker is {SYNC_SIZE} bytes, not {len(sync)}")
    encoder = default_codec()
    schema = catalogue.default().current(name).json.encode()
    out.write(MAGIC + _metadata({"avro.schema": schema, "avro.codec": codec.encode()}) + sync)
    block, in_block, count = bytearray(), 0, 0
    for count, record in enumerate(records, start=1):
        if top_level_name(type(record)) != name:
            raise TypeError(f"record {count} is {type(record).__name__}, not "
                            + ("an event" if name == "Event" else name))
        encoder.write_body(record, block)
        in_block += 1
        if len(block) >= BLOCK_BYTES:
            _write_block(out, block, in_block, sync, codec)
            block, in_block = bytearray(), 0
    if in_block:
        _write_block(out, block, in_block, sync, codec)
    return count


def _metadata(entries: dict[str, bytes]) -> bytes:
    """The header's metadata: an Avro map of bytes, in one block."""
    out = bytearray(binary.varint(len(entries)))
    for key, value in entries.items():
        binary.write_string(key, out)
        binary.write_bytes(value, out)
    out.append(0)
    return bytes(out)


def _write_block(out: IO[bytes], block: bytearray, count: int, sync: bytes, codec: str) -> None:
    if codec == "deflate":
        deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)  # raw deflate, as Avro specifies
        data = deflate.compress(block) + deflate.flush()
    else:
        data = bytes(block)
    out.write(binary.varint(count) + binary.varint(len(data)) + data + sync)
    out.flush()


# ---- reading ---------------------------------------------------------------------------

def read(path: Path, expected: str | None = None) -> Iterator[Any]:
    """The records of the container file at `path`, lazily; `expected` names the top-level schema
    the file must hold. Nothing is opened before the first record is asked for."""
    with open(path, "rb") as data:
        yield from records(data, str(path), expected)


def records(data: IO[bytes], source: str, expected: str | None = None) -> Iterator[Any]:
    """The records of a container file open in `data`; `source` names it in errors."""
    stream = _Stream(data, source)
    header = _Header.read(stream)
    if expected is not None and header.name != expected:
        raise ContainerError(source, 0, f"holds {header.name} records, not {expected}")
    while True:
        start = stream.offset
        if stream.at_end():
            return
        count, body = _read_block(stream, header)
        yield from header.decode(body, count, start)


class _Stream:
    """A file read forwards, knowing its offset; a short read is a ContainerError."""

    def __init__(self, data: IO[bytes], source: str):
        self.data, self.source, self.offset = data, source, 0
        self.ahead = b""  # a byte read by `at_end`

    def at_end(self) -> bool:
        self.ahead = self.ahead or self.data.read(1)
        return not self.ahead

    def take(self, n: int, what: str) -> bytes:
        if n == 0:
            return b""
        parts, missing = [self.ahead], n - len(self.ahead)
        self.ahead = b""
        while missing > 0 and (part := self.data.read(min(missing, 1 << 20))):  # a damaged size may be huge
            parts.append(part)
            missing -= len(part)
        chunk = b"".join(parts)
        if len(chunk) != n:
            raise ContainerError(self.source, self.offset + len(chunk), f"cut short: {what} ends after {len(chunk)}"
                                 f" of {n} bytes")
        self.offset += n
        return chunk

    def long(self, what: str) -> int:
        shift, accumulated = 0, 0
        while True:
            byte = self.take(1, what)[0]
            accumulated |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (accumulated >> 1) ^ -(accumulated & 1)
            shift += 7
            if shift > 63:
                raise ContainerError(self.source, self.offset, f"damaged: {what} is not a valid Avro long")


class _Header:
    def __init__(self, source: str, name: str, codec: str, sync: bytes, writer: dict[str, Any]):
        self.source, self.name, self.codec, self.sync = source, name, codec, sync
        current = catalogue.default().current(name)
        self.compiled = binary.top_level_reader(name) if catalogue.fingerprint(writer) == current.fingerprint else None
        self.writer = fastavro.parse_schema(without_logical_types(writer), {})
        self.reader = None if self.compiled else fastavro.parse_schema(without_logical_types(current.schema), {})

    @classmethod
    def read(cls, stream: _Stream) -> _Header:
        source = stream.source
        if stream.take(len(MAGIC), "the file's magic bytes") != MAGIC:
            raise ContainerError(source, 0, "not an Avro container file (no Obj\\x01 magic)")
        metadata: dict[str, bytes] = {}
        while (entries := stream.long("the header")) != 0:
            if entries < 0:
                entries = -entries
                stream.long("the header")
            for _ in range(entries):
                key = stream.take(stream.long("the header"), "the header").decode("utf-8", "replace")
                metadata[key] = stream.take(stream.long("the header"), "the header")
        sync = stream.take(SYNC_SIZE, "the header's sync marker")
        codec = metadata.get("avro.codec", b"null").decode("utf-8", "replace")
        if codec not in CODECS:
            raise ContainerError(source, stream.offset, f"codec {codec!r} is not supported ({', '.join(CODECS)})")
        try:
            writer = json.loads(metadata["avro.schema"])
        except (KeyError, ValueError) as exc:
            raise ContainerError(source, stream.offset, f"damaged header: no readable writer schema ({exc})") from None
        name = str(writer.get("name", "")).rsplit(".", 1)[-1] if isinstance(writer, dict) else ""
        if name not in TOP_LEVEL_NAMES:
            raise ContainerError(source, stream.offset,
                                 f"records named {name or '?'!r} are none of {', '.join(TOP_LEVEL_NAMES)}")
        return cls(source, name, codec, sync, writer)

    def decode(self, body: bytes, count: int, start: int) -> list[Any]:
        """The `count` records of a block's decompressed `body`."""
        if self.compiled is not None:
            found, pos = [], 0
            try:
                for _ in range(count):
                    record, pos = self.compiled(body, pos)
                    found.append(record)
            except Exception:  # noqa: BLE001 - not valid records: fastavro reads the block again, and says why
                pos = -1
            if pos == len(body):
                return found
        stream = io.BytesIO(body)
        try:
            found = [from_datum(self.name, fastavro.schemaless_reader(
                stream, self.writer, self.reader, return_record_name=True, return_record_name_override=True))
                for _ in range(count)]
        except Exception as exc:  # noqa: BLE001 - fastavro raises anything from EOFError to UnicodeDecodeError
            raise ContainerError(self.source, start, f"damaged: the block of {count} records does not decode"
                                                     f" ({exc!r})") from None
        if stream.tell() != len(body):
            raise ContainerError(self.source, start, f"damaged: {len(body) - stream.tell()} bytes after the"
                                                     f" {count} records of the block")
        return found


def _read_block(stream: _Stream, header: _Header) -> tuple[int, bytes]:
    """(record count, decompressed body) of the block at the stream's offset."""
    start = stream.offset
    try:
        count = stream.long("a block's record count")
        size = stream.long("a block's size")
        if count < 0 or size < 0:
            raise ContainerError(header.source, start, f"damaged: a block of {count} records and {size} bytes")
        data = stream.take(size, f"the block of {count} records")
        if stream.take(SYNC_SIZE, "a block's sync marker") != header.sync:
            raise ContainerError(header.source, start, "damaged: the block does not end with the file's sync marker")
    except ContainerError as exc:
        raise ContainerError(header.source, start, f"{exc.problem}; the records before this block were read"
                                                   ) from None
    if header.codec == "null":
        return count, data
    try:
        return count, zlib.decompress(data, -15)
    except zlib.error as exc:
        raise ContainerError(header.source, start, f"damaged: the block does not decompress ({exc})") from None
