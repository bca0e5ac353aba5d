// The Logs panel: one replica's log, live over logs:<id>:<replica> (the server sends the tail,
// then new lines), kept to the last LOG_LINES lines, following the bottom until scrolled up.
// The view takes focus (Tab) so that the keyboard scrolls it; scrolling up stops following.
import { Alert, Anchor, Badge, Box, Card, Group, Select, Switch, Text, Title } from "@mantine/core";
import { useLayoutEffect, useMemo, useRef, useState } from "react";
import { appendLog, appendNote, emptyLog, logText, type LogBuffer } from "../../lib/logbuffer";
import { isFinal } from "../../lib/status";
import { workloadPath } from "../../lib/workloadPath";
import { useTopic } from "../../live/LiveProvider";
import type { Workload } from "./api";

const LOG_LINES = 5000;

export interface LogPanelProps {
  workload: Workload;
  project: string;
}

/** The server ends a log's topic once the workload has finished (`logs.end`). A workload that
 * leaves a final status (a notebook started again) gets a fresh view and subscription, which
 * follows its new attempt: no stale "ended" badge, no reload. */
export function LogPanel(props: LogPanelProps) {
  const final = isFinal(props.workload.status);
  const [run, setRun] = useState({ final, generation: 0 });
  if (run.final !== final) setRun({ final, generation: run.generation + (run.final && !final ? 1 : 0) });
  return <LogView key={run.generation} {...props} />;
}

function LogView({ workload: w, project }: LogPanelProps) {
  const [replica, setReplica] = useState(0);
  const [follow, setFollow] = useState(true);
  const [buffer, setBuffer] = useState<LogBuffer>(emptyLog);
  const [ended, setEnded] = useState<string | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const viewRef = useRef<HTMLDivElement>(null);
  const replicas = Math.max(1, w.replicas);

  useTopic(`logs:${w.id}:${replica}`, (frame) => {
    if (frame.type === "subscribed") {
      // The server starts every subscription with the tail: start afresh (also after a re-connect).
      setBuffer(emptyLog());
      setEnded(null);
      setProblem(null);
    } else if (frame.type === "logs" && typeof frame.text === "string") {
      const attempt = typeof frame.attempt === "number" ? frame.attempt : null;
      setBuffer((b) => appendLog(b, frame.text as string, attempt, LOG_LINES));
    } else if (frame.type === "logs.end") {
      const status = String(frame.status ?? "finished");
      setEnded(status);
      setBuffer((b) => appendNote(b, `──────── end of log (${status}) ────────`, LOG_LINES));
    } else if (frame.type === "error") {
      setProblem(String(frame.detail ?? "The log cannot be followed."));
    }
  });

  const text = useMemo(() => logText(buffer), [buffer]);
  useLayoutEffect(() => {
    const el = viewRef.current;
    if (el && follow) el.scrollTop = el.scrollHeight;
  }, [text, follow]);

  const onScroll = () => {
    const el = viewRef.current;
    if (!el) return;
    const atBottom = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
    if (!atBottom && follow) setFollow(false);
  };

  const lineCount = buffer.lines.length + (buffer.partial ? 1 : 0);
  const waiting = w.attempt < 1 && !text;
  return (
    <Card withBorder padding="sm">
      <Group justify="space-between" mb="xs" wrap="wrap">
        <Group gap="sm">
          <Title order={2} size="h4">Logs</Title>
          {ended && (
            <Badge size="sm" variant="light" color="gray">
              ended: {ended}
            </Badge>
          )}
        </Group>
        <Group gap="md" wrap="wrap">
          {replicas > 1 && (
            <Select
              size="xs"
              aria-label="Replica"
              data={Array.from({ length: replicas }, (_, i) => ({ value: String(i), label: `replica ${i}` }))}
              value={String(replica)}
              onChange={(v) => setReplica(Number(v ?? 0))}
              allowDeselect={false}
              w={130}
              data-testid="log-replica"
            />
          )}
          <Switch
            size="sm"
            label="Follow"
            checked={follow}
            onChange={(e) => setFollow(e.currentTarget.checked)}
            data-testid="log-follow"
          />
          <Text size="xs" c="dimmed">
            {lineCount.toLocaleString()} line{lineCount === 1 ? "" : "s"}
            {buffer.dropped ? ` (oldest ${buffer.dropped.toLocaleString()} dropped; last ${LOG_LINES.toLocaleString()} kept)` : ""}
          </Text>
          <Anchor
            size="xs"
            href={`${workloadPath(project, w.id, "logs/")}?replica=${replica}&format=txt`}
            target="_blank"
            rel="noreferrer"
          >
            Full log
          </Anchor>
        </Group>
      </Group>
      {problem && (
        <Alert color="red" variant="light" mb="xs">
          {problem}
        </Alert>
      )}
      <Box
        ref={viewRef}
        onScroll={onScroll}
        className="log-view"
        data-testid="log-view"
        // A scrolling region that keyboard users can reach and scroll (arrows, Page Up/Down);
        // a log role, not announced line by line (aria-live off): it streams up to 10 frames a second.
        tabIndex={0}
        role="log"
        aria-live="off"
        aria-label={`Log of ${w.name}${replicas > 1 ? `, replica ${replica}` : ""}`}
        data-replica={replica}
        data-lines={lineCount}
        p="xs"
        h={text ? 340 : 90}
        style={{
          overflow: "auto",
          borderRadius: 4,
          background: "var(--mantine-color-default-hover)",
          border: "1px solid var(--mantine-color-default-border)",
        }}
      >
        {text ? (
          text
        ) : (
          <Text size="sm" c="dimmed" ff="inherit">
            {waiting
              ? "No output yet: the workload has not started. Its log streams here as soon as it does."
              : ended
                ? "This replica wrote nothing."
                : "Waiting for output…"}
          </Text>
        )}
      </Box>
    </Card>
  );
}
