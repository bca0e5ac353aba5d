import { describe, expect, it } from "vitest";
import { formatAgo, formatWaiting } from "./time";

const now = Date.parse("2026-01-01T00:10:00Z");

describe("formatAgo", () => {
  it("past times as formatRelative does", () => {
    expect(formatAgo("2026-01-01T00:00:00Z", now)).toBe("10m ago");
    expect(formatAgo("2025-12-31T21:00:00Z", now)).toBe("3h ago");
  });
  it("just now for the last 45 s and a slightly future time", () => {
    expect(formatAgo("2026-01-01T00:09:30Z", now)).toBe("just now");
    expect(formatAgo("2026-01-01T00:10:20Z", now)).toBe("just now");
    expect(formatAgo("2026-01-01T01:10:00Z", now)).toBe("in 1h");
  });
  it("empty and invalid", () => {
    expect(formatAgo(null, now)).toBe("—");
    expect(formatAgo(undefined, now, "Never")).toBe("Never");
    expect(formatAgo("nope", now)).toBe("—");
  });
  it("waiting drops the ago", () => {
    expect(formatWaiting("2026-01-01T00:00:00Z", now)).toBe("10m");
    expect(formatWaiting("2026-01-01T00:10:00Z", now)).toBe("just now");
  });
});
