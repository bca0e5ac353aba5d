import { describe, expect, it } from "vitest";
import { buildSweepBody, DEFAULT_SWEEP, mapSweepErrors, type SweepValues } from "./sweepForm";

const values = (over: Partial<SweepValues> = {}): SweepValues => ({
  ...DEFAULT_SWEEP, name: "lr", metric: "val_acc", space: '{"lr": {"type": "float", "low": 0.001, "high": 0.1}}', ...over,
  template: { ...DEFAULT_SWEEP.template, command: "python train.py", cpu: 0.5, memory: "512Mi", maxRuntime: "10m", ...(over.template ?? {}) },
});

describe("buildSweepBody", () => {
  it("sends what POST /sweeps/ takes, the template as a training job without name and priority", () => {
    const { body, errors } = buildSweepBody(values({ algorithm: "asha", seed: 3, maxGpuHours: 2, maxConcurrent: 2 }));
    expect(errors).toEqual({});
    expect(body).toEqual({
      name: "lr", objective: { metric: "val_acc", direction: "maximize" }, algorithm: "asha", max_concurrent: 2, priority: "P4",
      space: { lr: { type: "float", low: 0.001, high: 0.1 } }, budget: { max_trials: 10, max_gpu_hours: 2 }, seed: 3,
      early_stopping: { min_resource: 1, reduction_factor: 3 },
      template: { command: "python train.py", resources: { gpu: "0", cpu: "0.5", memory: "512Mi" }, replicas: 1, max_restarts: 0,
        max_runtime_seconds: 600 },
    });
  });

  it("says what it can before sending: a space that is not JSON, a run time without a unit", () => {
    const { errors } = buildSweepBody(values({ space: "{lr: 1", template: { ...DEFAULT_SWEEP.template, maxRuntime: "10" } }));
    expect(errors.space).toMatch(/^Not JSON/);
    expect(errors["template.maxRuntime"]).toContain("no unit");
  });

  it("puts the API's messages next to their fields, the template's too", () => {
    const mapped = mapSweepErrors({ "objective.metric": ["'x y' is not a metric key."], "template.resources.cpu": ["Too many."],
      "budget.max_trials": ["Ensure this value is greater than or equal to 1."], weird: ["?"] }, "Invalid input.");
    expect(mapped.fields).toEqual({ metric: "'x y' is not a metric key.", "template.cpu": "Too many.",
      maxTrials: "Ensure this value is greater than or equal to 1." });
    expect(mapped.general).toEqual(["weird: ?"]);
    expect(mapSweepErrors({}, "The sweep's template is no longer valid").general).toEqual(["The sweep's template is no longer valid"]);
  });
});
