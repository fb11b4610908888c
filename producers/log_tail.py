"""Reading growing log files line by line, in time order across files, following roll-over.

    tail = LogTail(["logs/MSGTRK20261122-1.LOG"], follow=True, new_reader=MtlReader)
    for line in tail.poll():      # what was written since the last poll, every file merged by time
        line.path, line.number, line.raw, line.item      # item: what the file's reader made of the line

Each file has its own reader (`new_reader()`: an object with `line(raw)`, `continues(raw)`, `whole(item)`,
`not_text(text, reason)` and `reset()`); lines
of several files come out merged by the `time_ms` of what their reader made of them (a line
without one keeps its place in its file), so a primary's lines and its shadow's, from two
servers' logs, reach the mapper in event-time order.

Without `follow` the tail reads the named files (globs expanded, ignoring case: Exchange writes
`.LOG`, its documents `.log`) once to their end; a folder stands for its `MSGTRK*.log` files. A last line
with no line end is read when the file's reader finds it whole (a file written without one at its end);
else it is no record yet (the server is still writing it): it is not read, and `unfinished` names its file
and line number, so that a later run reads it whole. A record whose quoted field holds a line break (the
reader's `continues(raw)`: an Export-Csv file's) is joined from its lines, up to `MAX_RECORD_LINES`, and read as
one line (`line.number` its first line's, `line.end` after its last); one whose quote is still open at the end
of the file is left unread as a last line with no line end is. NUL bytes a file ends with (a crash's padding on NTFS)
are no line: they are left unread, and read again at a poll that may find them written over (the file's
size or modification time is no longer what it was, or its first bytes there are no longer NUL); the NULs
a line starts with are passed over (a line written after such padding). It holds
none of them open between two reads of a chunk (a folder of thousands of small files passed the
process's limit of open files, EMFILE), reopening each where it was left. A file
that does not exist (without `follow`) and a glob that matches no file are FileNotFoundErrors. With it,
every poll also picks up:
- lines appended to a file since the last poll (an unfinished last line waits for its newline);
- a file truncated in place, or rewritten in place (its first bytes, up to `HEAD_BYTES`, are no longer
  those it was read from, even when it is now longer than where it was left): read again from its first
  line, its reader reset;
- a file replaced (deleted, renamed away, or a new file under its name): the old one is read to
  its end, the new one from its start;
- a new file in a watched folder: one matching a glob argument (its folders a glob too: `logs/*/MSGTRK*.LOG`
  watches the server folders there now), or, for a file argument, one
  whose name differs from it only in its digits (MSGTRK20261122-1.LOG -> MSGTRK20261122-2.LOG,
  MSGTRK20261123-1.LOG), Exchange's roll-over names. New files are read from their start.
- a file that has rolled over (read to its end, unchanged since the last poll, and a file of the
  same watch written after it) is closed; it is opened again, where it was left, if it grows.
A file the caller `skip`s (it is no log of the kind it reads) gives no more lines and is closed,
and is not picked up again unless another file comes under its name. One that comes while following
and cannot be read (no permission) is kept in `unreadable` with the reason, and tried again at every
poll: it is read once it can be. (One named at the start that cannot be read is a PermissionError.)

A file that starts with a UTF-16 byte-order mark (what `Export-Csv -Encoding Unicode` writes) is
split on its own line ends and each line handed to the reader transcoded to UTF-8 (`line.raw`
is then that UTF-8 text; `line.end` stays a byte offset in the file); a line that is not UTF-16 (a
lone surrogate, an odd byte) goes to the reader's `not_text` instead, `line.raw` the file's own bytes.

`max_age_s` leaves out files last written longer ago than that. Each line carries the file it
came from (`line.file`: its device and inode, and a way to read its first bytes) and the byte
offset just after it (`line.end`), so that a caller can remember how far it got.
"""

from __future__ import annotations

import errno
import fnmatch
import glob
import heapq
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

CHUNK = 1 << 16
MAX_RECORD_LINES = 100  # how many lines a record whose quoted field holds line breaks may span
HEAD_BYTES = 1024  # a file's first bytes, kept to tell a file rewritten in place from one that grew
_GLOB_CHARS = re.compile(r"[*?\[]")
FOLDER_PATTERN = "MSGTRK*.log"  # what a folder argument stands for (case ignored)
_RENAMED = re.compile(fnmatch.translate("*" + FOLDER_PATTERN), re.IGNORECASE)  # EX03_MSGTRK...: said, not read
_UTF16 = {b"\xff\xfe": ("utf-16-le", b"\n\x00", b"\r\x00"), b"\xfe\xff": ("utf-16-be", b"\x00\n", b"\x00\r")}


@dataclass(frozen=True)
class Line:
    path: Path
    number: int  # 1-based, within the file (from its start again after a truncation)
    raw: bytes  # without its line end
    item: Any  # what the file's reader made of it
    end: int = 0  # the byte offset just after the line's end
    file: "TailedFile | None" = None


class TailedFile:
    def __init__(self, path: Path, new_reader: Callable[[], Any], held: bool = True):
        self.path = path
        self.held = held  # open from one read to the next (to follow it), else only while a chunk is read
        self.handle = open(path, "rb")
        stat = os.fstat(self.handle.fileno())
        self.identity = (stat.st_dev, stat.st_ino)
        self.reader = new_reader(path)
        self.number, self.partial, self.last_ms = 0, b"", 0
        self.cut: tuple[int, str] | None = None  # a last record left unread (`lines`): its line number, why
        self.record: list[tuple[bytes, int, int]] = []  # a record read so far, a quoted field open: (line, end, number)
        self.codec: str | None = None  # "utf-16-le"/"utf-16-be" after a UTF-16 byte-order mark, else None
        self.newline, self.cr = b"\n", b"\r"
        self.generation = 0  # how many times it was truncated and read again from its start
        self.seen_size = -1  # its size at the last poll, while it is read to its end
        self.closed_at = 0
        self.prefix = b""  # its first bytes as read (up to HEAD_BYTES)
        self.padding = 0  # NUL bytes at its end, not read (`lines`)
        self.padded_at: tuple[int, int] | None = None  # `_stamp()` before the read that found them
        if not held:
            self.close()

    def head(self, size: int) -> bytes:
        """The file's first `size` bytes (fewer if it is shorter)."""
        if self.handle.closed:
            with open(self.path, "rb") as handle:
                return handle.read(size)
        return os.pread(self.handle.fileno(), size, 0)

    def rewritten(self) -> bool:
        """Shorter than where it was read to, or its first bytes are not those it was read from."""
        return (os.fstat(self.handle.fileno()).st_size < self.handle.tell()
                or self.head(len(self.prefix)) != self.prefix)

    def restart(self) -> None:
        self.handle.seek(0)
        self.prefix = b""
        self.number, self.partial, self.last_ms, self.padding, self.record = 0, b"", 0, 0, []
        self.generation += 1
        self.reader.reset()

    def finished(self) -> bool:
        """Read to its end, with no unfinished line, and the same size as at the last poll."""
        size = os.fstat(self.handle.fileno()).st_size
        done = not self.partial and not self.record and size == self.handle.tell() + self.padding == self.seen_size
        self.seen_size = size
        return done

    def close(self) -> None:
        if not self.handle.closed:
            self.closed_at = self.handle.tell()
            self.handle.close()

    def reopen(self) -> None:
        self.handle = open(self.path, "rb")
        self.handle.seek(self.closed_at)

    def size(self) -> int:
        return os.fstat(self.handle.fileno()).st_size if not self.handle.closed else os.stat(self.path).st_size

    def _read(self) -> tuple[bytes, int]:
        """The next chunk, and the offset after it; a file not `held` is open only meanwhile."""
        if self.handle.closed:
            self.reopen()
        chunk = self.handle.read(CHUNK)
        at = self.handle.tell()
        if not self.held:
            self.close()
        return chunk, at

    def lines(self, final: bool, whole_only: bool = False) -> Iterator[tuple[int, int, Line]]:
        """(time key, line number, line) for what was written since the last read; `final` takes a last line
        with no line end too; with `whole_only`, only when its reader finds it whole (`whole`: a file written
        without a line end at its end), else it is left unread, its number in `cut` (the server is still
        writing it), as is a record whose quoted field is still open (`_join`)."""
        stamp = self._stamp()
        if self._padding_unchanged(stamp):
            at = self.handle.tell()
        else:
            at = yield from self._new_lines()
            at -= self._unread_padding()
            self.padded_at = stamp
        if not final:
            return
        raw, self.partial = self.partial, b""
        entries = list(self._take(raw, at)) if raw else []  # none while the record's quoted field is open
        last = entries.pop() if entries else None
        yield from entries
        if last is not None and (not whole_only or self.reader.whole(last[2].item)):
            yield last
        elif last is not None:
            self.cut = last[2].number, "it has no line end yet"
        if self.record and whole_only:
            self.cut = self.record[0][2], "a quoted field of its record is not closed yet"
        elif self.record:
            yield from self._flush()

    def _new_lines(self) -> Iterator[tuple[int, int, Line]]:
        """The lines read to the file's end (`lines`); returns the offset of its end."""
        while True:
            chunk, at = self._read()
            if not chunk:
                return at
            start = at - len(chunk)
            if start < HEAD_BYTES:
                self.prefix = self.prefix[:start] + chunk[:HEAD_BYTES - start]
            end = at - len(chunk) - len(self.partial)  # where the unfinished line starts
            if end == 0 and self.number == 0:
                self.codec, self.newline, self.cr = _UTF16.get((self.partial + chunk)[:2], (None, b"\n", b"\r"))
            *complete, self.partial = _split(self.partial + chunk, self.newline)
            for raw in complete:
                end += len(raw) + len(self.newline)
                yield from self._take(raw, end)

    def _stamp(self) -> tuple[int, int] | None:
        """Its size and modification time (ns), while it is open."""
        if self.handle.closed:
            return None
        stat = os.fstat(self.handle.fileno())
        return stat.st_size, stat.st_mtime_ns

    def _padding_unchanged(self, stamp: tuple[int, int] | None) -> bool:
        """Whether the NULs it ended with are surely all it holds past where it was read to (read again, they
        would be read in vain at every poll, however many): its size and modification time are those before
        the read that found them, and its first code unit there is still NUL (written over in the same tick
        of a coarse clock, or by a copy that keeps times)."""
        unit = len(self.newline)
        return (self.padding > 0 and stamp is not None and stamp == self.padded_at
                and os.pread(self.handle.fileno(), unit, self.handle.tell()) == b"\0" * unit)

    def _unread_padding(self) -> int:
        """The NUL bytes the file ends with (what NTFS leaves of a file extended and never written, after a
        crash) are no line: left unread, the next read starts at them, to read what overwrites them."""
        self.padding = padding(self.partial, len(self.newline))
        if self.padding:
            self.partial = self.partial[:-self.padding]
            if self.handle.closed:
                self.closed_at -= self.padding
            else:
                self.handle.seek(-self.padding, os.SEEK_CUR)
            self.prefix = self.prefix[:self.closed_at if self.handle.closed else self.handle.tell()]
        return self.padding

    def _take(self, raw: bytes, end: int) -> Iterator[tuple[int, int, Line]]:
        """A line read (its line end cut off, its CR kept): the record it ends, if any."""
        self.number += 1
        if not self.record:
            raw = after_padding(raw, len(self.newline))
        try:
            text = raw if self.codec is None else raw.decode(self.codec).encode("utf-8")
        except UnicodeDecodeError as exc:  # a lone surrogate, an odd byte: as a line that is not UTF-8
            yield from self._flush()
            raw = raw.removesuffix(self.cr)
            item = self.reader.not_text(raw.decode(self.codec, errors="replace"),
                                        f"not UTF-16 text ({exc.reason} at byte {exc.start})")
            yield self.last_ms, self.number, Line(self.path, self.number, raw, item, end, self)
        else:
            yield from self._join(text, end, self.number)

    def _join(self, text: bytes, end: int, number: int) -> Iterator[tuple[int, int, Line]]:
        """A line of text joined to the record it belongs to: a record whose quoted field holds a line break
        (its reader's `continues`) goes on, up to `MAX_RECORD_LINES` lines; one whose quote is still open then
        is its first line alone (a bad line), the others read again."""
        self.record.append((text, end, number))
        if not self.reader.continues(b"\n".join(line for line, _, _ in self.record)):
            yield from self._flush()
        elif len(self.record) == MAX_RECORD_LINES:
            first, *rest = self.record
            self.record = [first]
            yield from self._flush()
            for line in rest:
                yield from self._join(*line)

    def _flush(self) -> Iterator[tuple[int, int, Line]]:
        """The record held, as far as it was read, to its reader."""
        if not self.record:
            return
        held, self.record = self.record, []
        raw = b"\n".join(line for line, _, _ in held).removesuffix(b"\r")
        item = self.reader.line(raw)
        self.last_ms = getattr(item, "time_ms", None) or self.last_ms
        yield self.last_ms, held[0][2], Line(self.path, held[0][2], raw, item, held[-1][1], self)


class LogTail:
    def __init__(self, paths: list[str], *, follow: bool, new_reader: Callable[[], Any],
                 max_age_s: float | None = None, clock: Callable[[], float] = time.time):
        self.follow = follow
        self.new_reader = new_reader
        self.max_age_s, self.clock = max_age_s, clock
        self.files: dict[Path, TailedFile] = {}
        self.rolled_over: dict[Path, TailedFile] = {}  # read to their end and closed
        self.skipped: dict[Path, TailedFile] = {}  # not to be read (`skip`), while the same file is under its name
        self.unreadable: dict[Path, str] = {}  # came while following and could not be opened: why (tried again)
        self.unfinished: dict[Path, tuple[int, str]] = {}  # without `follow`: a last record not read (`TailedFile.cut`)
        self.watches: list[tuple[str, re.Pattern[str]]] = []  # (folders: a glob, name pattern) for new files
        for arg in paths:
            path, folder = Path(arg), None
            if path.is_dir():
                folder, arg, path = arg, str(path / FOLDER_PATTERN), path / FOLDER_PATTERN
            if _GLOB_CHARS.search(arg) and not path.is_file():  # a file named with [ ] is that file
                pattern = re.compile(fnmatch.translate(path.name), re.IGNORECASE)
                folders = glob.escape(str(path.parent)) if folder is not None else str(path.parent)
                self.watches.append((folders, pattern))
                matches = sorted(m for m in glob.glob(os.path.join(folders, "*"))
                                 if pattern.fullmatch(Path(m).name) and not os.path.isdir(m))  # as _scan takes them
                if not matches and folder is not None:  # named as the person named it
                    renamed = sum(1 for m in Path(folder).glob("*") if _RENAMED.fullmatch(m.name))
                    raise FileNotFoundError(errno.ENOENT, f"no {FOLDER_PATTERN} file in this folder ("
                                            + (f"{renamed} named *{FOLDER_PATTERN}, renamed: quote a glob such as"
                                               f" '{Path(folder) / ('*' + FOLDER_PATTERN)}')" if renamed else
                                               f"its subfolders are not read: name them, or quote a glob such as"
                                               f" '{Path(folder) / '*' / FOLDER_PATTERN}')"), folder)
                if not matches:
                    raise FileNotFoundError(errno.ENOENT, "no file matches this pattern", arg)
                for match in matches:
                    self._open(Path(match))
            else:
                if not path.is_file() and not follow:
                    raise FileNotFoundError(errno.ENOENT, "no such file", arg)
                self.watches.append((glob.escape(str(path.parent)),
                                     re.compile(re.sub(r"\d+", r"\\d+", re.escape(path.name)), re.IGNORECASE)))
                if path.is_file():
                    self._open(path)

    def _open(self, path: Path) -> None:
        try:
            if self.max_age_s is not None and os.stat(path).st_mtime < self.clock() - self.max_age_s:
                return
            self.files[path] = TailedFile(path, self.new_reader, held=self.follow)
        except FileNotFoundError:
            pass  # gone between listing and opening

    def _open_later(self, path: Path) -> None:
        """`_open` for a file that came while following: one that cannot be read is noted and tried again."""
        try:
            self._open(path)
            self.unreadable.pop(path, None)
        except PermissionError as exc:
            self.unreadable[path] = exc.strerror

    def poll(self) -> Iterator[Line]:
        """The lines written since the last poll (all of them, the first time), merged by time."""
        draining: list[TailedFile] = []
        if self.follow:
            draining = self._scan()
        streams = [f.lines(final=not self.follow, whole_only=True) for f in self.files.values()]
        streams += [f.lines(final=True) for f in draining]
        for _, _, line in heapq.merge(*streams, key=lambda entry: entry[:2]):
            if self.skipped.get(line.path) is not line.file:
                yield line
        if not self.follow:
            self.unfinished = {path: f.cut for path, f in self.files.items()
                               if f.cut is not None and self.skipped.get(path) is not f}
        for old in draining:
            old.close()
        for path, skipped in self.skipped.items():
            if self.files.get(path) is skipped:
                self.files.pop(path).close()

    def skip(self, file: TailedFile) -> None:
        """Read no more of `file` (one that is not what the caller reads): no line of it from now on, and
        it is not opened again unless another file comes under its name."""
        self.skipped[file.path] = file

    def _scan(self) -> list[TailedFile]:
        """Follow truncations, replacements and new files; returns replaced files still to read to their end."""
        self._reopen_grown()
        draining = []
        for path, current in list(self.files.items()):
            try:
                stat = os.stat(path)
            except FileNotFoundError:
                stat = None
            if stat is None or (stat.st_dev, stat.st_ino) != current.identity:
                draining.append(self.files.pop(path))
                if stat is not None:
                    self._open_later(path)
            elif current.rewritten():
                current.restart()
        watched = self._watched()
        for folder, pattern in watched:
            try:
                names = sorted(os.listdir(folder))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for name in names:
                path = folder / name
                if pattern.fullmatch(name) and path not in self.files and path not in self.rolled_over \
                        and path.is_file() and not self._still_skipped(path):
                    self._open_later(path)
        self._close_rolled_over(watched)
        return draining

    def _watched(self) -> list[tuple[Path, re.Pattern[str]]]:
        """The watches' folders as they are now (`logs/*/MSGTRK*.LOG`, a folder per server: a new server's too)."""
        return [(Path(folder), pattern) for folders, pattern in self.watches for folder in sorted(glob.glob(folders))]

    def _still_skipped(self, path: Path) -> bool:
        """Whether the file under `path` is one that was skipped (another one there is read)."""
        skipped = self.skipped.get(path)
        if skipped is None:
            return False
        try:
            stat = os.stat(path)
        except FileNotFoundError:  # gone since the listing
            return True
        if (stat.st_dev, stat.st_ino) == skipped.identity:
            return True
        del self.skipped[path]
        return False

    def _close_rolled_over(self, watched: list[tuple[Path, re.Pattern[str]]]) -> None:
        """Close each file read to its end that a later file of its watch has taken over from."""
        for path, current in list(self.files.items()):
            if not current.finished():
                continue
            mtime = os.fstat(current.handle.fileno()).st_mtime
            if any(other is not current and _same_watch(watched, path, other.path)
                   and os.fstat(other.handle.fileno()).st_mtime > mtime for other in self.files.values()):
                current.close()
                self.rolled_over[self.files.pop(path).path] = current

    def _reopen_grown(self) -> None:
        """A closed file that grew, or was replaced, is read again: from where it was left, or from its start."""
        for path, closed in list(self.rolled_over.items()):
            try:
                stat = os.stat(path)
            except FileNotFoundError:
                del self.rolled_over[path]
                continue
            if (stat.st_dev, stat.st_ino) != closed.identity:
                del self.rolled_over[path]
                self._open_later(path)
            elif stat.st_size != closed.closed_at:
                del self.rolled_over[path]
                closed.reopen()
                self.files[path] = closed

    def open_paths(self) -> list[Path]:
        return sorted(self.files)

    def close(self) -> None:
        for f in self.files.values():
            f.close()
        self.files.clear()
        self.rolled_over.clear()


def head_lines(path: Path, size: int = CHUNK, unfinished: bool = False) -> list[bytes]:
    """The complete lines among a file's first `size` bytes, as its reader gets them (UTF-16 transcoded);
    `unfinished`: and a last line with no line end, when the file ends there (NUL padding is none)."""
    with open(path, "rb") as handle:
        head = handle.read(size)
        ends = unfinished and not handle.read(1)
    codec, newline, cr = _UTF16.get(head[:2], (None, b"\n", b"\r"))
    *lines, rest = _split(head, newline)
    rest = rest[:len(rest) - padding(rest, len(newline))]
    lines = [after_padding(raw, len(newline)).removesuffix(cr) for raw in lines + ([rest] if ends and rest else [])]
    return lines if codec is None else [raw.decode(codec, errors="replace").encode("utf-8") for raw in lines]


def after_padding(line: bytes, unit: int) -> bytes:
    """A line without the NUL bytes it starts with, in whole code units of `unit` bytes: after a crash's NUL
    padding, the line the server wrote after it."""
    padded = len(line) - len(line.lstrip(b"\0"))
    return line[padded - padded % unit:]


def padding(buffer: bytes, unit: int) -> int:
    """How many NUL bytes `buffer` ends with (a crash's padding), in whole code units of `unit` bytes."""
    nuls = len(buffer) - len(buffer.rstrip(b"\0"))
    return nuls - nuls % unit


def _same_watch(watches: list[tuple[Path, re.Pattern[str]]], one: Path, other: Path) -> bool:
    return one.parent == other.parent and any(
        folder == one.parent and pattern.fullmatch(one.name) and pattern.fullmatch(other.name)
        for folder, pattern in watches)



def _split(buffer: bytes, newline: bytes) -> list[bytes]:
    """Lines and the unfinished rest; a two-byte (UTF-16) line end counts only at an even offset."""
    if len(newline) == 1:
        return buffer.split(newline)
    parts, start, at = [], 0, buffer.find(newline)
    while at != -1:
        if (at - start) % 2 == 0:
            parts.append(buffer[start:at])
            start = at + 2
            at = buffer.find(newline, start)
        else:
            at = buffer.find(newline, at + 1)
    return parts + [buffer[start:]]
