// The workload list: filters kept in the URL, and the pure reducer that applies live frames of the
// "workloads" topic (docs/live.md §2) to a cached page of GET /api/v1/projects/<p>/workloads/.
import type { Schemas } from "../api/client";
import type { LiveFrame } from "../live/socket";
import { formatDuration, formatRunTimeLimit } from "./format";
import { STATUSES, type WorkloadKind, type WorkloadStatus } from "./status";

export type Workload = Schemas["Workload"];
export type WorkloadPage = Schemas["PaginatedWorkloadList"];

export interface WorkloadFilters {
  kind: WorkloadKind | null;
  status: WorkloadStatus[];
  /** Username of the submitter; the API has no such filter, so it is applied in the browser. */
  user: string | null;
  page: number;
}

export const EMPTY_FILTERS: WorkloadFilters = { kind: null, status: [], user: null, page: 1 };

/** Rows per page; with a user filter (applied here, not by the API) we read the API's maximum. */
export const PAGE_SIZE = 50;
export const USER_FILTER_PAGE_SIZE = 500;

/** A kind name as an address or a frame may carry it: one of `kinds` (the server's, lib/kinds.ts)
 * when they are known, any well-formed name before. */
function isKind(value: string | null, kinds?: readonly string[]): value is WorkloadKind {
  if (value === null) return false;
  return kinds && kinds.length ? kinds.includes(value) : /^[a-z][a-z0-9_-]*$/.test(value);
}

function isStatus(value: string): value is WorkloadStatus {
  return (STATUSES as readonly string[]).includes(value);
}

/** Filters from the query string (`?kind=training&status=queued&status=running&user=alice&page=2`). */
export function filtersFromSearch(params: URLSearchParams, kinds?: readonly string[]): WorkloadFilters {
  const kind = params.get("kind");
  const statuses: WorkloadStatus[] = [];
  for (const raw of params.getAll("status").flatMap((s) => s.split(","))) {
    const s = raw.trim();
    if (isStatus(s) && !statuses.includes(s)) statuses.push(s);
  }
  const user = params.get("user")?.trim() || null;
  const page = Number.parseInt(params.get("page") ?? "1", 10);
  return {
    kind: isKind(kind, kinds) ? kind : null,
    status: statuses,
    user,
    page: Number.isFinite(page) && page > 1 ? page : 1,
  };
}

/** The query string for `filters` (empty filters give an empty string, page 1 is left out). */
export function filtersToSearch(filters: WorkloadFilters): URLSearchParams {
  const params = new URLSearchParams();
  if (filters.kind) params.set("kind", filters.kind);
  for (const s of filters.status) params.append("status", s);
  if (filters.user) params.set("user", filters.user);
  if (filters.page > 1) params.set("page", String(filters.page));
  return params;
}

export function hasFilters(filters: WorkloadFilters): boolean {
  return filters.kind !== null || filters.status.length > 0 || filters.user !== null;
}

export interface WorkloadListQuery {
  kind?: Workload["kind"]; // (the schema's enum of the kinds known when it was generated)
  status?: WorkloadStatus[];
  page?: number;
  page_size: number;
  ordering: string;
}

/** Query parameters for the API: kind and status are filtered by the server, user by us. */
export function serverQuery(filters: WorkloadFilters): WorkloadListQuery {
  const query: WorkloadListQuery = {
    ordering: "-created_at",
    page_size: filters.user ? USER_FILTER_PAGE_SIZE : PAGE_SIZE,
  };
  if (filters.kind) query.kind = filters.kind as Workload["kind"];
  if (filters.status.length) query.status = [...filters.status];
  if (!filters.user && filters.page > 1) query.page = filters.page;
  return query;
}

/** Does a row pass every filter (the server ones again: live frames can change a row)? */
export function matchesFilters(row: Pick<Workload, "status" | "created_by"> & { kind: WorkloadKind }, filters: WorkloadFilters): boolean {
  if (filters.kind && row.kind !== filters.kind) return false;
  if (filters.status.length && !filters.status.includes(row.status)) return false;
  if (filters.user && row.created_by !== filters.user) return false;
  return true;
}

/** The rows to show: the page's rows that pass the browser-side (user) filter. */
export function visibleRows(page: WorkloadPage | undefined, filters: WorkloadFilters): Workload[] {
  if (!page) return [];
  return filters.user ? page.results.filter((row) => matchesFilters(row, filters)) : page.results;
}

/** How often to re-read a page showing queued work (the scheduler updates positions, estimates
 * and what work waits on without a live frame); never when nothing shown is queued. */
export const QUEUED_REFRESH_MS = 10_000;
export function queuedRefreshInterval(page: WorkloadPage | undefined): number | false {
  return page?.results.some((row) => row.status === "queued") ? QUEUED_REFRESH_MS : false;
}

/** A row for a workload known only from a `workload.created` frame, until the refetch brings the full one. */
export function placeholderRow(frame: { workload: number; name: string; kind: WorkloadKind; status: WorkloadStatus }, project: string, now: Date): Workload {
  const iso = now.toISOString();
  return {
    id: frame.workload,
    name: frame.name,
    kind: frame.kind as Workload["kind"],
    project,
    pool: "",
    status: frame.status,
    status_reason: "",
    status_message: "",
    pending_reason: "",
    waiting_on: null,
    estimated_start: null,
    queue_position: null,
    preemptions: 0,
    exit_code: null,
    priority: "P3",
    preemptible: true,
    replicas: 1,
    resources: { gpu: 0, cpu: 0, memory_mb: 0 },
    gpu_model: "",
    accelerator: null,
    arch: [],
    max_restarts: 0,
    max_runtime_seconds: null,
    attempt: 0,
    restarts: 0,
    spec: "",
    conditions: "",
    placement: "",
    ignored_env: [],
    stop_cause: "",
    preempted_by: null,
    resubmitted_from: null,
    created_by: "",
    created_at: iso,
    updated_at: iso,
    admitted_at: null,
    started_at: null,
    finished_at: null,
    url: "",
    endpoint: null,
  } as Workload;
}

export interface ReducerContext {
  filters: WorkloadFilters;
  project: string;
  now?: Date;
  /** The kinds the server runs (lib/kinds.ts): a frame of another kind is left to the refetch. */
  kinds?: readonly string[];
}

/**
 * Apply one frame of the "workloads" topic to a cached page. Pure: returns the same object
 * when nothing changes, a new page otherwise. Rows unknown to the page are left to the
 * background refetch (a frame does not carry the full row).
 */
export function applyWorkloadFrame(page: WorkloadPage | undefined, frame: LiveFrame, ctx: ReducerContext): WorkloadPage | undefined {
  if (!page || frame.topic !== "workloads" || !("workload" in frame)) return page;
  const id = typeof frame.workload === "number" ? frame.workload : Number(frame.workload);
  if (!Number.isFinite(id)) return page;
  const index = page.results.findIndex((row) => row.id === id);

  switch (frame.type) {
    case "workload.status": {
      const status = typeof frame.status === "string" && isStatus(frame.status) ? frame.status : null;
      if (index < 0 || !status) return page;
      const row = page.results[index];
      const reason = typeof frame.reason === "string" ? frame.reason : row.status_reason;
      if (row.status === status && row.status_reason === reason) return page;
      const updated: Workload = {
        ...row,
        status,
        status_reason: reason,
        ...(status === "queued" ? {} : { queue_position: null, estimated_start: null, waiting_on: null }),
      };
      // A row whose new status is outside the status filter leaves the page.
      if (ctx.filters.status.length && !ctx.filters.status.includes(status)) return removeAt(page, index);
      const results = page.results.slice();
      results[index] = updated;
      return { ...page, results };
    }
    case "workload.created": {
      if (index >= 0) return page;
      const kind = typeof frame.kind === "string" && isKind(frame.kind, ctx.kinds) ? frame.kind : null;
      const status = typeof frame.status === "string" && isStatus(frame.status) ? frame.status : null;
      if (!kind || !status) return page;
      // Newest first: a new workload belongs on the first page only. Its submitter is not in the
      // frame, so with a user filter we wait for the refetch.
      if (ctx.filters.page > 1 || ctx.filters.user) return page;
      if (!matchesFilters({ kind, status, created_by: "" }, ctx.filters)) return page;
      const name = typeof frame.name === "string" ? frame.name : `workload-${id}`;
      const row = placeholderRow({ workload: id, name, kind, status }, ctx.project, ctx.now ?? new Date());
      return { ...page, count: page.count + 1, results: [row, ...page.results] };
    }
    case "workload.deleted":
      return index < 0 ? page : removeAt(page, index);
    default:
      return page;
  }
}

function removeAt(page: WorkloadPage, index: number): WorkloadPage {
  const results = page.results.slice();
  results.splice(index, 1);
  return { ...page, count: Math.max(0, page.count - 1), results };
}

/** Total GPUs a workload asks for, as a short label: "4", "0.5", "2 × 8". */
export function gpuLabel(resources: { gpu: number } | null | undefined, replicas: number): string {
  const gpu = resources?.gpu ?? 0;
  const per = Number.isInteger(gpu) ? String(gpu) : String(Number(gpu.toFixed(3)));
  return replicas > 1 && gpu > 0 ? `${replicas} × ${per}` : per;
}

/** status_reason of a training job stopped at its run-time limit (apps/workloads/deadlines.py). */
export const DEADLINE_EXCEEDED = "DeadlineExceeded";

export interface RunTimeLimitInfo {
  /** The limit as set: "2 h", or "none". */
  limit: string;
  /** When the current run must end (ms since the epoch): running jobs with a limit only. */
  deadline: number | null;
  /** Whole seconds until the deadline, 0 once it has passed; null without a deadline. */
  secondsLeft: number | null;
}

/**
 * The run-time limit of a workload and, while it runs, its deadline: started_at + limit, on the
 * server's clock (run_deadline in apps/workloads/deadlines.py). A started_at older than the latest
 * admission belongs to a run before a requeue, and the new run has no deadline until it starts.
 */
export function runTimeLimitInfo(
  w: Pick<Workload, "status" | "max_runtime_seconds" | "started_at" | "admitted_at">,
  now: number,
): RunTimeLimitInfo {
  const limit = w.max_runtime_seconds ?? null;
  const info: RunTimeLimitInfo = { limit: formatRunTimeLimit(limit), deadline: null, secondsLeft: null };
  if (!limit || w.status !== "running" || !w.started_at) return info;
  const started = Date.parse(w.started_at);
  const admitted = w.admitted_at ? Date.parse(w.admitted_at) : Number.NaN;
  if (Number.isNaN(started) || started < admitted) return info;
  info.deadline = started + limit * 1000;
  info.secondsLeft = Math.max(0, Math.ceil((info.deadline - now) / 1000));
  return info;
}

/** "1h 29m left", or, past the deadline (the stop is on its way), "time is up". */
export function formatTimeLeft(secondsLeft: number | null): string {
  if (secondsLeft === null) return "";
  return secondsLeft > 0 ? `${formatDuration(secondsLeft)} left` : "time is up: stopping";
}

/**
 * A sentence on why the workload is in its status, for reasons the raw "Reason: message" line
 * does not make plain; null when that line says enough.
 */
export function statusExplanation(w: Pick<Workload, "status" | "status_reason" | "max_runtime_seconds">): string | null {
  if (w.status_reason !== DEADLINE_EXCEEDED) return null;
  const limit = w.max_runtime_seconds ? ` of ${formatRunTimeLimit(w.max_runtime_seconds)}` : "";
  if (w.status === "stopping") return `The job reached its run-time limit${limit}; its replicas are being stopped.`;
  if (w.status === "failed") return `The job reached its run-time limit${limit} and was stopped, so it failed.`;
  return `The job reached its run-time limit${limit}.`;
}

/**
 * A status reason and message as one line, without saying the same thing twice: reason
 * "Started" with message "Started 2 replica(s)." reads "Started 2 replica(s).", not
 * "Started: Started 2 replica(s).". CamelCase reasons are compared as words ("StopRequested"
 * and "Stop requested by alice.").
 */
export function statusLine(reason: string | null | undefined, message: string | null | undefined): string {
  const r = (reason ?? "").trim();
  const m = (message ?? "").trim();
  if (!r) return m;
  if (!m) return r;
  const words = r.replace(/([a-z0-9])([A-Z])/g, "$1 $2").toLowerCase();
  const lower = m.toLowerCase();
  if (lower.startsWith(words) || lower.startsWith(r.toLowerCase())) return m;
  return `${r}: ${m}`;
}

/** The fields a workload:<id> "workload.state" frame carries (docs/live.md) over the detail row. */
export const WORKLOAD_STATE_FIELDS = [
  "status", "status_reason", "status_message", "pending_reason", "waiting_on", "estimated_start", "queue_position",
  "attempt", "replicas", "preemptions", "exit_code", "placement", "conditions", "updated_at",
] as const;

/** The cached workload with a "workload.state" frame's fields laid over it; nothing cached stays nothing. */
export function mergeWorkloadState(old: Workload | undefined, frame: LiveFrame): Workload | undefined {
  if (!old || frame.type !== "workload.state") return old;
  const next = { ...old } as Record<string, unknown>;
  for (const field of WORKLOAD_STATE_FIELDS) {
    if (field in frame) next[field] = frame[field];
  }
  return next as unknown as Workload;
}
