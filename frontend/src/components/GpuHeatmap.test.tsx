// The GPU heatmap from the keyboard (issue 46, item 16): an ARIA grid with one Tab stop; the arrow
// keys move between GPUs (skipping the holes of smaller nodes), and each GPU is named by the
// details its tooltip shows on hover (focus opens that tooltip too: tests/e2e/test_dashboard_a11y.py).
import { MantineProvider } from "@mantine/core";
import { act, cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import type { NodeRow } from "../lib/cluster";
import { GpuHeatmap } from "./GpuHeatmap";

afterEach(cleanup);

function gpu(index: number, util: number | null, allocated = 0) {
  return { index, allocated_milli: allocated, util_percent: util, memory_used_mb: util === null ? null : 2048,
    memory_total_mb: 16384, temperature_c: util === null ? null : 61, power_w: null, time: null };
}

function node(id: number, name: string, gpus: ReturnType<typeof gpu>[], count = gpus.length): NodeRow {
  return { id, name, cluster: "c", gpu_model: "A100", accelerator_type: "nvidia", cpu_arch: "amd64", gpu_count: count,
    gpu_memory_mb: 16384, health: "healthy", schedulable: true, cordoned: false, last_seen_at: null, capacity_gpu_milli: count * 1000,
    allocated_gpu_milli: 0, used_gpu_milli: 0, allocated_gpus: 0, used_gpus: 0, cpu_milli_allocatable: 8000, allocated_cpu_milli: 0,
    memory_mb_allocatable: 8192, allocated_memory_mb: 0, cpu_percent: null, memory_percent: null, telemetry_time: null, gpus,
    poolName: "gpu" } as NodeRow;
}

const nodes = [node(1, "big", [gpu(0, 90, 1000), gpu(1, 10), gpu(2, null)]), node(2, "small", [gpu(0, 50)])];

function heatmap() {
  return render(
    <MantineProvider>
      <GpuHeatmap nodes={nodes} />
    </MantineProvider>,
  );
}

describe("GpuHeatmap", () => {
  it("is a grid of named GPU cells with row and column headers", () => {
    heatmap();
    const grid = screen.getByRole("grid", { name: /GPU utilisation by node/ });
    const rows = within(grid).getAllByRole("row");
    expect(rows).toHaveLength(3);
    expect(within(rows[0]).getAllByRole("columnheader").map((h) => h.textContent)).toEqual(["Node", "GPU 0", "GPU 1", "GPU 2"]);
    expect(within(rows[1]).getByRole("rowheader").textContent).toContain("big");
    const cell = within(rows[1]).getAllByRole("gridcell")[0];
    expect(cell.getAttribute("aria-label")).toBe("big · GPU 0, Utilisation: 90%, Memory: 2.0 / 16.0 GiB (13%), Temperature: 61 °C, Allocated: 1 GPU");
    expect(within(rows[1]).getAllByRole("gridcell")[2].getAttribute("aria-label")).toContain("no recent sample");
    // the smaller node's missing GPUs are cells too (the grid stays rectangular), not focusable
    const holes = within(rows[2]).getAllByRole("gridcell").slice(1);
    expect(holes.map((h) => h.getAttribute("tabindex"))).toEqual([null, null]);
  });

  it("takes one Tab stop and moves with the arrow keys, skipping holes", () => {
    heatmap();
    const focusable = () => screen.getAllByTestId("gpu-cell").filter((c) => c.getAttribute("tabindex") === "0");
    expect(focusable()).toHaveLength(1);
    const start = focusable()[0];
    expect([start.dataset.node, start.dataset.gpu]).toEqual(["big", "0"]);
    const grid = screen.getByRole("grid");
    act(() => start.focus());
    fireEvent.keyDown(grid, { key: "ArrowRight" });
    expect(document.activeElement).toBe(screen.getAllByTestId("gpu-cell")[1]);
    expect(focusable()[0].dataset.gpu).toBe("1");
    fireEvent.keyDown(grid, { key: "ArrowDown" }); // small has no GPU 1: nothing below, it stays
    expect((document.activeElement as HTMLElement).dataset.gpu).toBe("1");
    fireEvent.keyDown(grid, { key: "End" });
    expect((document.activeElement as HTMLElement).dataset.gpu).toBe("2");
    fireEvent.keyDown(grid, { key: "Home" });
    fireEvent.keyDown(grid, { key: "ArrowDown" });
    const here = document.activeElement as HTMLElement;
    expect([here.dataset.node, here.dataset.gpu]).toEqual(["small", "0"]);
    expect(focusable()).toEqual([here]);
  });

  it("says so when there are no GPUs", () => {
    render(
      <MantineProvider>
        <GpuHeatmap nodes={[node(3, "cpu-only", [], 0)]} />
      </MantineProvider>,
    );
    expect(screen.queryByRole("grid")).toBeNull();
    expect(screen.getByText(/No GPUs in the cluster yet/)).toBeTruthy();
  });
});
