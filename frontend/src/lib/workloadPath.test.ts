import { describe, expect, it } from "vitest";
import { workloadPath, workloadRoute } from "./workloadPath";

describe("workloadRoute", () => {
  it("is the kind-independent collection for the typed client", () => {
    expect(workloadRoute()).toBe("/api/v1/projects/{project}/workloads/{id}/");
    expect(workloadRoute("events/")).toBe("/api/v1/projects/{project}/workloads/{id}/events/");
    expect(workloadRoute("stop/")).toBe("/api/v1/projects/{project}/workloads/{id}/stop/");
    expect(workloadRoute("resilience/")).toBe("/api/v1/projects/{project}/workloads/{id}/resilience/");
  });
});

describe("workloadPath", () => {
  it("fills in the project and the id", () => {
    expect(workloadPath("vision", 42)).toBe("/api/v1/projects/vision/workloads/42/");
    expect(workloadPath("vision", 7, "logs/")).toBe("/api/v1/projects/vision/workloads/7/logs/");
    expect(workloadPath("vision", 3, "events/")).toBe("/api/v1/projects/vision/workloads/3/events/");
  });

  it("escapes the project slug", () => {
    expect(workloadPath("a b/c", 1, "logs/")).toBe("/api/v1/projects/a%20b%2Fc/workloads/1/logs/");
  });
});
