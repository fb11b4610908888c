"""Avro schemas generated from the dataclasses of `schemas.events`, and the files that hold them.

Four top-level schemas, all in the namespace `shadowtwin.v1`:
- `Event`: one envelope for the events topic, the header fields every event carries and a
  `body` that is a union of one record per event kind (named after the kind, holding only
  that kind's own fields), in `EVENT_TYPES` order;
- `Alert`, `RedeliveryCommand`, `DeadLetter`: the twin's outputs.

A named type (record or enum) is defined where it first appears and referenced by its name
afterwards. `python -m schemas.avro_gen` rewrites `schemas/avro/*.avsc` and, when a schema's
canonical form changed, adds it to `schemas/avro/history/` as the next version once it passes
the evolution policy; `--check` only reports what is out of date.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path
from typing import Any

from schemas import catalogue, evolution
from schemas.events import EVENT_TYPES, AvroEnum
from schemas.shape import (
    NAMESPACE, OUTPUT_TYPES, TIMESTAMP_MILLIS, TOP_LEVEL_NAMES, Array, EnumType, FieldShape,
    Nullable, RecordType, Scalar, Shape, Timestamp, body_fields, fields_of, header_fields,
)

ENVELOPE_DOC = (
    "One event: the header every event carries, and in `body` the fields of its kind "
    "(the union member's record name is the kind)."
)
BODY_DOC = "the event's own fields: one record per event kind, named after the kind"


class _Writer:
    """Turns shapes into Avro JSON, defining each named type once and naming it afterwards."""

    def __init__(self) -> None:
        self.defined: set[str] = set()

    def record(self, name: str, doc: str | None, fields: list[dict[str, Any]], namespace: str | None = None):
        self.defined.add(name)
        schema: dict[str, Any] = {"type": "record", "name": name}
        if namespace:
            schema["namespace"] = namespace
        if doc:
            schema["doc"] = doc
        schema["fields"] = fields
        return schema

    def dataclass_record(self, cls: type, fields: tuple[FieldShape, ...], *, name: str | None = None,
                         namespace: str | None = None):
        name = name or cls.__name__
        if name in self.defined:
            return name
        return self.record(name, written_doc(cls), [self.field(f) for f in fields], namespace)

    def field(self, f: FieldShape) -> dict[str, Any]:
        out: dict[str, Any] = {"name": f.name, "type": self.type(f.shape)}
        if f.has_default:
            out["default"] = avro_default(f)
        out["doc"] = f.doc
        return out

    def type(self, shape: Shape) -> Any:
        match shape:
            case Scalar(avro=avro):
                return avro
            case Timestamp():
                return {"type": "long", "logicalType": TIMESTAMP_MILLIS}
            case Nullable(inner=inner):
                return ["null", self.type(inner)]
            case Array(item=item):
                return {"type": "array", "items": self.type(item)}
            case EnumType(cls=cls):
                return self.enum(shape)
            case RecordType(cls=cls):
                return self.dataclass_record(cls, fields_of(cls))
        raise TypeError(f"no Avro type for {shape}")

    def enum(self, shape: EnumType) -> Any:
        name = shape.cls.__name__
        if name in self.defined:
            return name
        self.defined.add(name)
        schema: dict[str, Any] = {"type": "enum", "name": name}
        if doc := written_doc(shape.cls):
            schema["doc"] = doc
        schema["symbols"] = list(shape.symbols)
        schema["default"] = shape.symbols[0]
        return schema


def written_doc(cls: type) -> str | None:
    """The class's own docstring; None for none, or for the signature dataclasses invent."""
    doc = cls.__dict__.get("__doc__")
    if not doc or doc.startswith(f"{cls.__name__}("):
        return None
    return inspect.cleandoc(doc)


def avro_default(f: FieldShape) -> Any:
    """The field's Python default as Avro JSON."""
    value = f.default
    if isinstance(f.shape, Nullable) and value is not None:
        raise TypeError(f"{f.name}: an optional field's default must be None (Avro puts null first)")
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, AvroEnum):
        return value.value
    return value


def event_schema() -> dict[str, Any]:
    """The envelope of the events topic."""
    writer = _Writer()
    writer.defined.add("Event")
    header = [writer.field(f) for f in header_fields()]
    members = [writer.dataclass_record(cls, body_fields(cls), name=kind) for kind, cls in EVENT_TYPES.items()]
    body = {"name": "body", "type": members, "doc": BODY_DOC}
    return writer.record("Event", ENVELOPE_DOC, [*header, body], NAMESPACE)


def output_schema(cls: type) -> dict[str, Any]:
    """The schema of one output record (Alert, RedeliveryCommand, DeadLetter)."""
    return _Writer().dataclass_record(cls, fields_of(cls), namespace=NAMESPACE)


def generate() -> dict[str, dict[str, Any]]:
    """Every top-level schema, by name, as the dataclasses define them now."""
    schemas = {"Event": event_schema()}
    schemas.update({name: output_schema(cls) for name, cls in OUTPUT_TYPES.items()})
    assert tuple(schemas) == TOP_LEVEL_NAMES
    return schemas


def render(schema: dict[str, Any]) -> str:
    """The text of an .avsc file: pretty-printed JSON, one trailing newline."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def plan(avro_dir: Path = catalogue.AVRO_DIR) -> dict[Path, str]:
    """Which files must be (re)written, with their new text, for the files to match the dataclasses.

    Raises `evolution.PolicyError` when a changed schema breaks the evolution policy
    against its latest released version.
    """
    changes: dict[Path, str] = {}
    history = catalogue.read_history(avro_dir / catalogue.HISTORY)
    for name, schema in generate().items():
        text = render(schema)
        current = avro_dir / f"{name}.avsc"
        if not current.exists() or current.read_text() != text:
            changes[current] = text
        released = history.get(name, [])
        if released and catalogue.fingerprint(released[-1]) == catalogue.fingerprint(schema):
            continue
        if released:
            evolution.require_compatible(released[-1], schema, name)
        changes[avro_dir / catalogue.HISTORY / f"{name}.v{len(released) + 1}.avsc"] = text
    return changes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m schemas.avro_gen", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="report out-of-date files, write nothing")
    parser.add_argument("--dir", type=Path, default=catalogue.AVRO_DIR, help="the avro folder (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        changes = plan(args.dir)
    except evolution.PolicyError as exc:
        print(exc, file=sys.stderr)
        return 1
    for path, text in changes.items():
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        print(f"{'out of date' if args.check else 'wrote'}: {path}")
    if not changes:
        print("schemas are up to date")
    return 1 if args.check and changes else 0


if __name__ == "__main__":
    sys.exit(main())
