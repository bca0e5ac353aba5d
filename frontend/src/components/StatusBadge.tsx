import { Badge } from "@mantine/core";
import { statusColour } from "../lib/status";

export function StatusBadge({ status }: { status: string }) {
  return (
    <Badge color={statusColour(status)} variant="light" data-testid="status-badge" data-status={status}>
      {status}
    </Badge>
  );
}
