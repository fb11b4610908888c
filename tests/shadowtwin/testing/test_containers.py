"""The settings file a twin container gets: what TwinContainer writes is what the twin reads."""

from __future__ import annotations

import dataclasses

from infra.settings import TopicSettings, load_settings
from shadowtwin.testing.containers import toml_text


def test_settings_tables_round_trip_through_the_loader(tmp_path):
    topics = TopicSettings(events="e.1", alerts="a.1", commands="c.1", dead_letters="d.1", events_partitions=2)
    conf = tmp_path / "shadowtwin.toml"
    conf.write_text(toml_text({
        "twin": {"watermark_delay": "2 seconds", "ticks": False, "tick_interval_seconds": 0.5},
        "topics": dataclasses.asdict(topics),
        "shadow_redundancy": {"shadow_resubmit_time_span": "10s", "servers": ["ex01"], "nodes": {"ex01": {"mode": "EXCHANGE_2010"}}},
    }))
    settings = load_settings(conf, env={})
    assert settings.topics == topics
    assert (settings.twin.watermark_delay, settings.twin.ticks, settings.twin.tick_interval_seconds) == \
        ("2 seconds", False, 0.5)
    assert settings.shadow_redundancy.for_node("ex02").shadow_resubmit_time_span != \
        load_settings(env={}).shadow_redundancy.for_node("ex02").shadow_resubmit_time_span
    assert settings.shadow_redundancy.for_node("ex01").mode.name == "EXCHANGE_2010"


def test_free_port_never_names_a_port_twice_even_when_the_kernel_does(monkeypatch):
    from shadowtwin.testing import containers

    kernel_offers = iter([47001, 47001, 47001, 47002])

    class _Socket:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def bind(self, address):
            self.port = next(kernel_offers)

        def getsockname(self):
            return ("127.0.0.1", self.port)

    monkeypatch.setattr(containers.socket, "socket", _Socket)
    monkeypatch.setattr(containers, "_HANDED_OUT", set())
    assert [containers.free_port(), containers.free_port()] == [47001, 47002]
