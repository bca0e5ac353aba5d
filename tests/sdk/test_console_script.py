"""The installed `cairn` console script, run as a real subprocess."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.sdk.fakeserver import TOKEN


def cairn_script() -> str:
    beside_python = Path(sys.executable).parent / "cairn"
    found = str(beside_python) if beside_python.exists() else shutil.which("cairn")
    assert found, "the `cairn` console script is not installed: pip install -e ./sdk"
    return found


def test_console_script_lists_workloads_and_reports_errors(server, tmp_path):
    server.add_workload(name="mnist", status="running")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"url": server.url, "token": TOKEN, "project": "vision"}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env |= {"CAIRN_CONFIG": str(config), "NO_COLOR": "1"}

    ok = subprocess.run([cairn_script(), "ls"], env=env, capture_output=True, text=True,
                        timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert "mnist" in ok.stdout and "running" in ok.stdout

    missing = subprocess.run([cairn_script(), "logs", "ghost"], env=env, capture_output=True,
                             text=True, timeout=60)
    assert missing.returncode == 1
    assert missing.stderr.strip() == "error: no workload named 'ghost' in project 'vision'"
    assert missing.stdout == ""
