// Hyper-parameter sweeps of the project (docs/sweeps.md): status, objective, best value, trials.
// Sweeps are created with `cairn sweep create sweep.yaml` or POST /sweeps/.
import { Anchor, Badge, Button, Code, Group, Stack, Table, Text, Title } from "@mantine/core";
import { useQuery, useQueryClient } from "@tanstack/react-query";
import { Link, useParams } from "react-router";
import { api, unwrap } from "../api/client";
import { useDebounced } from "../components/hooks";
import { LiveIndicator } from "../components/LiveIndicator";
import { EmptyState, ErrorState, Loading } from "../components/States";
import { formatNumber, formatRelative } from "../lib/format";
import { useLiveStatus, useTopic } from "../live/LiveProvider";
import { retryTransient } from "../lib/retry";
import { SWEEP_STATUS_COLOUR } from "../lib/sweeps";
import { canWrite, useMe } from "../session";

export function SweepStatusBadge({ status }: { status: string }) {
  return (
    <Badge color={SWEEP_STATUS_COLOUR[status] ?? "gray"} variant="light" data-testid="sweep-status" data-status={status}>
      {status}
    </Badge>
  );
}

export function SweepsPage() {
  const { project = "" } = useParams();
  const queryClient = useQueryClient();
  const me = useMe();
  const writable = canWrite(me.projects.find((p) => p.slug === project)?.role);
  const live = useLiveStatus();
  const sweeps = useQuery({
    queryKey: ["sweeps", project],
    queryFn: () => unwrap(api.GET("/api/v1/projects/{project}/sweeps/", { params: { path: { project }, query: { page_size: 100 } } })),
    // Live: the `sweeps` topic says when a sweep or its trials changed; without the socket
    // (down, reconnecting) nothing does, so the page falls back to re-reading now and then.
    refetchInterval: live === "open" ? false : 10_000,
    retry: retryTransient,
  });
  const refetch = useDebounced(() => void queryClient.invalidateQueries({ queryKey: ["sweeps", project] }), 300);
  useTopic("sweeps", (frame) => {
    if (frame.type.startsWith("sweep.")) refetch();
  });
  if (sweeps.error && !sweeps.data) return <ErrorState error={sweeps.error} onRetry={() => sweeps.refetch()} />;
  if (!sweeps.data) return <Loading label="Loading the sweeps…" />;
  const rows = sweeps.data.results;
  return (
    <Stack gap="md">
      <Stack gap={2}>
        <Group justify="space-between" wrap="wrap">
          <Group gap="sm" align="baseline">
            <Title order={1} size="h2">Sweeps</Title>
            <LiveIndicator />
          </Group>
          {writable && (
            <Button component={Link} to={`/projects/${project}/sweeps/new`} data-testid="new-sweep">New sweep</Button>
          )}
        </Group>
        <Text c="dimmed" size="sm">
          Hyper-parameter searches: each trial is a training job with parameters Optuna picks, judged by a metric it logs.
        </Text>
      </Stack>
      {rows.length === 0 ? (
        <EmptyState title="No sweeps yet">
          Create one from a YAML file with <Code>cairn sweep create sweep.yaml</Code> (see examples/sweep_digits.yaml and
          docs/sweeps.md).
        </EmptyState>
      ) : (
        <Table.ScrollContainer minWidth={800}>
          <Table striped highlightOnHover data-testid="sweeps-table">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Name</Table.Th>
                <Table.Th>Status</Table.Th>
                <Table.Th>Algorithm</Table.Th>
                <Table.Th>Objective</Table.Th>
                <Table.Th>Best</Table.Th>
                <Table.Th>Trials</Table.Th>
                <Table.Th>Created</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {rows.map((s) => (
                <Table.Tr key={s.id} data-testid="sweep-row">
                  <Table.Td>
                    <Anchor component={Link} to={`/projects/${encodeURIComponent(project)}/sweeps/${s.id}`} fw={600}>
                      {s.name}
                    </Anchor>
                  </Table.Td>
                  <Table.Td>
                    <SweepStatusBadge status={s.status} />
                  </Table.Td>
                  <Table.Td>{s.algorithm}</Table.Td>
                  <Table.Td ff="monospace">
                    {s.objective.direction === "maximize" ? "max " : "min "}
                    {s.objective.metric}
                  </Table.Td>
                  <Table.Td>{s.best_trial ? `${formatNumber(s.best_trial.objective)} (#${s.best_trial.number})` : "—"}</Table.Td>
                  <Table.Td>
                    <Group gap={4}>
                      {Object.entries(s.trials).map(([status, n]) => (
                        <Badge key={status} size="sm" variant="outline" color="gray">
                          {status} {n}
                        </Badge>
                      ))}
                    </Group>
                  </Table.Td>
                  <Table.Td>{formatRelative(s.created_at)}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
    </Stack>
  );
}
