import { describe, expect, it } from "vitest";
import { isWorkloadKind } from "./status";
import { workloadPath, workloadRoute } from "./workloadPath";

describe("workloadRoute", () => {
  it("picks each kind's collection for the typed client", () => {
    expect(workloadRoute("training")).toBe("/api/v1/projects/{project}/training-jobs/{id}/");
    expect(workloadRoute("notebook", "events/")).toBe("/api/v1/projects/{project}/notebooks/{id}/events/");
    expect(workloadRoute("deployment", "stop/")).toBe("/api/v1/projects/{project}/deployments/{id}/stop/");
  });
});

describe("workloadPath", () => {
  it("fills in the project and the id", () => {
    expect(workloadPath("training", "vision", 42)).toBe("/api/v1/projects/vision/training-jobs/42/");
    expect(workloadPath("notebook", "vision", 7, "logs/")).toBe("/api/v1/projects/vision/notebooks/7/logs/");
    expect(workloadPath("deployment", "vision", 3, "events/")).toBe("/api/v1/projects/vision/deployments/3/events/");
  });

  it("escapes the project slug", () => {
    expect(workloadPath("training", "a b/c", 1, "logs/")).toBe("/api/v1/projects/a%20b%2Fc/training-jobs/1/logs/");
  });
});

describe("isWorkloadKind", () => {
  it("accepts the three kinds only", () => {
    expect(["training", "notebook", "deployment"].every(isWorkloadKind)).toBe(true);
    expect(isWorkloadKind("training-jobs")).toBe(false);
    expect(isWorkloadKind("")).toBe(false);
  });
});
