// Layout of the parallel-coordinates plot on the compare page: one vertical axis per param
// (numeric, log-numeric or categorical) plus a final axis for the chosen metric, one polyline
// per run. Pure geometry, no DOM; unit-tested in parcoords.test.ts.

export interface ParcoordsRun {
  id: number;
  name: string;
  params: Record<string, unknown>;
  /** the run's value of the chosen metric (last, min or max), null when it has none */
  metric: number | null;
  /** The run's own colour, the one its curve has on the same page (one colour per run
   * everywhere); without it, lines are coloured by the metric's value. */
  color?: string;
}

export interface Tick {
  y: number;
  label: string;
}

export interface Axis {
  key: string;
  label: string;
  kind: "numeric" | "log" | "categorical";
  source: "param" | "metric";
  x: number;
  ticks: Tick[];
}

export interface PlotPoint {
  x: number;
  y: number;
}

export interface ParcoordsLine {
  runId: number;
  name: string;
  metric: number | null;
  color: string;
  /** one point per axis, null where the run has no value */
  points: (PlotPoint | null)[];
}

export interface Margins {
  top: number;
  right: number;
  bottom: number;
  left: number;
}

export interface ParcoordsLayout {
  axes: Axis[];
  lines: ParcoordsLine[];
  metricRange: [number, number] | null;
  /** What a line's colour means: its run ("run", the legend names each) or the metric ("metric", a ramp). */
  colourBy: "run" | "metric";
}

export type MetricMode = "last" | "min" | "max";

export const MISSING_COLOUR = "#868e96";

/** A run's value of `key` from its summaries ({key: {last, min, max, ...}}), by mode. */
export function metricValue(summaries: Record<string, unknown> | undefined, key: string, mode: MetricMode): number | null {
  const summary = summaries?.[key];
  if (!summary || typeof summary !== "object") return null;
  const value = (summary as Record<string, unknown>)[mode];
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

/** How a param value is shown and compared: objects as JSON, missing as null. */
export function paramText(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  try {
    return JSON.stringify(value);
  } catch {
    return String(value);
  }
}

/** Param keys whose values are not all the same across runs (a missing value counts as different). */
export function differingKeys(runs: readonly { params: Record<string, unknown> }[], keys: readonly string[]): string[] {
  return keys.filter((key) => new Set(runs.map((r) => (key in r.params ? `v:${paramText(r.params[key])}` : "missing"))).size > 1);
}

/** About `count` round tick values covering [min, max] (1, 2, 5 × 10^n steps). */
export function niceTicks(min: number, max: number, count = 5): number[] {
  if (!Number.isFinite(min) || !Number.isFinite(max)) return [];
  if (min === max) return [min];
  if (min > max) [min, max] = [max, min];
  const rough = (max - min) / Math.max(1, count);
  const power = 10 ** Math.floor(Math.log10(rough));
  const fraction = rough / power;
  const step = (fraction <= 1.5 ? 1 : fraction <= 3 ? 2 : fraction <= 7 ? 5 : 10) * power;
  const out: number[] = [];
  const first = Math.ceil(min / step - 1e-9);
  const last = Math.floor(max / step + 1e-9);
  for (let i = first; i <= last; i++) out.push(Number((i * step).toPrecision(12)));
  return out;
}

export function tickLabel(value: number): string {
  const abs = Math.abs(value);
  if (abs !== 0 && (abs >= 1e5 || abs < 1e-3)) return value.toExponential(0).replace("e+", "e");
  return String(Number(value.toPrecision(4)));
}

// Blue → cyan → green → orange → red: every stop has a middle lightness, so lines read on
// the light and the dark theme alike.
const RAMP: [number, number, number][] = [
  [66, 99, 235],
  [16, 152, 173],
  [55, 178, 77],
  [245, 159, 0],
  [224, 49, 49],
];

/** Colour of a metric value within [min, max] (t = 0 blue, 1 red). */
export function rampColour(value: number | null, min: number, max: number): string {
  if (value === null || !Number.isFinite(value)) return MISSING_COLOUR;
  const t = max > min ? Math.min(1, Math.max(0, (value - min) / (max - min))) : 0.5;
  const pos = t * (RAMP.length - 1);
  const i = Math.min(RAMP.length - 2, Math.floor(pos));
  const f = pos - i;
  const [r, g, b] = RAMP[i].map((c, k) => Math.round(c + (RAMP[i + 1][k] - c) * f));
  return `rgb(${r}, ${g}, ${b})`;
}

interface AxisInput {
  key: string;
  label: string;
  source: "param" | "metric";
  values: unknown[];
}

function buildAxis(input: AxisInput, x: number, top: number, bottom: number): { axis: Axis; ys: (number | null)[] } {
  const present = input.values.filter((v) => v !== undefined && v !== null);
  const numeric = present.length > 0 && present.every((v) => typeof v === "number" && Number.isFinite(v));
  const span = bottom - top;
  if (numeric || input.source === "metric") {
    const nums = present.filter((v): v is number => typeof v === "number" && Number.isFinite(v));
    if (!nums.length) {
      return {
        axis: { key: input.key, label: input.label, kind: "numeric", source: input.source, x, ticks: [] },
        ys: input.values.map(() => null),
      };
    }
    let min = Math.min(...nums);
    let max = Math.max(...nums);
    const log = min > 0 && max / min >= 100;
    if (log) {
      const lo = Math.log10(min);
      const hi = Math.log10(max);
      const y = (v: number) => bottom - ((Math.log10(v) - lo) / (hi - lo)) * span;
      const ticks: Tick[] = [];
      for (let p = Math.ceil(lo - 1e-9); p <= Math.floor(hi + 1e-9); p++) ticks.push({ y: y(10 ** p), label: tickLabel(10 ** p) });
      return {
        axis: { key: input.key, label: input.label, kind: "log", source: input.source, x, ticks },
        ys: input.values.map((v) => (typeof v === "number" && v > 0 ? y(v) : null)),
      };
    }
    if (min === max) {
      const pad = min === 0 ? 1 : Math.abs(min) * 0.1;
      min -= pad;
      max += pad;
    }
    const y = (v: number) => bottom - ((v - min) / (max - min)) * span;
    const ticks = niceTicks(min, max, 4).map((v) => ({ y: y(v), label: tickLabel(v) }));
    return {
      axis: { key: input.key, label: input.label, kind: "numeric", source: input.source, x, ticks },
      ys: input.values.map((v) => (typeof v === "number" && Number.isFinite(v) ? y(v) : null)),
    };
  }
  const categories = [...new Set(present.map((v) => paramText(v) as string))].sort((a, b) =>
    a.localeCompare(b, undefined, { numeric: true }),
  );
  const pos = (i: number) => (categories.length === 1 ? top + span / 2 : bottom - (i / (categories.length - 1)) * span);
  const index = new Map(categories.map((c, i) => [c, i]));
  return {
    axis: {
      key: input.key, label: input.label, kind: "categorical", source: input.source, x,
      ticks: categories.map((c, i) => ({ y: pos(i), label: c })),
    },
    ys: input.values.map((v) => {
      const text = paramText(v);
      return text === null ? null : pos(index.get(text) as number);
    }),
  };
}

/**
 * Place axes evenly across the width (inside the margins) and one polyline per run.
 * Missing values leave a gap in that run's line; the metric axis is always last.
 */
export function layoutParcoords(
  runs: readonly ParcoordsRun[],
  paramKeys: readonly string[],
  metricLabel: string,
  width: number,
  height: number,
  margins: Margins,
): ParcoordsLayout {
  const inputs: AxisInput[] = paramKeys.map((key) => ({
    key, label: key, source: "param", values: runs.map((r) => r.params[key]),
  }));
  inputs.push({ key: "__metric__", label: metricLabel, source: "metric", values: runs.map((r) => r.metric) });
  const top = margins.top;
  const bottom = Math.max(top + 1, height - margins.bottom);
  const left = margins.left;
  const right = Math.max(left, width - margins.right);
  const gap = inputs.length > 1 ? (right - left) / (inputs.length - 1) : 0;
  const built = inputs.map((input, i) => buildAxis(input, inputs.length > 1 ? left + i * gap : (left + right) / 2, top, bottom));
  const metrics = runs.map((r) => r.metric).filter((m): m is number => m !== null && Number.isFinite(m));
  const metricRange: [number, number] | null = metrics.length ? [Math.min(...metrics), Math.max(...metrics)] : null;
  const colourBy = runs.length > 0 && runs.every((run) => !!run.color) ? "run" : "metric";
  const lines = runs.map((run, r) => ({
    runId: run.id,
    name: run.name,
    metric: run.metric,
    color: colourBy === "run"
      ? (run.color as string)
      : metricRange ? rampColour(run.metric, metricRange[0], metricRange[1]) : MISSING_COLOUR,
    points: built.map(({ axis, ys }) => (ys[r] === null ? null : { x: axis.x, y: ys[r] as number })),
  }));
  return { axes: built.map((b) => b.axis), lines, metricRange, colourBy };
}

/** SVG path data through the points, lifting the pen over missing ones. */
export function linePath(points: readonly (PlotPoint | null)[]): string {
  const parts: string[] = [];
  let drawing = false;
  for (const p of points) {
    if (!p) {
      drawing = false;
      continue;
    }
    parts.push(`${drawing ? "L" : "M"}${round(p.x)} ${round(p.y)}`);
    drawing = true;
  }
  return parts.join(" ");
}

function round(v: number): number {
  return Math.round(v * 10) / 10;
}

/**
 * Where to centre an axis title of about `textWidth` pixels so that it stays inside a chart
 * `width` wide: over its axis when it fits, else moved in just enough (the first and last axes
 * sit `margins.left/right` from the edges, less than half a long title: "weight_error (last)"
 * on the metric axis used to run off the right edge).
 */
export function axisTitleX(axisX: number, textWidth: number, width: number, pad = 2): number {
  const half = textWidth / 2;
  const lo = half + pad;
  const hi = width - half - pad;
  if (lo > hi) return width / 2;
  return Math.min(Math.max(axisX, lo), hi);
}

/** A rough width of a title in the chart's 12 px font (bold is wider): enough to keep it inside. */
export function titleWidth(text: string, bold = true): number {
  return text.length * (bold ? 7.6 : 6.8);
}
