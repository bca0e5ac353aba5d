// Shapes of the /api/v1/ responses the dashboard reads. Keep in step with the serializers;
// a later issue generates these from the OpenAPI schema (/api/schema/).

export type Role = "owner" | "maintainer" | "member" | "viewer";

export interface ProjectRef {
  slug: string;
  name: string;
  role: Role;
}

export interface Me {
  username: string;
  is_staff: boolean;
  projects: ProjectRef[];
}

export type Kind = "training" | "notebook" | "deployment";

export type Status =
  | "queued"
  | "admitted"
  | "running"
  | "stopping"
  | "succeeded"
  | "failed"
  | "stopped"
  | "lost";

export interface Resources {
  gpu: number;
  cpu: number;
  memory_mb: number;
}

export interface Workload {
  id: number;
  name: string;
  kind: Kind;
  status: Status;
  status_reason: string;
  status_message: string;
  pending_reason: string;
  exit_code: number | null;
  priority: string;
  replicas: number;
  resources: Resources;
  attempt: number;
  restarts: number;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  runtime: Record<string, unknown>;
}

export interface Page<T> {
  count: number;
  next?: string | null;
  previous?: string | null;
  results: T[];
}

export interface WorkloadEvent {
  time: string;
  type: string;
  reason: string;
  message: string;
}

/** Messages on ws(s)://host/ws/projects/<slug>/events/. Unknown types are ignored. */
export type LiveMessage =
  | { type: "workload.status"; workload: number; status: Status; reason?: string }
  | { type: "workload.event"; workload: number; reason: string; message: string; event_type?: string; time?: string };
