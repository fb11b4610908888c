"""Run one lab process: `python -m producers.relay node ...` or `python -m producers.relay sink ...`.

A node runs until SIGTERM or SIGINT (a clean stop publishes NodeStopping, and the process exits
143 or 130); SIGKILL is a crash. Logs go to stderr (the lab sends them to `.run/lab/logs/<name>.log`); no credential
is ever logged.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from infra.signals import stop_on_signals


def main(argv: list[str] | None = None) -> int:
    top = argparse.ArgumentParser(prog="python -m producers.relay")
    sub = top.add_subparsers(dest="role", required=True)
    node = sub.add_parser("node", help="a shadow-redundant relay node")
    node.add_argument("--topology", required=True)
    node.add_argument("--name", required=True)
    node.add_argument("--bootstrap", required=True)
    node.add_argument("--events-topic", required=True)
    node.add_argument("--commands-topic", required=True)
    node.add_argument("--data-dir", required=True)
    node.add_argument("--secrets", required=True, help="JSON file of node name -> password")
    sink = sub.add_parser("sink", help="the final mailbox")
    sink.add_argument("--topology", required=True)
    sink.add_argument("--db", required=True)
    args = top.parse_args(argv)

    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from producers.relay.server import quiet_library_logs
    from producers.relay.topology import load_topology, read_secrets

    quiet_library_logs()
    topology = load_topology(args.topology)
    stop = stop_on_signals()
    if args.role == "sink":
        from producers.relay.sink import MailboxSink

        server = MailboxSink(topology.fqdn(topology.sink.name), topology.host, topology.sink.port, Path(args.db),
                             topology.receive_connector.max_message_size)
        server.start()
        print(f"READY sink {topology.sink.name}", file=sys.stderr, flush=True)
        stop.wait()
        server.stop()
        return stop.exit_status()
    from producers.relay.node import RelayNode

    relay = RelayNode(topology, args.name, args.bootstrap, args.events_topic, args.commands_topic,
                      Path(args.data_dir), read_secrets(Path(args.secrets)))
    relay.start()
    print(f"READY node {args.name} queue-db {relay.db.queue_db_id}", file=sys.stderr, flush=True)
    stop.wait()
    relay.stop(stop.reason)
    return 1 if relay.events.deliveries.unacknowledged else stop.exit_status()


if __name__ == "__main__":
    sys.exit(main())
