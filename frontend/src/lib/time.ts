// "How long ago" for timestamps that are in the past by nature (created, last used, submitted).
import { formatRelative } from "./format";

/**
 * Like formatRelative, but a timestamp slightly ahead of `now` (a row that arrived after the
 * page's clock last ticked, or a little clock skew) reads "just now", never "in a few seconds".
 */
export function formatAgo(iso: string | null | undefined, now: number = Date.now(), empty = "—"): string {
  if (!iso) return empty;
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return empty;
  if (t > now - 45_000 && t < now + 5 * 60_000) return "just now";
  return formatRelative(iso, now);
}

/** Age without the "ago": "12m", "3h 5m" → "12m", "3h". */
export function formatWaiting(iso: string | null | undefined, now: number = Date.now()): string {
  const ago = formatAgo(iso, now);
  return ago.endsWith(" ago") ? ago.slice(0, -4) : ago;
}
