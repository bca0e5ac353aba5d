import { describe, expect, it } from "vitest";
import {
  allNodes, applyClusterFrame, applyNodeChanged, applyTelemetry, gpuTooltipLines, heatmapColumns, nodeKind, nodeUse, othersSummary,
  percentOf, poolKinds,
  utilColour, utilGradient, utilTextColour, vendorLabel, type ClusterOverview, type OverviewGpu, type OverviewNode,
} from "./cluster";
import type { LiveFrame } from "../live/socket";

/** A frame as it may arrive off the wire (unchecked): the reducers must cope with anything. */
const wire = (frame: object) => frame as unknown as LiveFrame;

function gpu(index: number, over: Partial<OverviewGpu> = {}): OverviewGpu {
  return {
    index, allocated_milli: 0, util_percent: null, memory_used_mb: null, memory_total_mb: 81920,
    temperature_c: null, power_w: null, time: null, ...over,
  };
}

function node(id: number, name: string, over: Partial<OverviewNode> = {}): OverviewNode {
  return {
    id, name, cluster: "prod", gpu_model: "A100", gpu_count: 2, gpu_memory_mb: 81920, health: "healthy",
    schedulable: true, cordoned: false, last_seen_at: null, capacity_gpu_milli: 2000, allocated_gpu_milli: 1000,
    used_gpu_milli: 970, allocated_gpus: 1, used_gpus: 1, cpu_milli_allocatable: 96000, allocated_cpu_milli: 0,
    memory_mb_allocatable: 1000, allocated_memory_mb: 0, cpu_percent: 10, memory_percent: 20, telemetry_time: null,
    gpus: [gpu(0, { util_percent: 97, allocated_milli: 1000 }), gpu(1)],
    ...over,
  };
}

function overview(): ClusterOverview {
  return {
    generated_at: "2025-06-01T12:05:00Z",
    telemetry_max_age_seconds: 120,
    pools: [
      {
        name: "a100", cluster: "prod", description: "", accelerator_models: ["A100"], nodes_total: 2, nodes_schedulable: 2,
        capacity_gpus: 4, capacity_gpu_milli: 4000, allocated_gpus: 1, allocated_gpu_milli: 1000, used_gpus: 1,
        used_gpu_milli: 970, nodes: [node(1, "gpu-a1"), node(2, "gpu-a2", { gpus: [gpu(0), gpu(1)], used_gpu_milli: 0, used_gpus: 0 })],
      },
    ],
    unpooled_nodes: [node(3, "spare", { gpus: [], gpu_count: 0 })],
  };
}

describe("utilColour", () => {
  it("runs from dark purple at 0 % to yellow at 100 %", () => {
    expect(utilColour(0)).toBe("rgb(68, 1, 84)");
    expect(utilColour(50)).toBe("rgb(33, 145, 140)");
    expect(utilColour(100)).toBe("rgb(253, 231, 37)");
    expect(utilColour(12.5)).toBe("rgb(64, 42, 112)");
  });
  it("clamps and has no colour without a sample", () => {
    expect(utilColour(150)).toBe(utilColour(100));
    expect(utilColour(-3)).toBe(utilColour(0));
    expect(utilColour(null)).toBeNull();
    expect(utilColour(undefined)).toBeNull();
    expect(utilColour(Number.NaN)).toBeNull();
  });
  it("gets brighter (and the text darker) as utilisation rises", () => {
    const lum = (c: string) => c.match(/\d+/g)!.map(Number).reduce((a, b) => a + b, 0);
    for (let u = 0; u < 100; u += 5) expect(lum(utilColour(u + 5)!)).toBeGreaterThan(lum(utilColour(u)!));
    expect(utilTextColour(10)).toBe("#ffffff");
    expect(utilTextColour(90)).toBe("#1a1b1e");
    expect(utilGradient()).toMatch(/^linear-gradient\(to right, rgb\(68, 1, 84\) 0%/);
  });
});

describe("gpuTooltipLines", () => {
  it("lists util, memory, temperature, power, allocation", () => {
    expect(gpuTooltipLines("gpu-a1", gpu(0, { util_percent: 97, memory_used_mb: 61234, temperature_c: 67, power_w: 389.5, allocated_milli: 500 })))
      .toEqual(["gpu-a1 · GPU 0", "Utilisation: 97%", "Memory: 59.8 / 80.0 GiB (75%)", "Temperature: 67 °C", "Power: 390 W", "Allocated: 0.50 GPU"]);
    expect(gpuTooltipLines("n", gpu(1))).toEqual(["n · GPU 1", "Utilisation: no recent sample", "Not allocated"]);
  });
});

describe("applyTelemetry", () => {
  it("updates GPU metrics, node use and pool totals without touching other nodes", () => {
    const before = overview();
    const frame = wire({
      topic: "cluster", type: "cluster.telemetry",
      nodes: [{ node: "gpu-a2", time: 1717243500, cpu_percent: 35.2,
        gpus: [{ gpu: 1, time: 1717243500, util_percent: 50, temperature_c: 60 }, { gpu: 2, util_percent: 0.5 }] }],
    });
    const after = applyTelemetry(before, frame);
    const a2 = after.pools[0].nodes[1];
    expect(a2.cpu_percent).toBe(35.2);
    expect(a2.telemetry_time).toBe("2024-06-01T12:05:00.000Z");
    expect(a2.gpus.map((g) => [g.index, g.util_percent])).toEqual([[0, null], [1, 50], [2, 0.5]]);
    expect(a2.gpus[1]).toMatchObject({ temperature_c: 60, memory_total_mb: 81920, time: "2024-06-01T12:05:00.000Z" });
    expect(a2).toMatchObject({ used_gpu_milli: 505, used_gpus: 1 });
    expect(after.pools[0]).toMatchObject({ used_gpu_milli: 970 + 505, used_gpus: 2 });
    expect(after.pools[0].nodes[0]).toBe(before.pools[0].nodes[0]);
    expect(after.unpooled_nodes).toBe(before.unpooled_nodes);
    expect(before.pools[0].nodes[1].gpus[1].util_percent).toBeNull(); // not mutated
  });
  it("returns the same overview for unknown nodes and other frames", () => {
    const before = overview();
    expect(applyTelemetry(before, { topic: "cluster", type: "cluster.telemetry", nodes: [{ node: "nope", cpu_percent: 1 }] })).toBe(before);
    expect(applyTelemetry(before, wire({ topic: "cluster", type: "cluster.telemetry" }))).toBe(before);
    expect(applyClusterFrame(before, { topic: "cluster", type: "subscribed" })).toBe(before);
    expect(applyClusterFrame(undefined, wire({ topic: "cluster", type: "node.changed" }))).toBeUndefined();
  });
  it("updates unpooled nodes too", () => {
    const after = applyTelemetry(overview(), { topic: "cluster", type: "cluster.telemetry", nodes: [{ node: "spare", memory_percent: 77 }] });
    expect(after.unpooled_nodes[0].memory_percent).toBe(77);
  });
});

describe("applyNodeChanged", () => {
  it("cordons the node and recounts the pool's schedulable nodes", () => {
    const frame = wire({
      topic: "cluster", type: "node.changed", reason: "GpuXidError",
      node: { id: 1, name: "gpu-a1", pool: "a100", health: "unhealthy", schedulable: false, cordoned: true },
    });
    const after = applyClusterFrame(overview(), frame)!;
    expect(after.pools[0].nodes[0]).toMatchObject({ health: "unhealthy", schedulable: false, cordoned: true });
    expect(after.pools[0].nodes_schedulable).toBe(1);
    const byName = applyNodeChanged(overview(), wire({ topic: "cluster", type: "node.changed", node: { name: "spare", health: "degraded" } }));
    expect(byName.unpooled_nodes[0].health).toBe("degraded");
  });
});

describe("tables", () => {
  it("lists nodes with their pool, counts heatmap columns, percentages", () => {
    const o = overview();
    expect(allNodes(o).map((n) => [n.name, n.poolName])).toEqual([["gpu-a1", "a100"], ["gpu-a2", "a100"], ["spare", null]]);
    expect(heatmapColumns(allNodes(o))).toBe(2);
    expect(heatmapColumns([{ gpu_count: 1, gpus: [{ index: 0 }, { index: 7 }] }])).toBe(8);
    expect(heatmapColumns([])).toBe(0);
    expect(nodeUse([gpu(0, { util_percent: 100 }), gpu(1, { util_percent: 0 }), gpu(2)])).toEqual({ used_gpu_milli: 1000, used_gpus: 1 });
    expect(percentOf(1, 3)).toBe(33.3);
    expect(percentOf(5, 0)).toBe(0);
    expect(percentOf(5, 2)).toBe(100);
  });
});

describe("accelerator vendors and architectures", () => {
  it("names a node by vendor, model and architecture", () => {
    expect(nodeKind({ accelerator_type: "ascend", gpu_model: "910B3", gpu_count: 8, cpu_arch: "arm64" })).toBe(
      "Ascend 910B3 · arm64",
    );
    expect(nodeKind({ accelerator_type: "amd", gpu_model: "", gpu_count: 8, cpu_arch: "" })).toBe("AMD");
    expect(nodeKind({ accelerator_type: "none", gpu_model: "", gpu_count: 0, cpu_arch: "arm64" })).toBe("CPU · arm64");
    // Older answers without the type: GPUs were NVIDIA's.
    expect(nodeKind({ gpu_model: "A100", gpu_count: 4 })).toBe("NVIDIA A100");
  });

  it("lists a pool's types and architectures", () => {
    expect(poolKinds({ accelerator_types: ["ascend", "nvidia"], architectures: ["amd64", "arm64"] })).toEqual([
      "Ascend", "NVIDIA", "amd64", "arm64",
    ]);
    expect(poolKinds({ accelerator_types: ["none"] })).toEqual(["CPU only"]);
    expect(poolKinds({})).toEqual([]);
    expect(vendorLabel("intel")).toBe("");
  });
});

describe("othersSummary", () => {
  it("names what pods not Cairn's request, or nothing", () => {
    expect(othersSummary({})).toBeNull();
    expect(othersSummary({ others_gpu_milli: 0, others_cpu_milli: 0, others_memory_mb: 0 })).toBeNull();
    expect(othersSummary({ others_gpu_milli: 6000, others_cpu_milli: 4000, others_memory_mb: 8192 })).toBe(
      "6 GPU, 4 cores, 8.0 GiB",
    );
    expect(othersSummary({ others_cpu_milli: 250 })).toBe("0.25 cores");
  });
});
