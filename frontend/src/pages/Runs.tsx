// Placeholder: being built (see frontend/README in CONTRIBUTING.md).
import { Title } from "@mantine/core";

export function RunsPage() {
  return <Title order={2}>Runs</Title>;
}
