"""Jars from Maven Central: the Kafka broker and Spark's Kafka and Avro connectors.

Each jar set is resolved once with `mvn dependency:copy-dependencies` into its own folder
under the jar cache; a MANIFEST written last marks the folder complete, so a second run
uses the folder as it is and needs no network.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

MANIFEST = "MANIFEST"
_JAR_NAME = re.compile(r"^(?P<artifact>.+?)-\d[\w.\-]*\.jar$")


class JarResolutionError(RuntimeError):
    """Maven could not provide a jar set."""


@dataclass(frozen=True)
class JarSet:
    """A named group of Maven coordinates (group:artifact:version) resolved together."""

    name: str
    coordinates: tuple[str, ...]
    # Artifacts the runtime already ships (pyspark's own jars): not copied again.
    provided: frozenset[str] = frozenset()

    def folder(self, cache_dir: Path) -> Path:
        return cache_dir / self.name


def kafka_broker_jars(kafka_version: str) -> JarSet:
    return JarSet(
        name=f"kafka-broker-{kafka_version}",
        coordinates=(
            f"org.apache.kafka:kafka_2.13:{kafka_version}",
            # Kafka's slf4j is 1.7.x: this binding routes its logs to log4j2.
            "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3",
            "org.apache.logging.log4j:log4j-core:2.24.3",
        ),
    )


def kafka_tools_jars(kafka_version: str, broker_jars: list[Path]) -> JarSet:
    """Kafka's command-line tools (infra/kafka_tools.py), beside the broker's jars (which hold kafka-configs)."""
    return JarSet(
        name=f"kafka-tools-{kafka_version}",
        coordinates=(f"org.apache.kafka:kafka-tools:{kafka_version}",),
        provided=frozenset(artifact_of(p.name) for p in broker_jars),
    )


def spark_connector_jars() -> JarSet:
    import pyspark

    version = pyspark.__version__
    shipped = Path(pyspark.__file__).parent / "jars"
    provided = frozenset(artifact_of(p.name) for p in shipped.glob("*.jar"))
    return JarSet(
        name=f"spark-connectors-{version}",
        coordinates=(
            f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}",
            f"org.apache.spark:spark-avro_2.13:{version}",
        ),
        provided=provided,
    )


def artifact_of(jar_name: str) -> str:
    match = _JAR_NAME.match(jar_name)
    return match.group("artifact") if match else jar_name


def ensure(jar_set: JarSet, cache_dir: Path) -> list[Path]:
    """The jars of `jar_set`, resolving them with Maven on first use."""
    folder = jar_set.folder(cache_dir)
    manifest = folder / MANIFEST
    if manifest.exists():
        return [folder / line for line in manifest.read_text().split() if line]
    if shutil.which("mvn") is None:
        raise JarResolutionError(
            f"Maven (mvn) is needed once to fetch {jar_set.name} from Maven Central; install it (apt-get install maven)"
        )
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=f".{jar_set.name}-") as tmp:
        work = Path(tmp)
        (work / "pom.xml").write_text(_pom(jar_set))
        out = work / "jars"
        result = subprocess.run(
            ["mvn", "-B", "-q", "-f", str(work / "pom.xml"), "dependency:copy-dependencies",
             f"-DoutputDirectory={out}", "-DincludeScope=runtime"],
            capture_output=True, text=True,
        )
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
            raise JarResolutionError(f"mvn could not resolve {', '.join(jar_set.coordinates)}:\n{tail}")
        kept = sorted(p.name for p in out.glob("*.jar") if artifact_of(p.name) not in jar_set.provided)
        for name in set(p.name for p in out.glob("*.jar")) - set(kept):
            (out / name).unlink()
        (out / MANIFEST).write_text("\n".join(kept) + "\n")
        if folder.exists():
            shutil.rmtree(folder)
        out.rename(folder)
    return [folder / name for name in kept]


def _pom(jar_set: JarSet) -> str:
    deps = []
    for coordinate in jar_set.coordinates:
        group, artifact, version = coordinate.split(":")
        deps.append(
            f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version></dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        f"<groupId>infra.jars</groupId><artifactId>{jar_set.name}</artifactId><version>1</version>"
        f"<packaging>pom</packaging><dependencies>{''.join(deps)}</dependencies></project>\n"
    )
