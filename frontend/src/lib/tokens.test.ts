import { describe, expect, it } from "vitest";
import { buildTokenBody, tokenState, type TokenForm } from "./tokens";

const now = new Date(2026, 0, 10, 12, 0, 0);
const form = (over: Partial<TokenForm> = {}): TokenForm => ({ name: "laptop", expiry: "server", date: "", scopes: "read,write", ...over });

describe("tokenState", () => {
  it("revoked wins, then expired, else active", () => {
    const t = now.getTime();
    expect(tokenState({ revoked_at: "2026-01-01T00:00:00Z", expires_at: null }, t)).toBe("revoked");
    expect(tokenState({ revoked_at: null, expires_at: "2026-01-01T00:00:00Z" }, t)).toBe("expired");
    expect(tokenState({ revoked_at: null, expires_at: "2027-01-01T00:00:00Z" }, t)).toBe("active");
    expect(tokenState({ revoked_at: null, expires_at: null }, t)).toBe("active");
  });
});

describe("buildTokenBody", () => {
  it("leaves the expiry to the server by default", () => {
    expect(buildTokenBody(form({ name: "  ci  " }), now)).toEqual({ body: { name: "ci", scopes: ["read", "write"] }, errors: {} });
  });
  it("relative expiries, never, read-only", () => {
    expect(buildTokenBody(form({ expiry: "30" }), now).body?.expires_at).toBe(new Date(now.getTime() + 30 * 86_400_000).toISOString());
    expect(buildTokenBody(form({ expiry: "never", scopes: "read" }), now).body).toEqual({ name: "laptop", scopes: ["read"], never_expires: true });
  });
  it("a chosen day ends at 23:59:59 local time", () => {
    const { body } = buildTokenBody(form({ expiry: "date", date: "2026-02-01" }), now);
    expect(body?.expires_at).toBe(new Date(2026, 1, 1, 23, 59, 59).toISOString());
  });
  it("reports bad names and dates", () => {
    expect(buildTokenBody(form({ name: " " }), now)).toMatchObject({ body: null, errors: { name: expect.stringMatching(/name/) } });
    expect(buildTokenBody(form({ name: "x".repeat(101) }), now).errors.name).toBe("At most 100 characters.");
    expect(buildTokenBody(form({ expiry: "date", date: "" }), now).errors.date).toMatch(/Pick the day/);
    expect(buildTokenBody(form({ expiry: "date", date: "2026-01-09" }), now).errors.date).toBe("Pick a day in the future.");
    expect(buildTokenBody(form({ expiry: "date", date: "2026-02-31" }), now).errors.date).toBe("Not a date.");
  });
});
