// Where one workload lives in the API: /api/v1/projects/<p>/workloads/<id>/ answers for every
// kind (detail, stop, events, logs, resilience). Creating and deleting stay on the kind's own collection
// (/training-jobs/, /notebooks/, /deployments/), which the forms and the list use.

/** What may follow /workloads/<id>/ in a workload's address. */
export type WorkloadAction = "" | "events/" | "stop/" | "resubmit/" | "logs/" | "resilience/";

/** The path template the typed client takes ({project} and {id} filled in from `params.path`). */
export type WorkloadRoute<A extends WorkloadAction = ""> = `/api/v1/projects/{project}/workloads/{id}/${A}`;

/** The typed-client path of one workload, e.g. "/api/v1/projects/{project}/workloads/{id}/stop/". */
export function workloadRoute<A extends WorkloadAction = "">(action: A = "" as A): WorkloadRoute<A> {
  return `/api/v1/projects/{project}/workloads/{id}/${action}`;
}

/** The address of one workload (for links and downloads), e.g. "/api/v1/projects/vision/workloads/42/logs/". */
export function workloadPath(project: string, id: number, action: WorkloadAction = ""): string {
  return workloadRoute(action)
    .replace("{project}", encodeURIComponent(project))
    .replace("{id}", String(id));
}

/** What may follow /notebooks/<id>/ : the notebook-only actions (start again, the culler's view). */
export type NotebookAction = "start/" | "activity/";

/** The typed-client path of a notebook-only action, e.g. "/api/v1/projects/{project}/notebooks/{id}/start/". */
export function notebookRoute<A extends NotebookAction>(action: A): `/api/v1/projects/{project}/notebooks/{id}/${A}` {
  return `/api/v1/projects/{project}/notebooks/{id}/${action}`;
}
