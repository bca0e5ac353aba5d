// The submit form: which fields each kind has, the request body built from the form values
// (the create serializers of training-jobs / notebooks / deployments), and the API's field
// errors ("resources.gpu", "env", ...) mapped back onto the form's fields.
import type { Schemas } from "../api/client";

/** The kinds this form has fields for: those with a create body in the generated schema. Which
 * kinds the server runs, and their labels, come from GET /api/v1/kinds/ (lib/kinds.ts). */
export type FormKind = Schemas["KindEnum"];
type WorkloadKind = FormKind;

export type Preemptible = "default" | "yes" | "no";
export type Ide = "jupyterlab" | "vscode";

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
  /** Training jobs: a run-time limit as the CLI takes it (`2h`, `1h30m`, `H:MM:SS`); empty = none. */
  maxRuntime: string;
  /** One `KEY=value` per line; blank lines and `# comments` are skipped. */
  env: string;
  /** Notebooks: the IDE it runs. */
  ide: Ide;
  /** Notebooks: idle time before it is stopped, as a duration (`30m`, `2h`); `0` never; empty = the project's default. */
  idleTimeout: string;
  /** Project volumes, one a line: `name`, `name:/mount`, `name:/mount:ro` (or `name::ro`). */
  volumes: string;
  /** Dataset versions, one a line: `name`, `name@3`, `name@3:/mount` (or `name:/mount`: the latest). */
  datasets: string;
  /** Deployments: the path whose GET says a replica is ready. */
  readinessPath: string;
  /** Deployments: anyone may call it through the gateway, without credentials. */
  isPublic: boolean;
  /** Deployments: a registered model to serve, `name@version` or `name@latest`. */
  model: string;
  /** Deployments: autoscaling on, and its settings. */
  autoscale: boolean;
  minReplicas: number | string;
  maxReplicas: number | string;
  targetConcurrency: number | string;
  stableWindow: number | string;
  panicWindow: number | string;
  /** The accelerators' vendor: "" (NVIDIA, the short form resources.gpu / gpu_model), amd or ascend. */
  acceleratorType: string;
  /** CPU architectures the image runs on (empty: any): amd64, arm64. */
  arch: string[];
  /** Training jobs: how long a rank may make no progress before it counts as hung (a duration); empty = 10 minutes. */
  hangTimeout: string;
  /** Training jobs: what a straggler does: "" (the server's default, alert), alert, evict or off. */
  stragglerPolicy: string;
  /** Training jobs, with evict: the largest share of ranks one decision removes (0.01–1); empty = 0.25. */
  stragglerEvictMaxFraction: number | string;
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
  port: 8080,
  maxRuntime: "",
  env: "",
  ide: "jupyterlab",
  idleTimeout: "",
  volumes: "",
  datasets: "",
  readinessPath: "",
  isPublic: false,
  model: "",
  autoscale: false,
  // The API's defaults (apps/deployments/api/serializers.py, AutoscalingSerializer); max has none.
  minReplicas: 1,
  maxReplicas: "",
  targetConcurrency: 10,
  stableWindow: 60,
  panicWindow: 6,
  acceleratorType: "",
  arch: [],
  hangTimeout: "",
  stragglerPolicy: "",
  stragglerEvictMaxFraction: "",
};

const COMMON: SubmitField[] = [
  "name", "image", "gpu", "cpu", "memory", "priority", "pool", "gpuModel", "preemptible", "maxRestarts", "env", "volumes", "datasets",
  "acceleratorType", "arch",
];
const AUTOSCALING: SubmitField[] = ["autoscale", "minReplicas", "maxReplicas", "targetConcurrency", "stableWindow", "panicWindow"];

/** The fields each kind's form shows (and sends). */
export const KIND_FIELDS: Record<FormKind, ReadonlySet<SubmitField>> = {
  training: new Set<SubmitField>([
    ...COMMON, "command", "workingDir", "replicas", "maxRuntime", "hangTimeout", "stragglerPolicy", "stragglerEvictMaxFraction",
  ]),
  notebook: new Set<SubmitField>([...COMMON, "ide", "idleTimeout"]),
  deployment: new Set<SubmitField>([
    ...COMMON, "command", "workingDir", "replicas", "port", "readinessPath", "isPublic", "model", ...AUTOSCALING,
  ]),
};

/** Whether the form has fields for `kind` (a kind of the server's list may have none here). */
export function hasForm(kind: string | null): kind is FormKind {
  return kind !== null && Object.prototype.hasOwnProperty.call(KIND_FIELDS, kind);
}

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
  maxRuntime: "Max run time",
  env: "Environment",
  ide: "IDE",
  idleTimeout: "Idle timeout",
  volumes: "Volumes",
  datasets: "Datasets",
  readinessPath: "Readiness path",
  isPublic: "Public",
  model: "Model",
  autoscale: "Autoscaling",
  minReplicas: "Min replicas",
  maxReplicas: "Max replicas",
  targetConcurrency: "Target requests per replica",
  stableWindow: "Stable window",
  panicWindow: "Panic window",
  acceleratorType: "Accelerator",
  arch: "CPU architecture",
  hangTimeout: "Hang timeout",
  stragglerPolicy: "Stragglers",
  stragglerEvictMaxFraction: "Evict at most",
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
  max_runtime_seconds: "maxRuntime",
  env: "env",
  ide: "ide",
  idle_timeout: "idleTimeout",
  volumes: "volumes",
  datasets: "datasets",
  readiness_path: "readinessPath",
  public: "isPublic",
  model: "model",
  autoscaling: "autoscale",
  "autoscaling.min_replicas": "minReplicas",
  "autoscaling.max_replicas": "maxReplicas",
  "autoscaling.target_concurrency": "targetConcurrency",
  "autoscaling.stable_window_seconds": "stableWindow",
  "autoscaling.panic_window_seconds": "panicWindow",
  accelerator: "acceleratorType",
  "accelerator.type": "acceleratorType",
  "accelerator.count": "gpu",
  "accelerator.model": "gpuModel",
  arch: "arch",
  hang_timeout_seconds: "hangTimeout",
  straggler_policy: "stragglerPolicy",
  straggler_evict_max_fraction: "stragglerEvictMaxFraction",
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

// Run-time limits, read exactly as the CLI reads `--max-runtime` / `max_runtime:`
// (parse_duration in sdk/cairn/jobspec.py): a unit is required, because a bare "120" means
// minutes to Slurm users and seconds to the API. Python's `\d` is any Unicode decimal digit
// (a full-width "２h" from an IME is 2 hours there), hence \p{Nd} and digitValue() below.
export const DURATION_HELP = "a duration like 90m, 2h, 1h30m, 1d or H:MM:SS";
export const MIN_RUNTIME_SECONDS = 60; // apps/workloads/deadlines.py
export const MAX_RUNTIME_SECONDS = 30 * 24 * 3600;

const DURATION_UNITS = { d: 86400, h: 3600, m: 60, s: 1 } as const;
const UNIT_ORDER = Object.keys(DURATION_UNITS);
const DURATION_PART = /(\p{Nd}+(?:\.\p{Nd}+)?)([dhms])/gu;
const CLOCK = /^(\p{Nd}+):([0-5]\p{Nd}):([0-5]\p{Nd})$/u;
const BARE_NUMBER = /^\p{Nd}+(?:\.\p{Nd}+)?$/u;
// What Python's str.strip() removes (str.isspace), which is not quite what String.trim() does.
const PY_SPACE = "[\\t-\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";
const PY_STRIP = new RegExp(`^${PY_SPACE}+|${PY_SPACE}+$`, "g");

/** The value of a decimal digit of any script: Unicode puts each script's 0..9 in a row. */
function digitValue(digit: string): number {
  const code = digit.codePointAt(0) ?? 0;
  let zero = code;
  while (zero > 0 && /\p{Nd}/u.test(String.fromCodePoint(zero - 1))) zero--;
  return (code - zero) % 10;
}

/** Digits of any script as ASCII digits, so that Number() reads them as Python's int()/float() do. */
function asciiDigits(value: string): string {
  return value.replace(/\p{Nd}/gu, (digit) => String(digitValue(digit)));
}

/**
 * "2h" → 7200, "1h30m" → 5400, "90m" → 5400, "1d" → 86400, "2:30:00" → 9000 (seconds), as
 * parse_duration in sdk/cairn/jobspec.py: units d, h, m, s, each at most once and in that order,
 * numbers may have decimals if the total is whole seconds; or H:MM:SS. Throws an Error with a
 * message meant for users (a bare number names the units it could have meant).
 */
export function parseDuration(input: string): number {
  const shown = input.trim();
  const value = input.replace(PY_STRIP, "").toLowerCase().replaceAll(" ", "");
  const clock = CLOCK.exec(value);
  if (clock) {
    const [hours, minutes, seconds] = clock.slice(1).map((part) => Number(asciiDigits(part)));
    return hours * 3600 + minutes * 60 + seconds;
  }
  if (BARE_NUMBER.test(value)) throw new Error(`“${shown}” has no unit: write ${value}s, ${value}m or ${value}h.`);
  const parts = [...value.matchAll(DURATION_PART)].map((m) => ({ number: m[1], unit: m[2] as keyof typeof DURATION_UNITS }));
  const units = parts.map((p) => p.unit);
  if (
    !parts.length
    || parts.map((p) => p.number + p.unit).join("") !== value
    || new Set(units).size !== units.length
    || units.some((unit, i) => i > 0 && UNIT_ORDER.indexOf(unit) < UNIT_ORDER.indexOf(units[i - 1]))
  ) {
    throw new Error(`Expected ${DURATION_HELP}, got “${shown}”.`);
  }
  const seconds = parts.reduce((sum, p) => sum + Number(asciiDigits(p.number)) * DURATION_UNITS[p.unit], 0);
  if (!Number.isInteger(seconds)) throw new Error(`“${shown}” is not a whole number of seconds.`);
  return seconds;
}

/**
 * The form's "Max run time" as `max_runtime_seconds`: null when empty (no limit), else seconds
 * within what the API accepts (1 minute .. 30 days), or an error to show under the field.
 */
export function parseRunTimeLimit(input: string): { seconds: number | null; error: string | null } {
  if (!input.replace(PY_STRIP, "")) return { seconds: null, error: null };
  let seconds: number;
  try {
    seconds = parseDuration(input);
  } catch (error) {
    return { seconds: null, error: (error as Error).message };
  }
  if (seconds < MIN_RUNTIME_SECONDS) return { seconds: null, error: `The run-time limit must be at least 1 minute; “${input.trim()}” is shorter.` };
  if (seconds > MAX_RUNTIME_SECONDS) return { seconds: null, error: `The run-time limit can be at most 30 days; “${input.trim()}” is longer.` };
  return { seconds, error: null };
}

export const MAX_IDLE_TIMEOUT_SECONDS = 30 * 86400; // apps/notebooks/choices.py

/**
 * The notebook form's "Idle timeout" as `idle_timeout` seconds: null when empty (the project's
 * default), 0 for `0` (never stopped for idling), else a duration of at most 30 days.
 */
export function parseIdleTimeout(input: string): { seconds: number | null; error: string | null } {
  const value = input.replace(PY_STRIP, "");
  if (!value) return { seconds: null, error: null };
  if (/^0+$/.test(value)) return { seconds: 0, error: null };
  let seconds: number;
  try {
    seconds = parseDuration(input);
  } catch (error) {
    return { seconds: null, error: `${(error as Error).message} (0: never)` };
  }
  if (seconds > MAX_IDLE_TIMEOUT_SECONDS) return { seconds: null, error: `The idle timeout can be at most 30 days; “${input.trim()}” is longer.` };
  return { seconds, error: null };
}

type VolumeMount = { name: string; mount?: string; read_only?: boolean };
type DatasetMount = { name: string; version?: number; mount?: string };

function lines(input: string): [number, string][] {
  return input.split(/\r?\n/).map((line, i) => [i + 1, line.trim()] as [number, string]).filter(([, line]) => line && !line.startsWith("#"));
}

/** `name`, `name:/mount`, `name:/mount:ro`, `name::ro`, one a line → the API's `volumes`. */
export function parseVolumes(input: string): { volumes: VolumeMount[]; error: string | null } {
  const volumes: VolumeMount[] = [];
  for (const [n, line] of lines(input)) {
    const parts = line.split(":");
    const [name, mount = "", flag = ""] = parts;
    if (parts.length > 3 || !name.trim() || (flag && flag !== "ro" && flag !== "rw")) {
      return { volumes, error: `Line ${n}: write name, name:/mount or name:/mount:ro.` };
    }
    const volume: VolumeMount = { name: name.trim() };
    if (mount.trim()) volume.mount = mount.trim();
    if (flag === "ro") volume.read_only = true;
    volumes.push(volume);
  }
  return { volumes, error: null };
}

/** `name`, `name@3`, `name@3:/mount`, `name:/mount`, one a line → the API's `datasets`. */
export function parseDatasets(input: string): { datasets: DatasetMount[]; error: string | null } {
  const datasets: DatasetMount[] = [];
  for (const [n, line] of lines(input)) {
    const m = /^([^@:\s]+)(?:@(\d+|latest))?(?::(\S+))?$/.exec(line);
    if (!m) return { datasets, error: `Line ${n}: write name, name@version or name@version:/mount.` };
    const dataset: DatasetMount = { name: m[1] };
    if (m[2] && m[2] !== "latest") dataset.version = Number(m[2]);
    if (m[3]) dataset.mount = m[3];
    datasets.push(dataset);
  }
  return { datasets, error: null };
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

function number(value: number | string): number | string {
  const n = typeof value === "number" ? value : Number(value.trim());
  return Number.isFinite(n) ? n : String(value).trim();
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
  // Another vendor than NVIDIA: the devices go as `accelerator` ({type, model, count}), not as
  // resources.gpu / gpu_model (the API takes one form or the other).
  const vendor = values.acceleratorType && values.acceleratorType !== "nvidia" ? values.acceleratorType : "";
  const devices = isBlank(values.gpu) ? 0 : Number(values.gpu);
  if (vendor) {
    if (devices) body.accelerator = { type: vendor, count: decimal(values.gpu), ...(text(values.gpuModel) ? { model: text(values.gpuModel) } : {}) };
  } else if (!isBlank(values.gpu)) resources.gpu = decimal(values.gpu);
  if (!isBlank(values.cpu)) resources.cpu = decimal(values.cpu);
  if (text(values.memory)) resources.memory = text(values.memory);
  if (Object.keys(resources).length) body.resources = resources;

  if (fields.has("replicas") && !isBlank(values.replicas)) body.replicas = integer(values.replicas);
  if (fields.has("port") && !isBlank(values.port)) body.port = integer(values.port);
  if (text(values.priority)) body.priority = text(values.priority);
  if (text(values.pool)) body.pool = text(values.pool);
  if (text(values.gpuModel) && !vendor) body.gpu_model = text(values.gpuModel);
  if (fields.has("arch") && values.arch.length) body.arch = [...values.arch];
  if (values.preemptible !== "default") body.preemptible = values.preemptible === "yes";
  if (!isBlank(values.maxRestarts)) body.max_restarts = integer(values.maxRestarts);
  if (fields.has("maxRuntime")) {
    const limit = parseRunTimeLimit(values.maxRuntime);
    if (limit.error) errors.maxRuntime = limit.error;
    else if (limit.seconds !== null) body.max_runtime_seconds = limit.seconds;
  }

  if (fields.has("hangTimeout") && values.hangTimeout.replace(PY_STRIP, "")) {
    try {
      const seconds = parseDuration(values.hangTimeout);
      if (seconds < 1 || seconds > 7 * 86400) errors.hangTimeout = "The hang timeout must be between 1 second and 7 days.";
      else body.hang_timeout_seconds = seconds;
    } catch (error) {
      errors.hangTimeout = (error as Error).message;
    }
  }
  if (fields.has("stragglerPolicy") && values.stragglerPolicy) body.straggler_policy = values.stragglerPolicy;
  if (fields.has("stragglerEvictMaxFraction") && !isBlank(values.stragglerEvictMaxFraction)) {
    body.straggler_evict_max_fraction = number(values.stragglerEvictMaxFraction);
  }

  if (fields.has("ide")) body.ide = values.ide;
  if (fields.has("idleTimeout")) {
    const idle = parseIdleTimeout(values.idleTimeout);
    if (idle.error) errors.idleTimeout = idle.error;
    else if (idle.seconds !== null) body.idle_timeout = idle.seconds;
  }

  if (fields.has("readinessPath") && text(values.readinessPath)) body.readiness_path = text(values.readinessPath);
  if (fields.has("isPublic") && values.isPublic) body.public = true;
  if (fields.has("model") && text(values.model)) body.model = text(values.model);
  if (fields.has("autoscale") && values.autoscale) {
    const scaling: Record<string, unknown> = {};
    if (!isBlank(values.minReplicas)) scaling.min_replicas = integer(values.minReplicas);
    // max_replicas is required by the API: sent even when empty, so its own message says so.
    scaling.max_replicas = isBlank(values.maxReplicas) ? null : integer(values.maxReplicas);
    if (!isBlank(values.targetConcurrency)) scaling.target_concurrency = number(values.targetConcurrency);
    if (!isBlank(values.stableWindow)) scaling.stable_window_seconds = number(values.stableWindow);
    if (!isBlank(values.panicWindow)) scaling.panic_window_seconds = number(values.panicWindow);
    body.autoscaling = scaling;
  }
  if (fields.has("volumes")) {
    const { volumes, error } = parseVolumes(values.volumes);
    if (error) errors.volumes = error;
    else if (volumes.length) body.volumes = volumes;
  }
  if (fields.has("datasets")) {
    const { datasets, error } = parseDatasets(values.datasets);
    if (error) errors.datasets = error;
    else if (datasets.length) body.datasets = datasets;
  }

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

/** Seconds as the form's durations read them back: 5400 → "1h30m", 86400 → "1d", 0 → "0". */
export function durationText(seconds: number): string {
  if (!seconds) return "0";
  let left = Math.round(seconds);
  let out = "";
  for (const [unit, size] of Object.entries(DURATION_UNITS)) {
    const n = Math.floor(left / size);
    if (n) out += `${n}${unit}`;
    left -= n * size;
  }
  return out;
}

/** A stored command (an argv; a shell string is ["/bin/sh", "-c", string]) as the form's text. */
export function commandText(command: unknown): string {
  if (typeof command === "string") return command;
  if (!Array.isArray(command) || !command.every((a) => typeof a === "string")) return "";
  if (command.length === 3 && command[0] === "/bin/sh" && command[1] === "-c") return command[2];
  return command.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replaceAll("'", `'"'"'`)}'`)).join(" ");
}

function memoryText(mb: number): string {
  return mb % 1024 === 0 ? `${mb / 1024}Gi` : `${mb}Mi`;
}

interface ClonedWorkload {
  kind: string;
  pool: string;
  priority: string;
  preemptible: boolean;
  replicas: number;
  resources: { gpu: number; cpu: number; memory_mb: number };
  gpu_model: string;
  max_restarts: number;
  max_runtime_seconds?: number | null;
  spec: unknown;
  accelerator?: { type?: string; model?: string; count?: number } | null;
  arch?: string[];
}

/**
 * The submit form filled in from a workload (Clone, in any state): its spec and resources as the
 * form shows them, so submitting unchanged asks for the same work. The name is left empty (a
 * new one is made up, or typed).
 */
export function valuesFromWorkload(w: ClonedWorkload): SubmitValues {
  const spec = (w.spec && typeof w.spec === "object" ? w.spec : {}) as Record<string, unknown>;
  const str = (key: string) => (typeof spec[key] === "string" ? (spec[key] as string) : "");
  const env = spec.env && typeof spec.env === "object" ? (spec.env as Record<string, string>) : {};
  const volumes = Array.isArray(spec.volumes) ? (spec.volumes as VolumeMount[]) : [];
  const datasets = Array.isArray(spec.datasets) ? (spec.datasets as DatasetMount[]) : [];
  const scaling = spec.autoscaling && typeof spec.autoscaling === "object" ? (spec.autoscaling as Record<string, number>) : null;
  return {
    ...DEFAULT_VALUES,
    image: str("image"),
    command: commandText(spec.command),
    workingDir: str("working_dir"),
    cpu: w.resources.cpu,
    memory: memoryText(w.resources.memory_mb),
    replicas: w.replicas,
    priority: w.priority,
    pool: w.pool || null,
    gpuModel: w.gpu_model ?? "",
    preemptible: w.preemptible ? "yes" : "no",
    maxRestarts: w.max_restarts,
    port: typeof spec.port === "number" ? spec.port : DEFAULT_VALUES.port,
    maxRuntime: w.max_runtime_seconds ? durationText(w.max_runtime_seconds) : "",
    env: Object.entries(env).map(([k, v]) => `${k}=${v}`).join("\n"),
    ide: spec.ide === "vscode" ? "vscode" : "jupyterlab",
    idleTimeout: typeof spec.idle_timeout === "number" ? durationText(spec.idle_timeout) : "",
    volumes: volumes.map((v) => `${v.name}${v.mount ? `:${v.mount}` : v.read_only ? ":" : ""}${v.read_only ? ":ro" : ""}`).join("\n"),
    datasets: datasets.map((d) => `${d.name}${d.version ? `@${d.version}` : ""}${d.mount ? `:${d.mount}` : ""}`).join("\n"),
    readinessPath: str("readiness_path"),
    isPublic: spec.public === true,
    model: str("model"),
    autoscale: !!scaling,
    minReplicas: scaling?.min_replicas ?? DEFAULT_VALUES.minReplicas,
    maxReplicas: scaling?.max_replicas ?? DEFAULT_VALUES.maxReplicas,
    targetConcurrency: scaling?.target_concurrency ?? DEFAULT_VALUES.targetConcurrency,
    stableWindow: scaling?.stable_window_seconds ?? DEFAULT_VALUES.stableWindow,
    panicWindow: scaling?.panic_window_seconds ?? DEFAULT_VALUES.panicWindow,
    acceleratorType: w.accelerator?.type && w.accelerator.type !== "nvidia" ? w.accelerator.type : "",
    arch: Array.isArray(w.arch) ? [...w.arch] : [],
    gpu: w.accelerator?.type && w.accelerator.type !== "nvidia" ? (w.accelerator.count ?? 0) : w.resources.gpu,
    hangTimeout: typeof spec.hang_timeout_seconds === "number" ? durationText(spec.hang_timeout_seconds) : "",
    stragglerPolicy: str("straggler_policy"),
    stragglerEvictMaxFraction: typeof spec.straggler_evict_max_fraction === "number" ? spec.straggler_evict_max_fraction : "",
  };
}
