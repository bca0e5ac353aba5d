// Usage bars (quotas, cluster pools) have an accessible name and a value in words (issue 46,
// item 16: "quota and cluster progress bars have no accessible name"): one progressbar per bar,
// its coloured sections drawing only.
import { MantineProvider } from "@mantine/core";
import { cleanup, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import { UsageProgress } from "./UsageProgress";

afterEach(cleanup);

describe("UsageProgress", () => {
  it("is one named progressbar over its sections", () => {
    render(
      <MantineProvider>
        <UsageProgress
          label="GPUs used in pool a100"
          valueText="3 of 2 GPUs, 1 borrowed"
          sections={[{ value: 66.7, color: "indigo" }, { value: 33.3, color: "orange", striped: true }]}
          testId="bar"
        />
      </MantineProvider>,
    );
    const bars = screen.getAllByRole("progressbar");
    expect(bars).toHaveLength(1);
    const bar = screen.getByRole("progressbar", { name: "GPUs used in pool a100" });
    expect(bar).toBe(screen.getByTestId("bar"));
    expect(bar.getAttribute("aria-valuenow")).toBe("100");
    expect(bar.getAttribute("aria-valuetext")).toBe("3 of 2 GPUs, 1 borrowed");
    expect(bar.querySelectorAll(".mantine-Progress-section")).toHaveLength(2);
  });

  it("draws no empty borrowed section, and keeps an empty bar's first", () => {
    render(
      <MantineProvider>
        <UsageProgress label="CPUs" valueText="0 of 4 CPUs" sections={[{ value: 0, color: "indigo" }, { value: 0, color: "orange" }]} />
      </MantineProvider>,
    );
    const bar = screen.getByRole("progressbar", { name: "CPUs" });
    expect(bar.getAttribute("aria-valuenow")).toBe("0");
    expect(bar.querySelectorAll(".mantine-Progress-section")).toHaveLength(1);
  });
});
