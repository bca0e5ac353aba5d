import { describe, expect, it } from "vitest";
import { flattenFieldErrors } from "../api/client";
import {
  buildSubmitBody, commandText, DEFAULT_VALUES, durationText, mapSubmitErrors, parseDatasets, parseDuration, parseEnv, parseIdleTimeout,
  parseRunTimeLimit, parseVolumes, valuesFromWorkload, type SubmitValues,
} from "./submit";

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

// The same answers as parse_duration in sdk/cairn/jobspec.py (checked against it for these and
// 120,000 generated strings when this was written).
describe("parseDuration", () => {
  it.each([
    ["90m", 5400], ["2h", 7200], ["1h30m", 5400], ["1d", 86400], ["1d2h3m4s", 93784], ["45s", 45],
    ["2:30:00", 9000], ["0:01:00", 60], ["100:00:00", 360000],
    ["1.5h", 5400], ["0.5d", 43200], ["1.5m", 90],
    [" 2H ", 7200], ["1h 30m", 5400], ["\t1h30m\n", 5400],
    ["２h", 7200], // full-width digits from an IME: Python's \d and int() read them too
  ])("reads %j as %i seconds", (text, seconds) => {
    expect(parseDuration(text)).toBe(seconds);
  });
  it("refuses a bare number, naming the units it could mean", () => {
    expect(() => parseDuration("120")).toThrow("“120” has no unit: write 120s, 120m or 120h.");
    expect(() => parseDuration("1.5")).toThrow(/has no unit/);
  });
  it.each(["h", "abc", "2x", "2h1d", "1h1h", "1h30", "2 hours", "1:30", "1:60:00", "-1h", "1,5h", "1..5h", "1h\t30m"])(
    "refuses %j",
    (text) => {
      expect(() => parseDuration(text)).toThrow(/^Expected a duration like 90m, 2h, 1h30m, 1d or H:MM:SS, got “/);
    },
  );
  it("refuses fractions of a second", () => {
    expect(() => parseDuration("0.5s")).toThrow("“0.5s” is not a whole number of seconds.");
    expect(() => parseDuration("1.1h")).toThrow(/not a whole number of seconds/); // 3960.0000000000005 in floats, as in Python
  });
});

describe("parseRunTimeLimit", () => {
  it("is no limit when empty", () => {
    expect(parseRunTimeLimit("")).toEqual({ seconds: null, error: null });
    expect(parseRunTimeLimit("   ")).toEqual({ seconds: null, error: null });
  });
  it("accepts 1 minute to 30 days", () => {
    expect(parseRunTimeLimit("1m")).toEqual({ seconds: 60, error: null });
    expect(parseRunTimeLimit("30d")).toEqual({ seconds: 2_592_000, error: null });
    expect(parseRunTimeLimit("719:59:59")).toEqual({ seconds: 2_591_999, error: null });
  });
  it("refuses what the API would refuse, saying why", () => {
    expect(parseRunTimeLimit("59s")).toEqual({ seconds: null, error: "The run-time limit must be at least 1 minute; “59s” is shorter." });
    expect(parseRunTimeLimit("0:00:00").error).toMatch(/at least 1 minute/);
    expect(parseRunTimeLimit("30d1s")).toEqual({ seconds: null, error: "The run-time limit can be at most 30 days; “30d1s” is longer." });
    expect(parseRunTimeLimit("720:00:01").error).toMatch(/at most 30 days/);
    expect(parseRunTimeLimit("7200")).toEqual({ seconds: null, error: "“7200” has no unit: write 7200s, 7200m or 7200h." });
    expect(parseRunTimeLimit("soon").error).toMatch(/^Expected a duration like/);
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
  it("sends a training job's max run time in seconds, and nothing when it is empty", () => {
    expect(buildSubmitBody("training", values({ command: "true", maxRuntime: "1h30m" })).body.max_runtime_seconds).toBe(5400);
    expect(buildSubmitBody("training", values({ command: "true", maxRuntime: " " })).body).not.toHaveProperty("max_runtime_seconds");
    // the other kinds have no run-time limit: the field is neither shown nor sent
    const notebook = buildSubmitBody("notebook", values({ maxRuntime: "2h" }));
    expect(notebook.body).not.toHaveProperty("max_runtime_seconds");
    expect(notebook.errors).toEqual({});
  });
  it("reports a max run time the API would refuse instead of sending it", () => {
    const bare = buildSubmitBody("training", values({ command: "true", maxRuntime: "120" }));
    expect(bare.errors).toEqual({ maxRuntime: "“120” has no unit: write 120s, 120m or 120h." });
    expect(bare.body).not.toHaveProperty("max_runtime_seconds");
    expect(buildSubmitBody("training", values({ command: "true", maxRuntime: "31d" })).errors.maxRuntime).toMatch(/at most 30 days/);
    expect(buildSubmitBody("training", values({ command: "true", maxRuntime: "30s" })).errors.maxRuntime).toMatch(/at least 1 minute/);
  });
  it("rounds GPU fractions to what the API accepts and reports env errors", () => {
    expect(buildSubmitBody("notebook", values({ gpu: 0.33333 })).body.resources).toMatchObject({ gpu: "0.333" });
    const { body, errors } = buildSubmitBody("training", values({ env: "oops" }));
    expect(errors.env).toMatch(/Line 1/);
    expect(body).not.toHaveProperty("env");
  });
});

describe("notebook IDE and idle timeout", () => {
  it("sends the IDE and the idle timeout in seconds; empty leaves the project's default", () => {
    expect(buildSubmitBody("notebook", values({ ide: "vscode", idleTimeout: "45m" })).body).toMatchObject({ ide: "vscode", idle_timeout: 2700 });
    expect(buildSubmitBody("notebook", values({ idleTimeout: "0" })).body).toMatchObject({ ide: "jupyterlab", idle_timeout: 0 });
    expect(buildSubmitBody("notebook", values({ idleTimeout: " " })).body).not.toHaveProperty("idle_timeout");
    const training = buildSubmitBody("training", values({ command: "true", ide: "vscode", idleTimeout: "1h" })).body;
    expect(training).not.toHaveProperty("ide");
    expect(training).not.toHaveProperty("idle_timeout");
  });
  it("reports an idle timeout the API would refuse", () => {
    expect(parseIdleTimeout("45")).toEqual({ seconds: null, error: "“45” has no unit: write 45s, 45m or 45h. (0: never)" });
    expect(parseIdleTimeout("31d").error).toMatch(/at most 30 days/);
    expect(buildSubmitBody("notebook", values({ idleTimeout: "soon" })).errors.idleTimeout).toMatch(/Expected a duration/);
  });
  it("puts the API's ide and idle_timeout errors next to those fields", () => {
    const mapped = mapSubmitErrors("notebook", { ide: ["VS Code (code-server) is not installed"], idle_timeout: ["Too big."] }, "x");
    expect(mapped.fields).toEqual({ ide: "VS Code (code-server) is not installed", idleTimeout: "Too big." });
    expect(mapped.general).toEqual([]);
  });
});

describe("deployment settings, volumes and datasets", () => {
  it("builds the README's deployment", () => {
    const { body, errors } = buildSubmitBody("deployment", values({
      name: "digits", command: "python examples/serve_digits.py", workingDir: "/src/cairn", cpu: 0.5, readinessPath: "/healthz",
    }));
    expect(errors).toEqual({});
    expect(body).toEqual({
      name: "digits", command: "python examples/serve_digits.py", working_dir: "/src/cairn", readiness_path: "/healthz",
      resources: { gpu: "0", cpu: "0.5", memory: "1Gi" }, replicas: 1, port: 8080, priority: "P3", max_restarts: 0,
    });
  });
  it("sends autoscaling, public and model only when asked", () => {
    const body = buildSubmitBody("deployment", values({
      command: "serve", autoscale: true, minReplicas: 0, maxReplicas: 3, targetConcurrency: 2.5, isPublic: true, model: "digits@latest",
    })).body;
    expect(body).toMatchObject({
      public: true, model: "digits@latest",
      autoscaling: { min_replicas: 0, max_replicas: 3, target_concurrency: 2.5, stable_window_seconds: 60, panic_window_seconds: 6 },
    });
    const plain = buildSubmitBody("deployment", values({ command: "serve", maxReplicas: 3 })).body;
    expect(plain).not.toHaveProperty("autoscaling");
    expect(plain).not.toHaveProperty("public");
    // max_replicas empty: sent as null so the API's own message names the field
    expect(buildSubmitBody("deployment", values({ command: "serve", autoscale: true })).body.autoscaling).toMatchObject({ max_replicas: null });
  });
  it("reads volumes and datasets one a line", () => {
    expect(parseVolumes("ckpt\n# note\nshared:/mnt/s:ro\nlogs::ro")).toEqual({
      volumes: [{ name: "ckpt" }, { name: "shared", mount: "/mnt/s", read_only: true }, { name: "logs", read_only: true }], error: null,
    });
    expect(parseVolumes("a:b:c:d").error).toMatch(/Line 1/);
    expect(parseDatasets("imagenet@2\ndigits@latest:/data/d\nmnist:/m")).toEqual({
      datasets: [{ name: "imagenet", version: 2 }, { name: "digits", mount: "/data/d" }, { name: "mnist", mount: "/m" }], error: null,
    });
    expect(parseDatasets("x@two").error).toMatch(/Line 1/);
    const training = buildSubmitBody("training", values({ command: "true", volumes: "ckpt", datasets: "imagenet@2" })).body;
    expect(training).toMatchObject({ volumes: [{ name: "ckpt" }], datasets: [{ name: "imagenet", version: 2 }] });
    expect(buildSubmitBody("training", values({ command: "true", datasets: "bad name" })).errors.datasets).toMatch(/Line 1/);
  });
  it("puts the API's nested errors next to their fields", () => {
    const mapped = mapSubmitErrors("deployment", {
      "autoscaling.max_replicas": ["This field may not be null."], "autoscaling.min_replicas": ["Must not be above max_replicas."],
      "volumes.0.name": ["No volume 'x' in this project."], readiness_path: ["Bad path."], public: ["Must be a valid boolean."],
    }, "x");
    expect(mapped.fields).toEqual({
      maxReplicas: "This field may not be null.", minReplicas: "Must not be above max_replicas.", volumes: "No volume 'x' in this project.",
      readinessPath: "Bad path.", isPublic: "Must be a valid boolean.",
    });
    expect(mapped.general).toEqual([]);
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
  it("shows the API's run-time limit error on the Max run time field", () => {
    const message = "The run-time limit must be at least 60 seconds.";
    expect(mapSubmitErrors("training", { max_runtime_seconds: [message] }, "")).toEqual({
      fields: { maxRuntime: message },
      general: [],
    });
    // a kind without the field: the message is not lost
    expect(mapSubmitErrors("notebook", { max_runtime_seconds: ["Unknown field."] }, "").general).toEqual([
      "Max run time: Unknown field.",
    ]);
  });
  it("falls back to the detail when there are no field errors", () => {
    expect(mapSubmitErrors("deployment", {}, "You have no quota in pool a100.")).toEqual({
      fields: {},
      general: ["You have no quota in pool a100."],
    });
  });
});

describe("valuesFromWorkload (Clone)", () => {
  const workload = {
    kind: "deployment", pool: "local", priority: "P2", preemptible: false, replicas: 2,
    resources: { gpu: 0.5, cpu: 1.5, memory_mb: 2048 }, gpu_model: "A100", max_restarts: 1, max_runtime_seconds: null,
    spec: {
      command: ["/bin/sh", "-c", "python serve.py --port $PORT"], env: { A: "1", B: "x=y" }, working_dir: "/srv/app",
      port: 9000, readiness_path: "/healthz", public: true, model: "digits@3",
      autoscaling: { min_replicas: 1, max_replicas: 4, target_concurrency: 5, stable_window_seconds: 60, panic_window_seconds: 6 },
      volumes: [{ name: "ckpt", mount: "/ckpt", read_only: true }, { name: "scratch" }],
      datasets: [{ name: "digits", version: 2, mount: "/data" }],
    },
  };

  it("fills the form so that submitting it unchanged asks for the same work", () => {
    const filled = valuesFromWorkload(workload);
    expect(filled.name).toBe("");
    const { body, errors } = buildSubmitBody("deployment", filled);
    expect(errors).toEqual({});
    expect(body).toEqual({
      command: "python serve.py --port $PORT", working_dir: "/srv/app", resources: { gpu: "0.5", cpu: "1.5", memory: "2Gi" },
      replicas: 2, port: 9000, priority: "P2", pool: "local", gpu_model: "A100", preemptible: false, max_restarts: 1,
      readiness_path: "/healthz", public: true, model: "digits@3",
      autoscaling: { min_replicas: 1, max_replicas: 4, target_concurrency: 5, stable_window_seconds: 60, panic_window_seconds: 6 },
      volumes: [{ name: "ckpt", mount: "/ckpt", read_only: true }, { name: "scratch" }],
      datasets: [{ name: "digits", version: 2, mount: "/data" }],
      env: { A: "1", B: "x=y" },
    });
  });

  it("reads a training job's limits and self-healing settings back as the form writes them", () => {
    const job = {
      ...workload, kind: "training", max_runtime_seconds: 5400, resources: { gpu: 0, cpu: 1, memory_mb: 1536 },
      spec: { command: ["python", "train.py", "--name", "two words"], env: {}, hang_timeout_seconds: 900, straggler_policy: "evict",
        straggler_evict_max_fraction: 0.5, ide: "vscode" },
    };
    const filled = valuesFromWorkload(job);
    expect([filled.command, filled.maxRuntime, filled.hangTimeout, filled.memory]).toEqual([
      "python train.py --name 'two words'", "1h30m", "15m", "1536Mi"]);
    const { body } = buildSubmitBody("training", filled);
    expect(body).toMatchObject({ max_runtime_seconds: 5400, hang_timeout_seconds: 900, straggler_policy: "evict",
      straggler_evict_max_fraction: 0.5 });
    expect(durationText(86400 + 60)).toBe("1d1m");
    expect(commandText(["/bin/sh", "-c", "echo hi"])).toBe("echo hi");
  });

  it("refuses a hang timeout without a unit, as the run-time limit", () => {
    expect(buildSubmitBody("training", values({ command: "x", hangTimeout: "90" })).errors.hangTimeout).toContain("no unit");
  });
});

describe("accelerator and architecture (every field the API takes)", () => {
  it("sends another vendor's devices as accelerator, not as resources.gpu, and the arches as a list", () => {
    const { body } = buildSubmitBody("training", values({ command: "x", gpu: 2, gpuModel: "MI300X", acceleratorType: "amd", arch: ["arm64"] }));
    expect(body.accelerator).toEqual({ type: "amd", count: "2", model: "MI300X" });
    expect(body).not.toHaveProperty("gpu_model");
    expect((body.resources as Record<string, unknown>).gpu).toBeUndefined();
    expect(body.arch).toEqual(["arm64"]);
    const nvidia = buildSubmitBody("training", values({ command: "x", gpu: 1, gpuModel: "A100" })).body;
    expect([nvidia.accelerator, nvidia.gpu_model, (nvidia.resources as Record<string, unknown>).gpu]).toEqual([undefined, "A100", "1"]);
  });

  it("maps the API's accelerator and arch errors onto those fields, and Clone reads them back", () => {
    const mapped = mapSubmitErrors("training", { accelerator: ["Pool 'p' offers NVIDIA accelerators, not AMD."], arch: ["Pool 'p' has amd64 nodes only."] }, "");
    expect(mapped.fields).toEqual({ acceleratorType: "Pool 'p' offers NVIDIA accelerators, not AMD.", arch: "Pool 'p' has amd64 nodes only." });
    const filled = valuesFromWorkload({ kind: "training", pool: "p", priority: "P3", preemptible: true, replicas: 1,
      resources: { gpu: 1, cpu: 1, memory_mb: 1024 }, gpu_model: "910B3", max_restarts: 0, spec: { command: ["x"] },
      accelerator: { type: "ascend", model: "910B3", count: 1 }, arch: ["arm64"] });
    expect([filled.acceleratorType, filled.gpu, filled.gpuModel, filled.arch]).toEqual(["ascend", 1, "910B3", ["arm64"]]);
  });
});
