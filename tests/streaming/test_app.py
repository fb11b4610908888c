"""The twin application's wait: a query that fails is started again from its checkpoint.

Spark raises a query's failure from `awaitTermination`, the call `wait` blocks in; the queries
here are stand-ins that fail the way a real one does (tests/streaming/test_twin.py kills a real
twin mid-batch, whose restarted query fails once on Spark 4.1.1 and must be started again)."""

from __future__ import annotations

import dataclasses

import pytest
from pyspark.errors import StreamingQueryException

import streaming.app
from streaming.app import Ending, TwinApplication


class FailsWhileAwaited:
    """A query that fails while `wait` blocks in its `awaitTermination`."""

    isActive = True

    def __init__(self):
        self.failure: StreamingQueryException | None = None

    def exception(self):
        return self.failure

    def awaitTermination(self, timeout: float) -> None:
        self.isActive = False
        self.failure = StreamingQueryException("[STREAM_FAILED] the batch failed")
        raise self.failure


class Runs:
    isActive = True

    def exception(self):
        return None

    def awaitTermination(self, timeout: float) -> None:
        pass


def twin(settings, attempts: int) -> TwinApplication:
    quick = dataclasses.replace(settings.twin, restart_attempts=attempts, restart_backoff_seconds=0.001)
    app = TwinApplication(dataclasses.replace(settings, twin=quick), say=lambda line: None)
    app._create_topics = lambda: None  # the stand-in queries need no topics, and no broker answers here
    return app


def test_a_query_that_fails_while_awaited_is_started_again(settings, monkeypatch):
    app = twin(settings, attempts=3)
    app.query = FailsWhileAwaited()
    monkeypatch.setattr(streaming.app, "start_query", lambda *args: Runs())
    assert app.wait(seconds=0.2) is Ending.TIME_UP
    assert app.restarts == 1 and isinstance(app.query, Runs)


@pytest.mark.parametrize("attempts", [0, 2])
def test_a_query_that_keeps_failing_ends_the_wait_after_its_attempts(settings, monkeypatch, attempts):
    app = twin(settings, attempts=attempts)
    app.query = FailsWhileAwaited()
    monkeypatch.setattr(streaming.app, "start_query", lambda *args: FailsWhileAwaited())
    assert app.wait(seconds=30) is Ending.QUERY_FAILED
    assert app.restarts == attempts
