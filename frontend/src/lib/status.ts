// Workload statuses as the API names them (apps/workloads/choices.py), coloured for the UI.
export const STATUSES = ["queued", "admitted", "running", "stopping", "succeeded", "failed", "stopped", "lost"] as const;
export type WorkloadStatus = (typeof STATUSES)[number];

const COLOURS: Record<string, string> = {
  queued: "yellow",
  admitted: "cyan",
  running: "blue",
  stopping: "orange",
  succeeded: "green",
  failed: "red",
  stopped: "gray",
  lost: "grape",
};

export function statusColour(status: string): string {
  return COLOURS[status] ?? "gray";
}

const FINAL = new Set(["succeeded", "failed", "stopped", "lost"]);

export function isFinal(status: string): boolean {
  return FINAL.has(status);
}

export const KINDS = ["training", "notebook", "deployment"] as const;
export type WorkloadKind = (typeof KINDS)[number];

/** The API collection of each kind: /api/v1/projects/<p>/<collection>/. */
export const KIND_COLLECTION: Record<WorkloadKind, "training-jobs" | "notebooks" | "deployments"> = {
  training: "training-jobs",
  notebook: "notebooks",
  deployment: "deployments",
};

export const KIND_LABEL: Record<WorkloadKind, string> = {
  training: "Training job",
  notebook: "Notebook",
  deployment: "Deployment",
};
