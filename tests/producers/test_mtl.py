"""Exchange message-tracking logs: the format, the mapping to events, and following files as they grow."""

import os
import threading
import time
from pathlib import Path

import pytest

from producers.log_tail import LogTail
from producers.mtl_events import MtlMapper, Skip, server
from producers.mtl_ingest import (IngestCounts, NotATrackingLog, ingest, line_id, mailbox_domain_outside,
                                  open_logs)
from producers.mtl_log import BadLine, MtlReader, Row, parse_time
from schemas import events as ev
from schemas.codec import encode

DATA = Path(__file__).parent / "data"
EX01 = DATA / "EX01" / "MSGTRK20261122-1.LOG"
EX02 = DATA / "EX02" / "MSGTRK20261122-1.LOG"
GARBLED = {16: "10 fields where the header names 27",
           20: "date-time '2026-11-31T02:00:05.500Z' is not a valid ISO-8601 time",
           24: "not a CSV record (unexpected end of data; an unterminated quote?)"}


class ListSink:
    def __init__(self):
        self.events, self.dead_letters = [], []

    def event(self, event, set_aside=None):
        self.events.append(event)

    def dead(self, letter):
        self.dead_letters.append(letter)


def run(paths, **kwargs) -> tuple[ListSink, IngestCounts]:
    sink = ListSink()
    return sink, ingest([str(p) for p in paths], sink, **kwargs)


def rows(path: Path) -> dict[int, Row | BadLine]:
    reader = MtlReader()
    lines = path.read_bytes().split(b"\n")
    return {n: item for n, raw in enumerate(lines, start=1) if (item := reader.line(raw)) is not None}


def test_the_reader_takes_fields_from_the_header_and_unquotes_values():
    read = rows(EX01)
    first = read[6]
    assert isinstance(first, Row)
    assert first.get("event-id") == "RECEIVE" and first.get("server-hostname") == "EX01"
    assert first.values("recipient-address") == ("ann@contoso.com", "bob@contoso.com")
    assert first.get("message-subject") == 'Quarterly report, "final" draft'
    assert first.time_ms == parse_time("2026-11-22T02:00:00.100Z") == 1795312800100
    assert {n: item.reason for n, item in read.items() if isinstance(item, BadLine)} == GARBLED


def test_a_record_before_any_fields_header_and_bad_bytes_are_bad_lines():
    reader = MtlReader()
    assert reader.line(b"2026-11-22T02:00:00Z,x") == BadLine("no #Fields: header line (or Export-Csv header) before this record")
    assert reader.line(b"#Fields: date-time,event-id\r\n") is None
    assert isinstance(reader.line(b"2026-11-22T02:00:00Z,RECEIVE"), Row)
    assert reader.line(b"2026-11-22T02:00:00Z,\xff").reason.startswith("not UTF-8 text")
    reader.reset()
    assert isinstance(reader.line(b"2026-11-22T02:00:00Z,RECEIVE"), BadLine)


def test_a_stop_ends_the_reading_at_once_and_says_how_much_was_left_unread():
    """Before: Ctrl-C in a one-shot ingest was answered only once every file had been read to its end."""
    stop = threading.Event()

    class StoppedAtTheFirstEvent(ListSink):
        def event(self, event, set_aside=None):
            super().event(event)
            stop.set()

    sink, whole = StoppedAtTheFirstEvent(), run([EX01, EX02])[1]
    counts = ingest([str(EX01), str(EX02)], sink, stop=stop)
    assert counts.lines < whole.lines and len(sink.events) < sum(whole.events.values()), "not the files' events"
    assert set(counts.unread) == {str(EX01), str(EX02)}
    assert 0 < sum(counts.unread.values()) < EX01.stat().st_size + EX02.stat().st_size
    assert counts.describe().splitlines()[-1] == (f"interrupted: {sum(counts.unread.values()):,} bytes in 2 of the 2"
                                                  " files were not read")
    assert run([EX01, EX02])[1].unread is None, "nothing said of a run read to its end"


def test_the_sample_logs_map_to_the_expected_events_in_time_order_across_files():
    sink, counts = run([EX01, EX02])
    kinds = [(e.kind, e.node, e.primary_server, e.message.internal_id, e.message.fork_id) for e in sink.events
             if e.message is not None]
    # EX01's DELIVER to EX03 (logged by EX03) is EX03's sign of life, once in that minute (its SEND to EX03 too);
    # EX02's HADISCARD, EX01's answer to its discard query, is EX01's.
    assert [(e.node, e.primary_server, e.via, e.reply) for e in sink.events if e.kind == "ServerProbed"] == [
        ("ex03", "ex03", "handoff", "250 to ex01's DELIVER of <m1@fabrikam.com> (message tracking)"),
        ("ex01", "ex01", "handoff", "250 to ex02's discard query (HADISCARD) of <m1@fabrikam.com> (message tracking)")]
    assert kinds[:7] == [
        ("MessageReceived", "ex01", "ex01", "9001", None),
        ("ShadowCopyStored", "ex02", "ex01", "9001", None),  # EX02's clock: before EX01's HAREDIRECT
        ("ShadowCopyRequested", "ex01", "ex01", "9001", None),
        ("ShadowCopyAcknowledged", "ex01", "ex01", "9001", None),
        ("SentToNextHop", "ex01", "ex01", "9001", None),
        ("NextHopAcknowledged", "ex01", "ex01", "9001", None),
        ("DeliveredToMailbox", "ex01", "ex01", "9001", None),
    ]
    # In time order, but a line that names a message its primary has not named yet waits for it
    # (EX02's HARECEIVE above), or for the join window (the DUPLICATEDELIVER, at the end).
    times = [e.event_time_ms for e in sink.events]
    assert times[:-1] == sorted(times[:-1]) and sink.events[-1].kind == "DeliveredToMailbox"
    assert counts.events == {"MessageReceived": 4, "ShadowCopyRequested": 4, "ShadowCopyAcknowledged": 4,
                             "ShadowCopyFailed": 1, "ShadowCopyStored": 4, "SentToNextHop": 5,
                             "NextHopAcknowledged": 4, "DeliveredToMailbox": 2, "MessageExpired": 1,
                             "SideEffectGenerated": 1, "ShadowDiscarded": 2, "ShadowPromoted": 1,
                             "DeliveryDeferred": 2, "ServerProbed": 2}  # one DEFER, and the FAIL's failed fork
    assert counts.skipped == {"event-id AGENTINFO: an agent's note about the message, not a hand-off": 1,
                              "RESUBMIT from SAFETYNET (Safety Net): not a promotion": 1}
    assert counts.lines == 31 and counts.dead_letters == 3 and counts.unjoined == 1


def test_each_event_id_becomes_its_contract_event():
    events = run([EX01, EX02])[0].events
    by_kind = {}
    for e in events:
        by_kind.setdefault(e.kind, []).append(e)
    received = by_kind["MessageReceived"]
    assert received[0].source is ev.MessageSource.OUTSIDE_BOUNDARY and received[0].size_bytes == 48211
    assert received[1].source is ev.MessageSource.MAILBOX_SUBMISSION
    failed = by_kind["ShadowCopyFailed"][0]
    assert (failed.candidate, failed.attempt, failed.reason) == ("ex02", 1, ev.ShadowFailureReason.TIMEOUT)
    assert [r.attempt for r in by_kind["ShadowCopyRequested"]] == [1, 2, 1, 1]
    transfer, outside, fork_send = by_kind["SentToNextHop"][1:4]
    assert transfer.message.fork_id == fork_send.message.fork_id == "fork-9003"
    assert transfer.message.internal_id == fork_send.message.internal_id == "9002"
    assert transfer.recipients == ("erin@contoso.com",) and fork_send.next_hop == "ex03.contoso.com"
    assert outside.outside_boundary and not fork_send.outside_boundary
    delivered, duplicate = by_kind["DeliveredToMailbox"]
    assert (delivered.mailbox_server, delivered.duplicate, delivered.primary_server) == ("ex03", False, "ex01")
    assert duplicate.duplicate and duplicate.message.internal_id == "nmid:a1b2c3d4-0004-4a5b-8c9d-000000000004"
    dsn = by_kind["SideEffectGenerated"][0]
    assert dsn.side_effect is ev.SideEffectKind.NDR and dsn.message.internal_id == "9006"
    assert dsn.parent == ev.MessageRef("<m3@fabrikam.com>", "9004")
    # A 550 5.1.1 FAIL is about its recipient: a fork of its own failed for good, not the message expired.
    failed_fork, deferred = by_kind["DeliveryDeferred"][1], by_kind["DeliveryDeferred"][0]
    expired = by_kind["MessageExpired"][0]
    assert expired.message.fork_id == failed_fork.message.fork_id and expired.message.fork_id.startswith("failed-")
    assert failed_fork.recipients == ("gina@contoso.com",)
    assert expired.reason == "delivery failed for good (FAIL) for gina@contoso.com: 550 5.1.1 RESOLVER.ADR.RecipNotFound"
    assert (deferred.node, deferred.primary_server, deferred.next_hop, deferred.recipients) == (
        "ex01", "ex01", "", ("erin@contoso.com",))
    assert deferred.smtp_response == "451 4.4.0 Primary target IP address responded with 421"
    assert all(s.primary_queue_db_id == "" for s in by_kind["ShadowCopyStored"])
    # The second HADISCARD names no primary: it is learned from the shadow's HARECEIVE.
    assert [(d.node, d.primary_server, d.message.internal_id) for d in by_kind["ShadowDiscarded"]] == [
        ("ex02", "ex01", "9001"), ("ex02", "ex01", "9004")]
    promoted = by_kind["ShadowPromoted"][0]
    assert (promoted.node, promoted.primary_server, promoted.message.internal_id) == ("ex02", "ex01", "9008")


def test_garbled_lines_become_dead_letters_with_file_line_and_reason():
    sink, _ = run([EX01, EX02])
    lines = EX01.read_bytes().split(b"\r\n")
    assert [(d.topic, d.partition, d.offset, d.reason) for d in sink.dead_letters] == [
        (str(EX01), -1, n, reason) for n, reason in GARBLED.items()]
    assert [d.original for d in sink.dead_letters] == [lines[n - 1] for n in GARBLED]


@pytest.mark.parametrize("size", ["99999999999999999999", "²", "٣"])
def test_a_size_no_event_can_carry_is_a_dead_letter_and_the_lines_after_it_are_ingested(tmp_path, size):
    """A total-bytes beyond a 64-bit long made an event the producer refused, and a digit that is not
    ASCII (str.isdigit takes '²') one int() refused: either ended the ingester (the --follow
    service too) with a traceback at that line."""
    lines = EX01.read_bytes().split(b"\r\n")
    at = next(n for n, line in enumerate(lines, start=1) if b",48211," in line)
    log = tmp_path / EX01.name
    log.write_bytes(b"\r\n".join(line.replace(b",48211,", f",{size},".encode()) if n == at else line
                                  for n, line in enumerate(lines, start=1)))
    sink, counts = run([log])
    letter = next(d for d in sink.dead_letters if d.offset == at)
    assert letter.reason == f"total-bytes {size!r} is not a whole number from 0 to 2^63 - 1"
    assert all(encode(e) for e in sink.events)
    assert counts.dead_letters == len(GARBLED) + 1 and max(d.offset for d in sink.dead_letters) > at


def test_event_ids_are_the_same_when_the_lines_are_ingested_again_and_unique():
    first, again = run([EX01, EX02])[0].events, run([EX02, EX01])[0].events
    assert [e.event_id for e in first] == [e.event_id for e in again]
    assert len({e.event_id for e in first}) == len(first)
    assert first[0].event_id == line_id(EX01.read_bytes().split(b"\r\n")[5]) + "-0"


def test_without_its_primarys_lines_a_shadow_line_is_unjoined_and_lines_lacking_a_host_are_dead():
    sink, counts = run([EX02])
    assert sink.events[0].message.internal_id == "nmid:a1b2c3d4-0001-4a5b-8c9d-000000000001"
    assert counts.unjoined == 8  # every line of EX02 names a message first seen on EX01
    mapper = MtlMapper()
    row = Row({"event-id": "HADISCARD", "server-hostname": "EX02", "network-message-id": "n1"}, 0)
    try:
        mapper.map(row, "x")
    except ValueError as exc:
        assert "client-hostname is empty" in str(exc)
    else:
        raise AssertionError("a HADISCARD naming no primary must not map")
    assert mapper.map(Row({"event-id": "EXPAND"}, 0), "x") == Skip(
        "event-id EXPAND: a group expanded: recipients, not copies")
    assert mapper.map(Row({"event-id": "NOSUCH"}, 0), "x") == Skip("event-id NOSUCH is not one the twin uses")
    assert server("EX01.contoso.com") == "ex01" and server("10.0.0.1") == "10.0.0.1"


def test_recipients_of_internal_domains_are_internal():
    events = run([EX01], internal_domains=frozenset({"contoso.com"}))[0].events
    received = [e for e in events if isinstance(e, ev.MessageReceived)][1]
    assert [(r.address, r.internal) for r in received.recipients] == [
        ("dave@fabrikam.com", False), ("erin@contoso.com", True)]


def test_the_summary_names_a_domain_delivered_to_mailboxes_that_no_internal_domain_names():
    """Before, `ingest exchange-mtl` without --internal-domain said nothing: every recipient counted as outside the
    organisation, so the twin named all of them in DUPLICATE_DELIVERY_EXPECTED (simulate --format exchange-mtl's
    logs: 154 messages 'seen by people', the truth 26). The DELIVER lines show which domains are mailboxes'."""
    note = ("  contoso.com: its recipients were delivered to mailboxes (DELIVER), but no --internal-domain names it: the"
            " twin takes them for recipients outside the organisation, whose duplicates no duplicate detection hides"
            " (add --internal-domain contoso.com)")
    assert run([EX01, EX02])[1].describe().splitlines()[-1] == note
    assert note not in run([EX01, EX02], internal_domains=frozenset({"Contoso.com"}))[1].describe()


def test_following_says_a_domain_delivered_to_mailboxes_that_no_internal_domain_names_at_once_and_once():
    """Before, `ingest --follow` (a service) named such a domain only in its summary, when stopped: days later."""
    said, stop, result = [], threading.Event(), {}
    thread = threading.Thread(target=lambda: result.update(counts=ingest(
        [str(EX01), str(EX02)], ListSink(), follow=True, stop=stop, poll_seconds=0.05, say=said.append)))
    thread.start()
    try:
        assert wait_for(lambda: said), "said while following"
        time.sleep(0.3)  # more rounds of polling
    finally:
        stop.set()
        thread.join(10)
    assert said == [mailbox_domain_outside("contoso.com")]
    assert "contoso.com" not in result["counts"].describe(), "not again in the summary"


def follow(paths, stop):
    sink = ListSink()
    result = {}
    thread = threading.Thread(target=lambda: result.update(counts=ingest(
        [str(p) for p in paths], sink, follow=True, stop=stop, poll_seconds=0.05)))
    thread.start()
    return sink, thread, result


def wait_for(condition, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def test_follow_reads_appended_lines_truncation_replacement_and_rolled_over_files(tmp_path):
    head, body = EX01.read_bytes().split(b"\r\n")[:5], EX01.read_bytes().split(b"\r\n")[5:]
    log = tmp_path / "MSGTRK20261122-1.LOG"
    log.write_bytes(b"\r\n".join(head + body[:1]) + b"\r\n")
    stop = threading.Event()
    sink, thread, result = follow([log], stop)
    try:
        assert wait_for(lambda: len(sink.events) == 1)
        with open(log, "ab") as out:  # a line written in two parts: nothing until its newline
            out.write(body[1][:30])
            out.flush()
            time.sleep(0.3)
            assert len(sink.events) == 1
            out.write(body[1][30:] + b"\r\n")
        assert wait_for(lambda: len(sink.events) == 3)
        assert sink.events[2].kind == "ShadowCopyAcknowledged"
        rolled = tmp_path / "MSGTRK20261122-2.LOG"  # roll-over: a new file with the next number
        rolled.write_bytes(b"\r\n".join(head + body[3:4]) + b"\r\n")
        assert wait_for(lambda: len(sink.events) == 5)
        (tmp_path / "other.LOG").write_bytes(b"\r\n".join(head + body[3:4]) + b"\r\n")  # not a roll-over name
        log.write_bytes(b"\r\n".join(head + body[4:5]) + b"\r\n")  # truncated and rewritten in place
        assert wait_for(lambda: len(sink.events) == 6)
        assert sink.events[5].kind == "MessageReceived" and sink.events[5].message.internal_id == "9002"
        replacement = tmp_path / "new.tmp"
        replacement.write_bytes(b"\r\n".join(head + [body[10]]) + b"\r\n")  # a bad line, in a new file
        replacement.replace(log)
        assert wait_for(lambda: len(sink.dead_letters) == 1)
        assert (sink.dead_letters[0].topic, sink.dead_letters[0].offset) == (str(log), 6)
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()
    assert len(sink.events) == 6 and result["counts"].lines == 5


def test_follow_of_a_glob_across_server_folders_reads_each_servers_next_hour_and_a_new_servers_log(tmp_path):
    """`ingest 'logs/*/MSGTRK*.LOG' --follow` (a folder per server, as README's ingest of simulated logs): the files
    there at the start were read, then nothing: at the hour Exchange starts a new file, and none was picked up."""
    head, body = EX01.read_bytes().split(b"\r\n")[:5], EX01.read_bytes().split(b"\r\n")[5:]
    for server in ("EX01", "EX02"):
        (tmp_path / server).mkdir()
    (tmp_path / "EX01" / "MSGTRK2026112202-1.LOG").write_bytes(b"\r\n".join(head + body[:1]) + b"\r\n")
    stop = threading.Event()
    sink, thread, _ = follow([tmp_path / "*" / "MSGTRK*.LOG"], stop)
    try:
        assert wait_for(lambda: len(sink.events) == 1)
        (tmp_path / "EX01" / "MSGTRK2026112203-1.LOG").write_bytes(b"\r\n".join(head + body[3:4]) + b"\r\n")
        assert wait_for(lambda: len(sink.events) == 3), "the server's next hour"
        (tmp_path / "EX03").mkdir()
        (tmp_path / "EX03" / "MSGTRK2026112203-1.LOG").write_bytes(b"\r\n".join(head + body[4:5]) + b"\r\n")
        assert wait_for(lambda: len(sink.events) == 4), "a server whose folder came later"
    finally:
        stop.set()
        thread.join(10)
    assert [(e.kind, e.message.internal_id) for e in sink.events] == [
        ("MessageReceived", "9001"), ("SentToNextHop", "9001"), ("NextHopAcknowledged", "9001"),
        ("MessageReceived", "9002")]


def test_follow_reads_again_a_file_rewritten_in_place_longer_than_where_it_was_left(tmp_path):
    lines = [line for line in EX01.read_bytes().split(b"\r\n") if line]
    head, body = lines[:5], lines[5:]
    log = tmp_path / "MSGTRK20261122-1.LOG"
    log.write_bytes(b"\r\n".join(head + body[:2]) + b"\r\n")
    rewritten = b"\r\n".join([head[0], head[1], head[2], b"#Date: 2026-11-22T03:00:00.000Z", head[4]]
                             + body[4:9]) + b"\r\n"
    alone = tmp_path / "alone" / log.name
    alone.parent.mkdir()
    alone.write_bytes(rewritten)
    expected = [event.event_id for event in run([alone])[0].events]
    stop = threading.Event()
    sink, thread, result = follow([log], stop)
    try:
        assert wait_for(lambda: len(sink.events) == 3)
        with open(log, "r+b") as out:  # never shorter than where the tail was: only its first bytes tell
            out.write(rewritten)
        assert wait_for(lambda: len(sink.events) == 3 + len(expected))
        time.sleep(0.3)
    finally:
        stop.set()
        thread.join(10)
    assert sink.dead_letters == []
    assert [event.event_id for event in sink.events[3:]] == expected
    assert result["counts"].lines == 2 + 5


def test_a_header_comment_with_bytes_that_are_not_utf8_does_not_refuse_the_file(tmp_path):
    damaged = tmp_path / "EX01" / EX01.name
    damaged.parent.mkdir()
    damaged.write_bytes(EX01.read_bytes().replace(b"#Software: Microsoft Exchange Server",
                                                  b"#Software: Microsoft\xe9 Exchange\xff Server"))
    sink, counts = run([damaged])
    expected, expected_counts = run([EX01])
    assert [e.event_id for e in sink.events] == [e.event_id for e in expected.events]
    assert counts.dead_letters == expected_counts.dead_letters == len(GARBLED)


def test_a_folder_named_like_a_log_in_the_folder_ingested_is_passed_over(tmp_path):
    """Before: `ingest exchange-mtl logs` with a subfolder `logs/MSGTRK20261121-1.LOG` (an archive, say) was refused,
    'logs/MSGTRK20261121-1.LOG: Is a directory', exit 2, and the logs beside it were not read."""
    (tmp_path / "MSGTRK20261121-1.LOG").mkdir()
    (tmp_path / "MSGTRK20261122-1.LOG").write_bytes(EX01.read_bytes())
    sink = ListSink()
    counts = ingest([str(tmp_path)], sink)
    assert counts.lines > 0 and len(sink.events) == len(run([EX01])[0].events)


def test_the_summary_names_the_first_dead_letter_where_and_why():
    """Before, the summary said '3 dead letters' only: why took `dead-letters tail`."""
    summary = run([EX01])[1].describe().splitlines()
    line, reason = next(iter(GARBLED.items()))
    assert summary[1] == f"  first dead letter: {EX01} line {line}: {reason} (all: shadowtwin dead-letters tail)"


def test_a_file_without_a_single_line_end_that_is_no_log_is_refused_as_one(tmp_path):
    """A binary file named like a log, with no newline byte: its one line is no line the server is still writing
    (which is left for a later run to read whole); before that was judged, '0 lines: 0 events', exit 0."""
    core = tmp_path / "MSGTRK20261122-9.LOG"
    core.write_bytes(bytes(range(128, 256)) * 8)
    with pytest.raises(NotATrackingLog, match="before any #Fields: line, a line is not UTF-8 text"):
        open_logs([str(core)])


def test_the_nul_padding_a_crash_leaves_at_a_files_end_is_no_record(tmp_path, capsys):
    """NTFS, after a crash, leaves a file extended and never written: NUL bytes at its end. They were one line,
    said to be 'still written' (no line end) or a dead letter (a line end after them); they are no record."""
    log = tmp_path / EX02.name
    expected = [event.event_id for event in run([EX02])[0].events]
    capsys.readouterr()
    for padding in (b"\0" * 100_000, b"\0" * 100_000 + b"\r\n"):
        log.write_bytes(EX02.read_bytes() + padding)
        sink, counts = run([log])
        assert ([event.event_id for event in sink.events], sink.dead_letters) == (expected, [])
        assert capsys.readouterr() == ("", "")


def test_follow_reads_a_crashs_nul_padding_again_only_when_something_may_have_been_written_over_it(tmp_path):
    """The NULs at a file's end were read again at every poll, twice a second, however many: 10 MB of them, 20 MB
    read a second for as long as ingest followed the file. Now again only when its size or modification time
    changed since, or its first bytes there are no longer NUL; what the server writes over them is read."""
    def bytes_read() -> int:  # by this process, from any file (Linux's count)
        return int(dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())["rchar"])

    data = EX02.read_bytes()
    written = data.split(b"\r\n")[-2]  # a record of the log, written again over the padding
    log = tmp_path / EX02.name
    log.write_bytes(data + b"\0" * 10_000_000)
    tail = LogTail([str(log)], follow=True, new_reader=MtlReader)
    try:
        assert len(list(tail.poll())) == len(data.split(b"\r\n")) - 1
        before = bytes_read()
        assert [list(tail.poll()) for _ in range(20)] == [[]] * 20
        assert bytes_read() - before < 100_000, "the padding was read again"
        with open(log, "r+b") as out:  # past the padding's start: its modification time tells
            out.seek(len(data) + 100)
            out.write(written + b"\r\n")
        assert [line.raw for line in tail.poll()] == [written]
        kept = log.stat()
        with open(log, "r+b") as out:  # at its start, the time kept: its first bytes tell
            out.seek(len(data) + 100 + len(written) + 2)
            out.write(written + b"\r\n")
        os.utime(log, ns=(kept.st_atime_ns, kept.st_mtime_ns))
        assert [line.raw for line in tail.poll()] == [written]
    finally:
        tail.close()


def test_a_log_written_after_the_nul_padding_a_crash_left_at_its_start_is_read(tmp_path):
    """A crash right after Exchange made and extended the file, then the server writes its log after the NULs: the
    file's first line starts with them. It was refused as no message-tracking log ('before any #Fields: line, a line
    is a NUL byte in the line (at byte 0)'), where the tail reads a line after padding."""
    log = tmp_path / EX02.name
    log.write_bytes(b"\0" * 4096 + EX02.read_bytes())
    sink, _ = run([log])
    assert ([event.event_id for event in sink.events], sink.dead_letters) == (
        [event.event_id for event in run([EX02])[0].events], [])


def test_a_nul_byte_inside_a_line_is_a_dead_letter_saying_so(tmp_path):
    lines = EX02.read_bytes().split(b"\r\n")
    log = tmp_path / EX02.name
    log.write_bytes(b"\r\n".join(lines[:5] + [lines[5][:40] + b"\0" + lines[5][40:]] + lines[6:]))
    sink, _ = run([log])
    assert [(d.offset, d.reason) for d in sink.dead_letters] == [
        (6, "a NUL byte in the line (at byte 40): no log writes one")]


def test_follow_reads_the_lines_written_over_nul_padding_and_after_it(tmp_path):
    """The server writes over the NULs (in place) or after them (appending): its lines are read, the NULs are not.
    The NULs were read as the start of a line: what was written over them was never read."""
    lines = [line for line in EX01.read_bytes().split(b"\r\n") if line]
    head, body = lines[:5], lines[5:]
    log = tmp_path / "MSGTRK20261122-1.LOG"
    start = b"\r\n".join(head + body[:1]) + b"\r\n"
    unpadded = tmp_path / "unpadded" / log.name
    unpadded.parent.mkdir()
    unpadded.write_bytes(start + body[1] + b"\r\n" + body[3] + b"\r\n")
    expected = [event.event_id for event in run([unpadded])[0].events]
    log.write_bytes(start + b"\0" * 5000)
    stop = threading.Event()
    sink, thread, result = follow([log], stop)
    try:
        assert wait_for(lambda: len(sink.events) == 1)
        with open(log, "r+b") as out:  # in place, NULs left after it
            out.seek(len(start))
            out.write(body[1] + b"\r\n")
        assert wait_for(lambda: len(sink.events) == 3)
        with open(log, "ab") as out:  # after the NULs
            out.write(body[3] + b"\r\n")
        assert wait_for(lambda: len(sink.events) == len(expected))
        time.sleep(0.3)
    finally:
        stop.set()
        thread.join(10)
    assert sink.dead_letters == []
    assert [event.event_id for event in sink.events] == expected
