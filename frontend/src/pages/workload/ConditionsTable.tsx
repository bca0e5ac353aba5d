// A workload's conditions (Kubernetes-style: type, status, reason, message, since), as a table
// under the status bar. The API sends them as free JSON, so they are read here by shape.
import { Badge, Table } from "@mantine/core";
import { formatRelative } from "../../lib/format";
import type { Workload } from "./api";

export interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}

/** The workload's conditions, or none when the field is not a list. */
export function conditionsOf(w: Workload): Condition[] {
  return (Array.isArray(w.conditions) ? w.conditions : []) as unknown as Condition[];
}

export function ConditionsTable({ conditions, now }: { conditions: Condition[]; now: number }) {
  return (
    <Table mt="sm" fz="xs" verticalSpacing={2} data-testid="conditions">
      <Table.Thead>
        <Table.Tr>
          <Table.Th>Condition</Table.Th>
          <Table.Th>Status</Table.Th>
          <Table.Th>Reason</Table.Th>
          <Table.Th>Message</Table.Th>
          <Table.Th>Since</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {conditions.map((c) => (
          <Table.Tr key={c.type} data-testid="condition-row" data-type={c.type}>
            <Table.Td fw={600}>{c.type}</Table.Td>
            <Table.Td>
              <Badge size="xs" variant="light" color={c.status === "True" ? "green" : c.status === "False" ? "gray" : "yellow"}>
                {c.status}
              </Badge>
            </Table.Td>
            <Table.Td>{c.reason ?? ""}</Table.Td>
            <Table.Td>{c.message ?? ""}</Table.Td>
            <Table.Td>
              {c.lastTransitionTime
                ? formatRelative(c.lastTransitionTime, Math.max(now, Date.parse(c.lastTransitionTime) || now))
                : "—"}
            </Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}
