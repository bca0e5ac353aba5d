// A project's quota per pool as the quota page shows it (docs/live.md §4): nominal, used,
// borrowed, lendable, GPU-hour budget. Derived values fall back to the documented formulas
// when a field is missing from `usage`.

import { poolKinds } from "./cluster";
import { formatBytesMb, formatGpu } from "./format";

export interface QuotaUsage {
  allocated_gpu_milli?: number;
  allocated_cpu_milli?: number;
  allocated_memory_mb?: number;
  used_gpu_milli?: number;
  borrowed_gpu_milli?: number;
  lendable_gpu_milli?: number;
  queued_gpu_milli?: number;
  waiting_gpu_milli?: Record<string, number>;
  queued_cpu_milli?: number;
  queued_memory_mb?: number;
  waiting?: QuotaWaitLike[];
  gpu_hours_this_period?: number;
  gpu_hour_budget?: number | null;
  budget_left_gpu_hours?: number | null;
  period_start?: string | null;
  period_end?: string | null;
}

export interface QuotaWaitLike {
  waiting_on: string;
  workloads: number;
  gpu_milli: number;
  cpu_milli: number;
  memory_mb: number;
  resources: string[];
}

/** Queued work that waits on one thing: what it asks for, and which resources it waits for. */
export interface QuotaWait {
  kind: string;
  workloads: number;
  gpu: number;
  cpu: number;
  memory: number;
  /** For waits on quota: "gpu", "cpu" and/or "memory"; empty for waits on capacity and the like. */
  resources: string[];
}

export interface QuotaLike {
  id: number;
  pool: string;
  pool_accelerators?: { types: string[]; architectures: string[] };
  nominal_gpu_milli?: number;
  nominal_cpu_milli?: number;
  nominal_memory_mb?: number;
  borrowing_limit_gpu_milli?: number | null;
  lending_limit_gpu_milli?: number | null;
  gpu_hour_budget?: string | number | null;
  budget_period?: string;
  usage: Record<string, unknown>;
}

export interface QuotaView {
  id: number;
  pool: string;
  /** The pool's accelerator types and architectures, for people: ["Ascend", "arm64"]. */
  poolKinds: string[];
  nominal: number;
  used: number;
  borrowed: number;
  lendable: number;
  borrowingLimit: number | null;
  lendingLimit: number | null;
  cpuNominal: number;
  cpuUsed: number;
  memoryNominal: number;
  memoryUsed: number;
  cpuBar: UsageBar;
  memoryBar: UsageBar;
  gpuHours: number;
  budget: number | null;
  budgetLeft: number | null;
  period: string;
  periodEnd: string | null;
  bar: UsageBar;
  /** GPUs (milli) asked for by queued work, and that split by what it waits on, largest first. */
  queued: number;
  waiting: { kind: string; milli: number }[];
  /** CPU (milli-cores) and memory (MiB) asked for by queued work. */
  queuedCpu: number;
  queuedMemory: number;
  /** Queued work by what it waits on, every resource it asks for (most workloads first). */
  waits: QuotaWait[];
  /** GPU-hours spent this period as a percentage of the budget (capped at 100), null without a budget. */
  budgetPercent: number | null;
}

function num(value: unknown): number | undefined {
  if (typeof value === "number" && Number.isFinite(value)) return value;
  if (typeof value === "string" && value.trim() !== "" && Number.isFinite(Number(value))) return Number(value);
  return undefined;
}

export interface UsageBar {
  /** Share of the bar (percent) used within the nominal quota. */
  within: number;
  /** Share of the bar (percent) used above the nominal (borrowed). */
  borrowed: number;
  /** What 100 % of the bar stands for (milli-GPU): the nominal, or the use when above it. */
  scale: number;
}

/** The "used vs nominal" bar: used within the nominal, then what is borrowed beyond it. */
export function usageBar(nominal: number, used: number): UsageBar {
  const n = Math.max(0, nominal);
  const u = Math.max(0, used);
  const scale = Math.max(n, u);
  if (scale === 0) return { within: 0, borrowed: 0, scale: 0 };
  const inside = Math.min(u, n);
  const round = (x: number) => Math.round(x * 10) / 10;
  return { within: round((inside / scale) * 100), borrowed: round(((u - inside) / scale) * 100), scale };
}

export function quotaView(quota: QuotaLike): QuotaView {
  const usage = quota.usage as QuotaUsage & Record<string, unknown>;
  const nominal = quota.nominal_gpu_milli ?? 0;
  const used = num(usage.used_gpu_milli) ?? num(usage.allocated_gpu_milli) ?? 0;
  const lendingLimit = quota.lending_limit_gpu_milli ?? null;
  const borrowed = num(usage.borrowed_gpu_milli) ?? Math.max(0, used - nominal);
  const unusedNominal = Math.max(0, nominal - used);
  const lendable = num(usage.lendable_gpu_milli) ?? (lendingLimit === null ? unusedNominal : Math.min(unusedNominal, lendingLimit));
  const gpuHours = num(usage.gpu_hours_this_period) ?? 0;
  const budget = usage.gpu_hour_budget === null ? null : num(usage.gpu_hour_budget) ?? num(quota.gpu_hour_budget) ?? null;
  const left = num(usage.budget_left_gpu_hours);
  const budgetLeft = budget === null ? null : left ?? Math.max(0, budget - gpuHours);
  const budgetPercent = budget === null ? null : budget <= 0 ? 100 : Math.min(100, Math.round((gpuHours / budget) * 1000) / 10);
  const split = usage.waiting_gpu_milli && typeof usage.waiting_gpu_milli === "object" ? usage.waiting_gpu_milli : {};
  const waiting = Object.entries(split)
    .map(([kind, milli]) => ({ kind, milli: num(milli) ?? 0 }))
    .filter((w) => w.milli > 0)
    .sort((a, b) => b.milli - a.milli || a.kind.localeCompare(b.kind));
  const queued = num(usage.queued_gpu_milli) ?? waiting.reduce((total, w) => total + w.milli, 0);
  const waits: QuotaWait[] = (Array.isArray(usage.waiting) ? usage.waiting : [])
    .map((w) => ({
      kind: String(w.waiting_on),
      workloads: num(w.workloads) ?? 0,
      gpu: num(w.gpu_milli) ?? 0,
      cpu: num(w.cpu_milli) ?? 0,
      memory: num(w.memory_mb) ?? 0,
      resources: Array.isArray(w.resources) ? w.resources.map(String) : [],
    }))
    .filter((w) => w.workloads > 0);
  const cpuNominal = quota.nominal_cpu_milli ?? 0;
  const cpuUsed = num(usage.allocated_cpu_milli) ?? 0;
  const memoryNominal = quota.nominal_memory_mb ?? 0;
  const memoryUsed = num(usage.allocated_memory_mb) ?? 0;
  return {
    id: quota.id,
    pool: quota.pool,
    poolKinds: poolKinds({
      accelerator_types: quota.pool_accelerators?.types,
      architectures: quota.pool_accelerators?.architectures,
    }),
    nominal,
    used,
    borrowed,
    lendable,
    borrowingLimit: quota.borrowing_limit_gpu_milli ?? null,
    lendingLimit,
    cpuNominal,
    cpuUsed,
    memoryNominal,
    memoryUsed,
    cpuBar: usageBar(cpuNominal, cpuUsed),
    memoryBar: usageBar(memoryNominal, memoryUsed),
    gpuHours,
    budget,
    budgetLeft,
    period: quota.budget_period ?? "month",
    periodEnd: typeof usage.period_end === "string" ? usage.period_end : null,
    bar: usageBar(nominal, used),
    queued,
    waiting,
    queuedCpu: num(usage.queued_cpu_milli) ?? waits.reduce((total, w) => total + w.cpu, 0),
    queuedMemory: num(usage.queued_memory_mb) ?? waits.reduce((total, w) => total + w.memory, 0),
    waits,
    budgetPercent,
  };
}

/** Colour of a budget bar: calm until 75 %, then a warning, red from 90 %. */
export function budgetColour(percent: number | null): string {
  if (percent === null) return "gray";
  if (percent >= 90) return "red";
  if (percent >= 75) return "orange";
  return "teal";
}

/** "16 CPUs · 2 GiB" (and GPUs first when asked for): what some work asks for, in words. */
export function resourcesLabel(gpuMilli: number, cpuMilli: number, memoryMb: number): string {
  const parts: string[] = [];
  if (gpuMilli > 0) parts.push(`${formatGpu(gpuMilli)} GPU${formatGpu(gpuMilli) === "1" ? "" : "s"}`);
  if (cpuMilli > 0) parts.push(`${formatGpu(cpuMilli)} CPU${formatGpu(cpuMilli) === "1" ? "" : "s"}`);
  if (memoryMb > 0) parts.push(formatBytesMb(memoryMb));
  return parts.join(" · ") || "nothing";
}

/** What a wait is for, in words: "CPU", "GPUs and memory". */
export function resourceNames(resources: string[]): string {
  const names = resources.map((r) => (r === "gpu" ? "GPUs" : r === "cpu" ? "CPU" : r === "memory" ? "memory" : r));
  return names.length <= 1 ? names.join("") : `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}`;
}
