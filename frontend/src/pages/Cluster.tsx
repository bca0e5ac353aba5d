// Placeholder: being built (see frontend/README in CONTRIBUTING.md).
import { Title } from "@mantine/core";

export function ClusterPage() {
  return <Title order={2}>Cluster</Title>;
}
