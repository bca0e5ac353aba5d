// Series colours and chart chrome for both colour schemes.

/** Distinct hues that read on white and on Mantine's dark background. */
export const SERIES_COLOURS = [
  "#4c6ef5", // indigo
  "#f03e3e", // red
  "#37b24d", // green
  "#f59f00", // yellow
  "#ae3ec9", // grape
  "#1098ad", // cyan
  "#f76707", // orange
  "#d6336c", // pink
  "#74b816", // lime
  "#7048e8", // violet
  "#0ca678", // teal
  "#868e96", // gray
] as const;

export function seriesColour(index: number): string {
  return SERIES_COLOURS[((index % SERIES_COLOURS.length) + SERIES_COLOURS.length) % SERIES_COLOURS.length];
}

/** "#rrggbb" with an alpha, for the raw curve drawn faintly under its smoothed version. */
export function withAlpha(hex: string, alpha: number): string {
  const m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(hex);
  if (!m) return hex;
  return `rgba(${parseInt(m[1], 16)}, ${parseInt(m[2], 16)}, ${parseInt(m[3], 16)}, ${alpha})`;
}

export interface ChartChrome {
  axis: string;
  grid: string;
  selection: string;
  font: string;
}

/** Axis, grid and selection colours following Mantine's computed colour scheme. */
export function chartChrome(scheme: "light" | "dark"): ChartChrome {
  return scheme === "dark"
    ? { axis: "#a6a7ab", grid: "rgba(255, 255, 255, 0.09)", selection: "rgba(116, 143, 252, 0.22)", font: "11px system-ui, sans-serif" }
    : { axis: "#495057", grid: "rgba(0, 0, 0, 0.08)", selection: "rgba(76, 110, 245, 0.15)", font: "11px system-ui, sans-serif" };
}
