"""`--json` on the status commands: a dataclass (or a dict of them) as one JSON object, paths as strings."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any


def plain(value: Any) -> Any:
    """`value` with dataclasses as dicts and paths as strings, ready for `json.dumps`."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def as_json(value: Any) -> str:
    return json.dumps(plain(value), ensure_ascii=False)
