import { describe, expect, it } from "vitest";
import { chartCsv, chartRows, chartSummary, csvFileName } from "./chartText";

const a = { label: "run a", data: { steps: [0, 1, 2], values: [2, 1, 0.5] } };
const b = { label: 'b, "quoted"', data: { steps: [1, 3], values: [4, 3] } };
const fmt = (v: number) => String(v);

describe("chart text alternatives", () => {
  it("summarises the range, and each series' latest, min and max", () => {
    expect(chartSummary("Loss", [a, b], "step", fmt)).toBe(
      'Loss: 2 series over steps 0–3. run a latest 0.5 (min 0.5, max 2); b, "quoted" latest 3 (min 3, max 4).',
    );
    expect(chartSummary("Loss", [{ label: "x", data: { steps: [], values: [] } }], "step", fmt)).toBe("Loss: no points yet.");
    expect(chartSummary("Acc", [{ label: "x", data: { steps: [5], values: [1] } }], "step", fmt, "trial")).toBe(
      "Acc: 1 series at trial 5. x latest 1 (min 1, max 1).",
    );
  });

  it("aligns the series into rows, null where a series has no point", () => {
    expect(chartRows([a, b])).toEqual([
      [0, 2, null],
      [1, 1, 4],
      [2, 0.5, null],
      [3, null, 3],
    ]);
  });

  it("writes CSV with quoted labels and empty cells, time as ISO 8601", () => {
    expect(chartCsv([a, b], "step")).toBe('step,run a,"b, ""quoted"""\n0,2,\n1,1,4\n2,0.5,\n3,,3\n');
    const timed = chartCsv([{ label: "rps", data: { steps: [0], values: [1.5] } }], "time");
    expect(timed).toBe("time,rps\n1970-01-01T00:00:00.000Z,1.5\n");
    expect(csvFileName("Requests per second (2xx)")).toBe("requests-per-second-2xx.csv");
    expect(csvFileName("…")).toBe("chart.csv");
  });
});
