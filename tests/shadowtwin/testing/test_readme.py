"""The README's testcontainers example names fixtures the plugin has and methods the twin container has."""

from __future__ import annotations

import ast
import re

from infra.settings import PROJECT_ROOT
from shadowtwin.testing import plugin
from shadowtwin.testing.containers import TwinContainer


def readme_example() -> ast.Module:
    section = (PROJECT_ROOT / "README.md").read_text().split("### Testcontainers in your own tests")[1]
    return ast.parse(re.search(r"```python\n(.*?)```", section, re.S).group(1))


def test_the_example_uses_only_what_exists():
    example = readme_example()
    test = next(node for node in example.body if isinstance(node, ast.FunctionDef))
    fixtures = [a.arg for a in test.args.args if a.arg.startswith("shadowtwin_")]
    assert fixtures and all(callable(getattr(plugin, name, None)) for name in fixtures)
    called = {node.func.attr for node in ast.walk(test) if isinstance(node, ast.Call)
              and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
              and node.func.value.id == "twin"}
    assert called == {"publish", "wait_for_alerts", "wait_for_commands", "dead_letters"}
    assert all(callable(getattr(TwinContainer, name)) for name in called)
    assert len(test.body) <= 10
