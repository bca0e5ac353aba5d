// A deployment's revisions (newest first) and its rollout: which revision each replica runs,
// the canary's share of requests, and Promote / Roll back for members (docs/deployments.md).
import { Badge, Button, Card, Group, Table, Text, Title } from "@mantine/core";
import { notifications } from "@mantine/notifications";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { api, unwrap } from "../../api/client";
import { ErrorState, Loading } from "../../components/States";
import { formatRelative } from "../../lib/format";
import type { Workload } from "./api";

interface Revision {
  number: number;
  spec: {
    command?: unknown;
    image?: string;
    env?: Record<string, string>;
    resources?: { gpu_milli?: number; cpu_milli?: number; memory_mb?: number };
  };
  strategy: string;
  created_by: string | null;
  created_at: string;
}

interface Rollout {
  stable_revision: number;
  canary_revision: number | null;
  canary_weight: number;
  replicas: { replica: number; revision: number | null; ready: boolean; surge: boolean }[];
  surge: number;
  surge_wanted: number;
  pending_reason: string;
  complete: boolean;
}

function describe(spec: Revision["spec"]): string {
  const parts: string[] = [];
  if (spec.command) parts.push(Array.isArray(spec.command) ? spec.command.join(" ") : String(spec.command));
  if (spec.image) parts.push(`image ${spec.image}`);
  const env = Object.entries(spec.env ?? {});
  if (env.length) parts.push(env.map(([k, v]) => `${k}=${v}`).join(" "));
  const size = spec.resources;
  if (size) {
    const gpu = size.gpu_milli ? ` ${size.gpu_milli / 1000} GPU` : "";
    parts.push(`${(size.cpu_milli ?? 0) / 1000} CPU ${size.memory_mb ?? 0} MiB${gpu}`);
  }
  return parts.join(" · ");
}

export function RevisionsPanel({ project, workload: w, canWrite }: { project: string; workload: Workload; canWrite: boolean }) {
  const queryClient = useQueryClient();
  const path = { project, id: w.id };
  const revisions = useQuery({
    queryKey: ["deployment-revisions", project, w.id],
    queryFn: async () =>
      (await unwrap(api.GET("/api/v1/projects/{project}/deployments/{id}/revisions/", { params: { path } }))) as unknown as Revision[],
    refetchInterval: 5000,
  });
  const rollout = useQuery({
    queryKey: ["deployment-rollout", project, w.id],
    queryFn: async () =>
      (await unwrap(api.GET("/api/v1/projects/{project}/deployments/{id}/rollout/", { params: { path } }))) as unknown as Rollout,
    refetchInterval: 3000,
  });
  const act = useMutation({
    mutationFn: async (action: "promote" | "rollback") =>
      unwrap(
        action === "promote"
          ? api.POST("/api/v1/projects/{project}/deployments/{id}/rollout/promote/", { params: { path } })
          : api.POST("/api/v1/projects/{project}/deployments/{id}/rollout/rollback/", { params: { path } }),
      ),
    onSuccess: () => {
      void queryClient.invalidateQueries({ queryKey: ["deployment-rollout", project, w.id] });
      void queryClient.invalidateQueries({ queryKey: ["deployment-revisions", project, w.id] });
    },
    onError: (error) => notifications.show({ color: "red", title: "Rollout", message: (error as Error).message }),
  });
  const r = rollout.data;
  const list = revisions.data ?? [];
  return (
    <Card withBorder padding="sm" data-testid="revisions-panel">
      <Group justify="space-between" mb="xs">
        <Group gap="sm">
          <Title order={2} size="h4">Revisions</Title>
          {r && (
            <Badge variant="light" color={r.complete ? "green" : "yellow"} data-testid="rollout-state">
              {r.canary_revision !== null
                ? `canary: revision ${r.canary_revision} gets ${r.canary_weight}%`
                : `revision ${r.stable_revision}${r.complete ? "" : " rolling out"}`}
            </Badge>
          )}
        </Group>
        {canWrite && r && (
          <Group gap="xs">
            {r.canary_revision !== null && (
              <Button size="xs" onClick={() => act.mutate("promote")} loading={act.isPending} data-testid="rollout-promote">
                Promote
              </Button>
            )}
            {(r.canary_revision !== null || list.length > 1) && (
              <Button size="xs" variant="default" onClick={() => act.mutate("rollback")} loading={act.isPending} data-testid="rollout-rollback">
                Roll back
              </Button>
            )}
          </Group>
        )}
      </Group>
      {r?.pending_reason && (
        <Text size="sm" c="yellow.8" mb="xs" data-testid="rollout-pending">
          {r.pending_reason}
        </Text>
      )}
      {revisions.isPending ? (
        <Loading label="Loading revisions…" />
      ) : revisions.error ? (
        <ErrorState error={revisions.error} onRetry={() => revisions.refetch()} />
      ) : list.length === 0 ? (
        <Text size="sm" c="dimmed">
          One revision so far. Changing the command, image, env or resources (API: POST …/deployments/{w.id}/revisions/) makes the next
          one, rolled out replica by replica or as a canary.
        </Text>
      ) : (
        <Table fz="sm" verticalSpacing={4} data-testid="revisions-table">
          <Table.Thead>
            <Table.Tr>
              <Table.Th w={80}>Revision</Table.Th>
              <Table.Th w={90}>Rollout</Table.Th>
              <Table.Th>Command, image, env, size</Table.Th>
              <Table.Th w={160}>Created</Table.Th>
              <Table.Th w={120}>Replicas</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {list.map((rev) => {
              const running = (r?.replicas ?? []).filter((x) => (x.revision ?? r?.stable_revision) === rev.number);
              return (
                <Table.Tr key={rev.number} data-testid="revision-row" data-revision={rev.number}>
                  <Table.Td>
                    {rev.number}
                    {r?.stable_revision === rev.number && <Badge ml={6} size="xs">stable</Badge>}
                    {r?.canary_revision === rev.number && <Badge ml={6} size="xs" color="orange">canary</Badge>}
                  </Table.Td>
                  <Table.Td>{rev.strategy}</Table.Td>
                  <Table.Td>
                    <Text size="sm" ff="monospace" lineClamp={2}>
                      {describe(rev.spec)}
                    </Text>
                  </Table.Td>
                  <Table.Td>
                    {formatRelative(rev.created_at)}
                    {rev.created_by ? ` · ${rev.created_by}` : ""}
                  </Table.Td>
                  <Table.Td>{running.length ? running.map((x) => `#${x.replica}${x.surge ? " (surge)" : ""}${x.ready ? "" : " (starting)"}`).join(", ") : "—"}</Table.Td>
                </Table.Tr>
              );
            })}
          </Table.Tbody>
        </Table>
      )}
    </Card>
  );
}
