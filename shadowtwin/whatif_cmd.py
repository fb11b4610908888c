"""`shadowtwin whatif FILE [--set name=value] [--compare name=value] [--out DIR] [--json] [--report DIR] [--truth FILE]`.

Progress (events read, servers replayed) goes to stderr, a line every 2 seconds at most, when
stderr is a terminal or with --progress.
`--report DIR` writes report.html (plots) and summary.json (`shadowtwin.whatif_report`);
`--truth FILE` scores the baseline's alerts against the simulator's truth (`state.scoring`).

Bad input (a parameter, the recording, the output folder; a `node:name=value` for a server
neither the recording nor the configuration names, once the recording is read) is raised as
the command line's errors are; a recording cut short or damaged is replayed up to its last
complete block (Avro) or line (JSON Lines), its summary printed, and then the damage is raised
(naming the file and the offset or line).

The twin's clock-skew guard (`state.clock_guard`, `twin.max_clock_skew_seconds`) runs first:
a skewed event, or one whose event time is out of range (before 1970, after 2262), is left out of every run and, with --out, written to `dead_letters.jsonl`
with its reason (topic: the recording; offset: its 1-based position in the recording).
"""

from __future__ import annotations

import contextlib
import gc
import json
import sys
import time
from pathlib import Path
from typing import Callable, Iterable

from infra.config import timespans
from infra.settings import Settings
from producers.recording import check_name, read_recorded
from schemas import jsonl
from schemas.codec import encode, kafka_key
from schemas.container import ContainerError
from schemas.events import DeadLetter, Event, ShadowPromoted
from shadowtwin.arguments import did_you_mean, parse_assignment, server_name
from shadowtwin.errors import UsageError
from shadowtwin.json_output import plain
from state import collector
from state.clock_guard import OUT_OF_RANGE, Verdict, guard
from state.parameters import ModelConfig, ShadowRedundancyParameters, parameter_name
from state.replay import replay
from state.summary import state_records
from state.scoring import score
from state.heartbeat_rate import heartbeat_ms, judged_at_the_recorded_rate, recorded_rates
from state.whatif import Summary, duration, render
from shadowtwin.whatif_report import write_report


def apply_assignments(config: ModelConfig, assignments: list[str]) -> ModelConfig:
    """`name=value` changes every node; `node:name=value` changes one node. A parameter given twice for the same
    nodes is refused: one run takes one value (the last one was taken, and the run named after both)."""
    given: dict[tuple[str | None, str], str] = {}
    for assignment in assignments:
        node, name, value = parse_assignment(assignment)
        if (first := given.setdefault((node and node.lower(), parameter_name(name)), assignment)) != assignment:
            raise ValueError(f"{first!r} and {assignment!r} set the same parameter: a run takes one value (to compare"
                             " two, --set one and --compare the other)")
        config = config.with_overrides({name: value}, node=node)
    return config


def label(assignments: list[str]) -> str:
    return ", ".join(assignments) if assignments else "baseline"


def run_whatif(settings: Settings, file: Path, sets: list[str], compares: list[str], out: Path | None,
               say: Callable[[str], None] = print, *, as_json: bool = False, report: Path | None = None,
               truth: Path | None = None, progress: Callable[..., None] | None = None,
               show_progress: bool = False) -> int:
    base = _assigned(settings.shadow_redundancy, sets, "--set")
    other = _assigned(base, compares, "--compare") if compares else None
    runs = [(label(sets), base)] + ([(label(compares), other)] if other is not None else [])
    for option, folder in (("--out", out), ("--report", report)):
        if folder is not None and folder.exists() and not folder.is_dir():
            raise UsageError(f"{option} {folder}: a file, not a folder (it writes its files into a folder)")
    folders = [out if index == 0 else out / "compare" for index in range(len(runs))] if out is not None else []
    made = _made_folders(folders + ([report] if report is not None else []))  # before the replay: known at once
    try:
        truth_records = _truth(truth) if truth is not None else None
        progress = progress or StderrProgress(always=show_progress)
        recorded, damage = load(check_name(file), lambda n: progress(f"read {n:,} events from {file}"))
        progress(f"read {len(recorded):,} events from {file}" + (" (cut short)" if damage else ""), final=True)
        if not recorded:  # nothing to replay: a summary of zeros would only hide the reason
            raise damage or UsageError(f"{file}: holds no events")
        if truth_records is not None:
            _check_truth_matches(truth_records, recorded, truth, file)
        spelled = _check_nodes(settings.shadow_redundancy, {"--set": sets, "--compare": compares}, recorded, file)
        if spelled != {"--set": sets, "--compare": compares}:
            base = _assigned(settings.shadow_redundancy, spelled["--set"], "--set")
            other = _assigned(base, spelled["--compare"], "--compare") if compares else None
            runs = [(name, config) for (name, _), config in zip(runs, (base, other))]
    except BaseException:
        _remove(made)  # refused before writing anything: no empty folder left behind
        raise
    verdict = guard(recorded, settings.twin.max_clock_skew_seconds * 1000)
    summaries, results, left_out, notes = [], [], {}, []
    rates, modes = recorded_rates(verdict.accepted)
    for index, (name, config) in enumerate(runs):
        asked = config.shadow_silence_heartbeats
        config, slowest = judged_at_the_recorded_rate(config, rates, modes)
        if slowest is not None:
            ours, count = heartbeat_ms(config, slowest.shadow, modes), config.shadow_silence_heartbeats
            notes.append(f"{name}: {slowest.shadow} queried every {duration(slowest.every_ms)} in the recording"
                         f" (median), a heartbeat of this run is {duration(ours)}: a replay cannot make the queries"
                         f" a recording lacks, so a shadow is taken to be silent after {duration(count * ours)}"
                         f" without one ({count} heartbeats, not {asked})")
        servers = [0, 0]  # replayed, of

        def replayed(done: int, total: int) -> None:
            servers[:] = done, total
            progress(f"replaying {name}: {done}/{total} servers")
        events = verdict.accepted
        if _decides_promotions_otherwise(settings.shadow_redundancy, config, events):
            events = [e for e in events if not isinstance(e, ShadowPromoted)]
            left_out[name] = len(verdict.accepted) - len(events)
        try:
            result = replay(events, config, progress=replayed)
        except KeyboardInterrupt:
            _remove(made)  # Ctrl-C: the folders made for this run and still empty go (rmdir keeps any written)
            written = f"; {runs[0][0]}'s decisions are in {folders[0]}" if index and folders else ""
            how_far = f"{servers[0]} of {servers[1]} servers replayed" if servers[1] else "no server replayed yet"
            raise KeyboardInterrupt(f"while replaying {name} ({how_far}), run {index + 1} of {len(runs)}: nothing"
                                    f" printed{written}") from None
        progress(f"replayed {name}: {len(result.alerts):,} alerts, {len(result.commands):,} commands", final=True)
        summaries.append(Summary.of(name, result))
        results.append(result)
        if folders:
            write_outputs(folders[index], result)
    scored = score(results[0].alerts, truth_records) if truth_records is not None else None
    notes += [f"{name}: {count} ShadowPromoted events left out (messages the recorded shadows promoted by the"
              " recording's parameters): this run decides every promotion by its own"
              for name, count in left_out.items() if count]
    out_of_range = sum(1 for *_, why in verdict.skewed if why.startswith(OUT_OF_RANGE))
    if len(verdict.skewed) > out_of_range:
        notes.append(f"{len(verdict.skewed) - out_of_range} events left out: stamped more than"
                     f" {settings.twin.max_clock_skew_seconds} s ahead (twin.max_clock_skew_seconds)")
    if out_of_range:
        notes.append(f"{out_of_range} events left out: event time before 1970 or after 2262-04-11")
    if as_json:
        say(json.dumps({"summaries": [plain(s) for s in summaries], "skewed_events": len(verdict.skewed),
                        "notes": notes, "score": plain(scored)}))
    else:
        say(render(summaries))
        if scored is not None:
            say("\n" + scored.render())
        for note in notes:
            say("\n" + note)
    if out is not None:
        with open(out / "dead_letters.jsonl", "w") as f:
            jsonl.write(dead_letters(verdict, file), f)
        if not as_json:
            say(f"\nalerts, commands and dead letters written to {out}")
    if report is not None:
        gap_ms = 3 * base.timing("").heartbeat_ms
        html, _ = write_report(report, file, list(zip(summaries, results)), verdict.accepted, gap_ms, scored,
                               notes=notes, skewed_events=len(verdict.skewed))
        progress(f"report written to {html}", final=True)
    if damage is not None:
        raise damage
    return 0


def _made_folders(folders: list[Path]) -> list[Path]:
    """Create `folders`, each in a folder that exists (or one made before it: --out's compare/);
    the ones this call made, to remove if the run is refused. A missing folder is refused (the
    OSError naming it), not made, as for every output: a mistyped path makes no folders."""
    made: list[Path] = []
    try:
        for folder in folders:
            if not folder.is_dir():
                folder.mkdir()
                made.append(folder)
    except OSError:
        _remove(made)
        raise
    return made


def _remove(made: list[Path]) -> None:
    for folder in reversed(made):
        with contextlib.suppress(OSError):
            folder.rmdir()


def _truth(path: Path) -> list[dict]:
    from producers.simulator.truth import read_truth

    def refused(why: str) -> UsageError:
        return UsageError(f"{path}: not a simulator truth file ({why}; expected the ground truth simulate"
                          " writes beside its events: a summary line, then a line per message)")
    try:
        with open(path, "rb") as file:  # its first line says what it is, before a recording's bytes are named
            first = file.readline()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    try:
        summary = json.loads(first) if first else None
    except ValueError:  # UnicodeDecodeError too: an .avro recording, say
        raise refused("its first line is not JSON") from None
    if not (isinstance(summary, dict) and summary.get("kind") == "summary"):
        raise refused("it is empty" if not first else "its first line is no summary")
    _, messages = read_truth(path)  # a bad line further on is a JsonlError naming it
    if not all(isinstance(m, dict) and "message_id" in m for m in messages):
        raise refused("a line without a message_id")
    return messages


def _check_truth_matches(truth_records: list[dict], recorded: list, truth: Path, file: Path) -> None:
    """Refuse a truth none of whose messages the recording holds: another run's, which would be scored as every real
    promotion missed (a recording that holds part of the truth's day is scored)."""
    ids = {m["message_id"] for m in truth_records}
    if ids and not any((message := getattr(event, "message", None)) is not None and message.message_id in ids
                       for event, _ in recorded):
        raise UsageError(f"{truth}: none of its {len(ids):,} messages is in {file} (the ground truth of another"
                         " simulation? simulate writes each run's beside its events: NAME.truth.jsonl)")


class StderrProgress:
    """Progress lines on stderr, at most one every `every_s` seconds, and none in the first
    `every_s` seconds: a short run (or one refused at once) prints only its result. A final
    line (a step done) is shown once any line was. Only when stderr is a terminal, unless
    `always` (`whatif --progress`): a script reading stderr gets its one error line."""

    def __init__(self, every_s: float = 2.0, always: bool = False):
        self.every_s, self.last, self.shown = every_s, time.monotonic(), False
        self.on = always or sys.stderr.isatty()

    def __call__(self, line: str, final: bool = False) -> None:
        now = time.monotonic()
        if self.on and (now - self.last >= self.every_s or final and self.shown):
            self.last, self.shown = now, True
            print(line, file=sys.stderr, flush=True)


def _assigned(config: ModelConfig, assignments: list[str], option: str) -> ModelConfig:
    try:
        changed = apply_assignments(config, assignments)
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}") from None
    for assignment in assignments:
        _, name, value = parse_assignment(assignment)
        if value.isdigit() and parameter_name(name) in timespans(ShadowRedundancyParameters):
            print(f"shadowtwin whatif: {option} {assignment}: {value} alone is {value} days, as Exchange reads a"
                  f" TimeSpan (write {value}s, {value}m or {value}h for seconds, minutes or hours)", file=sys.stderr)
    return changed


# What decides when a shadow promotes on its own (state.model: promotion_span, heartbeat_of).
_PROMOTION_PARAMETERS = ("mode", "shadow_resubmit_time_span", "shadow_heartbeat_frequency",
                         "shadow_heartbeat_timeout_interval", "shadow_heartbeat_retry_count")


def _decides_promotions_otherwise(recorded: ModelConfig, config: ModelConfig, events: list[Event]) -> bool:
    """Whether a run promotes by other parameters than the servers that recorded `events` had (the configuration's):
    their own ShadowPromoted events then tell what the recording's parameters made them do, not this run's (with a
    longer ShadowResubmitTimeSpan, a shadow that promoted at the recorded span closed its messages 'promoted', and a
    primary back with its queue had them forecast delivered twice, in a world where no shadow promoted)."""
    nodes = {"", *recorded.nodes, *config.nodes, *(e.node for e in events if isinstance(e, ShadowPromoted))}
    return any(getattr(recorded.for_node(n), f) != getattr(config.for_node(n), f)
               for n in nodes for f in _PROMOTION_PARAMETERS)


def _check_nodes(config: ModelConfig, options: dict[str, list[str]], recorded: list,
                 file: Path) -> dict[str, list[str]]:
    """The assignments with each node spelled as the recording or the configuration (`[shadow_redundancy]
    servers`, `nodes`) spells it: Exchange's server names are read in any case (MBX01 is mbx01). Refuse a
    `node:name=value` whose node is a server neither names: it would change nothing, silently. A configured
    server the recording does not name is let through: the same settings may serve many recordings."""
    configured = set(config.servers) | set(config.nodes)
    if all(parse_assignment(a)[0] in configured | {None} for assignments in options.values() for a in assignments):
        return options
    known = configured | _servers_named(event for event, _ in recorded)
    spelled: dict[str, list[str]] = {option: [] for option in options}
    for option, assignments in options.items():
        for assignment in assignments:
            node, name, value = parse_assignment(assignment)
            if node is not None:
                if server_name(node, known) is None:
                    raise UsageError(f"{option} {assignment}: no server {node!r} in {file} or [shadow_redundancy]"
                                     f" servers{did_you_mean(node, known)}")
                assignment = f"{server_name(node, known)}:{name}={value}"
            spelled[option].append(assignment)
    return spelled


_SERVER_FIELDS = ("node", "primary_server", "shadow_server", "candidate", "next_hop", "mailbox_server", "server")


def _servers_named(events: Iterable[Event]) -> set[str]:
    """Every name the events give a server: the node that emitted one, its primary, a shadow, a next hop ..."""
    return {name for event in events for name in (getattr(event, f, None) for f in _SERVER_FIELDS) if name}


def dead_letters(verdict: Verdict, file: Path) -> list[DeadLetter]:
    return [DeadLetter(original=encode(event), key=kafka_key(event), topic=str(file), partition=-1,
                       offset=position + 1, reason=why, at_ms=reference)
            for position, event, reference, why in verdict.skewed]


def load(file: Path, progress: Callable[[int], None] | None = None
         ) -> tuple[list, ContainerError | jsonl.JsonlError | None]:
    """Every (event, Kafka timestamp) of a recording in memory, and the damage that ended the reading
    early (None when the file was read whole); `progress(count)` is called every 100,000 events.
    The garbage collector is paused meanwhile: with millions of live objects its scans would cost
    more than the reading itself."""
    events: list = []
    damage = None
    with collector.paused():
        try:
            for item in read_recorded(file):
                events.append(item)
                if progress is not None and len(events) % 100_000 == 0:
                    progress(len(events))
        except (ContainerError, jsonl.JsonlError) as exc:
            damage = exc
        except KeyboardInterrupt:
            raise KeyboardInterrupt(f"while reading {file} ({len(events):,} events read, the rest not): nothing"
                                    " replayed, printed or written") from None
        finally:
            gc.freeze()  # what was loaded lives until the end: keep it out of later scans
    return events, damage


def write_outputs(folder: Path, result) -> None:
    with open(folder / "alerts.jsonl", "w") as f:
        jsonl.write(result.alerts, f)
    with open(folder / "commands.jsonl", "w") as f:
        jsonl.write(result.commands, f)
    with open(folder / "state.jsonl", "w") as f:  # where everything is at the end, as the twin's state topic says it
        for key, record in (item for _, state in sorted(result.states.items()) for item in state_records(state)):
            f.write(json.dumps({"key": key, **record}, sort_keys=True) + "\n")
