"""Container tests: they need a Docker engine and the project's images (docker/build), and fail,
never skip, without them."""

from __future__ import annotations

import pytest

from shadowtwin.testing.containers import docker_engine_answers


@pytest.fixture(scope="session")
def docker_engine() -> None:
    if not docker_engine_answers():
        pytest.fail("the container tests need a Docker engine and none answers (make test starts one)", pytrace=False)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "docker_engine" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.integration)
            item.add_marker(pytest.mark.containers)
