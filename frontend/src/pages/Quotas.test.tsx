// The quota page's bars (issue 46, item 16: "quota and cluster progress bars have no accessible
// name", Quotas.tsx): each is one progressbar named by what it measures and the pool, its value in
// words; the borrowed share is part of the same bar.
import { MantineProvider } from "@mantine/core";
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { cleanup, render, screen } from "@testing-library/react";
import { MemoryRouter, Route, Routes } from "react-router";
import { afterEach, describe, expect, it, vi } from "vitest";

const QUOTA = {
  id: 5, pool: "a100",
  nominal_gpu_milli: 4000, nominal_cpu_milli: 64000, nominal_memory_mb: 262144,
  borrowing_limit_gpu_milli: 2000, lending_limit_gpu_milli: null,
  gpu_hour_budget: "500.00", budget_period: "month",
  usage: {
    allocated_gpu_milli: 5500, allocated_cpu_milli: 40000, allocated_memory_mb: 131072,
    used_gpu_milli: 5500, borrowed_gpu_milli: 1500, lendable_gpu_milli: 0,
    gpu_hours_this_period: 123.456, gpu_hour_budget: 500.0, budget_left_gpu_hours: 376.544,
    period_start: "2025-06-01T00:00:00Z", period_end: "2025-07-01T00:00:00Z",
  },
};

vi.mock("../api/client", () => ({
  api: { GET: vi.fn(async () => ({ data: { count: 1, results: [QUOTA] } })) },
  unwrap: async (p: Promise<{ data: unknown }>) => (await p).data,
}));
vi.mock("../live/LiveProvider", () => ({
  useTopic: () => {},
  useLiveStatus: () => "open",
  useLiveCloseReason: () => null,
}));
vi.mock("../session", () => ({
  useMe: () => ({ username: "erin", is_staff: false, projects: [{ slug: "vision", name: "Vision", role: "owner" }] }),
}));

const { QuotasPage } = await import("./Quotas");

afterEach(cleanup);

describe("QuotasPage", () => {
  it("names every bar and says its value in words", async () => {
    render(
      <MantineProvider>
        <QueryClientProvider client={new QueryClient()}>
          <MemoryRouter initialEntries={["/projects/vision/quotas"]}>
            <Routes>
              <Route path="/projects/:project/quotas" element={<QuotasPage />} />
            </Routes>
          </MemoryRouter>
        </QueryClientProvider>
      </MantineProvider>,
    );
    const gpus = await screen.findByRole("progressbar", { name: "GPUs used in pool a100" });
    expect(gpus.getAttribute("aria-valuetext")).toBe("5.5 of 4 GPUs, 1.5 borrowed");
    expect(screen.getByRole("progressbar", { name: "CPUs used in pool a100" }).getAttribute("aria-valuetext")).toBe("40 of 64 CPUs");
    expect(screen.getByRole("progressbar", { name: "Memory used in pool a100" })).toBeTruthy();
    const budget = screen.getByRole("progressbar", { name: "GPU-hour budget used in pool a100" });
    expect(budget.getAttribute("aria-valuetext")).toBe("123 of 500 GPU-hours this month");
    // nothing unnamed: every progressbar on the page is one of these four
    const all = screen.getAllByRole("progressbar");
    expect(all).toHaveLength(4);
    for (const bar of all) expect(bar.getAttribute("aria-label")).toBeTruthy();
  });
});
