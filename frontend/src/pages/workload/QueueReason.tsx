// Why a queued workload waits: the scheduler's pending reason, what it waits on (with a hint),
// its position in the queue and the estimated start. Shown in the Status panel.
import { Alert, Group, Stack, Text } from "@mantine/core";
import { WaitingOnBadge } from "../../components/WaitingOnBadge";
import { formatRelative } from "../../lib/format";
import { WAITING_ON } from "../../lib/status";
import type { Workload } from "./api";

export function QueueReason({ workload: w, now }: { workload: Workload; now: number }) {
  return (
    <Alert mt="sm" color="yellow" variant="light" title="Waiting in the queue" data-testid="pending-reason">
      <Stack gap={4}>
        <Group gap={6} wrap="nowrap" align="flex-start">
          {w.waiting_on && <WaitingOnBadge kind={w.waiting_on} />}
          <Text size="sm">{w.pending_reason || w.status_message || "Waiting for the scheduler."}</Text>
        </Group>
        {w.waiting_on && (
          <Text size="xs" c="dimmed" data-testid="waiting-on-hint">
            {WAITING_ON[w.waiting_on].hint}
          </Text>
        )}
        <Group gap="lg">
          {w.queue_position !== null && w.queue_position !== undefined && (
            <Text size="sm">
              Position in the queue: <b>{w.queue_position}</b>
            </Text>
          )}
          <Text size="sm" data-testid="estimated-start">
            Estimated start:{" "}
            <b>
              {w.estimated_start
                ? `${formatRelative(w.estimated_start, now)} (${new Date(w.estimated_start).toLocaleTimeString()})`
                : "unknown (the scheduler cannot tell yet)"}
            </b>
          </Text>
        </Group>
      </Stack>
    </Alert>
  );
}
