// The workload page's resilience panel, as pure logic: goodput as parts of the wall time, how a
// straggler compares with its peers, where checkpoints fall on the status bar
// (GET .../workloads/<id>/resilience/, docs/training.md "Goodput").
import type { Schemas } from "../api/client";
import { formatBytes } from "./bytes";
import { formatDuration } from "./format";
import type { PlacedSegment } from "./timeline";

export type Resilience = Schemas["Resilience"];
export type Goodput = Schemas["Goodput"];
export type SlowGroup = Schemas["SlowGroup"];

export type GoodputKey = "productive" | "redone" | "hung" | "overhead";

export interface GoodputPart {
  key: GoodputKey;
  label: string;
  seconds: number;
  /** share of the wall time, 0..1 */
  fraction: number;
  colour: string;
}

const PARTS: { key: GoodputKey; label: string; colour: string }[] = [
  { key: "productive", label: "Productive", colour: "teal" },
  { key: "redone", label: "Redone since the last checkpoint", colour: "orange" },
  { key: "hung", label: "Hung", colour: "red" },
  { key: "overhead", label: "Restarting", colour: "grape" },
];

/** The wall time split into productive, redone, hung and restart time; empty parts left out. */
export function goodputParts(g: Goodput): GoodputPart[] {
  if (!(g.wall_seconds > 0)) return [];
  const seconds: Record<GoodputKey, number> = {
    productive: g.productive_seconds,
    redone: g.redone_seconds,
    hung: g.hung_seconds,
    overhead: g.overhead_seconds,
  };
  return PARTS.filter((p) => seconds[p.key] > 0).map((p) => ({
    ...p,
    seconds: seconds[p.key],
    fraction: Math.min(1, seconds[p.key] / g.wall_seconds),
  }));
}

/** 0.853 → "85%"; no goodput (nothing ran, or a kind that does not run to completion) → "—". */
export function formatGoodput(ratio: number | null | undefined): string {
  if (ratio === null || ratio === undefined || !Number.isFinite(ratio)) return "—";
  return `${Math.round(ratio * 100)}%`;
}

/** What failures cost, in one line: "Lost 30s: 20s redone, 10s restarting" (or "Nothing lost"). */
export function lossSummary(g: Goodput): string {
  const parts = [
    [g.redone_seconds, "redone"],
    [g.hung_seconds, "hung"],
    [g.overhead_seconds, "restarting"],
  ] as const;
  const lost = g.lost_seconds + g.overhead_seconds;
  if (!(lost > 0)) return "Nothing lost to failures";
  const said = parts.filter(([s]) => s > 0).map(([s, what]) => `${formatDuration(s)} ${what}`);
  const gpu = g.gpu_hours_lost > 0 ? ` · ${g.gpu_hours_lost.toFixed(g.gpu_hours_lost < 10 ? 2 : 1)} GPU-h` : "";
  return `Lost ${formatDuration(lost)}: ${said.join(", ")}${gpu}`;
}

/** A rank's step time against its peers' median: 3.04 → "3.0× the median"; unknown → "". */
export function slowdownLabel(ratio: number | null | undefined): string {
  if (ratio === null || ratio === undefined || !Number.isFinite(ratio) || ratio <= 0) return "";
  return `${ratio.toFixed(1)}× the median`;
}

/** Is there anything to show? A notebook, a deployment or a job without the SDK has nothing. */
/**
 * A slow group in words: which ranks, how much slower than the others since which step, and
 * what they share (a GPU used by two of them, one node): the placement lead to look at.
 */
export function slowGroupLabel(group: SlowGroup): string {
  const shared = new Map<string, number[]>();
  for (const p of group.placement ?? []) {
    for (const gpu of p.node ? p.gpus : []) {
      const key = `GPU ${gpu} of ${p.node}`;
      shared.set(key, [...(shared.get(key) ?? []), p.replica]);
    }
  }
  const nodes = [...new Set((group.placement ?? []).map((p) => p.node).filter((n): n is string => !!n))];
  const sharing = [...shared].filter(([, ranks]) => ranks.length > 1).map(([key, ranks]) => `${key} shared by ${ranks.join(", ")}`);
  const where = sharing.length > 0 ? sharing.join("; ") : nodes.length > 0 ? `on ${nodes.join(", ")}` : "";
  return `Ranks ${group.ranks.join(", ")}: ${group.ratio.toFixed(1)}× the others since step ${group.since}${where ? ` · ${where}` : ""}`;
}

export function hasResilience(r: Resilience | undefined): r is Resilience {
  return !!r && (r.goodput.goodput !== null || r.ranks.length > 0 || r.checkpoints.length > 0 || r.restarts.length > 0);
}

/**
 * Where time `t` (ms) falls on the status bar (lib/timeline.ts layoutTimeline), as a fraction of
 * its width: segments are widened so short ones stay visible, so the bar is linear only inside
 * each segment. Null outside the bar.
 */
export function positionOnTimeline(placed: readonly PlacedSegment[], t: number): number | null {
  for (const s of placed) {
    if (t < s.start || t > s.end) continue;
    const span = s.end - s.start;
    return s.left + (span > 0 ? ((t - s.start) / span) * s.width : 0);
  }
  return null;
}

export interface TimelineMark {
  /** fraction of the bar's width, 0..1 */
  left: number;
  label: string;
}

/** The checkpoints as marks on the status bar, each with "step 80 · 1.2 MiB saved in 0.4s". */
export function checkpointMarks(
  placed: readonly PlacedSegment[],
  checkpoints: readonly Schemas["Checkpoint"][],
): TimelineMark[] {
  const marks: TimelineMark[] = [];
  for (const c of checkpoints) {
    const left = positionOnTimeline(placed, Date.parse(c.time));
    if (left === null) continue;
    marks.push({
      left,
      label: `Checkpoint at step ${c.step} · ${formatBytes(c.size_bytes)} saved in ${c.save_seconds.toFixed(1)}s (training blocked ${c.blocking_seconds.toFixed(1)}s) · attempt ${c.attempt}`,
    });
  }
  return marks;
}
