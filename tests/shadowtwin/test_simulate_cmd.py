"""`shadowtwin simulate` from the command line: reproducible files, ground truth, clear errors."""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
import time
from datetime import datetime

import pytest

from infra.settings import PROJECT_ROOT
from producers.recording import read_events
from shadowtwin.cli import main


def test_same_seed_gives_the_same_bytes_and_a_truth_beside_them(tmp_path, capsys):
    for name in ("a", "b"):
        assert main(["simulate", "--seed", "7", "--duration", "00:15:00", "--out", str(tmp_path / f"{name}.avro")]) == 0
    assert (tmp_path / "a.avro").read_bytes() == (tmp_path / "b.avro").read_bytes()
    assert (tmp_path / "a.truth.jsonl").read_bytes() == (tmp_path / "b.truth.jsonl").read_bytes()
    summary = json.loads((tmp_path / "a.truth.jsonl").read_text().splitlines()[0])
    assert summary["events"] == sum(1 for _ in read_events(tmp_path / "a.avro")) > 1000
    assert "events/s" in capsys.readouterr().out
    assert main(["simulate", "--seed", "8", "--duration", "00:15:00", "--out", str(tmp_path / "c.avro")]) == 0
    assert (tmp_path / "c.avro").read_bytes() != (tmp_path / "a.avro").read_bytes()


def test_a_broken_topology_is_refused_with_the_key_named(tmp_path, capsys):
    bad = tmp_path / "topology.toml"
    bad.write_text('[organisation]\nduration = "1h"\n[[servers]]\nname = "a"\nsite = "s"\n'
                   '[[faults]]\nkind = "crash"\nserver = "nobody"\n')
    assert main(["simulate", "--topology", str(bad), "--out", str(tmp_path / "x.avro")]) == 2
    err = capsys.readouterr().err
    assert "faults[0].server" in err and "nobody" in err
    assert not (tmp_path / "x.avro").exists()


@pytest.mark.parametrize("fault, named", [
    ('kind = "crash"\nserver = "mbx2"', "faults[0].server = 'mbx2': expected a server of the topology;"
                                        " did you mean 'mbx02'?"),
    ('kind = "partition"\nservers = ["mbx01", "mbx2"]', "faults[0].servers = ['mbx01', 'mbx2']: expected two servers"
                                                        " of the topology; did you mean 'mbx02'?"),
    ('kind = "slow_next_hop"\nnext_hop = "mbx2"\ndelay = "5m"', "faults[0].next_hop = 'mbx2': expected a server,"
                                                                " mailbox database or outside domain; did you mean"
                                                                " 'mbx02'?"),
], ids=["server", "servers", "next_hop"])
def test_a_fault_naming_a_misspelt_server_gets_the_closest_name(fault, named, tmp_path, capsys):
    """Before: only 'expected a server of the topology', with nine servers to compare by eye."""
    bad = tmp_path / "topology.toml"
    bad.write_text('[organisation]\nduration = "1h"\n[[servers]]\nname = "mbx01"\nsite = "s"\n'
                   '[[servers]]\nname = "mbx02"\nsite = "s"\n'
                   f'[[faults]]\nat = "00:10:00"\nduration = "00:10:00"\n{fault}\n')
    assert main(["simulate", "--topology", str(bad), "--out", str(tmp_path / "x.avro")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith(named), line


def test_a_fault_names_its_servers_in_any_case_as_exchange_reads_them(tmp_path, capsys):
    """Before: `server = "MBX02"` in a crash of a topology whose [[servers]] says mbx02 was refused, 'expected a server
    of the topology' and no closest name, where the twin, whatif --set and `server` read names in any case; and
    [[servers]] MBX01 and mbx01 were two servers, the twin's one."""
    from producers.simulator.topology import load_topology

    topology = tmp_path / "topology.toml"
    servers = ('[organisation]\nduration = "1h"\n[[mailbox_databases]]\nname = "DB01"\ndag = "d"\n'
               '[[servers]]\nname = "mbx01"\nsite = "s"\ndag = "d"\n[[servers]]\nname = "mbx02"\nsite = "s"\ndag = "d"\n')
    topology.write_text(servers + '[[faults]]\nkind = "crash"\nserver = "MBX02"\nat = "00:10:00"\nduration = "00:10:00"\n'
                        '[[faults]]\nkind = "partition"\nservers = ["Mbx01", "MBX02"]\nat = "00:30:00"\nduration = "00:05:00"\n')
    assert [(f.server, f.servers) for f in load_topology(topology).faults] == [("mbx02", ()), (None, ("mbx01", "mbx02"))]
    assert main(["simulate", "--topology", str(topology), "--out", str(tmp_path / "x.avro")]) == 0
    topology.write_text(servers + '[[servers]]\nname = "MBX01"\nsite = "s"\ndag = "d"\n')
    assert main(["simulate", "--topology", str(topology), "--out", str(tmp_path / "y.avro")]) == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith("servers: a name appears twice in ['mbx01', 'mbx02', 'MBX01']")


def test_a_topology_without_mailbox_databases_is_refused_in_one_line(tmp_path, capsys):
    """Before: simulate started, then ended in a traceback, IndexError 'Cannot choose from an empty sequence' (the
    first message submitted from a mailbox), exit 1, a recording cut at its start left behind."""
    topology = tmp_path / "topology.toml"
    topology.write_text('[organisation]\nduration = "1h"\n[[servers]]\nname = "mbx01"\nsite = "s"\ndag = "d"\n')
    assert main(["simulate", "--topology", str(topology), "--out", str(tmp_path / "x.avro")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"shadowtwin simulate: {topology}: mailbox_databases: at least one is needed ([[mailbox_databases]] with name"
        " and the dag of a server: where the organisation's mailboxes live)"]
    assert not (tmp_path / "x.avro").exists()


@pytest.mark.parametrize("table, line", [
    ('[internet]\nsenders = []', "internet.senders = []: expected an outside server that sends mail in"
                                  " (workload.internal_submission_share is below 1)"),
    ('[internet]\nreceivers = []', "internet.receivers = []: expected an outside domain that mail goes to"
                                    " (workload.external_recipient_share is above 0)"),
    ('[workload]\nrecipients_weights = []', "workload.recipients_weights = []: expected weights >= 0 for 1, 2, 3, ..."
                                             " recipients, at least one above 0"),
], ids=["senders", "receivers", "weights"])
def test_an_empty_list_the_workload_draws_from_is_refused_in_one_line(table, line, tmp_path, capsys):
    """Before: senders = [] or receivers = [] started the run and ended in a traceback, IndexError 'Cannot choose
    from an empty sequence', exit 1; recipients_weights = [] said "workload = 'a table': expected Workload (min() arg
    is an empty sequence)"."""
    topology = tmp_path / "topology.toml"
    topology.write_text('[organisation]\nduration = "1h"\n[[mailbox_databases]]\nname = "DB01"\ndag = "d"\n'
                        f'[[servers]]\nname = "mbx01"\nsite = "s"\ndag = "d"\n{table}\n')
    assert main(["simulate", "--topology", str(topology), "--out", str(tmp_path / "x.avro")]) == 2
    assert capsys.readouterr().err.splitlines() == [f"shadowtwin simulate: {topology}: {line}"]
    assert not (tmp_path / "x.avro").exists()


def test_crashes_of_one_server_that_overlap_are_refused(tmp_path, capsys):
    """Before, the simulator brought the server back at the first crash's end, inside the second one's
    window (hunt seeds 875, 986, 999: a server down '5 hours' logging again after 8 minutes)."""
    bad = tmp_path / "topology.toml"
    bad.write_text('[organisation]\nduration = "1h"\n[[servers]]\nname = "mbx01"\nsite = "s"\n'
                   '[[faults]]\nkind = "crash"\nserver = "mbx01"\nat = "00:20:00"\nduration = "05:00:00"\n'
                   '[[faults]]\nkind = "crash"\nserver = "mbx01"\nat = "00:10:00"\nduration = "00:15:00"\n')
    assert main(["simulate", "--topology", str(bad), "--out", str(tmp_path / "x.avro")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith("faults[0]: mbx01 crashes again while down from faults[1]; a server's crashes must not"
                         " overlap"), line


@pytest.mark.parametrize("options, named", [
    (["--out", "typo/x.avro"], "typo/x.avro"),
    (["--out", "x.avro", "--truth", "typo/x.truth.jsonl"], "typo/x.truth.jsonl"),
    (["--format", "exchange-mtl", "--out", "typo/logs"], "typo/logs"),
], ids=["out", "truth", "logs"])
def test_an_output_in_a_folder_that_does_not_exist_is_refused_before_the_run(options, named, tmp_path, monkeypatch,
                                                                            capsys):
    """As `record`'s file: the folders of --format exchange-mtl --out used to be made, and --out x.avro
    was written before --truth's missing folder was said."""
    monkeypatch.chdir(tmp_path)
    assert main(["simulate", "--duration", "00:05:00", *options]) == 2
    assert capsys.readouterr().err.splitlines() == [f"shadowtwin simulate: {named}: No such file or directory"]
    assert not list(tmp_path.iterdir()), "nothing written, no folder made"


@pytest.mark.parametrize("options, truth, out", [
    (["--out", "day.jsonl", "--truth", "./day.jsonl"], "day.jsonl", "day.jsonl"),
    (["--format", "exchange-mtl", "--out", "logs", "--truth", "logs"], "logs", "logs"),
], ids=["events file", "logs folder"])
def test_a_truth_file_that_is_the_events_output_is_refused_before_the_run(options, truth, out, tmp_path, monkeypatch,
                                                                         capsys):
    """Before: `--out day.avro --truth day.avro` wrote the events, then the truth over them, exit 0 (day.avro held
    JSON Lines of the truth); `--format exchange-mtl --out logs --truth logs` wrote the logs, then said 'logs: Is a
    directory', exit 2."""
    monkeypatch.chdir(tmp_path)
    assert main(["simulate", "--duration", "00:05:00", *options]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"shadowtwin simulate: --truth {truth}: the same path as the events (--out {out}): the ground truth"
        " would overwrite them; name another file, or leave --truth out for NAME.truth.jsonl beside them"]
    assert not list(tmp_path.iterdir()), "nothing simulated"


def test_the_default_truth_is_named_after_the_whole_events_file_and_never_overwrites_it(tmp_path, monkeypatch, capsys):
    """Before, the truth's name kept the events file's name up to its first dot: `--out day.seed7.avro` and `--out
    day.seed8.avro` both wrote day.truth.jsonl, the second run's truth over the first's (whatif --truth then scored
    seed 7 against seed 8's truth); `--out day.truth.jsonl` wrote the events, then the truth over them, exit 0."""
    monkeypatch.chdir(tmp_path)
    for seed, out in (("7", "day.seed7.avro"), ("8", "day.seed8.avro"), ("7", "day.truth.jsonl")):
        assert main(["simulate", "--seed", seed, "--duration", "00:05:00", "--out", out]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "day.seed7.avro", "day.seed7.truth.jsonl", "day.seed8.avro", "day.seed8.truth.jsonl", "day.truth.jsonl",
        "day.truth.truth.jsonl"]
    assert next(read_events(tmp_path / "day.truth.jsonl"), None) is not None, "the events are still there"
    assert "ground truth: day.truth.truth.jsonl" in capsys.readouterr().out


def test_a_truth_named_as_an_avro_recording_is_refused_before_the_run(tmp_path, monkeypatch, capsys):
    """Before: `--out y.avro --truth day.avro` (the truth option taken for the events') wrote the ground truth's JSON
    Lines over the recording day.avro, exit 0; whatif day.avro then said 'not an Avro container file'."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "day.avro").write_bytes(b"a recording")
    assert main(["simulate", "--duration", "00:05:00", "--out", "y.avro", "--truth", "day.avro"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "shadowtwin simulate: --truth day.avro: the ground truth is JSON Lines, not Avro: name it NAME.truth.jsonl (the"
        " events go to --out)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["day.avro"]
    assert (tmp_path / "day.avro").read_bytes() == b"a recording"


@pytest.mark.parametrize("value", ["abc", "1y", "0s", "0.5ms"])  # "": any empty argument (test_errors.py)
def test_a_bad_duration_is_refused_naming_the_option_not_the_topology(value, tmp_path, capsys):
    assert main(["simulate", "--duration", value, "--out", str(tmp_path / "x.avro")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("shadowtwin simulate: --duration") and value in line and "topology" not in line, line
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("value", ["-5m", "-00:05:00"])
def test_a_negative_duration_is_refused_as_a_duration_not_longer_than_zero(value, tmp_path, capsys):
    """Taken for an option by argparse, it was refused as '--duration: expected one argument', naming no value."""
    assert main(["simulate", "--duration", value, "--out", str(tmp_path / "x.avro")]) == 2
    assert capsys.readouterr().err.splitlines() == [f"shadowtwin simulate: --duration {value}: must be longer than zero"]
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("options, line", [
    (["--seconds", "5"], "--seconds is only for --live"),
    (["--speed", "60"], "--speed is only for --to-kafka or --live"),
    (["--to", "scratch.events"], "--to is only for --to-kafka or --live"),
    (["--to-kafka", "--out", "day.avro"], "--out is only for a file run (--to-kafka and --live publish)"),
    (["--format", "exchange-mtl", "--to-kafka"], "--format exchange-mtl writes files: it cannot be combined with"
                                                 " --to-kafka or --live"),
], ids=["seconds", "speed", "to", "out", "format"])
def test_an_option_the_run_would_not_use_is_refused_before_it_runs(options, line, tmp_path, monkeypatch, capsys):
    """Before: `simulate --seconds 5` simulated the whole day into simulation-7.avro, and
    `--format exchange-mtl --to-kafka` published (or said the broker's error) before it was refused."""
    monkeypatch.chdir(tmp_path)
    assert main(["simulate", *options, "--duration", "00:05:00", "--bootstrap", "127.0.0.1:1"]) == 2
    assert capsys.readouterr().err.splitlines() == [f"shadowtwin simulate: {line}"]
    assert not list(tmp_path.iterdir()), "nothing simulated"


def test_ctrl_c_ends_a_file_run_early_with_a_valid_shorter_recording(tmp_path):
    out = tmp_path / "big.avro"
    run = subprocess.Popen([sys.executable, "-m", "shadowtwin.cli", "simulate", "--duration", "2d", "--out", str(out)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not (out.exists() and out.stat().st_size > 0) and time.monotonic() < deadline:
            time.sleep(0.1)
        run.send_signal(signal.SIGINT)
        stdout, stderr = run.communicate(timeout=10)  # the whole two days would take half a minute and more
    finally:
        run.kill()
    assert run.returncode == 130, stderr
    assert stderr == ""
    summary = next(line for line in stdout.splitlines() if line.startswith("interrupted after "))
    written = list(read_events(out))
    assert f"interrupted after {len(written):,} events" in summary
    reached, end = summary.split(", up to simulated time ")[1].split(";")[0].split(" of ")
    assert end == "2026-01-07T00:00:00.000Z", "how much of the two days was not simulated"
    assert 0 <= datetime.fromisoformat(reached).timestamp() * 1000 - written[-1].event_time_ms < 60_000, reached
    assert json.loads((tmp_path / "big.truth.jsonl").read_text().splitlines()[0])["events"] == len(written)


@pytest.mark.parametrize("option", ["--to", "--topic"])
def test_the_topic_to_publish_to_is_named_with_to_as_in_replay_ingest_and_probe(option):
    from shadowtwin.cli import parser

    args = parser().parse_args(["simulate", "--to-kafka", option, "scratch.events"])
    assert args.to_kafka and args.topic == "scratch.events"
    for command in (["replay", "x.jsonl"], ["ingest", "exchange-mtl", "x.LOG"], ["probe"]):
        assert parser().parse_args([*command, "--to", "scratch.events"]).to == "scratch.events"


def test_the_readmes_ingest_of_simulated_logs_reads_every_line_simulate_wrote(topics, kafka_bootstrap, tmp_path,
                                                                              monkeypatch):
    """README showed `simulate --format exchange-mtl --out DIR` (a folder per server) and no ingest of it: `ingest
    exchange-mtl DIR` reads no subfolder. Its command, as written, publishes every line of every server's logs."""
    monkeypatch.setenv("SHADOWTWIN_TOPICS_EVENTS", topics.events)
    monkeypatch.setenv("SHADOWTWIN_TOPICS_DEAD_LETTERS", topics.dead_letters)
    readme = (PROJECT_ROOT / "README.md").read_text()
    (command,) = re.findall(r"--format exchange-mtl --out DIR` writes.*?`(shadowtwin ingest exchange-mtl [^`]*)`", readme)
    cli = [sys.executable, "-m", "shadowtwin.cli"]
    simulated = subprocess.run([*cli, "simulate", "--format", "exchange-mtl", "--out", "DIR", "--duration", "30m"],
                               cwd=tmp_path, capture_output=True, text=True, timeout=120)
    written = int(re.search(r"wrote ([\d,]+) message-tracking lines", simulated.stdout)[1].replace(",", ""))
    ingested = subprocess.run([*cli, *shlex.split(command)[1:], "--bootstrap", kafka_bootstrap],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ingested.returncode == 0, ingested.stderr[-2000:]
    assert ingested.stdout.startswith(f"{written} lines: "), ingested.stdout


def test_ctrl_c_ends_a_run_of_logs_early_with_the_logs_and_truth_written_so_far(tmp_path):
    """`simulate --format exchange-mtl` took Ctrl-C and SIGTERM and went on: two days ran to their end (minutes)."""
    out = tmp_path / "logs"
    run = subprocess.Popen([sys.executable, "-m", "shadowtwin.cli", "simulate", "--format", "exchange-mtl",
                            "--duration", "2d", "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        deadline = time.monotonic() + 30
        while not list(out.glob("*/MSGTRK*.LOG")) and time.monotonic() < deadline:
            time.sleep(0.1)
        run.send_signal(signal.SIGINT)
        stdout, stderr = run.communicate(timeout=20)
    finally:
        run.kill()
    assert run.returncode == 130, stderr
    assert stderr == ""
    assert stdout.startswith("interrupted after "), stdout
    assert " of 2026-01-07T00:00:00.000Z; wrote " in stdout, stdout
    assert json.loads((out / "truth.jsonl").read_text().splitlines()[0])["events"] > 0
