"""The simulated organisation written as Exchange would log it: message-tracking log files per server.

    to_mtl(topology, seed=7, folder=Path("logs"))   # logs/EX01/MSGTRK2026010500-1.LOG, ..., logs/truth.jsonl

`MtlWriter` turns the simulator's contract events into the lines Exchange's transport
services write (the inverse of `producers.mtl_events`, EXCHANGE_LOGS.md): a folder per server,
the four prefixes (MSGTRK for the Transport service, MSGTRKMS for a mailbox submission's first
receipt and SUBMIT, MSGTRKMD for the delivery service's RECEIVE and DELIVER, MSGTRKMA for a
moderation note now and then), the documented header and 27 fields, one file per hour of the
server's own clock and a new file when one passes `max_bytes`. What Exchange does not log is
not written: heartbeats (discard queries), node start and stop, discard status, the 250 to the
sender. Each server's own internal-message-id numbering is used on its lines (a shadow's
HARECEIVE carries the shadow's id, a delivery service's lines its own), and the
network-message-id is derived from the Message-ID, as the ingester must join them.

What Exchange logs besides the messages is written too: a restart with the same queue
database logs LOAD (source BOOTLOADER) for each message and shadow copy it loads at boot (a
new, empty database loads nothing); and Managed Availability's inbound proxy probe (a
message from the Front End Transport service to the Transport service of the same server,
every 5 minutes, subject "Inbound proxy probe", to inboundproxy@contoso.com, dropped by the
System Probe Drop Smtp Agent) while the server is up: a RECEIVE and a DROP.
"""

from __future__ import annotations

import csv
import io
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
import heapq
from typing import Callable, Iterable

from producers.simulator.engine import Simulation
from producers.simulator.topology import Topology
from schemas import events as ev

FIELDS = ("date-time,client-ip,client-hostname,server-ip,server-hostname,source-context,connector-id,source,"
          "event-id,internal-message-id,message-id,network-message-id,recipient-address,recipient-status,"
          "total-bytes,recipient-count,related-recipient-address,reference,message-subject,sender-address,"
          "return-path,message-info,directionality,tenant-id,original-client-ip,original-server-ip,custom-data"
          ).split(",")
DEFAULT_MAX_BYTES = 10 * 1024 * 1024  # Exchange's default MessageTrackingLogMaxFileSize
INTRA_ORG = "Intra-Organization SMTP Send Connector"
INTERNET = "Internet Send Connector"
PROBE_EVERY_MS = 5 * 60_000  # Managed Availability's inbound proxy probe, per server
FOREVER = 2**62  # the end of a crash without restart
PROBE_SENDER, PROBE_RECIPIENT, PROBE_SUBJECT = "postmaster@{domain}", "inboundproxy@contoso.com", "Inbound proxy probe"


def network_message_id(message_id: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, message_id))


def _stamp(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass
class _File:
    path: Path
    hour: str
    size: int
    handle: io.BufferedWriter


class HealthProbes:
    """When each server's inbound proxy probe runs: every PROBE_EVERY_MS from the start (each
    server at its own phase), while the fault schedule has it up, for as long as the run goes on
    (after the workload too, while the servers drain their queues). Those are true times; with
    `offset` (how far a server's clock is ahead now, 0 for names that are no server) the writer
    logs each probe by its server's own clock, among that server's other lines in true-time order."""

    def __init__(self, topology: Topology, offset: Callable[[str], int] = lambda server: 0):
        self.domain = topology.domain
        self.offset = offset
        end = topology.start_ms + topology.duration_ms
        self.down: dict[str, list[tuple[int, int]]] = {}
        for f in topology.faults:
            if f.kind == "crash" and f.server:
                start = topology.start_ms + f.at_ms
                self.down.setdefault(f.server, []).append(
                    (start, FOREVER if f.restart == "never" else start + f.duration_ms))
        self.end_ms = end
        self.due = [(topology.start_ms + 7_000 * (i + 1), s.name) for i, s in enumerate(topology.servers)]
        heapq.heapify(self.due)

    def before(self, t: int) -> Iterable[tuple[int, str]]:
        """The probes (time, server) due before `t`, in time order."""
        due = self.due
        while due and due[0][0] < t:
            at, name = heapq.heappushpop(due, (due[0][0] + PROBE_EVERY_MS, due[0][1]))
            if not any(a <= at < b for a, b in self.down.get(name, ())):
                yield at, name


class MtlWriter:
    def __init__(self, folder: Path, max_bytes: int = DEFAULT_MAX_BYTES, probes: HealthProbes | None = None,
                 held: Callable[[str], Iterable[ev.MessageRef]] | None = None, databases: Iterable[str] = ()):
        self.folder, self.max_bytes = folder, max_bytes
        # A mailbox database is no host: its mail goes through the mailbox services of the server that logs it
        self.databases = frozenset(databases)
        self.probes = probes
        self.held = held  # what a server holds (its queue and shadow copies) when it starts: LOAD lines
        self._databases: dict[str, str] = {}  # server -> the queue database it last started with
        self.files: dict[tuple[str, str], _File] = {}  # (server, prefix) -> the file being written
        self.sequence: dict[tuple[str, str, str], int] = {}  # (server, prefix, hour) -> its last file number
        self.lines = 0
        self._own_ids: dict[tuple[str, str, str], str] = {}  # (server, service, primary's id) -> that server's id
        self._counters: dict[str, int] = {}
        self._requested: dict[tuple[str, str], int] = {}  # (node, internal id) -> shadow attempts
        self._sent: dict[tuple[str, str, str], ev.SentToNextHop] = {}  # (node, internal id, hop) -> the send
        self._recipients: dict[str, tuple[str, ...]] = {}  # internal id -> recipients (for FAIL and DSN lines)
        self._subjects = 0

    # ---- files ---------------------------------------------------------------------

    def _line(self, server: str, prefix: str, time_ms: int, **values: str) -> None:
        stamp = _stamp(time_ms)
        hour = stamp[:13].replace("-", "").replace("T", "")
        key = (server, prefix)
        current = self.files.get(key)
        out = io.StringIO()
        row = dict.fromkeys(FIELDS, "")
        row.update({name.replace("_", "-"): value for name, value in values.items()}, **{"date-time": stamp})
        csv.writer(out, lineterminator="\r\n").writerow([row[name] for name in FIELDS])
        data = out.getvalue().encode("utf-8")
        if current is None or current.hour != hour or current.size + len(data) > self.max_bytes:
            if current is not None:
                current.handle.close()
            current = self.files[key] = self._open(server, prefix, hour, time_ms)
        current.handle.write(data)
        current.size += len(data)
        self.lines += 1

    def _open(self, server: str, prefix: str, hour: str, time_ms: int) -> _File:
        number = self.sequence[(server, prefix, hour)] = self.sequence.get((server, prefix, hour), 0) + 1
        folder = self.folder / server.upper()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{prefix}{hour}-{number}.LOG"
        header = ("#Software: Microsoft Exchange Server\r\n#Version: 15.02.1544.004\r\n"
                  "#Log-type: Message Tracking Log\r\n"
                  f"#Date: {_stamp(time_ms)}\r\n#Fields: {','.join(FIELDS)}\r\n").encode("utf-8")
        handle = open(path, "wb")
        handle.write(header)
        return _File(path, hour, len(header), handle)

    def close(self) -> None:
        for f in self.files.values():
            f.handle.close()
        self.files.clear()

    # ---- ids -----------------------------------------------------------------------

    def _own_id(self, server: str, service: str, internal_id: str) -> str:
        key = (server, service, internal_id)
        if key not in self._own_ids:
            self._counters[server] = self._counters.get(server, 100000) + 1
            self._own_ids[key] = str(self._counters[server])
        return self._own_ids[key]

    def _ids(self, server: str, service: str, ref: ev.MessageRef) -> dict[str, str]:
        return dict(internal_message_id=self._own_id(server, service, ref.internal_id), message_id=ref.message_id,
                    network_message_id=network_message_id(ref.message_id))

    # ---- events -> lines ------------------------------------------------------------

    def write(self, events: Iterable[ev.Event]) -> None:
        probes = self.probes
        for e in events:
            if probes is not None:  # the probes due before the event's true time
                for at, server in probes.before(e.event_time_ms - probes.offset(e.node)):
                    self._probe(server, at + probes.offset(server))
            if isinstance(e, ev.NodeStarted):
                self._started(e)
                continue
            handler = getattr(self, f"_{type(e).__name__}", None)
            if handler is not None and e.message is not None:
                handler(e)
        if probes is not None:
            for at, server in probes.before(probes.end_ms):
                self._probe(server, at + probes.offset(server))

    def _probe(self, server: str, t: int) -> None:
        self._subjects += 1
        ids = dict(internal_message_id=self._own_id(server, "", f"probe-{self._subjects}"),
                   message_id=f"<probe-{self._subjects}@{server}>",
                   network_message_id=network_message_id(f"<probe-{self._subjects}@{server}>"))
        common = dict(sender_address=PROBE_SENDER.format(domain=self.probes.domain), recipient_address=PROBE_RECIPIENT,
                      recipient_count="1", message_subject=PROBE_SUBJECT, **ids)
        self._line(server, "MSGTRK", t, client_hostname=server, server_hostname=server, source="SMTP",
                   event_id="RECEIVE", recipient_status="250 2.6.0 Queued mail for delivery", total_bytes="6500",
                   directionality="Originating", **common)
        self._line(server, "MSGTRK", t + 40, server_hostname=server, source="AGENT",
                   source_context="SystemProbeDropSmtpAgent", event_id="DROP", **common)

    def _started(self, e: ev.NodeStarted) -> None:
        before, self._databases[e.node] = self._databases.get(e.node), e.queue_db_id
        if self.held is None or before != e.queue_db_id:
            return
        for ref in self.held(e.node):
            self._line(e.node, "MSGTRK", e.event_time_ms, server_hostname=e.node, source="BOOTLOADER",
                       event_id="LOAD", **self._ids(e.node, "", ref))

    def _MessageReceived(self, e: ev.MessageReceived) -> None:
        node, t, recipients = e.node, e.event_time_ms, ";".join(r.address for r in e.recipients)
        self._recipients[e.message.internal_id] = tuple(r.address for r in e.recipients)
        common = dict(recipient_address=recipients, recipient_count=str(len(e.recipients)), total_bytes=str(e.size_bytes),
                      sender_address=f"sender@{e.sender}", return_path=f"sender@{e.sender}")
        self._subjects += 1
        if e.source is ev.MessageSource.MAILBOX_SUBMISSION:
            ms = self._ids(node, "MS", e.message)
            self._line(node, "MSGTRKMS", t - 20, server_hostname=node, source="STOREDRIVER", event_id="RECEIVE",
                       source_context="MDB:1;Mailbox:1", directionality="Originating", **ms, **common)
            self._line(node, "MSGTRKMS", t - 10, server_hostname=node, source="STOREDRIVER", event_id="SUBMIT",
                       directionality="Originating", **ms, **common)
        if self._subjects % 500 == 0:  # a moderation note now and then: the fourth prefix
            self._line(node, "MSGTRKMA", t, server_hostname=node, source="APPROVAL", event_id="INITMESSAGECREATED",
                       **self._ids(node, "MA", e.message), **common)
        incoming = e.source is ev.MessageSource.OUTSIDE_BOUNDARY
        sender = node if e.sender in self.databases else e.sender
        self._line(node, "MSGTRK", t, client_hostname=sender, server_hostname=node, source="SMTP",
                   event_id="RECEIVE", recipient_status="250 2.6.0 Queued mail for delivery",
                   message_subject=f'Simulated, "message" {self._subjects}',
                   directionality="Incoming" if incoming else "Originating",
                   **self._ids(node, "", e.message), **common)

    def _ShadowCopyRequested(self, e: ev.ShadowCopyRequested) -> None:
        self._requested[(e.node, e.message.internal_id)] = e.attempt

    def _ShadowCopyAcknowledged(self, e: ev.ShadowCopyAcknowledged) -> None:
        self._line(e.node, "MSGTRK", e.event_time_ms, client_hostname=e.node, server_hostname=e.shadow_server,
                   source="REDUNDANCY", event_id="HAREDIRECT", **self._ids(e.node, "", e.message))

    def _ShadowCopyFailed(self, e: ev.ShadowCopyFailed) -> None:
        status = {ev.ShadowFailureReason.TIMEOUT: "451 4.4.0 Timed out waiting for shadow"}.get(
            e.reason, f"451 4.4.0 {e.reason.value}")
        self._line(e.node, "MSGTRK", e.event_time_ms, client_hostname=e.node, server_hostname=e.candidate,
                   source="REDUNDANCY", event_id="HAREDIRECTFAIL", recipient_status=status,
                   **self._ids(e.node, "", e.message))

    def _ShadowCopyStored(self, e: ev.ShadowCopyStored) -> None:
        self._line(e.node, "MSGTRK", e.event_time_ms, client_hostname=e.primary_server, server_hostname=e.node,
                   source="REDUNDANCY", event_id="HARECEIVE", **self._ids(e.node, "", e.message))

    def _ShadowDiscarded(self, e: ev.ShadowDiscarded) -> None:
        self._line(e.node, "MSGTRK", e.event_time_ms, client_hostname=e.primary_server, server_hostname=e.node,
                   source="REDUNDANCY", event_id="HADISCARD", **self._ids(e.node, "", e.message))

    def _ShadowPromoted(self, e: ev.ShadowPromoted) -> None:
        self._line(e.node, "MSGTRK", e.event_time_ms, client_hostname=e.primary_server, server_hostname=e.node,
                   source="REDUNDANCY", event_id="RESUBMIT", source_context=e.reason,
                   **self._ids(e.node, "", e.message))

    def _SentToNextHop(self, e: ev.SentToNextHop) -> None:
        self._sent[(e.node, e.message.internal_id, e.next_hop)] = e

    def _NextHopAcknowledged(self, e: ev.NextHopAcknowledged) -> None:
        sent = self._sent.pop((e.node, e.message.internal_id, e.next_hop), None)
        recipients = sent.recipients if sent is not None else ()
        outside = sent is not None and sent.outside_boundary
        far_end = e.node if e.next_hop in self.databases else e.next_hop
        self._line(e.node, "MSGTRK", e.event_time_ms, client_hostname=e.node, server_hostname=far_end,
                   source="SMTP", event_id="SEND", connector_id=INTERNET if outside else INTRA_ORG,
                   recipient_address=";".join(recipients), recipient_count=str(len(recipients)),
                   recipient_status=";".join("250 2.1.5 Recipient OK" for _ in recipients),
                   **self._ids(e.node, "", e.message))

    def _DeliveredToMailbox(self, e: ev.DeliveredToMailbox) -> None:
        ids = self._ids(e.node, "MD", e.message)
        recipients = dict(recipient_address=";".join(e.recipients), recipient_count=str(len(e.recipients)))
        self._line(e.node, "MSGTRKMD", e.event_time_ms - 1, client_hostname=e.node, server_hostname=e.node,
                   source="SMTP", event_id="RECEIVE", **ids, **recipients)
        self._line(e.node, "MSGTRKMD", e.event_time_ms, client_hostname=e.node, server_hostname=e.node,
                   source="STOREDRIVER", event_id="DUPLICATEDELIVER" if e.duplicate else "DELIVER",
                   recipient_status=";".join("250 2.0.0 Delivered" for _ in e.recipients), **ids, **recipients)

    def _DeliveryDeferred(self, e: ev.DeliveryDeferred) -> None:
        recipients = e.recipients or self._recipients.get(e.message.internal_id, ())
        status = e.smtp_response if e.smtp_response[:1] in ("4", "5") else f"451 4.4.0 {e.smtp_response}"
        self._line(e.node, "MSGTRK", e.event_time_ms, server_hostname=e.node, source="SMTP", event_id="DEFER",
                   recipient_address=";".join(recipients), recipient_status=status,
                   **self._ids(e.node, "", e.message))

    def _MessageExpired(self, e: ev.MessageExpired) -> None:
        recipients = self._recipients.get(e.message.internal_id, ())
        status = f"550 4.4.7 QUEUE.Expired;{e.reason}" if e.reason else "550 4.4.7 QUEUE.Expired"
        self._line(e.node, "MSGTRK", e.event_time_ms, server_hostname=e.node, source="QUEUE", event_id="FAIL",
                   recipient_address=";".join(recipients), recipient_status=status,
                   **self._ids(e.node, "", e.message))

    def _SideEffectGenerated(self, e: ev.SideEffectGenerated) -> None:
        self._line(e.node, "MSGTRK", e.event_time_ms, server_hostname=e.node, source="DSN", event_id="DSN",
                   reference=e.parent.message_id,
                   recipient_status="550 5.4.7" if e.side_effect is ev.SideEffectKind.NDR else "250 2.0.0",
                   **self._ids(e.node, "", e.message))


def writer_for(simulation: Simulation, folder: Path, max_bytes: int = DEFAULT_MAX_BYTES,
               probes: bool = True) -> MtlWriter:
    """The writer of a simulation's logs: its servers' health probes (unless `probes` is false: an
    organisation without Managed Availability's), and LOAD of what a server holds when it restarts
    (read from the simulation as it runs)."""
    def held(server: str) -> list[ev.MessageRef]:
        node = simulation.nodes[server]
        return [m.ref() for m in node.queue.values()] + [
            c.mail.ref() for copies in node.shadows.values() for c in copies.values()]

    def offset(name: str) -> int:
        node = simulation.nodes.get(name)
        return node.offset_ms if node is not None else 0

    return MtlWriter(folder, max_bytes, HealthProbes(simulation.topology, offset) if probes else None, held,
                     (d.name for d in simulation.topology.mailbox_databases))


def to_mtl(topology: Topology, seed: int, folder: Path, truth_path: Path | None = None,
           max_bytes: int = DEFAULT_MAX_BYTES, stop: Callable[[], bool] = lambda: False) -> tuple[int, int, Simulation]:
    """Simulate and write the logs (and the ground truth, default FOLDER/truth.jsonl); (events, lines, simulation).
    `stop` returning true ends the run early (Ctrl-C), the logs and the truth written up to there."""
    simulation = Simulation(topology, seed)
    writer = writer_for(simulation, folder, max_bytes)
    count = 0

    def counted(events):
        nonlocal count
        for e in events:
            if stop():
                return
            count += 1
            yield e

    try:
        writer.write(counted(simulation.events()))
    finally:
        writer.close()
    if stop():
        simulation.stopped_early()
    simulation.truth.write(truth_path or folder / "truth.jsonl", seed, count)
    return count, writer.lines, simulation
