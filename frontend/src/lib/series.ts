// Metric series held by the charts: steps kept sorted and unique, values alongside.
// Pure helpers except `appendPoints`, which updates a series in place so that live frames
// (up to 10 a second) do not copy every point. Unit-tested in series.test.ts.

export interface SeriesData {
  steps: number[];
  values: number[];
}

/** [step, value] or [step, value, time], as the series endpoint and live frames send them. */
export type Point = readonly [number, number, ...number[]];

export function emptySeries(): SeriesData {
  return { steps: [], values: [] };
}

function isValidPoint(p: unknown): p is Point {
  return Array.isArray(p) && p.length >= 2 && Number.isFinite(p[0]) && typeof p[1] === "number";
}

/** Sorted by step with one point per step (the last one given wins); invalid points dropped. */
function normalise(points: ArrayLike<unknown>): SeriesData {
  const valid: Point[] = [];
  let sorted = true;
  for (let i = 0; i < points.length; i++) {
    const p = points[i];
    if (!isValidPoint(p)) continue;
    if (valid.length && p[0] < valid[valid.length - 1][0]) sorted = false;
    valid.push(p);
  }
  if (!sorted) {
    // Stable sort keeps the arrival order of equal steps, so "last wins" still holds.
    const indexed = valid.map((p, i) => [p, i] as const);
    indexed.sort((a, b) => a[0][0] - b[0][0] || a[1] - b[1]);
    for (let i = 0; i < indexed.length; i++) valid[i] = indexed[i][0];
  }
  const out = emptySeries();
  for (const p of valid) {
    const n = out.steps.length;
    if (n && out.steps[n - 1] === p[0]) out.values[n - 1] = p[1];
    else {
      out.steps.push(p[0]);
      out.values.push(p[1]);
    }
  }
  return out;
}

/** A series from points in any order, possibly repeating steps. */
export function fromPoints(points: ArrayLike<unknown>): SeriesData {
  return normalise(points);
}

/** Two sorted, unique series merged into a new one; on equal steps `b` wins. */
export function mergeSeries(a: SeriesData, b: SeriesData): SeriesData {
  if (!b.steps.length) return { steps: a.steps.slice(), values: a.values.slice() };
  if (!a.steps.length) return { steps: b.steps.slice(), values: b.values.slice() };
  const steps: number[] = [];
  const values: number[] = [];
  let i = 0;
  let j = 0;
  while (i < a.steps.length || j < b.steps.length) {
    if (j >= b.steps.length || (i < a.steps.length && a.steps[i] < b.steps[j])) {
      steps.push(a.steps[i]);
      values.push(a.values[i]);
      i++;
    } else {
      if (i < a.steps.length && a.steps[i] === b.steps[j]) i++;
      steps.push(b.steps[j]);
      values.push(b.values[j]);
      j++;
    }
  }
  return { steps, values };
}

/** `points` merged into `series` as a new series (sorted, de-duplicated, new points win). */
export function mergePoints(series: SeriesData, points: ArrayLike<unknown>): SeriesData {
  return mergeSeries(series, normalise(points));
}

/**
 * Add `points` to `series` in place and answer how many steps it gained.
 *
 * The common live case (every new step after the last one held) only pushes; anything else
 * (a late or repeated step) falls back to a full merge whose result replaces the arrays.
 */
export function appendPoints(series: SeriesData, points: ArrayLike<unknown>): number {
  const incoming = normalise(points);
  if (!incoming.steps.length) return 0;
  const before = series.steps.length;
  const last = before ? series.steps[before - 1] : -Infinity;
  if (incoming.steps[0] > last) {
    for (let k = 0; k < incoming.steps.length; k++) {
      series.steps.push(incoming.steps[k]);
      series.values.push(incoming.values[k]);
    }
  } else {
    const merged = mergeSeries(series, incoming);
    series.steps = merged.steps;
    series.values = merged.values;
  }
  return series.steps.length - before;
}

/** Index of the first step >= `step` (binary search). */
export function lowerBound(steps: ArrayLike<number>, step: number): number {
  let lo = 0;
  let hi = steps.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (steps[mid] < step) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The points with lo <= step <= hi. */
export function sliceRange(series: SeriesData, lo: number, hi: number): SeriesData {
  const start = lowerBound(series.steps, lo);
  let stop = Math.max(start, lowerBound(series.steps, hi));
  while (stop < series.steps.length && series.steps[stop] <= hi) stop++;
  return { steps: series.steps.slice(start, stop), values: series.values.slice(start, stop) };
}

export type AlignedData = [number[], ...(number | null)[][]];

/**
 * uPlot's data layout for several series: one x array (the union of every series' steps)
 * and one y array per series, null where that series has no point at that step.
 */
export function alignSeries(list: readonly SeriesData[]): AlignedData {
  if (list.length === 0) return [[]];
  if (list.length === 1) return [list[0].steps.slice(), list[0].values.slice()];
  const sameSteps = list.every(
    (s) => s.steps.length === list[0].steps.length && s.steps.every((step, i) => step === list[0].steps[i]),
  );
  if (sameSteps) return [list[0].steps.slice(), ...list.map((s) => s.values.slice())];
  const xs: number[] = [];
  const heads = new Array<number>(list.length).fill(0);
  // k-way merge of the sorted step arrays (k is small: the series of one chart).
  for (;;) {
    let next = Infinity;
    for (let k = 0; k < list.length; k++) {
      const h = heads[k];
      if (h < list[k].steps.length && list[k].steps[h] < next) next = list[k].steps[h];
    }
    if (next === Infinity) break;
    xs.push(next);
    for (let k = 0; k < list.length; k++) {
      if (heads[k] < list[k].steps.length && list[k].steps[heads[k]] === next) heads[k]++;
    }
  }
  const ys = list.map((s) => {
    const y = new Array<number | null>(xs.length).fill(null);
    let j = 0;
    for (let i = 0; i < xs.length && j < s.steps.length; i++) {
      if (s.steps[j] === xs[i]) {
        y[i] = s.values[j];
        j++;
      }
    }
    return y;
  });
  return [xs, ...ys];
}

/** Points held across series. */
export function countPoints(list: readonly SeriesData[]): number {
  let n = 0;
  for (const s of list) n += s.steps.length;
  return n;
}

/** Values unusable on a log axis (<= 0) become gaps. */
export function positiveOnly(values: readonly (number | null)[]): (number | null)[] {
  return values.map((v) => (v !== null && v > 0 ? v : null));
}

/** The title of a chart's x axis: "step" (a training step, or a sample's index) or "time". */
export function xAxisLabel(xKind: "step" | "time"): string {
  return xKind === "time" ? "time" : "step";
}

/** The x axis title of system metrics logged by the SDK: their step is the sample's index. */
export function sampleAxisLabel(intervalSeconds: number): string {
  return `sample (one every ${intervalSeconds} s)`;
}

/**
 * Series that draw exactly the same points as an earlier one in the list (same steps, same
 * values): id -> the id of the first series it repeats. On a chart the later line would hide
 * the earlier one completely, so the comparison page dashes it and says so.
 */
export function identicalSeries(list: readonly { id: string; data: SeriesData }[]): Map<string, string> {
  const out = new Map<string, string>();
  list.forEach((s, i) => {
    if (!s.data.steps.length) return;
    for (let j = 0; j < i; j++) {
      const other = list[j];
      if (out.has(other.id) || other.data.steps.length !== s.data.steps.length) continue;
      let same = true;
      for (let k = 0; k < s.data.steps.length && same; k++) {
        same = s.data.steps[k] === other.data.steps[k] && Object.is(s.data.values[k], other.data.values[k]);
      }
      if (same) {
        out.set(s.id, other.id);
        return;
      }
    }
  });
  return out;
}
