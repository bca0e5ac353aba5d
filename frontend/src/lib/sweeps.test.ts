import { describe, expect, it } from "vitest";
import {
  bestTrial, importanceBars, objectiveHistory, paramKeys, paramsText, parcoordsTrials, sweepComparePath, type SweepTrial,
} from "./sweeps";

const trial = (number: number, status: string, objective: number | null, extra: Partial<SweepTrial> = {}): SweepTrial => ({
  id: number + 100, number, status, params: { lr: 0.01 * (number + 1), solver: "adam" }, objective, last_value: objective,
  run: number + 10, ...extra,
});

const trials = [trial(0, "succeeded", 0.8), trial(1, "pruned", null, { last_value: 0.2 }), trial(2, "succeeded", 0.9),
  trial(3, "succeeded", 0.85), trial(4, "pending", null, { run: null })];

describe("objectiveHistory", () => {
  it("plots succeeded trials by number with the best so far", () => {
    const { objective, best } = objectiveHistory(trials, "maximize");
    expect(objective).toEqual({ steps: [0, 2, 3], values: [0.8, 0.9, 0.85] });
    expect(best).toEqual({ steps: [0, 2, 3], values: [0.8, 0.9, 0.9] });
  });
  it("minimises", () => {
    expect(objectiveHistory(trials, "minimize").best.values).toEqual([0.8, 0.8, 0.8]);
  });
});

describe("bestTrial", () => {
  it("picks by direction, the earlier on ties", () => {
    expect(bestTrial(trials, "maximize")?.number).toBe(2);
    expect(bestTrial(trials, "minimize")?.number).toBe(0);
    expect(bestTrial([trial(5, "succeeded", 1), trial(6, "succeeded", 1)], "maximize")?.number).toBe(5);
    expect(bestTrial([trial(1, "failed", null)], "maximize")).toBeNull();
  });
});

describe("parcoordsTrials", () => {
  it("uses the objective, or where a pruned trial stopped; leaves pending trials out", () => {
    const runs = parcoordsTrials(trials);
    expect(runs.map((r) => r.metric)).toEqual([0.8, 0.2, 0.9, 0.85]);
    expect(runs[1].name).toBe("trial 1 (pruned)");
  });
});

describe("links and labels", () => {
  it("compares the runs the trials have", () => {
    expect(sweepComparePath("vision", trials)).toBe("/projects/vision/compare?runs=10,11,12,13");
    expect(sweepComparePath("vision", [trial(0, "pending", null, { run: null })])).toBeNull();
  });
  it("keeps the space's order for the axes", () => {
    expect(paramKeys([{ name: "solver" }, { name: "lr" }, { name: "momentum" }], trials)).toEqual(["solver", "lr"]);
  });
  it("sorts importances and turns them into percent", () => {
    expect(importanceBars({ lr: 0.25, solver: 0.75 })).toEqual([{ name: "solver", percent: 75 }, { name: "lr", percent: 25 }]);
    expect(importanceBars({})).toEqual([]);
  });
  it("writes params on one line", () => {
    expect(paramsText({ lr: 0.0123456, solver: "sgd" })).toBe("lr=0.01235, solver=sgd");
  });
});

describe("trial colours (issue 46, item 9)", () => {
  it("gives each trial the colour its run has in the comparison view (runs in id order)", () => {
    const trials = [trial(0, "succeeded", 0.5, { run: 30 }), trial(1, "pruned", 0.2, { run: 12 }), trial(2, "pending", null, { run: null })];
    const colours = ["blue", "red", "green"];
    const lines = parcoordsTrials(trials, (i) => colours[i]);
    expect(lines.map((l) => [l.id, l.color])).toEqual([[30, "red"], [12, "blue"]]);
    expect(sweepComparePath("p", trials)).toBe("/projects/p/compare?runs=12,30");
  });
});
