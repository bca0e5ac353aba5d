import { describe, expect, it } from "vitest";
import {
  allMetricKeys, applyRunsFrame, comparePath, defaultMetricKeys, latestFromSummaries, parseRunIds, workloadPath,
} from "./runs";
import type { LiveFrame } from "../live/socket";

/** A frame as it may arrive off the wire (unchecked): the reducers must cope with anything. */
const wire = (frame: object) => frame as unknown as LiveFrame;

describe("latestFromSummaries", () => {
  it("takes each key's last value and step", () => {
    expect(
      latestFromSummaries([
        { id: 7, status: "running", summaries: { loss: { last: 0.4, last_step: 100, count: 3 }, bad: null } },
        { id: 9, status: "finished", summaries: {} },
      ]),
    ).toEqual({ 7: { loss: [100, 0.4] }, 9: {} });
  });
});

describe("applyRunsFrame", () => {
  const known = new Set([7, 9]);

  it("moves latest values forward and never back", () => {
    const latest = { 7: { loss: [100, 0.4] as [number, number] } };
    const frame = wire({
      topic: "runs", type: "runs.latest",
      runs: { "7": { loss: [102, 0.39, 1717243501.2], acc: [100, 0.91, 1] }, "9": { loss: [5, 1.2, 1] } },
    });
    const out = applyRunsFrame(latest, {}, frame, known);
    expect(out.latest).toEqual({ 7: { loss: [102, 0.39], acc: [100, 0.91] }, 9: { loss: [5, 1.2] } });
    expect(latest).toEqual({ 7: { loss: [100, 0.4] } });
    expect(out.unknown).toEqual([]);
    const stale = applyRunsFrame(out.latest, {}, { topic: "runs", type: "runs.latest", runs: { "7": { loss: [50, 9] } } }, known);
    expect(stale.latest).toBe(out.latest);
  });

  it("reports runs it does not know", () => {
    const out = applyRunsFrame({}, {}, { topic: "runs", type: "runs.latest", runs: { "12": { loss: [1, 2, 3] } } }, known);
    expect(out.unknown).toEqual([12]);
  });

  it("changes statuses on run.status", () => {
    const out = applyRunsFrame({}, { 9: "running" }, { topic: "runs", type: "run.status", run: 9, status: "failed" }, known);
    expect(out.statuses).toEqual({ 9: "failed" });
    const same = applyRunsFrame({}, out.statuses, { topic: "runs", type: "run.status", run: 9, status: "failed" }, known);
    expect(same.statuses).toBe(out.statuses);
  });

  it("ignores other frames and malformed points", () => {
    const latest = {};
    expect(applyRunsFrame(latest, {}, { topic: "runs", type: "subscribed" }, known).latest).toBe(latest);
    const bad = applyRunsFrame(latest, {}, wire({ topic: "runs", type: "runs.latest", runs: { "7": { loss: "x" }, x: {} } }), known);
    expect(bad.latest).toBe(latest);
  });
});

describe("metric keys", () => {
  it("prefers losses, then accuracies, then common keys, never system keys", () => {
    expect(
      defaultMetricKeys([
        ["system/cpu_percent", "lr", "val_acc", "train_loss"],
        ["lr", "val_acc", "train_loss", "epoch"],
        ["lr"],
      ]),
    ).toEqual(["train_loss", "val_acc", "lr"]);
    expect(defaultMetricKeys([["system/cpu_percent"]])).toEqual([]);
  });

  it("lists all keys with system keys last", () => {
    expect(allMetricKeys([["system/cpu_percent", "loss"], ["acc", "loss"]])).toEqual(["acc", "loss", "system/cpu_percent"]);
  });
});

describe("paths", () => {
  it("parses ?runs=", () => {
    expect(parseRunIds("3, 1,x,1,0,-2,2.5,7")).toEqual([3, 1, 7]);
    expect(parseRunIds(null)).toEqual([]);
  });

  it("builds compare and workload paths", () => {
    expect(comparePath("vision", new Set([9, 2]))).toBe("/projects/vision/compare?runs=2,9");
    expect(workloadPath("vision", "training", 4)).toBe("/projects/vision/workloads/training/4");
  });
});
