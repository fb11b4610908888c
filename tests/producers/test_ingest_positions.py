"""`ingest --follow` as a service: positions per file that advance only on delivery reports, survive a
restart, and are refused to a file that merely reuses an inode; rolled-over files closed; old files skipped."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from producers.ingest_positions import Positions
from producers.mtl_ingest import ingest
from producers.log_tail import LogTail
from producers.mtl_log import MtlReader
from tests.producers.relay.conftest import read_topic, wait_until
from tests.producers.test_kafka_producers import dead_letters
from tests.producers.test_mtl import EX01, GARBLED, ListSink, run
from tests.producers.test_signals import start, stopped


class AckingSink(ListSink):
    """Holds each record's delivery callback; the test acknowledges (or refuses) them in any order."""

    def __init__(self):
        super().__init__()
        self.callbacks = []
        self.set_aside = Counter()  # as KafkaSink's: events the broker refused as too large

    def event(self, event, on_delivery=None, set_aside=None):
        super().event(event)
        self.callbacks.append((event.event_id, on_delivery))

    def dead(self, letter, on_delivery=None):
        super().dead(letter)
        self.callbacks.append((f"dead-{letter.offset}", on_delivery))

    def poll(self):
        pass


def by_line(sink: AckingSink) -> list[list]:
    """The records' (id, callback) grouped by the line they came from (ids are mtl-<line hash>-<n>)."""
    lines: dict[str, list] = {}
    for record_id, done in sink.callbacks:
        lines.setdefault(record_id.rsplit("-", 1)[0], []).append((record_id, done))
    return list(lines.values())


def ids(records) -> list[str]:
    return [record_id for line in records for record_id, _ in line]


def copy_of_ex01(tmp_path, lines=None):
    log = tmp_path / "MSGTRK20261122-1.LOG"
    data = EX01.read_bytes().split(b"\r\n")
    log.write_bytes(b"\r\n".join(data[:lines] if lines else data) + b"\r\n")
    return log


def all_acknowledged(tmp_path):
    """A copy of EX01 ingested, every record acknowledged, the positions saved: (log, state file)."""
    log, state = copy_of_ex01(tmp_path), tmp_path / "positions.json"
    sink = AckingSink()
    ingest([str(log)], sink, positions=(positions := Positions(state)))
    for _, done in sink.callbacks:
        done(None)
    positions.save()
    return log, state


def everything(tmp_path):
    return {e.event_id for e in run([copy_of_ex01(tmp_path)])[0].events}


def test_a_restart_sends_only_what_was_not_acknowledged(tmp_path):
    log, state = copy_of_ex01(tmp_path), tmp_path / "positions.json"
    first = AckingSink()
    ingest([str(log)], first, positions=(positions := Positions(state)))
    lines = by_line(first)
    half = len(lines) // 2
    for _, done in reversed([record for line in lines[:half] for record in line]):  # out of order
        done(None)
    positions.save()
    second = AckingSink()
    counts = ingest([str(log)], second, positions=Positions(state))
    assert counts.published_before >= half
    assert ids(by_line(second)) == ids(lines[half:]), "nothing acknowledged is sent again, nothing else left out"


def test_a_last_line_the_server_is_still_writing_is_left_for_the_next_run_to_read_whole(tmp_path):
    """Exchange appends to the hour's log while it is read. A run without --follow took the half-written last
    line as a record: a dead letter (or, cut in its last value, events of the cut line), and the next run with
    --state sent the finished line again under another id."""
    log, state = copy_of_ex01(tmp_path, lines=25), tmp_path / "positions.json"  # its last line: a RECEIVE
    whole = log.read_bytes()
    written = whole.rstrip(b"\r\n").rindex(b"\n") + 60  # the server is writing the last line
    log.write_bytes(whole[:written])
    said, first = [], AckingSink()
    ingest([str(log)], first, positions=(positions := Positions(state)), say=said.append)
    assert said == [f"{log} line 25: not read: it has no line end yet (the server is still writing it); a later"
                    " run reads it once it is finished (with --state it sends only what it did not send), as"
                    " --follow does"]
    assert [d.offset for d in first.dead_letters] == sorted(GARBLED), "a line not yet written is no bad line"
    for _, done in first.callbacks:
        done(None)
    positions.save()
    with open(log, "ab") as server:
        server.write(whole[written:])
    again = AckingSink()
    ingest([str(log)], again, positions=Positions(state), say=said.append)
    assert len(said) == 1 and again.dead_letters == []
    sent = [e.event_id for e in first.events + again.events]
    assert sorted(sent) == sorted(e.event_id for e in run([log])[0].events), "each event of the log once"
    assert [e.kind for e in again.events] == ["MessageReceived"]


@pytest.mark.parametrize("field, value", [("offset", "abc"), ("offset", -5), ("head_len", "x"), ("path", None),
                                          ("beyond", ["a"]), ("device", 1.5), ("head_sha256", 5)])
def test_a_state_file_entry_of_the_wrong_type_is_refused_naming_it(tmp_path, field, value):
    """A hand-edited state file, still JSON: it was taken, and the ingester ended in a TypeError."""
    _, state = all_acknowledged(tmp_path)
    saved = json.loads(state.read_text())
    saved["files"][0][field] = value
    state.write_text(json.dumps(saved))
    with pytest.raises(ValueError, match=rf"{state}: not a state file of ingest positions \(files\[0\]\.{field}: "):
        Positions(state)


def test_a_position_does_not_pass_a_line_in_flight_or_refused(tmp_path):
    log, state = copy_of_ex01(tmp_path), tmp_path / "positions.json"
    sink = AckingSink()
    ingest([str(log)], sink, positions=(positions := Positions(state)))
    lines = by_line(sink)
    lines[1][0][1]("refused")  # the second line: refused
    for _, done in [record for line in lines[2:] for record in line] + lines[1][1:]:
        done(None)
    positions.save()
    assert positions.refused == 1
    (entry,) = json.loads(state.read_text())["files"]
    assert entry["beyond"], "what was acknowledged after the refused line is remembered one by one"
    again = AckingSink()
    ingest([str(log)], again, positions=Positions(state))
    assert ids(by_line(again)) == ids(lines[:2]), \
        "the first line (never acknowledged) and the refused one; nothing that was acknowledged"


def test_a_file_with_the_same_inode_but_other_first_bytes_starts_from_its_start(tmp_path):
    log, state = all_acknowledged(tmp_path)
    first_line = log.read_bytes().index(b"\n") + 1
    with open(log, "r+b") as rewrite:  # the same inode, other content (still a tracking log)
        rewrite.write(b"#Software: another server's log".ljust(first_line - 2) + b"\r\n")
    again = AckingSink()
    ingest([str(log)], again, positions=Positions(state))
    assert len(again.callbacks) > 0


def test_a_state_file_that_cannot_be_written_says_how_many_published_records_it_does_not_record(tmp_path):
    log, state = copy_of_ex01(tmp_path), tmp_path / "state" / "positions.json"
    sink = AckingSink()
    ingest([str(log)], sink, positions=(positions := Positions(state)))
    for _, done in sink.callbacks:
        done(None)
    state.parent.rename(tmp_path / "elsewhere")
    state.parent.write_text("a file where the folder was\n")
    assert not positions.save()
    assert positions.not_saved() == (f"{state}: could not be written (File exists); {len(sink.callbacks):,} published"
                                     " records are not recorded in it (a restart sends them again)")
    state.parent.unlink()
    assert not positions.save() and state.exists(), "written now, but the run had a gap: still said"


def test_a_save_that_fails_ends_a_followed_run(tmp_path):
    (tmp_path / "file").write_text("")
    stop = threading.Event()
    threading.Timer(10, stop.set).start()
    started = time.monotonic()
    ingest([str(copy_of_ex01(tmp_path))], AckingSink(), follow=True, stop=stop,
           positions=Positions(tmp_path / "file" / "positions.json"))
    assert time.monotonic() - started < 5, "ended at the first save, not by the stop"
    stop.set()


def test_a_rolled_over_file_is_closed_and_a_file_older_than_max_age_is_skipped(tmp_path):
    head = EX01.read_bytes().split(b"\r\n")[:6]
    first = tmp_path / "MSGTRK20261122-1.LOG"
    first.write_bytes(b"\r\n".join(head) + b"\r\n")
    old = tmp_path / "MSGTRK20261101-1.LOG"
    old.write_bytes(b"\r\n".join(head) + b"\r\n")
    os.utime(old, (time.time() - 3 * 86400,) * 2)
    tail = LogTail([str(first)], follow=True, new_reader=MtlReader, max_age_s=86400)
    try:
        assert [line.path for line in tail.poll() if line.item is not None] == [first]
        later = tmp_path / "MSGTRK20261122-2.LOG"
        later.write_bytes(b"\r\n".join(head) + b"\r\n")
        os.utime(later, (time.time() + 5,) * 2)
        for _ in range(3):
            list(tail.poll())
        assert tail.open_paths() == [later], "the finished file is closed, the old one never opened"
        with open(first, "ab") as more:  # a closed file that grows is read again where it was left
            more.write(head[-1] + b"\r\n")
        assert [line.number for line in tail.poll() if line.path == first] == [7]
    finally:
        tail.close()


def test_ingest_follow_restarted_mid_file_publishes_everything_once(kafka_bootstrap, topics, tmp_path):
    lines = EX01.read_bytes().split(b"\r\n")
    (tmp_path / "whole").mkdir()
    expected = everything(tmp_path / "whole")
    log, state, conf = tmp_path / "MSGTRK20261122-1.LOG", tmp_path / "positions.json", tmp_path / "topics.toml"
    conf.write_text(f'[topics]\nevents = "{topics.events}"\ndead_letters = "{topics.dead_letters}"\n')
    thirds = [len(lines) // 3, 2 * len(lines) // 3, len(lines)]
    log.write_bytes(b"\r\n".join(lines[:thirds[0]]) + b"\r\n")

    def service():
        return start(kafka_bootstrap, "--conf", conf, "ingest", "exchange-mtl", log, "--follow", "--state", state)

    def published():
        return read_topic(kafka_bootstrap, topics.events, seconds=1, max_s=10)

    first = service()
    assert wait_until(lambda: len(published()) > 0, 30)
    with open(log, "ab") as out:
        out.write(b"\r\n".join(lines[thirds[0]:thirds[1]]) + b"\r\n")
    time.sleep(1.0)
    assert stopped(first, signal.SIGTERM)[0] == 143
    with open(log, "ab") as out:
        out.write(b"\r\n".join(lines[thirds[1]:]))
    second = service()
    assert wait_until(lambda: len(published()) >= len(expected), 40)
    time.sleep(2.0)  # anything sent twice would arrive by now
    code, said, _ = stopped(second, signal.SIGTERM)
    assert code == 143 and "published by an earlier run and not sent again" in said
    back = [e.event_id for e in published()]
    assert sorted(back) == sorted(expected), "every event once: none lost, none twice"
    letters = dead_letters(kafka_bootstrap, topics.dead_letters, len(GARBLED))
    assert sorted(d.offset for d in letters) == sorted(GARBLED)


UNREADABLE_LATER = """
import json, os, shutil, sys, threading
from pathlib import Path
from producers.mtl_ingest import ingest
from tests.producers.test_mtl import ListSink
folder, said, stop, sink = Path(sys.argv[1]), [], threading.Event(), ListSink()
thread = threading.Thread(target=lambda: said.append(ingest([str(folder)], sink, follow=True, stop=stop,
                                                             poll_seconds=0.05, say=said.append,
                                                             internal_domains=frozenset({"contoso.com"}))))
thread.start()
n = -1
while n != len(sink.events):  # the first file read to its end
    n = len(sink.events)
    stop.wait(0.5)
second = folder / "MSGTRK20261122-2.LOG"
shutil.copy(folder / "MSGTRK20261122-1.LOG", folder / "tmp")
os.chmod(folder / "tmp", 0)
os.rename(folder / "tmp", second)
stop.wait(1)
alive, before = thread.is_alive(), len(sink.events)
os.chmod(second, 0o644)
stop.wait(1)
stop.set(); thread.join(10)
print(json.dumps({"alive": alive, "first": n, "before": before, "after": len(sink.events), "said": said[0],
                  "unreadable_at_end": said[-1].unreadable}))
"""


def test_a_file_that_comes_while_following_and_cannot_be_read_is_said_and_read_once_it_can_be(tmp_path):
    """Before: a new MSGTRK file without read permission in the followed folder ended `ingest --follow` at once
    ('Permission denied', exit 2), the summary unsaid and every other file no longer followed."""
    copy_of_ex01(tmp_path)
    no_override = ["setpriv", "--inh-caps=-dac_override,-dac_read_search",
                   "--bounding-set=-dac_override,-dac_read_search", "--"] if os.geteuid() == 0 else []
    result = subprocess.run([*no_override, sys.executable, "-c", UNREADABLE_LATER, str(tmp_path)], capture_output=True,
                            text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout)
    assert found["alive"] and found["before"] == found["first"] > 0, found
    assert found["said"] == f"{tmp_path / 'MSGTRK20261122-2.LOG'}: cannot be read (Permission denied); it is read" \
                            " when it can be"
    assert found["after"] > found["before"] and found["unreadable_at_end"] == 0, "read once it could be"


def test_a_last_line_with_no_line_end_that_is_a_whole_record_is_read(tmp_path):
    """A log written without a line end after its last record (by hand, by a script joining lines) is no file
    the server is still writing: its last record is read, and nothing is said."""
    log = copy_of_ex01(tmp_path, lines=25)
    whole = run([log])[0]
    log.write_bytes(log.read_bytes().rstrip(b"\r\n"))
    said, sink = [], AckingSink()
    ingest([str(log)], sink, say=said.append)
    assert said == [] and [d.offset for d in sink.dead_letters] == sorted(GARBLED)
    assert sorted(e.event_id for e in sink.events) == sorted(e.event_id for e in whole.events)
