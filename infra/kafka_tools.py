"""Apache Kafka's own command-line tools (kafka-topics, kafka-consumer-groups, ...), run from Maven jars.

With the embedded broker there is no Kafka distribution to take them from, so `shadowtwin kafka tool`
runs them here: the `kafka-tools` jar (with the broker's jars, which hold `kafka-configs`) on the
JVM, pointed at the configured brokers with the configured security unless the arguments say
otherwise. What a tool prints and its exit status are the tool's own; a reset of the twin's consumer group,
which never moves the twin, is preceded by a warning on stderr that says so (`twin_group_warning`), and
`kafka-console-consumer` on a topic of the contract's Avro records, which it prints as binary, by a note
saying how to read them, and `kafka-console-producer` on the events topic, which takes no line it sends, by
one saying how to publish events (`avro_topic_note`). Brokers that do not answer, and a topic they do not have given
to a console tool, end the command before the tool runs (`check_brokers`): the tools would wait for them, saying
nothing, until Ctrl-C.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from infra import jars
from infra.config import ConfigError, closest
from infra.kafka import ANSWER_SECONDS, NoSuchTopic, bootstrap_of, cluster_metadata, spark_options
from infra.settings import Settings

# name -> the class a Kafka distribution's bin/<name>.sh runs (Kafka 4.x)
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-dump-log": "org.apache.kafka.tools.DumpLogSegments",
}
OFFLINE = {"kafka-dump-log"}  # reads log segment files, talks to no broker
CONSOLE = {"kafka-console-consumer", "kafka-console-producer"}  # wait for their --topic until it exists


def tool_name(given: str) -> str:
    """`given` as TOOLS names it: `topics`, `kafka-topics` and `kafka-topics.sh` are one tool."""
    name = given.removesuffix(".sh")
    name = name if name.startswith("kafka-") else f"kafka-{name}"
    if name not in TOOLS:
        stems = {tool.removeprefix("kafka-"): tool for tool in TOOLS}
        meant = stems.get(closest(name.removeprefix("kafka-"), stems) or "")
        raise ConfigError(f"no Kafka tool {given!r}" + (f"; did you mean {meant!r}?" if meant else
                                                         f": one of {', '.join(TOOLS)}"))
    return name


def run_tool(settings: Settings, given: str, arguments: list[str]) -> int:
    """Run the tool with `arguments`, adding --bootstrap-server and --command-config (the twin's
    security settings) where the arguments do not give them; the tool's exit status."""
    name = tool_name(given)
    if name not in OFFLINE and not _bootstrap_given(arguments):
        check_brokers(settings, name, arguments)
    for warning in (twin_group_warning(settings.twin.consumer_group, name, arguments),
                    avro_topic_note(settings, name, arguments)):
        if warning:
            print(warning, file=sys.stderr, flush=True)
    cache = settings.jars.cache_dir
    broker_jars = jars.ensure(jars.kafka_broker_jars(settings.kafka.embedded.version), cache)
    tools_jars = jars.ensure(jars.kafka_tools_jars(settings.kafka.embedded.version, broker_jars), cache)
    classpath = os.pathsep.join(str(p) for p in [*tools_jars, *broker_jars])
    with tempfile.TemporaryDirectory(prefix="shadowtwin-kafka-tool-") as folder:
        added = [] if name in OFFLINE else _connection(settings, arguments, Path(folder))
        return subprocess.run(["java", "-cp", classpath, TOOLS[name], *arguments, *added]).returncode


def twin_group_warning(twin_group: str, name: str, arguments: list[str]) -> str:
    """What `kafka-consumer-groups --reset-offsets` on the twin's group (or on all groups) would not do, in one line;
    "" for any other use of a tool. Kafka's tool resets it beside a running twin: the group has no members."""
    if not twin_group or name != "kafka-consumer-groups" or "--reset-offsets" not in arguments:
        return ""
    groups = {value for option, value in zip(arguments, arguments[1:]) if option == "--group"}
    groups |= {a.removeprefix("--group=") for a in arguments if a.startswith("--group=")}
    if twin_group not in groups and "--all-groups" not in arguments:
        return ""
    return (f"warning: consumer group {twin_group} is where the twin shows Kafka's tools what it has read, not where"
            f" it reads from: it reads from its checkpoint, a running twin overwrites this reset at its next batch,"
            f" and one started on a new checkpoint reads from [twin] starting_offsets (to read the events again: stop"
            f" the twin, start it on a new checkpoint)")


def avro_topic_note(settings: Settings, name: str, arguments: list[str]) -> str:
    """How to read the records of the twin's Avro topic that `kafka-console-consumer --topic` is given, or to
    publish events on the topic `kafka-console-producer --topic` is given, in one line ("" for any other use of a
    tool): Kafka's tools print their bytes, binary, and send lines of UTF-8 text, which no event is."""
    topics = settings.topics
    readers = {topics.alerts: "alerts tail --json", topics.commands: "commands tail --json",
               topics.dead_letters: "dead-letters tail --json", topics.events: f"record {topics.events} FILE.jsonl"}
    topic = next((t for t in _topics_given(arguments) if t in readers), None)
    if name == "kafka-console-producer" and topic == topics.events:
        return (f"note: {topic} takes the contract's Avro records (schemas/README.md), which this tool cannot write:"
                f" it sends each line as UTF-8 text, and the twin sets each aside as a dead letter ('shadowtwin"
                f" dead-letters tail' says why); publish events written as JSON lines with 'shadowtwin replay"
                f" FILE.jsonl'")
    if name != "kafka-console-consumer" or topic is None:
        return ""
    copy = f", or the JSON copies on {topic}.json with [twin] json_topics = true" \
        if topic in (topics.alerts, topics.commands) else ""
    return (f"note: {topic} holds the contract's Avro records (schemas/README.md), which this tool prints as"
            f" binary; read them as JSON lines with 'shadowtwin {readers[topic]}'{copy}")


def check_brokers(settings: Settings, name: str, arguments: list[str]) -> None:
    """Before a tool runs against the configured brokers: KafkaException when they do not answer within
    ANSWER_SECONDS, NoSuchTopic for a console tool's --topic they do not have (a misspelt `shadowtwin.alert`),
    each said in one line, exit 1, as by `record` and `alerts tail`. The tools would wait for either, silent."""
    topics = cluster_metadata(settings.kafka, timeout=ANSWER_SECONDS).topics
    missing = next((t for t in _topics_given(arguments) if t not in topics), None) if name in CONSOLE else None
    if missing is not None:
        raise NoSuchTopic(f"{missing}: no such topic at {bootstrap_of(settings.kafka)}", missing)


def _topics_given(arguments: list[str]) -> list[str]:
    given = [value for option, value in zip(arguments, arguments[1:]) if option == "--topic"]
    return given + [a.removeprefix("--topic=") for a in arguments if a.startswith("--topic=")]


def _bootstrap_given(arguments: list[str]) -> bool:
    """Whether the arguments name the brokers (or controllers) themselves, rather than the configured ones."""
    return any(a.split("=", 1)[0] in ("--bootstrap-server", "--bootstrap-controller") for a in arguments)


def _connection(settings: Settings, arguments: list[str], folder: Path) -> list[str]:
    given = {a.split("=", 1)[0] for a in arguments}
    added = [] if _bootstrap_given(arguments) else ["--bootstrap-server", settings.kafka.bootstrap_servers]
    properties = {key.removeprefix("kafka."): value for key, value in spark_options(settings.kafka).items()
                  if key != "kafka.bootstrap.servers"}
    if properties.get("security.protocol", "PLAINTEXT") != "PLAINTEXT" or len(properties) > 1:
        if not given & {"--command-config", "--consumer.config", "--producer.config"}:
            config = folder / "client.properties"  # the password, if any, only in a folder of this run
            config.write_text("".join(f"{key}={_escaped(value)}\n" for key, value in properties.items()))
            config.chmod(0o600)
            added += ["--command-config", str(config)]
    return added


def _escaped(value: str) -> str:
    """A value as a Java properties file reads it back."""
    return value.replace("\\", "\\\\").replace("\n", "\\n")
