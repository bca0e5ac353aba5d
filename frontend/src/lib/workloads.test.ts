import { describe, expect, it } from "vitest";
import {
  applyWorkloadFrame, EMPTY_FILTERS, filtersFromSearch, filtersToSearch, formatTimeLeft, gpuLabel, hasFilters,
  matchesFilters, mergeWorkloadState, placeholderRow, queuedRefreshInterval, QUEUED_REFRESH_MS, runTimeLimitInfo, serverQuery, statusExplanation, visibleRows, type Workload,
  type WorkloadFilters, type WorkloadPage,
} from "./workloads";
import type { LiveFrame } from "../live/socket";

/** A frame as it may arrive off the wire (unchecked): the reducers must cope with anything. */
const wire = (frame: object) => frame as unknown as LiveFrame;

function row(id: number, over: Partial<Workload> = {}): Workload {
  return {
    ...placeholderRow({ workload: id, name: `w${id}`, kind: "training", status: "queued" }, "vision", new Date("2026-01-01T00:00:00Z")),
    pool: "a100",
    created_by: "alice",
    queue_position: 3,
    estimated_start: "2026-01-01T01:00:00Z",
    waiting_on: "capacity",
    ...over,
  };
}

function page(...rows: Workload[]): WorkloadPage {
  return { count: rows.length, next: null, previous: null, results: rows };
}

const KINDS = ["training", "notebook", "deployment"]; // as GET /api/v1/kinds/ names them
const ctx = (filters: Partial<WorkloadFilters> = {}) => ({
  filters: { ...EMPTY_FILTERS, ...filters },
  project: "vision",
  now: new Date("2026-01-02T00:00:00Z"),
});

describe("filters in the URL", () => {
  it("round-trips kind, statuses, user and page", () => {
    const filters: WorkloadFilters = { kind: "notebook", status: ["queued", "running"], user: "bob", page: 3 };
    const search = filtersToSearch(filters);
    expect(search.toString()).toBe("kind=notebook&status=queued&status=running&user=bob&page=3");
    expect(filtersFromSearch(search)).toEqual(filters);
  });
  it("ignores unknown values and accepts comma lists", () => {
    const f = filtersFromSearch(new URLSearchParams("kind=pod&status=queued,bogus,running&status=queued&page=-2&user=%20"), KINDS);
    expect(f).toEqual({ kind: null, status: ["queued", "running"], user: null, page: 1 });
    expect(hasFilters(f)).toBe(true);
    expect(hasFilters(EMPTY_FILTERS)).toBe(false);
    expect(filtersToSearch(EMPTY_FILTERS).toString()).toBe("");
  });
  it("sends kind and status to the server, filters the user here", () => {
    expect(serverQuery({ kind: "training", status: ["failed"], user: null, page: 2 })).toEqual({
      kind: "training", status: ["failed"], page: 2, page_size: 50, ordering: "-created_at",
    });
    const q = serverQuery({ kind: null, status: [], user: "bob", page: 2 });
    expect(q).toEqual({ page_size: 500, ordering: "-created_at" });
    const p = page(row(1), row(2, { created_by: "bob" }));
    expect(visibleRows(p, { ...EMPTY_FILTERS, user: "bob" }).map((r) => r.id)).toEqual([2]);
    expect(visibleRows(p, EMPTY_FILTERS)).toHaveLength(2);
    expect(visibleRows(undefined, EMPTY_FILTERS)).toEqual([]);
    expect(matchesFilters(row(1), { ...EMPTY_FILTERS, kind: "notebook" })).toBe(false);
  });
});

describe("queuedRefreshInterval", () => {
  it("re-reads a page only while it shows queued work", () => {
    expect(queuedRefreshInterval(page(row(1), row(2, { status: "running" })))).toBe(QUEUED_REFRESH_MS);
    expect(queuedRefreshInterval(page(row(1, { status: "running" })))).toBe(false);
    expect(queuedRefreshInterval(undefined)).toBe(false);
  });
});

describe("applyWorkloadFrame", () => {
  it("updates a row's status at once and clears queue fields when it leaves the queue", () => {
    const before = page(row(1), row(2));
    const after = applyWorkloadFrame(before, { topic: "workloads", type: "workload.status", workload: 2, status: "running", reason: "Started" }, ctx())!;
    expect(after).not.toBe(before);
    expect(after.results[1]).toMatchObject({ id: 2, status: "running", status_reason: "Started", queue_position: null, estimated_start: null, waiting_on: null });
    expect(after.results[0]).toBe(before.results[0]);
    expect(before.results[1].status).toBe("queued"); // not mutated
  });
  it("keeps the same page object when nothing changes", () => {
    const before = page(row(1, { status: "running", status_reason: "Started" }));
    expect(applyWorkloadFrame(before, { topic: "workloads", type: "workload.status", workload: 1, status: "running", reason: "Started" }, ctx())).toBe(before);
    expect(applyWorkloadFrame(before, wire({ topic: "workloads", type: "workload.status", workload: 99, status: "failed" }), ctx())).toBe(before);
    expect(applyWorkloadFrame(before, wire({ topic: "workloads", type: "workload.status", workload: 1, status: "exploded" }), ctx())).toBe(before);
    expect(applyWorkloadFrame(before, { topic: "workloads", type: "subscribed" }, ctx())).toBe(before);
    expect(applyWorkloadFrame(undefined, { topic: "workloads", type: "workload.deleted", workload: 1 }, ctx())).toBeUndefined();
  });
  it("drops a row whose new status is outside the status filter", () => {
    const before = page(row(1), row(2));
    const after = applyWorkloadFrame(before, wire({ topic: "workloads", type: "workload.status", workload: 1, status: "running" }), ctx({ status: ["queued"] }))!;
    expect(after.results.map((r) => r.id)).toEqual([2]);
    expect(after.count).toBe(1);
  });
  it("prepends created workloads that match the filters, on the first page only", () => {
    const before = page(row(1));
    const frame = wire({ topic: "workloads", type: "workload.created", workload: 7, name: "sweep", kind: "notebook", status: "queued" });
    const after = applyWorkloadFrame(before, frame, ctx())!;
    expect(after.count).toBe(2);
    expect(after.results[0]).toMatchObject({ id: 7, name: "sweep", kind: "notebook", status: "queued", project: "vision" });
    expect(after.results[0].created_at).toBe("2026-01-02T00:00:00.000Z");
    // twice: no duplicate
    expect(applyWorkloadFrame(after, frame, ctx())).toBe(after);
    expect(applyWorkloadFrame(before, frame, ctx({ kind: "training" }))).toBe(before);
    expect(applyWorkloadFrame(before, frame, ctx({ status: ["running"] }))).toBe(before);
    expect(applyWorkloadFrame(before, frame, ctx({ page: 2 }))).toBe(before);
    expect(applyWorkloadFrame(before, frame, ctx({ user: "alice" }))).toBe(before);
    expect(applyWorkloadFrame(before, wire({ ...frame, kind: "pod" }), { ...ctx(), kinds: KINDS })).toBe(before);
  });
  it("removes deleted workloads", () => {
    const before = page(row(1), row(2), row(3));
    const after = applyWorkloadFrame(before, { topic: "workloads", type: "workload.deleted", workload: 2 }, ctx())!;
    expect(after.results.map((r) => r.id)).toEqual([1, 3]);
    expect(after.count).toBe(2);
    expect(applyWorkloadFrame(after, { topic: "workloads", type: "workload.deleted", workload: 2 }, ctx())).toBe(after);
  });
});

describe("gpuLabel", () => {
  it("shows per-replica GPUs times replicas", () => {
    expect(gpuLabel({ gpu: 4 }, 1)).toBe("4");
    expect(gpuLabel({ gpu: 0.25 }, 1)).toBe("0.25");
    expect(gpuLabel({ gpu: 8 }, 2)).toBe("2 × 8");
    expect(gpuLabel({ gpu: 0 }, 3)).toBe("0");
    expect(gpuLabel(null, 1)).toBe("0");
  });
});

describe("runTimeLimitInfo", () => {
  const now = Date.parse("2026-01-01T01:00:00Z");
  const running = (over: Partial<Workload> = {}) =>
    row(1, {
      status: "running", max_runtime_seconds: 7200, admitted_at: "2026-01-01T00:29:00Z", started_at: "2026-01-01T00:30:00Z",
      ...over,
    });
  it("gives a running job with a limit its deadline (start + limit) and the time left", () => {
    expect(runTimeLimitInfo(running(), now)).toEqual({
      limit: "2 h",
      deadline: Date.parse("2026-01-01T02:30:00Z"),
      secondsLeft: 5400,
    });
    expect(formatTimeLeft(runTimeLimitInfo(running(), now).secondsLeft)).toBe("1h 30m left");
  });
  it("counts down to 0, not below, once the deadline has passed", () => {
    const info = runTimeLimitInfo(running({ max_runtime_seconds: 60 }), now);
    expect(info.secondsLeft).toBe(0);
    expect(formatTimeLeft(info.secondsLeft)).toBe("time is up: stopping");
    expect(runTimeLimitInfo(running(), Date.parse("2026-01-01T02:29:59.200Z")).secondsLeft).toBe(1);
  });
  it("shows no deadline without a limit, before the start, or once the job is over", () => {
    expect(runTimeLimitInfo(running({ max_runtime_seconds: null }), now)).toEqual({ limit: "none", deadline: null, secondsLeft: null });
    expect(runTimeLimitInfo(running({ status: "admitted", started_at: null }), now)).toEqual({ limit: "2 h", deadline: null, secondsLeft: null });
    expect(runTimeLimitInfo(running({ status: "succeeded", finished_at: "2026-01-01T00:50:00Z" }), now).deadline).toBeNull();
    expect(formatTimeLeft(null)).toBe("");
  });
  it("does not count a run from before a requeue (started before the latest admission)", () => {
    const requeued = running({ admitted_at: "2026-01-01T00:45:00Z", started_at: "2026-01-01T00:30:00Z" });
    expect(runTimeLimitInfo(requeued, now).deadline).toBeNull();
  });
});

describe("statusExplanation", () => {
  it("says that a job stopped with DeadlineExceeded reached its run-time limit", () => {
    expect(statusExplanation({ status: "failed", status_reason: "DeadlineExceeded", max_runtime_seconds: 5400 })).toBe(
      "The job reached its run-time limit of 1 h 30 min and was stopped, so it failed.",
    );
    expect(statusExplanation({ status: "stopping", status_reason: "DeadlineExceeded", max_runtime_seconds: 7200 })).toBe(
      "The job reached its run-time limit of 2 h; its replicas are being stopped.",
    );
    // a deadline set on the backend's side only (a Job edited by hand): no limit to name
    expect(statusExplanation({ status: "failed", status_reason: "DeadlineExceeded", max_runtime_seconds: null })).toBe(
      "The job reached its run-time limit and was stopped, so it failed.",
    );
  });
  it("leaves other reasons to the reason and message line", () => {
    expect(statusExplanation({ status: "failed", status_reason: "Error", max_runtime_seconds: 7200 })).toBeNull();
    expect(statusExplanation({ status: "running", status_reason: "", max_runtime_seconds: 7200 })).toBeNull();
  });
});

describe("mergeWorkloadState", () => {
  const frame = (over: Record<string, unknown>) => wire({ topic: "workload:5", type: "workload.state", ...over });

  it("lays the frame's state fields over the cached workload", () => {
    const old = row(5, { status: "queued", attempt: 0, pool: "a100" });
    const next = mergeWorkloadState(old, frame({ status: "running", attempt: 1, waiting_on: null, queue_position: null }))!;
    expect(next).toMatchObject({ status: "running", attempt: 1, waiting_on: null, queue_position: null, pool: "a100" });
    expect(old.status).toBe("queued"); // the cached object is not changed in place
  });

  it("keeps fields the frame leaves out, and ignores keys that are not state", () => {
    const old = row(5, { status: "running", status_message: "on node-1" });
    const next = mergeWorkloadState(old, frame({ attempt: 2, name: "renamed", pool: "h100" }))!;
    expect(next).toMatchObject({ status: "running", status_message: "on node-1", attempt: 2, name: "w5", pool: "a100" });
  });

  it("leaves an empty cache empty", () => {
    expect(mergeWorkloadState(undefined, frame({ status: "running" }))).toBeUndefined();
  });
});
