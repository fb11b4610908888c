"""Synthesized versions of the Event schema, to test evolution without waiting for a real one.

- `previous_event()`: the current Event as it would have been one release ago, without
  `MessageReceived.sender_supports_shadow` (a field added with a default), without the last
  `MessageSource` symbol (a symbol added at the end) and without the last event kind (a kind
  added at the end of the body union). Records written with it must read in the current code.
- `next_event()`: the current Event as a later release could make it, with a new defaulted
  field in MessageReceived, a new SiteLocality symbol `CLOUD` at the end and a new kind
  `ShadowQueueDrained` at the end of the body union. A current reader that knows this
  version (its catalogue has it) reads the first two and dead-letters the third.

Both derive from the committed current schema, so they follow it as it evolves.
"""

from __future__ import annotations

import copy
import io
from typing import Any

import fastavro

from schemas import catalogue, wire
from schemas.catalogue import SchemaVersion
from schemas.shape import NAMESPACE

NEW_KIND = "ShadowQueueDrained"
NEW_SYMBOL = "CLOUD"


def current_event() -> SchemaVersion:
    return catalogue.default().current("Event")


def previous_event() -> SchemaVersion:
    schema = copy.deepcopy(current_event().schema)
    body = _field(schema, "body")
    received = _member(body, "MessageReceived")
    received["fields"] = [f for f in received["fields"] if f["name"] != "sender_supports_shadow"]
    source = _field(received, "source")["type"]
    source["symbols"] = source["symbols"][:-1]
    body["type"] = body["type"][:-1]
    return catalogue.version_of("Event", current_event().version - 1, schema)


def next_event() -> SchemaVersion:
    schema = copy.deepcopy(current_event().schema)
    body = _field(schema, "body")
    received = _member(body, "MessageReceived")
    received["fields"].append({"name": "priority", "type": "long", "default": 0, "doc": "a field added later"})
    locality = _field(_member(body, "ShadowCopyRequested"), "locality")["type"]
    locality["symbols"].append(NEW_SYMBOL)
    body["type"].append({"type": "record", "name": NEW_KIND, "doc": "a kind added later",
                         "fields": [{"name": "drained", "type": "long", "doc": "copies sent on"}]})
    return catalogue.version_of("Event", current_event().version + 1, schema)


def encode_with(version: SchemaVersion, datum: dict[str, Any]) -> bytes:
    """The single-object encoding of a datum with a (synthesized) writer version."""
    out = io.BytesIO()
    out.write(wire.header(version.fingerprint))
    fastavro.schemaless_writer(out, fastavro.parse_schema(copy.deepcopy(version.schema)), datum)
    return out.getvalue()


def new_kind_datum(header: dict[str, Any]) -> dict[str, Any]:
    """A datum of the kind only `next_event()` has, with the given header fields."""
    return {**header, "body": (f"{NAMESPACE}.{NEW_KIND}", {"drained": 3})}


def _field(record: dict[str, Any], name: str) -> dict[str, Any]:
    return next(f for f in record["fields"] if f["name"] == name)


def _member(body: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(m for m in body["type"] if isinstance(m, dict) and m["name"] == kind)
