import { describe, expect, it } from "vitest";
import { parseServeMetric, servingPanels } from "./serving";

describe("serving metrics", () => {
  it("parses deployment and replica metric names", () => {
    expect(parseServeMetric("serve.rps")).toEqual({ stat: "rps", replica: null });
    expect(parseServeMetric("serve.p99_ms.r12")).toEqual({ stat: "p99_ms", replica: 12 });
    expect(parseServeMetric("gpu.util_percent")).toBeNull();
  });

  it("groups lines into panels, replicas in order, missing ones left out", () => {
    const panels = servingPanels(["serve.rps", "serve.rps.r1", "serve.rps.r0", "serve.p50_ms", "serve.s5xx", "gpu.x"]);
    expect(panels.map((p) => p.title)).toEqual(["Requests per second", "Latency", "Answers by status"]);
    expect(panels[0].lines.map((l) => l.label)).toEqual(["all replicas", "replica 0", "replica 1"]);
    expect(panels[1].lines).toEqual([{ metric: "serve.p50_ms", label: "p50" }]);
    expect(servingPanels([])).toEqual([]);
  });

  it("shows the gateway's own answers apart from the replicas' requests", () => {
    const [requests] = servingPanels(["serve.rps", "serve.rps.r0", "serve.gateway_rps"]);
    expect(requests.lines.map((l) => l.label)).toEqual(["all replicas", "replica 0", "gateway (no replica)"]);
  });
});
