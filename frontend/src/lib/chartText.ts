// Text alternatives of a line chart (issue 46, item 16; WCAG 1.1.1): a one-sentence summary for
// its accessible name, and its points as a table or CSV. Pure; unit-tested in chartText.test.ts.
import { alignSeries, type SeriesData } from "./series";

export interface NamedSeries {
  label: string;
  data: SeriesData;
}

export type XKind = "step" | "time";

export function formatXValue(value: number, kind: XKind): string {
  if (kind === "time") return new Date(value * 1000).toLocaleTimeString();
  return Math.round(value).toLocaleString();
}

/** "Loss: 2 series over steps 0–39. run-a latest 0.05 (min 0.05, max 2); run-b latest …" */
export function chartSummary(
  title: string,
  series: readonly NamedSeries[],
  xKind: XKind,
  formatValue: (value: number) => string,
  xLabel = xKind === "time" ? "time" : "steps",
): string {
  const withPoints = series.filter((s) => s.data.steps.length > 0);
  if (!withPoints.length) return `${title}: no points yet.`;
  let lo = Infinity;
  let hi = -Infinity;
  for (const s of withPoints) {
    lo = Math.min(lo, s.data.steps[0]);
    hi = Math.max(hi, s.data.steps[s.data.steps.length - 1]);
  }
  const range = lo === hi ? `at ${xLabel} ${formatXValue(lo, xKind)}` : `over ${xLabel} ${formatXValue(lo, xKind)}–${formatXValue(hi, xKind)}`;
  const parts = withPoints.map((s) => {
    let min = Infinity;
    let max = -Infinity;
    for (const v of s.data.values) {
      if (!Number.isFinite(v)) continue;
      if (v < min) min = v;
      if (v > max) max = v;
    }
    const last = s.data.values[s.data.values.length - 1];
    if (min === Infinity) return `${s.label}: no values`;
    return `${s.label} latest ${formatValue(last)} (min ${formatValue(min)}, max ${formatValue(max)})`;
  });
  const count = `${withPoints.length} series`;
  return `${title}: ${count} ${range}. ${parts.join("; ")}.`;
}

/** The points as rows: [x, value of each series or null]. */
export function chartRows(series: readonly NamedSeries[]): (number | null)[][] {
  const aligned = alignSeries(series.map((s) => s.data));
  const rows: (number | null)[][] = [];
  for (let i = 0; i < aligned[0].length; i++) rows.push(aligned.map((column) => (column[i] as number | null | undefined) ?? null));
  return rows;
}

function csvCell(value: string): string {
  return /[",\n\r]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value;
}

/** CSV with a header row; time is written as ISO 8601, an empty cell where a series has no point. */
export function chartCsv(series: readonly NamedSeries[], xKind: XKind, xLabel?: string): string {
  const header = [xLabel ?? (xKind === "time" ? "time" : "step"), ...series.map((s) => s.label)].map(csvCell).join(",");
  const lines = chartRows(series).map((row) =>
    row
      .map((v, i) => {
        if (v === null) return "";
        if (i === 0 && xKind === "time") return new Date(v * 1000).toISOString();
        return String(v);
      })
      .join(","),
  );
  return [header, ...lines].join("\n") + "\n";
}

/** A file name for the CSV: the title, lower-case, dashes for anything else. */
export function csvFileName(title: string): string {
  const stem = title.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "");
  return `${stem || "chart"}.csv`;
}
