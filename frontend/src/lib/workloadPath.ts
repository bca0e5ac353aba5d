// Where one workload lives in the API. The API keeps each kind in its own collection
// (/api/v1/projects/<p>/training-jobs/, /notebooks/, /deployments/) with the same shape;
// this is the one place the dashboard picks the collection from a workload's kind.
import { KIND_COLLECTION, type WorkloadKind } from "./status";

export type WorkloadCollection = (typeof KIND_COLLECTION)[WorkloadKind];

/** What may follow /<collection>/<id>/ in a workload's address. */
export type WorkloadAction = "" | "events/" | "stop/" | "logs/";

/** The path template the typed client takes ({project} and {id} filled in from `params.path`). */
export type WorkloadRoute<A extends WorkloadAction = ""> = `/api/v1/projects/{project}/${WorkloadCollection}/{id}/${A}`;

/** The typed-client path of one workload of `kind`, e.g. "/api/v1/projects/{project}/notebooks/{id}/stop/". */
export function workloadRoute<A extends WorkloadAction = "">(kind: WorkloadKind, action: A = "" as A): WorkloadRoute<A> {
  return `/api/v1/projects/{project}/${KIND_COLLECTION[kind]}/{id}/${action}`;
}

/** The address of one workload of `kind` (for links and downloads), e.g. "/api/v1/projects/vision/training-jobs/42/logs/". */
export function workloadPath(kind: WorkloadKind, project: string, id: number, action: WorkloadAction = ""): string {
  return workloadRoute(kind, action)
    .replace("{project}", encodeURIComponent(project))
    .replace("{id}", String(id));
}
