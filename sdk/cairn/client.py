"""HTTP client for the Cairn REST API (`/api/v1`).

    from cairn import Client
    client = Client("http://127.0.0.1:8000", token="cairn_...")
    job = client.submit("vision", {"name": "mnist", "command": "python train.py"})
    for chunk in client.iter_logs("vision", job["id"], kind="training"):
        print(chunk, end="")

Every failure is a `CairnError` carrying the HTTP `status` (None when no answer came back)
and the server's `detail`. Idempotent requests (GET, HEAD, OPTIONS, PUT, DELETE) are retried
with backoff on connection errors and 5xx answers; POSTs (login, submit, stop) never are, so
a submit is never sent twice.
"""
from __future__ import annotations

import codecs
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import requests

from cairn import __version__

STATUSES: tuple[str, ...] = (
    "queued", "admitted", "running", "stopping", "succeeded", "failed", "stopped", "lost",
)
FINISHED_STATUSES = frozenset({"succeeded", "failed", "stopped", "lost"})
# What a queued workload waits on (the API's waiting_on), with a short label for tables.
WAITING_ON: dict[str, str] = {
    "capacity": "capacity", "reserved": "reserved", "preempting": "preempting",
    "quota_lent": "nominal lent out", "quota_lendable": "nothing to borrow", "quota_limit": "quota limit",
    "quota_none": "no quota", "budget": "budget", "constraint": "GPU model", "never_fits": "never fits",
    "locality": "data locality",
}

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
RETRY_STATUSES = frozenset({500, 502, 503, 504})
DEFAULT_TIMEOUT = (5.0, 30.0)  # (connect, read) seconds
JSON = "application/json"
TOKEN_PREFIX = "cairn_"


class CairnError(Exception):
    """A request to Cairn failed.

    status: the HTTP status code, or None if the failure happened on this side (no answer,
            bad input, a name that matches nothing).
    detail: the server's one-line message (`{"detail": ...}`), or ours.
    errors: the server's field errors for validation failures (`{"errors": {...}}`), if any.
    """

    def __init__(
        self,
        detail: str,
        *,
        status: int | None = None,
        errors: Any = None,
        response: requests.Response | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status
        self.errors = errors
        self.response = response

    def __str__(self) -> str:
        return self.detail if self.status is None else f"{self.detail} (HTTP {self.status})"


class ValidationFailed(CairnError):
    """400: the server rejected the input; `errors` says which fields."""


class Unauthorized(CairnError):
    """401: no token, or the token is wrong, revoked or expired."""


class Forbidden(CairnError):
    """403: the caller's role in the project is too low for this action."""


class NotFound(CairnError):
    """404 (the object does not exist or is not yours), or a name that matches nothing."""


class Conflict(CairnError):
    """409: the action does not fit the object's state (e.g. deleting a running job)."""


class CairnConnectionError(CairnError):
    """No answer from the server: refused, unreachable, timed out, or cut mid-stream."""


_ERRORS_BY_STATUS: dict[int, type[CairnError]] = {
    400: ValidationFailed,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
}


def normalize_url(url: str) -> str:
    """'localhost:8000/' -> 'http://localhost:8000'; a pasted '.../api/v1' is dropped too."""
    url = (url or "").strip()
    if not url:
        raise CairnError("no server URL given")
    if "://" not in url:
        url = "http://" + url
    url = url.rstrip("/")
    if url.endswith("/api/v1"):
        url = url[: -len("/api/v1")]
    return url


def token_prefix(token: str) -> str | None:
    """'cairn_<prefix>_<secret>' -> '<prefix>' (the part the server looks tokens up by)."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    prefix, _, secret = token[len(TOKEN_PREFIX):].partition("_")
    return prefix if prefix and secret else None


def error_from_response(response: requests.Response) -> CairnError:
    """The CairnError for an error answer, keeping the server's `detail` and `errors`."""
    status = response.status_code
    detail: Any = None
    errors: Any = None
    try:
        data = response.json()
    except ValueError:
        data = None
    if isinstance(data, dict):
        detail = data.get("detail")
        errors = data.get("errors")
        if detail is None and errors is None and data:
            # A bare DRF validation answer: {"field": ["message"]}.
            errors = data
            detail = "Invalid input."
    elif isinstance(data, list) and data:
        detail = "; ".join(str(item) for item in data)
    if not detail:
        text = (response.text or "").strip()
        looks_like_html = text.lstrip().startswith("<")
        if text and not looks_like_html and len(text) <= 200 and "\n" not in text:
            detail = text
        else:
            detail = response.reason or f"HTTP {status}"
    cls = _ERRORS_BY_STATUS.get(status, CairnError)
    return cls(str(detail), status=status, errors=errors, response=response)


def _describe_connection_error(exc: requests.RequestException, url: str) -> str:
    text = str(exc)
    lowered = text.lower()
    if isinstance(exc, requests.Timeout):
        return f"timed out talking to {url}"
    if "refused" in lowered:
        return f"cannot connect to {url}: connection refused (is the Cairn server running?)"
    if any(s in lowered for s in ("name or service not known", "nodename nor servname",
                                  "getaddrinfo failed", "failed to resolve",
                                  "temporary failure in name resolution")):
        return f"cannot connect to {url}: unknown host"
    if isinstance(exc, requests.exceptions.SSLError):
        return f"cannot connect to {url}: TLS error"
    return f"cannot connect to {url}: {type(exc).__name__}"


class Listing(list):
    """A list of results that also remembers the server's total `count`."""

    total: int | None = None


class Client:
    """A Cairn API client for one server and one token.

    url:      the server's base URL, e.g. "http://127.0.0.1:8000" (no /api/v1).
    token:    an API token "cairn_<prefix>_<secret>"; None for login only.
    timeout:  seconds, or a (connect, read) pair, for each request. Following logs waits
              without a read timeout, since a quiet job is not a dead server.
    retries:  extra tries for idempotent requests on connection errors and 5xx answers.
    backoff:  seconds before the first retry; doubled each time.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float | tuple[float, float] = DEFAULT_TIMEOUT,
        retries: int = 2,
        backoff: float = 0.25,
        session: requests.Session | None = None,
    ) -> None:
        self.url = normalize_url(url)
        self.api_url = self.url + "/api/v1"
        self.token = token
        self.timeout = timeout if isinstance(timeout, tuple) else (float(timeout), float(timeout))
        self.retries = max(0, int(retries))
        self.backoff = max(0.0, float(backoff))
        self.session = session or requests.Session()
        self._kind_routes: dict[str, str] | None = None

    def __repr__(self) -> str:
        return f"Client(url={self.url!r})"

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- transport ---------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        stream: bool = False,
        timeout: tuple[float, float | None] | None = None,
        accept: str = JSON,
        authenticate: bool = True,
        idempotency_key: str | None = None,
    ) -> requests.Response:
        """Send one request (retried if idempotent) and return the 2xx response.

        `path` is relative to /api/v1 ("/me/") or an absolute URL (a `next` page link).
        `idempotency_key`: sent as the `Idempotency-Key` header, which makes a create safe to
        retry (the server answers a retry with the first result), so it is retried like a GET.
        Raises the matching CairnError for any error answer or transport failure.
        """
        method = method.upper()
        url = path if path.startswith(("http://", "https://")) else self.api_url + path
        headers = {"Accept": accept, "User-Agent": f"cairn-sdk/{__version__}"}
        if authenticate and self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        if params:
            params = {k: v for k, v in params.items() if v is not None}
        attempts = 1 + (self.retries if method in IDEMPOTENT_METHODS or idempotency_key is not None else 0)
        for attempt in range(attempts):
            last_try = attempt == attempts - 1
            try:
                response = self.session.request(
                    method,
                    url,
                    params=params,
                    json=json,
                    headers=headers,
                    timeout=timeout or self.timeout,
                    stream=stream,
                )
            except (requests.exceptions.InvalidURL, requests.exceptions.MissingSchema,
                    requests.exceptions.InvalidSchema) as exc:
                raise CairnError(f"invalid server URL {self.url!r}: {exc}") from None
            except requests.RequestException as exc:
                if last_try:
                    raise CairnConnectionError(
                        _describe_connection_error(exc, self.url)
                    ) from None
                self._pause(attempt)
                continue
            if response.status_code in RETRY_STATUSES and not last_try:
                response.close()
                self._pause(attempt)
                continue
            if response.status_code >= 400:
                raise error_from_response(response)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _pause(self, attempt: int) -> None:
        if self.backoff:
            time.sleep(self.backoff * (2**attempt))

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.request(method, path, **kwargs)
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise CairnError(
                f"the server answered {method} {path} with something that is not JSON",
                status=response.status_code,
                response=response,
            ) from None

    def get(self, path: str, **params: Any) -> Any:
        return self._json("GET", path, params=params)

    def paginate(
        self, path: str, params: Mapping[str, Any] | None = None, *, limit: int | None = None
    ) -> Listing:
        """All results of a paginated list endpoint (following `next`), up to `limit`."""
        results = Listing()
        data = self._json("GET", path, params=params)
        while True:
            if isinstance(data, list):  # an unpaginated endpoint
                results.extend(data)
                results.total = len(data)
                break
            if not isinstance(data, dict) or "results" not in data:
                raise CairnError(f"unexpected answer from GET {path}: not a list")
            if results.total is None:
                results.total = data.get("count")
            results.extend(data["results"])
            next_url = data.get("next")
            if not next_url or (limit is not None and len(results) >= limit):
                break
            data = self._json("GET", next_url)
        if limit is not None:
            del results[limit:]
        return results

    # -- accounts and projects ---------------------------------------------------------------

    def login(self, username: str, password: str, *, token_name: str | None = None) -> dict:
        """Exchange a username and password for an API token; the client keeps using it.

        Returns {"token", "expires_at", "user": {"username", ...}}.
        """
        body: dict[str, Any] = {"username": username, "password": password}
        if token_name:
            body["token_name"] = token_name
        data = self._json("POST", "/auth/login/", json=body, authenticate=False)
        if not isinstance(data, dict) or not data.get("token"):
            raise CairnError("the server's login answer has no token")
        self.token = data["token"]
        return data

    def me(self) -> dict:
        """{"id", "username", "email", "is_staff", "projects": [{"slug", "name", "role"}]}."""
        return self._json("GET", "/me/")

    def projects(self) -> list[dict]:
        return self.paginate("/projects/")

    def pools(self) -> Listing:
        """Resource pools: [{"id","name","cluster","accelerator_models",...}]."""
        return self.paginate("/pools/")

    def queue(self, pool: str, *, waiting_on: Sequence[str] = (), limit: int | None = None) -> Listing:
        """The queued workloads of a pool in scheduling order: [{"position","priority","replicas",
        "resources","waiting_on","estimated_start","mine",...}], only those waiting on one of
        `waiting_on` (WAITING_ON) if given. Workloads of projects you are not a member of show only
        their place, priority, size and what they wait on (their id, name, project and reason are None)."""
        params = {"waiting_on": list(waiting_on)} if waiting_on else None
        return self.paginate(f"/pools/{quote(str(pool), safe='')}/queue/", params, limit=limit)

    def tokens(self) -> list[dict]:
        """Your API tokens (never their secrets): [{"id","name","prefix","active",...}]."""
        return self.paginate("/tokens/")

    def revoke_token(self, token_id: Any) -> None:
        self._json("DELETE", f"/tokens/{quote(str(token_id), safe='')}/")

    def revoke_current_token(self) -> bool:
        """Revoke the token this client uses; False if it is not in the caller's list."""
        prefix = token_prefix(self.token or "")
        for token in self.tokens():
            if prefix and token.get("prefix") == prefix:
                self.revoke_token(token["id"])
                return True
        return False

    # -- workloads ---------------------------------------------------------------------------

    @staticmethod
    def _project_path(project: str) -> str:
        if not project:
            raise CairnError("no project given")
        return f"/projects/{quote(str(project), safe='')}"

    def kinds(self) -> dict[str, str]:
        """The workload kinds the server runs, kind -> its API collection (GET /api/v1/kinds/,
        asked once per client): the SDK keeps no list of its own."""
        if self._kind_routes is None:
            self._kind_routes = {row["kind"]: row["route"] for row in self._json("GET", "/kinds/")}
        return self._kind_routes

    def kind_route(self, kind: str) -> str:
        routes = self.kinds()
        if kind not in routes:
            raise CairnError(f"unknown kind {kind!r} (this server runs: {', '.join(routes)})")
        return routes[kind]

    def _workload_path(self, project: str, workload_id: Any, kind: str | None, suffix: str = "") -> str:
        """A workload's own route; with no kind, the kind-independent /workloads/ one."""
        return (
            f"{self._project_path(project)}/{self.kind_route(kind) if kind else 'workloads'}/"
            f"{quote(str(workload_id), safe='')}/{suffix}"
        )

    def submit(
        self, project: str, spec: Mapping[str, Any], *, kind: str = "training", idempotency_key: str | None = None,
    ) -> dict:
        """Create a workload of `kind` from `spec` (the POST body); returns the workload.

        Sent with an `Idempotency-Key` (a new random one unless given), so the client's retries
        after a dropped connection or a 5xx never create a second workload; pass your own key to
        make a retry of your own (another process, a later run) safe too."""
        path = f"{self._project_path(project)}/{self.kind_route(kind)}/"
        return self._json("POST", path, json=dict(spec), idempotency_key=idempotency_key or uuid.uuid4().hex)

    def workloads(
        self,
        project: str,
        *,
        kind: str | None = None,
        status: str | Sequence[str] | None = None,
        name: str | None = None,
        ordering: str | None = "-created_at",
        limit: int | None = None,
        page_size: int | None = None,
    ) -> Listing:
        """Workloads of all kinds in a project, newest first; `.total` is the server's count.

        `status` may be one status or several (any of them matches).
        """
        if isinstance(status, str):
            status = [status]
        if kind is not None:
            self.kind_route(kind)
        params = {
            "kind": kind,
            "status": list(status) if status else None,
            "name": name,
            "ordering": ordering,
            "page_size": page_size or (min(limit, 100) if limit else None),
        }
        return self.paginate(f"{self._project_path(project)}/workloads/", params, limit=limit)

    def workload(self, project: str, workload_id: Any, *, kind: str | None = None) -> dict:
        """One workload, as its kind's route shows it (which may add fields, such as a
        deployment's gateway_url). Without `kind`, the all-kinds route tells the kind first."""
        try:
            if kind is None:
                kind = self._json("GET", self._workload_path(project, workload_id, None))["kind"]
            return self._json("GET", self._workload_path(project, workload_id, kind))
        except NotFound:
            raise NotFound(f"no workload with id {workload_id!r} in project {project!r}") from None

    def resolve(self, project: str, name_or_id: Any) -> dict:
        """The workload whose name (or else id) is `name_or_id`, with its `id` and `kind`.

        Names are looked up with the list endpoint's ?name= filter and must match exactly
        one workload; a number that names nothing is then tried as an id.
        """
        ref = str(name_or_id).strip()
        if not ref:
            raise CairnError("no workload name or id given")
        matches = [w for w in self.workloads(project, name=ref) if str(w.get("name")) == ref]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            ids = ", ".join(f"{w.get('id')} ({w.get('kind')}, {w.get('status')})" for w in matches)
            raise CairnError(
                f"{len(matches)} workloads are named {ref!r} in project {project!r}: {ids}; "
                "use an id"
            )
        if ref.isdigit():
            try:
                return self.workload(project, ref)
            except NotFound:
                pass
        raise NotFound(f"no workload named {ref!r}"
                       + (" or with that id" if ref.isdigit() else "")
                       + f" in project {project!r}")

    # sweeps

    def create_sweep(self, project: str, body: Mapping[str, Any]) -> dict:
        """Create a hyper-parameter sweep (the body of POST /sweeps/); returns it."""
        return self._json("POST", f"{self._project_path(project)}/sweeps/", json=dict(body))

    def sweeps(self, project: str, *, limit: int | None = None) -> Listing:
        return self.paginate(f"{self._project_path(project)}/sweeps/", {"ordering": "-created_at"}, limit=limit)

    def sweep(self, project: str, sweep_id: Any) -> dict:
        return self._json("GET", f"{self._project_path(project)}/sweeps/{quote(str(sweep_id), safe='')}/")

    def sweep_trials(self, project: str, sweep_id: Any) -> Listing:
        return self.paginate(f"{self._project_path(project)}/sweeps/{quote(str(sweep_id), safe='')}/trials/", {})

    def sweep_importance(self, project: str, sweep_id: Any) -> dict:
        return self._json("GET", f"{self._project_path(project)}/sweeps/{quote(str(sweep_id), safe='')}/importance/")

    def stop_sweep(self, project: str, sweep_id: Any) -> dict:
        return self._json("POST", f"{self._project_path(project)}/sweeps/{quote(str(sweep_id), safe='')}/stop/")

    def delete_sweep(self, project: str, sweep_id: Any) -> None:
        """Delete an ended sweep (its trials' jobs and runs are kept); 409 while it runs."""
        self._json("DELETE", f"{self._project_path(project)}/sweeps/{quote(str(sweep_id), safe='')}/")

    def resolve_sweep(self, project: str, name_or_id: Any) -> dict:
        """The sweep named `name_or_id` (or else with that id)."""
        ref = str(name_or_id).strip()
        for sweep in self.sweeps(project):
            if str(sweep.get("name")) == ref:
                return sweep
        if ref.isdigit():
            try:
                return self.sweep(project, ref)
            except NotFound:
                pass
        raise NotFound(f"no sweep named {ref!r}" + (" or with that id" if ref.isdigit() else "")
                       + f" in project {project!r}")

    def stop(self, project: str, workload_id: Any, *, kind: str) -> dict:
        """Ask a workload to stop (202); returns it, usually in status `stopping`."""
        return self._json("POST", self._workload_path(project, workload_id, kind, "stop/"))

    def delete(self, project: str, workload_id: Any, *, kind: str) -> None:
        """Delete a finished workload (409 Conflict while it is not finished)."""
        self._json("DELETE", self._workload_path(project, workload_id, kind))

    def rollout(self, project: str, workload_id: Any, action: str | None = None) -> dict:
        """A deployment's rollout: which revision each replica runs (`action` None), or
        `promote` the canary / `rollback` (POST)."""
        if action is None:
            return self._json("GET", self._workload_path(project, workload_id, "deployment", "rollout/"))
        if action not in ("promote", "rollback"):
            raise CairnError(f"unknown rollout action {action!r}")
        return self._json("POST", self._workload_path(project, workload_id, "deployment", f"rollout/{action}/"))

    def revisions(self, project: str, workload_id: Any) -> list[dict]:
        """A deployment's revisions, newest first."""
        return self._json("GET", self._workload_path(project, workload_id, "deployment", "revisions/"))

    def events(self, project: str, workload_id: Any, *, kind: str) -> list[dict]:
        """The workload's audit trail: [{"id","time","type","reason","message",...}]."""
        return self.paginate(self._workload_path(project, workload_id, kind, "events/"))

    def logs(
        self,
        project: str,
        workload_id: Any,
        *,
        kind: str,
        replica: int | None = None,
        tail: int | None = None,
        attempt: int | None = None,
    ) -> str:
        """The logs of one replica so far, as text."""
        return "".join(
            self.iter_logs(project, workload_id, kind=kind, replica=replica, tail=tail,
                           attempt=attempt, follow=False)
        )

    def iter_logs(
        self,
        project: str,
        workload_id: Any,
        *,
        kind: str,
        replica: int | None = None,
        tail: int | None = None,
        attempt: int | None = None,
        follow: bool = True,
    ) -> Iterator[str]:
        """Yield log text as it arrives; with `follow`, until the workload finishes."""
        params = {"replica": replica, "tail": tail, "attempt": attempt,
                  "follow": 1 if follow else None}
        timeout = (self.timeout[0], None) if follow else self.timeout
        response = self.request(
            "GET",
            self._workload_path(project, workload_id, kind, "logs/"),
            params=params,
            stream=True,
            timeout=timeout,
            accept="text/plain, */*",
        )
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        with response:
            try:
                for chunk in _iter_raw(response):
                    text = decoder.decode(chunk)
                    if text:
                        yield text
            except requests.RequestException as exc:
                raise CairnConnectionError(
                    f"lost the connection to {self.url} while reading logs "
                    f"({type(exc).__name__})"
                ) from None
            rest = decoder.decode(b"", final=True)
            if rest:
                yield rest


def _iter_raw(response: requests.Response) -> Iterator[bytes]:
    """Bytes as the server sends them, whether the body is chunked or close-delimited."""
    raw = response.raw
    if getattr(raw, "chunked", False) or not hasattr(raw, "read1"):
        # Chunked: each chunk as it arrives. (Old urllib3 without read1 falls back here too.)
        yield from response.iter_content(chunk_size=None)
        return
    while True:
        data = raw.read1(65536, decode_content=True)
        if not data:
            return
        yield data
