"""Work pinned to some nodes by name (`PendingWorkload.nodes`: a notebook whose home volume is
bound in one zone), folded into the model key the policy already matches on, as accelerators.py
does for types and architectures: `pin(snapshot)` runs after `fold`.

In a pool where some pending work is pinned, each node's key gets the signature of the pins
that allow it ("H100@0": the pool's first pinned node set names it), and each workload's key
becomes the keys of the nodes it may run on: those of its models (any, when it
names none), and of its `nodes` when pinned. Work that is not pinned and names no model keeps the
empty key (any node); pools where nothing is pinned are left exactly as they were. A pinned
workload none of whose nodes is in its pool gets a key no node has ("!..."), a constraint wait.

`explain_pins(decisions, snapshot)` then rewords a pinned workload's waits: a constraint names
what pins it, and capacity or never-fits reasons say how many nodes it may use (instead of the
list of per-node keys). The package imports this module only from `__init__`.
"""
from __future__ import annotations

from dataclasses import replace

from .snapshot import Decision, Snapshot, Wait, WaitKind

SEPARATOR = "@"


def pin(snapshot: Snapshot) -> Snapshot:
    sets: dict[str, list[frozenset[str]]] = {}  # per pool, the distinct node sets its pending work is pinned to
    for w in snapshot.pending:
        if w.nodes is not None and w.nodes not in sets.setdefault(w.pool, []):
            sets[w.pool].append(w.nodes)
    if not sets:
        return snapshot
    # A node's key gets the signature of the pins that allow it ("H100@0.2": the first and third
    # node sets of its pool name it; "H100@": none does): nodes alike for every pin keep one key,
    # so the policy's per-model bookkeeping stays as small as the pool's zones, not its nodes.
    signature: dict[tuple[str, str], str] = {}
    by_pool: dict[str, list[tuple[str, str]]] = {}
    nodes = []
    for n in snapshot.nodes:
        if n.pool in sets:
            sig = SEPARATOR + ".".join(str(i) for i, names in enumerate(sets[n.pool]) if n.name in names)
            signature[(n.pool, n.name)] = sig
            by_pool.setdefault(n.pool, []).append((n.gpu_model, n.name))
            n = replace(n, gpu_model=f"{n.gpu_model}{sig}")
        nodes.append(n)
    pending = []
    for w in snapshot.pending:
        if w.pool not in sets or w.gpu_model.startswith("!") or (w.nodes is None and not w.gpu_model):
            pending.append(w)
            continue
        models = frozenset(m for m in w.gpu_model.split("|") if m) or None
        keys = sorted({f"{base}{signature[(w.pool, name)]}" for base, name in by_pool.get(w.pool, [])
                       if (models is None or base in models) and (w.nodes is None or name in w.nodes)})
        pending.append(replace(w, gpu_model="|".join(keys) if keys else f"!{w.nodes_why or 'pinned'}"))
    return replace(snapshot, nodes=nodes, pending=pending)


def explain_pins(decisions: list[Decision], snapshot: Snapshot) -> list[Decision]:
    pending = {w.id: w for w in snapshot.pending if w.nodes is not None}
    if not pending:
        return decisions
    pools = {w.pool for w in pending.values()}
    others = {w.id for w in snapshot.pending if w.nodes is None and w.pool in pools}
    out: list[Decision] = []
    for d in decisions:
        w = pending.get(d.workload_id) if isinstance(d, Wait) else None
        if w is None:
            if isinstance(d, Wait) and d.workload_id in others:  # other work of a pinned pool: models as named
                d = replace(d, reason=_plain(d.reason))
            out.append(d)
            continue
        why = w.nodes_why or "what pins it"
        if d.kind == WaitKind.CONSTRAINT:
            out.append(replace(d, reason=f"constraint: {why}; no schedulable node of pool '{w.pool}' matches it"))
            continue
        reason = d.reason
        start, end = reason.find(" with GPU model "), reason.find("; the most free")
        if 0 <= start < end:
            reason = reason[:start] + reason[end:]
        elif start >= 0:
            reason = reason[:start]
        usable = len(w.nodes or ())
        out.append(replace(d, reason=f"{reason} (it may run on {usable} node(s) only: {why})"))
    return out


def _plain(text: str) -> str:
    """`text` without the pins' signatures ("H100@0.2" -> "H100")."""
    out, i = [], 0
    while i < len(text):
        if text[i] != SEPARATOR:
            out.append(text[i])
            i += 1
            continue
        i += 1
        while i < len(text) and (text[i].isdigit() or (text[i] == "." and text[i + 1:i + 2].isdigit())):
            i += 1
    return "".join(out)
