// The Status panel: the status history as a bar of segments, why a queued workload waits
// (QueueReason), the checkpoints as ticks on the bar and the workload's conditions (ConditionsTable).
import { Box, Card, Group, Stack, Text, Title, Tooltip } from "@mantine/core";
import { useMemo } from "react";
import { formatDuration } from "../../lib/format";
import { statusColour } from "../../lib/status";
import { checkpointMarks } from "../../lib/resilience";
import { layoutTimeline, type TimelineSegment } from "../../lib/timeline";
import { statusLine } from "../../lib/workloads";
import type { Schemas } from "../../api/client";
import type { Workload } from "./api";

type Checkpoint = Schemas["Checkpoint"];
import { ConditionsTable, conditionsOf } from "./ConditionsTable";
import { QueueReason } from "./QueueReason";

export interface StatusTimelineProps {
  workload: Workload;
  now: number;
  /** The status history (lib/timeline.ts deriveSegments), shared with the header. */
  segments: TimelineSegment[];
  /** Set when the event trail could not be read: the bar then shows the current status only. */
  eventsError: unknown;
  /** Checkpoints the job reported (GET .../resilience/), drawn as ticks on the bar. */
  checkpoints?: readonly Checkpoint[];
}

export function StatusTimeline({ workload: w, now, segments: history, eventsError, checkpoints }: StatusTimelineProps) {
  const segments = useMemo(() => layoutTimeline(history), [history]);
  const marks = useMemo(() => checkpointMarks(segments, checkpoints ?? []), [segments, checkpoints]);
  const conditions = conditionsOf(w);
  const fmtTime = (t: number) => new Date(t).toLocaleString();
  return (
    <Card withBorder padding="sm" data-testid="status-timeline" data-status={w.status}>
      <Group justify="space-between" mb="xs">
        <Title order={2} size="h4">Status</Title>
        {eventsError ? (
          <Text size="xs" c="red">
            Could not read the event trail; the timeline shows the current status only.
          </Text>
        ) : null}
      </Group>
      <Box
        pos="relative"
        h={26}
        style={{ borderRadius: 4, overflow: "hidden", background: "var(--mantine-color-default-border)" }}
        role="list"
        aria-label="Status history"
      >
        {segments.map((s, i) => (
          <Tooltip
            key={`${s.status}-${s.start}-${i}`}
            multiline
            w={280}
            label={
              <Stack gap={2}>
                <Text size="sm" fw={700}>
                  {s.status}
                </Text>
                <Text size="xs">
                  {fmtTime(s.start)}
                  {s.end > s.start ? ` → ${s.open ? "now" : fmtTime(s.end)}` : ""}
                </Text>
                {s.end > s.start && <Text size="xs">{formatDuration((s.end - s.start) / 1000)}</Text>}
                {(s.reason || s.message) && (
                  <Text size="xs">{statusLine(s.reason, s.message)}</Text>
                )}
              </Stack>
            }
          >
            <Box
              role="listitem"
              data-testid="timeline-segment"
              data-status={s.status}
              pos="absolute"
              top={0}
              bottom={0}
              left={`${s.left * 100}%`}
              w={`${s.width * 100}%`}
              style={{
                background: `var(--mantine-color-${statusColour(s.status)}-filled)`,
                borderRight: "2px solid var(--mantine-color-body)",
                display: "flex",
                alignItems: "center",
                paddingLeft: 6,
                overflow: "hidden",
                backgroundImage: s.open
                  ? "repeating-linear-gradient(135deg, rgba(255,255,255,0.18) 0 6px, transparent 6px 12px)"
                  : undefined,
              }}
            >
              {s.width > 0.08 && (
                <Text size="xs" fw={600} c="white" truncate>
                  {s.status}
                  {s.end > s.start ? ` · ${formatDuration((s.end - s.start) / 1000)}` : ""}
                </Text>
              )}
            </Box>
          </Tooltip>
        ))}
        {marks.map((m, i) => (
          <Tooltip key={`checkpoint-${i}`} label={m.label} multiline w={300}>
            <Box
              data-testid="timeline-checkpoint"
              pos="absolute"
              top={3}
              bottom={3}
              left={`calc(${m.left * 100}% - 1px)`}
              w={3}
              style={{ background: "var(--mantine-color-body)", borderRadius: 1, zIndex: 1 }}
              aria-label={m.label}
            />
          </Tooltip>
        ))}
      </Box>
      {w.status === "queued" && <QueueReason workload={w} now={now} />}
      {conditions.length > 0 && <ConditionsTable conditions={conditions} now={now} />}
    </Card>
  );
}
