"""How far `ingest --follow` got in each log file, kept in a state file across restarts.

    positions = Positions(Path(".run/ingest/positions.json"))   # what an earlier run acknowledged
    if positions.published(line): ...                          # acknowledged before: do not send it again
    done = positions.sending(line)                             # a callback per record sent for the line
    positions.sent(line)                                       # the line made all its records
    positions.save()                                           # atomically; False when the file cannot be written
    positions.not_saved()                                      # then one line: the file, why, what it does not record

A file is known by its identity: device and inode, and a hash of its first bytes (an inode
is reused once a file is deleted, so the two alone could name another file). A file's
position advances only on delivery reports: it is the offset just after the last line whose
records were all acknowledged, every line before it included. Lines acknowledged beyond a
line still in flight (or refused) are remembered one by one, so a restart sends again only
what the broker never acknowledged. Lines that made no record count as acknowledged.

A kill -9 loses what was acknowledged since the last `save` (the caller saves every poll):
those lines are sent again, with the same event ids (`mtl_ingest.line_id`).
"""

from __future__ import annotations

import hashlib
import heapq
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from producers.log_tail import Line, TailedFile

HEAD_BYTES = 1024
VERSION = 1


@dataclass
class _Progress:
    """One file's position in this run."""

    path: str
    identity: tuple[int, int]
    head_len: int
    head_sha: str
    generation: int
    offset: int = 0  # every line ending at or before it is acknowledged
    beyond: list[int] = field(default_factory=list)  # a heap: line ends acknowledged after `offset`
    waiting: dict[int, int] = field(default_factory=dict)  # line end -> records unacknowledged, in file order
    failed: set[int] = field(default_factory=set)
    read_to: int = 0  # the end of the last line seen in this run

    def seen(self, end: int) -> None:
        self.read_to = max(self.read_to, end)

    def acknowledged(self, end: int) -> None:
        heapq.heappush(self.beyond, end)
        floor = min(next(iter(self.waiting), math.inf), min(self.failed, default=math.inf), self.read_to + 1)
        while self.beyond and self.beyond[0] < floor:
            self.offset = max(self.offset, heapq.heappop(self.beyond))

    def entry(self) -> dict:
        return {"path": self.path, "device": self.identity[0], "inode": self.identity[1], "head_len": self.head_len,
                "head_sha256": self.head_sha, "offset": self.offset, "beyond": sorted(self.beyond)}

    def holds(self, end: int) -> bool:
        return end <= self.offset or end in self.beyond


# What each field of a saved entry must be (as `_Progress.entry` writes it): a hand-edited state file
# of other types is refused when read, not by a TypeError in the middle of a run.
_WHOLE = (lambda v: type(v) is int and v >= 0, "a whole number >= 0")
_ENTRY = {"path": (lambda v: isinstance(v, str), "a path"), "device": _WHOLE, "inode": _WHOLE, "head_len": _WHOLE,
          "head_sha256": (lambda v: isinstance(v, str), "a SHA-256 in hex"), "offset": _WHOLE,
          "beyond": (lambda v: isinstance(v, list) and all(_WHOLE[0](n) for n in v), "a list of whole numbers >= 0")}


def _checked(entry: dict, n: int) -> dict:
    for key, (test, allowed) in _ENTRY.items():
        if not test(entry[key]):
            raise ValueError(f"files[{n}].{key}: expected {allowed}, got {entry[key]!r}")
    return entry


class Positions:
    def __init__(self, path: Path):
        self.path = path
        self._saved: dict[tuple[int, int], dict] = {}
        self._files: dict[int, _Progress] = {}  # by id() of the TailedFile
        self._acknowledged = self._acknowledged_at_save = 0  # records, in this run
        self._save_error: str | None = None
        if path.exists():
            try:
                state = json.loads(path.read_text(encoding="utf-8"))
                entries = state["files"] if state.get("version") == VERSION else []
                self._saved = {(e["device"], e["inode"]): _checked(e, n) for n, e in enumerate(entries)}
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise ValueError(f"{path}: not a state file of ingest positions ({exc})") from None

    def _progress(self, file: TailedFile) -> _Progress:
        known = self._files.get(id(file))
        if known is not None and known.generation == file.generation:
            return known
        head = file.head(HEAD_BYTES)
        progress = _Progress(str(file.path), file.identity, len(head), hashlib.sha256(head).hexdigest(),
                             file.generation)
        saved = self._saved.pop(file.identity, None) if known is None else None
        if saved is not None and saved["head_sha256"] == hashlib.sha256(file.head(saved["head_len"])).hexdigest():
            progress.offset, progress.beyond = saved["offset"], sorted(saved["beyond"])
        self._files[id(file)] = progress
        return progress

    @property
    def refused(self) -> int:
        """How many lines had a record the broker did not acknowledge."""
        return sum(len(p.failed) for p in self._files.values())

    def published(self, line: Line) -> bool:
        """Whether an earlier run (or this one) had the line's records acknowledged."""
        progress = self._progress(line.file)
        progress.seen(line.end)
        return progress.holds(line.end)

    def sending(self, line: Line) -> Callable:
        """The delivery callback for one record of `line`."""
        progress = self._progress(line.file)
        progress.seen(line.end)
        progress.waiting[line.end] = progress.waiting.get(line.end, 1) + 1

        def delivered(error, _message=None) -> None:
            if error is not None:
                progress.failed.add(line.end)
            else:
                self._acknowledged += 1
            self._done(progress, line.end)

        return delivered

    def sent(self, line: Line) -> None:
        """Every record of `line` has been handed to the producer (none, perhaps)."""
        progress = self._progress(line.file)
        progress.seen(line.end)
        progress.waiting.setdefault(line.end, 1)
        self._done(progress, line.end)

    @staticmethod
    def _done(progress: _Progress, end: int) -> None:
        left = progress.waiting[end] - 1
        if left:
            progress.waiting[end] = left
            return
        del progress.waiting[end]
        if end not in progress.failed:
            progress.acknowledged(end)

    def save(self) -> bool:
        """Write every file's position (and keep those of files not seen in this run while they exist);
        False when the state file could not be written, now or at an earlier save (`not_saved` says why)."""
        entries = [e for e in [p.entry() for p in self._files.values()] + list(self._saved.values()) if _exists(e)]
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text(json.dumps({"version": VERSION, "files": entries}, indent=1), encoding="utf-8")
            os.replace(temporary, self.path)
        except OSError as exc:
            self._save_error = exc.strerror or str(exc)
            return False
        self._acknowledged_at_save = self._acknowledged
        return self._save_error is None

    def not_saved(self) -> str:
        """One line after a failed `save`: the state file, why, and how many published records it does not record."""
        said = f"{self.path}: could not be written ({self._save_error})"
        unrecorded = self._acknowledged - self._acknowledged_at_save
        if unrecorded:
            said += f"; {unrecorded:,} published records are not recorded in it (a restart sends them again)"
        return said


def _exists(entry: dict) -> bool:
    try:
        stat = os.stat(entry["path"])
    except OSError:
        return False
    return (stat.st_dev, stat.st_ino) == (entry["device"], entry["inode"])
