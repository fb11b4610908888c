"""The catalogue of released writer schemas, keyed by fingerprint: how a reader finds a writer's schema.

No schema registry is reachable, so every record says which schema wrote it by the 8-byte
CRC-64-AVRO fingerprint of that schema's Parsing Canonical Form (see `schemas.wire`). A
reader keeps every released version of every top-level schema:

    schemas/avro/Event.avsc              the current version: what this code writes and reads into
    schemas/avro/history/Event.v1.avsc   every released version, numbered from 1; the current one too

and resolves a record from its writer version to the current version (Avro schema resolution).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from fastavro.schema import fingerprint as _fingerprint_hex
from fastavro.schema import to_parsing_canonical_form

from schemas.shape import TOP_LEVEL_NAMES

AVRO_DIR = Path(__file__).resolve().parent / "avro"
HISTORY = "history"
_VERSION_FILE = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)\.v(?P<version>[1-9][0-9]*)\.avsc$")


class CatalogueError(RuntimeError):
    """The schema files are inconsistent (a gap in the versions, a current file not released)."""


def fingerprint(schema: Any) -> bytes:
    """CRC-64-AVRO of the schema's Parsing Canonical Form, 8 bytes little-endian (as on the wire)."""
    return bytes.fromhex(_fingerprint_hex(to_parsing_canonical_form(schema), "CRC-64-AVRO"))


@dataclass(frozen=True)
class SchemaVersion:
    """One released version of one top-level schema."""

    name: str
    version: int
    schema: dict[str, Any] = field(repr=False, compare=False)
    fingerprint: bytes

    @functools.cached_property
    def json(self) -> str:
        """The schema as compact JSON text (what Spark's from_avro / to_avro take)."""
        return json.dumps(self.schema, separators=(",", ":"))

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


class Catalogue:
    """Every known writer version, by fingerprint, and the current version of each top-level schema."""

    def __init__(self, versions: Iterable[SchemaVersion], current: dict[str, SchemaVersion]):
        self._by_fingerprint: dict[bytes, SchemaVersion] = {}
        for version in versions:
            self._by_fingerprint.setdefault(version.fingerprint, version)
        self._current = dict(current)
        for version in self._current.values():
            if version.fingerprint not in self._by_fingerprint:
                raise CatalogueError(f"the current {version.name} schema is not a released version")

    def lookup(self, fp: bytes) -> SchemaVersion | None:
        return self._by_fingerprint.get(fp)

    def current(self, name: str) -> SchemaVersion:
        return self._current[name]

    def versions(self, name: str) -> list[SchemaVersion]:
        """Every known version of `name`, oldest first."""
        return sorted((v for v in self._by_fingerprint.values() if v.name == name), key=lambda v: v.version)

    def all_versions(self) -> list[SchemaVersion]:
        return sorted(self._by_fingerprint.values(), key=lambda v: (v.name, v.version))

    def with_versions(self, *extra: SchemaVersion) -> "Catalogue":
        """This catalogue plus further writer versions (a newer release, or a synthesized one in tests)."""
        return Catalogue([*self._by_fingerprint.values(), *extra], self._current)


def version_of(name: str, version: int, schema: dict[str, Any]) -> SchemaVersion:
    return SchemaVersion(name, version, schema, fingerprint(schema))


def read_history(history_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """The released schemas under `history_dir`, by name, oldest first; versions must run 1, 2, 3..."""
    found: dict[str, dict[int, dict[str, Any]]] = {}
    for path in sorted(history_dir.glob("*.avsc")):
        match = _VERSION_FILE.match(path.name)
        if not match:
            raise CatalogueError(f"{path}: history files are named NAME.vN.avsc")
        found.setdefault(match["name"], {})[int(match["version"])] = json.loads(path.read_text())
    history = {}
    for name, versions in found.items():
        if sorted(versions) != list(range(1, len(versions) + 1)):
            raise CatalogueError(f"{history_dir}: {name} versions {sorted(versions)} do not run 1..{len(versions)}")
        history[name] = [versions[v] for v in sorted(versions)]
    return history


def load(avro_dir: Path = AVRO_DIR) -> Catalogue:
    """The catalogue of the schema files under `avro_dir`."""
    versions = [
        version_of(name, number, schema)
        for name, schemas in read_history(avro_dir / HISTORY).items()
        for number, schema in enumerate(schemas, start=1)
    ]
    by_fingerprint = {v.fingerprint: v for v in versions}
    current = {}
    for name in TOP_LEVEL_NAMES:
        path = avro_dir / f"{name}.avsc"
        schema = json.loads(path.read_text())
        released = by_fingerprint.get(fingerprint(schema))
        if released is None or released.name != name:
            raise CatalogueError(f"{path} is not in {avro_dir / HISTORY}: run `python -m schemas.avro_gen`")
        # The current file may carry newer docs than its released twin; the canonical form is the same.
        current[name] = SchemaVersion(name, released.version, schema, released.fingerprint)
    return Catalogue(versions, current)


@functools.cache
def default() -> Catalogue:
    """The catalogue shipped with this code (loaded once per process)."""
    return load()
