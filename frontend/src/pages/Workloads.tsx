// Placeholder: being built (see frontend/README in CONTRIBUTING.md).
import { Title } from "@mantine/core";

export function WorkloadsPage() {
  return <Title order={2}>Workloads</Title>;
}
