"""A real Kubernetes control plane for the tests: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok (fake nodes, fake container runtimes), built by `make kube`
(scripts/build-kube.sh) from the Go modules in platform/kube-testbed and started here as child
processes on free loopback ports. Everything lives in one temporary directory (certificates,
kubeconfigs, etcd data, one log per component).

No kubelet runs: kwok moves scheduled pods to Running and, when a test annotates a pod with
EXIT_CODE_ANNOTATION, to Succeeded/Failed with that exit code (see KWOK_STAGES)."""
from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

ROOT = Path(__file__).resolve().parents[3]
TESTBED = ROOT / "platform" / "kube-testbed"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kustomize")

# A test annotates a pod with these to make kwok terminate it (there is no container to exit).
EXIT_CODE_ANNOTATION = "cairn.test/exit-code"
EXIT_REASON_ANNOTATION = "cairn.test/exit-reason"
# Nodes kwok manages carry this annotation (kwok's own convention).
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"

SERVICE_CIDR = "10.96.0.0/16"
# The controllers Cairn's objects depend on (jobs, sets, garbage collection, namespaces, service
# account tokens) plus node lifecycle and taint eviction, so node loss behaves as on a cluster.
CONTROLLERS = (
    "job-controller", "replicaset-controller", "deployment-controller", "statefulset-controller",
    "garbage-collector-controller", "namespace-controller", "serviceaccount-controller",
    "serviceaccount-token-controller", "root-ca-certificate-publisher-controller", "endpointslice-controller",
    "endpoints-controller", "pod-garbage-collector-controller", "ttl-after-finished-controller",
    "resourcequota-controller", "disruption-controller", "node-lifecycle-controller",
    "taint-eviction-controller", "persistentvolume-binder-controller",
    # claims and volumes carry protection finalizers (admission adds them): without these
    # controllers a deleted claim never goes away
    "persistentvolumeclaim-protection-controller", "persistentvolume-protection-controller",
    "clusterrole-aggregation-controller",
    # DaemonSets hold resources on every node (device plugins, exporters, CNI): Cairn counts them
    "daemonset-controller",
)

# kwok's stages (its state machine for fake objects); kwok ships none in the binary.
KWOK_STAGES = f"""
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {{name: node-initialize}}
spec:
  resourceRef: {{apiGroup: v1, kind: Node}}
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: NotIn
      values: ["True"]
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      conditions:
      {{{{ range NodeConditions }}}}
      - lastHeartbeatTime: {{{{ $now | Quote }}}}
        lastTransitionTime: {{{{ $now | Quote }}}}
        message: {{{{ .message | Quote }}}}
        reason: {{{{ .reason | Quote }}}}
        status: {{{{ .status | Quote }}}}
        type: {{{{ .type | Quote }}}}
      {{{{ end }}}}
      addresses:
      - {{address: {{{{ NodeIP | Quote }}}}, type: InternalIP}}
      - {{address: {{{{ NodeName | Quote }}}}, type: Hostname}}
      phase: Running
---
# The kubelet's status heartbeat: without it the node lifecycle controller marks a node Unknown
# after its grace period (50 s), taints it and marks its pods not ready.
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {{name: node-heartbeat}}
spec:
  resourceRef: {{apiGroup: v1, kind: Node}}
  selector:
    matchExpressions:
    - {{key: .status.phase, operator: In, values: [Running]}}
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: In
      values: ["True"]
  delay: {{durationMilliseconds: 10000}}
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      {{{{ $since := or .metadata.creationTimestamp $now }}}}
      conditions:
      {{{{ range NodeConditions }}}}
      - lastHeartbeatTime: {{{{ $now | Quote }}}}
        lastTransitionTime: {{{{ $since | Quote }}}}
        message: {{{{ .message | Quote }}}}
        reason: {{{{ .reason | Quote }}}}
        status: {{{{ .status | Quote }}}}
        type: {{{{ .type | Quote }}}}
      {{{{ end }}}}
  immediateNextStage: true
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {{name: pod-ready}}
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchExpressions:
    - {{key: .metadata.deletionTimestamp, operator: DoesNotExist}}
    - {{key: .status.phase, operator: In, values: [Pending]}}
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: NotIn
      values: ["True"]
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      conditions:
      - {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "True", type: Initialized}}
      - {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "True", type: Ready}}
      - {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "True", type: ContainersReady}}
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: true
        restartCount: 0
        started: true
        state: {{running: {{startedAt: {{{{ $now | Quote }}}}}}}}
      {{{{ end }}}}
      initContainerStatuses:
      {{{{ range .spec.initContainers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: true
        restartCount: 0
        state: {{terminated: {{exitCode: 0, reason: Completed, startedAt: {{{{ $now | Quote }}}},
                                finishedAt: {{{{ $now | Quote }}}}}}}}
      {{{{ end }}}}
      {{{{ with NodeIPWith .spec.nodeName }}}}
      hostIP: {{{{ . | Quote }}}}
      {{{{ end }}}}
      {{{{ $m := .metadata }}}}
      {{{{ with PodIPWith .spec.nodeName (or .spec.hostNetwork false) $m.uid $m.name $m.namespace }}}}
      podIP: {{{{ . | Quote }}}}
      {{{{ end }}}}
      phase: Running
      startTime: {{{{ $now | Quote }}}}
---
# A running pod a test annotated with {EXIT_CODE_ANNOTATION}: its containers exit with that code.
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {{name: pod-exit}}
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchExpressions:
    - {{key: .metadata.deletionTimestamp, operator: DoesNotExist}}
    - {{key: .status.phase, operator: In, values: [Running]}}
    - {{key: '.metadata.annotations["{EXIT_CODE_ANNOTATION}"]', operator: Exists}}
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      {{{{ $code := index .metadata.annotations "{EXIT_CODE_ANNOTATION}" }}}}
      {{{{ $reason := index .metadata.annotations "{EXIT_REASON_ANNOTATION}" }}}}
      conditions:
      - {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "False", type: Ready}}
      - {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "False", type: ContainersReady}}
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: {{{{ $code }}}}
            reason: {{{{ or $reason (ternary "Completed" "Error" (eq $code "0")) | Quote }}}}
            startedAt: {{{{ $now | Quote }}}}
            finishedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      phase: {{{{ ternary "Succeeded" "Failed" (eq $code "0") }}}}
---
# No kubelet confirms a graceful deletion: kwok completes it.
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {{name: pod-delete}}
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchExpressions:
    - {{key: .metadata.deletionTimestamp, operator: Exists}}
  next:
    delete: true
"""


# Every request of Cairn's identity is audited (metadata only): tests assert on what it called and
# what the API server answered (403s in particular), including its informers' lists and watches.
AUDITED_USERS = ("system:serviceaccount:cairn-system:cairn",)
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata", "users": list(AUDITED_USERS)}, {"level": "None"}],
}


class ControlPlaneError(RuntimeError):
    pass


def kube_versions() -> dict:
    values = {}
    for line in (TESTBED / "versions.env").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip()
    return values


def bin_dir() -> Path:
    cache = Path(os.environ.get("CAIRN_KUBE_CACHE") or Path.home() / ".cache" / "cairn")
    return cache / f"kube-{kube_versions()['KUBE_VERSION']}" / "bin"


def missing_binaries() -> list[str]:
    directory = bin_dir()
    return [b for b in BINARIES if not os.access(directory / b, os.X_OK)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- certificates (EC keys: generated in milliseconds, accepted everywhere) ---------------------

def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert(subject_cn, key, *, issuer=None, issuer_key=None, org=None, ca=False, sans=(), server=False):
    now = datetime.datetime.now(datetime.UTC)
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, subject_cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    name = x509.Name(attrs)
    builder = (x509.CertificateBuilder().subject_name(name)
               .issuer_name(issuer.subject if issuer else name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
            decipher_only=False), critical=True)
    else:
        usage = x509.oid.ExtendedKeyUsageOID
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([usage.SERVER_AUTH] if server else [usage.CLIENT_AUTH]), critical=False)
    if sans:
        entries = []
        for san in sans:
            try:
                entries.append(x509.IPAddress(ipaddress.ip_address(san)))
            except ValueError:
                entries.append(x509.DNSName(san))
        builder = builder.add_extension(x509.SubjectAlternativeName(entries), critical=False)
    return builder.sign(issuer_key or key, hashes.SHA256())


def _pem_cert(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the process that started it dies, so a pytest worker
    killed outright (timeout, OOM, kill -9) leaves no API server behind. prctl(PR_SET_PDEATHSIG)."""
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


class ControlPlane:
    """start() brings every component up (or raises ControlPlaneError with the logs' tails);
    stop() terminates them. admin_kubeconfig() is cluster-admin (system:masters)."""

    def __init__(self, workdir: Path, binaries: Path | None = None, *, heartbeat_seconds: int = 10,
                 kwok_options: dict | None = None, extra_args: dict[str, list[str]] | None = None):
        """`heartbeat_seconds`, `kwok_options` (a KwokConfiguration's options, e.g.
        podPlayStageParallelism) and `extra_args` (more flags per binary) are for the scale
        benchmark (bench/kube_scale.py); the tests keep the defaults."""
        self.dir = Path(workdir)
        self.bin = Path(binaries or bin_dir())
        self.heartbeat_seconds = heartbeat_seconds
        self.kwok_options = dict(kwok_options or {})
        self.extra_args = {k: list(v) for k, v in (extra_args or {}).items()}
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}
        self.port = 0
        self.server = ""

    # --- files ---
    def _write(self, name: str, data: bytes | str) -> Path:
        path = self.dir / name
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        os.chmod(path, 0o600)
        return path

    def _pki(self) -> None:
        ca_key = _key()
        ca = _cert("cairn-test-ca", ca_key, ca=True)
        self._write("ca.crt", _pem_cert(ca))
        self._write("ca.key", _pem_key(ca_key))
        self.ca_pem = _pem_cert(ca)
        service_ip = str(next(ipaddress.ip_network(SERVICE_CIDR).hosts()))
        server_key = _key()
        self._write("apiserver.key", _pem_key(server_key))
        self._write("apiserver.crt", _pem_cert(_cert(
            "kube-apiserver", server_key, issuer=ca, issuer_key=ca_key, server=True,
            sans=("127.0.0.1", "localhost", service_ip, "kubernetes", "kubernetes.default",
                  "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"))))
        sa_key = _key()  # signs service account tokens (ES256)
        self._write("sa.key", _pem_key(sa_key))
        self._write("sa.pub", sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        # One identity per client, as a cluster would have: the bootstrap RBAC roles of the
        # controller manager and the scheduler apply to these user names.
        self.identities = {}
        for name, cn, org in (("admin", "cairn-test-admin", "system:masters"),
                              ("controller-manager", "system:kube-controller-manager", None),
                              ("scheduler", "system:kube-scheduler", None)):
            key = _key()
            cert = _cert(cn, key, issuer=ca, issuer_key=ca_key, org=org)
            self.identities[name] = (_pem_cert(cert), _pem_key(key))

    def kubeconfig(self, user: str = "admin", *, token: str | None = None) -> dict:
        """A kubeconfig dict for one of the certificate identities, or for a bearer token."""
        import base64

        b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
        if token is not None:
            credentials = {"token": token}
        else:
            cert, key = self.identities[user]
            credentials = {"client-certificate-data": b64(cert), "client-key-data": b64(key)}
        return {
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.server,
                                                      "certificate-authority-data": b64(self.ca_pem)}}],
            "users": [{"name": user, "user": credentials}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": user}}],
        }

    def admin_kubeconfig(self) -> dict:
        return self.kubeconfig("admin")

    def _kubeconfig_file(self, user: str) -> Path:
        return self._write(f"{user}.kubeconfig", yaml.safe_dump(self.kubeconfig(user)))

    # --- processes ---
    def _spawn(self, name: str, args: list[str]) -> None:
        log = self.dir / f"{name}.log"
        self.logs[name] = log
        args = [*args, *self.extra_args.get(name, ())]
        with open(log, "ab") as out:
            self.procs[name] = subprocess.Popen([str(self.bin / name), *args], stdout=out, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, cwd=self.dir, preexec_fn=_die_with_parent)

    def _check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise ControlPlaneError(f"{name} exited with code {proc.returncode}")

    def _wait(self, what: str, check, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                if check():
                    return
            except Exception as exc:  # noqa: BLE001 - not up yet
                last = exc
            time.sleep(0.2)
        raise ControlPlaneError(f"{what} not ready after {timeout:.0f} s (last error: {last})")

    def _ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.dir / "ca.crt"))
        context.load_cert_chain(self.dir / "admin.crt", self.dir / "admin.key")
        return context

    def _get(self, path: str) -> str:
        with urllib.request.urlopen(self.server + path, context=self._ssl_context(), timeout=5) as response:
            return response.read().decode()

    def request(self, method: str, path: str, body: bytes | str | None = None, *,
                content_type: str = "application/json") -> tuple[int, dict]:
        """One admin request: (HTTP status, parsed JSON body), errors included (no raise)."""
        import json
        import urllib.error

        data = body.encode() if isinstance(body, str) else body
        req = urllib.request.Request(self.server + path, data=data, method=method,
                                     headers={"Content-Type": content_type, "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, context=self._ssl_context(), timeout=30) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def start(self, *, timeout: float = 120.0) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._pki()
        cert, key = self.identities["admin"]
        self._write("admin.crt", cert)
        self._write("admin.key", key)
        try:
            self._start(timeout)
        except Exception as exc:
            self.stop()
            raise ControlPlaneError(f"the test control plane did not start: {exc}\n{self.tails()}") from exc

    def _start(self, timeout: float) -> None:
        d = self.dir
        etcd_port, peer_port = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{etcd_port}"
        self._spawn("etcd", [
            "--name=test", f"--data-dir={d / 'etcd'}", f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}", f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster=test=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync",  # throwaway data: no fsync, much faster on a busy disk
            "--log-level=warn",
        ])
        self._wait("etcd", lambda: urllib.request.urlopen(self.etcd_url + "/health", timeout=2).status == 200, 30)

        self.port = free_port()
        self.server = f"https://127.0.0.1:{self.port}"
        self._spawn("kube-apiserver", [
            f"--etcd-servers={self.etcd_url}", "--bind-address=127.0.0.1", f"--secure-port={self.port}",
            "--advertise-address=127.0.0.1",
            # the "kubernetes" Service's endpoints would be 127.0.0.1, which EndpointSlices refuse
            "--endpoint-reconciler-type=none",
            f"--cert-dir={d / 'certs'}", f"--tls-cert-file={d / 'apiserver.crt'}",
            f"--tls-private-key-file={d / 'apiserver.key'}", f"--client-ca-file={d / 'ca.crt'}",
            "--authorization-mode=Node,RBAC",
            # on top of the default plugins (NamespaceLifecycle, LimitRanger, ServiceAccount,
            # PodSecurity, ResourceQuota, DefaultStorageClass, webhooks, ...)
            "--enable-admission-plugins=NodeRestriction,PodSecurity",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={d / 'sa.pub'}", f"--service-account-signing-key-file={d / 'sa.key'}",
            f"--audit-policy-file={self._write('audit-policy.yaml', yaml.safe_dump(AUDIT_POLICY))}",
            f"--audit-log-path={d / 'audit.log'}", "--audit-log-mode=blocking",
            "--profiling=false", "--v=1",
        ])
        self._wait("kube-apiserver /readyz", lambda: self._get("/readyz") == "ok", timeout)

        common = ["--leader-elect=false", "--v=1"]
        self._spawn("kube-controller-manager", [
            f"--kubeconfig={self._kubeconfig_file('controller-manager')}", *common,
            "--secure-port=0",  # no serving: two workers' control planes must not fight for 10257
            f"--controllers={','.join(CONTROLLERS)}",
            "--use-service-account-credentials=true", f"--root-ca-file={d / 'ca.crt'}",
            f"--service-account-private-key-file={d / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
        ])
        self._spawn("kube-scheduler", [
            f"--kubeconfig={self._kubeconfig_file('scheduler')}", *common, "--secure-port=0",
            # A pod refused while its claim was being bound can miss the claim's update and wait
            # for the periodic flush of unschedulable pods (5 min by default): 10 s in tests.
            "--pod-max-in-unschedulable-pods-duration=10s",
        ])
        stages = KWOK_STAGES.replace("durationMilliseconds: 10000", f"durationMilliseconds: {self.heartbeat_seconds * 1000}")
        if self.kwok_options:
            stages += "---\n" + yaml.safe_dump({"apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration",
                                                 "options": self.kwok_options})
        self._write("kwok.yaml", stages)
        self._spawn("kwok", [
            f"--kubeconfig={self._kubeconfig_file('admin')}", f"--config={d / 'kwok.yaml'}",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
            # a kubelet address that refuses at once: the API server proxies pods/log there
            "--cidr=10.244.0.0/16", "--node-ip=127.0.0.1",
        ])
        # Controllers are up once they use their identities: the service account controller
        # creates "default" in every namespace (pods cannot be created before it).
        self._wait("kube-controller-manager (default service account)",
                   lambda: '"name":"default"' in self._get("/api/v1/namespaces/default/serviceaccounts/default"),
                   timeout)

    def audit_events(self, user: str) -> list[dict]:
        """The audit log's events of `user` (one of AUDITED_USERS), oldest first."""
        import json

        path = self.dir / "audit.log"
        if not path.exists():
            return []
        events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return [e for e in events if (e.get("user") or {}).get("username") == user]

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            proc = self.procs[name]
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)

    def tails(self, lines: int = 25) -> str:
        parts = []
        for name, log in self.logs.items():
            try:
                text = log.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                text = ["(no log)"]
            parts.append(f"--- {name} ({log}) ---\n" + "\n".join(text))
        return "\n".join(parts)

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
