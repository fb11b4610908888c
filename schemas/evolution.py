"""The evolution policy, checked: may a schema change be released as the next version?

Allowed (a reader of the new version still reads every older record, by Avro resolution):
- add a record field that has a default;
- add an enum symbol at the end (readers that lack it read the enum's default, UNKNOWN);
- add a member at the end of a union (a new event kind at the end of the body union);
- change docs and defaults.
Anything else (removing, renaming, reordering symbols or union members, changing a type or
a name) is refused. `python -m schemas.avro_gen` applies this before it adds a version.
"""

from __future__ import annotations

from typing import Any

Schema = Any


class PolicyError(ValueError):
    """A schema change the evolution policy does not allow."""


def problems(old: Schema, new: Schema, path: str = "") -> list[str]:
    """What in `new` breaks the policy against `old`; empty when `new` may follow `old`."""
    return _Comparison(_definitions(old), _definitions(new)).compare(old, new, path or _name(old))


def require_compatible(old: Schema, new: Schema, name: str) -> None:
    found = problems(old, new, name)
    if found:
        raise PolicyError(f"{name}: this change breaks the evolution policy (schemas/README.md):\n  "
                          + "\n  ".join(found))


class _Comparison:
    def __init__(self, old_names: dict[str, Schema], new_names: dict[str, Schema]):
        self.old_names, self.new_names = old_names, new_names
        self.seen: set[str] = set()

    def compare(self, old: Schema, new: Schema, path: str) -> list[str]:
        old, new = self._resolve(old, self.old_names), self._resolve(new, self.new_names)
        old_type, new_type = _type(old), _type(new)
        if old_type != new_type:
            return [f"{path}: type changed from {_describe(old)} to {_describe(new)}"]
        if old_type in ("record", "enum") and _name(old) != _name(new):
            return [f"{path}: renamed from {_name(old)} to {_name(new)}"]
        if old_type == "record":
            if _name(old) in self.seen:  # compared once, wherever it is used again
                return []
            self.seen.add(_name(old))
            return self._record(old, new, path)
        if old_type == "enum":
            return self._enum(old, new, path)
        if old_type == "union":
            return self._union(old, new, path)
        if old_type == "array":
            return self.compare(old["items"], new["items"], f"{path}[]")
        if old_type == "map":
            return self.compare(old["values"], new["values"], f"{path}{{}}")
        if _logical(old) != _logical(new):
            return [f"{path}: logical type changed from {_logical(old) or 'none'} to {_logical(new) or 'none'}"]
        return []

    def _record(self, old: Schema, new: Schema, path: str) -> list[str]:
        found = []
        new_fields = {f["name"]: f for f in new["fields"]}
        old_names = {f["name"] for f in old["fields"]}
        for f in old["fields"]:
            if f["name"] not in new_fields:
                found.append(f"{path}.{f['name']}: removed (or renamed)")
            else:
                found += self.compare(f["type"], new_fields[f["name"]]["type"], f"{path}.{f['name']}")
        for name, f in new_fields.items():
            if name not in old_names and "default" not in f:
                found.append(f"{path}.{name}: added without a default")
        return found

    def _enum(self, old: Schema, new: Schema, path: str) -> list[str]:
        old_symbols, new_symbols = old["symbols"], new["symbols"]
        if new_symbols[: len(old_symbols)] != old_symbols:
            return [f"{path}: symbols {old_symbols} must stay, in order, at the start of {new_symbols}"]
        if old.get("default") != new.get("default"):
            return [f"{path}: enum default changed from {old.get('default')} to {new.get('default')}"]
        return []

    def _union(self, old: list, new: list, path: str) -> list[str]:
        if len(new) < len(old):
            return [f"{path}: union lost members ({len(old)} -> {len(new)})"]
        found = []
        for old_member, new_member in zip(old, new):
            label = _name(self._resolve(old_member, self.old_names)) or _type(old_member)
            found += self.compare(old_member, new_member, f"{path}<{label}>")
        return found

    @staticmethod
    def _resolve(schema: Schema, names: dict[str, Schema]) -> Schema:
        if isinstance(schema, str) and _short(schema) in names:
            return names[_short(schema)]
        return schema


def _definitions(schema: Schema, found: dict[str, Schema] | None = None) -> dict[str, Schema]:
    """Every named type defined in `schema`, by short name."""
    found = {} if found is None else found
    if isinstance(schema, list):
        for member in schema:
            _definitions(member, found)
    elif isinstance(schema, dict):
        if schema.get("type") in ("record", "enum", "fixed"):
            found[_short(schema["name"])] = schema
        for f in schema.get("fields", ()):
            _definitions(f["type"], found)
        for key in ("items", "values"):
            if key in schema:
                _definitions(schema[key], found)
    return found


def _type(schema: Schema) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        return schema["type"] if isinstance(schema["type"], str) else _type(schema["type"])
    return schema


def _name(schema: Schema) -> str:
    return _short(schema["name"]) if isinstance(schema, dict) and "name" in schema else ""


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _logical(schema: Schema) -> str | None:
    return schema.get("logicalType") if isinstance(schema, dict) else None


def _describe(schema: Schema) -> str:
    return _name(schema) or _type(schema)
