import { describe, expect, it } from "vitest";
import {
  alignSeries, appendPoints, countPoints, emptySeries, fromPoints, lowerBound, mergePoints, mergeSeries,
  positiveOnly, sliceRange, type SeriesData,
} from "./series";

const s = (steps: number[], values: number[]): SeriesData => ({ steps, values });

describe("fromPoints", () => {
  it("sorts by step and keeps the last value of a repeated step", () => {
    expect(fromPoints([[3, 0.3], [1, 0.1], [2, 0.2], [1, 0.15]])).toEqual(s([1, 2, 3], [0.15, 0.2, 0.3]));
  });

  it("accepts [step, value, time] and drops invalid points", () => {
    expect(fromPoints([[1, 0.5, 1717243500.1], [null, 1], [2], "x", [3, "no"], [4, 0.4]])).toEqual(
      s([1, 4], [0.5, 0.4]),
    );
  });
});

describe("mergeSeries / mergePoints", () => {
  it("interleaves and lets the newer series win on equal steps", () => {
    expect(mergeSeries(s([1, 3, 5], [1, 3, 5]), s([2, 3, 6], [20, 30, 60]))).toEqual(
      s([1, 2, 3, 5, 6], [1, 20, 30, 5, 60]),
    );
  });

  it("does not mutate its inputs", () => {
    const a = s([1, 2], [1, 2]);
    const merged = mergePoints(a, [[0, 0], [2, 9]]);
    expect(a).toEqual(s([1, 2], [1, 2]));
    expect(merged).toEqual(s([0, 1, 2], [0, 1, 9]));
  });

  it("handles empty sides", () => {
    expect(mergeSeries(emptySeries(), s([1], [1]))).toEqual(s([1], [1]));
    expect(mergeSeries(s([1], [1]), emptySeries())).toEqual(s([1], [1]));
  });
});

describe("appendPoints", () => {
  it("pushes points after the last step in place", () => {
    const target = s([1, 2], [1, 2]);
    const steps = target.steps;
    expect(appendPoints(target, [[3, 3], [4, 4]])).toBe(2);
    expect(target).toEqual(s([1, 2, 3, 4], [1, 2, 3, 4]));
    expect(target.steps).toBe(steps); // fast path: same array, no copy
  });

  it("merges late and repeated steps, keeping order and uniqueness", () => {
    const target = s([1, 2, 5], [1, 2, 5]);
    expect(appendPoints(target, [[5, 50], [3, 3], [6, 6]])).toBe(2);
    expect(target).toEqual(s([1, 2, 3, 5, 6], [1, 2, 3, 50, 6]));
  });

  it("answers 0 for nothing new", () => {
    const target = s([1], [1]);
    expect(appendPoints(target, [])).toBe(0);
    expect(appendPoints(target, [[1, 7]])).toBe(0);
    expect(target.values).toEqual([7]);
  });

  it("keeps steps strictly increasing over many random frames", () => {
    const target = emptySeries();
    const truth = new Map<number, number>();
    let seed = 7;
    const rand = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
    for (let frame = 0; frame < 200; frame++) {
      const points: [number, number][] = [];
      for (let k = 0; k < 5; k++) {
        const step = Math.floor(rand() * 300);
        const value = rand();
        points.push([step, value]);
        truth.set(step, value);
      }
      appendPoints(target, points);
    }
    for (let i = 1; i < target.steps.length; i++) expect(target.steps[i]).toBeGreaterThan(target.steps[i - 1]);
    expect(target.steps.length).toBe(truth.size);
    target.steps.forEach((step, i) => expect(target.values[i]).toBe(truth.get(step)));
  });
});

describe("ranges", () => {
  it("finds lower bounds", () => {
    expect(lowerBound([1, 3, 5], 0)).toBe(0);
    expect(lowerBound([1, 3, 5], 3)).toBe(1);
    expect(lowerBound([1, 3, 5], 4)).toBe(2);
    expect(lowerBound([1, 3, 5], 9)).toBe(3);
  });

  it("slices an inclusive step range", () => {
    const series = s([1, 2, 3, 4, 5], [10, 20, 30, 40, 50]);
    expect(sliceRange(series, 2, 4)).toEqual(s([2, 3, 4], [20, 30, 40]));
    expect(sliceRange(series, 2.5, 3.5)).toEqual(s([3], [30]));
    expect(sliceRange(series, 6, 9)).toEqual(s([], []));
  });
});

describe("alignSeries", () => {
  it("returns an empty x for no series", () => {
    expect(alignSeries([])).toEqual([[]]);
  });

  it("copies a single series", () => {
    const one = s([1, 2], [3, 4]);
    const aligned = alignSeries([one]);
    expect(aligned).toEqual([[1, 2], [3, 4]]);
    expect(aligned[0]).not.toBe(one.steps);
  });

  it("shares x when every series has the same steps", () => {
    expect(alignSeries([s([1, 2], [1, 2]), s([1, 2], [5, 6])])).toEqual([[1, 2], [1, 2], [5, 6]]);
  });

  it("fills gaps with null on the union of steps", () => {
    expect(alignSeries([s([1, 3], [1, 3]), s([2, 3, 4], [20, 30, 40])])).toEqual([
      [1, 2, 3, 4],
      [1, null, 3, null],
      [null, 20, 30, 40],
    ]);
  });

  it("counts points across series", () => {
    expect(countPoints([s([1, 2], [1, 2]), s([5], [5])])).toBe(3);
  });

  it("turns non-positive values into gaps for log axes", () => {
    expect(positiveOnly([1, 0, -2, null, 3])).toEqual([1, null, null, null, 3]);
  });
});
