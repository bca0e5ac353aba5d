// Pure helpers of the sweep page: objective vs trial number (with the best so far), the
// trials as parallel-coordinates runs, the comparison link, importance bars. Unit-tested in
// sweeps.test.ts.
import type { ParcoordsRun } from "./parcoords";
import { comparePath } from "./runs";
import type { SeriesData } from "./series";

export interface SweepTrial {
  id: number;
  number: number;
  status: string;
  params: Record<string, unknown>;
  objective: number | null;
  last_value: number | null;
  run: number | null;
}

export type Direction = "maximize" | "minimize";

export const TRIAL_STATUS_COLOUR: Record<string, string> = {
  pending: "gray",
  running: "blue",
  succeeded: "green",
  pruned: "orange",
  failed: "red",
  stopped: "gray",
};

export const SWEEP_STATUS_COLOUR: Record<string, string> = {
  running: "blue",
  stopping: "yellow",
  completed: "green",
  stopped: "gray",
  failed: "red",
};

function better(direction: Direction, a: number, b: number): boolean {
  return direction === "maximize" ? a > b : a < b;
}

/** Objective by trial number (succeeded trials only) and the best value reached so far. */
export function objectiveHistory(trials: readonly SweepTrial[], direction: Direction): { objective: SeriesData; best: SeriesData } {
  const done = trials
    .filter((t) => t.status === "succeeded" && typeof t.objective === "number" && Number.isFinite(t.objective))
    .sort((a, b) => a.number - b.number);
  const objective: SeriesData = { steps: [], values: [] };
  const best: SeriesData = { steps: [], values: [] };
  let top: number | null = null;
  for (const t of done) {
    const value = t.objective as number;
    objective.steps.push(t.number);
    objective.values.push(value);
    if (top === null || better(direction, value, top)) top = value;
    best.steps.push(t.number);
    best.values.push(top);
  }
  return { objective, best };
}

/** The best succeeded trial (ties: the earlier), or null. */
export function bestTrial(trials: readonly SweepTrial[], direction: Direction): SweepTrial | null {
  let found: SweepTrial | null = null;
  for (const t of trials) {
    if (t.status !== "succeeded" || typeof t.objective !== "number") continue;
    if (found === null || better(direction, t.objective, found.objective as number)
        || (t.objective === found.objective && t.number < found.number)) found = t;
  }
  return found;
}

/** Trials as runs of the parallel-coordinates plot: the objective when it succeeded, else the
 * last intermediate value it reached (a pruned trial shows where it was stopped). */
export function parcoordsTrials(trials: readonly SweepTrial[], colour?: (index: number) => string): ParcoordsRun[] {
  const runs = sweepRuns(trials);
  return trials
    .filter((t) => t.status !== "pending")
    .map((t) => ({
      id: t.run ?? -(t.number + 1),
      name: `trial ${t.number} (${t.status})`,
      params: t.params,
      metric: t.status === "succeeded" ? t.objective : t.last_value,
      // The colour its run has in the comparison view the page links to (by its place there).
      ...(colour && t.run !== null ? { color: colour(runs.indexOf(t.run)) } : {}),
    }));
}

/** The trials' runs in the order the comparison view gets them (and colours them by). */
export function sweepRuns(trials: readonly SweepTrial[]): number[] {
  return trials.map((t) => t.run).filter((r): r is number => typeof r === "number").sort((a, b) => a - b);
}

/** Every param key used by some trial, in the order of the search space. */
export function paramKeys(space: readonly { name: string }[], trials: readonly SweepTrial[]): string[] {
  const used = new Set(trials.flatMap((t) => Object.keys(t.params)));
  return space.map((p) => p.name).filter((name) => used.has(name));
}

/** The comparison view with the runs of the trials that have one, or null when none has. */
export function sweepComparePath(project: string, trials: readonly SweepTrial[]): string | null {
  const runs = sweepRuns(trials);
  return runs.length ? comparePath(project, runs) : null;
}

/** Importances as bars, largest first, in percent of the total. */
export function importanceBars(importances: Record<string, number>): { name: string; percent: number }[] {
  const entries = Object.entries(importances).filter(([, v]) => Number.isFinite(v) && v >= 0);
  const total = entries.reduce((sum, [, v]) => sum + v, 0);
  return entries
    .map(([name, v]) => ({ name, percent: total > 0 ? (100 * v) / total : 0 }))
    .sort((a, b) => b.percent - a.percent || a.name.localeCompare(b.name));
}

/** "lr=0.01, solver=adam": a trial's params on one line. */
export function paramsText(params: Record<string, unknown>): string {
  return Object.entries(params)
    .map(([k, v]) => `${k}=${typeof v === "number" ? Number(v.toPrecision(4)) : String(v)}`)
    .join(", ");
}
