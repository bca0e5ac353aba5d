// The Goodput panel (docs/training.md, "Goodput"): productive against lost time over every
// attempt, each rank's last step with a badge on a straggler, the restarts and their causes,
// the checkpoints. Read from the kind-independent /workloads/<id>/resilience/; shown only when
// there is something to show (a notebook or a job without the cairn SDK has nothing).
import { Badge, Box, Card, Group, SimpleGrid, Stack, Table, Text, Title, Tooltip } from "@mantine/core";
import { useQuery } from "@tanstack/react-query";
import { formatBytes } from "../../lib/bytes";
import { formatDuration, formatRelative } from "../../lib/format";
import {
  formatGoodput, goodputParts, hasResilience, lossSummary, slowdownLabel, slowGroupLabel, type Resilience,
} from "../../lib/resilience";
import { retryTransient } from "../../lib/retry";
import { getResilience } from "./api";

/** The resilience of one workload, polled while it runs (the panel and the status bar share it). */
export function useResilience(project: string, id: number, active: boolean) {
  return useQuery({
    queryKey: ["workload-resilience", project, id],
    queryFn: () => getResilience(project, id),
    retry: retryTransient,
    refetchInterval: active ? 10_000 : false,
  });
}

export interface ResiliencePanelProps {
  data: Resilience | undefined;
  now: number;
  /** The workload's current attempt: a rank that has not reported in it yet says so. */
  attempt: number;
}

export function ResiliencePanel({ data, now, attempt }: ResiliencePanelProps) {
  if (!hasResilience(data)) return null;
  const g = data.goodput;
  const parts = goodputParts(g);
  const last = data.checkpoints[data.checkpoints.length - 1];
  return (
    <Card withBorder padding="md" data-testid="resilience-panel">
      <Group justify="space-between" mb="xs">
        <Title order={2} size="h4">Goodput</Title>
        <Text size="xs" c="dimmed">
          hang timeout {formatDuration(data.hang_timeout_seconds)} · stragglers: {data.straggler_policy}
        </Text>
      </Group>
      <SimpleGrid cols={{ base: 1, sm: 3 }} spacing="md">
        <Stack gap={2}>
          <Text size="xs" c="dimmed" tt="uppercase" fw={600}>Productive / wall time</Text>
          <Text size="xl" fw={700} data-testid="goodput-value">{formatGoodput(g.goodput)}</Text>
          <Text size="xs" c="dimmed">
            {formatDuration(g.productive_seconds)} of {formatDuration(g.wall_seconds)}
          </Text>
        </Stack>
        <Stack gap={4} style={{ gridColumn: "span 2" }}>
          <Box
            h={18}
            style={{ display: "flex", borderRadius: 4, overflow: "hidden", background: "var(--mantine-color-default-border)" }}
            data-testid="goodput-bar"
            role="img"
            aria-label={`Goodput ${formatGoodput(g.goodput)}; ${lossSummary(g)}`}
          >
            {parts.map((p) => (
              <Tooltip key={p.key} label={`${p.label}: ${formatDuration(p.seconds)} (${Math.round(p.fraction * 100)}%)`}>
                <Box
                  data-testid="goodput-part"
                  data-part={p.key}
                  w={`${p.fraction * 100}%`}
                  style={{ background: `var(--mantine-color-${p.colour}-filled)` }}
                />
              </Tooltip>
            ))}
          </Box>
          <Group gap="sm">
            {parts.map((p) => (
              <Group key={p.key} gap={4}>
                <Box w={10} h={10} style={{ borderRadius: 2, background: `var(--mantine-color-${p.colour}-filled)` }} />
                <Text size="xs">{p.label} {formatDuration(p.seconds)}</Text>
              </Group>
            ))}
          </Group>
          <Text size="sm" data-testid="goodput-losses">{lossSummary(g)}</Text>
          <Text size="xs" c="dimmed" data-testid="checkpoint-summary">
            {last
              ? `${data.checkpoints.length} checkpoint${data.checkpoints.length === 1 ? "" : "s"} · last at step ${last.step} (${formatBytes(last.size_bytes)}, saved in ${last.save_seconds.toFixed(1)}s, training blocked ${last.blocking_seconds.toFixed(1)}s) ${formatRelative(last.time, now)}`
              : "No checkpoint reported: a failure restarts the job from step 0. Save them with cairn.checkpoint.save()."}
          </Text>
        </Stack>
      </SimpleGrid>
      {(data.slow_groups ?? []).map((group) => (
        <Text key={group.ranks.join(",")} size="sm" mt="xs" data-testid="slow-group">
          <Badge color="yellow" variant="light" mr={6}>Slow group</Badge>
          {slowGroupLabel(group)}: a placement finding, not stragglers (never evicted for it).
        </Text>
      ))}
      {data.slowdown && (
        <Text size="sm" mt="xs" data-testid="job-slowdown">
          <Badge color="yellow" variant="light" mr={6}>Job slowdown</Badge>
          Every rank {data.slowdown.ratio.toFixed(1)}× its usual step time since step {data.slowdown.since}: not a straggler.
        </Text>
      )}
      {data.ranks.length > 0 && <RanksTable data={data} now={now} attempt={attempt} />}
      {data.restarts.length > 0 && <RestartsTable data={data} />}
    </Card>
  );
}

function RanksTable({ data, now, attempt }: { data: Resilience; now: number; attempt: number }) {
  return (
    <Table.ScrollContainer minWidth={560} mah={280} mt="md">
      <Table fz="sm" verticalSpacing={4} stickyHeader data-testid="ranks-table">
        <Table.Thead>
          <Table.Tr>
            <Table.Th w={90}>Rank</Table.Th>
            <Table.Th w={90}>Step</Table.Th>
            <Table.Th w={110}>Step time</Table.Th>
            <Table.Th w={150}>Last step</Table.Th>
            <Table.Th>Against its peers</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {data.ranks.map((r) => (
            <Table.Tr key={r.replica} data-testid="rank-row" data-replica={r.replica} data-straggler={r.straggler ? "true" : "false"}>
              <Table.Td>
                {r.replica}
                {r.attempt !== attempt && (
                  <Text span size="xs" c="dimmed"> (attempt {r.attempt})</Text>
                )}
              </Table.Td>
              <Table.Td ff="monospace">{r.step}</Table.Td>
              <Table.Td ff="monospace">{r.step_seconds === null ? "—" : `${r.step_seconds.toFixed(3)}s`}</Table.Td>
              <Table.Td>{formatRelative(r.step_changed_at, now)}</Table.Td>
              <Table.Td>
                {r.straggler ? (
                  <Tooltip label="Slower than its peers at most of the last 10 steps (docs/training.md, “Stragglers”)">
                    <Badge color="red" variant="filled" data-testid="straggler-badge" data-replica={r.replica}>
                      Straggler{r.ratio_to_peer_median ? ` · ${slowdownLabel(r.ratio_to_peer_median)}` : ""}
                    </Badge>
                  </Tooltip>
                ) : (
                  <Text size="sm" c="dimmed">{slowdownLabel(r.ratio_to_peer_median) || "—"}</Text>
                )}
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}

function RestartsTable({ data }: { data: Resilience }) {
  return (
    <Table.ScrollContainer minWidth={700} mah={240} mt="md">
      <Table fz="sm" verticalSpacing={4} stickyHeader data-testid="restarts-table">
        <Table.Thead>
          <Table.Tr>
            <Table.Th w={170}>Restarted</Table.Th>
            <Table.Th w={80}>Attempt</Table.Th>
            <Table.Th w={130}>Cause</Table.Th>
            <Table.Th w={280}>Lost</Table.Th>
            <Table.Th>Resumed</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {data.restarts.map((r) => (
            <Table.Tr key={r.attempt} data-testid="restart-row" data-cause={r.cause}>
              <Table.Td ff="monospace">{new Date(r.time).toLocaleString()}</Table.Td>
              <Table.Td>{r.attempt}</Table.Td>
              <Table.Td>
                <Tooltip label={r.message} multiline w={360} disabled={!r.message}>
                  <Badge color="orange" variant="light">{r.cause}</Badge>
                </Tooltip>
              </Table.Td>
              <Table.Td>
                {formatDuration(r.lost_seconds)} of work{r.hung_seconds > 0 ? ` (${formatDuration(r.hung_seconds)} hung)` : ""}
                {" + "}{formatDuration(r.overhead_seconds)} restarting
              </Table.Td>
              <Table.Td>{r.resumed_at_step === null ? "—" : `at step ${r.resumed_at_step}`}</Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}
