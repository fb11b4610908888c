"""`shadowtwin whatif` as an operator runs it, on a recorded outage."""

import dataclasses
import json
import subprocess
import sys

import pytest

from producers.recording import read_events, write_events
from tests.state.scenario import Org


def outage_recording(path, external=("bob@fabrikam.com",)):
    """mbx01 holds three messages (shadows on mbx02) and dies for 5 hours; it comes back with the same database."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0)]
    for i in range(3):
        events += [*org.received("mbx01", f"m{i}", 1, external=external),
                   *org.shadowed("mbx01", "mbx02", f"m{i}", 1)]
    events += [*org.query_ok("mbx02", "mbx01", 2), *org.heartbeats_failing("mbx02", "mbx01", 4, 5 * 60),
               *org.started("mbx01", "dbP1", 5 * 60)]
    write_events(path, events)


def whatif(*args):
    return subprocess.run([sys.executable, "-m", "shadowtwin.cli", "whatif", *map(str, args)],
                          capture_output=True, text=True)


def test_summary_compares_two_resubmit_spans_and_writes_the_decisions(tmp_path):
    recording = tmp_path / "outage.jsonl"
    outage_recording(recording)
    result = whatif(recording, "--compare", "ShadowResubmitTimeSpan=01:00:00", "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = next(line for line in lines if "baseline" in line)
    assert "ShadowResubmitTimeSpan=01:00:00" in header
    promotions = next(line for line in lines if line.startswith("promotions"))
    assert promotions.count("1 (3 messages)") == 2
    duplicates = next(line for line in lines if line.startswith("expected duplicate deliveries"))
    assert duplicates.count("3 (3 seen by people)") == 2
    delays = next(line for line in lines if line.startswith("delay per hop")).split()
    assert delays[-1] == "1.0h" and "3.0h" in delays, "the longest wait follows the span"
    commands = (tmp_path / "out" / "commands.jsonl").read_text().splitlines()
    assert len(commands) == 3 and json.loads(commands[0])["reason"] == "PRIMARY_HEARTBEAT_TIMEOUT"
    assert (tmp_path / "out" / "compare" / "alerts.jsonl").exists()


def test_an_output_folder_in_a_folder_that_does_not_exist_is_refused_and_nothing_is_made(tmp_path):
    """--out and --report used to make the missing folders (a mistyped path made a tree)."""
    recording = tmp_path / "outage.avro"
    outage_recording(recording)
    for options, named in ((["--out", tmp_path / "typo" / "out"], tmp_path / "typo" / "out"),
                           (["--out", tmp_path / "out", "--report", tmp_path / "typo" / "report"],
                            tmp_path / "typo" / "report")):
        result = whatif(recording, *options)
        assert result.returncode == 2 and result.stderr.splitlines() == [
            f"shadowtwin whatif: {named}: No such file or directory"], result.stderr
        assert [p.name for p in tmp_path.iterdir()] == ["outage.avro"], "no folder left behind"


@pytest.mark.parametrize("option", ["--out", "--report"])
def test_an_output_folder_that_is_a_file_is_refused_as_one(option, tmp_path):
    """`--out summary.txt` said only 'summary.txt: File exists', as if it would not overwrite it."""
    recording = tmp_path / "outage.avro"
    outage_recording(recording)
    (tmp_path / "summary.txt").write_text("kept")
    result = whatif(recording, option, tmp_path / "summary.txt")
    assert result.returncode == 2 and result.stderr.splitlines() == [
        f"shadowtwin whatif: {option} {tmp_path / 'summary.txt'}: a file, not a folder (it writes its files into a"
        " folder)"], result.stderr
    assert (tmp_path / "summary.txt").read_text() == "kept"


def test_per_node_setting_and_a_bad_name_is_refused(tmp_path):
    recording = tmp_path / "outage.avro"
    outage_recording(recording)
    per_node = whatif(recording, "--set", "mbx02:shadow_resubmit_time_span=30m")
    assert per_node.returncode == 0, per_node.stderr
    assert "31.0m" in next(line for line in per_node.stdout.splitlines() if line.startswith("delay per hop"))
    bad = whatif(recording, "--set", "ShadowResubmitTimespam=1h")
    assert bad.returncode == 2 and "ShadowResubmitTimespam" in bad.stderr and len(bad.stderr.splitlines()) == 1


def test_the_twins_own_parameters_are_asked_what_if_for_every_server(tmp_path):
    """mbx01 is back 2 hours after its shadows promoted its messages, for mailbox users only. Before, `--compare
    TrackDuplicates=06:00:00` was refused ('unknown key'), though `[shadow_redundancy]` takes track_duplicates: one
    could not ask how many duplicates mailbox users would see with their stores' Track Duplicates at 6 hours."""
    recording = tmp_path / "outage.jsonl"
    outage_recording(recording, external=())
    result = whatif(recording, "--compare", "TrackDuplicates=06:00:00", "--json")
    assert result.returncode == 0, result.stderr
    seen = {s["label"]: (s["duplicates"], s["duplicates_seen"]) for s in json.loads(result.stdout)["summaries"]}
    assert seen == {"baseline": (3, 3), "TrackDuplicates=06:00:00": (3, 0)}
    one_node = whatif(recording, "--set", "mbx01:track_duplicates=6h")
    assert one_node.returncode == 2 and one_node.stderr.splitlines() == [
        "shadowtwin whatif: --set: parameters: mbx01:track_duplicates: the twin's own parameter, one value for every"
        " server; expected it without a node"], one_node.stderr
    misspelt = whatif(recording, "--set", "track_duplicate=6h")
    assert misspelt.returncode == 2 and "did you mean track_duplicates?" in misspelt.stderr, misspelt.stderr


@pytest.mark.parametrize("option", ["--set", "--compare"])
def test_a_parameter_set_twice_in_one_run_is_refused(option, tmp_path):
    """Before: `--compare ShadowResubmitTimeSpan=1h --compare shadow_resubmit_time_span=2h` ran with 2h only, exit 0,
    under a column headed with both values. The same parameter for another node, or in the other run, is taken."""
    recording = tmp_path / "outage.avro"
    outage_recording(recording)
    twice = whatif(recording, option, "ShadowResubmitTimeSpan=1h", option, "MBX02:shadowresubmittimespan=3h",
                   option, "shadow_resubmit_time_span=2h")
    assert twice.returncode == 2 and twice.stderr.splitlines() == [
        f"shadowtwin whatif: {option}: 'ShadowResubmitTimeSpan=1h' and 'shadow_resubmit_time_span=2h' set the same"
        " parameter: a run takes one value (to compare two, --set one and --compare the other)"], twice.stderr
    assert twice.stdout == ""
    other_run = whatif(recording, "--set", "ShadowResubmitTimeSpan=1h", "--compare", "ShadowResubmitTimeSpan=2h")
    assert other_run.returncode == 0, other_run.stderr


@pytest.mark.parametrize("assignment", ["=1h", "mbx02:=1h", " =1h"])
def test_an_assignment_with_no_name_says_so(assignment, tmp_path):
    """Before: 'parameters: : unknown key; known: max_acknowledgement_delay, ...', as if a parameter had been named."""
    recording = tmp_path / "outage.avro"
    outage_recording(recording)
    result = whatif(recording, "--set", assignment)
    assert result.returncode == 2 and result.stderr.splitlines() == [
        f"shadowtwin whatif: argument --set: expected NAME=VALUE or NODE:NAME=VALUE, got {assignment!r} (no name before"
        " the =) (see shadowtwin whatif --help)"]


@pytest.mark.parametrize("spelled, named", [
    (["ShadowResubmitTimeSpan", "01:00:00"], "ShadowResubmitTimeSpan"),
    (["-ShadowResubmitTimeSpan", "01:00:00"], "-ShadowResubmitTimeSpan")])
def test_a_parameter_written_as_powershell_takes_it_is_told_to_write_name_equals_value(spelled, named, tmp_path):
    """Before: 'unrecognized argument: 01:00:00' and '--set: expected one argument', neither naming the mistake."""
    recording = tmp_path / "outage.avro"
    outage_recording(recording)
    result = whatif(recording, "--compare", *spelled)
    assert result.returncode == 2 and result.stderr.splitlines() == [
        f"shadowtwin whatif: argument --compare: expected NAME=VALUE or NODE:NAME=VALUE, got {named!r} (see shadowtwin"
        " whatif --help)"], result.stderr


def test_a_parameter_in_powershells_spelling_with_its_dash_is_taken(tmp_path):
    """`--compare -ShadowResubmitTimeSpan=01:00:00`: argparse took the value for an option ('expected one argument')."""
    recording = tmp_path / "outage.avro"
    outage_recording(recording)
    result = whatif(recording, "--compare", "-ShadowResubmitTimeSpan=01:00:00")
    assert result.returncode == 0, result.stderr
    assert "-ShadowResubmitTimeSpan=01:00:00" in next(line for line in result.stdout.splitlines() if "baseline" in line)


def test_an_hour_written_hh_mm_is_read_and_a_span_too_long_for_timespan_is_one_line(tmp_path):
    """Before: "1:00" was refused; "100000000000000000000d" ended in an OverflowError's traceback."""
    recording = tmp_path / "outage.avro"
    outage_recording(recording)
    hour, too_long = (whatif(recording, option, f"ShadowResubmitTimeSpan={value}")
                      for option, value in (("--compare", "1:00"), ("--set", "100000000000000000000d")))
    assert hour.returncode == 0, hour.stderr
    assert "1.0h / 1.0h" in next(line for line in hour.stdout.splitlines() if line.startswith("delay per hop"))
    assert too_long.returncode == 2 and len(too_long.stderr.splitlines()) == 1, too_long.stderr
    assert "ShadowResubmitTimeSpan = '100000000000000000000d'" in too_long.stderr
    assert "longer than Exchange's TimeSpan holds" in too_long.stderr


def test_a_longer_span_leaves_out_the_promotions_the_shadows_recorded_at_theirs(tmp_path):
    """The outage above, with mbx02's own ShadowPromoted of m0..m2 at 3 h 2 min (the recorded span, 3 h, after its
    last answer): asked 'what if ShadowResubmitTimeSpan were 6 hours', mbx01 is back at 5 h, before any shadow would
    promote. Before, the 6 h column still closed m0..m2 promoted at 3 h (the recording's promotions) and forecast
    all three delivered twice; now it decides its promotions itself: none, and no duplicate. The baseline keeps
    them."""
    org = Org()
    recording = tmp_path / "outage.jsonl"
    outage_recording(recording)
    promoted = [e for i in range(3) for e in org.promoted("mbx02", "mbx01", f"m{i}", 182)]
    write_events(recording, sorted([*read_events(recording), *promoted], key=lambda e: e.event_time_ms))
    result = whatif(recording, "--compare", "ShadowResubmitTimeSpan=6h")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    promotions = next(line for line in lines if line.startswith("promotions")).split("  ")
    duplicates = next(line for line in lines if line.startswith("expected duplicate")).split("  ")
    assert [p.strip() for p in promotions if p.strip()][1:] == ["1 (3 messages)", "0 (0 messages)"], promotions
    assert [d.strip() for d in duplicates if d.strip()][1:] == ["3 (3 seen by people)", "0 (0 seen by people)"]
    assert "ShadowResubmitTimeSpan=6h: 3 ShadowPromoted events left out" in result.stdout


def test_a_whole_number_alone_for_a_span_is_taken_as_days_and_said_so(tmp_path):
    """`--compare ShadowResubmitTimeSpan=90` is 90 days, as Exchange reads a TimeSpan; the column heading only said
    'ShadowResubmitTimeSpan=90', and someone who meant seconds never knew. Now one line on stderr says it."""
    recording = tmp_path / "outage.avro"
    outage_recording(recording)
    days, seconds = (whatif(recording, "--compare", f"ShadowResubmitTimeSpan={value}") for value in ("90", "90s"))
    assert days.returncode == 0 and days.stderr.splitlines() == [
        "shadowtwin whatif: --compare ShadowResubmitTimeSpan=90: 90 alone is 90 days, as Exchange reads a TimeSpan"
        " (write 90s, 90m or 90h for seconds, minutes or hours)"], days.stderr
    assert seconds.returncode == 0 and seconds.stderr == ""
    count = whatif(recording, "--set", "ShadowHeartbeatRetryCount=5")
    assert count.returncode == 0 and count.stderr == "", "a count is no span"


@pytest.mark.parametrize("option", ["--set", "--compare"])
def test_a_per_node_setting_names_its_server_in_any_case_as_exchange_does(option, tmp_path):
    """Before: `MBX02:` was refused as no server of the recording, with no suggestion."""
    recording = tmp_path / "outage.avro"
    outage_recording(recording)
    per_node = whatif(recording, option, "MBX02:shadow_resubmit_time_span=30m")
    assert per_node.returncode == 0, per_node.stderr
    delays = next(line for line in per_node.stdout.splitlines() if line.startswith("delay per hop"))
    assert "31.0m" in delays, "the setting changed mbx02"


def test_a_per_node_setting_for_a_declared_server_the_recording_does_not_name_is_let_through(tmp_path, monkeypatch,
                                                                                           capsys):
    from shadowtwin.cli import main

    recording = tmp_path / "outage.jsonl"
    outage_recording(recording)
    monkeypatch.setenv("SHADOWTWIN_SHADOW_REDUNDANCY_SERVERS", "mbx01,mbx02,hub09")  # hub09 was quiet that day
    assert main(["whatif", str(recording), "--set", "hub09:ShadowResubmitTimeSpan=5m"]) == 0
    assert "hub09:ShadowResubmitTimeSpan=5m" in capsys.readouterr().out


def quiet_outage(org):
    """mbx01 holds three messages (shadows on mbx02) and is silent for an hour: less than the 3-hour span."""
    events = [*org.started("mbx01", "dbP1", 0)]
    for i in range(3):
        events += [*org.received("mbx01", f"m{i}", 1, external=["bob@fabrikam.com"]),
                   *org.shadowed("mbx01", "mbx02", f"m{i}", 1)]
    return events + [*org.query_ok("mbx02", "mbx01", 2), *org.heartbeats_failing("mbx02", "mbx01", 4, 60)]


def test_an_event_stamped_a_day_ahead_is_a_dead_letter_and_moves_no_clock(tmp_path):
    from schemas import jsonl
    from schemas.events import DeadLetter

    org = Org()
    honest = quiet_outage(org)
    write_events(tmp_path / "honest.jsonl", honest)
    ahead = org.started("mbx03", "dbP3", 24 * 60)[0]  # a node whose clock runs a day ahead
    skewed = tmp_path / "skewed.jsonl"
    write_events(skewed, [*honest[:5], ahead, *honest[5:]])
    clean = whatif(tmp_path / "honest.jsonl", "--out", tmp_path / "clean")
    result = whatif(skewed, "--out", tmp_path / "out")
    assert clean.returncode == 0 and result.returncode == 0, result.stderr
    assert "1 events left out: stamped more than 300 s ahead" in result.stdout
    assert result.stdout.splitlines()[0] == clean.stdout.splitlines()[0], "the same span: the run is not stretched"
    for name in ("alerts.jsonl", "commands.jsonl"):
        assert (tmp_path / "out" / name).read_text() == (tmp_path / "clean" / name).read_text()
    assert (tmp_path / "out" / "alerts.jsonl").read_text() == "", "no false promotion at the day-ahead clock"
    (letter,) = jsonl.read((tmp_path / "out" / "dead_letters.jsonl").read_text().splitlines())
    assert isinstance(letter, DeadLetter) and letter.topic == str(skewed) and letter.offset == 6
    assert "ahead of the latest event time before it" in letter.reason


@pytest.mark.parametrize("event_time_ms", [253_402_300_800_000, -62_135_596_800_001, -1, 2**63 - 1, -2**63],
                         ids=["year 10000", "year 0", "before 1970", "largest long", "smallest long"])
@pytest.mark.parametrize("place", [0, 5], ids=["first", "later"])
def test_an_event_time_out_of_range_is_a_dead_letter_and_the_replay_goes_on(tmp_path, event_time_ms, place):
    """Before, year 10000 or year 0 first (or later, with a Kafka timestamp) ended whatif in a traceback
    (ValueError: year 10000 is out of range), and -1 first left every later event out as a day ahead."""
    from schemas import jsonl
    from schemas.events import DeadLetter

    org = Org()
    honest = quiet_outage(org)
    write_events(tmp_path / "honest.jsonl", honest)
    odd = dataclasses.replace(org.started("mbx03", "dbP3", 3)[0], event_time_ms=event_time_ms)
    recording = tmp_path / "odd.avro"
    write_events(recording, [*honest[:place], odd, *honest[place:]])
    clean = whatif(tmp_path / "honest.jsonl", "--out", tmp_path / "clean")
    result = whatif(recording, "--out", tmp_path / "out", "--report", tmp_path / "report")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "1 events left out: event time before 1970 or after 2262-04-11" in result.stdout
    assert result.stdout.splitlines()[0] == clean.stdout.splitlines()[0], "the same span and servers"
    assert (tmp_path / "out" / "alerts.jsonl").read_text() == (tmp_path / "clean" / "alerts.jsonl").read_text()
    (letter,) = jsonl.read((tmp_path / "out" / "dead_letters.jsonl").read_text().splitlines())
    assert isinstance(letter, DeadLetter) and letter.offset == place + 1
    assert letter.reason.startswith(f"event time out of range: {event_time_ms} ms")


def test_a_recorded_kafka_timestamp_is_the_reference(tmp_path):
    org = Org()
    events = quiet_outage(org)
    late = [(e, e.event_time_ms) for e in events]
    late[3] = (late[3][0], late[3][1] - 10 * 60_000)  # taken in by Kafka ten minutes before its stamp
    write_events(tmp_path / "recorded.avro", late, timestamps=True)
    result = whatif(tmp_path / "recorded.avro", "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert "1 events left out" in result.stdout
    assert "ahead of its Kafka ingestion time" in (tmp_path / "out" / "dead_letters.jsonl").read_text()


def test_out_writes_where_every_message_is_at_the_end_as_the_twins_state_topic_says_it(tmp_path):
    org = Org()
    recording = tmp_path / "in-flight.jsonl"
    write_events(recording, [*org.started("mbx01", "dbP1", 0), *org.received("mbx01", "m0", 1),
                             *org.shadowed("mbx01", "mbx02", "m0", 1), *org.query_ok("mbx02", "mbx01", 2)])
    result = whatif(recording, "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    records = {r["key"]: r for r in map(json.loads, (tmp_path / "out" / "state.jsonl").read_text().splitlines())}
    assert set(records) == {"server/mbx01", "message/mbx01/m0"}
    assert records["server/mbx01"]["shadow_copies_by_holder"] == {"mbx02": 1}
    assert (records["message/mbx01/m0"]["status"], records["message/mbx01/m0"]["shadow"]["server"]) == \
        ("in_queue", "mbx02")


def test_a_per_node_override_applies_to_the_server_named_in_another_case(tmp_path):
    """Exchange reads server names in any case, and message-tracking logs give them in lower case: an override
    for MBX01 and MBX02 used to change nothing for mbx01 and mbx02, silently."""
    recording = tmp_path / "outage.jsonl"
    outage_recording(recording)
    conf = tmp_path / "shadowtwin.toml"
    conf.write_text('[shadow_redundancy]\nservers = ["MBX01", "MBX02"]\n'
                    '[shadow_redundancy.nodes.MBX01]\nshadow_resubmit_time_span = "10:00:00"\n'
                    '[shadow_redundancy.nodes.MBX02]\nshadow_resubmit_time_span = "10:00:00"\n')
    result = subprocess.run([sys.executable, "-m", "shadowtwin.cli", "--conf", conf, "whatif", recording, "--json"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    (summary,) = json.loads(result.stdout)["summaries"]
    assert summary["promotions"] == 0, "the 5-hour outage is shorter than the 10 hours MBX02 waits"
    baseline = json.loads(whatif(recording, "--json").stdout)["summaries"][0]
    assert baseline["promotions"] == 1, "with the default 3 hours it promotes"


def test_a_jsonl_recording_saved_with_a_byte_order_mark_is_read_as_without(tmp_path):
    """A recording edited in a Windows editor starts with a UTF-8 BOM: whatif used to refuse it,
    'not JSON: Unexpected UTF-8 BOM (decode using utf-8-sig) (column 1)', exit 2."""
    plain, marked = tmp_path / "plain.jsonl", tmp_path / "marked.jsonl"
    outage_recording(plain)
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    read = whatif(marked, "--json")
    assert read.returncode == 0, read.stderr
    assert read.stdout == whatif(plain, "--json").stdout


def test_messages_of_two_servers_with_the_same_internal_id_count_twice(tmp_path):
    """Exchange numbers each server's messages on its own (internal-message-id 1, 2, ... in its logs), so two primaries'
    messages share ids. Before, the summary counted the ids of all servers as one set: mbx01's and mbx02's message 1,
    each promoted by the other, were 1 message tracked and '2 (1 messages)' promoted; simulate --format exchange-mtl's
    14 hours, ingested and recorded, were 57,425 messages tracked where the same day's events give 152,820."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbP2", 0),
              *org.received("mbx01", "1", 1), *org.shadowed("mbx01", "mbx02", "1", 1),
              *org.received("mbx02", "1", 1), *org.shadowed("mbx02", "mbx01", "1", 1, db="dbP2"),
              *org.heartbeats_failing("mbx02", "mbx01", 2, 4 * 60),
              *org.heartbeats_failing("mbx01", "mbx02", 2, 4 * 60, shadow_db="dbS2")]
    write_events(tmp_path / "day.jsonl", events)
    result = whatif(tmp_path / "day.jsonl", "--json")
    assert result.returncode == 0, result.stderr
    (summary,) = json.loads(result.stdout)["summaries"]
    assert (summary["messages"], summary["promotions"], summary["promoted_messages"]) == (2, 2, 2)


def test_a_quiet_spell_longer_than_the_clock_skew_limit_leaves_nothing_out(tmp_path):
    """A simulated small organisation's night has spells of more than five minutes without an event. Before,
    a recording without Kafka timestamps (simulate's) lost every event after the first such spell to the
    clock-skew guard ('148238 events left out' of 151,373), and whatif showed the first two hours, exit 0."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0)]
    for i in range(3):  # ten quiet minutes, then mbx01 takes three messages and dies for 5 hours
        events += [*org.received("mbx01", f"m{i}", 10, external=["bob@fabrikam.com"]),
                   *org.shadowed("mbx01", "mbx02", f"m{i}", 10)]
    events += [*org.query_ok("mbx02", "mbx01", 11), *org.heartbeats_failing("mbx02", "mbx01", 13, 5 * 60)]
    write_events(tmp_path / "night.jsonl", events)
    result = whatif(tmp_path / "night.jsonl", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["skewed_events"] == 0
    (summary,) = report["summaries"]
    assert (summary["events"], summary["promoted_messages"]) == (len(events), 3)


def test_a_heartbeat_shorter_than_the_recorded_queries_judges_silence_at_the_recorded_rate(tmp_path):
    """mbx01 holds m0..m2 for half an hour, their copies on mbx02, whose queries every 2 minutes (the configured
    ShadowHeartbeatFrequency) are all answered; mbx03 is busy meanwhile. Asked 'what if it were 30 seconds', the run found mbx02 silent
    90 seconds after each query (3 heartbeats): 15 SHADOW_SERVER_UNREACHABLE alerts for the three copies, though
    nothing failed: the recording holds no query between two, and a replay cannot make them. Now the run judges
    silence over as many of its heartbeats as the recorded rate takes, and says so; a longer heartbeat needs
    nothing."""
    org = Org()
    recording = tmp_path / "quiet.jsonl"
    events = [*org.started("mbx01", "dbP1", 0), *org.started("mbx02", "dbS1", 0)]
    for i in range(3):
        events += [*org.received("mbx01", f"m{i}", 1), *org.shadowed("mbx01", "mbx02", f"m{i}", 1)]
    for minute in range(2, 32, 2):
        events += org.query_ok("mbx02", "mbx01", minute)
    events += org.busy("mbx03", 0, 32, every=0.25)  # the feed is alive between two queries
    write_events(recording, sorted(events, key=lambda e: e.event_time_ms))
    shorter = whatif(recording, "--compare", "ShadowHeartbeatFrequency=30s", "--out", tmp_path / "out")
    assert shorter.returncode == 0, shorter.stderr
    for run in (tmp_path / "out", tmp_path / "out" / "compare"):
        alerts = [json.loads(line)["type"] for line in (run / "alerts.jsonl").read_text().splitlines()]
        assert "SHADOW_SERVER_UNREACHABLE" not in alerts, (run, alerts)
    assert ("ShadowHeartbeatFrequency=30s: mbx02 queried every 2.0m in the recording (median), a heartbeat of this"
            " run is 30.0s: a replay cannot make the queries a recording lacks, so a shadow is taken to be silent"
            " after 6.0m without one (12 heartbeats, not 3)") in shorter.stdout
    said = shorter.stdout.split("\n\n")[-2].strip()
    as_json = whatif(recording, "--compare", "ShadowHeartbeatFrequency=30s", "--json", "--report", tmp_path / "r")
    assert json.loads(as_json.stdout)["notes"] == [said], "--json carries what the table's notes say"
    report = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert report["notes"] == [said] and report["skewed_events"] == 0
    longer = whatif(recording, "--compare", "ShadowHeartbeatFrequency=5m")
    assert longer.returncode == 0 and "queried every" not in longer.stdout, longer.stdout
