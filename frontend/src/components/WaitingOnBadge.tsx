// What a queued workload waits on, as a coloured badge; hovering says what would end the wait.
import { Badge, Tooltip } from "@mantine/core";
import { WAITING_ON, type WaitingOn } from "../lib/status";

export function WaitingOnBadge({ kind }: { kind: WaitingOn }) {
  const { label, colour, hint } = WAITING_ON[kind];
  return (
    <Tooltip label={hint} multiline w={280} withArrow>
      <Badge size="sm" variant="light" color={colour} style={{ flexShrink: 0 }} data-testid="waiting-on">
        {label}
      </Badge>
    </Tooltip>
  );
}
