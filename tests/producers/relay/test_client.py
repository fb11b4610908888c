"""The relay's outgoing SMTP sessions (producers/relay/client.py) against real sockets: servers that do
what real ones do, and not what smtplib hopes."""

from __future__ import annotations

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP

from producers.relay import client
from tests.conftest import free_port


class _HangsUpAtQuit(SMTP):
    """Answers DATA with 250, then hangs up at QUIT without a 221, as some servers do."""

    async def smtp_QUIT(self, arg: str) -> None:
        self.transport.close()


class _Recorder:
    def __init__(self):
        self.messages: list[bytes] = []

    async def handle_DATA(self, server, session, envelope) -> str:
        self.messages.append(envelope.original_content)
        return "250 2.0.0 queued as Q1"


@pytest.fixture
def hangs_up_at_quit():
    class Server(Controller):
        def factory(self):
            return _HangsUpAtQuit(self.handler, **self.SMTP_kwargs)

    server = Server(_Recorder(), hostname="127.0.0.1", port=free_port())
    server.start()
    yield server
    server.stop()


def test_a_message_the_next_hop_accepted_is_relayed_even_if_it_hangs_up_at_quit(hangs_up_at_quit):
    """The 250 to DATA is the hand-off; a lost QUIT after it must not make the node send it again."""
    reply = client.relay("127.0.0.1", hangs_up_at_quit.port, "ex01", "a@contoso.com", ("b@fabrikam.com",),
                         b"Subject: x\r\n\r\nhi\r\n", timeout=3)
    assert reply == "2.0.0 queued as Q1"
    assert len(hangs_up_at_quit.handler.messages) == 1
