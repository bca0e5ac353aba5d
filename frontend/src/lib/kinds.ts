// Workload kinds as the server runs them (GET /api/v1/kinds/, apps/workloads/kinds.py KindSpec):
// the dashboard keeps no list of its own, so a kind added on the server shows up here with its
// label, in the kind filter and the lists, without a dashboard change.
import { useQuery } from "@tanstack/react-query";
import { api, unwrap, type Schemas } from "../api/client";

export type Kind = Schemas["WorkloadKind"];

export const KINDS_KEY = ["kinds"] as const;

export function fetchKinds(): Promise<Kind[]> {
  return unwrap(api.GET("/api/v1/kinds/"));
}

/** The kinds the server runs (empty until they are read; read once per page load). */
export function useKinds(): readonly Kind[] {
  const query = useQuery({ queryKey: KINDS_KEY, queryFn: fetchKinds, staleTime: Infinity });
  return query.data ?? NONE;
}

const NONE: readonly Kind[] = [];

/** A kind's label for people ("Training job"), or its name when the server does not list it. */
export function kindLabel(kinds: readonly Kind[], kind: string): string {
  return kinds.find((k) => k.kind === kind)?.label ?? kind;
}

/** `kindLabel` bound to the server's kinds. */
export function useKindLabel(): (kind: string) => string {
  const kinds = useKinds();
  return (kind: string) => kindLabel(kinds, kind);
}

/** Whether `value` names a kind the server runs; undecided (true) while they are not read yet. */
export function isKnownKind(kinds: readonly Kind[], value: string): boolean {
  return kinds.length === 0 ? /^[a-z][a-z0-9_-]*$/.test(value) : kinds.some((k) => k.kind === value);
}
