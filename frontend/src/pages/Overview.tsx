// A project at a glance (/projects/:project/overview): what runs, what waits and why (in plain
// words), what failed lately and of what, usage against quota and the GPU-hour budget's burn.
// Owners (and administrators) delete the project from here; administrators create projects.
import {
  Alert, Anchor, Badge, Button, Card, Group, Modal, Progress, SimpleGrid, Stack, Table, Text, TextInput, Title,
} from "@mantine/core";
import { useDisclosure } from "@mantine/hooks";
import { notifications } from "@mantine/notifications";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { Link, useNavigate, useParams } from "react-router";
import { api, unwrap } from "../api/client";
import { useNow } from "../components/hooks";
import { LiveIndicator } from "../components/LiveIndicator";
import { errorAdvice, ErrorState, Loading } from "../components/States";
import { StatusBadge } from "../components/StatusBadge";
import { formatGpu, formatRelative } from "../lib/format";
import { quotaView, type QuotaLike } from "../lib/quotas";
import { useKindLabel } from "../lib/kinds";
import { waitSentence, type WorkloadStatus } from "../lib/status";
import { retryTransient } from "../lib/retry";
import { statusLine, type Workload } from "../lib/workloads";
import { useTopic } from "../live/LiveProvider";
import { ME_KEY, useMe } from "../session";

const ROWS = 10;

function useWorkloads(project: string, status: WorkloadStatus[], key: string) {
  return useQuery({
    queryKey: ["workloads", project, "overview", key],
    queryFn: () => unwrap(api.GET("/api/v1/projects/{project}/workloads/", {
      params: { path: { project }, query: { status, ordering: "-created_at", page_size: ROWS } },
    })),
    retry: retryTransient,
    refetchInterval: 15_000,
  });
}

function link(project: string, w: Pick<Workload, "kind" | "id">): string {
  return `/projects/${project}/workloads/${w.kind}/${w.id}`;
}

function WorkList({ project, rows, empty, testId, detail }: {
  project: string; rows: Workload[] | undefined; empty: string; testId: string; detail: (w: Workload) => React.ReactNode;
}) {
  const kindLabel = useKindLabel();
  if (!rows) return <Text size="sm" c="dimmed">Loading…</Text>;
  if (!rows.length) return <Text size="sm" c="dimmed">{empty}</Text>;
  return (
    <Stack gap={6} data-testid={testId}>
      {rows.map((w) => (
        <div key={w.id} data-testid={`${testId}-item`}>
          <Group gap={6} wrap="nowrap">
            <Anchor component={Link} to={link(project, w)} size="sm" fw={500}>{w.name}</Anchor>
            <Text size="xs" c="dimmed">{kindLabel(w.kind)}</Text>
          </Group>
          <Text size="xs">{detail(w)}</Text>
        </div>
      ))}
    </Stack>
  );
}

export function OverviewPage() {
  const { project = "" } = useParams();
  const me = useMe();
  const role = me.projects.find((p) => p.slug === project)?.role;
  const name = me.projects.find((p) => p.slug === project)?.name ?? project;
  const now = useNow(30_000);
  const queryClient = useQueryClient();
  const navigate = useNavigate();

  const running = useWorkloads(project, ["running", "admitted", "stopping"], "running");
  const queued = useWorkloads(project, ["queued"], "queued");
  const failed = useWorkloads(project, ["failed", "lost"], "failed");
  const quotas = useQuery({
    queryKey: ["quotas", project],
    queryFn: () => unwrap(api.GET("/api/v1/projects/{project}/quotas/", { params: { path: { project }, query: { page_size: 500 } } })),
    retry: retryTransient,
    refetchInterval: 30_000,
  });
  useTopic("workloads", (frame) => {
    if (frame.type.startsWith("workload.")) void queryClient.invalidateQueries({ queryKey: ["workloads", project, "overview"] });
  });

  const [deleting, deleteModal] = useDisclosure(false);
  const [typed, setTyped] = useState("");
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE("/api/v1/projects/{project}/", { params: { path: { project } } })),
    onSuccess: async () => {
      deleteModal.close();
      notifications.show({ color: "green", title: "Project deleted", message: `${name} is gone.` });
      await queryClient.invalidateQueries({ queryKey: ME_KEY });
      navigate("/");
    },
  });

  const views = (quotas.data?.results ?? []).map((q) => quotaView(q as unknown as QuotaLike));
  const budgeted = views.filter((v) => v.budget !== null);

  return (
    <Stack gap="md">
      <Group justify="space-between" wrap="wrap">
        <Group gap="sm" align="baseline">
          <Title order={1} size="h2">{name}: overview</Title>
          <LiveIndicator />
        </Group>
        <Group gap="xs">
          {me.is_staff && <NewProjectButton />}
          {(role === "owner" || me.is_staff) && (
            <Button color="red" variant="light" onClick={deleteModal.open} data-testid="delete-project">
              Delete project
            </Button>
          )}
        </Group>
      </Group>

      <SimpleGrid cols={{ base: 1, md: 3 }}>
        <Card withBorder padding="sm">
          <Title order={2} size="h4" mb="xs">Running <Badge variant="light" data-testid="running-count">{running.data?.count ?? "…"}</Badge></Title>
          <WorkList project={project} rows={running.data?.results} empty="Nothing runs now." testId="overview-running"
            detail={(w) => <Group gap={6}><StatusBadge status={w.status} /><span>since {formatRelative(w.started_at ?? w.created_at, now)}</span></Group>} />
        </Card>
        <Card withBorder padding="sm">
          <Title order={2} size="h4" mb="xs">Queued <Badge variant="light" color="yellow" data-testid="queued-count">{queued.data?.count ?? "…"}</Badge></Title>
          <WorkList project={project} rows={queued.data?.results} empty="Nothing waits." testId="overview-queued"
            detail={(w) => waitSentence(w.waiting_on, w.pending_reason)} />
        </Card>
        <Card withBorder padding="sm">
          <Title order={2} size="h4" mb="xs">Recent failures</Title>
          <WorkList project={project} rows={failed.data?.results} empty="No failures." testId="overview-failed"
            detail={(w) => `${statusLine(w.status_reason, w.status_message)}${w.exit_code ? ` (exit code ${w.exit_code})` : ""} · ${formatRelative(w.finished_at ?? w.created_at, now)}`} />
        </Card>
      </SimpleGrid>

      <Card withBorder padding="sm">
        <Title order={2} size="h4" mb="xs">Usage against quota</Title>
        {quotas.error && !quotas.data ? (
          <ErrorState error={quotas.error} onRetry={() => quotas.refetch()} />
        ) : !quotas.data ? (
          <Loading label="Loading the quotas…" />
        ) : views.length === 0 ? (
          <Text size="sm" c="dimmed">This project has no quota yet: ask an administrator for one.</Text>
        ) : (
          <Table data-testid="overview-usage">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Pool</Table.Th>
                <Table.Th>GPUs in use / nominal</Table.Th>
                <Table.Th>CPU cores</Table.Th>
                <Table.Th>Memory (GiB)</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {views.map((v) => (
                <Table.Tr key={v.id} data-testid="overview-usage-row">
                  <Table.Td>{v.pool}</Table.Td>
                  <Table.Td>{formatGpu(v.used)} / {formatGpu(v.nominal)}{v.borrowed ? ` (${formatGpu(v.borrowed)} borrowed)` : ""}</Table.Td>
                  <Table.Td>{v.cpuUsed / 1000} / {v.cpuNominal / 1000}</Table.Td>
                  <Table.Td>{Math.round((v.memoryUsed / 1024) * 10) / 10} / {Math.round((v.memoryNominal / 1024) * 10) / 10}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        )}
      </Card>

      <Card withBorder padding="sm" data-testid="overview-budget">
        <Title order={2} size="h4" mb="xs">GPU-hour budget</Title>
        {budgeted.length === 0 ? (
          <Text size="sm" c="dimmed">No GPU-hour budget is set on this project's quotas.</Text>
        ) : (
          <Stack gap="sm">
            {budgeted.map((v) => {
              const percent = v.budgetPercent ?? 0;
              const end = v.periodEnd ? Date.parse(v.periodEnd) : Number.NaN;
              return (
                <div key={v.id}>
                  <Group justify="space-between">
                    <Text size="sm">{v.pool}: {v.gpuHours.toFixed(1)} of {v.budget} GPU-hours this {v.period}</Text>
                    <Text size="sm" c="dimmed">
                      {v.budgetLeft !== null ? `${v.budgetLeft.toFixed(1)} left` : ""}
                      {Number.isFinite(end) ? ` · period ends ${formatRelative(v.periodEnd, now)}` : ""}
                    </Text>
                  </Group>
                  <Progress value={percent} color={percent >= 90 ? "red" : percent >= 70 ? "orange" : "blue"}
                    aria-label={`GPU-hour budget of ${v.pool} used: ${Math.round(percent)}%`} />
                </div>
              );
            })}
          </Stack>
        )}
      </Card>

      <Modal opened={deleting} onClose={deleteModal.close} returnFocus title={`Delete project ${name}?`}>
        <Stack gap="sm">
          <Text size="sm">
            Its workloads, runs, sweeps, volumes and quotas go with it. A project with unfinished work cannot be deleted:
            stop that work first. Type the project's slug, <b>{project}</b>, to confirm.
          </Text>
          <TextInput label="Slug" value={typed} onChange={(e) => setTyped(e.currentTarget.value)} data-testid="delete-project-slug" />
          {remove.error && <Alert color="red" title="Not deleted" data-testid="delete-project-error">{errorAdvice(remove.error).detail}</Alert>}
          <Group justify="flex-end">
            <Button variant="default" onClick={deleteModal.close}>Cancel</Button>
            <Button color="red" disabled={typed !== project} loading={remove.isPending} onClick={() => remove.mutate()}
              data-testid="delete-project-confirm">
              Delete {project}
            </Button>
          </Group>
        </Stack>
      </Modal>
    </Stack>
  );
}

/** Administrators create projects here (they become its owner); the new one opens. */
function NewProjectButton() {
  const [opened, modal] = useDisclosure(false);
  const [slug, setSlug] = useState("");
  const [title, setTitle] = useState("");
  const queryClient = useQueryClient();
  const navigate = useNavigate();
  const create = useMutation({
    mutationFn: () => unwrap(api.POST("/api/v1/projects/", { body: { slug, name: title || slug } })),
    onSuccess: async (project) => {
      modal.close();
      await queryClient.invalidateQueries({ queryKey: ME_KEY });
      notifications.show({ color: "green", title: "Project created", message: `${project.name}: give it a quota in the admin.` });
      navigate(`/projects/${project.slug}/overview`);
    },
  });
  return (
    <>
      <Button variant="default" onClick={modal.open} data-testid="new-project">New project</Button>
      <Modal opened={opened} onClose={modal.close} returnFocus title="New project">
        <Stack gap="sm">
          <TextInput label="Slug" description="Lowercase letters, digits and '-': in addresses and the CLI." value={slug}
            onChange={(e) => setSlug(e.currentTarget.value)} data-testid="new-project-slug" />
          <TextInput label="Name" value={title} onChange={(e) => setTitle(e.currentTarget.value)} data-testid="new-project-name" />
          {create.error && <Alert color="red" title="Not created" data-testid="new-project-error">{errorAdvice(create.error).detail}</Alert>}
          <Group justify="flex-end">
            <Button variant="default" onClick={modal.close}>Cancel</Button>
            <Button loading={create.isPending} disabled={!slug} onClick={() => create.mutate()} data-testid="new-project-create">Create</Button>
          </Group>
        </Stack>
      </Modal>
    </>
  );
}
