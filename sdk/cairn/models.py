"""`cairn.register_model(name, path)`: a run's output becomes the next version of a model.

Inside a job it needs nothing else: it reads CAIRN_API_URL, CAIRN_PROJECT, CAIRN_RUN_ID and
CAIRN_RUN_TOKEN, which the backends inject (or the current run of `cairn.init()`). The file or
folder at `path` is packed (tar + gzip, in a temporary file) and uploaded; Cairn stores it,
read-only, in the project's artifact store with the run's params and metrics as lineage. Points
logged so far are flushed first, so the lineage has them.
"""
from __future__ import annotations

import os
import tarfile
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote


def register_model(name: str, path: str | os.PathLike, *, timeout: float = 600.0, **overrides: Any) -> dict:
    """Upload `path` (a file or a folder) as a new version of model `name`; returns the version
    ({"model", "version", "ref": "name@N", "run", "files", ...}). Raises cairn.CairnError when the
    server refuses it, ValueError when there is no run to register from."""
    from cairn.client import error_from_response, normalize_url

    from . import tracking

    source = Path(path)
    if not source.exists():
        raise ValueError(f"cairn.register_model(): {source} does not exist")
    run = tracking.current_run()
    if run is not None:
        run.flush(timeout=min(timeout, 60.0))
    env = os.environ
    url = overrides.get("url") or env.get("CAIRN_API_URL") or env.get("CAIRN_URL")
    project = overrides.get("project") or env.get("CAIRN_PROJECT")
    run_id = overrides.get("run_id") or (run.id if run is not None and run.id else None) or env.get("CAIRN_RUN_ID")
    token = (overrides.get("run_token") or (run._run_token if run is not None else None) or env.get("CAIRN_RUN_TOKEN")
             or overrides.get("token") or env.get("CAIRN_TOKEN"))
    if not (url and project and run_id and token):
        raise ValueError("cairn.register_model(): no run (call it inside a Cairn job, or after cairn.init())")
    import requests

    with tempfile.TemporaryFile() as archive:
        with tarfile.open(fileobj=archive, mode="w:gz") as tar:
            if source.is_dir():
                for child in sorted(source.iterdir()):
                    tar.add(child, arcname=child.name)
            else:
                tar.add(source, arcname=source.name)
        archive.seek(0)
        response = requests.post(
            f"{normalize_url(url)}/api/v1/projects/{quote(str(project), safe='')}/runs/{int(run_id)}/register-model/",
            params={"name": name}, data=archive, timeout=(5.0, timeout),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/gzip"},
        )
    if response.status_code >= 300:
        raise error_from_response(response)
    return response.json()
