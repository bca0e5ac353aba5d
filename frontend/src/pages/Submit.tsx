// Submit a training job, notebook or deployment. The API validates; its messages appear next to
// the fields they are about (lib/submit.ts maps them), anything else above the button.
import {
  Alert, Anchor, Autocomplete, Button, Card, Checkbox, Fieldset, Group, List, MultiSelect, NumberInput, SegmentedControl, Select,
  SimpleGrid, Stack, Switch, Tabs, Text, Textarea, TextInput, Title,
} from "@mantine/core";
import { notifications } from "@mantine/notifications";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect, useMemo, useRef, useState, type FormEvent } from "react";
import { Link, useNavigate, useParams, useSearchParams } from "react-router";
import { api, ApiError, unwrap, type Schemas } from "../api/client";
import { errorAdvice } from "../components/States";
import { formatGpu, formatRunTimeLimit } from "../lib/format";
import { useKinds, useKindLabel } from "../lib/kinds";
import {
  buildSubmitBody, DEFAULT_VALUES, FIELD_LABEL, type FormKind, hasForm, KIND_FIELDS, mapSubmitErrors, parseIdleTimeout, parseRunTimeLimit, valuesFromWorkload, type FieldErrors,
  type Ide, type Preemptible, type SubmitField, type SubmitValues,
} from "../lib/submit";
import { canWrite, useMe } from "../session";
import { getWorkload } from "./workload/api";

const PRIORITIES = [
  { value: "P0", label: "P0 (highest)" },
  { value: "P1", label: "P1" },
  { value: "P2", label: "P2" },
  { value: "P3", label: "P3 (default)" },
  { value: "P4", label: "P4" },
  { value: "P5", label: "P5 (lowest)" },
];

const PREEMPTIBLE: { value: Preemptible; label: string }[] = [
  { value: "default", label: "Kind's default" },
  { value: "yes", label: "Yes" },
  { value: "no", label: "No" },
];

type WorkloadKind = FormKind;

const KIND_HELP: Record<FormKind, string> = {
  training: "A batch job: every replica runs the command, started together (gang); it ends when the command exits.",
  notebook: "An IDE server (one replica): JupyterLab or VS Code, reached through Cairn; open it from its page once it runs.",
  deployment: "A serving command run as replicas, each listening on $PORT, until you stop it.",
};

const isKind = hasForm;

type Workload = Schemas["Workload"];

function submit(kind: WorkloadKind, project: string, body: Record<string, unknown>): Promise<Workload> {
  const path = { project };
  switch (kind) {
    case "training":
      return unwrap(api.POST("/api/v1/projects/{project}/training-jobs/", {
        params: { path }, body: body as Schemas["TrainingJobCreateRequest"],
      }));
    case "notebook":
      return unwrap(api.POST("/api/v1/projects/{project}/notebooks/", {
        params: { path }, body: body as Schemas["NotebookCreateRequest"],
      }));
    case "deployment":
      return unwrap(api.POST("/api/v1/projects/{project}/deployments/", {
        params: { path }, body: body as Schemas["DeploymentCreateRequest"],
      }));
  }
}

export function SubmitPage() {
  const { project = "" } = useParams();
  const me = useMe();
  const role = me.projects.find((p) => p.slug === project)?.role;
  const writable = canWrite(role);
  const [params, setParams] = useSearchParams();
  const kind: WorkloadKind = isKind(params.get("kind")) ? (params.get("kind") as WorkloadKind) : "training";
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const kindLabel = useKindLabel();
  // The server's kinds (GET /api/v1/kinds/) that this form has fields for, in the server's order.
  const formKinds = useKinds().filter((k) => hasForm(k.kind));

  const [values, setValues] = useState<SubmitValues>(DEFAULT_VALUES);
  // Clone (?from=<id>): the form filled in from that workload's spec, once it is read.
  const fromId = /^\d+$/.test(params.get("from") ?? "") ? Number(params.get("from")) : null;
  const source = useQuery({
    queryKey: ["workload", project, "clone", fromId],
    queryFn: () => getWorkload(project, fromId as number),
    enabled: fromId !== null,
    staleTime: Infinity,
  });
  const [clonedFrom, setClonedFrom] = useState<number | null>(null);
  useEffect(() => {
    if (!source.data || clonedFrom === source.data.id) return;
    setClonedFrom(source.data.id);
    setValues(valuesFromWorkload(source.data));
    if (isKind(source.data.kind) && source.data.kind !== kind) setParams({ kind: source.data.kind, from: String(source.data.id) }, { replace: true });
  }, [source.data, clonedFrom, kind, setParams]);
  const [fieldErrors, setFieldErrors] = useState<FieldErrors>({});
  const [general, setGeneral] = useState<string[]>([]);
  // Bumped when a submission is refused, to bring the first field in error into view.
  const [refusals, setRefusals] = useState(0);
  const formRef = useRef<HTMLFormElement>(null);
  useEffect(() => {
    if (!refusals) return;
    const target = formRef.current?.querySelector<HTMLElement>('[aria-invalid="true"]') ?? formRef.current?.querySelector<HTMLElement>('[data-testid="submit-error"]');
    target?.scrollIntoView({ block: "center" });
    if (target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement) target.focus({ preventScroll: true });
  }, [refusals]);

  const quotas = useQuery({
    queryKey: ["quotas", project],
    queryFn: () => unwrap(api.GET("/api/v1/projects/{project}/quotas/", { params: { path: { project }, query: { page_size: 500 } } })),
  });
  const pools = useQuery({
    queryKey: ["pools"],
    queryFn: () => unwrap(api.GET("/api/v1/pools/", { params: { query: { page_size: 500 } } })),
    staleTime: 60_000,
  });

  const poolOptions = useMemo(
    () =>
      (quotas.data?.results ?? []).map((q) => ({
        value: q.pool,
        label: `${q.pool} — quota ${formatGpu(q.nominal_gpu_milli ?? 0)} GPU${q.nominal_gpu_milli === 1000 ? "" : "s"}`,
      })),
    [quotas.data],
  );
  const gpuModels = useMemo(() => {
    const models = new Set<string>();
    for (const pool of pools.data?.results ?? []) {
      if (values.pool && pool.name !== values.pool) continue;
      const list = pool.accelerator_models as unknown;
      if (Array.isArray(list)) for (const m of list) if (typeof m === "string" && m) models.add(m);
    }
    return [...models].sort();
  }, [pools.data, values.pool]);

  const mutation = useMutation({
    mutationFn: (body: Record<string, unknown>) => submit(kind, project, body),
    onSuccess: (workload) => {
      void queryClient.invalidateQueries({ queryKey: ["workloads", project] });
      notifications.show({ color: "green", title: `${kindLabel(kind)} submitted`, message: `${workload.name} is ${workload.status}.` });
      navigate(`/projects/${project}/workloads/${workload.kind}/${workload.id}`);
    },
    onError: (error) => {
      if (error instanceof ApiError && Object.keys(error.fieldErrors).length) {
        const mapped = mapSubmitErrors(kind, error.fieldErrors, error.detail);
        setFieldErrors(mapped.fields);
        setGeneral(mapped.general);
      } else {
        setFieldErrors({});
        setGeneral([errorAdvice(error).detail]);
      }
      setRefusals((n) => n + 1);
    },
  });

  const set = <K extends SubmitField>(field: K, value: SubmitValues[K]) => {
    setValues((v) => ({ ...v, [field]: value }));
    if (fieldErrors[field]) setFieldErrors(({ [field]: _drop, ...rest }) => rest);
  };

  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    const { body, errors } = buildSubmitBody(kind, values);
    setGeneral([]);
    if (Object.keys(errors).length) {
      setFieldErrors(errors);
      setRefusals((n) => n + 1);
      return;
    }
    setFieldErrors({});
    mutation.mutate(body);
  };

  // Read as it is typed for the field's description; an error shows on leaving the field or on submit.
  const runtimeLimit = useMemo(() => parseRunTimeLimit(values.maxRuntime), [values.maxRuntime]);
  const idleTimeout = useMemo(() => parseIdleTimeout(values.idleTimeout), [values.idleTimeout]);
  const shows = (field: SubmitField) => KIND_FIELDS[kind].has(field);
  const err = (field: SubmitField) => fieldErrors[field];
  const noQuota = quotas.isSuccess && quotas.data.results.length === 0;

  return (
    <Stack gap="md" maw={960}>
      <Group justify="space-between">
        <Title order={1} size="h2">Submit work</Title>
        <Anchor component={Link} to={`/projects/${project}/workloads`} size="sm">
          Back to workloads
        </Anchor>
      </Group>

      {!writable && (
        <Alert color="yellow" title="You can look, not submit" data-testid="submit-readonly">
          Your role in this project is {role ?? "unknown"}. Ask a project maintainer to make you a member to submit work.
        </Alert>
      )}
      {source.data && (
        <Alert color="blue" title={`A copy of ${source.data.name}`} data-testid="cloned-from">
          The form is filled in from {kindLabel(source.data.kind).toLowerCase()}{" "}
          <Anchor component={Link} to={`/projects/${project}/workloads/${source.data.kind}/${source.data.id}`}>{source.data.name}</Anchor>{" "}
          ({source.data.status}); change what you need, name it (or leave the name empty) and submit.
        </Alert>
      )}
      {source.error && (
        <Alert color="red" title="Could not read the workload to copy">{errorAdvice(source.error).detail}</Alert>
      )}
      {noQuota && (
        <Alert color="yellow" title="This project has no quota yet">
          Work is only admitted in a pool where the project has a quota. Ask your Cairn administrator for one; you can still
          submit, and the API will say what is missing.
        </Alert>
      )}

      <Tabs
        value={kind}
        onChange={(value) => {
          if (!isKind(value)) return;
          setParams({ kind: value }, { replace: true });
          setFieldErrors({});
          setGeneral([]);
        }}
      >
        <Tabs.List>
          {formKinds.map(({ kind: k }) => (
            <Tabs.Tab key={k} value={k} data-testid={`submit-kind-${k}`}>
              {kindLabel(k)}
            </Tabs.Tab>
          ))}
        </Tabs.List>
      </Tabs>

      <Card withBorder padding="lg" component="form" ref={formRef} onSubmit={onSubmit} noValidate data-testid="submit-form" data-kind={kind}>
        <Stack gap="md">
          <Text size="sm" c="dimmed">
            {KIND_HELP[kind]}
          </Text>
          <SimpleGrid cols={{ base: 1, sm: 2 }} spacing="md">
            <TextInput
              label="Name"
              name="name"
              placeholder={`${kind}-…`}
              description="Lowercase letters, digits and '-'. Left empty, one is made up."
              value={values.name}
              onChange={(e) => set("name", e.currentTarget.value)}
              error={err("name")}
              autoComplete="off"
            />
            <Select
              label="Pool"
              name="pool"
              placeholder={
                quotas.isPending
                  ? "Loading pools…"
                  : poolOptions.length === 1
                    ? `Default: ${poolOptions[0].value}`
                    : "Choose a pool"
              }
              description="Where it runs; the project needs a quota there."
              data={poolOptions}
              value={values.pool}
              onChange={(value) => set("pool", value)}
              error={err("pool")}
              clearable
              nothingFoundMessage="No quota in any pool"
            />
          </SimpleGrid>
          <TextInput
            label="Image"
            name="image"
            placeholder="e.g. nvcr.io/nvidia/pytorch:25.01-py3"
            description={
              kind === "training"
                ? "Container image (Kubernetes clusters). Without a command, the image's own entrypoint runs."
                : "Container image (Kubernetes clusters); the local backend runs on the node itself."
            }
            value={values.image}
            onChange={(e) => set("image", e.currentTarget.value)}
            error={err("image")}
            autoComplete="off"
          />
          {shows("ide") && (
            <SimpleGrid cols={{ base: 1, sm: 2 }} spacing="md">
              <Stack gap={4}>
                <Text size="sm" fw={500} id="ide-label">
                  IDE
                </Text>
                <SegmentedControl
                  aria-labelledby="ide-label"
                  data-testid="ide-choice"
                  data={[
                    { value: "jupyterlab", label: "JupyterLab" },
                    { value: "vscode", label: "VS Code" },
                  ]}
                  value={values.ide}
                  onChange={(value) => set("ide", value as Ide)}
                />
                <Text size="xs" c={err("ide") ? "red" : "dimmed"} data-testid={err("ide") ? "ide-error" : undefined} role={err("ide") ? "alert" : undefined}>
                  {err("ide") ?? (values.ide === "vscode" ? "VS Code in the browser (code-server)." : "JupyterLab, with a Python kernel.")}
                </Text>
              </Stack>
              <TextInput
                label="Idle timeout"
                name="idle_timeout"
                placeholder="Project default"
                description={
                  idleTimeout.seconds === 0
                    ? "Never stopped for being idle."
                    : idleTimeout.seconds
                      ? `Stopped after ${formatRunTimeLimit(idleTimeout.seconds)} idle (files kept; start it again).`
                      : "Stopped after this long idle: 30m, 2h, 1d; 0: never. Empty: the project's default."
                }
                value={values.idleTimeout}
                onChange={(e) => set("idleTimeout", e.currentTarget.value)}
                onBlur={() => {
                  if (idleTimeout.error) setFieldErrors((f) => ({ ...f, idleTimeout: idleTimeout.error ?? undefined }));
                }}
                error={err("idleTimeout")}
                autoComplete="off"
                data-testid="idle-timeout"
              />
            </SimpleGrid>
          )}
          {shows("command") && (
            <Textarea
              label="Command"
              name="command"
              placeholder={kind === "deployment" ? "e.g. python -m http.server $PORT" : "e.g. python train.py --epochs 10"}
              description={
                kind === "deployment"
                  ? "Required. Run by /bin/sh; it must listen on $PORT."
                  : "Run by /bin/sh in every replica; required unless the image has an entrypoint."
              }
              value={values.command}
              onChange={(e) => set("command", e.currentTarget.value)}
              error={err("command")}
              autosize
              minRows={2}
              maxRows={10}
              styles={{ input: { fontFamily: "var(--mantine-font-family-monospace)" } }}
            />
          )}
          {(shows("workingDir") || shows("maxRuntime")) && (
            <SimpleGrid cols={{ base: 1, sm: 2 }} spacing="md">
              {shows("workingDir") && (
                <TextInput
                  label="Working directory"
                  name="working_dir"
                  description="Where the command runs, in every replica; on a local pool, a folder the pool allows."
                  placeholder="Default: the replica's own directory"
                  value={values.workingDir}
                  onChange={(e) => set("workingDir", e.currentTarget.value)}
                  error={err("workingDir")}
                />
              )}
              {shows("maxRuntime") && (
                <TextInput
                  label="Max run time"
                  name="max_runtime"
                  placeholder="No limit"
                  description={
                    runtimeLimit.seconds !== null
                      ? `Stopped, and failed, after ${formatRunTimeLimit(runtimeLimit.seconds)} of running.`
                      : "Optional: 90m, 2h, 1h30m, 1d or H:MM:SS; stopped, and failed, after that long."
                  }
                  value={values.maxRuntime}
                  onChange={(e) => set("maxRuntime", e.currentTarget.value)}
                  onBlur={() => {
                    if (runtimeLimit.error) setFieldErrors((f) => ({ ...f, maxRuntime: runtimeLimit.error ?? undefined }));
                  }}
                  error={err("maxRuntime")}
                  autoComplete="off"
                  data-testid="max-runtime"
                />
              )}
            </SimpleGrid>
          )}
          {shows("hangTimeout") && (
            <SimpleGrid cols={{ base: 1, sm: 3 }} spacing="md">
              <TextInput
                label="Hang timeout"
                name="hang_timeout"
                placeholder="10m"
                description="A rank that reports progress with the SDK and makes none for this long is hung: the job restarts from its last checkpoint."
                value={values.hangTimeout}
                onChange={(e) => set("hangTimeout", e.currentTarget.value)}
                error={err("hangTimeout")}
                autoComplete="off"
              />
              <Select
                label="Stragglers"
                name="straggler_policy"
                description="A rank persistently slower than its peers."
                data={[
                  { value: "", label: "Default (alert)" },
                  { value: "alert", label: "Alert: an event and a badge" },
                  { value: "evict", label: "Evict: resume elsewhere" },
                  { value: "off", label: "Off" },
                ]}
                value={values.stragglerPolicy}
                onChange={(value) => set("stragglerPolicy", value ?? "")}
                allowDeselect={false}
                error={err("stragglerPolicy")}
              />
              <NumberInput
                label="Evict at most"
                name="straggler_evict_max_fraction"
                description="With evict: the largest share of ranks one decision removes (0.01–1; default 0.25)."
                placeholder="0.25"
                min={0.01}
                max={1}
                step={0.05}
                decimalScale={2}
                value={values.stragglerEvictMaxFraction}
                onChange={(value) => set("stragglerEvictMaxFraction", value)}
                error={err("stragglerEvictMaxFraction")}
              />
            </SimpleGrid>
          )}
          <SimpleGrid cols={{ base: 2, sm: shows("replicas") ? 4 : 3 }} spacing="md">
            <NumberInput
              label="GPUs"
              name="gpu"
              description="Per replica; below 1 shares a GPU"
              min={0}
              max={64}
              step={0.25}
              decimalScale={3}
              value={values.gpu}
              onChange={(value) => set("gpu", value)}
              error={err("gpu")}
            />
            <NumberInput
              label="CPUs"
              name="cpu"
              description="Cores per replica"
              min={0.001}
              max={1024}
              step={1}
              decimalScale={3}
              value={values.cpu}
              onChange={(value) => set("cpu", value)}
              error={err("cpu")}
            />
            <TextInput
              label="Memory"
              name="memory"
              description="Per replica: 512Mi, 16Gi"
              value={values.memory}
              onChange={(e) => set("memory", e.currentTarget.value)}
              error={err("memory")}
            />
            {shows("replicas") && (
              <NumberInput
                label="Replicas"
                name="replicas"
                description={kind === "training" ? "Started together" : "Serving copies"}
                min={1}
                max={kind === "training" ? 512 : 64}
                allowDecimal={false}
                value={values.replicas}
                onChange={(value) => set("replicas", value)}
                error={err("replicas")}
              />
            )}
          </SimpleGrid>
          <SimpleGrid cols={{ base: 2, sm: 4 }} spacing="md">
            <Select
              label="Priority"
              name="priority"
              data={PRIORITIES}
              value={values.priority}
              onChange={(value) => set("priority", value ?? "P3")}
              allowDeselect={false}
              error={err("priority")}
            />
            <Autocomplete
              label="GPU model"
              name="gpu_model"
              placeholder="Any"
              data={gpuModels}
              value={values.gpuModel}
              onChange={(value) => set("gpuModel", value)}
              error={err("gpuModel")}
            />
            <Select
              label="Preemptible"
              name="preemptible"
              data={PREEMPTIBLE}
              value={values.preemptible}
              onChange={(value) => set("preemptible", (value as Preemptible | null) ?? "default")}
              allowDeselect={false}
              error={err("preemptible")}
            />
            <NumberInput
              label="Restarts"
              name="max_restarts"
              min={0}
              max={100}
              allowDecimal={false}
              value={values.maxRestarts}
              onChange={(value) => set("maxRestarts", value)}
              error={err("maxRestarts")}
            />
          </SimpleGrid>
          <SimpleGrid cols={{ base: 1, sm: 2 }} spacing="md">
            <Select
              label="Accelerator"
              name="accelerator_type"
              description="The vendor of the devices GPUs counts: NVIDIA (the default) or, where pools offer them, AMD or Ascend."
              data={[
                { value: "", label: "NVIDIA (default)" },
                { value: "amd", label: "AMD" },
                { value: "ascend", label: "Ascend" },
              ]}
              value={values.acceleratorType}
              onChange={(value) => set("acceleratorType", value ?? "")}
              allowDeselect={false}
              error={err("acceleratorType")}
            />
            <MultiSelect
              label="CPU architecture"
              name="arch"
              description="Where the image runs (empty: any node)."
              placeholder={values.arch.length ? undefined : "Any"}
              data={[
                { value: "amd64", label: "amd64 (x86_64)" },
                { value: "arm64", label: "arm64 (aarch64)" },
              ]}
              value={values.arch}
              onChange={(value) => set("arch", value)}
              error={err("arch")}
              clearable
            />
          </SimpleGrid>
          {shows("port") && (
            <NumberInput
              label="Port"
              name="port"
              description="Container port on Kubernetes; locally a free $PORT is chosen."
              min={1}
              max={65535}
              allowDecimal={false}
              w={220}
              value={values.port}
              onChange={(value) => set("port", value)}
              error={err("port")}
            />
          )}
          {shows("readinessPath") && (
            <SimpleGrid cols={{ base: 1, sm: 2 }} spacing="md">
              <TextInput
                label="Readiness path"
                name="readiness_path"
                placeholder="/"
                description="A replica gets traffic once a GET here answers below 400 (default /), e.g. /healthz."
                value={values.readinessPath}
                onChange={(e) => set("readinessPath", e.currentTarget.value)}
                error={err("readinessPath")}
                autoComplete="off"
              />
              <TextInput
                label="Model"
                name="model"
                placeholder="None"
                description="A registered model to serve, name@version or name@latest, mounted read-only at /model."
                value={values.model}
                onChange={(e) => set("model", e.currentTarget.value)}
                error={err("model")}
                autoComplete="off"
              />
            </SimpleGrid>
          )}
          {shows("isPublic") && (
            <Checkbox
              label="Public: anyone may call it through the gateway, without a token or deployment key"
              name="public"
              checked={values.isPublic}
              onChange={(e) => set("isPublic", e.currentTarget.checked)}
              error={err("isPublic")}
              description="Off: callers need a project member's API token or a deployment key (made on the deployment's page or with the API)."
            />
          )}
          {shows("autoscale") && (
            <Fieldset legend="Autoscaling" data-testid="autoscaling">
              <Stack gap="sm">
                <Switch
                  label="Scale replicas on the requests in flight"
                  name="autoscale"
                  checked={values.autoscale}
                  onChange={(e) => set("autoscale", e.currentTarget.checked)}
                  error={err("autoscale")}
                  description="Replicas above is the count it starts with; it must lie between min and max."
                />
                {values.autoscale && (
                  <SimpleGrid cols={{ base: 2, sm: 5 }} spacing="md">
                    <NumberInput label="Min replicas" name="min_replicas" description="0 scales to zero" min={0} max={64}
                      allowDecimal={false} value={values.minReplicas} onChange={(v) => set("minReplicas", v)} error={err("minReplicas")} />
                    <NumberInput label="Max replicas" name="max_replicas" description="Required" min={1} max={64}
                      allowDecimal={false} value={values.maxReplicas} onChange={(v) => set("maxReplicas", v)} error={err("maxReplicas")} />
                    <NumberInput label="Target requests per replica" name="target_concurrency" description="In flight" min={0.1}
                      max={10000} decimalScale={2} value={values.targetConcurrency} onChange={(v) => set("targetConcurrency", v)}
                      error={err("targetConcurrency")} />
                    <NumberInput label="Stable window" name="stable_window_seconds" description="Seconds, 6–3600" min={6} max={3600}
                      value={values.stableWindow} onChange={(v) => set("stableWindow", v)} error={err("stableWindow")} />
                    <NumberInput label="Panic window" name="panic_window_seconds" description="Seconds, 1–600" min={1} max={600}
                      value={values.panicWindow} onChange={(v) => set("panicWindow", v)} error={err("panicWindow")} />
                  </SimpleGrid>
                )}
              </Stack>
            </Fieldset>
          )}
          <SimpleGrid cols={{ base: 1, sm: 2 }} spacing="md">
            <Textarea
              label="Volumes"
              name="volumes"
              description="Project volumes, one a line: name, name:/mount or name:/mount:ro (default /data/<name>)."
              placeholder={"checkpoints\nshared:/mnt/shared:ro"}
              value={values.volumes}
              onChange={(e) => set("volumes", e.currentTarget.value)}
              error={err("volumes")}
              autosize
              minRows={2}
              maxRows={6}
              styles={{ input: { fontFamily: "var(--mantine-font-family-monospace)" } }}
            />
            <Textarea
              label="Datasets"
              name="datasets"
              description="Dataset versions, read-only, one a line: name (the latest), name@3 or name@3:/mount (default /datasets/<name>)."
              placeholder={"imagenet@2\ndigits@latest:/data/digits"}
              value={values.datasets}
              onChange={(e) => set("datasets", e.currentTarget.value)}
              error={err("datasets")}
              autosize
              minRows={2}
              maxRows={6}
              styles={{ input: { fontFamily: "var(--mantine-font-family-monospace)" } }}
            />
          </SimpleGrid>
          <Textarea
            label="Environment"
            name="env"
            description="One KEY=value per line."
            placeholder={"WANDB_MODE=offline\nSEED=42"}
            value={values.env}
            onChange={(e) => set("env", e.currentTarget.value)}
            error={err("env")}
            autosize
            minRows={2}
            maxRows={8}
            styles={{ input: { fontFamily: "var(--mantine-font-family-monospace)" } }}
          />

          {general.length > 0 && (
            <Alert color="red" title="Not submitted" data-testid="submit-error">
              {general.length === 1 ? (
                general[0]
              ) : (
                <List size="sm">
                  {general.map((m) => (
                    <List.Item key={m}>{m}</List.Item>
                  ))}
                </List>
              )}
            </Alert>
          )}
          {Object.keys(fieldErrors).length > 0 && general.length === 0 && (
            <Text size="sm" c="red" data-testid="submit-field-errors">
              Fix the highlighted field{Object.keys(fieldErrors).length > 1 ? "s" : ""}:{" "}
              {Object.keys(fieldErrors).map((f) => FIELD_LABEL[f as SubmitField]).join(", ")}.
            </Text>
          )}
          <Group justify="flex-end">
            <Button variant="default" component={Link} to={`/projects/${project}/workloads`}>
              Cancel
            </Button>
            <Button type="submit" loading={mutation.isPending} disabled={!writable} data-testid="submit-workload">
              Submit {kindLabel(kind).toLowerCase()}
            </Button>
          </Group>
        </Stack>
      </Card>
    </Stack>
  );
}
