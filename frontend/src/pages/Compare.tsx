// Compare runs (/projects/:project/compare?runs=1,2,3): overlaid curves of one metric, the params
// side by side with differences highlighted, and parallel coordinates of params → final metric.
import {
  Anchor, Badge, Box, Button, Card, CloseButton, Group, MultiSelect, SegmentedControl, Select, Stack, Switch, Table,
  Text, Title, useComputedColorScheme,
} from "@mantine/core";
import { useQuery } from "@tanstack/react-query";
import { useCallback, useMemo, useState } from "react";
import { Link, useParams, useSearchParams } from "react-router";
import { ApiError, api, unwrap } from "../api/client";
import { LiveTopics } from "../components/charts/LiveTopics";
import { ParallelCoordinates } from "../components/charts/ParallelCoordinates";
import { seriesColour } from "../components/charts/palette";
import { TimeSeriesChart } from "../components/charts/TimeSeriesChart";
import { identicalSeries } from "../lib/series";
import { useRunSeries, type RunSeriesSpec } from "../components/charts/useRunSeries";
import { EmptyState, ErrorState, Loading } from "../components/States";
import { formatNumber } from "../lib/format";
import { differingKeys, metricValue, paramText, type MetricMode, type ParcoordsRun } from "../lib/parcoords";
import { retryTransient } from "../lib/retry";
import { allMetricKeys, defaultMetricKeys, parseRunIds, RUN_STATUS_COLOUR } from "../lib/runs";

interface CompareAnswer {
  runs: { id: number; name: string; status: string }[];
  params: { keys: string[]; rows: { run: number; name: string; params: Record<string, unknown> }[] };
  summaries: Record<string, Record<string, { count?: number; min?: number; max?: number; last?: number }>>;
}

const MODES: { value: MetricMode; label: string }[] = [
  { value: "last", label: "Last" },
  { value: "min", label: "Min" },
  { value: "max", label: "Max" },
];
const MAX_AXES = 12;

export function ComparePage() {
  const { project = "" } = useParams();
  return <CompareView key={project} project={project} />;
}

/** Ids named in a 404 "Run(s) not found: 3, 4." */
function missingRuns(error: unknown): number[] {
  if (!(error instanceof ApiError) || error.status !== 404) return [];
  const match = /not found:\s*([\d,\s]+)/i.exec(error.detail);
  return match ? parseRunIds(match[1].replace(/\s/g, "")) : [];
}

function CompareView({ project }: { project: string }) {
  const [search, setSearch] = useSearchParams();
  const runIds = useMemo(() => parseRunIds(search.get("runs")), [search]);
  const idsKey = runIds.join(",");

  const compare = useQuery({
    queryKey: ["compare", project, idsKey],
    queryFn: async () =>
      (await unwrap(
        api.GET("/api/v1/projects/{project}/runs/compare/", { params: { path: { project }, query: { runs: idsKey } } }),
      )) as unknown as CompareAnswer,
    enabled: runIds.length > 0,
    retry: retryTransient,
    refetchInterval: (query) => (query.state.data?.runs.some((r) => r.status === "running") ? 15_000 : false),
  });

  const setRuns = (ids: number[]) => {
    const next = new URLSearchParams(search);
    if (ids.length) next.set("runs", ids.join(","));
    else next.delete("runs");
    setSearch(next, { replace: true });
  };

  if (!runIds.length) {
    return (
      <Stack>
        <Title order={1} size="h2">Compare runs</Title>
        <EmptyState
          title="No runs picked"
          action={
            <Button component={Link} to={`/projects/${project}/runs`} variant="light">
              Pick runs
            </Button>
          }
        >
          Tick two or more runs on the Runs page and press Compare; their ids end up in this page's address
          (<code>?runs=1,2</code>).
        </EmptyState>
      </Stack>
    );
  }
  if (compare.error && !compare.data) {
    const missing = missingRuns(compare.error);
    return (
      <Stack>
        <Title order={1} size="h2">Compare runs</Title>
        <ErrorState error={compare.error} onRetry={() => compare.refetch()} />
        {missing.length > 0 && runIds.length > missing.length && (
          <Group>
            <Button variant="light" onClick={() => setRuns(runIds.filter((id) => !missing.includes(id)))}>
              Compare the other {runIds.length - missing.length} run{runIds.length - missing.length === 1 ? "" : "s"}
            </Button>
          </Group>
        )}
      </Stack>
    );
  }
  if (!compare.data) return <Loading label="Loading the runs to compare…" />;
  return <CompareBody project={project} data={compare.data} onRemove={(id) => setRuns(runIds.filter((r) => r !== id))} />;
}

function CompareBody({ project, data, onRemove }: { project: string; data: CompareAnswer; onRemove: (id: number) => void }) {
  const runs = data.runs;
  const scheme = useComputedColorScheme("light");
  const diffBackground = scheme === "dark" ? "rgba(250, 176, 5, 0.10)" : "rgba(250, 176, 5, 0.16)";
  const colours = useMemo(() => new Map(runs.map((r, i) => [r.id, seriesColour(i)])), [runs]);
  const [statuses, setStatuses] = useState<Record<number, string>>({});
  const keysPerRun = useMemo(() => runs.map((r) => Object.keys(data.summaries[String(r.id)] ?? {})), [runs, data.summaries]);
  const metricKeys = useMemo(() => allMetricKeys(keysPerRun), [keysPerRun]);
  const [metricChoice, setMetric] = useState<string | null>(null);
  const metric = metricChoice && metricKeys.includes(metricChoice) ? metricChoice : (defaultMetricKeys(keysPerRun, 1)[0] ?? metricKeys[0] ?? null);
  const [mode, setMode] = useState<MetricMode>("last");
  const [onlyDiffs, setOnlyDiffs] = useState(false);

  const paramsByRun = useMemo(() => new Map(data.params.rows.map((row) => [row.run, row.params ?? {}])), [data.params.rows]);
  const allParamKeys = data.params.keys;
  const differing = useMemo(
    () => new Set(differingKeys(runs.map((r) => ({ params: paramsByRun.get(r.id) ?? {} })), allParamKeys)),
    [runs, paramsByRun, allParamKeys],
  );
  const shownParamKeys = onlyDiffs ? allParamKeys.filter((k) => differing.has(k)) : allParamKeys;
  const [axisChoice, setAxisChoice] = useState<string[] | null>(null);
  const defaultAxes = (differing.size ? allParamKeys.filter((k) => differing.has(k)) : allParamKeys).slice(0, MAX_AXES);
  const axes = (axisChoice ?? defaultAxes).filter((k) => allParamKeys.includes(k));

  const specs = useMemo<RunSeriesSpec[]>(
    () => (metric ? runs.map((r) => ({ run: r.id, key: metric, label: r.name, color: colours.get(r.id) as string })) : []),
    [runs, metric, colours],
  );
  const onRunStatus = useCallback((run: number, status: string) => setStatuses((s) => ({ ...s, [run]: status })), []);
  const curves = useRunSeries(project, specs, { onRunStatus });
  // Runs with the very same points would hide each other: the later ones are dashed, and named.
  // eslint-disable-next-line react-hooks/exhaustive-deps -- revision: the series' points grow in place
  const same = useMemo(() => identicalSeries(curves.series), [curves.series, curves.revision]);
  const chartSeries = useMemo(
    () => curves.series.map((s) => (same.has(s.id) ? { ...s, dash: [6, 4] } : s)),
    [curves.series, same],
  );
  const labelOf = (id: string) => curves.series.find((s) => s.id === id)?.label ?? id;
  const repeats = [...same.entries()].map(([copy, original]) => [labelOf(copy), labelOf(original)] as const);
  const statusOf = (run: { id: number; status: string }) => statuses[run.id] ?? run.status;
  const liveTopics = curves.topics.filter((t) => runs.some((r) => `run:${r.id}` === t && statusOf(r) === "running"));

  const pcRuns = useMemo<ParcoordsRun[]>(
    () =>
      runs.map((r) => ({
        id: r.id,
        name: r.name,
        params: paramsByRun.get(r.id) ?? {},
        metric: metric ? metricValue(data.summaries[String(r.id)], metric, mode) : null,
        color: colours.get(r.id), // the curve's colour: one colour per run on the whole page
      })),
    [runs, paramsByRun, metric, mode, data.summaries, colours],
  );

  const metricSelect = (testId: string) => (
    <Select
      size="xs"
      label="Metric"
      data={metricKeys}
      value={metric}
      onChange={setMetric}
      searchable
      allowDeselect={false}
      w={240}
      nothingFoundMessage="No such metric"
      data-testid={testId}
      placeholder={metricKeys.length ? "Pick a metric" : "No metrics logged"}
    />
  );

  return (
    <Stack gap="md">
      <LiveTopics topics={liveTopics} onFrame={curves.handleFrame} />
      <Group justify="space-between" align="flex-end" wrap="wrap">
        <div>
          <Title order={1} size="h2">Compare runs</Title>
          <Text size="sm" c="dimmed">
            {runs.length} run{runs.length === 1 ? "" : "s"} · drag on the chart to zoom (re-read at full resolution), double-click to reset.
          </Text>
        </div>
        <Anchor component={Link} to={`/projects/${project}/runs`} size="sm">
          ← All runs
        </Anchor>
      </Group>

      <Group gap="xs" wrap="wrap" data-testid="compare-runs-list">
        {runs.map((r) => (
          <Badge
            key={r.id}
            variant="outline"
            color="gray"
            size="lg"
            tt="none"
            leftSection={<Box w={10} h={10} style={{ borderRadius: 5, background: colours.get(r.id) }} />}
            rightSection={
              runs.length > 1 ? <CloseButton size="xs" aria-label={`Remove ${r.name}`} onClick={() => onRemove(r.id)} /> : null
            }
          >
            <Group gap={6} wrap="nowrap">
              <Text size="sm" fw={500}>
                {r.name}
              </Text>
              <Text size="xs" c={RUN_STATUS_COLOUR[statusOf(r)] ?? "dimmed"}>
                {statusOf(r)}
              </Text>
            </Group>
          </Badge>
        ))}
      </Group>

      <Card withBorder padding="sm">
        {curves.error ? <ErrorState error={curves.error} onRetry={curves.retry} /> : null}
        <TimeSeriesChart
          title={metric ? `${metric} of the compared runs` : "Compared runs"}
          testId="compare-chart"
          series={chartSeries}
          revision={curves.revision}
          loadRange={curves.loadRange}
          height={320}
          toolbar={metricSelect("compare-metric")}
          emptyMessage={
            !metric
              ? "These runs have logged no metrics yet."
              : curves.loading
                ? "Loading curves…"
                : `No points of “${metric}” in these runs.`
          }
        />
        {repeats.length > 0 && (
          <Text size="xs" c="dimmed" mt={4} data-testid="identical-runs">
            {repeats.map(([copy, original]) => `${copy} has exactly the same points as ${original}`).join("; ")}: drawn
            dashed over it, so both stay visible.
          </Text>
        )}
      </Card>

      <Card withBorder padding="sm">
        <Group justify="space-between" mb="xs" wrap="wrap">
          <Title order={2} size="h4">Params</Title>
          <Group gap="md">
            <Text size="xs" c="dimmed">
              {differing.size} of {allParamKeys.length} differ
            </Text>
            <Switch
              size="sm"
              label="Only differences"
              checked={onlyDiffs}
              onChange={(e) => setOnlyDiffs(e.currentTarget.checked)}
              data-testid="only-differences"
            />
          </Group>
        </Group>
        {allParamKeys.length === 0 ? (
          <Text size="sm" c="dimmed" data-testid="params-table">
            None of these runs logged params. Log them with <code>cairn.log_params({"{"}"lr": 3e-4{"}"})</code>.
          </Text>
        ) : (
          <Table.ScrollContainer minWidth={200 + runs.length * 140}>
            <Table striped={false} withColumnBorders verticalSpacing={4} fz="sm" data-testid="params-table">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th w={200}>Param</Table.Th>
                  {runs.map((r) => (
                    <Table.Th key={r.id} data-run-id={r.id}>
                      <Group gap={6} wrap="nowrap">
                        <Box w={8} h={8} style={{ borderRadius: 4, background: colours.get(r.id), flex: "none" }} />
                        <Text size="sm" fw={600} truncate>
                          {r.name}
                        </Text>
                      </Group>
                    </Table.Th>
                  ))}
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {shownParamKeys.length === 0 && (
                  <Table.Tr>
                    <Table.Td colSpan={runs.length + 1}>
                      <Text size="sm" c="dimmed">
                        All params are equal across these runs.
                      </Text>
                    </Table.Td>
                  </Table.Tr>
                )}
                {shownParamKeys.map((key) => {
                  const differs = differing.has(key);
                  return (
                    <Table.Tr
                      key={key}
                      data-testid="param-row"
                      data-param={key}
                      data-differs={differs ? "true" : "false"}
                      style={
                        differs
                          ? { background: diffBackground, boxShadow: "inset 3px 0 0 var(--mantine-color-yellow-filled)" }
                          : undefined
                      }
                    >
                      <Table.Td fw={differs ? 600 : 400} ff="monospace">
                        {key}
                      </Table.Td>
                      {runs.map((r) => {
                        const params = paramsByRun.get(r.id) ?? {};
                        const text = key in params ? paramText(params[key]) : null;
                        return (
                          <Table.Td key={r.id} ff="monospace">
                            {text === null ? <Text span c="dimmed">—</Text> : <Text span size="sm" style={{ wordBreak: "break-word" }}>{text}</Text>}
                          </Table.Td>
                        );
                      })}
                    </Table.Tr>
                  );
                })}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
        )}
      </Card>

      <Card withBorder padding="sm">
        <Group justify="space-between" mb="xs" wrap="wrap" align="flex-end">
          <Title order={2} size="h4">Parallel coordinates</Title>
          <Group gap="sm" wrap="wrap" align="flex-end">
            <MultiSelect
              size="xs"
              label="Param axes"
              data={allParamKeys}
              value={axes}
              onChange={setAxisChoice}
              maxValues={MAX_AXES}
              searchable
              clearable
              w={320}
              placeholder={allParamKeys.length ? "Pick params" : "No params logged"}
            />
            {metricSelect("parcoords-metric")}
            <Box>
              <Text size="xs" fw={500} mb={2}>
                Final value
              </Text>
              <SegmentedControl size="xs" data={MODES} value={mode} onChange={(v) => setMode(v as MetricMode)} data-testid="metric-mode" />
            </Box>
          </Group>
        </Group>
        {metric || axes.length ? (
          <ParallelCoordinates runs={pcRuns} paramKeys={axes} metricLabel={metric ? `${metric} (${mode})` : "no metric"} />
        ) : (
          <Box data-testid="parallel-coordinates">
            <Text size="sm" c="dimmed">
              Nothing to plot: these runs have neither params nor metrics.
            </Text>
          </Box>
        )}
      </Card>

      <Card withBorder padding="sm">
        <Title order={2} size="h4" mb="xs">
          Metric summaries
        </Title>
        <Table.ScrollContainer minWidth={200 + runs.length * 140}>
          <Table withColumnBorders verticalSpacing={4} fz="sm" data-testid="summaries-table">
            <Table.Thead>
              <Table.Tr>
                <Table.Th w={200}>Metric ({mode})</Table.Th>
                {runs.map((r) => (
                  <Table.Th key={r.id}>{r.name}</Table.Th>
                ))}
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {metricKeys.map((key) => (
                <Table.Tr key={key}>
                  <Table.Td ff="monospace">{key}</Table.Td>
                  {runs.map((r) => {
                    const value = metricValue(data.summaries[String(r.id)], key, mode);
                    return (
                      <Table.Td key={r.id} ff="monospace">
                        {value === null ? <Text span c="dimmed">—</Text> : formatNumber(value)}
                      </Table.Td>
                    );
                  })}
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      </Card>
      {runs.length === 1 && (
        <Text size="sm" c="dimmed">
          One run shown.{" "}
          <Anchor component={Link} to={`/projects/${project}/runs`} size="sm">
            Pick more runs to compare
          </Anchor>
          .
        </Text>
      )}
    </Stack>
  );
}

