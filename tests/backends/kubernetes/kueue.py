"""Kueue's real manager on the real control plane (issue 42, deliver 4): the binary scripts/build-kueue.sh
builds from sigs.k8s.io/kueue (platform/kube-testbed/kueue, versions.env KUEUE_VERSION), Kueue's
own CRDs from the same module, one manager per pytest process started on first use.

How it runs outside a cluster: an admin kubeconfig (KUBECONFIG), a Configuration file with leader
election off, health / metrics / webhook / visibility servers on free loopback ports, internal
certificate management off and a self-signed certificate in its cert dir (the webhook server must
start for the manager to be ready; the metrics server reads one from
/etc/kueue/metrics/certs, a path Kueue fixes). Kueue's webhooks are NOT registered with the API server: Cairn
creates its Jobs suspended with the queue-name label itself, which is what Kueue's Job webhook
would add; Kueue's Job reconciler then makes the Workload, admits and unsuspends. Only the
batch/job integration is enabled (the one Cairn uses)."""
import fcntl
import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s

from .controlplane import TESTBED, _cert, _die_with_parent, _key, _pem_cert, _pem_key, free_port, kube_versions

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION_API = "v1beta2"


def kueue_version() -> str:
    return kube_versions()["KUEUE_VERSION"]


def kueue_binary() -> Path:
    cache = Path(os.environ.get("CAIRN_KUBE_CACHE") or Path.home() / ".cache" / "cairn")
    return cache / f"kueue-{kueue_version()}" / "bin" / "kueue"


def kueue_module_dir() -> Path:
    """The sigs.k8s.io/kueue module source (its CRDs), from the module cache or the module proxy."""
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    found = subprocess.run(["go", "mod", "download", "-json", f"sigs.k8s.io/kueue@{kueue_version()}"],
                           capture_output=True, text=True, env=env, timeout=300, cwd=TESTBED / "kueue")
    assert found.returncode == 0, f"go mod download sigs.k8s.io/kueue failed: {found.stderr or found.stdout}"
    return Path(json.loads(found.stdout)["Dir"])


def install_kueue_crds(api: k8s.ApiClient, *, timeout: float = 60) -> None:
    """All of Kueue's CRDs (the manager watches them all), created if missing, then established."""
    ext = k8s.ApiextensionsV1Api(api)
    names = []
    for path in sorted((kueue_module_dir() / "config/components/crd/bases").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        names.append(crd["metadata"]["name"])
        try:
            ext.create_custom_resource_definition(crd)
        except k8s.ApiException as exc:
            assert exc.status == 409, exc
    deadline = time.monotonic() + timeout
    for name in names:
        while not any(c.type == "Established" and c.status == "True"
                      for c in ext.read_custom_resource_definition(name).status.conditions or []):
            assert time.monotonic() < deadline, f"Kueue's CRD {name} was never established"
            time.sleep(0.2)


class KueueManager:
    """A running `kueue` manager against the test control plane; log in <workdir>/kueue.log."""

    def __init__(self, workdir: Path, plane, binary: Path):
        self.dir, self.plane, self.binary = workdir, plane, binary
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log = self.dir / "kueue.log"
        self.health_port = free_port()
        self.proc = None

    def _write(self, name: str, data: bytes | str) -> Path:
        path = self.dir / name
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return path

    def start(self, *, timeout: float = 180.0) -> None:
        certs = self.dir / "certs"
        certs.mkdir(exist_ok=True)
        key = _key()  # self-signed serving certificate: the webhook server needs one to start
        (certs / "tls.key").write_bytes(_pem_key(key))
        (certs / "tls.crt").write_bytes(_pem_cert(_cert("kueue-webhook", key, server=True,
                                                        sans=("127.0.0.1", "localhost"))))
        # Kueue v0.17 reads its metrics certificate from a fixed path when internal certificate
        # management is off (cmd/kueue/main.go): one self-signed pair there, left for later runs.
        metrics_certs = Path("/etc/kueue/metrics/certs")
        metrics_certs.mkdir(parents=True, exist_ok=True)
        with open(metrics_certs.parent / ".lock", "w") as lock:  # xdist workers: one pair, never mixed
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (metrics_certs / "tls.crt").exists():
                (metrics_certs / "tls.key").write_bytes(_pem_key(key))
                (metrics_certs / "tls.crt").write_bytes((certs / "tls.crt").read_bytes())
        config = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "namespace": "kueue-system",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": f"127.0.0.1:{free_port()}"},
            "webhook": {"host": "127.0.0.1", "port": free_port(), "certDir": str(certs)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "integrations": {"frameworks": ["batch/job"]},
        }
        config_file = self._write("config.yaml", yaml.safe_dump(config))
        kubeconfig = self._write("kueue.kubeconfig", yaml.safe_dump(self.plane.admin_kubeconfig()))
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [str(self.binary), f"--config={config_file}", f"--visibility-server-port={free_port()}",
                 "--feature-gates=VisibilityOnDemand=false", "--zap-log-level=2"],
                env={**os.environ, "KUBECONFIG": str(kubeconfig)}, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, cwd=self.dir, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kueue exited with code {self.proc.returncode}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"kueue not ready after {timeout:.0f} s:\n{self.tail()}")
            time.sleep(0.5)

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def build_kueue() -> Path:
    """The manager, built by scripts/build-kueue.sh if missing (a no-op when its stamp matches)."""
    binary = kueue_binary()
    if not os.access(binary, os.X_OK):
        script = TESTBED.parent.parent / "scripts" / "build-kueue.sh"
        built = subprocess.run([str(script)], capture_output=True, text=True)
        if built.returncode != 0 or not os.access(binary, os.X_OK):
            pytest.fail(f"Kueue's manager is not built and building it failed ({script}):\n"
                        f"{built.stdout[-2000:]}\n{built.stderr[-2000:]}", pytrace=False)
    return binary


@pytest.fixture(scope="session")
def real_kueue(real_kube, tmp_path_factory):
    """Kueue's CRDs and its running manager on this process's control plane."""
    binary = build_kueue()
    install_kueue_crds(real_kube.api)
    try:
        real_kube.core.create_namespace({"metadata": {"name": "kueue-system"}})
    except k8s.ApiException as exc:
        assert exc.status == 409, exc
    manager = KueueManager(tmp_path_factory.mktemp("kueue"), real_kube.plane, binary)
    try:
        manager.start()
    except RuntimeError as exc:
        manager.stop()
        pytest.fail(str(exc), pytrace=False)
    yield manager
    manager.stop()


class KueueQueues:
    """Kueue's objects for one test: a ResourceFlavor, a ClusterQueue with nominal quotas (names of
    their own, so tests never share quota) and LocalQueues pointing at it."""

    def __init__(self, api: k8s.ApiClient, suffix: str, manager: KueueManager):
        self.manager = manager  # its log for failure messages
        self.custom = k8s.CustomObjectsApi(api)
        self.suffix = suffix
        self.flavor, self.cluster_queue = f"h100-{suffix}", f"cq-{suffix}"
        self.created: list[tuple[str, str | None, str]] = []

    def _create(self, plural: str, body: dict, namespace: str | None = None) -> dict:
        body = {"apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION_API}", **body}
        if namespace:
            made = self.custom.create_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION_API, namespace, plural, body)
        else:
            made = self.custom.create_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION_API, plural, body)
        self.created.append((plural, namespace, body["metadata"]["name"]))
        return made

    def cluster_queue_with(self, *, gpus: int, cpu: str = "64", memory: str = "512Gi",
                           preemption: dict | None = None) -> None:
        self._create("resourceflavors", {"kind": "ResourceFlavor", "metadata": {"name": self.flavor}, "spec": {}})
        quotas = {"cpu": cpu, "memory": memory, "ephemeral-storage": "1Ti", "nvidia.com/gpu": str(gpus)}
        self._create("clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": self.cluster_queue}, "spec": {
            "namespaceSelector": {},
            "preemption": preemption or {},
            "resourceGroups": [{"coveredResources": list(quotas), "flavors": [{
                "name": self.flavor,
                "resources": [{"name": name, "nominalQuota": value} for name, value in quotas.items()]}]}]}})

    def local_queue(self, namespace: str, name: str) -> None:
        self._create("localqueues", {"kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
                                     "spec": {"clusterQueue": self.cluster_queue}}, namespace)

    def priority_class(self, name: str, value: int) -> None:
        self._create("workloadpriorityclasses", {"kind": "WorkloadPriorityClass", "metadata": {"name": name},
                                                 "value": value, "description": "test"})

    def workloads(self, namespace: str) -> list[dict]:
        return self.custom.list_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION_API, namespace,
                                                         "workloads")["items"]

    def delete_all(self) -> None:
        for plural, namespace, name in reversed(self.created):
            try:
                if namespace:
                    self.custom.delete_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION_API, namespace, plural,
                                                                name)
                else:
                    self.custom.delete_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION_API, plural, name)
            except k8s.ApiException as exc:
                if exc.status != 404:
                    raise


_suffixes = iter(range(1, 1_000_000))


@pytest.fixture
def kueue_queues(real_kube, real_kueue):
    queues = KueueQueues(real_kube.api, str(next(_suffixes)), real_kueue)
    yield queues
    queues.delete_all()
