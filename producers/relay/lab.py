"""The lab: relay nodes and the mailbox sink as separate OS processes on loopback, and an external sender.

    lab = Lab(topology, topology_path, bootstrap, topics)
    lab.up(); lab.send(20); lab.kill("n2", wipe=True); lab.restart("n2"); lab.status(); lab.down()

Everything lives under the topology's `run_dir` (default `.run/lab/`): `state.json` (what
was started: pids, Kafka address, topics), `logs/<name>.log`, `data/<name>.sqlite` (each
node's queue database), `mailbox.sqlite` (the sink's records) and `secrets.json` (the
nodes' passwords, generated once, mode 0600, never printed). Processes start in their own
session so they outlive the command that started them; `kill` is SIGKILL (a crash), `stop`
and `down` are SIGTERM (a clean stop, SIGKILL after a grace period). A pid counts as ours
only while /proc shows it running `producers.relay` with our run folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import smtplib
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from email.message import EmailMessage
from email.utils import formatdate
from pathlib import Path

from confluent_kafka import KafkaException

from producers.relay import queue_db
from producers.relay.client import quit_quietly
from producers.relay.sink import read_deliveries
from producers.relay.tls import ensure_certificates
from producers.relay.topology import LabTopology, ensure_secrets
from producers.topic_reader import topic_watermarks
from infra.kafka import NoSuchTopic
from infra.settings import PROJECT_ROOT, TopicSettings

SINK = "sink"
TWIN = "twin"


class LabError(RuntimeError):
    """A lab process could not be started or found."""


@dataclass(frozen=True)
class NodeStatus:
    name: str
    running: bool
    pid: int | None
    port: int
    queue_db_id: str | None
    queued: int
    shadows: int
    pending_discards: int

    def describe(self) -> str:
        state = f"up   pid {self.pid}" if self.running else "down" + " " * 9
        db = self.queue_db_id or "(no database)"
        return (f"{self.name:10} {state:14} port {self.port:5}  queue-db {db:12}  queued {self.queued:4}"
                f"  shadows {self.shadows:4}  discards pending {self.pending_discards}")


@dataclass(frozen=True)
class SinkStatus:
    name: str
    running: bool
    pid: int | None
    port: int
    received: int
    distinct: int
    duplicates: int

    def describe(self) -> str:
        state = f"up   pid {self.pid}" if self.running else "down"
        return (f"{self.name:10} {state:14} port {self.port:5}  received {self.received}  distinct {self.distinct}"
                f"  duplicates {self.duplicates}")


@dataclass
class SendResult:
    accepted: list[tuple[str, str]] = field(default_factory=list)  # (Message-ID, node that answered 250)
    temporary: list[tuple[str, str, str]] = field(default_factory=list)  # (Message-ID, node, 4xx reply)
    permanent: list[tuple[str, str, str]] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)  # no node could be reached
    unreached: dict[str, str] = field(default_factory=dict)  # node -> its address and why it could not be reached

    @property
    def total(self) -> int:
        return len(self.accepted) + len(self.temporary) + len(self.permanent) + len(self.unreachable)

    def describe(self) -> str:
        return (f"sent {self.total}: {len(self.accepted)} accepted (250), {len(self.temporary)} deferred (4xx),"
                f" {len(self.permanent)} refused (5xx), {len(self.unreachable)} found no node")

    def failure(self) -> str | None:
        """One line when some messages found no node, else None."""
        if not self.unreachable:
            return None
        nodes = ", ".join(f"{node} at {why}" for node, why in self.unreached.items())
        return (f"{len(self.unreachable)} of {self.total} messages were not sent: could not reach {nodes};"
                " is the lab up? (shadowtwin lab up)")


class Lab:
    def __init__(self, topology: LabTopology, topology_path: Path, bootstrap: str, topics: TopicSettings,
                 python: str = sys.executable):
        self.topology = topology
        self.topology_path = Path(topology_path).resolve()
        self.bootstrap = bootstrap
        self.topics = topics
        self.python = python
        self.run_dir = topology.run_dir
        self.state_file = self.run_dir / "state.json"
        self._children: dict[int, subprocess.Popen] = {}

    # ---- state ------------------------------------------------------------------------

    def log_path(self, name: str) -> Path:
        return self.run_dir / "logs" / f"{name}.log"

    def db_path(self, name: str) -> Path:
        return self.run_dir / "data" / f"{name}.sqlite"

    def mailbox_path(self) -> Path:
        return self.run_dir / "mailbox.sqlite"

    def _state(self) -> dict:
        if self.state_file.exists():
            return json.loads(self.state_file.read_text())
        return {"pids": {}}

    def _save(self, state: dict) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.state_file)

    def remember(self, **values) -> None:
        state = self._state()
        state.update(values)
        self._save(state)

    def pid(self, name: str) -> int | None:
        """The pid of `name`'s process if it runs (ours, per /proc), else None."""
        pid = self._state()["pids"].get(name)
        return pid if pid is not None and self._ours(pid, name) else None

    def _ours(self, pid: int, name: str) -> bool:
        child = self._children.get(pid)
        if child is not None and child.poll() is not None:
            return False
        if not self._lab_process(pid):
            return False
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        want = {SINK: [b"producers.relay", b"sink"], TWIN: [b"shadowtwin.cli", b"twin"]}.get(
            name, [b"producers.relay", name.encode()])
        return all(w in cmdline for w in want)

    # ---- processes ----------------------------------------------------------------------

    def _spawn(self, name: str, args: list[str], ready: str, timeout_s: float = 45.0,
               env: dict[str, str] | None = None) -> int:
        log = self.log_path(name)
        log.parent.mkdir(parents=True, exist_ok=True)
        offset = log.stat().st_size if log.exists() else 0
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(PROJECT_ROOT), **(env or {}))
        with open(log, "ab") as out:
            process = subprocess.Popen([self.python, *args], stdout=out,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=PROJECT_ROOT, env=env,
                                       start_new_session=True)
        self._children[process.pid] = process
        state = self._state()
        state["pids"][name] = process.pid
        self._save(state)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with open(log, "rb") as text:
                text.seek(offset)
                if ready.encode() in text.read():
                    return process.pid
            if process.poll() is not None:
                break
            time.sleep(0.1)
        said = [line for line in log.read_bytes()[offset:].decode(errors="replace").splitlines() if line.strip()]
        self._signal(process.pid, signal.SIGKILL)
        # a Python failure's last line names it (OSError: ... address already in use); the rest is in the log
        last = said[-1].strip() if said else "its log is empty"
        raise LabError(f"{name} did not start (exit {process.poll()}): {last} (its log: {log})")

    def start_sink(self) -> int:
        if (pid := self.pid(SINK)) is not None:
            return pid
        return self._spawn(SINK, ["-m", "producers.relay", "sink", "--topology", str(self.topology_path),
                                  "--db", str(self.mailbox_path())], f"READY sink {self.topology.sink.name}")

    def start_node(self, name: str) -> int:
        self.topology.node(name)  # refuse unknown names early
        if (pid := self.pid(name)) is not None:
            return pid
        return self._spawn(name, [
            "-m", "producers.relay", "node", "--topology", str(self.topology_path), "--name", name,
            "--bootstrap", self.bootstrap, "--events-topic", self.topics.events, "--commands-topic", self.topics.commands,
            "--data-dir", str(self.run_dir / "data"), "--secrets", str(self.topology.secrets_path()),
        ], f"READY node {name} ")

    def start_twin(self, watermark_delay: str = "2 seconds", conf: Path | None = None) -> int:
        """The streaming twin as a lab process, with the lab's shadow-redundancy spans (slow: Spark starts)."""
        if (pid := self.pid(TWIN)) is not None:
            return pid
        # The checkpoint on the command line, in the run folder, is also what makes the process the lab's (_ours)
        return self._spawn(TWIN, ["-m", "shadowtwin.cli", "twin", "run", "--lab-topology", str(self.topology_path),
                                  "--checkpoint", str(self.run_dir / "checkpoints" / "twin")],
                           "twin running:", timeout_s=180, env=self.twin_environment(watermark_delay, conf))

    def twin_environment(self, watermark_delay: str = "2 seconds", conf: Path | None = None) -> dict[str, str]:
        """The lab twin's settings: the configuration's (`conf`, the file `lab` was given), with the lab's Kafka,
        topics, checkpoint and timing laid over them through the environment (the one configuration mechanism;
        `--lab-topology` gives the spans).

        On a new checkpoint it reads the events topic from where it ended when this lab first started its
        nodes (`up` records it), not from its start: the events before are no lab node's (a demo's, another
        tool's) and the twin would decide about their servers too."""
        env = {"SHADOWTWIN_KAFKA_BOOTSTRAP_SERVERS": self.bootstrap,
               "SHADOWTWIN_SPARK_CHECKPOINT_DIR": str(self.run_dir / "checkpoints"),
               "SHADOWTWIN_SPARK_TRIGGER_INTERVAL": "1 second",
               "SHADOWTWIN_TWIN_WATERMARK_DELAY": watermark_delay,
               "SHADOWTWIN_TWIN_TICK_INTERVAL_SECONDS": "1.0",
               **{f"SHADOWTWIN_TOPICS_{k.upper()}": str(v) for k, v in asdict(self.topics).items()},
               **({"SHADOWTWIN_CONF": str(Path(conf).resolve())} if conf is not None else {})}
        recorded = self._state().get("events_from")
        if recorded is not None:
            now = topic_watermarks(self.bootstrap, self.topics.events)
            if {str(p) for p in now} == set(recorded):  # else a topic made again with other partitions: its start
                # an offset the topic no longer has (made again, or past its retention): the partition's start
                offsets = {str(p): recorded[str(p)] if low <= recorded[str(p)] <= high else low
                           for p, (low, high) in sorted(now.items())}
                env["SHADOWTWIN_TWIN_STARTING_OFFSETS"] = json.dumps({self.topics.events: offsets})
        return env

    def up(self, nodes: list[str] | None = None) -> list[str]:
        """Start the sink and every node (or only `nodes`) that is not running; return what was started."""
        self.remember(bootstrap=self.bootstrap, topology=str(self.topology_path), topics=asdict(self.topics))
        if "events_from" not in self._state() and not any(self.db_path(n.name).exists() for n in self.topology.nodes):
            try:  # before any node of this lab publishes
                ends = topic_watermarks(self.bootstrap, self.topics.events)
            except (KafkaException, NoSuchTopic):  # no broker to ask: its twin reads the topic from its start
                ends = None
            if ends is not None:
                self.remember(events_from={str(p): high for p, (_, high) in ends.items()})
        names = [n.name for n in self.topology.nodes]
        ensure_secrets(self.topology.secrets_path(), names)
        ensure_certificates(self.topology.tls_dir(), {n: self.topology.fqdn(n) for n in names}, self.topology.host)
        started = []
        if self.pid(SINK) is None:
            self.start_sink()
            started.append(self.topology.sink.name)
        for spec in self.topology.nodes:
            if (nodes is None or spec.name in nodes) and self.pid(spec.name) is None:
                self.start_node(spec.name)
                started.append(spec.name)
        return started

    def _signal(self, pid: int, sig: int) -> None:
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            pass

    def _wait_gone(self, pid: int, name: str, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        child = self._children.get(pid)
        while time.monotonic() < deadline:
            if child is not None:
                try:
                    child.wait(timeout=0.1)
                except subprocess.TimeoutExpired:
                    continue
                return True
            if not self._ours(pid, name):
                return True
            time.sleep(0.1)
        return False

    def kill(self, name: str, wipe_queue_db: bool = False) -> bool:
        """SIGKILL, as a crash; with `wipe_queue_db` its queue database is deleted too. False if it was not running."""
        pid = self.pid(name)
        if pid is not None:
            self._signal(pid, signal.SIGKILL)
            if not self._wait_gone(pid, name, 15):
                raise LabError(f"{name} (pid {pid}) survived SIGKILL")
        if wipe_queue_db:
            queue_db.wipe(self.db_path(name))
        return pid is not None

    def stop(self, name: str, grace_s: float = 20.0) -> bool:
        """SIGTERM (a clean stop), SIGKILL after `grace_s`. False if it was not running."""
        pid = self.pid(name)
        if pid is None:
            return False
        self._signal(pid, signal.SIGTERM)
        if not self._wait_gone(pid, name, grace_s):
            self._signal(pid, signal.SIGKILL)
            self._wait_gone(pid, name, 10)
        return True

    def restart(self, name: str, wipe_queue_db: bool = False) -> int:
        """Start `name` again (stopping it first if it runs), with its database or a wiped one."""
        if name == SINK:
            self.stop(SINK)
            return self.start_sink()
        self.stop(name)
        if wipe_queue_db:
            queue_db.wipe(self.db_path(name))
        return self.start_node(name)

    def down(self) -> list[str]:
        """Stop every process the lab started; return their names."""
        stopped = [name for name in [TWIN] + [n.name for n in self.topology.nodes] + [SINK] if self.stop(name)]
        state = self._state()
        state["pids"] = {}
        self._save(state)
        return stopped

    def leftover_pids(self) -> list[int]:
        """Processes of this lab's run folder still alive, whatever state.json says (for checks)."""
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != os.getpid() and self._lab_process(int(entry.name)):
                found.append(int(entry.name))
        return found

    def _lab_process(self, pid: int) -> bool:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
        inside = (str(self.run_dir) + "/").encode()
        ours = b"producers.relay" in cmdline or (b"shadowtwin.cli" in cmdline and b"twin" in cmdline
                                                 and b"run" in cmdline)
        return ours and any(part.startswith(inside) for part in cmdline)

    # ---- inspection -----------------------------------------------------------------------

    def node_status(self, name: str) -> NodeStatus:
        spec = self.topology.node(name)
        pid = self.pid(name)
        found = queue_db.read_counts(self.db_path(name))
        qdb, counts = found if found else (None, queue_db.Counts(0, 0, 0, 0))
        return NodeStatus(name, pid is not None, pid, spec.port, qdb, counts.queued, counts.shadows,
                          counts.pending_discards)

    def sink_status(self) -> SinkStatus:
        deliveries = read_deliveries(self.mailbox_path())
        pid = self.pid(SINK)
        distinct = len({(d.message_id, d.submitted_at_ms) for d in deliveries})
        return SinkStatus(self.topology.sink.name, pid is not None, pid, self.topology.sink.port, len(deliveries),
                          distinct, sum(d.duplicate for d in deliveries))

    # ---- the external sender ----------------------------------------------------------------

    def send(self, count: int, nodes: list[str] | None = None, interval_s: float = 0.0, tag: str | None = None,
             timeout_s: float = 20.0) -> SendResult:
        """Send `count` messages with a plain SMTP client, round robin over `nodes` (default: all); a node
        that cannot be reached is skipped for the next one, as a sender falls back to the next MX."""
        names = nodes or [n.name for n in self.topology.nodes]
        tag = tag or uuid.uuid4().hex[:8]
        result = SendResult()
        domain = self.topology.internal_domains[0] if self.topology.internal_domains else "example.com"
        for i in range(count):
            message = EmailMessage()
            message_id = f"<lab-{tag}-{i}@sender.fabrikam.example>"
            submitted = int(time.time() * 1000)
            message["From"] = "sender@fabrikam.example"
            message["To"] = f"user{i % 50}@{domain}"
            message["Subject"] = f"lab message {i} ({tag})"
            message["Message-ID"] = message_id
            message["Date"] = formatdate(submitted / 1000)
            message["X-Submitted-At"] = str(submitted)
            message.set_content(f"Lab message {i} of run {tag}.\n")
            outcome = None
            for attempt in range(len(names)):
                node = names[(i + attempt) % len(names)]
                port = self.topology.node(node).port
                try:
                    with contextlib.closing(smtplib.SMTP(self.topology.host, port, timeout=timeout_s,
                                                         local_hostname="sender.fabrikam.example")) as smtp:
                        smtp.send_message(message)
                        quit_quietly(smtp)  # accepted at the 250 to DATA: a lost QUIT must not send it twice
                    outcome = ("accepted", node, "")
                except smtplib.SMTPResponseException as exc:
                    reply = f"{exc.smtp_code} {exc.smtp_error.decode(errors='replace')}"
                    outcome = ("temporary" if 400 <= exc.smtp_code < 500 else "permanent", node, reply)
                except smtplib.SMTPRecipientsRefused as exc:
                    code, text = next(iter(exc.recipients.values()))
                    outcome = ("temporary" if 400 <= code < 500 else "permanent", node, f"{code} {text!r}")
                except (OSError, smtplib.SMTPException) as exc:  # this node cannot be reached: try the next
                    why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
                    result.unreached[node] = f"{self.topology.host}:{port} ({why})"
                    continue
                break
            if outcome is None:
                result.unreachable.append(message_id)
            elif outcome[0] == "accepted":
                result.accepted.append((message_id, outcome[1]))
            else:
                getattr(result, outcome[0]).append((message_id, outcome[1], outcome[2]))
            if interval_s:
                time.sleep(interval_s)
        return result
