"""The project's container images, built from Debian's packages, PyPI and Maven Central only.

    python -m shadowtwin.testing.images [--rebuild] [IMAGE ...]     (what `docker/build` runs)

No registry is needed: the base image is a `debootstrap --variant=minbase` of bookworm from
the machine's own Debian mirror, imported with `docker import`; Java comes from Debian
(`shadowtwin/jre`), Kafka from the embedded broker's own jar set (`shadowtwin/kafka`), the
twin from wheels built on the host into `.cache/wheels` (kept between builds, so a rebuild
downloads nothing) and Spark's connector jars (`shadowtwin/twin`).

An image is skipped when it exists and was built from the same recipe (its Dockerfile, the
files copied into it, the project's source): each carries the recipe's digest as a label.
`--rebuild` builds anyway. Builds use BuildKit (bind mounts keep the wheels out of the
layers) and host networking (apt fetches from the mirror).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Callable

from infra import jars
from infra.settings import PROJECT_ROOT, EmbeddedKafkaSettings

DOCKER_DIR = PROJECT_ROOT / "docker"
STAGING = PROJECT_ROOT / ".cache" / "docker"
WHEELS = PROJECT_ROOT / ".cache" / "wheels"
SUITE = "bookworm"
RECIPE_LABEL = "shadowtwin.recipe"
# What the twin image's source copy holds: the packages, their settings and build metadata.
SOURCE_PARTS = ("pyproject.toml", "README.md", "conf", "infra", "shadowtwin", "streaming", "state", "producers",
                "schemas")

BASE_IMAGE = f"shadowtwin/base:{SUITE}"
JRE_IMAGE = "shadowtwin/jre:17"
KAFKA_IMAGE = f"shadowtwin/kafka:{EmbeddedKafkaSettings.version}"
TWIN_IMAGE = f"shadowtwin/twin:{metadata.version('shadowtwin')}"
IMAGES = {"base": BASE_IMAGE, "jre": JRE_IMAGE, "kafka": KAFKA_IMAGE, "twin": TWIN_IMAGE}
# Each image needs the ones before it in this order.
NEEDS = {"base": (), "jre": ("base",), "kafka": ("base", "jre"), "twin": ("base", "jre")}


class ImageBuildError(RuntimeError):
    """An image could not be built; the message says which step failed."""


@dataclass(frozen=True)
class ImageOutcome:
    name: str
    built: bool
    size_bytes: int

    def describe(self) -> str:
        return f"{self.name:28} {self.size_bytes / 1e6:8.0f} MB  {'built' if self.built else 'up to date'}"


def docker_cli() -> list[str]:
    """A docker command line that builds with BuildKit: `docker` with buildx, else Debian's docker.io
    client (BuildKit built in). Raises when neither exists."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "buildx", "version"], capture_output=True).returncode == 0:
        return [docker]
    for candidate in ("/usr/bin/docker", docker):
        if candidate and Path(candidate).exists():
            version = subprocess.run([candidate, "version", "-f", "{{.Client.Version}}"], capture_output=True,
                                     text=True).stdout.strip()
            if version and int(version.split(".")[0]) < 23:
                return [candidate]
    raise ImageBuildError("no docker client that builds with BuildKit: install Debian's docker.io"
                          " (apt-get install docker.io) or the buildx plugin")


def image_recipe(name: str, cli: list[str] | None = None) -> str | None:
    """The recipe digest `name` was built from; None when the image does not exist."""
    cli = cli or docker_cli()
    result = subprocess.run([*cli, "image", "inspect", "-f", f'{{{{index .Config.Labels "{RECIPE_LABEL}"}}}}', name],
                            capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else None


def image_size(name: str, cli: list[str]) -> int:
    out = subprocess.run([*cli, "image", "inspect", "-f", "{{.Size}}", name], capture_output=True, text=True)
    return int(out.stdout.strip() or 0)


def debian_mirror(sources: Path = Path("/etc/apt")) -> str:
    """The Debian mirror this machine's apt uses (deb822 `.sources` or one-line `sources.list`)."""
    for path in sorted(sources.glob("sources.list.d/*.sources")) + [sources / "sources.list"]:
        text = path.read_text() if path.exists() else ""
        for stanza in text.split("\n\n"):
            if re.search(rf"^Suites:.*\b{SUITE}\b", stanza, re.M) and "debian-security" not in stanza:
                match = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
                if match:
                    return match.group(1)
        match = re.search(rf"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+{SUITE}\s", text, re.M)
        if match:
            return match.group(1)
    return "http://deb.debian.org/debian"


def digest(files: dict[str, Path], *extra: str) -> str:
    """A digest of files (name in the image's build folder -> file) and of `extra` strings."""
    sha = hashlib.sha256("\0".join(extra).encode())
    for name, path in sorted(files.items()):
        sha.update(name.encode() + b"\0")
        with open(path, "rb") as data:
            while chunk := data.read(1 << 20):
                sha.update(chunk)
    return sha.hexdigest()[:16]


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts]


class ImageBuilder:
    """Builds the images in order; `say` gets one line per step."""

    def __init__(self, say: Callable[[str], None] = print, rebuild: bool = False):
        self.say = say
        self.rebuild = rebuild
        self.cli = docker_cli()
        self.outcomes: dict[str, ImageOutcome] = {}

    def build(self, wanted: list[str]) -> list[ImageOutcome]:
        for key in [k for k in IMAGES if k in wanted or any(k in NEEDS[w] for w in wanted)]:
            built = getattr(self, f"_{key}")()
            self.outcomes[key] = ImageOutcome(IMAGES[key], built, image_size(IMAGES[key], self.cli))
        return [self.outcomes[k] for k in self.outcomes]

    def _current(self, key: str, recipe: str) -> bool:
        if not self.rebuild and image_recipe(IMAGES[key], self.cli) == recipe:
            return True
        self.say(f"building {IMAGES[key]} ...")
        return False

    def _base(self) -> bool:
        mirror = debian_mirror()
        recipe = digest({}, "debootstrap", "minbase", SUITE, mirror)
        if self._current("base", recipe):
            return False
        if shutil.which("debootstrap") is None:
            raise ImageBuildError("debootstrap is needed for the base image: apt-get install debootstrap")
        with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="shadowtwin-rootfs-") as tmp:
            root = Path(tmp) / "rootfs"
            _run(["debootstrap", "--variant=minbase", SUITE, str(root), mirror], f"debootstrap from {mirror}")
            for leftover in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man"):
                for path in (root / leftover).glob("*"):
                    if path.is_file():
                        path.unlink()
                    elif path.is_dir() and path.name != "partial":
                        shutil.rmtree(path)
            (root / "etc/dpkg/dpkg.cfg.d/shadowtwin-no-docs").write_text(
                "path-exclude=/usr/share/doc/*\npath-exclude=/usr/share/man/*\npath-exclude=/usr/share/locale/*\n")
            tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
            _run([*self.cli, "import", "--change", f"LABEL {RECIPE_LABEL}={recipe}", "--change", "ENV LANG=C.UTF-8",
                  "--change", 'CMD ["/bin/bash"]', "-", BASE_IMAGE], "docker import", stdin=tar.stdout)
            if tar.wait() != 0:
                raise ImageBuildError("tar of the debootstrap folder failed")
        return True

    def _jre(self) -> bool:
        return self._docker_build("jre", {"Dockerfile": DOCKER_DIR / "jre/Dockerfile"}, {"BASE": BASE_IMAGE})

    def _kafka(self) -> bool:
        broker_jars = jars.ensure(jars.kafka_broker_jars(EmbeddedKafkaSettings.version), jars_cache())
        files = {"Dockerfile": DOCKER_DIR / "kafka/Dockerfile", "kafka-entrypoint": DOCKER_DIR / "kafka/kafka-entrypoint",
                 **{f"jars/{p.name}": p for p in broker_jars}}
        return self._docker_build("kafka", files, {"JRE": JRE_IMAGE})

    def _twin(self) -> bool:
        connector_set = jars.spark_connector_jars()
        connector_jars = jars.ensure(connector_set, jars_cache())
        folder = connector_set.folder(jars_cache())
        source = [p for part in SOURCE_PARTS for p in ([PROJECT_ROOT / part] if (PROJECT_ROOT / part).is_file()
                                                        else files_under(PROJECT_ROOT / part))]
        files = {"Dockerfile": DOCKER_DIR / "twin/Dockerfile",
                 **{f"jars/{folder.name}/{p.name}": p for p in [*connector_jars, folder / jars.MANIFEST]},
                 **{f"project/{p.relative_to(PROJECT_ROOT)}": p for p in source}}

        def with_wheels(staged: Path) -> None:
            for wheel in host_wheels(self.say):
                link(wheel, staged / "wheels" / wheel.name)
            (staged / "wheels/requirements.txt").write_text("\n".join(requirements()) + "\n")

        return self._docker_build("twin", files, {"JRE": JRE_IMAGE}, with_wheels, *requirements())

    def _docker_build(self, key: str, files: dict[str, Path], args: dict[str, str],
                      also: Callable[[Path], None] | None = None, *extra: str) -> bool:
        """Build `key` from `files` (name in the build folder -> file) unless its image has this recipe;
        `also` adds to the staged build folder what only a build needs."""
        parents = [image_recipe(IMAGES[k], self.cli) or "" for k in NEEDS[key]]
        recipe = digest(files, *parents, *(f"{k}={v}" for k, v in args.items()), *extra)
        if self._current(key, recipe):
            return False
        folder = stage(key, files)
        if also:
            also(folder)
        command = [*self.cli, "build", "--network", "host", "--label", f"{RECIPE_LABEL}={recipe}", "-t", IMAGES[key]]
        for name, value in args.items():
            command += ["--build-arg", f"{name}={value}"]
        _run([*command, str(folder)], f"docker build of {IMAGES[key]}", env={**os.environ, "DOCKER_BUILDKIT": "1"})
        return True


def jars_cache() -> Path:
    from infra.settings import load_settings

    return load_settings().jars.cache_dir


def requirements() -> list[str]:
    """The project's runtime dependencies (pinned in pyproject.toml) and what builds it."""
    project = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())
    return [*project["project"]["dependencies"], *project["build-system"]["requires"]]


def host_wheels(say: Callable[[str], None]) -> list[Path]:
    """Wheels of every dependency in `.cache/wheels`, built by the host's pip (its cache, PyPI) on first use.

    The host's Python must be the image's minor version (3.11) for the compiled wheels to fit.
    """
    if sys.version_info[:2] != (3, 11):
        raise ImageBuildError(f"the twin image runs Python 3.11; build it with a 3.11 venv, not {sys.version.split()[0]}")
    WHEELS.mkdir(parents=True, exist_ok=True)
    say(f"wheels for the twin image into {WHEELS.relative_to(PROJECT_ROOT)} (pip's cache, then PyPI) ...")
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(WHEELS), "--find-links", str(WHEELS),
          *requirements()], "pip wheel")
    return sorted(WHEELS.glob("*.whl"))


def stage(name: str, files: dict[str, Path]) -> Path:
    """A build context folder holding exactly `files` (relative name -> source), hard-linked where possible."""
    context = STAGING / name
    if context.exists():
        shutil.rmtree(context)
    for relative, source in files.items():
        link(source, context / relative)
    return context


def link(source: Path, target: Path) -> None:
    """Hard-link `source` at `target` (a copy across file systems), creating folders."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _run(command: list[str], what: str, **kwargs) -> None:
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)
    if result.returncode != 0:
        tail = "\n".join(result.stdout.strip().splitlines()[-25:])
        raise ImageBuildError(f"{what} failed (exit {result.returncode}):\n{tail}")


def main(argv: list[str] | None = None) -> int:
    top = argparse.ArgumentParser(prog="docker/build", description="Build the project's images (base, jre, kafka,"
                                  " twin); skip those already built from the same recipe; print their sizes.")
    top.add_argument("images", nargs="*", metavar="IMAGE",
                     help=f"which to build with what they need ({', '.join(IMAGES)}; default: kafka and twin)")
    top.add_argument("--rebuild", action="store_true", help="build even when an image is up to date")
    args = top.parse_args(argv)
    unknown = sorted(set(args.images) - set(IMAGES))
    if unknown:
        print(f"docker/build: no image {', '.join(unknown)} (choose from {', '.join(IMAGES)})", file=sys.stderr)
        return 2
    try:
        outcomes = ImageBuilder(lambda line: print(line, flush=True), args.rebuild).build(args.images or ["kafka", "twin"])
    except (ImageBuildError, jars.JarResolutionError) as exc:
        print(f"docker/build: {exc}", file=sys.stderr)
        return 1
    for outcome in outcomes:
        print(outcome.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
