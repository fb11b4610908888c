"""`pip install` of the built wheel (not editable) into a fresh virtual environment outside the
checkout gives a working `shadowtwin`: its version, its packaged defaults, `whatif` on a
recording, and `kafka start`/`stop` writing runtime files to the user's data folder, never
into site-packages and never into the checkout.

The fresh environment gets the project's dependencies (pyspark alone is hundreds of MB) from
this environment's site-packages through a plain path line in a .pth file: a path added that
way is not a site folder, so the .pth files in it (among them the checkout's editable install)
are not run, and nothing puts the checkout on sys.path; the test asserts where every package
of ours is imported from."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from infra.settings import load_settings
from shadowtwin.testing.containers import free_port
from tests.shadowtwin.test_whatif import outage_recording

pytestmark = pytest.mark.integration

CHECKOUT = Path(__file__).resolve().parents[2]
OURS = ("shadowtwin", "infra", "streaming", "state", "producers", "schemas")


def run(*args, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, **kwargs)
    assert result.returncode == 0, f"{args}:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh venv in a temporary folder with our wheel installed: its bin folder and a clean environment."""
    root = tmp_path_factory.mktemp("installed")
    run(sys.executable, "-m", "pip", "wheel", CHECKOUT, "--no-deps", "-q", "-w", root / "wheels")
    run(sys.executable, "-m", "venv", "--without-pip", root / "venv")
    venv_python = root / "venv" / "bin" / "python"
    site = Path(run(venv_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheel = next((root / "wheels").glob("shadowtwin-*.whl"))
    run(sys.executable, "-m", "pip", "--python", venv_python, "install", "--no-index", "--no-deps", "-q", wheel)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHADOWTWIN_", "PYTHON", "XDG_", "KAFKA_"))}
    home = root / "home"
    home.mkdir()
    env.update(HOME=str(home), SHADOWTWIN_JARS_CACHE_DIR=str(load_settings().jars.cache_dir))  # the shared jar cache
    work = root / "work"
    work.mkdir()
    return root / "venv" / "bin", site, env, work, home


def test_the_installed_package_works_without_the_checkout(installed):
    bin_dir, site, env, work, home = installed
    shadowtwin = bin_dir / "shadowtwin"
    assert run(shadowtwin, "--version", env=env, cwd=work).stdout.strip() == "shadowtwin 0.1.0"

    where = run(bin_dir / "python", "-c", f"import {', '.join(OURS)}, infra.settings as s, sys; "
                f"print(*[m.__file__ for m in ({', '.join(OURS)})], s.DEFAULT_CONF, s.PROJECT_ROOT, sep='\\n');"
                f"print(*sys.path, sep='\\n')", env=env, cwd=work).stdout.splitlines()
    assert all(Path(line).is_relative_to(site) for line in where[:len(OURS) + 1]), where
    assert Path(where[len(OURS) + 1]) == home / ".local" / "share" / "shadowtwin"
    assert not any(Path(p).resolve() == CHECKOUT for p in where[len(OURS) + 2:] if p), "the checkout is not on sys.path"

    outage_recording(work / "outage.avro")
    summary = run(shadowtwin, "whatif", "outage.avro", "--compare", "ShadowResubmitTimeSpan=01:00:00",
                  env=env, cwd=work).stdout.splitlines()
    promotions = next(line for line in summary if line.startswith("promotions"))
    assert promotions.count("1 (3 messages)") == 2, summary

    kafka_env = dict(env, SHADOWTWIN_KAFKA_EMBEDDED_PORT=str(free_port()),
                     SHADOWTWIN_KAFKA_EMBEDDED_CONTROLLER_PORT=str(free_port()))
    try:
        started = run(shadowtwin, "kafka", "start", env=kafka_env, cwd=work).stdout
        data = home / ".local" / "share" / "shadowtwin" / ".run" / "kafka"
        assert "kafka running" in started and str(data) in started
        assert (data / "storage" / "meta.properties").is_file()
    finally:
        stopped = run(shadowtwin, "kafka", "stop", env=kafka_env, cwd=work).stdout
    assert stopped.strip() == "kafka stopped"
    assert not list(site.rglob(".run")) and not list(site.rglob(".cache")), "nothing written into site-packages"
    assert list(work.iterdir()) == [work / "outage.avro"], "nothing else written into the working folder"
