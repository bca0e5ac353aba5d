// Placeholder: being built (see frontend/README in CONTRIBUTING.md).
import { Title } from "@mantine/core";

export function ComparePage() {
  return <Title order={2}>Compare runs</Title>;
}
