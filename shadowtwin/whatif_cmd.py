"""`shadowtwin whatif FILE [--set name=value] [--compare name=value] [--out DIR]`."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from infra.settings import Settings
from state.parameters import ModelConfig


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
    from state.replay import replay
    from state.whatif import Summary, render

    try:
        base = apply_assignments(settings.shadow_redundancy, sets)
        other = apply_assignments(base, compares) if compares else None
    except ValueError as exc:
        say(f"shadowtwin whatif: {exc}")
        return 2
    try:
        events = load(file)
    except (OSError, ValueError) as exc:
        say(f"shadowtwin whatif: {exc}")
        return 2
    runs = [(label(sets), base)] + ([(label(compares), other)] if other is not None else [])
    summaries = []
    for index, (name, config) in enumerate(runs):
        result = replay(events, config)
        summaries.append(Summary.of(name, result))
        if out is not None:
            write_outputs(out if index == 0 else out / "compare", result)
    say(render(summaries))
    if out is not None:
        say(f"\nalerts and commands written to {out}")
    return 0


def load(file: Path) -> list:
    """Every event of a recording in memory. The garbage collector is paused meanwhile: with
    millions of live objects its scans would cost more than the reading itself."""
    import gc

    from producers.recording import read_events

    gc.disable()
    try:
        return list(read_events(file))
    finally:
        gc.enable()
        gc.freeze()  # what was loaded lives until the end: keep it out of later scans


def write_outputs(folder: Path, result) -> None:
    from schemas import jsonl

    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "alerts.jsonl", "w") as f:
        jsonl.write(result.alerts, f)
    with open(folder / "commands.jsonl", "w") as f:
        jsonl.write(result.commands, f)
