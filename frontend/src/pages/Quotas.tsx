// The project's quota per pool: nominal and used GPUs, CPU and memory (GPUs borrowed beyond the
// nominal highlighted), lendable, what queued work waits on, and the GPU-hour budget of the period. Refreshed when the project's workloads change.
import { Badge, Group, Stack, Table, Text, Title, Tooltip } from "@mantine/core";
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useMemo } from "react";
import { useParams } from "react-router";
import { api, unwrap } from "../api/client";
import { useDebounced, useNow } from "../components/hooks";
import { LiveIndicator } from "../components/LiveIndicator";
import { EmptyState, ErrorState, Loading } from "../components/States";
import { UsageProgress } from "../components/UsageProgress";
import { formatBytesMb, formatGpu, formatRelative } from "../lib/format";
import { budgetColour, quotaView, resourceNames, resourcesLabel, type QuotaView, type UsageBar } from "../lib/quotas";
import { WAITING_ON, type WaitingOn } from "../lib/status";
import { retryTransient } from "../lib/retry";
import { useTopic } from "../live/LiveProvider";
import { useMe } from "../session";

function gpus(milli: number): string {
  const n = formatGpu(milli);
  return `${n} GPU${n === "1" ? "" : "s"}`;
}

function hours(value: number): string {
  return value >= 100 ? value.toFixed(0) : value.toFixed(1);
}

function barSections(bar: UsageBar) {
  return [
    { value: bar.within, color: "indigo" },
    { value: bar.borrowed, color: "orange", striped: true },
  ];
}

function ResourceBar({ name, label, bar, testId }: { name: string; label: string; bar: UsageBar; testId: string }) {
  return (
    <Stack gap={2} data-testid={testId}>
      <UsageProgress label={name} valueText={label} sections={barSections(bar)} />
      <Text size="xs" c="dimmed">
        {label}
      </Text>
    </Stack>
  );
}

function UsedCell({ q }: { q: QuotaView }) {
  const label = `${formatGpu(q.used)} of ${gpus(q.nominal)}`;
  return (
    <Stack gap={6} miw={180}>
      <Tooltip
        label={
          q.borrowed > 0
            ? `${gpus(q.used)} in use: ${gpus(q.nominal)} of the quota plus ${formatGpu(q.borrowed)} borrowed from unused quota of other projects`
            : `${gpus(q.used)} in use of a ${gpus(q.nominal)} quota`
        }
        multiline
        w={300}
        withArrow
      >
        <Stack gap={2}>
          <UsageProgress
            size="lg"
            testId="quota-bar"
            label={`GPUs used in pool ${q.pool}`}
            valueText={q.borrowed > 0 ? `${label}, ${formatGpu(q.borrowed)} borrowed` : label}
            sections={barSections(q.bar)}
          />
          <Text size="xs" c="dimmed">
            {label}
          </Text>
        </Stack>
      </Tooltip>
      <ResourceBar
        name={`CPUs used in pool ${q.pool}`}
        label={`${formatGpu(q.cpuUsed)} of ${cpus(q.cpuNominal)}`}
        bar={q.cpuBar}
        testId="quota-cpu"
      />
      <ResourceBar
        name={`Memory used in pool ${q.pool}`}
        label={`${formatBytesMb(q.memoryUsed)} of ${formatBytesMb(q.memoryNominal)} memory`}
        bar={q.memoryBar}
        testId="quota-memory"
      />
    </Stack>
  );
}

function cpus(milli: number): string {
  const n = formatGpu(milli);
  return `${n} CPU${n === "1" ? "" : "s"}`;
}

function QueuedCell({ q }: { q: QuotaView }) {
  if (!q.waits.length && q.queued <= 0) {
    return (
      <Text size="sm" c="dimmed">
        nothing
      </Text>
    );
  }
  if (!q.waits.length) {
    // An older server: GPUs only.
    return (
      <Stack gap={2} data-testid="quota-queued">
        <Text size="sm">{gpus(q.queued)}</Text>
        {q.waiting.map(({ kind, milli }) => (
          <Text key={kind} size="xs" c="dimmed">
            {formatGpu(milli)} {kind in WAITING_ON ? WAITING_ON[kind as WaitingOn].label : kind}
          </Text>
        ))}
      </Stack>
    );
  }
  return (
    <Stack gap={2} data-testid="quota-queued">
      <Text size="sm">{resourcesLabel(q.queued, q.queuedCpu, q.queuedMemory)}</Text>
      {q.waits.map((w) => {
        const known = w.kind in WAITING_ON ? WAITING_ON[w.kind as WaitingOn] : null;
        const what = known ? known.label : w.kind === "undecided" ? "not yet decided" : w.kind;
        const line = (
          <Text size="xs" c="dimmed" data-testid="quota-wait" data-waiting-on={w.kind}>
            {what}
            {w.resources.length ? ` (${resourceNames(w.resources)})` : ""}: {resourcesLabel(w.gpu, w.cpu, w.memory)} ·{" "}
            {w.workloads} workload{w.workloads === 1 ? "" : "s"}
          </Text>
        );
        return known ? (
          <Tooltip key={w.kind} label={known.hint} multiline w={280} withArrow>
            {line}
          </Tooltip>
        ) : (
          <span key={w.kind}>{line}</span>
        );
      })}
    </Stack>
  );
}

function BudgetCell({ q, now }: { q: QuotaView; now: number }) {
  if (q.budget === null) {
    return (
      <Text size="sm" c="dimmed">
        No budget · {hours(q.gpuHours)} GPU-h this {q.period}
      </Text>
    );
  }
  return (
    <Stack gap={4} miw={170}>
      <UsageProgress
        size="lg"
        label={`GPU-hour budget used in pool ${q.pool}`}
        valueText={`${hours(q.gpuHours)} of ${hours(q.budget)} GPU-hours this ${q.period}`}
        sections={[{ value: Math.min(100, q.budgetPercent ?? 0), color: budgetColour(q.budgetPercent) }]}
      />
      <Text size="xs" c="dimmed">
        {hours(q.gpuHours)} of {hours(q.budget)} GPU-h this {q.period}
        {q.periodEnd ? ` · resets ${formatRelative(q.periodEnd, now)}` : ""}
      </Text>
    </Stack>
  );
}

export function QuotasPage() {
  const { project = "" } = useParams();
  const me = useMe();
  const projectName = me.projects.find((p) => p.slug === project)?.name ?? project;
  const queryClient = useQueryClient();
  const now = useNow();

  const quotas = useQuery({
    queryKey: ["quotas", project],
    queryFn: () => unwrap(api.GET("/api/v1/projects/{project}/quotas/", { params: { path: { project }, query: { page_size: 500 } } })),
    refetchInterval: 30_000,
    retry: retryTransient,
  });

  // Usage follows the project's workloads: refresh when one starts, ends or goes away.
  const refresh = useDebounced(() => void queryClient.invalidateQueries({ queryKey: ["quotas", project] }), 1500);
  useTopic("workloads", (frame) => {
    if (frame.type.startsWith("workload.")) refresh();
  });

  const rows = useMemo(
    () => (quotas.data?.results ?? []).map((q) => quotaView(q)).sort((a, b) => a.pool.localeCompare(b.pool)),
    [quotas.data],
  );

  return (
    <Stack gap="md" maw={1200}>
      <Stack gap={2}>
        <Group gap="sm" align="baseline">
          <Title order={1} size="h2">Quotas</Title>
          <LiveIndicator />
        </Group>
        <Text size="sm" c="dimmed">
          What {projectName} is guaranteed in each pool (nominal), what its running work holds, and its GPU-hour budget. Work
          beyond the nominal borrows idle quota of other projects and is the first to be preempted when they need it back.
        </Text>
      </Stack>

      {quotas.isPending ? (
        <Loading label="Loading quotas…" />
      ) : quotas.error ? (
        <ErrorState error={quotas.error} onRetry={() => quotas.refetch()} />
      ) : rows.length === 0 ? (
        <EmptyState title="No quota in any pool yet">
          Work is admitted only in pools where the project has a quota. Ask your Cairn administrator to give {projectName} a
          quota{me.is_staff ? " (Django admin → Quotas)" : ""}.
        </EmptyState>
      ) : (
        <>
          <Table.ScrollContainer minWidth={1000}>
            <Table verticalSpacing="sm" data-testid="quotas-table">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Pool</Table.Th>
                  <Table.Th>Nominal</Table.Th>
                  <Table.Th>Used</Table.Th>
                  <Table.Th>Borrowed</Table.Th>
                  <Table.Th>Lendable</Table.Th>
                  <Table.Th>Queued, waiting on</Table.Th>
                  <Table.Th>Budget</Table.Th>
                  <Table.Th>Budget left</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {rows.map((q) => (
                  <Table.Tr key={q.id} data-testid="quota-row" data-pool={q.pool}>
                    <Table.Td>
                      <Text fw={500} size="sm">
                        {q.pool}
                      </Text>
                      {q.poolKinds.length > 0 && (
                        <Text size="xs" c="dimmed" data-testid="quota-pool-kinds">
                          {q.poolKinds.join(" · ")}
                        </Text>
                      )}
                    </Table.Td>
                    <Table.Td>
                      <Text size="sm">{gpus(q.nominal)}</Text>
                      <Text size="xs" c="dimmed">
                        {cpus(q.cpuNominal)} · {formatBytesMb(q.memoryNominal)}
                      </Text>
                    </Table.Td>
                    <Table.Td>
                      <UsedCell q={q} />
                    </Table.Td>
                    <Table.Td>
                      {q.borrowed > 0 ? (
                        <Badge color="orange" variant="light" data-testid="quota-borrowed">
                          {gpus(q.borrowed)}
                        </Badge>
                      ) : (
                        <Text size="sm" c="dimmed">
                          0
                        </Text>
                      )}
                      <Text size="xs" c="dimmed">
                        limit {q.borrowingLimit === null ? "none" : gpus(q.borrowingLimit)}
                      </Text>
                    </Table.Td>
                    <Table.Td>
                      <Text size="sm">{gpus(q.lendable)}</Text>
                      <Text size="xs" c="dimmed">
                        limit {q.lendingLimit === null ? "none" : gpus(q.lendingLimit)}
                      </Text>
                    </Table.Td>
                    <Table.Td>
                      <QueuedCell q={q} />
                    </Table.Td>
                    <Table.Td>
                      <BudgetCell q={q} now={now} />
                    </Table.Td>
                    <Table.Td>
                      {q.budgetLeft === null ? (
                        <Text size="sm" c="dimmed">
                          —
                        </Text>
                      ) : (
                        <Text size="sm" fw={500} c={q.budgetLeft <= 0 ? "red" : undefined}>
                          {hours(q.budgetLeft)} GPU-h
                        </Text>
                      )}
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
          <Group gap="lg">
            <Group gap={6}>
              <span style={{ width: 12, height: 12, borderRadius: 2, background: "var(--mantine-color-indigo-6)" }} />
              <Text size="xs" c="dimmed">Used within the quota</Text>
            </Group>
            <Group gap={6}>
              <span style={{ width: 12, height: 12, borderRadius: 2, background: "var(--mantine-color-orange-6)" }} />
              <Text size="xs" c="dimmed">Borrowed beyond it (preempted first)</Text>
            </Group>
          </Group>
        </>
      )}
    </Stack>
  );
}
