import { describe, expect, it } from "vitest";
import {
  checkpointMarks,
  formatGoodput,
  goodputParts,
  hasResilience,
  lossSummary,
  positionOnTimeline,
  slowdownLabel,
  slowGroupLabel,
  type Goodput,
  type Resilience,
} from "./resilience";
import { layoutTimeline, type TimelineSegment } from "./timeline";

const goodput = (over: Partial<Goodput> = {}): Goodput => ({
  goodput: 0.65, wall_seconds: 200, productive_seconds: 130, lost_seconds: 60, redone_seconds: 20,
  hung_seconds: 40, overhead_seconds: 10, gpu_hours_lost: 0.0389, ...over,
});

const T0 = Date.parse("2025-06-01T12:00:00Z");
const iso = (seconds: number) => new Date(T0 + seconds * 1000).toISOString();

describe("goodputParts", () => {
  it("splits the wall time into productive, redone, hung and restart time", () => {
    const parts = goodputParts(goodput());
    expect(parts.map((p) => [p.key, p.fraction])).toEqual([
      ["productive", 0.65], ["redone", 0.1], ["hung", 0.2], ["overhead", 0.05],
    ]);
    expect(parts.reduce((sum, p) => sum + p.fraction, 0)).toBeCloseTo(1);
  });

  it("leaves out what is zero, and is empty before anything ran", () => {
    expect(goodputParts(goodput({ redone_seconds: 0, hung_seconds: 0, overhead_seconds: 0, productive_seconds: 200 }))
      .map((p) => p.key)).toEqual(["productive"]);
    expect(goodputParts(goodput({ wall_seconds: 0 }))).toEqual([]);
  });
});

describe("formatGoodput and lossSummary", () => {
  it("says the ratio as a percentage and what was lost", () => {
    expect(formatGoodput(0.853)).toBe("85%");
    expect(formatGoodput(null)).toBe("—");
    expect(lossSummary(goodput())).toBe("Lost 1m 10s: 20s redone, 40s hung, 10s restarting · 0.04 GPU-h");
    expect(lossSummary(goodput({ lost_seconds: 0, redone_seconds: 0, hung_seconds: 0, overhead_seconds: 0 })))
      .toBe("Nothing lost to failures");
  });
});

describe("slowdownLabel", () => {
  it("compares a rank's step time with its peers' median", () => {
    expect(slowdownLabel(3.04)).toBe("3.0× the median");
    expect(slowdownLabel(null)).toBe("");
    expect(slowdownLabel(0)).toBe("");
  });
});

describe("hasResilience", () => {
  const empty: Resilience = {
    goodput: goodput({ goodput: null, wall_seconds: 0 }), checkpoints: [], ranks: [], restarts: [], stragglers: [], slow_groups: [], slowdown: null,
    hang_timeout_seconds: 600, straggler_policy: "alert",
  };
  it("is false for a workload with nothing to show (a notebook, a job without the SDK)", () => {
    expect(hasResilience(undefined)).toBe(false);
    expect(hasResilience(empty)).toBe(false);
    expect(hasResilience({ ...empty, goodput: goodput() })).toBe(true);
  });
});

describe("positionOnTimeline and checkpointMarks", () => {
  const segments: TimelineSegment[] = [
    { status: "queued", start: T0, end: T0 + 100_000, open: false, reason: "", message: "" },
    { status: "running", start: T0 + 100_000, end: T0 + 500_000, open: true, reason: "", message: "" },
  ];
  const placed = layoutTimeline(segments);

  it("is linear inside each segment of the (widened) bar", () => {
    expect(positionOnTimeline(placed, T0)).toBeCloseTo(0);
    expect(positionOnTimeline(placed, T0 + 300_000)).toBeCloseTo(0.2 + 0.4);
    expect(positionOnTimeline(placed, T0 + 500_000)).toBeCloseTo(1);
    expect(positionOnTimeline(placed, T0 + 600_000)).toBeNull();
  });

  it("places each checkpoint with what it cost", () => {
    const marks = checkpointMarks(placed, [
      { attempt: 1, replica: 0, step: 80, name: "step-80", size_bytes: 1536, save_seconds: 0.42, blocking_seconds: 0.05,
        two_stage: true, time: iso(300) },
      { attempt: 1, replica: 0, step: 90, name: "step-90", size_bytes: 1, save_seconds: 0, blocking_seconds: 0,
        two_stage: false, time: iso(900) },  // after the bar's end: not drawn
    ]);
    expect(marks).toHaveLength(1);
    expect(marks[0].left).toBeCloseTo(0.6);
    expect(marks[0].label).toBe("Checkpoint at step 80 · 1.5 KiB saved in 0.4s (training blocked 0.1s) · attempt 1");
  });
});

describe("slowGroupLabel", () => {
  it("names the ranks, their ratio, since when and the GPU they share", () => {
    expect(slowGroupLabel({
      ranks: [2, 3], ratio: 3.46, since: 0,
      placement: [{ replica: 2, node: "node-c", gpus: [0] }, { replica: 3, node: "node-c", gpus: [0] }],
    })).toBe("Ranks 2, 3: 3.5× the others since step 0 · GPU 0 of node-c shared by 2, 3");
  });
  it("falls back to the nodes, or to nothing without a placement", () => {
    expect(slowGroupLabel({
      ranks: [1, 4], ratio: 2, since: 5,
      placement: [{ replica: 1, node: "a", gpus: [0] }, { replica: 4, node: "b", gpus: [1] }],
    })).toBe("Ranks 1, 4: 2.0× the others since step 5 · on a, b");
    expect(slowGroupLabel({ ranks: [1, 4], ratio: 2, since: 5 })).toBe("Ranks 1, 4: 2.0× the others since step 5");
  });
});
