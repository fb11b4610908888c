"""Layers point down: the command line imports the rest and nothing imports it back; the shared
plumbing imports neither the command line nor the engine side; the model imports no engine."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# package -> top-level packages it must not import
FORBIDDEN = {
    "infra": {"shadowtwin", "streaming", "producers", "benchmarks", "tests"},
    "state": {"shadowtwin", "streaming", "producers", "benchmarks", "tests", "pyspark"},
    "schemas": {"shadowtwin", "streaming", "producers", "state", "benchmarks", "tests"},
    "streaming": {"shadowtwin", "producers", "benchmarks", "tests"},
    "producers": {"shadowtwin", "streaming", "benchmarks", "tests"},
}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_lower_layer_imports_no_higher_one(package):
    offenders = {str(path.relative_to(ROOT)): sorted(imported_packages(path) & FORBIDDEN[package])
                 for path in (ROOT / package).rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_no_import_of_the_plumbing_hides_in_a_function_to_dodge_a_cycle():
    """The shared plumbing is imported at the top of a module: a function-level import that only
    breaks a cycle hides a layer pointing the wrong way."""
    project = {"infra", "shadowtwin"}
    hidden = []
    for package in FORBIDDEN:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    for inner in ast.walk(node):
                        if isinstance(inner, ast.ImportFrom) and inner.module and inner.module.split(".")[0] in project:
                            hidden.append(f"{path.relative_to(ROOT)}:{inner.lineno} {inner.module}")
    assert hidden == []
