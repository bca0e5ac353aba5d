"""The per-kind registry: every kind is registered by its app at startup, and the backends decide
by the registered properties, never by the kind's name."""
import re
from pathlib import Path

import pytest

from apps.workloads.choices import Kind
from apps.workloads.kinds import KindSpec, kind_spec, register_kind, registered_kinds

BACKENDS = Path(__file__).resolve().parents[2] / "apps" / "backends"


def test_every_kind_is_registered_by_its_app():
    assert set(registered_kinds()) == set(Kind.values)
    assert kind_spec("training").runs_to_completion and kind_spec("training").kubernetes_object == "Job"
    notebook, deployment = kind_spec("notebook"), kind_spec("deployment")
    assert notebook.serves_port and notebook.access_token and notebook.local_command is not None
    assert notebook.kubernetes_object == "StatefulSet" and not notebook.behind_gateway
    assert deployment.serves_port and deployment.behind_gateway and not deployment.access_token
    assert deployment.kubernetes_object == "Deployment" and not deployment.runs_to_completion


def test_unknown_kind_and_a_conflicting_registration_are_refused():
    with pytest.raises(LookupError, match="Unknown workload kind 'batch'"):
        kind_spec("batch")
    register_kind(kind_spec("training"))  # the same spec again (ready() run twice) is harmless
    with pytest.raises(ValueError, match="already registered"):
        register_kind(KindSpec(kind="training", serves_port=True))
    assert not kind_spec("training").serves_port


def test_the_notebook_command_is_jupyterlab_on_the_given_port_under_the_proxy_path(tmp_path):
    from types import SimpleNamespace

    notebook = SimpleNamespace(pk=7, spec={"env": {}}, project=SimpleNamespace(slug="vision"))
    argv = kind_spec("notebook").local_command(notebook, port=8123, cwd=tmp_path, as_root=True)
    assert argv[1] == "-c" and "LabApp.launch_instance()" in argv[2] and argv[argv.index("--port") + 1] == "8123"
    assert f"--ServerApp.root_dir={tmp_path}" in argv and argv[-1] == "--allow-root"
    assert "--ServerApp.base_url=/nb/vision/7/" in argv
    assert "--allow-root" not in kind_spec("notebook").local_command(notebook, port=1, cwd=tmp_path, as_root=False)


def test_backends_do_not_compare_kind_names():
    """The manifest builders (pure, one per kind, keyed by name) are the one place a name appears."""
    names = re.compile(r"""["'](training|notebook|deployment)["']""")
    found = [f"{path.relative_to(BACKENDS)}:{n}" for path in BACKENDS.rglob("*.py")
             if path.name != "manifests.py"
             for n, line in enumerate(path.read_text().splitlines(), 1) if names.search(line)]
    assert found == []
