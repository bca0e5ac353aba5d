// The workload page's API calls, on the kind-independent /workloads/<id>/ routes
// (lib/workloadPath.ts): every kind answers with the same Workload and Event shapes.
import { api, unwrap, type Schemas } from "../../api/client";
import { notebookRoute, workloadRoute } from "../../lib/workloadPath";

export type Workload = Schemas["Workload"];
export type WorkloadEvent = Schemas["Event"];

/** Events per page read; the API's maximum. */
const EVENTS_PAGE = 500;

export function getWorkload(project: string, id: number): Promise<Workload> {
  return unwrap(api.GET(workloadRoute(), { params: { path: { project, id } } }));
}

/** The oldest and the newest events (at most two pages), and how many there are in all. */
export async function getEvents(project: string, id: number): Promise<{ events: WorkloadEvent[]; total: number }> {
  const read = (page: number) =>
    unwrap(api.GET(workloadRoute("events/"), { params: { path: { project, id }, query: { page, page_size: EVENTS_PAGE } } }));
  const first = await read(1);
  let events = first.results;
  const pages = Math.ceil(first.count / EVENTS_PAGE);
  if (pages > 1) events = events.concat((await read(pages)).results); // oldest 500 and newest ones
  return { events, total: first.count };
}

/** The workload's tracking runs, newest first. */
export function getRuns(project: string, id: number): Promise<Schemas["PaginatedRunList"]> {
  return unwrap(api.GET("/api/v1/projects/{project}/runs/", { params: { path: { project }, query: { workload: id, page_size: 100 } } }));
}

/** Goodput, checkpoints, each rank's progress and the restarts (any kind; empty for most but training). */
export function getResilience(project: string, id: number): Promise<Schemas["Resilience"]> {
  return unwrap(api.GET(workloadRoute("resilience/"), { params: { path: { project, id } } }));
}

export function stopWorkload(project: string, id: number): Promise<Workload> {
  return unwrap(api.POST(workloadRoute("stop/"), { params: { path: { project, id } } }));
}

/** Run an ended workload again: a new workload with its spec, linked to it (docs/training.md). */
export function resubmitWorkload(project: string, id: number, name?: string): Promise<Workload> {
  return unwrap(api.POST(workloadRoute("resubmit/"), { params: { path: { project, id } }, body: name ? { name } : {} }));
}

/** Start a stopped notebook again (its files are kept). */
export function startNotebook(project: string, id: number): Promise<Workload> {
  return unwrap(api.POST(notebookRoute("start/"), { params: { path: { project, id } } }));
}

/** Idle time, culling deadline and GPU utilisation, as the idle culler last saw them. */
export function getNotebookActivity(project: string, id: number): Promise<Schemas["NotebookActivity"]> {
  return unwrap(api.GET(notebookRoute("activity/"), { params: { path: { project, id } } }));
}
