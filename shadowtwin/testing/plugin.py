"""The pytest plugin of shadowtwin.testing: fixtures for tests that need our Kafka or our twin.

Installed with the package (entry point `pytest11`), so any test suite of a project that
has shadowtwin installed can ask for:

    shadowtwin_kafka    a Kafka container (session-wide), `.bootstrap_servers`
    shadowtwin_topics   the twin's topics under fresh names, created on it (per test)
    shadowtwin_twin     a factory: `shadowtwin_twin(settings=None)` starts a twin container on
                        those topics and returns it; stopped and removed after the test

Without a Docker engine, or without the images, these fixtures fail with a message saying
what is missing; they never skip. `-p no:shadowtwin` turns the plugin off.
"""

from __future__ import annotations

import re
import uuid

import pytest


@pytest.fixture(scope="session")
def shadowtwin_kafka():
    from shadowtwin.testing.containers import KafkaContainer, docker_engine_answers

    if not docker_engine_answers():
        pytest.fail("shadowtwin_kafka needs a Docker engine, and none answers (is dockerd running?)", pytrace=False)
    with KafkaContainer() as kafka:
        yield kafka


@pytest.fixture
def shadowtwin_topics(shadowtwin_kafka, request: pytest.FixtureRequest):
    from infra.settings import TopicSettings

    suffix = re.sub(r"[^A-Za-z0-9._-]", "-", request.node.name)[:40] + "-" + uuid.uuid4().hex[:8]
    topics = TopicSettings(events=f"events.{suffix}", alerts=f"alerts.{suffix}", commands=f"commands.{suffix}",
                           dead_letters=f"dead-letters.{suffix}", state=f"state.{suffix}")
    return shadowtwin_kafka.create_topics(topics)


@pytest.fixture
def shadowtwin_twin(shadowtwin_kafka, shadowtwin_topics):
    from shadowtwin.testing.containers import TwinContainer

    started = []

    def start(settings=None) -> TwinContainer:
        twin = TwinContainer(shadowtwin_kafka.bootstrap_servers, shadowtwin_topics, settings)
        started.append(twin)
        return twin.start()

    yield start
    for twin in started:
        twin.stop()
