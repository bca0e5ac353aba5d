import { describe, expect, it } from "vitest";
import { lineageLink, servedModel } from "./models";

describe("servedModel", () => {
  it("reads the model Cairn resolved into the spec", () => {
    const m = servedModel({ command: ["serve"], model: { name: "resnet", version: 3, mount: "/model", run: 17, workload: 5 } });
    expect(m).toEqual({ ref: "resnet@3", mount: "/model", run: 17, workload: 5 });
    expect(lineageLink("vision", m!)).toBe("/projects/vision/compare?runs=17");
  });
  it("is null without a model, or with one not resolved", () => {
    expect(servedModel({ command: ["serve"] })).toBeNull();
    expect(servedModel({ model: "resnet@3" })).toBeNull();
    expect(servedModel(null)).toBeNull();
  });
  it("has no lineage link when the version was not registered from a run", () => {
    expect(lineageLink("p", { ref: "a@1", mount: "/model", run: null, workload: null })).toBeNull();
  });
});
