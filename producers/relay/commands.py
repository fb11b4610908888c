"""A node obeys the twin's redelivery commands: it resubmits the named messages from its shadow queue.

It reads the commands topic in its own consumer group (one per node and topic, offsets
committed after each command), acts only on commands whose `holder` is this node (in any case), drops
repeats by `command_id` (remembered in the queue database, so across restarts too) and
ignores commands for copies it no longer holds (already discarded, or promoted on its own).
"""

from __future__ import annotations

import logging
import threading

from schemas.events import RedeliveryCommand
from infra.kafka import consumer
from state.names import server_key

log = logging.getLogger("shadowtwin.relay.commands")


class CommandFollower:
    def __init__(self, node, bootstrap: str, topic: str):
        self.node = node
        self.bootstrap = bootstrap
        self.topic = topic
        self.obeyed = 0

    def run(self, stopping: threading.Event) -> None:
        from schemas.codec import default_codec

        codec = default_codec()
        reader = consumer(self.bootstrap, f"shadowtwin-relay-{self.node.name}-{self.topic}", [self.topic],
                          **{"session.timeout.ms": 10_000})
        try:
            while not stopping.is_set():
                message = reader.poll(0.5)
                if message is None:
                    continue
                if message.error():
                    log.warning("commands topic: %s", message.error())
                    continue
                try:
                    record = codec.decode(message.value())
                except Exception as exc:  # noqa: BLE001 - not ours to judge: skip it, say so
                    log.warning("undecodable record on %s at offset %d: %s", self.topic, message.offset(), exc)
                    record = None
                if isinstance(record, RedeliveryCommand) and server_key(record.holder) == server_key(self.node.name):
                    self.handle(record)
                reader.commit(message, asynchronous=False)
        finally:
            reader.close()

    def handle(self, command: RedeliveryCommand) -> bool:
        """Resubmit the commanded copy; False for a repeat or a copy no longer held."""
        node = self.node
        if node.db.command_seen(command.command_id, node.events.now_ms()):
            log.info("command %s repeated: ignored", command.command_id)
            return False
        # the twin spells a server as [shadow_redundancy] servers declares it, else in lower case (state/names.py)
        primary = next((p.name for p in node.peers if server_key(p.name) == server_key(command.primary_server)),
                       command.primary_server)
        moved = node.promote(primary, [command.message.internal_id],
                             f"redelivery command {command.command_id} ({command.reason.value})")
        if not moved:
            log.info("command %s: no copy of %s held any more, nothing to resubmit", command.command_id,
                     command.message.internal_id)
            return False
        self.obeyed += 1
        return True
