"""Containers for integration tests of shadowtwin and of what talks to it (testcontainers).

    from shadowtwin.testing import KafkaContainer, TwinContainer

`images` builds the project's images (`docker/build`); `containers` runs them; `plugin` is
the pytest plugin with fixtures. Needs a Docker engine and the `testing` extra.
"""
