// When a page's query should try again: not after a refusal (4xx: retrying cannot help, and the
// page should say what to do at once), at most twice after a network failure or a server error.
import { ApiError } from "../api/client";

export function retryTransient(failureCount: number, error: unknown): boolean {
  if (error instanceof ApiError && error.status >= 400 && error.status < 500 && error.status !== 429) return false;
  return failureCount < 2;
}
