// A dot that says whether the page's websocket is live.
import { Group, Text, Tooltip } from "@mantine/core";
import { useLiveCloseReason, useLiveStatus } from "../live/LiveProvider";

const LABEL = { connecting: "Connecting…", open: "Live", reconnecting: "Reconnecting…", closed: "Not live" } as const;
const COLOUR = { connecting: "gray", open: "teal", reconnecting: "orange", closed: "red" } as const;

export function LiveIndicator() {
  const status = useLiveStatus();
  const reason = useLiveCloseReason();
  const label =
    status === "open"
      ? "Updates arrive as they happen"
      : status === "closed"
        ? `Updates stopped${reason ? `: ${reason}` : "."} Reload the page to try again.`
        : "Updates paused; the page keeps trying";
  return (
    <Tooltip label={label}>
      <Group gap={6} data-testid="live-indicator" data-status={status}>
        <span style={{ width: 8, height: 8, borderRadius: 4, background: `var(--mantine-color-${COLOUR[status]}-6)` }} />
        <Text size="xs" c="dimmed">
          {LABEL[status]}
        </Text>
      </Group>
    </Tooltip>
  );
}
