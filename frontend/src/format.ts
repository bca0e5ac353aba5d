// Formatting helpers: ages, resource amounts, labels.
import type { Kind, Resources, Status } from "./types";

export const KIND_LABEL: Record<Kind, string> = {
  training: "Training job",
  notebook: "Notebook",
  deployment: "Deployment",
};

export const TERMINAL: ReadonlySet<Status> = new Set(["succeeded", "failed", "stopped", "lost"]);
/** Statuses in which replicas may be running and writing logs. */
export const ACTIVE: ReadonlySet<Status> = new Set(["admitted", "running", "stopping"]);

/** "42s", "5m", "3h12m", "2d4h", "40d": the time since `iso`. */
export function age(iso: string | null, now: number = Date.now()): string {
  if (!iso) return "—";
  const seconds = Math.max(0, Math.floor((now - Date.parse(iso)) / 1000));
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return minutes % 60 ? `${hours}h${minutes % 60}m` : `${hours}h`;
  const days = Math.floor(hours / 24);
  return days < 10 && hours % 24 ? `${days}d${hours % 24}h` : `${days}d`;
}

export function timestamp(iso: string | null): string {
  if (!iso) return "—";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

export function clock(iso: string): string {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleTimeString();
}

/** A number without trailing zeros: 1, 0.5, 2.25. */
export function amount(value: number): string {
  if (Number.isInteger(value)) return String(value);
  return value.toFixed(2).replace(/0+$/, "").replace(/\.$/, "");
}

export function memory(mb: number): string {
  if (mb >= 1024) return `${amount(mb / 1024)} GiB`;
  return `${amount(mb)} MiB`;
}

/** Per-replica resources: "1 GPU · 4 CPU · 16 GiB". */
export function resources(r: Resources | null | undefined): string {
  if (!r) return "—";
  const parts: string[] = [];
  if (r.gpu) parts.push(`${amount(r.gpu)} GPU`);
  if (r.cpu) parts.push(`${amount(r.cpu)} CPU`);
  if (r.memory_mb) parts.push(memory(r.memory_mb));
  return parts.length ? parts.join(" · ") : "—";
}

export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
