import { describe, expect, it } from "vitest";
import { deriveSegments, layoutTimeline, type TimelineEvent } from "./timeline";

const T0 = Date.parse("2025-06-01T12:00:00Z");
const iso = (seconds: number) => new Date(T0 + seconds * 1000).toISOString();
const ev = (seconds: number, from: string, to: string, reason = ""): TimelineEvent => ({
  time: iso(seconds), from_status: from, to_status: to, reason, message: "",
});

describe("deriveSegments", () => {
  it("is one open queued segment for a fresh workload without events", () => {
    const segs = deriveSegments({ status: "queued", created_at: iso(0), events: [], now: T0 + 30_000 });
    expect(segs).toHaveLength(1);
    expect(segs[0]).toMatchObject({ status: "queued", start: T0, end: T0 + 30_000, open: true });
  });

  it("follows status transitions in time order and ignores other events", () => {
    const events = [
      ev(60, "admitted", "running", "Started"),
      ev(0, "", "queued", "Submitted"),
      { time: iso(30), reason: "Scheduled", message: "placed on gpu-a1" },
      ev(50, "queued", "admitted", "Admitted"),
      ev(160, "running", "succeeded", "Completed"),
    ];
    const segs = deriveSegments({ status: "succeeded", created_at: iso(0), finished_at: iso(160), events, now: T0 + 999_000 });
    expect(segs.map((s) => s.status)).toEqual(["queued", "admitted", "running", "succeeded"]);
    expect(segs[0]).toMatchObject({ start: T0, end: T0 + 50_000 });
    expect(segs[1]).toMatchObject({ start: T0 + 50_000, end: T0 + 60_000, reason: "Admitted" });
    expect(segs[2]).toMatchObject({ start: T0 + 60_000, end: T0 + 160_000, reason: "Started", open: false });
    // A final status is a point in time, never open.
    expect(segs[3]).toMatchObject({ start: T0 + 160_000, end: T0 + 160_000, open: false, reason: "Completed" });
  });

  it("merges repeats of the same status", () => {
    const events = [ev(0, "", "queued"), ev(10, "running", "queued", "Preempted"), ev(20, "queued", "running")];
    const segs = deriveSegments({ status: "running", created_at: iso(0), events, now: T0 + 40_000 });
    expect(segs.map((s) => s.status)).toEqual(["queued", "running"]);
    expect(segs[1]).toMatchObject({ start: T0 + 20_000, end: T0 + 40_000, open: true });
  });

  it("adds the live status when the socket is ahead of the events", () => {
    const segs = deriveSegments({
      status: "running", created_at: iso(0), events: [ev(0, "", "queued")], now: T0 + 90_000, statusReason: "Started",
    });
    expect(segs.map((s) => s.status)).toEqual(["queued", "running"]);
    expect(segs[1]).toMatchObject({ start: T0 + 90_000, open: true, reason: "Started" });
  });

  it("places a live final status at finished_at", () => {
    const segs = deriveSegments({
      status: "failed", created_at: iso(0), finished_at: iso(70), events: [ev(5, "queued", "running")], now: T0 + 500_000,
    });
    expect(segs.map((s) => s.status)).toEqual(["queued", "running", "failed"]);
    expect(segs[1].end).toBe(T0 + 70_000);
    expect(segs[2]).toMatchObject({ start: T0 + 70_000, end: T0 + 70_000 });
  });

  it("tolerates bad times and events before creation", () => {
    const events = [{ time: "garbage", to_status: "running" }, ev(-10, "", "queued")];
    const segs = deriveSegments({ status: "queued", created_at: iso(0), events, now: T0 });
    expect(segs).toHaveLength(1);
    expect(segs[0].start).toBe(T0 - 10_000);
  });
});

describe("layoutTimeline", () => {
  it("is empty for no segments", () => {
    expect(layoutTimeline([])).toEqual([]);
  });

  it("gives widths proportional to durations, summing to 1", () => {
    const placed = layoutTimeline([
      { status: "queued", start: 0, end: 250, open: false, reason: "", message: "" },
      { status: "running", start: 250, end: 1000, open: true, reason: "", message: "" },
    ], 0);
    expect(placed[0].left).toBe(0);
    expect(placed[0].width).toBeCloseTo(0.25);
    expect(placed[1].left).toBeCloseTo(0.25);
    expect(placed[1].width).toBeCloseTo(0.75);
  });

  it("keeps short and zero-length segments visible", () => {
    const placed = layoutTimeline([
      { status: "queued", start: 0, end: 1, open: false, reason: "", message: "" },
      { status: "running", start: 1, end: 100_000, open: false, reason: "", message: "" },
      { status: "succeeded", start: 100_000, end: 100_000, open: false, reason: "", message: "" },
    ], 0.05);
    expect(placed[0].width).toBeGreaterThan(0.04);
    expect(placed[2].width).toBeGreaterThan(0.04);
    expect(placed.reduce((sum, p) => sum + p.width, 0)).toBeCloseTo(1);
    expect(placed[2].left + placed[2].width).toBeCloseTo(1);
  });

  it("splits evenly when no time passed", () => {
    const placed = layoutTimeline([
      { status: "queued", start: 5, end: 5, open: false, reason: "", message: "" },
      { status: "failed", start: 5, end: 5, open: false, reason: "", message: "" },
    ]);
    expect(placed.map((p) => p.width)).toEqual([0.5, 0.5]);
  });
});
