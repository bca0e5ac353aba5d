import { describe, expect, it } from "vitest";
import { idleFacts, type NotebookActivity } from "./notebooks";

const NOW = Date.parse("2026-01-01T12:00:00Z");
const base: NotebookActivity = {
  running: true, idle_timeout: 3600, idle_seconds: 600, cull_at: "2026-01-01T12:50:00Z",
  checked_at: "2026-01-01T12:00:00Z", busy_kernels: 0, gpu_utilisation: null, summary: "",
};

describe("idleFacts", () => {
  it("says how long it has been idle and when it will be stopped", () => {
    expect(idleFacts(base, NOW)).toEqual({ idle: "10m 0s", deadline: "in 50m 0s", gpu: "no telemetry", busy: null });
  });
  it("keeps counting between the culler's looks", () => {
    expect(idleFacts(base, NOW + 30_000).idle).toBe("10m 30s");
  });
  it("says a busy kernel keeps it alive", () => {
    const facts = idleFacts({ ...base, busy_kernels: 2 }, NOW);
    expect(facts).toMatchObject({ idle: "active", deadline: "not while a kernel is busy", busy: "2 kernels busy" });
  });
  it("says never when idle_timeout is 0", () => {
    expect(idleFacts({ ...base, idle_timeout: 0, cull_at: null }, NOW).deadline).toBe("never (idle_timeout 0)");
  });
  it("shows GPU utilisation and a passed deadline", () => {
    const facts = idleFacts({ ...base, gpu_utilisation: 3.25, cull_at: "2026-01-01T11:59:00Z" }, NOW);
    expect(facts.gpu).toBe("3.3%");
    expect(facts.deadline).toBe("any moment now");
  });
  it("shows dashes for a stopped notebook", () => {
    expect(idleFacts({ ...base, running: false, idle_seconds: null, cull_at: null }, NOW)).toMatchObject({ idle: "—", deadline: "—" });
  });
});
