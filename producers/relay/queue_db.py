"""A node's queue database: one sqlite file holding everything a transport server keeps on disk.

- the primary queue (messages this node must deliver, with the shadow that holds their copy),
- discard status: notifications waiting for each shadow server (survive a restart), and when each
  shadow last queried this node (ShadowMessageAutoDiscardInterval counts from there),
- the shadow queue: copies held for each primary, with the primary's queue-database id,
- Safety Net (processed messages, kept for SafetyNetHoldTime), the last successful contact with
  each primary, and the redelivery commands already obeyed.

A queue-database id (random) is created with the file. Wiping the database means deleting
the file: the node then starts with a new, empty database and a new id, which is what its
shadows detect. Every method is one transaction, safe to call from several threads; WAL
journaling keeps every committed change through a kill -9.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS primary_queue (
    internal_id TEXT PRIMARY KEY, message_id TEXT NOT NULL, mail_from TEXT NOT NULL, rcpts TEXT NOT NULL,
    content BLOB NOT NULL, received_ms INTEGER NOT NULL, submitted_at_ms INTEGER, shadow_server TEXT,
    origin_primary TEXT, due_ms INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, parent TEXT,
    served INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS discard_status (
    shadow_server TEXT NOT NULL, internal_id TEXT NOT NULL, set_ms INTEGER NOT NULL,
    PRIMARY KEY (shadow_server, internal_id));
CREATE TABLE IF NOT EXISTS queried_since (shadow_server TEXT PRIMARY KEY, since_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS shadow_queue (
    primary_server TEXT NOT NULL, internal_id TEXT NOT NULL, message_id TEXT NOT NULL, mail_from TEXT NOT NULL,
    rcpts TEXT NOT NULL, content BLOB NOT NULL, submitted_at_ms INTEGER, primary_qdb TEXT NOT NULL,
    stored_ms INTEGER NOT NULL, PRIMARY KEY (primary_server, internal_id));
CREATE TABLE IF NOT EXISTS safety_net (
    internal_id TEXT NOT NULL, role TEXT NOT NULL, primary_server TEXT NOT NULL, moved_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS contacts (primary_server TEXT PRIMARY KEY, last_contact_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS commands_done (command_id TEXT PRIMARY KEY, at_ms INTEGER NOT NULL);
"""
_LATER_COLUMNS = {"parent": "TEXT", "served": "INTEGER NOT NULL DEFAULT 0"}


@dataclass(frozen=True)
class StoredMessage:
    """A message in the primary queue or the shadow queue."""

    internal_id: str
    message_id: str
    mail_from: str
    rcpts: tuple[str, ...]
    content: bytes
    submitted_at_ms: int | None
    primary: str  # the primary it belongs to (this node, or the original primary of a resubmission)
    shadow_server: str | None = None  # primary queue: who holds its copy
    primary_qdb: str | None = None  # shadow queue: the primary's queue-db id when the copy was made
    resubmitted: bool = False
    attempts: int = 0  # primary queue: the attempts that failed for now so far
    parent: Parent | None = None  # primary queue: the message a non-delivery report is about
    served: bool = False  # primary queue: an earlier attempt's next hop accepted some of its recipients


@dataclass(frozen=True)
class Parent:
    """The message a report is about, as its shadow is told it was processed once its reports are too."""

    internal_id: str
    message_id: str
    shadow_server: str | None  # None: no copy to release (none made, or a resubmitted copy)


@dataclass(frozen=True)
class Counts:
    queued: int
    shadows: int
    pending_discards: int
    safety_net: int


def wipe(path: Path) -> None:
    """Delete a queue database (and its journal files): the next open creates a new id."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


class QueueDB:
    def __init__(self, path: Path | str, node: str):
        self.path = Path(path)
        self.node = node
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        with self._lock:
            self._db.executescript(_SCHEMA)
            columns = {r[1] for r in self._db.execute("PRAGMA table_info(primary_queue)")}
            for column, kind in _LATER_COLUMNS.items():  # a database from before them
                if column not in columns:
                    self._db.execute(f"ALTER TABLE primary_queue ADD COLUMN {column} {kind}")
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO meta VALUES ('queue_db_id', ?)", (uuid.uuid4().hex[:12],))
            db.execute("INSERT OR IGNORE INTO meta VALUES ('sequence', '0')")
            self.queue_db_id = db.execute("SELECT value FROM meta WHERE key='queue_db_id'").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ---- plumbing ---------------------------------------------------------------------

    def _tx(self):
        outer = self

        class _Tx:
            def __enter__(self):
                outer._lock.acquire()
                outer._db.execute("BEGIN IMMEDIATE")
                return outer._db

            def __exit__(self, exc_type, *_):
                try:
                    outer._db.execute("ROLLBACK" if exc_type else "COMMIT")
                finally:
                    outer._lock.release()

        return _Tx()

    def new_internal_id(self) -> str:
        """A new internal message id, unique across restarts and wiped databases."""
        with self._tx() as db:
            db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key='sequence'")
            n = db.execute("SELECT value FROM meta WHERE key='sequence'").fetchone()[0]
        return f"{self.node}.{self.queue_db_id}.{n}"

    # ---- primary queue ----------------------------------------------------------------

    def enqueue(self, m: StoredMessage, received_ms: int, due_ms: int) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO primary_queue (internal_id, message_id, mail_from, rcpts, content, received_ms,"
                " submitted_at_ms, shadow_server, origin_primary, due_ms, parent) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (m.internal_id, m.message_id, m.mail_from, json.dumps(list(m.rcpts)), m.content, received_ms,
                 m.submitted_at_ms, m.shadow_server, m.primary if m.resubmitted else None, due_ms,
                 json.dumps(dataclasses.astuple(m.parent)) if m.parent else None))
            if m.shadow_server and not m.resubmitted:
                self._copy_made(db, m.shadow_server, m.internal_id, received_ms)

    @staticmethod
    def _copy_made(db: sqlite3.Connection, shadow: str, internal_id: str, now_ms: int) -> None:
        """A copy on `shadow`: when it holds no other copy of ours, the interval counts from this one
        until its next query (003: "if the shadow server doesn't query the primary server for the duration")."""
        other = db.execute(
            "SELECT 1 FROM primary_queue WHERE shadow_server=? AND origin_primary IS NULL AND internal_id<>?"
            " UNION ALL SELECT 1 FROM primary_queue WHERE json_extract(parent, '$[2]')=?"
            " UNION ALL SELECT 1 FROM discard_status WHERE shadow_server=? LIMIT 1",
            (shadow, internal_id, shadow, shadow)).fetchone()
        verb = "INSERT OR IGNORE" if other else "INSERT OR REPLACE"
        db.execute(f"{verb} INTO queried_since VALUES (?,?)", (shadow, now_ms))

    def _queued(self, where: str, args: tuple) -> list[StoredMessage]:
        with self._tx() as db:
            rows = db.execute(
                "SELECT internal_id, message_id, mail_from, rcpts, content, submitted_at_ms, shadow_server,"
                f" origin_primary, attempts, parent, served FROM primary_queue WHERE {where}", args).fetchall()
        return [StoredMessage(r[0], r[1], r[2], tuple(json.loads(r[3])), r[4], r[5], r[7] or self.node,
                              shadow_server=r[6], resubmitted=r[7] is not None, attempts=r[8],
                              parent=Parent(*json.loads(r[9])) if r[9] else None, served=bool(r[10]))
                for r in rows]

    def waits_for_reports(self, internal_id: str) -> bool:
        """Whether the message is still queued, or a report about it is."""
        with self._tx() as db:
            return db.execute("SELECT 1 FROM primary_queue WHERE internal_id=? OR json_extract(parent, '$[0]')=?"
                              " LIMIT 1", (internal_id, internal_id)).fetchone() is not None

    def in_safety_net(self, internal_id: str) -> bool:
        """Whether this node delivered the message (Safety Net holds it as a primary message)."""
        with self._tx() as db:
            return db.execute("SELECT 1 FROM safety_net WHERE internal_id=? AND role='primary' LIMIT 1",
                              (internal_id,)).fetchone() is not None

    def due(self, now_ms: int, limit: int = 50) -> list[StoredMessage]:
        return self._queued("due_ms <= ? ORDER BY due_ms LIMIT ?", (now_ms, limit))

    def received_before(self, before_ms: int) -> list[StoredMessage]:
        """The messages queued since before `before_ms` (past MessageExpirationTimeout)."""
        return self._queued("received_ms < ? ORDER BY received_ms", (before_ms,))

    def retry_later(self, internal_id: str, due_ms: int) -> None:
        with self._tx() as db:
            db.execute("UPDATE primary_queue SET due_ms=?, attempts=attempts+1 WHERE internal_id=?", (due_ms, internal_id))

    def still_for(self, internal_id: str, rcpts: tuple[str, ...], due_ms: int, served: bool) -> None:
        """Only `rcpts` are left (the next hop took or refused for good the others, and `served`: took some),
        tried again at `due_ms`."""
        with self._tx() as db:
            db.execute("UPDATE primary_queue SET rcpts=?, due_ms=?, attempts=attempts+1, served=max(served, ?)"
                       " WHERE internal_id=?", (json.dumps(list(rcpts)), due_ms, int(served), internal_id))

    def delivered(self, m: StoredMessage, now_ms: int, release: bool = True) -> None:
        """The next hop acknowledged: out of the queue into Safety Net; discard status for its shadow
        (unless `release` is False: a report about it is still to go)."""
        self._processed(m, now_ms, into_safety_net=True, release=release)

    def expired(self, m: StoredMessage, now_ms: int, release: bool = True) -> None:
        """Expired (MessageExpirationTimeout) or refused for good, with no recipient delivered: out of the queue,
        not into Safety Net; its shadow is told to discard its copy, as the message is processed."""
        self._processed(m, now_ms, into_safety_net=False, release=release)

    def release(self, parent: Parent, now_ms: int) -> None:
        """The message a report was about is processed, its reports too: discard status for its shadow."""
        if parent.shadow_server:
            with self._tx() as db:
                db.execute("INSERT OR IGNORE INTO discard_status VALUES (?,?,?)",
                           (parent.shadow_server, parent.internal_id, now_ms))

    def _processed(self, m: StoredMessage, now_ms: int, into_safety_net: bool, release: bool) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM primary_queue WHERE internal_id=?", (m.internal_id,))
            if m.shadow_server and not m.resubmitted and release:
                db.execute("INSERT OR IGNORE INTO discard_status VALUES (?,?,?)", (m.shadow_server, m.internal_id, now_ms))
            if into_safety_net:
                db.execute("INSERT INTO safety_net VALUES (?,?,?,?)", (m.internal_id, "primary", m.primary, now_ms))

    def take_discards(self, shadow: str, now_ms: int, auto_discard_ms: int) -> list[str]:
        """The discard notifications for `shadow`, removed as they are handed over: none if it had not
        queried for ShadowMessageAutoDiscardInterval (this node deleted them). Its query counts from now."""
        with self._tx() as db:
            since = db.execute("SELECT since_ms FROM queried_since WHERE shadow_server=?", (shadow,)).fetchone()
            ids = [r[0] for r in db.execute(
                "SELECT internal_id FROM discard_status WHERE shadow_server=? ORDER BY set_ms, internal_id", (shadow,))]
            db.execute("DELETE FROM discard_status WHERE shadow_server=?", (shadow,))
            db.execute("INSERT OR REPLACE INTO queried_since VALUES (?,?)", (shadow, now_ms))
        return [] if since is not None and now_ms >= since[0] + auto_discard_ms else ids

    def expire_discards(self, now_ms: int, auto_discard_ms: int) -> int:
        """Delete the discard notifications of every shadow that has not queried this node for
        ShadowMessageAutoDiscardInterval (since its first copy, when it has not queried since), as 003 says:
        not each notification's own age. Notifications from a database older than this count show their own."""
        before = now_ms - auto_discard_ms
        with self._tx() as db:
            return db.execute(
                "DELETE FROM discard_status WHERE shadow_server IN"
                " (SELECT shadow_server FROM queried_since WHERE since_ms <= ?) OR (set_ms <= ? AND shadow_server"
                " NOT IN (SELECT shadow_server FROM queried_since))", (before, before)).rowcount

    # ---- shadow queue -----------------------------------------------------------------

    def store_shadow(self, m: StoredMessage, now_ms: int) -> None:
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO shadow_queue VALUES (?,?,?,?,?,?,?,?,?)",
                       (m.primary, m.internal_id, m.message_id, m.mail_from, json.dumps(list(m.rcpts)), m.content,
                        m.submitted_at_ms, m.primary_qdb, now_ms))
            db.execute("INSERT INTO contacts VALUES (?,?) ON CONFLICT(primary_server) DO UPDATE SET"
                       " last_contact_ms=max(last_contact_ms, excluded.last_contact_ms)", (m.primary, now_ms))

    def shadow_primaries(self) -> dict[str, int]:
        """Primary -> last successful contact (ms), for every primary this node holds copies for."""
        with self._tx() as db:
            rows = db.execute("SELECT DISTINCT s.primary_server, COALESCE(c.last_contact_ms, 0) FROM shadow_queue s"
                              " LEFT JOIN contacts c ON c.primary_server = s.primary_server").fetchall()
        return dict(rows)

    def contact(self, primary: str, now_ms: int) -> None:
        with self._tx() as db:
            db.execute("INSERT INTO contacts VALUES (?,?) ON CONFLICT(primary_server) DO UPDATE SET"
                       " last_contact_ms=max(last_contact_ms, excluded.last_contact_ms)", (primary, now_ms))

    def shadows(self, primary: str) -> list[StoredMessage]:
        with self._tx() as db:
            rows = db.execute("SELECT internal_id, message_id, mail_from, rcpts, content, submitted_at_ms, primary_qdb"
                              " FROM shadow_queue WHERE primary_server=? ORDER BY stored_ms, internal_id",
                              (primary,)).fetchall()
        return [StoredMessage(r[0], r[1], r[2], tuple(json.loads(r[3])), r[4], r[5], primary, primary_qdb=r[6])
                for r in rows]

    def discard_shadows(self, primary: str, internal_ids: list[str], now_ms: int) -> list[StoredMessage]:
        """Move these copies into Safety Net; return those that were held."""
        held = {m.internal_id: m for m in self.shadows(primary)}
        gone = [held[i] for i in internal_ids if i in held]
        with self._tx() as db:
            for m in gone:
                db.execute("DELETE FROM shadow_queue WHERE primary_server=? AND internal_id=?", (primary, m.internal_id))
                db.execute("INSERT INTO safety_net VALUES (?,?,?,?)", (m.internal_id, "shadow", primary, now_ms))
        return gone

    def expire(self, now_ms: int, hold_ms: int, expiration_ms: int) -> tuple[int, int]:
        """Safety Net keeps what it holds for SafetyNetHoldTime; a shadow copy no discard notification
        released expires SafetyNetHoldTime + MessageExpirationTimeout after it was stored (the twin's
        SHADOW_EXPIRED counts from the primary's receipt, earlier by the copy's hand-off). A redelivery command
        done as long ago is forgotten too: a copy it could name again is gone. Returns how many copies and Safety
        Net entries went."""
        with self._tx() as db:
            copies = db.execute("DELETE FROM shadow_queue WHERE stored_ms <= ?", (now_ms - hold_ms - expiration_ms,))
            db.execute("DELETE FROM commands_done WHERE at_ms <= ?", (now_ms - hold_ms - expiration_ms,))
            kept = db.execute("DELETE FROM safety_net WHERE moved_ms <= ?", (now_ms - hold_ms,))
            return copies.rowcount, kept.rowcount

    def promote(self, primary: str, internal_ids: list[str], now_ms: int) -> list[StoredMessage]:
        """Shadow copies become primary messages of this node (resubmitted at once); return those moved.
        A promoted copy is this node's own receipt: MessageExpirationTimeout counts from its promotion."""
        held = {m.internal_id: m for m in self.shadows(primary)}
        moved = [held[i] for i in internal_ids if i in held]
        with self._tx() as db:
            for m in moved:
                db.execute("DELETE FROM shadow_queue WHERE primary_server=? AND internal_id=?", (primary, m.internal_id))
                db.execute(
                    "INSERT OR IGNORE INTO primary_queue (internal_id, message_id, mail_from, rcpts, content,"
                    " received_ms, submitted_at_ms, shadow_server, origin_primary, due_ms)"
                    " VALUES (?,?,?,?,?,?,?,NULL,?,?)",
                    (m.internal_id, m.message_id, m.mail_from, json.dumps(list(m.rcpts)), m.content, now_ms,
                     m.submitted_at_ms, primary, now_ms))
        return moved

    # ---- commands ---------------------------------------------------------------------

    def command_seen(self, command_id: str, now_ms: int) -> bool:
        """Record a command id; True if it was already there (a repeat)."""
        with self._tx() as db:
            cursor = db.execute("INSERT OR IGNORE INTO commands_done VALUES (?,?)", (command_id, now_ms))
            return cursor.rowcount == 0

    # ---- inspection -------------------------------------------------------------------

    def counts(self) -> Counts:
        with self._tx() as db:
            one = lambda sql: db.execute(sql).fetchone()[0]  # noqa: E731
            return Counts(one("SELECT count(*) FROM primary_queue"), one("SELECT count(*) FROM shadow_queue"),
                          one("SELECT count(*) FROM discard_status"), one("SELECT count(*) FROM safety_net"))


def read_counts(path: Path) -> tuple[str, Counts] | None:
    """(queue-db id, counts) of a database file, read-only; None if there is none."""
    if not Path(path).exists():
        return None
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        qdb = db.execute("SELECT value FROM meta WHERE key='queue_db_id'").fetchone()[0]
        one = lambda sql: db.execute(sql).fetchone()[0]  # noqa: E731
        return qdb, Counts(one("SELECT count(*) FROM primary_queue"), one("SELECT count(*) FROM shadow_queue"),
                           one("SELECT count(*) FROM discard_status"), one("SELECT count(*) FROM safety_net"))
    except sqlite3.Error:
        return None
    finally:
        db.close()
