"""The command a notebook replica runs on the local backend (the kind decides it, not the spec)."""
from __future__ import annotations

import sys
from pathlib import Path


def jupyterlab_command(workload, *, port: int | None, cwd: Path, as_root: bool) -> list[str]:
    """JupyterLab on 127.0.0.1:`port`, rooted at `cwd`. The token comes from JUPYTER_TOKEN in the
    environment, readable by the replica only."""
    argv = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--ip", "127.0.0.1", "--port", str(port),
        "--ServerApp.port_retries=0", f"--ServerApp.root_dir={cwd}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if as_root:  # a replica running as root: Jupyter refuses unless told
        argv.append("--allow-root")
    return argv
