// A new hyper-parameter sweep (/projects/:project/sweeps/new): what POST /sweeps/ takes
// (docs/sweeps.md) — name, objective, algorithm (ASHA's early stopping), search space, budget,
// concurrency, priority, seed — and the trials' training job from the submit form's fields.
// The API's messages appear next to the fields they are about (lib/sweepForm.ts maps them).
import {
  Alert, Anchor, Button, Card, Fieldset, Group, List, NumberInput, Select, SimpleGrid, Stack, Text, Textarea, TextInput, Title,
} from "@mantine/core";
import { notifications } from "@mantine/notifications";
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { Link, useNavigate, useParams } from "react-router";
import { api, ApiError, unwrap, type Schemas } from "../api/client";
import { errorAdvice } from "../components/States";
import { buildSweepBody, DEFAULT_SWEEP, mapSweepErrors, type Algorithm, type SweepErrors, type SweepValues } from "../lib/sweepForm";
import type { SubmitValues } from "../lib/submit";
import { canWrite, useMe } from "../session";

const EXAMPLE_SPACE = `{
  "lr": {"type": "float", "low": 0.0001, "high": 0.1, "log": true},
  "hidden": {"type": "int", "low": 8, "high": 256, "log": true},
  "solver": {"type": "categorical", "choices": ["adam", "sgd"]}
}`;

const PRIORITIES = ["P0", "P1", "P2", "P3", "P4", "P5"].map((p) => ({ value: p, label: p === "P4" ? "P4 (default)" : p }));

export function SweepNewPage() {
  const { project = "" } = useParams();
  const me = useMe();
  const writable = canWrite(me.projects.find((p) => p.slug === project)?.role);
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const [values, setValues] = useState<SweepValues>({ ...DEFAULT_SWEEP, space: EXAMPLE_SPACE });
  const [errors, setErrors] = useState<SweepErrors>({});
  const [general, setGeneral] = useState<string[]>([]);

  const set = <K extends keyof SweepValues>(field: K, value: SweepValues[K]) => {
    setValues((v) => ({ ...v, [field]: value }));
    setErrors(({ [field]: _drop, ...rest }) => rest);
  };
  const setTemplate = <K extends keyof SubmitValues>(field: K, value: SubmitValues[K]) => {
    setValues((v) => ({ ...v, template: { ...v.template, [field]: value } }));
    setErrors(({ [`template.${field}`]: _drop, ...rest }) => rest);
  };

  const create = useMutation({
    mutationFn: (body: Record<string, unknown>) =>
      unwrap(api.POST("/api/v1/projects/{project}/sweeps/", { params: { path: { project } }, body: body as Schemas["SweepCreateRequest"] })),
    onSuccess: (sweep) => {
      void queryClient.invalidateQueries({ queryKey: ["sweeps", project] });
      notifications.show({ color: "green", title: "Sweep created", message: `${sweep.name}: its first trials start within seconds.` });
      navigate(`/projects/${project}/sweeps/${sweep.id}`);
    },
    onError: (error) => {
      if (error instanceof ApiError) {
        const mapped = mapSweepErrors(error.fieldErrors, error.detail);
        setErrors(mapped.fields);
        setGeneral(mapped.general);
      } else {
        setGeneral([errorAdvice(error).detail]);
      }
    },
  });

  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    const { body, errors: found } = buildSweepBody(values);
    setGeneral([]);
    setErrors(found);
    if (!Object.keys(found).length) create.mutate(body);
  };
  const t = values.template;

  return (
    <Stack gap="md" maw={960}>
      <Group justify="space-between">
        <Title order={1} size="h2">New sweep</Title>
        <Anchor component={Link} to={`/projects/${project}/sweeps`} size="sm">Back to sweeps</Anchor>
      </Group>
      <Card withBorder padding="lg" component="form" onSubmit={onSubmit} noValidate data-testid="sweep-form">
        <Stack gap="md">
          <Text size="sm" c="dimmed">
            Each trial is a training job with parameters Optuna picks from the space, judged by a metric it logs with the SDK
            (docs/sweeps.md). The same as <code>cairn sweep create sweep.yaml</code>.
          </Text>
          <SimpleGrid cols={{ base: 1, sm: 3 }} spacing="md">
            <TextInput label="Name" description="Trials are named <name>-<number>." value={values.name}
              onChange={(e) => set("name", e.currentTarget.value)} error={errors.name} autoComplete="off" />
            <TextInput label="Objective metric" description="The key the trials log: cairn.log({key: value}, step=epoch)."
              value={values.metric} onChange={(e) => set("metric", e.currentTarget.value)} error={errors.metric} autoComplete="off" />
            <Select label="Direction" data={[{ value: "maximize", label: "Maximize" }, { value: "minimize", label: "Minimize" }]}
              value={values.direction} onChange={(v) => set("direction", (v as SweepValues["direction"]) ?? "maximize")}
              allowDeselect={false} error={errors.direction} />
          </SimpleGrid>
          <SimpleGrid cols={{ base: 1, sm: 3 }} spacing="md">
            <Select label="Algorithm" data={[
              { value: "random", label: "Random search" }, { value: "grid", label: "Grid search" },
              { value: "tpe", label: "TPE (learns from finished trials)" }, { value: "asha", label: "ASHA (stops poor trials early)" },
            ]} value={values.algorithm} onChange={(v) => set("algorithm", (v as Algorithm) ?? "random")} allowDeselect={false}
              error={errors.algorithm} />
            {values.algorithm === "asha" && (
              <>
                <NumberInput label="First rung at step" description="min_resource" min={1} allowDecimal={false}
                  value={values.minResource} onChange={(v) => set("minResource", v)} error={errors.minResource} />
                <NumberInput label="Reduction factor" description="The best 1/factor go on at each rung" min={2} max={100}
                  allowDecimal={false} value={values.reductionFactor} onChange={(v) => set("reductionFactor", v)} error={errors.reductionFactor} />
              </>
            )}
          </SimpleGrid>
          <Textarea label="Search space" description="JSON: each parameter's type (float, int, categorical) and range or choices; log, step, when."
            value={values.space} onChange={(e) => set("space", e.currentTarget.value)} error={errors.space} autosize minRows={4} maxRows={14}
            styles={{ input: { fontFamily: "var(--mantine-font-family-monospace)" } }} />
          <SimpleGrid cols={{ base: 2, sm: 5 }} spacing="md">
            <NumberInput label="Max trials" min={1} allowDecimal={false} value={values.maxTrials}
              onChange={(v) => set("maxTrials", v)} error={errors.maxTrials} />
            <NumberInput label="Max GPU-hours" description="Optional" min={0.001} value={values.maxGpuHours}
              onChange={(v) => set("maxGpuHours", v)} error={errors.maxGpuHours} />
            <NumberInput label="At a time" description="max_concurrent" min={1} max={1000} allowDecimal={false}
              value={values.maxConcurrent} onChange={(v) => set("maxConcurrent", v)} error={errors.maxConcurrent} />
            <Select label="Priority" data={PRIORITIES} value={values.priority} onChange={(v) => set("priority", v ?? "P4")}
              allowDeselect={false} error={errors.priority} />
            <NumberInput label="Seed" description="Optional" min={0} allowDecimal={false} value={values.seed}
              onChange={(v) => set("seed", v)} error={errors.seed} />
          </SimpleGrid>
          <Fieldset legend="Each trial's training job">
            <Stack gap="sm">
              <Textarea label="Command" description="Run by /bin/sh; the parameters arrive as PARAM_<NAME> and CAIRN_SWEEP_PARAMS."
                value={t.command} onChange={(e) => setTemplate("command", e.currentTarget.value)} error={errors["template.command"]}
                autosize minRows={2} styles={{ input: { fontFamily: "var(--mantine-font-family-monospace)" } }} />
              <SimpleGrid cols={{ base: 1, sm: 2 }} spacing="md">
                <TextInput label="Working directory" value={t.workingDir} onChange={(e) => setTemplate("workingDir", e.currentTarget.value)}
                  error={errors["template.workingDir"]} />
                <TextInput label="Max run time" description="Per trial: 10m, 2h" value={t.maxRuntime}
                  onChange={(e) => setTemplate("maxRuntime", e.currentTarget.value)} error={errors["template.maxRuntime"]} />
              </SimpleGrid>
              <SimpleGrid cols={{ base: 2, sm: 3 }} spacing="md">
                <NumberInput label="GPUs" min={0} step={0.25} decimalScale={3} value={t.gpu} onChange={(v) => setTemplate("gpu", v)}
                  error={errors["template.gpu"]} />
                <NumberInput label="CPUs" min={0.001} decimalScale={3} value={t.cpu} onChange={(v) => setTemplate("cpu", v)}
                  error={errors["template.cpu"]} />
                <TextInput label="Memory" value={t.memory} onChange={(e) => setTemplate("memory", e.currentTarget.value)}
                  error={errors["template.memory"]} />
              </SimpleGrid>
              <Textarea label="Environment" description="One KEY=value per line." value={t.env}
                onChange={(e) => setTemplate("env", e.currentTarget.value)} error={errors["template.env"]} autosize minRows={2}
                styles={{ input: { fontFamily: "var(--mantine-font-family-monospace)" } }} />
            </Stack>
          </Fieldset>
          {general.length > 0 && (
            <Alert color="red" title="Not created" data-testid="sweep-error">
              {general.length === 1 ? general[0] : <List size="sm">{general.map((m) => <List.Item key={m}>{m}</List.Item>)}</List>}
            </Alert>
          )}
          <Group justify="flex-end">
            <Button variant="default" component={Link} to={`/projects/${project}/sweeps`}>Cancel</Button>
            <Button type="submit" loading={create.isPending} disabled={!writable} data-testid="create-sweep">Create sweep</Button>
          </Group>
        </Stack>
      </Card>
    </Stack>
  );
}
