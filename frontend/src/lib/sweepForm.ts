// The new-sweep form: its values, the POST /sweeps/ body built from them (the training-job
// template from the same fields as the submit form's training job), and the API's field errors
// ("objective.metric", "template.command", ...) mapped back onto the form's fields.
import { buildSubmitBody, DEFAULT_VALUES, type SubmitValues } from "./submit";

export type Algorithm = "grid" | "random" | "tpe" | "asha";

export interface SweepValues {
  name: string;
  metric: string;
  direction: "maximize" | "minimize";
  algorithm: Algorithm;
  /** The search space as JSON: {"lr": {"type": "float", "low": 1e-4, "high": 0.1, "log": true}, ...}. */
  space: string;
  maxTrials: number | string;
  maxGpuHours: number | string;
  maxConcurrent: number | string;
  priority: string;
  seed: number | string;
  minResource: number | string;
  reductionFactor: number | string;
  /** The trials' training job: the submit form's fields (name and priority are the sweep's). */
  template: SubmitValues;
}

export const DEFAULT_SWEEP: SweepValues = {
  name: "",
  metric: "",
  direction: "maximize",
  algorithm: "random",
  space: "",
  maxTrials: 10,
  maxGpuHours: "",
  maxConcurrent: 1,
  priority: "P4",
  seed: "",
  minResource: 1,
  reductionFactor: 3,
  template: { ...DEFAULT_VALUES },
};

export type SweepField = Exclude<keyof SweepValues, "template"> | `template.${string}`;
export type SweepErrors = Partial<Record<string, string>>;

function blank(value: number | string): boolean {
  return typeof value === "string" && value.trim() === "";
}

function num(value: number | string): number | string {
  const n = typeof value === "number" ? value : Number(value.trim());
  return Number.isFinite(n) ? n : String(value).trim();
}

/** The POST body; `errors` holds what the form can tell before sending (JSON, the template's durations). */
export function buildSweepBody(values: SweepValues): { body: Record<string, unknown>; errors: SweepErrors } {
  const errors: SweepErrors = {};
  const body: Record<string, unknown> = {
    name: values.name.trim(),
    objective: { metric: values.metric.trim(), direction: values.direction },
    algorithm: values.algorithm,
    max_concurrent: num(values.maxConcurrent),
    priority: values.priority,
  };
  let space: unknown = null;
  try {
    space = JSON.parse(values.space || "null");
  } catch (error) {
    errors.space = `Not JSON: ${(error as Error).message}`;
  }
  if (!errors.space && (space === null || typeof space !== "object")) {
    errors.space = 'Give the space as JSON: {"lr": {"type": "float", "low": 0.0001, "high": 0.1, "log": true}}.';
  }
  body.space = space;
  const budget: Record<string, unknown> = {};
  if (!blank(values.maxTrials)) budget.max_trials = num(values.maxTrials);
  if (!blank(values.maxGpuHours)) budget.max_gpu_hours = num(values.maxGpuHours);
  body.budget = budget;
  if (!blank(values.seed)) body.seed = num(values.seed);
  if (values.algorithm === "asha") {
    body.early_stopping = { min_resource: num(values.minResource), reduction_factor: num(values.reductionFactor) };
  }
  const template = buildSubmitBody("training", { ...values.template, name: "", priority: "" });
  delete template.body.priority;
  for (const [field, message] of Object.entries(template.errors)) errors[`template.${field}`] = message;
  body.template = template.body;
  return { body, errors };
}

/** API field path → form field: the sweep's own, or the template's ("template.<submit field>"). */
const TEMPLATE_FIELD: Record<string, string> = {
  command: "command", working_dir: "workingDir", resources: "cpu", "resources.gpu": "gpu", "resources.cpu": "cpu",
  "resources.memory": "memory", env: "env", max_runtime_seconds: "maxRuntime", image: "image", replicas: "replicas",
};
const OWN_FIELD: Record<string, string> = {
  name: "name", "objective.metric": "metric", objective: "metric", "objective.direction": "direction", algorithm: "algorithm",
  space: "space", budget: "maxTrials", "budget.max_trials": "maxTrials", "budget.max_gpu_hours": "maxGpuHours",
  max_concurrent: "maxConcurrent", priority: "priority", seed: "seed", early_stopping: "minResource",
  "early_stopping.min_resource": "minResource", "early_stopping.reduction_factor": "reductionFactor",
};

export function mapSweepErrors(fieldErrors: Record<string, string[]>, detail: string): { fields: SweepErrors; general: string[] } {
  const fields: SweepErrors = {};
  const general: string[] = [];
  for (const [path, messages] of Object.entries(fieldErrors)) {
    const message = messages.join(" ");
    const parts = path.split(".");
    let field: string | undefined;
    if (parts[0] === "template") {
      const inner = TEMPLATE_FIELD[parts.slice(1, 3).join(".")] ?? TEMPLATE_FIELD[parts[1] ?? ""];
      field = inner ? `template.${inner}` : undefined;
    } else {
      field = OWN_FIELD[parts.slice(0, 2).join(".")] ?? OWN_FIELD[parts[0]];
    }
    if (field) fields[field] = fields[field] ? `${fields[field]} ${message}` : message;
    else general.push(`${path}: ${message}`);
  }
  if (!Object.keys(fields).length && !general.length && detail) general.push(detail);
  return { fields, general };
}
