"""The adapter against the documented format: per-recipient statuses, the four log prefixes,
every event id of the table in EXCHANGE_LOGS.md, `.LOG`/`.log`, and Export-Csv in each encoding."""

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from producers.log_tail import MAX_RECORD_LINES, LogTail
from producers.mtl_events import IGNORED, SERVICE_SKIPS, MtlMapper, Skip
from producers.mtl_ingest import ingest
from producers.mtl_log import EXPORT_COLUMNS, MtlReader, Row, service_of, split_statuses
from schemas import events as ev
from state.replay import replay
from tests.producers.test_mtl import ListSink

FIELDS = ("date-time,client-ip,client-hostname,server-ip,server-hostname,source-context,connector-id,source,"
          "event-id,internal-message-id,message-id,network-message-id,recipient-address,recipient-status,"
          "total-bytes,recipient-count,related-recipient-address,reference,message-subject,sender-address,"
          "return-path,message-info,directionality,tenant-id,original-client-ip,original-server-ip,custom-data"
          ).split(",")
HEADER = ["#Software: Microsoft Exchange Server", "#Version: 15.02.1544.004", "#Log-type: Message Tracking Log",
          "#Date: 2026-11-22T02:00:00.000Z", "#Fields: " + ",".join(FIELDS)]
NMID = "a1b2c3d4-0101-4a5b-8c9d-000000000101"
EXPORT_NAMES = {log: prop for prop, log in EXPORT_COLUMNS.items()}


def record(time: str, event: str, **values: str) -> dict[str, str]:
    row = {name: "" for name in FIELDS}
    row.update({"date-time": f"2026-11-22T{time}Z", "event-id": event, "message-id": "<f1@fabrikam.com>",
                "network-message-id": NMID, "directionality": "Incoming"})
    row.update({name.replace("_", "-"): value for name, value in values.items()})
    return row


def raw_log(path: Path, records: list[dict[str, str]]) -> Path:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    for r in records:
        writer.writerow([r[name] for name in FIELDS])
    path.write_bytes(("\r\n".join(HEADER) + "\r\n" + out.getvalue()).encode("utf-8"))
    return path


def export_csv(records: list[dict[str, str]], delimiter: str = ",") -> str:
    """What `Get-MessageTrackingLog | Select ... | Export-Csv -NoTypeInformation` writes (multi-valued joined)."""
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\r\n", delimiter=delimiter)
    writer.writerow([EXPORT_NAMES.get(name, name) for name in FIELDS])
    for r in records:
        writer.writerow([r[name] for name in FIELDS])
    return "#TYPE Microsoft.Exchange.Management.TransportLogSearchTasks.MessageTrackingEvent\r\n" + out.getvalue()


def run(*paths):
    sink = ListSink()
    counts = ingest([str(p) for p in paths], sink)
    return sink, counts


RECEIVED = record("02:00:00.000", "RECEIVE", client_hostname="mail.fabrikam.com", server_hostname="EX01",
                  source="SMTP", internal_message_id="500", recipient_address="ann@contoso.com;bob@contoso.com",
                  total_bytes="100")
SHADOWED = [record("02:00:00.100", "HAREDIRECT", client_hostname="EX01", server_hostname="EX02",
                   source="REDUNDANCY", internal_message_id="500"),
            record("02:00:00.090", "HARECEIVE", client_hostname="EX01", server_hostname="EX02",
                   source="REDUNDANCY", internal_message_id="77")]


def test_a_fail_for_one_recipient_of_two_concerns_that_recipient_and_the_message_completes(tmp_path):
    lines = [RECEIVED, *SHADOWED,
             record("02:00:01.000", "FAIL", server_hostname="EX01", source="SMTP", internal_message_id="500",
                    recipient_address="bob@contoso.com", recipient_status="550 5.1.1 RESOLVER.ADR.RecipNotFound"),
             record("02:00:02.000", "SEND", client_hostname="EX01", server_hostname="EX03", source="SMTP",
                    connector_id="Intra-Organization SMTP Send Connector", internal_message_id="500",
                    recipient_address="ann@contoso.com", recipient_status="250 2.1.5 Recipient OK"),
             record("02:00:03.000", "HADISCARD", client_hostname="EX01", server_hostname="EX02",
                    source="REDUNDANCY", internal_message_id="77")]
    events = run(raw_log(tmp_path / "MSGTRK20261122-1.LOG", lines))[0].events
    expired = [e for e in events if isinstance(e, ev.MessageExpired)]
    assert len(expired) == 1 and expired[0].message.fork_id.startswith("failed-")
    assert "bob@contoso.com: 550 5.1.1" in expired[0].reason
    result = replay(events)
    assert not [a for a in result.alerts if a.type is ev.AlertType.MESSAGE_EXPIRED]
    assert [o.result for o in result.outcomes] == ["delivered"]
    assert result.settles("ex01")


def test_only_a_queue_expiry_expires_the_message_and_a_status_with_a_semicolon_stays_whole(tmp_path):
    status = "550 4.4.7 QUEUE.Expired;message expired in queue, [{LRT}=4/21/2026 2:00:00 AM;{LED}=451 4.4.0]"
    lines = [RECEIVED, *SHADOWED,
             record("04:00:00.000", "FAIL", server_hostname="EX01", source="QUEUE", internal_message_id="500",
                    recipient_address="ann@contoso.com;bob@contoso.com", recipient_status=f"{status};{status}")]
    events = run(raw_log(tmp_path / "MSGTRK20261122-1.LOG", lines))[0].events
    expired = [e for e in events if isinstance(e, ev.MessageExpired)]
    assert [(e.message.fork_id, e.reason) for e in expired] == [(None, f"{status};{status}")]
    assert split_statuses(f"{status};{status}") == (status, status)
    assert split_statuses("250 2.1.5 OK;550 5.1.1 Unknown;[{LRT}=x];452 4.2.2 Full") == (
        "250 2.1.5 OK", "550 5.1.1 Unknown;[{LRT}=x]", "452 4.2.2 Full")


def test_defer_and_deliver_pair_each_recipient_with_its_own_status(tmp_path):
    lines = [RECEIVED, *SHADOWED,
             record("02:00:01.000", "DEFER", server_hostname="EX01", source="SMTP", internal_message_id="500",
                    recipient_address="ann@contoso.com;bob@contoso.com",
                    recipient_status="451 4.4.0 DNS query failed;[{FQDN}=x];452 4.2.2 Mailbox full"),
             record("02:00:02.000", "DELIVER", client_hostname="EX01", server_hostname="EX03",
                    source="STOREDRIVER", internal_message_id="9", recipient_address="ann@contoso.com;bob@contoso.com",
                    recipient_status="250 2.0.0 OK;550 5.2.2 Mailbox full")]
    events = run(raw_log(tmp_path / "MSGTRK20261122-1.LOG", lines))[0].events
    deferred = [e for e in events if isinstance(e, ev.DeliveryDeferred)][0]
    assert deferred.recipients == ("ann@contoso.com", "bob@contoso.com")
    assert deferred.smtp_response == ("ann@contoso.com: 451 4.4.0 DNS query failed;[{FQDN}=x];"
                                      " bob@contoso.com: 452 4.2.2 Mailbox full")
    delivered = [e for e in events if isinstance(e, ev.DeliveredToMailbox)]
    assert [(d.recipients, d.message.internal_id) for d in delivered] == [(("ann@contoso.com",), "500")]
    failed = [e for e in events if isinstance(e, ev.MessageExpired)]
    assert len(failed) == 1 and "bob@contoso.com: 550 5.2.2" in failed[0].reason
    three = record("02:00:01.000", "DEFER", server_hostname="EX01", internal_message_id="500",
                   recipient_address="a@x;b@x;c@x", recipient_status="451 4.4.0 a;451 4.4.0 b")
    sink, counts = run(raw_log(tmp_path / "MSGTRK20261123-1.LOG", [RECEIVED, three]))
    assert [d.reason for d in sink.dead_letters] == ["DEFER: 2 recipient-status values for 3 recipients"]


def test_the_four_log_prefixes_make_one_receipt_and_the_delivery_names_the_transport_services_id(tmp_path):
    folder = tmp_path / "MessageTracking"
    folder.mkdir()
    submission = [record("01:59:59.900", "RECEIVE", server_hostname="EX01", source="STOREDRIVER",
                         internal_message_id="31", recipient_address="ann@contoso.com;bob@contoso.com"),
                  record("01:59:59.950", "SUBMIT", server_hostname="EX01", source="STOREDRIVER",
                         internal_message_id="31")]
    delivery = [record("02:00:01.900", "RECEIVE", client_hostname="EX01", server_hostname="EX03", source="SMTP",
                       internal_message_id="41", recipient_address="ann@contoso.com;bob@contoso.com"),
                record("02:00:02.000", "DELIVER", client_hostname="EX01", server_hostname="EX03",
                       source="STOREDRIVER", internal_message_id="41",
                       recipient_address="ann@contoso.com;bob@contoso.com")]
    approval = [record("02:00:00.500", "AGENTINFO", server_hostname="EX01", source="AGENT", internal_message_id="51")]
    raw_log(folder / "MSGTRK20261122-1.LOG", [RECEIVED, *SHADOWED[:1]])
    raw_log(folder / "MSGTRKMS20261122-1.LOG", submission)
    raw_log(folder / "MSGTRKMD20261122-1.log", delivery)  # Microsoft's documents write .log
    raw_log(folder / "MSGTRKMA20261122-1.LOG", approval)
    raw_log(tmp_path / "MSGTRK20261122-1.LOG", [RECEIVED])  # not in the folder: not read
    sink, counts = run(folder)
    kinds = [(e.kind, e.node, e.message.internal_id if e.message else None) for e in sink.events]
    assert kinds == [("MessageReceived", "ex01", "500"), ("ShadowCopyRequested", "ex01", "500"),
                     ("ShadowCopyAcknowledged", "ex01", "500"), ("DeliveredToMailbox", "ex01", "500"),
                     ("ServerProbed", "ex03", None)]  # the delivery server answered: its sign of life
    assert sum(counts.skipped.values()) == 4 and counts.dead_letters == 0
    assert {service_of(p) for p in ("MSGTRK20261122-1.LOG", "msgtrkms20261122-1.log", "MSGTRKMD2026-1.log",
                                    "MSGTRKMA20261122-1.LOG", "export.csv")} == {"MSGTRK", "MSGTRKMS", "MSGTRKMD",
                                                                                 "MSGTRKMA", ""}
    globbed = LogTail([str(folder / "msgtrk*.LOG")], follow=False, new_reader=MtlReader)
    try:
        assert len({line.path for line in globbed.poll()}) == 4  # case ignored
    finally:
        globbed.close()


def test_logs_renamed_with_a_prefix_keep_their_service_and_a_file_named_with_brackets_is_that_file(tmp_path):
    """An administrator pooling several servers' logs in one folder names them EX03_MSGTRKMD...: the delivery
    service's RECEIVE was then taken for a receipt (a message that never leaves, expired two days later), and a
    file in a folder named [EX03] was read as a glob that matched nothing (helper-121's walk)."""
    folder = tmp_path / "[EX03]"
    folder.mkdir()
    delivery = [record("02:00:01.900", "RECEIVE", client_hostname="EX01", server_hostname="EX03", source="SMTP",
                       internal_message_id="41", recipient_address="ann@contoso.com"),
                record("02:00:02.000", "DELIVER", client_hostname="EX01", server_hostname="EX03",
                       source="STOREDRIVER", internal_message_id="41", recipient_address="ann@contoso.com")]
    renamed = raw_log(folder / "EX03_MSGTRKMD20261122-1.LOG", delivery)
    sink, counts = run(renamed)
    assert [e.kind for e in sink.events] == ["DeliveredToMailbox", "ServerProbed"] and counts.dead_letters == 0
    assert {service_of(name) for name in ("EX03_MSGTRKMD20261122-1.LOG", "ex03-msgtrk2026-1.log",
                                          "BACKUPMSGTRK20261122-1.LOG")} == {"MSGTRKMD", "MSGTRK", ""}


def test_an_export_without_file_names_keeps_one_receipt_per_server_and_message(tmp_path):
    both = [record("01:59:59.900", "RECEIVE", server_hostname="EX01", source="STOREDRIVER",
                   internal_message_id="31", recipient_address="ann@contoso.com;bob@contoso.com"),
            RECEIVED, *SHADOWED[:1],
            record("02:00:01.000", "SEND", client_hostname="EX01", server_hostname="EX03", source="SMTP",
                   internal_message_id="500", recipient_address="ann@contoso.com;bob@contoso.com")]
    path = tmp_path / "tracking.csv"
    path.write_text(export_csv(both), encoding="utf-8")
    sink, counts = run(path)
    assert [e.kind for e in sink.events].count("MessageReceived") == 1
    assert {e.message.internal_id for e in sink.events} == {"31"}  # the later lines take the first receipt's id
    assert counts.skipped == {"a second RECEIVE of the message on the same server (another transport service's"
                              " log): one message, one receipt": 1}


RECEIVED_AGAIN_MS = 1795316400000  # 2026-11-22T03:00:00Z


def test_a_message_received_again_by_the_same_transport_service_is_a_second_receipt(tmp_path):
    # EX01 relays the message to the Internet and its queue database is lost; EX02, whose shadow copy was never
    # discarded, resubmits it, and EX01 receives it again (a new internal-message-id, the same network-message-id).
    # Its MSGTRK log names the Transport service: this is no other service's receipt, but a second copy to track.
    again = [record("03:00:00.000", "RECEIVE", client_hostname="EX02", server_hostname="EX01", source="SMTP",
                    internal_message_id="600", recipient_address="ann@contoso.com", total_bytes="100"),
             record("03:00:00.100", "HAREDIRECT", client_hostname="EX01", server_hostname="EX03",
                    source="REDUNDANCY", internal_message_id="600"),
             record("03:00:01.000", "SEND", client_hostname="EX01", server_hostname="mx.fabrikam.com", source="SMTP",
                    internal_message_id="600", recipient_address="ann@contoso.com",
                    recipient_status="250 2.1.5 Recipient OK")]
    first = record("02:00:01.000", "SEND", client_hostname="EX01", server_hostname="mx.fabrikam.com", source="SMTP",
                   internal_message_id="500", recipient_address="ann@contoso.com;bob@contoso.com")
    sink, counts = run(raw_log(tmp_path / "MSGTRK20261122-1.LOG", [RECEIVED, first, *again]))
    received = [e.message.internal_id for e in sink.events if e.kind == "MessageReceived"]
    assert received == ["500", "600"] and not counts.skipped
    assert [(e.kind, e.message.internal_id) for e in sink.events if e.event_time_ms >= RECEIVED_AGAIN_MS] == [
        ("MessageReceived", "600"), ("ShadowCopyRequested", "600"), ("ShadowCopyAcknowledged", "600"),
        ("SentToNextHop", "600"), ("NextHopAcknowledged", "600")]


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-16-be-bom"])
def test_export_csv_in_each_encoding_reads_as_the_raw_log_does(tmp_path, encoding):
    lines = [RECEIVED, *SHADOWED,
             record("02:00:01.000", "SEND", client_hostname="EX01.contoso.com", server_hostname="mx.fabrikam.com",
                    source="SMTP", internal_message_id="500", recipient_address="ann@contoso.com;bob@contoso.com",
                    message_subject='Réunion, "ünïcode" ✓')]
    raw = run(raw_log(tmp_path / "MSGTRK20261122-1.LOG", lines))[0].events
    text = export_csv(lines)
    data = (b"\xfe\xff" + text.encode("utf-16-be")) if encoding == "utf-16-be-bom" else text.encode(encoding)
    if encoding == "utf-16":
        assert data[:2] == b"\xff\xfe"  # what Export-Csv -Encoding Unicode writes on Windows
    path = tmp_path / "tracking.csv"
    path.write_bytes(data)
    sink, counts = run(path)
    strip = lambda events: [(e.kind, e.node, e.primary_server, e.message, e.event_time_ms) for e in events]
    assert counts.dead_letters == 0 and strip(sink.events) == strip(raw)
    ends = [line.end for line in LogTail([str(path)], follow=False, new_reader=MtlReader).poll()]
    assert ends[-1] == len(data) and len(ends) == len(lines) + 2  # offsets in the file's own bytes


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_a_utf16_line_with_a_lone_surrogate_is_a_dead_letter_as_a_line_that_is_not_utf8_is(tmp_path, encoding):
    """Before: the lone surrogate became U+FFFD and the line was published with it, silently, where a line of a
    UTF-8 file with a byte that is not UTF-8 is set aside, saying why."""
    bom = "\ufeff".encode(encoding)
    lines = export_csv([RECEIVED, *SHADOWED]).encode(encoding).split("\n".encode(encoding))
    lone, sender = "\ud800".encode(encoding, errors="surrogatepass"), "<f1@".encode(encoding)
    lines[2] = lines[2].replace(sender, sender + lone)  # RECEIVED, the export's first record
    path = tmp_path / "tracking.csv"
    path.write_bytes(bom + "\n".encode(encoding).join(lines))
    sink, _ = run(path)
    (letter,) = sink.dead_letters
    assert letter.reason == f"not UTF-16 text (illegal UTF-16 surrogate at byte {lines[2].index(lone)})"
    assert (letter.offset, letter.original) == (3, lines[2].removesuffix("\r".encode(encoding)))
    assert "\ufffd" not in "".join(e.message.message_id for e in sink.events)
    assert len(sink.events) == 3, "the other lines are read"


def test_export_csv_with_unjoined_arrays_or_local_us_times_is_read_or_refused_clearly(tmp_path):
    # Timestamp is in the exporting machine's culture: en-US "4/10/2001 3:51:24 PM", en-NZ (en-GB, fr-FR...)
    # "10/04/2001 15:51:24" for 10 April (.NET, "Standard DateTime Format Strings Output Examples"): without AM/PM
    # day and month cannot be told apart, so a dead letter, never the wrong month.
    lines = [dict(RECEIVED, **{"recipient-address": "System.String[]"}),
             dict(RECEIVED, **{"date-time": "11/22/2026 2:00:00 AM", "internal-message-id": "600",
                               "network-message-id": "other"}),
             dict(RECEIVED, **{"date-time": "10/04/2026 15:51:24"})]
    path = tmp_path / "tracking.csv"
    path.write_text(export_csv(lines), encoding="utf-8-sig")
    sink, _ = run(path)
    assert [d.reason for d in sink.dead_letters] == [
        "recipient-address exported as 'System.String[]': export multi-valued properties joined with ';'"
        " (see producers/EXCHANGE_LOGS.md)",
        "date-time '10/04/2026 15:51:24' is not a valid ISO-8601 time (nor en-US with AM/PM: export Timestamp as"
        " ISO-8601, see producers/EXCHANGE_LOGS.md)"]
    assert [e.event_time_ms for e in sink.events] == [1795312800000]


def test_every_documented_event_id_is_mapped_or_ignored_with_its_reason():
    mapper = MtlMapper()
    for event_id, reason in IGNORED.items():
        assert mapper.map(Row({"event-id": event_id}, 0), "x") == Skip(f"event-id {event_id}: {reason}")
    for service, (kept, reason) in SERVICE_SKIPS.items():
        assert mapper.map(Row({"event-id": "RECEIVE"}, 0, service), "x") == Skip(f"RECEIVE in {service}: {reason}")
    resubmit = Row(record("03:00:00", "RESUBMIT", server_hostname="EX02", client_hostname="EX01",
                          source="SAFETYNET", internal_message_id="7"), 0)
    assert mapper.map(resubmit, "x") == Skip("RESUBMIT from SAFETYNET (Safety Net): not a promotion")
    external = Row(record("03:00:00", "SENDEXTERNAL", client_hostname="EX01", server_hostname="mx.fabrikam.com",
                          source="SMTP", internal_message_id="8", connector_id="Intra-Organization"), 0)
    sent = mapper.map(external, "x")
    assert [(e.kind, getattr(e, "outside_boundary", None)) for e in sent] == [
        ("SentToNextHop", True), ("NextHopAcknowledged", None)]
    table = (Path(__file__).parents[2] / "producers" / "EXCHANGE_LOGS.md").read_text()
    for event_id in [*IGNORED, "RECEIVE", "HAREDIRECT", "HAREDIRECTFAIL", "HARECEIVE", "HADISCARD", "RESUBMIT",
                     "SEND", "SENDEXTERNAL", "DELIVER", "DUPLICATEDELIVER", "TRANSFER", "DSN", "FAIL", "DEFER", "LOAD"]:
        assert f"| {event_id} |" in table, f"{event_id} is not in the mapping table"


def test_load_is_a_restart_of_the_server_that_logged_it_about_its_own_message_or_a_shadow_copy_it_holds(tmp_path):
    loads = [record("05:00:00.000", "LOAD", server_hostname="EX01", source="BOOTLOADER", internal_message_id="500"),
             record("05:00:01.000", "LOAD", server_hostname="EX02", source="BOOTLOADER", internal_message_id="77")]
    sink, counts = run(raw_log(tmp_path / "MSGTRK2026112202-1.LOG", [RECEIVED, *SHADOWED, *loads]))
    loaded = [(e.node, e.primary_server, e.message.internal_id) for e in sink.events if isinstance(e, ev.MessageLoaded)]
    assert loaded == [("ex01", "ex01", "500"), ("ex02", "ex01", "500")] and not sink.dead_letters


def test_a_shadow_copy_of_a_message_back_on_its_primary_waits_for_that_receipt_not_the_discarded_one(tmp_path):
    # Seed 1237 of the log hunt: EX02 held and discarded a copy of EX01's message 500; the message came back to
    # EX01 (a shadow's promotion resubmitted it there) as 600, shadowed on EX02 again. EX02's clock, 4 minutes
    # behind, put that HARECEIVE before EX01's RECEIVE: it named 500, which the twin then expired as never sent.
    again = record("02:10:00.000", "RECEIVE", client_hostname="EX03", server_hostname="EX01", source="SMTP",
                   internal_message_id="600", recipient_address="ann@contoso.com", total_bytes="100")
    ex02 = [record("02:00:00.090", "HARECEIVE", client_hostname="EX01", server_hostname="EX02", source="REDUNDANCY",
                   internal_message_id="77"),
            record("02:00:05.000", "HADISCARD", client_hostname="EX01", server_hostname="EX02", source="REDUNDANCY",
                   internal_message_id="77"),
            record("02:06:00.100", "HARECEIVE", client_hostname="EX01", server_hostname="EX02", source="REDUNDANCY",
                   internal_message_id="78")]
    (tmp_path / "EX01").mkdir()
    (tmp_path / "EX02").mkdir()
    sink, _ = run(raw_log(tmp_path / "EX01" / "MSGTRK2026112202-1.LOG", [RECEIVED, again]),
                  raw_log(tmp_path / "EX02" / "MSGTRK2026112202-1.LOG", ex02))
    shadow = [(e.kind, e.message.internal_id) for e in sink.events if e.node == "ex02"]
    assert shadow == [("ShadowCopyStored", "500"), ("ShadowDiscarded", "500"), ("ShadowCopyStored", "600")]
    assert not sink.dead_letters


def test_a_discard_logged_after_the_copy_but_stamped_before_it_comes_after_it(tmp_path):
    # Seed 1575 of the log hunt: EX02's clock was set back a minute between storing EX01's message and discarding
    # it, so its HADISCARD, written after its HARECEIVE, was stamped before it. In time order the discard came
    # first and released nothing: the twin kept the copy held, and when the logs went quiet it forecast the
    # message delivered twice.
    ex01 = [RECEIVED, record("02:00:02.000", "SEND", client_hostname="EX01", server_hostname="EX03", source="SMTP",
                             connector_id="Intra-Organization SMTP Send Connector", internal_message_id="500",
                             recipient_address="ann@contoso.com;bob@contoso.com")]
    ex02 = [SHADOWED[1], record("01:59:03.000", "HADISCARD", client_hostname="EX01", server_hostname="EX02",
                                source="REDUNDANCY", internal_message_id="77")]
    (tmp_path / "EX01").mkdir()
    (tmp_path / "EX02").mkdir()
    sink, _ = run(raw_log(tmp_path / "EX01" / "MSGTRK2026112202-1.LOG", ex01),
                  raw_log(tmp_path / "EX02" / "MSGTRK2026112202-1.LOG", ex02))
    shadow = [(e.kind, e.event_time_ms % 86_400_000) for e in sink.events if e.node == "ex02"]
    assert shadow == [("ShadowCopyStored", 7_200_090), ("ShadowDiscarded", 7_200_090)]
    result = replay(sink.events)
    assert result.settles("ex01")


def test_a_peers_acknowledged_send_to_a_server_that_logs_is_its_sign_of_life_once_a_minute(tmp_path):
    sends = [record(f"02:0{minute}:{second:02d}.000", "SEND", client_hostname="EX01", server_hostname=hop,
                    source="SMTP", internal_message_id="500", connector_id="Intra-Organization SMTP Send Connector")
             for minute, second, hop in ((1, 0, "EX02.contoso.com"), (1, 30, "EX02.contoso.com"),
                                         (2, 0, "EX02.contoso.com"), (2, 5, "mx.fabrikam.com"))]
    sink, _ = run(raw_log(tmp_path / "MSGTRK2026112202-1.LOG", [RECEIVED, *SHADOWED, *sends]))
    answered = [(e.node, e.primary_server, e.server, e.answered, e.via, e.event_time_ms % 3_600_000)
                for e in sink.events if isinstance(e, ev.ServerProbed)]
    assert answered == [("ex02", "ex02", "ex02", True, "handoff", 60_000), ("ex02", "ex02", "ex02", True, "handoff",
                                                                           120_000)]


def test_a_shadows_discard_is_its_primarys_answer_to_the_discard_query_its_sign_of_life(tmp_path):
    # Hunt seed 8861: a primary idle while its shadow kept collecting discard notifications (HADISCARD), whose
    # last line the log-fed twin took for its last sign of life, 34 s before the answer the discards show.
    discards = [record(f"02:0{minute}:{second:02d}.000", "HADISCARD", client_hostname="EX01",
                       server_hostname="EX02", source="REDUNDANCY", internal_message_id="77")
                for minute, second in ((1, 0), (1, 30), (2, 0))]
    sink, _ = run(raw_log(tmp_path / "MSGTRK2026112202-1.LOG", [RECEIVED, *SHADOWED, *discards]))
    answered = [(e.node, e.server, e.answered, e.via, e.event_time_ms % 3_600_000, e.reply)
                for e in sink.events if isinstance(e, ev.ServerProbed)]
    reply = "250 to ex02's discard query (HADISCARD) of <f1@fabrikam.com> (message tracking)"
    assert answered == [("ex01", "ex01", True, "handoff", 60_000, reply),
                        ("ex01", "ex01", True, "handoff", 120_000, reply)]


def test_a_managed_availability_health_probe_is_its_servers_sign_of_life_and_no_message_to_track(tmp_path):
    probe = dict(client_hostname="EX01", server_hostname="EX01", internal_message_id="900",
                 message_id="<probe-1@ex01>", network_message_id="b0000000-0000-0000-0000-000000000001",
                 sender_address="postmaster@contoso.com", recipient_address="inboundproxy@contoso.com",
                 message_subject="Inbound proxy probe")
    lines = [record("02:05:07.000", "RECEIVE", source="SMTP", **probe),
             record("02:05:07.040", "DROP", source="AGENT", source_context="SystemProbeDropSmtpAgent", **probe)]
    sink, counts = run(raw_log(tmp_path / "MSGTRK2026112202-1.LOG", lines))
    assert [(e.kind, e.node, e.primary_server, e.via) for e in sink.events] == [
        ("ServerProbed", "ex01", "ex01", "healthprobe")]
    assert list(counts.skipped) == ["DROP of a Managed Availability health probe: its RECEIVE is the server's sign"
                                    " of life, the message is not tracked"]


def test_a_shadow_copy_logged_as_exchange_writes_it_names_the_shadow_in_source_context(tmp_path):
    # Exchange 2013 writes HAREDIRECT with the primary in server-hostname, client-hostname empty, and each shadow's
    # answer in source-context as <shadow>=<SMTP response> (a real line: awslabs/kinesis-agent-windows,
    # ExchangeLogParserTest, "#Version: 15.00.1104.000"). HAREDIRECTFAIL likewise, "No suitable shadow servers"
    # when none answered.
    redirected = record("02:00:00.100", "HAREDIRECT", server_hostname="EX01", source="SMTP", internal_message_id="500",
                        source_context="EX02.contoso.com=250 2.6.0 <f1@fabrikam.com> [InternalId=EX02.contoso.com,"
                                       " Hostname=77] Queued mail for redundancy")
    failed = [record("02:00:00.200", "HAREDIRECTFAIL", server_hostname="EX01", source="SMTP",
                     internal_message_id="500", source_context="No suitable shadow servers"),
              record("02:00:00.300", "HAREDIRECTFAIL", server_hostname="EX01", source="SMTP",
                     internal_message_id="500", source_context="EX03.contoso.com=451 4.4.0 Timed out")]
    sink, counts = run(raw_log(tmp_path / "MSGTRK2026112202-1.LOG", [RECEIVED, redirected, *failed]))
    assert not sink.dead_letters
    shadow = [(e.kind, e.node, e.primary_server, e.message.internal_id, getattr(e, "candidate", None),
               getattr(e, "shadow_server", None), getattr(e, "reason", None)) for e in sink.events[1:]]
    assert shadow == [("ShadowCopyRequested", "ex01", "ex01", "500", "ex02", None, None),
                      ("ShadowCopyAcknowledged", "ex01", "ex01", "500", None, "ex02", None),
                      ("ShadowCopyFailed", "ex01", "ex01", "500", "", None, ev.ShadowFailureReason.NO_PEER),
                      ("ShadowCopyFailed", "ex01", "ex01", "500", "ex03", None, ev.ShadowFailureReason.TIMEOUT)]


def test_a_defer_or_fail_names_the_server_that_logged_it_in_client_hostname_when_set(tmp_path):
    # Microsoft's field table: client-hostname is the server that submitted the message, server-hostname "the
    # destination server" (Exchange 2007's "Description of Message Tracking Log Fields", kept by 2010-2019). A
    # DEFER or FAIL of an SMTP hand-off is logged by the sending server in client-hostname, with the far end that
    # refused (or nothing, for a queue expiry) in server-hostname.
    lines = [RECEIVED, *SHADOWED,
             record("02:00:01.000", "DEFER", client_hostname="EX01", server_hostname="mx.fabrikam.com", source="SMTP",
                    internal_message_id="500", recipient_address="ann@contoso.com",
                    recipient_status="451 4.4.0 Primary target IP address responded with: 421 4.3.2 busy"),
             record("02:00:02.000", "FAIL", client_hostname="EX01", server_hostname="mx.fabrikam.com", source="SMTP",
                    internal_message_id="500", recipient_address="bob@contoso.com",
                    recipient_status="550 5.1.1 User unknown"),
             record("04:00:00.000", "FAIL", client_hostname="EX01", source="QUEUE", internal_message_id="500",
                    recipient_address="ann@contoso.com", recipient_status="550 4.4.7 QUEUE.Expired")]
    sink, counts = run(raw_log(tmp_path / "MSGTRK2026112202-1.LOG", lines))
    assert not sink.dead_letters and counts.unjoined == 0
    assert {(e.kind, e.node, e.primary_server, e.message.internal_id) for e in sink.events
            if isinstance(e, (ev.DeliveryDeferred, ev.MessageExpired))} == {
        ("DeliveryDeferred", "ex01", "ex01", "500"), ("MessageExpired", "ex01", "ex01", "500")}


def test_export_csv_quoted_only_as_needed_reads_as_the_quoted_export(tmp_path):
    # PowerShell 7's Export-Csv -UseQuotes AsNeeded (or Never) writes the header row and plain values unquoted
    # (learn.microsoft.com, Export-Csv, -UseQuotes).
    lines = [RECEIVED, *SHADOWED]
    quoted = tmp_path / "quoted.csv"
    quoted.write_text(export_csv(lines), encoding="utf-8")
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_MINIMAL, lineterminator="\r\n")
    writer.writerow([EXPORT_NAMES.get(name, name) for name in FIELDS])
    for r in lines:
        writer.writerow([r[name] for name in FIELDS])
    as_needed = tmp_path / "as-needed.csv"
    as_needed.write_text(out.getvalue(), encoding="utf-8")
    sink, counts = run(as_needed)
    strip = lambda events: [(e.kind, e.node, e.primary_server, e.message, e.event_time_ms) for e in events]
    assert counts.dead_letters == 0 and strip(sink.events) == strip(run(quoted)[0].events)


def test_a_line_with_thousands_of_recipients_is_read_whatever_its_length(tmp_path):
    # A delivery after a large group's expansion lists every recipient (and a status for each) on one line: a
    # field well past the csv module's default limit of 128 KiB.
    everyone = [f"user{n:05d}@contoso.com" for n in range(8000)]
    big = dict(RECEIVED, **{"recipient-address": ";".join(everyone)})
    sink, counts = run(raw_log(tmp_path / "MSGTRK2026112202-1.LOG", [big]))
    assert counts.dead_letters == 0 and len(sink.events[0].recipients) == 8000


@pytest.mark.parametrize("delimiter", [";", "\t"])
def test_export_csv_with_another_delimiter_reads_as_the_comma_export(tmp_path, delimiter):
    # Export-Csv -UseCulture separates with the culture's list separator (";" in de-DE, fr-FR), -Delimiter with any
    # (learn.microsoft.com, Export-Csv); Timestamp exported as ISO-8601 as EXCHANGE_LOGS.md asks.
    lines = [RECEIVED, *SHADOWED]
    comma, other = tmp_path / "comma.csv", tmp_path / "other.csv"
    comma.write_text(export_csv(lines), encoding="utf-8")
    other.write_text(export_csv(lines, delimiter), encoding="utf-8")
    sink, counts = run(other)
    strip = lambda events: [(e.kind, e.node, e.primary_server, e.message, e.event_time_ms) for e in events]
    assert counts.dead_letters == 0 and strip(sink.events) == strip(run(comma)[0].events)
    assert sink.events[0].recipients[1].address == "bob@contoso.com"


UNDER_FEW_FILES = """
import json, resource, sys
from pathlib import Path
from producers.ingest_positions import Positions
from producers.mtl_ingest import ingest
from tests.producers.test_mtl import ListSink

class Acknowledging(ListSink):
    def event(self, event, on_delivery=None, set_aside=None):
        super().event(event)
        on_delivery(None)

    def dead(self, letter, on_delivery=None):
        super().dead(letter)
        on_delivery(None)

    def poll(self):
        pass

resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
sink = Acknowledging()
ingest([sys.argv[1]], sink, positions=Positions(Path(sys.argv[2])))
print(json.dumps([(e.message.internal_id, e.event_time_ms) for e in sink.events if e.kind == "MessageReceived"]))
"""


def test_more_logs_than_the_process_may_open_are_read_merged_by_time(tmp_path):
    """`ingest` (without --follow) opened every file it matched and held them all to the end: a folder of more
    small logs than the process may have files open (seed 1169) ended in `OSError: [Errno 24] Too many open
    files`. Under a limit of 64, 200 one-line logs whose times run against their names, and one log of 800 lines
    (two chunks) between them, now come out as before: every line, merged by time across the files, the
    positions of what was sent saved, so that a second run sends nothing again."""
    def at(ms: int) -> str:
        return f"02:{ms // 60000:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}"

    def received(ms: int, internal_id: str) -> dict[str, str]:
        return record(at(ms), "RECEIVE", client_hostname="mail.fabrikam.com", server_hostname="EX01", source="SMTP",
                      internal_message_id=internal_id, message_id=f"<{internal_id}@fabrikam.com>",
                      network_message_id=f"a1b2c3d4-0101-4a5b-8c9d-{int(internal_id):012d}",
                      recipient_address="ann@contoso.com", total_bytes="100")

    logs = tmp_path / "logs"
    logs.mkdir()
    raw_log(logs / "MSGTRK20261122-0.LOG", [received(250 * j + 125, str(j)) for j in range(1, 801)])
    for k in range(1, 201):
        raw_log(logs / f"MSGTRK20261122-{k}.LOG", [received(1000 * (201 - k), str(1000 + k))])

    def ingested() -> list:
        result = subprocess.run([sys.executable, "-c", UNDER_FEW_FILES, str(logs), str(tmp_path / "positions.json")],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr[-2000:]
        return json.loads(result.stdout)

    received_ = ingested()
    assert len(received_) == 1000
    assert {i for i, _ in received_} == {str(n) for n in [*range(1, 801), *range(1001, 1201)]}
    assert [ms for _, ms in received_] == sorted(ms for _, ms in received_)
    assert ingested() == []  # the positions saved: nothing is sent again


SENT_BROKEN = record("02:00:01.000", "SEND", client_hostname="EX01.contoso.com", server_hostname="mx.fabrikam.com",
                     source="SMTP", internal_message_id="500", recipient_address="ann@contoso.com;bob@contoso.com",
                     recipient_status="250 2.0.0 OK\r\nqueued as 4Xz;250 2.0.0 OK",
                     message_subject="Invoice\r\nNovember")


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_an_export_whose_quoted_field_holds_a_line_break_reads_the_record_whole(tmp_path, encoding):
    """Export-Csv writes a value with a line break (a subject, a next hop's answer of several lines) quoted, the
    break as it is, as CSV allows (RFC 4180 2.6). The record was two bad lines; it is one record, and a line
    after it keeps its number in the file."""
    plain = {**SENT_BROKEN, "recipient-status": "250 2.0.0 OK;250 2.0.0 OK", "message-subject": "Invoice"}
    raw = run(raw_log(tmp_path / "MSGTRK20261122-1.LOG", [RECEIVED, *SHADOWED, plain]))[0].events
    text = export_csv([RECEIVED, *SHADOWED, SENT_BROKEN]) + '"2026-11-22T02:00:02Z","garbled"\r\n'
    path = tmp_path / "tracking.csv"
    path.write_bytes(text.encode(encoding))
    sink, counts = run(path)
    strip = lambda events: [(e.kind, e.node, e.primary_server, e.message, e.event_time_ms) for e in events]
    assert strip(sink.events) == strip(raw)
    assert [(d.offset, d.reason) for d in sink.dead_letters] == [(text.count("\r\n"), "2 fields where the header"
                                                                   " names 27")]


def test_following_an_export_waits_for_the_end_of_a_record_whose_quoted_field_holds_a_line_break(tmp_path):
    text = export_csv([RECEIVED, SENT_BROKEN]).encode("utf-8")
    cut = text.index(b"Invoice\r\n") + len(b"Invoice\r\n")  # the line break inside the quoted subject
    path = tmp_path / "tracking.csv"
    path.write_bytes(text[:cut])
    tail = LogTail([str(path)], follow=True, new_reader=MtlReader)
    try:
        assert [line.number for line in tail.poll() if line.item is not None] == [3]  # the receipt, not half a record
        with open(path, "ab") as out:
            out.write(text[cut:])
        [line] = [line for line in tail.poll() if line.item is not None]
    finally:
        tail.close()
    assert isinstance(line.item, Row) and line.number == 4 and line.end == len(text)
    assert (line.item.get("message-subject"), line.item.statuses()) == (
        "Invoice\r\nNovember", ("250 2.0.0 OK\r\nqueued as 4Xz", "250 2.0.0 OK"))


@pytest.mark.parametrize("after", [b"Invoice\r\n", b"Invoice\r\nNov"], ids=["at a line end", "inside a line"])
def test_an_export_cut_inside_a_quoted_field_is_not_read_until_its_record_is_finished(tmp_path, capsys, after):
    text = export_csv([RECEIVED, SENT_BROKEN]).encode("utf-8")
    path = tmp_path / "tracking.csv"
    path.write_bytes(text[:text.index(after) + len(after)])
    sink, counts = run(path)
    assert [e.kind for e in sink.events] == ["MessageReceived"] and sink.dead_letters == []
    assert f"{path} line 4: not read: a quoted field of its record is not closed yet (the server is still writing" \
           " it)" in capsys.readouterr().out  # ingest's `say`: the command's stderr


def test_an_unterminated_quote_in_an_export_is_a_bad_line_and_the_records_after_it_are_read(tmp_path):
    """A quote never closed joins the lines after it to its record up to MAX_RECORD_LINES lines, then is its
    line alone, a dead letter, and the lines after it are read as they are."""
    after = [record(f"02:{n // 60:02d}:{n % 60:02d}.000", "RECEIVE", client_hostname="mail.fabrikam.com",
                    server_hostname="EX01", source="SMTP", internal_message_id=str(1000 + n), total_bytes="100",
                    recipient_address="ann@contoso.com", message_id=f"<a{n}@fabrikam.com>",
                    network_message_id=f"a1b2c3d4-0101-4a5b-8c9d-{n:012d}")
             for n in range(MAX_RECORD_LINES + 5)]
    header, *records = export_csv(after).split("\r\n")[1:-1]
    path = tmp_path / "tracking.csv"
    path.write_text("\r\n".join([header, '"2026-11-22T02:00:00Z","open quote', *records]) + "\r\n")
    sink, counts = run(path)
    assert [(d.offset, d.reason[:16]) for d in sink.dead_letters] == [(2, "not a CSV record")]
    assert [e.message.internal_id for e in sink.events] == [str(1000 + n) for n in range(len(after))]
