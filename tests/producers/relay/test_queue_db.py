"""The queue database: ids across restarts and wipes, primary queue, discard status, shadow queue."""

import contextlib
import dataclasses
import sqlite3

from producers.relay.headers import received
from producers.relay.queue_db import Counts, QueueDB, StoredMessage, read_counts, wipe

DAYS_2 = 2 * 86_400_000


def message(internal_id: str, primary: str = "ex01", **kw) -> StoredMessage:
    return StoredMessage(internal_id, f"<{internal_id}@x>", "a@fabrikam.example", ("u@contoso.com",), b"body",
                         1_000, primary, **kw)


def test_the_id_survives_a_restart_and_a_wipe_gives_a_new_one(tmp_path):
    path = tmp_path / "ex01.sqlite"
    db = QueueDB(path, "ex01")
    first_id, m1 = db.queue_db_id, db.new_internal_id()
    db.enqueue(message(m1), 0, 0)
    db.close()
    db = QueueDB(path, "ex01")
    assert db.queue_db_id == first_id and len(db.due(10)) == 1, "same database after a restart"
    m2 = db.new_internal_id()
    db.close()
    wipe(path)
    db = QueueDB(path, "ex01")
    assert db.queue_db_id != first_id and db.due(10) == [], "a wiped database is new and empty"
    m3 = db.new_internal_id()
    assert len({m1, m2, m3}) == 3 and m3.startswith(f"ex01.{db.queue_db_id}.")


def test_delivery_sets_discard_status_for_the_shadow_once(tmp_path):
    db = QueueDB(tmp_path / "p.sqlite", "ex01")
    db.enqueue(message("ex01.a.1", shadow_server="ex02"), 0, 5)
    db.enqueue(message("ex01.a.2"), 0, 50)
    assert [m.internal_id for m in db.due(10)] == ["ex01.a.1"], "only what is due"
    db.delivered(db.due(10)[0], 20)
    assert db.take_discards("ex03", 30, DAYS_2) == []
    assert db.take_discards("ex02", 30, DAYS_2) == ["ex01.a.1"]
    assert db.take_discards("ex02", 30, DAYS_2) == [], "handed over once"
    db.retry_later("ex01.a.2", 100)
    assert db.due(60) == [] and len(db.due(100)) == 1
    assert db.expire_discards(10**9, DAYS_2) == 0
    counts = db.counts()
    assert (counts.queued, counts.safety_net) == (1, 1)


def test_shadow_copies_are_discarded_or_promoted_never_both(tmp_path):
    db = QueueDB(tmp_path / "s.sqlite", "ex02")
    for i in (1, 2, 3):
        db.store_shadow(message(f"ex01.a.{i}", primary_qdb="a"), 100 * i)
    assert db.shadow_primaries() == {"ex01": 300}, "storing a copy is a contact with the primary"
    gone = db.discard_shadows("ex01", ["ex01.a.1", "ex01.a.9"], 400)
    assert [m.internal_id for m in gone] == ["ex01.a.1"]
    moved = db.promote("ex01", ["ex01.a.1", "ex01.a.2"], 500)
    assert [m.internal_id for m in moved] == ["ex01.a.2"], "a discarded copy cannot be promoted"
    due = db.due(500)
    assert [(m.internal_id, m.resubmitted, m.primary, m.shadow_server) for m in due] == [("ex01.a.2", True, "ex01", None)]
    assert [m.internal_id for m in db.shadows("ex01")] == ["ex01.a.3"]
    db.delivered(due[0], 600)
    assert db.take_discards("ex02", 30, DAYS_2) == [], "a resubmitted message has no shadow to notify"
    assert db.command_seen("c1", 1) is False and db.command_seen("c1", 2) is True
    db.close()
    qdb, counts = read_counts(tmp_path / "s.sqlite")
    assert qdb and (counts.queued, counts.shadows, counts.safety_net) == (0, 1, 2)
    assert read_counts(tmp_path / "missing.sqlite") is None


def test_a_report_holds_the_message_it_is_about_and_a_database_from_before_reports_opens(tmp_path):
    import sqlite3

    from producers.relay.queue_db import Parent

    path = tmp_path / "ex01.sqlite"
    db = QueueDB(path, "ex01")
    db.enqueue(message("ex01.a.1", shadow_server="ex02"), 0, 5)
    db.close()
    old = sqlite3.connect(path)
    old.execute("ALTER TABLE primary_queue DROP COLUMN parent")  # as the nodes wrote it before reports
    old.commit()
    old.close()
    db = QueueDB(path, "ex01")
    [queued] = db.due(10)
    db.delivered(queued, 10, release=False)
    db.enqueue(message("ex01.a.2", parent=Parent("ex01.a.1", "<ex01.a.1@x>", "ex02")), 10, 10)
    assert db.waits_for_reports("ex01.a.1") and db.take_discards("ex02", 30, DAYS_2) == []
    [report] = db.due(10)
    assert report.parent == Parent("ex01.a.1", "<ex01.a.1@x>", "ex02")
    db.delivered(report, 20)
    assert not db.waits_for_reports("ex01.a.1") and db.in_safety_net("ex01.a.1")
    db.release(report.parent, 20)
    assert db.take_discards("ex02", 30, DAYS_2) == ["ex01.a.1"]


def test_a_message_remembers_that_an_earlier_attempt_served_some_recipients_across_a_restart(tmp_path):
    """Safety Net holds what a next hop took: a message whose first attempt delivered some recipients and
    whose last refused the rest for good goes there, one that no attempt delivered does not; the remaining
    recipients alone could not tell them apart. A database from before the column opens."""
    path = tmp_path / "ex01.sqlite"
    db = QueueDB(path, "ex01")
    db.close()
    old = sqlite3.connect(path)
    old.execute("ALTER TABLE primary_queue DROP COLUMN served")  # as the nodes wrote it before
    old.commit()
    old.close()
    db = QueueDB(path, "ex01")
    for internal_id in ("ex01.a.1", "ex01.a.2"):
        db.enqueue(message(internal_id), 0, 0)
    db.still_for("ex01.a.1", ("u@contoso.com",), 10, served=True)
    db.still_for("ex01.a.2", ("u@contoso.com",), 10, served=False)
    db.close()
    db = QueueDB(path, "ex01")
    db.still_for("ex01.a.1", ("u@contoso.com",), 20, served=False)
    assert {m.internal_id: m.served for m in db.due(20)} == {"ex01.a.1": True, "ex01.a.2": False}


def test_discard_notifications_go_when_their_shadow_has_not_queried_for_the_auto_discard_interval(tmp_path):
    """003: "if the shadow server doesn't query the primary server for the duration specified in this parameter,
    the primary server deletes the queued discard events": counted from the shadow's last query (none yet: from
    the first copy it holds), not from each notification. With 60: a query at 2, a delivery at 50, gone at 62."""
    db = QueueDB(tmp_path / "p.sqlite", "ex01")
    db.enqueue(message("ex01.a.1", shadow_server="ex02"), 0, 0)
    db.enqueue(message("ex01.a.2", shadow_server="ex02"), 1, 0)
    assert db.take_discards("ex02", 2, 60) == []
    [first, second] = db.due(50)
    db.delivered(first, 50)
    assert db.expire_discards(61, 60) == 0, "the shadow queried at 2: kept until 62"
    assert db.take_discards("ex02", 61, 60) == ["ex01.a.1"], "collected at 61"
    db.delivered(second, 100)
    assert db.expire_discards(120, 60) == 0, "queried at 61: kept until 121, though set at 100"
    assert db.expire_discards(121, 60) == 1, "not queried since 61: deleted at 121"
    assert db.take_discards("ex02", 122, 60) == [], "deleted, not handed over"


def test_a_shadow_that_never_queried_counts_from_its_first_copy_and_a_query_too_late_collects_nothing(tmp_path):
    db = QueueDB(tmp_path / "p.sqlite", "ex01")
    db.enqueue(message("ex01.a.1", shadow_server="ex02"), 10, 0)
    db.enqueue(message("ex01.a.2", shadow_server="ex02"), 40, 0)
    for m in db.due(50):
        db.delivered(m, 50)
    assert db.take_discards("ex02", 70, 60) == [], "no query since the first copy at 10: deleted at 70"
    db.enqueue(message("ex01.a.3", shadow_server="ex02"), 200, 0)
    db.delivered(db.due(200)[0], 210)
    assert db.take_discards("ex02", 259, 60) == ["ex01.a.3"], \
        "none held since the query at 70: counted from the new copy at 200"


def test_a_shadow_copy_no_notification_released_expires_and_safety_net_keeps_its_hold_time(tmp_path):
    """SafetyNetHoldTime 10, MessageExpirationTimeout 5: the copy stored at 100 that no discard notification
    released goes at 115, as the twin's SHADOW_EXPIRED says (before, it stayed for good, and a later
    failure of its primary had it resubmitted); what Safety Net took at 120 goes at 130."""
    db = QueueDB(tmp_path / "s.sqlite", "ex02")
    db.store_shadow(message("ex01.a.1", primary_qdb="a"), 100)
    db.store_shadow(message("ex01.a.2", primary_qdb="a"), 110)
    assert db.expire(114, 10, 5) == (0, 0)
    assert db.expire(115, 10, 5) == (1, 0)
    assert [m.internal_id for m in db.shadows("ex01")] == ["ex01.a.2"]
    db.discard_shadows("ex01", ["ex01.a.2"], 120)
    assert db.counts().safety_net == 1
    assert db.expire(129, 10, 5) == (0, 0) and db.expire(130, 10, 5) == (0, 1)
    assert db.counts() == Counts(0, 0, 0, 0) and db.shadow_primaries() == {}, "nothing left behind"


def test_a_redelivery_command_done_is_forgotten_once_any_copy_it_named_has_expired(tmp_path):
    """The commands done were kept for good: a node's queue database grew by one row per command, for ever.
    A command done at 100 is remembered (a repeat does nothing) until every copy it could name has gone."""
    db = QueueDB(tmp_path / "s.sqlite", "ex02")
    assert db.command_seen("c1", 100) is False
    db.expire(114, 10, 5)
    assert db.command_seen("c1", 114) is True
    db.expire(115, 10, 5)
    with contextlib.closing(sqlite3.connect(tmp_path / "s.sqlite")) as read:
        assert read.execute("SELECT count(*) FROM commands_done").fetchone()[0] == 0


def test_a_promoted_copy_is_received_when_it_is_promoted(tmp_path):
    """The shadow "promotes the shadow messages as primary messages" (003): a receipt of its own, which
    MessageExpirationTimeout ("how long a message can remain in a queue before it expires") counts from,
    as the simulator has it. The copy, held since the primary received it 10 s before, is not counted from
    that receipt (its Received line), else one promoted within SafetyNetHoldTime + MessageExpirationTimeout
    but past the timeout would expire at once."""
    db = QueueDB(tmp_path / "s.sqlite", "ex02")
    line = received("client", "192.0.2.1:25", "ex01.contoso.com", "ESMTP", "ex01.a.1", ("u@contoso.com",), 0)
    db.store_shadow(dataclasses.replace(message("ex01.a.1", primary_qdb="a"), content=line + b"\r\nbody"), 100)
    db.promote("ex01", ["ex01.a.1"], 10_000)
    assert db.received_before(10_000) == [] and [m.internal_id for m in db.received_before(10_001)] == ["ex01.a.1"]
