"""Avro object container files (`.avro`): the one writer and the one reader of them in the project.

    count = write(out, "Event", events)                 # header, then deflate blocks, each ending in the sync marker
    count = write_encoded(out, "Event", bodies)         # the same, from each record's Avro body
    count = write_flat(out, events)                     # the same, from each event's flat tuple
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

A recording may keep, per event, when Kafka took it in (`timestamps=True`): the writer schema
is then the Event schema with one more field at its end, `kafka_timestamp_ms` (null or long,
default null). Any Avro reader still reads such a file as events (schema resolution ignores
the field); a file without it reads with None for every timestamp.
"""

from __future__ import annotations

import functools
import io
import json
import os
import queue
import threading
import zlib
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Iterator

import fastavro
from fastavro.read import SchemaResolutionError
from fastavro.schema import SchemaParseException

from infra.wording import counted
from schemas import binary, catalogue
from schemas.codec import default_codec, without_logical_types
from schemas.datum import from_datum
from schemas.events import EVENT_TYPES
from schemas.shape import TOP_LEVEL_NAMES, top_level_name

MAGIC = b"Obj\x01"
SYNC_SIZE = 16
BLOCK_BYTES = 64 * 1024  # encoded bytes per block before compression, about Avro Java's default sync interval
CODECS = ("deflate", "null")
TIMESTAMP_FIELD = {"name": "kafka_timestamp_ms", "type": ["null", "long"], "default": None,
                   "doc": "when Kafka took the event in (its record timestamp), where it was recorded from Kafka"}


def stamped(schema: dict[str, Any]) -> dict[str, Any]:
    """A top-level schema with the recording's optional Kafka timestamp as its last field."""
    return {**schema, "fields": [*schema["fields"], TIMESTAMP_FIELD]}


class ContainerError(ValueError):
    """Not an Avro container of the contract's records, or one cut or damaged at `offset`."""

    def __init__(self, source: str, offset: int, problem: str):
        super().__init__(f"{source}: {problem} (at byte {offset})")
        self.source, self.offset, self.problem = source, offset, problem


# ---- writing ---------------------------------------------------------------------------

def write(out: IO[bytes], name: str, records: Iterable[Any], *, sync: bytes | None = None,
          codec: str = "deflate", timestamps: bool = False) -> int:
    """Write `records` (all of the top-level schema `name`) as a container file; returns how many.
    The sync marker is random unless `sync` (16 bytes) is given: then the same records give the same bytes.
    With `timestamps`, the items are (record, Kafka timestamp in ms or None) pairs."""
    sync = _write_header(out, name, sync, codec, timestamps)
    encoder = default_codec()

    def append(block: bytearray, item: Any, number: int) -> None:
        record, at_ms = item if timestamps else (item, None)
        if top_level_name(type(record)) != name:
            raise TypeError(f"record {number} is {type(record).__name__}, not "
                            + ("an event" if name == "Event" else name))
        encoder.write_body(record, block)
        if timestamps:
            if at_ms is None:
                block.append(0)
            else:
                block.append(2)  # the union's second branch, long
                binary.write_long(at_ms, block)

    return _write_blocks(out, sync, codec, records, append)


def write_encoded(out: IO[bytes], name: str, bodies: Iterable[bytes], *, sync: bytes | None = None,
                  codec: str = "deflate", stop: Callable[[], bool] | None = None) -> int:
    """`write` for records encoded already: each item is the Avro body of one record of `name` (what
    `binary.arguments_encoder` returns, trusted as it is). The same blocks, the same bytes. `stop` is
    asked after each full block: once it answers True no more bodies are taken, and the file ends
    with the blocks written, valid."""
    sync = _write_header(out, name, sync, codec, timestamps=False)
    block, in_block, count = bytearray(), 0, 0
    with _BlockWriter(out, sync, codec) as blocks:
        for body in bodies:  # `_write_blocks` without its call per record: the simulator's file is written here
            block += body
            in_block += 1
            if len(block) >= BLOCK_BYTES:
                blocks.put(block, in_block)
                count += in_block
                block, in_block = bytearray(), 0
                if stop is not None and stop():
                    break
        if in_block:
            blocks.put(block, in_block)
    return count + in_block


def write_flat(out: IO[bytes], events: Iterable[tuple], *, sync: bytes | None = None, codec: str = "deflate") -> int:
    """`write` for events given as the flat tuples `binary.arguments_flattener` makes (what the
    simulator's writing process receives): the same blocks, the same bytes."""
    sync = _write_header(out, "Event", sync, codec, timestamps=False)
    writers = flat_writers()
    return _write_blocks(out, sync, codec, events, lambda block, flat, _: writers[flat[0]](flat, block))


@functools.cache
def flat_writers() -> tuple[binary.Write, ...]:
    """What `write_flat` writes with, by the kind's index (compiled once: a forked writer asks before it forks)."""
    catalogue.default()
    return tuple(binary.flat_writer(kind) for kind in EVENT_TYPES.values())


def _write_blocks(out: IO[bytes], sync: bytes, codec: str, items: Iterable[Any],
                  append: Callable[[bytearray, Any, int], None]) -> int:
    """Write the items, each appended to the current block by `append(block, item, its number)`, in
    blocks of about BLOCK_BYTES; returns how many."""
    block, in_block, count = bytearray(), 0, 0
    with _BlockWriter(out, sync, codec) as blocks:
        for count, item in enumerate(items, start=1):
            append(block, item, count)
            in_block += 1
            if len(block) >= BLOCK_BYTES:
                blocks.put(block, in_block)
                block, in_block = bytearray(), 0
        if in_block:
            blocks.put(block, in_block)
    return count


def _write_header(out: IO[bytes], name: str, sync: bytes | None, codec: str, timestamps: bool) -> bytes:
    """Write the file's header; returns its sync marker (random unless `sync`)."""
    if codec not in CODECS:
        raise ValueError(f"codec {codec!r}: one of {', '.join(CODECS)}")
    sync = sync or os.urandom(SYNC_SIZE)
    if len(sync) != SYNC_SIZE:
        raise ValueError(f"an Avro sync marker is {SYNC_SIZE} bytes, not {len(sync)}")
    current = catalogue.default().current(name)
    schema = json.dumps(stamped(current.schema), separators=(",", ":")) if timestamps else current.json
    out.write(MAGIC + _metadata({"avro.schema": schema.encode(), "avro.codec": codec.encode()}) + sync)
    return sync


def _metadata(entries: dict[str, bytes]) -> bytes:
    """The header's metadata: an Avro map of bytes, in one block."""
    out = bytearray(binary.varint(len(entries)))
    for key, value in entries.items():
        binary.write_string(key, out)
        binary.write_bytes(value, out)
    out.append(0)
    return bytes(out)


class _BlockWriter:
    """Compresses and writes full blocks on a thread of its own, in order, while the caller encodes
    the next ones (zlib and the file let go of the GIL: on two cores deflate costs the encoder
    nothing). Leaving the `with` waits for every block handed over, also when the caller failed;
    a block that could not be written raises there, or at the next `put`."""

    def __init__(self, out: IO[bytes], sync: bytes, codec: str):
        self._out, self._sync, self._codec = out, sync, codec
        self._blocks: queue.Queue[tuple[bytearray, int] | None] = queue.Queue(maxsize=4)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="avro-block-writer", daemon=True)

    def __enter__(self) -> "_BlockWriter":
        self._thread.start()
        return self

    def put(self, block: bytearray, count: int) -> None:
        if self._error is not None:
            raise self._error
        self._blocks.put((block, count))

    def __exit__(self, *failure: object) -> None:
        self._blocks.put(None)
        self._thread.join()
        if self._error is not None and failure[0] is None:
            raise self._error

    def _run(self) -> None:
        while (item := self._blocks.get()) is not None:
            if self._error is None:
                try:
                    _write_block(self._out, *item, self._sync, self._codec)
                except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
                    self._error = exc


def _write_block(out: IO[bytes], block: bytearray, count: int, sync: bytes, codec: str) -> None:
    if codec == "deflate":
        deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)  # raw deflate, as Avro specifies
        data = deflate.compress(block) + deflate.flush()
    else:
        data = bytes(block)
    out.write(binary.varint(count) + binary.varint(len(data)) + data + sync)
    out.flush()


# ---- reading ---------------------------------------------------------------------------

def read(path: Path, expected: str | None = None, *, timestamps: bool = False) -> Iterator[Any]:
    """The records of the container file at `path`, lazily; `expected` names the top-level schema
    the file must hold. Nothing is opened before the first record is asked for. With `timestamps`,
    (record, Kafka timestamp in ms or None) pairs."""
    with open(path, "rb") as data:
        yield from records(data, str(path), expected, timestamps=timestamps)


def records(data: IO[bytes], source: str, expected: str | None = None, *, timestamps: bool = False) -> Iterator[Any]:
    """The records of a container file open in `data`; `source` names it in errors."""
    stream = _Stream(data, source)
    if stream.at_end():  # an empty file holds no records, as an empty .jsonl holds none
        return
    header = _Header.read(stream)
    if expected is not None and header.name != expected:
        raise ContainerError(source, 0, f"holds {header.name} records, not {expected}")
    while True:
        start = stream.offset
        if stream.at_end():
            return
        count, body = _read_block(stream, header)
        decoded = header.decode(body, count, start)
        yield from decoded if timestamps else (record for record, _ in decoded)


def count(path: Path) -> int:
    """How many records the container file at `path` holds, from its blocks' counts (none decoded)."""
    with open(path, "rb") as data:
        stream = _Stream(data, str(path))
        if stream.at_end():
            return 0
        header = _Header.read(stream)
        total = 0
        while not stream.at_end():
            total += _read_block(stream, header)[0]
        return total


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
        fingerprint = catalogue.fingerprint(writer)
        self.stamped = fingerprint == catalogue.fingerprint(stamped(current.schema))
        same = self.stamped or fingerprint == current.fingerprint
        self.compiled = binary.top_level_reader(name) if same else None
        self.writer = fastavro.parse_schema(without_logical_types(writer), {})
        reader = stamped(current.schema) if self.stamped else current.schema
        self.reader = None if same else fastavro.parse_schema(without_logical_types(reader), {})

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
        try:
            return cls(source, name, codec, sync, writer)
        except (ValueError, KeyError, TypeError, SchemaParseException) as exc:  # fastavro's refusals of a schema
            detail = " ".join(f"{type(exc).__name__}: {exc}".split())
            raise ContainerError(source, stream.offset, "damaged header: the writer schema is no valid Avro schema"
                                                        f" ({detail[:200]})") from None

    def decode(self, body: bytes, count: int, start: int) -> list[tuple[Any, int | None]]:
        """The `count` records of a block's decompressed `body`, each with its Kafka timestamp (or None)."""
        if self.compiled is not None:
            found, pos = [], 0
            try:
                for _ in range(count):
                    record, pos = self.compiled(body, pos)
                    at_ms = None
                    if self.stamped:
                        branch, pos = binary.read_long(body, pos)
                        if branch == 1:
                            at_ms, pos = binary.read_long(body, pos)
                        elif branch != 0:
                            raise ValueError(f"union branch {branch}")
                    found.append((record, at_ms))
            except Exception:  # noqa: BLE001 - not valid records: fastavro reads the block again, and says why
                pos = -1
            if pos == len(body):
                return found
        stream = io.BytesIO(body)
        try:
            found = [self._from_datum(fastavro.schemaless_reader(
                stream, self.writer, self.reader, return_record_name=True, return_record_name_override=True))
                for _ in range(count)]
        except SchemaResolutionError as exc:  # not damage: the file's own schema is not one of ours
            raise ContainerError(self.source, start, f"written with a schema of {self.name} records that ours cannot"
                                                     f" read ({exc})") from None
        except Exception as exc:  # noqa: BLE001 - fastavro raises anything from EOFError to UnicodeDecodeError
            raise ContainerError(self.source, start, f"damaged: the block of {counted(count, 'record')} does not decode"
                                                     f" ({exc!r})") from None
        if stream.tell() != len(body):
            raise ContainerError(self.source, start, f"damaged: {len(body) - stream.tell()} bytes after the"
                                                     f" {counted(count, 'record')} of the block")
        return found

    def _from_datum(self, datum: dict[str, Any]) -> tuple[Any, int | None]:
        at_ms = datum.pop(TIMESTAMP_FIELD["name"], None)
        return from_datum(self.name, datum), at_ms


def _read_block(stream: _Stream, header: _Header) -> tuple[int, bytes]:
    """(record count, decompressed body) of the block at the stream's offset."""
    start = stream.offset
    try:
        count = stream.long("a block's record count")
        size = stream.long("a block's size")
        if count < 0 or size < 0:
            raise ContainerError(header.source, start, f"damaged: a block of {count} records and {size} bytes")
        data = stream.take(size, f"the block of {counted(count, 'record')}")
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
