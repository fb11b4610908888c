"""`shadowtwin lab ...`: real SMTP relay nodes on loopback, a mailbox sink and an external sender.

    shadowtwin lab up [--twin]          broker (if needed), topics, sink and every node of conf/lab.toml
    shadowtwin lab send --count N       a plain SMTP client sends N messages, round robin over the nodes
    shadowtwin lab kill NODE [--wipe-queue-db]
    shadowtwin lab restart NODE [--wipe-queue-db]
    shadowtwin lab status               nodes (up/down, pid, port, queue-db id, queued, shadows) and sink totals
    shadowtwin lab down                 stops everything `lab up` started (the broker too, if it did)

The processes and their files are described in producers/relay/lab.py; the topology in
conf/lab.toml (`--topology` for another file).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from infra.settings import Settings
from shadowtwin.arguments import COUNT, INTERVAL, did_you_mean, server_name
from shadowtwin.errors import UsageError


def add_lab_parser(commands) -> None:
    """Add the `lab` subcommand to the top-level subparsers."""
    lab = commands.add_parser("lab", help="real SMTP relay nodes on loopback (the lab)",
                              description="Start, drive and stop a lab of real SMTP relay nodes, a mailbox sink and"
                                          " an external sender; the nodes publish their events to the events topic"
                                          " and obey the twin's redelivery commands.")
    lab.add_argument("--topology", help="the lab's topology file (default: conf/lab.toml)")
    actions = lab.add_subparsers(dest="lab_action", required=True, metavar="ACTION")
    up = actions.add_parser("up", help="start the broker if needed, the topics, the sink and every node")
    up.add_argument("--twin", action="store_true",
                    help="also run the streaming twin as a lab process, with the lab's spans (Spark: slow to start)")
    send = actions.add_parser("send", help="send messages with a plain SMTP client")
    send.add_argument("--count", type=COUNT, required=True)
    send.add_argument("--node", action="append", help="send to this node only (repeatable; default: all, round robin)")
    send.add_argument("--interval", type=INTERVAL, default=0.0, help="seconds between messages")
    kill = actions.add_parser("kill", help="kill -9 a node, as a crash")
    kill.add_argument("node")
    kill.add_argument("--wipe-queue-db", action="store_true", help="delete its queue database too")
    restart = actions.add_parser("restart", help="start a node again (stopping it first if it runs)")
    restart.add_argument("node")
    restart.add_argument("--wipe-queue-db", action="store_true", help="with a new, empty queue database")
    status = actions.add_parser("status", help="what runs, queues, shadow copies, and what the sink received")
    status.add_argument("--json", action="store_true", help="one JSON object: nodes, sink, twin")
    actions.add_parser("down", help="stop everything the lab started")
    lab.set_defaults(run=run_lab)


def _lab(settings: Settings, args: argparse.Namespace):
    from producers.relay.lab import Lab
    from producers.relay.topology import DEFAULT_TOPOLOGY, load_topology

    topology_path = Path(args.topology) if args.topology else DEFAULT_TOPOLOGY
    return Lab(load_topology(topology_path), topology_path, settings.kafka.bootstrap_servers, settings.topics)


def run_lab(settings: Settings, args: argparse.Namespace) -> int:
    """Errors go to `shadowtwin.cli.main`: an unknown node or a bad topology is a UsageError."""
    lab = _lab(settings, args)
    named = getattr(args, "node", None)  # kill and restart name one node, send any number
    if named:
        spelled = [_node_named(lab, node) for node in ([named] if isinstance(named, str) else named)]
        args.node = spelled[0] if isinstance(named, str) else spelled
    return _ACTIONS[args.lab_action](lab, settings, args)


def _node_named(lab, node: str) -> str:
    """The node `node` names, in any case as Exchange reads a server's name; an unknown one is a UsageError."""
    names = [spec.name for spec in lab.topology.nodes]
    name = server_name(node, names)
    if name is None:
        raise UsageError(f"no node {node!r} in the topology (nodes: {', '.join(names)}){did_you_mean(node, names)}")
    return name


def _up(lab, settings: Settings, args) -> int:
    from infra.broker import start_if_needed
    from infra.topics import create_topics

    broker = start_if_needed(settings, print)
    if broker is not None:
        lab.remember(broker_started=True)
    for outcome in create_topics(settings.kafka.bootstrap_servers, settings.topics):
        print(f"topic {outcome.describe()}")
    started = lab.up()
    print(f"started {', '.join(started)}" if started else "everything was running already")
    if args.twin:
        print("starting the streaming twin (Spark) ...")
        lab.start_twin(conf=args.conf)
        print(f"twin running; its log: {lab.log_path('twin')}")
    return _status(lab, settings, args)


def _send(lab, settings: Settings, args) -> int:
    result = lab.send(args.count, nodes=args.node, interval_s=args.interval)
    print(result.describe())
    for message_id, node, reply in result.temporary + result.permanent:
        print(f"  {message_id} at {node}: {reply}")
    failure = result.failure()
    if failure is not None:
        print(failure, file=sys.stderr)
        return 1
    return 0


def _kill(lab, settings: Settings, args) -> int:
    was_running = lab.kill(args.node, wipe_queue_db=args.wipe_queue_db)
    print(f"{args.node} {'killed (SIGKILL)' if was_running else 'was not running'}"
          + ("; its queue database is wiped" if args.wipe_queue_db else ""))
    return 0


def _restart(lab, settings: Settings, args) -> int:
    pid = lab.restart(args.node, wipe_queue_db=args.wipe_queue_db)
    print(f"{args.node} running (pid {pid}), queue database {lab.node_status(args.node).queue_db_id}")
    return 0


def _status(lab, settings: Settings, args) -> int:
    from producers.relay.lab import TWIN

    if getattr(args, "json", False):  # `lab up` ends with the status too, as lines
        from shadowtwin.json_output import as_json

        print(as_json({"nodes": [lab.node_status(spec.name) for spec in lab.topology.nodes],
                       "sink": lab.sink_status(), "twin": {"running": lab.pid(TWIN) is not None, "pid": lab.pid(TWIN)}}))
        return 0
    for spec in lab.topology.nodes:
        print(lab.node_status(spec.name).describe())
    print(lab.sink_status().describe())
    twin = lab.pid(TWIN)
    if twin is not None:
        print(f"{'twin':10} up   pid {twin}")
    return 0


def _down(lab, settings: Settings, args) -> int:
    from infra.broker import EmbeddedKafka

    broker_started = lab._state().get("broker_started", False)
    stopped = lab.down()
    print(f"stopped {', '.join(stopped)}" if stopped else "nothing was running")
    if broker_started:
        broker = EmbeddedKafka(settings.kafka.embedded, settings.jars.cache_dir)
        print("kafka stopped" if broker.stop() else "kafka was not running")
        lab.remember(broker_started=False)
    left = lab.leftover_pids()
    if left:
        print(f"processes still alive: {left}", file=sys.stderr)
        return 1
    return 0


_ACTIONS = {"up": _up, "send": _send, "kill": _kill, "restart": _restart, "status": _status, "down": _down}
