"""A small in-memory Cairn API over real HTTP, for testing the SDK and CLI.

It speaks the /api/v1 contract (auth, me, projects, workloads per kind, stop, delete, logs,
events, tokens, pools and their queues) on 127.0.0.1:<free port>, records every request, and lets a test script
failures (`fail_next`), status changes (`statuses`) and log streams (`log_chunks`, where a
threading.Event item makes the stream wait until the test sets it).

The real server is tested end to end elsewhere; this keeps the SDK tests free of Django and
PostgreSQL while still exercising real sockets, headers, chunked streams and status codes.
"""
from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

TOKEN = "cairn_0123456789ab_s3cr3t-s3cr3t"
ROUTE_KINDS = {"training-jobs": "training", "notebooks": "notebook", "deployments": "deployment"}
KIND_ROUTES = {kind: route for route, kind in ROUTE_KINDS.items()}
FINISHED = {"succeeded", "failed", "stopped", "lost"}


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any

    def q(self, key: str) -> str | None:
        values = self.query.get(key)
        return values[-1] if values else None


@dataclass
class FakeCairn:
    users: dict[str, str] = field(default_factory=lambda: {"alice": "wonderland"})
    projects: list[dict] = field(default_factory=lambda: [
        {"slug": "vision", "name": "Vision", "description": "Image models", "role": "owner"},
        {"slug": "nlp", "name": "NLP", "description": "Language models", "role": "viewer"},
    ])
    page_size: int = 50
    requests: list[Recorded] = field(default_factory=list)
    workloads: dict[int, dict] = field(default_factory=dict)
    events: dict[int, list[dict]] = field(default_factory=dict)
    # Each GET of a workload's detail takes the next status from its list, if any.
    statuses: dict[int, list[str]] = field(default_factory=dict)
    # Log output per workload: str chunks, or threading.Event items to wait on while following.
    log_chunks: dict[int, list[Any]] = field(default_factory=dict)
    # Status a followed workload reaches when its log stream ends.
    finish_with: dict[int, str] = field(default_factory=dict)
    close_delimited_logs: bool = False  # stream without chunked encoding (HTTP/1.0 style)
    # (method, path) -> [(status, body), ...]: answered (and popped) before normal handling.
    fail_next: dict[tuple[str, str], list[tuple[int, Any]]] = field(default_factory=dict)
    gate_results: list[bool] = field(default_factory=list)
    tokens: list[dict] = field(default_factory=lambda: [
        {"id": 7, "name": "cli@test", "prefix": "0123456789ab", "active": True},
    ])
    pools: list[dict] = field(default_factory=lambda: [{"id": 1, "name": "local", "cluster": "local"}])
    queues: dict[str, list[dict]] = field(default_factory=dict)  # pool name -> queue entries, in order
    quotas: dict[str, list[dict]] = field(default_factory=dict)  # project slug -> its quotas
    _next_id: int = 1

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    # -- lifecycle --------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeCairn:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- test helpers -----------------------------------------------------------------------------

    def add_workload(self, project: str = "vision", kind: str = "training", **fields: Any) -> dict:
        with self.lock:
            ident = self._next_id
            self._next_id += 1
        now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        w = {
            "id": ident, "name": f"{kind}-{ident}", "kind": kind, "project": project,
            "pool": "local", "status": "queued", "status_reason": "", "status_message": "",
            "pending_reason": "", "exit_code": None, "priority": "P3", "preemptible": True,
            "replicas": 1, "resources": {"gpu": 0.0, "cpu": 1.0, "memory_mb": 1024},
            "max_restarts": 0, "max_runtime_seconds": None, "attempt": 0, "restarts": 0, "spec": {}, "conditions": [],
            "placement": [], "runtime": {}, "endpoint": None, "created_by": "alice", "created_at": now,
            "admitted_at": None, "started_at": None, "finished_at": None,
        }
        w.update(fields)
        self.workloads[ident] = w
        return w

    def find(self, method: str, path_suffix: str = "") -> list[Recorded]:
        return [r for r in self.requests
                if r.method == method and r.path.endswith(path_suffix)]

    # -- request handling -------------------------------------------------------------------------

    def handle(self, h: _Handler) -> None:
        split = urlsplit(h.path)
        path, query = split.path, parse_qs(split.query, keep_blank_values=True)
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        record = Recorded(h.command, path, query, dict(h.headers.items()), body)
        with self.lock:
            self.requests.append(record)
            scripted = self.fail_next.get((h.command, path))
            failure = scripted.pop(0) if scripted else None
        if failure:
            h.reply(*failure)
            return

        if path == "/api/v1/auth/login/" and h.command == "POST":
            return self._login(h, body)
        if h.headers.get("Authorization") != f"Bearer {TOKEN}":
            detail = ("Invalid token." if h.headers.get("Authorization")
                      else "Authentication credentials were not provided.")
            return h.reply(401, {"detail": detail})
        if path == "/api/v1/me/":
            return h.reply(200, {"id": 1, "username": "alice", "email": "alice@example.com",
                                 "is_staff": False, "projects": [
                                     {k: p[k] for k in ("slug", "name", "role")}
                                     for p in self.projects]})
        if path == "/api/v1/kinds/":  # as the real server: what its KindSpecs register
            return h.reply(200, [{"kind": kind, "label": kind.capitalize(), "route": route,
                                  "runs_to_completion": kind == "training", "serves_port": kind != "training",
                                  "independent_replicas": kind == "deployment"}
                                 for route, kind in ROUTE_KINDS.items()])
        if path == "/api/v1/projects/":
            return self._page(h, self.projects, query)
        if path == "/api/v1/tokens/":
            return self._page(h, self.tokens, query)
        if path == "/api/v1/pools/":
            return self._page(h, self.pools, query)
        match = re.fullmatch(r"/api/v1/pools/([^/]+)/queue/", path)
        if match:
            if not any(p["name"] == match[1] for p in self.pools):
                return h.reply(404, {"detail": "Resource pool not found."})
            entries = self.queues.get(match[1], [])
            if "waiting_on" in query:  # as the server's filter: any of the kinds given
                entries = [e for e in entries if e.get("waiting_on") in query["waiting_on"]]
            return self._page(h, entries, query)
        match = re.fullmatch(r"/api/v1/projects/([^/]+)/quotas/", path)
        if match:
            return self._page(h, self.quotas.get(match[1], []), query)
        match = re.fullmatch(r"/api/v1/tokens/(\d+)/", path)
        if match and h.command == "DELETE":
            self.tokens = [t for t in self.tokens if t["id"] != int(match[1])]
            return h.reply(204, None)

        match = re.fullmatch(
            r"/api/v1/projects/([^/]+)/(workloads|training-jobs|notebooks|deployments)/"
            r"(?:(\d+)/(?:(stop|start|resubmit|logs|events|rollout)/)?)?",
            path,
        )
        if not match:
            return h.reply(404, {"detail": "Not found."})
        slug, route, ident, action = match.groups()
        project = next((p for p in self.projects if p["slug"] == slug), None)
        if project is None:
            return h.reply(404, {"detail": "Not found."})
        kind = ROUTE_KINDS.get(route)

        if ident is None:
            if h.command == "GET":
                items = [w for w in self.workloads.values()
                         if w["project"] == slug and (kind is None or w["kind"] == kind)]
                for key in ("kind", "name"):
                    if query.get(key):
                        items = [w for w in items if w[key] == query[key][-1]]
                if query.get("status"):
                    items = [w for w in items if w["status"] in query["status"]]
                items.sort(key=lambda w: w["id"], reverse=query.get("ordering") == ["-created_at"])
                return self._page(h, items, query)
            if h.command == "POST" and kind is not None:
                return self._create(h, project, kind, body)
            return h.reply(405, {"detail": f'Method "{h.command}" not allowed.'})

        w = self.workloads.get(int(ident))
        if w is None or w["project"] != slug or (kind is not None and w["kind"] != kind):
            return h.reply(404, {"detail": "Not found."})
        if action is None and h.command == "GET":
            if self.statuses.get(w["id"]):
                w["status"] = self.statuses[w["id"]].pop(0)
            return h.reply(200, w)
        if action is None and h.command == "DELETE":
            if w["status"] not in FINISHED:
                return h.reply(409, {"detail": "Only finished workloads can be deleted; "
                                               "stop it first."})
            del self.workloads[w["id"]]
            return h.reply(204, None)
        if action == "stop" and h.command == "POST":
            if w["status"] in FINISHED:
                return h.reply(409, {"detail": f"The workload has already {w['status']}."})
            w["status"] = "stopping"
            return h.reply(202, w)
        if action == "start" and h.command == "POST" and route == "notebooks":
            if w["status"] != "stopped":
                return h.reply(409, {"detail": f"Notebook '{w['name']}' is {w['status']}: only a stopped notebook "
                                               "can be started again."})
            w["status"] = "queued"
            return h.reply(202, w)
        if action == "resubmit" and h.command == "POST":
            if w["status"] not in FINISHED:
                return h.reply(409, {"detail": f"Workload '{w['name']}' is {w['status']}: it can be run again once "
                                               "it has ended (stop it first)."})
            name = (body or {}).get("name") or f"{w['name']}-2"
            new = self.add_workload(project=w["project"], kind=w["kind"], name=name, status="queued")
            return h.reply(201, new)
        if action == "events" and h.command == "GET":
            return self._page(h, self.events.get(w["id"], []), query)
        if action == "logs" and h.command == "GET":
            return self._logs(h, w, query)
        if action == "rollout" and h.command == "GET" and route == "deployments":
            return h.reply(200, w.get("rollout_status") or {
                "stable_revision": 1, "canary_revision": None, "canary_weight": 10, "max_unavailable": 0,
                "max_surge": 1, "surge": 0, "surge_wanted": 0, "pending_reason": "",
                "replicas": [{"replica": 0, "revision": 1, "ready": True, "surge": False}], "complete": True})
        return h.reply(405, {"detail": f'Method "{h.command}" not allowed.'})

    def _login(self, h: _Handler, body: Any) -> None:
        if not isinstance(body, dict) or not body.get("username") or not body.get("password"):
            return h.reply(400, {"detail": "Invalid input.",
                                 "errors": {"password": ["This field is required."]}})
        if self.users.get(body["username"]) != body["password"]:
            return h.reply(401, {"detail": "Wrong username or password."})
        return h.reply(201, {"token": TOKEN, "expires_at": "2030-01-01T00:00:00Z",
                             "user": {"id": 1, "username": body["username"]}})

    def _create(self, h: _Handler, project: dict, kind: str, body: Any) -> None:
        if project["role"] == "viewer":
            return h.reply(403, {"detail": "Your role in this project (viewer) cannot do this."})
        if not isinstance(body, dict):
            return h.reply(400, {"detail": "Invalid input.", "errors": {"non_field_errors": [
                "Expected an object."]}})
        errors: dict[str, Any] = {}
        if kind != "notebook" and not body.get("command"):
            errors["command"] = ["This field is required."]
        if "priority" in body and body["priority"] not in {f"P{i}" for i in range(6)}:
            errors["priority"] = [f'"{body["priority"]}" is not a valid choice.']
        limit = body.get("max_runtime_seconds")
        if limit is not None and (not isinstance(limit, int) or limit < 60):
            errors["max_runtime_seconds"] = ["The run-time limit must be at least 60 seconds."]
        if body.get("name") and any(w["name"] == body["name"] and w["status"] not in FINISHED
                                    for w in self.workloads.values()):
            return h.reply(409, {"detail": f"A workload named {body['name']!r} is already active."})
        if errors:
            return h.reply(400, {"detail": "Invalid input.", "errors": errors})
        fields = {"spec": body, "pending_reason": "Waiting for the scheduler."}
        if body.get("name"):
            fields["name"] = body["name"]
        for key in ("replicas", "priority", "max_restarts", "max_runtime_seconds"):
            if key in body:
                fields[key] = body[key]
        w = self.add_workload(project["slug"], kind, **fields)
        h.reply(201, w)

    def _page(self, h: _Handler, items: list, query: dict) -> None:
        size = int((query.get("page_size") or [self.page_size])[-1])
        page = int((query.get("page") or ["1"])[-1])
        chunk = items[(page - 1) * size: page * size]
        nxt = None
        if page * size < len(items):
            params = {k: v[-1] for k, v in query.items()} | {"page": page + 1}
            nxt = f"{self.url}{urlsplit(h.path).path}?{urlencode(params)}"
        h.reply(200, {"count": len(items), "next": nxt, "previous": None, "results": chunk})

    def _logs(self, h: _Handler, w: dict, query: dict) -> None:
        chunks = self.log_chunks.get(w["id"], [])
        follow = (query.get("follow") or ["0"])[-1] in ("1", "true", "True")
        if not follow:
            text = "".join(c for c in chunks if isinstance(c, str))
            if query.get("tail"):
                lines = text.splitlines(keepends=True)
                text = "".join(lines[-int(query["tail"][-1]):])
            return h.reply(200, text, content_type="text/plain; charset=utf-8")

        def pieces():
            for chunk in chunks:
                if isinstance(chunk, threading.Event):
                    self.gate_results.append(chunk.wait(timeout=5))
                else:
                    yield chunk.encode()
            if w["id"] in self.finish_with:
                w["status"] = self.finish_with[w["id"]]

        h.send_response(200)
        h.send_header("Content-Type", "text/plain; charset=utf-8")
        if self.close_delimited_logs:
            h.send_header("Connection", "close")
            h.end_headers()
            for piece in pieces():
                h.wfile.write(piece)
                h.wfile.flush()
            h.close_connection = True
            return
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        for piece in pieces():
            h.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            h.wfile.flush()
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_state: FakeCairn

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def reply(self, status: int, body: Any, content_type: str = "application/json") -> None:
        if body is None:
            data = b""
        elif isinstance(body, (bytes, str)) and content_type != "application/json":
            data = body.encode() if isinstance(body, str) else body
        else:
            data = json.dumps(body).encode()
        self.send_response(status)
        if data:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)

    def _dispatch(self) -> None:
        self.server_state.handle(self)

    do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _dispatch


def _handler_for(state: FakeCairn) -> type[_Handler]:
    return type("BoundHandler", (_Handler,), {"server_state": state})
