"""The `cairn` command.

    cairn login --url http://127.0.0.1:8000 --username alice
    cairn submit job.yaml --follow
    cairn ls --status running
    cairn logs mnist -f

Errors are one line on stderr ("error (404): Not found.") with a non-zero exit status:
1 for failures, 2 for bad usage, 130 when interrupted. Set CAIRN_DEBUG=1 to see the
traceback of an unexpected error.
"""
from __future__ import annotations

import argparse
import getpass
import json
import os
import shlex
import socket
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cairn import __version__
from cairn import config as cfg
from cairn.client import (
    FINISHED_STATUSES,
    STATUSES,
    WAITING_ON,
    CairnError,
    Client,
)
from cairn.jobspec import DURATION_HELP, JobSpecError, load_job_file, parse_duration
from cairn.sweepspec import load_sweep_file

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

POLL_INTERVAL = 2.0  # seconds between status checks while waiting for a workload to start
FINISH_GRACE_POLLS = 5  # status checks after the log stream ends, waiting for the outcome
STARTED_STATUSES = frozenset({"running", "stopping"}) | FINISHED_STATUSES
LS_DEFAULT_LIMIT = 50

STATUS_STYLES = {
    "queued": "yellow",
    "admitted": "cyan",
    "running": "bold blue",
    "stopping": "magenta",
    "succeeded": "green",
    "failed": "bold red",
    "stopped": "dim",
    "lost": "red",
}


class CliError(Exception):
    """A failure the user can act on; printed as `error: <message>`."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


# -- formatting helpers ------------------------------------------------------------------------


def status_text(status: str | None) -> Text:
    status = status or "-"
    return Text(status, style=STATUS_STYLES.get(status, ""))


def _parse_time(value: Any) -> datetime | None:
    if not value or not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _largest_unit(seconds: int) -> str:
    """90061 -> '1d', 5400 -> '1h', 42 -> '42s': the largest whole unit, for ages and ETAs."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def format_age(value: Any, now: datetime | None = None) -> str:
    moment = _parse_time(value)
    if moment is None:
        return "-"
    return _largest_unit(max(0, int(((now or datetime.now(UTC)) - moment).total_seconds())))


def format_time(value: Any) -> str:
    moment = _parse_time(value)
    if moment is None:
        return "-" if not value else str(value)
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def format_duration(seconds: Any) -> str:
    """7200 -> '2h', 5400 -> '1h30m' (as --max-runtime takes it)."""
    if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < 0:
        return format_number(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size or (unit == "s" and not parts):
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts)


def format_number(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def format_resources(resources: Any) -> str:
    if not isinstance(resources, dict):
        return "-"
    parts = []
    if "gpu" in resources:
        parts.append(f"gpu {format_number(resources['gpu'])}")
    if "cpu" in resources:
        parts.append(f"cpu {format_number(resources['cpu'])}")
    if "memory_mb" in resources:
        parts.append(f"memory {format_number(resources['memory_mb'])} MB")
    elif "memory" in resources:
        parts.append(f"memory {format_number(resources['memory'])}")
    return ", ".join(parts) or "-"


def format_command(command: Any) -> str:
    if isinstance(command, list):
        if len(command) == 3 and command[1] == "-c" and str(command[0]).endswith("sh"):
            return str(command[2])  # a string command the server wrapped in `sh -c`
        return shlex.join(str(part) for part in command)
    return format_number(command)


def compact(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={compact(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "[" + ", ".join(compact(v) for v in value) + "]"
    return format_number(value)


def flatten_errors(errors: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """{"resources": {"gpu": ["Too big."]}} -> ("resources.gpu", "Too big.")."""
    if isinstance(errors, dict):
        for key, value in errors.items():
            yield from flatten_errors(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(errors, list):
        if all(not isinstance(v, (dict, list)) for v in errors):
            if errors:
                yield prefix, " ".join(str(v) for v in errors)
        else:
            for index, value in enumerate(errors):
                yield from flatten_errors(value, f"{prefix}[{index}]")
    elif errors not in (None, ""):
        yield prefix, str(errors)


def add_row(table: Table, *cells: Any) -> None:
    """Cells are shown as they are: a job name or message with [brackets] is not markup."""
    table.add_row(*(c if isinstance(c, Text) else Text(str(c)) for c in cells))


def workload_label(w: dict) -> str:
    name = w.get("name")
    ident = w.get("id")
    kind = w.get("kind") or "workload"
    return f"{kind} {name} (id {ident})" if name else f"{kind} {ident}"


# -- the application ---------------------------------------------------------------------------


class App:
    """One invocation: parsed arguments, settings, consoles."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = _console(stderr=False)
        self.err = _console(stderr=True)
        self.settings = cfg.load()
        self._client: Client | None = None

    # settings

    def client(self) -> Client:
        if self._client is None:
            if not self.settings.token:
                raise CliError("not logged in — run `cairn login`")
            self._client = Client(self.settings.url, self.settings.token)
        return self._client

    def project(self, *preferred: str | None) -> str:
        """--project, else what the caller prefers (a job file's), else config/env, else the
        caller's only project."""
        for candidate in (getattr(self.args, "project", None), *preferred, self.settings.project):
            if candidate:
                return candidate
        projects = self.client().me().get("projects") or []
        if len(projects) == 1:
            return projects[0]["slug"]
        if not projects:
            raise CliError("you are not a member of any project")
        slugs = ", ".join(p.get("slug", "?") for p in projects)
        raise CliError(
            f"no project selected — pass --project, set CAIRN_PROJECT or run "
            f"`cairn use PROJECT` (yours: {slugs})"
        )

    # output

    def print_json(self, data: Any) -> None:
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")

    def info(self, message: str | Text) -> None:
        """A status line for humans, on stderr so stdout stays parseable."""
        self.err.print(message, markup=False, highlight=False)

    def say(self, message: str | Text) -> None:
        self.out.print(message, markup=False, highlight=False)

    def write_raw(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()


def _console(*, stderr: bool) -> Console:
    console = Console(stderr=stderr, soft_wrap=True, highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = 200  # piped or captured: do not squeeze tables into 80 columns
    return console


# -- commands ----------------------------------------------------------------------------------


def cmd_login(app: App) -> int:
    args = app.args
    url = args.url or app.settings.url
    username = args.username
    if not username:
        if args.password_stdin or not sys.stdin.isatty():
            raise CliError("--username is required when the password comes from stdin",
                           EXIT_USAGE)
        username = input("Username: ").strip()
    if not username:
        raise CliError("no username given", EXIT_USAGE)
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
        if not password:
            raise CliError("no password on standard input", EXIT_USAGE)
    else:
        password = getpass.getpass("Password: ")
    token_name = args.token_name or f"cli@{socket.gethostname()}"

    client = Client(url)
    data = client.login(username, password, token_name=token_name)
    user = data.get("user") or {}
    stored = cfg.read_file(app.settings.path)
    changes: dict[str, Any] = {
        "url": client.url,
        "token": data["token"],
        "username": user.get("username") or username,
    }
    if stored.get("url") and stored.get("url") != client.url:
        changes["project"] = None  # a default project belongs to the old server
    path = cfg.update_file(app.settings.path, **changes)
    app.say(f"Logged in to {client.url} as {changes['username']}. Token saved to {path}.")
    if data.get("expires_at"):
        app.info(f"The token expires at {format_time(data['expires_at'])}.")
    if "token" in app.settings.from_env:
        app.info("note: CAIRN_TOKEN is set and takes precedence over the saved token.")
    return EXIT_OK


def cmd_logout(app: App) -> int:
    """Revoke the saved token on the server (best effort) and remove it from the file."""
    stored = cfg.read_file(app.settings.path)
    token = stored.get("token")
    if not token:
        app.say("Not logged in.")
    else:
        revoked = False
        try:
            client = Client(stored.get("url") or app.settings.url, token, retries=0,
                            timeout=(5.0, 10.0))
            revoked = client.revoke_current_token()
        except CairnError as exc:
            if exc.status != 401:  # 401: already expired or revoked, nothing to do
                app.info(f"note: could not revoke the token on the server ({exc}); it stays "
                         "valid until it expires.")
        cfg.update_file(app.settings.path, token=None)
        done = "revoked the token and removed it" if revoked else "removed the token"
        app.say(f"Logged out: {done} from {app.settings.path}.")
    if "token" in app.settings.from_env:
        app.info("note: CAIRN_TOKEN is still set in this environment.")
    return EXIT_OK


def cmd_projects(app: App) -> int:
    projects = app.client().projects()
    if app.args.json:
        app.print_json(list(projects))
        return EXIT_OK
    if not projects:
        app.say("You are not a member of any project.")
        return EXIT_OK
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column("", no_wrap=True)
    table.add_column("SLUG", no_wrap=True, style="bold")
    table.add_column("NAME")
    table.add_column("ROLE", no_wrap=True)
    table.add_column("DESCRIPTION", overflow="ellipsis", max_width=60)
    for p in projects:
        default = "*" if p.get("slug") == app.settings.project else ""
        add_row(table, default, p.get("slug", ""), p.get("name", ""), p.get("role") or "-",
                p.get("description") or "")
    app.out.print(table)
    return EXIT_OK


def cmd_use(app: App) -> int:
    slug = app.args.slug
    projects = app.client().me().get("projects") or []
    slugs = [p.get("slug") for p in projects]
    if slug not in slugs:
        raise CliError(f"you have no project {slug!r} (yours: {', '.join(slugs) or 'none'})")
    cfg.update_file(app.settings.path, project=slug)
    app.say(f"Default project: {slug}")
    if "project" in app.settings.from_env:
        app.info("note: CAIRN_PROJECT is set and takes precedence over the saved project.")
    return EXIT_OK


def cmd_submit(app: App) -> int:
    spec = load_job_file(app.args.file)  # check the file before talking to the server
    if app.args.max_runtime is not None:  # the flag wins over the file
        spec.body["max_runtime_seconds"] = app.args.max_runtime
    client = app.client()
    project = app.project(spec.project)
    # Every submit carries an Idempotency-Key (a new one unless --idempotency-key gives it), so
    # the client's retries never create a second workload.
    w = client.submit(project, spec.body, kind=spec.kind, idempotency_key=app.args.idempotency_key)
    if app.args.json and not app.args.follow:
        app.print_json(w)
        return EXIT_OK
    line = Text(f"Submitted {workload_label(w)} to project {project}: ")
    line.append_text(status_text(w.get("status")))
    app.say(line)
    if app.args.follow:
        return follow(app, client, project, w, replica=None, tail=None)
    return EXIT_OK


def cmd_ls(app: App) -> int:
    client = app.client()
    project = app.project()
    limit = None if app.args.all else app.args.limit
    rows = client.workloads(project, kind=app.args.kind, status=app.args.status, limit=limit)
    if app.args.json:
        app.print_json(list(rows))
        return EXIT_OK
    if not rows:
        app.say(f"No workloads in project {project}"
                + (" match these filters." if app.args.kind or app.args.status else "."))
        return EXIT_OK
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column("ID", no_wrap=True)
    table.add_column("NAME", no_wrap=True, style="bold")
    table.add_column("KIND", no_wrap=True)
    table.add_column("STATUS", no_wrap=True)
    table.add_column("REPLICAS", justify="right", no_wrap=True)
    table.add_column("GPU", justify="right", no_wrap=True)
    table.add_column("PRIORITY", no_wrap=True)
    table.add_column("AGE", justify="right", no_wrap=True)
    table.add_column("REASON", overflow="fold")
    for w in rows:
        resources = w.get("resources") or {}
        add_row(
            table,
            str(w.get("id", "")),
            w.get("name") or "-",
            w.get("kind") or "-",
            status_text(w.get("status")),
            format_number(w.get("replicas")),
            format_number(resources.get("gpu") if isinstance(resources, dict) else None),
            w.get("priority") or "-",
            format_age(w.get("created_at")),
            w.get("pending_reason") or w.get("status_message") or w.get("status_reason") or "",
        )
    app.out.print(table)
    total = rows.total
    if total is not None and total > len(rows):
        app.info(f"Showing {len(rows)} of {total} workloads; use --all to list all of them.")
    return EXIT_OK


def format_eta(value: Any, now: datetime | None = None) -> str:
    """An estimated start: 'in 2h', 'now' once passed, '-' when none can be computed."""
    moment = _parse_time(value)
    if moment is None:
        return "-"
    seconds = int((moment - (now or datetime.now(UTC))).total_seconds())
    return "now" if seconds <= 0 else f"in {_largest_unit(seconds)}"


def _others_reason(entry: dict) -> str:
    """A queue entry shown without its reason: what it waits on, which names no project."""
    if entry.get("mine"):
        return ""
    kind = entry.get("waiting_on")
    return f"(another project's) {WAITING_ON.get(kind, kind)}" if kind else "(another project's)"


def cmd_queue(app: App) -> int:
    client = app.client()
    pool = app.args.pool
    if pool is None:
        names = [p.get("name") for p in client.pools()]
        if len(names) != 1:
            raise CliError("give a pool: " + (", ".join(str(n) for n in names) if names else "there is none"),
                           EXIT_USAGE)
        pool = names[0]
    rows = client.queue(pool, waiting_on=app.args.waiting_on or ())
    if app.args.mine:
        rows = [w for w in rows if w.get("mine")]
    if app.args.json:
        app.print_json(list(rows))
        return EXIT_OK
    if not rows:
        waiting = f" waiting on {' or '.join(WAITING_ON[k] for k in app.args.waiting_on)}" if app.args.waiting_on else ""
        app.say(f"Nothing of yours is queued on pool {pool}{waiting}." if app.args.mine
                else f"Nothing is queued on pool {pool}{waiting}." if waiting else f"Pool {pool} has no queue.")
        return EXIT_OK
    # Compact (narrow padding, short headers): the reason, the column that matters, keeps room
    # on an 80-column terminal.
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1, 0, 0))
    for column in ("POS", "ID", "NAME", "PROJECT", "PRI", "REPL", "GPU", "CPU", "MEM", "WAIT", "START"):
        table.add_column(column, no_wrap=column not in ("NAME", "PROJECT", "START"), overflow="fold",
                         justify="right" if column in ("POS", "REPL", "GPU", "CPU", "MEM") else "left")
    table.add_column("REASON", overflow="fold", min_width=14)
    for w in rows:
        resources = w.get("resources") if isinstance(w.get("resources"), dict) else {}
        add_row(
            table,
            format_number(w.get("position")),
            format_number(w.get("id")),
            Text(w.get("name") or "-", style="bold" if w.get("mine") else "dim"),
            w.get("project") or "-",
            w.get("priority") or "-",
            format_number(w.get("replicas")),
            format_number(resources.get("gpu")),
            format_number(resources.get("cpu")),
            format_mb(resources.get("memory_mb")),
            format_age(w.get("submitted_at")),
            format_eta(w.get("estimated_start")),
            w.get("pending_reason") or _others_reason(w),
        )
    app.out.print(table)
    return EXIT_OK


def format_mb(mb: Any) -> str:
    """Memory in MiB as people read it: 512M, 1.5G, 64G."""
    if not isinstance(mb, int | float):
        return "-"
    if mb < 1024:
        return f"{mb:g}M"
    gib = mb / 1024
    return f"{gib:.0f}G" if gib >= 10 or gib.is_integer() else f"{gib:.1f}G"


def _used_of(used: Any, nominal: Any, fmt) -> str:
    return f"{fmt(used or 0)}/{fmt(nominal or 0)}"


def _milli(value: Any) -> str:
    return format_number((value or 0) / 1000)


def cmd_quotas(app: App) -> int:
    """The project's quota per pool: GPUs, CPU and memory used of the nominal, what queued work asks
    for and waits on, and the GPU-hour budget left."""
    client = app.client()
    project = app.project()
    rows = client.paginate(f"/projects/{quote(project, safe='')}/quotas/")
    if app.args.json:
        app.print_json(list(rows))
        return EXIT_OK
    if not rows:
        app.say(f"Project {project} has no quota in any pool: its work is admitted nowhere.")
        return EXIT_OK
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1, 0, 0))
    for column in ("POOL", "GPU", "CPU", "MEM", "QUEUED"):
        table.add_column(column, no_wrap=True, justify="left" if column == "POOL" else "right")
    table.add_column("WAITING ON", overflow="fold", min_width=16)
    table.add_column("BUDGET LEFT", no_wrap=True, justify="right")
    for q in rows:
        usage = q.get("usage") if isinstance(q.get("usage"), dict) else {}
        waits = [w for w in usage.get("waiting") or [] if isinstance(w, dict)]
        queued = [f"{_milli(usage.get('queued_gpu_milli'))} GPU"] if usage.get("queued_gpu_milli") else []
        if usage.get("queued_cpu_milli"):
            queued.append(f"{_milli(usage.get('queued_cpu_milli'))} CPU")
        if usage.get("queued_memory_mb"):
            queued.append(format_mb(usage.get("queued_memory_mb")))
        waiting = "; ".join(
            f"{w.get('workloads')} on {WAITING_ON.get(w.get('waiting_on'), w.get('waiting_on'))}"
            + (f" ({', '.join(w['resources'])})" if w.get("resources") else "")
            for w in waits)
        left = usage.get("budget_left_gpu_hours")
        add_row(
            table,
            q.get("pool") or "-",
            _used_of(usage.get("allocated_gpu_milli"), q.get("nominal_gpu_milli"), _milli),
            _used_of(usage.get("allocated_cpu_milli"), q.get("nominal_cpu_milli"), _milli),
            _used_of(usage.get("allocated_memory_mb"), q.get("nominal_memory_mb"), format_mb),
            " ".join(queued) or "-",
            waiting or "-",
            "-" if left is None else f"{left:g} GPU-h",
        )
    app.out.print(table)
    app.say("GPU, CPU and MEM: held by running work / the nominal quota.")
    return EXIT_OK


def format_autoscaling(scaling: dict) -> str:
    """'1-5 replicas, 2 requests in flight per replica (windows 60s stable, 6s panic)'; the API's
    defaults where the spec leaves a setting out."""
    low = scaling.get("min_replicas", 1)
    high = scaling.get("max_replicas", low)
    target = scaling.get("target_concurrency", 10)
    stable = scaling.get("stable_window_seconds", 60)
    panic = scaling.get("panic_window_seconds", 6)
    return (f"{low}-{high} replicas, {format_number(target)} requests in flight per replica "
            f"(windows {format_number(stable)}s stable, {format_number(panic)}s panic)")


def cmd_get(app: App) -> int:
    client = app.client()
    project = app.project()
    found = client.resolve(project, app.args.workload)
    w = client.workload(project, found["id"], kind=found["kind"])
    if app.args.json:
        app.print_json(w)
        return EXIT_OK

    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()

    def row(label: str, value: Any) -> None:
        if value not in (None, "", [], {}):
            add_row(grid, label, value if isinstance(value, Text) else format_number(value))

    status = status_text(w.get("status"))
    if w.get("status_reason"):
        status.append(f" ({w['status_reason']})")
    spec = w.get("spec") if isinstance(w.get("spec"), dict) else {}
    row("Name", w.get("name"))
    row("ID", w.get("id"))
    row("Kind", w.get("kind"))
    row("Project", w.get("project") or project)
    row("Status", status)
    row("Message", w.get("status_message"))
    row("Pending", w.get("pending_reason"))
    row("Waiting on", WAITING_ON.get(w.get("waiting_on"), w.get("waiting_on")))
    row("Exit code", w.get("exit_code"))
    row("Pool", w.get("pool"))
    priority = w.get("priority")
    if priority and w.get("preemptible") is not None:
        priority = f"{priority}, {'preemptible' if w['preemptible'] else 'not preemptible'}"
    row("Priority", priority)
    scale = w.get("scale") if isinstance(w.get("scale"), dict) else None
    if w.get("kind") == "deployment" and scale is not None and w.get("status") == "running":
        # Ready of desired (the autoscaler's wish), and what the scheduler admitted when it differs.
        replicas = f"{scale.get('ready')} ready of {scale.get('desired')} desired"
        if scale.get("admitted") != scale.get("desired"):
            replicas += f" ({scale.get('admitted')} admitted)"
        row("Replicas", replicas)
    else:
        row("Replicas", w.get("replicas"))
    if w.get("kind") == "deployment":
        scaling = (scale or {}).get("autoscaling") or spec.get("autoscaling")
        row("Autoscaling", format_autoscaling(scaling) if isinstance(scaling, dict) else "off (a fixed count)")
        row("Gateway", w.get("gateway_url"))
        row("Readiness", spec.get("readiness_path"))
        if spec.get("public") is not None:
            row("Public", "yes: anyone may call it, no credentials" if spec["public"] else "no")
    row("GPU model", w.get("gpu_model"))
    accel = w.get("accelerator")
    if isinstance(accel, dict) and accel.get("type") not in (None, "", "nvidia"):
        row("Accelerator", f"{format_number(accel.get('count'))} x {accel['type']} {accel.get('model') or ''}".rstrip())
    row("Arch", ", ".join(w.get("arch") or []) or None)
    row("Resources", f"{format_resources(w.get('resources'))} per replica"
        if w.get("resources") else None)
    row("Command", format_command(spec.get("command")) if spec.get("command") else None)
    row("Working dir", spec.get("working_dir"))
    row("Image", spec.get("image"))
    endpoint = w.get("endpoint")
    if isinstance(endpoint, str) and endpoint:
        # A notebook's is Cairn's proxy, /nb/<project>/<id>/ (open it in a browser signed in to Cairn).
        row("Endpoint", client.url.rstrip("/") + endpoint if endpoint.startswith("/") else endpoint)
    restarts = w.get("restarts")
    if restarts is not None and w.get("max_restarts") is not None:
        restarts = f"{restarts} of {w['max_restarts']} allowed"
    row("Attempt", w.get("attempt"))
    row("Restarts", restarts)
    if w.get("max_runtime_seconds") is not None:
        row("Run-time limit", format_duration(w["max_runtime_seconds"]))
    row("Created by", w.get("created_by") if not isinstance(w.get("created_by"), dict)
        else w["created_by"].get("username"))
    for key in ("created_at", "admitted_at", "started_at", "finished_at"):
        if w.get(key):
            row(key.split("_")[0].capitalize(),
                f"{format_time(w[key])} ({format_age(w[key])} ago)")
    for index, place in enumerate(w.get("placement") or []):
        row("Placement" if index == 0 else "", compact(place))
    app.out.print(grid)

    conditions = w.get("conditions") or []
    if conditions:
        table = Table(title="Conditions", title_justify="left", box=box.SIMPLE_HEAD,
                      pad_edge=False, show_edge=False)
        for column in ("TYPE", "STATUS", "REASON", "MESSAGE", "TIME"):
            table.add_column(column, no_wrap=column != "MESSAGE")
        for c in conditions:
            c = c if isinstance(c, dict) else {"message": str(c)}
            changed = c.get("time") or c.get("lastTransitionTime") or c.get("last_transition_time")
            add_row(table, c.get("type", ""), c.get("status", ""), c.get("reason") or "",
                    c.get("message") or "", format_time(changed))
        app.out.print(table)
    return EXIT_OK


def cmd_logs(app: App) -> int:
    client = app.client()
    project = app.project()
    w = client.resolve(project, app.args.workload)
    args = app.args
    if args.follow:
        return follow(app, client, project, w, replica=args.replica, tail=args.tail,
                      attempt=args.attempt, report=False)
    for chunk in client.iter_logs(project, w["id"], kind=w["kind"], replica=args.replica,
                                  tail=args.tail, attempt=args.attempt, follow=False):
        app.write_raw(chunk)
    return EXIT_OK


def cmd_stop(app: App) -> int:
    client = app.client()
    project = app.project()
    w = client.resolve(project, app.args.workload)
    result = client.stop(project, w["id"], kind=w["kind"]) or w
    line = Text(f"Stopping {workload_label(w)}: ")
    line.append_text(status_text(result.get("status")))
    app.say(line)
    return EXIT_OK


def cmd_start(app: App) -> int:
    """Start a stopped notebook again: the same workload, its files kept (other kinds: submit anew)."""
    client = app.client()
    project = app.project()
    w = client.resolve(project, app.args.workload)
    if w.get("kind") != "notebook":
        raise CliError(f"{workload_label(w)} is a {w.get('kind')}: only notebooks are started again (their files "
                       f"are kept); run it again as a new workload that links to this one, which keeps its "
                       f"history: cairn rerun {w.get('name')}")
    # POST .../notebooks/<id>/start/ (202): back to the queue.
    result = client._json("POST", client._workload_path(project, w["id"], "notebook", "start/")) or w
    line = Text(f"Starting {workload_label(w)} again (its files are kept): ")
    line.append_text(status_text(result.get("status")))
    app.say(line)
    return EXIT_OK


def cmd_rerun(app: App) -> int:
    """Run an ended workload again: a new workload with the same spec that links to it
    (`resubmitted_from`); the ended one keeps its history (docs/training.md, "Run again")."""
    client = app.client()
    project = app.project()
    w = client.resolve(project, app.args.workload)
    body = {"name": app.args.name} if app.args.name else {}
    result = client._json("POST", client._workload_path(project, w["id"], w["kind"], "resubmit/"), json=body) or {}
    line = Text(f"Running {workload_label(w)} again as {workload_label(result)}: ")
    line.append_text(status_text(result.get("status")))
    app.say(line)
    return EXIT_OK


def cmd_delete(app: App) -> int:
    client = app.client()
    project = app.project()
    w = client.resolve(project, app.args.workload)
    client.delete(project, w["id"], kind=w["kind"])
    app.say(f"Deleted {workload_label(w)}.")
    return EXIT_OK


def cmd_rollout(app: App) -> int:
    client = app.client()
    project = app.project()
    w = client.resolve(project, app.args.workload)
    if w.get("kind") != "deployment":
        raise CliError(f"{workload_label(w)} is a {w.get('kind')}: rollouts are for deployments")
    action = None if app.args.action == "status" else app.args.action
    status = client.rollout(project, w["id"], action)
    if app.args.json:
        app.print_json(status)
        return EXIT_OK
    if action == "promote":
        app.say(f"Promoted: revision {status.get('stable_revision')} is rolling out to every replica.")
    elif action == "rollback":
        app.say(f"Rolled back: revision {status.get('stable_revision')} serves everything.")
    canary = status.get("canary_revision")
    line = f"Revision {status.get('stable_revision')}"
    if canary is not None:
        line += f", canary revision {canary} with {status.get('canary_weight')}% of requests"
    if status.get("surge_wanted"):
        line += f", {status.get('surge')} of {status.get('surge_wanted')} surge replica(s) admitted"
    if w.get("status") != "running":
        # A stopped deployment's replicas are gone: nothing is rolled out, complete or not.
        line += f" — not running ({w.get('status')}): no replica serves, nothing is rolling out"
    else:
        line += " — complete" if status.get("complete") else " — in progress"
    app.say(line)
    if status.get("pending_reason"):
        app.say(status["pending_reason"])
    if w.get("status") != "running":
        return EXIT_OK  # its replicas' last records are history, not a rollout
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for column in ("REPLICA", "REVISION", "READY", "SURGE"):
        table.add_column(column, no_wrap=True)
    for replica in status.get("replicas") or []:
        add_row(table, replica.get("replica"), replica.get("revision") or "",
                "yes" if replica.get("ready") else "no", "yes" if replica.get("surge") else "")
    app.out.print(table)
    return EXIT_OK


def cmd_events(app: App) -> int:
    client = app.client()
    project = app.project()
    w = client.resolve(project, app.args.workload)
    events = client.events(project, w["id"], kind=w["kind"])
    if app.args.json:
        app.print_json(list(events))
        return EXIT_OK
    if not events:
        app.say(f"No events for {workload_label(w)}.")
        return EXIT_OK
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column("TIME", no_wrap=True)
    table.add_column("TYPE", no_wrap=True)
    table.add_column("REASON", no_wrap=True, style="bold")
    table.add_column("STATUS", no_wrap=True)
    table.add_column("MESSAGE", overflow="fold")
    for e in events:
        transition = Text()
        if e.get("from_status"):
            transition.append_text(status_text(e["from_status"]))
            transition.append(" → ")
        if e.get("to_status"):
            transition.append_text(status_text(e["to_status"]))
        event_type = str(e.get("type") or "")
        add_row(table, format_time(e.get("time")),
                Text(event_type, style="yellow" if event_type.lower() == "warning" else ""),
                e.get("reason") or "", transition, e.get("message") or "")
    app.out.print(table)
    return EXIT_OK


def follow(
    app: App,
    client: Client,
    project: str,
    w: dict,
    *,
    replica: int | None,
    tail: int | None,
    attempt: int | None = None,
    report: bool = True,
) -> int:
    """Wait for the workload to start (showing why it waits), stream its logs until it
    finishes, then (with `report`) exit 0 only if it succeeded."""
    ident, kind = w["id"], w["kind"]
    label = w.get("name") or str(ident)
    last: tuple[Any, Any] | None = None
    while w.get("status") not in STARTED_STATUSES:
        reason = w.get("pending_reason") or w.get("status_message")
        if (w.get("status"), reason) != last:
            line = Text(f"{label}: ")
            line.append_text(status_text(w.get("status")))
            if reason:
                line.append(f" — {reason}")
            app.info(line)
            last = (w.get("status"), reason)
        time.sleep(POLL_INTERVAL)
        w = client.workload(project, ident, kind=kind)

    for chunk in client.iter_logs(project, ident, kind=kind, replica=replica, tail=tail,
                                  attempt=attempt, follow=True):
        app.write_raw(chunk)
    if not report:
        return EXIT_OK

    # The stream ends when the workload finishes; its final status may land a moment later.
    for _ in range(FINISH_GRACE_POLLS):
        w = client.workload(project, ident, kind=kind)
        if w.get("status") in FINISHED_STATUSES:
            break
        time.sleep(POLL_INTERVAL)
    status = w.get("status")
    if status not in FINISHED_STATUSES:
        app.info(f"The log stream ended; {label} is {status}.")
        return EXIT_OK
    if status == "succeeded":
        line = Text(f"{label}: ")
        line.append_text(status_text(status))
        app.info(line)
        return EXIT_OK
    details = [f"exit code {w['exit_code']}"] if w.get("exit_code") is not None else []
    details += [w[k] for k in ("status_reason", "status_message") if w.get(k)]
    raise CliError(f"{label} {status}" + (f": {'; '.join(map(str, details))}" if details else ""))


# -- argument parsing --------------------------------------------------------------------------


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def _duration(text: str) -> int:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _at_least_one(text: str) -> int:
    value = _positive_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("expected a number >= 1")
    return value


# -- sweeps -------------------------------------------------------------------------------------


def _objective_text(value: Any) -> str:
    return "-" if value is None else f"{value:.4g}"


def _trial_counts(sweep: dict) -> str:
    counts = sweep.get("trials") or {}
    return " ".join(f"{status} {n}" for status, n in sorted(counts.items())) or "-"


def cmd_sweep_create(app: App) -> int:
    spec = load_sweep_file(app.args.file)
    client = app.client()
    project = app.project(spec.project)
    sweep = client.create_sweep(project, spec.body)
    if app.args.json:
        app.print_json(sweep)
        return EXIT_OK
    app.say(f"Created sweep {sweep.get('name')} (id {sweep.get('id')}) in project {project}: "
            f"{sweep.get('algorithm')}, {sweep.get('max_concurrent')} trial(s) at a time. "
            f"Follow it with `cairn sweep show {sweep.get('name')}`.")
    return EXIT_OK


def cmd_sweep_ls(app: App) -> int:
    client = app.client()
    project = app.project()
    rows = client.sweeps(project)
    if app.args.json:
        app.print_json(list(rows))
        return EXIT_OK
    if not rows:
        app.say(f"No sweeps in project {project}.")
        return EXIT_OK
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for column in ("ID", "NAME", "STATUS", "ALGORITHM", "OBJECTIVE", "BEST", "TRIALS", "AGE"):
        table.add_column(column, no_wrap=column != "TRIALS")
    for sweep in rows:
        objective = sweep.get("objective") or {}
        best = sweep.get("best_trial") or {}
        add_row(table, str(sweep.get("id")), sweep.get("name") or "-", status_text(sweep.get("status")),
                sweep.get("algorithm") or "-", f"{objective.get('metric')} ({objective.get('direction')})",
                _objective_text(best.get("objective")) + (f" (#{best['number']})" if best else ""),
                _trial_counts(sweep), format_age(sweep.get("created_at")))
    app.out.print(table)
    return EXIT_OK


def cmd_sweep_show(app: App) -> int:
    client = app.client()
    project = app.project()
    sweep = client.resolve_sweep(project, app.args.sweep)
    trials = client.sweep_trials(project, sweep["id"])
    if app.args.json:
        app.print_json({**sweep, "trial_list": list(trials)})
        return EXIT_OK
    objective = sweep.get("objective") or {}
    line = Text(f"Sweep {sweep.get('name')} (id {sweep.get('id')}): ")
    line.append_text(status_text(sweep.get("status")))
    if sweep.get("status_message"):
        line.append(f" — {sweep['status_message']}")
    app.say(line)
    app.say(f"{sweep.get('algorithm')}, {objective.get('direction')} {objective.get('metric')}, "
            f"{sweep.get('max_concurrent')} at a time, priority {sweep.get('priority')}; trials: {_trial_counts(sweep)}")
    best = sweep.get("best_trial")
    if best:
        app.say(f"Best: trial {best['number']}, {objective.get('metric')} = {_objective_text(best['objective'])}, "
                f"params {json.dumps(best['params'], sort_keys=True)}")
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for column in ("#", "STATUS", "OBJECTIVE", "LAST", "PARAMS", "WORKLOAD", "NOTE"):
        table.add_column(column, no_wrap=column not in ("PARAMS", "NOTE"), overflow="fold")
    for t in trials:
        last = "-" if t.get("last_step") is None else f"{_objective_text(t.get('last_value'))} @ {t['last_step']}"
        note = (f"pruned at rung {t['pruned_rung']} (step {t['pruned_step']})" if t.get("status") == "pruned"
                else (t.get("message") or "") if t.get("status") == "failed" else "")
        add_row(table, str(t.get("number")), status_text(t.get("status")), _objective_text(t.get("objective")), last,
                json.dumps(t.get("params"), sort_keys=True), (t.get("workload") or {}).get("name", "-"), note)
    app.out.print(table)
    return EXIT_OK


def cmd_sweep_stop(app: App) -> int:
    client = app.client()
    project = app.project()
    sweep = client.resolve_sweep(project, app.args.sweep)
    result = client.stop_sweep(project, sweep["id"])
    line = Text(f"Stopping sweep {sweep.get('name')}: ")
    line.append_text(status_text(result.get("status")))
    line.append(" (its running trials are being stopped)")
    app.say(line)
    return EXIT_OK


def cmd_sweep_rm(app: App) -> int:
    client = app.client()
    project = app.project()
    sweep = client.resolve_sweep(project, app.args.sweep)
    client.delete_sweep(project, sweep["id"])
    app.say(f"Deleted sweep {sweep.get('name')} (id {sweep.get('id')}); its trials' training jobs and runs are kept.")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cairn",
        description="Command-line client for Cairn: submit and watch notebooks, training "
        "jobs and deployments.",
        epilog="Settings: ~/.config/cairn/config.json (or $CAIRN_CONFIG); CAIRN_URL, "
        "CAIRN_TOKEN and CAIRN_PROJECT override it.",
    )
    parser.add_argument("--version", action="version", version=f"cairn {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def project_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("-p", "--project", help="project slug (default: CAIRN_PROJECT, the "
                       "config file, or your only project)")

    def workload_command(name: str, help_text: str, func: Any) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("workload", metavar="NAME_OR_ID", help="workload name or id")
        project_option(p)
        p.set_defaults(func=func)
        return p

    p = sub.add_parser("login", help="log in and save an API token",
                       description="Log in with a username and password; the API token the "
                       "server returns is saved to the config file (mode 0600).")
    p.add_argument("--url", help="server URL (default: CAIRN_URL, the saved URL, or "
                   f"{cfg.DEFAULT_URL})")
    p.add_argument("-u", "--username")
    p.add_argument("--password-stdin", action="store_true",
                   help="read the password from the first line of standard input")
    p.add_argument("--token-name", help="a name for the token (default: cli@HOSTNAME)")
    p.set_defaults(func=cmd_login)

    p = sub.add_parser("logout", help="forget the saved token")
    p.set_defaults(func=cmd_logout)

    p = sub.add_parser("projects", help="list your projects (* marks the default)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_projects)

    p = sub.add_parser("use", help="set the default project")
    p.add_argument("slug", metavar="PROJECT")
    p.set_defaults(func=cmd_use)

    p = sub.add_parser("submit", help="submit a workload from a YAML file",
                       description="Submit a training job, notebook or deployment described "
                       "in a YAML file (`kind:` selects which; `-` reads standard input). "
                       "--project wins over the file's `project:`, which wins over the "
                       "default project.")
    p.add_argument("file", metavar="JOB.yaml")
    project_option(p)
    p.add_argument("-f", "--follow", action="store_true",
                   help="wait for it to start, stream its logs, exit non-zero unless it "
                   "succeeds")
    p.add_argument("--max-runtime", type=_duration, metavar="DURATION",
                   help=f"run-time limit, {DURATION_HELP} (overrides the file's max_runtime); "
                   "a job still running after that long is stopped and fails with DeadlineExceeded")
    p.add_argument("--idempotency-key", metavar="KEY",
                   help="send this Idempotency-Key (default: a new random one): running the same "
                   "command again with the same key returns the first submission instead of a second "
                   "workload (keys are kept for 24 hours per project)")
    p.add_argument("--json", action="store_true", help="print the created workload as JSON")
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("ls", help="list workloads, newest first")
    project_option(p)
    p.add_argument("-k", "--kind", help="only this kind (the server's kinds: training, notebook, deployment, ...)")
    p.add_argument("-s", "--status", choices=STATUSES, action="append",
                   help="only this status (repeat for several)")
    p.add_argument("-a", "--all", action="store_true",
                   help=f"list all matching workloads, not only the newest {LS_DEFAULT_LIMIT}")
    p.add_argument("-n", "--limit", type=_positive_int, default=LS_DEFAULT_LIMIT,
                   help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_ls)

    p = sub.add_parser("queue", help="show a pool's queue in scheduling order, with reasons and estimated starts",
                       description="Show the queued workloads of a resource pool in the order the scheduler "
                                   "will consider them. Other projects' workloads show only their place, "
                                   "priority and size.")
    p.add_argument("pool", nargs="?", help="the resource pool (default: the only one, if there is one)")
    p.add_argument("--mine", action="store_true", help="only workloads of your projects")
    p.add_argument("--waiting-on", action="append", choices=list(WAITING_ON), metavar="KIND",
                   help="only workloads waiting on KIND (repeat for several): " + ", ".join(WAITING_ON))
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_queue)

    p = sub.add_parser("quotas", help="show the project's quotas: GPUs, CPU and memory used, what queued work waits on",
                       description="Show the project's quota in each pool: GPUs, CPU cores and memory held by its "
                                   "running work against the nominal, what its queued work asks for and waits "
                                   "on (and for which resource), and the GPU-hour budget left.")
    project_option(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_quotas)

    p = workload_command("get", "show one workload", cmd_get)
    p.add_argument("--json", action="store_true", help="print JSON")

    p = workload_command("logs", "print (or follow) a workload's logs", cmd_logs)
    p.add_argument("-f", "--follow", action="store_true",
                   help="wait for it to start and stream until it finishes")
    p.add_argument("--tail", type=_at_least_one, metavar="N", help="only the last N lines")
    p.add_argument("-r", "--replica", type=_positive_int, metavar="R",
                   help="replica index (default 0)")
    p.add_argument("--attempt", type=_at_least_one, metavar="N",
                   help="logs of an earlier attempt (default: the current one)")

    p = sub.add_parser("sweep", help="hyper-parameter sweeps: create, ls, show, stop, rm",
                       description="Hyper-parameter sweeps: trials are training jobs with parameters Optuna "
                                   "samples, judged by a metric they log (docs/sweeps.md).")
    sweep_sub = p.add_subparsers(dest="sweep_command", metavar="SWEEP_COMMAND")
    sweep_sub.required = True
    q = sweep_sub.add_parser("create", help="create a sweep from a YAML file (examples/sweep_digits.yaml)")
    q.add_argument("file", metavar="SWEEP.yaml")
    project_option(q)
    q.add_argument("--json", action="store_true", help="print the created sweep as JSON")
    q.set_defaults(func=cmd_sweep_create)
    q = sweep_sub.add_parser("ls", help="list the project's sweeps, newest first")
    project_option(q)
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=cmd_sweep_ls)
    for name, help_text, func in (("show", "show a sweep, its best trial and its trials", cmd_sweep_show),
                                  ("stop", "stop a sweep and its running trials", cmd_sweep_stop),
                                  ("rm", "delete an ended sweep (stop it first); its trials' training jobs "
                                         "and runs are kept", cmd_sweep_rm)):
        q = sweep_sub.add_parser(name, help=help_text, description=help_text)
        q.add_argument("sweep", metavar="NAME_OR_ID", help="sweep name or id")
        project_option(q)
        if name == "show":
            q.add_argument("--json", action="store_true", help="print JSON")
        q.set_defaults(func=func)

    workload_command("stop", "stop a workload", cmd_stop)
    workload_command("start", "start a stopped notebook again (its files are kept)", cmd_start)
    p = workload_command("rerun", "run an ended workload again, as a new workload linked to it", cmd_rerun)
    p.add_argument("--name", help="the new workload's name (default: the next free NAME-2, NAME-3, ...)")
    workload_command("delete", "delete a finished workload", cmd_delete)
    p = workload_command("events", "show a workload's events", cmd_events)
    p.add_argument("--json", action="store_true", help="print JSON")

    from cairn.storage_cli import add_storage_commands  # it imports this module's helpers

    add_storage_commands(sub, project_option)
    p = sub.add_parser("rollout", help="a deployment's rollout: status, promote the canary, roll back",
                       description="status: which revision each replica runs; promote: roll the canary "
                                   "revision out to every replica; rollback: withdraw the canary, or go back "
                                   "to the previous revision.")
    p.add_argument("action", choices=["status", "promote", "rollback"])
    p.add_argument("workload", metavar="NAME_OR_ID", help="deployment name or id")
    project_option(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_rollout)
    return parser


# -- entry point -------------------------------------------------------------------------------


def _print_error(console: Console, message: str, status: int | None = None,
                 details: Iterable[tuple[str, str]] = ()) -> None:
    line = Text("error", style="bold red")
    if status is not None:
        line.append(f" ({status})", style="bold red")
    line.append(f": {message}")
    console.print(line, markup=False, highlight=False)
    for field_name, text in details:
        console.print(f"  {field_name}: {text}" if field_name else f"  {text}",
                      markup=False, highlight=False)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit status (the console script exits with it)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    err = _console(stderr=True)
    try:
        app = App(args)
        return args.func(app)
    except CairnError as exc:
        message = exc.detail
        if exc.status == 401 and args.func is not cmd_login:
            message = f"{message.rstrip('.')} — run `cairn login`"
        _print_error(err, message, exc.status, flatten_errors(exc.errors))
        return EXIT_FAILED
    except CliError as exc:
        _print_error(err, str(exc))
        return exc.code
    except (JobSpecError, cfg.ConfigError) as exc:
        _print_error(err, str(exc))
        return EXIT_FAILED
    except KeyboardInterrupt:
        err.print("interrupted", style="dim", markup=False)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `cairn logs x | head`: the reader left; stop quietly.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_OK
    except Exception as exc:  # a bug: one line unless asked for the traceback
        if os.environ.get("CAIRN_DEBUG"):
            raise
        _print_error(err, f"unexpected {type(exc).__name__}: {exc} "
                     "(set CAIRN_DEBUG=1 for the traceback)")
        return EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
