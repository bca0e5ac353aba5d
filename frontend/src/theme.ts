import { createTheme, darken, DEFAULT_THEME, type CSSVariablesResolver } from "@mantine/core";
import { contrastRatio } from "./lib/contrast";

// Colours chosen for WCAG 2.2 AA (4.5:1 for text), ratios computed with
// src/lib/contrast.ts and asserted in src/theme.test.ts:
// - primary shade 8 (#3b5bdb) instead of 6 (#4c6ef5, 4.32:1): links and
//   outline text on white 5.67:1, white text on filled buttons 5.67:1. Dark
//   theme links stay indigo-4 (#748ffc) on #242424: 5.23:1.
// - dimmed text gray-7 (#495057) instead of gray-6 (#868e96, 3.32:1): 8.18:1
//   on white, 7.76:1 on gray-0; dark theme dark-1 (#b8b8b8) instead of dark-2
//   (4.04:1): 7.83:1 on #242424, 6.85:1 on dark-6 cards.
// - light badges draw colour-9 text on colour-1; for the colours where that is
//   under or near 4.5:1 the text is darker: yellow 2.69 -> 5.98, green 3.81 ->
//   6.54, orange 3.62 -> 6.32, teal 4.33 -> 7.23, lime 3.33 -> 5.93, red 4.51
//   -> 6.27, cyan 4.77 -> 6.60 (on colour-1). Dark-theme light
//   badges (colour-0 on colour-9 darkened 50%) already pass.
// - filled colours (white text on them: buttons, filled badges, the status
//   timeline) and, in the light theme, outline and coloured text (on white):
//   shade 8 is under 4.5:1 with white for cyan, teal, green, lime, yellow and
//   orange; those use shade 9, darkened until it passes (FILLED below).
// - dark theme dimmed #bebebe: 4.76:1 even on the darkest light-variant
//   background (yellow, #733c00), 7.31:1 on dark-6 cards.
export const PRIMARY_SHADE = 8;
export const DIMMED = { light: "#495057", dark: "#bebebe" } as const;
/** WCAG AA for normal text, with a margin over axe's rounding. */
const AA_TARGET = 4.6;

function toHex(colour: string): string {
  if (colour.startsWith("#")) return colour;
  const [r, g, b] = (colour.match(/\d+(\.\d+)?/g) ?? []).map(Number);
  return `#${[r, g, b].map((v) => Math.round(v).toString(16).padStart(2, "0")).join("")}`;
}

/** The filled shade of `name` that carries white text at AA: shade 8 when it does, else shade 9
 * darkened in 2% steps until it does. */
export function readableFilled(shades: readonly string[]): string {
  if (contrastRatio(shades[PRIMARY_SHADE], "#ffffff") >= 4.5) return shades[PRIMARY_SHADE];
  for (let k = 0; k <= 1; k += 0.02) {
    const candidate = toHex(darken(shades[9], k));
    if (contrastRatio(candidate, "#ffffff") >= AA_TARGET) return candidate;
  }
  return "#000000";
}

/** Colours whose shade 8 fails with white, and what they use instead. */
export const FILLED: Record<string, string> = Object.fromEntries(
  Object.entries(DEFAULT_THEME.colors)
    .map(([name, shades]) => [name, readableFilled(shades)] as const)
    .filter(([name, hex]) => hex !== DEFAULT_THEME.colors[name][PRIMARY_SHADE]),
);

function filledVariables(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, hex] of Object.entries(FILLED)) {
    out[`--mantine-color-${name}-filled`] = hex;
    out[`--mantine-color-${name}-filled-hover`] = toHex(darken(hex, 0.12));
  }
  return out;
}
export const BADGE_TEXT: Record<string, string> = {
  yellow: "#8f4a00",
  green: "#1e612b",
  orange: "#98320b",
  teal: "#065940",
  lime: "#406809",
  red: "#a12222",
  cyan: "#095b6a",
};

export const theme = createTheme({
  primaryColor: "indigo",
  primaryShade: { light: PRIMARY_SHADE, dark: PRIMARY_SHADE },
  defaultRadius: "sm",
  fontFamily: "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif",
  fontFamilyMonospace: "ui-monospace, 'DejaVu Sans Mono', Menlo, monospace",
});

export const cssVariablesResolver: CSSVariablesResolver = () => ({
  variables: {},
  light: {
    "--mantine-color-dimmed": DIMMED.light,
    ...filledVariables(),
    // outline buttons and badges: their text is the colour, on white
    ...Object.fromEntries(Object.entries(FILLED).map(([name, hex]) => [`--mantine-color-${name}-outline`, hex])),
    ...Object.fromEntries(Object.entries(BADGE_TEXT).map(([name, hex]) => [`--mantine-color-${name}-light-color`, hex])),
  },
  dark: { "--mantine-color-dimmed": DIMMED.dark, ...filledVariables() },
});
