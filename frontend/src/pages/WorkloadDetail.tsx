// One workload (/projects/:project/workloads/:kind/:id): header with Stop, status timeline,
// loss curves of its run(s), GPU/CPU panels, live logs and the event trail. Everything live
// over the page's one socket: workload:<id>, logs:<id>:<replica>, run:<id> (docs/live.md).
import {
  Alert, Anchor, Badge, Box, Button, Card, Group, MultiSelect, Select, SimpleGrid, Stack, Switch, Table, Text,
  Title, Tooltip,
} from "@mantine/core";
import { notifications } from "@mantine/notifications";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from "react";
import { Link, useParams } from "react-router";
import { api, unwrap, type Schemas } from "../api/client";
import { LiveTopics } from "../components/charts/LiveTopics";
import { seriesColour } from "../components/charts/palette";
import { TimeSeriesChart } from "../components/charts/TimeSeriesChart";
import { useRunSeries, type RunSeriesSpec } from "../components/charts/useRunSeries";
import { WorkloadResources } from "../components/charts/WorkloadResources";
import { useDebounced, useNow } from "../components/hooks";
import { EmptyState, ErrorState, Loading } from "../components/States";
import { StatusBadge } from "../components/StatusBadge";
import { WaitingOnBadge } from "../components/WaitingOnBadge";
import { formatDuration, formatRelative } from "../lib/format";
import { appendLog, appendNote, emptyLog, logText, type LogBuffer } from "../lib/logbuffer";
import { allMetricKeys, defaultMetricKeys, isSystemKey, RUN_STATUS_COLOUR } from "../lib/runs";
import { isFinal, KIND_LABEL, KINDS, statusColour, WAITING_ON, type WorkloadKind } from "../lib/status";
import { retryTransient } from "../lib/retry";
import { deriveSegments, eventsInOrder, layoutTimeline, runningTime, type TimelineSegment } from "../lib/timeline";
import { formatTimeLeft, gpuLabel, runTimeLimitInfo, statusExplanation, statusLine } from "../lib/workloads";
import { useTopic } from "../live/LiveProvider";
import { canWrite, useMe } from "../session";

type Workload = Schemas["Workload"];
type WorkloadEvent = Schemas["Event"];
type Run = Schemas["Run"];

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}

const STOPPABLE = new Set(["queued", "admitted", "running"]);
const LOG_LINES = 5000;

function isKind(value: string): value is WorkloadKind {
  return (KINDS as readonly string[]).includes(value);
}

// The three kinds live in three collections with the same shape; keep the typed client per kind.
function getWorkload(project: string, kind: WorkloadKind, id: number): Promise<Workload> {
  const params = { params: { path: { project, id } } };
  if (kind === "training") return unwrap(api.GET("/api/v1/projects/{project}/training-jobs/{id}/", params));
  if (kind === "notebook") return unwrap(api.GET("/api/v1/projects/{project}/notebooks/{id}/", params));
  return unwrap(api.GET("/api/v1/projects/{project}/deployments/{id}/", params));
}

async function getEvents(project: string, kind: WorkloadKind, id: number): Promise<{ events: WorkloadEvent[]; total: number }> {
  const read = (page: number) => {
    const params = { params: { path: { project, id }, query: { page, page_size: 500 } } };
    if (kind === "training") return unwrap(api.GET("/api/v1/projects/{project}/training-jobs/{id}/events/", params));
    if (kind === "notebook") return unwrap(api.GET("/api/v1/projects/{project}/notebooks/{id}/events/", params));
    return unwrap(api.GET("/api/v1/projects/{project}/deployments/{id}/events/", params));
  };
  const first = await read(1);
  let events = first.results;
  const pages = Math.ceil(first.count / 500);
  if (pages > 1) events = events.concat((await read(pages)).results); // oldest 500 and newest ones
  return { events, total: first.count };
}

function stopWorkload(project: string, kind: WorkloadKind, id: number): Promise<Workload> {
  const params = { params: { path: { project, id } } };
  if (kind === "training") return unwrap(api.POST("/api/v1/projects/{project}/training-jobs/{id}/stop/", params));
  if (kind === "notebook") return unwrap(api.POST("/api/v1/projects/{project}/notebooks/{id}/stop/", params));
  return unwrap(api.POST("/api/v1/projects/{project}/deployments/{id}/stop/", params));
}

export function WorkloadDetailPage() {
  const { project = "", kind = "", id = "" } = useParams();
  if (!isKind(kind) || !/^\d+$/.test(id)) {
    return (
      <EmptyState
        title="No such workload"
        action={
          <Button component={Link} to={`/projects/${project}/workloads`} variant="light">
            Back to workloads
          </Button>
        }
      >
        The address should look like /projects/{project}/workloads/training/42 (kinds: training, notebook, deployment).
      </EmptyState>
    );
  }
  return <WorkloadView key={`${project}/${kind}/${id}`} project={project} kind={kind} id={Number(id)} />;
}

function WorkloadView({ project, kind, id }: { project: string; kind: WorkloadKind; id: number }) {
  const queryClient = useQueryClient();
  const me = useMe();
  const role = me.projects.find((p) => p.slug === project)?.role;
  const workloadKey = useMemo(() => ["workload", project, kind, id] as const, [project, kind, id]);
  const eventsKey = useMemo(() => ["workload-events", project, kind, id] as const, [project, kind, id]);
  const runsKey = useMemo(() => ["workload-runs", project, id] as const, [project, id]);
  const [deleted, setDeleted] = useState(false);

  const workload = useQuery({ queryKey: workloadKey, queryFn: () => getWorkload(project, kind, id), retry: retryTransient });
  const events = useQuery({ queryKey: eventsKey, queryFn: () => getEvents(project, kind, id), retry: retryTransient });
  const status = workload.data?.status;
  const active = !!status && !isFinal(status);
  // One clock and one status history for the header's "Running for" and the timeline.
  const now = useNow(active ? 5_000 : 60_000);
  const w0 = workload.data;
  const eventList = events.data?.events;
  const segments = useMemo(
    () =>
      w0
        ? deriveSegments({
            status: w0.status, created_at: w0.created_at, finished_at: w0.finished_at, events: eventList ?? [], now,
            statusReason: w0.status_reason, statusMessage: w0.status_message,
          })
        : [],
    [w0?.status, w0?.created_at, w0?.finished_at, w0?.status_reason, w0?.status_message, eventList, now],
  );
  const runs = useQuery({
    queryKey: runsKey,
    queryFn: () =>
      unwrap(api.GET("/api/v1/projects/{project}/runs/", { params: { path: { project }, query: { workload: id, page_size: 100 } } })),
    retry: retryTransient,
    // A run is made when an attempt starts: look again while the workload may still make one.
    refetchInterval: (query) => {
      if (!active) return false;
      const attempts = query.state.data?.results.map((r) => r.attempt ?? 0) ?? [];
      return Math.max(0, ...attempts) < (workload.data?.attempt ?? 0) || attempts.length === 0 ? 5_000 : 30_000;
    },
  });

  const refreshEvents = useDebounced(() => queryClient.invalidateQueries({ queryKey: eventsKey }), 800);
  const refreshWorkload = useDebounced(() => queryClient.invalidateQueries({ queryKey: workloadKey }), 800);
  const refreshRuns = useDebounced(() => queryClient.invalidateQueries({ queryKey: runsKey }), 1500);

  useTopic(`workload:${id}`, (frame) => {
    if (frame.type === "workload.state") {
      const previous = queryClient.getQueryData<Workload>(workloadKey);
      queryClient.setQueryData<Workload>(workloadKey, (old) => {
        if (!old) return old;
        const next = { ...old } as Record<string, unknown>;
        for (const field of [
          "status", "status_reason", "status_message", "pending_reason", "waiting_on", "estimated_start", "queue_position",
          "attempt", "replicas", "preemptions", "exit_code", "placement", "conditions", "updated_at",
        ]) {
          if (field in frame) next[field] = frame[field];
        }
        return next as unknown as Workload;
      });
      if (previous && previous.status !== frame.status) {
        refreshEvents();
        refreshWorkload();
      }
      if (previous && frame.attempt !== undefined && previous.attempt !== frame.attempt) refreshRuns();
    } else if (frame.type === "workload.status") {
      queryClient.setQueryData<Workload>(workloadKey, (old) =>
        old ? { ...old, status: frame.status as Workload["status"], status_reason: String(frame.reason ?? old.status_reason) } : old,
      );
      refreshEvents();
      refreshWorkload();
      refreshRuns();
    } else if (frame.type === "workload.event") {
      refreshEvents();
    } else if (frame.type === "workload.deleted") {
      setDeleted(true);
    }
  });

  const stop = useMutation({
    mutationFn: () => stopWorkload(project, kind, id),
    onSuccess: (data) => {
      queryClient.setQueryData(workloadKey, data);
      refreshEvents();
      notifications.show({
        color: "orange",
        title: "Stop requested",
        message: isFinal(data.status) ? `${data.name} is ${data.status}.` : `${data.name} is stopping.`,
      });
    },
    onError: (error) => notifications.show({ color: "red", title: "Could not stop the workload", message: (error as Error).message }),
  });

  if (workload.error && !workload.data) {
    return (
      <Stack>
        <ErrorState error={workload.error} onRetry={() => workload.refetch()} />
        <Anchor component={Link} to={`/projects/${project}/workloads`}>
          ← Back to workloads
        </Anchor>
      </Stack>
    );
  }
  const w = workload.data;
  if (!w) return <Loading label="Loading the workload…" />;
  const runList = runs.data?.results ?? [];
  // A notebook's or deployment's run is listed once it logs (apps/tracking/selectors.py
  // runs_listed): until then the page shows no empty Metrics panel for it.
  const showMetrics = kind === "training" || runList.length > 0 || !!runs.error;

  return (
    <Stack gap="md">
      {deleted && (
        <Alert color="red" title="This workload was deleted">
          What is shown is the last state seen.{" "}
          <Anchor component={Link} to={`/projects/${project}/workloads`}>
            Back to workloads
          </Anchor>
        </Alert>
      )}
      <Header
        workload={w}
        now={now}
        segments={segments}
        project={project}
        canStop={!deleted && STOPPABLE.has(w.status) && canWrite(role)}
        stopping={stop.isPending}
        onStop={() => stop.mutate()}
      />
      <StatusTimeline workload={w} now={now} segments={segments} eventsError={events.error} />
      {showMetrics && (
        <MetricsCard project={project} workload={w} runs={runList} runsLoading={runs.isPending} runsError={runs.error} onRetry={() => runs.refetch()} />
      )}
      <LogCard workload={w} project={project} kind={kind} />
      <EventsCard events={events.data?.events ?? []} total={events.data?.total ?? 0} loading={events.isPending} error={events.error} onRetry={() => events.refetch()} />
    </Stack>
  );
}

// ---------------------------------------------------------------------------------------------
// Header

function Field({ label, children }: { label: string; children: React.ReactNode }) {
  return (
    <Box>
      <Text size="xs" c="dimmed" tt="uppercase" fw={600}>
        {label}
      </Text>
      <Text size="sm" component="div">
        {children}
      </Text>
    </Box>
  );
}

function Header({
  workload: w, now, segments, project, canStop, stopping, onStop,
}: {
  workload: Workload; now: number; segments: TimelineSegment[]; project: string; canStop: boolean; stopping: boolean;
  onStop: () => void;
}) {
  const ran = runningTime(segments);
  // Where a running notebook or deployment is reached. The API gives it only to those who may
  // reach it: a notebook's creator (Cairn's open link, which logs them in), a deployment's members.
  const serviceUrl = w.endpoint && w.status === "running" ? w.endpoint : null;
  const explanation = statusExplanation(w);
  // Run-time limits are a training-job setting; the other kinds run until stopped.
  const limit = w.kind === "training" ? runTimeLimitInfo(w, now) : null;
  return (
    <Card withBorder padding="md">
      <Group justify="space-between" align="flex-start" wrap="nowrap">
        <Stack gap={4} style={{ minWidth: 0 }}>
          <Anchor component={Link} to={`/projects/${project}/workloads`} size="xs">
            ← Workloads
          </Anchor>
          <Group gap="sm" wrap="wrap">
            <Title order={2} data-testid="workload-name" style={{ wordBreak: "break-all" }}>
              {w.name}
            </Title>
            <Badge variant="outline" color="gray" data-testid="workload-kind">
              {KIND_LABEL[w.kind as WorkloadKind] ?? w.kind}
            </Badge>
            <StatusBadge status={w.status} />
          </Group>
          {explanation && (
            <Text size="sm" fw={500} data-testid="status-explanation">
              {explanation}
            </Text>
          )}
          {(w.status_reason || w.status_message) && (
            <Text size="sm" c="dimmed" data-testid="status-line">
              {statusLine(w.status_reason, w.status_message)}
              {w.exit_code !== null && w.exit_code !== undefined ? ` (exit code ${w.exit_code})` : ""}
            </Text>
          )}
        </Stack>
        <Group gap="xs" wrap="nowrap">
          {serviceUrl && w.kind !== "training" && (
            <Button component="a" href={serviceUrl} target="_blank" rel="noreferrer" variant="light" data-testid="open-service">
              {w.kind === "notebook" ? "Open notebook" : "Open endpoint"}
            </Button>
          )}
          <Button component={Link} to={`/projects/${project}/runs?workload=${w.id}`} variant="default">
            Runs
          </Button>
          {canStop && (
            <Button color="red" variant="filled" loading={stopping} onClick={onStop} data-testid="stop-workload">
              Stop
            </Button>
          )}
        </Group>
      </Group>
      <SimpleGrid cols={{ base: 3, sm: 4, lg: limit ? 9 : 8 }} spacing="sm" mt="md">
        <Field label="Pool">{w.pool || "—"}</Field>
        <Field label="GPUs">
          <span data-testid="workload-gpus">{gpuLabel(w.resources, w.replicas)}</span>
          {w.gpu_model ? <Text span size="xs" c="dimmed">{` ${w.gpu_model}`}</Text> : null}
        </Field>
        <Field label="Replicas">{w.replicas}</Field>
        <Field label="User">{w.created_by}</Field>
        <Field label="Priority">
          {w.priority}
          {w.preemptible ? <Text span size="xs" c="dimmed">{" · preemptible"}</Text> : null}
        </Field>
        <Field label="Attempt">
          {w.attempt}
          {w.max_restarts ? <Text span size="xs" c="dimmed">{` of ${w.max_restarts + 1}`}</Text> : null}
          {w.preemptions ? <Text span size="xs" c="dimmed">{` · ${w.preemptions} preempted`}</Text> : null}
        </Field>
        <Field label="Submitted">
          <Tooltip label={new Date(w.created_at).toLocaleString()}>
            <span>{formatRelative(w.created_at, now)}</span>
          </Tooltip>
        </Field>
        <Field label={ran?.current ? "Running for" : "Ran for"}>
          <span data-testid="running-for">{ran ? formatDuration(ran.seconds) : "—"}</span>
        </Field>
        {limit && (
          <Field label="Run-time limit">
            <span data-testid="runtime-limit">{limit.limit}</span>
            {limit.deadline !== null && (
              <Tooltip label={`Deadline: ${new Date(limit.deadline).toLocaleString()} (start + limit)`}>
                <Text size="xs" c={limit.secondsLeft ? "dimmed" : "orange"} data-testid="runtime-deadline">
                  until {formatClock(limit.deadline, now)} · {formatTimeLeft(limit.secondsLeft)}
                </Text>
              </Tooltip>
            )}
          </Field>
        )}
      </SimpleGrid>
    </Card>
  );
}

/** A deadline as its time of day, with the date when it is not on the day of `now`. */
function formatClock(at: number, now: number): string {
  const date = new Date(at);
  const time = date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  return date.toDateString() === new Date(now).toDateString()
    ? time
    : `${date.toLocaleDateString([], { month: "short", day: "numeric" })} ${time}`;
}

// ---------------------------------------------------------------------------------------------
// Status timeline

function StatusTimeline({
  workload: w, now, segments: history, eventsError,
}: { workload: Workload; now: number; segments: TimelineSegment[]; eventsError: unknown }) {
  const segments = useMemo(() => layoutTimeline(history), [history]);
  const conditions = (Array.isArray(w.conditions) ? w.conditions : []) as unknown as Condition[];
  const fmtTime = (t: number) => new Date(t).toLocaleString();
  return (
    <Card withBorder padding="sm" data-testid="status-timeline" data-status={w.status}>
      <Group justify="space-between" mb="xs">
        <Title order={4}>Status</Title>
        {eventsError ? (
          <Text size="xs" c="red">
            Could not read the event trail; the timeline shows the current status only.
          </Text>
        ) : null}
      </Group>
      <Box
        pos="relative"
        h={26}
        style={{ borderRadius: 4, overflow: "hidden", background: "var(--mantine-color-default-border)" }}
        role="list"
        aria-label="Status history"
      >
        {segments.map((s, i) => (
          <Tooltip
            key={`${s.status}-${s.start}-${i}`}
            multiline
            w={280}
            label={
              <Stack gap={2}>
                <Text size="sm" fw={700}>
                  {s.status}
                </Text>
                <Text size="xs">
                  {fmtTime(s.start)}
                  {s.end > s.start ? ` → ${s.open ? "now" : fmtTime(s.end)}` : ""}
                </Text>
                {s.end > s.start && <Text size="xs">{formatDuration((s.end - s.start) / 1000)}</Text>}
                {(s.reason || s.message) && (
                  <Text size="xs">{statusLine(s.reason, s.message)}</Text>
                )}
              </Stack>
            }
          >
            <Box
              role="listitem"
              data-testid="timeline-segment"
              data-status={s.status}
              pos="absolute"
              top={0}
              bottom={0}
              left={`${s.left * 100}%`}
              w={`${s.width * 100}%`}
              style={{
                background: `var(--mantine-color-${statusColour(s.status)}-filled)`,
                borderRight: "2px solid var(--mantine-color-body)",
                display: "flex",
                alignItems: "center",
                paddingLeft: 6,
                overflow: "hidden",
                backgroundImage: s.open
                  ? "repeating-linear-gradient(135deg, rgba(255,255,255,0.18) 0 6px, transparent 6px 12px)"
                  : undefined,
              }}
            >
              {s.width > 0.08 && (
                <Text size="xs" fw={600} c="white" truncate>
                  {s.status}
                  {s.end > s.start ? ` · ${formatDuration((s.end - s.start) / 1000)}` : ""}
                </Text>
              )}
            </Box>
          </Tooltip>
        ))}
      </Box>
      {w.status === "queued" && (
        <Alert mt="sm" color="yellow" variant="light" title="Waiting in the queue" data-testid="pending-reason">
          <Stack gap={4}>
            <Group gap={6} wrap="nowrap" align="flex-start">
              {w.waiting_on && <WaitingOnBadge kind={w.waiting_on} />}
              <Text size="sm">{w.pending_reason || w.status_message || "Waiting for the scheduler."}</Text>
            </Group>
            {w.waiting_on && (
              <Text size="xs" c="dimmed" data-testid="waiting-on-hint">
                {WAITING_ON[w.waiting_on].hint}
              </Text>
            )}
            <Group gap="lg">
              {w.queue_position !== null && w.queue_position !== undefined && (
                <Text size="sm">
                  Position in the queue: <b>{w.queue_position}</b>
                </Text>
              )}
              <Text size="sm" data-testid="estimated-start">
                Estimated start:{" "}
                <b>
                  {w.estimated_start
                    ? `${formatRelative(w.estimated_start, now)} (${new Date(w.estimated_start).toLocaleTimeString()})`
                    : "unknown (the scheduler cannot tell yet)"}
                </b>
              </Text>
            </Group>
          </Stack>
        </Alert>
      )}
      {conditions.length > 0 && (
        <Table mt="sm" fz="xs" verticalSpacing={2} data-testid="conditions">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Condition</Table.Th>
              <Table.Th>Status</Table.Th>
              <Table.Th>Reason</Table.Th>
              <Table.Th>Message</Table.Th>
              <Table.Th>Since</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {conditions.map((c) => (
              <Table.Tr key={c.type} data-testid="condition-row" data-type={c.type}>
                <Table.Td fw={600}>{c.type}</Table.Td>
                <Table.Td>
                  <Badge size="xs" variant="light" color={c.status === "True" ? "green" : c.status === "False" ? "gray" : "yellow"}>
                    {c.status}
                  </Badge>
                </Table.Td>
                <Table.Td>{c.reason ?? ""}</Table.Td>
                <Table.Td>{c.message ?? ""}</Table.Td>
                <Table.Td>
                  {c.lastTransitionTime
                    ? formatRelative(c.lastTransitionTime, Math.max(now, Date.parse(c.lastTransitionTime) || now))
                    : "—"}
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
    </Card>
  );
}

// ---------------------------------------------------------------------------------------------
// Metrics of the workload's runs

function MetricsCard({
  project, workload: w, runs, runsLoading, runsError, onRetry,
}: { project: string; workload: Workload; runs: Run[]; runsLoading: boolean; runsError: unknown; onRetry: () => void }) {
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
            <Title order={4}>Metrics</Title>
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

// ---------------------------------------------------------------------------------------------
// Live logs

function LogCard({ workload: w, project, kind }: { workload: Workload; project: string; kind: WorkloadKind }) {
  const [replica, setReplica] = useState(0);
  const [follow, setFollow] = useState(true);
  const [buffer, setBuffer] = useState<LogBuffer>(emptyLog);
  const [ended, setEnded] = useState<string | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const viewRef = useRef<HTMLDivElement>(null);
  const replicas = Math.max(1, w.replicas);
  const collection = kind === "training" ? "training-jobs" : kind === "notebook" ? "notebooks" : "deployments";

  useTopic(`logs:${w.id}:${replica}`, (frame) => {
    if (frame.type === "subscribed") {
      // The server starts every subscription with the tail: start afresh (also after a re-connect).
      setBuffer(emptyLog());
      setEnded(null);
      setProblem(null);
    } else if (frame.type === "logs" && typeof frame.text === "string") {
      const attempt = typeof frame.attempt === "number" ? frame.attempt : null;
      setBuffer((b) => appendLog(b, frame.text as string, attempt, LOG_LINES));
    } else if (frame.type === "logs.end") {
      const status = String(frame.status ?? "finished");
      setEnded(status);
      setBuffer((b) => appendNote(b, `──────── end of log (${status}) ────────`, LOG_LINES));
    } else if (frame.type === "error") {
      setProblem(String(frame.detail ?? "The log cannot be followed."));
    }
  });

  const text = useMemo(() => logText(buffer), [buffer]);
  useLayoutEffect(() => {
    const el = viewRef.current;
    if (el && follow) el.scrollTop = el.scrollHeight;
  }, [text, follow]);

  const onScroll = () => {
    const el = viewRef.current;
    if (!el) return;
    const atBottom = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
    if (!atBottom && follow) setFollow(false);
  };

  const lineCount = buffer.lines.length + (buffer.partial ? 1 : 0);
  const waiting = w.attempt < 1 && !text;
  return (
    <Card withBorder padding="sm">
      <Group justify="space-between" mb="xs" wrap="wrap">
        <Group gap="sm">
          <Title order={4}>Logs</Title>
          {ended && (
            <Badge size="sm" variant="light" color="gray">
              ended: {ended}
            </Badge>
          )}
        </Group>
        <Group gap="md" wrap="wrap">
          {replicas > 1 && (
            <Select
              size="xs"
              aria-label="Replica"
              data={Array.from({ length: replicas }, (_, i) => ({ value: String(i), label: `replica ${i}` }))}
              value={String(replica)}
              onChange={(v) => setReplica(Number(v ?? 0))}
              allowDeselect={false}
              w={130}
              data-testid="log-replica"
            />
          )}
          <Switch
            size="sm"
            label="Follow"
            checked={follow}
            onChange={(e) => setFollow(e.currentTarget.checked)}
            data-testid="log-follow"
          />
          <Text size="xs" c="dimmed">
            {lineCount.toLocaleString()} line{lineCount === 1 ? "" : "s"}
            {buffer.dropped ? ` (oldest ${buffer.dropped.toLocaleString()} dropped; last ${LOG_LINES.toLocaleString()} kept)` : ""}
          </Text>
          <Anchor
            size="xs"
            href={`/api/v1/projects/${encodeURIComponent(project)}/${collection}/${w.id}/logs/?replica=${replica}&format=txt`}
            target="_blank"
            rel="noreferrer"
          >
            Full log
          </Anchor>
        </Group>
      </Group>
      {problem && (
        <Alert color="red" variant="light" mb="xs">
          {problem}
        </Alert>
      )}
      <Box
        ref={viewRef}
        onScroll={onScroll}
        className="log-view"
        data-testid="log-view"
        data-replica={replica}
        data-lines={lineCount}
        p="xs"
        h={text ? 340 : 90}
        style={{
          overflow: "auto",
          borderRadius: 4,
          background: "var(--mantine-color-default-hover)",
          border: "1px solid var(--mantine-color-default-border)",
        }}
      >
        {text ? (
          text
        ) : (
          <Text size="sm" c="dimmed" ff="inherit">
            {waiting
              ? "No output yet: the workload has not started. Its log streams here as soon as it does."
              : ended
                ? "This replica wrote nothing."
                : "Waiting for output…"}
          </Text>
        )}
      </Box>
    </Card>
  );
}

// ---------------------------------------------------------------------------------------------
// Events

function EventsCard({
  events, total, loading, error, onRetry,
}: { events: WorkloadEvent[]; total: number; loading: boolean; error: unknown; onRetry: () => void }) {
  const rows = useMemo(() => eventsInOrder(events), [events]);
  return (
    <Card withBorder padding="sm">
      <Group justify="space-between" mb="xs">
        <Title order={4}>Events</Title>
        <Text size="xs" c="dimmed" data-testid="events-order">
          Oldest first, as in the API and `cairn events`
          {total > events.length ? ` · ${total.toLocaleString()} events; showing the first and the latest 500` : ""}
        </Text>
      </Group>
      {loading ? (
        <Loading label="Loading events…" />
      ) : error ? (
        <ErrorState error={error} onRetry={onRetry} />
      ) : (
        <Table.ScrollContainer minWidth={700} mah={360}>
          <Table fz="sm" verticalSpacing={4} stickyHeader highlightOnHover data-testid="events-table">
            <Table.Thead>
              <Table.Tr>
                <Table.Th w={170}>Time</Table.Th>
                <Table.Th w={90}>Type</Table.Th>
                <Table.Th w={150}>Reason</Table.Th>
                <Table.Th w={170}>Status</Table.Th>
                <Table.Th>Message</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {rows.length === 0 && (
                <Table.Tr>
                  <Table.Td colSpan={5}>
                    <Text size="sm" c="dimmed">
                      No events yet. Submission, scheduling, starts, restarts and stops are recorded here.
                    </Text>
                  </Table.Td>
                </Table.Tr>
              )}
              {rows.map((e) => (
                <Table.Tr key={e.id} data-testid="event-row" data-reason={e.reason}>
                  <Table.Td>
                    <Tooltip label={formatRelative(e.time)}>
                      <Text size="sm" ff="monospace">
                        {new Date(e.time).toLocaleString()}
                      </Text>
                    </Tooltip>
                  </Table.Td>
                  <Table.Td>
                    <Badge size="xs" variant="light" color={e.type === "Warning" ? "orange" : "gray"}>
                      {e.type}
                    </Badge>
                  </Table.Td>
                  <Table.Td fw={500}>{e.reason}</Table.Td>
                  <Table.Td>
                    {e.to_status ? (
                      <Text size="sm">
                        {e.from_status || "—"} → <b>{e.to_status}</b>
                      </Text>
                    ) : null}
                  </Table.Td>
                  <Table.Td style={{ wordBreak: "break-word" }}>{e.message}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
    </Card>
  );
}

