"""The client's side of one short SMTP conversation, all of it within one deadline.

smtplib's timeout is per socket operation: a server that answers EHLO late and then never
answers QUIT, or drips its reply line by line, holds it for several timeouts. Here every read
waits at most until the conversation's deadline, so a probe takes at most its timeout (name
resolution aside). Replies are read whole, multi-line ones (`220-...`) included, before the
next command is sent, as RFC 5321 wants of a client that does not pipeline (Postfix's
postscreen takes a client that speaks before the greeting ends for a bot).
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

MAX_LINE = 8192  # as smtplib: a longer reply line is no SMTP


class NotSMTP(Exception):
    """The peer said something that is not an SMTP reply."""


@dataclass(frozen=True)
class Reply:
    code: int
    lines: tuple[str, ...]

    def first(self) -> str:
        """The code and the first line's text, e.g. `250 mbx01.contoso.com`."""
        return f"{self.code} {self.lines[0] if self.lines else ''}".strip()


class Conversation:
    """One SMTP connection whose every read ends by `deadline` (time.monotonic()); use it with `with`."""

    def __init__(self, host: str, port: int, timeout_s: float):
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + timeout_s
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self._buffer = b""

    def __enter__(self) -> Conversation:
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()

    def reply(self, waiting_for: str) -> Reply:
        """The next reply, all its lines; TimeoutError, ConnectionError or NotSMTP naming `waiting_for`."""
        lines = []
        while True:
            line = self._line(waiting_for)
            code, mark, text = line[:3], line[3:4], line[4:]
            if not code.isdigit() or mark not in ("", " ", "-"):
                raise NotSMTP(f"not SMTP (waiting for the {waiting_for}): {line[:80]!r}")
            lines.append(text.strip())
            if mark != "-":
                return Reply(int(code), tuple(lines))

    def command(self, line: str) -> Reply:
        """Send one command line and read its reply."""
        self.sock.sendall(line.encode("ascii") + b"\r\n")
        return self.reply(f"{line.split(' ', 1)[0]} reply")

    def _line(self, waiting_for: str) -> str:
        while b"\n" not in self._buffer:
            if len(self._buffer) > MAX_LINE:
                raise NotSMTP(f"not SMTP (waiting for the {waiting_for}): a line longer than {MAX_LINE} bytes")
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"timed out: no {waiting_for} within {self.timeout_s:g} s")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(4096)
            except TimeoutError:
                raise TimeoutError(f"timed out: no {waiting_for} within {self.timeout_s:g} s") from None
            if not chunk:
                raise ConnectionError(f"the server closed the connection before the {waiting_for}")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.rstrip(b"\r").decode("utf-8", "replace")
