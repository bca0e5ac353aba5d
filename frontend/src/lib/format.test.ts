import { describe, expect, it } from "vitest";
import { formatBytesMb, formatClock, formatDuration, formatGpu, formatNumber, formatRelative, formatRunTimeLimit } from "./format";

describe("format", () => {
  it("durations", () => {
    expect(formatDuration(5)).toBe("5s");
    expect(formatDuration(125)).toBe("2m 5s");
    expect(formatDuration(3 * 3600 + 60)).toBe("3h 1m");
    expect(formatDuration(50 * 3600)).toBe("2d 2h");
    expect(formatDuration(null)).toBe("—");
  });
  it("run-time limits, exactly", () => {
    expect(formatRunTimeLimit(7200)).toBe("2 h");
    expect(formatRunTimeLimit(5400)).toBe("1 h 30 min");
    expect(formatRunTimeLimit(60)).toBe("1 min");
    expect(formatRunTimeLimit(90)).toBe("1 min 30 s");
    expect(formatRunTimeLimit(93784)).toBe("1 d 2 h 3 min 4 s");
    expect(formatRunTimeLimit(2_592_000)).toBe("30 d");
    expect(formatRunTimeLimit(null)).toBe("none");
    expect(formatRunTimeLimit(undefined)).toBe("none");
  });
  it("relative times", () => {
    const now = Date.parse("2026-01-01T00:10:00Z");
    expect(formatRelative("2026-01-01T00:00:00Z", now)).toBe("10m ago");
    expect(formatRelative("2026-01-01T00:10:20Z", now)).toBe("in a few seconds");
    expect(formatRelative("garbage", now)).toBe("—");
  });
  it("GPUs, numbers, memory", () => {
    expect(formatGpu(2000)).toBe("2");
    expect(formatGpu(500)).toBe("0.5");
    expect(formatGpu(250)).toBe("0.25");
    expect(formatNumber(0.000012)).toBe("1.20e-5");
    expect(formatNumber(1.23456789)).toBe("1.235");
    expect(formatNumber(Infinity)).toBe("∞");
    expect(formatBytesMb(2048)).toBe("2.0 GiB");
    expect(formatBytesMb(512)).toBe("512 MiB");
  });
  it("clock times carry the date only off today", () => {
    const now = new Date(2026, 2, 10, 9, 0).getTime();
    const later = new Date(2026, 2, 10, 17, 5).getTime();
    const tomorrow = new Date(2026, 2, 11, 17, 5).getTime();
    const time = new Date(later).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    const day = new Date(tomorrow).toLocaleDateString([], { month: "short", day: "numeric" });
    expect(formatClock(later, now)).toBe(time);
    expect(formatClock(tomorrow, now)).toBe(`${day} ${time}`);
    expect(formatClock(tomorrow, now)).not.toBe(formatClock(later, now));
  });
});
