// The cluster: pools (capacity / allocated / used), nodes, a node × GPU utilisation heatmap, and
// each pool's queue. Live from the "cluster" topic (telemetry, node changes).
import {
  Anchor, Badge, Card, Group, Select, SimpleGrid, Stack, Table, Text, Title, Tooltip,
} from "@mantine/core";
import { notifications } from "@mantine/notifications";
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useMemo } from "react";
import { Link, useSearchParams } from "react-router";
import { api, unwrap, type Schemas } from "../api/client";
import { GpuHeatmap } from "../components/GpuHeatmap";
import { UsageProgress } from "../components/UsageProgress";
import { useDebounced, useNow } from "../components/hooks";
import { LiveIndicator } from "../components/LiveIndicator";
import { WaitingOnBadge } from "../components/WaitingOnBadge";
import { EmptyState, ErrorState, Loading } from "../components/States";
import {
  allNodes, applyClusterFrame, HEALTH_COLOUR, nodeKind, othersSummary, percentOf, poolKinds, type ClusterOverview, type NodeRow,
  type OverviewPool,
} from "../lib/cluster";
import { formatBytesMb, formatGpu, formatPercent, formatRelative } from "../lib/format";
import { formatAgo, formatWaiting } from "../lib/time";
import { useKindLabel } from "../lib/kinds";
import { WAITING_ON, WAITING_ON_VALUES } from "../lib/status";
import { gpuLabel } from "../lib/workloads";
import { retryTransient } from "../lib/retry";
import { useTopic } from "../live/LiveProvider";
import { useMe } from "../session";

const OVERVIEW_KEY = ["cluster", "overview"] as const;

function fetchOverview(): Promise<ClusterOverview> {
  return unwrap(api.GET("/api/v1/cluster/overview/"));
}

function Bar({ label, pool, value, total, colour, testId, format = (v, t) => `${formatGpu(v)} / ${formatGpu(t)} GPUs` }: {
  label: string; pool: string; value: number; total: number; colour: string; testId?: string; format?: (value: number, total: number) => string;
}) {
  return (
    <Stack gap={2} data-testid={testId}>
      <Group justify="space-between" gap="xs">
        <Text size="xs" c="dimmed">
          {label}
        </Text>
        <Text size="xs" ff="monospace">
          {format(value, total)}
        </Text>
      </Group>
      <UsageProgress label={`${label}, pool ${pool}`} valueText={format(value, total)} sections={[{ value: percentOf(value, total), color: colour }]} />
    </Stack>
  );
}

function PoolCard({ pool }: { pool: OverviewPool }) {
  return (
    <Card withBorder padding="md" data-testid="pool-card" data-pool={pool.name}>
      <Stack gap="xs">
        <Group justify="space-between" wrap="nowrap" align="flex-start">
          <Stack gap={0} style={{ minWidth: 0 }}>
            <Text fw={600} truncate>
              {pool.name}
            </Text>
            <Text size="xs" c="dimmed" truncate>
              {pool.cluster}
              {pool.description ? ` · ${pool.description}` : ""}
            </Text>
          </Stack>
          <Tooltip label={`${pool.nodes_schedulable} of ${pool.nodes_total} nodes take new work`} withArrow>
            <Badge variant="light" color={pool.nodes_schedulable < pool.nodes_total ? "orange" : "gray"} style={{ flexShrink: 0 }}>
              {pool.nodes_schedulable}/{pool.nodes_total} nodes
            </Badge>
          </Tooltip>
        </Group>
        <Group gap={4} data-testid="pool-kinds">
          {poolKinds(pool).map((k) => (
            <Badge key={k} size="xs" variant="light" color="violet">
              {k}
            </Badge>
          ))}
        </Group>
        <Group gap={4}>
          {pool.accelerator_models.length ? (
            pool.accelerator_models.map((m) => (
              <Badge key={m} size="xs" variant="outline">
                {m}
              </Badge>
            ))
          ) : (
            <Text size="xs" c="dimmed">
              No GPU model listed
            </Text>
          )}
        </Group>
        <Bar pool={pool.name} label="Allocated" value={pool.allocated_gpu_milli} total={pool.capacity_gpu_milli} colour="indigo" />
        <Bar pool={pool.name} label="Used (utilisation)" value={pool.used_gpu_milli} total={pool.capacity_gpu_milli} colour="teal" />
        <Bar
          pool={pool.name}
          label="CPU allocated"
          value={pool.allocated_cpu_milli ?? 0}
          total={pool.cpu_milli_allocatable ?? 0}
          colour="grape"
          testId="pool-cpu"
          format={(v, t) => `${formatGpu(v)} / ${formatGpu(t)} cores`}
        />
        <Bar
          pool={pool.name}
          label="Memory allocated"
          value={pool.allocated_memory_mb ?? 0}
          total={pool.memory_mb_allocatable ?? 0}
          colour="cyan"
          testId="pool-memory"
          format={(v, t) => `${formatBytesMb(v)} / ${formatBytesMb(t)}`}
        />
      </Stack>
    </Card>
  );
}

function NodesTable({ nodes, now }: { nodes: NodeRow[]; now: number }) {
  if (!nodes.length) {
    return (
      <EmptyState title="No nodes registered">
        Nodes appear once a cluster is registered (the local node in embedded mode, or a Kubernetes cluster in the admin).
      </EmptyState>
    );
  }
  return (
    <Table.ScrollContainer minWidth={1000}>
      <Table verticalSpacing={6} data-testid="nodes-table" highlightOnHover>
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Node</Table.Th>
            <Table.Th>Pool</Table.Th>
            <Table.Th>GPU model</Table.Th>
            <Table.Th>GPUs</Table.Th>
            <Table.Th>Allocated</Table.Th>
            <Table.Th>Used</Table.Th>
            <Table.Th>CPU</Table.Th>
            <Table.Th>Memory</Table.Th>
            <Table.Th>Health</Table.Th>
            <Table.Th>Seen</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {nodes.map((n) => (
            <Table.Tr key={n.id} data-testid="node-row" data-node={n.name}>
              <Table.Td>
                <Group gap={6} wrap="nowrap">
                  <Text size="sm" fw={500}>
                    {n.name}
                  </Text>
                  {n.cordoned && (
                    <Badge size="xs" color="red" variant="filled" data-testid="node-cordoned">
                      cordoned
                    </Badge>
                  )}
                  {!n.cordoned && !n.schedulable && (
                    <Badge size="xs" color="orange" variant="light">
                      unschedulable
                    </Badge>
                  )}
                  {othersSummary(n) && (
                    <Tooltip
                      multiline
                      w={320}
                      withArrow
                      label={`Pods not Cairn's (DaemonSets, other tenants) request ${othersSummary(n)} on this node; Cairn places work in the rest of its allocatable.`}
                    >
                      <Badge size="xs" color="gray" variant="light" data-testid="node-others">
                        others: {othersSummary(n)}
                      </Badge>
                    </Tooltip>
                  )}
                  {n.replica_network === "host" && (
                    <Tooltip
                      multiline
                      w={320}
                      withArrow
                      label="Workloads on this node share the host's network: a job can reach services on the host's loopback (PostgreSQL, Redis, Cairn) and other workloads' ports. Run Cairn as root with a run user to give each workload a network of its own (docs/local-backend.md, Isolation)."
                    >
                      <Badge size="xs" color="orange" variant="light" data-testid="node-shared-network">
                        host network shared
                      </Badge>
                    </Tooltip>
                  )}
                  {n.replica_isolation === "none" && (
                    <Tooltip
                      multiline
                      w={320}
                      withArrow
                      label="Replicas on this node run as Cairn's own user with no sandbox: a job can read Cairn's secrets and other projects' files. Install bubblewrap (docs/local-backend.md, Isolation)."
                    >
                      <Badge size="xs" color="red" variant="light" data-testid="node-not-isolated">
                        replicas not isolated
                      </Badge>
                    </Tooltip>
                  )}
                </Group>
              </Table.Td>
              <Table.Td>
                <Text size="sm">{n.poolName ?? <Text span c="dimmed" size="sm">none</Text>}</Text>
              </Table.Td>
              <Table.Td>
                <Text size="sm" truncate maw={220} title={nodeKind(n)} data-testid="node-kind">
                  {nodeKind(n)}
                </Text>
              </Table.Td>
              <Table.Td>
                <Text size="sm" ff="monospace">
                  {n.gpu_count}
                </Text>
              </Table.Td>
              <Table.Td>
                <Tooltip label={`${formatGpu(n.allocated_gpu_milli)} GPUs held on ${n.allocated_gpus} GPU(s)`} withArrow>
                  <Text size="sm" ff="monospace">
                    {formatGpu(n.allocated_gpu_milli)} / {formatGpu(n.capacity_gpu_milli)}
                  </Text>
                </Tooltip>
              </Table.Td>
              <Table.Td>
                <Tooltip label={`${n.used_gpus} GPU(s) busy; Σ utilisation = ${formatGpu(n.used_gpu_milli)} GPUs`} withArrow>
                  <Text size="sm" ff="monospace">
                    {formatGpu(n.used_gpu_milli)} / {formatGpu(n.capacity_gpu_milli)}
                  </Text>
                </Tooltip>
              </Table.Td>
              <Table.Td>
                <Tooltip
                  label={`Utilisation from the node's telemetry; ${formatGpu(n.allocated_cpu_milli)} of ${formatGpu(n.cpu_milli_allocatable)} cores allocated to workloads`}
                  withArrow
                >
                  <Stack gap={0} data-testid="node-cpu">
                    <Text size="sm">{formatPercent(n.cpu_percent)} busy</Text>
                    <Text size="xs" c="dimmed">
                      {formatGpu(n.allocated_cpu_milli)} / {formatGpu(n.cpu_milli_allocatable)} cores held
                    </Text>
                  </Stack>
                </Tooltip>
              </Table.Td>
              <Table.Td>
                <Tooltip
                  label={`Use from the node's telemetry; ${formatBytesMb(n.allocated_memory_mb)} of ${formatBytesMb(n.memory_mb_allocatable)} allocated to workloads`}
                  withArrow
                >
                  <Stack gap={0} data-testid="node-memory">
                    <Text size="sm">{formatPercent(n.memory_percent)} used</Text>
                    <Text size="xs" c="dimmed">
                      {formatBytesMb(n.allocated_memory_mb)} / {formatBytesMb(n.memory_mb_allocatable)} held
                    </Text>
                  </Stack>
                </Tooltip>
              </Table.Td>
              <Table.Td>
                <Badge color={HEALTH_COLOUR[n.health] ?? "gray"} variant="light" data-testid="node-health">
                  {n.health}
                </Badge>
              </Table.Td>
              <Table.Td>
                <Text size="sm" c="dimmed">
                  {formatAgo(n.telemetry_time ?? n.last_seen_at, now)}
                </Text>
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}

function QueueSection({ pools, now }: { pools: OverviewPool[]; now: number }) {
  const [params, setParams] = useSearchParams();
  const names = pools.map((p) => p.name);
  const wanted = params.get("pool");
  const pool = wanted && names.includes(wanted) ? wanted : names[0] ?? null;
  const waitingParam = params.get("waiting_on");
  const waitingOn = WAITING_ON_VALUES.find((v) => v === waitingParam) ?? null;
  const setFilter = (key: "pool" | "waiting_on", value: string | null) => {
    const next = new URLSearchParams(params);
    if (value) next.set(key, value);
    else next.delete(key);
    setParams(next, { replace: true });
  };

  const queue = useQuery({
    queryKey: ["queue", pool, waitingOn],
    queryFn: () =>
      unwrap(
        api.GET("/api/v1/pools/{pool}/queue/", {
          params: { path: { pool: pool! }, query: { page_size: 200, ...(waitingOn ? { waiting_on: [waitingOn] } : {}) } },
        }),
      ),
    enabled: pool !== null,
    refetchInterval: 10_000,
    retry: retryTransient,
  });

  return (
    <Stack gap="sm">
      <Group justify="space-between" align="flex-end">
        <Title order={2} size="h3">Queue</Title>
        <Group gap="sm" align="flex-end">
          <Select
            label="Waiting on"
            placeholder="anything"
            data={WAITING_ON_VALUES.map((v) => ({ value: v, label: WAITING_ON[v].label }))}
            value={waitingOn}
            onChange={(value) => setFilter("waiting_on", value)}
            clearable
            w={200}
            disabled={pool === null}
            data-testid="queue-waiting-on"
          />
          <Select
            label="Pool"
            data={names}
            value={pool}
            onChange={(value) => value && setFilter("pool", value)}
            allowDeselect={false}
            w={220}
            disabled={!names.length}
            data-testid="queue-pool"
          />
        </Group>
      </Group>
      {pool === null ? (
        <>
          <Text size="sm" c="dimmed">
            There are no pools, so nothing can queue. An administrator creates pools when registering a cluster.
          </Text>
          <QueueTable rows={[]} empty="No pools." now={now} />
        </>
      ) : queue.isPending ? (
        <Loading label={`Loading the queue of ${pool}…`} />
      ) : !queue.data ? (
        <ErrorState error={queue.error} onRetry={() => queue.refetch()} />
      ) : (
        <>
          <QueueTable
            rows={queue.data.results}
            empty={
              waitingOn
                ? `Nothing in ${pool} is waiting on ${WAITING_ON[waitingOn].label}.`
                : `Nothing is waiting in ${pool}: new work is admitted as soon as it fits.`
            }
            now={now}
          />
          {queue.data.count > queue.data.results.length && (
            <Text size="xs" c="dimmed">
              The first {queue.data.results.length} of {queue.data.count} queued workloads.
            </Text>
          )}
        </>
      )}
    </Stack>
  );
}

type QueueEntry = Schemas["QueueEntry"];

function QueueTable({ rows, empty, now }: { rows: QueueEntry[]; empty: string; now: number }) {
  const kindLabel = useKindLabel();
  return (
    <Table.ScrollContainer minWidth={900}>
      <Table verticalSpacing={6} data-testid="queue-table">
        <Table.Thead>
          <Table.Tr>
            <Table.Th w={60}>#</Table.Th>
            <Table.Th>Workload</Table.Th>
            <Table.Th>Project</Table.Th>
            <Table.Th>Priority</Table.Th>
            <Table.Th>Asks for</Table.Th>
            <Table.Th>Pending reason</Table.Th>
            <Table.Th>Estimated start</Table.Th>
            <Table.Th>Waiting</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {rows.length === 0 ? (
            <Table.Tr>
              <Table.Td colSpan={8}>
                <Text size="sm" c="dimmed" ta="center" py="sm" data-testid="queue-empty">
                  {empty}
                </Text>
              </Table.Td>
            </Table.Tr>
          ) : (
            rows.map((q, i) => (
              <Table.Tr key={q.id ?? `other-${i}`} data-testid="queue-row" data-mine={q.mine ? "true" : "false"}>
                <Table.Td>
                  <Text size="sm" ff="monospace">
                    {q.position ?? "—"}
                  </Text>
                </Table.Td>
                <Table.Td>
                  {q.id !== null && q.name && q.project ? (
                    <Anchor component={Link} to={`/projects/${q.project}/workloads/${q.kind}/${q.id}`} size="sm" fw={q.mine ? 600 : 400}>
                      {q.name}
                    </Anchor>
                  ) : (
                    <Text size="sm" c="dimmed" fs="italic">
                      another project's {kindLabel(q.kind).toLowerCase()}
                    </Text>
                  )}
                </Table.Td>
                <Table.Td>
                  <Text size="sm">{q.project ?? "—"}</Text>
                </Table.Td>
                <Table.Td>
                  <Text size="sm">{q.priority}</Text>
                </Table.Td>
                <Table.Td>
                  <Text size="sm" ff="monospace" data-testid="queue-resources">
                    {gpuLabel(q.resources, q.replicas)} GPU
                  </Text>
                  <Text size="xs" c="dimmed">
                    {q.replicas > 1 ? `${q.replicas} × ` : ""}
                    {q.resources.cpu} CPU · {formatBytesMb(q.resources.memory_mb)}
                  </Text>
                </Table.Td>
                <Table.Td maw={400}>
                  <Group gap={6} wrap="nowrap" align="flex-start">
                    {q.waiting_on && <WaitingOnBadge kind={q.waiting_on} />}
                    <Text size="sm" lineClamp={2} title={q.pending_reason ?? undefined}>
                      {q.pending_reason || (q.waiting_on ? "" : "—")}
                    </Text>
                  </Group>
                </Table.Td>
                <Table.Td>
                  <Text size="sm">{q.estimated_start ? formatRelative(q.estimated_start, now) : "unknown"}</Text>
                </Table.Td>
                <Table.Td>
                  <Text size="sm" c="dimmed">
                    {formatWaiting(q.submitted_at, now)}
                  </Text>
                </Table.Td>
              </Table.Tr>
            ))
          )}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}

export function ClusterPage() {
  const me = useMe();
  const queryClient = useQueryClient();
  const now = useNow(15_000);
  const overview = useQuery({ queryKey: OVERVIEW_KEY, queryFn: fetchOverview, refetchInterval: 30_000, retry: retryTransient });

  const refetchSoon = useDebounced(() => void queryClient.invalidateQueries({ queryKey: OVERVIEW_KEY }), 1000);
  useTopic("cluster", (frame) => {
    if (frame.type !== "cluster.telemetry" && frame.type !== "node.changed") return;
    queryClient.setQueryData<ClusterOverview>(OVERVIEW_KEY, (old) => applyClusterFrame(old, frame));
    if (frame.type === "node.changed") {
      const node = frame.node as { name?: string } | undefined;
      if (typeof frame.message === "string" && frame.reason !== "NodeUpdated") {
        notifications.show({ color: "red", title: `Node ${node?.name ?? ""} changed`, message: frame.message });
      }
      refetchSoon();
    }
  });

  const nodes = useMemo(() => (overview.data ? allNodes(overview.data) : []), [overview.data]);

  if (overview.isPending) return <Loading label="Loading the cluster…" />;
  if (overview.error && !overview.data) {
    return (
      <Stack>
        <Title order={1} size="h2">Cluster</Title>
        <ErrorState error={overview.error} onRetry={() => overview.refetch()} />
      </Stack>
    );
  }
  const data = overview.data!;

  return (
    <Stack gap="lg">
      <Group justify="space-between" align="baseline">
        <Group gap="sm" align="baseline">
          <Title order={1} size="h2">Cluster</Title>
          {me.projects.length > 0 && <LiveIndicator />}
        </Group>
        <Text size="xs" c="dimmed">
          Telemetry older than {data.telemetry_max_age_seconds}s counts as no sample
        </Text>
      </Group>

      <Stack gap="sm">
        <Title order={2} size="h3">Pools</Title>
        <div data-testid="cluster-pools">
          {data.pools.length === 0 ? (
            <EmptyState title="No pools yet">
              {me.is_staff
                ? "Register a cluster and create pools in the admin; nodes in no pool are listed below."
                : "Your administrator has not set up any pools yet."}
            </EmptyState>
          ) : (
            <SimpleGrid cols={{ base: 1, sm: 2, lg: 3 }} spacing="md">
              {data.pools.map((pool) => (
                <PoolCard key={`${pool.cluster}/${pool.name}`} pool={pool} />
              ))}
            </SimpleGrid>
          )}
        </div>
      </Stack>

      <Stack gap="sm">
        <Title order={2} size="h3">GPU utilisation</Title>
        <GpuHeatmap nodes={nodes} />
      </Stack>

      <Stack gap="sm">
        <Title order={2} size="h3">Nodes</Title>
        <NodesTable nodes={nodes} now={now} />
      </Stack>

      <QueueSection pools={data.pools} now={now} />
    </Stack>
  );
}
