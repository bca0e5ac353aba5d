// A workload's status history as timeline segments, derived from its event trail.
// Pure; unit-tested in timeline.test.ts.
import { isFinal } from "./status";

/** The fields of an API event (GET .../<id>/events/) the timeline needs. */
export interface TimelineEvent {
  time: string;
  reason?: string;
  message?: string;
  from_status?: string;
  to_status?: string;
}

export interface TimelineSegment {
  status: string;
  /** ms since the epoch */
  start: number;
  end: number;
  /** still going on (the current, unfinished status) */
  open: boolean;
  reason: string;
  message: string;
}

export interface TimelineInput {
  /** the workload's current status (may be newer than the events, from the live socket) */
  status: string;
  created_at: string;
  finished_at?: string | null;
  events: readonly TimelineEvent[];
  now: number;
  /** reason of the current status, when known */
  statusReason?: string;
  statusMessage?: string;
}

function parse(iso: string | null | undefined): number | null {
  if (!iso) return null;
  const t = Date.parse(iso);
  return Number.isNaN(t) ? null : t;
}

/**
 * One segment per status the workload went through, in order. Consecutive repeats of a status
 * are merged. The last segment is open (ends `now`) unless the status is final, in which case it
 * is a point in time (start = end = when it finished).
 */
export function deriveSegments(input: TimelineInput): TimelineSegment[] {
  const transitions = input.events
    .map((e, index) => ({ e, index, t: parse(e.time) }))
    .filter((x): x is { e: TimelineEvent; index: number; t: number } => !!x.e.to_status && x.t !== null)
    .sort((a, b) => a.t - b.t || a.index - b.index);

  const created = parse(input.created_at) ?? transitions[0]?.t ?? input.now;
  const start = Math.min(created, transitions[0]?.t ?? created);
  const segments: TimelineSegment[] = [];
  const open = (status: string, at: number, reason = "", message = "") => {
    const last = segments[segments.length - 1];
    if (last && last.status === status) return; // a repeat: the segment simply goes on
    if (last) last.end = Math.max(last.start, at);
    segments.push({ status, start: Math.max(at, last?.start ?? at), end: at, open: false, reason, message });
  };

  open(transitions[0]?.e.from_status || "queued", start, "Submitted");
  for (const { e, t } of transitions) open(e.to_status as string, t, e.reason ?? "", e.message ?? "");
  const finished = parse(input.finished_at);
  if (input.status && input.status !== segments[segments.length - 1].status) {
    // The socket told us about a change the fetched events do not have yet.
    const at = isFinal(input.status) && finished !== null ? finished : input.now;
    open(input.status, at, input.statusReason ?? "", input.statusMessage ?? "");
  }

  const last = segments[segments.length - 1];
  if (isFinal(last.status)) {
    last.end = last.start;
  } else {
    last.end = Math.max(last.start, input.now);
    last.open = true;
  }
  if (input.statusReason && last.status === input.status && !last.reason) last.reason = input.statusReason;
  return segments;
}

export interface PlacedSegment extends TimelineSegment {
  /** fraction of the bar's width, 0..1 */
  left: number;
  width: number;
}

/**
 * Horizontal placement: each segment's width is its share of the total time, but at least
 * `minWidth` so short statuses (and the final point) stay visible; widths then sum to 1.
 */
export function layoutTimeline(segments: readonly TimelineSegment[], minWidth = 0.04): PlacedSegment[] {
  if (!segments.length) return [];
  const total = segments.reduce((sum, s) => sum + Math.max(0, s.end - s.start), 0);
  const raw = segments.map((s) => (total > 0 ? Math.max(0, s.end - s.start) / total : 1 / segments.length));
  const floor = Math.min(minWidth, 1 / segments.length);
  const widened = raw.map((w) => Math.max(w, floor));
  const sum = widened.reduce((a, b) => a + b, 0);
  let left = 0;
  return segments.map((s, i) => {
    const width = widened[i] / sum;
    const placed = { ...s, left, width };
    left += width;
    return placed;
  });
}

/**
 * The header's "Running for" / "Ran for", from the same segments (and so the same clock) as the
 * timeline: while the workload runs, how long its current run has lasted (the open "running"
 * segment, whose label reads the same); otherwise how long it ran in all (every "running"
 * segment). Null when it never ran.
 */
export function runningTime(segments: readonly TimelineSegment[]): { seconds: number; current: boolean } | null {
  const running = segments.filter((s) => s.status === "running");
  if (!running.length) return null;
  const last = segments[segments.length - 1];
  if (last.status === "running" && last.open) return { seconds: (last.end - last.start) / 1000, current: true };
  return { seconds: running.reduce((sum, s) => sum + Math.max(0, s.end - s.start), 0) / 1000, current: false };
}

/** Newest first (ties: the later id first): the Events panel's order, so the latest is seen first. */
export function eventsNewestFirst<T extends { time: string; id: number }>(events: readonly T[]): T[] {
  return eventsInOrder(events).reverse();
}

/** Events in the order the API and the CLI share: oldest first (ties by id). */
export function eventsInOrder<T extends { time: string; id: number }>(events: readonly T[]): T[] {
  return [...events].sort((a, b) => Date.parse(a.time) - Date.parse(b.time) || a.id - b.id);
}
