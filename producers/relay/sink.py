"""The final mailbox: an SMTP server that records every message it receives and flags duplicates.

Duplicate detection follows the mailbox side of the domain: the key is the Internet
Message-ID plus the client submit time (`X-Submitted-At`, milliseconds, else `Date`), in each
recipient's mailbox (the store's DeliveredTo table is checked "whenever a message gets delivered to
a user"): a delivery is a duplicate when one of its recipients already had the message, not when the
same message reached other recipients in a transaction of its own (postfix sends 50 recipients a
transaction, smtp_destination_recipient_limit; a server's 452 splits a message as well). Every
delivery is recorded (sqlite, one row per delivery, with the relay that delivered it, from
the `X-Shadowtwin-Relay` header), duplicates included, so a test or `lab status` can count
what arrived, what arrived twice, and from where. A duplicate is answered
`250 2.0.0 delivered (duplicate)`, which the relay reports as DeliveredToMailbox(duplicate).

It answers as the nodes do (`replies`): EHLO advertises ENHANCEDSTATUSCODES and every reply carries a code.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from aiosmtpd.controller import Controller

from producers.relay.headers import HEADER_ROOM
from producers.relay.replies import RECIPIENT_OK, SENDER_OK, EnhancedStatusSMTP

log = logging.getLogger("shadowtwin.relay.sink")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    n INTEGER PRIMARY KEY AUTOINCREMENT, received_ms INTEGER NOT NULL, message_id TEXT NOT NULL,
    submitted_at_ms INTEGER, relay TEXT, internal_id TEXT, resubmitted INTEGER NOT NULL,
    recipients TEXT NOT NULL, duplicate INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS deliveries_key ON deliveries (message_id, submitted_at_ms);
"""


@dataclass(frozen=True)
class Delivery:
    message_id: str
    submitted_at_ms: int | None
    relay: str | None
    internal_id: str | None
    resubmitted: bool
    duplicate: bool


class Mailbox:
    """The sink's records (thread-safe); also read by the lab and the tests."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)

    def record(self, content: bytes, rcpts: list[str]) -> bool:
        """Record one delivery; True if it is a duplicate."""
        from producers.relay.node import RELAY_HEADER, message_identity

        message_id, submitted = message_identity(content, "")
        relay = internal_id = None
        resubmitted = False
        for line in content.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
            if line.lower().startswith(RELAY_HEADER.lower().encode() + b":"):
                words = line.split(b":", 1)[1].decode(errors="replace").split()
                relay, internal_id = (words + [None, None])[:2]
                resubmitted = any(w.startswith("resubmitted-for=") for w in words)
                break
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                had = {r.lower() for (earlier,) in self._db.execute(
                    "SELECT recipients FROM deliveries WHERE message_id=? AND submitted_at_ms IS ?",
                    (message_id, submitted)) for r in earlier.split(",")} if message_id else set()
                seen = any(r.lower() in had for r in rcpts)
                self._db.execute(
                    "INSERT INTO deliveries (received_ms, message_id, submitted_at_ms, relay, internal_id, resubmitted,"
                    " recipients, duplicate) VALUES (?,?,?,?,?,?,?,?)",
                    (int(time.time() * 1000), message_id, submitted, relay, internal_id, int(resubmitted),
                     ",".join(rcpts), int(bool(seen))))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return bool(seen)

    def close(self) -> None:
        with self._lock:
            self._db.close()


def read_deliveries(path: Path | str) -> list[Delivery]:
    """Every delivery the sink recorded, in arrival order (read-only; [] when there is no file)."""
    if not Path(path).exists():
        return []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        rows = db.execute("SELECT message_id, submitted_at_ms, relay, internal_id, resubmitted, duplicate"
                          " FROM deliveries ORDER BY n").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        db.close()
    return [Delivery(r[0], r[1], r[2], r[3], bool(r[4]), bool(r[5])) for r in rows]


class _SinkHandler:
    def __init__(self, mailbox: Mailbox):
        self.mailbox = mailbox

    async def handle_MAIL(self, server, session, envelope, address: str, mail_options: list[str]) -> str:
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return SENDER_OK

    async def handle_RCPT(self, server, session, envelope, address: str, rcpt_options: list[str]) -> str:
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(rcpt_options)
        return RECIPIENT_OK

    async def handle_DATA(self, server, session, envelope) -> str:
        loop = asyncio.get_running_loop()
        duplicate = await loop.run_in_executor(None, self.mailbox.record, envelope.original_content,
                                               list(envelope.rcpt_tos))
        return "250 2.0.0 delivered (duplicate)" if duplicate else "250 2.0.0 delivered"


class _SinkController(Controller):
    def factory(self):
        return EnhancedStatusSMTP(self.handler, **self.SMTP_kwargs)


class MailboxSink:
    """The sink on host:port; `name` is the host name it announces (its FQDN, as the nodes announce theirs)."""

    def __init__(self, name: str, host: str, port: int, db_path: Path, nodes_max_message_size: int):
        self.name = name
        self.mailbox = Mailbox(db_path)
        self._controller = _SinkController(_SinkHandler(self.mailbox), hostname=host, port=port, server_hostname=name,
                                            enable_SMTPUTF8=False, data_size_limit=nodes_max_message_size + HEADER_ROOM)

    def start(self) -> None:
        self._controller.start()
        log.info("mailbox sink %s listening on %s:%d", self.name, self._controller.hostname, self._controller.port)

    def stop(self) -> None:
        self._controller.stop()
        self.mailbox.close()
