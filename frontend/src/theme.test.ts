import { darken, DEFAULT_THEME } from "@mantine/core";
import { describe, expect, it } from "vitest";
import { contrastRatio } from "./lib/contrast";
import { BADGE_TEXT, cssVariablesResolver, DIMMED, FILLED, PRIMARY_SHADE, readableFilled, theme } from "./theme";

const c = DEFAULT_THEME.colors;
const WHITE = "#ffffff";
const AA = 4.5;

describe("theme contrast (WCAG 2.2 AA text)", () => {
  it("uses the checked primary shade and dimmed colours", () => {
    expect(theme.primaryShade).toEqual({ light: PRIMARY_SHADE, dark: PRIMARY_SHADE });
    const vars = cssVariablesResolver({ ...DEFAULT_THEME, ...theme } as never);
    expect(vars.light["--mantine-color-dimmed"]).toBe(DIMMED.light);
    expect(vars.dark["--mantine-color-dimmed"]).toBe(DIMMED.dark);
  });

  it("primary text and filled buttons pass in both themes", () => {
    const primary = c.indigo[PRIMARY_SHADE];
    expect(contrastRatio(primary, WHITE)).toBeGreaterThanOrEqual(AA); // links on white
    expect(contrastRatio(WHITE, primary)).toBeGreaterThanOrEqual(AA); // button label
    expect(contrastRatio(primary, c.gray[0])).toBeGreaterThanOrEqual(AA);
    expect(contrastRatio(c.indigo[4], c.dark[7])).toBeGreaterThanOrEqual(AA); // dark links
  });

  it("dimmed text passes on the page and card backgrounds", () => {
    expect(contrastRatio(DIMMED.light, WHITE)).toBeGreaterThanOrEqual(AA);
    expect(contrastRatio(DIMMED.light, c.gray[0])).toBeGreaterThanOrEqual(AA);
    expect(contrastRatio(DIMMED.dark, c.dark[7])).toBeGreaterThanOrEqual(AA);
    expect(contrastRatio(DIMMED.dark, c.dark[6])).toBeGreaterThanOrEqual(AA);
  });

  it("light status badges pass for every colour", () => {
    for (const name of Object.keys(c)) {
      const text = BADGE_TEXT[name] ?? c[name][9];
      expect(contrastRatio(text, c[name][1]), name).toBeGreaterThanOrEqual(AA);
    }
  });

  it("the old colours fail (the test would catch a regression)", () => {
    expect(contrastRatio(c.indigo[6], WHITE)).toBeLessThan(AA);
    expect(contrastRatio(c.gray[6], WHITE)).toBeLessThan(AA);
  });
});

describe("filled and outline colours (white text on them, or them on white)", () => {
  const darkLight = (name: string) => {
    const m = darken(c[name][9], 0.5).match(/\d+(\.\d+)?/g)!.map(Number);
    return `#${m.slice(0, 3).map((v) => Math.round(v).toString(16).padStart(2, "0")).join("")}`;
  };

  it("every colour's filled shade carries white text at AA, in both themes", () => {
    const vars = cssVariablesResolver({ ...DEFAULT_THEME, ...theme } as never);
    for (const name of Object.keys(c)) {
      const filled = FILLED[name] ?? c[name][PRIMARY_SHADE];
      expect(contrastRatio(WHITE, filled), name).toBeGreaterThanOrEqual(AA);
      if (FILLED[name]) {
        expect(vars.light[`--mantine-color-${name}-filled`]).toBe(FILLED[name]);
        expect(vars.dark[`--mantine-color-${name}-filled`]).toBe(FILLED[name]);
        expect(vars.light[`--mantine-color-${name}-outline`]).toBe(FILLED[name]);
      }
    }
    // the ones axe flagged: orange outline badges, green text, the cyan and yellow timeline
    for (const name of ["cyan", "teal", "green", "lime", "yellow", "orange"]) expect(FILLED[name], name).toBeTruthy();
    expect(readableFilled(c.indigo)).toBe(c.indigo[PRIMARY_SHADE]);
  });

  it("dark dimmed text passes on every light-variant background (alerts, badges)", () => {
    for (const name of Object.keys(c)) {
      expect(contrastRatio(DIMMED.dark, darkLight(name)), name).toBeGreaterThanOrEqual(AA);
    }
  });
});
