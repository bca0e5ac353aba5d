// What the notebook page says about idle reclaim (the culler's view, GET .../notebooks/<id>/activity/).
import { formatDuration } from "./format";

export interface NotebookActivity {
  running: boolean;
  idle_timeout: number;
  idle_seconds: number | null;
  cull_at: string | null;
  checked_at: string | null;
  busy_kernels: number | null;
  gpu_utilisation: number | null;
  summary: string;
}

export interface IdleFacts {
  /** "4m" idle (grows between polls), or "—" when it is not running. */
  idle: string;
  /** "in 56m", "any moment now", "never (idle_timeout 0)". */
  deadline: string;
  /** "12.5%", or "no telemetry". */
  gpu: string;
  /** Busy kernels keep it alive: say so. */
  busy: string | null;
}

/** The idle time, the culling deadline and the GPU utilisation, as of `now` (ms). */
export function idleFacts(a: NotebookActivity, now: number): IdleFacts {
  const checked = a.checked_at ? Date.parse(a.checked_at) : now;
  const idleSeconds = a.idle_seconds === null ? null : a.idle_seconds + Math.max(0, (now - checked) / 1000);
  const busy = a.busy_kernels ? `${a.busy_kernels} kernel${a.busy_kernels === 1 ? "" : "s"} busy` : null;
  let deadline: string;
  if (!a.running) deadline = "—";
  else if (a.idle_timeout === 0 || a.cull_at === null) deadline = "never (idle_timeout 0)";
  else if (busy) deadline = "not while a kernel is busy";
  else {
    const left = (Date.parse(a.cull_at) - now) / 1000;
    deadline = left > 0 ? `in ${formatDuration(left)}` : "any moment now";
  }
  return {
    idle: idleSeconds === null || !a.running ? "—" : busy ? "active" : formatDuration(idleSeconds),
    deadline,
    gpu: a.gpu_utilisation === null ? "no telemetry" : `${a.gpu_utilisation.toFixed(1)}%`,
    busy,
  };
}

export type NotebookIde = "jupyterlab" | "vscode";

/** The IDE a notebook runs (its spec's `ide`, JupyterLab when unset); null for other kinds. */
export function notebookIde(w: { kind: string; spec?: unknown }): NotebookIde | null {
  if (w.kind !== "notebook") return null;
  const spec = w.spec && typeof w.spec === "object" ? (w.spec as Record<string, unknown>) : {};
  return spec.ide === "vscode" ? "vscode" : "jupyterlab";
}

export const IDE_LABEL: Record<NotebookIde, string> = { jupyterlab: "JupyterLab", vscode: "VS Code" };
