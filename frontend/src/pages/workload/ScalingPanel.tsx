// A deployment's replicas and autoscaling: desired (the autoscaler's wish, or the fixed count),
// admitted by the scheduler and ready (passing their readiness check, getting traffic), and the
// autoscaler's settings, from GET .../deployments/<id>/ (its `scale`), read again every 3 s while
// the page is open and at once when the workload's live frame says something changed.
import { Badge, Card, Group, SimpleGrid, Text, Title } from "@mantine/core";
import { useQuery } from "@tanstack/react-query";
import { api, unwrap, type Schemas } from "../../api/client";
import { formatNumber } from "../../lib/format";

export type Deployment = Schemas["Deployment"];
export type DeploymentScale = Schemas["DeploymentScale"];

export function deploymentKey(project: string, id: number) {
  return ["deployment", project, id] as const;
}

export function useDeployment(project: string, id: number, enabled: boolean) {
  return useQuery({
    queryKey: deploymentKey(project, id),
    enabled,
    queryFn: () => unwrap(api.GET("/api/v1/projects/{project}/deployments/{id}/", { params: { path: { project, id } } })),
    refetchInterval: 3000,
  });
}

/** "3 of 3 replicas ready", and what the autoscaler is doing about the difference. */
export function servingLine(scale: DeploymentScale): string {
  const { desired, admitted, ready } = scale;
  const noun = desired === 1 ? "replica" : "replicas";
  if (desired === 0) return "Scaled to zero: the next request starts a replica.";
  if (admitted > desired || ready > desired) return `Serving: ${ready} ready · scaling down to ${desired} ${noun}`;
  let line = `Serving: ${ready} of ${desired} ${noun} ready`;
  if (admitted < desired) line += ` · scaling up from ${admitted}, waiting for the scheduler`;
  else if (ready < desired) line += " · the others are starting";
  return line;
}

function Fact({ label, value, testId }: { label: string; value: string | number; testId?: string }) {
  return (
    <div>
      <Text size="xs" c="dimmed" tt="uppercase" fw={600}>
        {label}
      </Text>
      <Text size="sm" data-testid={testId}>
        {value}
      </Text>
    </div>
  );
}

export function ScalingPanel({ deployment }: { deployment: Deployment | undefined }) {
  if (!deployment) return null;
  const { scale } = deployment;
  const auto = scale.autoscaling;
  return (
    <Card withBorder padding="sm" data-testid="scaling-panel">
      <Group justify="space-between" mb="xs">
        <Title order={2} size="h4">Replicas</Title>
        <Badge variant="light" color={auto ? "blue" : "gray"} data-testid="scaling-mode">
          {auto ? "Autoscaling" : "Fixed count"}
        </Badge>
      </Group>
      <SimpleGrid cols={{ base: 3, sm: auto ? 8 : 3 }} spacing="sm">
        <Fact label="Desired" value={scale.desired} testId="replicas-desired" />
        <Fact label="Admitted" value={scale.admitted} testId="replicas-admitted" />
        <Fact label="Ready" value={scale.ready} testId="replicas-ready" />
        {auto && (
          <>
            <Fact label="Min" value={auto.min_replicas} testId="autoscaling-min" />
            <Fact label="Max" value={auto.max_replicas} testId="autoscaling-max" />
            <Fact label="Target in flight" value={`${formatNumber(auto.target_concurrency, 3)} / replica`} testId="autoscaling-target" />
            <Fact label="Stable window" value={`${formatNumber(auto.stable_window_seconds, 3)} s`} />
            <Fact label="Panic window" value={`${formatNumber(auto.panic_window_seconds, 3)} s`} />
          </>
        )}
      </SimpleGrid>
      {deployment.gateway_url && (
        <Text size="sm" mt="xs">
          Gateway:{" "}
          <Text span ff="monospace" data-testid="gateway-url">
            {deployment.gateway_url}
          </Text>
          {deployment.spec && (deployment.spec as Record<string, unknown>).public === true ? " · public (no credentials)" : ""}
        </Text>
      )}
    </Card>
  );
}
