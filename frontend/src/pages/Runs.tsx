// Tracking runs of the project: pick runs to compare, see their latest metric values live
// (topic "runs", docs/live.md), filter by status or workload (?workload=<id> in the URL).
import {
  Anchor, Badge, Button, Checkbox, Code, Group, MultiSelect, Pagination, SegmentedControl, Stack, Table, Text,
  TextInput, Title, Tooltip, VisuallyHidden,
} from "@mantine/core";
import { keepPreviousData, useQuery, useQueryClient } from "@tanstack/react-query";
import { useMemo, useRef, useState } from "react";
import { Link, useNavigate, useParams, useSearchParams } from "react-router";
import { api, unwrap, type Schemas } from "../api/client";
import { useDebounced } from "../components/hooks";
import { EmptyState, ErrorState, Loading } from "../components/States";
import { formatNumber, formatRelative } from "../lib/format";
import {
  allMetricKeys, applyRunsFrame, comparePath, defaultMetricKeys, latestFromSummaries, RUN_STATUS_COLOUR, workloadPath,
  type LatestValues,
} from "../lib/runs";
import { retryTransient } from "../lib/retry";
import { useTopic } from "../live/LiveProvider";

type Run = Schemas["Run"];
const PAGE_SIZE = 100;
const STATUS_FILTERS = ["all", "running", "finished", "failed", "stopped"] as const;

export function RunStatusBadge({ status }: { status: string }) {
  return (
    <Badge color={RUN_STATUS_COLOUR[status] ?? "gray"} variant="light" data-testid="run-status" data-status={status}>
      {status}
    </Badge>
  );
}

function useWorkloadNames(project: string) {
  return useQuery({
    queryKey: ["workload-names", project],
    queryFn: () =>
      unwrap(api.GET("/api/v1/projects/{project}/workloads/", { params: { path: { project }, query: { page_size: 500 } } })),
    select: (page) => new Map(page.results.map((w) => [w.id, { name: w.name, kind: w.kind as string }])),
    staleTime: 60_000,
  });
}

export function RunsPage() {
  const { project = "" } = useParams();
  return <RunsView key={project} project={project} />;
}

function RunsView({ project }: { project: string }) {
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const [search, setSearch] = useSearchParams();
  const status = (search.get("status") ?? "all") as (typeof STATUS_FILTERS)[number];
  const workloadFilter = Number(search.get("workload")) || null;
  const [page, setPage] = useState(1);
  const [picked, setPicked] = useState<ReadonlySet<number>>(() => new Set());
  const [nameFilter, setNameFilter] = useState("");
  const [columns, setColumns] = useState<string[] | null>(null);
  const [live, setLive] = useState<{ latest: LatestValues; statuses: Record<number, string> }>({ latest: {}, statuses: {} });

  const queryKey = ["runs", project, status, workloadFilter, page] as const;
  const runs = useQuery({
    queryKey,
    queryFn: () =>
      unwrap(
        api.GET("/api/v1/projects/{project}/runs/", {
          params: {
            path: { project },
            query: {
              page,
              page_size: PAGE_SIZE,
              ...(status !== "all" ? { status } : {}),
              ...(workloadFilter ? { workload: workloadFilter } : {}),
            },
          },
        }),
      ),
    placeholderData: keepPreviousData,
    retry: retryTransient,
  });
  const workloads = useWorkloadNames(project);
  const refresh = useDebounced(() => queryClient.invalidateQueries({ queryKey: ["runs", project] }), 1500);

  const rows = useMemo(() => runs.data?.results ?? [], [runs.data]);
  const known = useMemo(() => new Set(rows.map((r) => r.id)), [rows]);
  const fetched = useMemo(() => latestFromSummaries(rows as unknown as { id: number; status: string; summaries: Record<string, unknown> }[]), [rows]);

  // New runs show up in runs.latest before the list has them: re-read the list once per new id
  // (runs on other pages or outside the filters would otherwise trigger a read every frame).
  const liveRef = useRef(live);
  liveRef.current = live;
  const askedFor = useRef(new Set<number>());
  useTopic("runs", (frame) => {
    const prev = liveRef.current;
    const out = applyRunsFrame(prev.latest, prev.statuses, frame, known);
    const fresh = out.unknown.filter((id) => !askedFor.current.has(id));
    if (fresh.length) {
      fresh.forEach((id) => askedFor.current.add(id));
      if (page === 1) refresh();
    }
    if (out.latest !== prev.latest || out.statuses !== prev.statuses) {
      const next = { latest: out.latest, statuses: out.statuses };
      liveRef.current = next;
      setLive(next);
    }
  });

  const keysPerRun = useMemo(
    () => rows.map((r) => [...Object.keys(r.summaries ?? {}), ...Object.keys(live.latest[r.id] ?? {})]),
    [rows, live.latest],
  );
  const metricOptions = useMemo(() => allMetricKeys(keysPerRun), [keysPerRun]);
  const shownColumns = columns ?? defaultMetricKeys(keysPerRun, 3);

  const filtered = nameFilter.trim()
    ? rows.filter((r) => r.name.toLowerCase().includes(nameFilter.trim().toLowerCase()))
    : rows;

  const toggle = (id: number) =>
    setPicked((prev) => {
      const next = new Set(prev);
      if (next.has(id)) next.delete(id);
      else next.add(id);
      return next;
    });

  const valueOf = (run: Run, key: string): number | null => {
    const liveValue = live.latest[run.id]?.[key];
    const fetchedValue = fetched[run.id]?.[key];
    if (liveValue && (!fetchedValue || liveValue[0] >= fetchedValue[0])) return liveValue[1];
    return fetchedValue ? fetchedValue[1] : null;
  };

  const lastStep = (run: Run): number | null => {
    let step: number | null = null;
    for (const source of [fetched[run.id], live.latest[run.id]]) {
      for (const point of Object.values(source ?? {})) if (step === null || point[0] > step) step = point[0];
    }
    return step;
  };

  const setFilter = (name: string, value: string | null) => {
    const next = new URLSearchParams(search);
    if (value) next.set(name, value);
    else next.delete(name);
    setSearch(next, { replace: true });
    setPage(1);
  };

  const workloadCell = (run: Run) => {
    const id = run.workload as number | null;
    if (id === null || id === undefined) return <Text size="sm" c="dimmed">standalone</Text>;
    const info = workloads.data?.get(id);
    return (
      <Anchor component={Link} to={workloadPath(project, info?.kind ?? "training", id)} size="sm">
        {info?.name ?? `#${id}`}
        {run.attempt ? <Text span size="xs" c="dimmed">{` · attempt ${run.attempt}`}</Text> : null}
      </Anchor>
    );
  };

  const total = runs.data?.count ?? 0;
  const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));

  return (
    <Stack gap="md">
      <Group justify="space-between" align="flex-end" wrap="wrap">
        <div>
          <Title order={1} size="h2">Runs</Title>
          <Text c="dimmed" size="sm">
            What jobs and scripts log with the cairn SDK. Tick two or more runs to compare their curves and params.
          </Text>
        </div>
        <Button
          data-testid="compare-runs"
          disabled={picked.size < 2}
          onClick={() => navigate(comparePath(project, picked))}
        >
          {picked.size >= 2 ? `Compare ${picked.size} runs` : "Compare (pick 2 or more)"}
        </Button>
      </Group>

      <Group gap="sm" wrap="wrap" align="flex-end">
        <SegmentedControl
          size="xs"
          data={STATUS_FILTERS.map((s) => ({ value: s, label: s === "all" ? "All" : s[0].toUpperCase() + s.slice(1) }))}
          value={status}
          onChange={(v) => setFilter("status", v === "all" ? null : v)}
          data-testid="runs-status-filter"
        />
        <TextInput
          size="xs"
          placeholder="Filter by name on this page"
          value={nameFilter}
          onChange={(e) => setNameFilter(e.currentTarget.value)}
          w={220}
          aria-label="Filter by name"
        />
        <MultiSelect
          size="xs"
          placeholder={shownColumns.length ? undefined : "Metric columns"}
          data={metricOptions}
          value={shownColumns}
          onChange={setColumns}
          searchable
          clearable
          maxValues={5}
          w={360}
          aria-label="Metric columns"
          data-testid="runs-metric-columns"
        />
        {workloadFilter && (
          <Badge
            variant="outline"
            size="lg"
            rightSection={
              <Anchor size="xs" onClick={() => setFilter("workload", null)} aria-label="Clear workload filter">
                ✕
              </Anchor>
            }
          >
            workload {workloads.data?.get(workloadFilter)?.name ?? `#${workloadFilter}`}
          </Badge>
        )}
      </Group>

      {runs.isPending ? (
        <Loading label="Loading runs…" />
      ) : runs.error ? (
        <ErrorState error={runs.error} onRetry={() => runs.refetch()} />
      ) : rows.length === 0 ? (
        status !== "all" || workloadFilter ? (
          <EmptyState
            title="No runs match these filters"
            action={<Button variant="light" onClick={() => setSearch(new URLSearchParams(), { replace: true })}>Clear filters</Button>}
          >
            Try another status, or show the runs of every workload.
          </EmptyState>
        ) : (
          <EmptyState
            title="No runs yet"
            action={
              <Button component={Link} to={`/projects/${project}/workloads/new`} variant="light">
                Submit a training job
              </Button>
            }
          >
            A run appears when a job (or a script on your laptop) calls <Code>cairn.init()</Code> and logs metrics with{" "}
            <Code>cairn.log({"{"}"loss": …{"}"})</Code>. Jobs started by Cairn get a run per attempt automatically.
          </EmptyState>
        )
      ) : (
        <>
          <Table.ScrollContainer minWidth={860}>
            <Table highlightOnHover verticalSpacing="xs" data-testid="runs-table">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th w={36}>
                    <Checkbox
                      aria-label="Pick every run on this page"
                      checked={filtered.length > 0 && filtered.every((r) => picked.has(r.id))}
                      indeterminate={filtered.some((r) => picked.has(r.id)) && !filtered.every((r) => picked.has(r.id))}
                      onChange={(e) => {
                        const on = e.currentTarget.checked;
                        setPicked((prev) => {
                          const next = new Set(prev);
                          for (const r of filtered) {
                            if (on) next.add(r.id);
                            else next.delete(r.id);
                          }
                          return next;
                        });
                      }}
                    />
                  </Table.Th>
                  <Table.Th>Name</Table.Th>
                  <Table.Th>Status</Table.Th>
                  <Table.Th>Workload</Table.Th>
                  <Table.Th>Created</Table.Th>
                  <Table.Th ta="right">Step</Table.Th>
                  {shownColumns.map((key) => (
                    <Table.Th key={key} ta="right" style={{ whiteSpace: "nowrap" }}>
                      {key}
                    </Table.Th>
                  ))}
                  <Table.Th>
                    <VisuallyHidden>Actions</VisuallyHidden>
                  </Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {filtered.length === 0 && (
                  <Table.Tr>
                    <Table.Td colSpan={7 + shownColumns.length}>
                      <Text size="sm" c="dimmed">
                        No run on this page has “{nameFilter.trim()}” in its name. Clear the name filter or try another page.
                      </Text>
                    </Table.Td>
                  </Table.Tr>
                )}
                {filtered.map((run) => {
                  const runStatus = live.statuses[run.id] ?? run.status;
                  return (
                    <Table.Tr
                      key={run.id}
                      data-testid="run-row"
                      data-run-id={run.id}
                      bg={picked.has(run.id) ? "var(--mantine-primary-color-light)" : undefined}
                    >
                      <Table.Td>
                        <Checkbox
                          aria-label={`Pick ${run.name}`}
                          checked={picked.has(run.id)}
                          onChange={() => toggle(run.id)}
                          data-testid="run-pick"
                        />
                      </Table.Td>
                      <Table.Td>
                        <Tooltip label="Open this run's curves" openDelay={400}>
                          <Anchor component={Link} to={comparePath(project, [run.id])} fw={500} size="sm">
                            {run.name}
                          </Anchor>
                        </Tooltip>
                      </Table.Td>
                      <Table.Td>
                        <RunStatusBadge status={runStatus} />
                      </Table.Td>
                      <Table.Td>{workloadCell(run)}</Table.Td>
                      <Table.Td>
                        <Tooltip label={new Date(run.created_at).toLocaleString()}>
                          <Text size="sm" c="dimmed">
                            {formatRelative(run.created_at)}
                          </Text>
                        </Tooltip>
                      </Table.Td>
                      <Table.Td ta="right" ff="monospace" fz="sm" data-testid="run-step">
                        {lastStep(run)?.toLocaleString() ?? "—"}
                      </Table.Td>
                      {shownColumns.map((key) => (
                        <Table.Td key={key} ta="right" ff="monospace" fz="sm" data-testid="run-metric" data-key={key}>
                          {formatNumber(valueOf(run, key))}
                        </Table.Td>
                      ))}
                      <Table.Td>
                        <Anchor
                          href={`/api/v1/projects/${encodeURIComponent(project)}/runs/${run.id}/export/`}
                          size="xs"
                          download
                        >
                          CSV
                        </Anchor>
                      </Table.Td>
                    </Table.Tr>
                  );
                })}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
          <Group justify="space-between">
            <Text size="sm" c="dimmed">
              {total} run{total === 1 ? "" : "s"}
              {picked.size ? ` · ${picked.size} picked` : ""}
              {nameFilter.trim() ? ` · ${filtered.length} match “${nameFilter.trim()}”` : ""}
            </Text>
            {pages > 1 && <Pagination size="sm" total={pages} value={page} onChange={setPage} />}
          </Group>
        </>
      )}
    </Stack>
  );
}
