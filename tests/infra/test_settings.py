"""Settings: defaults, the shipped file, the environment, and refusals that name file, key, value and what is allowed."""

import copy
import dataclasses
import pickle
from datetime import timedelta

import pytest

from infra.config import Milliseconds, SparkInterval
from infra.settings import PROJECT_ROOT, ConfigError, Settings, load_settings
from tests.infra.certificates import make_certificates


def write(tmp_path, text):
    path = tmp_path / "conf.toml"
    path.write_text(text)
    return path


def refusal(tmp_path, text, env=None) -> str:
    with pytest.raises(ConfigError) as caught:
        load_settings(write(tmp_path, text), env=env or {})
    message = str(caught.value)
    assert "\n" not in message and str(tmp_path / "conf.toml") in message
    return message


def test_shipped_file_states_the_defaults():
    assert load_settings(env={}) == Settings()


def test_an_empty_file_gives_the_defaults(tmp_path):
    assert load_settings(write(tmp_path, ""), env={}) == Settings()


def test_settings_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Settings().kafka.bootstrap_servers = "elsewhere:9092"  # type: ignore[misc]


def test_overrides_and_relative_paths(tmp_path):
    settings = load_settings(write(tmp_path, '[kafka.embedded]\nport = 29092\ndata_dir = "var/k"\n'), env={})
    assert settings.kafka.embedded.port == 29092
    assert settings.kafka.embedded.data_dir == PROJECT_ROOT / "var/k"


def test_environment_names_the_bootstrap_servers(tmp_path):
    settings = load_settings(write(tmp_path, ""), env={"KAFKA_BOOTSTRAP_SERVERS": "k1:9092,k2:9092"})
    assert settings.kafka.bootstrap_servers == "k1:9092,k2:9092"


@pytest.mark.parametrize("master", ["local", "local[*]", "local[4, 2]", "local-cluster[2,1,1024]", "spark://h1:7077,h2:7077",
                                    "yarn", "k8s://https://h:6443"])
def test_every_form_of_master_url_spark_takes_is_taken(tmp_path, master):
    assert load_settings(write(tmp_path, f'[spark]\nmaster = "{master}"\n'), env={}).spark.master == master


def test_environment_names_the_file(tmp_path):
    path = write(tmp_path, '[spark]\nmaster = "spark://h:7077"\n')
    assert load_settings(env={"SHADOWTWIN_CONF": str(path)}).spark.master == "spark://h:7077"


def test_every_setting_can_come_from_an_environment_variable_named_after_it(tmp_path):
    settings = load_settings(write(tmp_path, "[twin]\nwatermark_delay = \"10 seconds\"\n"), env={
        "SHADOWTWIN_TWIN_WATERMARK_DELAY": "45 seconds",
        "SHADOWTWIN_KAFKA_EMBEDDED_PORT": "29092",
        "SHADOWTWIN_TWIN_TICKS": "false",
        "SHADOWTWIN_DEMO_MESSAGES_PER_SECOND": "2.5",
        "SHADOWTWIN_SHADOW_REDUNDANCY_SHADOW_RESUBMIT_TIME_SPAN": "01:00:00",
        "SHADOWTWIN_SHADOW_REDUNDANCY_SERVERS": "mbx01, mbx02",
    })
    assert settings.twin.watermark_delay == "45 seconds"
    assert settings.kafka.embedded.port == 29092
    assert settings.twin.ticks is False
    assert settings.demo.messages_per_second == 2.5
    assert settings.shadow_redundancy.timing("any").resubmit_ms == 3_600_000
    assert settings.shadow_redundancy.servers == ("mbx01", "mbx02")


def test_a_bad_environment_variable_is_named_with_its_value(tmp_path):
    message = refusal(tmp_path, "", env={"SHADOWTWIN_TOPICS_EVENTS_PARTITIONS": "zero"})
    assert "with the environment" in message and "topics.events_partitions = 'zero'" in message


@pytest.mark.parametrize("variable, meant", [
    ("SHADOWTWIN_KAFKA_BOOTSTRAPP", "did you mean SHADOWTWIN_KAFKA_BOOTSTRAP_SERVERS (kafka.bootstrap_servers)?"),
    ("SHADOWTWIN_TWIN_WATERMARK", "did you mean SHADOWTWIN_TWIN_WATERMARK_DELAY (twin.watermark_delay)?"),
    ("SHADOWTWIN_SHADOW_REDUNDANCY_SHADOW_RESUBMIT_TIMESPAN", "(shadow_redundancy.shadow_resubmit_time_span)?"),
    ("SHADOWTWIN_CONFF", "did you mean SHADOWTWIN_CONF?"),
    ("SHADOWTWIN_NOTHING_LIKE_IT", "SHADOWTWIN_<TABLE>_<KEY>"),
])
def test_an_environment_variable_that_names_no_setting_is_refused(tmp_path, variable, meant):
    with pytest.raises(ConfigError) as caught:
        load_settings(write(tmp_path, ""), env={variable: "1"})
    assert str(caught.value).startswith(f"environment variable {variable}: no such setting") and meant in str(caught.value)


def test_the_variables_that_are_not_settings_are_not_refused(tmp_path):
    path = write(tmp_path, "")
    assert load_settings(env={"SHADOWTWIN_CONF": str(path), "SHADOWTWIN_HOME": str(tmp_path)}) == Settings()


def test_unknown_key_is_named(tmp_path):
    assert "kafka.embedded.prot: unknown key" in refusal(tmp_path, "[kafka.embedded]\nprot = 1\n")


def test_wrong_type_is_named(tmp_path):
    assert "topics.events_partitions = 'four': expected a whole number" in refusal(
        tmp_path, '[topics]\nevents_partitions = "four"\n')


def test_whole_numbers_pass_for_floats_but_booleans_are_not_numbers(tmp_path):
    assert load_settings(write(tmp_path, "[demo]\nmessages_per_second = 5\n"), env={}).demo.messages_per_second == 5.0
    assert "demo.servers = True: expected a whole number" in refusal(tmp_path, "[demo]\nservers = true\n")


@pytest.mark.parametrize("text, named", [
    ("[shadow_redundancy]\nmax_retries_for_remote_site_shadow = -3\n",
     "max_retries_for_remote_site_shadow = -3: expected a number >= 0"),
    ('[shadow_redundancy]\nshadow_heartbeat_frequency = "00:00:00"\n',
     "shadow_heartbeat_frequency = '00:00:00': expected a duration longer than zero"),
    ('[shadow_redundancy]\nShadowResubmitTimeSpan = "soon"\n',
     "ShadowResubmitTimeSpan = 'soon': expected a duration"),
    ('[shadow_redundancy]\nShadowResubmitTimeSpan = "25:00:00"\n',
     "ShadowResubmitTimeSpan = '25:00:00': expected a duration such as \"03:00:00\", \"2.00:00:00\", \"3h\" or"
     ' "90s" (hours go from 0 to 23'),
    ('[twin]\nwatermark_delay = "banana"\n', "twin.watermark_delay = 'banana': expected a Spark interval"),
    ('[spark]\ntrigger_interval = "2 fortnights"\n', "spark.trigger_interval = '2 fortnights': expected a Spark"),
    ("[topics]\nevents_partitions = -1\n", "topics.events_partitions = -1: expected a number >= 1"),
    ("[kafka.embedded]\nport = 70000\n", "kafka.embedded.port = 70000: expected a port number"),
    ('[topics]\nalerts = "no spaces allowed"\n', "topics.alerts = 'no spaces allowed': expected a Kafka topic name"),
    ('[topics]\nevents = ".."\n', "topics.events = '..': expected a Kafka topic name"),  # Kafka refuses '.', '..'
    ('[spark]\nlog_level = "LOUD"\n', "spark.log_level = 'LOUD': expected one of"),
    ('[shadow_redundancy]\nmode = "EXCHANGE_2007"\n', "mode = 'EXCHANGE_2007': expected one of UNKNOWN, EXCHANGE_2013"),
    ("[shadow_redundancy]\nshadow_silence_heartbeats = -1\n", "shadow_silence_heartbeats = -1: expected a number >= 0"),
    ('[shadow_redundancy.nodes.hub09]\nmode = "EXCHANGE_2010"\n', "nodes.hub09: no such server"),
    ("[kafka]\ndelivery_timeout_seconds = 0\n", "kafka.delivery_timeout_seconds = 0: expected a number > 0"),
    ("[kafka]\ndelivery_timeout_seconds = -5\n", "kafka.delivery_timeout_seconds = -5: expected a number > 0"),
    ("[kafka]\ndelivery_timeout_seconds = 1e9\n", "kafka.delivery_timeout_seconds = 1000000000.0: expected a number"),
    ('[spark]\nmaster = "local[two]"\n', "spark.master = 'local[two]': expected a Spark master URL: local, local[N]"),
    ('[spark]\nmaster = "sprak://h:7077"\n', "spark.master = 'sprak://h:7077': expected a Spark master URL"),
])
def test_values_outside_what_is_allowed_are_refused_in_one_line(tmp_path, text, named):
    assert named in refusal(tmp_path, text)


def test_the_demo_s_exchange_durations_refuse_a_bare_number_as_shadow_redundancy_does(tmp_path):
    """[demo]'s shadow_heartbeat_frequency and shadow_resubmit_time_span replace [shadow_redundancy]'s for the demo,
    in the same notation; `= 60` was 60 seconds there while [shadow_redundancy] refuses it (Exchange reads "60" as
    60 days), and a quoted "2" was refused there while it is 2 days in [shadow_redundancy]."""
    for key in ("shadow_heartbeat_frequency", "shadow_resubmit_time_span"):
        assert (f'demo.{key} = 60: expected a duration such as "03:00:00", "2.00:00:00", "3h" or'
                f' "90s" (a bare number is ambiguous here: write "00:01:00" (60 seconds) or "60.00:00:00"'
                in refusal(tmp_path, f"[demo]\n{key} = 60\n"))
        demo = load_settings(write(tmp_path, f'[demo]\n{key} = "2"\n'), env={}).demo
        assert getattr(demo, key) == timedelta(days=2)


@pytest.mark.parametrize("key", ["ssl_ca_file", "ssl_certificate_file", "ssl_key_file"])
def test_a_tls_file_that_is_missing_or_no_file_is_refused_naming_the_setting_and_the_path(tmp_path, key):
    message = refusal(tmp_path, f'[kafka.security]\n{key} = "nosuch/x.pem"\n')
    assert (f"kafka.security.{key} = 'nosuch/x.pem': expected a file that exists and can be read"
            f" (taken as {PROJECT_ROOT / 'nosuch/x.pem'})") in message
    assert f"kafka.security.{key} = '{tmp_path}': expected a file" in refusal(
        tmp_path, f'[kafka.security]\n{key} = "{tmp_path}"\n')
    (tmp_path / "x.pem").write_text("")
    settings = load_settings(write(tmp_path, f'[kafka.security]\n{key} = "{tmp_path / "x.pem"}"\n'), env={})
    assert getattr(settings.kafka.security, key) == tmp_path / "x.pem"


def test_an_alert_routing_ca_file_that_is_no_pem_of_authorities_is_refused_naming_the_setting(tmp_path):
    """A key, or a file of text, as `[alert_routing] ca_file`: `alerts route` ended in a traceback
    (ssl.SSLError NO_CERTIFICATE_OR_CRL_FOUND) when it built its https opener, plain http receivers too."""
    not_pem = tmp_path / "notes.txt"
    not_pem.write_text("this is not a certificate\n")
    assert (f"alert_routing.ca_file = '{not_pem}': expected a readable PEM file of certificate authorities"
            in refusal(tmp_path, f'[alert_routing]\nca_file = "{not_pem}"\n'))
    authorities = make_certificates(tmp_path / "tls").ca_file
    settings = load_settings(write(tmp_path, f'[alert_routing]\nca_file = "{authorities}"\n'), env={})
    assert settings.alert_routing.ca_file == authorities


def test_a_per_node_override_names_a_declared_server(tmp_path):
    settings = load_settings(write(tmp_path, '[shadow_redundancy]\nservers = ["hub01"]\n'
                                             '[shadow_redundancy.nodes.hub01]\nmode = "EXCHANGE_2010"\n'), env={})
    assert settings.shadow_redundancy.for_node("hub01").mode.value == "EXCHANGE_2010"


def test_spark_intervals_are_parsed_when_loaded():
    assert SparkInterval("30 seconds").ms == 30_000 and SparkInterval("500 milliseconds").ms == 500
    with pytest.raises(ValueError):
        SparkInterval("30")


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "absent.toml", env={})


def test_a_duration_in_milliseconds_is_the_same_after_pickling_and_copying():
    """int's own pickling would hand 2000 back to the constructor, which reads a bare number as seconds."""
    duration = Milliseconds("2s")
    for again in (pickle.loads(pickle.dumps(duration)), copy.deepcopy(duration), copy.copy(duration)):
        assert again == 2000 and type(again) is Milliseconds


def test_an_exchange_duration_written_as_a_whole_number_alone_is_said_to_be_days(tmp_path, capsys):
    """Exchange's TimeSpan reads "60" as 60 days, and so does the twin; a user who meant seconds or minutes
    learns it in one line per value, naming the file's key or the environment variable (whatif says so too)."""
    conf = write(tmp_path, '[shadow_redundancy]\nservers = ["hub01"]\nShadowResubmitTimeSpan = "2"\n'
                           'shadow_heartbeat_frequency = "2m"\n[shadow_redundancy.nodes.hub01]\n'
                           'safety_net_hold_time = "7"\n[demo]\nshadow_heartbeat_frequency = "3"\n')
    env = {"SHADOWTWIN_SHADOW_REDUNDANCY_SHADOW_MESSAGE_AUTO_DISCARD_INTERVAL": "60"}
    settings = load_settings(conf, env=env)
    assert settings.shadow_redundancy.defaults.shadow_message_auto_discard_interval == timedelta(days=60)
    assert capsys.readouterr().err.splitlines() == [
        f'shadowtwin: {conf}: shadow_redundancy.ShadowResubmitTimeSpan = "2" is 2 days, as Exchange reads a'
        ' TimeSpan (write "2s", "2m" or "2h" for seconds, minutes or hours)',
        f'shadowtwin: {conf}: demo.shadow_heartbeat_frequency = "3" is 3 days, as Exchange reads a TimeSpan'
        ' (write "3s", "3m" or "3h" for seconds, minutes or hours)',
        f'shadowtwin: {conf}: shadow_redundancy.nodes.hub01.safety_net_hold_time = "7" is 7 days, as Exchange'
        ' reads a TimeSpan (write "7s", "7m" or "7h" for seconds, minutes or hours)',
        'shadowtwin: SHADOWTWIN_SHADOW_REDUNDANCY_SHADOW_MESSAGE_AUTO_DISCARD_INTERVAL = "60" is 60 days, as'
        ' Exchange reads a TimeSpan (write "60s", "60m" or "60h" for seconds, minutes or hours)']
    load_settings(write(tmp_path, '[shadow_redundancy]\nShadowResubmitTimeSpan = "2.00:00:00"\n'), env={})
    assert capsys.readouterr().err == ""
