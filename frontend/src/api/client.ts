// The typed API client. Types come from the OpenAPI schema Django generates
// (frontend/openapi.json → src/api/schema.d.ts, see `npm run gen:api`), so a renamed field
// breaks the build instead of the page.
import createClient, { type Middleware } from "openapi-fetch";
import type { components, paths } from "./schema";

export type Schemas = components["schemas"];

/** An API answer other than 2xx: status, the one-line `detail` and per-field messages. */
export class ApiError extends Error {
  readonly status: number;
  readonly detail: string;
  readonly fieldErrors: Record<string, string[]>;

  constructor(status: number, body: unknown) {
    const { detail, fieldErrors } = parseErrorBody(status, body);
    super(detail);
    this.name = "ApiError";
    this.status = status;
    this.detail = detail;
    this.fieldErrors = fieldErrors;
  }
}

/** Flatten DRF's nested `errors` ({"resources": {"gpu": ["..."]}}) into dotted field paths. */
export function flattenFieldErrors(errors: unknown, prefix = ""): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  if (Array.isArray(errors)) {
    const messages = errors.filter((e): e is string => typeof e === "string");
    if (messages.length) out[prefix || "non_field_errors"] = messages;
    errors.forEach((item, index) => {
      if (item && typeof item === "object") Object.assign(out, flattenFieldErrors(item, `${prefix}.${index}`));
    });
  } else if (errors && typeof errors === "object") {
    for (const [key, value] of Object.entries(errors as Record<string, unknown>)) {
      Object.assign(out, flattenFieldErrors(value, prefix ? `${prefix}.${key}` : key));
    }
  } else if (typeof errors === "string") {
    out[prefix || "non_field_errors"] = [errors];
  }
  return out;
}

export function parseErrorBody(status: number, body: unknown): { detail: string; fieldErrors: Record<string, string[]> } {
  if (body && typeof body === "object") {
    const record = body as Record<string, unknown>;
    const detail = typeof record.detail === "string" ? record.detail : `Request failed (${status}).`;
    return { detail, fieldErrors: record.errors ? flattenFieldErrors(record.errors) : {} };
  }
  if (typeof body === "string" && body.trim()) return { detail: body.trim().slice(0, 300), fieldErrors: {} };
  return { detail: status === 0 ? "Cairn is not reachable. Check your connection." : `Request failed (${status}).`, fieldErrors: {} };
}

export function csrfToken(cookies: string = document.cookie): string | undefined {
  const match = cookies.split(";").map((c) => c.trim()).find((c) => c.startsWith("csrftoken="));
  return match ? decodeURIComponent(match.slice("csrftoken=".length)) : undefined;
}

const UNSAFE = new Set(["POST", "PUT", "PATCH", "DELETE"]);

// Session-authenticated writes need Django's CSRF token; reads need nothing extra.
const csrf: Middleware = {
  onRequest({ request }) {
    if (UNSAFE.has(request.method)) {
      const token = csrfToken();
      if (token) request.headers.set("X-CSRFToken", token);
    }
    return request;
  },
};

export const api = createClient<paths>({ baseUrl: "", credentials: "same-origin" });
api.use(csrf);

/** Unwrap an openapi-fetch result: the data, or throw ApiError with the server's detail. */
export async function unwrap<T>(promise: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  let result: { data?: T; error?: unknown; response: Response };
  try {
    result = await promise;
  } catch {
    throw new ApiError(0, null);
  }
  if (!result.response.ok) throw new ApiError(result.response.status, result.error);
  return result.data as T;
}

/** Plain fetch for the few answers that are not JSON (logs as text, CSV). */
export async function fetchText(url: string): Promise<string> {
  let response: Response;
  try {
    response = await fetch(url, { credentials: "same-origin" });
  } catch {
    throw new ApiError(0, null);
  }
  const text = await response.text();
  if (!response.ok) {
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      /* not JSON: keep the text */
    }
    throw new ApiError(response.status, body);
  }
  return text;
}

/** JSON request for endpoints used before their schema types existed (and for tests). */
export async function apiRequest<T>(method: string, url: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (UNSAFE.has(method)) {
    const token = csrfToken();
    if (token) headers["X-CSRFToken"] = token;
  }
  let response: Response;
  try {
    response = await fetch(url, {
      method,
      headers,
      credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, null);
  }
  const text = await response.text();
  let data: unknown = undefined;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = text;
    }
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return data as T;
}
