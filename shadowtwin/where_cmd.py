"""`shadowtwin where MESSAGE_ID` and `shadowtwin server NAME`: the running twin's state, asked from
the command line, like Queue Viewer's Get-Message and Get-Queue.

Both read the compacted state topic (streaming/state_rows.py) to its end, with no Spark: the
latest record per message in flight and the latest summary per server, as of the event time
each names. `--json` prints the records as they are. Nothing found: a line on stderr, exit 1. A server
is named in any case, as Exchange names it (`server MBX01` is mbx01); an unknown one gets the closest name.
Events published that the twin has not read (stopped, or behind) are in no answer yet: a line on stderr
says how many, by the offsets the twin last committed to its consumer group (streaming/consumer_group.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from confluent_kafka import KafkaException

from infra.broker import BrokerError
from infra.kafka import NoSuchTopic
from infra.settings import Settings
from infra.wording import counted
from producers.topic_reader import unread_events
from schemas.jsonl import iso_time
from shadowtwin.arguments import did_you_mean, server_name
from shadowtwin.kafka_options import PARENT as KAFKA_OPTIONS
from state.summary import TopologyView
from state.whatif import duration
from streaming.views import read_state

NOT_FOUND = 1


def add_parsers(commands) -> None:
    where = commands.add_parser(
        "where", parents=[KAFKA_OPTIONS], help="where a message is now: its primary, its shadow copy, forks, deadlines",
        description="Read the twin's state topic and say where a message in transit is: which primary has it,"
                    " which server holds its shadow copy, its forks and their status, and its pending deadlines"
                    " (by Message-ID or internal id). A message the twin holds nothing of (delivered and released,"
                    " or never seen) is said on stderr, exit status 1.")
    where.add_argument("message", metavar="MESSAGE_ID",
                       help="the Internet Message-ID (<...@...>, its brackets may be left out) or internal id")
    _reader_options(where, "one JSON object per line, as the state topic holds it", _where)
    server = commands.add_parser(
        "server", parents=[KAFKA_OPTIONS], help="what a server holds: as primary, for others, and its heartbeat pairs",
        description="Read the twin's state topic and say what a server holds as primary (its queue, messages not"
                    " redundant, at risk, promoted), who holds shadow copies for it, whose copies it holds, its"
                    " heartbeat pairs and their last contact, and its pending deadlines. An unknown server is said"
                    " on stderr, exit status 1.")
    server.add_argument("name", metavar="NAME", help="the server's name")
    _reader_options(server, "one JSON object", _server)


def _reader_options(parser: argparse.ArgumentParser, json_help: str, run) -> None:
    parser.add_argument("--json", action="store_true", help=json_help)
    parser.set_defaults(run=run)


def _view(settings: Settings, args: argparse.Namespace) -> TopologyView:
    try:
        view = read_state(settings.kafka, settings.topics.state)
    except TimeoutError as exc:  # a state topic that cannot be read: exit 1, as a missing one (NoSuchTopic)
        raise BrokerError(str(exc)) from None
    note = unread_note(settings, int(time.time() * 1000))
    if note:
        print(note, file=sys.stderr)
    return view


def unread_note(settings: Settings, now_ms: int) -> str:
    """What the state does not hold yet: the events the twin has not read, in one line; "" when it has read
    them all, or when its consumer group (none, or one it never committed to) cannot tell."""
    topic, group = settings.topics.events, settings.twin.consumer_group
    if not group:
        return ""
    try:
        unread = unread_events(settings.kafka, topic, group)
    except (NoSuchTopic, KafkaException, RuntimeError):  # BrokerError too: the answer comes without the note
        return ""
    if not unread:
        return ""
    total = sum(u.records for u in unread.values())
    where = ", ".join(f"partition {p}: {u.records}" for p, u in sorted(unread.items()))
    firsts = [u.first_appended_ms for u in unread.values() if u.first_appended_ms is not None]
    first = f", the first appended {iso(min(firsts))}, {duration(now_ms - min(firsts))} ago" if firsts else ""
    return (f"note: the twin has not read {counted(total, 'record')} of {topic} yet ({where}{first}; past the"
            f" offsets it last committed to consumer group {group}, its clock ticks not counted): what follows"
            f" does not include {'it' if total == 1 else 'them'}")


def _where(settings: Settings, args: argparse.Namespace) -> int:
    records = _view(settings, args).where(args.message)
    if not records:
        print(f"{args.message}: the twin holds nothing of it (delivered and released, or never seen)", file=sys.stderr)
        return NOT_FOUND
    for record in records:
        print(json.dumps(record, sort_keys=True) if args.json else describe_message(record))
    return 0


def _server(settings: Settings, args: argparse.Namespace) -> int:
    view = _view(settings, args)
    known = view.server_names()
    answer = view.server(server_name(args.name, known) or args.name)
    if answer is None:
        print(f"{args.name}: no such server in the twin's state (it has sent no event, or the twin is not running)"
              + did_you_mean(args.name, known), file=sys.stderr)
        return NOT_FOUND
    print(json.dumps(answer, sort_keys=True) if args.json else describe_server(answer))
    return 0


def iso(ms: int | None) -> str:
    """`2026-11-22T02:00:00.000Z`; a deadline past year 9999 (a span of thousands of years) as its milliseconds."""
    if ms is None:
        return "-"
    text = iso_time(ms)
    return text if isinstance(text, str) else f"{ms} ms (after year 9999)"


def _route(fork: dict) -> str:
    """Where a fork went: its next hop (none: its recipients were refused for good; not named yet: known from its
    discard notification alone) and its recipients."""
    hop = {None: ", next hop not named yet", "": ""}.get(fork["next_hop"], f" -> {fork['next_hop']}")
    return hop + (f" ({', '.join(fork['recipients'])})" if fork["recipients"] else "")


def describe_message(r: dict) -> str:
    lines = [f"{r['message_id']} (internal id {r['internal_id']}) on primary {r['primary']}: {r['status']}"
             f" (as of event time {iso(r['event_time_ms'])})"]
    if "received_ms" in r:
        lines.append(f"  received {iso(r['received_ms'])}, redundancy {r['redundancy']}"
                     + (f", processed {iso(r['processed_ms'])}" if r["processed_ms"] is not None else ""))
        shadow = r["shadow"]
        lines.append("  shadow copy: " + (f"on {shadow['server']} ({'held' if shadow['held'] else 'not held'},"
                                          f" {shadow['locality'].lower()} site)" if shadow else "none"))
        for fork in r["forks"]:
            lines.append(f"  fork {fork['fork']}{_route(fork)}: {fork['status']}")
        if r["side_effects_pending"]:
            lines.append(f"  side effects pending: {', '.join(r['side_effects_pending'])}")
    if "promoted" in r:
        p = r["promoted"]
        lines.append(f"  promoted: its shadow on {p['holder']} took it over at {iso(p['at_ms'])}")
    for d in r["deadlines"]:
        lines.append(f"  deadline {d['kind']} at {iso(d['at_ms'])}" + (f" (shadow {d['shadow']})" if "shadow" in d
                                                                        else ""))
    return "\n".join(lines)


def describe_server(answer: dict) -> str:
    name, s = answer["server"], answer["summary"]
    lines = []
    if s is None:
        lines.append(f"{name}: no summary of its own (no event as a primary yet)")
    else:
        lines += [
            f"{name}: DAG {s['dag'] or '-'}, site {s['ad_site'] or '-'}, mode {s['mode'] or '-'}, queue database"
            f" {s['queue_db_id'] or '-'}, last event {iso(s['last_event_ms'])} (as of event time"
            f" {iso(s['event_time_ms'])})",
            f"  as primary: {s['messages_in_flight']} in flight, {s['queue']} in its queue, {s['not_redundant']} not"
            f" redundant, {s['at_risk']} at risk, {s['promoted']} promoted, {s['expected_duplicates']} expected"
            " duplicates",
            "  shadow copies held for it: " + _counts(s["shadow_copies_by_holder"]),
        ]
        for p in s["pairs"]:
            lines.append(f"  pair {p['shadow']} -> {name}: {p['held']} copies, last query {iso(p['last_query_ms'])},"
                         f" last contact {iso(p['last_contact_ms'])}" + (" [silent]" if p["silent"] else "")
                         + (f" [primary failed {iso(p['primary_failed_ms'])}]" if p["primary_failed_ms"] else ""))
        for kind, d in s["pending_deadlines"].items():
            lines.append(f"  deadlines {kind}: {d['count']}, next {iso(d['next_ms'])}")
    lines.append("  it holds shadow copies for: " + _counts(answer["holds_shadow_copies_for"]))
    for p in answer["shadow_pairs_towards"]:
        lines.append(f"  pair {name} -> {p['primary']}: {p['held']} copies, last query {iso(p['last_query_ms'])},"
                     f" last contact {iso(p['last_contact_ms'])}" + (" [silent]" if p["silent"] else ""))
    return "\n".join(lines)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"
