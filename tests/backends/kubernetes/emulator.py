"""A small emulated Kubernetes API server for tests: real HTTP, real JSON, driven by the real
`kubernetes` client. No controllers run here: the test plays the job controller and the kubelet
(creating pods, patching their status through the API).

What it does like a real API server:
- create / get / list / replace / merge-patch and strategic-merge-patch (lists of named items
  merged by name; incl. the status subresource) / delete for the
  resources Cairn uses; 409 AlreadyExists on a duplicate create, 404 NotFound, 404 when the
  namespace of a namespaced create does not exist;
- one resourceVersion counter for everything; list returns it; watch streams ADDED / MODIFIED /
  DELETED from a given resourceVersion and answers an ERROR event with code 410 (Expired) when
  that version was compacted away (`compact()`); `timeoutSeconds` ends a watch;
- label selectors (=, ==, !=, in, notin, exists, !exists) and simple field selectors;
- delete cascades to objects whose ownerReferences point at the deleted one (unless Orphan);
- bearer-token authentication when a token is set;
- pod logs (`GET .../pods/<name>/log`): 404 for a missing pod; `tailLines`, `sinceTime`,
  `sinceSeconds` and `timestamps` (each line prefixed with its RFC3339Nano time, trailing zeros
  trimmed as Go does). Lines are written with `write_log()` (stamped when written) or set
  whole in `logs[(namespace, pod)]` (all stamped 2026-01-01T00:00:00Z). `follow` is not
  emulated: a follow request is answered like a plain read.

The service proxy (`/api/v1/namespaces/<ns>/services/[http:]<name>[:<port>]/proxy/<path>`), as
Cairn's notebook proxy uses it from outside a cluster: authenticated like every request, the
Authorization header removed (a real API server consumes it too), the rest of the request and
its body forwarded to the address the test gives the Service in `service_backends[(namespace,
name)] = "127.0.0.1:<port>"` (it plays kube-proxy and the pod), and the answer relayed back; an
Upgrade (websocket) request is tunnelled both ways until either side closes. Every proxied
request is kept in `proxied` (method, path, headers).

Fault injection: `fail(method, path_contains, status, times)` answers the next matching requests
with that status; `stall(method, path_contains, seconds, times)` delays them (client timeouts).
kmock (PyPI) was tried first: its watch streams ignore resourceVersion and never answer 410,
which is exactly what the reconciler must be tested against, so this emulator exists.
"""
from __future__ import annotations

import copy
import itertools
import json
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


@dataclass(frozen=True)
class Resource:
    group_version: str  # "v1", "batch/v1"
    plural: str
    kind: str
    namespaced: bool = True


RESOURCES = [
    Resource("v1", "namespaces", "Namespace", namespaced=False),
    Resource("v1", "nodes", "Node", namespaced=False),
    Resource("v1", "pods", "Pod"),
    Resource("v1", "services", "Service"),
    Resource("v1", "secrets", "Secret"),
    Resource("v1", "persistentvolumeclaims", "PersistentVolumeClaim"),
    Resource("v1", "persistentvolumes", "PersistentVolume", namespaced=False),
    Resource("v1", "events", "Event"),
    Resource("batch/v1", "jobs", "Job"),
    Resource("apps/v1", "statefulsets", "StatefulSet"),
    Resource("apps/v1", "deployments", "Deployment"),
    Resource("autoscaling/v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler"),
    Resource("scheduling.volcano.sh/v1beta1", "podgroups", "PodGroup"),
    Resource("networking.k8s.io/v1", "networkpolicies", "NetworkPolicy"),
    Resource("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget"),
    Resource("storage.k8s.io/v1", "storageclasses", "StorageClass", namespaced=False),
    Resource("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding"),
    Resource("coordination.k8s.io/v1", "leases", "Lease"),
    Resource("authentication.k8s.io/v1", "selfsubjectreviews", "SelfSubjectReview", namespaced=False),
    Resource("authorization.k8s.io/v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", namespaced=False),
]
BY_PATH = {(r.group_version, r.plural): r for r in RESOURCES}
BY_PLURAL = {r.plural: r for r in RESOURCES}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _named(items: list) -> bool:
    return all(isinstance(item, dict) and "name" in item for item in items)


def _nano_stamp(ns: int) -> str:
    """RFC3339Nano as Go's time.Format writes it: the fraction's trailing zeros trimmed."""
    seconds, nanos = divmod(ns, 1_000_000_000)
    base = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{nanos:09d}".rstrip("0")
    return f"{base}.{fraction}Z" if fraction else f"{base}Z"


def _stamp_seconds(stamp: str) -> float:
    base, _, fraction = stamp.rstrip("Z").partition(".")
    whole = datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()
    return whole + (int(fraction.ljust(9, "0")) / 1e9 if fraction else 0.0)


def merge_patch(target, patch, *, strategic: bool = False):
    """RFC 7386 JSON merge patch; with `strategic`, a strategic merge patch as a real API server
    applies one to the lists Cairn sends (containers, env, volumes, ports, ...): lists of objects
    with a `name` are merged item by item, so an item the patch leaves out stays (an env var
    dropped from a template survives a strategic-merge patch of the template)."""
    if not isinstance(patch, dict):
        if strategic and isinstance(patch, list) and isinstance(target, list) and _named(patch) and _named(target):
            merged = {item["name"]: item for item in target}
            for item in patch:
                merged[item["name"]] = merge_patch(merged.get(item["name"]), item, strategic=True)
            return copy.deepcopy(list(merged.values()))
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value, strategic=strategic)
    return result


def _status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


_REQ = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split_selector(selector: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current)
    return parts


def labels_match(labels: dict, selector: str | None) -> bool:
    if not selector:
        return True
    for term in _split_selector(selector):
        term = term.strip()
        match = _REQ.match(term)
        if match:
            key, op, values = match.group(1), match.group(2), {v.strip() for v in match.group(3).split(",")}
            if (op == "in") != (labels.get(key) in values):
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def fields_match(obj: dict, selector: str | None) -> bool:
    if not selector:
        return True
    for term in selector.split(","):
        negate = "!=" in term
        key, value = term.replace("!=", "=").replace("==", "=").split("=", 1)
        current = obj
        for part in key.strip().split("."):
            current = current.get(part) if isinstance(current, dict) else None
        if (str(current) == value.strip()) == negate:
            return False
    return True


class _Server(ThreadingHTTPServer):
    # A reconciler opens a connection per informer (eight) and one for its Lease at once: the
    # default listen backlog (5) drops some SYNs, which a loaded machine turns into connect timeouts.
    request_queue_size = 64


class KubeEmulator:
    def __init__(self, *, token: str | None = None):
        self.token = token
        self.username = "system:serviceaccount:cairn-system:cairn"  # what a SelfSubjectReview answers
        self.objects: dict[tuple[str, str, str], dict] = {}  # (plural, namespace, name) -> object
        self.history: list[tuple[int, str, str, dict]] = []  # (rv, plural, type, object)
        self.compacted_rv = 0
        self.watch_generation = 0  # bumped by expire_watches(): open watches end with 410
        self.rv = itertools.count(100)
        self.current_rv = 99
        self.lock = threading.Condition()
        self.faults: list[dict] = []
        self.requests: list[tuple[str, str]] = []
        self.verbs: set[tuple[str, str, str]] = set()  # (api group, resource[/subresource], RBAC verb)
        self.logs: dict[tuple[str, str], str] = {}  # whole text, every line stamped at one fixed time
        self.log_lines: dict[tuple[str, str], list[tuple[str, str]]] = {}  # (stamp, line) by write_log
        self._last_log_ns = 0
        self.stopping = False
        self.server: ThreadingHTTPServer | None = None
        self.service_backends: dict[tuple[str, str], str] = {}  # (namespace, service) -> "host:port"
        self.proxied: list[tuple[str, str, dict]] = []  # (method, path, headers) sent through the service proxy

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> str:
        emulator = self

        class Handler(_Handler):
            pass

        Handler.emulator = emulator
        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self.url

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            self.lock.notify_all()
        if self.server:
            self.server.shutdown()
            self.server.server_close()

    def kubeconfig(self) -> dict:
        user = {"token": self.token} if self.token else {}
        return {
            "apiVersion": "v1", "kind": "Config", "current-context": "emulated",
            "clusters": [{"name": "emulated", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": user}],
            "contexts": [{"name": "emulated", "context": {"cluster": "emulated", "user": "tester"}}],
        }

    # -- faults ---------------------------------------------------------------------------------

    def fail(self, method: str, path_contains: str, status: int, *, times: int = 1) -> None:
        with self.lock:
            self.faults.append({"method": method, "path": path_contains, "status": status, "times": times})

    def stall(self, method: str, path_contains: str, seconds: float, *, times: int = 1) -> None:
        with self.lock:
            self.faults.append({"method": method, "path": path_contains, "delay": seconds, "times": times})

    def _take_fault(self, method: str, path: str) -> dict | None:
        with self.lock:
            for fault in self.faults:
                if fault["method"] in (method, "*") and fault["path"] in path and fault["times"] > 0:
                    fault["times"] -= 1
                    return dict(fault)
        return None

    def compact(self) -> None:
        """Forget history: watches resuming from any earlier resourceVersion get 410 Gone."""
        with self.lock:
            self.history.clear()
            self.compacted_rv = self.current_rv
            self.lock.notify_all()

    def expire_watches(self) -> None:
        """Compact history and end every open watch with a 410 ERROR event (as etcd compaction
        does to watchers that fell behind); a fresh list is needed to go on."""
        with self.lock:
            self.history.clear()
            self.compacted_rv = self.current_rv
            self.watch_generation += 1
            self.lock.notify_all()

    def creates(self, plural: str) -> int:
        return sum(1 for method, path in self.requests if method == "POST" and path.rstrip("/").endswith(plural))

    # -- store (used by the HTTP handler and directly by tests) ---------------------------------

    def _record(self, plural: str, type_: str, obj: dict) -> None:
        self.history.append((int(obj["metadata"]["resourceVersion"]), plural, type_, copy.deepcopy(obj)))
        self.lock.notify_all()

    def _bump(self, obj: dict) -> None:
        self.current_rv = next(self.rv)
        obj["metadata"]["resourceVersion"] = str(self.current_rv)

    def create(self, plural: str, obj: dict, namespace: str = "") -> tuple[int, dict]:
        resource = BY_PLURAL[plural]
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        name = meta.get("name")
        if not name:
            return 422, _status(422, "Invalid", "metadata.name: Required value")
        namespace = namespace or meta.get("namespace", "") if resource.namespaced else ""
        if resource.namespaced and not namespace:
            namespace = "default"
        with self.lock:
            if resource.namespaced and ("namespaces", "", namespace) not in self.objects:
                return 404, _status(404, "NotFound", f'namespaces "{namespace}" not found')
            key = (plural, namespace, name)
            if key in self.objects:
                return 409, _status(409, "AlreadyExists", f'{plural} "{name}" already exists')
            if resource.namespaced:
                meta["namespace"] = namespace
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now(), generation=1)
            obj.setdefault("apiVersion", resource.group_version)
            obj.setdefault("kind", resource.kind)
            if plural in ("pods", "jobs", "statefulsets", "deployments", "namespaces", "nodes"):
                obj.setdefault("status", {})
            self._bump(obj)
            self.objects[key] = obj
            self._record(plural, "ADDED", obj)
            return 201, copy.deepcopy(obj)

    def get(self, plural: str, namespace: str, name: str) -> dict | None:
        with self.lock:
            obj = self.objects.get((plural, namespace if BY_PLURAL[plural].namespaced else "", name))
            return copy.deepcopy(obj) if obj else None

    def list(self, plural: str, namespace: str = "", label_selector: str = "", field_selector: str = "") -> list[dict]:
        with self.lock:
            return [copy.deepcopy(o) for (p, ns, _), o in sorted(self.objects.items())
                    if p == plural and (not namespace or ns == namespace)
                    and labels_match(o["metadata"].get("labels") or {}, label_selector)
                    and fields_match(o, field_selector)]

    def patch(self, plural: str, namespace: str, name: str, patch: dict, *,
              strategic: bool = False) -> tuple[int, dict]:
        with self.lock:
            key = (plural, namespace if BY_PLURAL[plural].namespaced else "", name)
            current = self.objects.get(key)
            if current is None:
                return 404, _status(404, "NotFound", f'{plural} "{name}" not found')
            patch = copy.deepcopy(patch)
            patch.get("metadata", {}).pop("resourceVersion", None)
            updated = merge_patch(current, patch, strategic=strategic)
            if updated.get("spec") != current.get("spec"):
                updated["metadata"]["generation"] = current["metadata"].get("generation", 1) + 1
            self._bump(updated)
            self.objects[key] = updated
            self._record(plural, "MODIFIED", updated)
            return 200, copy.deepcopy(updated)

    def json_patch(self, plural: str, namespace: str, name: str, ops: list[dict]) -> tuple[int, dict]:
        """RFC 6902 on objects: test, add, replace, remove (what Cairn sends: releasing a gated pod)."""
        with self.lock:
            key = (plural, namespace if BY_PLURAL[plural].namespaced else "", name)
            current = self.objects.get(key)
            if current is None:
                return 404, _status(404, "NotFound", f'{plural} "{name}" not found')
            updated = copy.deepcopy(current)
            for op in ops:
                *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
                target = updated
                for part in parents:
                    target = target.setdefault(part, {})
                if op["op"] == "test" and target.get(last) != op.get("value"):
                    return 422, _status(422, "Invalid", f"the test of {op['path']} failed")
                if op["op"] in ("add", "replace"):
                    target[last] = copy.deepcopy(op["value"])
                elif op["op"] == "remove":
                    target.pop(last, None)
            self._bump(updated)
            self.objects[key] = updated
            self._record(plural, "MODIFIED", updated)
            return 200, copy.deepcopy(updated)

    def replace(self, plural: str, namespace: str, name: str, obj: dict) -> tuple[int, dict]:
        with self.lock:
            key = (plural, namespace if BY_PLURAL[plural].namespaced else "", name)
            current = self.objects.get(key)
            if current is None:
                return 404, _status(404, "NotFound", f'{plural} "{name}" not found')
            wanted = obj.get("metadata", {}).get("resourceVersion")
            if wanted and wanted != current["metadata"]["resourceVersion"]:
                return 409, _status(409, "Conflict", "the object has been modified")
            obj = copy.deepcopy(obj)
            for field in ("uid", "creationTimestamp", "namespace", "generation"):
                if field in current["metadata"]:
                    obj["metadata"][field] = current["metadata"][field]
            if "status" in current:  # as a real server: a PUT of the object leaves its status alone
                obj["status"] = copy.deepcopy(current["status"])
            if obj.get("spec") != current.get("spec"):
                obj["metadata"]["generation"] = current["metadata"].get("generation", 1) + 1
            self._bump(obj)
            self.objects[key] = obj
            self._record(plural, "MODIFIED", obj)
            return 200, copy.deepcopy(obj)

    def delete(self, plural: str, namespace: str, name: str, *, propagation: str = "Background") -> tuple[int, dict]:
        with self.lock:
            key = (plural, namespace if BY_PLURAL[plural].namespaced else "", name)
            obj = self.objects.pop(key, None)
            if obj is None:
                return 404, _status(404, "NotFound", f'{plural} "{name}" not found')
            self._bump(obj)
            self._record(plural, "DELETED", obj)
            if propagation != "Orphan":
                uid = obj["metadata"]["uid"]
                for (p, ns, n), child in list(self.objects.items()):
                    owners = child["metadata"].get("ownerReferences") or []
                    if any(o.get("uid") == uid for o in owners):
                        self.delete(p, ns, n, propagation=propagation)
            return 200, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 200, "metadata": {}}

    def write_log(self, namespace: str, pod: str, text: str, *, stamp_ns: int | None = None) -> None:
        """Append output to a pod's log, each line stamped with the time it is written (as the
        kubelet does; stamps then strictly increase), or all with `stamp_ns` (epoch nanoseconds:
        lines that share one stamp, as a fast writer's may on a coarse clock)."""
        with self.lock:
            lines = self.log_lines.setdefault((namespace, pod), [])
            for line in text.splitlines(keepends=True):
                if stamp_ns is None:
                    self._last_log_ns = max(time.time_ns(), self._last_log_ns + 1)
                lines.append((_nano_stamp(self._last_log_ns if stamp_ns is None else stamp_ns), line))

    def read_log(self, namespace: str, pod: str, query: dict) -> str:
        with self.lock:
            lines = list(self.log_lines.get((namespace, pod)) or [
                ("2026-01-01T00:00:00Z", line) for line in self.logs.get((namespace, pod), "").splitlines(keepends=True)])
        since = None
        if query.get("sinceTime"):
            since = _stamp_seconds(query["sinceTime"])
        elif query.get("sinceSeconds"):
            since = time.time() - int(query["sinceSeconds"])
        if since is not None:
            lines = [(stamp, line) for stamp, line in lines if _stamp_seconds(stamp) >= since]
        if query.get("tailLines") is not None:
            tail = int(query["tailLines"])
            lines = lines[len(lines) - tail:] if tail > 0 else []
        stamped = query.get("timestamps") in ("true", "1")
        return "".join(f"{stamp} {line}" if stamped else line for stamp, line in lines)

    def events_since(self, rv: int) -> list[tuple[int, str, str, dict]]:
        return [h for h in self.history if h[0] > rv]


SERVICE_PROXY = re.compile(r"/api/v1/namespaces/([^/]+)/services/([^/]+)/proxy(/.*)?")


class _Handler(BaseHTTPRequestHandler):
    emulator: KubeEmulator
    protocol_version = "HTTP/1.0"

    def log_message(self, format, *args):  # quiet
        pass

    # -- plumbing -------------------------------------------------------------------------------

    def _send(self, code: int, body, content_type: str = "application/json") -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else {}

    def _route(self):
        """-> (resource, namespace, name, subresource) or None."""
        parts = [p for p in urlparse(self.path).path.split("/") if p]
        if parts[:1] == ["api"] and len(parts) >= 2:
            group_version, rest = parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            return None
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces" and (group_version, rest[2]) in BY_PATH:
            namespace, rest = rest[1], rest[2:]
        if not rest or (group_version, rest[0]) not in BY_PATH:
            return None
        resource = BY_PATH[(group_version, rest[0])]
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        return resource, namespace, name, sub

    def _handle(self, method: str) -> None:
        em = self.emulator
        em.requests.append((method, urlparse(self.path).path))
        if em.token and self.headers.get("Authorization") != f"Bearer {em.token}":
            self._send(401, _status(401, "Unauthorized", "Unauthorized"))
            return
        fault = em._take_fault(method, self.path)
        if fault and "delay" in fault:
            time.sleep(fault["delay"])
        elif fault:
            self._send(fault["status"], _status(fault["status"], "InternalError" if fault["status"] >= 500 else
                                                "Injected", f"injected fault {fault['status']}"))
            return
        if urlparse(self.path).path.rstrip("/") == "/version":
            self._send(200, {"major": "1", "minor": "37", "gitVersion": "v1.37.0-emulated", "gitCommit": "",
                             "gitTreeState": "clean", "buildDate": _now(), "goVersion": "go", "compiler": "gc",
                             "platform": "linux/amd64"})
            return
        proxied = SERVICE_PROXY.fullmatch(urlparse(self.path).path)
        if proxied:
            self._service_proxy(method, *proxied.groups())
            return
        route = self._route()
        if route is None:
            self._send(404, _status(404, "NotFound", f"no route for {self.path}"))
            return
        resource, namespace, name, sub = route
        query = {k: v[-1] for k, v in parse_qs(urlparse(self.path).query).items()}
        group = resource.group_version.rpartition("/")[0]
        verb = {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}.get(method)
        if method == "GET":
            verb = "get" if name else ("watch" if query.get("watch") in ("true", "1") else "list")
        em.verbs.add((group, f"{resource.plural}/{sub}" if sub else resource.plural, verb))
        plural = resource.plural
        if method == "GET" and not name:
            if query.get("watch") in ("true", "1"):
                self._watch(resource, namespace, query)
            else:
                items = em.list(plural, namespace, query.get("labelSelector", ""), query.get("fieldSelector", ""))
                self._send(200, {"kind": f"{resource.kind}List", "apiVersion": resource.group_version,
                                 "metadata": {"resourceVersion": str(em.current_rv)}, "items": items})
        elif method == "GET" and sub == "log":
            if em.get(plural, namespace, name) is None:
                self._send(404, _status(404, "NotFound", f'pods "{name}" not found'))
            else:
                self._send(200, em.read_log(namespace, name, query), "text/plain")
        elif method == "GET":
            obj = em.get(plural, namespace, name)
            if obj is None:
                self._send(404, _status(404, "NotFound", f'{plural} "{name}" not found'))
            else:
                self._send(200, obj)
        elif method == "POST" and plural == "selfsubjectreviews":  # who am I: the token's user, nothing stored
            self._send(201, {**self._body(), "status": {"userInfo": {"username": em.username}}})
        elif method == "POST" and plural == "selfsubjectaccessreviews":  # no authorizer here: all allowed
            self._send(201, {**self._body(), "status": {"allowed": True}})
        elif method == "POST" and not name:
            self._send(*em.create(plural, self._body(), namespace))
        elif method == "PATCH" and name:
            body = self._body()
            if isinstance(body, list):
                self._send(*em.json_patch(plural, namespace, name, body))
            else:
                strategic = "strategic-merge-patch" in (self.headers.get("Content-Type") or "")
                self._send(*em.patch(plural, namespace, name, body, strategic=strategic))
        elif method == "PUT" and name:
            self._send(*em.replace(plural, namespace, name, self._body()))
        elif method == "DELETE" and name:
            body = self._body() or {}
            propagation = body.get("propagationPolicy") or query.get("propagationPolicy") or "Background"
            self._send(*em.delete(plural, namespace, name, propagation=propagation))
        else:
            self._send(405, _status(405, "MethodNotAllowed", f"{method} {self.path}"))

    def _service_proxy(self, method: str, namespace: str, service: str, rest: str | None) -> None:
        em = self.emulator
        parts = service.split(":")
        name = parts[1] if len(parts) == 3 else parts[0]  # [scheme:]name[:port]
        target = em.service_backends.get((namespace, name))
        if em.get("services", namespace, name) is None or target is None:
            self._send(503, _status(503, "ServiceUnavailable", f'no endpoints available for service "{name}"'))
            return
        query = urlparse(self.path).query
        path = (rest or "/") + (f"?{query}" if query else "")
        headers = [(k, v) for k, v in self.headers.items()
                   if k.lower() not in ("authorization", "host", "connection", "content-length")]
        em.proxied.append((method, path, dict(headers)))
        em.verbs.add(("", "services/proxy", {"GET": "get", "HEAD": "get", "OPTIONS": "get", "POST": "create",
                                             "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]))
        upgrade = self.headers.get("Upgrade", "").lower() == "websocket"
        host, _, port = target.rpartition(":")
        try:
            upstream = socket.create_connection((host, int(port)), timeout=30)
        except OSError as exc:  # as a real API server answers when the pod does not listen (yet)
            self._send(503, _status(503, "ServiceUnavailable", f"error trying to reach service: {exc}"))
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if not upgrade else b""
        lines = [f"{method} {path} HTTP/1.1", f"Host: {target}",
                 "Connection: Upgrade" if upgrade else "Connection: close",
                 *[f"{k}: {v}" for k, v in headers]]
        if not upgrade:
            lines.append(f"Content-Length: {len(body)}")
        upstream.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        self.close_connection = True

        def pump(source, sink):
            try:
                while chunk := source.recv(65536):
                    sink.sendall(chunk)
            except OSError:
                pass
            finally:
                for end in (source, sink):
                    try:
                        end.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        upstream.settimeout(None)
        if upgrade:
            back = threading.Thread(target=pump, args=(self.connection, upstream), daemon=True)
            back.start()
        pump(upstream, self.connection)
        upstream.close()

    def _watch(self, resource: Resource, namespace: str, query: dict) -> None:
        em = self.emulator
        deadline = time.monotonic() + min(float(query.get("timeoutSeconds") or 30), 30)
        labels, fields = query.get("labelSelector", ""), query.get("fieldSelector", "")
        # Like a real API server: chunked transfer, one event per line, each flushed at once.
        self.protocol_version = "HTTP/1.1"
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()

        def emit(type_: str, obj: dict) -> None:
            line = json.dumps({"type": type_, "object": obj}).encode() + b"\n"
            self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
            self.wfile.flush()

        def wanted(obj: dict) -> bool:
            return ((not namespace or obj["metadata"].get("namespace") == namespace)
                    and labels_match(obj["metadata"].get("labels") or {}, labels) and fields_match(obj, fields))

        with em.lock:
            generation = em.watch_generation
            start = query.get("resourceVersion") or "0"
            if start == "0":
                pending = [("ADDED", o) for o in em.list(resource.plural, namespace, labels, fields)]
                since = em.current_rv
            else:
                since = int(start)
                if since < em.compacted_rv:
                    pending, since = None, None
                else:
                    pending = []

        def stream(since) -> None:
            if pending is None:
                emit("ERROR", _status(410, "Expired", f"too old resource version: {start} ({em.compacted_rv})"))
                return
            for type_, obj in pending:
                emit(type_, obj)
            while time.monotonic() < deadline:
                with em.lock:
                    if since < em.compacted_rv or generation != em.watch_generation:
                        emit("ERROR", _status(410, "Expired", "too old resource version"))
                        return
                    batch = [h for h in em.events_since(since) if h[1] == resource.plural]
                    newest = em.current_rv
                    if not batch and not em.stopping:
                        em.lock.wait(timeout=min(0.2, max(0.0, deadline - time.monotonic())))
                        batch = [h for h in em.events_since(since) if h[1] == resource.plural]
                        newest = em.current_rv
                    if em.stopping:
                        return
                for _rv, _plural, type_, obj in batch:
                    if wanted(obj):
                        emit(type_, obj)
                since = max(since, newest)
        try:
            stream(since)
        except (BrokenPipeError, ConnectionResetError):
            return
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")

    def do_PUT(self):
        self._handle("PUT")

    def do_PATCH(self):
        self._handle("PATCH")

    def do_DELETE(self):
        self._handle("DELETE")
