// One workload (/projects/:project/workloads/:kind/:id): header with Stop, status timeline,
// goodput (training with the SDK), loss curves of its run(s), GPU/CPU panels, live logs and the
// event trail. Everything live over the page's one socket: workload:<id>, logs:<id>:<replica>,
// run:<id> (docs/live.md).
// This file reads the workload and keeps it live; each panel is a component in ./workload/.
import { Alert, Anchor, Button, Stack } from "@mantine/core";
import { notifications } from "@mantine/notifications";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useMemo, useState } from "react";
import { Link, useNavigate, useParams } from "react-router";
import { useDebounced, useNow } from "../components/hooks";
import { EmptyState, ErrorState, Loading } from "../components/States";
import { isKnownKind, useKinds } from "../lib/kinds";
import { isFinal, type WorkloadKind } from "../lib/status";
import { retryTransient } from "../lib/retry";
import { deriveSegments } from "../lib/timeline";
import { mergeWorkloadState } from "../lib/workloads";
import { useTopic } from "../live/LiveProvider";
import { canWrite, useMe } from "../session";
import { getEvents, getRuns, getWorkload, resubmitWorkload, startNotebook, stopWorkload, type Workload } from "./workload/api";
import { EventsPanel } from "./workload/EventsPanel";
import { LogPanel } from "./workload/LogPanel";
import { MetricsPanel } from "./workload/MetricsPanel";
import { ResiliencePanel, useResilience } from "./workload/ResiliencePanel";
import { RevisionsPanel } from "./workload/RevisionsPanel";
import { deploymentKey, ScalingPanel, useDeployment } from "./workload/ScalingPanel";
import { ServingPanel } from "./workload/ServingPanel";
import { NotebookPanel } from "./workload/NotebookPanel";
import { StatusTimeline } from "./workload/StatusTimeline";
import { WorkloadHeader } from "./workload/WorkloadHeader";

const STOPPABLE = new Set(["queued", "admitted", "running"]);

export function WorkloadDetailPage() {
  const { project = "", kind = "", id = "" } = useParams();
  const kinds = useKinds();
  if (!isKnownKind(kinds, kind) || !/^\d+$/.test(id)) {
    return (
      <EmptyState
        page
        title="No such workload"
        action={
          <Button component={Link} to={`/projects/${project}/workloads`} variant="light">
            Back to workloads
          </Button>
        }
      >
        The address should look like /projects/{project}/workloads/training/42 (kinds: {kinds.map((k) => k.kind).join(", ")}).
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

  const workload = useQuery({ queryKey: workloadKey, queryFn: () => getWorkload(project, id), retry: retryTransient });
  const events = useQuery({ queryKey: eventsKey, queryFn: () => getEvents(project, id), retry: retryTransient });
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
    // Field by field: the workload object is new on every read, its history only when these change.
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [w0?.status, w0?.created_at, w0?.finished_at, w0?.status_reason, w0?.status_message, eventList, now],
  );
  const runs = useQuery({
    queryKey: runsKey,
    queryFn: () => getRuns(project, id),
    retry: retryTransient,
    // A run is made when an attempt starts: look again while the workload may still make one.
    refetchInterval: (query) => {
      if (!active) return false;
      const attempts = query.state.data?.results.map((r) => r.attempt ?? 0) ?? [];
      return Math.max(0, ...attempts) < (workload.data?.attempt ?? 0) || attempts.length === 0 ? 5_000 : 30_000;
    },
  });

  const resilience = useResilience(project, id, active);
  const deployment = useDeployment(project, id, kind === "deployment");

  const refreshEvents = useDebounced(() => queryClient.invalidateQueries({ queryKey: eventsKey }), 800);
  // Checkpoints, stragglers and restarts come with events: read the resilience again after them.
  const refreshResilience = useDebounced(
    () => queryClient.invalidateQueries({ queryKey: ["workload-resilience", project, id] }), 1500);
  const refreshWorkload = useDebounced(() => {
    void queryClient.invalidateQueries({ queryKey: workloadKey });
    if (kind === "deployment") void queryClient.invalidateQueries({ queryKey: deploymentKey(project, id) });
  }, 800);
  const refreshRuns = useDebounced(() => queryClient.invalidateQueries({ queryKey: runsKey }), 1500);

  useTopic(`workload:${id}`, (frame) => {
    if (frame.type === "workload.state") {
      const previous = queryClient.getQueryData<Workload>(workloadKey);
      queryClient.setQueryData<Workload>(workloadKey, (old) => mergeWorkloadState(old, frame));
      if (previous && previous.status !== frame.status) {
        refreshEvents();
        refreshWorkload();
      }
      if (previous && frame.attempt !== undefined && previous.attempt !== frame.attempt) refreshRuns();
    } else if (frame.type === "workload.status") {
      if (frame.reason === "IdleReclaimed" && frame.status === "stopping") {
        notifications.show({ color: "orange", title: "Notebook reclaimed", message:
          "It was idle past its idle_timeout and is being stopped; its files are kept: start it again to go on." });
      }
      queryClient.setQueryData<Workload>(workloadKey, (old) =>
        old ? { ...old, status: frame.status as Workload["status"], status_reason: String(frame.reason ?? old.status_reason) } : old,
      );
      refreshEvents();
      refreshWorkload();
      refreshRuns();
    } else if (frame.type === "workload.event") {
      refreshEvents();
      refreshResilience();
    } else if (frame.type === "workload.deleted") {
      setDeleted(true);
    }
  });

  const stop = useMutation({
    mutationFn: () => stopWorkload(project, id),
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

  const navigate = useNavigate();
  const runAgain = useMutation({
    mutationFn: () => resubmitWorkload(project, id),
    onSuccess: (data) => {
      refreshEvents();
      void queryClient.invalidateQueries({ queryKey: ["workloads", project] });
      notifications.show({ color: "blue", title: "Running again", message: `${data.name} is ${data.status}; this one keeps its history.` });
      navigate(`/projects/${project}/workloads/${data.kind}/${data.id}`);
    },
    onError: (error) => notifications.show({ color: "red", title: "Could not run it again", message: (error as Error).message }),
  });

  const start = useMutation({
    mutationFn: () => startNotebook(project, id),
    onSuccess: (data) => {
      queryClient.setQueryData(workloadKey, data);
      refreshEvents();
      notifications.show({ color: "blue", title: "Starting again", message: `${data.name} is ${data.status}; its files are kept.` });
    },
    onError: (error) => notifications.show({ color: "red", title: "Could not start the notebook", message: (error as Error).message }),
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
      <WorkloadHeader
        workload={w}
        now={now}
        segments={segments}
        project={project}
        canStop={!deleted && STOPPABLE.has(w.status) && canWrite(role)}
        stopping={stop.isPending}
        onStop={() => stop.mutate()}
        canStart={!deleted && w.kind === "notebook" && w.status === "stopped" && canWrite(role)}
        starting={start.isPending}
        onStart={() => start.mutate()}
        scale={deployment.data?.scale}
        canClone={!deleted && canWrite(role)}
        canRunAgain={!deleted && isFinal(w.status) && canWrite(role)}
        runningAgain={runAgain.isPending}
        onRunAgain={() => runAgain.mutate()}
      />
      {w.kind === "notebook" && <NotebookPanel project={project} workload={w} now={now} />}
      <StatusTimeline workload={w} now={now} segments={segments} eventsError={events.error}
        checkpoints={resilience.data?.checkpoints} />
      <ResiliencePanel data={resilience.data} now={now} attempt={w.attempt} />
      {kind === "deployment" && <ScalingPanel deployment={deployment.data} />}
      {kind === "deployment" && <ServingPanel project={project} workload={w} />}
      {kind === "deployment" && <RevisionsPanel project={project} workload={w} canWrite={!deleted && canWrite(role)} />}
      {showMetrics && (
        <MetricsPanel project={project} workload={w} runs={runList} runsLoading={runs.isPending} runsError={runs.error} onRetry={() => runs.refetch()} />
      )}
      <LogPanel workload={w} project={project} />
      <EventsPanel events={events.data?.events ?? []} total={events.data?.total ?? 0} loading={events.isPending} error={events.error} onRetry={() => events.refetch()} />
    </Stack>
  );
}
