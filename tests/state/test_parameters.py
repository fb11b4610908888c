"""Parameters: documented defaults, Exchange notations, per-node overrides, named errors."""

from datetime import timedelta

import pytest

from schemas.events import NodeMode
from infra.settings import load_settings
from state.parameters import (
    ModelConfig, ShadowMessagePreference, ShadowRedundancyParameters, model_config_from, parameters_from,
    parse_duration,
)


def test_documented_defaults():
    p = ShadowRedundancyParameters()
    assert p.shadow_heartbeat_frequency == timedelta(minutes=2)
    assert p.shadow_resubmit_time_span == timedelta(hours=3)
    assert p.shadow_message_auto_discard_interval == p.safety_net_hold_time == timedelta(days=2)
    assert p.message_expiration_timeout == timedelta(days=2)
    assert (p.max_retries_for_remote_site_shadow, p.max_retries_for_local_site_shadow) == (4, 2)
    assert p.shadow_message_preference_setting is ShadowMessagePreference.PREFER_REMOTE
    assert p.reject_message_on_shadow_failure is False and p.shadow_redundancy_enabled is True
    assert p.shadow_heartbeat_timeout_interval == timedelta(seconds=300)
    assert p.shadow_heartbeat_retry_count == 3
    assert p.max_acknowledgement_delay == timedelta(seconds=30)


@pytest.mark.parametrize("text, expected", [
    ("03:00:00", timedelta(hours=3)), ("2.00:00:00", timedelta(days=2)), ("00:00:30", timedelta(seconds=30)),
    ("3h", timedelta(hours=3)), ("90s", timedelta(seconds=90)), ("2d", timedelta(days=2)), (180, timedelta(minutes=3)),
    ("500ms", timedelta(milliseconds=500)),
])
def test_durations(text, expected):
    assert parse_duration(text) == expected


def test_bad_duration_says_what_is_accepted():
    with pytest.raises(ValueError, match="03:00:00"):
        parse_duration("three hours")


def test_exchange_names_and_powershell_booleans():
    p = parameters_from({"ShadowResubmitTimeSpan": "01:00:00", "RejectMessageOnShadowFailure": "$true",
                         "ShadowMessagePreferenceSetting": "LocalOnly"})
    assert p.shadow_resubmit_time_span == timedelta(hours=1)
    assert p.reject_message_on_shadow_failure is True
    assert p.shadow_message_preference_setting is ShadowMessagePreference.LOCAL_ONLY


def test_exchange_names_are_read_in_any_case_as_powershell_reads_them():
    for name in ("ShadowResubmitTimespan", "-ShadowResubmitTimeSpan", "shadowresubmittimespan", "SHADOW_RESUBMIT_TIME_SPAN"):
        assert parameters_from({name: "01:00:00"}).shadow_resubmit_time_span == timedelta(hours=1), name


def test_unknown_parameter_and_bad_value_are_named():
    with pytest.raises(ValueError, match="shadow_resubmit_timespam: unknown key; did you mean shadow_resubmit_time_span?"):
        parameters_from({"shadow_resubmit_timespam": "1h"})
    with pytest.raises(ValueError, match="shadow_heartbeat_retry_count = 'often': expected a whole number"):
        parameters_from({"shadow_heartbeat_retry_count": "often"})


def test_a_misspelt_exchange_name_is_answered_with_exchange_names():
    """Before: `ShadowResubmitTimespam` got 'did you mean shadow_resubmit_time_span?' and the known keys in snake
    case, a spelling the user had not used."""
    with pytest.raises(ValueError) as refused:
        parameters_from({"ShadowResubmitTimespam": "1h"})
    assert "ShadowResubmitTimespam: unknown key; did you mean ShadowResubmitTimeSpan? known: MaxAcknowledgementDelay," \
        in str(refused.value)
    assert "ShadowMessageAutoDiscardInterval, " in str(refused.value) and "_" not in str(refused.value)


def test_per_node_overrides_start_from_the_deployment_values():
    config = model_config_from({"shadow_resubmit_time_span": "2h", "servers": ["hub01"],
                                "nodes": {"hub01": {"mode": "EXCHANGE_2010"}}})
    assert config.for_node("hub01").mode is NodeMode.EXCHANGE_2010
    assert config.for_node("hub01").shadow_resubmit_time_span == timedelta(hours=2)
    assert config.for_node("mbx01").mode is NodeMode.EXCHANGE_2013
    assert config.timing("hub01").resubmit_ms == 2 * 3600 * 1000


def test_what_if_overrides_reach_every_node():
    config = model_config_from({"nodes": {"hub01": {"mode": "EXCHANGE_2010"}}}, known_servers=["hub01"])
    changed = config.with_overrides({"shadow_resubmit_time_span": "1h"})
    assert changed.for_node("hub01").shadow_resubmit_time_span == timedelta(hours=1)
    assert changed.for_node("hub01").mode is NodeMode.EXCHANGE_2010
    assert changed.defaults.shadow_resubmit_time_span == timedelta(hours=1)
    one = config.with_overrides({"shadow_resubmit_time_span": "1h"}, node="mbx07")
    assert one.for_node("mbx07").shadow_resubmit_time_span == timedelta(hours=1)
    assert one.for_node("mbx01").shadow_resubmit_time_span == timedelta(hours=3)


def test_shipped_configuration_states_the_defaults():
    assert load_settings(env={}).shadow_redundancy == ModelConfig()


def test_a_per_node_override_must_name_a_known_or_declared_server():
    with pytest.raises(ValueError, match="nodes.hub09: no such server; known: hub01"):
        model_config_from({"nodes": {"hub09": {"mode": "EXCHANGE_2010"}}}, known_servers=["hub01"])


def test_a_per_node_override_may_name_a_declared_server_in_another_case():
    """As Exchange reads server names (and as the model applies the override): nodes.mbx01 was refused
    with 'no such server; known: MBX01'."""
    config = model_config_from({"servers": ["MBX01"], "nodes": {"mbx01": {"mode": "EXCHANGE_2010"}}})
    assert config.for_node("MBX01").mode is NodeMode.EXCHANGE_2010


@pytest.mark.parametrize("servers, refusal", [
    (["hub01", ""], "shadow_redundancy: servers[1] = '': expected a server name"),
    (["hub01", " "], "shadow_redundancy: servers[1] = ' ': expected a server name"),
    (["hub01", "hub02", "hub01"], "shadow_redundancy: servers[2] = 'hub01': listed twice (servers[0] too);"
                                  " expected each server once"),
    ("hub01,hub01", "servers[1] = 'hub01': listed twice"),  # as an environment variable gives them
    (["HUB01", "hub01"], "servers[1] = 'hub01': listed twice (servers[0] = 'HUB01' too)"),  # one server to Exchange
], ids=["empty", "blank", "twice", "twice-from-a-variable", "twice-in-another-case"])
def test_declared_servers_are_named_once_each_and_not_empty(servers, refusal):
    """An empty name or a repeated one was taken as it stood."""
    with pytest.raises(ValueError) as refused:
        model_config_from({"servers": servers})
    assert refusal in str(refused.value)


@pytest.mark.parametrize("name, value", [("ShadowHeartbeatFrequency", "00:00:00"), ("ShadowResubmitTimeSpan", "-1h"),
                                         ("MaxRetriesForLocalSiteShadow", -3), ("ShadowHeartbeatRetryCount", 0)])
def test_values_the_domain_cannot_have_are_refused(name, value):
    with pytest.raises(ValueError, match=f"{name} = "):
        parameters_from({name: value})


@pytest.mark.parametrize("text, hint", [
    ("1.5", 'a number needs a unit: write "1.5s", "1.5m", "1.5h" or "1.5d"'),
    ("PT1H", 'ISO 8601 is not Exchange\'s notation: write "01:00:00"'),
    ("P1DT2H30M", 'ISO 8601 is not Exchange\'s notation: write "1.02:30:00"'),
    ("-01:00:00", "a duration cannot be negative here"),
])
def test_a_refused_duration_says_how_to_write_what_was_meant(text, hint):
    with pytest.raises(ValueError) as refused:
        parameters_from({"ShadowResubmitTimeSpan": text})
    assert str(refused.value) == (f"parameters: ShadowResubmitTimeSpan = {text!r}: expected a duration such as"
                                  f' "03:00:00", "2.00:00:00", "3h" or "90s" ({hint})')


def test_a_duration_that_is_no_duration_at_all_is_refused_once_with_the_examples():
    with pytest.raises(ValueError) as refused:
        parameters_from({"ShadowResubmitTimeSpan": "soon"})
    assert str(refused.value) == ("parameters: ShadowResubmitTimeSpan = 'soon': expected a duration such as"
                                  ' "03:00:00", "2.00:00:00", "3h" or "90s"')


def test_track_duplicates_is_the_mailbox_stores_window_up_to_49_days():
    """The store's "Track Duplicates (in hours)": 1 hour by default, 49 days at most (004)."""
    assert ModelConfig().duplicate_tracking_ms == model_config_from({}).duplicate_tracking_ms == 3_600_000
    assert model_config_from({"track_duplicates": "2.00:00:00"}).duplicate_tracking_ms == 2 * 86_400_000
    for value in ("50d", "00:00:00"):
        with pytest.raises(ValueError, match=f"track_duplicates = '{value}': expected a duration longer than zero"
                                             " and at most 49 days"):
            model_config_from({"track_duplicates": value})


@pytest.mark.parametrize("written, meant", [("server", "servers"), ("track_duplicate", "track_duplicates")])
def test_a_misspelt_key_of_the_table_is_answered_with_every_key_the_table_takes(written, meant):
    """Before: `server = ["mbx01"]` in `[shadow_redundancy]` got 'server: unknown key; known: ...' listing Exchange's
    parameters only, as if the table took no `servers`, `track_duplicates` or `nodes`."""
    with pytest.raises(ValueError) as refused:
        model_config_from({written: "01:00:00"})
    assert f"{written}: unknown key; did you mean {meant}?" in str(refused.value)
    assert all(key in str(refused.value) for key in ("servers", "track_duplicates", "clock_skew_allowance", "nodes"))
