"""`shadowtwin whatif` as an operator runs it, on a recorded outage."""

import json
import subprocess
import sys

from producers.recording import write_events
from tests.state.scenario import Org


def outage_recording(path):
    """mbx01 holds three messages (shadows on mbx02) and dies for 5 hours; it comes back with the same database."""
    org = Org()
    events = [*org.started("mbx01", "dbP1", 0)]
    for i in range(3):
        events += [*org.received("mbx01", f"m{i}", 1, external=["bob@fabrikam.com"]),
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
    assert duplicates.count("3 (3 seen outside)") == 2
    delays = next(line for line in lines if line.startswith("delay per hop")).split()
    assert delays[-1] == "1.0h" and "3.0h" in delays, "the longest wait follows the span"
    commands = (tmp_path / "out" / "commands.jsonl").read_text().splitlines()
    assert len(commands) == 3 and json.loads(commands[0])["reason"] == "PRIMARY_HEARTBEAT_TIMEOUT"
    assert (tmp_path / "out" / "compare" / "alerts.jsonl").exists()


def test_per_node_setting_and_a_bad_name_is_refused(tmp_path):
    recording = tmp_path / "outage.avro"
    outage_recording(recording)
    per_node = whatif(recording, "--set", "mbx02:shadow_resubmit_time_span=30m")
    assert per_node.returncode == 0, per_node.stderr
    assert "31.0m" in next(line for line in per_node.stdout.splitlines() if line.startswith("delay per hop"))
    bad = whatif(recording, "--set", "ShadowResubmitTimespam=1h")
    assert bad.returncode == 2 and "ShadowResubmitTimespam" in bad.stderr and len(bad.stderr.splitlines()) == 1
