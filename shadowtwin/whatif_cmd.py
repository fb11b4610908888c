"""`shadowtwin whatif FILE [--set name=value] [--compare name=value] [--out DIR]`.

Bad input (a parameter, the recording, the output folder) is raised as the command line's
errors are; a recording cut short or damaged is replayed up to its last complete block, its
summary printed, and then the damage is raised (naming the file and the offset).

The twin's clock-skew guard (`state.clock_guard`, `twin.max_clock_skew_seconds`) runs first:
a skewed event is left out of every run and, with --out, written to `dead_letters.jsonl`
with its reason (topic: the recording; offset: its 1-based position in the recording).
"""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Callable

from infra.settings import Settings
from producers.recording import check_name, read_recorded
from schemas import jsonl
from schemas.codec import encode, kafka_key
from schemas.container import ContainerError
from schemas.events import DeadLetter
from shadowtwin.errors import UsageError
from state.clock_guard import Verdict, guard
from state.parameters import ModelConfig
from state.replay import replay
from state.summary import state_records
from state.whatif import Summary, render


def apply_assignments(config: ModelConfig, assignments: list[str]) -> ModelConfig:
    """`name=value` changes every node; `node:name=value` changes one node."""
    for assignment in assignments:
        if "=" not in assignment:
            raise ValueError(f"expected NAME=VALUE or NODE:NAME=VALUE, got {assignment!r}")
        name, value = assignment.split("=", 1)
        node, _, name = name.rpartition(":")
        config = config.with_overrides({name.strip(): value.strip()}, node=node.strip() or None)
    return config


def label(assignments: list[str]) -> str:
    return ", ".join(assignments) if assignments else "baseline"


def run_whatif(settings: Settings, file: Path, sets: list[str], compares: list[str], out: Path | None,
               say: Callable[[str], None] = print) -> int:
    base = _assigned(settings.shadow_redundancy, sets, "--set")
    other = _assigned(base, compares, "--compare") if compares else None
    runs = [(label(sets), base)] + ([(label(compares), other)] if other is not None else [])
    folders = [out if index == 0 else out / "compare" for index in range(len(runs))] if out is not None else []
    for folder in folders:  # before the replay: an unwritable folder is known at once
        folder.mkdir(parents=True, exist_ok=True)
    recorded, damage = load(check_name(file))
    verdict = guard(recorded, settings.twin.max_clock_skew_seconds * 1000)
    summaries = []
    for index, (name, config) in enumerate(runs):
        result = replay(verdict.accepted, config)
        summaries.append(Summary.of(name, result))
        if folders:
            write_outputs(folders[index], result)
    say(render(summaries))
    if verdict.skewed:
        say(f"\n{len(verdict.skewed)} events left out: stamped more than {settings.twin.max_clock_skew_seconds} s"
            " ahead (twin.max_clock_skew_seconds)")
    if out is not None:
        with open(out / "dead_letters.jsonl", "w") as f:
            jsonl.write(dead_letters(verdict, file), f)
        say(f"\nalerts, commands and dead letters written to {out}")
    if damage is not None:
        raise damage
    return 0


def _assigned(config: ModelConfig, assignments: list[str], option: str) -> ModelConfig:
    try:
        return apply_assignments(config, assignments)
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}") from None


def dead_letters(verdict: Verdict, file: Path) -> list[DeadLetter]:
    return [DeadLetter(original=encode(event), key=kafka_key(event), topic=str(file), partition=-1,
                       offset=position + 1, reason=why, at_ms=reference)
            for position, event, reference, why in verdict.skewed]


def load(file: Path) -> tuple[list, ContainerError | None]:
    """Every (event, Kafka timestamp) of a recording in memory, and the damage that ended the reading
    early (None when the file was read whole). The garbage collector is paused meanwhile: with millions of live
    objects its scans would cost more than the reading itself."""
    events: list = []
    gc.disable()
    try:
        events.extend(read_recorded(file))
    except ContainerError as damage:
        return events, damage
    finally:
        gc.enable()
        gc.freeze()  # what was loaded lives until the end: keep it out of later scans
    return events, None


def write_outputs(folder: Path, result) -> None:
    with open(folder / "alerts.jsonl", "w") as f:
        jsonl.write(result.alerts, f)
    with open(folder / "commands.jsonl", "w") as f:
        jsonl.write(result.commands, f)
    with open(folder / "state.jsonl", "w") as f:  # where everything is at the end, as the twin's state topic says it
        for key, record in (item for _, state in sorted(result.states.items()) for item in state_records(state)):
            f.write(json.dumps({"key": key, **record}, sort_keys=True) + "\n")
