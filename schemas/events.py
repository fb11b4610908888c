"""The event contract as typed Python classes: every record the twin reads or writes.

These frozen dataclasses are the single source of truth: the Avro schemas in
`schemas/avro/` are generated from them (field docs included), and the model in `state/`,
the producers and the tests all use them. Times are event times in milliseconds since the
epoch, stamped by the emitting node's own clock (`timestamp-millis` on the wire).

Identity: `MessageRef.internal_id` is the PRIMARY's internal id of the message; the shadow
names the message by the same id (it learns it when the copy is made), so both sides of one
message meet in one place.

Routing: every event names `primary_server`, the primary it concerns (the emitter itself
for events on a primary, the primary a shadow copy belongs to for events on a shadow). It
is the Kafka key and the twin's stateful group.
"""

from __future__ import annotations

import dataclasses
import enum
import types
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar


def doc(text: str, *, logical: str | None = None, **kwargs) -> dataclasses.Field:
    """A dataclass field carrying its Avro `doc` (and logical type, for timestamps)."""
    metadata = {"doc": text} if logical is None else {"doc": text, "logicalType": logical}
    return field(metadata=metadata, **kwargs)


def slot_setters(cls: type) -> tuple[Callable[[Any, Any], None], ...] | None:
    """The slot descriptors' setters of a dataclass's fields, in field order, when storing them is
    all its generated __init__ does (None otherwise): what the compiled readers and the records'
    own __init__ store through."""
    if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.init or hasattr(cls, "__post_init__"):
        return None
    setters = []
    for f in dataclasses.fields(cls):
        slot = next((k.__dict__[f.name] for k in cls.__mro__ if f.name in k.__dict__), None)
        if not f.init or not isinstance(slot, types.MemberDescriptorType):
            return None
        setters.append(slot.__set__)
    return tuple(setters)


def init_parameters(cls) -> tuple[str, dict[str, Any]]:
    """The parameters of a dataclass's generated `__init__` as source (`a, b=_d1, *, c`, without
    `self`), and the defaults it names (`_d1`): for functions that take what the class takes."""
    positional, keywords, defaults = [], [], {}
    for i, f in enumerate(dataclasses.fields(cls)):
        parameter = f.name if f.default is dataclasses.MISSING else f"{f.name}=_d{i}"
        defaults[f"_d{i}"] = f.default
        (keywords if f.kw_only else positional).append(parameter)
    return ", ".join([*positional, *(["*", *keywords] if keywords else [])]), defaults


def stored_through_slots(cls):
    """`cls` (a frozen, slotted dataclass) with an `__init__` that stores each field through its
    slot, as the generated one does through `object.__setattr__` by name, in 60 % of the time:
    the simulator builds events by the million, the model an outcome per message. Same parameters,
    defaults and checks."""
    fields, setters = dataclasses.fields(cls), slot_setters(cls)
    if setters is None or any(f.default_factory is not dataclasses.MISSING for f in fields):
        return cls
    parameters, namespace = init_parameters(cls)
    body = []
    for i, (f, setter) in enumerate(zip(fields, setters)):
        namespace[f"_s{i}"] = setter
        body.append(f"    _s{i}(self, {f.name})")
    signature = ", ".join(["self", parameters] if parameters else ["self"])
    exec(f"def __init__({signature}):\n" + "\n".join(body or ["    pass"]) + "\n", namespace)  # noqa: S102
    init = namespace["__init__"]
    init.__qualname__, init.__doc__ = f"{cls.__qualname__}.__init__", cls.__init__.__doc__
    cls.__init__ = init
    return cls


def _record(cls=None, /, *, kw_only: bool = False):
    """A record of the contract: a frozen, slotted dataclass."""
    def decorate(cls):
        return stored_through_slots(dataclass(frozen=True, slots=True, kw_only=kw_only)(cls))

    return decorate if cls is None else decorate(cls)


class AvroEnum(str, enum.Enum):
    """An enum whose first member is the default symbol readers fall back to."""


class NodeMode(AvroEnum):
    UNKNOWN = "UNKNOWN"
    EXCHANGE_2013 = "EXCHANGE_2013"  # 2013 and later (2016, 2019): shadow in the same boundary
    EXCHANGE_2010 = "EXCHANGE_2010"  # previous hop keeps the shadow, XSHADOW/XQUERYDISCARD


class SiteLocality(AvroEnum):
    UNKNOWN = "UNKNOWN"
    LOCAL = "LOCAL"
    REMOTE = "REMOTE"


class MessageSource(AvroEnum):
    UNKNOWN = "UNKNOWN"
    OUTSIDE_BOUNDARY = "OUTSIDE_BOUNDARY"
    INSIDE_BOUNDARY = "INSIDE_BOUNDARY"
    MAILBOX_SUBMISSION = "MAILBOX_SUBMISSION"


class ShadowFailureReason(AvroEnum):
    UNKNOWN = "UNKNOWN"
    TIMEOUT = "TIMEOUT"
    NO_PEER = "NO_PEER"
    REFUSED = "REFUSED"
    NOT_SUPPORTED = "NOT_SUPPORTED"


class QueryFailureReason(AvroEnum):
    UNKNOWN = "UNKNOWN"
    TIMEOUT = "TIMEOUT"
    REFUSED = "REFUSED"
    CONNECTION_FAILED = "CONNECTION_FAILED"


class SideEffectKind(AvroEnum):
    UNKNOWN = "UNKNOWN"
    DSN = "DSN"
    NDR = "NDR"
    JOURNAL_REPORT = "JOURNAL_REPORT"


class AlertType(AvroEnum):
    UNKNOWN = "UNKNOWN"
    PRIMARY_FAILED_SHADOWS_PROMOTED = "PRIMARY_FAILED_SHADOWS_PROMOTED"
    QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED = "QUEUE_DATABASE_CHANGED_SHADOWS_PROMOTED"
    HELD_NO_ALTERNATE_ROUTE = "HELD_NO_ALTERNATE_ROUTE"
    NOT_REDUNDANT = "NOT_REDUNDANT"
    REJECTED_NO_SHADOW = "REJECTED_NO_SHADOW"
    DUPLICATE_DELIVERY_EXPECTED = "DUPLICATE_DELIVERY_EXPECTED"
    MESSAGE_AT_RISK = "MESSAGE_AT_RISK"
    MESSAGE_LOST = "MESSAGE_LOST"
    SHADOW_SERVER_UNREACHABLE = "SHADOW_SERVER_UNREACHABLE"
    DISCARD_EVENTS_DROPPED = "DISCARD_EVENTS_DROPPED"
    SHADOW_EXPIRED = "SHADOW_EXPIRED"
    LATE_EVENTS = "LATE_EVENTS"
    MESSAGE_EXPIRED = "MESSAGE_EXPIRED"
    SHADOW_IN_SAME_SITE = "SHADOW_IN_SAME_SITE"
    EVENTS_STOPPED = "EVENTS_STOPPED"
    RESTARTED_QUEUE_DATABASE_UNKNOWN = "RESTARTED_QUEUE_DATABASE_UNKNOWN"
    RESTART_QUEUE_DATABASE_SETTLED = "RESTART_QUEUE_DATABASE_SETTLED"
    EVENTS_LOST = "EVENTS_LOST"


class Severity(AvroEnum):
    UNKNOWN = "UNKNOWN"
    INFO = "INFO"
    WARNING = "WARNING"
    CRITICAL = "CRITICAL"


class CommandReason(AvroEnum):
    UNKNOWN = "UNKNOWN"
    PRIMARY_HEARTBEAT_TIMEOUT = "PRIMARY_HEARTBEAT_TIMEOUT"
    PRIMARY_QUEUE_DATABASE_CHANGED = "PRIMARY_QUEUE_DATABASE_CHANGED"
    PRIMARY_RETURNED_AS_NEW_ROUTE = "PRIMARY_RETURNED_AS_NEW_ROUTE"


@_record
class MessageRef:
    """Which message (and which fork of it) an event or output is about."""

    message_id: str = doc("Internet Message-ID header, e.g. <abc@contoso.com>")
    internal_id: str = doc("the primary server's internal id of the message; shadows use the same id")
    fork_id: str | None = doc("the fork (bifurcated copy) this concerns; null for the whole message", default=None)

    def whole(self) -> "MessageRef":
        return self if self.fork_id is None else dataclasses.replace(self, fork_id=None)


@_record
class Recipient:
    address: str = doc("SMTP address of the recipient")
    internal: bool = doc("true for a mailbox of the organisation (duplicate detection hides duplicates there)")


@_record(kw_only=True)
class Event:
    """Fields every event carries."""

    kind: ClassVar[str] = "Event"
    tracking_event_id: ClassVar[str | None] = None  # the Exchange message-tracking event id, where one exists

    event_id: str = doc("unique id of this event (producers make it unique per emitting node)")
    event_time_ms: int = doc("when it happened, by the emitting node's clock", logical="timestamp-millis")
    node: str = doc("the server that emitted the event")
    primary_server: str = doc("the primary server the event concerns: the Kafka key and the twin's group")
    message: MessageRef | None = doc("the message concerned, where there is one", default=None)


def _event(kind: str, tracking: str | None = None):
    def decorate(cls):
        cls = _record(cls, kw_only=True)
        cls.kind = kind
        cls.tracking_event_id = tracking
        EVENT_TYPES[kind] = cls
        return cls

    return decorate


EVENT_TYPES: dict[str, type[Event]] = {}


# ---- node lifecycle -------------------------------------------------------------------

@_event("NodeStarted")
class NodeStarted(Event):
    """A transport server started (or restarted) and opened its queue database."""

    dag: str | None = doc("database availability group, null when the server is in none", default=None)
    ad_site: str = doc("Active Directory site")
    boundary: str = doc("transport high-availability boundary: the DAG, else the AD site")
    mode: NodeMode = doc("which shadow-redundancy behaviour the server follows", default=NodeMode.EXCHANGE_2013)
    shadow_redundancy_enabled: bool = doc("ShadowRedundancyEnabled", default=True)
    xshadow_advertised: bool = doc("whether EHLO advertises XSHADOW (2010 mode)", default=True)
    queue_db_id: str = doc("id of the queue database it opened; a new id means an empty, new database")


@_event("NodeStopping")
class NodeStopping(Event):
    """A transport server is shutting down cleanly (a crash emits nothing)."""

    reason: str = doc("why, in words", default="")


# ---- message flow on the primary ------------------------------------------------------

@_event("MessageReceived", "RECEIVE")
class MessageReceived(Event):
    """The primary accepted a message's data (before answering 250)."""

    sender: str = doc("the sending server or client")
    source: MessageSource = doc("where the message came from relative to the boundary")
    recipients: tuple[Recipient, ...] = doc("envelope recipients")
    size_bytes: int = doc("message size")
    submitted_at_ms: int | None = doc("client submit time (duplicate detection key)", default=None,
                                      logical="timestamp-millis")
    sender_supports_shadow: bool = doc("2010 mode: the sender issued XSHADOW", default=True)


@_event("ShadowCopyRequested", "HAREDIRECT")
class ShadowCopyRequested(Event):
    """The primary opened a session to a candidate server to store a shadow copy."""

    candidate: str = doc("the server asked to keep the shadow copy")
    locality: SiteLocality = doc("candidate in the primary's AD site (LOCAL) or another (REMOTE)")
    attempt: int = doc("1-based attempt number for this message")


@_event("ShadowCopyAcknowledged")
class ShadowCopyAcknowledged(Event):
    """The candidate acknowledged the shadow copy: the message is redundantly persisted."""

    shadow_server: str = doc("the server now keeping the shadow copy")
    locality: SiteLocality = doc("LOCAL or REMOTE site", default=SiteLocality.UNKNOWN)


@_event("ShadowCopyFailed", "HAREDIRECTFAIL")
class ShadowCopyFailed(Event):
    """A shadow copy attempt failed."""

    candidate: str = doc("the server that could not take the copy; empty when there was no peer")
    locality: SiteLocality = doc("LOCAL or REMOTE site", default=SiteLocality.UNKNOWN)
    attempt: int = doc("1-based attempt number for this message")
    reason: ShadowFailureReason = doc("why the attempt failed")


@_event("AcknowledgedToSender")
class AcknowledgedToSender(Event):
    """The primary answered 250 to the sender."""

    redundant: bool = doc("whether a shadow copy existed when the 250 was sent")


@_event("RejectedToSender")
class RejectedToSender(Event):
    """The primary refused the message because no shadow copy could be made."""

    smtp_response: str = doc("the SMTP reply sent", default="451 4.4.0 Message failed to be made redundant")


@_event("SentToNextHop", "SEND")
class SentToNextHop(Event):
    """The primary transmitted (a fork of) the message to a next hop."""

    next_hop: str = doc("the next hop: a server, a mailbox database, or a domain outside")
    recipients: tuple[str, ...] = doc("the recipients of this fork")
    outside_boundary: bool = doc("the next hop is outside the high-availability boundary", default=False)


@_event("NextHopAcknowledged")
class NextHopAcknowledged(Event):
    """The next hop acknowledged (a fork of) the message."""

    next_hop: str = doc("the next hop that acknowledged")


@_event("DiscardStatusSet")
class DiscardStatusSet(Event):
    """The primary marked the message delivery complete; a discard notification awaits the shadow."""

    shadow_server: str = doc("the shadow server that will be told to discard its copy")


@_event("MovedToSafetyNet")
class MovedToSafetyNet(Event):
    """The primary moved the processed message into Safety Net."""


@_event("MessageExpired", "FAIL")
class MessageExpired(Event):
    """The message stayed queued past MessageExpirationTimeout (or expired from Safety Net)."""

    reason: str = doc("why, in words", default="")


@_event("DeliveredToMailbox", "DELIVER")
class DeliveredToMailbox(Event):
    """The message (a fork of it) was delivered to mailboxes: its final destination."""

    mailbox_server: str = doc("the mailbox server or database")
    recipients: tuple[str, ...] = doc("the recipients delivered")
    duplicate: bool = doc("duplicate detection found it delivered already (DUPLICATEDELIVER)", default=False)


@_event("SideEffectGenerated", "DSN")
class SideEffectGenerated(Event):
    """The primary generated a side-effect message (DSN, NDR, journal report) from a message.

    `message` is the new side-effect message; `parent` is the message it came from, whose
    shadow copy is released only when this one is fully processed too.
    """

    side_effect: SideEffectKind = doc("what was generated")
    parent: MessageRef = doc("the message it was generated from")


@_event("BoundaryCrossed")
class BoundaryCrossed(Event):
    """The far side outside the boundary acknowledged: tracking ends here, for this fork."""

    next_hop: str = doc("the hop outside the boundary")
    next_boundary: str | None = doc("the boundary it entered, when known", default=None)


# ---- on a shadow ----------------------------------------------------------------------

@_event("ShadowCopyStored", "HARECEIVE")
class ShadowCopyStored(Event):
    """The shadow server stored a shadow copy in its shadow queue for the primary."""

    primary_queue_db_id: str = doc("the primary's queue-database id when the copy was made")
    alternate_route: bool = doc("2010 mode: the shadow has another route to the destination", default=True)


@_event("DiscardQuerySent")
class DiscardQuerySent(Event):
    """The shadow asked the primary for discard status (XQDISCARD / XQUERYDISCARD)."""

    shadow_queue_db_id: str = doc("the shadow's own queue-database id (a change means its copies are gone)")


@_event("DiscardQueryAnswered")
class DiscardQueryAnswered(Event):
    """The primary answered a discard query."""

    primary_queue_db_id: str = doc("the primary's current queue-database id")
    discarded: tuple[MessageRef, ...] = doc("discard notifications: copies the shadow may now discard", default=())


@_event("DiscardQueryFailed")
class DiscardQueryFailed(Event):
    """A discard query (heartbeat) to the primary failed."""

    reason: QueryFailureReason = doc("why it failed")


@_event("ShadowDiscarded", "HADISCARD")
class ShadowDiscarded(Event):
    """The shadow moved its copy into Safety Net after the primary's discard notification."""


@_event("ShadowPromoted", "RESUBMIT")
class ShadowPromoted(Event):
    """The shadow server promoted its copy to a primary message on its own and resubmitted it."""

    reason: str = doc("why, in the node's words", default="")


# ---- the twin's own clock ------------------------------------------------------------

@_event("ClockTick")
class ClockTick(Event):
    """Published by the twin to keep event time moving when every node is quiet."""


# ---- added in v2 (the body union only grows at its end) ------------------------------

@_event("DeliveryDeferred", "DEFER")
class DeliveryDeferred(Event):
    """The next hop refused (a 4xx answer) or timed out: (the fork of) the message stays queued for a retry."""

    next_hop: str = doc("the next hop that refused or did not answer")
    smtp_response: str = doc("the answer, or why there was none, in words", default="")
    recipients: tuple[str, ...] = doc("the recipients of this fork (empty: all of the message's)", default=())


# ---- added in v3 ---------------------------------------------------------------------

@_event("ServerProbed")
class ServerProbed(Event):
    """An SMTP probe (EHLO, QUIT) of a transport server, answered or not, by the prober's clock.

    `node` is the probed server when it answered (its answer is a sign of its life, as a line in
    its own log is), else the prober, so that a failed probe is no activity of the server.
    `primary_server` is the probed server. The model changes nothing else for it.
    """

    server: str = doc("the transport server probed")
    answered: bool = doc("it answered EHLO with 250 within the probe's timeout")
    reply: str = doc("its EHLO answer's first line, or why there was none, in words", default="")
    via: str = doc("what showed it: probe (an EHLO of `shadowtwin probe`), handoff (a peer's SMTP session it"
                   " answered, read from the peer's message-tracking log: a SEND or DELIVER to it, or a shadow's"
                   " HADISCARD of its message) or healthprobe (a Managed Availability probe message it logged);"
                   " added in v4", default="probe")


# ---- added in v4 ---------------------------------------------------------------------

@_event("MessageLoaded", "LOAD")
class MessageLoaded(Event):
    """`node` restarted and loaded the message from its queue database at boot (message tracking
    LOAD, source BOOTLOADER). Which database it opened is not said (logs carry no queue-database
    id): the model weighs both outcomes until later events settle which (state/restart.py)."""


# ---- outputs --------------------------------------------------------------------------

@_record
class AlertMessage:
    message: MessageRef = doc("the message concerned")
    recipients: tuple[str, ...] = doc("recipients concerned (for duplicates: those who will see it)", default=())


@_record(kw_only=True)
class Alert:
    """What the twin tells people and paging systems."""

    alert_id: str = doc("stable id derived from the decision: the same decision gives the same id")
    type: AlertType = doc("what kind of alert")
    severity: Severity = doc("how urgent")
    servers: tuple[str, ...] = doc("the servers concerned")
    messages: tuple[AlertMessage, ...] = doc("the messages concerned", default=())
    reason: str = doc("what happened, in words an operator reads")
    decided_at_ms: int = doc("the event time at which the twin decided", logical="timestamp-millis")


@_record(kw_only=True)
class RedeliveryCommand:
    """An instruction to a node to resubmit a message from its copy."""

    command_id: str = doc("stable id derived from the decision; consumers drop repeats by it")
    holder: str = doc("the server holding the copy, which must resubmit it")
    primary_server: str = doc("the primary whose message this was")
    message: MessageRef = doc("the message to resubmit")
    next_hop: str | None = doc("where to send it; null means any route", default=None)
    reason: CommandReason = doc("why")
    decided_at_ms: int = doc("the event time at which the twin decided", logical="timestamp-millis")
    recipients: tuple[str, ...] = doc("the recipients still to be served by this resubmission; empty means all",
                                      default=())


@_record
class KafkaHeader:
    """One header of a Kafka record, as its producer set it."""

    key: str = doc("the header's name")
    value: bytes | None = doc("the header's bytes; null for a header without a value", default=None)


@_record(kw_only=True)
class DeadLetter:
    """A record the twin could not use, kept with its reason so that nothing is lost."""

    original: bytes = doc("the record's bytes, exactly as read")
    key: bytes | None = doc("the record's Kafka key", default=None)
    topic: str = doc("where it was read")
    partition: int = doc("Kafka partition, -1 for a file", default=-1)
    offset: int = doc("Kafka offset, or the line number in a file", default=-1)
    reason: str = doc("why it could not be used")
    at_ms: int = doc("when it was set aside (wall clock of the twin)", logical="timestamp-millis")
    headers: tuple[KafkaHeader, ...] = doc("the record's Kafka headers, in their order (v2)", default=())
    timestamp_ms: int | None = doc("the record's Kafka timestamp (when the broker appended it, on the events"
                                   " topic); null for a line of a file (v2)", default=None,
                                   logical="timestamp-millis")
