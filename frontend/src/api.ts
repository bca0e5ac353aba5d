// The REST API client: session cookie auth, CSRF token on writes, `{"detail": ...}` errors.
import { config } from "./config";
import type { Kind, Me, Page, Workload, WorkloadEvent } from "./types";

/** The URL segment of each workload kind under /api/v1/projects/<slug>/. */
export const KIND_ROUTE: Record<Kind, string> = {
  training: "training-jobs",
  notebook: "notebooks",
  deployment: "deployments",
};

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = "ApiError";
  }

  /** The session is missing or expired (DRF answers 401 or 403 depending on the authenticator). */
  get unauthenticated(): boolean {
    return this.status === 401 || this.status === 403;
  }
}

function cookie(name: string): string {
  for (const part of document.cookie.split(";")) {
    const [key, ...rest] = part.trim().split("=");
    if (key === name) return decodeURIComponent(rest.join("="));
  }
  return "";
}

/** Django's CSRF token: the `csrftoken` cookie (the dashboard page makes sure it is set). */
export function csrfToken(): string {
  return cookie("csrftoken");
}

const FALLBACK_MESSAGES: Record<number, string> = {
  401: "You are not logged in.",
  403: "You are not allowed to do that.",
  404: "Not found (or you are not a member of this project).",
  409: "Conflict: the workload changed meanwhile.",
  429: "Too many requests; try again in a moment.",
};

async function request(
  path: string,
  { method = "GET", accept = "application/json", signal }: { method?: string; accept?: string; signal?: AbortSignal } = {},
): Promise<Response> {
  const headers: Record<string, string> = { Accept: accept };
  if (method !== "GET" && method !== "HEAD") headers["X-CSRFToken"] = csrfToken();
  let response: Response;
  try {
    response = await fetch(path, { method, headers, credentials: "same-origin", signal });
  } catch (error) {
    if (error instanceof DOMException && error.name === "AbortError") throw error;
    throw new ApiError(0, "Cannot reach the Cairn server. Is it running?");
  }
  if (!response.ok) {
    let detail = "";
    try {
      const body: unknown = await response.json();
      if (body && typeof body === "object" && "detail" in body) detail = String((body as { detail: unknown }).detail);
    } catch {
      // not JSON: fall back to a generic message
    }
    throw new ApiError(
      response.status,
      detail || FALLBACK_MESSAGES[response.status] || `The server answered ${response.status} ${response.statusText}.`,
    );
  }
  return response;
}

async function json<T>(path: string, signal?: AbortSignal): Promise<T> {
  return (await request(path, { signal })).json() as Promise<T>;
}

function projectPath(slug: string): string {
  return `${config.apiRoot}projects/${encodeURIComponent(slug)}/`;
}

function workloadPath(slug: string, workload: Pick<Workload, "id" | "kind">): string {
  return `${projectPath(slug)}${KIND_ROUTE[workload.kind]}/${workload.id}/`;
}

export const api = {
  me(signal?: AbortSignal): Promise<Me> {
    return json<Me>(`${config.apiRoot}me/`, signal);
  },

  workloads(slug: string, signal?: AbortSignal): Promise<Page<Workload>> {
    return json<Page<Workload>>(`${projectPath(slug)}workloads/?page_size=100&ordering=-created_at`, signal);
  },

  /** All events of a workload, oldest first (follows pagination, at most `maxPages` pages). */
  async events(slug: string, workload: Workload, signal?: AbortSignal, maxPages = 10): Promise<WorkloadEvent[]> {
    const events: WorkloadEvent[] = [];
    let next: string | null | undefined = `${workloadPath(slug, workload)}events/?page_size=200`;
    for (let page = 0; next && page < maxPages; page++) {
      const body: Page<WorkloadEvent> = await json<Page<WorkloadEvent>>(next, signal);
      events.push(...body.results);
      next = body.next;
    }
    return events;
  },

  async logs(slug: string, workload: Workload, replica: number, tail: number, signal?: AbortSignal): Promise<string> {
    const path = `${workloadPath(slug, workload)}logs/?replica=${replica}&tail=${tail}`;
    // The body is text/plain; errors still come as JSON `{"detail": ...}` (and DRF refuses an
    // Accept header that no renderer of the API offers, so JSON must be acceptable too).
    return (await request(path, { accept: "text/plain, application/json;q=0.9", signal })).text();
  },

  async stop(slug: string, workload: Workload): Promise<void> {
    await request(`${workloadPath(slug, workload)}stop/`, { method: "POST" });
  },

  async logout(): Promise<void> {
    await request(config.logoutUrl, { method: "POST", accept: "text/html" });
  },
};
