// The workload page's header: name, kind and status, why it is in that status, the Open /
// Runs / Stop buttons, and the facts (pool, GPUs, replicas, user, priority, attempt, times).
import { Anchor, Badge, Box, Button, Card, Group, Modal, SimpleGrid, Stack, Text, Title, Tooltip } from "@mantine/core";
import { useDisclosure } from "@mantine/hooks";
import { useRef, useState } from "react";
import { Link } from "react-router";
import { IdeBadge } from "../../components/IdeBadge";
import { StatusBadge } from "../../components/StatusBadge";
import { formatClock, formatDuration, formatRelative } from "../../lib/format";
import { lineageLink, servedModel } from "../../lib/models";
import { useKindLabel } from "../../lib/kinds";
import { runningTime, type TimelineSegment } from "../../lib/timeline";
import { formatTimeLeft, gpuLabel, runTimeLimitInfo, statusExplanation, statusLine } from "../../lib/workloads";
import type { Workload } from "./api";
import { servingLine, type DeploymentScale } from "./ScalingPanel";

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

export interface WorkloadHeaderProps {
  workload: Workload;
  now: number;
  /** The status history (lib/timeline.ts deriveSegments) the "Running for" is measured on. */
  segments: TimelineSegment[];
  project: string;
  canStop: boolean;
  stopping: boolean;
  onStop: () => void;
  /** A stopped notebook: "Start again" (its files are kept). */
  canStart?: boolean;
  starting?: boolean;
  onStart?: () => void;
  /** A deployment's desired, admitted and ready replicas (GET .../deployments/<id>/). */
  scale?: DeploymentScale;
  /** May submit work: Clone (any state) into the submit form. */
  canClone?: boolean;
  /** An ended workload: "Run again" as a new workload linked to this one. */
  canRunAgain?: boolean;
  runningAgain?: boolean;
  onRunAgain?: () => void;
}

/** What stopping loses, by kind: said in the confirmation. */
function stopConsequence(w: Workload): string {
  if (w.status === "queued") return "It leaves the queue and does not start.";
  if (w.kind === "notebook") return "Its kernels and what they hold in memory are lost; its files are kept, and it can be started again.";
  if (w.kind === "deployment") return "It stops serving: callers get errors until it runs again.";
  return "Its replicas get SIGTERM, then SIGKILL after the grace period; work since its last checkpoint is lost.";
}

export function WorkloadHeader({
  workload: w, now, segments, project, canStop, stopping, onStop, canStart, starting, onStart, scale,
  canClone, canRunAgain, runningAgain, onRunAgain,
}: WorkloadHeaderProps) {
  const kindLabel = useKindLabel();
  // Stop asks first (a notebook's kernels are lost on one click otherwise); cancelling gives the
  // focus back to the Stop button (the modal's returnFocus).
  const [confirming, confirm] = useDisclosure(false);
  // Once Stop is confirmed the Stop button goes (busy, then gone): focus goes to the page's heading
  // after the dialog has closed instead of dropping to the page body.
  const [stopConfirmed, setStopConfirmed] = useState(false);
  const heading = useRef<HTMLHeadingElement>(null);
  // A running deployment's start message ("Started 1 replica(s).") goes stale as it scales: say
  // what serves now instead.
  const serving = w.kind === "deployment" && w.status === "running" && scale ? servingLine(scale) : null;
  const ran = runningTime(segments);
  // Where a running notebook or deployment is reached. The API gives it only to those who may
  // reach it: a notebook's creator (and owners/maintainers of a project that shares notebooks),
  // through Cairn's proxy /nb/<project>/<id>/; a deployment's members.
  const serviceUrl = w.endpoint && w.status === "running" ? w.endpoint : null;
  const explanation = statusExplanation(w);
  // Run-time limits are a training-job setting; the other kinds run until stopped.
  const limit = w.kind === "training" ? runTimeLimitInfo(w, now) : null;
  const model = servedModel(w.spec);
  const lineage = model ? lineageLink(project, model) : null;
  return (
    <Card withBorder padding="md">
      <Group justify="space-between" align="flex-start" wrap="nowrap">
        <Stack gap={4} style={{ minWidth: 0 }}>
          <Anchor component={Link} to={`/projects/${project}/workloads`} size="xs">
            ← Workloads
          </Anchor>
          <Group gap="sm" wrap="wrap">
            <Title ref={heading} tabIndex={-1} order={1} size="h2" data-testid="workload-name" style={{ wordBreak: "break-all" }}>
              {w.name}
            </Title>
            <Badge variant="outline" color="gray" data-testid="workload-kind">
              {kindLabel(w.kind)}
            </Badge>
            <IdeBadge workload={w} />
            <StatusBadge status={w.status} />
          </Group>
          {w.resubmitted_from ? (
            <Text size="sm" data-testid="resubmitted-from">
              Runs{" "}
              <Anchor component={Link} to={`/projects/${project}/workloads/${w.kind}/${w.resubmitted_from}`}>
                workload #{w.resubmitted_from}
              </Anchor>{" "}
              again, with its spec; that one keeps its history.
            </Text>
          ) : null}
          {explanation && (
            <Text size="sm" fw={500} data-testid="status-explanation">
              {explanation}
            </Text>
          )}
          {serving ? (
            <Text size="sm" c="dimmed" data-testid="status-line">
              {serving}
            </Text>
          ) : (w.status_reason || w.status_message) && (
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
          {canStart && (
            <Button variant="filled" loading={starting} onClick={onStart} data-testid="start-again">
              Start again
            </Button>
          )}
          {canClone && (
            <Button component={Link} to={`/projects/${project}/workloads/new?kind=${w.kind}&from=${w.id}`} variant="default"
              data-testid="clone-workload">
              Clone
            </Button>
          )}
          {canRunAgain && (
            <Button variant="light" loading={runningAgain} onClick={onRunAgain} data-testid="run-again">
              Run again
            </Button>
          )}
          {canStop && (
            <Button
              color="red"
              variant="filled"
              loading={stopping}
              onClick={() => {
                setStopConfirmed(false);
                confirm.open();
              }}
              data-testid="stop-workload"
            >
              Stop
            </Button>
          )}
        </Group>
        <Modal
          opened={confirming}
          onClose={confirm.close}
          returnFocus={!stopConfirmed}
          onExitTransitionEnd={() => {
            if (stopConfirmed) heading.current?.focus();
          }}
          title={`Stop ${w.name}?`}
          closeButtonProps={{ "aria-label": "Close: keep it running" }}
          data-testid="stop-confirm"
        >
          <Stack gap="md">
            <Text size="sm">{stopConsequence(w)}</Text>
            <Group justify="flex-end">
              <Button variant="default" onClick={confirm.close} data-testid="stop-cancel" data-autofocus>Cancel</Button>
              <Button color="red" onClick={() => { setStopConfirmed(true); confirm.close(); onStop(); }} data-testid="stop-confirm-button">
                Stop {kindLabel(w.kind).toLowerCase()}
              </Button>
            </Group>
          </Stack>
        </Modal>
      </Group>
      <SimpleGrid cols={{ base: 3, sm: 4, lg: limit ? 9 : 8 }} spacing="sm" mt="md">
        <Field label="Pool">{w.pool || "—"}</Field>
        <Field label="GPUs">
          <span data-testid="workload-gpus">{gpuLabel(w.resources, w.replicas)}</span>
          {w.gpu_model ? <Text span size="xs" c="dimmed">{` ${w.gpu_model}`}</Text> : null}
        </Field>
        <Field label="Replicas">
          {scale && w.kind === "deployment" ? (
            <span data-testid="replica-counts">
              {scale.ready} ready / {scale.desired} desired
            </span>
          ) : (
            w.replicas
          )}
        </Field>
        {model && (
          <Field label="Model">
            <span data-testid="served-model">{model.ref}</span>
            {lineage && (
              <Anchor component={Link} to={lineage} size="xs" ml={6} data-testid="model-run-link">
                run {model.run}
              </Anchor>
            )}
          </Field>
        )}
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
