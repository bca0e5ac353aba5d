// The Events panel: the workload's event trail (submission, scheduling, starts, restarts,
// stops), newest first, so that what explains the workload's state now (a restart, a preemption,
// ServerShutdown) is the first row, never below the fold. The API and `cairn events` list oldest
// first; the panel reverses them. The rows scroll in a native, keyboard-focusable container
// (wheel, arrows, Page Up/Down), 360 px high at most.
import { Badge, Box, Card, Group, Table, Text, Title, Tooltip } from "@mantine/core";
import { useMemo } from "react";
import { ErrorState, Loading } from "../../components/States";
import { formatRelative } from "../../lib/format";
import { eventsNewestFirst } from "../../lib/timeline";
import type { WorkloadEvent } from "./api";

export interface EventsPanelProps {
  events: WorkloadEvent[];
  /** How many events the workload has in all; more than `events.length` when some were not read. */
  total: number;
  loading: boolean;
  error: unknown;
  onRetry: () => void;
}

export function EventsPanel({ events, total, loading, error, onRetry }: EventsPanelProps) {
  const rows = useMemo(() => eventsNewestFirst(events), [events]);
  return (
    <Card withBorder padding="sm">
      <Group justify="space-between" mb="xs">
        <Title order={2} size="h4">Events</Title>
        <Text size="xs" c="dimmed" data-testid="events-order">
          Newest first (`cairn events` lists oldest first)
          {total > events.length ? ` · ${total.toLocaleString()} events; showing the latest 500 and the first` : ""}
        </Text>
      </Group>
      {loading ? (
        <Loading label="Loading events…" />
      ) : error ? (
        <ErrorState error={error} onRetry={onRetry} />
      ) : (
        <Box
          data-testid="events-scroll"
          tabIndex={0}
          role="region"
          aria-label="Events, newest first"
          mah={360}
          style={{ overflow: "auto", overscrollBehavior: "contain" }}
        >
          <Table miw={700} fz="sm" verticalSpacing={4} stickyHeader highlightOnHover data-testid="events-table">
            <Table.Thead>
              <Table.Tr>
                <Table.Th w={170}>Time</Table.Th>
                <Table.Th w={90}>Type</Table.Th>
                <Table.Th w={150}>Reason</Table.Th>
                <Table.Th w={170}>Status</Table.Th>
                <Table.Th>Message</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {rows.length === 0 && (
                <Table.Tr>
                  <Table.Td colSpan={5}>
                    <Text size="sm" c="dimmed">
                      No events yet. Submission, scheduling, starts, restarts and stops are recorded here.
                    </Text>
                  </Table.Td>
                </Table.Tr>
              )}
              {rows.map((e) => (
                <Table.Tr key={e.id} data-testid="event-row" data-reason={e.reason}>
                  <Table.Td>
                    <Tooltip label={formatRelative(e.time)}>
                      <Text size="sm" ff="monospace">
                        {new Date(e.time).toLocaleString()}
                      </Text>
                    </Tooltip>
                  </Table.Td>
                  <Table.Td>
                    <Badge size="xs" variant="light" color={e.type === "Warning" ? "orange" : "gray"}>
                      {e.type}
                    </Badge>
                  </Table.Td>
                  <Table.Td fw={500}>{e.reason}</Table.Td>
                  <Table.Td>
                    {e.to_status ? (
                      <Text size="sm">
                        {e.from_status || "—"} → <b>{e.to_status}</b>
                      </Text>
                    ) : null}
                  </Table.Td>
                  <Table.Td style={{ wordBreak: "break-word" }}>{e.message}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Box>
      )}
    </Card>
  );
}
