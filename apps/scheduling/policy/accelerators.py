"""Accelerator types and CPU architectures, folded into the key the policy already matches on.

The policy places GPU work by a node's `gpu_model` and a workload's allowed models
(`PendingWorkload.gpu_model`, "|"-separated); fragmentation, gangs, topology, the task mix and the
pending reasons all work per model key. So a mixed pool needs no special case inside the policy:
`fold(snapshot, nodes, asks)` rewrites the keys before `schedule()`.

- In a pool whose nodes are all NVIDIA (or have no accelerator) on at most one known architecture,
  keys stay the plain model names, and NVIDIA work keeps today's decisions byte for byte. Work
  asking for another type, or for an architecture the pool does not have, gets a key no node has:
  it waits with a constraint reason.
- In a mixed pool each node's key is its type, model and architecture ("ascend/910B3/arm64"), and
  each workload's is the set of keys of the nodes it may run on: its own type (and model, when it
  names one), on one of its architectures. A node of unknown architecture ("") accepts any. Work
  asking for no accelerator may run on any node of its architectures, as before.

`explain(decisions, snapshot, asks)` then says what is missing in the terms of the workload
("capacity: waiting for 8 Ascend 910B on one node; ...") for work that asked for a non-NVIDIA type
or an architecture, or whose pool is mixed; other reasons are left as the policy wrote them.
The package imports this module only from `__init__`; it builds on `snapshot` alone.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .snapshot import GPU, Admit, Decision, NodeState, PendingWorkload, Snapshot, Wait, WaitKind

NONE = "none"
NVIDIA = "nvidia"
VENDOR_LABELS = {"nvidia": ("NVIDIA", "GPU"), "amd": ("AMD", "GPU"), "ascend": ("Ascend", "NPU")}


@dataclass(frozen=True)
class Accel:
    """Of a node: its accelerator type, model and architecture ("" unknown). Of a workload: the
    type it asks for, its allowed models and architectures ("|"-separated; "" any)."""

    type: str = NONE
    model: str = ""
    arch: str = ""

    def models(self) -> frozenset[str]:
        return frozenset(m for m in self.model.split("|") if m)

    def arches(self) -> frozenset[str]:
        return frozenset(a for a in self.arch.split("|") if a)


def ask_of(w: PendingWorkload, accelerator_type: str = "", arch: str = "") -> Accel:
    """What a workload asks for; an empty type means NVIDIA when it asks for GPUs (the short form)."""
    kind = accelerator_type or (NVIDIA if w.per_replica.gpu_milli else NONE)
    return Accel(type=kind if w.per_replica.gpu_milli else NONE, model=w.gpu_model, arch=arch)


def node_key(a: Accel) -> str:
    return f"{a.type}/{a.model}/{a.arch}"


def eligible(node: Accel, ask: Accel, gpu_milli: int) -> bool:
    """Whether work asking `ask` (with `gpu_milli` per replica) may run on a node of `node`."""
    arches = ask.arches()
    if arches and node.arch and node.arch not in arches:
        return False
    if not gpu_milli:
        return True
    models = ask.models()
    return node.type == ask.type and (not models or node.model in models)


def _mixed(items: list[Accel]) -> bool:
    return (any(a.type not in (NVIDIA, NONE) for a in items)
            or len({a.arch for a in items if a.arch}) > 1)


def mixed_pools(snapshot: Snapshot, nodes: dict[tuple[str, str], Accel]) -> set[str]:
    by_pool: dict[str, list[Accel]] = {}
    for n in snapshot.nodes:
        by_pool.setdefault(n.pool, []).append(nodes.get((n.pool, n.name), Accel()))
    return {p for p, items in by_pool.items() if _mixed(items)}


def describe(ask: Accel, *, count: float | None = None) -> str:
    """For people: "Ascend 910B", "8 Ascend NPUs", "NVIDIA A100 or H100 on arm64", "arm64 nodes"."""
    arches = " or ".join(sorted(ask.arches()))
    if ask.type == NONE:
        return f"{arches} nodes" if arches else "nodes"
    vendor, device = VENDOR_LABELS.get(ask.type, (ask.type, "device"))
    models = sorted(ask.models())
    what = f"{vendor} {' or '.join(models)}" if models else f"{vendor} {device}s"
    if count is not None:
        what = f"{count:g} {what}"
    return what + (f" on {arches}" if arches else "")


def fold(snapshot: Snapshot, nodes: dict[tuple[str, str], Accel], asks: dict[int, Accel]) -> Snapshot:
    """The snapshot with type- and architecture-qualified model keys (see the module docstring).

    `nodes`: (pool, node name) -> the node's Accel (missing: no accelerator, unknown arch).
    `asks`: workload id -> what it asks for (missing: `ask_of(w)`, the NVIDIA short form)."""
    mixed = mixed_pools(snapshot, nodes)
    by_pool: dict[str, list[tuple[NodeState, Accel]]] = {}
    for n in snapshot.nodes:
        by_pool.setdefault(n.pool, []).append((n, nodes.get((n.pool, n.name), Accel())))
    out_nodes = [replace(n, gpu_model=node_key(a)) if n.pool in mixed else n
                 for n, a in (pair for items in by_pool.values() for pair in items)]
    pending = []
    keys: dict[tuple, str] = {}  # the key depends on the pool, the ask, whether it asks for GPUs and its models
    for w in snapshot.pending:
        ask = asks.get(w.id) or ask_of(w)
        memo = (w.pool, ask, bool(w.per_replica.gpu_milli), w.gpu_model)
        key = keys.get(memo)
        if key is None:
            key = keys[memo] = _workload_key(w, ask, by_pool.get(w.pool, []), w.pool in mixed)
        pending.append(w if key == w.gpu_model else replace(w, gpu_model=key))
    return replace(snapshot, nodes=out_nodes, pending=pending)


def _workload_key(w: PendingWorkload, ask: Accel, items: list[tuple[NodeState, Accel]], mixed: bool) -> str:
    g = w.per_replica.gpu_milli
    unmatched = "!" + describe(ask)  # no node's key starts with "!"
    if not mixed:
        pool_arches = {a.arch for _, a in items if a.arch}
        if g and ask.type not in (NVIDIA, NONE):
            return unmatched
        if ask.arches() and pool_arches and not pool_arches & ask.arches():
            return unmatched
        return w.gpu_model
    allowed = {node_key(a) for _, a in items if eligible(a, ask, g)}
    if not allowed:
        return unmatched
    if g:
        devices = {node_key(a) for n, a in items if n.allocatable.gpu_milli >= GPU}
        if devices and devices <= allowed:
            return ""  # every node with devices will do: no constraint (as for NVIDIA-only pools)
    elif allowed == {node_key(a) for _, a in items}:
        return ""
    return "|".join(sorted(allowed))


def explain(decisions: list[Decision], snapshot: Snapshot, nodes: dict[tuple[str, str], Accel],
            asks: dict[int, Accel]) -> list[Decision]:
    """Waits on capacity or a constraint, reworded to name the type and architecture missing, for
    work that asked for a non-NVIDIA type or an architecture, or whose pool is mixed."""
    mixed = mixed_pools(snapshot, nodes)
    pending = {w.id: w for w in snapshot.pending}
    out: list[Decision] = []
    for d in decisions:
        w = pending.get(d.workload_id) if isinstance(d, Wait) else None
        if w is None or d.kind not in (WaitKind.CAPACITY, WaitKind.CONSTRAINT):
            out.append(d)
            continue
        ask = asks.get(w.id) or ask_of(w)
        if w.pool not in mixed and ask.type in (NVIDIA, NONE) and not ask.arches():
            out.append(d)
            continue
        out.append(replace(d, reason=_reason(d, w, ask)))
    return out


def _reason(d: Wait, w: PendingWorkload, ask: Accel) -> str:
    if d.kind == WaitKind.CONSTRAINT:
        return f"constraint: pool '{w.pool}' has no schedulable node with {describe(ask)}"
    if not d.reason.startswith("capacity: pool") or " cannot fit " not in d.reason:
        return d.reason
    g = w.per_replica.gpu_milli
    if g:
        count = g / GPU
        need = (f"{describe(ask, count=count)} on one node" if w.replicas == 1 else
                f"{w.replicas} replicas of {describe(ask, count=count)} at once")
    else:
        need = f"{w.replicas} replica(s) on {describe(ask)}"
    detail = d.reason.removeprefix("capacity: ")
    start, end = detail.find(" with GPU model "), detail.find("; the most free")
    if 0 <= start < end:
        detail = detail[:start] + detail[end:]
    device = VENDOR_LABELS.get(ask.type, ("", "GPU"))[1]
    if device != "GPU":
        detail = detail.replace(" GPU, ", f" {device}, ")
    return f"capacity: waiting for {need}; {detail}"


def placed_on(decision: Admit) -> list[str]:
    return [p["node"] for p in decision.placement]
