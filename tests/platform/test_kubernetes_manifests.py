"""Cairn itself on Kubernetes (platform/kubernetes/, issue 25 item 3): plain manifests with a
kustomize overlay (no `helm` on the registries our machines reach). Every object of the base and
of the production overlay validates against the Kubernetes 1.37 schemas (kubernetes-validate,
strict); every Deployment has liveness and readiness probes and a PodDisruptionBudget; the
scheduler runs two replicas; each loop's probe checks that loop; only the processes that call the
Kubernetes API get a token, and theirs is the least-privilege ServiceAccount of rbac.yaml.

No cluster and no kubectl here: `build()` below resolves the overlays with the few kustomize
features they use (and refuses any other field, so it cannot silently ignore one)."""
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from tests.platform.test_compose import loop_commands

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "platform" / "kubernetes"
PRODUCTION = ROOT / "platform" / "overlays" / "production"
SUPPORTED = {"apiVersion", "kind", "resources", "images", "replicas", "configMapGenerator", "secretGenerator",
             "generatorOptions"}


def _env_file(path: Path) -> dict[str, str]:
    if not path.exists():
        path = path.with_name(path.name + ".example")  # secrets.env is the site's, never committed
    pairs = [line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return dict(pairs)


def build(directory: Path) -> list[dict]:
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(kustomization) - SUPPORTED
    assert not unknown, f"{directory}: the test's kustomize does not know {unknown}"
    docs: list[dict] = []
    for resource in kustomization.get("resources", []):
        path = (directory / resource).resolve()
        docs += build(path) if path.is_dir() else [d for d in yaml.safe_load_all(path.read_text()) if d]
    for image in kustomization.get("images", []):
        for doc in docs:
            for container in _pod(doc).get("containers", []) if _pod(doc) else []:
                if container["image"].split(":")[0] == image["name"]:
                    container["image"] = f"{image.get('newName', image['name'])}:{image['newTag']}"
    for replicas in kustomization.get("replicas", []):
        [target] = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == replicas["name"]]
        target["spec"]["replicas"] = replicas["count"]
    for generator in kustomization.get("configMapGenerator", []):
        assert generator.get("behavior") == "merge"
        [target] = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == generator["name"]]
        target["data"].update(dict(literal.split("=", 1) for literal in generator.get("literals", [])))
    for generator in kustomization.get("secretGenerator", []):
        data = {}
        for env in generator.get("envs", []):
            data.update(_env_file(directory / env))
        docs.append({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                     "metadata": {"name": generator["name"], "namespace": generator["namespace"]}, "stringData": data})
    return docs


def _pod(doc: dict) -> dict | None:
    if doc["kind"] in ("Deployment", "Job"):
        return doc["spec"]["template"]["spec"]
    return None


def _deployments(docs) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}


@pytest.fixture(scope="module", params=["base", "production"])
def docs(request):
    return build(BASE if request.param == "base" else PRODUCTION)


def test_every_object_validates(docs):
    for doc in docs:
        kubernetes_validate.validate(doc, "1.37.0", strict=True)


def test_every_deployment_has_probes_and_a_disruption_budget(docs):
    budgets = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    for name, deployment in _deployments(docs).items():
        for container in _pod(deployment)["containers"]:
            assert container.get("livenessProbe") and container.get("readinessProbe"), f"{name} lacks probes"
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        matching = [b for b in budgets if b["spec"]["selector"]["matchLabels"].items() <= labels.items()]
        assert len(matching) == 1, f"{name} has {len(matching)} PodDisruptionBudgets"
        [budget] = matching
        if deployment["spec"]["replicas"] == 1:  # minAvailable 1 would block every node drain
            assert budget["spec"].get("maxUnavailable") == 1
        assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_the_scheduler_runs_two_replicas_under_a_budget(docs):
    scheduler = _deployments(docs)["cairn-scheduler"]
    assert scheduler["spec"]["replicas"] == 2
    [budget] = [d for d in docs if d["kind"] == "PodDisruptionBudget" and d["metadata"]["name"] == "cairn-scheduler"]
    assert budget["spec"]["minAvailable"] == 1  # a drain never takes both: one is always leader or standby


def test_every_process_of_server_mode_is_deployed_and_probed_by_its_own_loop(docs):
    deployments = _deployments(docs)
    commands = {tuple(_pod(d)["containers"][0]["command"]): d for d in deployments.values()}
    for loop_command in loop_commands():
        [(command, deployment)] = [(c, d) for c, d in commands.items() if loop_command in c]
        probe = _pod(deployment)["containers"][0]["livenessProbe"]["exec"]["command"]
        loop = loop_command.removeprefix("run_")
        if loop == "reconciler":
            assert command[-2:] == ("--backend", "kubernetes")
            loop = "reconciler-kubernetes"
        assert probe == ["python", "manage.py", "healthcheck", loop]
    assert any(c[0] == "uvicorn" for c in commands) and any(c[0] == "celery" and "worker" in c for c in commands)
    web = _pod(deployments["cairn-web"])["containers"][0]
    assert web["readinessProbe"]["httpGet"]["path"] == "/healthz"


def test_a_migrations_job(docs):
    [job] = [d for d in docs if d["kind"] == "Job"]
    assert _pod(job)["containers"][0]["command"] == ["python", "manage.py", "migrate", "--noinput"]


def test_only_the_processes_that_call_the_api_get_the_least_privilege_service_account(docs):
    [binding] = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == "cairn-dispatcher"
    assert {"kind": "ServiceAccount", "name": "cairn", "namespace": "cairn-system"} in binding["subjects"]
    callers = {"cairn-web", "cairn-worker", "cairn-reconciler"}  # logs; dispatch; watches
    for name, deployment in _deployments(docs).items():
        pod = _pod(deployment)
        if name in callers:
            assert pod["serviceAccountName"] == "cairn" and pod["automountServiceAccountToken"] is True
        else:
            assert pod["automountServiceAccountToken"] is False, f"{name} needs no Kubernetes API token"


def test_configuration_from_config_maps_and_secrets_that_exist(docs):
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    config = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}["cairn-config"]
    assert config["data"]["CAIRN_TELEMETRY_DCGM_URL_TEMPLATE"] == "http://{node}:9400/metrics"
    assert not {"SECRET_KEY", "DATABASE_URL", "REDIS_URL"} & set(config["data"])  # secrets are not config
    for doc in docs:
        pod = _pod(doc)
        for container in pod["containers"] if pod else []:
            refs = {("ConfigMap", s["configMapRef"]["name"]) if "configMapRef" in s else ("Secret", s["secretRef"]["name"])
                    for s in container["envFrom"]}
            assert refs == {("ConfigMap", "cairn-config"), ("Secret", "cairn-secrets")}
    if ("Secret", "cairn-secrets") in names:  # the overlay makes it from secrets.env
        [secret] = [d for d in docs if d["kind"] == "Secret"]
        assert {"SECRET_KEY", "DATABASE_URL", "REDIS_URL"} <= set(secret["stringData"])


def test_pods_meet_the_restricted_pod_security_standard(docs):
    [namespace] = [d for d in docs if d["kind"] == "Namespace"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for doc in docs:
        pod = _pod(doc)
        if pod is None:
            continue
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False and context["capabilities"]["drop"] == ["ALL"]


def test_the_overlay_sets_the_image_and_the_site():
    docs = build(PRODUCTION)
    images = {c["image"] for d in docs if _pod(d) for c in _pod(d)["containers"]}
    assert images == {"registry.example.com/cairn:0.2.0"}
    config = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}["cairn-config"]
    assert config["data"]["CAIRN_PUBLIC_URL"] == "https://cairn.example.com"
