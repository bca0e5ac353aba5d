import { describe, expect, it } from "vitest";
import {
  differingKeys, layoutParcoords, linePath, metricValue, MISSING_COLOUR, niceTicks, paramText, rampColour, tickLabel,
  type ParcoordsRun,
} from "./parcoords";

const margins = { top: 20, right: 40, bottom: 20, left: 40 };

const runs: ParcoordsRun[] = [
  { id: 1, name: "a", params: { lr: 0.001, optimizer: "adam", layers: 4 }, metric: 0.5 },
  { id: 2, name: "b", params: { lr: 0.1, optimizer: "sgd", layers: 8 }, metric: 0.25 },
  { id: 3, name: "c", params: { lr: 0.01, optimizer: "adam" }, metric: null },
];

describe("niceTicks", () => {
  it("uses round steps inside the range", () => {
    expect(niceTicks(0, 1, 5)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(niceTicks(3, 97, 4)).toEqual([20, 40, 60, 80]);
    expect(niceTicks(-1, 1, 2)).toEqual([-1, 0, 1]);
  });

  it("copes with degenerate ranges", () => {
    expect(niceTicks(5, 5)).toEqual([5]);
    expect(niceTicks(10, 0, 2)).toEqual([0, 5, 10]);
    expect(niceTicks(Number.NaN, 1)).toEqual([]);
  });

  it("labels ticks compactly", () => {
    expect(tickLabel(0.2)).toBe("0.2");
    expect(tickLabel(0.0001)).toBe("1e-4");
    expect(tickLabel(250000)).toBe("3e5");
  });
});

describe("params helpers", () => {
  it("texts values", () => {
    expect(paramText(undefined)).toBeNull();
    expect(paramText(null)).toBeNull();
    expect(paramText(3)).toBe("3");
    expect(paramText(true)).toBe("true");
    expect(paramText({ a: [1] })).toBe('{"a":[1]}');
  });

  it("finds keys that differ, a missing value counting as a difference", () => {
    const rs = [{ params: { a: 1, b: "x", c: 1 } }, { params: { a: 1, b: "y" } }];
    expect(differingKeys(rs, ["a", "b", "c"])).toEqual(["b", "c"]);
  });

  it("reads a metric by mode", () => {
    const summaries = { loss: { last: 0.3, min: 0.1, max: 2 }, bad: "x" };
    expect(metricValue(summaries, "loss", "last")).toBe(0.3);
    expect(metricValue(summaries, "loss", "min")).toBe(0.1);
    expect(metricValue(summaries, "loss", "max")).toBe(2);
    expect(metricValue(summaries, "acc", "last")).toBeNull();
    expect(metricValue(summaries, "bad", "last")).toBeNull();
    expect(metricValue(undefined, "loss", "last")).toBeNull();
  });
});

describe("rampColour", () => {
  it("goes from the low end to the high end, grey when missing", () => {
    expect(rampColour(0, 0, 1)).toBe("rgb(66, 99, 235)");
    expect(rampColour(1, 0, 1)).toBe("rgb(224, 49, 49)");
    expect(rampColour(5, 0, 1)).toBe("rgb(224, 49, 49)");
    expect(rampColour(0.5, 0, 1)).toBe("rgb(55, 178, 77)");
    expect(rampColour(null, 0, 1)).toBe(MISSING_COLOUR);
    expect(rampColour(3, 3, 3)).toMatch(/^rgb/);
  });
});

describe("layoutParcoords", () => {
  const layout = layoutParcoords(runs, ["lr", "optimizer", "layers"], "loss (last)", 640, 300, margins);

  it("spaces the axes evenly with the metric last", () => {
    expect(layout.axes.map((a) => a.label)).toEqual(["lr", "optimizer", "layers", "loss (last)"]);
    const xs = layout.axes.map((a) => a.x);
    [40, 226.667, 413.333, 600].forEach((x, i) => expect(xs[i]).toBeCloseTo(x, 2));
    expect(layout.axes[3].source).toBe("metric");
  });

  it("picks axis kinds: log for wide positive ranges, categorical for strings", () => {
    expect(layout.axes.map((a) => a.kind)).toEqual(["log", "categorical", "numeric", "numeric"]);
    expect(layout.axes[0].ticks.map((t) => t.label)).toEqual(["0.001", "0.01", "0.1"]);
    expect(layout.axes[1].ticks.map((t) => t.label)).toEqual(["adam", "sgd"]);
  });

  it("maps larger values higher up (smaller y) within the margins", () => {
    const [a, b, c] = layout.lines;
    expect(a.points[0]!.y).toBeCloseTo(280); // lr 0.001 at the bottom
    expect(b.points[0]!.y).toBeCloseTo(20); // lr 0.1 at the top
    expect(c.points[0]!.y).toBeCloseTo(150); // lr 0.01 halfway on the log axis
    expect(a.points[3]!.y).toBeCloseTo(20); // the highest loss at the top
    expect(b.points[3]!.y).toBeCloseTo(280);
  });

  it("leaves gaps for missing params and metrics and greys runs without the metric", () => {
    const c = layout.lines[2];
    expect(c.points[2]).toBeNull();
    expect(c.points[3]).toBeNull();
    expect(c.color).toBe(MISSING_COLOUR);
    expect(layout.metricRange).toEqual([0.25, 0.5]);
    expect(layout.lines[0].color).not.toBe(layout.lines[1].color);
  });

  it("centres a single value and a single axis", () => {
    const one = layoutParcoords([{ id: 1, name: "a", params: {}, metric: 2 }], [], "acc", 200, 120, margins);
    expect(one.axes).toHaveLength(1);
    expect(one.axes[0].x).toBe(100);
    expect(one.lines[0].points[0]!.y).toBeCloseTo(60);
  });

  it("copes with no metric values at all", () => {
    const none = layoutParcoords([{ id: 1, name: "a", params: { x: "p" }, metric: null }], ["x"], "acc", 200, 120, margins);
    expect(none.metricRange).toBeNull();
    expect(none.axes[1].ticks).toEqual([]);
    expect(none.lines[0].points).toEqual([{ x: 40, y: 60 }, null]);
  });
});

describe("linePath", () => {
  it("draws through points and lifts the pen over gaps", () => {
    expect(linePath([{ x: 0, y: 1 }, { x: 10, y: 2.25 }, null, { x: 30, y: 4 }, { x: 40, y: 5 }])).toBe(
      "M0 1 L10 2.3 M30 4 L40 5",
    );
    expect(linePath([null, null])).toBe("");
  });
});

describe("colour by run (issue 46, item 9)", () => {
  const runs: ParcoordsRun[] = [
    { id: 1, name: "a", params: { lr: 0.1 }, metric: 0.9, color: "#4c6ef5" },
    { id: 2, name: "b", params: { lr: 0.2 }, metric: 0.1, color: "#f03e3e" },
  ];

  it("keeps each run's own colour, whatever its metric, and says so", () => {
    const layout = layoutParcoords(runs, ["lr"], "acc", 400, 200, margins);
    expect(layout.colourBy).toBe("run");
    expect(layout.lines.map((l) => l.color)).toEqual(["#4c6ef5", "#f03e3e"]);
  });

  it("falls back to the metric ramp when a run has no colour", () => {
    const layout = layoutParcoords([runs[0], { ...runs[1], color: undefined }], ["lr"], "acc", 400, 200, margins);
    expect(layout.colourBy).toBe("metric");
    expect(layout.lines[0].color).toBe(rampColour(0.9, 0.1, 0.9));
  });
});
