"""Session-wide real parts for the integration tests: one Kafka broker, one SparkSession.

Kafka, in order of preference: `$KAFKA_BOOTSTRAP_SERVERS`; our Kafka image in a container
(shadowtwin.testing) when a Docker engine answers; else the project's embedded broker on
free ports, in a temporary folder, stopped when the session ends.
"""

from __future__ import annotations

import dataclasses
import os
import re
import uuid

import pytest

from infra.settings import Settings, TopicSettings, load_settings
from infra.topics import create_topics
from infra.broker import EmbeddedKafka
from shadowtwin.testing.containers import docker_engine_answers, free_port

pytest_plugins = ("pytester",)  # tests of the shadowtwin.testing plugin run a test suite of their own

CONTAINER_FIXTURES = {"shadowtwin_kafka", "shadowtwin_topics", "shadowtwin_twin"}


@pytest.fixture(scope="session")
def settings() -> Settings:
    """The shipped settings; the twin's HTTP views on any free port (tests run side by side)."""
    shipped = load_settings()
    return dataclasses.replace(shipped, views=dataclasses.replace(shipped.views, http_port=0))


@pytest.fixture(scope="session")
def kafka_bootstrap(settings: Settings, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        yield os.environ["KAFKA_BOOTSTRAP_SERVERS"]
        return
    if docker_engine_answers():
        # the plugin's container (shadowtwin.testing.plugin): one broker for our tests and the plugin's
        yield request.getfixturevalue("shadowtwin_kafka").bootstrap_servers
        return

    embedded = dataclasses.replace(
        settings.kafka.embedded,
        port=free_port(),
        controller_port=free_port(),
        data_dir=tmp_path_factory.mktemp("kafka"),
    )
    broker = EmbeddedKafka(embedded, settings.jars.cache_dir)
    broker.start()
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def spark(settings: Settings, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory):
    """One SparkSession for the test session; it asks for Kafka so that it stops before the broker."""
    from streaming.session import build_spark

    spark_settings = dataclasses.replace(
        settings.spark, master="local[2]", shuffle_partitions=2, checkpoint_dir=tmp_path_factory.mktemp("checkpoints")
    )
    session = build_spark(dataclasses.replace(settings, spark=spark_settings))
    yield session
    session.stop()


@pytest.fixture
def topics(kafka_bootstrap: str, request: pytest.FixtureRequest) -> TopicSettings:
    """The twin's topics under fresh names, created: tests sharing the broker never see each other's records."""
    suffix = re.sub(r"[^A-Za-z0-9._-]", "-", request.node.name)[:40] + "-" + uuid.uuid4().hex[:8]
    names = TopicSettings(
        events=f"test.events.{suffix}",
        alerts=f"test.alerts.{suffix}",
        commands=f"test.commands.{suffix}",
        dead_letters=f"test.dead-letters.{suffix}",
        state=f"test.state.{suffix}",
        events_partitions=2,
        commands_partitions=2,
    )
    create_topics(kafka_bootstrap, names)
    return names


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that use the broker or Spark are integration tests, whatever their file says; those that use
    shadowtwin.testing's containers are container tests too."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if {"kafka_bootstrap", "spark", "topics", *CONTAINER_FIXTURES} & used:
            item.add_marker(pytest.mark.integration)
        if CONTAINER_FIXTURES & used:
            item.add_marker(pytest.mark.containers)

