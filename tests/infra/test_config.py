"""infra/config.py: the one reading of durations, as Exchange's TimeSpan reads them."""

from datetime import timedelta

import pytest

from infra.config import parse_duration
from state.parameters import parameters_from


@pytest.mark.parametrize("text, expected", [
    ("23:59:59", timedelta(hours=23, minutes=59, seconds=59)), ("1.01:00:00", timedelta(hours=25)),
    ("00:00:59.5", timedelta(seconds=59.5)), ("10675199.00:00:00", timedelta(days=10675199)),
])
def test_exchange_notation_within_dotnet_ranges(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("2", timedelta(days=2)), ("1:00", timedelta(hours=1)), ("1:05:03", timedelta(hours=1, minutes=5, seconds=3)),
    ("1.02:03", timedelta(days=1, hours=2, minutes=3)), ("1.02:03:04.25", timedelta(days=1, hours=2, minutes=3, seconds=4.25)),
    ("00:00:01.5", timedelta(seconds=1.5)),
], ids=["d", "hh:mm", "hh:mm:ss", "d.hh:mm", "d.hh:mm:ss.ff", "hh:mm:ss.ff"])
def test_every_form_of_dotnet_timespan_parse_is_read_as_it_reads_it(text, expected):
    """Before, "1:00" (an hour to TimeSpan.Parse, hh:mm), "2" (two days) and "1.02:03" were refused."""
    assert parameters_from({"ShadowResubmitTimeSpan": text}).shadow_resubmit_time_span == expected
    if text.isdigit():  # days to an Exchange parameter; as likely seconds to another duration: refused
        with pytest.raises(ValueError, match='a number needs a unit: Exchange\'s TimeSpan reads "2" as 2 days'):
            parse_duration(text)
    else:
        assert parse_duration(text) == expected


@pytest.mark.parametrize("value", ["100000000000000000000d", "10675200", "99999999999.00:00:00", 10**30, float("inf")])
def test_a_duration_longer_than_exchange_timespan_holds_is_refused_in_one_line_naming_key_and_value(value):
    """Before, "100000000000000000000d" raised OverflowError (a traceback from `whatif --set`)."""
    with pytest.raises(ValueError) as refused:
        parameters_from({"ShadowResubmitTimeSpan": value})
    assert str(refused.value).startswith(f"parameters: ShadowResubmitTimeSpan = {value!r}: expected a duration")
    assert 'longer than Exchange\'s TimeSpan holds: at most "10675199.02:48:05.4775807"' in str(refused.value)
    assert "\n" not in str(refused.value)


def test_the_longest_timespan_is_still_a_duration():
    assert parse_duration("10675199.02:48:05.4775807") == timedelta(days=10675199, hours=2, minutes=48, seconds=5.4775807)


@pytest.mark.parametrize("text, says", [
    # .NET's TimeSpan.Parse takes "25:00:00" for 25 days: read as 25 hours here, it was ambiguous
    ("25:00:00", "'25:00:00' (hours go from 0 to 23, as in Exchange's TimeSpan, which takes \"25:00:00\" for 25"
                 " days; as hours, write \"1.01:00:00\")"),
    ("24:00:00", "as hours, write \"1.00:00:00\""),
    ("00:61:00", "'00:61:00' (minutes go from 0 to 59, as in Exchange's TimeSpan; write \"01:01:00\")"),
    ("00:00:60", "'00:00:60' (seconds go from 0 to 59, as in Exchange's TimeSpan; write \"00:01:00\")"),
    ("00:00:75.5", "write \"00:01:15.5\""),
    ("1.25:00:00", "'1.25:00:00' (hours go from 0 to 23, as in Exchange's TimeSpan; write \"2.01:00:00\")"),
], ids=["25:00:00", "24:00:00", "00:61:00", "00:00:60", "00:00:75.5", "1.25:00:00"])
def test_fields_beyond_dotnet_ranges_are_refused_saying_how_to_write_them(text, says):
    with pytest.raises(ValueError) as refused:
        parse_duration(text)
    assert says in str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("number, says", [
    (60, 'write "00:01:00" (60 seconds) or "60.00:00:00" (60 days, as Exchange\'s TimeSpan reads "60")'),
    (90.5, 'write "00:01:30.5" (90.5 seconds))'),
])
def test_an_exchange_duration_written_as_a_bare_toml_number_is_refused_saying_both_ways_to_write_it(tmp_path, number,
                                                                                                    says):
    """`shadow_resubmit_time_span = 60` was 60 seconds while "60" is 60 days (TimeSpan.Parse): now refused, naming
    the key; the quoted forms read as before."""
    from infra.settings import ConfigError, load_settings

    conf = tmp_path / "shadowtwin.toml"
    conf.write_text(f"[shadow_redundancy]\nshadow_resubmit_time_span = {number}\n")
    with pytest.raises(ConfigError) as refused:
        load_settings(conf, env={})
    assert f"shadow_redundancy: shadow_resubmit_time_span = {number}: expected a duration" in str(refused.value)
    assert says in str(refused.value) and "\n" not in str(refused.value)
    for text, span in (("60", timedelta(days=60)), ("00:01:00", timedelta(seconds=60))):
        conf.write_text(f'[shadow_redundancy]\nshadow_resubmit_time_span = "{text}"\n')
        assert load_settings(conf, env={}).shadow_redundancy.defaults.shadow_resubmit_time_span == span


@pytest.mark.parametrize("written, interval", [
    ("[twin]\nwatermark_delay = 30", "30 seconds"), ("[spark]\ntrigger_interval = 0.5", "500 milliseconds"),
])
def test_a_spark_interval_written_as_a_bare_number_is_seconds_as_the_other_durations_of_the_project(tmp_path, written,
                                                                                                     interval):
    """`watermark_delay = 30` was refused while `event_alert_hold = 3600` is 3600 seconds: now both are seconds."""
    from infra.settings import load_settings

    conf = tmp_path / "shadowtwin.toml"
    conf.write_text(written + "\n")
    settings = load_settings(conf, env={})
    assert interval in (settings.twin.watermark_delay, settings.spark.trigger_interval)


def test_a_spark_interval_quoted_without_its_unit_is_refused_saying_how_to_write_it(tmp_path):
    from infra.settings import ConfigError, load_settings

    conf = tmp_path / "shadowtwin.toml"
    conf.write_text("")
    with pytest.raises(ConfigError) as refused:
        load_settings(conf, env={"SHADOWTWIN_TWIN_WATERMARK_DELAY": "30"})
    assert str(refused.value).endswith("twin.watermark_delay = '30': expected a Spark interval such as \"30 seconds\","
                                       ' "500 milliseconds" or "1 minute" (a number needs a unit: write "30 seconds")')
