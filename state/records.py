"""The explicit state of one group: a primary server, its messages, and its shadows.

Why the group is the PRIMARY server (see also docs in state/README.md): every decision of
shadow redundancy concerns one primary and the shadows held for it (heartbeats, promotion,
queue-database changes, discard notifications), and a primary's own events and its shadows'
events about it meet here without crossing groups. Servers are few (tens), messages many
(100,000 in flight): one group per server keeps Spark's per-group cost low, and holds the
per-message state inside.

Everything here is plain data (picklable), so an engine can store it between calls.
"""

from __future__ import annotations

import enum
import heapq
from itertools import islice, takewhile
from dataclasses import dataclass, field
from typing import Iterable, Iterator
from types import MappingProxyType

from schemas.events import Event, MessageRef, NodeMode, Recipient, SiteLocality


# Most messages never get a side effect, and have no fork for a while: they share these empty,
# read-only containers (an empty dict and set cost 64 + 216 bytes) until the first is added
# (`forks_of`, `add_side_effect`).
NO_FORKS: "MappingProxyType[str, Fork]" = MappingProxyType({})
NO_SIDE_EFFECTS: frozenset[str] = frozenset()

# Recipients and next hops repeat from message to message (an organisation's mailboxes and
# servers), but every decoded event brings its own copies: the messages held share one. Each
# table is forgotten whole once it holds `SHARED_LIMIT` values: what was shared stays correct,
# only no longer shared.
_SHARED: dict = {}  # a hop's name, a tuple of addresses -> itself
_RECIPIENTS: dict[str, tuple[Recipient]] = {}  # address -> a 1-tuple of its Recipient
SHARED_LIMIT = 100_000


def shared(value: str | tuple[str, ...]):
    """The one object held for values equal to `value` (a hop's name, a tuple of addresses)."""
    found = _SHARED.get(value)
    if found is None:
        if len(_SHARED) >= SHARED_LIMIT:
            _SHARED.clear()
        found = _SHARED[value] = value
    return found


def shared_recipients(recipients: tuple[Recipient, ...]) -> tuple[Recipient, ...]:
    """Recipients equal to `recipients`, made of the ones held: one recipient, the very tuple
    (looked up by address: a Recipient's own hash is Python code, a string's is cached)."""
    table, held = _RECIPIENTS, []
    for one in recipients:
        found = table.get(one.address)
        if found is None or found[0].internal is not one.internal:
            if len(table) >= SHARED_LIMIT:
                table.clear()
            found = table[one.address] = recipients if len(recipients) == 1 else (one,)
        if len(recipients) == 1:
            return found
        held.append(found[0])
    return tuple(held)


def forget_front(memory: dict[str, int], until: int) -> None:
    """Remove the entries at the front of `memory` (in the order added) whose value is `until` or
    less, up to the first that is not."""
    front = list(islice(memory, len(list(takewhile(until.__ge__, memory.values())))))
    for key in front:
        del memory[key]


class Redundancy(enum.Enum):
    PENDING = "pending"  # a shadow copy is being made
    REDUNDANT = "redundant"  # a shadow copy exists
    NOT_REDUNDANT = "not_redundant"  # accepted without a shadow copy
    DISABLED = "disabled"  # shadow redundancy is off for this primary
    LOST = "lost"  # there was a shadow copy, but its server lost it


_REDUNDANT = Redundancy.REDUNDANT  # a global: an enum's member read through its class is slow (state/model.py)


@dataclass(slots=True)
class Fork:
    next_hop: str | None  # None: a fork known from its discard notification alone, not yet from the primary;
    # "": one that failed for good (the primary expired it): no next hop has it
    recipients: tuple[str, ...]
    done: bool = False
    notified: bool = False  # its discard notification reached the shadow: its next hop's shadow queue is empty
    waiting: tuple[str, ...] = ()  # served in part: its recipients still waiting at that next hop (no notification)
    # When it was first processed (its next hop's acknowledgement): its recipients' first copy, each fork its own
    # (None: not yet, or loaded from a snapshot before format 17)
    done_ms: int | None = None
    # Recipients it served after that, each with when (a recipient deferred there, delivered later): their first copy
    served_late: tuple[tuple[str, int], ...] = ()

    def processed(self, t: int) -> None:
        """Its next hop acknowledged it (or it failed for good, or its discard notification says so) at `t`."""
        self.done = True
        if self.done_ms is None:
            self.done_ms = t

    def served_later(self, recipients: tuple[str, ...], t: int) -> None:
        """`recipients`, added to those it served (processed already), were served at `t`."""
        if self.done_ms is not None and (late := tuple((r, t) for r in recipients if r not in self.recipients)):
            self.served_late += late


@dataclass(slots=True)
class Message:
    """One message of the primary (and its shadow copy, wherever it is)."""

    ref: MessageRef
    received_ms: int
    recipients: tuple[Recipient, ...] = ()
    sender_supports_shadow: bool = True
    redundancy: Redundancy = Redundancy.PENDING
    shadow_server: str | None = None
    remote_failures: int = 0
    local_failures: int = 0
    decided: bool = False  # the shadow-creation outcome has been reported
    forks: dict[str, Fork] = field(default_factory=lambda: NO_FORKS)  # type: ignore[assignment]
    side_effects: set[str] = NO_SIDE_EFFECTS  # type: ignore[assignment]  # internal ids of DSNs/journal reports pending
    parent: str | None = None
    primary_done_ms: int | None = None  # every fork and side effect fully processed
    shadow_alternate_route: bool = True
    at_risk: bool = False
    shadow_locality: SiteLocality = SiteLocality.UNKNOWN  # the copy's site relative to the primary's
    primary_db: str | None = None  # the primary's queue database when its shadow copy was made
    expired_ms: int | None = None  # it expired in the primary's queue (a non-delivery report) with its copy held
    stored_ms: int = 0  # its shadow's latest report of storing the copy, by the shadow's clock (0: not known)

    @property
    def shadow_held(self) -> bool:
        return self.shadow_server is not None and self.redundancy is _REDUNDANT

    def forks_of(self) -> dict[str, Fork]:
        """The forks, to add one to (the shared empty one replaced by the message's own)."""
        if self.forks is NO_FORKS:
            self.forks = {}
        return self.forks

    def add_side_effect(self, internal_id: str) -> None:
        if self.side_effects is NO_SIDE_EFFECTS:
            self.side_effects = set()
        self.side_effects.add(internal_id)


@dataclass(slots=True)
class Pair:
    """One shadow server's heartbeat bookkeeping with this primary, while it holds copies."""

    shadow: str
    last_contact_ms: int  # last successful discard query, or when the first copy was made
    last_query_ms: int  # last sign of life of the shadow towards this primary
    primary_db_seen: str | None = None
    shadow_db_id: str | None = None
    held: set[str] = field(default_factory=set)  # internal ids whose shadow copy this server holds
    pending_discards: set[str] = field(default_factory=set)  # discard notifications not yet collected
    primary_failed_ms: int | None = None  # when the twin declared the primary failed for this pair
    silent_alerted: bool = False
    awaiting_shadow: bool = False  # its promotion came due while it was silent: nothing to do until it speaks
    db_change_pending: bool = False  # the primary came back with a new database while this shadow was silent
    heartbeats: bool = False  # a discard query of this shadow was seen (else liveness is inferred: state/liveness.py)
    contact_via: str = ""  # without heartbeats, what showed the primary's life last: "" its own events, probe, handoff
    last_heartbeat_ms: int | None = None  # the shadow's last discard query seen (sent), while it held copies
    last_answered_ms: int | None = None  # its last answered discard query (a copy is contact, but no query)
    first_copy_ms: int | None = None  # when its first copy was made: ShadowMessageAutoDiscardInterval counts from it
    # until a query is answered (None: loaded from a snapshot before format 16)


@dataclass(slots=True)
class NodeFact:
    """What a group knows of any server from the facts every group is fed (state/README.md)."""

    mode: NodeMode = NodeMode.UNKNOWN
    ad_site: str | None = None
    dag: str | None = None
    queue_db_id: str | None = None
    replaced_db_id: str | None = None  # the queue database its latest NodeStarted replaced (snapshot format 15)


@dataclass(slots=True)
class Promoted:
    """A message whose shadow was promoted: kept to predict duplicates if the primary returns."""

    ref: MessageRef
    holder: str
    recipients: tuple[Recipient, ...]
    primary_db_id: str | None
    promoted_ms: int
    # The first of the two deliveries, when it was not the shadow's resubmission but the primary's own (a message, or
    # forks of it, processed before the shadow resubmitted it): per recipient, in `recipients`' order, as each fork
    # was processed (empty: the shadow's resubmission came first). Not kept, only told (`predict_duplicates`).
    first_delivered_ms: tuple[int, ...] = ()
    # The shadow said when it resubmitted (its ShadowPromoted came first): at `promoted_ms`, not up to a heartbeat
    # after.
    reported: bool = False


class DeadlineKind(enum.IntEnum):
    """What a deadline is for; the order breaks ties between deadlines at the same instant."""

    ACK_DELAY = 1
    PROMOTE = 2
    SHADOW_SILENT = 3
    AUTO_DISCARD = 4
    EXPIRE = 5
    FORGET_PROMOTED = 6
    FORGET_CLOSED = 7
    SAME_SITE_REPORT = 8
    FORGET_SEEN = 9
    SETTLE_RESTART = 10  # a restart whose queue database is unknown (state/restart.py)
    NO_SHADOW = 11  # failed attempts of unknown site: no copy unless another attempt follows
    FORGET_QUERIES = 12  # a shadow's discard queries, remembered after its pair emptied (`PrimaryState.queried_by`)


def _no_deadlines() -> list[dict[str, int]]:
    return [{} for _ in range(max(DeadlineKind) + 1)]


@dataclass(slots=True)
class Deadlines:
    """Pending deadlines: one map per kind (key -> time, the authority), and a heap to find the
    earliest fast.

    Every pending deadline has a heap entry at its time or EARLIER: a deadline moved later (a
    pair's promotion moves with every copy made) keeps its old entry, which is moved on to the
    deadline's time when it reaches the top; only a deadline moved earlier, or a new one, pushes
    an entry. Entries of cleared deadlines are dropped when they reach the top, and the heap is
    rebuilt from the maps whenever such entries outnumber the live ones."""

    by_kind: list[dict[str, int]] = field(default_factory=_no_deadlines)  # indexed by DeadlineKind
    heap: list[tuple[int, int, str]] = field(default_factory=list, compare=False)  # (time, kind as an int, key)
    rebuild_at: int = field(default=64, compare=False)  # the heap length at which to count stale entries

    def set(self, kind: DeadlineKind, key: str, at_ms: int) -> None:
        due = self.by_kind[kind]
        old = due.get(key)
        if old != at_ms:
            due[key] = at_ms
            if old is None or at_ms < old:
                heap = self.heap
                heapq.heappush(heap, (at_ms, kind, key))
                if len(heap) > self.rebuild_at:
                    self._compact()

    def get(self, kind: DeadlineKind, key: str) -> int | None:
        return self.by_kind[kind].get(key)

    def items(self) -> Iterator[tuple[DeadlineKind, str, int]]:
        """Every pending deadline: (kind, key, time)."""
        for kind, due in enumerate(self.by_kind):
            for key, at_ms in due.items():
                yield DeadlineKind(kind), key, at_ms

    def pending(self) -> bool:
        return any(self.by_kind)

    def clear(self, kind: DeadlineKind, key: str) -> None:
        due = self.by_kind[kind]
        if due.pop(key, None) is not None and not due and not any(self.by_kind):
            self.heap.clear()

    def next(self) -> int | None:
        heap, by_kind = self.heap, self.by_kind
        while heap:
            at_ms, kind, key = heap[0]
            due = by_kind[kind].get(key)
            if due == at_ms:
                return at_ms
            if due is not None and due > at_ms:  # moved later: its entry follows it
                heapq.heapreplace(heap, (due, kind, key))
            else:  # cleared, or moved earlier (it has an entry of its own)
                heapq.heappop(heap)
        return None

    def pop_before(self, now_ms: int) -> tuple[int, int, str] | None:
        """The earliest deadline strictly before `now_ms`, removed; None if there is none."""
        at_ms = self.next()
        if at_ms is None or at_ms >= now_ms:
            return None
        _, kind, key = heapq.heappop(self.heap)
        self.clear(kind, key)
        return at_ms, kind, key

    def load(self, deadlines: Iterable[tuple[int, str, int]]) -> None:
        """Set every (kind, key, time) at once (a snapshot's), into empty deadlines."""
        for kind, key, at_ms in deadlines:
            self.by_kind[kind][key] = at_ms
        self._compact(always=True)

    def _compact(self, always: bool = False) -> None:
        live = sum(map(len, self.by_kind))
        heap = self.heap
        if always or len(heap) > 2 * live:
            heap[:] = [(at_ms, kind, key) for kind, due in enumerate(self.by_kind) for key, at_ms in due.items()]
            heapq.heapify(heap)
        self.rebuild_at = len(heap) + live // 2 + 64


@dataclass(slots=True)
class PrimaryState:
    """Everything the twin keeps for one primary server."""

    primary: str
    mode: NodeMode | None = None
    queue_db_id: str | None = None
    shadow_redundancy_enabled: bool | None = None
    messages: dict[str, Message] = field(default_factory=dict)
    pairs: dict[str, Pair] = field(default_factory=dict)
    # Shadows that sent discard queries to this primary while they held nothing for it (their pair emptied then, or
    # before): shadow -> the last one. A copy it stores next starts its pair with heartbeats (nothing inferred of it:
    # state/liveness.py), measured from that query; forgotten a silence span after it (FORGET_QUERIES).
    queried_by: dict[str, int] = field(default_factory=dict)
    promoted: dict[str, Promoted] = field(default_factory=dict)
    # Messages it stopped tracking, remembered for the clock-skew allowance: an event stamped by a
    # slower clock that arrives after the message was closed must not open it again. Internal id ->
    # closing time, in the order closed (one deadline per bucket forgets the ids at the front).
    closed: dict[str, int] = field(default_factory=dict)
    # Whole messages a shadow discarded before the twin saw it hold a copy (its clock set back, hunt seed 1589), kept
    # for the clock-skew allowance as `closed`: internal id -> (that shadow, the discard's time), in the order added.
    # Its copy, when reported, is released already; another shadow's is not (its own notification releases it).
    discarded_early: dict[str, tuple[str, int]] = field(default_factory=dict)
    # Events of the primary about a message it had not received yet by its own clock (set back between the receipt and
    # them, hunt seed 8566), kept for the clock-skew allowance as `closed`: internal id -> those events, in the order
    # added. The message's MessageReceived applies them after it.
    handled_early: dict[str, list[Event]] = field(default_factory=dict)
    deadlines: Deadlines = field(default_factory=Deadlines)
    clock_ms: int = 0  # the latest event time this group has reached
    primary_seen_ms: int | None = None  # the primary's own latest event: a sign it is up
    # Facts about every server (mode, site, queue database; and when it last published), fed
    # to every group alike: see state/README.md, "Facts every group shares".
    nodes: dict[str, NodeFact] = field(default_factory=dict)
    last_seen: dict[str, int] = field(default_factory=dict)
    # Same-site shadow copies waiting to be reported together: shadow -> internal ids.
    same_site: dict[str, list[MessageRef]] = field(default_factory=dict)
    # Event ids already applied, remembered for the clock-skew allowance (a repeat changes
    # nothing): id -> bucket, and bucket -> ids, so that one deadline forgets a whole bucket (not
    # from the front as `closed`: a NodeSeen's id is kept from its liveness bucket's end, and would
    # hold back every id applied after it that long).
    seen_ids: dict[str, int] = field(default_factory=dict)
    seen_buckets: dict[int, list[str]] = field(default_factory=dict)
    feed_stopped_ms: int | None = None  # the last event time of a whole-topology silence already reported
    # The latest failed discard query to the primary since it last answered one: had it restarted since,
    # it came back after that.
    unreachable_ms: int | None = None
    # The event time of the primary's latest NodeStarted, whose queue database (`nodes[primary]`) is its own
    # word: a shadow's answer naming another one within the clock-skew allowance was given before it.
    primary_started_ms: int | None = None
    # The queue database that NodeStarted, or a shadow's report since (`db_reported_ms`), replaced: the primary does
    # not come back to it, so an answer naming it within the clock-skew allowance is stale, whatever query failed since.
    replaced_db_id: str | None = None
    # When a shadow's report (an answer, a stored copy) named another queue database than the twin knew the primary by,
    # a restart the feed did not show (snapshot format 18): a report naming the one it replaced less than the
    # clock-skew allowance after was given before that restart.
    db_reported_ms: int | None = None
    dag_spans_sites: bool = False  # the primary's DAG has members in another site (derived from `nodes`)

    def nodes_span_sites(self) -> bool:
        mine = self.nodes.get(self.primary)
        return mine is not None and mine.dag is not None and any(
            f.dag == mine.dag and f.ad_site != mine.ad_site for f in self.nodes.values())

    def holds_nothing(self) -> bool:
        """No message, copy, heartbeat pair, promoted record, memory or deadline is left (facts
        about servers are not about messages and stay)."""
        return not (self.messages or self.pairs or self.queried_by or self.promoted or self.closed
                    or self.discarded_early or self.handled_early or self.deadlines.pending() or self.same_site
                    or self.seen_ids)
