// One sweep: its best trial, objective vs trial number, parallel coordinates of the trials,
// Optuna's parameter importance, a link to the comparison view with the trials' runs, and the
// trials table (status, params, objective, pruned at). Live: the `sweep:<id>` topic says when the
// sweep or a trial changed and the page re-reads them (a slow re-read only while the socket is down).
import { Alert, Anchor, Badge, Button, Card, Code, Group, Progress, SimpleGrid, Stack, Table, Text, Title } from "@mantine/core";
import { notifications } from "@mantine/notifications";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useMemo } from "react";
import { Link, useNavigate, useParams } from "react-router";
import { api, unwrap } from "../api/client";
import { ParallelCoordinates } from "../components/charts/ParallelCoordinates";
import { seriesColour } from "../components/charts/palette";
import { TimeSeriesChart } from "../components/charts/TimeSeriesChart";
import { useDebounced } from "../components/hooks";
import { LiveIndicator } from "../components/LiveIndicator";
import { EmptyState, ErrorState, errorAdvice, Loading } from "../components/States";
import { formatNumber, formatRelative } from "../lib/format";
import { retryTransient } from "../lib/retry";
import { workloadPath } from "../lib/runs";
import {
  bestTrial, importanceBars, objectiveHistory, paramKeys, paramsText, parcoordsTrials, sweepComparePath,
  TRIAL_STATUS_COLOUR, type Direction, type SweepTrial,
} from "../lib/sweeps";
import { waitSentence } from "../lib/status";
import { useLiveStatus, useTopic } from "../live/LiveProvider";
import { canWrite, useMe } from "../session";
import { SweepStatusBadge } from "./Sweeps";

export function SweepDetailPage() {
  const { project = "", id = "" } = useParams();
  if (!/^\d+$/.test(id)) return <EmptyState page title="Sweep not found">There is no sweep “{id}”.</EmptyState>;
  return <SweepView key={`${project}/${id}`} project={project} id={Number(id)} />;
}

function SweepView({ project, id }: { project: string; id: number }) {
  const queryClient = useQueryClient();
  const me = useMe();
  const role = me.projects.find((p) => p.slug === project)?.role;
  const navigate = useNavigate();
  const path = { project, id };
  // Without the socket (down, reconnecting) nothing says when to re-read: fall back to polling.
  const fallback = useLiveStatus() === "open" ? false : 10_000;
  const sweep = useQuery({
    queryKey: ["sweep", project, id],
    queryFn: () => unwrap(api.GET("/api/v1/projects/{project}/sweeps/{id}/", { params: { path } })),
    refetchInterval: (q) => (q.state.data && ["running", "stopping"].includes(q.state.data.status) ? fallback : false),
    retry: retryTransient,
  });
  const active = !!sweep.data && ["running", "stopping"].includes(sweep.data.status);
  const trials = useQuery({
    queryKey: ["sweep-trials", project, id],
    queryFn: () => unwrap(api.GET("/api/v1/projects/{project}/sweeps/{id}/trials/", { params: { path, query: { page_size: 1000 } } })),
    refetchInterval: active ? fallback : false,
    retry: retryTransient,
  });
  const refetchSweep = useDebounced(() => void queryClient.invalidateQueries({ queryKey: ["sweep", project, id] }), 300);
  const refetchTrials = useDebounced(
    () => void queryClient.invalidateQueries({ queryKey: ["sweep-trials", project, id] }), 300);
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE("/api/v1/projects/{project}/sweeps/{id}/", { params: { path } })),
    onSuccess: () => {
      notifications.show({ color: "green", title: "Deleted", message: "The sweep is gone; its trials' jobs and runs are kept." });
      void queryClient.invalidateQueries({ queryKey: ["sweeps", project] });
      void navigate(`/projects/${project}/sweeps`);
    },
    onError: (error) => notifications.show({ color: "red", title: "Not deleted", message: errorAdvice(error).detail }),
  });
  useTopic(`sweep:${id}`, (frame) => {
    if (frame.type === "sweep.deleted") {
      if (remove.isPending || remove.isSuccess) return; // deleted from here: onSuccess says so
      notifications.show({ color: "gray", title: "Sweep deleted", message: `Sweep ${sweep.data?.name ?? id} was deleted.` });
      void navigate(`/projects/${project}/sweeps`);
    } else if (frame.type === "sweep.trial") {
      refetchTrials();
      refetchSweep(); // its counts and best trial
    } else if (frame.type === "sweep.changed") {
      refetchSweep();
    }
  });
  const importance = useQuery({
    queryKey: ["sweep-importance", project, id, sweep.data?.trials?.succeeded ?? 0],
    queryFn: () => unwrap(api.GET("/api/v1/projects/{project}/sweeps/{id}/importance/", { params: { path } })),
    enabled: !!sweep.data,
    retry: retryTransient,
  });
  const stop = useMutation({
    mutationFn: () => unwrap(api.POST("/api/v1/projects/{project}/sweeps/{id}/stop/", { params: { path } })),
    onSuccess: () => {
      notifications.show({ color: "green", title: "Stopping", message: "No more trials; its running trials are stopped." });
      void queryClient.invalidateQueries({ queryKey: ["sweep", project, id] });
    },
    onError: (error) => notifications.show({ color: "red", title: "Not stopped", message: errorAdvice(error).detail }),
  });

  const rows = useMemo(() => (trials.data?.results ?? []) as unknown as (SweepTrial & Record<string, unknown>)[], [trials.data]);
  const direction = (sweep.data?.objective.direction ?? "maximize") as Direction;
  const history = useMemo(() => objectiveHistory(rows, direction), [rows, direction]);
  // Each trial's line in the colour its run has in the comparison view this page links to.
  const pcRuns = useMemo(() => parcoordsTrials(rows, seriesColour), [rows]);
  const axes = useMemo(() => paramKeys((sweep.data?.space ?? []) as { name: string }[], rows), [sweep.data, rows]);
  const best = useMemo(() => bestTrial(rows, direction), [rows, direction]);

  if (sweep.error && !sweep.data) return <ErrorState error={sweep.error} onRetry={() => sweep.refetch()} />;
  if (!sweep.data) return <Loading label="Loading the sweep…" />;
  const s = sweep.data;
  const metric = s.objective.metric;
  const compare = sweepComparePath(project, rows);
  const bars = importanceBars(importance.data?.importances ?? {});

  return (
    <Stack gap="md" data-testid="sweep-detail">
      <Group justify="space-between" align="flex-start" wrap="wrap">
        <Stack gap={4}>
          <Group gap="sm">
            <Title order={1} size="h2">{s.name}</Title>
            <SweepStatusBadge status={s.status} />
            <LiveIndicator />
          </Group>
          <Text size="sm" c="dimmed">
            {s.algorithm} · {direction} <Code>{metric}</Code> · {s.max_concurrent} at a time · priority {s.priority}
            {s.budget.max_trials ? ` · ${s.budget.max_trials} trials` : ""}
            {s.budget.max_gpu_hours ? ` · ${s.budget.max_gpu_hours} GPU-hours` : ""} · created {formatRelative(s.created_at)}
          </Text>
          {s.status_message && <Text size="sm">{s.status_message}</Text>}
        </Stack>
        <Group gap="sm">
          {compare && (
            <Button component={Link} to={compare} variant="default" data-testid="compare-trials">
              Compare the trials' runs
            </Button>
          )}
          {s.status === "running" && canWrite(role) && (
            <Button color="red" loading={stop.isPending} onClick={() => stop.mutate()} data-testid="stop-sweep">
              Stop sweep
            </Button>
          )}
          {!["running", "stopping"].includes(s.status) && canWrite(role) && (
            <Button color="red" variant="light" loading={remove.isPending} data-testid="delete-sweep"
              onClick={() => {
                if (window.confirm(`Delete sweep ${s.name}? Its trials' training jobs and runs are kept.`)) remove.mutate();
              }}>
              Delete sweep
            </Button>
          )}
        </Group>
      </Group>

      <SimpleGrid cols={{ base: 1, md: 2 }}>
        <Card withBorder padding="sm" data-testid="best-trial">
          <Title order={2} size="h4" mb="xs">Best trial so far</Title>
          {best ? (
            <Stack gap={4}>
              <Text size="xl" fw={700}>
                {metric} = {formatNumber(best.objective)}
              </Text>
              <Text size="sm">trial {best.number}: <Code>{paramsText(best.params)}</Code></Text>
            </Stack>
          ) : (
            <Text size="sm" c="dimmed">No trial has finished yet.</Text>
          )}
        </Card>
        <Card withBorder padding="sm" data-testid="param-importance">
          <Title order={2} size="h4" mb="xs">Parameter importance</Title>
          {bars.length ? (
            <Stack gap={6}>
              {bars.map((b) => (
                <div key={b.name}>
                  <Group justify="space-between"><Text size="sm" ff="monospace">{b.name}</Text><Text size="sm">{b.percent.toFixed(0)}%</Text></Group>
                  <Progress value={Math.round(b.percent * 10) / 10} size="sm" aria-label={`Importance of ${b.name}`} />
                </div>
              ))}
              <Text size="xs" c="dimmed">Optuna's estimate over {importance.data?.completed_trials} completed trials.</Text>
            </Stack>
          ) : (
            <Text size="sm" c="dimmed">Shown once two trials with different results have completed.</Text>
          )}
        </Card>
      </SimpleGrid>

      <Card withBorder padding="sm">
        <Title order={2} size="h4" mb="xs">{metric} by trial</Title>
        <TimeSeriesChart
          title={`${metric} by trial`}
          testId="objective-chart"
          xLabel="trial"
          height={240}
          series={[
            { id: "objective", label: metric, color: seriesColour(0), data: history.objective },
            { id: "best", label: "best so far", color: seriesColour(1), dash: [6, 4], data: history.best },
          ]}
          emptyMessage="No trial has finished yet."
        />
      </Card>

      <Card withBorder padding="sm">
        <Title order={2} size="h4" mb="xs">Parallel coordinates</Title>
        {pcRuns.length ? (
          <ParallelCoordinates runs={pcRuns} paramKeys={axes} metricLabel={metric} />
        ) : (
          <Text size="sm" c="dimmed" data-testid="parallel-coordinates">No trial has started yet.</Text>
        )}
      </Card>

      <Card withBorder padding="sm">
        <Title order={2} size="h4" mb="xs">Trials</Title>
        {trials.error && !trials.data ? (
          <Alert color="red">{errorAdvice(trials.error).detail}</Alert>
        ) : rows.length === 0 ? (
          <Text size="sm" c="dimmed">No trials yet: the sweep driver starts them within a few seconds.</Text>
        ) : (
          <Table.ScrollContainer minWidth={800}>
            <Table striped data-testid="trials-table">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>#</Table.Th>
                  <Table.Th>Status</Table.Th>
                  <Table.Th>Params</Table.Th>
                  <Table.Th>{metric}</Table.Th>
                  <Table.Th>Pruned at</Table.Th>
                  <Table.Th>Workload</Table.Th>
                  <Table.Th>Note</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {rows.map((t) => {
                  const w = t.workload as { id: number; name: string; status?: string; waiting_on?: string | null; pending_reason?: string } | null;
                  const waiting = t.status === "pending" && w?.status === "queued";
                  return (
                    <Table.Tr key={t.id} data-testid="trial-row" data-status={t.status}>
                      <Table.Td>{t.number}</Table.Td>
                      <Table.Td>
                        <Badge color={TRIAL_STATUS_COLOUR[t.status] ?? "gray"} variant="light">{t.status}</Badge>
                      </Table.Td>
                      <Table.Td ff="monospace" style={{ wordBreak: "break-word" }}>{paramsText(t.params)}</Table.Td>
                      <Table.Td>{t.objective !== null ? formatNumber(t.objective) : t.last_value !== null ? <Text span c="dimmed">{formatNumber(t.last_value)}</Text> : "—"}</Table.Td>
                      <Table.Td>{t.status === "pruned" ? `rung ${t.pruned_rung ?? "?"} (step ${t.pruned_step})` : "—"}</Table.Td>
                      <Table.Td>
                        {w ? <Anchor component={Link} to={workloadPath(project, "training", w.id)}>{w.name}</Anchor> : "—"}
                      </Table.Td>
                      <Table.Td>
                        {waiting ? (
                          <Text size="xs" data-testid="trial-wait" data-waiting-on={w?.waiting_on ?? ""}>
                            {waitSentence(w?.waiting_on, w?.pending_reason)}
                          </Text>
                        ) : (
                          <Text size="xs" c="dimmed">{t.status === "failed" ? String(t.message ?? "") : ""}</Text>
                        )}
                      </Table.Td>
                    </Table.Tr>
                  );
                })}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
        )}
      </Card>
    </Stack>
  );
}
