"""`--json` on the status commands: one JSON object an operator's script reads."""

from __future__ import annotations

import json
import subprocess
import sys

from infra.settings import PROJECT_ROOT


def shadowtwin(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shadowtwin.cli", *args], capture_output=True, text=True)


def test_status_commands_speak_json(tmp_path):
    conf = tmp_path / "conf.toml"
    conf.write_text(f'[kafka.embedded]\nport = 1\ncontroller_port = 2\ndata_dir = "{tmp_path}/kafka"\n')
    result = shadowtwin("--conf", str(conf), "kafka", "status", "--json")
    assert result.returncode == 3, result.stderr
    assert json.loads(result.stdout) == {"running": False, "pid": None, "bootstrap_servers": "127.0.0.1:1",
                                         "data_dir": f"{tmp_path}/kafka"}


def test_lab_status_speaks_json(tmp_path):
    topology = tmp_path / "lab.toml"
    shipped = (PROJECT_ROOT / "conf" / "lab.toml").read_text()
    topology.write_text(shipped.replace('run_dir = ".run/lab"', f'run_dir = "{tmp_path / "run"}"'))
    result = shadowtwin("lab", "--topology", str(topology), "status", "--json")
    status = json.loads(result.stdout)
    assert result.returncode == 0, result.stderr
    assert status["nodes"] and all(not n["running"] and n["pid"] is None for n in status["nodes"])
    assert status["sink"]["received"] == 0 and status["twin"] == {"running": False, "pid": None}
