// A dot that says whether the page's websocket is live.
import { Group, Text, Tooltip } from "@mantine/core";
import { useLiveStatus } from "../live/LiveProvider";

const LABEL = { connecting: "Connecting…", open: "Live", reconnecting: "Reconnecting…", closed: "Not live" } as const;
const COLOUR = { connecting: "gray", open: "teal", reconnecting: "orange", closed: "red" } as const;

export function LiveIndicator() {
  const status = useLiveStatus();
  return (
    <Tooltip label={status === "open" ? "Updates arrive as they happen" : "Updates paused; the page keeps trying"}>
      <Group gap={6} data-testid="live-indicator" data-status={status}>
        <span style={{ width: 8, height: 8, borderRadius: 4, background: `var(--mantine-color-${COLOUR[status]}-6)` }} />
        <Text size="xs" c="dimmed">
          {LABEL[status]}
        </Text>
      </Group>
    </Tooltip>
  );
}
