// The Metrics panel: curves of the workload's tracking run(s), live as they are logged, with a
// run picker (one per attempt) and a metric picker; then the GPU/CPU panels (WorkloadResources).
import { Anchor, Badge, Card, Group, MultiSelect, Title } from "@mantine/core";
import { useCallback, useEffect, useMemo, useState } from "react";
import type { Schemas } from "../../api/client";
import { LiveTopics } from "../../components/charts/LiveTopics";
import { seriesColour } from "../../components/charts/palette";
import { TimeSeriesChart } from "../../components/charts/TimeSeriesChart";
import { useRunSeries, type RunSeriesSpec } from "../../components/charts/useRunSeries";
import { WorkloadResources } from "../../components/charts/WorkloadResources";
import { ErrorState } from "../../components/States";
import { allMetricKeys, defaultMetricKeys, isSystemKey, RUN_STATUS_COLOUR } from "../../lib/runs";
import type { Workload } from "./api";

type Run = Schemas["Run"];

export interface MetricsPanelProps {
  project: string;
  workload: Workload;
  /** The workload's runs, newest first. */
  runs: Run[];
  runsLoading: boolean;
  runsError: unknown;
  onRetry: () => void;
}

export function MetricsPanel({ project, workload: w, runs, runsLoading, runsError, onRetry }: MetricsPanelProps) {
  // Runs come newest first; by default show the latest attempt.
  const [runChoice, setRunChoice] = useState<string[] | null>(null);
  const [keyChoice, setKeyChoice] = useState<string[] | null>(null);
  const [runStatus, setRunStatus] = useState<Record<number, string>>({});
  const chosenRuns = useMemo(() => {
    const ids = runChoice ? runChoice.map(Number) : runs.length ? [runs[0].id] : [];
    return runs.filter((r) => ids.includes(r.id));
  }, [runChoice, runs]);
  const allRunIds = runs.map((r) => r.id);

  // Keys: from the runs' summaries, plus keys first seen live (logged after the page loaded).
  const [liveKeys, setLiveKeys] = useState<Record<number, string[]>>({});
  const keysOf = useCallback(
    (run: Run) => [...new Set([...Object.keys(run.summaries ?? {}), ...(liveKeys[run.id] ?? [])])],
    [liveKeys],
  );
  const keysPerRun = useMemo(() => chosenRuns.map(keysOf), [chosenRuns, keysOf]);
  const keyOptions = useMemo(() => allMetricKeys(keysPerRun), [keysPerRun]);
  const keys = keyChoice ?? defaultMetricKeys(keysPerRun, 3);

  const multiRun = chosenRuns.length > 1;
  const specs = useMemo<RunSeriesSpec[]>(() => {
    const out: RunSeriesSpec[] = [];
    chosenRuns.forEach((run) =>
      keys.forEach((key) => {
        out.push({
          run: run.id,
          key,
          label: multiRun ? `${key} · attempt ${run.attempt ?? run.id}` : key,
          color: seriesColour(out.length),
        });
      }),
    );
    return out;
  }, [chosenRuns, keys, multiRun]);
  const onRunStatus = useCallback((run: number, status: string) => setRunStatus((s) => ({ ...s, [run]: status })), []);
  const metrics = useRunSeries(project, specs, { runs: allRunIds, onRunStatus });
  useEffect(() => {
    setLiveKeys((prev) => {
      let changed = false;
      const next = { ...prev };
      for (const [run, list] of Object.entries(metrics.liveKeys)) {
        const id = Number(run);
        if ((prev[id] ?? []).length !== list.length) {
          next[id] = list;
          changed = true;
        }
      }
      return changed ? next : prev;
    });
  }, [metrics.liveKeys]);

  const latestRun = runs[0] ?? null;
  const resourcesRun = latestRun ? { id: latestRun.id, keys: keysOf(latestRun) } : null;

  const toolbar = (
    <>
      {runs.length > 1 && (
        <MultiSelect
          size="xs"
          aria-label="Runs"
          data={runs.map((r) => ({ value: String(r.id), label: r.attempt ? `attempt ${r.attempt}` : r.name }))}
          value={chosenRuns.map((r) => String(r.id))}
          onChange={setRunChoice}
          w={230}
          data-testid="metrics-runs"
        />
      )}
      <MultiSelect
        size="xs"
        aria-label="Metrics"
        placeholder={keys.length ? undefined : keyOptions.length ? "Pick metrics" : "No metrics yet"}
        data={[
          { group: "Metrics", items: keyOptions.filter((k) => !isSystemKey(k)) },
          { group: "System", items: keyOptions.filter(isSystemKey) },
        ].filter((g) => g.items.length)}
        value={keys}
        onChange={setKeyChoice}
        searchable
        clearable
        maxValues={12}
        w={360}
        data-testid="metrics-select"
        nothingFoundMessage="No such metric"
      />
    </>
  );

  let emptyMessage: React.ReactNode;
  if (runsLoading) emptyMessage = "Loading runs…";
  else if (!runs.length) {
    emptyMessage =
      w.status === "queued" || w.status === "admitted"
        ? "Curves appear here once the workload starts and its script logs metrics with cairn.log()."
        : "This workload has no tracking run. Scripts log metrics with cairn.init() and cairn.log({\"loss\": …}).";
  } else if (!keyOptions.length) emptyMessage = "The run has logged no metrics yet; new points are drawn as they arrive.";
  else if (!keys.length) emptyMessage = "Pick one or more metrics above.";
  else if (metrics.loading) emptyMessage = "Loading curves…";
  else emptyMessage = "No points yet; they are drawn as they arrive.";

  return (
    <>
      <Card withBorder padding="sm">
        <LiveTopics topics={metrics.topics} onFrame={metrics.handleFrame} />
        <Group justify="space-between" mb="xs" wrap="wrap">
          <Group gap="sm">
            <Title order={2} size="h4">Metrics</Title>
            {chosenRuns.map((r) => (
              <Badge key={r.id} size="sm" variant="light" tt="none" color={RUN_STATUS_COLOUR[runStatus[r.id] ?? r.status] ?? "gray"}>
                {r.name}: {runStatus[r.id] ?? r.status}
              </Badge>
            ))}
          </Group>
          {chosenRuns.length > 0 && (
            <Group gap="sm">
              <Anchor
                size="xs"
                href={`/api/v1/projects/${encodeURIComponent(project)}/runs/${chosenRuns[0].id}/export/`}
                download
              >
                Export CSV
              </Anchor>
            </Group>
          )}
        </Group>
        {runsError ? <ErrorState error={runsError} onRetry={onRetry} /> : null}
        {metrics.error ? <ErrorState error={metrics.error} onRetry={metrics.retry} /> : null}
        <TimeSeriesChart
          title="Metrics"
          series={metrics.series}
          revision={metrics.revision}
          loadRange={metrics.loadRange}
          toolbar={toolbar}
          height={300}
          emptyMessage={emptyMessage}
        />
      </Card>
      <WorkloadResources
        project={project}
        workloadId={w.id}
        gpus={w.resources?.gpu ?? 0}
        since={w.started_at ?? w.created_at}
        until={w.finished_at}
        run={resourcesRun}
        started={w.attempt >= 1 || !!w.started_at}
      />
    </>
  );
}
