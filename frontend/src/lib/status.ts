// Workload statuses as the API names them (apps/workloads/choices.py), coloured for the UI.
import type { Schemas } from "../api/client";

export const STATUSES = ["queued", "admitted", "running", "stopping", "succeeded", "failed", "stopped", "lost"] as const;
export type WorkloadStatus = (typeof STATUSES)[number];

const COLOURS: Record<string, string> = {
  queued: "yellow",
  admitted: "cyan",
  running: "blue",
  stopping: "orange",
  succeeded: "green",
  failed: "red",
  stopped: "gray",
  lost: "grape",
};

export function statusColour(status: string): string {
  return COLOURS[status] ?? "gray";
}

const FINAL = new Set(["succeeded", "failed", "stopped", "lost"]);

export function isFinal(status: string): boolean {
  return FINAL.has(status);
}

/** A workload kind's name. The kinds, their labels and routes come from the server
 * (GET /api/v1/kinds/, lib/kinds.ts): the dashboard keeps no list of them. */
export type WorkloadKind = string;

/** What a queued workload waits on (the API's `waiting_on`, apps/workloads/choices.py WaitingOn):
 * a short label for tables, a colour, and what would end the wait. Typed on the schema's enum, so
 * the build breaks if the API grows a kind this map does not name. */
export type WaitingOn = Schemas["WaitingOnEnum"];
export const WAITING_ON: Record<WaitingOn, { label: string; colour: string; hint: string }> = {
  capacity: { label: "capacity", colour: "blue", hint: "No node has room for it now; it starts as running work ends." },
  reserved: { label: "reserved", colour: "teal", hint: "Next in line: capacity is being held for it as running work ends." },
  preempting: { label: "preempting", colour: "orange", hint: "It preempted other work and starts when that work has exited." },
  quota_lent: { label: "nominal lent out", colour: "yellow", hint: "Within its project's nominal quota, which other projects have borrowed; it is being reclaimed." },
  quota_lendable: { label: "nothing to borrow", colour: "yellow", hint: "Beyond its project's nominal quota, and the pool has too little unused quota left to lend (other projects use it, or keep it)." },
  quota_limit: { label: "quota limit", colour: "red", hint: "Its project's nominal quota plus borrowing limit is used up." },
  quota_none: { label: "no quota", colour: "red", hint: "Its project has no quota on this pool." },
  budget: { label: "budget", colour: "red", hint: "Its project's GPU-hour budget for the period would be overrun." },
  constraint: { label: "GPU model", colour: "grape", hint: "No schedulable node has a GPU model it allows." },
  locality: { label: "data locality", colour: "teal", hint: "Waiting a bounded time for a node that already caches its datasets; it starts elsewhere if none frees up in time." },
  never_fits: { label: "never fits", colour: "red", hint: "A replica is larger than every node of its pool (nodes were removed or shrank): no node of this pool can ever run it. It waits in case nodes are added; stop it, or resubmit it smaller." },
};
export const WAITING_ON_VALUES = Object.keys(WAITING_ON) as WaitingOn[];

/** What a queued workload waits on, as one plain sentence for people (the sweep page's waiting
 * trials, the project overview, the workloads list's reason column): what holds it and what ends
 * the wait, without the scheduler's words. */
export const WAITING_SENTENCE: Record<string, string> = {
  capacity: "Waiting for room: every node that could run it is busy; it starts as running work ends.",
  reserved: "Next in line: room is being kept for it as running work ends.",
  preempting: "Starting soon: lower-priority work is being stopped to make room for it.",
  quota_lent: "Waiting for its quota: other projects borrowed it and are giving it back.",
  quota_lendable: "Waiting for quota: the project uses all of its own, and no other project has any to spare; it starts when some of that work ends.",
  quota_limit: "Waiting for quota: the project uses all it may, borrowing included; it starts when some of its own work ends.",
  quota_none: "Cannot start: the project has no quota on this pool. Ask an administrator for one.",
  budget: "Waiting for budget: it would use more GPU-hours than the project has left this period.",
  constraint: "Waiting for a node with a GPU model it allows.",
  locality: "Waiting a short while for a node that already holds its data; it starts elsewhere if none frees up in time.",
  never_fits: "Cannot start: it is larger than every node of its pool. Stop it, or run it again smaller.",
};

/** The sentence for a queued workload: by what it waits on, else the scheduler's own reason. */
export function waitSentence(waitingOn: string | null | undefined, pendingReason?: string | null): string {
  if (waitingOn && waitingOn in WAITING_SENTENCE) return WAITING_SENTENCE[waitingOn];
  return pendingReason?.trim() || "Waiting for the scheduler's first decision.";
}
