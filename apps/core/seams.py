"""Every seam in one table: where a lower app lets a higher one plug in.

Apps import downwards only (.importlinter). Where a lower app has to call up, it offers a
registry and the higher app fills it from its `AppConfig.ready()`. This module names each such
registry, its shape, what a filler must look like and who fills it, so a reader finds them all
in one place instead of by grep. It imports nothing: the registries are named by dotted path.

tests/core/test_seams.py holds the table to the code both ways (every declared seam exists and
is filled by the apps named here; every registry a `ready()` fills is declared) and to the table
in docs/architecture.md, which `python manage.py seams --write` regenerates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Shape = Literal["list", "dict", "set", "setter"]


@dataclass(frozen=True)
class Seam:
    path: str  # dotted path of the registry (or, for a setter, of the function that fills it)
    shape: Shape
    signature: str  # what one entry is: a callable's signature, or the value's type
    purpose: str
    filled_by: tuple[str, ...]  # app labels whose ready() fill it; the offering app may add its own

    @property
    def offered_by(self) -> str:
        return self.path.split(".")[1]

    @property
    def module(self) -> str:
        return self.path.rpartition(".")[0]

    @property
    def name(self) -> str:
        return self.path.rpartition(".")[2]


SEAMS: tuple[Seam, ...] = (
    Seam("apps.accounts.selectors.user_projects_readers", "list", "(user) -> list[dict]",
         "the projects of a user in /me/ and at sign-in", ("projects",)),
    Seam("apps.projects.services.project_delete_checks", "list", "(project) -> None, raises Conflict",
         "refuse to delete a project while work is unfinished", ("workloads", "sweeps")),
    Seam("apps.clusters.backends.register_backend", "setter", "BackendSpec",
         "a backend: its name, declared capabilities and hooks (settings.CAIRN_BACKENDS)", ("backends",)),
    Seam("apps.clusters.services.credential_probes", "dict", "backend -> (connection, *, timeout) -> dict",
         "check a cluster's credentials when an admin registers it", ("backends",)),
    Seam("apps.clusters.crypto.encrypted_fields", "list", "(model label, field name)",
         "columns sealed with the secret key, re-encrypted on rotation", ("storage",)),
    Seam("apps.quotas.services.quota_delete_checks", "list", "(quota) -> None, raises Conflict",
         "refuse to delete a quota while work holds it", ("workloads",)),
    Seam("apps.quotas.selectors.workload_usage_readers", "dict",
         "'allocated' | 'queued' -> (project ids) -> rows",
         "what workloads hold and queue, for quota_usage", ("workloads",)),
    Seam("apps.quotas.selectors.wait_kind_labels", "dict", "wait kind -> words",
         "the words for a wait in the quota admin", ("scheduling",)),
    Seam("apps.storage.services.volume_delete_checks", "list", "(volume) -> None, raises Conflict",
         "refuse to delete a volume an unfinished workload mounts", ("workloads",)),
    Seam("apps.storage.services.dataset_delete_checks", "list", "(dataset) -> None, raises Conflict",
         "refuse to delete a dataset an unfinished workload mounts", ("workloads",)),
    Seam("apps.storage.services.model_delete_checks", "list", "(model) -> None, raises Conflict",
         "refuse to delete a model an unfinished deployment serves", ("workloads",)),
    Seam("apps.workloads.kinds.register_kind", "setter", "KindSpec",
         "a workload kind and what the layers above need to know of it",
         ("training", "notebooks", "deployments")),
    Seam("apps.workloads.services.attempt_ended_handlers", "list", "(*, workload, workload_status) -> int",
         "an attempt ended (inside its transition)", ("tracking",)),
    Seam("apps.workloads.lifecycle.kept_stop_reasons", "set", "reason",
         "stop reasons a STOPPED workload keeps instead of 'Stopped'", ("sweeps",)),
    Seam("apps.workloads.logs.log_access", "dict", "'read' | 'reader' -> log functions",
         "replica logs for the API", ("backends",)),
    Seam("apps.workloads.api.serializers.node_fit_refusal", "dict", "'largest_node' -> (*, pool_name, nodes, ...) -> str | None",
         "the policy's words for a replica no node of the pool can hold", ("scheduling",)),
    Seam("apps.notebooks.access.upstream_resolvers", "dict", "backend -> (workload, token) -> Upstream | None",
         "how to reach a notebook on a backend other than its runtime url", ("backends",)),
    Seam("apps.notebooks.services.gpu_utilisation_readers", "list",
         "(workload ids, since) -> {id: utilisation}", "a notebook's GPU utilisation, for the idle culler",
         ("telemetry",)),
    Seam("apps.deployments.metrics.register_sink", "setter", "(samples) -> None",
         "where the gateway's flushed serving samples are stored", ("telemetry",)),
    Seam("apps.deployments.metrics.register_window_reader", "setter", "(workload ids, since) -> {id: samples}",
         "the stored concurrency samples the autoscaler reads", ("telemetry",)),
    Seam("apps.backends.launch_env.attempt_env_providers", "list", "(*, workload, attempt) -> dict[str, str]",
         "environment for an attempt's replicas", ("tracking", "sweeps", "backends")),
    Seam("apps.core.live.register_topic", "setter", "(label, pattern, handler)",
         "live socket topics, each served by the app that owns its data",
         ("workloads", "backends", "tracking", "telemetry", "sweeps")),
)


def seam_named(path: str) -> Seam:
    for seam in SEAMS:
        if seam.path == path:
            return seam
    raise LookupError(f"No seam is declared at {path} (apps/core/seams.py).")


DOC_START = "<!-- seams:start (generated by `python manage.py seams --write`) -->"
DOC_END = "<!-- seams:end -->"


def seams_markdown() -> str:
    """The table docs/architecture.md carries between DOC_START and DOC_END."""
    rows = ["| Offered by (lower) | Seam | Shape: one entry | Filled by (higher), in `ready()` |",
            "|---|---|---|---|"]
    for seam in SEAMS:
        rows.append(f"| `{seam.module.removeprefix('apps.')}` | `{seam.name}`: {seam.purpose} | "
                    f"{seam.shape}: `{seam.signature}` | {', '.join(seam.filled_by)} |")
    return "\n".join(rows)
