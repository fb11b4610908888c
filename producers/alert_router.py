"""`shadowtwin alerts route`: the twin's alerts to an Alertmanager and/or a generic JSON webhook.

    router = AlertRouter(bootstrap, "shadowtwin.alerts", [alertmanager(url), webhook(url)],
                         settings.alert_routing, "shadowtwin.dead-letters")
    router.run(stop)

Delivery is at least once, and nothing is lost while a receiver is down: the router is a Kafka
consumer (group `alert_routing.group_id`) that commits an alert's offset only after every receiver
answered 2xx for it. A receiver that fails (connection refused, timed out, a 5xx, 408 or 429, not
HTTP at all: the line says what it answered; a redirect is not followed, the line names where to; a
401, 403 or 407, which say the router may not post there, not that the alert is wrong: the line says
to check its credentials, or the proxy's) is retried with a pause doubling from
`retry_initial_seconds` to `retry_max_seconds`, for as long as it takes; the alerts behind it wait.
Stopped (Ctrl-C) while waiting, it commits nothing it has not delivered, and the next run starts
there (its last line counts the records of the partition not delivered). Should the group take the
partition of the alert waiting (another router joined or left), the router leaves it uncommitted to
the partition's next router, which posts it again, says so in one line and goes on with its other
partitions; one it is given during a pause waits too, read from its committed offset. Offsets are
committed one commit at a time, without waiting for the answer: a router waiting would hold up the
rebalance of its group, and a commit the group refuses while it rebalances (REBALANCE_IN_PROGRESS,
ILLEGAL_GENERATION: under the cooperative-sticky assignor a router keeps its other partitions
through it) is made again after. A user and password in a receiver's address
(`http://user:password@host:9093`, percent-encoded as curl takes them) are sent to it as HTTP Basic auth (what
Alertmanager's web config, `basic_auth_users`, checks), `[alert_routing] bearer_token` as a bearer token to every
receiver whose address gives no user (one behind a token proxy); a line names the receiver `user:***@host`, and a
401 or 403 says what was sent; a proxy's credentials, from https_proxy or http_proxy, go in its address.
Any other 4xx says the request itself is wrong,
and another try would get the same answer (Alertmanager's own notifiers do not retry it either): the
refusal is said in one line (the status and the start of the answer's body), the alert's record goes
to the dead-letter topic with it as the reason (`receiver refused: ...`,
`shadowtwin dead-letters tail`; one per receiver that refused it), and the router goes on with the
next alert once the brokers acknowledged the dead letter. A record that is no alert (one in the JSON
form, say) is set aside the same way, its reason why it does not decode (`bad magic: ...`), and
committed once the brokers acknowledged it; should `WRONG_TOPIC_AFTER` (20) records read before any
alert (those read again included) be records of the twin's other topics (an event, a command) or
JSON text, the topic is taken for the wrong one (the events topic or the alerts' JSON copy given by
mistake): one line names it and the router stops, rather than set the whole topic aside. Records of
no known shape (garbage) are set aside and routing goes on, however many. A list Alertmanager
refuses whole (an alert firing with the resolves of the conditions it ends) is posted again one
alert at a time, so the resolves it takes are not lost with the one it refuses. Every
`--alertmanager` and every `--webhook` is a receiver of its own: an Alertmanager cluster, given as its members' addresses, gets every
alert at each (its members share silences and notifications, not alerts), as Prometheus sends them. Alertmanager
drops repeats of an alert it already has (same labels); the webhook sees a repeat after such a
stop, and after an answer that came later than `request_timeout_seconds` (the post is taken as
failed and made again). An https:// receiver is trusted by the system's authorities, or by those
of `ca_file`.

Alertmanager (`POST /api/v2/alerts`, a list of postable alerts): labels `alertname` (the alert
type), `severity` (info, warning, critical), `primary` (the primary server the alert is about: the
first server named, the second of SHADOW_SERVER_UNREACHABLE, which names the shadow first), `servers`,
`alert_id`; annotations `summary` (the reason), `messages` (Message-IDs, at most 20),
`decided_at`; `startsAt` is the event time of the decision. Alerts are of two sorts:

- **events** (something happened: duplicates expected, a message lost or expired, rejected,
  not redundant, shadows expired, discard events dropped, late events, events lost, a shadow in
  the same site, a queue database changed): `endsAt` = startsAt + `event_alert_hold`;
- **conditions** (something is still wrong until the twin says otherwise): `endsAt` = startsAt
  + `condition_hold`, unless a later alert clears it; the router then sends the same labels
  again with `endsAt` = the clearing alert's event time (a resolve), on both receivers.

Which alert clears which (`CLEARED_BY`), decided from the contract's alerts alone:

| condition (about primary P) | cleared by |
|---|---|
| PRIMARY_FAILED_SHADOWS_PROMOTED, HELD_NO_ALTERNATE_ROUTE, MESSAGE_AT_RISK | P answers again: QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED about P (back with a new database), or DUPLICATE_DELIVERY_EXPECTED about P naming a message of P's open conditions (back with the same database) |
| MESSAGE_AT_RISK | also MESSAGE_LOST about P of its messages (superseded by the loss, which fires itself) |

"About P" is P's alert (`primary_of`), and a message is the same when all its reference is
(Message-ID, internal id, fork): internal ids are each server's own, and two servers may number two
messages alike.
| SHADOW_SERVER_UNREACHABLE (shadow S, primary P) | S acts again as P's shadow: a promotion alert about P by S |
| RESTARTED_QUEUE_DATABASE_UNKNOWN (primary P) | RESTART_QUEUE_DATABASE_SETTLED about P (which database it restarted with) |
| EVENTS_STOPPED | never by an alert: it ends after `condition_hold` |

The twin writes all alerts about one primary server to one partition (schemas/placement.py), so a
condition and the alert that clears it (both about its primary, by the table above) come to one
router, in order. The open conditions live in memory, by partition; on start, and whenever the group
gives it partitions (a router that takes over those of one stopped, or of one that joined), the router
reads the partitions it is given from their beginning up to the group's committed offsets, without
delivering, to know theirs again, and forgets those of the partitions the group takes. A partition
it keeps through a rebalance (the cooperative-sticky assignor's) is not read again; the eager
assignors (range, roundrobin) take all and give all again, which are all read again.
Alertmanager keeps its alerts in memory too, and a restart forgets them: the conditions still
firing (by wall time) are posted to it again every `resend_seconds` (60 s), as Prometheus does; it
notifies no one of an alert it already has. It takes a list of alerts whole or not at all: one it
refused is left out of its resends, so as not to have it refuse the others with it (a router
started again, which does not know which, finds it by posting each alone after a refusal). One
refused when posted again is said and counted, not set aside again: its record was delivered, or set
aside when first refused, and a router would set it aside again at each start.

The generic webhook gets one JSON object per notification: `{"status": "firing" | "resolved",
"alert": <the alert in the contract's JSON form>, "starts_at", "ends_at"}`, plus `"resolved_by"`
(the clearing alert's id) on a resolve.
"""

from __future__ import annotations

import base64
import dataclasses
import http.client
import json
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, KafkaError, KafkaException, TopicPartition

from infra.config import Secret
from infra.kafka import Kafka, committed_offsets, consumer, partitions_of, producer
from infra.settings import AlertRoutingSettings
from producers.publisher import ORIGINAL_KEPT, produce
from producers.topic_reader import watermarks
from schemas import jsonl
from schemas.codec import decode
from schemas.events import Alert, AlertType, DeadLetter, KafkaHeader, MessageRef
from schemas.placement import primary_of
from schemas.wire import JSON_TEXT, WRONG_SCHEMA, DecodeError

A = AlertType
PRIMARY_DOWN = (A.PRIMARY_FAILED_SHADOWS_PROMOTED, A.HELD_NO_ALTERNATE_ROUTE, A.MESSAGE_AT_RISK)
CONDITIONS = frozenset({*PRIMARY_DOWN, A.SHADOW_SERVER_UNREACHABLE, A.EVENTS_STOPPED, A.RESTARTED_QUEUE_DATABASE_UNKNOWN})
PROMOTIONS = (A.PRIMARY_FAILED_SHADOWS_PROMOTED, A.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED)
MAX_MESSAGES_NAMED = 20
ANSWER_SHOWN = 300  # bytes of a receiver's answer that is not 2xx, in the line saying it failed
RETRIED_4XX = (408, 429)  # Request Timeout, Too Many Requests: the receiver may take it later
# 4xx that say the router may not post there, nothing of the alert: retried as a receiver down, with what to put right
NOT_LET_IN = {401: "check its credentials", 403: "check its credentials",
              407: "check the proxy of https_proxy or http_proxy: its user and password go in its address"
                   " (http://user:password@proxy:3128)"}
SENT_NONE = ("the router sent none: give a user and password in its address (http://user:password@host:9093) or a"
             " token as [alert_routing] bearer_token")
# Records of another topic's shape (an event, a command, JSON text) read before any alert, after which the
# router takes its topic for no alerts topic (the events topic given by mistake): it stops rather than set the
# whole topic aside
WRONG_TOPIC_AFTER = 20
REFUSED = "receiver refused"  # a dead letter's reason: "receiver refused: <receiver> <url> answered HTTP 4xx ..."
# A commit the group refuses while it rebalances (a router joined or left): its generation moved on
REGROUPING = (KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID)


def _messages(alert: Alert) -> set[MessageRef]:
    # A message by all its reference: internal ids are each server's own, the same on two at times
    return {m.message for m in alert.messages}


def clears(later: Alert, open_alert: Alert, open_alerts: Iterable[Alert] = ()) -> bool:
    """Whether `later` clears the condition `open_alert` (the table in the module's doc)."""
    primary = primary_of(open_alert)
    if open_alert.type in PRIMARY_DOWN:
        if later.type is A.QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED and primary_of(later) == primary:
            return True
        if later.type is A.DUPLICATE_DELIVERY_EXPECTED and primary_of(later) == primary:
            # the primary that came back: one whose open conditions name a message of `later`
            return any(primary_of(o) == primary and _messages(o) & _messages(later) for o in open_alerts)
        if open_alert.type is A.MESSAGE_AT_RISK and later.type is A.MESSAGE_LOST:
            return primary_of(later) == primary and bool(_messages(open_alert) & _messages(later))
    if open_alert.type is A.RESTARTED_QUEUE_DATABASE_UNKNOWN:
        return later.type is A.RESTART_QUEUE_DATABASE_SETTLED and later.servers[:1] == (primary,)
    if open_alert.type is A.SHADOW_SERVER_UNREACHABLE and len(open_alert.servers) >= 2:
        shadow, primary = open_alert.servers[0], open_alert.servers[1]
        return later.type in PROMOTIONS and later.servers[:2] == (primary, shadow)
    return False


@dataclass(frozen=True)
class Notification:
    status: str  # "firing" or "resolved"
    alert: Alert
    starts_ms: int
    ends_ms: int
    resolved_by: str | None = None


@dataclass
class OpenConditions:
    """The conditions firing, by alert id; what each new alert fires and resolves."""

    routing: AlertRoutingSettings
    open: dict[str, Alert] = field(default_factory=dict)

    def observe(self, alert: Alert) -> list[Notification]:
        out = [self.firing(alert)]
        others = list(self.open.values())
        for cleared in [o for o in others if o.alert_id != alert.alert_id and clears(alert, o, others)]:
            del self.open[cleared.alert_id]
            out.append(Notification("resolved", cleared, cleared.decided_at_ms,
                                    max(alert.decided_at_ms, cleared.decided_at_ms), alert.alert_id))
        if alert.type in CONDITIONS:
            self.open[alert.alert_id] = alert
        return out

    def firing(self, alert: Alert) -> Notification:
        hold = self.routing.condition_hold if alert.type in CONDITIONS else self.routing.event_alert_hold
        ends_ms = alert.decided_at_ms + int(hold.total_seconds() * 1000)
        return Notification("firing", alert, alert.decided_at_ms, ends_ms)


# ---- receivers ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Authorization:
    """A receiver's Authorization header ("" for none) and what the line of a 401 or 403 says was sent: never the
    secret itself."""

    header: Secret = Secret("")
    said: str = SENT_NONE


@dataclass(frozen=True)
class Receiver:
    name: str
    url: str  # where it is posted to, without the user and password of the address given
    bodies: Callable[[list[Notification]], list[bytes]]
    resends: bool = False  # gets the conditions still firing again every `resend_seconds`
    # the user of the address given and, for its password, ***: in its lines (`http://user:***@host:9093`)
    user: str | None = None
    authorization: Authorization = Authorization()

    @property
    def shown(self) -> str:
        """Its address in lines and dead letters, the password hidden."""
        if self.user is None:
            return self.url
        parts = urllib.parse.urlsplit(self.url)
        return parts._replace(netloc=f"{self.user}@{parts.netloc}").geturl()

    def with_token(self, token: Secret) -> Receiver:
        """The receiver sending `token` (`bearer_token`) as a bearer token, unless its address gives a user."""
        if self.user is not None or not token:
            return self
        return dataclasses.replace(self, authorization=Authorization(
            Secret(f"Bearer {token.reveal()}"), "the router sent [alert_routing] bearer_token as a bearer token"))


def _receiver(name: str, url: str, bodies: Callable[[list[Notification]], list[bytes]], resends: bool = False
              ) -> Receiver:
    """The receiver at `url`; a user and password in it (`http://user:password@host:9093`, percent-encoded as
    curl takes them) are taken out of it and sent as HTTP Basic auth, as Alertmanager's web config checks them."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return Receiver(name, url, bodies, resends)
    user, password = urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or "")
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    hidden = ":***" if parts.password is not None else ""
    return Receiver(name, parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl(), bodies, resends,
                    parts.username + hidden, Authorization(Secret(f"Basic {basic}"), "the router sent HTTP Basic auth"
                                                           f" as user {user}{'' if hidden else ', no password'}"))


def alertmanager(url: str) -> Receiver:
    """Alertmanager's API v2; `url` is its base address or the full /api/v2/alerts address."""
    full = url if url.rstrip("/").endswith("/api/v2/alerts") else url.rstrip("/") + "/api/v2/alerts"
    return _receiver("alertmanager", full, lambda notes: [json.dumps([_postable(n) for n in notes]).encode()]
                     if notes else [], resends=True)


def webhook(url: str) -> Receiver:
    return _receiver("webhook", url, lambda notes: [json.dumps(_webhook_object(n)).encode() for n in notes])


def labels(alert: Alert) -> dict[str, str]:
    return {"alertname": alert.type.value, "severity": alert.severity.value.lower(),
            "primary": primary_of(alert), "servers": ",".join(alert.servers),
            "alert_id": alert.alert_id}


def _postable(n: Notification) -> dict:
    ids = [m.message.message_id for m in n.alert.messages]
    named = ", ".join(ids[:MAX_MESSAGES_NAMED]) + (f" and {len(ids) - MAX_MESSAGES_NAMED} more"
                                                   if len(ids) > MAX_MESSAGES_NAMED else "")
    annotations = {"summary": n.alert.reason, "decided_at": jsonl.iso_time(n.alert.decided_at_ms)}
    if ids:
        annotations["messages"] = named
    if n.resolved_by:
        annotations["resolved_by"] = n.resolved_by
    return {"labels": labels(n.alert), "annotations": annotations,
            "startsAt": jsonl.iso_time(n.starts_ms), "endsAt": jsonl.iso_time(n.ends_ms)}


def _webhook_object(n: Notification) -> dict:
    obj = {"status": n.status, "alert": jsonl.to_json(n.alert), "starts_at": jsonl.iso_time(n.starts_ms),
           "ends_at": jsonl.iso_time(n.ends_ms)}
    if n.resolved_by:
        obj["resolved_by"] = n.resolved_by
    return obj


def _parts(receiver: Receiver, notes: list[Notification]) -> list[tuple[list[Notification], bytes]]:
    """The receiver's request bodies for `notes`, each with the notifications it carries."""
    bodies = receiver.bodies(notes)
    return list(zip(([n] for n in notes), bodies)) if len(bodies) == len(notes) else [(notes, body) for body in bodies]


class _NotFollowed(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer that is not 2xx: urllib follows a 301, 302 or 303 to a POST with a
    GET, which delivers nothing (and which Alertmanager's GET /api/v2/alerts answers 200)."""

    def redirect_request(self, *args, **kwargs):
        return None


def opener(ca_file: Path | None) -> urllib.request.OpenerDirector:
    """What posts to the receivers: redirects not followed; https trusting the authorities of
    `ca_file` (`alert_routing.ca_file`), else the system's."""
    return urllib.request.build_opener(_NotFollowed, urllib.request.HTTPSHandler(
        context=ssl.create_default_context(cafile=ca_file)))


class PartitionTaken(Exception):
    """The group took the partition of the alert being delivered from this router, during a retry's pause."""


class Refused(Exception):
    """A receiver's 4xx answer other than 401, 403, 407, 408 and 429: the request is wrong, and another try gets
    the same."""


def post(receiver: Receiver, body: bytes, timeout_s: float, by: urllib.request.OpenerDirector) -> None:
    """POST JSON, with the receiver's Authorization header; raises Refused for a 4xx that is not worth
    retrying, OSError (urllib's errors are OSErrors) for any other answer that is not 2xx."""
    headers = {"Content-Type": "application/json"}
    if receiver.authorization.header:
        headers["Authorization"] = receiver.authorization.header.reveal()
    request = urllib.request.Request(receiver.url, data=body, method="POST", headers=headers)
    try:
        with by.open(request, timeout=timeout_s) as answer:
            answer.read()
    except http.client.HTTPException as error:  # something other than an HTTP server answered
        raise OSError(f"not an HTTP answer ({type(error).__name__}: {' '.join(str(error).split())})") from None
    except urllib.error.HTTPError as error:
        answer = f"HTTP {error.code} {error.reason}"
        if 300 <= error.code < 400:
            raise OSError(f"{answer}, to {error.headers.get('Location')}: give the receiver's new address") from None
        said = " ".join(error.read(ANSWER_SHOWN).decode(errors="replace").split())  # what it found wrong
        answer = f"{answer}: {said}" if said else answer
        if error.code in NOT_LET_IN:
            sent = f": {receiver.authorization.said}" if error.code != 407 else ""
            raise OSError(f"{answer}: {NOT_LET_IN[error.code]}{sent}") from None
        if 400 <= error.code < 500 and error.code not in RETRIED_4XX:
            raise Refused(answer) from None
        raise OSError(answer) from None


# ---- the router ----------------------------------------------------------------------------

@dataclass
class RouteCounts:
    routed: int = 0  # alerts every receiver acknowledged (their offsets committed, or on their way)
    resolves: int = 0
    retries: int = 0
    undecodable: int = 0  # records that are not alerts, set aside as dead letters (retrying cannot help)
    refused: int = 0  # alerts a receiver refused (4xx), each set aside as a dead letter per receiver
    # conditions firing a receiver refused (4xx) when posted again, by receiver: no longer there (set aside
    # when first refused, by this router or one before: not again at every start)
    refused_again: int = 0
    no_alerts_topic: bool = False  # stopped: WRONG_TOPIC_AFTER records of another topic read, not one an alert
    # stopped while an alert was not yet acknowledged: the records of its partition from it on, not delivered
    pending: int = 0
    recalled: int = 0  # records read again, from partitions given, to know their open conditions

    def describe(self) -> str:
        text = f"routed {self.routed} alerts ({self.resolves} resolves), {self.retries} retries"
        if self.refused:
            text += (f"; {self.refused} not delivered, refused by a receiver (HTTP 4xx): set aside as dead letters"
                     " (shadowtwin dead-letters tail)")
        if self.undecodable:
            text += f"; {self.undecodable} records that are not alerts set aside as dead letters"
        if self.refused_again:
            text += (f"; {self.refused_again} conditions firing refused by a receiver (HTTP 4xx) when posted again:"
                     " not there, left out of its resends")
        if self.pending:
            text += (f"; stopped before an alert was acknowledged: {self.pending} not delivered, it and those after it"
                     " in its partition: the next run delivers them")
        return text

    def all_done(self) -> bool:
        """Every record read routed, and every condition firing where it was posted."""
        return not (self.pending or self.refused or self.undecodable or self.refused_again or self.no_alerts_topic)


class AlertRouter:
    def __init__(self, bootstrap: Kafka, topic: str, receivers: list[Receiver], routing: AlertRoutingSettings,
                 dead_letters: str, say: Callable[[str], None] = lambda line: None):
        self.bootstrap, self.topic, self.routing, self.say = bootstrap, topic, routing, say
        self.receivers = [receiver.with_token(routing.bearer_token) for receiver in receivers]
        self.dead_letters = dead_letters
        self.conditions: dict[int, OpenConditions] = {}  # by partition: its alerts clear only its own
        self.counts = RouteCounts()
        self._opener = opener(routing.ca_file)
        self._letters = None  # the dead letters' producer, made at the first refusal
        # receiver URL -> the alerts it refused: not in its resends, where they would have it refuse all the others
        self._refused: dict[str, set[str]] = {}
        self._given: set[int] = set()  # partitions the group gave whose open conditions are not read yet
        self._taken: set[int] = set()  # partitions the group took (revoked or lost) during this delivery
        self._delivered: dict[int, TopicPartition] = {}  # offsets delivered, not yet committed, by partition
        self._committing = False  # a commit is waiting for its answer
        self._commit_failed: KafkaError | None = None  # a commit's error that another try would get too
        # why each record of another topic's shape was no alert, until an alert is read (None): WRONG_TOPIC_AFTER
        # of them end the run
        self._not_alerts: list[DecodeError] | None = []

    def run(self, stop: threading.Event, seconds: float | None = None) -> RouteCounts:
        client = consumer(self.bootstrap, self.routing.group_id, log_level=2, error_cb=lambda error: None,
                          on_commit=self._on_commit)
        try:
            for topic in (self.topic, self.dead_letters):  # NoSuchTopic, said in one line, for a misspelt one
                partitions_of(client, topic, kafka=self.bootstrap)
            client.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                             on_lost=self._on_revoke)
            timer = threading.Timer(seconds, stop.set) if seconds is not None else None
            if timer is not None:
                timer.daemon = True
                timer.start()
            resend_at = time.monotonic() + self.routing.resend_seconds
            while not stop.is_set():
                if time.monotonic() >= resend_at:
                    self._resend()
                    resend_at = time.monotonic() + self.routing.resend_seconds
                message = client.poll(0.2)
                self._commit(client)
                if self._given:  # before the first record of a partition given is delivered
                    self._remember_open(client)
                if self._not_alerts is not None and len(self._not_alerts) >= WRONG_TOPIC_AFTER:
                    self.counts.no_alerts_topic = True
                    self.say(f"{self.topic}: {len(self._not_alerts)} records of another topic read, not one an"
                             f" alert (the last: {self._not_alerts[-1]}): is it the alerts topic? stopped")
                    break
                if message is None:
                    continue
                if message.error() is not None:
                    raise RuntimeError(f"{self.topic}: {message.error()}")
                self._taken.clear()
                try:
                    delivered = self._deliver(message, stop, lambda pause: self._wait(
                        client, pause, stop, message.partition()))
                except PartitionTaken:
                    self.say(f"{self.topic} partition {message.partition()} offset {message.offset()}: the group"
                             " took the partition from this router while the alert waited for a retry: not"
                             " committed, the partition's next router delivers it")
                    continue
                if not delivered:
                    # the end of the partition its last fetch saw: asking the brokers could fail, and stop slowly
                    end = client.get_watermark_offsets(TopicPartition(self.topic, message.partition()), cached=True)[1]
                    self.counts.pending = max(end - message.offset(), 1)
                    break
                self._delivered[message.partition()] = TopicPartition(self.topic, message.partition(),
                                                                      message.offset() + 1)
                self._commit(client)
            self._committing = False
            self._commit(client)
        finally:
            client.close()  # after the answers to the commits made
        return self.counts

    def _on_assign(self, client, partitions) -> None:
        self._given.update(tp.partition for tp in partitions if tp.topic == self.topic)

    def _on_revoke(self, client, partitions) -> None:
        taken = {tp.partition for tp in partitions if tp.topic == self.topic}
        self._taken |= taken
        self._given -= taken
        for partition in taken:  # its next router delivers again what this one could not commit, and resends
            self._delivered.pop(partition, None)
            self.conditions.pop(partition, None)

    def _commit(self, client) -> None:
        """Commit the offsets delivered, one commit at a time, without waiting for its answer
        (`_on_commit`, in a later poll): a commit waited for while the group rebalances holds up
        the rebalance (the router does not poll) and is answered only when it is over."""
        if self._commit_failed is not None:
            raise KafkaException(self._commit_failed)
        if self._delivered and not self._committing:
            self._committing = True
            client.commit(offsets=list(self._delivered.values()), asynchronous=True)

    def _on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """A commit's answer. Offsets the group refused while it rebalanced (a router joined or
        left), or for a passing fault, are committed again after the next poll; those of a
        partition it took meanwhile are the partition's next router's, which delivers their alerts
        again (`_on_revoke`)."""
        self._committing = False
        for tp in partitions:
            done = self._delivered.get(tp.partition)
            if tp.error is None and error is None and done is not None and done.offset <= tp.offset:
                del self._delivered[tp.partition]
        failed = error or next((tp.error for tp in partitions if tp.error is not None), None)
        if failed is not None and failed.code() not in REGROUPING and not failed.retriable():
            self._commit_failed = failed

    def _remember_open(self, client) -> None:
        """The conditions still open among the alerts routed before on the partitions given, read from
        their beginning up to the group's committed offsets; those the router kept are known already
        (a partition taken forgets what it delivered and has not seen committed: `_on_revoke`).
        The reader, in the group but no member of it, asks for the committed ones: the router's own consumer, asked
        while the group still rebalances (a cooperative one's first phase), would wait for the
        rebalance it holds up."""
        assigned = [TopicPartition(self.topic, p) for p in sorted(self._given)]
        self._given.clear()
        self.conditions.update({tp.partition: OpenConditions(self.routing) for tp in assigned})
        if not assigned:
            return
        reader = consumer(self.bootstrap, self.routing.group_id, log_level=2, error_cb=lambda error: None)
        try:
            committed = committed_offsets(reader, assigned)
            upto = {tp.partition: tp.offset for tp in committed if tp.offset > 0}
            starts = {p: watermarks(reader, self.topic, p)[0] for p in upto}
            pending = {p for p in upto if upto[p] > starts[p]}
            reader.assign([TopicPartition(self.topic, p, starts[p]) for p in pending])
            while pending:
                message = reader.poll(1.0)
                if message is None or message.error() is not None or message.partition() not in pending:
                    continue
                if message.offset() < upto[message.partition()]:
                    self.counts.recalled += 1
                    alert = self._alert(message.value())
                    if not isinstance(alert, DecodeError):
                        self.conditions[message.partition()].observe(alert)
                if message.offset() + 1 >= upto[message.partition()]:
                    pending.discard(message.partition())
        finally:
            reader.close()

    def _wait(self, client, seconds: float, stop: threading.Event, partition: int) -> None:
        """A retry's pause, polling the consumer with its partitions paused: one that does not poll
        for max.poll.interval.ms (5 min) is put out of its group, and its commit then fails.
        PartitionTaken when the group takes `partition`, that of the alert being delivered (a router
        joined or left): its offset is then the next router's to commit. A partition the group gives
        during the pause is paused too: a record polled from it is sought back to, not thrown away.
        All are resumed, those taken too: a partition stays paused through its revoke and assign."""
        paused = client.assignment()
        client.pause(paused)
        try:
            until = time.monotonic() + seconds
            while not stop.is_set() and time.monotonic() < until and partition not in self._taken:
                record = client.poll(min(0.2, max(until - time.monotonic(), 0.0)))
                if record is not None and record.error() is None:
                    given = TopicPartition(record.topic(), record.partition(), record.offset())
                    client.pause([given])
                    client.seek(given)
                    paused.append(given)
        finally:
            client.resume(paused + client.assignment())
        if partition in self._taken:
            raise PartitionTaken(partition)

    def _resend(self) -> None:
        """The conditions still firing, once more to the receivers that forget (Alertmanager); one
        that fails now gets them at the next resend. Alertmanager refuses a list whole: after a
        refusal each is posted alone, and those it refuses are left out of its resends."""
        now_ms = int(time.time() * 1000)
        notes = [n for kept in self.conditions.values() for n in map(kept.firing, kept.open.values())
                 if n.ends_ms > now_ms]
        again = f"the conditions firing are posted again in {self.routing.resend_seconds:g} s"
        for receiver in (r for r in self.receivers if r.resends):
            refused = self._refused.setdefault(receiver.url, set())
            firing = [n for n in notes if n.alert.alert_id not in refused]
            try:
                self._post(receiver, firing)
                continue
            except Refused:
                pass
            except (OSError, ValueError) as exc:
                self.say(f"{receiver.name} {receiver.shown}: {exc}; {again}")
                continue
            for note in firing:
                try:
                    self._post(receiver, [note])
                except Refused as exc:
                    refused.add(note.alert.alert_id)
                    self.counts.refused_again += 1
                    self.say(f"{receiver.name} {receiver.shown}: {exc}; refused {note.alert.alert_id}, left out of"
                             " the resends")
                except (OSError, ValueError) as exc:
                    self.say(f"{receiver.name} {receiver.shown}: {exc}; {again}")
                    break

    def _post(self, receiver: Receiver, notes: list[Notification]) -> None:
        for body in receiver.bodies(notes):
            post(receiver, body, self.routing.request_timeout_seconds, self._opener)

    def _alert(self, value: bytes | None) -> Alert | DecodeError:
        """The record's alert, or why it is none."""
        try:
            alert = decode(value or b"", "Alert")
        except DecodeError as exc:
            if self._not_alerts is not None and (exc.reason == WRONG_SCHEMA or exc.detail.endswith(JSON_TEXT)):
                self._not_alerts.append(exc)
            return exc
        self._not_alerts = None  # an alerts topic: a record that is no alert is one among its alerts
        return alert  # type: ignore[return-value]

    def _deliver(self, message, stop: threading.Event, wait: Callable[[float], None]) -> bool:
        """Deliver one record's notifications to every receiver, `wait`ing between tries, and set aside
        those a receiver refused; False if stopped before they were all acknowledged or set aside. A
        record that is no alert is set aside too, with why."""
        alert = self._alert(message.value())
        if isinstance(alert, DecodeError):
            self.say(f"{self.topic} partition {message.partition()} offset {message.offset()}: not an alert"
                     f" ({alert.reason}): set aside on {self.dead_letters}")
            if not self._set_aside(message, str(alert), stop, wait):
                return False
            self.counts.undecodable += 1
            return True
        notes = self.conditions.setdefault(message.partition(), OpenConditions(self.routing)).observe(alert)
        refused = 0
        for receiver in self.receivers:
            parts, refusals = _parts(receiver, notes), []
            while parts:
                carried, body = parts.pop(0)
                try:
                    if not self._until_done(f"{receiver.name} {receiver.shown}", stop, wait, lambda: post(
                            receiver, body, self.routing.request_timeout_seconds, self._opener)):
                        return False
                except Refused as refusal:
                    if len(carried) > 1:  # refused whole (Alertmanager): each alone, so the resolves it held get in
                        parts[:0] = [part for note in carried for part in _parts(receiver, [note])]
                        continue
                    self._refused.setdefault(receiver.url, set()).add((carried[0].alert if carried else alert).alert_id)
                    refusals.append(refusal)
            if refusals:  # one dead letter per record and receiver, with its first refusal
                self.say(f"{receiver.name} {receiver.shown}: {refusals[0]}; refused, not retried: set aside on"
                         f" {self.dead_letters} ({self.topic} partition {message.partition()} offset"
                         f" {message.offset()})")
                if not self._set_aside(message, f"{REFUSED}: {receiver.name} {receiver.shown} answered {refusals[0]}",
                                       stop, wait):
                    return False
                refused += 1
        self.counts.refused += refused
        if not refused:
            self.counts.routed += 1
            self.counts.resolves += sum(1 for n in notes if n.status == "resolved")
        return True

    def _until_done(self, what: str, stop: threading.Event, wait: Callable[[float], None],
                    attempt: Callable[[], None]) -> bool:
        """`attempt` until it raises no OSError, ValueError or KafkaException, saying each failure and
        `wait`ing a pause doubling from `retry_initial_seconds` to `retry_max_seconds`; False if stopped."""
        pause = self.routing.retry_initial_seconds
        while not stop.is_set():
            try:
                attempt()
                return True
            except (OSError, ValueError, KafkaException) as exc:
                self.counts.retries += 1
                self.say(f"{what}: {exc}; again in {pause:g} s")
                wait(pause)
                pause = min(pause * 2, self.routing.retry_max_seconds)
        return False

    def _set_aside(self, message, reason: str, stop: threading.Event, wait: Callable[[float], None]) -> bool:
        """The record on the dead-letter topic with `reason`, tried until the brokers acknowledge it
        (`_until_done`); False if stopped before."""
        letter = self._dead_letter(message, reason)
        return self._until_done(f"dead letter to {self.dead_letters}", stop, wait, lambda: self._publish(letter))

    def _dead_letter(self, message, reason: str) -> DeadLetter:
        value = message.value() or b""
        cut = f" (its first {ORIGINAL_KEPT:,} bytes are kept)" if len(value) > ORIGINAL_KEPT else ""
        kind, timestamp_ms = message.timestamp()
        return DeadLetter(original=value[:ORIGINAL_KEPT], key=message.key(), topic=self.topic,
                          partition=message.partition(), offset=message.offset(), reason=reason + cut,
                          at_ms=int(time.time() * 1000),
                          headers=tuple(KafkaHeader(k, v) for k, v in message.headers() or ()),
                          timestamp_ms=None if kind == TIMESTAMP_NOT_AVAILABLE else timestamp_ms)

    def _publish(self, letter: DeadLetter) -> None:
        """`letter` on the dead-letter topic; OSError unless the brokers acknowledged it within
        `request_timeout_seconds` (its delivery report comes by then, even to a router being stopped)."""
        if self._letters is None:
            self._letters = producer(self.bootstrap, log_level=2, error_cb=lambda error: None, **{
                "message.timeout.ms": max(1, int(self.routing.request_timeout_seconds * 1000))})
        reports: list = []
        produce(self._letters, self.dead_letters, letter, lambda error, _message: reports.append(error))
        while not reports:
            self._letters.poll(0.2)
        if reports[0] is not None:
            raise OSError(f"not acknowledged: {reports[0].str()}")
