import { createTheme, type CSSVariablesResolver } from "@mantine/core";

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
export const PRIMARY_SHADE = 8;
export const DIMMED = { light: "#495057", dark: "#b8b8b8" } as const;
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
    ...Object.fromEntries(Object.entries(BADGE_TEXT).map(([name, hex]) => [`--mantine-color-${name}-light-color`, hex])),
  },
  dark: { "--mantine-color-dimmed": DIMMED.dark },
});
