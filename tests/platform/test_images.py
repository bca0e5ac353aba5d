"""The images' inputs exist (issue 23: code-server in the compose image and a notebook image for
Kubernetes). There is no Docker engine on our machines, so nothing is built here: every file a
Dockerfile COPYs from the build context (the repository root) must exist and not be excluded by
its .dockerignore; code-server's version is the Makefile's; the app image's CAIRN_CODE_SERVER is
where its code-server stage installs it; the notebook image is the Kubernetes notebook default
and puts code-server on PATH, which a `vscode` notebook's pod runs."""
import fnmatch
import re
from pathlib import Path

from django.conf import settings

from apps.backends.kubernetes import client as kube_client
from apps.backends.kubernetes.manifests import ClusterOptions, WorkloadView, workload_manifests

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "platform" / "docker" / "Dockerfile"
NOTEBOOK = ROOT / "platform" / "images" / "notebook" / "Dockerfile"


def instructions(dockerfile: str) -> list[list[str]]:
    """The instructions as word lists (continuation lines joined, comments dropped)."""
    text = re.sub(r"\\\n", " ", dockerfile)
    return [line.split() for line in text.splitlines() if line.split() and not line.lstrip().startswith("#")]


def context_copies(dockerfile: str) -> list[str]:
    """The build-context paths COPY / ADD read (not those copied from another stage)."""
    sources = []
    for words in instructions(dockerfile):
        if words[0].upper() in ("COPY", "ADD") and not any(w.startswith("--from=") for w in words):
            sources += [w.rstrip("/") for w in words[1:-1] if not w.startswith("--")]
    return sources


def excluded(path: str, dockerignore: Path) -> bool:
    """Whether the .dockerignore keeps `path` out of the context (last matching pattern wins, `!` re-includes)."""
    verdict = False
    for line in dockerignore.read_text().splitlines():
        pattern = line.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern.removeprefix("!").removeprefix("**/").rstrip("/")
        if fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/") or pattern == "*":
            verdict = not negate
    return verdict


def missing_inputs(dockerfile: Path) -> list[str]:
    ignore = dockerfile.with_name(dockerfile.name + ".dockerignore")
    return [p for p in context_copies(dockerfile.read_text())
            if not (ROOT / p).exists() or (ignore.exists() and excluded(p, ignore))]


def arg(dockerfile: str, name: str) -> str:
    [value] = [w.split("=", 1)[1] for words in instructions(dockerfile) if words[0].upper() == "ARG"
               for w in words[1:] if w.startswith(name + "=")]
    return value


def test_every_file_the_images_copy_from_the_context_exists_and_is_not_ignored():
    for dockerfile in (APP, NOTEBOOK):
        assert context_copies(dockerfile.read_text()), dockerfile
        assert missing_inputs(dockerfile) == [], f"{dockerfile.relative_to(ROOT)} copies what is not in the context"


def test_the_check_is_not_vacuous(tmp_path):
    broken = tmp_path / "Dockerfile"
    broken.write_text(NOTEBOOK.read_text().replace("scripts/install-code-server.sh", "scripts/no-such-installer.sh"))
    assert missing_inputs(broken) == ["scripts/no-such-installer.sh"]
    ignore = NOTEBOOK.with_name("Dockerfile.dockerignore")
    assert excluded("apps/core/errors.py", ignore) and not excluded("scripts/install-code-server.sh", ignore)


def test_both_images_install_the_makefiles_code_server_and_point_cairn_at_it():
    version = re.search(r"^CODE_SERVER_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.M)[1]
    app = APP.read_text()
    for dockerfile in (app, NOTEBOOK.read_text()):
        assert arg(dockerfile, "CODE_SERVER_VERSION") == version
        assert 'install-code-server.sh "$CODE_SERVER_VERSION" /opt/code-server' in dockerfile
        assert "COPY --from=code-server /opt/code-server /opt/code-server" in dockerfile
        assert "COPY --from=code-server /usr/local/bin/node /usr/local/bin/node" in dockerfile  # its runtime
    env = {w.split("=", 1)[0]: w.split("=", 1)[1] for words in instructions(app) if words[0].upper() == "ENV"
           for w in words[1:] if "=" in w}
    assert env["CAIRN_CODE_SERVER"] == "/opt/code-server/node_modules/.bin/code-server"  # what npm installs there
    assert "ln -s /opt/code-server/node_modules/.bin/code-server /usr/local/bin/code-server" in NOTEBOOK.read_text()


def test_a_vscode_notebook_on_kubernetes_runs_code_server_from_the_notebook_image():
    image = f"cairn-notebook:{arg(NOTEBOOK.read_text(), 'CODE_SERVER_VERSION')}"
    assert f"-t {image} ." in NOTEBOOK.read_text()  # the build command its header gives
    assert settings.CAIRN_KUBERNETES["VSCODE_NOTEBOOK_IMAGE"] == image
    assert kube_client.kube_settings()["VSCODE_NOTEBOOK_IMAGE"] == image
    assert ClusterOptions().vscode_notebook_image == image

    def notebook_container(ide: str) -> dict:
        view = WorkloadView(id=7, kind="notebook", name="nb", project="vision", attempt=1, replicas=1, gpu_milli=0,
                            cpu_milli=500, memory_mb=512, spec={"ide": ide, "env": {}}, notebook_token="t")
        [pod] = [o["spec"]["template"]["spec"] for o in workload_manifests(view, ClusterOptions())
                 if o["kind"] == "StatefulSet"]
        return pod["containers"][0]

    # JupyterLab keeps a public image that works without building anything.
    assert notebook_container("jupyterlab")["image"] == settings.CAIRN_KUBERNETES["NOTEBOOK_IMAGE"] \
        == "quay.io/jupyter/base-notebook:latest"
    main = notebook_container("vscode")
    assert main["image"] == image and main["command"][3] == "code-server"
    assert "--bind-addr" in main["command"] and "0.0.0.0:8888" in main["command"]
