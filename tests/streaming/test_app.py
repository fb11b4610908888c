"""The twin application's wait: a query that fails is started again from its checkpoint.

Spark raises a query's failure from `awaitTermination`, the call `wait` blocks in; the queries
here are stand-ins that fail the way a real one does (tests/streaming/test_twin.py kills a real
twin mid-batch, whose restarted query fails once on Spark 4.1.1 and must be started again)."""

from __future__ import annotations

import dataclasses
import os

import pytest
from pyspark.errors import StreamingQueryException

from infra.config import ConfigError
import streaming.app
from streaming.app import Ending, TwinApplication
from streaming.progress import ProgressReporter


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
    app._create_topics = lambda again=False: None  # the stand-in queries need no topics, and no broker answers here
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


class IdleThenFails:
    """A query that gets through `idle` triggers without data (Spark's onQueryIdle), then fails."""

    isActive = True

    def __init__(self, app: TwinApplication, idle: int):
        self._app, self._idle = app, idle
        self._failing = FailsWhileAwaited()

    def exception(self):
        return self._failing.exception()

    def awaitTermination(self, timeout: float) -> None:
        if self._idle:
            self._idle -= 1
            self._app.progress.onQueryIdle(None)
            return
        self._failing.awaitTermination(timeout)


def test_a_query_started_again_that_runs_idle_has_its_failures_forgotten(settings, monkeypatch):
    """An idle twin (no ticks, quiet servers) gets no batch, only idle triggers: they show that it runs
    again, so failures days apart do not add up to `restart_attempts`."""
    app = twin(settings, attempts=1)
    app.progress = ProgressReporter(lambda line: None)
    app.query = FailsWhileAwaited()
    monkeypatch.setattr(streaming.app, "start_query", lambda *args: IdleThenFails(app, idle=3))
    assert app.wait(seconds=1) is Ending.TIME_UP
    assert app.restarts >= 3 and app.progress.batches == 0


@pytest.mark.integration
def test_a_query_started_again_names_only_the_topics_that_changed(settings, kafka_bootstrap, topics):
    """Each start of the query again (a failure, SPARK-55271 after a kill) printed all five 'topic exists' lines
    again, burying the line that says why it started again. The first start names them all; later ones name a
    topic only when it was made again or differs."""
    said: list[str] = []
    real = dataclasses.replace(settings, kafka=dataclasses.replace(settings.kafka, bootstrap_servers=kafka_bootstrap),
                               topics=topics)
    app = TwinApplication(real, say=said.append)
    app._create_topics()
    assert len(said) == 5 and all(line.startswith("topic exists") for line in said), said
    said.clear()
    app._create_topics(again=True)
    assert said == []


def test_a_second_twin_on_a_checkpoint_in_use_is_refused_in_one_line(settings, spark, kafka_bootstrap, topics,
                                                                      tmp_path):
    """Two twins started on one checkpoint by mistake: the second failed batch after batch with Spark's
    CONCURRENT_STREAM_LOG_UPDATE and a stack trace, starting its query again ten times. Now it is refused before it
    starts anything, naming the twin that runs; once that one stops, a twin starts on the checkpoint."""
    real = dataclasses.replace(settings, kafka=dataclasses.replace(settings.kafka, bootstrap_servers=kafka_bootstrap),
                               topics=topics)
    checkpoint = tmp_path / "checkpoint"
    with TwinApplication(real, spark=spark, ticks=False, checkpoint_dir=checkpoint, say=lambda line: None):
        second = TwinApplication(real, spark=spark, ticks=False, checkpoint_dir=checkpoint, say=lambda line: None)
        with pytest.raises(ConfigError) as refused:
            second.start()
    assert str(refused.value) == (
        f"checkpoint {checkpoint}: in use by another twin (pid {os.getpid()}); two twins on one checkpoint fail each"
        f" other's batches: stop that one, or give this one a checkpoint of its own (--checkpoint DIR)")
    with TwinApplication(real, spark=spark, ticks=False, checkpoint_dir=checkpoint, say=lambda line: None) as again:
        assert again.query.isActive
