"""The images as built by docker/build: up to date on a second run, the twin's entry point, user and
configuration by environment and mounted files."""

from __future__ import annotations

import subprocess

from infra.settings import PROJECT_ROOT
from shadowtwin.testing.images import BASE_IMAGE, IMAGES, JRE_IMAGE, KAFKA_IMAGE, TWIN_IMAGE


def docker(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120, **kwargs)


def test_a_second_build_changes_nothing_and_prints_every_size(docker_engine):
    for _ in range(2):  # the first brings the images up to date with the source, if they were not
        result = subprocess.run([str(PROJECT_ROOT / "docker/build")], capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for image in (BASE_IMAGE, JRE_IMAGE, KAFKA_IMAGE, TWIN_IMAGE):
        line = next(line for line in lines if line.startswith(image))
        assert line.endswith("up to date") and int(line.split()[1]) > 50, line
    assert len(lines) == len(IMAGES)


def test_the_twin_runs_shadowtwin_as_a_user_of_its_own(docker_engine):
    assert "usage: shadowtwin" in docker("run", "--rm", TWIN_IMAGE, "--help").stdout
    user = docker("run", "--rm", "--entrypoint", "id", TWIN_IMAGE, "-u").stdout.strip()
    assert user.isdigit() and int(user) != 0


def test_the_twin_reads_a_mounted_settings_file_and_the_broker_from_the_environment(docker_engine, tmp_path):
    conf = tmp_path / "twin.toml"
    conf.write_text('[topics]\nevents = "mounted.events"\n[twin]\nwatermark_delay = "soon"\n')
    conf.chmod(0o644)
    tmp_path.chmod(0o755)
    run = ["run", "--rm", "--network", "host", "-v", f"{conf}:/conf/twin.toml:ro", "-e", "SHADOWTWIN_CONF=/conf/twin.toml",
           "-e", "KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:1"]
    refused = docker(*run, TWIN_IMAGE, "topics", "create")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "/conf/twin.toml: twin.watermark_delay = 'soon': expected a Spark interval" in refused.stderr
    conf.write_text('[topics]\nevents = "mounted.events"\n')
    shown = docker(*run, "--entrypoint", "python", TWIN_IMAGE, "-c",
                   "from infra.settings import load_settings as l; s = l(); "
                   "print(s.topics.events, s.kafka.bootstrap_servers, s.spark.checkpoint_dir.resolve())")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == ["mounted.events", "127.0.0.1:1", "/var/lib/shadowtwin/checkpoints"]
