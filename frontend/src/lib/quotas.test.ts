import { describe, expect, it } from "vitest";
import { budgetColour, quotaView, usageBar, type QuotaLike } from "./quotas";

const DOC_EXAMPLE: QuotaLike = {
  id: 5, pool: "a100",
  nominal_gpu_milli: 4000, nominal_cpu_milli: 64000, nominal_memory_mb: 262144,
  borrowing_limit_gpu_milli: 2000, lending_limit_gpu_milli: null,
  gpu_hour_budget: "500.00", budget_period: "month",
  usage: {
    allocated_gpu_milli: 5500, allocated_cpu_milli: 40000, allocated_memory_mb: 131072,
    used_gpu_milli: 5500, borrowed_gpu_milli: 1500, lendable_gpu_milli: 0,
    queued_gpu_milli: 9000, waiting_gpu_milli: { capacity: 1000, quota_limit: 8000 },
    gpu_hours_this_period: 123.456, gpu_hour_budget: 500.0, budget_left_gpu_hours: 376.544,
    period_start: "2025-06-01T00:00:00Z", period_end: "2025-07-01T00:00:00Z",
  },
};

describe("usageBar", () => {
  it("within the nominal", () => {
    expect(usageBar(4000, 1000)).toEqual({ within: 25, borrowed: 0, scale: 4000 });
    expect(usageBar(4000, 4000)).toEqual({ within: 100, borrowed: 0, scale: 4000 });
  });
  it("borrowing beyond it: the bar scales to the use", () => {
    expect(usageBar(4000, 5000)).toEqual({ within: 80, borrowed: 20, scale: 5000 });
    expect(usageBar(0, 2000)).toEqual({ within: 0, borrowed: 100, scale: 2000 });
  });
  it("nothing at all", () => {
    expect(usageBar(0, 0)).toEqual({ within: 0, borrowed: 0, scale: 0 });
  });
});

describe("quotaView", () => {
  it("reads the documented example", () => {
    const v = quotaView(DOC_EXAMPLE);
    expect(v).toMatchObject({
      pool: "a100", nominal: 4000, used: 5500, borrowed: 1500, lendable: 0, borrowingLimit: 2000, lendingLimit: null,
      gpuHours: 123.456, budget: 500, budgetLeft: 376.544, period: "month", periodEnd: "2025-07-01T00:00:00Z",
      cpuNominal: 64000, cpuUsed: 40000, budgetPercent: 24.7,
    });
    expect(v.bar).toEqual({ within: 72.7, borrowed: 27.3, scale: 5500 });
    expect(v.queued).toBe(9000);
    expect(v.waiting).toEqual([{ kind: "quota_limit", milli: 8000 }, { kind: "capacity", milli: 1000 }]);
  });
  it("nothing queued, or a split without its total", () => {
    expect(quotaView({ id: 3, pool: "l4", usage: {} })).toMatchObject({ queued: 0, waiting: [] });
    const v = quotaView({ id: 4, pool: "l4", usage: { waiting_gpu_milli: { undecided: 500, budget: 0, reserved: 1500 } } });
    expect(v.queued).toBe(2000);
    expect(v.waiting).toEqual([{ kind: "reserved", milli: 1500 }, { kind: "undecided", milli: 500 }]);
  });
  it("derives borrowed, lendable and budget left when usage lacks them", () => {
    const v = quotaView({
      id: 1, pool: "l4", nominal_gpu_milli: 4000, lending_limit_gpu_milli: 1000, gpu_hour_budget: "10.00",
      usage: { allocated_gpu_milli: 1000, gpu_hours_this_period: 12 },
    });
    expect(v).toMatchObject({ used: 1000, borrowed: 0, lendable: 1000, budget: 10, budgetLeft: 0, budgetPercent: 100 });
    const unlimited = quotaView({ id: 2, pool: "l4", nominal_gpu_milli: 4000, usage: { allocated_gpu_milli: 1000 } });
    expect(unlimited).toMatchObject({ lendable: 3000, budget: null, budgetLeft: null, budgetPercent: null });
  });
  it("a null budget in usage means no budget", () => {
    expect(quotaView({ ...DOC_EXAMPLE, usage: { ...DOC_EXAMPLE.usage, gpu_hour_budget: null } }).budget).toBeNull();
  });
  it("budget colours", () => {
    expect(budgetColour(null)).toBe("gray");
    expect(budgetColour(10)).toBe("teal");
    expect(budgetColour(80)).toBe("orange");
    expect(budgetColour(95)).toBe("red");
  });
});
