import { describe, expect, it } from "vitest";
import { titleFor } from "./titles";

describe("titleFor: one title per route", () => {
  it.each([
    ["/signin", "Sign in · Cairn"],
    ["/projects/dash/workloads", "Workloads · dash · Cairn"],
    ["/projects/dash/workloads/new", "Submit work · dash · Cairn"],
    ["/projects/dash/workloads/training/42", "Training job 42 · dash · Cairn"],
    ["/projects/dash/sweeps/3", "Sweep 3 · dash · Cairn"],
    ["/projects/dash/storage", "Storage · dash · Cairn"],
    ["/cluster", "Cluster · Cairn"],
    ["/tokens", "API tokens · Cairn"],
    ["/nowhere", "Page not found · Cairn"],
  ])("%s", (path, title) => {
    expect(titleFor(path, (kind) => (kind === "training" ? "Training job" : kind))).toBe(title);
  });

  it("names a workload's kind by the label it is given (the server's), else by its name", () => {
    expect(titleFor("/projects/dash/workloads/batch-eval/7")).toBe("batch-eval 7 · dash · Cairn");
  });
});
