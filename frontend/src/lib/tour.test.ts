// Issue 29 (items 3 and 11): the dashboard's small inconsistencies, as pure functions.
import { describe, expect, it } from "vitest";
import { quotaView, resourceNames, resourcesLabel } from "./quotas";
import { axisTitleX, titleWidth } from "./parcoords";
import { identicalSeries, sampleAxisLabel, xAxisLabel } from "./series";
import { deriveSegments, eventsInOrder, eventsNewestFirst, runningTime, type TimelineEvent } from "./timeline";
import { statusLine } from "./workloads";

const T0 = Date.parse("2025-06-01T12:00:00Z");
const iso = (seconds: number) => new Date(T0 + seconds * 1000).toISOString();
const ev = (s: number, from: string, to: string): TimelineEvent => ({ time: iso(s), from_status: from, to_status: to });

describe("runningTime: the header's 'Running for' reads the timeline's running segment", () => {
  const events = [ev(0, "", "queued"), ev(2, "queued", "admitted"), ev(5, "admitted", "running")];

  it("while running: the open segment, to the same `now` as the timeline", () => {
    const segments = deriveSegments({ status: "running", created_at: iso(0), events, now: T0 + 22_000 });
    const running = segments[segments.length - 1];
    expect(running.status).toBe("running");
    // the header and the timeline label ("running · 17s") say the same
    expect(runningTime(segments)).toEqual({ seconds: (running.end - running.start) / 1000, current: true });
    expect(runningTime(segments)?.seconds).toBe(17);
  });

  it("after a restart, while running: the current run only; once ended: every running segment", () => {
    const restarted = [...events, ev(15, "running", "queued"), ev(16, "queued", "admitted"), ev(18, "admitted", "running")];
    const now = deriveSegments({ status: "running", created_at: iso(0), events: restarted, now: T0 + 30_000 });
    expect(runningTime(now)).toEqual({ seconds: 12, current: true });
    const done = deriveSegments({
      status: "succeeded", created_at: iso(0), finished_at: iso(40), now: T0 + 60_000,
      events: [...restarted, ev(40, "running", "succeeded")],
    });
    expect(runningTime(done)).toEqual({ seconds: 10 + 22, current: false });
  });

  it("never ran: null", () => {
    expect(runningTime(deriveSegments({ status: "queued", created_at: iso(0), events: [ev(0, "", "queued")], now: T0 + 5000 })))
      .toBeNull();
  });
});

describe("eventsInOrder: oldest first, like the API and `cairn events`", () => {
  it("sorts by time, then id", () => {
    const events = [
      { id: 3, time: iso(9) }, { id: 1, time: iso(1) }, { id: 5, time: iso(5) }, { id: 4, time: iso(5) },
    ];
    expect(eventsInOrder(events).map((e) => e.id)).toEqual([1, 4, 5, 3]);
  });
  it("the Events panel reverses it: newest first", () => {
    const events = [
      { id: 3, time: iso(9) }, { id: 1, time: iso(1) }, { id: 5, time: iso(5) }, { id: 4, time: iso(5) },
    ];
    expect(eventsNewestFirst(events).map((e) => e.id)).toEqual([3, 5, 4, 1]);
  });
});

describe("statusLine: a reason its message repeats is said once", () => {
  it.each([
    ["Started", "Started 2 replica(s).", "Started 2 replica(s)."],
    ["StopRequested", "Stop requested by alice.", "Stop requested by alice."],
    ["Exited", "replica 0 exited with code 3", "Exited: replica 0 exited with code 3"],
    ["Admitted", "", "Admitted"],
    ["", "Waiting for the scheduler.", "Waiting for the scheduler."],
  ])("%s / %s", (reason, message, expected) => {
    expect(statusLine(reason, message)).toBe(expected);
  });
});

describe("chart axes are titled", () => {
  it("steps, times and the SDK's samples", () => {
    expect(xAxisLabel("step")).toBe("step");
    expect(xAxisLabel("time")).toBe("time");
    expect(sampleAxisLabel(5)).toBe("sample (one every 5 s)");
  });
});

describe("identicalSeries: runs with the same points are found, so none hides another", () => {
  const a = { steps: [0, 1, 2], values: [1, 0.5, 0.25] };
  it("maps each repeat to the first series it repeats", () => {
    const same = identicalSeries([
      { id: "1:loss", data: a },
      { id: "2:loss", data: { steps: [0, 1, 2], values: [1, 0.5, 0.3] } },
      { id: "3:loss", data: { steps: [...a.steps], values: [...a.values] } },
      { id: "4:loss", data: { steps: [...a.steps], values: [...a.values] } },
      { id: "5:loss", data: { steps: [], values: [] } },
      { id: "6:loss", data: { steps: [], values: [] } },
    ]);
    expect([...same.entries()]).toEqual([["3:loss", "1:loss"], ["4:loss", "1:loss"]]);
  });
});

describe("quotas count CPU and memory beside GPUs", () => {
  it("a CPU-only quota with work waiting on its CPU", () => {
    const v = quotaView({
      id: 1, pool: "local", nominal_gpu_milli: 0, nominal_cpu_milli: 8000, nominal_memory_mb: 16384,
      usage: {
        allocated_gpu_milli: 0, allocated_cpu_milli: 6000, allocated_memory_mb: 4096, queued_gpu_milli: 0,
        queued_cpu_milli: 16000, queued_memory_mb: 1024, waiting_gpu_milli: { quota_lendable: 0 },
        waiting: [{ waiting_on: "quota_lendable", workloads: 1, gpu_milli: 0, cpu_milli: 16000, memory_mb: 1024, resources: ["cpu"] }],
      },
    });
    expect(v.cpuBar).toEqual({ within: 75, borrowed: 0, scale: 8000 });
    expect(v.memoryBar).toEqual({ within: 25, borrowed: 0, scale: 16384 });
    expect([v.queuedCpu, v.queuedMemory]).toEqual([16000, 1024]);
    expect(v.waits).toEqual([{ kind: "quota_lendable", workloads: 1, gpu: 0, cpu: 16000, memory: 1024, resources: ["cpu"] }]);
    expect(resourcesLabel(0, 16000, 1024)).toBe("16 CPUs · 1.0 GiB");
    expect(resourceNames(["cpu"])).toBe("CPU");
    expect(resourceNames(["gpu", "cpu", "memory"])).toBe("GPUs, CPU and memory");
  });
});

describe("axisTitleX: parallel-coordinates titles stay inside the chart (issue 29, item 12)", () => {
  it("centres a title over its axis when it fits, and moves it in at the edges", () => {
    expect(axisTitleX(300, 100, 1000)).toBe(300);
    // the metric axis, 56 px from the right edge of a 1000 px chart, titled "weight_error (last)"
    const w = titleWidth("weight_error (last)");
    const x = axisTitleX(1000 - 56, w, 1000);
    expect(x + w / 2).toBeLessThanOrEqual(1000);
    expect(x).toBeLessThan(1000 - 56);
    expect(axisTitleX(56, w, 1000) - w / 2).toBeGreaterThanOrEqual(0);
    expect(axisTitleX(10, 500, 300)).toBe(150); // wider than the chart: centred
  });
});
