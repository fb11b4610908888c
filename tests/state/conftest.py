"""Every scenario in tests/state runs twice: through the reference engine, and through the
Spark operator's code path (`streaming.operator.step_function`, driven in memory by
tests/streaming/harness.py, micro-batch by micro-batch with an event-time watermark).

The second run also checks that the operator decides exactly what the reference does (same
alert and command ids); outcomes are statistics the operator does not emit, so that run
reports the reference's.
"""

from __future__ import annotations

import pytest

from state import replay as reference
from tests.streaming.harness import run_operator


def through_the_operator(events, config=None, until_ms=None):
    events = list(events)
    expected = reference.replay(events, config, until_ms)
    result = run_operator(events, config, until_ms)
    assert [a.alert_id for a in result.alerts] == [a.alert_id for a in expected.alerts]
    assert [c.command_id for c in result.commands] == [c.command_id for c in expected.commands]
    result.outcomes = expected.outcomes
    return result


# Property tests draw hundreds of random worlds: through the operator they would take minutes.
# Random worlds go through the real streaming twin in tests/streaming/test_twin.py instead.
# The collector's tests are about the reference engine itself.
REFERENCE_ONLY = {"tests.state.test_properties", "tests.state.test_collector"}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "engine" in metafunc.fixturenames:
        engines = ["reference"] if metafunc.module.__name__ in REFERENCE_ONLY else ["reference", "operator"]
        metafunc.parametrize("engine", engines, indirect=True)


@pytest.fixture(autouse=True)
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which engine `replay` means in this run of the test module."""
    which = getattr(request, "param", "reference")
    if which == "operator" and hasattr(request.module, "replay"):
        monkeypatch.setattr(request.module, "replay", through_the_operator)
    return which
