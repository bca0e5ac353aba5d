// GPU and CPU panels of a workload page. GPUs: telemetry attributed to the workload (DCGM
// exporter or Cairn's sampler) plus live `workload.telemetry` frames; when there is none, the
// SDK's system/gpu<i>/... metrics of the workload's run. CPU and memory: the run's system/...
// metrics (sampled every 5 s by cairn.init()).
import { Alert, Box, Card, Group, SimpleGrid, Stack, Text, Title } from "@mantine/core";
import { useMemo } from "react";
import { useTopic } from "../../live/LiveProvider";
import { formatBytesMb, formatNumber } from "../../lib/format";
import { sampleAxisLabel } from "../../lib/series";
import { ErrorState, Loading } from "../States";
import { LiveTopics } from "./LiveTopics";
import { seriesColour } from "./palette";
import { TimeSeriesChart, type ChartSeries } from "./TimeSeriesChart";
import { useRunSeries, type RunSeriesSpec } from "./useRunSeries";
import { GPU_METRICS, useWorkloadTelemetry, type TelemetrySample } from "./useWorkloadTelemetry";

export interface WorkloadResourcesProps {
  project: string;
  workloadId: number;
  /** GPUs the workload asked for (per replica) */
  gpus: number;
  since: string | null;
  until: string | null;
  /** the run whose system metrics stand in for telemetry (latest attempt), if any */
  run: { id: number; keys: string[] } | null;
  /** whether the workload ever started (attempt >= 1) */
  started: boolean;
}

const SDK_SAMPLE_SECONDS = 5; // cairn.init()'s system_interval default (sdk/cairn/tracking/system.py)

const CPU_KEYS = [
  { key: "system/cpu_percent", title: "CPU utilisation", unit: "%", yRange: [0, 100] as [number, number] },
  { key: "system/memory_percent", title: "Host memory used", unit: "%", yRange: [0, 100] as [number, number] },
];

function unitFormatter(unit: string): (v: number) => string {
  if (unit === "MiB") return (v) => formatBytesMb(v);
  if (unit === "%") return (v) => `${formatNumber(v, 3)}%`;
  return (v) => `${formatNumber(v, 3)} ${unit}`;
}

function Panel({
  title, series, revision, xKind, yRange, unit,
}: { title: string; series: ChartSeries[]; revision: number; xKind: "step" | "time"; yRange?: [number, number]; unit: string }) {
  // Samples the SDK logs (CPU, memory, GPUs without telemetry) are numbered, one every 5 s.
  const xLabel = xKind === "step" ? sampleAxisLabel(SDK_SAMPLE_SECONDS) : undefined;
  return (
    <Box>
      <Text size="sm" fw={600} mb={2}>
        {title}
      </Text>
      <TimeSeriesChart
        title={title}
        testId="telemetry-chart"
        series={series}
        revision={revision}
        height={150}
        xKind={xKind}
        xLabel={xLabel}
        controls={false}
        yRange={yRange}
        formatValue={unitFormatter(unit)}
        formatAxis={unit === "MiB" ? (v) => (v >= 1024 ? `${Number((v / 1024).toPrecision(3))}G` : `${Math.round(v)}M`) : undefined}
        emptyMessage="No samples in this range."
      />
    </Box>
  );
}

export function WorkloadResources({ project, workloadId, gpus, since, until, run, started }: WorkloadResourcesProps) {
  const telemetry = useWorkloadTelemetry(project, workloadId, since, until);
  useTopic(`workload:${workloadId}`, (frame) => {
    if (frame.type === "workload.telemetry" && Array.isArray(frame.samples)) {
      telemetry.handleSamples(frame.samples as TelemetrySample[]);
    }
  });

  // The run's own system metrics (SDK): GPU keys system/gpu<i>/<name>, CPU keys system/cpu_percent...
  // Compared by content: the run object (and its keys array) is new on every read.
  const runId = run?.id;
  const runKeysJoined = (run?.keys ?? []).join("\n");
  const runKeys = useMemo(() => (runKeysJoined ? runKeysJoined.split("\n") : []), [runKeysJoined]);
  const gpuIndexes = useMemo(() => {
    const out = new Set<number>();
    for (const key of runKeys) {
      const m = /^system\/gpu(\d+)\//.exec(key);
      if (m) out.add(Number(m[1]));
    }
    return [...out].sort((a, b) => a - b);
  }, [runKeys]);
  const useRunGpus = !telemetry.hasData && gpuIndexes.length > 0;
  const specs = useMemo<RunSeriesSpec[]>(() => {
    if (runId === undefined) return [];
    const out: RunSeriesSpec[] = CPU_KEYS.filter((c) => runKeys.includes(c.key)).map((c) => ({
      run: runId, key: c.key, label: c.title, color: seriesColour(0),
    }));
    if (useRunGpus) {
      for (const m of GPU_METRICS) {
        gpuIndexes.forEach((gpu, i) => {
          const key = `system/gpu${gpu}/${m.runKey}`;
          if (runKeys.includes(key)) out.push({ run: runId, key, label: `GPU ${gpu}`, color: seriesColour(i) });
        });
      }
    }
    return out;
  }, [runId, runKeys, useRunGpus, gpuIndexes]);
  const runSeries = useRunSeries(project, specs, { runs: run ? [run.id] : [] });
  const byKey = new Map(runSeries.series.map((s) => [s.id.slice(s.id.indexOf(":") + 1), s]));

  const gpuPanels = telemetry.hasData
    ? telemetry.panels.map((p) => ({ title: p.title, unit: p.unit, yRange: p.yRange, series: p.series, revision: telemetry.revision, xKind: "time" as const }))
    : useRunGpus
      ? GPU_METRICS.map((m) => ({
          title: m.title,
          unit: m.unit,
          yRange: m.yRange,
          series: gpuIndexes.map((gpu) => byKey.get(`system/gpu${gpu}/${m.runKey}`)).filter((s): s is ChartSeries => !!s),
          revision: runSeries.revision,
          xKind: "step" as const,
        }))
      : [];
  const cpuPanels = CPU_KEYS.filter((c) => byKey.has(c.key));

  return (
    <Card withBorder padding="sm" data-testid="gpu-panels" data-gpu-source={telemetry.hasData ? "telemetry" : useRunGpus ? "run" : "none"}>
      <LiveTopics topics={runSeries.topics} onFrame={runSeries.handleFrame} />
      <Group justify="space-between" mb="xs">
        <Title order={2} size="h4">GPU and CPU</Title>
        {useRunGpus && (
          <Text size="xs" c="dimmed">
            GPU samples logged by the training script (cairn SDK), one every 5 s
          </Text>
        )}
      </Group>
      <Stack gap="md">
        {telemetry.error && !telemetry.hasData ? (
          <ErrorState error={telemetry.error} onRetry={telemetry.retry} />
        ) : telemetry.loading && !useRunGpus ? (
          <Loading label="Loading GPU telemetry…" />
        ) : gpuPanels.length ? (
          <SimpleGrid cols={{ base: 1, md: 2 }} spacing="md" data-testid="gpu-charts">
            {gpuPanels.map((p) => (
              <Panel key={p.title} {...p} />
            ))}
          </SimpleGrid>
        ) : (
          <Alert color="gray" variant="light" title="No GPU telemetry" data-testid="gpu-empty">
            {gpus <= 0
              ? "This workload runs without GPUs, so there is nothing to sample."
              : !started
                ? "The workload has not started yet; its GPUs are sampled once it runs."
                : "No GPU samples for this workload: the node has no sampler reporting for it (no DCGM exporter scraped, no NVML on the node), " +
                "and the script logs no system/gpu metrics. Samples appear here as soon as one of them reports."}
          </Alert>
        )}
        {cpuPanels.length ? (
          <SimpleGrid cols={{ base: 1, md: 2 }} spacing="md" data-testid="cpu-charts">
            {cpuPanels.map((c) => (
              <Panel
                key={c.key}
                title={c.title}
                unit={c.unit}
                yRange={c.yRange}
                series={[byKey.get(c.key) as ChartSeries]}
                revision={runSeries.revision}
                xKind="step"
              />
            ))}
          </SimpleGrid>
        ) : (
          <Text size="sm" c="dimmed" data-testid="cpu-empty">
            No CPU samples:{" "}
            {run
              ? "the run logs no system metrics (cairn.init(system_metrics=False), or psutil is missing)."
              : started
                ? "this workload has no tracking run."
                : "the workload has not started yet."}
          </Text>
        )}
      </Stack>
    </Card>
  );
}
