// A notebook's idle reclaim: how long it has been idle, when the culler will stop it, its GPU
// utilisation (docs/notebooks.md, "Idle reclaim"). Polled while it runs; the clock ticks between.
import { Card, Group, SimpleGrid, Text, Title } from "@mantine/core";
import { useQuery } from "@tanstack/react-query";
import { idleFacts } from "../../lib/notebooks";
import { getNotebookActivity, type Workload } from "./api";

export function NotebookPanel({ project, workload, now }: { project: string; workload: Workload; now: number }) {
  const running = workload.status === "running";
  const activity = useQuery({
    queryKey: ["notebook-activity", project, workload.id, workload.attempt, running],
    queryFn: () => getNotebookActivity(project, workload.id),
    refetchInterval: running ? 15_000 : false,
  });
  if (!activity.data) return null;
  const facts = idleFacts(activity.data, now);
  return (
    <Card withBorder padding="md" data-testid="notebook-idle">
      <Group justify="space-between">
        <Title order={2} size="h4">Idle reclaim</Title>
        <Text size="xs" c="dimmed">{activity.data.summary}</Text>
      </Group>
      <SimpleGrid cols={{ base: 3 }} spacing="sm" mt="sm">
        <div>
          <Text size="xs" c="dimmed" tt="uppercase" fw={600}>Idle for</Text>
          <Text size="sm" data-testid="notebook-idle-time">{facts.idle}</Text>
        </div>
        <div>
          <Text size="xs" c="dimmed" tt="uppercase" fw={600}>Stopped if still idle</Text>
          <Text size="sm" data-testid="notebook-cull-at">{facts.deadline}</Text>
        </div>
        <div>
          <Text size="xs" c="dimmed" tt="uppercase" fw={600}>GPU utilisation</Text>
          <Text size="sm" data-testid="notebook-gpu">{facts.gpu}</Text>
        </div>
      </SimpleGrid>
    </Card>
  );
}
