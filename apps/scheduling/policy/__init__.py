"""The scheduling policy: a pure function over plain data (no ORM, no I/O).

`schedule(snapshot, options)` takes nodes, quotas, running and pending workloads (a `Snapshot`) and
how to decide (a `PolicyOptions`: settings, rule switches, tuning constants) and returns one decision
per pending workload (`Admit` with a placement, or `Wait` with a reason, an optional estimated
start and its queue position) plus `Preempt` decisions for running workloads that must make
room. The same function runs in the service, in the unit tests and in the trace simulator.

The semantics (docs/scheduling.md has the user-facing version):

- Order: work within its project's nominal before work that would borrow (past the bounded wait,
  work of a project below its nominal GPUs counts as within it), then priority class
  (P0 first), then fair share (the project's dominant share of its nominal quota in the pool,
  updated as the cycle admits), then submit time.
- Quota per project and pool: `nominal` is guaranteed; projects of a pool form a cohort and may
  borrow each other's unused nominal up to their `borrowing_limit`, while a `lending_limit`
  keeps the rest of a lender's nominal private. GPU-hour budgets are checked at admission.
- Gang: all replicas are placed at once or none is.
- Placement: per-GPU accounting in milli-GPU; candidates come from best-fit buckets (fewest
  whole free GPUs first) and the one that adds the least fragmentation for the current task mix
  wins (the FGD idea); multi-replica workloads stay in the fewest topology domains.
- Preemption: a higher priority preempts lower priorities of its own project; a project within
  its nominal reclaims from borrowers; the victim set is minimal; non-preemptible workloads are
  never chosen. Victims are stopped gracefully by the service and requeued.
- Backfill: the first workload of a pool blocked by capacity gets a reservation (its future
  placement is held), so later, smaller workloads fill around it without starving it.

The package has one module per concept; each imports only from the ones above it in this list (a
test checks it), and none imports Django, the ORM or anything that does I/O:

- `snapshot`: the input and output types (`Snapshot`, `NodeState`, `QuotaState`,
  `PendingWorkload`, `ScaleUp`, `RunningWorkload`, `Admit`, `Wait`, `WaitKind`, `Preempt`), the
  options (`PolicyOptions`, `SERVICE_OPTIONS`) and the defaults;
- `locality`: data-aware placement, a tie-break among equal nodes for nodes caching a workload's
  datasets, delay scheduling (a bounded wait for such a node, per pool) and the expected time of a
  cache fill;
- `quota`: quota, borrowing, lending, claims and GPU-hour budgets per pool (`Cohort`);
- `placement`: per-GPU free capacity, best-fit candidates, fragmentation and stranded GPUs, the
  GPU-node reserve, topology domains (`Pool`);
- `cluster`: the pools' free capacity kept between cycles and brought up to date by the changes
  since the last snapshot (`ClusterState`), with a rebuild as the fallback;
- `state`: a cycle's working state over the pools and cohorts, and the moves all parts share
  (`CycleState`);
- `ordering`: the order of pending work, fair share, bounded wait (`Ordering`);
- `preemption`: victims, minimal victim sets, anti-thrash protection, preemptors' claims
  (`Preemption`, given the ordering's bounded-wait test);
- `backfill`: the reservation for a pool's first capacity-blocked workload (`Backfill`);
- `reasons`: capacity reasons and memoised waits (`Reasons`);
- `cycle`: `Cycle` (the parts above composed: each is given the state and the options, none
  inherits another) and `schedule(snapshot, options)`, the entry point;
- `accelerators` (beside the chain, on `snapshot` only): accelerator types and CPU architectures
  folded into the GPU-model key before `schedule` (`fold`) and named in pending reasons after it
  (`explain`);
- `pinning` (beside the chain too): work pinned to some nodes by name (a volume's node affinity)
  folded into the same key after `fold` (`pin`), its waits reworded (`explain_pins`).

Import from the package (`from apps.scheduling.policy import schedule, Snapshot, ...`), not from
its modules: the names below are the package's interface. `Cycle`, `CycleState`, `Cohort` and
`Pool` are the policy's insides that the simulator's baselines, the tests and the placement
benchmarks drive directly; no module imports an underscored name of another.
"""
from .accelerators import Accel, explain, fold
from .cluster import ClusterState
from .cycle import Cycle, schedule
from .locality import fill_seconds, hold_until, holder_first, rank
from .pinning import explain_pins, pin
from .placement import Pool, kept_for_gpus
from .quota import Cohort, QuotaBlock
from .snapshot import (
    DEFAULT_GPU_NODE_RESERVE,
    DEFAULT_LOCALITY_WAIT_SECONDS,
    DEFAULT_REPREEMPT_MIN_RUNTIME,
    DEFAULT_SERVICE_HALF_LIFE,
    DEFAULT_STARVATION_SECONDS,
    DEFAULT_TIMESLICE_SECONDS,
    GPU,
    SERVICE_OPTIONS,
    WAIT_KIND_LABELS,
    Admit,
    Decision,
    NodeState,
    PendingWorkload,
    PolicyOptions,
    Preempt,
    QuotaState,
    Resources,
    RunningWorkload,
    ScaleUp,
    Snapshot,
    Wait,
    WaitKind,
    largest_node_refusal,
    scale_up_ids,
)
from .state import CycleState

__all__ = [
    "Accel", "explain", "explain_pins", "fold", "pin",
    "DEFAULT_GPU_NODE_RESERVE", "DEFAULT_LOCALITY_WAIT_SECONDS",
    "DEFAULT_REPREEMPT_MIN_RUNTIME", "DEFAULT_SERVICE_HALF_LIFE", "DEFAULT_STARVATION_SECONDS",
    "DEFAULT_TIMESLICE_SECONDS", "GPU", "SERVICE_OPTIONS", "WAIT_KIND_LABELS",
    "Admit", "ClusterState", "Cycle", "CycleState", "Decision", "NodeState", "PendingWorkload", "PolicyOptions",
    "Preempt", "QuotaBlock", "QuotaState", "Resources",
    "RunningWorkload", "ScaleUp", "Snapshot", "Wait", "WaitKind", "fill_seconds", "hold_until", "holder_first", "kept_for_gpus",
    "largest_node_refusal", "rank", "scale_up_ids",
    "schedule",
    "Cohort", "Pool",
]
