// Placeholder: being built (see frontend/README in CONTRIBUTING.md).
import { Title } from "@mantine/core";

export function WorkloadDetailPage() {
  return <Title order={2}>Workload</Title>;
}
