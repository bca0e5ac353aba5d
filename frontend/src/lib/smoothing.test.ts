import { describe, expect, it } from "vitest";
import { emaSmooth, MAX_SMOOTHING } from "./smoothing";

describe("emaSmooth", () => {
  it("returns the values unchanged at weight 0", () => {
    expect(emaSmooth([3, 1, 4, 1, 5], 0)).toEqual([3, 1, 4, 1, 5]);
  });

  it("starts at the first value thanks to debiasing", () => {
    const out = emaSmooth([10, 10, 10], 0.9);
    for (const v of out) expect(v).toBeCloseTo(10, 10);
  });

  it("matches the debiased EMA formula", () => {
    const w = 0.6;
    const out = emaSmooth([1, 2, 3], w);
    // accumulators: 0.4, 0.4*0.6+0.8=1.04, 1.04*0.6+1.2=1.824
    expect(out[0]).toBeCloseTo(0.4 / (1 - w), 10);
    expect(out[1]).toBeCloseTo(1.04 / (1 - w ** 2), 10);
    expect(out[2]).toBeCloseTo(1.824 / (1 - w ** 3), 10);
  });

  it("lags behind a step change and converges to it", () => {
    const values = [...Array(10).fill(0), ...Array(200).fill(1)];
    const out = emaSmooth(values, 0.9);
    expect(out[10]).toBeGreaterThan(0);
    expect(out[10]).toBeLessThan(0.5);
    expect(out[209]).toBeCloseTo(1, 5);
  });

  it("keeps gaps as null without moving the average", () => {
    const out = emaSmooth([2, null, Number.NaN, undefined, 2], 0.5);
    expect(out[1]).toBeNull();
    expect(out[2]).toBeNull();
    expect(out[3]).toBeNull();
    expect(out[0]).toBeCloseTo(2, 10);
    expect(out[4]).toBeCloseTo(2, 10);
  });

  it("clamps weights outside [0, MAX_SMOOTHING]", () => {
    expect(emaSmooth([1, 5], -3)).toEqual([1, 5]);
    const high = emaSmooth([1, 5], 7);
    const max = emaSmooth([1, 5], MAX_SMOOTHING);
    expect(high).toEqual(max);
    expect(high.every((v) => v !== null && Number.isFinite(v))).toBe(true);
  });

  it("handles empty input and typed arrays", () => {
    expect(emaSmooth([], 0.5)).toEqual([]);
    expect(emaSmooth(new Float64Array([4, 4]), 0.5)).toEqual([4, 4]);
  });
});
