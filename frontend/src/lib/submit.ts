// The submit form: which fields each kind has, the request body built from the form values
// (the create serializers of training-jobs / notebooks / deployments), and the API's field
// errors ("resources.gpu", "env", ...) mapped back onto the form's fields.
import type { WorkloadKind } from "./status";

export type Preemptible = "default" | "yes" | "no";

export interface SubmitValues {
  name: string;
  image: string;
  command: string;
  workingDir: string;
  gpu: number | string;
  cpu: number | string;
  memory: string;
  replicas: number | string;
  priority: string;
  pool: string | null;
  gpuModel: string;
  preemptible: Preemptible;
  maxRestarts: number | string;
  port: number | string;
  /** One `KEY=value` per line; blank lines and `# comments` are skipped. */
  env: string;
}

export type SubmitField = keyof SubmitValues;

export const DEFAULT_VALUES: SubmitValues = {
  name: "",
  image: "",
  command: "",
  workingDir: "",
  // The API's own defaults, so an untouched field asks for what the CLI would.
  gpu: 0,
  cpu: 1,
  memory: "1Gi",
  replicas: 1,
  priority: "P3",
  pool: null,
  gpuModel: "",
  preemptible: "default",
  maxRestarts: 0,
  port: 8000,
  env: "",
};

const COMMON: SubmitField[] = ["name", "image", "gpu", "cpu", "memory", "priority", "pool", "gpuModel", "preemptible", "maxRestarts", "env"];

/** The fields each kind's form shows (and sends). */
export const KIND_FIELDS: Record<WorkloadKind, ReadonlySet<SubmitField>> = {
  training: new Set<SubmitField>([...COMMON, "command", "workingDir", "replicas"]),
  notebook: new Set<SubmitField>([...COMMON]),
  deployment: new Set<SubmitField>([...COMMON, "command", "replicas", "port"]),
};

export const FIELD_LABEL: Record<SubmitField, string> = {
  name: "Name",
  image: "Image",
  command: "Command",
  workingDir: "Working directory",
  gpu: "GPUs",
  cpu: "CPUs",
  memory: "Memory",
  replicas: "Replicas",
  priority: "Priority",
  pool: "Pool",
  gpuModel: "GPU model",
  preemptible: "Preemptible",
  maxRestarts: "Restarts",
  port: "Port",
  env: "Environment",
};

/** API field path (first segments) → form field. */
const API_FIELD: Record<string, SubmitField> = {
  name: "name",
  image: "image",
  command: "command",
  working_dir: "workingDir",
  "resources.gpu": "gpu",
  "resources.cpu": "cpu",
  "resources.memory": "memory",
  replicas: "replicas",
  priority: "priority",
  pool: "pool",
  gpu_model: "gpuModel",
  preemptible: "preemptible",
  max_restarts: "maxRestarts",
  port: "port",
  env: "env",
};

export type FieldErrors = Partial<Record<SubmitField, string>>;

/** `KEY=value` lines → an env object; the first malformed line is reported. */
export function parseEnv(text: string): { env: Record<string, string>; error: string | null } {
  const env: Record<string, string> = {};
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (!line.trim() || line.trim().startsWith("#")) continue;
    const eq = line.indexOf("=");
    const key = (eq < 0 ? line : line.slice(0, eq)).trim();
    if (eq < 0 || !key) return { env, error: `Line ${i + 1}: write one KEY=value per line.` };
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) {
      return { env, error: `Line ${i + 1}: “${key.slice(0, 40)}” is not a valid variable name (letters, digits, _).` };
    }
    if (key in env) return { env, error: `Line ${i + 1}: ${key} is set twice.` };
    env[key] = line.slice(eq + 1);
  }
  return { env, error: null };
}

function text(value: string | null | undefined): string {
  return (value ?? "").trim();
}

function isBlank(value: number | string | null | undefined): boolean {
  return value === null || value === undefined || (typeof value === "string" && value.trim() === "");
}

/** Decimal as the API wants it (a string, at most 3 decimals). */
function decimal(value: number | string): string {
  const n = typeof value === "number" ? value : Number(value.trim());
  if (!Number.isFinite(n)) return String(value).trim();
  return String(Number(n.toFixed(3)));
}

function integer(value: number | string): number | string {
  const n = typeof value === "number" ? value : Number(value.trim());
  return Number.isFinite(n) ? n : String(value).trim();
}

/**
 * The POST body for `kind` from the form values. Empty optional fields are left out so the
 * API applies its defaults (generated name, the project's only pool, ...). `errors` holds what
 * the form can tell before sending (a malformed env line); send only when it is empty.
 */
export function buildSubmitBody(kind: WorkloadKind, values: SubmitValues): { body: Record<string, unknown>; errors: FieldErrors } {
  const fields = KIND_FIELDS[kind];
  const body: Record<string, unknown> = {};
  const errors: FieldErrors = {};

  if (text(values.name)) body.name = text(values.name);
  if (text(values.image)) body.image = text(values.image);
  if (fields.has("command") && values.command.trim()) body.command = values.command.trim();
  if (fields.has("workingDir") && text(values.workingDir)) body.working_dir = text(values.workingDir);

  const resources: Record<string, unknown> = {};
  if (!isBlank(values.gpu)) resources.gpu = decimal(values.gpu);
  if (!isBlank(values.cpu)) resources.cpu = decimal(values.cpu);
  if (text(values.memory)) resources.memory = text(values.memory);
  if (Object.keys(resources).length) body.resources = resources;

  if (fields.has("replicas") && !isBlank(values.replicas)) body.replicas = integer(values.replicas);
  if (fields.has("port") && !isBlank(values.port)) body.port = integer(values.port);
  if (text(values.priority)) body.priority = text(values.priority);
  if (text(values.pool)) body.pool = text(values.pool);
  if (text(values.gpuModel)) body.gpu_model = text(values.gpuModel);
  if (values.preemptible !== "default") body.preemptible = values.preemptible === "yes";
  if (!isBlank(values.maxRestarts)) body.max_restarts = integer(values.maxRestarts);

  const { env, error } = parseEnv(values.env);
  if (error) errors.env = error;
  else if (Object.keys(env).length) body.env = env;

  return { body, errors };
}

/**
 * The API's field errors (dotted paths, see ApiError.fieldErrors) as messages next to the form's
 * fields; what belongs to no field of this kind's form goes to `general` (shown above the button).
 */
export function mapSubmitErrors(
  kind: WorkloadKind,
  fieldErrors: Record<string, string[]>,
  detail: string,
): { fields: FieldErrors; general: string[] } {
  const shown = KIND_FIELDS[kind];
  const fields: FieldErrors = {};
  const general: string[] = [];
  for (const [path, messages] of Object.entries(fieldErrors)) {
    const message = messages.join(" ");
    if (!message) continue;
    const parts = path.split(".");
    const field = API_FIELD[parts.slice(0, 2).join(".")] ?? API_FIELD[parts[0]];
    if (field && shown.has(field)) {
      fields[field] = fields[field] ? `${fields[field]} ${message}` : message;
    } else if (parts[0] === "non_field_errors" || parts[0] === "detail" || (parts[0] === "resources" && parts.length === 1)) {
      general.push(message);
    } else {
      const label = field ? FIELD_LABEL[field] : parts[0] === "resources" ? "Resources" : path;
      general.push(`${label}: ${message}`);
    }
  }
  if (!Object.keys(fields).length && !general.length && detail) general.push(detail);
  return { fields, general };
}
