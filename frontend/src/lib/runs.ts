// Tracking runs on the dashboard: latest values from the live "runs" topic, which metric
// columns to show, metric choices for charts, and the compare page's URL. Pure; runs.test.ts.
import type { LiveFrame } from "../live/socket";

export type RunStatus = "running" | "finished" | "failed" | "stopped";

export const RUN_STATUS_COLOUR: Record<string, string> = { running: "blue", finished: "green", failed: "red", stopped: "gray" };

/** run id -> key -> [step, value] of the newest point the page knows of. */
export type LatestValues = Record<number, Record<string, [number, number]>>;

export interface RunLike {
  id: number;
  status: string;
  summaries: Record<string, unknown>;
}

/** The summaries' last values as LatestValues (what the list endpoint answered). */
export function latestFromSummaries(runs: readonly RunLike[]): LatestValues {
  const out: LatestValues = {};
  for (const run of runs) {
    const row: Record<string, [number, number]> = {};
    for (const [key, summary] of Object.entries(run.summaries ?? {})) {
      if (!summary || typeof summary !== "object") continue;
      const s = summary as { last?: unknown; last_step?: unknown };
      if (typeof s.last === "number") row[key] = [typeof s.last_step === "number" ? s.last_step : 0, s.last];
    }
    out[run.id] = row;
  }
  return out;
}

export interface RunsFrameResult {
  latest: LatestValues;
  statuses: Record<number, string>;
  /** runs the frame mentions that the page does not list (a new run: re-read the list) */
  unknown: number[];
}

/**
 * Apply a frame of the "runs" topic: `runs.latest` moves values forward (a point never replaces a
 * newer step), `run.status` changes a run's status. Inputs are left as they were.
 */
export function applyRunsFrame(
  latest: LatestValues,
  statuses: Record<number, string>,
  frame: LiveFrame,
  known: ReadonlySet<number>,
): RunsFrameResult {
  const unknown: number[] = [];
  if (frame.type === "runs.latest" && frame.runs && typeof frame.runs === "object") {
    let next = latest;
    for (const [idText, keys] of Object.entries(frame.runs as Record<string, unknown>)) {
      const id = Number(idText);
      if (!Number.isFinite(id) || !keys || typeof keys !== "object") continue;
      if (!known.has(id)) unknown.push(id);
      const row = { ...(next[id] ?? {}) };
      let changed = false;
      for (const [key, point] of Object.entries(keys as Record<string, unknown>)) {
        if (!Array.isArray(point) || typeof point[0] !== "number" || typeof point[1] !== "number") continue;
        const held = row[key];
        if (held && held[0] > point[0]) continue;
        row[key] = [point[0], point[1]];
        changed = true;
      }
      if (changed) next = next === latest ? { ...latest, [id]: row } : Object.assign(next, { [id]: row });
    }
    return { latest: next, statuses, unknown };
  }
  if (frame.type === "run.status" && typeof frame.run === "number" && typeof frame.status === "string") {
    if (!known.has(frame.run)) unknown.push(frame.run);
    if (statuses[frame.run] === frame.status) return { latest, statuses, unknown };
    return { latest, statuses: { ...statuses, [frame.run]: frame.status }, unknown };
  }
  return { latest, statuses, unknown };
}

export function isSystemKey(key: string): boolean {
  return key.startsWith("system/");
}

/**
 * Metric keys worth a column or a first chart: the most common non-system keys across runs,
 * keys naming a loss or an accuracy first.
 */
export function defaultMetricKeys(keysPerRun: readonly (readonly string[])[], limit = 3): string[] {
  const counts = new Map<string, number>();
  for (const keys of keysPerRun) for (const key of new Set(keys)) if (!isSystemKey(key)) counts.set(key, (counts.get(key) ?? 0) + 1);
  const rank = (key: string) => (/loss/i.test(key) ? 0 : /acc|score|reward|f1|auc/i.test(key) ? 1 : 2);
  return [...counts.entries()]
    .sort((a, b) => rank(a[0]) - rank(b[0]) || b[1] - a[1] || a[0].localeCompare(b[0]))
    .slice(0, limit)
    .map(([key]) => key);
}

/** Every key of the runs, sorted, system keys last: the options of a metric picker. */
export function allMetricKeys(keysPerRun: readonly (readonly string[])[]): string[] {
  const keys = new Set<string>();
  for (const list of keysPerRun) for (const key of list) keys.add(key);
  return [...keys].sort((a, b) => Number(isSystemKey(a)) - Number(isSystemKey(b)) || a.localeCompare(b));
}

/** "?runs=1,2,3" → [1, 2, 3]: positive integers, duplicates and junk dropped, order kept. */
export function parseRunIds(value: string | null | undefined): number[] {
  if (!value) return [];
  const out: number[] = [];
  for (const part of value.split(",")) {
    const text = part.trim();
    if (!/^\d+$/.test(text)) continue;
    const id = Number(text);
    if (id > 0 && !out.includes(id)) out.push(id);
  }
  return out;
}

export function comparePath(project: string, runIds: Iterable<number>): string {
  const ids = [...runIds].sort((a, b) => a - b);
  return `/projects/${encodeURIComponent(project)}/compare?runs=${ids.join(",")}`;
}

/** The dashboard path of a workload, from its kind. */
export function workloadPath(project: string, kind: string, id: number): string {
  return `/projects/${encodeURIComponent(project)}/workloads/${kind}/${id}`;
}
