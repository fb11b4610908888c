"""The JSON Lines form of the records: one JSON object per line, one to one with the records.

    {"kind": "MessageReceived", "event_id": "mbx01/3", "event_time": "2026-11-22T02:00:00.750Z",
     "node": "mbx01", ..., "recipients": [{"address": "ann@contoso.com", "internal": true}], ...}

`kind` is the event kind (or Alert, RedeliveryCommand, DeadLetter); then every field in
declaration order. Times are ISO-8601 UTC strings with milliseconds, under the field's name
without `_ms` (`event_time_ms` -> `event_time`); reading also takes int milliseconds there.
Enums are their symbols, bytes are base64, nested records are objects, tuples are arrays.
Fields with a default may be left out when reading. Any error names the line and the field.
`values` reads another JSON Lines file (the simulator's truth) line by line with the same errors.

A recording (see `producers.recording`) may also keep, per line, when Kafka took the event in:
`"kafka_timestamp": "2026-11-22T02:00:01.000Z"` after the record's fields. It is optional: read
with `timestamps=True`, a line without it gives None.
"""

from __future__ import annotations

import base64
import datetime
import json
from typing import IO, Any, Iterable, Iterator

from schemas.events import EVENT_TYPES, Event
from schemas.shape import (
    OUTPUT_TYPES, Array, EnumType, FieldShape, Nullable, RecordType, Scalar, Shape, Timestamp, fields_of, kind_of,
)
from schemas.validate import ValidationError, check

KINDS: dict[str, type] = {**EVENT_TYPES, **OUTPUT_TYPES}
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MILLISECOND = datetime.timedelta(milliseconds=1)
_TRUTH_KINDS = ("summary", "message")  # the lines of the simulator's truth (producers/simulator/truth.py)


class JsonlError(ValueError):
    """A line that is not a valid record; the message starts with `source:line:`."""

    def __init__(self, source: str, line: int, problem: str):
        super().__init__(f"{source}:{line}: {problem}")
        self.source, self.line, self.problem = source, line, problem


def json_name(f: FieldShape) -> str:
    """A field's name in JSON: timestamps lose their `_ms`, since they are written as ISO strings."""
    shape = f.shape.inner if isinstance(f.shape, Nullable) else f.shape
    return f.name.removesuffix("_ms") if isinstance(shape, Timestamp) else f.name


# ---- writing --------------------------------------------------------------------------

def to_json(record: Any) -> dict[str, Any]:
    """The JSON object of a top-level record, `kind` first."""
    return {"kind": kind_of(type(record)), **_fields_to_json(record)}


def dumps(record: Any) -> str:
    """One line of JSON Lines (without the newline)."""
    return json.dumps(to_json(record), ensure_ascii=False)


def json_copy(record: Any) -> bytes:
    """A record's copy on `<topic>.json` (`twin.json_topics`): its JSON object, UTF-8, without spaces,
    byte for byte as Spark's `to_json` writes the copies of the records of its query
    (streaming/json_copies.py)."""
    return json.dumps(to_json(record), ensure_ascii=False, separators=(",", ":")).encode()


KAFKA_TIMESTAMP = "kafka_timestamp"


def write(records: Iterable[Any], out: IO[str], *, timestamps: bool = False) -> int:
    """Write the records one per line; returns how many. With `timestamps`, the items are
    (record, Kafka timestamp in ms or None) pairs."""
    count = 0
    for item in records:
        if timestamps:
            record, at_ms = item
            obj = to_json(record)
            if at_ms is not None:
                obj[KAFKA_TIMESTAMP] = iso_time(at_ms)
            out.write(json.dumps(obj, ensure_ascii=False) + "\n")
        else:
            out.write(dumps(item) + "\n")
        count += 1
    return count


def iso_time(ms: int) -> str | int:
    """`2026-11-22T02:00:00.000Z`; times outside years 1-9999 stay int milliseconds."""
    try:
        moment = _EPOCH + ms * _MILLISECOND
    except OverflowError:
        return ms
    return moment.isoformat(timespec="milliseconds").removesuffix("+00:00") + "Z"  # (strftime's %Y may not pad)


def _fields_to_json(record: Any) -> dict[str, Any]:
    return {json_name(f): _to_json(f.shape, getattr(record, f.name)) for f in fields_of(type(record))}


def _to_json(shape: Shape, value: Any) -> Any:
    if value is None:
        return None
    match shape:
        case Nullable(inner=inner):
            return _to_json(inner, value)
        case Array(item=item):
            return [_to_json(item, v) for v in value]
        case RecordType():
            return _fields_to_json(value)
        case EnumType():
            return value.value
        case Timestamp():
            return iso_time(value)
        case Scalar(python=python) if python is bytes:
            return base64.b64encode(value).decode("ascii")
    return value


# ---- reading --------------------------------------------------------------------------

def loads(line: str) -> Any:
    """The record of one JSON line; raises ValidationError (or ValueError for bad JSON)."""
    return from_json(json.loads(line))


def read(lines: Iterable[str | bytes], source: str = "<input>", *, timestamps: bool = False,
         expected: str | None = None) -> Iterator[Any]:
    """The records of JSON Lines text (blank lines are skipped); JsonlError names line and field,
    and how many records were read before it. Lines may be bytes, as in `values`. With
    `timestamps`, (record, Kafka timestamp in ms or None) pairs. With `expected` (a top-level
    schema: "Event", "Alert" ...), a record of another is refused as the Avro reader refuses it."""
    for count, (number, obj) in enumerate(values(lines, source)):
        try:
            at = obj.pop(KAFKA_TIMESTAMP, None) if isinstance(obj, dict) else None
            record = from_json(obj)
            at_ms = None if at is None else at if isinstance(at, int) else parse_time(at, KAFKA_TIMESTAMP)
        except (ValidationError, TypeError) as exc:
            raise _bad_line(source, number, str(exc), count) from exc
        if expected is not None and expected != ("Event" if isinstance(record, Event) else kind_of(type(record))):
            raise _bad_line(source, number, f"{kind_of(type(record))} record, not {expected}", count)
        yield (record, at_ms) if timestamps else record


def values(lines: Iterable[str | bytes], source: str = "<input>") -> Iterator[tuple[int, Any]]:
    """(line number, JSON value) of each line of JSON Lines text that is not blank, whatever the
    value stands for; JsonlError names a line that is not JSON (or was cut short) and how many
    values were read before it. Lines may be bytes (a file opened in binary), each decoded as
    UTF-8 on its own, so that bytes that are not UTF-8 are named by their line. A UTF-8 byte-order mark
    before the first line (what Windows editors write) is no part of it."""
    count = 0
    for number, line in enumerate(lines, start=1):
        if number == 1:
            line = line.removeprefix(b"\xef\xbb\xbf" if isinstance(line, bytes) else "\ufeff")
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _bad_line(source, number, f"not UTF-8: byte {line[exc.start]:#04x} at column {exc.start + 1}",
                                count, line) from exc
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _bad_line(source, number, f"not JSON: {exc.msg} (column {exc.colno})", count, line) from exc
        count += 1
        yield number, obj


def _bad_line(source: str, number: int, problem: str, count: int, unreadable: str | bytes | None = None) -> JsonlError:
    """The error of a bad line after `count` records. An `unreadable` line (not UTF-8, not JSON)
    without its newline is the file's last, cut short: a writer stopped in the middle of it."""
    if unreadable is not None and not unreadable.endswith(b"\n" if isinstance(unreadable, bytes) else "\n"):
        problem = f"cut short: the last line ends mid-record ({problem})"
    return JsonlError(source, number, f"{problem}; records read before it: {count:,}" if count else problem)


def from_json(obj: Any) -> Any:
    """The record a JSON object stands for."""
    if not isinstance(obj, dict):
        raise ValidationError("line", f"expected a JSON object, got {type(obj).__name__}")
    if "kind" not in obj:
        raise ValidationError("kind", "missing: every line names its record kind")
    kind = obj["kind"]
    if kind in _TRUTH_KINDS:  # the file beside a simulated recording, given in its place
        raise ValidationError("kind", f"{kind!r}: this is the simulator's ground truth (NAME.truth.jsonl), not a"
                                      " recording: the events are beside it (NAME.avro or NAME.jsonl); whatif reads"
                                      " the truth with --truth")
    if not isinstance(kind, str) or kind not in KINDS:
        raise ValidationError("kind", f"{kind!r} is no record kind (known: {', '.join(KINDS)})")
    return _record_from_json(KINDS[kind], {key: value for key, value in obj.items() if key != "kind"}, kind)


def _record_from_json(cls: type, obj: Any, path: str) -> Any:
    if not isinstance(obj, dict):
        raise ValidationError(path, f"expected an object, got {type(obj).__name__}")
    fields = fields_of(cls)
    unknown = sorted(set(obj) - {json_name(f) for f in fields})
    if unknown:
        raise ValidationError(f"{path}.{unknown[0]}", f"no such field in {cls.__name__}")
    values = {}
    for f in fields:
        name = json_name(f)
        if name in obj:
            values[f.name] = _from_json(f.shape, obj[name], f"{path}.{name}")
        elif not f.has_default:
            raise ValidationError(f"{path}.{name}", "missing (the field has no default)")
    return cls(**values)


def _from_json(shape: Shape, value: Any, path: str) -> Any:
    match shape:
        case Nullable(inner=inner):
            return None if value is None else _from_json(inner, value, path)
        case Array(item=item):
            if not isinstance(value, list):
                raise ValidationError(path, f"expected an array, got {type(value).__name__}")
            return tuple(_from_json(item, v, f"{path}[{i}]") for i, v in enumerate(value))
        case RecordType(cls=cls):
            return _record_from_json(cls, value, path)
        case EnumType(cls=cls):
            if value not in shape.symbols:
                raise ValidationError(path, f"{value!r} is no {cls.__name__} symbol ({', '.join(shape.symbols)})")
            return cls(value)
        case Timestamp() if isinstance(value, str):
            return parse_time(value, path)
        case Scalar(python=python) if python is bytes:
            return _base64(value, path)
    check(shape, value, path)
    return value


def parse_time(value: str, path: str) -> int:
    """Milliseconds since the epoch from an ISO-8601 string with a time zone (`Z` or an offset)."""
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise ValidationError(path, f"{value!r} is not an ISO-8601 time") from None
    if moment.tzinfo is None:
        raise ValidationError(path, f"{value!r} has no time zone (write Z for UTC)")
    if moment.microsecond % 1000:
        raise ValidationError(path, f"{value!r} is more precise than a millisecond")
    return (moment - _EPOCH) // _MILLISECOND


def _base64(value: Any, path: str) -> bytes:
    if not isinstance(value, str):
        raise ValidationError(path, f"expected base64 text, got {type(value).__name__}")
    try:
        return base64.b64decode(value, validate=True)
    except ValueError as exc:  # binascii.Error, or a letter beyond ASCII (a ValueError of its own)
        raise ValidationError(path, f"not base64: {exc}") from None
