"""Bad input as a person types it: one line on stderr naming the file or argument and the problem,
exit status 2, no traceback (unless --debug); a closed pipe ends quietly."""

import functools
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from producers.recording import write_events
from tests.shadowtwin.test_whatif import outage_recording

CLI = [sys.executable, "-m", "shadowtwin.cli"]


def shadowtwin(*args, cwd=None):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=120, cwd=cwd)


def one_line_naming(result, *names):
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for name in names:
        assert str(name) in lines[0], (name, lines[0])
    return lines[0]


@pytest.fixture
def recording(tmp_path):
    path = tmp_path / "outage.avro"
    outage_recording(path)
    return path


def test_replay_of_a_missing_file(tmp_path):
    one_line_naming(shadowtwin("replay", tmp_path / "gone.avro"), tmp_path / "gone.avro", "no such file")


def test_replay_of_a_folder_named_as_a_recording_says_it_is_a_folder(tmp_path):
    """It used to say 'no such file' of a folder that is there."""
    (tmp_path / "day.avro").mkdir()
    one_line_naming(shadowtwin("replay", tmp_path / "day.avro"), f"{tmp_path / 'day.avro'}: Is a directory")


def test_replay_of_a_file_that_is_no_recording(tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    one_line_naming(shadowtwin("replay", tmp_path / "notes.txt"), "notes.txt", "a recording ends in")


@pytest.mark.parametrize("command", ["replay", "whatif"])
def test_a_message_tracking_log_given_for_a_recording_is_told_ingest_reads_it(command, tmp_path):
    """`whatif MSGTRK2026010500-1.LOG` said only 'a recording ends in .jsonl, .ndjson, .avro'."""
    log = tmp_path / "MSGTRK2026010500-1.LOG"
    log.write_text("#Software: Microsoft Exchange Server\r\n")
    one_line_naming(shadowtwin(command, log), f"{log}: a recording ends in .jsonl, .ndjson, .avro (a message-tracking"
                    " log is read by shadowtwin ingest exchange-mtl, which publishes its events)")


@pytest.mark.parametrize("command", ["replay", "whatif"])
def test_a_gzipped_recording_is_told_to_be_gunzipped(command, tmp_path):
    """`whatif day.jsonl.gz` said only 'a recording ends in .jsonl, .ndjson, .avro'."""
    packed = tmp_path / "day.jsonl.gz"
    packed.write_bytes(b"\x1f\x8b")
    one_line_naming(shadowtwin(command, packed), f"{packed}: a recording ends in .jsonl, .ndjson, .avro (gunzip it"
                    " first: day.jsonl)")


@pytest.mark.parametrize("args, says", [
    (["twin", "run", "--trigger", "5"], 'shadowtwin twin: unrecognized arguments: --trigger 5; it is a setting, not an'
                                        ' option: [spark] trigger_interval = "2 seconds" in the configuration, or'
                                        ' SHADOWTWIN_SPARK_TRIGGER_INTERVAL="5 seconds"'),
    (["whatif", "day.avro", "--sett", "x=1"], "shadowtwin whatif: unrecognized arguments: --sett x=1; did you mean --set?"),
    (["simulate", "--second", "5"], "shadowtwin simulate: unrecognized arguments: --second 5; did you mean --seconds?"),
    (["whatif", "day.avro", "--conf", "c.toml"], "shadowtwin whatif: unrecognized arguments: --conf c.toml; it is"
     " shadowtwin's own option, which comes before the command (shadowtwin --conf c.toml whatif ...)"),  # not --json
    (["simulate", "--debug"], "shadowtwin simulate: unrecognized argument: --debug; it is shadowtwin's own option,"
     " which comes before the command (shadowtwin --debug simulate ...)"),
    (["whatif", "day.avro", "--se", "x=1"], "shadowtwin whatif: unrecognized arguments: --se x=1; did you mean --set?"),
], ids=["a setting", "a misspelt option", "the start of an option", "shadowtwin's option after the command",
        "shadowtwin's flag after the command", "a shortened option"])
def test_an_argument_the_command_does_not_take_is_named_by_the_command_with_what_was_meant(args, says):
    """`twin run --trigger 5` said 'shadowtwin: unrecognized arguments: --trigger 5 (see shadowtwin --help)'; `simulate
    --second 5` was taken as --seconds (argparse's abbreviations: 'simulate: --seconds is only for --live')."""
    assert one_line_naming(shadowtwin(*args), says).endswith(f"(see shadowtwin {args[0]} --help)")


@pytest.mark.parametrize("args, says", [
    (["commands", "--bootstrap", "127.0.0.1:1", "tail"],
     "shadowtwin commands: argument ACTION: --bootstrap 127.0.0.1:1: an option comes after the action (shadowtwin"
     " commands tail --bootstrap 127.0.0.1:1)"),
    (["alerts", "--bootstrap", "127.0.0.1:1", "tail"],
     "shadowtwin alerts: argument ACTION: --bootstrap 127.0.0.1:1: an option comes after the action (shadowtwin"
     " alerts ACTION --bootstrap 127.0.0.1:1)"),
], ids=["one action", "several actions"])
def test_an_option_before_the_action_is_said_to_come_after_it(args, says):
    """`commands --bootstrap 127.0.0.1:1 tail` said "argument ACTION: invalid choice: '127.0.0.1:1' (choose from
    'tail')": the address was taken for the action, and the message named it so."""
    one_line_naming(shadowtwin(*args), f"{says} (see shadowtwin {args[0]} --help)")
    one_line_naming(shadowtwin(args[0], "bogus"), "invalid choice: 'bogus'")


def test_an_option_of_other_commands_is_said_to_be_theirs_not_taken_for_a_setting():
    """`jars --json list` said "it is a setting, not an option: [twin] json_topics = "False" in the configuration, or
    SHADOWTWIN_TWIN_JSON_TOPICS="False"": --json, the print-as-JSON option of eight commands, was read as the start of
    a setting's name."""
    line = one_line_naming(shadowtwin("jars", "--json", "list"), "shadowtwin jars: unrecognized argument: --json; it is"
                                                                 " an option of kafka status, whatif, lab status, where,")
    assert "setting" not in line and "alerts tail" in line


def test_replay_with_a_bad_speed(recording):
    one_line_naming(shadowtwin("replay", recording, "--speed", "0"), "--speed 0")


def test_replay_with_a_speed_too_slow_to_use(recording):
    one_line_naming(shadowtwin("replay", recording, "--speed", "1e-300", "--bootstrap", "127.0.0.1:1"),
                    "--speed 1e-300: too slow to use")


@pytest.mark.parametrize("args, option", [
    (["replay", "{recording}", "--to", "a b"], "--to"),
    (["simulate", "--to-kafka", "--to", "x" * 250], "--to/--topic"),
    (["dead-letters", "tail", "--topic", ".."], "--topic"),
], ids=["a space", "250 characters", "dot dot"])
def test_a_topic_name_kafka_refuses_is_refused_naming_the_option_before_any_broker_is_asked(recording, args, option):
    """`replay --to 'a b'` asked the brokers first: 'a b: no such topic at ... (Broker: Invalid topic)', or, with
    none answering, waited for them; `tail --topic ..` read nothing, waiting."""
    args = [a.format(recording=recording) for a in args]
    line = one_line_naming(shadowtwin(*args, "--bootstrap", "127.0.0.1:1"), f"argument {option}: expected a Kafka"
                           " topic name")
    assert f"got {args[-1]!r} (see shadowtwin {args[0]}" in line, line


@pytest.mark.parametrize("args, says", [
    (["replay", "{recording}", "--to", "shadowtwin.alerts"], "--to shadowtwin.alerts: the twin writes its alerts there;"
                                                             " events go to shadowtwin.events"),
    (["replay", "{recording}", "--to", "shadowtwin.commands.json"], "the twin writes the JSON copies of its redelivery"
                                                                    " commands there"),
    (["ingest", "exchange-mtl", "{recording}", "--to", "shadowtwin.dead-letters"], "its dead letters there"),
    (["probe", "--server", "a=127.0.0.1:1", "--to", "shadowtwin.state"], "its state there"),
    (["simulate", "--to-kafka", "--to", "shadowtwin.commands"], "its redelivery commands there"),
], ids=["replay", "replay to a JSON copy", "ingest", "probe", "simulate"])
def test_events_sent_to_a_topic_the_twin_writes_its_own_records_to_are_refused_before_any_broker_is_asked(
        recording, args, says):
    """`replay day.avro --to shadowtwin.alerts` published the events where the alerts' readers (alerts tail and
    route, paging systems) took each for an alert that did not decode, exit 0."""
    args = [a.format(recording=recording) for a in args]
    one_line_naming(shadowtwin(*args, "--bootstrap", "127.0.0.1:1"), f"shadowtwin {args[0]}: ", says)


@pytest.mark.parametrize("args, meant", [(["lab", "stop"], "down"), (["lab", "start"], "up"),
                                         (["simulte"], "simulate")])
def test_an_action_named_by_another_word_or_misspelt_is_given_the_one_meant(args, meant):
    """`lab stop` listed the lab's actions, leaving the reader to see that stopping is `down`."""
    one_line_naming(shadowtwin(*args), f"invalid choice: {args[-1]!r}", f"did you mean {meant!r}?")


def test_a_log_format_ingest_does_not_read_is_named_as_the_log_format():
    """`ingest mtl` said 'argument source: invalid choice', where the help calls it the log format."""
    line = one_line_naming(shadowtwin("ingest", "mtl", "MSGTRK1.LOG"), "argument LOG_FORMAT: invalid choice: 'mtl'",
                           "(choose from 'exchange-mtl')")
    assert "source" not in line


def test_a_log_format_in_exchanges_capitals_is_read(tmp_path):
    result = shadowtwin("ingest", "Exchange-MTL", tmp_path / "MSGTRK*.LOG")  # the case Exchange writes its names in
    assert "LOG_FORMAT" not in result.stderr and "no file matches this pattern" in result.stderr, result.stderr
    written = shadowtwin("simulate", "--format", "Exchange-MTL", "--duration", "1m", "--out", tmp_path / "logs")
    assert written.returncode == 0 and (tmp_path / "logs" / "truth.jsonl").is_file(), written.stderr


def test_record_with_the_recording_and_the_topic_swapped_says_which_comes_first(tmp_path):
    """`record day.avro shadowtwin.events` said 'shadowtwin.events: a recording ends in .jsonl, .ndjson, .avro'."""
    one_line_naming(shadowtwin("record", "day.avro", "shadowtwin.events", cwd=tmp_path), "shadowtwin record: day.avro"
                    " is the recording to write: name the topic to read before it (shadowtwin record shadowtwin.events"
                    " day.avro)")
    assert not list(tmp_path.iterdir())


def test_record_of_a_recording_with_the_topic_left_out_says_the_topic_is_missing(tmp_path):
    """`record day.avro` said 'the following arguments are required: file', day.avro having been taken for the topic."""
    line = one_line_naming(shadowtwin("record", tmp_path / "day.avro"), "is the recording to write: name the topic"
                           f" to read before it (shadowtwin record TOPIC {tmp_path / 'day.avro'})")
    assert not (tmp_path / "day.avro").exists()
    one_line_naming(shadowtwin("record", "shadowtwin.events"), "the recording to write is missing (shadowtwin record"
                    " shadowtwin.events FILE)")


def test_a_missing_argument():
    one_line_naming(shadowtwin("replay"), "shadowtwin replay", "file")


def test_a_missing_configuration_file(tmp_path):
    one_line_naming(shadowtwin("--conf", tmp_path / "none.toml", "kafka", "status"), tmp_path / "none.toml")


def test_an_empty_configuration_file_name_is_refused(recording):
    """`--conf "$UNSET"` ran with the default settings, as if no --conf were given: whatif said its summary, exit 0."""
    one_line_naming(shadowtwin("--conf", "", "whatif", recording), "shadowtwin: argument --conf: expected a value, got ''")


@pytest.mark.parametrize("args, says", [
    (["whatif", "{recording}", "--out", ""], "shadowtwin whatif: argument --out: expected a value, got ''"),
    (["simulate", "--out", ""], "shadowtwin simulate: argument --out: expected a value, got ''"),
    (["replay", ""], "shadowtwin replay: argument file: expected a value, got ''"),
    (["ingest", "exchange-mtl", " "], "shadowtwin ingest: argument PATH: expected a value, got ' '"),
], ids=["whatif --out", "simulate --out", "replay FILE", "ingest PATH"])
def test_an_empty_argument_is_refused_naming_it(recording, tmp_path, args, says):
    """An empty value was taken as not given (whatif --out "" wrote nothing, exit 0; simulate --out "" wrote
    simulation-7.avro; twin run --master "" ran on the configured master) or as the current folder ('replay: .:
    a recording ends in .jsonl, ...')."""
    (tmp_path / "cwd").mkdir()
    result = shadowtwin(*(str(recording) if arg == "{recording}" else arg for arg in args), cwd=tmp_path / "cwd")
    one_line_naming(result, says)
    assert not any((tmp_path / "cwd").iterdir())


@pytest.mark.parametrize("option, url, says", [
    ("--webhook", "hooks.example/twin", "expected an http:// or https:// address"),
    ("--webhook", "http://hooks.example:808O/twin", "Port could not be cast to integer value as '808O'"),
    ("--alertmanager", "http://127.0.0.1:99093", "Port out of range 0-65535"),
    ("--alertmanager", "http://[::1:9093", "Invalid IPv6 URL"),
    ("--webhook", "http://hooks.example/my twin", "an address has no spaces or control characters"),
], ids=["no scheme", "port not a number", "port out of range", "bracket not closed", "a space"])
def test_alerts_route_to_a_mistyped_address_is_refused_naming_it(option, url, says):
    """A port that is not a number, a space or an unclosed bracket ended in http.client's traceback, exit 1;
    port 99093 was tried, refused, and retried for ever."""
    one_line_naming(shadowtwin("alerts", "route", option, url), f"shadowtwin alerts: {option} {url}: {says}")


def test_record_to_a_file_that_is_no_recording(tmp_path):
    one_line_naming(shadowtwin("record", "shadowtwin.events", tmp_path / "out.csv"), "out.csv", "a recording ends in")


@pytest.mark.parametrize("where, why", [("gone/out.jsonl", "No such file or directory"),
                                        ("folder.avro", "Is a directory")])
def test_record_to_a_file_that_cannot_be_written_says_so_before_it_waits_for_records(tmp_path, where, why):
    """It used to wait for the topic's first record (for good, on a quiet topic) and only then say it;
    here the broker does not even answer: the file is named first, nothing is created."""
    (tmp_path / "folder.avro").mkdir()
    path = tmp_path / where
    one_line_naming(shadowtwin("record", "shadowtwin.events", path, "--bootstrap", "127.0.0.1:1"), path, why)
    assert not (tmp_path / "gone").exists()


def test_record_to_a_recording_that_exists_refuses_to_overwrite_it(recording):
    """It used to replace it without a word, though the topic may no longer hold what it recorded."""
    before = recording.read_bytes()
    one_line_naming(shadowtwin("record", "shadowtwin.events", recording, "--bootstrap", "127.0.0.1:1"),
                    recording, "exists", "--force")
    assert recording.read_bytes() == before


@pytest.mark.parametrize("name", ["none.avro", "none.jsonl"])
def test_record_to_a_recording_of_no_events_writes_over_it_as_over_an_empty_file(tmp_path, name):
    """An Avro file of no events still holds its header: before, record refused it ('exists ... --force')
    while it took an empty .jsonl. Here the broker does not answer: what stops it is the broker, not the file."""
    path = tmp_path / name
    write_events(path, [])
    run = shadowtwin("record", "shadowtwin.events", path, "--bootstrap", "127.0.0.1:1", "--seconds", "1")
    assert run.returncode != 0 and "exists" not in run.stderr and "127.0.0.1:1" in run.stderr, run.stderr


@pytest.mark.parametrize("where", ["twin.ckpt", "twin.ckpt/under"])
def test_twin_run_with_a_checkpoint_that_is_a_file_says_so_before_it_starts_anything(tmp_path, where):
    """It used to start Spark and fail in the query's start, with 180 lines of Java stack trace, exit 1."""
    (tmp_path / "twin.ckpt").write_text("")
    one_line_naming(shadowtwin("twin", "run", "--checkpoint", tmp_path / where, "--bootstrap", "127.0.0.1:1"),
                    tmp_path / "twin.ckpt", "not a folder")


def test_twin_run_with_a_checkpoint_that_cannot_be_made_says_so_before_it_starts_anything():
    """`--checkpoint /proc/x` started the topics and Spark, whose query's start failed: 'Py4JJavaError: ...
    java.io.IOException: mkdir of file:/proc/x failed' and a Java stack trace, exit 1."""
    one_line_naming(shadowtwin("twin", "run", "--checkpoint", "/proc/x", "--bootstrap", "127.0.0.1:1"),
                    "shadowtwin twin: checkpoint /proc/x: cannot be made (No such file or directory)")


def test_twin_run_with_a_master_url_spark_does_not_take_says_so_before_it_starts_anything():
    """It used to start the broker's topics and Spark, whose Java gateway died: a Python stack trace, exit 1."""
    one_line_naming(shadowtwin("twin", "run", "--master", "sprak://h:7077", "--bootstrap", "127.0.0.1:1"),
                    "--master 'sprak://h:7077'", "expected a Spark master URL")


@pytest.mark.parametrize("command", [["twin", "run", "--bootstrap", "127.0.0.1:1", "--lab-topology", "{}"],
                                     ["lab", "--topology", "{}", "status"]], ids=["twin run", "lab"])
@pytest.mark.parametrize("kind", ["not UTF-8", "a folder"])
def test_a_lab_topology_that_cannot_be_read_is_named(tmp_path, command, kind):
    """A lab topology not in UTF-8 (or a folder) ended twin run and lab in a UnicodeDecodeError (IsADirectoryError)
    traceback, exit 1; the settings file and the simulator's topology said 'cannot be read'."""
    topology = tmp_path / "lab.toml"
    topology.write_bytes(b"\xff\xfe") if kind == "not UTF-8" else topology.mkdir()
    one_line_naming(shadowtwin(*(str(topology) if arg == "{}" else arg for arg in command)),
                    f"{topology}: cannot be read (")


@pytest.mark.parametrize("start, duration, says", [
    ("9999-12-31T23:00:00Z", "2h", "253402297200000 ms (9999-12-31T23:00:00.000Z) is not between"),
    ("2026-01-05T00:00:00Z", "10675199.00:00:00", "is not between 1970-01-01T00:00:00.000Z and 2262-04-11T23:47:16.854Z"),
], ids=["year 9999", "the longest duration"])
@pytest.mark.parametrize("form", ["events", "exchange-mtl"])
def test_simulate_refuses_a_start_and_duration_whose_event_times_the_twin_leaves_out(tmp_path, start, duration, says,
                                                                                  form):
    """Events from 9999-12-31T23:00 were written (all of them dead letters to whatif and the twin), or, as
    message-tracking logs, ended in 'ValueError: year 10000 is out of range'; the longest duration ran for ever."""
    from infra.settings import CONF_DIR

    topology = tmp_path / "topology.toml"
    topology.write_text((CONF_DIR / "topology.toml").read_text().replace('start = "2026-01-05T00:00:00Z"',
                                                                          f'start = "{start}"'))
    out = tmp_path / ("sim.jsonl" if form == "events" else "logs")
    line = one_line_naming(shadowtwin("simulate", "--topology", topology, "--duration", duration, "--format", form,
                                      "--out", out), f"{topology}: organisation.start", "event time out of range", says)
    assert not out.exists(), line


def test_simulate_out_to_a_file_that_is_no_recording(tmp_path):
    one_line_naming(shadowtwin("simulate", "--out", tmp_path / "x.txt"), "x.txt", "a recording ends in")
    assert not (tmp_path / "x.txt").exists()


def test_simulate_with_a_missing_topology(tmp_path):
    one_line_naming(shadowtwin("simulate", "--topology", tmp_path / "none.toml"), "none.toml")


def test_the_longest_span_exchange_takes_runs_whatif_and_where_says_its_deadlines(recording, tmp_path):
    """ShadowResubmitTimeSpan and MessageExpirationTimeout of "10675199.00:00:00" (TimeSpan's days) put the held
    messages' deadlines in year 31253: whatif ran, but `where` of such a state record ended in 'ValueError: year
    31253 is out of range'; now it names the deadline by its milliseconds."""
    from shadowtwin.where_cmd import describe_message, describe_server

    longest = "10675199.00:00:00"
    result = shadowtwin("whatif", recording, "--set", f"ShadowResubmitTimeSpan={longest}",
                        "--set", f"MessageExpirationTimeout={longest}", "--out", tmp_path / "out")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    records = [json.loads(line) for line in (tmp_path / "out" / "state.jsonl").read_text().splitlines()]
    message = next(r for r in records if r["kind"] == "message")
    deadline = message["deadlines"][0]["at_ms"]
    assert f"deadline expire at {deadline} ms (after year 9999)" in describe_message(message)
    server = next(r for r in records if r["kind"] == "server" and r["server"] == "mbx01")
    described = describe_server({"server": "mbx01", "summary": server, "holds_shadow_copies_for": {},
                                 "shadow_pairs_towards": []})
    assert f"deadlines expire: 3, next {deadline} ms (after year 9999)" in described


def test_whatif_of_a_missing_file(tmp_path):
    one_line_naming(shadowtwin("whatif", tmp_path / "gone.jsonl"), tmp_path / "gone.jsonl", "No such file")


def test_whatif_of_an_unreadable_file(tmp_path):
    (tmp_path / "folder.jsonl").mkdir()
    one_line_naming(shadowtwin("whatif", tmp_path / "folder.jsonl"), tmp_path / "folder.jsonl", "Is a directory")


def test_whatif_of_a_garbled_jsonl_names_the_line(tmp_path):
    garbled = tmp_path / "garbled.jsonl"
    outage_recording(garbled)
    lines = len(garbled.read_text().splitlines())
    with open(garbled, "a") as out:
        out.write('{"kind": "ClockTi\n')
    one_line_naming(shadowtwin("whatif", garbled), f"{garbled}:{lines + 1}")


def test_whatif_and_replay_of_a_jsonl_with_bytes_that_are_not_utf8_name_the_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    outage_recording(bad)
    lines = len(bad.read_text().splitlines())
    with open(bad, "ab") as out:
        out.write(b"\xff\xfe\n")
    one_line_naming(shadowtwin("whatif", bad), f"{bad}:{lines + 1}: not UTF-8")
    first = tmp_path / "first.jsonl"  # on the first line: replay has nothing to send, and ends at once
    first.write_bytes(b"\xff\xfe\n")
    one_line_naming(shadowtwin("replay", first, "--bootstrap", "127.0.0.1:1"), f"{first}:1: not UTF-8")


def test_whatif_of_a_file_that_is_not_avro(tmp_path):
    fake = tmp_path / "fake.avro"
    fake.write_text('{"kind": "ClockTick"}\n')
    one_line_naming(shadowtwin("whatif", fake), fake, "not an Avro container file")


def test_whatif_of_an_avro_of_event_records_of_another_schema_says_so_not_that_it_is_damaged(tmp_path):
    """An Avro file of another program's Event records was called 'damaged: the block of 1 record does not
    decode (SchemaResolutionError(...))', as if its bytes were broken."""
    import fastavro

    other = tmp_path / "other.avro"
    with open(other, "wb") as out:
        fastavro.writer(out, fastavro.parse_schema({"type": "record", "name": "acme.Event",
                                                    "fields": [{"name": "x", "type": "int"}]}), [{"x": 1}])
    line = one_line_naming(shadowtwin("whatif", other), f"{other}: written with a schema of Event records that ours"
                           " cannot read (No default value for field event_id")
    assert "damaged" not in line


def test_whatif_of_a_truncated_avro_summarises_what_was_read_and_names_the_cut(tmp_path):
    from producers.synthetic import Workload, generate

    path = tmp_path / "day.avro"
    write_events(path, generate(Workload(servers=4, duration_ms=20 * 60_000)))
    data = path.read_bytes()
    path.write_bytes(data[:len(data) - 100])
    result = shadowtwin("whatif", path)
    line = one_line_naming(result, path, "cut short", "at byte")
    assert "events" in result.stdout, "the summary of what was read is printed"
    assert "EOFError" not in line


def cut_short_jsonl(path):
    """An outage recording as JSON Lines whose last line is cut in the middle; how many lines it has."""
    outage_recording(path)
    data = path.read_bytes()
    path.write_bytes(data[:len(data) - 40])
    return len(data.splitlines())


def test_whatif_of_a_jsonl_cut_short_summarises_what_was_read_and_names_the_line(tmp_path):
    path = tmp_path / "cut.jsonl"
    lines = cut_short_jsonl(path)
    result = shadowtwin("whatif", path)
    one_line_naming(result, f"{path}:{lines}: cut short", f"records read before it: {lines - 1:,}")
    assert "events" in result.stdout, "the summary of what was read is printed"


def test_replay_of_a_jsonl_cut_short_publishes_what_was_read_and_names_the_line(kafka_bootstrap, topics, tmp_path):
    path = tmp_path / "cut.jsonl"
    lines = cut_short_jsonl(path)
    result = shadowtwin("replay", path, "--bootstrap", kafka_bootstrap, "--to", topics.events)
    one_line_naming(result, f"{path}:{lines}: cut short", f"records read before it: {lines - 1:,}")
    assert f"sent {lines - 1} events" in result.stdout


def alerts_recording(path):
    from schemas.events import Alert, AlertType, Severity

    write_events(path, [Alert(alert_id="a1", type=AlertType.SHADOW_SERVER_UNREACHABLE, severity=Severity.WARNING,
                              servers=("mbx01", "mbx02"), reason="mbx02 cannot reach mbx01", decided_at_ms=0)],
                 schema="Alert")


@pytest.mark.parametrize("suffix", [".jsonl", ".avro"])
def test_whatif_and_replay_of_a_recording_of_the_alerts_topic(tmp_path, suffix):
    alerts = tmp_path / f"alerts{suffix}"
    alerts_recording(alerts)
    result = shadowtwin("whatif", alerts)
    one_line_naming(result, alerts, "Alert record", "not Event")
    assert result.stdout == "", "no summary of zeros"
    one_line_naming(shadowtwin("replay", alerts, "--bootstrap", "127.0.0.1:1"), alerts, "Alert record", "not Event")


@pytest.mark.parametrize("command", ["whatif", "replay"])
@pytest.mark.parametrize("suffix, content", [(".jsonl", None), (".avro", None), (".avro", "header only")],
                         ids=["empty jsonl", "empty avro", "avro without records"])
def test_an_empty_recording_holds_no_events(tmp_path, command, suffix, content):
    """An empty .avro said "cut short: the file's magic bytes ends after 0 of 4 bytes"; replay sent nothing, exit 0."""
    empty = tmp_path / f"empty{suffix}"
    write_events(empty, []) if content else empty.write_bytes(b"")
    result = shadowtwin(command, empty, *(["--bootstrap", "127.0.0.1:1"] if command == "replay" else []))
    one_line_naming(result, f"{empty}: holds no events")
    assert result.stdout == ""


@pytest.mark.parametrize("command", ["whatif", "replay"])
def test_the_simulator_s_truth_given_for_its_events_says_where_the_events_are(tmp_path, command):
    """The truth is written beside the events (day.truth.jsonl beside day.avro); given in their place it was
    answered "kind: 'summary' is no record kind (known: NodeStarted, NodeStopping, ...)", 29 kinds long."""
    assert shadowtwin("simulate", "--duration", "5m", "--out", tmp_path / "day.avro").returncode == 0
    truth = tmp_path / "day.truth.jsonl"
    result = shadowtwin(command, truth, *(["--bootstrap", "127.0.0.1:1"] if command == "replay" else []))
    one_line_naming(result, f"{truth}:1: kind: 'summary': this is the simulator's ground truth (NAME.truth.jsonl),"
                            " not a recording: the events are beside it (NAME.avro or NAME.jsonl); whatif reads the"
                            " truth with --truth")
    assert result.stdout == ""


def test_whatif_of_a_file_garbled_from_its_first_line_prints_no_summary(tmp_path):
    garbled = tmp_path / "garbled.jsonl"
    garbled.write_text('{"a": 1}\n')
    result = shadowtwin("whatif", garbled)
    one_line_naming(result, f"{garbled}:1: kind: missing")
    assert result.stdout == "", "nothing was read: a summary of zeros would only hide the reason"


def test_whatif_out_to_an_unwritable_folder(recording):
    one_line_naming(shadowtwin("whatif", recording, "--out", "/proc/x"), "/proc/x")


def test_whatif_with_a_bad_parameter(recording):
    one_line_naming(shadowtwin("whatif", recording, "--compare", "ShadowHeartbeatRetryCount=x"), "--compare",
                    "ShadowHeartbeatRetryCount")


def test_whatif_refuses_a_span_exchange_would_read_otherwise(recording):
    """'25:00:00' was taken for 25 hours; Set-TransportConfig takes it for 25 days."""
    one_line_naming(shadowtwin("whatif", recording, "--set", "ShadowResubmitTimeSpan=25:00:00"), "--set",
                    "'25:00:00'", 'as hours, write "1.01:00:00"')


def test_whatif_refuses_a_node_assignment_without_a_node(recording):
    one_line_naming(shadowtwin("whatif", recording, "--set", ":ShadowResubmitTimeSpan=5m"), "--set",
                    "':ShadowResubmitTimeSpan=5m'", "no node before the colon")


@pytest.mark.parametrize("option", ["--set", "--compare"])
def test_whatif_refuses_a_node_setting_for_a_server_neither_the_recording_nor_the_configuration_names(option,
                                                                                                    recording):
    one_line_naming(shadowtwin("whatif", recording, option, "mbx2:ShadowResubmitTimeSpan=5m"),
                    f"{option} mbx2:ShadowResubmitTimeSpan=5m: no server 'mbx2' in {recording}",
                    "did you mean 'mbx02'?")


def test_whatif_refused_after_reading_leaves_no_empty_folder(recording, tmp_path):
    out, report = tmp_path / "out", tmp_path / "report"
    one_line_naming(shadowtwin("whatif", recording, "--compare", "mbx2:ShadowResubmitTimeSpan=5m",
                               "--out", str(out), "--report", str(report)), "no server 'mbx2'")
    assert [p.name for p in tmp_path.iterdir()] == [recording.name]


@pytest.mark.parametrize("command", [
    ["record", "shadowtwin.events", "r.avro", "--count", "0"],
    ["record", "shadowtwin.events", "r.avro", "--count", "-1"],
    ["record", "shadowtwin.events", "r.avro", "--seconds", "-1"],
    ["lab", "send", "--count", "-1"],
    ["lab", "send", "--count", "1", "--interval", "-1"],
    ["simulate", "--live", "--seconds", "-1"],
], ids=" ".join)
def test_numbers_that_cannot_be_meant_are_refused_naming_the_option(command, tmp_path):
    option, value = command[-2:]
    if command[0] != "lab":  # were it not refused, no broker would be reached
        command = [*command, "--bootstrap", "127.0.0.1:1"]
    one_line_naming(shadowtwin(*command, cwd=tmp_path), f"argument {option}: expected", f"got '{value}'")
    assert not list(tmp_path.iterdir()), "refused before anything is written"


def test_ingest_of_a_glob_that_matches_nothing(tmp_path):
    pattern = tmp_path / "none" / "*.LOG"
    one_line_naming(shadowtwin("ingest", "exchange-mtl", pattern), pattern, "no file matches")


def test_ingest_of_a_missing_file_names_it_before_it_asks_the_broker_for_its_topics(kafka_bootstrap, tmp_path):
    """Before: with the topics not created yet, a mistyped path was answered 'shadowtwin.events: no such
    topic', exit 1, and the path was named only once the topics were there."""
    gone = tmp_path / "MSGTRK20261122-1.LOG"
    result = shadowtwin("ingest", "exchange-mtl", gone, "--to", "nosuch.topic", "--bootstrap", kafka_bootstrap)
    one_line_naming(result, f"shadowtwin ingest: {gone}: no such file")


def test_ingest_of_a_folder_without_logs_names_the_folder_and_says_its_subfolders_are_not_read(tmp_path):
    """As `simulate --format exchange-mtl --out logs` writes them, a folder per server: `ingest exchange-mtl
    logs` used to say 'logs/MSGTRK*.log: no file matches this pattern', a pattern the person never typed."""
    (tmp_path / "logs" / "MBX01").mkdir(parents=True)
    (tmp_path / "logs" / "MBX01" / "MSGTRK2026010500-1.LOG").write_text("")
    line = one_line_naming(shadowtwin("ingest", "exchange-mtl", "logs", "--bootstrap", "127.0.0.1:1", cwd=tmp_path),
                           "shadowtwin ingest: logs: no MSGTRK*.log file in this folder (its subfolders are not"
                           " read: name them, or quote a glob such as 'logs/*/MSGTRK*.log')")
    assert "matches this pattern" not in line


def test_ingest_with_a_folder_for_its_state_file_names_the_option(tmp_path):
    """Said '/tmp/x: Is a directory', which a person reads as about the logs (helper-121's walk)."""
    from tests.producers.test_mtl import EX01

    one_line_naming(shadowtwin("ingest", "exchange-mtl", EX01, "--state", tmp_path, "--bootstrap", "127.0.0.1:1"),
                    f"shadowtwin ingest: --state {tmp_path}: Is a directory")


def test_ingest_of_a_folder_of_renamed_logs_says_how_many_and_the_glob_that_reads_them(tmp_path):
    (tmp_path / "pool").mkdir()
    for server in ("EX01", "EX02"):
        (tmp_path / "pool" / f"{server}_MSGTRK2026010500-1.LOG").write_text("")
    one_line_naming(shadowtwin("ingest", "exchange-mtl", "pool", "--bootstrap", "127.0.0.1:1", cwd=tmp_path),
                    "shadowtwin ingest: pool: no MSGTRK*.log file in this folder (2 named *MSGTRK*.log, renamed:"
                    " quote a glob such as 'pool/*MSGTRK*.log')")


@pytest.mark.parametrize("value", ["ann@contoso.com", "contoso .com", "@"])
def test_ingest_with_an_internal_domain_that_is_no_domain_is_refused(value, tmp_path):
    """`--internal-domain ann@contoso.com` was taken: no recipient's domain equals it, so every recipient was an
    external one, silently, and the twin's forecasts of which messages reach an internal mailbox were all off."""
    from tests.producers.test_mtl import EX01

    result = shadowtwin("ingest", "exchange-mtl", EX01, "--internal-domain", value, "--bootstrap", "127.0.0.1:1")
    one_line_naming(result, f"shadowtwin ingest: argument --internal-domain: expected a domain such as contoso.com,"
                            f" got {value!r}")


def test_ingest_with_a_state_file_that_cannot_be_written_publishes_nothing(tmp_path):
    from tests.producers.test_mtl import EX01

    (tmp_path / "file").write_text("")
    state = tmp_path / "file" / "positions.json"
    result = shadowtwin("ingest", "exchange-mtl", EX01, "--state", state, "--bootstrap", "127.0.0.1:1")
    one_line_naming(result, f"{state}: Not a directory")
    assert result.stdout == "", "refused before anything is read or published"


def test_ingest_with_a_state_file_in_a_folder_that_does_not_exist_is_refused_and_makes_none(tmp_path):
    """As `record`'s file: the folders used to be made (the default, .run/ingest/, still is)."""
    from tests.producers.test_mtl import EX01

    state = tmp_path / "typo" / "positions.json"
    result = shadowtwin("ingest", "exchange-mtl", EX01, "--state", state, "--bootstrap", "127.0.0.1:1")
    one_line_naming(result, f"{state}: No such file or directory")
    assert not list(tmp_path.iterdir())


def test_ingest_whose_state_file_cannot_be_saved_later_says_how_much_it_does_not_record(tmp_path, monkeypatch,
                                                                                       capsys):
    from shadowtwin import cli
    from tests.producers.test_ingest_positions import AckingSink
    from tests.producers.test_mtl import EX01

    state = tmp_path / "state" / "positions.json"
    state.parent.mkdir()

    class FolderGoneAtTheEnd(AckingSink):
        def __init__(self, *_):
            super().__init__()

        def close(self):
            for _, done in self.callbacks:
                done(None)
            state.parent.rename(tmp_path / "elsewhere")
            state.parent.write_text("a file where the folder was\n")
            return 0

    monkeypatch.setattr(cli, "KafkaSink", FolderGoneAtTheEnd)
    assert cli.main(["ingest", "exchange-mtl", str(EX01), "--state", str(state)]) == 1
    out, err = capsys.readouterr()
    assert "lines:" in out, "the summary is printed"
    (line,) = err.splitlines()
    assert line.startswith(f"{state}: could not be written (File exists); ") and "published records are not" in line


def test_debug_shows_the_traceback(tmp_path):
    result = shadowtwin("--debug", "whatif", tmp_path / "gone.jsonl")
    assert result.returncode != 0 and "Traceback" in result.stderr and "FileNotFoundError" in result.stderr


def test_whatif_into_a_closed_pipe_ends_quietly(recording):
    """With stdout buffered, as a user's shell has it (no PYTHONUNBUFFERED): before, the last of the output was
    written at exit, and the closed pipe said 'Exception ignored ... BrokenPipeError' there."""
    buffered = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    reader = subprocess.Popen([*CLI, "whatif", str(recording)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=buffered)
    reader.stdout.close()  # as `| head` does once it has its lines
    _, err = reader.communicate(timeout=120)
    assert err == b"" and reader.returncode == 141


def test_ctrl_c_in_whatif_says_interrupted(tmp_path):
    fifo = tmp_path / "endless.jsonl"
    os.mkfifo(fifo)
    whatif = subprocess.Popen([*CLI, "whatif", str(fifo)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with open(fifo, "w"):  # opened once whatif reads it: it then waits for lines that do not come
            whatif.send_signal(signal.SIGINT)
            _, err = whatif.communicate(timeout=30)
    finally:
        whatif.kill()
    assert (whatif.returncode, err) == (130, f"shadowtwin whatif: interrupted while reading {fifo} (0 events read,"
                                             " the rest not): nothing replayed, printed or written\n")


def script():
    """The `shadowtwin` script as pip writes it from pyproject.toml: its entry point's function, called."""
    scripts = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts["shadowtwin"].split(":")
    return [sys.executable, "-c", f"import sys; from {module} import {function}; sys.exit({function}())"]


@pytest.mark.parametrize("entry", [[sys.executable, "-m", "shadowtwin"], script()], ids=["python -m", "script"])
def test_ctrl_c_while_the_command_line_loads_says_interrupted(entry, tmp_path):
    (tmp_path / "confluent_kafka.py").write_text(  # one of the first imports of the command line, made slow
        "import time\nprint('importing', flush=True)\ntime.sleep(60)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    run = subprocess.Popen([*entry, "kafka", "status"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=env)
    try:
        assert run.stdout.readline() == "importing\n"  # Ctrl-C only once the import is under way
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=30)
    finally:
        run.kill()
    assert (run.returncode, err) == (130, "shadowtwin: interrupted\n")


def test_ctrl_c_while_the_arguments_are_read_says_interrupted(monkeypatch, capsys):
    from shadowtwin import cli, simulate_cmd

    def ctrl_c(_commands):  # as if it came while parser() imports the commands' modules
        raise KeyboardInterrupt

    monkeypatch.setattr(simulate_cmd, "add_parser", ctrl_c)
    try:
        status = cli.main(["kafka", "status"])
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C escaped main")
    assert (status, capsys.readouterr().err) == (130, "shadowtwin: interrupted\n")


@pytest.mark.parametrize("command", [["where", "<1@x>"], ["server", "mbx01"]], ids=" ".join)
def test_where_and_server_without_a_broker_say_one_line(command, monkeypatch, capfd):
    from shadowtwin import cli, where_cmd
    from streaming import views

    monkeypatch.setattr(where_cmd, "read_state", functools.partial(views.read_state, timeout_s=3))  # not 30 s
    assert cli.main([*command, "--bootstrap", "127.0.0.1:1"]) == 1
    (line,) = capfd.readouterr().err.splitlines()  # not librdkafka's log of every failed connection
    assert line.startswith(f"shadowtwin {command[0]}: Kafka at 127.0.0.1:1: Failed to get metadata"), line


@pytest.mark.parametrize("command", [
    ["record", "nosuch.topic", "r.avro", "--from-beginning"],
    ["alerts", "tail", "--topic", "nosuch.topic"],
    ["commands", "tail", "--topic", "nosuch.topic"],
    ["alerts", "route", "--webhook", "http://127.0.0.1:2/", "--topic", "nosuch.topic"],
], ids=" ".join)
def test_a_topic_the_broker_does_not_have_is_one_line_and_exit_1(command, kafka_bootstrap, tmp_path):
    result = shadowtwin(*command, "--bootstrap", kafka_bootstrap, cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-2000:]
    assert result.stderr.splitlines() == [f"shadowtwin {command[0]}: nosuch.topic: no such topic at {kafka_bootstrap}"
                                          " (Broker: Unknown topic or partition)"]
    assert not list(tmp_path.iterdir()), "no recording begun"


@pytest.mark.parametrize("command", [["record", "{topic}", "r.avro"], ["replay", "{recording}", "--to", "{topic}"]],
                         ids=lambda c: c[0])
def test_a_misspelt_topic_is_told_the_topic_meant(command, topics, kafka_bootstrap, recording, tmp_path):
    """Before: `record shadowtwin.event` said only 'no such topic', not the topic the brokers have."""
    misspelt = topics.events[:-1].upper()  # `event` for `events`, and in the wrong case
    args = [a.format(topic=misspelt, recording=recording) for a in command]
    result = shadowtwin(*args, "--bootstrap", kafka_bootstrap, cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-2000:]
    assert result.stderr.splitlines() == [f"shadowtwin {command[0]}: {misspelt}: no such topic at {kafka_bootstrap}"
                                          f" (Broker: Unknown topic or partition); did you mean {topics.events!r}?"]


SMTP_RECEIVE_LOG = ("#Software: Microsoft Exchange Server\r\n#Version: 15.2.1544.4\r\n"
                    "#Log-type: SMTP Receive Protocol Log\r\n#Date: 2026-11-22T02:00:00.000Z\r\n#Fields: date-time,connector-id,session-id,sequence-number,"
                    "local-endpoint,remote-endpoint,event,data,context\r\n"
                    "2026-11-22T02:00:00.000Z,EX01\\Default EX01,08DD,0,10.0.0.1:25,10.0.0.2:50000,+,,\r\n")
# Exchange 2003's tracking log: tab-separated, its header a comment line of its own names.
EXCHANGE_2003_LOG = ("# Message Tracking Log File\r\n# Exchange System Attendant Version 6.5.7638.1\r\n"
                     "# Date\tTime\tclient-ip\tClient-hostname\tPartner-Name\tServer-hostname\tserver-IP\t"
                     "Recipient-Address\tEvent-ID\tMSGID\r\n"
                     "2026-11-22\t2:0:0 GMT\t10.0.0.2\tex02\t-\tEX01\t10.0.0.1\ta@contoso.com\t1019\t<1@x>\r\n")


@pytest.mark.parametrize("name, body, why", [
    ("people.csv", b"name,age\r\nalice,3\r\n", "no #Fields: line or Export-Csv header comes before its first record"),
    ("core.bin", bytes(range(128, 256)) * 8 + b"\n" + bytes(range(256)), "a line is not UTF-8 text"),
    ("RECV20261122-1.LOG", SMTP_RECEIVE_LOG.encode(), "(#Log-type: SMTP Receive Protocol Log) has no client-hostname"),
    ("MSGTRK-2003.log", EXCHANGE_2003_LOG.encode(), "no #Fields: line"),
], ids=["other-csv", "binary", "smtp-protocol-log", "exchange-2003-log"])
def test_ingest_of_a_file_that_is_no_tracking_log_says_so_and_publishes_nothing(name, body, why, kafka_bootstrap,
                                                                              topics, tmp_path, monkeypatch):
    """Before: every line went to the dead letters (or was skipped) and the command exited 0."""
    from tests.producers.test_mtl import EX01

    (tmp_path / name).write_bytes(body)
    monkeypatch.setenv("SHADOWTWIN_TOPICS_EVENTS", topics.events)
    monkeypatch.setenv("SHADOWTWIN_TOPICS_DEAD_LETTERS", topics.dead_letters)
    result = shadowtwin("ingest", "exchange-mtl", EX01, tmp_path / name, "--bootstrap", kafka_bootstrap)
    line = one_line_naming(result, f"{tmp_path / name}: not an Exchange message-tracking log, nothing published: ",
                           why, "expected a #Fields: line naming date-time,")
    assert str(EX01) not in line and result.stdout == ""
    assert published(kafka_bootstrap, topics.events) == published(kafka_bootstrap, topics.dead_letters) == 0, \
        "the real log beside it is not half sent: given again alone, nothing of it is lost"


@pytest.mark.parametrize("bodies, says", [
    ([b""], "empty (0 bytes: no #Fields: line, no record), nothing published"),
    ([b"\r\n\r\n"], "empty (4 bytes, blank lines only: no #Fields: line, no record), nothing published"),
    ([b"", b""], "empty (0 bytes: no #Fields: line, no record) (and 1 other file), nothing published"),
    ([b"\0" * 4096], "empty (4096 bytes, NUL padding only: no #Fields: line, no record), nothing published"),
    ([b"\0" * 70_000], "empty (70000 bytes, NUL padding only: no #Fields: line, no record), nothing published"),
], ids=["0 bytes", "blank lines", "two empty files", "NUL padding", "NUL padding longer than a read"])
def test_ingest_of_files_that_hold_nothing_says_so_before_the_broker(tmp_path, bodies, says):
    """Before: '0 lines: 0 events, 0 dead letters, 0 skipped', exit 0, as for a quiet server's log, which has its
    header: a copy that went wrong looked like a server that handled no mail."""
    paths = [tmp_path / f"MSGTRK20261122-{n}.LOG" for n in range(1, len(bodies) + 1)]
    for path, body in zip(paths, bodies):
        path.write_bytes(body)
    result = shadowtwin("ingest", "exchange-mtl", *paths, "--bootstrap", "127.0.0.1:1")
    one_line_naming(result, f"shadowtwin ingest: {paths[0]}: {says}")
    assert result.stdout == ""


def test_ingest_of_an_empty_file_beside_logs_says_so_and_reads_the_others_and_a_header_alone_is_a_quiet_log(
        kafka_bootstrap, topics, tmp_path, monkeypatch):
    """An empty file among logs (a glob, a folder) is said, one line, and the others are published; a log with its
    header and no record is a quiet server's, read without a word."""
    from tests.producers.test_mtl import EX01

    empty, quiet = tmp_path / "MSGTRK20261122-2.LOG", tmp_path / "MSGTRK20261122-3.LOG"
    empty.write_bytes(b"")
    quiet.write_bytes(b"".join(line for line in EX01.read_bytes().splitlines(keepends=True) if line.startswith(b"#")))
    monkeypatch.setenv("SHADOWTWIN_TOPICS_EVENTS", topics.events)
    monkeypatch.setenv("SHADOWTWIN_TOPICS_DEAD_LETTERS", topics.dead_letters)
    result = shadowtwin("ingest", "exchange-mtl", EX01, empty, quiet, "--bootstrap", kafka_bootstrap)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr.splitlines() == [f"{empty}: empty (0 bytes: no #Fields: line, no record), nothing in it to"
                                          " publish; the other files are read"]
    assert published(kafka_bootstrap, topics.events) > 0
    quiet_alone = shadowtwin("ingest", "exchange-mtl", quiet, "--bootstrap", kafka_bootstrap)
    assert (quiet_alone.returncode, quiet_alone.stderr) == (0, "")
    assert quiet_alone.stdout.startswith("0 lines: 0 events")


def test_ingest_follow_skips_a_file_that_comes_later_and_is_no_tracking_log_and_follows_on(kafka_bootstrap,
                                                                                           topics, tmp_path):
    """Before: only the files there at start were judged; a later one sent its lines to the dead letters."""
    from tests.producers.relay.conftest import wait_until
    from tests.producers.test_kafka_producers import dead_letters
    from tests.producers.test_mtl import EX01, EX02
    from tests.producers.test_signals import start, stopped

    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "MSGTRK20261122-1.LOG").write_bytes(EX01.read_bytes())
    conf = tmp_path / "topics.toml"
    conf.write_text(f'[topics]\nevents = "{topics.events}"\ndead_letters = "{topics.dead_letters}"\n')
    process = start(kafka_bootstrap, "--conf", conf, "ingest", "exchange-mtl", folder, "--follow",
                    "--state", tmp_path / "positions.json", "--internal-domain", "contoso.com")  # said if left out
    try:
        assert wait_until(lambda: published(kafka_bootstrap, topics.events) > 0, 30)
        first = published(kafka_bootstrap, topics.events), published(kafka_bootstrap, topics.dead_letters)
        (folder / "MSGTRK20261122-2.LOG").write_bytes(SMTP_RECEIVE_LOG.encode())
        time.sleep(1.5)  # read, or skipped, before the next file comes
        (folder / "MSGTRK20261122-3.LOG").write_bytes(EX02.read_bytes())
        assert wait_until(lambda: published(kafka_bootstrap, topics.events) > first[0], 30), "followed on"
        time.sleep(1.5)
    finally:
        code, out, err = stopped(process, signal.SIGTERM)
    assert code == 143, err[-2000:]
    (line,) = err.splitlines()
    assert line.startswith(f"{folder / 'MSGTRK20261122-2.LOG'}: not an Exchange message-tracking log, skipped: its"
                           " #Fields: line (#Log-type: SMTP Receive Protocol Log) has no client-hostname"), line
    assert "1 files were no message-tracking log and were skipped" in out
    letters = dead_letters(kafka_bootstrap, topics.dead_letters, first[1])
    assert not [d for d in letters if d.topic == str(folder / "MSGTRK20261122-2.LOG")], "no line of it sent"


def published(bootstrap: str, topic: str) -> int:
    """The records on `topic`; asked again while a new topic's partition has no leader yet (a moment after it was
    made, on a loaded machine: NOT_LEADER_FOR_PARTITION)."""
    from infra.kafka import consumer, partitions_of
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    client = consumer(bootstrap, "test-published")
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                return sum(client.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                           for p in partitions_of(client, topic))
            except KafkaException as exc:
                if exc.args[0].code() not in (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE) \
                        or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        client.close()


def test_where_without_its_state_topic_is_one_line_and_exit_1(kafka_bootstrap, monkeypatch):
    monkeypatch.setenv("SHADOWTWIN_TOPICS_STATE", "nosuch.topic")
    result = shadowtwin("where", "<1@x>", "--bootstrap", kafka_bootstrap)
    assert result.returncode == 1, result.stderr[-2000:]
    assert result.stderr.splitlines() == ["shadowtwin where: topic(s) not found: nosuch.topic (shadowtwin topics"
                                          " create makes them)"]


def test_server_is_named_in_any_case_and_an_unknown_one_gets_the_closest_name(kafka_bootstrap, topics, monkeypatch):
    """Before: `server MBX01` and `server mbx1` both said only 'no such server', exit 1."""
    from infra.kafka import producer
    from state.summary import state_records, to_json
    from tests.state.test_summary import Org, at, primary_dies, run

    state, _ = run([e for e in primary_dies(Org()) if e.event_time_ms <= at(4)])
    publisher = producer(kafka_bootstrap)
    for key, record in state_records(state):
        publisher.produce(topics.state, key=key.encode(), value=to_json(record))
    assert publisher.flush(30) == 0
    monkeypatch.setenv("SHADOWTWIN_TOPICS_STATE", topics.state)
    monkeypatch.setenv("SHADOWTWIN_TOPICS_EVENTS", topics.events)  # a twin's unread events are a line on stderr
    found = shadowtwin("server", "MBX01", "--bootstrap", kafka_bootstrap)
    assert found.returncode == 0 and found.stdout.startswith("mbx01: DAG dag1"), found.stderr[-2000:]
    fqdn = shadowtwin("server", "MBX01.contoso.com", "--bootstrap", kafka_bootstrap)  # as Get-ExchangeServer says it
    assert fqdn.returncode == 0 and fqdn.stdout == found.stdout, fqdn.stderr[-2000:]
    holder = shadowtwin("server", "Mbx02", "--bootstrap", kafka_bootstrap)
    assert holder.returncode == 0 and "it holds shadow copies for: mbx01 2" in holder.stdout, holder.stderr[-2000:]
    unknown = shadowtwin("server", "mbx1", "--bootstrap", kafka_bootstrap)
    assert unknown.returncode == 1 and unknown.stderr.splitlines() == [
        "mbx1: no such server in the twin's state (it has sent no event, or the twin is not running);"
        " did you mean 'mbx01'?"], unknown.stderr


def test_lab_send_with_the_lab_down_says_what_it_could_not_reach_and_how_much_was_not_sent(tmp_path, capfd):
    from shadowtwin import cli
    from tests.producers.relay.conftest import topology_text

    topology = tmp_path / "lab.toml"
    topology.write_text(topology_text(tmp_path / "lab", {"ex01": "dag1", "ex02": "dag1"}))
    assert cli.main(["lab", "--topology", str(topology), "send", "--count", "3"]) == 1
    (line,) = capfd.readouterr().err.splitlines()
    assert line.startswith("3 of 3 messages were not sent: could not reach ex01 at 127.0.0.1:"), line
    assert "ex02 at 127.0.0.1:" in line and "Connection refused" in line and "shadowtwin lab up" in line


def test_lab_names_an_unknown_node():
    one_line_naming(shadowtwin("lab", "kill", "nosuch"), "no node 'nosuch' in the topology")
    one_line_naming(shadowtwin("lab", "send", "--count", "1", "--node", "ex01", "--node", "nosuch"),
                    "no node 'nosuch' in the topology")
    one_line_naming(shadowtwin("lab", "kill", "ex2"), "no node 'ex2' in the topology", "did you mean 'ex02'?")


def test_lab_names_a_node_in_any_case_as_exchange_names_a_server(tmp_path):
    """Before: `lab kill EX02` was refused, no node 'EX02'."""
    conf = tmp_path / "lab.toml"
    conf.write_text((Path(__file__).parents[2] / "conf" / "lab.toml").read_text().replace('run_dir = ".run/lab"',
                                                                                          f'run_dir = "{tmp_path}"'))
    result = shadowtwin("lab", "--topology", conf, "kill", "EX02")
    assert (result.returncode, result.stdout, result.stderr) == (0, "ex02 was not running\n", "")


def test_lab_send_to_a_named_node_sends_to_that_node_only(tmp_path, capfd):
    from shadowtwin import cli
    from tests.producers.relay.conftest import topology_text

    topology = tmp_path / "lab.toml"
    topology.write_text(topology_text(tmp_path / "lab", {"ex01": "dag1", "ex02": "dag1"}))
    assert cli.main(["lab", "--topology", str(topology), "send", "--count", "1", "--node", "ex02"]) == 1
    (line,) = capfd.readouterr().err.splitlines()
    assert line.startswith("1 of 1 messages were not sent: could not reach ex02 at") and "ex01" not in line, line


def test_ingest_of_a_line_of_megabytes_sends_it_as_a_dead_letter_and_goes_on(kafka_bootstrap, topics, tmp_path):
    """A garbled line of 3 MB became a dead letter the producer refused ('Unable to produce message: Broker:
    Message size too large', exit 1): the run ended there, every line after it unread."""
    from tests.producers.test_kafka_producers import dead_letters
    from tests.producers.test_mtl import EX01, run

    lines = EX01.read_bytes().split(b"\r\n")
    huge = b"2026-11-22T02:00:00.150Z," + b"x" * (3 << 20)
    log, without = tmp_path / "MSGTRK20261122-1.LOG", tmp_path / "without" / "MSGTRK20261122-1.LOG"
    log.write_bytes(b"\r\n".join(lines[:6] + [huge] + lines[6:]))
    without.parent.mkdir()
    without.write_bytes(EX01.read_bytes())
    expected, counts = run([without])
    conf = tmp_path / "topics.toml"
    conf.write_text(f'[topics]\nevents = "{topics.events}"\ndead_letters = "{topics.dead_letters}"\n')
    result = shadowtwin("--conf", conf, "ingest", "exchange-mtl", log, "--bootstrap", kafka_bootstrap)
    assert result.returncode == 0, result.stderr[-2000:]
    assert published(kafka_bootstrap, topics.events) == len(expected.events) > 0, "no valid line lost"
    letters = dead_letters(kafka_bootstrap, topics.dead_letters, counts.dead_letters + 1)
    (cut,) = [d for d in letters if d.offset == 7]
    assert cut.reason == f"2 fields where the header names 27 (a line of {len(huge):,} bytes: its first 524,288 are kept)"
    assert cut.original == huge[:524_288]


def test_ingest_of_an_event_larger_than_the_producer_sends_dead_letters_its_line_and_goes_on(kafka_bootstrap, topics,
                                                                                            tmp_path):
    """A delivery to 60,000 recipients makes an event of 1.4 MB, which the producer refuses: the run ended at
    that line ('Unable to produce message: Broker: Message size too large', exit 1), every line after it unread;
    then it was counted as not acknowledged, exit 1, and with --follow the run stopped there and met it again at
    restart. Now its line is a dead letter saying why, and the run goes on; it was not sent, so the run ends with
    exit 1 saying so (it ended with 0, as if all was sent, while an event the events topic refused ended with 1)."""
    from tests.producers.test_kafka_producers import dead_letters
    from tests.producers.test_mtl import EX01, run

    lines = EX01.read_bytes().split(b"\r\n")
    many = ";".join(f"user{i:05d}@contoso.com" for i in range(60_000)).encode()
    lines[5] = lines[5].replace(b"ann@contoso.com;bob@contoso.com", many).replace(b",48211,2,", b",48211,60000,")
    log = tmp_path / "MSGTRK20261122-1.LOG"
    log.write_bytes(b"\r\n".join(lines))
    expected, counts = run([log])
    conf = tmp_path / "topics.toml"
    conf.write_text(f'[topics]\nevents = "{topics.events}"\ndead_letters = "{topics.dead_letters}"\n')
    result = shadowtwin("--conf", conf, "ingest", "exchange-mtl", log, "--bootstrap", kafka_bootstrap)
    assert result.returncode == 1, result.stderr[-2000:]
    assert f"{len(expected.events) - 1} events, {counts.dead_letters + 1} dead letters" in result.stdout
    assert "1 events were larger than Kafka or the events topic takes" in result.stdout, result.stdout
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"1 of {len(expected.events) + counts.dead_letters + 1} records were not acknowledged")
    assert published(kafka_bootstrap, topics.events) == len(expected.events) - 1, "every other event sent"
    letters = dead_letters(kafka_bootstrap, topics.dead_letters, counts.dead_letters + 1)
    (large,) = [d for d in letters if "larger than Kafka takes" in d.reason]
    assert large.offset == 6 and large.original == lines[5][:524_288], large.offset
    assert large.reason == ("its MessageReceived event of 1,380,111 bytes is larger than Kafka takes (Unable to"
                            " produce message: Broker: Message size too large) (a line of 1,320,325 bytes: its first"
                            " 524,288 are kept)")


@pytest.mark.parametrize("closed", [1, 2], ids=["stdout", "stderr"])
def test_a_closed_standard_stream_is_no_traceback(recording, closed):
    """Before: `shadowtwin whatif FILE >&-` ended in a traceback (sys.stdout is None), and with `2>&-` it printed
    nothing and exited 1 (its progress asked sys.stderr, None, whether it was a terminal)."""
    result = subprocess.run([sys.executable, "-m", "shadowtwin", "whatif", str(recording)], capture_output=True,
                            text=True, timeout=120, preexec_fn=lambda: os.close(closed))
    if closed == 1:
        assert result.returncode == 2 and result.stderr == (
            "shadowtwin: standard output is closed (>&-): what it prints would be lost; send it to /dev/null"
            " instead\n"), result.stderr
    else:
        assert result.returncode == 0, result.stderr
        assert "expected duplicate deliveries" in result.stdout and "Traceback" not in result.stderr


def test_ingest_of_a_gzipped_log_says_to_gunzip_it_before_the_broker(tmp_path):
    """Before: 'before any #Fields: line, a line is not UTF-8 text (invalid start byte at byte 1)'."""
    import gzip

    from tests.producers.test_mtl import EX01

    archived = tmp_path / "MSGTRK20261122-1.LOG"
    archived.write_bytes(gzip.compress(EX01.read_bytes()))
    result = shadowtwin("ingest", "exchange-mtl", archived, "--bootstrap", "127.0.0.1:1")
    one_line_naming(result, f"shadowtwin ingest: {archived}: not an Exchange message-tracking log, nothing published:"
                            " it is gzip-compressed (gunzip it first: the logs are read as Exchange writes them)")
