"""The lab's topology file: the shipped one loads; mistakes are refused with the key's name."""

import stat
from datetime import timedelta

import pytest

from producers.relay.topology import LabTopology, ensure_secrets, load_topology, topology_from
from infra.config import ConfigError


def test_the_shipped_lab_topology():
    topology = load_topology()
    assert [n.name for n in topology.nodes] == ["ex01", "ex02", "ex03"]
    assert [p.name for p in topology.peers("ex02")] == ["ex01", "ex03"]
    assert topology.parameters("ex01").shadow_heartbeat_frequency.total_seconds() == 1


def test_a_node_waits_five_minutes_for_a_client_s_next_command():
    """RFC 5321 4.5.3.2.7: a server SHOULD wait at least 5 minutes for the next command; the nodes
    closed a session idle for 60 s."""
    assert LabTopology().receive_connector.connection_inactivity_timeout == timedelta(minutes=5)
    assert load_topology().receive_connector.connection_inactivity_timeout >= timedelta(minutes=5)


@pytest.mark.parametrize("raw, message", [
    ({"nodes": []}, "at least one node"),
    ({"nodes": [{"name": "a", "port": 1, "colour": "red"}]}, r"nodes\[0\]: colour: unknown key"),
    ({"nodes": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]}, "unique"),
    ({"nodes": [{"name": "a", "port": 1}], "sink": {"port": 1}}, "distinct"),
    ({"nodes": [{"name": "a", "port": 1}], "shadow_redundancy": {"shadow_heartbeat_frequency": "soon"}},
     "shadow_redundancy: shadow_heartbeat_frequency = 'soon'"),
    ({"nodes": [{"name": "a", "port": 1}], "shadow_redundancy": {"nodes": {"b": {"shadow_resubmit_time_span": "1h"}}}},
     "nodes.b: no such server; known: a"),
    ({"nodes": [{"name": "a", "port": 0}]}, r"nodes\[0\]: port = 0: expected a port number"),
    ({"nodes": [{"name": "a", "port": 1}], "transport_service": {"transient_failure_retry_interval": 60}},
     r'transport_service.transient_failure_retry_interval = 60: .* write "00:01:00" \(60 seconds\) or "60.00:00:00"'),
    ({"nodes": [{"name": "a", "port": 1}], "transport_service": {"outbound_connection_failure_retry_interval": 600}},
     "outbound_connection_failure_retry_interval = 600: .*a bare number is ambiguous"),
    ({"nodes": [{"name": "a", "port": 1}], "receive_connector": {"connection_inactivity_timeout": 300}},
     "receive_connector.connection_inactivity_timeout = 300: .*a bare number is ambiguous"),
])
def test_mistakes_are_refused(raw, message):
    with pytest.raises(ConfigError, match=message):
        topology_from(raw)


def test_boundaries_decide_the_peers():
    topology = topology_from({"nodes": [{"name": "a", "port": 1, "dag": "d1"}, {"name": "b", "port": 2, "dag": "d2"},
                                        {"name": "c", "port": 3, "dag": "d1"}]})
    assert [p.name for p in topology.peers("a")] == ["c"]
    assert topology.peers("b") == []


def test_a_node_is_named_fully_qualified_in_the_first_internal_domain():
    """RFC 3464 2.2.2: a report's Reporting-MTA of type dns is a fully qualified domain name (`dns;ex01` was not)."""
    topology = topology_from({"internal_domains": ["contoso.com", "fabrikam.com"],
                              "nodes": [{"name": "ex01", "port": 1, "dag": "d1"}]})
    assert topology.fqdn("ex01") == "ex01.contoso.com"
    assert topology.fqdn("ex02.corp.contoso.com") == "ex02.corp.contoso.com"


def test_secrets_are_generated_once_and_private(tmp_path):
    path = tmp_path / "lab" / "secrets.json"
    first = ensure_secrets(path, ["a", "b"])
    assert ensure_secrets(path, ["a", "b"]) == first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(set(first.values())) == 2 and all(len(v) >= 20 for v in first.values())
