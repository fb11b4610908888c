"""Convert records between JSON Lines (`.jsonl`, `.ndjson`) and Avro object container files (`.avro`).

    python -m schemas.convert day.jsonl day.avro     # JSON Lines -> Avro, with the current schema
    python -m schemas.convert day.avro day.jsonl     # Avro (any compatible writer version) -> JSON Lines

The direction comes from the suffixes. A file holds records of one top-level schema: events
(the `Event` envelope) or one kind of output. An Avro file carries its writer schema, so an
older file is read into the current schema. The output is written to a temporary file and
renamed at the end, so a failed conversion leaves no half-written file.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import fastavro

from schemas import catalogue, jsonl
from schemas.datum import from_datum, to_datum
from schemas.shape import TOP_LEVEL_NAMES, top_level_name

JSONL_SUFFIXES = (".jsonl", ".ndjson")
AVRO_SUFFIXES = (".avro",)


class ConversionError(ValueError):
    """Input that cannot be converted; the message says where."""


def jsonl_to_avro(source: Path, target: Path, *, codec: str = "deflate") -> int:
    """Write the records of a JSON Lines file to an Avro container file; returns how many."""
    with open(source, encoding="utf-8") as lines:
        records = jsonl.read(lines, str(source))
        first = next(records, None)
        if first is None:
            raise ConversionError(f"{source}: no records (an Avro file needs their schema)")
        name = top_level_name(type(first))
        schema = fastavro.parse_schema(catalogue.default().current(name).schema)
        count = 0

        def datums() -> Iterator[dict[str, Any]]:
            nonlocal count
            for count, record in enumerate(itertools.chain([first], records), start=1):
                if top_level_name(type(record)) != name:
                    raise ConversionError(f"{source}: record {count} is {type(record).__name__}, not {name} like "
                                          "the first (one file, one schema)")
                yield to_datum(record)

        with _replacing(target, "wb") as out:
            fastavro.writer(out, schema, datums(), codec=codec)
    return count


def avro_to_jsonl(source: Path, target: Path) -> int:
    """Write the records of an Avro container file as JSON Lines; returns how many."""
    count = 0
    with open(source, "rb") as data, _replacing(target, "w") as out:
        try:
            reader = fastavro.reader(data)
            name = _top_level(reader.writer_schema, source)
            reader = _reread(data, name)
            for count, datum in enumerate(reader, start=1):
                out.write(jsonl.dumps(from_datum(name, datum)) + "\n")
        except ConversionError:
            raise
        except Exception as exc:  # noqa: BLE001 - fastavro raises many kinds of errors for a bad file
            raise ConversionError(f"{source}: record {count + 1}: {exc}") from exc
    return count


def convert(source: Path, target: Path) -> int:
    """Convert in the direction the suffixes give; returns how many records."""
    if source.suffix in JSONL_SUFFIXES and target.suffix in AVRO_SUFFIXES:
        return jsonl_to_avro(source, target)
    if source.suffix in AVRO_SUFFIXES and target.suffix in JSONL_SUFFIXES:
        return avro_to_jsonl(source, target)
    raise ConversionError(
        f"cannot tell the direction from {source.name} -> {target.name}: one file must end in "
        f"{' or '.join(JSONL_SUFFIXES)}, the other in {' or '.join(AVRO_SUFFIXES)}"
    )


def _top_level(writer_schema: Any, source: Path) -> str:
    name = str(writer_schema.get("name", "")).rsplit(".", 1)[-1] if isinstance(writer_schema, dict) else ""
    if name not in TOP_LEVEL_NAMES:
        raise ConversionError(f"{source}: records named {name or '?'!r} are none of {', '.join(TOP_LEVEL_NAMES)}")
    return name


def _reread(data: Any, name: str) -> fastavro.reader:
    """Read the file again from the start, resolving its writer schema to the current one."""
    data.seek(0)
    reader_schema = catalogue.default().current(name).schema
    return fastavro.reader(data, reader_schema, return_record_name=True, return_record_name_override=True)


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
    except (ConversionError, jsonl.JsonlError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{count} records: {args.source} -> {args.target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
