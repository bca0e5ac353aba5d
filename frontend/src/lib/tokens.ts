// API tokens: their state, and the create request built from the form (name, expiry, scopes).

export type TokenState = "active" | "revoked" | "expired";

export function tokenState(
  token: { revoked_at: string | null; expires_at: string | null },
  now: number = Date.now(),
): TokenState {
  if (token.revoked_at) return "revoked";
  if (token.expires_at) {
    const t = Date.parse(token.expires_at);
    if (!Number.isNaN(t) && t <= now) return "expired";
  }
  return "active";
}

export const TOKEN_STATE_COLOUR: Record<TokenState, string> = { active: "green", revoked: "gray", expired: "orange" };

/** Expiry choices of the create form; "server" sends nothing (the server's default, 90 days). */
export type ExpiryChoice = "server" | "7" | "30" | "365" | "never" | "date";

export const EXPIRY_OPTIONS: { value: ExpiryChoice; label: string }[] = [
  { value: "7", label: "In 7 days" },
  { value: "30", label: "In 30 days" },
  { value: "server", label: "In 90 days (default)" },
  { value: "365", label: "In a year" },
  { value: "date", label: "On a date…" },
  { value: "never", label: "Never" },
];

export type ScopeChoice = "read,write" | "read";

export interface TokenForm {
  name: string;
  expiry: ExpiryChoice;
  /** yyyy-mm-dd, for expiry "date": the token expires at the end of that day (local time). */
  date: string;
  scopes: ScopeChoice;
}

export interface TokenCreateBody {
  name: string;
  scopes: ("read" | "write")[];
  expires_at?: string;
  never_expires?: boolean;
}

/** The POST /api/v1/tokens/ body, or the error to show next to the offending field. */
export function buildTokenBody(
  form: TokenForm,
  now: Date = new Date(),
): { body: TokenCreateBody | null; errors: Partial<Record<"name" | "date", string>> } {
  const errors: Partial<Record<"name" | "date", string>> = {};
  const name = form.name.trim();
  if (!name) errors.name = "Give the token a name, e.g. the machine or program that will use it.";
  else if (name.length > 100) errors.name = "At most 100 characters.";
  const body: TokenCreateBody = { name, scopes: form.scopes === "read" ? ["read"] : ["read", "write"] };
  if (form.expiry === "never") body.never_expires = true;
  else if (form.expiry === "date") {
    const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(form.date.trim());
    if (!match) errors.date = "Pick the day the token stops working.";
    else {
      const end = new Date(Number(match[1]), Number(match[2]) - 1, Number(match[3]), 23, 59, 59);
      if (Number.isNaN(end.getTime()) || end.getMonth() !== Number(match[2]) - 1) errors.date = "Not a date.";
      else if (end.getTime() <= now.getTime()) errors.date = "Pick a day in the future.";
      else body.expires_at = end.toISOString();
    }
  } else if (form.expiry !== "server") {
    body.expires_at = new Date(now.getTime() + Number(form.expiry) * 86_400_000).toISOString();
  }
  return { body: Object.keys(errors).length ? null : body, errors };
}
