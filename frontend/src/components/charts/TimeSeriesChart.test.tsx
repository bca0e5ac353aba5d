// The chart's text alternatives (issue 46, item 16): the plot is an image named by a summary of
// its series, its points are a table on demand and a CSV download, the legend entries are toggle
// buttons with their state, and "Zoom in" zooms from the keyboard. uPlot draws on a canvas, which
// jsdom lacks: a stand-in records what the chart asks of it.
import { MantineProvider } from "@mantine/core";
import { act, cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";

const plots: { setSeries: ReturnType<typeof vi.fn>; scales: { x: { min: number; max: number } } }[] = [];

vi.mock("uplot", () => {
  class FakePlot {
    root = document.createElement("div");
    series: { show: boolean }[];
    scales = { x: { min: 0, max: 40 } };
    width = 400;
    select = { left: 0, top: 0, width: 0, height: 0 };
    cursor = { idx: null };
    setSeries = vi.fn((i: number, opts: { show: boolean }) => {
      this.series[i].show = opts.show;
    });
    constructor(opts: { series: { show?: boolean }[] }) {
      this.series = opts.series.map((s) => ({ show: s.show ?? true }));
      plots.push(this);
    }
    setData() {}
    setScale() {}
    setSize() {}
    setSelect() {}
    posToVal(v: number) {
      return v;
    }
    destroy() {}
  }
  return { default: FakePlot };
});
vi.mock("uplot/dist/uPlot.min.css", () => ({}));

const { TimeSeriesChart } = await import("./TimeSeriesChart");

afterEach(() => {
  cleanup();
  plots.length = 0;
});

const loss = { id: "1:loss", label: "run-a", color: "#3b5bdb", data: { steps: [0, 10, 20, 30, 40], values: [2, 1, 0.5, 0.25, 0.125] } };
const other = { id: "2:loss", label: "run-b", color: "#c2255c", data: { steps: [0, 20, 40], values: [3, 2, 1] } };

function chart(props: Partial<Parameters<typeof TimeSeriesChart>[0]> = {}) {
  return render(
    <MantineProvider>
      <TimeSeriesChart title="Loss" series={[loss, other]} controls={false} {...props} />
    </MantineProvider>,
  );
}

describe("TimeSeriesChart", () => {
  it("is an image named by a summary of its series", () => {
    chart();
    const img = screen.getByRole("img");
    expect(img.getAttribute("aria-label")).toBe(
      "Loss: 2 series over steps 0–40. run-a latest 0.125 (min 0.125, max 2); run-b latest 1 (min 1, max 3).",
    );
  });

  it("says when it has no points", () => {
    chart({ series: [{ ...loss, data: { steps: [], values: [] } }] });
    expect(screen.getByRole("img").getAttribute("aria-label")).toBe("Loss: no points yet.");
    expect((screen.getByTestId("chart-csv") as HTMLButtonElement).disabled).toBe(true);
  });

  it("legend entries are toggle buttons that say whether their series is shown", () => {
    chart();
    const legend = screen.getByTestId("chart-legend");
    const [a, b] = within(legend).getAllByRole("button");
    expect(a.getAttribute("aria-pressed")).toBe("true");
    expect(a.textContent).toContain("run-a");
    fireEvent.click(a);
    expect(a.getAttribute("aria-pressed")).toBe("false");
    expect(b.getAttribute("aria-pressed")).toBe("true");
    expect(plots.at(-1)!.setSeries).toHaveBeenCalledWith(1, { show: false });
    fireEvent.click(a);
    expect(a.getAttribute("aria-pressed")).toBe("true");
  });

  it("shows its points as a table with headers, on demand", () => {
    chart();
    const toggle = screen.getByRole("button", { name: "Data table" });
    expect(toggle.getAttribute("aria-expanded")).toBe("false");
    expect(screen.queryByRole("table")).toBeNull();
    fireEvent.click(toggle);
    expect(toggle.getAttribute("aria-expanded")).toBe("true");
    const table = screen.getByRole("table");
    expect(toggle.getAttribute("aria-controls")).toBe(screen.getByTestId("chart-table").id);
    const headers = within(table).getAllByRole("columnheader").map((h) => h.textContent);
    expect(headers).toEqual(["Step", "run-a", "run-b"]);
    const rows = within(table).getAllByRole("row");
    expect(rows).toHaveLength(6); // the header and 5 steps
    expect(within(rows[2]).getByRole("rowheader").textContent).toBe("10");
    expect(rows[2].textContent).toContain("—"); // run-b has no point at step 10
    expect(within(table).getByText("Loss")).toBeTruthy(); // the caption
  });

  it("downloads its points as CSV", async () => {
    const created: Blob[] = [];
    const createObjectURL = vi.fn((blob: Blob) => {
      created.push(blob);
      return "blob:chart";
    });
    Object.assign(URL, { createObjectURL, revokeObjectURL: vi.fn() });
    const clicked: string[] = [];
    const click = vi.spyOn(HTMLAnchorElement.prototype, "click").mockImplementation(function (this: HTMLAnchorElement) {
      clicked.push(this.download);
    });
    chart();
    fireEvent.click(screen.getByRole("button", { name: "Download the data of Loss as CSV" }));
    expect(clicked).toEqual(["loss.csv"]);
    const text = await new Promise<string>((resolve) => {
      const reader = new FileReader();
      reader.onload = () => resolve(String(reader.result));
      reader.readAsText(created[0]);
    });
    expect(text).toBe("step,run-a,run-b\n0,2,3\n10,1,\n20,0.5,2\n30,0.25,\n40,0.125,1\n");
    click.mockRestore();
  });

  it("zooms in from the keyboard: the middle half of what is shown, fetched at full resolution", async () => {
    const loadRange = vi.fn(async () => ({}));
    chart({ loadRange });
    const zoomIn = screen.getByRole("button", { name: "Zoom in" });
    await act(async () => fireEvent.click(zoomIn));
    expect(loadRange).toHaveBeenCalledWith(10, 30);
    expect(screen.getByTestId("metrics-chart").getAttribute("data-zoomed")).toBe("true");
    await act(async () => fireEvent.click(screen.getByRole("button", { name: "Reset zoom" })));
    expect(screen.getByTestId("metrics-chart").getAttribute("data-zoomed")).toBe("false");
  });
});
