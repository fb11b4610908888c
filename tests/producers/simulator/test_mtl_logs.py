"""The log path against the ground truth: simulate -> Exchange logs -> ingest -> twin (reference replay)."""

from producers.mtl_ingest import ingest
from producers.mtl_log import parse_time, service_of
from producers.simulator.mtl_check import PROMOTION_ALERTS, check_logs
from producers.simulator.mtl_writer import to_mtl
from producers.simulator.topology import topology_from
from schemas.events import AlertType, DeliveredToMailbox
from shadowtwin.cli import main
from tests.producers.simulator.scenarios import topology
from tests.producers.test_mtl import ListSink
from tests.producers.simulator.test_scenarios import crash


def test_every_promotion_of_a_primary_crash_is_forecast_from_the_logs_as_from_the_native_events(tmp_path):
    check = check_logs(topology([crash("mbx01", duration="03:30:00")], duration="05:00:00", rate=0.1), 7, tmp_path)
    assert check.expected and set(check.found) == set(check.native_found) == set(check.expected)
    assert check.false_alerts == [] and check.dead_letters == 0
    # The forecast comes from the primary's last logged event instead of its last answered heartbeat:
    # no later than the native twin's by more than one liveness bucket (a minute).
    assert check.delay_ms(check.found) <= check.delay_ms(check.native_found) + 60_000
    assert check.delay_ms(check.found) <= 0, "forecast before the shadow's own RESUBMIT line"
    assert check.logs.commands and {c.holder for c in check.logs.commands} == {c.holder for c in check.native.commands}


def test_a_shadow_promoting_messages_its_primary_had_delivered_is_found_at_its_duplicate_forecast(tmp_path):
    # mbx01 comes back with a new queue database: its shadows promote the copies whose discard never reached them,
    # of messages mbx01 had delivered. The twins forecast them delivered twice (no promotion alert): before, the
    # check counted them not found, or found at a later promotion of the message (hunt seed 1692: 181 minutes late).
    check = check_logs(topology([crash("mbx01", at="00:20:00", duration="00:08:00", restart="new_database",
                                       backlog="00:00:00")], duration="00:40:00", rate=0.2), 7, tmp_path)
    duplicates = {m.message.message_id for a in check.logs.alerts if a.type is AlertType.DUPLICATE_DELIVERY_EXPECTED
                  for m in a.messages}
    assert set(check.expected) & duplicates
    assert set(check.found) == set(check.native_found) == set(check.expected)
    assert check.delay_ms(check.found) <= 0, "found at the shadow's own RESUBMIT line, or before"


def test_simulate_writes_the_logs_per_server_with_the_four_prefixes_and_the_truth(tmp_path, capsys):
    folder = tmp_path / "logs"
    assert main(["simulate", "--format", "exchange-mtl", "--duration", "01:10:00", "--out", str(folder)]) == 0
    files = sorted(p for p in folder.rglob("*.LOG"))
    assert {service_of(p) for p in files} == {"MSGTRK", "MSGTRKMS", "MSGTRKMD", "MSGTRKMA"}
    assert {p.name[len(service_of(p)):len(service_of(p)) + 10] for p in files} >= {"2026010500", "2026010501"}
    assert all(p.read_bytes().startswith(b"#Software: Microsoft Exchange Server\r\n") for p in files)
    assert (folder / "truth.jsonl").exists() and "message-tracking lines" in capsys.readouterr().out
    assert main(["simulate", "--format", "exchange-mtl", "--out", str(folder)]) == 2
    assert "expected a new or empty folder" in capsys.readouterr().err


def test_a_log_file_rolls_over_by_size_within_the_hour(tmp_path):
    to_mtl(topology(duration="00:20:00"), 7, tmp_path, max_bytes=64 * 1024)
    names = sorted(p.name for p in (tmp_path / "MBX01").glob("MSGTRK2*.LOG"))
    assert names[:2] == ["MSGTRK2026010500-1.LOG", "MSGTRK2026010500-2.LOG"]
    assert all(p.stat().st_size <= 64 * 1024 for p in tmp_path.rglob("*.LOG"))


def _lines(folder, server, marker):
    return sorted(line.split(b",", 1)[0].decode() for path in (folder / server).glob("MSGTRK2*.LOG")
                  for line in path.read_bytes().splitlines() if marker in line)


def test_a_server_logs_its_health_probe_every_5_minutes_while_up_and_loads_its_queue_when_it_restarts(tmp_path):
    # mbx01 is down from 01:00 to 01:30 and comes back with the same database; mbx02 with a new one.
    faults = [crash("mbx01", duration="00:30:00"), crash("mbx02", duration="00:30:00", restart="new_database")]
    to_mtl(topology(faults, duration="02:00:00"), 7, tmp_path)
    probes = _lines(tmp_path, "MBX01", b",RECEIVE,")
    probes = [t for t in probes if t in _lines(tmp_path, "MBX01", b"Inbound proxy probe")]
    assert len([t for t in probes if t < "2026-01-05T02:00"]) == 24 - 6 and not [t for t in probes if "T01:00" <= t[:16].replace("2026-01-05", "") < "T01:30"]
    assert probes[:2] == ["2026-01-05T00:00:07.000Z", "2026-01-05T00:05:07.000Z"]
    loads = _lines(tmp_path, "MBX01", b",LOAD,")
    assert loads and set(loads) == {"2026-01-05T01:30:00.000Z"}  # what it held at boot, logged at once
    assert _lines(tmp_path, "MBX02", b",LOAD,") == []  # a new, empty database loads nothing


def test_a_skewed_server_logs_its_health_probes_by_its_own_clock_in_the_order_it_writes_its_lines(tmp_path):
    # mbx01's clock runs 140 s behind, mbx03's 140 s ahead (280 s apart, within the ingester's 5 minutes): every line a server logs carries its own clock, so
    # each of its files goes forward in time (but for a probe's DROP, 40 ms after its RECEIVE), and the shadow
    # lines of a message join their primary's RECEIVE.
    skews = [{"kind": "clock_skew", "server": "mbx01", "duration": "03:00:00", "offset": "-140s"},
             {"kind": "clock_skew", "server": "mbx03", "duration": "03:00:00", "offset": "+140s"}]
    to_mtl(topology(skews, duration="01:00:00", rate=0.2), 7, tmp_path)
    for path in tmp_path.rglob("MSGTRK2*.LOG"):
        times = [parse_time(line.split(b",", 1)[0].decode()) for line in path.read_bytes().splitlines()
                 if not line.startswith(b"#")]
        assert all(later > earlier - 1000 for earlier, later in zip(times, times[1:])), path
    assert _lines(tmp_path, "MBX01", b"Inbound proxy probe")[0] == "2026-01-04T23:57:47.000Z"  # 00:00:07 - 140 s
    assert _lines(tmp_path, "MBX03", b"Inbound proxy probe")[0] == "2026-01-05T00:02:41.000Z"  # 00:00:21 + 140 s
    counts = ingest(sorted(str(p) for p in tmp_path.iterdir() if p.is_dir()), ListSink())
    assert counts.unjoined == 0 and counts.dead_letters == 0


def test_servers_log_their_health_probes_while_the_simulation_drains_after_the_workload(tmp_path):
    # mbx01 dies for good 10 minutes before the workload ends; its shadow promotes its copies 30 minutes after
    # its last contact, so the run goes on past 01:00. mbx02 and mbx03 are up all along: they go on logging
    # their probes, and the log-fed twin does not take their silence after 01:00 for a stopped feed.
    faults = [crash("mbx01", at="00:50:00", restart="never", backlog="00:00:00")]
    check = check_logs(topology(faults, duration="01:00:00", rate=0.2,
                                shadow_redundancy={"shadow_resubmit_time_span": "00:30:00"}), 7, tmp_path)
    last = max(t for server in ("MBX02", "MBX03") for t in _lines(tmp_path, server, b"Inbound proxy probe"))
    assert last > "2026-01-05T01:20" and check.false_alerts == []


def test_a_server_alone_in_its_site_down_makes_no_message_not_redundant_that_got_its_copy(tmp_path):
    # mbx03, alone in lon, is down 20 minutes: mbx01's and mbx02's messages fail four times on it (PreferRemote),
    # then get their copy in nyc. Their HAREDIRECTFAIL lines say no site: before, the log-fed twin counted
    # them against the local budget and said NOT_REDUNDANT at the second (hunt seed 339: 8 such alerts).
    check = check_logs(topology([crash("mbx03", at="00:10:00", duration="00:20:00", backlog="00:00:00")],
                                duration="00:40:00", rate=0.2), 7, tmp_path)
    assert len(_lines(tmp_path, "MBX01", b",HAREDIRECTFAIL,") + _lines(tmp_path, "MBX02", b",HAREDIRECTFAIL,")) > 10

    def not_redundant(result):
        return {m.message.message_id for a in result.alerts if a.type is AlertType.NOT_REDUNDANT for m in a.messages}
    assert not_redundant(check.logs) == not_redundant(check.native)
    assert check.false_alerts == []


def test_a_primary_whose_preference_leaves_no_candidate_logs_the_failure_and_its_refusals_are_not_kept(tmp_path):
    """LocalOnly and RejectMessageOnShadowFailure $true: mbx03, alone in lon, has no peer to try, so it
    fails every shadow copy (NO_PEER, the log's HAREDIRECTFAIL) and answers 451. Before, the simulator
    said nothing of the copy, so on the log path each refused attempt (a RECEIVE alone) was taken as
    queued and reported MESSAGE_EXPIRED (hunt seed 993: 11,099 false alerts)."""
    topo = topology(duration="01:00:00", rate=0.1, shadow_redundancy={
        "shadow_message_preference_setting": "LocalOnly", "reject_message_on_shadow_failure": True,
        "message_expiration_timeout": "00:20:00"})
    check = check_logs(topo, 7, tmp_path)
    refused = [a for a in check.logs.alerts if a.type is AlertType.REJECTED_NO_SHADOW and a.servers[0] == "mbx03"]
    assert refused and not [a for a in check.false_alerts if a.type is AlertType.MESSAGE_EXPIRED]


def test_mail_to_and_from_a_mailbox_database_names_the_server_whose_services_handled_it_never_the_database(tmp_path):
    """A mailbox database is no host: the Transport service hands mail to the Mailbox Transport Delivery service
    of a server, and takes submissions from its Mailbox Transport Submission service. Before, the SEND, the
    delivery lines and the submission's RECEIVE named the database (DB01) as their host, so the ingester took
    it for a server that answered SMTP, and the twin said it had stopped with the others (hunt seeds 1001, 1105:
    EVENTS_STOPPED naming db01)."""
    to_mtl(topology(duration="00:30:00", rate=0.2), 7, tmp_path)
    hosts = {field for path in tmp_path.rglob("*.LOG") for line in path.read_bytes().splitlines()
             if not line.startswith(b"#") for field in line.split(b",")[2:5:2]}
    assert {b"mbx01", b"mbx02", b"mbx03"} <= hosts and not hosts & {b"DB01", b"DB02"}
    sink = ListSink()
    ingest(sorted(str(p) for p in tmp_path.iterdir() if p.is_dir()), sink, internal_domains=frozenset({"contoso.com"}))
    servers = {"mbx01", "mbx02", "mbx03"}
    assert {e.node for e in sink.events} == servers
    assert {e.mailbox_server for e in sink.events if isinstance(e, DeliveredToMailbox)} == servers


def test_a_clock_set_back_does_not_bring_the_other_servers_probes_forward(tmp_path):
    # mbx03's clock is set back 240 s at 00:30:00. The events mbx03 made just before (stamped by its clock then)
    # were written after the step: the writer took them for events 240 s later and wrote the other servers'
    # probes due in between first, so mbx01's file went back in time and the ingester, its primary's RECEIVE
    # read minutes late, left mbx03's HARECEIVE unjoined (hunt seed 1754: 6 false MESSAGE_EXPIRED).
    skew = [{"kind": "clock_skew", "server": "mbx03", "at": "00:30:00", "duration": "00:10:00", "offset": "-240s"}]
    to_mtl(topology(skew, duration="01:00:00", rate=0.5), 7, tmp_path)
    for server in ("MBX01", "MBX02"):
        for path in (tmp_path / server).glob("MSGTRK2*.LOG"):
            times = [parse_time(line.split(b",", 1)[0].decode()) for line in path.read_bytes().splitlines()
                     if not line.startswith(b"#")]
            assert all(later > earlier - 1000 for earlier, later in zip(times, times[1:])), path


def test_a_promotion_the_native_twin_saw_happen_makes_the_log_twins_forecast_of_it_no_false_alert(tmp_path):
    # ShadowHeartbeatFrequency 30 s, ShadowResubmitTimeSpan 5 minutes: ex01 dies for good at 03:11, its last
    # contact with ex02 an answered query. ex02's promotion comes at that query + 5 minutes, 20 ms before the native
    # twin's deadline (counted from the answer): the native twin promotes with it, at its ShadowPromoted (before
    # 1190f24 it recorded the promotion with no alert); the log-fed twin forecasts it 0.6 s before, from ex01's last
    # line. Before, the check counted that forecast a false alert (hunt seed 1709: 1, 1748: 1).
    topo = topology_from({
        "organisation": {"start": "2026-01-05T00:00:00Z", "duration": "03:20:00", "users_per_database": 50},
        "servers": [{"name": "ex01", "site": "s1", "dag": "dag1"}, {"name": "ex02", "site": "s2", "dag": "dag1"}],
        "mailbox_databases": [{"name": "DB01", "dag": "dag1"}],
        "internet": {"senders": ["mx.fabrikam.com"], "receivers": ["fabrikam.com"]},
        "workload": {"messages_per_second": 0.05},
        "shadow_redundancy": {"shadow_heartbeat_frequency": "00:00:30", "shadow_resubmit_time_span": "00:05:00",
                              "shadow_silence_heartbeats": 12},
        "faults": [{"kind": "crash", "at": "03:11:00", "server": "ex01", "restart": "never", "backlog": "00:01:00"}]})
    check = check_logs(topo, 1709, tmp_path)
    seen = {o.ref.message_id for o in check.native.outcomes if o.result == "promoted"}
    assert set(check.expected) == set(check.found) == seen
    assert {m.message.message_id for a in check.native.alerts if a.type in PROMOTION_ALERTS for m in a.messages} >= seen
    assert check.false_alerts == []
