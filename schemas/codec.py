"""Encode and decode the contract's records as Kafka values (Avro single-object encoding).

    codec.encode(event) -> bytes          writes with the current schema; a field that does not
                                          fit the contract: ValidationError names it
    codec.decode(data, "Event") -> Event  finds the writer schema by fingerprint, resolves it
                                          to the current schema; DecodeError says why not
    codec.kafka_key(record) -> bytes      the Kafka key (an event's primary_server, UTF-8)

Encoding uses the writers `schemas.binary` compiles per class (three times fastavro's speed,
the same bytes), which check every value's type as they write it; a record they refuse is
walked by `schemas.validate`, which says which field does not fit. Decoding a record of a
current schema version (nearly all of them) uses the reader `schemas.binary` compiles per
schema (four times fastavro's speed, the same records). A record of an older writer version,
and any body the compiled reader refuses, goes through fastavro, which resolves the writer
schema to the current one and says what is wrong with a corrupt body, on schemas parsed once
per catalogue; its copies drop `logicalType` (which the canonical form, hence the fingerprint,
ignores) so timestamps stay int milliseconds.
"""

from __future__ import annotations

import functools
import io
from dataclasses import dataclass
from typing import Any, Union

import fastavro
from fastavro.read import SchemaResolutionError

from schemas import catalogue as catalogues
from schemas import binary, wire
from schemas.catalogue import Catalogue, SchemaVersion
from schemas.datum import from_datum
from schemas.events import EVENT_TYPES, Alert, DeadLetter, Event, RedeliveryCommand
from schemas.shape import NAMESPACE, TOP_LEVEL_NAMES, top_level_name
from schemas.validate import explain
from schemas.wire import DecodeError

Record = Union[Event, Alert, RedeliveryCommand, DeadLetter]

# The field whose value is the Kafka key of each top-level record (UTF-8, or bytes as they are).
KEY_FIELDS = {"Event": "primary_server", "Alert": "alert_id", "RedeliveryCommand": "holder", "DeadLetter": "key"}


@dataclass(frozen=True)
class _EncodePlan:
    """Everything encoding one class needs, looked up once."""

    write: binary.Write
    header: bytes


class Codec:
    """Encoder and decoder for one catalogue of writer schemas."""

    def __init__(self, catalogue: Catalogue | None = None, *, compiled: bool = True):
        """`compiled=False` decodes everything with fastavro (to compare the two, or measure them)."""
        self.catalogue = catalogue or catalogues.default()
        self._parsed: dict[bytes, tuple[Any, dict[str, Any]]] = {}
        self._plans: dict[type, _EncodePlan] = {}
        # The compiled reader of each current schema version, by its fingerprint.
        self._readers: dict[bytes, tuple[str, binary.Read]] = {} if not compiled else {
            self.catalogue.current(name).fingerprint: (name, binary.top_level_reader(name)) for name in TOP_LEVEL_NAMES
        }

    def encode(self, record: Record) -> bytes:
        """The single-object encoding of `record` with its current schema; ValidationError when
        a field does not fit the contract."""
        plan = self._plans.get(type(record)) or self._plan(type(record))
        out = bytearray(plan.header)
        _write(plan.write, record, out)
        return bytes(out)

    def write_body(self, record: Record, out: bytearray) -> None:
        """Append the Avro binary body of `record` (no single-object header) to `out`: a container
        file's record. A record that does not fit leaves `out` as it was (and raises ValidationError)."""
        plan = self._plans.get(type(record)) or self._plan(type(record))
        _write(plan.write, record, out)

    def _plan(self, record_type: type) -> _EncodePlan:
        version = self.catalogue.current(top_level_name(record_type))
        plan = _EncodePlan(binary.record_writer(record_type), wire.header(version.fingerprint))
        self._plans[record_type] = plan
        return plan

    def decode(self, data: bytes | None, expected: str | None = None) -> Record:
        """The record in `data`, read into the current schema; `expected` names the top-level schema wanted.
        None (a Kafka tombstone) is a DecodeError too."""
        if type(data) is not bytes and isinstance(data, (bytearray, memoryview)):
            data = bytes(data)  # the compiled readers slice bytes
        found = self._readers.get(data[2:wire.HEADER_SIZE]) if data is not None else None
        if found is not None and data[:2] == wire.MAGIC and (expected is None or found[0] == expected):
            try:
                record, end = found[1](data, wire.HEADER_SIZE)
            except Exception:  # noqa: BLE001 - not a valid body: fastavro below says why, as it always has
                pass
            else:
                if end == len(data):
                    return record
        return self._decode_with_fastavro(data, expected)

    def _decode_with_fastavro(self, data: bytes, expected: str | None) -> Record:
        fingerprint, body = wire.split(data)
        writer = self.catalogue.lookup(fingerprint)
        if writer is None:
            raise DecodeError(wire.UNKNOWN_FINGERPRINT, wire.unknown_fingerprint_detail(fingerprint.hex()))
        if expected is not None and writer.name != expected:
            raise DecodeError(wire.WRONG_SCHEMA, wire.wrong_schema_detail(str(writer), expected))
        reader = self.catalogue.current(writer.name)
        datum = self._read(body, writer, None if reader.fingerprint == writer.fingerprint else reader)
        return from_datum(writer.name, datum)

    def decode_event(self, data: bytes) -> Event:
        """An event from the events topic (a record of any other schema is a DecodeError)."""
        return self.decode(data, "Event")  # type: ignore[return-value]

    def decode_events(self, values: list) -> tuple[list[Event | Exception], list[int]]:
        """`decode_event` of each value, in one loop (the twin's operator reads a call's rows so): in
        each place the event, or the exception `decode_event` raises for that value; and the places
        of those exceptions."""
        decode = self.decode_event
        events: list[Event | Exception] = []
        failed: list[int] = []
        for data in values:
            try:
                events.append(decode(data))
            except Exception as exc:  # noqa: BLE001 - the value's verdict, in its place
                failed.append(len(events))
                events.append(exc)
        return events, failed

    def _read(self, body: memoryview, writer: SchemaVersion, reader: SchemaVersion | None) -> dict[str, Any]:
        stream = io.BytesIO(body)
        try:
            datum = fastavro.schemaless_reader(
                stream, self._parse(writer)[0], self._parse(reader)[0] if reader else None,
                return_record_name=True, return_record_name_override=True,
            )
        except SchemaResolutionError as exc:
            raise self._unresolvable(body, writer, exc) from exc
        except Exception as exc:  # noqa: BLE001 - fastavro raises anything from EOFError to UnicodeDecodeError
            raise DecodeError(wire.CORRUPT_BODY, f"{wire.corrupt_body_detail(str(writer))} ({exc!r})") from exc
        if stream.tell() != len(body):
            raise DecodeError(
                wire.CORRUPT_BODY,
                f"{wire.corrupt_body_detail(str(writer))} ({len(body) - stream.tell()} bytes after the record)",
            )
        return datum

    def _unresolvable(self, body: memoryview, writer: SchemaVersion, exc: Exception) -> DecodeError:
        """Why a record of a known writer version does not resolve to the current schema."""
        if writer.name == "Event":
            datum = self._read(body, writer, None)
            kind = datum["body"][0].removeprefix(f"{NAMESPACE}.")
            if kind not in EVENT_TYPES:
                return DecodeError(wire.UNKNOWN_EVENT_KIND, wire.unknown_kind_detail(kind, str(writer)))
        return DecodeError(wire.CORRUPT_BODY, f"{wire.corrupt_body_detail(str(writer))} ({exc})")

    def _parse(self, version: SchemaVersion) -> tuple[Any, dict[str, Any]]:
        """fastavro's parsed copy of a schema version, and the named types it defines."""
        if version.fingerprint not in self._parsed:
            named: dict[str, Any] = {}
            self._parsed[version.fingerprint] = (fastavro.parse_schema(without_logical_types(version.schema), named),
                                                 named)
        return self._parsed[version.fingerprint]


def without_logical_types(schema: Any) -> Any:
    """A copy of `schema` without `logicalType` annotations (same canonical form, same fingerprint)."""
    if isinstance(schema, dict):
        return {key: without_logical_types(value) for key, value in schema.items() if key != "logicalType"}
    if isinstance(schema, list):
        return [without_logical_types(item) for item in schema]
    return schema


def _write(write: binary.Write, record: Record, out: bytearray) -> None:
    """`write` the record to `out`; a record the writer refuses leaves `out` as it was and raises
    ValidationError naming the field (or, should the contract's walk find nothing wrong, the
    writer's own error)."""
    start = len(out)
    try:
        write(record, out)
    except (TypeError, OverflowError, UnicodeError):
        del out[start:]
        explain(record)
        raise


def kafka_key(record: Record) -> bytes | None:
    """The Kafka key of a record: an event's primary server (one stateful group, one partition)."""
    value = getattr(record, KEY_FIELDS[top_level_name(type(record))])
    return value.encode() if isinstance(value, str) else value


@functools.cache
def default_codec() -> Codec:
    return Codec()


def encode(record: Record) -> bytes:
    """`Codec.encode` with the shipped catalogue."""
    return default_codec().encode(record)


def decode(data: bytes, expected: str | None = None) -> Record:
    """`Codec.decode` with the shipped catalogue."""
    return default_codec().decode(data, expected)


def decode_event(data: bytes) -> Event:
    """`Codec.decode_event` with the shipped catalogue."""
    return default_codec().decode_event(data)
