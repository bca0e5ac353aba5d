// Who is signed in, and which projects they can open. GET /api/v1/me/ answers 401/403
// when there is no session; the app then shows the sign-in page.
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { createContext, useContext, type ReactNode } from "react";
import { ApiError, apiRequest } from "./api/client";

export interface ProjectRef {
  slug: string;
  name: string;
  role: string;
}

export interface Me {
  id: number;
  username: string;
  email: string;
  is_staff: boolean;
  projects: ProjectRef[];
}

export const ME_KEY = ["me"] as const;

export function fetchMe(): Promise<Me> {
  return apiRequest<Me>("GET", "/api/v1/me/");
}

export function signIn(username: string, password: string): Promise<Me> {
  return apiRequest<Me>("POST", "/api/v1/auth/session/", { username, password });
}

export function signOut(): Promise<void> {
  return apiRequest<void>("DELETE", "/api/v1/auth/session/");
}

export function isSignedOut(error: unknown): boolean {
  return error instanceof ApiError && (error.status === 401 || error.status === 403);
}

export function useMeQuery() {
  return useQuery({ queryKey: ME_KEY, queryFn: fetchMe, retry: (count, error) => !isSignedOut(error) && count < 2 });
}

const MeContext = createContext<Me | null>(null);

export function MeProvider({ me, children }: { me: Me; children: ReactNode }) {
  return <MeContext.Provider value={me}>{children}</MeContext.Provider>;
}

/** The signed-in user; only valid under <MeProvider> (every page but sign-in). */
export function useMe(): Me {
  const me = useContext(MeContext);
  if (!me) throw new Error("useMe outside MeProvider");
  return me;
}

export function useRefreshMe(): () => Promise<void> {
  const client = useQueryClient();
  return () => client.invalidateQueries({ queryKey: ME_KEY });
}

const LAST_PROJECT = "cairn.lastProject";

export function rememberProject(slug: string): void {
  try {
    localStorage.setItem(LAST_PROJECT, slug);
  } catch {
    /* private mode: nothing to remember */
  }
}

/** The project to open by default: the last one used if still allowed, else the first. */
export function defaultProject(me: Me, stored: string | null = safeGet(LAST_PROJECT)): string | null {
  if (stored && me.projects.some((p) => p.slug === stored)) return stored;
  return me.projects[0]?.slug ?? null;
}

function safeGet(key: string): string | null {
  try {
    return localStorage.getItem(key);
  } catch {
    return null;
  }
}

/** Roles that may submit and stop work (projects/choices.py MINIMUM_ROLE for writes). */
export function canWrite(role: string | undefined): boolean {
  return role === "owner" || role === "maintainer" || role === "member";
}
