// The project's workloads: filters in the URL, live status from the "workloads" topic.
import {
  Anchor, Button, Group, MultiSelect, Pagination, Select, Stack, Table, Text, Title, Tooltip,
} from "@mantine/core";
import { notifications } from "@mantine/notifications";
import { keepPreviousData, useQuery, useQueryClient } from "@tanstack/react-query";
import { useMemo } from "react";
import { Link, useParams, useSearchParams } from "react-router";
import { api, unwrap } from "../api/client";
import { useDebounced, useNow } from "../components/hooks";
import { LiveIndicator } from "../components/LiveIndicator";
import { EmptyState, ErrorState, Loading } from "../components/States";
import { IdeBadge } from "../components/IdeBadge";
import { StatusBadge } from "../components/StatusBadge";
import { WaitingOnBadge } from "../components/WaitingOnBadge";
import { formatRelative } from "../lib/format";
import { formatAgo } from "../lib/time";
import { useKinds, kindLabel as labelOf } from "../lib/kinds";
import { isFinal, STATUSES, type WorkloadKind, type WorkloadStatus } from "../lib/status";
import {
  applyWorkloadFrame, EMPTY_FILTERS, filtersFromSearch, filtersToSearch, gpuLabel, hasFilters, PAGE_SIZE, statusLine,
  queuedRefreshInterval, serverQuery, USER_FILTER_PAGE_SIZE, visibleRows, type Workload, type WorkloadFilters, type WorkloadPage,
} from "../lib/workloads";
import { retryTransient } from "../lib/retry";
import { useTopic } from "../live/LiveProvider";
import { canWrite, useMe } from "../session";

export function workloadPath(project: string, row: Pick<Workload, "kind" | "id">): string {
  return `/projects/${project}/workloads/${row.kind}/${row.id}`;
}

function QueueCell({ row, now }: { row: Workload; now: number }) {
  if (row.status !== "queued") return <Text size="sm" c="dimmed">—</Text>;
  const position = row.queue_position ? `#${row.queue_position}` : "waiting";
  const start = row.estimated_start ? `starts ${formatRelative(row.estimated_start, now)}` : "no estimate yet";
  const text = (
    <Text size="sm" data-testid="queue-cell">
      {position} <Text span c="dimmed" size="sm">· {start}</Text>
    </Text>
  );
  return (
    <Group gap={6} wrap="nowrap">
      {row.waiting_on && <WaitingOnBadge kind={row.waiting_on} />}
      {row.pending_reason ? (
        <Tooltip label={row.pending_reason} multiline w={320} withArrow>
          {text}
        </Tooltip>
      ) : (
        text
      )}
    </Group>
  );
}

/** Why an ended (or stopping) workload is where it is: its failure or stop reason, one line. */
function ReasonCell({ row }: { row: Workload }) {
  if (!isFinal(row.status) && row.status !== "stopping") return <Text size="sm" c="dimmed">—</Text>;
  if (row.status === "succeeded") return <Text size="sm" c="dimmed">—</Text>;
  const line = statusLine(row.status_reason, row.status_message)
    + (row.exit_code !== null && row.exit_code !== undefined && row.exit_code !== 0 ? ` (exit code ${row.exit_code})` : "");
  if (!line) return <Text size="sm" c="dimmed">—</Text>;
  return (
    <Tooltip label={line} multiline w={360} withArrow>
      <Text size="sm" lineClamp={1} maw={280} data-testid="reason-cell">
        {line}
      </Text>
    </Tooltip>
  );
}

/** The gateway address of a deployment: /serve/<project>/<name>/ (docs/deployments.md). */
function gatewayUrl(project: string, name: string): string {
  return `${window.location.origin}/serve/${encodeURIComponent(project)}/${encodeURIComponent(name)}/`;
}

function ReplicasCell({ row }: { row: Workload }) {
  const spec = (row.spec && typeof row.spec === "object" ? row.spec : {}) as { autoscaling?: { min_replicas?: number; max_replicas?: number } };
  const scaling = spec.autoscaling;
  return (
    <Text size="sm" data-testid="replicas-cell">
      {row.status === "running" ? row.replicas : 0}
      {scaling ? <Text span size="xs" c="dimmed">{` · autoscaled ${scaling.min_replicas ?? 1}–${scaling.max_replicas ?? "?"}`}</Text> : null}
    </Text>
  );
}

/** The dashboard pages of their own some kinds have (routes in App.tsx); every other kind the
 * server runs is the workload list filtered by it. */
const OWN_PAGES: Record<string, string> = { notebook: "notebooks", deployment: "deployments" };

/** The lists of the project's work: all of it, or one kind's page, for each kind the server runs. */
function ListTabs({ project, current }: { project: string; current: WorkloadKind | null }) {
  const pages: { kind: WorkloadKind | null; label: string; path: string }[] = [
    { kind: null, label: "All work", path: "workloads" },
    ...useKinds().map((k) => ({ kind: k.kind, label: `${k.label}s`, path: OWN_PAGES[k.kind] ?? `workloads?kind=${k.kind}` })),
  ];
  return (
    <Group gap="xs" component="nav" aria-label="Work by kind" data-testid="kind-pages">
      {pages.map((page) => (
        <Button
          key={page.label}
          component={Link}
          to={`/projects/${project}/${page.path}`}
          size="xs"
          variant={page.kind === current ? "light" : "subtle"}
          aria-current={page.kind === current ? "page" : undefined}
        >
          {page.label}
        </Button>
      ))}
      <Button component={Link} to={`/projects/${project}/overview`} size="xs" variant="subtle" data-testid="overview-link">
        Project overview
      </Button>
    </Group>
  );
}

export function NotebooksPage() {
  return <WorkloadsPage kindPage="notebook" />;
}

export function DeploymentsPage() {
  return <WorkloadsPage kindPage="deployment" />;
}

export function WorkloadsPage({ kindPage }: { kindPage?: WorkloadKind } = {}) {
  const { project = "" } = useParams();
  const me = useMe();
  const role = me.projects.find((p) => p.slug === project)?.role;
  const [params, setParams] = useSearchParams();
  const kinds = useKinds();
  const kindNames = useMemo(() => kinds.map((k) => k.kind), [kinds]);
  const filters = useMemo(() => {
    const found = filtersFromSearch(params, kindNames);
    return kindPage ? { ...found, kind: kindPage } : found;
  }, [params, kindPage, kindNames]);
  const query = useMemo(() => serverQuery(filters), [filters]);
  const queryKey = useMemo(() => ["workloads", project, query] as const, [project, query]);
  const queryClient = useQueryClient();
  const now = useNow();

  const list = useQuery({
    queryKey,
    queryFn: () =>
      unwrap(api.GET("/api/v1/projects/{project}/workloads/", { params: { path: { project }, query } })) as Promise<WorkloadPage>,
    placeholderData: keepPreviousData,
    retry: retryTransient,
    // The scheduler rewrites queue positions, estimates and what work waits on without sending
    // a frame: while anything shown is queued, re-read the page now and then.
    refetchInterval: (q) => queuedRefreshInterval(q.state.data),
  });

  const members = useQuery({
    queryKey: ["members", project],
    queryFn: () =>
      unwrap(api.GET("/api/v1/projects/{project}/members/", { params: { path: { project }, query: { page_size: 500 } } })),
    retry: false,
    staleTime: 60_000,
  });

  // Live: apply the frame to the cached page now, refetch the full rows shortly after.
  const refetchSoon = useDebounced(() => {
    void queryClient.invalidateQueries({ queryKey: ["workloads", project] });
  }, 800);
  useTopic("workloads", (frame) => {
    if (!frame.type.startsWith("workload.")) return;
    if (frame.type === "workload.status" && frame.reason === "IdleReclaimed" && frame.status === "stopping") {
      notifications.show({ color: "orange", title: "Idle notebook reclaimed", message:
        `Notebook ${frame.workload} was idle past its idle_timeout and is being stopped; its files are kept.` });
    }
    queryClient.setQueryData<WorkloadPage>(queryKey, (old) => applyWorkloadFrame(old, frame, { filters, project, kinds: kindNames }));
    refetchSoon();
  });

  const setFilters = (next: Partial<WorkloadFilters>) => {
    const merged = { ...filters, page: 1, ...next };
    setParams(filtersToSearch(merged), { replace: true });
  };

  const users = useMemo(() => {
    const names = new Set<string>();
    for (const m of members.data?.results ?? []) names.add(m.username);
    for (const w of list.data?.results ?? []) if (w.created_by) names.add(w.created_by);
    if (filters.user) names.add(filters.user);
    return [...names].sort();
  }, [members.data, list.data, filters.user]);

  const rows = visibleRows(list.data, filters);
  const pages = list.data && !filters.user ? Math.max(1, Math.ceil(list.data.count / PAGE_SIZE)) : 1;
  const writable = canWrite(role);

  return (
    <Stack gap="md">
      <Group justify="space-between" wrap="wrap">
        <Group gap="sm" align="baseline">
          <Title order={1} size="h2">{kindPage === "notebook" ? "Notebooks" : kindPage === "deployment" ? "Deployments" : "Workloads"}</Title>
          <LiveIndicator />
        </Group>
        {writable && (
          <Button component={Link} to={`/projects/${project}/workloads/new${kindPage ? `?kind=${kindPage}` : ""}`} data-testid="submit-work">
            {kindPage === "notebook" ? "New notebook" : kindPage === "deployment" ? "New deployment" : "Submit work"}
          </Button>
        )}
      </Group>
      <ListTabs project={project} current={kindPage ?? filters.kind} />

      <Group gap="sm" align="flex-end" wrap="wrap">
        {!kindPage && <Select
          label="Kind"
          placeholder="All kinds"
          data-testid="filter-kind"
          data={kinds.map((k) => ({ value: k.kind, label: k.label }))}
          value={filters.kind}
          onChange={(value) => setFilters({ kind: (value as WorkloadKind | null) ?? null })}
          clearable
          w={170}
        />}
        <MultiSelect
          label="Status"
          placeholder={filters.status.length ? undefined : "Any status"}
          data-testid="filter-status"
          data={STATUSES.map((s) => ({ value: s, label: s }))}
          value={filters.status}
          onChange={(value) => setFilters({ status: value as WorkloadStatus[] })}
          clearable
          w={300}
        />
        <Select
          label="User"
          placeholder="Anyone"
          data-testid="filter-user"
          data={users}
          value={filters.user}
          onChange={(value) => setFilters({ user: value || null })}
          searchable
          clearable
          nothingFoundMessage="No such member"
          w={190}
        />
        {hasFilters(kindPage ? { ...filters, kind: null } : filters) && (
          <Button variant="subtle" onClick={() => setParams(filtersToSearch(EMPTY_FILTERS), { replace: true })}>
            Clear filters
          </Button>
        )}
      </Group>

      {list.isPending ? (
        <Loading label="Loading workloads…" />
      ) : list.error && !list.data ? (
        <ErrorState error={list.error} onRetry={() => list.refetch()} />
      ) : rows.length === 0 ? (
        hasFilters(kindPage ? { ...filters, kind: null } : filters) ? (
          <EmptyState
            title="No workloads match these filters"
            action={
              <Button variant="light" onClick={() => setParams(filtersToSearch(EMPTY_FILTERS), { replace: true })}>
                Clear filters
              </Button>
            }
          >
            Widen the kind, status or user filter to see more.
          </EmptyState>
        ) : (
          <EmptyState
            title="No workloads yet"
            action={
              writable ? (
                <Button component={Link} to={`/projects/${project}/workloads/new`}>
                  Submit a training job, notebook or deployment
                </Button>
              ) : undefined
            }
          >
            {writable
              ? "Work submitted to this project, from here or with the cairn CLI, shows up in this list."
              : "Nobody has submitted work to this project yet. As a viewer you can watch it here once they do."}
          </EmptyState>
        )
      ) : (
        <>
          {list.error && <ErrorState error={list.error} onRetry={() => list.refetch()} />}
          <Table.ScrollContainer minWidth={900}>
            <Table highlightOnHover verticalSpacing="xs" data-testid="workloads-table">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Name</Table.Th>
                  <Table.Th>Kind</Table.Th>
                  <Table.Th>Status</Table.Th>
                  <Table.Th>Pool</Table.Th>
                  <Table.Th>GPUs</Table.Th>
                  <Table.Th>User</Table.Th>
                  {kindPage === "notebook" && <Table.Th>IDE</Table.Th>}
                  {kindPage === "deployment" && <Table.Th>URL</Table.Th>}
                  {kindPage === "deployment" && <Table.Th>Replicas</Table.Th>}
                  <Table.Th>Queue</Table.Th>
                  <Table.Th>Reason</Table.Th>
                  <Table.Th>Age</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {rows.map((row) => (
                  <Table.Tr key={row.id} data-testid="workload-row" data-workload-id={row.id}>
                    <Table.Td>
                      <Anchor component={Link} to={workloadPath(project, row)} fw={500} size="sm">
                        {row.name}
                      </Anchor>
                    </Table.Td>
                    <Table.Td>
                      <Group gap={6} wrap="nowrap">
                        <Text size="sm">{labelOf(kinds, row.kind)}</Text>
                        <IdeBadge workload={row} />
                      </Group>
                    </Table.Td>
                    <Table.Td>
                      {row.status_message || row.status_reason ? (
                        <Tooltip label={row.status_message || row.status_reason} multiline w={300} withArrow>
                          <span>
                            <StatusBadge status={row.status} />
                          </span>
                        </Tooltip>
                      ) : (
                        <StatusBadge status={row.status} />
                      )}
                    </Table.Td>
                    <Table.Td>
                      <Text size="sm">{row.pool || "—"}</Text>
                    </Table.Td>
                    <Table.Td>
                      <Text size="sm" ff="monospace">
                        {gpuLabel(row.resources, row.replicas)}
                      </Text>
                    </Table.Td>
                    <Table.Td>
                      <Text size="sm">{row.created_by || "—"}</Text>
                    </Table.Td>
                    {kindPage === "notebook" && (
                      <Table.Td>
                        <Group gap={6} wrap="nowrap" data-testid="ide-cell">
                          <Text size="sm">{(row.spec as { ide?: string } | null)?.ide === "vscode" ? "VS Code" : "JupyterLab"}</Text>
                          {row.endpoint && row.status === "running" && (
                            <Anchor href={row.endpoint} target="_blank" rel="noreferrer" size="sm">Open</Anchor>
                          )}
                        </Group>
                      </Table.Td>
                    )}
                    {kindPage === "deployment" && (
                      <Table.Td>
                        <Text size="sm" ff="monospace" data-testid="url-cell" style={{ wordBreak: "break-all" }}>
                          {gatewayUrl(project, row.name)}
                        </Text>
                      </Table.Td>
                    )}
                    {kindPage === "deployment" && (
                      <Table.Td>
                        <ReplicasCell row={row} />
                      </Table.Td>
                    )}
                    <Table.Td>
                      <QueueCell row={row} now={now} />
                    </Table.Td>
                    <Table.Td>
                      <ReasonCell row={row} />
                    </Table.Td>
                    <Table.Td>
                      <Tooltip label={new Date(row.created_at).toLocaleString()} withArrow>
                        <Text size="sm" c="dimmed">
                          {formatAgo(row.created_at, now)}
                        </Text>
                      </Tooltip>
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
          <Group justify="space-between">
            <Text size="sm" c="dimmed" data-testid="workloads-count">
              {filters.user
                ? `${rows.length} of the latest ${Math.min(list.data?.count ?? 0, USER_FILTER_PAGE_SIZE)} workloads were submitted by ${filters.user}.`
                : `${list.data?.count ?? 0} workload${list.data?.count === 1 ? "" : "s"}`}
            </Text>
            {pages > 1 && (
              <Pagination total={pages} value={Math.min(filters.page, pages)} onChange={(p) => setFilters({ page: p })} size="sm" />
            )}
          </Group>
        </>
      )}
    </Stack>
  );
}
