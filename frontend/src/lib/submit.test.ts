import { describe, expect, it } from "vitest";
import { flattenFieldErrors } from "../api/client";
import { buildSubmitBody, DEFAULT_VALUES, mapSubmitErrors, parseEnv, type SubmitValues } from "./submit";

const values = (over: Partial<SubmitValues> = {}): SubmitValues => ({ ...DEFAULT_VALUES, ...over });

describe("parseEnv", () => {
  it("reads KEY=value lines, keeping = and spaces in values", () => {
    expect(parseEnv("A=1\n\n# note\nB = x=y \r\nC=")).toEqual({ env: { A: "1", B: " x=y ", C: "" }, error: null });
  });
  it("reports the first bad line", () => {
    expect(parseEnv("A=1\nnonsense").error).toBe("Line 2: write one KEY=value per line.");
    expect(parseEnv("1X=2").error).toMatch(/Line 1: “1X” is not a valid variable name/);
    expect(parseEnv("A=1\nA=2").error).toBe("Line 2: A is set twice.");
    expect(parseEnv("=3").error).toMatch(/Line 1/);
  });
});

describe("buildSubmitBody", () => {
  it("builds a training job body with resources as decimals", () => {
    const { body, errors } = buildSubmitBody("training", values({
      name: " resnet ", command: "python train.py --epochs 3", workingDir: "/work", gpu: 2, cpu: "8", memory: "64Gi",
      replicas: 4, pool: "a100", env: "SEED=1", preemptible: "no", maxRestarts: 2,
    }));
    expect(errors).toEqual({});
    expect(body).toEqual({
      name: "resnet", command: "python train.py --epochs 3", working_dir: "/work",
      resources: { gpu: "2", cpu: "8", memory: "64Gi" }, replicas: 4, priority: "P3", pool: "a100",
      preemptible: false, max_restarts: 2, env: { SEED: "1" },
    });
  });
  it("leaves out empty optional fields so the API applies its defaults", () => {
    const { body } = buildSubmitBody("training", values({ command: "true", gpu: "", cpu: "", memory: " ", maxRestarts: "" }));
    expect(body).toEqual({ command: "true", replicas: 1, priority: "P3" });
  });
  it("sends only the fields of the kind", () => {
    const notebook = buildSubmitBody("notebook", values({ command: "ignored", replicas: 3, port: 9, workingDir: "/x", gpu: 0.25 })).body;
    expect(notebook).not.toHaveProperty("command");
    expect(notebook).not.toHaveProperty("replicas");
    expect(notebook).not.toHaveProperty("port");
    expect(notebook).not.toHaveProperty("working_dir");
    expect(notebook.resources).toEqual({ gpu: "0.25", cpu: "1", memory: "1Gi" });
    const deployment = buildSubmitBody("deployment", values({ command: "serve", replicas: 2, port: "8080", preemptible: "yes" })).body;
    expect(deployment).toMatchObject({ command: "serve", replicas: 2, port: 8080, preemptible: true });
    expect(deployment).not.toHaveProperty("working_dir");
  });
  it("rounds GPU fractions to what the API accepts and reports env errors", () => {
    expect(buildSubmitBody("notebook", values({ gpu: 0.33333 })).body.resources).toMatchObject({ gpu: "0.333" });
    const { body, errors } = buildSubmitBody("training", values({ env: "oops" }));
    expect(errors.env).toMatch(/Line 1/);
    expect(body).not.toHaveProperty("env");
  });
});

describe("mapSubmitErrors", () => {
  it("maps the API's dotted paths onto the form fields", () => {
    const fieldErrors = flattenFieldErrors({
      name: ["Use 1-63 lowercase letters."],
      resources: { gpu: ["Above one GPU, ask for a whole number of GPUs."], memory: ["Too big."] },
      env: { FOO: ["Too long."] },
      working_dir: ["Bad."],
    });
    const { fields, general } = mapSubmitErrors("training", fieldErrors, "name: Use 1-63 …");
    expect(fields).toEqual({
      name: "Use 1-63 lowercase letters.",
      gpu: "Above one GPU, ask for a whole number of GPUs.",
      memory: "Too big.",
      env: "Too long.",
      workingDir: "Bad.",
    });
    expect(general).toEqual([]);
  });
  it("puts non-field errors, unknown fields and fields the kind does not show above the button", () => {
    const { fields, general } = mapSubmitErrors("notebook", {
      non_field_errors: ["Pool a100 has no quota for this project."],
      command: ["Unknown field."],
      bogus: ["Unknown field."],
      "resources.non_field_errors": ["Strange."],
    }, "summary");
    expect(fields).toEqual({});
    expect(general).toEqual([
      "Pool a100 has no quota for this project.",
      "Command: Unknown field.",
      "bogus: Unknown field.",
      "Resources: Strange.",
    ]);
  });
  it("falls back to the detail when there are no field errors", () => {
    expect(mapSubmitErrors("deployment", {}, "You have no quota in pool a100.")).toEqual({
      fields: {},
      general: ["You have no quota in pool a100."],
    });
  });
});
