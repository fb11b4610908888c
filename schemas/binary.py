"""The Avro binary encoding of a record, by writers and readers compiled once per class from its shape.

The contract uses few Avro types (string, long, boolean, bytes, enum, record, array, and
["null", X] unions), so a writer per field, composed per class, appends each value's
encoding to a bytearray without building the intermediate dicts a generic library needs:
about three times as fast as fastavro's writer here, and byte for byte the same (the tests
compare the two on every sample and on generated records). A writer also checks each value's
type as it goes (exactly the contract's type: a bool is no long, a plain string no enum
member) and raises TypeError at the first that differs, so a record that is written fitted the
contract (`schemas.codec` then asks `schemas.validate` which field did not).

The readers mirror the writers for the current version of each top-level schema: about
four times as fast as fastavro's reader with the conversion to dataclasses, and the same
records. A record of an older writer version needs schema resolution, which stays with
fastavro (see `schemas.codec`).

An event is the `Event` envelope: the header fields, the body union's member index, then
the kind's own fields, exactly what a record-of-union encodes to.
"""

from __future__ import annotations

import dataclasses
import functools
import linecache
from typing import Any, Callable

from schemas.events import EVENT_TYPES, Event, init_parameters, slot_setters
from schemas.shape import (
    Array, EnumType, FieldShape, Nullable, RecordType, Scalar, Shape, Timestamp, body_fields, fields_of, header_fields,
    record_types,
)

Write = Callable[[Any, bytearray], None]
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


def varint(n: int) -> bytes:
    """The zig-zag varint of a long: how Avro writes longs, lengths, counts and indexes."""
    out = bytearray()
    write_long(n, out)
    return bytes(out)


def write_long(n: int, out: bytearray) -> None:
    if not LONG_MIN <= n <= LONG_MAX:
        raise OverflowError(f"{n} does not fit a 64-bit long")
    n = (n << 1) ^ (n >> 63)
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


_SHORT_LENGTHS = [varint(n) for n in range(64)]  # one byte each: most strings are shorter than 64 bytes


def write_string(value: str, out: bytearray) -> None:
    write_bytes(value.encode(), out)


def write_bytes(value: bytes, out: bytearray) -> None:
    if len(value) < 64:
        out += _SHORT_LENGTHS[len(value)]
    else:
        write_long(len(value), out)
    out += value


@functools.cache
def record_writer(record_type: type) -> Write:
    """The writer of a top-level record: an event's envelope, or an output record. Generated source
    (`write.source`), every field's encoding written inline, as the readers below are."""
    compiler = _WriterCompiler(record_type.__name__)
    lines = [f"def write_{record_type.__name__}(record, out):"]
    if not issubclass(record_type, Event):
        compiler.fields(fields_of(record_type), "record", lines, "    ")
    else:
        compiler.fields(header_fields(), "record", lines, "    ")
        lines.append(f"    out += {compiler.name(varint(list(EVENT_TYPES.values()).index(record_type)), 'MEMBER')}")
        compiler.fields(body_fields(record_type), "record", lines, "    ")
    return compiler.compile(f"write_{record_type.__name__}", lines)


@functools.cache
def arguments_encoder(record_type: type) -> Callable[..., bytes]:
    """For an event kind (or an output record class): a function that takes what the class takes (the same
    parameters and defaults) and returns the Avro body of the record those arguments make, the
    bytes `record_writer(record_type)` writes for it, without making the record: what the
    simulator writes its file with. Arguments that do not fit the contract raise ValidationError
    naming the field, as `schemas.codec` does."""
    from schemas.validate import explain

    name = record_type.__name__
    compiler = _WriterCompiler(name)
    parameters, defaults = init_parameters(record_type)
    taken = [f.name for f in dataclasses.fields(record_type) if f.name in _GENERATED or f.name in compiler.namespace]
    if taken:
        raise TypeError(f"{name}: the generated encoder cannot take a field named {', '.join(taken)}")
    compiler.namespace.update(defaults, RECORD=record_type, explain=explain)
    arguments = ", ".join(f"{f.name}={f.name}" for f in dataclasses.fields(record_type))
    lines = [f"def encode_{name}({parameters}):", "    out = bytearray()", "    try:"]
    if not issubclass(record_type, Event):
        compiler.fields(fields_of(record_type), None, lines, "        ")
    else:
        compiler.fields(header_fields(), None, lines, "        ")
        lines.append(f"        out += {compiler.name(varint(list(EVENT_TYPES.values()).index(record_type)), 'MEMBER')}")
        compiler.fields(body_fields(record_type), None, lines, "        ")
    lines += ["    except (TypeError, OverflowError, UnicodeError):",
              f"        explain(RECORD({arguments}))  # raises ValidationError naming the field",
              "        raise",
              "    return bytes(out)"]
    return compiler.compile(f"encode_{name}", lines)


@functools.cache
def arguments_flattener(event_type: type[Event]) -> Callable[..., tuple]:
    """For an event kind: a function that takes what the class takes (the envelope's fields by position
    too) and returns the event as a flat tuple of the builtins `marshal` carries to another process
    (the kind's index in the body union, then every field in the envelope's order, a nested record
    as the tuple of its fields, an enum member as its index), checked as `arguments_encoder` checks,
    with the same ValidationError.
    `flat_writer(event_type)` writes the Avro body of such a tuple: the same bytes."""
    from schemas.validate import explain

    name = event_type.__name__
    compiler = _WriterCompiler(name)
    _, defaults = init_parameters(event_type)
    compiler.namespace.update(defaults, RECORD=event_type, explain=explain)
    fields = dataclasses.fields(event_type)
    arguments = ", ".join(f"{f.name}={f.name}" for f in fields)
    # The envelope's fields by position too (a node passes them so: no keywords to match), the kind's own by keyword.
    parameters = [f.name if f.default is dataclasses.MISSING else f"{f.name}=_d{i}" for i, f in enumerate(fields)]
    header, body = parameters[:len(header_fields())], parameters[len(header_fields()):]
    lines = [f"def flatten_{name}({', '.join([*header, *(['*', *body] if body else [])])}):", "    try:"]
    values = [compiler.flatten(f.shape, f.name, lines, "        ") for f in fields_of(event_type)]
    lines += [f"        return ({list(EVENT_TYPES.values()).index(event_type)}, {', '.join(values)})",
              "    except TypeError:",
              f"        explain(RECORD({arguments}))  # raises ValidationError naming the field",
              "        raise"]
    return compiler.compile(f"flatten_{name}", lines)


@functools.cache
def flat_writer(event_type: type[Event]) -> Write:
    """The writer of an event kind's flat tuples (`arguments_flattener`, which checked them): the bytes
    `record_writer` writes for the event."""
    compiler = _WriterCompiler(event_type.__name__, flat=True)
    lines = [f"def write_flat_{event_type.__name__}(flat, out):"]
    header, body = header_fields(), body_fields(event_type)
    for i, f in enumerate(header, 1):
        lines.append(f"    {f.name} = flat[{i}]")
    compiler.fields(header, None, lines, "    ")
    lines.append(f"    out += {compiler.name(varint(list(EVENT_TYPES.values()).index(event_type)), 'MEMBER')}")
    for i, f in enumerate(body, len(header) + 1):
        lines.append(f"    {f.name} = flat[{i}]")
    compiler.fields(body, None, lines, "    ")
    return compiler.compile(f"write_flat_{event_type.__name__}", lines)


# Names the generated source uses for itself: `arguments_encoder` refuses a class with a field so named
# (an Alert's `type`).
_GENERATED = frozenset({"out", "bytes", "len", "type", "explain", "RECORD", "TypeError", "OverflowError",
                        "UnicodeError"})


class _WriterCompiler:
    """Writes the source of one record class's writer function, and the names it uses."""

    def __init__(self, schema: str, *, flat: bool = False):
        """`flat`: the values written are flat (`arguments_flattener`): records as tuples, enum members as indexes."""
        self.schema = schema
        self.flat = flat
        self.namespace: dict[str, Any] = {"write_long": write_long, "SHORT_LENGTHS": _SHORT_LENGTHS}
        self._ids: dict[int, str] = {}
        self._count = 0

    def name(self, value: Any, prefix: str) -> str:
        if id(value) not in self._ids:
            self._ids[id(value)] = name = f"{prefix}_{len(self._ids)}"
            self.namespace[name] = value
        return self._ids[id(value)]

    def local(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def fields(self, fields: tuple[FieldShape, ...], record: str | None, lines: list[str], indent: str) -> None:
        """The lines that write `fields` of the local `record`, or, when None, the parameters named so."""
        for f in fields:
            value = f.name
            if record is not None:
                value = self.local("v")
                lines.append(f"{indent}{value} = {record}.{f.name}")
            self.emit(f.shape, value, lines, indent)

    def emit(self, shape: Shape, value: str, lines: list[str], indent: str) -> None:
        """The lines that append the encoding of the local `value` to `out`."""
        match shape:
            case Scalar(avro="string") | Scalar(avro="bytes"):
                data, size = self.local("b"), self.local("n")
                encode = ".encode()" if shape.avro == "string" else ""
                lines += [self.exactly(shape.python, value, indent),
                          f"{indent}{data} = {value}{encode}",
                          f"{indent}{size} = len({data})",
                          f"{indent}if {size} < 64:",
                          f"{indent}    out += SHORT_LENGTHS[{size}]",
                          f"{indent}else:",
                          f"{indent}    write_long({size}, out)",
                          f"{indent}out += {data}"]
            case Scalar(avro="long") | Timestamp():
                # Inline for small values and for epoch-millisecond times (2^34 <= v < 2^41: six bytes).
                n = self.local("n")
                lines += [self.exactly(int, value, indent),
                          f"{indent}if 0 <= {value} < 64:",
                          f"{indent}    out.append({value} << 1)",
                          f"{indent}elif 0x400000000 <= {value} < 0x20000000000:",
                          f"{indent}    {n} = {value} << 1",
                          f"{indent}    out += bytes(({n} & 127 | 128, {n} >> 7 & 127 | 128, {n} >> 14 & 127 | 128,"
                          f" {n} >> 21 & 127 | 128, {n} >> 28 & 127 | 128, {n} >> 35))",
                          f"{indent}else:",
                          f"{indent}    write_long({value}, out)"]
            case Scalar(avro="boolean"):
                lines += [self.exactly(bool, value, indent), f"{indent}out.append(1 if {value} else 0)"]
            case EnumType(cls=cls) if self.flat:
                lines.append(f"{indent}out += {self.name(tuple(varint(i) for i in range(len(cls))), 'ENUM')}[{value}]")
            case EnumType(cls=cls):
                indexes = {member: varint(i) for i, member in enumerate(cls)}
                lines += [self.exactly(cls, value, indent), f"{indent}out += {self.name(indexes, 'ENUM')}[{value}]"]
            case RecordType(cls=cls) if self.flat:
                for i, f in enumerate(fields_of(cls)):
                    item = self.local("v")
                    lines.append(f"{indent}{item} = {value}[{i}]")
                    self.emit(f.shape, item, lines, indent)
            case RecordType(cls=cls):
                lines.append(self.exactly(cls, value, indent))
                self.fields(fields_of(cls), value, lines, indent)
            case Nullable(inner=inner):
                # ["null", X]: member 0 is null, member 1 (zig-zag 2) is the value.
                lines += [f"{indent}if {value} is None:", f"{indent}    out.append(0)", f"{indent}else:",
                          f"{indent}    out.append(2)"]
                self.emit(inner, value, lines, indent + "    ")
            case Array(item=item):
                # One block holding every item, then the empty block that ends the array.
                each = self.local("x")
                lines += [self.exactly(tuple, value, indent),
                          f"{indent}if {value}:", f"{indent}    write_long(len({value}), out)",
                          f"{indent}    for {each} in {value}:"]
                self.emit(item, each, lines, indent + "        ")
                lines.append(f"{indent}out.append(0)")
            case _:
                raise TypeError(f"no binary writer for {shape}")

    def flatten(self, shape: Shape, value: str, lines: list[str], indent: str) -> str:
        """The lines that check the local `value` as `emit`'s do; returns the expression of its flat form."""
        match shape:
            case Scalar() | Timestamp():
                lines.append(self.exactly(int if isinstance(shape, Timestamp) else shape.python, value, indent))
                return value
            case EnumType(cls=cls):
                lines.append(self.exactly(cls, value, indent))
                return f"{self.name({member: i for i, member in enumerate(cls)}, 'INDEX')}[{value}]"
            case RecordType(cls=cls):
                lines.append(self.exactly(cls, value, indent))
                items = []
                for f in fields_of(cls):
                    item = self.local("v")
                    lines.append(f"{indent}{item} = {value}.{f.name}")
                    items.append(self.flatten(f.shape, item, lines, indent))
                return f"({', '.join(items)},)"
            case Nullable(inner=inner):
                flat = self.local("f")
                lines += [f"{indent}if {value} is None:", f"{indent}    {flat} = None", f"{indent}else:"]
                lines.append(f"{indent}    {flat} = {self.flatten(inner, value, lines, indent + '    ')}")
                return flat
            case Array(item=item):
                each, inner = self.local("x"), []
                flat = self.flatten(item, each, inner, indent + "    ")
                lines += [self.exactly(tuple, value, indent), f"{indent}for {each} in {value}:", *inner]
                if flat == each:  # items kept as they are (checked)
                    lines.append(f"{indent}    pass")
                    return value
                items = self.local("a")
                lines.insert(len(lines) - len(inner) - 1, f"{indent}{items} = []")
                lines.append(f"{indent}    {items}.append({flat})")
                return f"tuple({items})"
            case _:
                raise TypeError(f"no flat form for {shape}")

    def exactly(self, python: type, value: str, indent: str) -> str:
        """The line that refuses a value of another type than the contract's (a subclass too, as
        `schemas.validate` does: a bool is no long, a plain string no enum member). A flat value was
        checked when it was made flat."""
        if self.flat:
            return f"{indent}pass"
        return f"{indent}if type({value}) is not {self.name(python, 'TYPE')}: raise TypeError"

    def compile(self, function: str, lines: list[str]) -> Write:
        source = "\n".join(lines) + "\n"
        filename = f"<schemas.binary: {self.schema} writer>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # tracebacks show it
        exec(compile(source, filename, "exec"), self.namespace)  # noqa: S102 - source generated from the contract
        write = self.namespace[function]
        write.source = source
        return write


# ---- reading ----------------------------------------------------------------------------
#
# `read(data, pos)` returns the record encoded in the bytes `data` at `pos`, and the offset
# after it. A reader is generated Python source (`read.source`), one function per record
# class (per event kind for the envelope), with every field's decoding written inline: the
# one-byte cases of varints, lengths, union and enum indexes need no call, nested records
# are read in place, and records are built by setting their slots, which is all the frozen
# dataclasses' __init__ does, at three times the cost. (A class whose __init__ does more,
# a __post_init__ say, is built by calling it.)
#
# It accepts valid encodings only: a truncated body, a negative length, a long over 64 bits,
# a boolean other than 0 or 1, an index out of range or bad UTF-8 raise (IndexError or a
# ValueError). fastavro tolerates some of these (it reads any non-zero byte as true), so
# callers that must behave as fastavro did read a refused body again with fastavro, which
# also says what is wrong with it (`schemas.codec` and `producers.recording` do).

Read = Callable[[bytes, int], tuple[Any, int]]


class CorruptRecord(ValueError):
    """Bytes that are not a valid encoding of the record a compiled reader reads."""


def read_long(data: bytes, pos: int) -> tuple[int, int]:
    """The zig-zag varint at `pos`, and the offset after it."""
    # Unrolled to 6 bytes (42 bits: every epoch-millisecond time until the year 2109), the loop beyond.
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    n = b & 0x7F
    b = data[pos + 1]
    if b < 0x80:
        n |= b << 7
        pos += 2
    else:
        n |= (b & 0x7F) << 7
        b = data[pos + 2]
        if b < 0x80:
            n |= b << 14
            pos += 3
        else:
            n |= (b & 0x7F) << 14
            b = data[pos + 3]
            if b < 0x80:
                n |= b << 21
                pos += 4
            else:
                n |= (b & 0x7F) << 21
                b = data[pos + 4]
                if b < 0x80:
                    n |= b << 28
                    pos += 5
                else:
                    n |= (b & 0x7F) << 28
                    b = data[pos + 5]
                    if b >= 0x80:
                        return _read_long_loop(data, pos)
                    n |= b << 35
                    pos += 6
    return (n >> 1) ^ -(n & 1), pos


def _read_long_loop(data: bytes, pos: int) -> tuple[int, int]:
    n, shift = 0, 0
    while True:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift == 70:
            raise CorruptRecord(f"a varint of more than 10 bytes at {pos - 10}")
    if n >> 64:
        raise CorruptRecord(f"a varint over 64 bits ending at {pos - 1}")
    return (n >> 1) ^ -(n & 1), pos


def read_bytes(data: bytes, pos: int) -> tuple[bytes, int]:
    """The length-prefixed bytes at `pos`, and the offset after them."""
    length, pos = read_long(data, pos)
    end = pos + length
    if length < 0 or end > len(data):
        raise CorruptRecord(f"{length} bytes at {pos}, in {len(data)}")
    return data[pos:end], end


def read_string(data: bytes, pos: int) -> tuple[str, int]:
    value, pos = read_bytes(data, pos)
    return value.decode(), pos


@functools.cache
def top_level_reader(name: str) -> Read:
    """The reader of the current version of a top-level schema ("Event", "Alert", ...)."""
    if name != "Event":
        (record_type,) = record_types(name).values()
        return record_reader(record_type)
    return _event_reader()


@functools.cache
def record_reader(record_type: type) -> Read:
    """The reader of a record class that is not an event kind (an output, a nested record)."""
    if issubclass(record_type, Event):
        raise TypeError(f"{record_type.__name__} is an event kind: read events with top_level_reader('Event')")
    return _Compiler(record_type.__name__).function(record_type.__name__, fields_of(record_type), record_type)


def _event_reader() -> Read:
    header = header_fields()
    header_names = tuple(f"h{i}" for i in range(len(header)))
    bodies = tuple(
        _Compiler(kind).function(kind, body_fields(cls), cls, header=(header, header_names))
        for kind, cls in EVENT_TYPES.items()
    )
    compiler = _Compiler("Event")
    lines = ["def read_Event(data, p):", "    size = len(data)"]
    for f, target in zip(header, header_names):
        compiler.emit(f.shape, target, lines, "    ")
    lines += [
        "    b = data[p]",
        "    if b & 0x81:",
        "        raise CorruptRecord(f'no event kind has the index at {p}')",
        f"    return {compiler.name(bodies, 'BODIES')}[b >> 1](data, p + 1, {', '.join(header_names)})",
    ]
    return compiler.compile("read_Event", lines)


class _Compiler:
    """Writes the source of the reader functions of one schema, and the names they use."""

    def __init__(self, schema: str):
        self.schema = schema
        self.namespace: dict[str, Any] = {
            "CorruptRecord": CorruptRecord, "read_long": read_long, "read_bytes": read_bytes,
            "read_string": read_string, "new": object.__new__, "BOOLEAN": (False, True),
            "SHORT_LENGTH": _SHORT_LENGTH, "SHORT_LONG": _SHORT_LONG,
        }
        self._ids: dict[int, str] = {}
        self._count = 0

    def name(self, value: Any, prefix: str) -> str:
        """The global name `value` goes by in the generated source."""
        if id(value) not in self._ids:
            self._ids[id(value)] = name = f"{prefix}_{len(self._ids)}"
            self.namespace[name] = value
        return self._ids[id(value)]

    def local(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def function(self, name: str, fields: tuple[FieldShape, ...], cls: type,
                 header: tuple[tuple[FieldShape, ...], tuple[str, ...]] | None = None) -> Read:
        """read_<name>(data, p[, header values]) -> (record of `cls`, end)."""
        given, given_names = header or ((), ())
        lines = [f"def read_{name}(data, p{''.join(', ' + n for n in given_names)}):", "    size = len(data)"]
        targets = [self.local("v") for _ in fields]
        for f, target in zip(fields, targets):
            self.emit(f.shape, target, lines, "    ")
        self.construct(cls, (*given, *fields), (*given_names, *targets), "record", lines, "    ")
        lines.append("    return record, p")
        return self.compile(f"read_{name}", lines)

    def compile(self, function: str, lines: list[str]) -> Read:
        source = "\n".join(lines) + "\n"
        filename = f"<schemas.binary: {self.schema} reader {function}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # tracebacks show it
        exec(compile(source, filename, "exec"), self.namespace)  # noqa: S102 - source generated from the contract
        read = self.namespace[function]
        read.source = source
        return read

    def construct(self, cls: type, fields: tuple[FieldShape, ...], values: tuple[str, ...], target: str,
                  lines: list[str], indent: str) -> None:
        setters = _slot_setters(cls, tuple(f.name for f in fields))
        if setters is None:  # a class whose __init__ does more than store its fields
            arguments = ", ".join(f"{f.name}={value}" for f, value in zip(fields, values))
            lines.append(f"{indent}{target} = {self.name(cls, cls.__name__)}({arguments})")
            return
        lines.append(f"{indent}{target} = new({self.name(cls, cls.__name__)})")
        for f, value, setter in zip(fields, values, setters):
            lines.append(f"{indent}{self.name(setter, 'set_' + f.name)}({target}, {value})")

    def emit(self, shape: Shape, target: str, lines: list[str], indent: str) -> None:
        """Lines that read a value of `shape` at `p` into `target` and move `p` past it."""
        add = lambda *code: lines.extend(indent + line for line in code)  # noqa: E731
        match shape:
            case Scalar(avro="string" | "bytes" as avro):
                decode = ".decode()" if avro == "string" else ""
                add("q = SHORT_LENGTH[data[p]]",
                    "if q < 0:",
                    f"    {target}, p = read_{avro}(data, p)",
                    "else:",
                    "    p += 1",
                    "    q += p",
                    "    if q > size:",
                    f"        raise CorruptRecord(f'{{q - p}} bytes at {{p}}, in {{size}}')",
                    f"    {target} = data[p:q]{decode}",
                    "    p = q")
            case Scalar(avro="long"):
                add("b = data[p]",
                    "if b < 0x80:",
                    f"    {target} = SHORT_LONG[b]",
                    "    p += 1",
                    "else:",
                    f"    {target}, p = read_long(data, p)")
            case Timestamp():  # epoch milliseconds take 6 bytes
                add(f"{target}, p = read_long(data, p)")
            case Scalar(avro="boolean"):
                add(f"{target} = BOOLEAN[data[p]]", "p += 1")
            case EnumType(cls=cls):
                if len(cls) <= 64:  # the index takes one byte: a table of the 256 gives the member, or None
                    add(f"{target} = {self.name(_by_index_byte(cls), cls.__name__)}[data[p]]",
                        f"if {target} is None:",
                        f"    raise CorruptRecord(f'no {cls.__name__} symbol has the index at {{p}}')",
                        "p += 1")
                else:
                    index = self.local("i")
                    add(f"{index}, p = read_long(data, p)",
                        f"if {index} < 0:",
                        f"    raise CorruptRecord(f'{cls.__name__} index {{{index}}}')",
                        f"{target} = {self.name(tuple(cls), cls.__name__)}[{index}]")
            case RecordType(cls=cls):
                fields = fields_of(cls)
                values = tuple(self.local("r") for _ in fields)
                for f, value in zip(fields, values):
                    self.emit(f.shape, value, lines, indent)
                self.construct(cls, fields, values, target, lines, indent)
            case Nullable(inner=inner):
                add("b = data[p]",
                    "p += 1",
                    "if b == 0:",
                    f"    {target} = None",
                    "elif b == 2:")
                self.emit(inner, target, lines, indent + "    ")
                add("else:",
                    "    raise CorruptRecord(f'union index byte {b} at {p - 1}, not 0 (null) or 2')")
            case Array(item=item):
                items, count, value = self.local("items"), self.local("n"), self.local("item")
                add("if data[p] == 0:",
                    f"    {target} = ()",
                    "    p += 1",
                    "else:",
                    f"    {items} = []",
                    "    while True:",
                    f"        {count}, p = read_long(data, p)",
                    f"        if {count} == 0:",
                    "            break",
                    f"        if {count} < 0:",  # a block that gives its size in bytes too
                    f"            {count} = -{count}",
                    "            q, p = read_long(data, p)")
                if _takes_a_byte(item):  # so a count beyond the bytes left is corrupt, and no long loop
                    add(f"        if {count} > size - p:",
                        f"            raise CorruptRecord(f'{{{count}}} items at {{p}}, in {{size}}')")
                add(f"        for _ in range({count}):")
                self.emit(item, value, lines, indent + "            ")
                add(f"            {items}.append({value})",
                    f"    {target} = tuple({items})")
            case _:
                raise TypeError(f"no binary reader for {shape}")


# What one byte at the start of a varint says, when the varint is that byte alone (below 0x80):
# the long it encodes, and the length it gives (-1 when negative, or when it takes more bytes).
_SHORT_LONG = [(b >> 1) ^ -(b & 1) for b in range(0x80)]
_SHORT_LENGTH = [b >> 1 if b < 0x80 and not b & 1 else -1 for b in range(0x100)]


@functools.cache
def _by_index_byte(cls: type) -> list[Any]:
    """The member of an enum of 64 symbols at most that each byte encodes as its index, or None."""
    table: list[Any] = [None] * 0x100
    for index, member in enumerate(cls):
        table[index << 1] = member
    return table


def _takes_a_byte(shape: Shape) -> bool:
    """Whether every value of `shape` takes one byte at least (all but records of no such field)."""
    if isinstance(shape, RecordType):
        return any(_takes_a_byte(f.shape) for f in fields_of(shape.cls))
    return True


@functools.cache
def _slot_setters(cls: type, names: tuple[str, ...]) -> tuple[Callable[[Any, Any], None], ...] | None:
    """`events.slot_setters(cls)`, when `cls`'s fields are `names`."""
    setters = slot_setters(cls)
    return setters if setters is not None and tuple(f.name for f in dataclasses.fields(cls)) == names else None
