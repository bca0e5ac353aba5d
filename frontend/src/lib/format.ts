// Small, pure formatting helpers shared by every page (unit-tested in format.test.ts).

export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "—";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h ${m % 60}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

/**
 * A run-time limit, exactly (it is a setting, not a measurement): 7200 → "2 h",
 * 5400 → "1 h 30 min", 90 → "1 min 30 s", 2592000 → "30 d"; no limit → "none".
 */
export function formatRunTimeLimit(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds) || seconds <= 0) return "none";
  let left = Math.round(seconds);
  const parts: string[] = [];
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]] as const) {
    if (left < size) continue;
    parts.push(`${Math.floor(left / size)} ${unit}`);
    left %= size;
  }
  return parts.join(" ");
}

/** "3 min ago" / "in 2 h": relative to `now` (ms), for timestamps in ISO form. */
export function formatRelative(iso: string | null | undefined, now: number = Date.now()): string {
  if (!iso) return "—";
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return "—";
  const delta = (t - now) / 1000;
  const abs = Math.abs(delta);
  const text = abs < 45 ? "a few seconds" : formatDuration(abs).split(" ")[0];
  return delta < 0 ? `${text} ago` : `in ${text}`;
}

export function formatGpu(milli: number | null | undefined): string {
  if (milli === null || milli === undefined) return "—";
  const gpus = milli / 1000;
  return Number.isInteger(gpus) ? `${gpus}` : gpus.toFixed(2).replace(/0+$/, "");
}

export function formatNumber(value: number | null | undefined, digits = 4): string {
  if (value === null || value === undefined || Number.isNaN(value)) return "—";
  if (!Number.isFinite(value)) return value > 0 ? "∞" : "-∞";
  const abs = Math.abs(value);
  if (abs !== 0 && (abs >= 1e6 || abs < 1e-3)) return value.toExponential(2);
  return Number(value.toPrecision(digits)).toString();
}

export function formatBytesMb(mb: number | null | undefined): string {
  if (mb === null || mb === undefined) return "—";
  if (mb >= 1024) return `${(mb / 1024).toFixed(mb >= 10240 ? 0 : 1)} GiB`;
  return `${Math.round(mb)} MiB`;
}

export function formatPercent(value: number | null | undefined): string {
  if (value === null || value === undefined || Number.isNaN(value)) return "—";
  return `${Math.round(value)}%`;
}

/** A deadline (ms) as its time of day, with the date when it is not on the day of `now`. */
export function formatClock(at: number, now: number): string {
  const date = new Date(at);
  const time = date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  return date.toDateString() === new Date(now).toDateString()
    ? time
    : `${date.toLocaleDateString([], { month: "short", day: "numeric" })} ${time}`;
}
