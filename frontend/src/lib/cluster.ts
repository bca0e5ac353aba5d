// The cluster page's data: GET /api/v1/cluster/overview/ (docs/live.md §3), the live frames of
// the "cluster" topic applied to it (pure), and the heatmap's colour scale.
// The shapes below are the OpenAPI ones (Schemas["ClusterOverview"] is assigned to them where the
// page fetches, so the build breaks if they drift), widened where live frames add metrics.
import type { LiveFrame } from "../live/socket";
import { formatBytesMb, formatGpu } from "./format";

export interface OverviewGpu {
  index: number;
  allocated_milli: number;
  util_percent: number | null;
  memory_used_mb: number | null;
  memory_total_mb: number | null;
  temperature_c: number | null;
  power_w: number | null;
  time: string | null;
  [metric: string]: unknown;
}

export interface OverviewNode {
  id: number;
  name: string;
  cluster: string;
  pool?: string | null;
  gpu_model: string;
  accelerator_type?: string; // nvidia | amd | ascend | none (docs/accelerators.md)
  cpu_arch?: string; // amd64 | arm64 | "" (unknown)
  gpu_count: number;
  gpu_memory_mb: number;
  health: string;
  schedulable: boolean;
  cordoned: boolean;
  last_seen_at: string | null;
  capacity_gpu_milli: number;
  allocated_gpu_milli: number;
  used_gpu_milli: number;
  allocated_gpus: number;
  used_gpus: number;
  cpu_milli_allocatable: number;
  allocated_cpu_milli: number;
  memory_mb_allocatable: number;
  allocated_memory_mb: number;
  // requests of pods not Cairn's (DaemonSets, other tenants): Cairn places work in what they leave
  others_gpu_milli?: number;
  others_cpu_milli?: number;
  others_memory_mb?: number;
  cpu_percent: number | null;
  memory_percent: number | null;
  telemetry_time: string | null;
  replica_isolation?: string | null; // local nodes: how replicas are isolated ("none": not at all)
  replica_network?: string | null; // local nodes: "own" (a network namespace per workload) or "host" (shared)
  gpus: OverviewGpu[];
}

export interface OverviewPool {
  name: string;
  cluster: string;
  description: string;
  accelerator_models: string[];
  accelerator_types?: string[];
  architectures?: string[];
  nodes_total: number;
  nodes_schedulable: number;
  capacity_gpus: number;
  capacity_gpu_milli: number;
  allocated_gpus: number;
  allocated_gpu_milli: number;
  used_gpus: number;
  used_gpu_milli: number;
  cpu_milli_allocatable?: number;
  allocated_cpu_milli?: number;
  memory_mb_allocatable?: number;
  allocated_memory_mb?: number;
  nodes: OverviewNode[];
}

export interface ClusterOverview {
  generated_at: string;
  telemetry_max_age_seconds: number;
  pools: OverviewPool[];
  unpooled_nodes: OverviewNode[];
}

// ---- accelerator vendors and CPU architectures -------------------------------------------------

const VENDORS: Record<string, string> = { nvidia: "NVIDIA", amd: "AMD", ascend: "Ascend" };

/** A vendor for people: "NVIDIA", "AMD", "Ascend"; "" for none or unknown. */
export function vendorLabel(type: string | null | undefined): string {
  return (type && VENDORS[type]) || "";
}

/** What a node is, in a few words: "Ascend 910B3 · arm64", "NVIDIA A100 · amd64", "CPU · arm64". */
export function nodeKind(node: { accelerator_type?: string; gpu_model: string; gpu_count: number; cpu_arch?: string }): string {
  const vendor = vendorLabel(node.accelerator_type ?? (node.gpu_count ? "nvidia" : "none"));
  const device = vendor ? [vendor, node.gpu_model].filter(Boolean).join(" ") : "CPU";
  return node.cpu_arch ? `${device} · ${node.cpu_arch}` : device;
}

/** A pool's accelerator types and architectures for a badge row: ["NVIDIA", "Ascend", "amd64", "arm64"]. */
export function poolKinds(pool: { accelerator_types?: string[]; architectures?: string[] }): string[] {
  const types = (pool.accelerator_types ?? []).map((t) => vendorLabel(t) || (t === "none" ? "CPU only" : t));
  return [...types, ...(pool.architectures ?? [])];
}

// ---- colour scale ---------------------------------------------------------------------------

/** Viridis stops (perceptually even, colour-blind safe, readable on light and dark pages). */
const STOPS: [number, [number, number, number]][] = [
  [0, [68, 1, 84]],
  [25, [59, 82, 139]],
  [50, [33, 145, 140]],
  [75, [94, 201, 98]],
  [100, [253, 231, 37]],
];

/** Heatmap cell colour for a utilisation in percent; null when there is no recent sample. */
export function utilColour(util: number | null | undefined): string | null {
  if (util === null || util === undefined || !Number.isFinite(util)) return null;
  const u = Math.min(100, Math.max(0, util));
  for (let i = 1; i < STOPS.length; i++) {
    const [hi, c1] = STOPS[i];
    if (u <= hi) {
      const [lo, c0] = STOPS[i - 1];
      const t = (u - lo) / (hi - lo);
      const mix = (k: number) => Math.round(c0[k] + (c1[k] - c0[k]) * t);
      return `rgb(${mix(0)}, ${mix(1)}, ${mix(2)})`;
    }
  }
  return "rgb(253, 231, 37)";
}

/** Text colour that stays readable on `utilColour(util)`. */
export function utilTextColour(util: number | null | undefined): string {
  if (util === null || util === undefined || !Number.isFinite(util)) return "var(--mantine-color-dimmed)";
  return util >= 60 ? "#1a1b1e" : "#ffffff";
}

/** CSS gradient of the whole scale, for the legend. */
export function utilGradient(): string {
  return `linear-gradient(to right, ${STOPS.map(([p]) => `${utilColour(p)} ${p}%`).join(", ")})`;
}

// ---- tooltips -------------------------------------------------------------------------------

function fmt(value: number | null | undefined, digits = 0): string | null {
  return value === null || value === undefined || !Number.isFinite(value) ? null : value.toFixed(digits);
}

/** The lines of a heatmap cell's tooltip. */
export function gpuTooltipLines(node: string, gpu: OverviewGpu): string[] {
  const lines = [`${node} · GPU ${gpu.index}`];
  const util = fmt(gpu.util_percent);
  lines.push(util === null ? "Utilisation: no recent sample" : `Utilisation: ${util}%`);
  const used = gpu.memory_used_mb;
  const total = gpu.memory_total_mb;
  if (used !== null && used !== undefined) {
    const gib = (mb: number) => (mb / 1024).toFixed(1);
    lines.push(total ? `Memory: ${gib(used)} / ${gib(total)} GiB (${Math.round((used / total) * 100)}%)` : `Memory: ${gib(used)} GiB`);
  }
  const temp = fmt(gpu.temperature_c);
  if (temp !== null) lines.push(`Temperature: ${temp} °C`);
  const power = fmt(gpu.power_w);
  if (power !== null) lines.push(`Power: ${power} W`);
  if (gpu.allocated_milli > 0) {
    const g = gpu.allocated_milli / 1000;
    lines.push(`Allocated: ${Number.isInteger(g) ? g : g.toFixed(2)} GPU`);
  } else {
    lines.push("Not allocated");
  }
  return lines;
}

// ---- live frames ----------------------------------------------------------------------------

interface TelemetryGpu {
  gpu: number;
  time?: number;
  [metric: string]: unknown;
}

interface TelemetryNode {
  node: string;
  time?: number;
  cpu_percent?: number;
  memory_percent?: number;
  gpus?: TelemetryGpu[];
}

function isoFromUnix(seconds: unknown): string | null {
  return typeof seconds === "number" && Number.isFinite(seconds) ? new Date(seconds * 1000).toISOString() : null;
}

function emptyGpu(index: number): OverviewGpu {
  return {
    index, allocated_milli: 0, util_percent: null, memory_used_mb: null, memory_total_mb: null,
    temperature_c: null, power_w: null, time: null,
  };
}

/** used_gpu_milli (Σ util × 10) and used_gpus (GPUs at ≥ 1 %) of a node, from its GPUs. */
export function nodeUse(gpus: OverviewGpu[]): { used_gpu_milli: number; used_gpus: number } {
  let milli = 0;
  let count = 0;
  for (const g of gpus) {
    if (typeof g.util_percent !== "number") continue;
    milli += Math.round(Math.min(100, Math.max(0, g.util_percent)) * 10);
    if (g.util_percent >= 1) count += 1;
  }
  return { used_gpu_milli: milli, used_gpus: count };
}

function updateNode(node: OverviewNode, sample: TelemetryNode): OverviewNode {
  const next: OverviewNode = { ...node };
  if (typeof sample.cpu_percent === "number") next.cpu_percent = sample.cpu_percent;
  if (typeof sample.memory_percent === "number") next.memory_percent = sample.memory_percent;
  const time = isoFromUnix(sample.time);
  if (time) next.telemetry_time = time;
  if (Array.isArray(sample.gpus) && sample.gpus.length) {
    const gpus = node.gpus.slice();
    for (const s of sample.gpus) {
      if (typeof s.gpu !== "number") continue;
      let at = gpus.findIndex((g) => g.index === s.gpu);
      if (at < 0) {
        gpus.push(emptyGpu(s.gpu));
        at = gpus.length - 1;
      }
      const gpu: OverviewGpu = { ...gpus[at] };
      for (const [key, value] of Object.entries(s)) {
        if (key === "gpu" || key === "time") continue;
        if (typeof value === "number") gpu[key] = value;
      }
      const gpuTime = isoFromUnix(s.time) ?? time;
      if (gpuTime) gpu.time = gpuTime;
      gpus[at] = gpu;
    }
    gpus.sort((a, b) => a.index - b.index);
    next.gpus = gpus;
    Object.assign(next, nodeUse(gpus));
  }
  return next;
}

function poolTotals(pool: OverviewPool): OverviewPool {
  let usedMilli = 0;
  let usedGpus = 0;
  let schedulable = 0;
  for (const n of pool.nodes) {
    usedMilli += n.used_gpu_milli;
    usedGpus += n.used_gpus;
    if (n.schedulable) schedulable += 1;
  }
  return { ...pool, used_gpu_milli: usedMilli, used_gpus: usedGpus, nodes_schedulable: schedulable };
}

function mapNodes(
  overview: ClusterOverview,
  change: (node: OverviewNode) => OverviewNode | null,
): ClusterOverview {
  let touched = false;
  const apply = (nodes: OverviewNode[]): OverviewNode[] | null => {
    let out: OverviewNode[] | null = null;
    nodes.forEach((n, i) => {
      const changed = change(n);
      if (changed) {
        out ??= nodes.slice();
        out[i] = changed;
      }
    });
    return out;
  };
  const pools = overview.pools.map((pool) => {
    const nodes = apply(pool.nodes);
    if (!nodes) return pool;
    touched = true;
    return poolTotals({ ...pool, nodes });
  });
  const unpooled = apply(overview.unpooled_nodes);
  if (unpooled) touched = true;
  return touched ? { ...overview, pools, unpooled_nodes: unpooled ?? overview.unpooled_nodes } : overview;
}

/** Apply a `cluster.telemetry` frame: latest node and GPU metrics, node and pool "used" totals. */
export function applyTelemetry(overview: ClusterOverview, frame: LiveFrame): ClusterOverview {
  if (frame.type !== "cluster.telemetry" || !Array.isArray(frame.nodes)) return overview;
  const byName = new Map<string, TelemetryNode>();
  for (const n of frame.nodes as unknown as TelemetryNode[]) if (n && typeof n.node === "string") byName.set(n.node, n);
  if (!byName.size) return overview;
  return mapNodes(overview, (node) => {
    const sample = byName.get(node.name);
    return sample ? updateNode(node, sample) : null;
  });
}

interface NodeChange {
  id?: number;
  name?: string;
  health?: string;
  schedulable?: boolean;
  cordoned?: boolean;
}

/** Apply a `node.changed` frame: health, schedulable, cordoned (and the pool's schedulable count). */
export function applyNodeChanged(overview: ClusterOverview, frame: LiveFrame): ClusterOverview {
  if (frame.type !== "node.changed") return overview;
  const change: NodeChange | undefined = frame.node;
  if (!change || typeof change !== "object") return overview;
  return mapNodes(overview, (node) => {
    const same = typeof change.id === "number" ? node.id === change.id : node.name === change.name;
    if (!same) return null;
    const next = { ...node };
    if (typeof change.health === "string") next.health = change.health;
    if (typeof change.schedulable === "boolean") next.schedulable = change.schedulable;
    if (typeof change.cordoned === "boolean") next.cordoned = change.cordoned;
    return next;
  });
}

/** One frame of the "cluster" topic, whatever its type. */
export function applyClusterFrame(overview: ClusterOverview | undefined, frame: LiveFrame): ClusterOverview | undefined {
  if (!overview) return overview;
  if (frame.type === "cluster.telemetry") return applyTelemetry(overview, frame);
  if (frame.type === "node.changed") return applyNodeChanged(overview, frame);
  return overview;
}

// ---- tables ---------------------------------------------------------------------------------

export interface NodeRow extends OverviewNode {
  poolName: string | null;
}

/** Every node, pool by pool, then the unpooled ones. */
export function allNodes(overview: ClusterOverview): NodeRow[] {
  const rows: NodeRow[] = [];
  for (const pool of overview.pools) for (const node of pool.nodes) rows.push({ ...node, poolName: pool.name });
  for (const node of overview.unpooled_nodes) rows.push({ ...node, poolName: null });
  return rows;
}

/** The heatmap's columns: 0 .. the highest GPU index of any node. */
export function heatmapColumns(nodes: { gpus: { index: number }[]; gpu_count: number }[]): number {
  let max = 0;
  for (const n of nodes) {
    max = Math.max(max, n.gpu_count);
    for (const g of n.gpus) max = Math.max(max, g.index + 1);
  }
  return max;
}

export const HEALTH_COLOUR: Record<string, string> = {
  healthy: "green",
  degraded: "yellow",
  unhealthy: "red",
  unknown: "gray",
};

/** Percent of `part` in `whole`, 0 when there is no whole, capped to 0..100. */
export function percentOf(part: number, whole: number): number {
  if (!whole || whole <= 0) return 0;
  return Math.min(100, Math.max(0, Math.round((part / whole) * 1000) / 10));
}

/** What pods not Cairn's (DaemonSets, other tenants) request on a node, e.g. "6 GPU, 4 cores,
 * 8.0 GiB"; null when they request nothing. Cairn's scheduler places work in the rest. */
export function othersSummary(n: Pick<OverviewNode, "others_gpu_milli" | "others_cpu_milli" | "others_memory_mb">): string | null {
  const parts: string[] = [];
  if (n.others_gpu_milli) parts.push(`${formatGpu(n.others_gpu_milli)} GPU`);
  if (n.others_cpu_milli) parts.push(`${formatGpu(n.others_cpu_milli)} cores`);
  if (n.others_memory_mb) parts.push(formatBytesMb(n.others_memory_mb));
  return parts.length ? parts.join(", ") : null;
}
